// car_board.h - what the board adds to the portable core: the robot id and
// the telemetry inputs beyond the car state. car_board.cpp is the FNK0053's
// (the id from car_config.h, the gyro of an added MPU-6050 if there is one,
// nothing extra); the SITL build (firmware/sitl) links its own, fed by the
// simulated world (its gyro through the same MPU-6050 driver, imu_gyro.cpp).
#pragma once

#include <stddef.h>
#include <stdint.h>

// The robot id, 1..255.
uint8_t car_robot_id();

// The yaw rate in rad/s, when the board has a gyro: true and *rad_s set.
bool car_gyro_z(float *rad_s);

// The gyro's integrated yaw angle (rad, wrapped to (-pi, pi]) at uptime now_us,
// the telemetry's own time: true and *rad set when the board has a gyro with a
// fresh reading (as car_gyro_z).
bool car_gyro_angle(uint64_t now_us, float *rad);

// Extra members of the telemetry object (MZ01.md: `sim`, simulator only),
// written into buf as `"key":value,...` without braces or a leading comma.
// Returns their length, 0 for none, or -1 when they do not fit in cap bytes
// (NUL included): the telemetry is then sent without them.
int car_telemetry_extra(char *buf, size_t cap);
