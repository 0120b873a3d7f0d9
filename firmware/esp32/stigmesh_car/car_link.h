// car_link.h - the MZ01 car link around the portable core (firmware/core):
// the one car state behind a spinlock, UDP 4210 (commands in, telemetry
// out), UDP 4211 (clock probe), and the tick the safety task calls.
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "mz01_core.h"

// The car's uptime in microseconds (esp_timer, since boot): the core's now_us.
uint64_t car_uptime_us();

// Initialises the car state. Call once in setup(), before any task starts.
bool car_link_init(uint8_t robot_id, uint32_t boot_nonce, uint32_t token,
                   bool motor_ok, bool camera_ok);

// Opens UDP 4210 and 4211 and starts their tasks on core 0.
bool car_link_start();

// Called by the safety task every tick: updates health, runs the watchdog,
// the health rule and the telemetry schedule (handing due telemetry to the
// command task without waiting), and returns the wheel duties to apply now.
void car_link_tick(bool motor_ok, bool camera_ok, float *left, float *right);

// The boot nonce (for the camera headers and mDNS).
uint32_t car_link_boot_nonce();
