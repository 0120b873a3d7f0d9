// sitl.h - the SITL platform's internals, shared by the stand-in's files.
//
// The car process talks to the world over one SOCK_SEQPACKET socket (fd
// given by --world-fd), one message per packet, its first byte the type:
//
//   world -> car   'S' u8 has_gyro, f32 gyro_z (rad/s), then the `sim` JSON
//                      object (or nothing): the board's sensor inputs (the
//                      gyro reaches the sketch through the MPU-6050 model of
//                      i2c_bus.cpp, when the car has one: --imu 1)
//                  'F' u32 request id, u64 capture time (car uptime, us),
//                      then the JPEG: the frame asked for by 'R'
//                  'f' u32 request id: no frame (the camera gives none)
//                  'L' u64 car uptime (us) until which the Wi-Fi link is down
//   car -> world   'M' {"us":..,"pwm":[16 on-counts, 0..4096]}: PCA9685 outputs
//                  'R' {"us":..,"id":..}: the camera wants a frame
//                  'T' {"ev":..}: a trace of the core's calls (trace.cpp)
//                  'B' {"proto":..,"port":..,"errno":..}: a socket bind
//                  'P' one line of Serial output
//                  'X' why the firmware panicked (the process then exits 70)
//
// Little-endian numbers. All multi-byte payloads are copied with memcpy.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

namespace sitl {

constexpr int EXIT_PANIC = 70;

struct Options {
    std::string address = "";       // the car's IPv4 address (dotted)
    uint32_t address_ip = 0;         // the same, host order
    int robot_id = 0;
    double boot_time = 0.0;          // CLOCK_MONOTONIC seconds at the car's boot
    double drift = 0.0;              // crystal error: uptime runs (1 + drift) fast
    std::vector<uint32_t> randoms;   // esp_random()'s first values
    int reset_reason = 1;            // ESP_RST_POWERON
    bool imu = false;                // an MPU-6050 on the I2C bus (i2c_bus.cpp)
    int world_fd = -1;
};
const Options &options();
void parse_options(int argc, char **argv);

// Clocks: host CLOCK_MONOTONIC seconds, and the car's uptime derived from it.
double mono_now();
uint64_t uptime_us();
double mono_at_uptime(uint64_t us);
void sleep_until_mono(double mono);

// The world link (world_link.cpp). Sends never block; false when the
// message could not be queued (the world is gone or not reading).
void world_link_start();
bool world_send(char type, const void *payload, size_t len);
bool world_sendf(char type, const char *format, ...) __attribute__((format(printf, 2, 3)));
bool link_up();
void serial_line(const std::string &line);

struct Sensors {
    bool has_gyro = false;
    float gyro_z = 0.0f;
    std::string sim;  // a JSON object, or empty
};
Sensors sensors();

// The camera (camera.cpp): a frame arrived for request `id`, or none did.
void camera_deliver(uint32_t id, bool ok, uint64_t capture_us, const uint8_t *jpeg, size_t len);

// A test fault (SIGUSR1): the I2C bus hangs from now on (i2c_bus.cpp).
void jam_i2c();
// A test fault (SIGUSR2): the MPU-6050 answers no more, a loose wire (i2c_bus.cpp).
void unplug_imu();

// Simulated network rules (lwip.cpp).
bool same_sim_network(uint32_t a, uint32_t b);

[[noreturn]] void fatal(const char *why);

}  // namespace sitl
