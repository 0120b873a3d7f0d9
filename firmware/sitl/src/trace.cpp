// trace.cpp - what the world learns of the car's core: the SITL build links
// with `ld --wrap` on the core's state calls, so each call the sketch makes
// runs through these wrappers, which call the real function unchanged and
// report its outcome to the world ('T'). Observation only: the arguments,
// the results and the car state are passed through as they are. They run
// under the sketch's car lock, and only queue a datagram on the world link.
#include <stdio.h>

#include "mz01_core.h"
#include "sitl.h"

extern "C" {
bool __real_mz01_car_init(mz01_car *car, uint8_t robot_id, uint32_t boot_nonce, uint32_t token,
                          bool motor_ok, bool camera_ok);
void __real_mz01_car_set_health(mz01_car *car, bool motor_ok, bool camera_ok);
mz01_rx_result __real_mz01_car_receive(mz01_car *car, const uint8_t *buf, size_t len,
                                       uint32_t src_ip, uint16_t src_port, uint64_t now_us);
mz01_destinations __real_mz01_car_tick(mz01_car *car, uint64_t now_us);
size_t __real_mz01_probe_reply(const uint8_t *req, size_t len, uint64_t now_us,
                               uint8_t reply[MZ01_PROBE_REPLY_LEN]);
}

namespace {

const char *tf(bool b)
{
    return b ? "true" : "false";
}

const char *reason(mz01_reason r)
{
    const char *name = mz01_reason_name(r);
    return name != nullptr ? name : "?";
}

// "a.b.c.d:port", or "" for none.
void endpoint(bool has, const mz01_endpoint &e, char out[24])
{
    if (!has) {
        out[0] = '\0';
        return;
    }
    snprintf(out, 24, "%u.%u.%u.%u:%u", (unsigned)(e.ip >> 24), (unsigned)(e.ip >> 16) & 0xFF,
             (unsigned)(e.ip >> 8) & 0xFF, (unsigned)e.ip & 0xFF, (unsigned)e.port);
}

}  // namespace

extern "C" bool __wrap_mz01_car_init(mz01_car *car, uint8_t robot_id, uint32_t boot_nonce,
                                     uint32_t token, bool motor_ok, bool camera_ok)
{
    const bool ok = __real_mz01_car_init(car, robot_id, boot_nonce, token, motor_ok, camera_ok);
    sitl::world_sendf('T',
                      "{\"ev\":\"init\",\"us\":%llu,\"ok\":%s,\"id\":%u,\"boot\":%u,\"token\":%u,"
                      "\"motor_ok\":%s,\"camera_ok\":%s}",
                      (unsigned long long)sitl::uptime_us(), tf(ok), (unsigned)robot_id,
                      (unsigned)boot_nonce, (unsigned)token, tf(motor_ok), tf(camera_ok));
    return ok;
}

extern "C" void __wrap_mz01_car_set_health(mz01_car *car, bool motor_ok, bool camera_ok)
{
    const bool changed = car->motor_ok != motor_ok || car->camera_ok != camera_ok;
    __real_mz01_car_set_health(car, motor_ok, camera_ok);
    if (changed) {
        sitl::world_sendf('T', "{\"ev\":\"health\",\"us\":%llu,\"motor_ok\":%s,\"camera_ok\":%s}",
                          (unsigned long long)sitl::uptime_us(), tf(motor_ok), tf(camera_ok));
    }
}

extern "C" mz01_rx_result __wrap_mz01_car_receive(mz01_car *car, const uint8_t *buf, size_t len,
                                                  uint32_t src_ip, uint16_t src_port,
                                                  uint64_t now_us)
{
    const mz01_car before = *car;
    const mz01_rx_result res = __real_mz01_car_receive(car, buf, len, src_ip, src_port, now_us);
    char hex[2 * 64 + 1];
    const size_t shown = len < 64 ? len : 64;
    for (size_t i = 0; i < shown; i++) {
        snprintf(hex + 2 * i, 3, "%02x", buf[i]);
    }
    hex[2 * shown] = '\0';
    char src[24], tel[24], was_tel[24];
    const mz01_endpoint from = {src_ip, src_port};
    endpoint(true, from, src);
    endpoint(car->has_telemetry_to, car->telemetry_to, tel);
    endpoint(before.has_telemetry_to, before.telemetry_to, was_tel);
    sitl::world_sendf('T',
                      "{\"ev\":\"rx\",\"us\":%llu,\"src\":\"%s\",\"len\":%zu,\"hex\":\"%s\","
                      "\"ok\":%s,\"reason\":\"%s\",\"armed\":%s,\"estop\":%s,\"token\":%u,"
                      "\"tel\":\"%s\",\"was_armed\":%s,\"was_estop\":%s,\"was_tel\":\"%s\"}",
                      (unsigned long long)now_us, src, len, hex, tf(res.accepted),
                      reason(res.reason), tf(car->armed), tf(car->estop), (unsigned)car->token,
                      tel, tf(before.armed), tf(before.estop), was_tel);
    return res;
}

extern "C" mz01_destinations __wrap_mz01_car_tick(mz01_car *car, uint64_t now_us)
{
    const bool was_armed = car->armed;
    const mz01_destinations due = __real_mz01_car_tick(car, now_us);
    if (was_armed && !car->armed) {
        sitl::world_sendf('T', "{\"ev\":\"disarm\",\"us\":%llu,\"reason\":\"%s\",\"token\":%u}",
                          (unsigned long long)now_us, reason(car->reason), (unsigned)car->token);
    }
    return due;
}

extern "C" size_t __wrap_mz01_probe_reply(const uint8_t *req, size_t len, uint64_t now_us,
                                          uint8_t reply[MZ01_PROBE_REPLY_LEN])
{
    const size_t n = __real_mz01_probe_reply(req, len, now_us, reply);
    sitl::world_sendf('T', "{\"ev\":\"probe\",\"us\":%llu,\"ok\":%s}", (unsigned long long)now_us,
                      tf(n > 0));
    return n;
}
