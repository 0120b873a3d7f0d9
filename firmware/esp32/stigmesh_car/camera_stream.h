// camera_stream.h - the OV2640 (esp32-camera, QVGA JPEG, two frame buffers
// in PSRAM, grab-latest) and the MJPEG stream on TCP 8080, GET /stream.
#pragma once

#include <stdbool.h>
#include <stdint.h>

// Initialises the camera. Returns false when the sensor does not answer.
bool camera_begin();

// True while the camera delivered a frame within CAM_HEALTH_WINDOW_MS.
// Safe to call from any task (reads one 64-bit timestamp under a lock).
bool camera_healthy(uint64_t now_us);

// Starts the MJPEG server task and the health watcher on core 0.
bool camera_server_start(uint32_t boot_nonce);
