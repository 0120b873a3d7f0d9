// secrets.example.h - copy to secrets.h (git-ignored) and fill in.
#pragma once

#define WIFI_SSID "your-network"
#define WIFI_PASSWORD "your-password"
