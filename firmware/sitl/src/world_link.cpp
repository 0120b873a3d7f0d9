// world_link.cpp - the car's end of the world link (see sitl.h): a reader
// thread for the world's messages, non-blocking sends, the sensor inputs and
// the link state. The process exits at once when the world's end closes (the
// world stopped or died), so no car outlives its world.
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "sitl.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the world link is little-endian");

namespace sitl {
namespace {

constexpr size_t MAX_MESSAGE = 256 * 1024;  // a JPEG frame with room to spare

std::mutex s_sensor_lock;
Sensors s_sensors;                        // guarded by s_sensor_lock
std::atomic<uint64_t> s_link_down_until{0};  // car uptime, us

void on_message(const uint8_t *msg, size_t len)
{
    const uint8_t type = msg[0];
    const uint8_t *p = msg + 1;
    const size_t n = len - 1;
    if (type == 'S' && n >= 5) {
        Sensors s;
        s.has_gyro = p[0] != 0;
        memcpy(&s.gyro_z, p + 1, 4);
        s.sim.assign(reinterpret_cast<const char *>(p + 5), n - 5);
        std::lock_guard<std::mutex> hold(s_sensor_lock);
        s_sensors = s;
    } else if (type == 'F' && n >= 12) {
        uint32_t id;
        uint64_t capture_us;
        memcpy(&id, p, 4);
        memcpy(&capture_us, p + 4, 8);
        camera_deliver(id, true, capture_us, p + 12, n - 12);
    } else if (type == 'f' && n >= 4) {
        uint32_t id;
        memcpy(&id, p, 4);
        camera_deliver(id, false, 0, nullptr, 0);
    } else if (type == 'L' && n >= 8) {
        uint64_t until;
        memcpy(&until, p, 8);
        s_link_down_until.store(until);
    } else {
        fprintf(stderr, "sitl: unknown world message '%c' (%zu bytes)\n", (char)type, len);
    }
}

void *reader(void *)
{
    static uint8_t buf[MAX_MESSAGE];
    for (;;) {
        const ssize_t n = recv(options().world_fd, buf, sizeof buf, 0);
        if (n > 0) {
            on_message(buf, (size_t)n);
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
            _exit(0);  // the world closed its end: stop, whatever runs
        }
    }
    return nullptr;
}

}  // namespace

void world_link_start()
{
    if (options().world_fd < 0) {
        return;  // stand-alone: Serial to stderr, no frames, motors unseen
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // and if the world dies without closing
    if (getppid() == 1) {
        _exit(0);
    }
    int size = (int)MAX_MESSAGE;
    setsockopt(options().world_fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    pthread_t thread;
    if (pthread_create(&thread, nullptr, reader, nullptr) != 0) {
        fatal("cannot start the world link reader");
    }
    pthread_detach(thread);
}

bool world_send(char type, const void *payload, size_t len)
{
    if (options().world_fd < 0 || len + 1 > MAX_MESSAGE) {
        return false;
    }
    iovec parts[2] = {{&type, 1}, {const_cast<void *>(payload), len}};
    msghdr msg = {};
    msg.msg_iov = parts;
    msg.msg_iovlen = 2;
    return sendmsg(options().world_fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)(len + 1);
}

bool world_sendf(char type, const char *format, ...)
{
    char text[2048];
    va_list args;
    va_start(args, format);
    const int n = vsnprintf(text, sizeof text, format, args);
    va_end(args);
    if (n < 0 || (size_t)n >= sizeof text) {
        fprintf(stderr, "sitl: message '%c' too long, not sent\n", type);
        return false;
    }
    return world_send(type, text, (size_t)n);
}

bool link_up()
{
    return uptime_us() >= s_link_down_until.load();
}

void serial_line(const std::string &line)
{
    if (!world_send('P', line.data(), line.size())) {
        fprintf(stderr, "car %d serial: %s\n", options().robot_id, line.c_str());
    }
}

Sensors sensors()
{
    std::lock_guard<std::mutex> hold(s_sensor_lock);
    return s_sensors;
}

void fatal(const char *why)
{
    fprintf(stderr, "sitl car %d: fatal: %s\n", options().robot_id, why);
    // The last word must reach the world even when it is behind on reading (a busy
    // machine fills the link with traces): wait up to 1 s for room, not forever.
    for (int tries = 0; !world_send('X', why, strlen(why)) && errno == EAGAIN && tries < 20;
         tries++) {
        pollfd out = {options().world_fd, POLLOUT, 0};
        poll(&out, 1, 50);
    }
    _exit(EXIT_PANIC);
}

}  // namespace sitl
