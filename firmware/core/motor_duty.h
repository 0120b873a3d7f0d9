/*
 * motor_duty.h - a wheel duty in [-1, 1] to a 12-bit PWM count, with the
 * minimum start count of the kit's motors. Portable C, no hardware access;
 * the sketch's PCA9685 driver uses it and firmware/test tests it.
 */
#ifndef MOTOR_DUTY_H
#define MOTOR_DUTY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MOTOR_PWM_MAX_COUNT 4095u

/* The count for |duty|: round(|duty| * 4095); a result of 0 stays 0 (the
 * motor is off), any other result below `min_count` is lifted to `min_count`
 * (the motor needs that much to start, as Freenove's Motor_Move does with
 * 1600), and 4095 is the top. Anything that is not a wheel duty (NaN, Inf,
 * |duty| > 1) gives 0. Decided on the bit pattern where it matters, like the
 * MZ01 core. */
uint16_t motor_duty_to_count(float duty, uint16_t min_count);

#ifdef __cplusplus
}
#endif

#endif /* MOTOR_DUTY_H */
