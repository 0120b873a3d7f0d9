// i2c_bus.cpp - the FNK0053's I2C bus for the SITL car: Wire's transactions,
// timed as on the wire, to register models of the PCA9685 at 0x5F (NXP
// datasheet: MODE1/MODE2, LEDn_ON/OFF with the full-on and full-off bits,
// ALL_LED, PRE_SCALE writable only asleep, auto-increment) and, on a car
// started with --imu 1, an added MPU-6050 at 0x68 (InvenSense register map:
// WHO_AM_I, PWR_MGMT_1's sleep bit, GYRO_CONFIG's full scale, GYRO_ZOUT read
// from the world's gyro reading, rounded and clipped to the chip's counts).
// Whenever the PCA9685's 16 outputs change they go to the world as on-counts
// per 4096-tick period ('M'); the world's board model (worlds/sitl.py) knows
// which channels drive which motor. Not modelled: reads of the PCA9685, MODE2's
// INVRT and OUTNE, the MPU-6050's other sensors, its filter and sample rate,
// the line sensor at 0x20 (the sketch never talks to it).
//
// Faults for tests: SIGUSR1 jams the bus (sitl::jam_i2c): every transaction
// from then on hangs, ignoring Wire's timeout, as a stuck driver would; SIGUSR2
// unplugs the MPU-6050 (sitl::unplug_imu): its address is not acknowledged, and
// each try takes Wire's timeout, as a chip holding the bus would.
#include <errno.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include <atomic>
#include <mutex>

#include "Wire.h"
#include "sitl.h"

TwoWire Wire(0);

namespace {

constexpr uint8_t PCA9685_ADDRESS = 0x5F;
constexpr uint8_t REG_MODE1 = 0x00;
constexpr uint8_t REG_MODE2 = 0x01;
constexpr uint8_t REG_LED0 = 0x06;
constexpr uint8_t REG_ALL_LED = 0xFA;
constexpr uint8_t REG_PRE_SCALE = 0xFE;
constexpr uint8_t MODE1_RESTART = 0x80;
constexpr uint8_t MODE1_AI = 0x20;
constexpr uint8_t MODE1_SLEEP = 0x10;
constexpr uint8_t FULL = 0x10;
constexpr int CHANNELS = 16;

// Arduino's endTransmission results.
constexpr uint8_t I2C_OK = 0;
constexpr uint8_t I2C_TOO_LONG = 1;
constexpr uint8_t I2C_NACK_ADDRESS = 2;
constexpr uint8_t I2C_OTHER = 4;

class Pca9685 {
public:
    Pca9685() { power_on(); }

    // One write transaction: the register pointer, then the data.
    void write(const uint8_t *data, size_t len)
    {
        if (len == 0) {
            return;
        }
        uint8_t reg = data[0];
        for (size_t i = 1; i < len; i++) {
            write_reg(reg, data[i]);
            if (regs_[REG_MODE1] & MODE1_AI) {
                reg = (uint8_t)(reg + 1);
            }
        }
    }

    // High time of each output in ticks of the 4096-tick period (4096: full on).
    void outputs(uint16_t out[CHANNELS]) const
    {
        for (int n = 0; n < CHANNELS; n++) {
            const uint8_t *r = regs_ + REG_LED0 + 4 * n;
            const uint16_t on = (uint16_t)(((r[1] & 0x0F) << 8) | r[0]);
            const uint16_t off = (uint16_t)(((r[3] & 0x0F) << 8) | r[2]);
            if ((regs_[REG_MODE1] & MODE1_SLEEP) || (r[3] & FULL)) {
                out[n] = 0;  // asleep (oscillator off), or full off: off wins
            } else if (r[1] & FULL) {
                out[n] = 4096;
            } else {
                out[n] = (uint16_t)((off - on) & 0x0FFF);
            }
        }
    }

private:
    void power_on()
    {
        memset(regs_, 0, sizeof regs_);
        regs_[REG_MODE1] = 0x11;  // SLEEP | ALLCALL
        regs_[REG_MODE2] = 0x04;
        for (int n = 0; n < CHANNELS; n++) {
            regs_[REG_LED0 + 4 * n + 3] = FULL;  // LEDn_OFF_H: full off
        }
        regs_[REG_PRE_SCALE] = 0x1E;
    }

    void write_reg(uint8_t reg, uint8_t value)
    {
        if (reg == REG_PRE_SCALE && !(regs_[REG_MODE1] & MODE1_SLEEP)) {
            return;  // blocked while the oscillator runs
        }
        if (reg == REG_MODE1) {
            value = (uint8_t)(value & ~MODE1_RESTART);  // writing 1 clears RESTART
        }
        if (reg >= REG_ALL_LED && reg < REG_PRE_SCALE) {
            for (int n = 0; n < CHANNELS; n++) {
                regs_[REG_LED0 + 4 * n + (reg - REG_ALL_LED)] = value;
            }
            return;  // the ALL_LED registers themselves read back 0
        }
        regs_[reg] = value;
    }

    uint8_t regs_[256];
};

constexpr uint8_t MPU6050_ADDRESS = 0x68;

class Mpu6050 {
public:
    Mpu6050() { regs_[REG_PWR_MGMT_1] = 0x40; }  // asleep at power-on

    // A write transaction: the register pointer, then data (auto-increment).
    void write(const uint8_t *data, size_t len)
    {
        if (len == 0) {
            return;
        }
        pointer_ = data[0];
        for (size_t i = 1; i < len; i++) {
            regs_[pointer_] = data[i];
            pointer_ = (uint8_t)(pointer_ + 1);
        }
    }

    // A read transaction from the register pointer on; the gyro's registers
    // hold the world's latest reading (nothing new while asleep).
    void read(uint8_t *out, size_t len)
    {
        if (!(regs_[REG_PWR_MGMT_1] & 0x40)) {
            const sitl::Sensors s = sitl::sensors();
            const double lsb_per_dps = 131.0 / (double)(1 << ((regs_[REG_GYRO_CONFIG] >> 3) & 3));
            const double counts = round((double)s.gyro_z * (180.0 / M_PI) * lsb_per_dps);
            const int16_t z = (int16_t)fmax(-32768.0, fmin(32767.0, s.has_gyro ? counts : 0.0));
            regs_[REG_GYRO_ZOUT_H] = (uint8_t)((uint16_t)z >> 8);
            regs_[REG_GYRO_ZOUT_H + 1] = (uint8_t)((uint16_t)z & 0xFF);
        }
        regs_[REG_WHO_AM_I] = MPU6050_ADDRESS;
        for (size_t i = 0; i < len; i++) {
            out[i] = regs_[pointer_];
            pointer_ = (uint8_t)(pointer_ + 1);
        }
    }

private:
    static constexpr uint8_t REG_GYRO_CONFIG = 0x1B;
    static constexpr uint8_t REG_GYRO_ZOUT_H = 0x47;
    static constexpr uint8_t REG_PWR_MGMT_1 = 0x6B;
    static constexpr uint8_t REG_WHO_AM_I = 0x75;
    uint8_t regs_[256] = {};
    uint8_t pointer_ = 0;
};

std::mutex s_bus;  // one transaction at a time, as on the wire
std::atomic<bool> s_jammed{false};
std::atomic<bool> s_imu_unplugged{false};
Pca9685 s_pca9685;
Mpu6050 s_mpu6050;
bool s_reported = false;
uint16_t s_reported_out[CHANNELS];

// Reports the outputs when they differ from what the world last got; false
// when the world could not take them (the transaction then fails, and the
// sketch retries on its next tick).
bool report_outputs()
{
    uint16_t out[CHANNELS];
    s_pca9685.outputs(out);
    if (s_reported && memcmp(out, s_reported_out, sizeof out) == 0) {
        return true;
    }
    char pwm[CHANNELS * 6 + 1];
    size_t used = 0;
    for (int n = 0; n < CHANNELS; n++) {
        used += (size_t)snprintf(pwm + used, sizeof pwm - used, n == 0 ? "%u" : ",%u", out[n]);
    }
    if (!sitl::world_sendf('M', "{\"us\":%llu,\"pwm\":[%s]}",
                           (unsigned long long)sitl::uptime_us(), pwm)) {
        return false;
    }
    memcpy(s_reported_out, out, sizeof out);
    s_reported = true;
    return true;
}

void wire_time(size_t bytes, uint32_t clock_hz)
{
    const uint64_t ns = ((uint64_t)bytes * 9 + 2) * 1000000000ULL / clock_hz;
    timespec t = {(time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL)};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

}  // namespace

void sitl::jam_i2c()
{
    s_jammed.store(true);  // async-signal-safe: a lock-free atomic store
}

void sitl::unplug_imu()
{
    s_imu_unplugged.store(true);
}

namespace {

// Whether the MPU-6050 answers its address; a chip gone costs each try Wire's timeout.
bool imu_answers(uint16_t timeout_ms)
{
    if (!sitl::options().imu) {
        return false;
    }
    if (s_imu_unplugged.load()) {
        timespec t = {(time_t)(timeout_ms / 1000), (long)(timeout_ms % 1000) * 1000000L};
        while (nanosleep(&t, &t) != 0 && errno == EINTR) {
        }
        return false;
    }
    return true;
}

}  // namespace

bool TwoWire::begin(int, int, uint32_t frequency)
{
    clock_hz_ = frequency != 0 ? frequency : 100000;
    begun_ = true;
    return true;
}

void TwoWire::setTimeOut(uint16_t timeout_ms)
{
    timeout_ms_ = timeout_ms;
}

void TwoWire::beginTransmission(uint8_t address)
{
    address_ = address;
    tx_len_ = 0;
    overflow_ = false;
    open_ = true;
}

size_t TwoWire::write(uint8_t value)
{
    return write(&value, 1);
}

size_t TwoWire::write(const uint8_t *data, size_t len)
{
    if (!open_) {
        return 0;
    }
    const size_t room = BUFFER - tx_len_;
    const size_t n = len < room ? len : room;
    memcpy(tx_ + tx_len_, data, n);
    tx_len_ += n;
    overflow_ = overflow_ || n < len;
    return n;
}

uint8_t TwoWire::endTransmission(bool)
{
    if (!begun_ || !open_) {
        return I2C_OTHER;
    }
    open_ = false;
    if (overflow_) {
        return I2C_TOO_LONG;
    }
    std::lock_guard<std::mutex> hold(s_bus);
    while (s_jammed.load()) {
        wire_time(1000, clock_hz_);  // stuck, for good
    }
    wire_time(1 + tx_len_, clock_hz_);  // address byte, then the data
    if (address_ == MPU6050_ADDRESS && imu_answers(timeout_ms_)) {
        s_mpu6050.write(tx_, tx_len_);
        return I2C_OK;
    }
    if (address_ != PCA9685_ADDRESS) {
        return I2C_NACK_ADDRESS;
    }
    s_pca9685.write(tx_, tx_len_);
    return report_outputs() ? I2C_OK : I2C_OTHER;
}

uint8_t TwoWire::endTransmission()
{
    return endTransmission(true);
}

size_t TwoWire::requestFrom(uint16_t address, size_t size, bool)
{
    rx_len_ = rx_next_ = 0;
    if (!begun_ || size > BUFFER) {
        return 0;
    }
    std::lock_guard<std::mutex> hold(s_bus);
    while (s_jammed.load()) {
        wire_time(1000, clock_hz_);  // stuck, for good
    }
    wire_time(1 + size, clock_hz_);
    if (address != MPU6050_ADDRESS || !imu_answers(timeout_ms_)) {
        return 0;  // no device answers its address
    }
    s_mpu6050.read(rx_, size);
    rx_len_ = size;
    return size;
}

int TwoWire::available()
{
    return (int)(rx_len_ - rx_next_);
}

int TwoWire::read()
{
    return rx_next_ < rx_len_ ? rx_[rx_next_++] : -1;
}
