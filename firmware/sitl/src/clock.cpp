// clock.cpp - the car's clocks: esp_timer (uptime since boot, with the
// crystal error the world drew) on the host's CLOCK_MONOTONIC, the same clock
// as the world's time.monotonic(), so both compute the same uptime.
#include <errno.h>
#include <time.h>

#include "esp_timer.h"
#include "sitl.h"

namespace sitl {

double mono_now()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)((int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec) / 1e9;
}

// The world's VirtualCar.uptime_us, term for term.
uint64_t uptime_us()
{
    const double us = (mono_now() - options().boot_time) * (1.0 + options().drift) * 1e6;
    return us > 0.0 ? (uint64_t)us : 0;
}

double mono_at_uptime(uint64_t us)
{
    return options().boot_time + (double)us / 1e6 / (1.0 + options().drift);
}

void sleep_until_mono(double mono)
{
    timespec ts;
    const int64_t ns = (int64_t)(mono * 1e9);
    ts.tv_sec = (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
}

}  // namespace sitl

extern "C" int64_t esp_timer_get_time(void)
{
    return (int64_t)sitl::uptime_us();
}
