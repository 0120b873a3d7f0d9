// car_config.h - build-time configuration of the stigmesh car sketch for the
// Freenove 4WD Car Kit for ESP32 (FNK0053: ESP32-WROVER, OV2640, PCA9685).
//
// Pin numbers follow Freenove's own sketches for this kit. Everything marked
// "verify on your board" was not checked on hardware by us: board revisions
// differ, so check it against your kit's schematic before the first run,
// with the wheels off the ground.
#pragma once

#include <stdint.h>

// ---- identity --------------------------------------------------------------
// Robot id, 1..255, unique in the swarm. Override per car, e.g.
//   arduino-cli compile --build-property "compiler.cpp.extra_flags=-DSTIGMESH_ROBOT_ID=2" ...
#ifndef STIGMESH_ROBOT_ID
#define STIGMESH_ROBOT_ID 1
#endif
#define STIGMESH_HOSTNAME_PREFIX "stigmesh-car-"

// ---- MZ01 ports (protocol/MZ01.md) -------------------------------------------
#define CAR_PORT_COMMAND 4210  // commands in, telemetry out
#define CAR_PORT_PROBE 4211    // clock probe
#define CAR_PORT_CAMERA 8080   // MJPEG GET /stream

// ---- tasks -------------------------------------------------------------------
// Core 1 runs only the safety task (the Arduino loop task deletes itself).
// Its priority is the highest FreeRTOS offers: above the Wi-Fi driver task
// (23, pinned to core 0), esp_timer (22), lwIP (18) and every task of this
// sketch; only ESP-IDF's short IPC task shares it. It needs well under 1 ms
// of each 5 ms period (one I2C burst at most), so it starves nothing.
#define SAFETY_TASK_CORE 1
#define SAFETY_TASK_PRIO (configMAX_PRIORITIES - 1)
#define SAFETY_TASK_STACK 4096
#define SAFETY_TICK_MS 5

// Everything best-effort lives on core 0, below the safety task.
#define NET_TASK_CORE 0
#define PROBE_TASK_PRIO 6     // clock replies: short, latency matters
#define COMMAND_TASK_PRIO 5   // UDP 4210 commands and telemetry
#define CAMERA_TASK_PRIO 2    // MJPEG server
#define CAMERA_WATCH_PRIO 1   // camera health while nobody streams
#define NET_TASK_STACK 6144
#define CAMERA_TASK_STACK 6144

// ---- PCA9685 on I2C (Freenove: SDA 13, SCL 14, address 0x5F) ------------------
#define PIN_I2C_SDA 13
#define PIN_I2C_SCL 14
#define PCA9685_I2C_ADDR 0x5F
#define PCA9685_OSC_HZ 25000000UL
#define PCA9685_PWM_HZ 50      // 12-bit PWM at 50 Hz (servos share the chip)
#define I2C_CLOCK_HZ 400000
#define I2C_TIMEOUT_MS 3
#define MOTOR_REFRESH_TICKS 4  // rewrite the motor registers every 20 ms (50 Hz)

// Motor H-bridge inputs on PCA9685 channels (Freenove's PIN_MOTOR_Mx_INy).
// Freenove drives Mx forward with IN1 = PWM, IN2 = 0. From Freenove's line
// follower ("turn left" = M1, M2 backward and M3, M4 forward): M1, M2 are
// the left wheels and M3, M4 the right wheels. Verify on your board.
#define MOTOR_M1_IN1 15
#define MOTOR_M1_IN2 14
#define MOTOR_M2_IN1 9
#define MOTOR_M2_IN2 8
#define MOTOR_M3_IN1 12
#define MOTOR_M3_IN2 13
#define MOTOR_M4_IN1 10
#define MOTOR_M4_IN2 11
// Set to -1 if a side drives backwards on a positive duty. Verify on your board.
#define MOTOR_LEFT_SIGN 1
#define MOTOR_RIGHT_SIGN 1

// Pan/tilt servos (Freenove: channels 0 and 1) are frozen at 90 degrees so
// the camera mount is rigid: 1.5 ms of a 20 ms period = 307 of 4096 counts.
#define SERVO_PAN_CHANNEL 0
#define SERVO_TILT_CHANNEL 1
#define SERVO_CENTER_COUNT 307

// ---- camera: OV2640 on the ESP32-WROVER (Freenove uses Espressif's -----------
// WROVER-KIT mapping). Verify on your board.
#define CAM_PIN_PWDN -1
#define CAM_PIN_RESET -1
#define CAM_PIN_XCLK 21
#define CAM_PIN_SIOD 26
#define CAM_PIN_SIOC 27
#define CAM_PIN_D7 35  // Y9
#define CAM_PIN_D6 34  // Y8
#define CAM_PIN_D5 39  // Y7
#define CAM_PIN_D4 36  // Y6
#define CAM_PIN_D3 19  // Y5
#define CAM_PIN_D2 18  // Y4
#define CAM_PIN_D1 5   // Y3
#define CAM_PIN_D0 4   // Y2
#define CAM_PIN_VSYNC 25
#define CAM_PIN_HREF 23
#define CAM_PIN_PCLK 22
#define CAM_XCLK_HZ 20000000
#define CAM_JPEG_QUALITY 14      // lower is better quality (0..63)
#define CAM_MAX_FPS 12
#define CAM_HEALTH_WINDOW_MS 1000  // camera_ok: a frame within this window
