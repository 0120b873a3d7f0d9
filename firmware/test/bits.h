/*
 * bits.h - a float's binary32 bits and back, by memcpy (no aliasing), for the
 * host tests that compare wheels bit for bit.
 */
#ifndef STIGMESH_TEST_BITS_H
#define STIGMESH_TEST_BITS_H

#include <stdint.h>
#include <string.h>

static inline uint32_t f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static inline float bits_f32(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

#endif
