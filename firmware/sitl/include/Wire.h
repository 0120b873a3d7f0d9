// Wire.h - SITL stand-in for Arduino-ESP32's TwoWire: I2C transactions go to
// the simulated bus (firmware/sitl/src/i2c_bus.cpp), where the FNK0053's
// PCA9685 and, on a car that has one, an added MPU-6050 are modelled register
// by register. A transaction takes the time it would on the wire at the
// configured clock.
#pragma once

#include <stddef.h>
#include <stdint.h>

class TwoWire {
public:
    explicit TwoWire(uint8_t bus_num) : num_(bus_num) {}
    bool begin(int sda, int scl, uint32_t frequency = 0);
    void setTimeOut(uint16_t timeout_ms);
    void beginTransmission(uint8_t address);
    size_t write(uint8_t value);
    size_t write(const uint8_t *data, size_t len);
    uint8_t endTransmission(bool stop_bit);
    uint8_t endTransmission();
    size_t requestFrom(uint16_t address, size_t size, bool send_stop);
    int available();
    int read();

private:
    static constexpr size_t BUFFER = 128;  // I2C_BUFFER_LENGTH
    uint8_t num_;
    bool begun_ = false;
    uint32_t clock_hz_ = 100000;
    uint16_t timeout_ms_ = 50;
    uint8_t address_ = 0;
    bool open_ = false;
    bool overflow_ = false;
    uint8_t tx_[BUFFER] = {};
    size_t tx_len_ = 0;
    uint8_t rx_[BUFFER] = {};
    size_t rx_len_ = 0;
    size_t rx_next_ = 0;
};
extern TwoWire Wire;
