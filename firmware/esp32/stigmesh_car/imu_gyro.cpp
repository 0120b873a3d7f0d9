// imu_gyro.cpp - see imu_gyro.h. Register map and scales from InvenSense's
// MPU-6000/MPU-6050 Register Map (RM-MPU-6000A-00): PWR_MGMT_1 0x6B (reset
// 0x40: asleep), CONFIG 0x1A (DLPF_CFG), GYRO_CONFIG 0x1B (FS_SEL in bits
// 4:3), GYRO_ZOUT_H/L 0x47/0x48 (big-endian, two's complement), WHO_AM_I
// 0x75 (0x68 whatever AD0 is).
#include "imu_gyro.h"

#include <Arduino.h>
#include <Wire.h>
#include <math.h>
#include <freertos/FreeRTOS.h>
#include <freertos/task.h>

#include "car_config.h"

namespace {

constexpr uint8_t REG_CONFIG = 0x1A;
constexpr uint8_t REG_GYRO_CONFIG = 0x1B;
constexpr uint8_t REG_GYRO_ZOUT_H = 0x47;
constexpr uint8_t REG_PWR_MGMT_1 = 0x6B;
constexpr uint8_t REG_WHO_AM_I = 0x75;
constexpr uint8_t WHO_AM_I_MPU6050 = 0x68;
constexpr uint8_t PWR_CLOCK_PLL_GYRO_X = 0x01;  // awake, clocked from the X gyro's PLL
constexpr uint8_t DLPF_42_HZ = 0x03;            // gyro bandwidth 42 Hz, delay 4.8 ms
constexpr uint8_t FS_500_DPS = 0x01 << 3;       // +-500 deg/s: 65.5 LSB per deg/s
constexpr float LSB_PER_DPS = 65.5f;
constexpr double PI_D = 3.14159265358979323846;
constexpr float RAD_PER_LSB = (float)(PI_D / 180.0) / LSB_PER_DPS;
constexpr float PI_F = (float)PI_D;  // 3.14159274f, just above pi

bool s_present = false;  // setup() and then the safety task only
uint8_t s_failures = 0;  // failed reads since boot; safety task only
float s_zero = 0.0f;     // counts at rest, measured in setup()

// Written by the safety task under s_lock; it alone writes them, so it reads
// them without the lock.
portMUX_TYPE s_lock = portMUX_INITIALIZER_UNLOCKED;
float s_rate = 0.0f;  // the newest sample
uint64_t s_at_us = 0;
bool s_have = false;
float s_angle = 0.0f;  // rad, the integral up to s_at_us, wrapped

// a (rad) wrapped to (-PI_F, PI_F]: the binary32 angle of a.
float wrap_angle(double a)
{
    double w = remainder(a, 2.0 * PI_D);  // [-pi, pi]
    if (w <= -PI_D) {
        w += 2.0 * PI_D;
    }
    const float f = (float)w;
    return f == -PI_F ? PI_F : f;  // a w just above -pi rounds to -PI_F, below -pi
}

bool write_reg(uint8_t reg, uint8_t value)
{
    Wire.beginTransmission(IMU_I2C_ADDR);
    Wire.write(reg);
    Wire.write(value);
    return Wire.endTransmission() == 0;
}

// `len` registers from `reg` on: the register pointer, a repeated start, the read.
bool read_regs(uint8_t reg, uint8_t *out, size_t len)
{
    Wire.beginTransmission(IMU_I2C_ADDR);
    Wire.write(reg);
    if (Wire.endTransmission(false) != 0) {
        return false;
    }
    if (Wire.requestFrom((uint16_t)IMU_I2C_ADDR, len, true) != len) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        const int b = Wire.read();
        if (b < 0) {
            return false;
        }
        out[i] = (uint8_t)b;
    }
    return true;
}

bool read_counts(int16_t *counts)
{
    uint8_t raw[2];
    if (!read_regs(REG_GYRO_ZOUT_H, raw, sizeof raw)) {
        return false;
    }
    *counts = (int16_t)(uint16_t)((raw[0] << 8) | raw[1]);
    return true;
}

// The chip's zero-rate output (up to +-20 deg/s, datasheet) while the car stands
// still at boot: the mean of IMU_ZERO_SAMPLES readings, unless they spread more
// than a still chip's would (the car is being moved): then 0, and the agent's
// still-car learning (agents/gyro_bias.py) has it all to do.
bool measure_zero()
{
    double sum = 0.0;
    double sum2 = 0.0;
    for (int i = 0; i < IMU_ZERO_SAMPLES; i++) {
        int16_t c;
        if (!read_counts(&c)) {
            return false;
        }
        sum += c;
        sum2 += (double)c * c;
        delay(IMU_ZERO_SPACING_MS);
    }
    const double mean = sum / IMU_ZERO_SAMPLES;
    const double var = sum2 / IMU_ZERO_SAMPLES - mean * mean;
    const double max_std = IMU_ZERO_MAX_STD_DPS * LSB_PER_DPS;
    s_zero = var <= max_std * max_std ? (float)mean : 0.0f;
    return true;
}

}  // namespace

bool imu_begin()
{
#if IMU_ENABLED
    uint8_t who = 0;
    s_present = read_regs(REG_WHO_AM_I, &who, 1) && who == WHO_AM_I_MPU6050 &&
                write_reg(REG_PWR_MGMT_1, PWR_CLOCK_PLL_GYRO_X) &&
                write_reg(REG_CONFIG, DLPF_42_HZ) && write_reg(REG_GYRO_CONFIG, FS_500_DPS);
    if (s_present) {
        delay(IMU_SETTLE_MS);  // the gyro's start-up time after waking
        s_present = measure_zero();
    }
#else
    s_present = false;
#endif
    s_failures = 0;
    return s_present;
}

float imu_zero_dps()
{
    return (float)IMU_YAW_SIGN * s_zero / LSB_PER_DPS;
}

void imu_poll(uint64_t now_us)
{
    if (!s_present) {
        return;
    }
    int16_t counts;
    if (!read_counts(&counts)) {
        if (++s_failures >= IMU_MAX_FAILURES) {
            s_present = false;  // a broken or loose chip costs the safety task no more
        }
        return;
    }
    if (counts == INT16_MAX || counts == INT16_MIN) {
        return;  // saturated (beyond +-500 deg/s): no reading, the telemetry says null
    }
    const float rate = (float)IMU_YAW_SIGN * ((float)counts - s_zero) * RAD_PER_LSB;
    float angle = 0.0f;  // the first reading starts the integral
    if (s_have) {
        const double dt_s = (double)(now_us - s_at_us) * 1e-6;
        angle = wrap_angle((double)s_angle + 0.5 * ((double)s_rate + (double)rate) * dt_s);
    }
    taskENTER_CRITICAL(&s_lock);
    s_rate = rate;
    s_at_us = now_us;
    s_angle = angle;
    s_have = true;
    taskEXIT_CRITICAL(&s_lock);
}

namespace {

// The newest sample, when fresh at now_us: its rate, time and integral.
bool newest(uint64_t now_us, float *rate, uint64_t *at_us, float *angle)
{
    taskENTER_CRITICAL(&s_lock);
    // A sample read after now_us was taken (the safety task runs beside) is fresh too.
    const bool fresh = s_have && (s_at_us >= now_us || now_us - s_at_us <= IMU_MAX_AGE_US);
    *rate = s_rate;
    *at_us = s_at_us;
    *angle = s_angle;
    taskEXIT_CRITICAL(&s_lock);
    return fresh;
}

}  // namespace

bool imu_gyro_z(uint64_t now_us, float *rad_s)
{
    float rate, angle;
    uint64_t at_us;
    if (!newest(now_us, &rate, &at_us, &angle)) {
        return false;
    }
    *rad_s = rate;
    return true;
}

bool imu_gyro_angle(uint64_t now_us, float *rad)
{
    float rate, angle;
    uint64_t at_us;
    if (!newest(now_us, &rate, &at_us, &angle)) {
        return false;
    }
    // Signed: the sample may be newer than now_us.
    const double ahead_s = (double)(int64_t)(now_us - at_us) * 1e-6;
    *rad = wrap_angle((double)angle + (double)rate * ahead_s);
    return true;
}
