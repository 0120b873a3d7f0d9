// imu_gyro.h - the yaw rate from an MPU-6050 (a GY-521 breakout, about $2)
// added on the FNK0053's I2C bus: the kit itself has no gyro, and without one
// a robot's heading rests on its wheels, which skid (firmware/README.md, "A
// gyro"). Register access over Wire, no library.
//
// Threads: only the safety task touches the bus after setup (it already owns
// it for the PCA9685), so imu_poll() runs there, on a tick that wrote no motor
// registers: one short transaction, never a wait on another task, and adds
// each reading to the integrated yaw angle. The command task reads the newest
// sample with imu_gyro_z() and the angle with imu_gyro_angle(), under a spinlock.
#pragma once

#include <stdbool.h>
#include <stdint.h>

// In setup(), after the PCA9685 (which starts Wire) with the wheels off: looks
// for the chip (WHO_AM_I), wakes it, sets its range and filter and measures its
// zero-rate output (IMU_ZERO_SAMPLES readings, about 0.3 s), which every later
// reading has taken off. Returns whether one answered; without one every later
// call is a no-op and there is no gyro.
bool imu_begin();

// The zero-rate output imu_begin() measured, deg/s (0: none, or the car moved).
float imu_zero_dps();

// Safety task: read the yaw rate once and integrate it: the trapezoid between
// this reading and the previous good one, over their own timestamps. A failed
// or saturated read is skipped, so the next trapezoid bridges the gap (the
// angle then carries the error of that straight line). After IMU_MAX_FAILURES
// failed reads the chip is given up (no more bus time spent on it until a
// reset): a failing read can cost the tick the I2C timeout, so this bounds
// what a loose wire costs.
void imu_poll(uint64_t now_us);

// Command task: the newest yaw rate in rad/s (counter-clockwise seen from
// above positive) when one was read within IMU_MAX_AGE_US of now_us (a
// saturated reading is none).
bool imu_gyro_z(uint64_t now_us, float *rad_s);

// Command task: the yaw rate integrated since the first reading, in rad,
// counter-clockwise positive, extrapolated to now_us with the newest rate and
// wrapped to (-pi, pi] (in binary32: (-(float)pi, (float)pi]); false when
// imu_gyro_z(now_us) would be (no fresh reading). Only differences of two
// angles of one boot mean anything.
bool imu_gyro_angle(uint64_t now_us, float *rad);
