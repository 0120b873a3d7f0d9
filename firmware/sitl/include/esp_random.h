// esp_random.h - SITL stand-in: the world's draws first (the boot nonce and
// token it expects), then the host's random source.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
uint32_t esp_random(void);
#ifdef __cplusplus
}
#endif
