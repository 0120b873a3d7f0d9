// arduino.cpp - the Arduino-ESP32 calls of the sketch for the SITL car:
// Serial (lines to the world's log), timing on the car's clock, GPIO levels,
// PSRAM (the WROVER has it), Wi-Fi (the world's link), mDNS (reported to the
// world), esp_random and the reset reason.
#include <stdarg.h>
#include <stdio.h>
#include <sys/random.h>

#include <mutex>
#include <string>

#include "Arduino.h"
#include "ESPmDNS.h"
#include "WiFi.h"
#include "esp_random.h"
#include "esp_system.h"
#include "sitl.h"

HardwareSerial Serial;
WiFiClass WiFi;
MDNSResponder MDNS;

namespace {

std::mutex s_serial_lock;
std::string s_serial_line;  // guarded by s_serial_lock
uint8_t s_gpio[64];

size_t serial_write(const char *text, size_t len)
{
    std::lock_guard<std::mutex> hold(s_serial_lock);
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\n') {
            sitl::serial_line(s_serial_line);
            s_serial_line.clear();
        } else if (text[i] != '\r') {
            s_serial_line.push_back(text[i]);
        }
    }
    return len;
}

std::string json_escape(const char *s)
{
    std::string out;
    for (; *s != '\0'; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out.push_back('\\');
            out.push_back((char)c);
        } else if (c >= 0x20 && c < 0x7F) {
            out.push_back((char)c);
        }
    }
    return out;
}

}  // namespace

// ---- Serial --------------------------------------------------------------------

void HardwareSerial::begin(unsigned long) {}

size_t HardwareSerial::print(const char *text)
{
    return serial_write(text, strlen(text));
}

size_t HardwareSerial::println(const char *text)
{
    return print(text) + println();
}

size_t HardwareSerial::println()
{
    return serial_write("\n", 1);
}

size_t HardwareSerial::printf(const char *format, ...)
{
    char text[512];
    va_list args;
    va_start(args, format);
    const int n = vsnprintf(text, sizeof text, format, args);
    va_end(args);
    if (n < 0) {
        return 0;
    }
    return serial_write(text, (size_t)n < sizeof text ? (size_t)n : sizeof text - 1);
}

// ---- timing and pins ---------------------------------------------------------

unsigned long millis()
{
    return (unsigned long)(sitl::uptime_us() / 1000ULL);
}

unsigned long micros()
{
    return (unsigned long)sitl::uptime_us();
}

void delay(uint32_t ms)
{
    vTaskDelay(pdMS_TO_TICKS(ms));
}

void delayMicroseconds(uint32_t us)
{
    sitl::sleep_until_mono(sitl::mono_now() + us / 1e6);
}

void pinMode(uint8_t, uint8_t) {}

void digitalWrite(uint8_t pin, uint8_t value)
{
    if (pin < sizeof s_gpio) {
        s_gpio[pin] = value != LOW ? HIGH : LOW;
    }
}

int digitalRead(uint8_t pin)
{
    return pin < sizeof s_gpio ? s_gpio[pin] : LOW;
}

bool psramFound()
{
    return true;  // the ESP32-WROVER carries 4 or 8 MB of PSRAM
}

// ---- Wi-Fi -----------------------------------------------------------------------

String IPAddress::toString() const
{
    char text[16];
    snprintf(text, sizeof text, "%u.%u.%u.%u", (unsigned)(ip_ >> 24), (unsigned)(ip_ >> 16) & 0xFF,
             (unsigned)(ip_ >> 8) & 0xFF, (unsigned)ip_ & 0xFF);
    return String(text);
}

bool WiFiClass::mode(wifi_mode_t mode)
{
    return mode == WIFI_STA;
}

bool WiFiClass::setSleep(bool)
{
    return true;
}

bool WiFiClass::setAutoReconnect(bool)
{
    return true;
}

wl_status_t WiFiClass::begin(const char *, const char *)
{
    begun_ = true;
    return status();
}

wl_status_t WiFiClass::status()
{
    return begun_ && sitl::link_up() ? WL_CONNECTED : WL_DISCONNECTED;
}

bool WiFiClass::isConnected()
{
    return status() == WL_CONNECTED;
}

IPAddress WiFiClass::localIP()
{
    return IPAddress(isConnected() ? sitl::options().address_ip : 0);
}

int8_t WiFiClass::RSSI()
{
    return 0;  // MZ01.md: 0 in simulation
}

// ---- mDNS ------------------------------------------------------------------------

bool MDNSResponder::begin(const char *host_name)
{
    return sitl::world_sendf('T', "{\"ev\":\"mdns\",\"host\":\"%s\"}",
                             json_escape(host_name).c_str());
}

bool MDNSResponder::addService(const char *service, const char *proto, uint16_t port)
{
    return sitl::world_sendf('T', "{\"ev\":\"mdns\",\"service\":\"%s.%s\",\"port\":%u}",
                             json_escape(service).c_str(), json_escape(proto).c_str(),
                             (unsigned)port);
}

void MDNSResponder::addServiceTxt(const char *name, const char *proto, const char *key,
                                  const char *value)
{
    sitl::world_sendf('T', "{\"ev\":\"mdns\",\"service\":\"%s.%s\",\"txt\":[\"%s\",\"%s\"]}",
                      json_escape(name).c_str(), json_escape(proto).c_str(),
                      json_escape(key).c_str(), json_escape(value).c_str());
}

// ---- chip ------------------------------------------------------------------------

extern "C" uint32_t esp_random(void)
{
    static std::mutex lock;
    static size_t next = 0;
    std::lock_guard<std::mutex> hold(lock);
    if (next < sitl::options().randoms.size()) {
        return sitl::options().randoms[next++];
    }
    uint32_t value = 0;
    while (getrandom(&value, sizeof value, 0) != (ssize_t)sizeof value) {
    }
    return value;
}

extern "C" esp_reset_reason_t esp_reset_reason(void)
{
    return (esp_reset_reason_t)sitl::options().reset_reason;
}
