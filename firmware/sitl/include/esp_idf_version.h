// esp_idf_version.h - SITL stand-in: the ESP-IDF under Arduino-ESP32 3.0.x.
#pragma once

#define ESP_IDF_VERSION_MAJOR 5
#define ESP_IDF_VERSION_MINOR 1
#define ESP_IDF_VERSION_PATCH 4
#define ESP_IDF_VERSION_VAL(major, minor, patch) (((major) << 16) | ((minor) << 8) | (patch))
#define ESP_IDF_VERSION \
    ESP_IDF_VERSION_VAL(ESP_IDF_VERSION_MAJOR, ESP_IDF_VERSION_MINOR, ESP_IDF_VERSION_PATCH)
