// pca9685_motors.h - the four DC motors of the FNK0053 through its PCA9685,
// register access written here over Wire (no PCA9685 library).
// Only the safety task calls motors_apply() after setup.
#pragma once

#include <stdbool.h>

// The first thing setup() does: every PWM output off. A panic, brown-out,
// watchdog or reset restarts the ESP32 but not the PCA9685, which keeps its
// last duties until told otherwise. Drives OE high first where the board
// wires it (PIN_PCA9685_OE), then starts I2C and writes ALL_LED_OFF_H's
// full-off bit: one 2-byte write, 0.3 ms at 100 kHz. Returns false when the
// chip does not acknowledge.
bool motors_all_off();

// Configures the chip (50 Hz, totem-pole outputs, auto-increment), keeps every
// motor input off, holds the pan/tilt servos at 90 degrees and, where the
// board wires OE, enables the outputs. Returns false when the chip does not
// acknowledge (OE then stays high: outputs off).
bool motors_begin();

// Applies wheel duties in [-1, 1] (left side M1+M2, right side M3+M4) as
// 12-bit PWM in one I2C burst (3.1 ms at 100 kHz). A nonzero duty gets at
// least MOTOR_MIN_START_COUNT counts (the kit's start duty, 0.39). Returns
// false on an I2C error.
bool motors_apply(float left, float right);
