// main.cpp - the SITL car process: one stigmesh car, the sketch's own setup()
// and loop() on the Arduino loop task, on the POSIX stand-in for the ESP32.
//
//   stigmesh_car_sitl --address 127.x.y.z --robot-id N --world-fd FD
//                     [--boot-time S] [--drift D] [--random U32]... [--reset-reason R]
//                     [--imu 0|1]
//
// --boot-time is the car's boot on CLOCK_MONOTONIC (s; default: now), --drift
// its crystal error (uptime runs 1 + D fast), --random the first values of
// esp_random() (the world's draws of the boot nonce and token), --reset-reason
// esp_reset_reason(), --imu 1 an MPU-6050 on the I2C bus whose yaw rate is the
// world's gyro reading (0, the default: the kit as sold, no gyro). Started by the world (worlds/sitl_host.py) or a test
// bench; it exits when the world's end of --world-fd closes. SIGUSR2 unplugs
// the MPU-6050 (it answers no more). SIGUSR1 jams the
// I2C bus, a test's stand-in for a stuck driver.
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "freertos/FreeRTOS.h"
#include "freertos/task.h"
#include "sitl.h"

void setup();
void loop();

namespace sitl {
namespace {

Options s_options;

[[noreturn]] void usage(const char *why)
{
    fprintf(stderr,
            "stigmesh_car_sitl: %s\n"
            "usage: stigmesh_car_sitl --address A --robot-id N --world-fd FD [--boot-time S]\n"
            "       [--drift D] [--random U32]... [--reset-reason R] [--imu 0|1]\n",
            why);
    exit(2);
}

double number(const char *text, const char *name)
{
    char *end = nullptr;
    const double v = strtod(text, &end);
    if (end == text || *end != '\0') {
        char why[96];
        snprintf(why, sizeof why, "%s: not a number: %s", name, text);
        usage(why);
    }
    return v;
}

}  // namespace

const Options &options()
{
    return s_options;
}

void parse_options(int argc, char **argv)
{
    Options &o = s_options;
    o.boot_time = mono_now();
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        if (i + 1 >= argc) {
            usage("every option takes a value");
        }
        const char *value = argv[++i];
        if (strcmp(flag, "--address") == 0) {
            in_addr a;
            if (inet_pton(AF_INET, value, &a) != 1) {
                usage("--address: not an IPv4 address");
            }
            o.address = value;
            o.address_ip = ntohl(a.s_addr);
        } else if (strcmp(flag, "--robot-id") == 0) {
            o.robot_id = (int)number(value, flag);
        } else if (strcmp(flag, "--world-fd") == 0) {
            o.world_fd = (int)number(value, flag);
        } else if (strcmp(flag, "--boot-time") == 0) {
            o.boot_time = number(value, flag);
        } else if (strcmp(flag, "--drift") == 0) {
            o.drift = number(value, flag);
        } else if (strcmp(flag, "--random") == 0) {
            o.randoms.push_back((uint32_t)number(value, flag));
        } else if (strcmp(flag, "--reset-reason") == 0) {
            o.reset_reason = (int)number(value, flag);
        } else if (strcmp(flag, "--imu") == 0) {
            const double imu = number(value, flag);
            if (imu != 0.0 && imu != 1.0) {
                usage("--imu must be 0 or 1");
            }
            o.imu = imu == 1.0;
        } else {
            usage("unknown option");
        }
    }
    if (o.address.empty() || !same_sim_network(o.address_ip, o.address_ip)) {
        usage("--address must be in 127.0.0.0/8 or 198.18.0.0/15");
    }
    if (o.robot_id < 1 || o.robot_id > 255) {
        usage("--robot-id must be in 1..255");
    }
    if (o.world_fd < 0) {
        usage("--world-fd is required");
    }
    if (!(o.drift > -0.01 && o.drift < 0.01)) {
        usage("--drift must be within +-1 %");
    }
}

}  // namespace sitl

namespace {

// Arduino-ESP32's loopTask: setup(), then loop() for ever (the sketch's loop()
// deletes its own task). The main thread only keeps the process.
void loop_task(void *)
{
    setup();
    for (;;) {
        loop();
    }
}

}  // namespace

int main(int argc, char **argv)
{
    sitl::parse_options(argc, argv);
    signal(SIGUSR1, [](int) { sitl::jam_i2c(); });
    signal(SIGUSR2, [](int) { sitl::unplug_imu(); });
    sitl::world_link_start();
    if (xTaskCreatePinnedToCore(loop_task, "loopTask", 8192, nullptr, 1, nullptr, 1) != pdPASS) {
        sitl::fatal("cannot start the loop task");
    }
    for (;;) {
        pause();  // the process ends by a signal or when the world's link closes
    }
}
