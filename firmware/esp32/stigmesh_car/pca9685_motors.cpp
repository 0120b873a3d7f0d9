// pca9685_motors.cpp - see pca9685_motors.h. Register map from the NXP
// PCA9685 datasheet: MODE1 0x00, MODE2 0x01, LEDn_ON_L 0x06 + 4n, ALL_LED
// 0xFA..0xFD, PRE_SCALE 0xFE; bit 4 of LEDn_ON_H / LEDn_OFF_H = full on / off.
#include "pca9685_motors.h"

#include <Arduino.h>
#include <Wire.h>
#include <math.h>

#include "car_config.h"
#include "motor_duty.h"

namespace {

constexpr uint8_t REG_MODE1 = 0x00;
constexpr uint8_t REG_MODE2 = 0x01;
constexpr uint8_t REG_LED0_ON_L = 0x06;
constexpr uint8_t REG_ALL_LED_ON_L = 0xFA;
constexpr uint8_t REG_ALL_LED_OFF_H = 0xFD;
constexpr uint8_t REG_PRE_SCALE = 0xFE;
constexpr uint8_t MODE1_RESTART = 0x80;
constexpr uint8_t MODE1_AI = 0x20;  // register auto-increment
constexpr uint8_t MODE1_SLEEP = 0x10;
constexpr uint8_t MODE2_OUTDRV = 0x04;  // totem-pole outputs
constexpr uint8_t FULL_BIT = 0x10;
constexpr uint16_t PWM_MAX = 4095;

// The motor inputs occupy channels 8..15: one burst of 8 x 4 registers.
constexpr uint8_t MOTOR_FIRST_CHANNEL = 8;
constexpr uint8_t MOTOR_CHANNELS = 8;
static_assert(MOTOR_M1_IN1 >= 8 && MOTOR_M1_IN2 >= 8 && MOTOR_M2_IN1 >= 8 &&
                  MOTOR_M2_IN2 >= 8 && MOTOR_M3_IN1 >= 8 && MOTOR_M3_IN2 >= 8 &&
                  MOTOR_M4_IN1 >= 8 && MOTOR_M4_IN2 >= 8,
              "motor inputs are expected on PCA9685 channels 8..15");

bool write_regs(uint8_t reg, const uint8_t *data, size_t len)
{
    Wire.beginTransmission(PCA9685_I2C_ADDR);
    Wire.write(reg);
    Wire.write(data, len);
    return Wire.endTransmission() == 0;
}

bool write_reg(uint8_t reg, uint8_t value)
{
    return write_regs(reg, &value, 1);
}

// The four registers of one channel for a duty of `count` / 4096.
void channel_regs(uint16_t count, uint8_t out[4])
{
    if (count == 0) {
        out[0] = 0; out[1] = 0; out[2] = 0; out[3] = FULL_BIT;  // full off
    } else if (count >= PWM_MAX) {
        out[0] = 0; out[1] = FULL_BIT; out[2] = 0; out[3] = 0;  // full on
    } else {
        out[0] = 0; out[1] = 0;
        out[2] = (uint8_t)(count & 0xFF);
        out[3] = (uint8_t)(count >> 8);
    }
}

// One motor: forward = IN1 PWM, IN2 off; backward = the reverse. The sign is
// read from the bit pattern, like everything the count depends on.
void set_motor(uint16_t counts[16], int in1, int in2, float duty)
{
    const uint16_t c = motor_duty_to_count(duty, MOTOR_MIN_START_COUNT);
    const bool backward = signbit(duty);
    counts[in1] = backward ? 0 : c;
    counts[in2] = backward ? c : 0;
}

void wire_begin()
{
    Wire.begin(PIN_I2C_SDA, PIN_I2C_SCL, I2C_CLOCK_HZ);
    Wire.setTimeOut(I2C_TIMEOUT_MS);
}

void output_enable(bool on)
{
#if PIN_PCA9685_OE >= 0
    pinMode(PIN_PCA9685_OE, OUTPUT);
    digitalWrite(PIN_PCA9685_OE, on ? LOW : HIGH);  // OE is active low
#else
    (void)on;
#endif
}

}  // namespace

bool motors_all_off()
{
    output_enable(false);
    wire_begin();
    // Full-off (bit 4 of LEDn_OFF_H) overrides everything else on a channel;
    // one register write, whatever MODE1's auto-increment is set to.
    return write_reg(REG_ALL_LED_OFF_H, FULL_BIT);
}

bool motors_begin()
{
    const uint8_t prescale =
        (uint8_t)((PCA9685_OSC_HZ + 4096UL * PCA9685_PWM_HZ / 2) / (4096UL * PCA9685_PWM_HZ) - 1);
    bool ok = write_reg(REG_MODE1, MODE1_SLEEP | MODE1_AI);  // prescale needs sleep
    ok = ok && write_reg(REG_PRE_SCALE, prescale);            // 121 for 50 Hz
    ok = ok && write_reg(REG_MODE2, MODE2_OUTDRV);
    const uint8_t all_off[4] = {0, 0, 0, FULL_BIT};
    ok = ok && write_regs(REG_ALL_LED_ON_L, all_off, sizeof all_off);
    ok = ok && write_reg(REG_MODE1, MODE1_AI);  // wake
    delayMicroseconds(600);                      // oscillator start-up: 500 us
    ok = ok && write_reg(REG_MODE1, MODE1_AI | MODE1_RESTART);

    uint8_t servo[8];
    channel_regs(SERVO_CENTER_COUNT, servo);
    channel_regs(SERVO_CENTER_COUNT, servo + 4);
    static_assert(SERVO_TILT_CHANNEL == SERVO_PAN_CHANNEL + 1, "servo channels adjacent");
    ok = ok && write_regs(REG_LED0_ON_L + 4 * SERVO_PAN_CHANNEL, servo, sizeof servo);
    if (ok) {
        output_enable(true);
    }
    return ok;
}

bool motors_apply(float left, float right)
{
    uint16_t counts[16] = {0};
    const float l = left * (float)MOTOR_LEFT_SIGN;
    const float r = right * (float)MOTOR_RIGHT_SIGN;
    set_motor(counts, MOTOR_M1_IN1, MOTOR_M1_IN2, l);
    set_motor(counts, MOTOR_M2_IN1, MOTOR_M2_IN2, l);
    set_motor(counts, MOTOR_M3_IN1, MOTOR_M3_IN2, r);
    set_motor(counts, MOTOR_M4_IN1, MOTOR_M4_IN2, r);

    uint8_t regs[MOTOR_CHANNELS * 4];
    for (uint8_t i = 0; i < MOTOR_CHANNELS; i++) {
        channel_regs(counts[MOTOR_FIRST_CHANNEL + i], regs + 4 * i);
    }
    return write_regs(REG_LED0_ON_L + 4 * MOTOR_FIRST_CHANNEL, regs, sizeof regs);
}
