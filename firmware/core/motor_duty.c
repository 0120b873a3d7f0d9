/*
 * motor_duty.c - see motor_duty.h.
 */
#include "motor_duty.h"

#include <string.h>

uint16_t motor_duty_to_count(float duty, uint16_t min_count)
{
    uint32_t bits;
    memcpy(&bits, &duty, sizeof bits);
    bits &= 0x7FFFFFFFu; /* |duty| */
    if (bits > 0x3F800000u) {
        return 0u; /* above 1.0, Inf or NaN: not a duty, so off */
    }
    /* |duty| = mant * 2^-shift exactly; count = floor(|duty| * 4095 + 1/2)
     * in integers, so no rounding mode or compiler flag can move a step. */
    const uint32_t exp_field = bits >> 23;
    const uint64_t mant = exp_field == 0u ? (bits & 0x7FFFFFu) : ((bits & 0x7FFFFFu) | 0x800000u);
    const uint32_t shift = exp_field == 0u ? 149u : 150u - exp_field; /* >= 23 */
    const uint64_t product = mant * MOTOR_PWM_MAX_COUNT; /* < 2^36 */
    const uint64_t count = shift >= 40u ? 0u : (product + (1ull << (shift - 1u))) >> shift;
    if (count == 0u) {
        return 0u;
    }
    if (min_count > MOTOR_PWM_MAX_COUNT) {
        min_count = MOTOR_PWM_MAX_COUNT;
    }
    return count < min_count ? min_count : (uint16_t)count;
}
