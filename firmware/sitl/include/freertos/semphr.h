// freertos/semphr.h - SITL stand-in: a FreeRTOS mutex as a POSIX mutex with
// timed takes on the car's tick.
#pragma once

#include "FreeRTOS.h"

struct sitl_semaphore;
typedef struct sitl_semaphore *SemaphoreHandle_t;

SemaphoreHandle_t xSemaphoreCreateMutex(void);
BaseType_t xSemaphoreTake(SemaphoreHandle_t sem, TickType_t ticks);
BaseType_t xSemaphoreGive(SemaphoreHandle_t sem);
