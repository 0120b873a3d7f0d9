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
// The safety task is registered with ESP-IDF's task watchdog, set to panic
// (and so reset the chip, whose setup() then switches the motors off first)
// when the task has not checked in for this long. ESP-IDF 5 (Arduino-ESP32
// 3.x) takes milliseconds; ESP-IDF 4 (2.x) takes whole seconds, so there it
// is rounded up to 1 s.
#define SAFETY_WDT_TIMEOUT_MS 200

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
// The bus is shared with the kit's line-tracking module, a PCF8574 at 0x20 on
// the same SDA 13 / SCL 14 (Freenove's Track_Setup). The PCF8574 is a 100 kHz
// device (NXP and TI datasheets), so the bus runs at 100 kHz, not the
// PCA9685's 400/1000 kHz.
#define I2C_CLOCK_HZ 100000
// The longest transaction is the motor burst of motors_apply(): address,
// register, 8 channels x 4 registers = 34 bytes of 9 clocks, plus start and
// stop: 308 clocks = 3.08 ms at 100 kHz. The timeout must let it finish with
// room for the driver's own overhead (here 3x), and a stuck bus then costs the
// safety task one 10 ms stall before it retries on the next tick.
#define I2C_TIMEOUT_MS 10
#define MOTOR_BURST_BYTES 34
#define MOTOR_BURST_US ((MOTOR_BURST_BYTES * 9 + 2) * 1000000L / I2C_CLOCK_HZ)
#define MOTOR_REFRESH_TICKS 4  // rewrite the motor registers every 20 ms (50 Hz)
// The PCA9685's active-low output enable (OE). Freenove's sketches for the
// FNK0053 never drive it, so it is taken to be tied low on the board (-1: not
// wired). Where your board wires OE to a GPIO, put the GPIO here: setup()
// then drives it high (every output off) before anything else and low only
// once the chip is configured with every motor off. Verify on your board.
#ifndef PIN_PCA9685_OE
#define PIN_PCA9685_OE -1
#endif

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
// Minimum start duty: Freenove's Motor_Move lifts every nonzero speed to at
// least 1600 of 4095 (0.39), below which the kit's motors stall. A wheel duty
// d != 0 gives max(1600, round(|d| x 4095)) counts (firmware/core/motor_duty.h);
// a duty that rounds to 0 counts stays off. The simulator's default deadband
// (worlds/arena.py, CarModel.duty_deadband = 0.3907) is the same 1600 / 4095.
#define MOTOR_MIN_START_COUNT 1600

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

// ---- gyro: an MPU-6050 added on the same I2C bus (optional) ------------------
// The kit has no gyro. A GY-521 breakout on SDA 13 / SCL 14 (VCC 3.3 V, GND,
// AD0 to GND: address 0x68; to 3.3 V: 0x69), flat on the chassis, chip side
// up, gives the telemetry its gyro_z (firmware/README.md, "A gyro"). setup()
// looks for it; without one the car runs as before (gyro_z null). The safety
// task reads it on ticks that write no motor registers: 0.5 ms at 100 kHz.
#ifndef IMU_ENABLED
#define IMU_ENABLED 1
#endif
#define IMU_I2C_ADDR 0x68
#define IMU_YAW_SIGN 1           // -1 if the chip is mounted upside down
#define IMU_MAX_AGE_US 50000     // telemetry carries a sample at most this old
#define IMU_MAX_FAILURES 10      // failed reads (since boot) before the chip is given up
// Its zero-rate output, up to +-20 deg/s on an MPU-6050, is measured in setup():
// the mean of these readings, when they spread less than a still car's would.
#define IMU_SETTLE_MS 50
#define IMU_ZERO_SAMPLES 100
#define IMU_ZERO_SPACING_MS 2
#define IMU_ZERO_MAX_STD_DPS 3.0

// ---- what the numbers above must satisfy (checked by `make -C firmware test`) ----
static_assert(I2C_CLOCK_HZ <= 100000, "the PCF8574 line sensor on the bus is a 100 kHz device");
static_assert(I2C_TIMEOUT_MS * 1000L >= 3 * MOTOR_BURST_US,
              "the I2C timeout must let the motor burst finish");
static_assert(I2C_TIMEOUT_MS <= 2 * SAFETY_TICK_MS, "a stuck bus stalls the safety task at most 2 ticks");
static_assert(MOTOR_MIN_START_COUNT > 0 && MOTOR_MIN_START_COUNT <= 4095, "a 12-bit count");
static_assert(SAFETY_WDT_TIMEOUT_MS >= 20 * SAFETY_TICK_MS,
              "the task watchdog must not fire on a few late ticks");
static_assert(IMU_I2C_ADDR == 0x68 || IMU_I2C_ADDR == 0x69, "an MPU-6050 answers at 0x68 or 0x69");
static_assert(IMU_YAW_SIGN == 1 || IMU_YAW_SIGN == -1, "the gyro's sign is +1 or -1");
static_assert(IMU_MAX_FAILURES * I2C_TIMEOUT_MS <= SAFETY_WDT_TIMEOUT_MS / 2,
              "a failing gyro stalls the safety task far less than its watchdog");
