// camera_stream.cpp - see camera_stream.h.
//
// The stream is written on a plain lwIP TCP socket, not esp_http_server:
// that server's chunked transfer encoding would break the raw
// multipart/x-mixed-replace framing that protocol/mjpeg.py reads. One client
// at a time; a second one waits in the listen backlog.
#include "camera_stream.h"

#include <Arduino.h>
#include <esp_camera.h>
#include <freertos/FreeRTOS.h>
#include <freertos/semphr.h>
#include <freertos/task.h>
#include <lwip/sockets.h>
#include <stdio.h>
#include <string.h>

#include "car_config.h"
#include "car_link.h"

namespace {

constexpr uint64_t FRAME_INTERVAL_US = 1000000ULL / CAM_MAX_FPS;  // at most 12 fps
constexpr uint64_t HEALTH_WINDOW_US = (uint64_t)CAM_HEALTH_WINDOW_MS * 1000ULL;
constexpr int SOCKET_TIMEOUT_S = 2;

// Exactly the head and part format of protocol/mjpeg.py.
const char RESPONSE_HEAD[] =
    "HTTP/1.1 200 OK\r\n"
    "Content-Type: multipart/x-mixed-replace; boundary=stigmeshframe\r\n"
    "Cache-Control: no-store\r\n"
    "Connection: close\r\n\r\n";
const char NOT_FOUND[] =
    "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

SemaphoreHandle_t s_camera_mutex = nullptr;  // one esp_camera_fb_get user at a time
portMUX_TYPE s_health_lock = portMUX_INITIALIZER_UNLOCKED;
bool s_camera_up = false;
uint64_t s_last_frame_us = 0;  // guarded by s_health_lock
uint32_t s_boot_nonce = 0;
uint64_t s_frame_seq = 0;  // per boot, across connections (server task only)

void note_frame(uint64_t now_us)
{
    taskENTER_CRITICAL(&s_health_lock);
    s_last_frame_us = now_us;
    taskEXIT_CRITICAL(&s_health_lock);
}

// The frame's capture time on the car's uptime clock. esp32-camera 2.x
// stamps each frame buffer with esp_timer_get_time() at capture (verify for
// your esp32-camera version: very old ones used gettimeofday). A stamp that
// cannot be uptime is refused, never replaced by the send time.
bool capture_time_us(const camera_fb_t *fb, uint64_t now_us, uint64_t *out)
{
    const uint64_t t = (uint64_t)fb->timestamp.tv_sec * 1000000ULL + (uint64_t)fb->timestamp.tv_usec;
    if (t == 0 || t > now_us) {
        return false;
    }
    *out = t;
    return true;
}

bool send_all(int sock, const void *data, size_t len)
{
    const uint8_t *p = static_cast<const uint8_t *>(data);
    while (len > 0) {
        const int n = send(sock, p, len, 0);
        if (n <= 0) {
            return false;
        }
        p += n;
        len -= (size_t)n;
    }
    return true;
}

// Reads the request head and says whether it asks for GET /stream.
bool wants_stream(int sock)
{
    char req[1024];
    size_t used = 0;
    while (used < sizeof req - 1) {
        const int n = recv(sock, req + used, sizeof req - 1 - used, 0);
        if (n <= 0) {
            return false;
        }
        used += (size_t)n;
        req[used] = '\0';
        if (strstr(req, "\r\n\r\n") != nullptr) {
            break;
        }
    }
    return strncmp(req, "GET /stream ", 12) == 0 || strncmp(req, "GET /stream?", 12) == 0;
}

// Sends the newest frame at most every FRAME_INTERVAL_US until the client
// goes away or the camera fails.
void stream_frames(int sock)
{
    if (!send_all(sock, RESPONSE_HEAD, sizeof RESPONSE_HEAD - 1)) {
        return;
    }
    uint64_t next_us = 0;
    for (;;) {
        const uint64_t before = car_uptime_us();
        if (before < next_us) {
            vTaskDelay(pdMS_TO_TICKS((uint32_t)((next_us - before + 999) / 1000)));
        }
        xSemaphoreTake(s_camera_mutex, portMAX_DELAY);
        camera_fb_t *fb = esp_camera_fb_get();  // CAMERA_GRAB_LATEST: the newest frame
        if (fb == nullptr) {
            xSemaphoreGive(s_camera_mutex);
            return;  // the camera stopped; camera_ok goes false by itself
        }
        const uint64_t now = car_uptime_us();
        uint64_t captured_us = 0;
        bool sent = true;
        if (fb->format == PIXFORMAT_JPEG && fb->len > 0 && capture_time_us(fb, now, &captured_us)) {
            note_frame(now);
            char head[192];
            const int n = snprintf(head, sizeof head,
                                   "--stigmeshframe\r\n"
                                   "Content-Type: image/jpeg\r\n"
                                   "Content-Length: %u\r\n"
                                   "X-Capture-Ms: %llu\r\n"
                                   "X-Boot-Id: %08lx\r\n"
                                   "X-Frame-Seq: %llu\r\n\r\n",
                                   (unsigned)fb->len, (unsigned long long)(captured_us / 1000ULL),
                                   (unsigned long)s_boot_nonce, (unsigned long long)(++s_frame_seq));
            sent = n > 0 && (size_t)n < sizeof head && send_all(sock, head, (size_t)n) &&
                   send_all(sock, fb->buf, fb->len) && send_all(sock, "\r\n", 2);
        }
        esp_camera_fb_return(fb);
        xSemaphoreGive(s_camera_mutex);
        if (!sent) {
            return;
        }
        next_us = now + FRAME_INTERVAL_US;
    }
}

void server_task(void *)
{
    const int one = 1;
    const int listener = socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
    sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons(CAR_PORT_CAMERA);
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    if (listener >= 0) {
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    }
    if (listener < 0 || bind(listener, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 ||
        listen(listener, 1) != 0) {
        Serial.println("camera: cannot listen on TCP 8080");
        vTaskDelete(nullptr);
        return;
    }
    for (;;) {
        const int client = accept(listener, nullptr, nullptr);
        if (client < 0) {
            vTaskDelay(pdMS_TO_TICKS(100));
            continue;
        }
        timeval tv;
        tv.tv_sec = SOCKET_TIMEOUT_S;
        tv.tv_usec = 0;
        setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (wants_stream(client)) {
            stream_frames(client);
        } else {
            send_all(client, NOT_FOUND, sizeof NOT_FOUND - 1);
        }
        close(client);
    }
}

// Keeps camera_ok fresh while nobody streams.
void watch_task(void *)
{
    for (;;) {
        vTaskDelay(pdMS_TO_TICKS(250));
        if (xSemaphoreTake(s_camera_mutex, 0) != pdTRUE) {
            continue;  // a stream holds the camera and reports health itself
        }
        camera_fb_t *fb = esp_camera_fb_get();
        if (fb != nullptr) {
            if (fb->len > 0) {
                note_frame(car_uptime_us());
            }
            esp_camera_fb_return(fb);
        }
        xSemaphoreGive(s_camera_mutex);
    }
}

}  // namespace

bool camera_begin()
{
    if (!psramFound()) {
        Serial.println("camera: no PSRAM; refusing to run without the double buffer");
        return false;
    }
    camera_config_t c;
    memset(&c, 0, sizeof c);
    c.pin_pwdn = CAM_PIN_PWDN;
    c.pin_reset = CAM_PIN_RESET;
    c.pin_xclk = CAM_PIN_XCLK;
    c.pin_sccb_sda = CAM_PIN_SIOD;  // esp32-camera's own SCCB I2C port, not Wire's
    c.pin_sccb_scl = CAM_PIN_SIOC;
    c.pin_d7 = CAM_PIN_D7;
    c.pin_d6 = CAM_PIN_D6;
    c.pin_d5 = CAM_PIN_D5;
    c.pin_d4 = CAM_PIN_D4;
    c.pin_d3 = CAM_PIN_D3;
    c.pin_d2 = CAM_PIN_D2;
    c.pin_d1 = CAM_PIN_D1;
    c.pin_d0 = CAM_PIN_D0;
    c.pin_vsync = CAM_PIN_VSYNC;
    c.pin_href = CAM_PIN_HREF;
    c.pin_pclk = CAM_PIN_PCLK;
    c.xclk_freq_hz = CAM_XCLK_HZ;
    c.ledc_timer = LEDC_TIMER_0;
    c.ledc_channel = LEDC_CHANNEL_0;
    c.pixel_format = PIXFORMAT_JPEG;
    c.frame_size = FRAMESIZE_QVGA;  // 320 x 240
    c.jpeg_quality = CAM_JPEG_QUALITY;
    c.fb_count = 2;                        // double buffer ...
    c.fb_location = CAMERA_FB_IN_PSRAM;    // ... in PSRAM
    c.grab_mode = CAMERA_GRAB_LATEST;      // always the newest frame; late ones are dropped
    const esp_err_t err = esp_camera_init(&c);
    if (err != ESP_OK) {
        Serial.printf("camera: init failed 0x%x\n", (unsigned)err);
        return false;
    }
    s_camera_mutex = xSemaphoreCreateMutex();
    s_camera_up = s_camera_mutex != nullptr;
    return s_camera_up;
}

bool camera_healthy(uint64_t now_us)
{
    if (!s_camera_up) {
        return false;
    }
    taskENTER_CRITICAL(&s_health_lock);
    const uint64_t last = s_last_frame_us;
    taskEXIT_CRITICAL(&s_health_lock);
    if (last == 0) {
        return false;
    }
    // A frame noted by another task just after the caller read its clock
    // counts as fresh.
    return last >= now_us || now_us - last < HEALTH_WINDOW_US;
}

bool camera_server_start(uint32_t boot_nonce)
{
    if (!s_camera_up) {
        return false;
    }
    s_boot_nonce = boot_nonce;
    BaseType_t ok = xTaskCreatePinnedToCore(server_task, "mjpeg", CAMERA_TASK_STACK, nullptr,
                                            CAMERA_TASK_PRIO, nullptr, NET_TASK_CORE);
    ok = ok == pdPASS ? xTaskCreatePinnedToCore(watch_task, "cam_watch", 3072, nullptr,
                                                CAMERA_WATCH_PRIO, nullptr, NET_TASK_CORE)
                      : ok;
    return ok == pdPASS;
}
