/*
 * test_motor - motor_duty_to_count against a double-precision reference:
 * the rounding, the minimum start count, the ends and what is not a duty.
 */
#include "motor_duty.h"

#include "bits.h"
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* round(|d| * 4095) half up in double, 0 stays 0, the rest lifted to min. */
static uint16_t reference(float duty, uint16_t min_count)
{
    const double m = fabs((double)duty);
    if (!(m <= 1.0)) {
        return 0;
    }
    const long c = (long)floor(m * 4095.0 + 0.5);
    if (c == 0) {
        return 0;
    }
    return (uint16_t)(c < (long)min_count ? min_count : c);
}

static uint64_t state = 0x2545F4914F6CDD1Dull;

static uint32_t rnd(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (uint32_t)(state >> 32);
}

int main(void)
{
    const uint16_t kit = 1600;
    /* every count of the 12-bit range, from duty k / 4095, both signs */
    for (uint32_t k = 0; k <= 4095u; k++) {
        const float d = (float)k / 4095.0f;
        const uint16_t want = k == 0 ? 0 : (uint16_t)(k < kit ? kit : k);
        CHECK(motor_duty_to_count(d, kit) == want);
        CHECK(motor_duty_to_count(-d, kit) == want);
        CHECK(motor_duty_to_count(d, 0) == k);
    }
    /* the ends and the smallest duties */
    CHECK(motor_duty_to_count(0.0f, kit) == 0 && motor_duty_to_count(-0.0f, kit) == 0);
    CHECK(motor_duty_to_count(bits_f32(1u), kit) == 0);          /* subnormal: off */
    CHECK(motor_duty_to_count(0.5f / 4095.0f, kit) == kit);        /* rounds to 1: lifted */
    CHECK(motor_duty_to_count(0.49f / 4095.0f, kit) == 0);         /* rounds to 0: off */
    CHECK(motor_duty_to_count(0.2f, kit) == kit);                  /* the simulator's old deadband */
    CHECK(motor_duty_to_count(1.0f, kit) == 4095 && motor_duty_to_count(-1.0f, kit) == 4095);
    CHECK(motor_duty_to_count(1.0f, 5000) == 4095);                /* min above the top */
    /* not a duty: off */
    const uint32_t bad[] = {0x3F800001u, 0xBF800001u, 0x7F800000u, 0xFF800000u,
                            0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0x4B000000u};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(motor_duty_to_count(bits_f32(bad[i]), kit) == 0);
    }
    /* random patterns against the reference (most are not duties: also checked) */
    long compared = 0;
    for (int i = 0; i < 2000000; i++) {
        uint32_t b = rnd();
        if (i % 2 == 0) {
            b = (b % 0x3F800001u) | (b & 0x80000000u); /* a duty in [-1, 1] */
        }
        const float d = bits_f32(b);
        CHECK(motor_duty_to_count(d, kit) == reference(d, kit));
        compared++;
    }
    printf("test_motor: %ld patterns against the double reference; %ld checks, %ld failed\n",
           compared, checks, failures);
    return failures == 0 ? 0 : 1;
}
