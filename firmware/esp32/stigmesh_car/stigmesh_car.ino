// stigmesh_car.ino - the stigmesh car firmware for the Freenove 4WD Car Kit
// for ESP32 (FNK0053: ESP32-WROVER with PSRAM, OV2640, PCA9685).
//
// The safety rules live in the portable core (firmware/core/mz01_core.c,
// protocol/MZ01.md); this sketch only wires it to the hardware:
//   core 1: the safety task, every 5 ms (vTaskDelayUntil), highest priority:
//           core tick (watchdog, health, telemetry schedule) -> PCA9685
//           wheels. It waits on nothing else: not Wi-Fi, not the camera. It
//           is subscribed to the task watchdog (a stall resets the chip).
//   setup(): the PCA9685 all-off write comes first (the chip keeps its duties
//           across an ESP32 reset).
//   core 0: UDP 4210 commands + telemetry, UDP 4211 clock probe, MJPEG on
//           TCP 8080, camera health, mDNS, Wi-Fi: all best-effort.
//
// Build: see firmware/README.md (arduino-cli with --library ../../core, or
// PlatformIO). No ESP32 compiler on the machine this was written on; the same
// sources run there as the SITL car (firmware/sitl: `make -C firmware sitl`).
#include <Arduino.h>
#include <ESPmDNS.h>
#include <WiFi.h>
#include <esp_idf_version.h>
#include <esp_system.h>
#include <esp_task_wdt.h>
#if __has_include(<esp_random.h>)
#include <esp_random.h>  // ESP-IDF 5 (Arduino-ESP32 3.x)
#endif
#include <freertos/FreeRTOS.h>
#include <freertos/task.h>

#if __has_include("secrets.h")
#include "secrets.h"
#else
#error "Copy secrets.example.h to secrets.h and put your Wi-Fi credentials in it."
#endif

#include "camera_stream.h"
#include "car_board.h"
#include "car_config.h"
#include "car_link.h"
#include "imu_gyro.h"
#include "mz01_core.h"
#include "pca9685_motors.h"

static_assert(configTICK_RATE_HZ % (1000 / SAFETY_TICK_MS) == 0,
              "the FreeRTOS tick must divide the 5 ms safety period exactly");
static_assert(SAFETY_TICK_MS * 1000 == MZ01_TICK_US, "MZ01 ticks every 5 ms");

namespace {

bool s_motor_ok_at_boot = false;
bool s_watchdog_ok = false;  // the task watchdog is set to panic; set before the task starts

// The task watchdog panics (and so resets the chip) when a subscribed task
// has not checked in for SAFETY_WDT_TIMEOUT_MS. Only the safety task is
// subscribed: the idle tasks are not watched, so a busy core 0 cannot reset
// a car that is fine.
bool task_watchdog_init()
{
#if ESP_IDF_VERSION >= ESP_IDF_VERSION_VAL(5, 0, 0)
    esp_task_wdt_config_t config = {};
    config.timeout_ms = SAFETY_WDT_TIMEOUT_MS;
    config.idle_core_mask = 0;
    config.trigger_panic = true;
    esp_err_t err = esp_task_wdt_reconfigure(&config);  // Arduino 3.x starts it
    if (err == ESP_ERR_INVALID_STATE) {
        err = esp_task_wdt_init(&config);  // not started by the framework
    }
    return err == ESP_OK;
#else
    const uint32_t seconds = (SAFETY_WDT_TIMEOUT_MS + 999) / 1000;  // whole seconds here
    return esp_task_wdt_init(seconds, true) == ESP_OK;
#endif
}

// The only task on core 1. Every 5 ms: health in, core tick, wheels out.
// The motor registers are written at once when the duties change (a STOP or
// the watchdog zeroes the wheels within one tick) and refreshed at 50 Hz; on
// the other ticks the gyro, if there is one, is read (one I2C transaction a
// tick at most, the wheels' first).
// It checks in with the task watchdog every tick; without a watchdog set to
// panic on it, it reports the motors unhealthy, so the car refuses ARM.
void safety_task(void *)
{
    const bool watched = s_watchdog_ok && esp_task_wdt_add(nullptr) == ESP_OK;
    bool motor_ok = s_motor_ok_at_boot && watched;
    bool have_applied = false;
    float applied_left = 0.0f;
    float applied_right = 0.0f;
    uint32_t ticks = 0;
    TickType_t wake = xTaskGetTickCount();
    for (;;) {
        vTaskDelayUntil(&wake, pdMS_TO_TICKS(SAFETY_TICK_MS));
        if (watched) {
            esp_task_wdt_reset();
        }
        const bool camera_ok = camera_healthy(car_uptime_us());
        float left = 0.0f;
        float right = 0.0f;
        car_link_tick(motor_ok, camera_ok, &left, &right);
        ticks++;
        const bool changed = !have_applied || left != applied_left || right != applied_right;
        if (changed || ticks % MOTOR_REFRESH_TICKS == 0) {
            motor_ok = motors_apply(left, right) && watched;
            if (motor_ok) {  // on an I2C error, retry on the next tick
                have_applied = true;
                applied_left = left;
                applied_right = right;
            }
        } else {
            imu_poll(car_uptime_us());  // the bus is free this tick (a no-op without a gyro)
        }
    }
}

void advertise(uint32_t boot_nonce)
{
    char host[32];
    char id_txt[8];
    char boot_txt[12];
    snprintf(host, sizeof host, STIGMESH_HOSTNAME_PREFIX "%u", (unsigned)car_robot_id());
    snprintf(id_txt, sizeof id_txt, "%u", (unsigned)car_robot_id());
    snprintf(boot_txt, sizeof boot_txt, "%lu", (unsigned long)boot_nonce);  // decimal, as telemetry "boot"
    if (!MDNS.begin(host)) {
        Serial.println("mdns: start failed");
        return;
    }
    MDNS.addService("_mz01", "_udp", CAR_PORT_COMMAND);
    MDNS.addServiceTxt("_mz01", "_udp", "id", id_txt);
    MDNS.addServiceTxt("_mz01", "_udp", "boot", boot_txt);
}

// Stops here for good: motors off (as far as the chip answers), no network.
[[noreturn]] void halt(const char *why)
{
    motors_all_off();
    for (;;) {
        Serial.println(why);
        delay(1000);
    }
}

}  // namespace

void setup()
{
    // After a panic, brown-out, watchdog or reset the PCA9685 still drives
    // the last duties: every output off before anything else runs.
    const bool off = motors_all_off();

    Serial.begin(115200);
    Serial.printf("reset reason %d, outputs off: %s\n", (int)esp_reset_reason(),
                  off ? "yes" : "NO ACK");
    s_motor_ok_at_boot = off && motors_begin();
    const bool gyro = imu_begin();  // on the bus the PCA9685 started; the kit has none
    const bool camera_ok = camera_begin();

    WiFi.mode(WIFI_STA);
    WiFi.setSleep(false);  // modem sleep adds tens of ms of command latency
    WiFi.setAutoReconnect(true);
    WiFi.begin(WIFI_SSID, WIFI_PASSWORD);

    // esp_random() is a true RNG only while the radio is on: draw after WiFi.begin().
    const uint32_t boot_nonce = esp_random();
    const uint32_t token = esp_random();
    if (!car_link_init(car_robot_id(), boot_nonce, token, s_motor_ok_at_boot, camera_ok)) {
        halt("fatal: car state init failed");
    }
    s_watchdog_ok = task_watchdog_init();
    if (!s_watchdog_ok) {
        Serial.println("task watchdog: configuration failed, the car will refuse ARM");
    }
    // The safety task runs from here on, Wi-Fi or not. Without it nothing
    // would run the MZ01 watchdog, so a failed creation stops the car here.
    if (xTaskCreatePinnedToCore(safety_task, "safety", SAFETY_TASK_STACK, nullptr,
                                SAFETY_TASK_PRIO, nullptr, SAFETY_TASK_CORE) != pdPASS) {
        halt("fatal: cannot create the safety task");
    }

    Serial.printf("stigmesh car id %u boot %08lx motor_ok %d camera_ok %d gyro %d (zero %.2f deg/s)\n",
                  (unsigned)car_robot_id(), (unsigned long)boot_nonce, s_motor_ok_at_boot,
                  camera_ok, gyro, (double)imu_zero_dps());
    while (WiFi.status() != WL_CONNECTED) {
        delay(250);
    }
    Serial.printf("wifi: %s rssi %d dBm\n", WiFi.localIP().toString().c_str(), WiFi.RSSI());

    if (!car_link_start()) {
        Serial.println("link: cannot open UDP 4210/4211");
    }
    if (!camera_ok || !camera_server_start(boot_nonce)) {
        Serial.println("camera: not streaming (camera_ok stays false, ARM is refused)");
    }
    advertise(boot_nonce);
}

void loop()
{
    vTaskDelete(nullptr);  // core 1 belongs to the safety task
}
