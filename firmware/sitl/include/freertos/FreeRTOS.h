// freertos/FreeRTOS.h - SITL stand-in for ESP-IDF's FreeRTOS: the types,
// constants and spinlocks the sketch uses. Tasks are POSIX threads, the tick
// is 1 ms of the car's uptime clock (esp_timer), a portMUX spinlock is a
// mutex. Priorities and core pinning are recorded, not enforced.
#pragma once

#include <pthread.h>
#include <stdint.h>

typedef int BaseType_t;
typedef unsigned int UBaseType_t;
typedef uint32_t TickType_t;

#define pdFALSE ((BaseType_t)0)
#define pdTRUE ((BaseType_t)1)
#define pdPASS pdTRUE
#define pdFAIL pdFALSE
#define errCOULD_NOT_ALLOCATE_REQUIRED_MEMORY (-1)

#define configTICK_RATE_HZ 1000
#define configMAX_PRIORITIES 25
#define portTICK_PERIOD_MS ((TickType_t)1000 / configTICK_RATE_HZ)
#define portMAX_DELAY ((TickType_t)0xffffffffUL)
#define pdMS_TO_TICKS(ms) ((TickType_t)(((uint64_t)(ms) * configTICK_RATE_HZ) / 1000U))

typedef struct {
    pthread_mutex_t mutex;
} portMUX_TYPE;
#define portMUX_INITIALIZER_UNLOCKED {PTHREAD_MUTEX_INITIALIZER}

void vPortEnterCritical(portMUX_TYPE *mux);
void vPortExitCritical(portMUX_TYPE *mux);
#define portENTER_CRITICAL(mux) vPortEnterCritical(mux)
#define portEXIT_CRITICAL(mux) vPortExitCritical(mux)
