// pca9685_motors.h - the four DC motors of the FNK0053 through its PCA9685,
// register access written here over Wire (no PCA9685 library).
// Only the safety task calls these after setup.
#pragma once

#include <stdbool.h>

// Configures the chip (50 Hz, totem-pole outputs, auto-increment), switches
// every motor input off and holds the pan/tilt servos at 90 degrees.
// Returns false when the chip does not acknowledge.
bool motors_begin();

// Applies wheel duties in [-1, 1] (left side M1+M2, right side M3+M4) as
// 12-bit PWM in one I2C burst. Returns false on an I2C error.
bool motors_apply(float left, float right);
