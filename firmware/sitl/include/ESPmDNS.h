// ESPmDNS.h - SITL stand-in for Arduino-ESP32's MDNSResponder: the host name,
// services and TXT records are reported to the world, which logs them.
#pragma once

#include <stdint.h>

class MDNSResponder {
public:
    bool begin(const char *host_name);
    bool addService(const char *service, const char *proto, uint16_t port);
    void addServiceTxt(const char *name, const char *proto, const char *key, const char *value);
};
extern MDNSResponder MDNS;
