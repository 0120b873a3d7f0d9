// car_link.cpp - see car_link.h.
//
// Concurrency: the command task (core 0) and the safety task (core 1) both
// call into the core; every such call holds `s_car_lock`, a spinlock held
// only for the microseconds of one core call. The time is read inside the
// lock so that the core never sees time run backwards between two callers
// (the watchdog treats a backwards clock as elapsed time and disarms).
// Sockets, formatting and sends happen outside the lock. Telemetry the tick
// makes due (a disarm's, the periodic one) is merged into `s_pending` under the
// same lock, never overwritten, and the command task sends it within its
// receive timeout (10 ms).
#include "car_link.h"

#include <Arduino.h>
#include <WiFi.h>
#include <esp_timer.h>
#include <freertos/FreeRTOS.h>
#include <freertos/task.h>
#include <lwip/sockets.h>
#include <string.h>

#include "car_board.h"
#include "car_config.h"

namespace {

portMUX_TYPE s_car_lock = portMUX_INITIALIZER_UNLOCKED;
mz01_car s_car;  // guarded by s_car_lock
uint32_t s_boot_nonce = 0;

int s_cmd_sock = -1;
int s_probe_sock = -1;
// Due telemetry destinations not sent yet, guarded by s_car_lock. Between two
// passes of the command task (10 ms) at most a disarm's two destinations and
// a new bound controller's can add up; 4 leaves room.
constexpr uint8_t PENDING_MAX = 4;
mz01_endpoint s_pending[PENDING_MAX];
uint8_t s_pending_count = 0;

void merge_pending(const mz01_destinations &due)  // caller holds s_car_lock
{
    for (uint8_t i = 0; i < due.count; i++) {
        bool seen = false;
        for (uint8_t k = 0; k < s_pending_count; k++) {
            seen = seen || (s_pending[k].ip == due.to[i].ip && s_pending[k].port == due.to[i].port);
        }
        if (!seen && s_pending_count < PENDING_MAX) {
            s_pending[s_pending_count++] = due.to[i];
        }
    }
}

// Longer than any valid datagram, so a truncated long datagram still reads
// as the wrong length and is rejected (bad_length / no probe reply).
constexpr size_t RX_BUF = 64;
constexpr int RX_TIMEOUT_MS = 10;  // the command task's telemetry latency bound

int open_udp(uint16_t port, int timeout_ms)
{
    int s = socket(AF_INET, SOCK_DGRAM, IPPROTO_UDP);
    if (s < 0) {
        return -1;
    }
    sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(s, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0) {
        close(s);
        return -1;
    }
    if (timeout_ms > 0) {
        timeval tv;
        tv.tv_sec = 0;
        tv.tv_usec = timeout_ms * 1000;
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    return s;
}

void send_to(int sock, const mz01_endpoint &to, const void *data, size_t len)
{
    sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons(to.port);
    addr.sin_addr.s_addr = htonl(to.ip);
    sendto(sock, data, len, 0, reinterpret_cast<sockaddr *>(&addr), sizeof addr);
}

// The board's extra members (car_board.h) go before the closing brace of the
// core's object json[0..len): written right after it, then that '}' becomes
// ',' and a '}' ends them. Returns the new length; without extras, or
// without room, the object is left as it was.
int append_extra(char *json, int len, size_t cap)
{
    if (len < 2 || (size_t)len + 2 > cap) {
        return len;
    }
    const int extra = car_telemetry_extra(json + len, cap - (size_t)len - 1);
    if (extra <= 0 || (size_t)len + (size_t)extra + 2 > cap) {
        json[len] = '\0';
        return len;
    }
    json[len - 1] = ',';
    json[len + extra] = '}';
    json[len + extra + 1] = '\0';
    return len + extra + 1;
}

// Telemetry from UDP 4210 to each destination, from a snapshot of the state.
void send_telemetry(const mz01_endpoint *to, uint8_t count)
{
    static char json[MZ01_TELEMETRY_DATAGRAM_MAX];  // command task only
    mz01_car snapshot;
    uint64_t now;
    taskENTER_CRITICAL(&s_car_lock);
    now = car_uptime_us();
    snapshot = s_car;
    taskEXIT_CRITICAL(&s_car_lock);

    mz01_board_info board;
    board.rssi_dbm = WiFi.isConnected() ? (int8_t)WiFi.RSSI() : 0;
    board.gyro_z = 0.0f;
    board.has_gyro_z = car_gyro_z(&board.gyro_z);
    board.gyro_angle = 0.0f;  // at the telemetry's own time; null whenever gyro_z is
    board.has_gyro_angle = board.has_gyro_z && car_gyro_angle(now, &board.gyro_angle);
    int len = mz01_telemetry_format(&snapshot, now, &board, json, MZ01_TELEMETRY_BUF_LEN);
    if (len <= 0) {
        return;  // cannot happen with MZ01_TELEMETRY_BUF_LEN; never send a partial object
    }
    len = append_extra(json, len, sizeof json);
    for (uint8_t i = 0; i < count; i++) {
        send_to(s_cmd_sock, to[i], json, (size_t)len);
    }
}

void command_task(void *)
{
    uint8_t buf[RX_BUF];
    for (;;) {
        sockaddr_in from;
        socklen_t from_len = sizeof from;
        const int n = recvfrom(s_cmd_sock, buf, sizeof buf, 0,
                               reinterpret_cast<sockaddr *>(&from), &from_len);
        if (n >= 0 && from.sin_family == AF_INET) {
            const uint32_t ip = ntohl(from.sin_addr.s_addr);
            const uint16_t port = ntohs(from.sin_port);
            mz01_rx_result res;
            taskENTER_CRITICAL(&s_car_lock);
            res = mz01_car_receive(&s_car, buf, (size_t)n, ip, port, car_uptime_us());
            taskEXIT_CRITICAL(&s_car_lock);
            if (res.telemetry.count > 0) {
                send_telemetry(res.telemetry.to, res.telemetry.count);  // HELLO, STOP, ESTOP
            }
        }
        mz01_endpoint due[PENDING_MAX];
        uint8_t due_count;
        taskENTER_CRITICAL(&s_car_lock);
        due_count = s_pending_count;
        memcpy(due, s_pending, sizeof due);
        s_pending_count = 0;
        taskEXIT_CRITICAL(&s_car_lock);
        if (due_count > 0) {
            send_telemetry(due, due_count);
        }
    }
}

void probe_task(void *)
{
    uint8_t req[RX_BUF];
    uint8_t reply[MZ01_PROBE_REPLY_LEN];
    for (;;) {
        sockaddr_in from;
        socklen_t from_len = sizeof from;
        const int n = recvfrom(s_probe_sock, req, sizeof req, 0,
                               reinterpret_cast<sockaddr *>(&from), &from_len);
        if (n < 0 || from.sin_family != AF_INET) {
            continue;
        }
        const size_t len = mz01_probe_reply(req, (size_t)n, car_uptime_us(), reply);
        if (len > 0) {
            const mz01_endpoint to = {ntohl(from.sin_addr.s_addr), ntohs(from.sin_port)};
            send_to(s_probe_sock, to, reply, len);
        }
    }
}

}  // namespace

uint64_t car_uptime_us()
{
    return (uint64_t)esp_timer_get_time();
}

bool car_link_init(uint8_t robot_id, uint32_t boot_nonce, uint32_t token,
                   bool motor_ok, bool camera_ok)
{
    s_boot_nonce = boot_nonce;
    return mz01_car_init(&s_car, robot_id, boot_nonce, token, motor_ok, camera_ok);
}

bool car_link_start()
{
    s_cmd_sock = open_udp(CAR_PORT_COMMAND, RX_TIMEOUT_MS);
    s_probe_sock = open_udp(CAR_PORT_PROBE, 0);
    if (s_cmd_sock < 0 || s_probe_sock < 0) {
        return false;
    }
    BaseType_t ok = xTaskCreatePinnedToCore(command_task, "mz01_cmd", NET_TASK_STACK, nullptr,
                                            COMMAND_TASK_PRIO, nullptr, NET_TASK_CORE);
    ok = ok == pdPASS ? xTaskCreatePinnedToCore(probe_task, "mz01_probe", NET_TASK_STACK,
                                                nullptr, PROBE_TASK_PRIO, nullptr, NET_TASK_CORE)
                      : ok;
    return ok == pdPASS;
}

void car_link_tick(bool motor_ok, bool camera_ok, float *left, float *right)
{
    taskENTER_CRITICAL(&s_car_lock);
    mz01_car_set_health(&s_car, motor_ok, camera_ok);
    const mz01_destinations due = mz01_car_tick(&s_car, car_uptime_us());
    merge_pending(due);  // never blocks the safety task
    *left = s_car.left;
    *right = s_car.right;
    taskEXIT_CRITICAL(&s_car_lock);
}

uint32_t car_link_boot_nonce()
{
    return s_boot_nonce;
}
