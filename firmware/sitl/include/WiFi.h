// WiFi.h - SITL stand-in for Arduino-ESP32's WiFi: the station is the car's
// loopback address in the simulated network; it is connected unless the
// world holds the link down. RSSI is 0, as MZ01.md says for simulation.
#pragma once

#include <stdint.h>

#include "Arduino.h"

typedef enum { WIFI_OFF = 0, WIFI_STA = 1, WIFI_AP = 2, WIFI_AP_STA = 3 } wifi_mode_t;
typedef enum {
    WL_IDLE_STATUS = 0,
    WL_NO_SSID_AVAIL = 1,
    WL_CONNECTED = 3,
    WL_CONNECT_FAILED = 4,
    WL_CONNECTION_LOST = 5,
    WL_DISCONNECTED = 6,
} wl_status_t;

class IPAddress {
public:
    IPAddress() = default;
    explicit IPAddress(uint32_t host_order) : ip_(host_order) {}
    String toString() const;

private:
    uint32_t ip_ = 0;
};

class WiFiClass {
public:
    bool mode(wifi_mode_t mode);
    bool setSleep(bool enabled);
    bool setAutoReconnect(bool enabled);
    wl_status_t begin(const char *ssid, const char *passphrase = nullptr);
    wl_status_t status();
    bool isConnected();
    IPAddress localIP();
    int8_t RSSI();

private:
    bool begun_ = false;
};
extern WiFiClass WiFi;
