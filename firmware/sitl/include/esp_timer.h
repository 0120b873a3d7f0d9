// esp_timer.h - SITL stand-in: the car's uptime in microseconds since boot,
// from CLOCK_MONOTONIC with the boot time and crystal error the world gives.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
int64_t esp_timer_get_time(void);
#ifdef __cplusplus
}
#endif
