// camera.cpp - esp32-camera for the SITL car: esp_camera_fb_get() asks the
// world for the newest frame ('R') and waits for it ('F' or 'f') up to the
// driver's 4 s frame timeout. The frame is the world's render of the car's
// camera at the time of the request, JPEG, stamped with the car's uptime at
// capture (as esp32-camera 2.x stamps fb->timestamp).
#include <stdio.h>
#include <string.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "esp_camera.h"
#include "sitl.h"

namespace {

constexpr auto FB_TIMEOUT = std::chrono::milliseconds(4000);

std::mutex s_lock;
std::condition_variable s_arrived;
bool s_initialised = false;
uint32_t s_next_id = 1;
uint32_t s_waiting = 0;  // the request id being waited for, 0: none
bool s_done = false;
bool s_ok = false;
uint64_t s_capture_us = 0;
std::vector<uint8_t> s_jpeg;

}  // namespace

namespace sitl {

void camera_deliver(uint32_t id, bool ok, uint64_t capture_us, const uint8_t *jpeg, size_t len)
{
    std::lock_guard<std::mutex> hold(s_lock);
    if (id != s_waiting || s_done) {
        return;  // an answer to a request that timed out
    }
    s_done = true;
    s_ok = ok && len > 0;
    s_capture_us = capture_us;
    s_jpeg.assign(jpeg, jpeg + len);
    s_arrived.notify_all();
}

}  // namespace sitl

extern "C" esp_err_t esp_camera_init(const camera_config_t *config)
{
    if (config == nullptr || config->pixel_format != PIXFORMAT_JPEG ||
        config->frame_size != FRAMESIZE_QVGA || config->fb_count < 1) {
        return ESP_ERR_CAMERA_NOT_SUPPORTED;  // the world renders QVGA JPEG only
    }
    std::lock_guard<std::mutex> hold(s_lock);
    s_initialised = true;
    return ESP_OK;
}

extern "C" camera_fb_t *esp_camera_fb_get(void)
{
    static std::mutex one_at_a_time;
    std::lock_guard<std::mutex> turn(one_at_a_time);
    std::unique_lock<std::mutex> hold(s_lock);
    if (!s_initialised) {
        return nullptr;
    }
    const uint32_t id = s_next_id++;
    s_waiting = id;
    s_done = false;
    hold.unlock();
    const bool asked = sitl::world_sendf('R', "{\"us\":%llu,\"id\":%u}",
                                         (unsigned long long)sitl::uptime_us(), (unsigned)id);
    hold.lock();
    if (!asked || !s_arrived.wait_for(hold, FB_TIMEOUT, [] { return s_done; }) || !s_ok) {
        s_waiting = 0;
        return nullptr;
    }
    s_waiting = 0;
    auto *fb = new camera_fb_t;
    fb->buf = new uint8_t[s_jpeg.size()];
    memcpy(fb->buf, s_jpeg.data(), s_jpeg.size());
    fb->len = s_jpeg.size();
    fb->width = 320;
    fb->height = 240;
    fb->format = PIXFORMAT_JPEG;
    fb->timestamp.tv_sec = (time_t)(s_capture_us / 1000000ULL);
    fb->timestamp.tv_usec = (suseconds_t)(s_capture_us % 1000000ULL);
    return fb;
}

extern "C" void esp_camera_fb_return(camera_fb_t *fb)
{
    if (fb != nullptr) {
        delete[] fb->buf;
        delete fb;
    }
}
