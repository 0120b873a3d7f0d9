// Arduino.h - SITL stand-in for the Arduino-ESP32 core's header: the types
// and calls the stigmesh sketch uses (Serial, String, timing, GPIO, PSRAM),
// on POSIX. See firmware/README.md, "SITL".
#pragma once

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>

#include "esp_timer.h"
#include "freertos/FreeRTOS.h"
#include "freertos/task.h"

#define LOW 0x0
#define HIGH 0x1
#define INPUT 0x01
#define OUTPUT 0x03

class String {
public:
    String() = default;
    String(const char *s) : s_(s != nullptr ? s : "") {}
    explicit String(std::string s) : s_(std::move(s)) {}
    const char *c_str() const { return s_.c_str(); }
    size_t length() const { return s_.size(); }

private:
    std::string s_;
};

// Serial: whole lines go to the world (firmware/sitl/src/world_link.cpp), or to
// stderr when there is no world.
class HardwareSerial {
public:
    void begin(unsigned long baud);
    size_t print(const char *text);
    size_t println(const char *text);
    size_t println();
    size_t printf(const char *format, ...) __attribute__((format(printf, 2, 3)));
};
extern HardwareSerial Serial;

unsigned long millis();
unsigned long micros();
void delay(uint32_t ms);
void delayMicroseconds(uint32_t us);
void pinMode(uint8_t pin, uint8_t mode);
void digitalWrite(uint8_t pin, uint8_t value);
int digitalRead(uint8_t pin);
bool psramFound();
