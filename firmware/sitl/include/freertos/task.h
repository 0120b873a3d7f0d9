// freertos/task.h - SITL stand-in: tasks as POSIX threads, delays on the
// car's uptime clock, critical sections on the portMUX mutex.
#pragma once

#include <stdint.h>

#include "FreeRTOS.h"

struct sitl_task;
typedef struct sitl_task *TaskHandle_t;
typedef void (*TaskFunction_t)(void *);

BaseType_t xTaskCreatePinnedToCore(TaskFunction_t code, const char *name, uint32_t stack_bytes,
                                   void *arg, UBaseType_t priority, TaskHandle_t *created,
                                   BaseType_t core);
void vTaskDelete(TaskHandle_t task);
void vTaskDelay(TickType_t ticks);
void vTaskDelayUntil(TickType_t *previous_wake, TickType_t period);
TickType_t xTaskGetTickCount(void);
TaskHandle_t xTaskGetCurrentTaskHandle(void);

#define taskENTER_CRITICAL(mux) portENTER_CRITICAL(mux)
#define taskEXIT_CRITICAL(mux) portEXIT_CRITICAL(mux)
