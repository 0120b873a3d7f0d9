// secrets.h - the SITL car's Wi-Fi: the simulated world is the network.
#pragma once

#define WIFI_SSID "stigmesh-sitl"
#define WIFI_PASSWORD ""
