// freertos.cpp - FreeRTOS for the SITL car: each task a POSIX thread, the
// tick 1 ms of the car's uptime, portMUX critical sections and FreeRTOS
// mutexes on POSIX mutexes, and ESP-IDF's task watchdog as a thread.
//
// Priorities: FreeRTOS preempts by priority, so each task runs SCHED_FIFO at
// 1 + its FreeRTOS priority (the safety task above every other task of the
// car and above the host's ordinary processes; the watchdog thread, the chip's
// timer interrupt, above all), where the host allows it (CAP_SYS_NICE, as
// root); otherwise at normal priority, said once on Serial. Not emulated: core
// pinning, stack sizes (host stacks are 256 KiB), the interrupt masking of a
// critical section (its holder can still be preempted by a higher task).
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "esp_task_wdt.h"
#include "freertos/FreeRTOS.h"
#include "freertos/semphr.h"
#include "freertos/task.h"
#include "sitl.h"

struct sitl_task {
    std::string name;
    TaskFunction_t code;
    void *arg;
    UBaseType_t priority;
    BaseType_t core;
};

struct sitl_semaphore {
    pthread_mutex_t mutex;
};

namespace {

constexpr size_t HOST_STACK = 256 * 1024;
constexpr int WATCHDOG_RT_PRIORITY = configMAX_PRIORITIES + 1;

// SCHED_FIFO at `priority` for this thread; says once when the host refuses.
void realtime(pthread_t thread, int priority)
{
    static bool told = false;
    sched_param param = {};
    param.sched_priority = priority;
    const int err = pthread_setschedparam(thread, SCHED_FIFO, &param);
    if (err != 0 && !told) {
        told = true;
        char line[128];
        snprintf(line, sizeof line, "sitl: no real-time priorities here (%s): tasks share the CPU",
                 strerror(err));
        sitl::serial_line(line);
    }
}

thread_local sitl_task *t_current = nullptr;  // the task this thread runs (none: main)

void *task_main(void *p)
{
    t_current = static_cast<sitl_task *>(p);
    t_current->code(t_current->arg);
    // A FreeRTOS task must never return from its function.
    char why[96];
    snprintf(why, sizeof why, "task %s returned from its function", t_current->name.c_str());
    sitl::fatal(why);
}

timespec mono_timespec(double mono)
{
    const int64_t ns = (int64_t)(mono * 1e9);
    timespec ts;
    ts.tv_sec = (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    return ts;
}

}  // namespace

BaseType_t xTaskCreatePinnedToCore(TaskFunction_t code, const char *name, uint32_t, void *arg,
                                   UBaseType_t priority, TaskHandle_t *created, BaseType_t core)
{
    if (code == nullptr || priority >= (UBaseType_t)configMAX_PRIORITIES || core < 0 || core > 1) {
        return errCOULD_NOT_ALLOCATE_REQUIRED_MEMORY;
    }
    auto *task = new sitl_task{name != nullptr ? name : "", code, arg, priority, core};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, HOST_STACK);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    const int err = pthread_create(&thread, &attr, task_main, task);
    pthread_attr_destroy(&attr);
    if (err != 0) {
        delete task;
        return errCOULD_NOT_ALLOCATE_REQUIRED_MEMORY;
    }
    pthread_setname_np(thread, task->name.substr(0, 15).c_str());
    realtime(thread, 1 + (int)priority);
    if (created != nullptr) {
        *created = task;
    }
    return pdPASS;
}

void vTaskDelete(TaskHandle_t task)
{
    if (t_current == nullptr || (task != nullptr && task != t_current)) {
        sitl::fatal("vTaskDelete of another task, or outside a task, is not supported by the SITL platform");
    }
    pthread_exit(nullptr);  // the process lives on in its other tasks
}

TickType_t xTaskGetTickCount(void)
{
    return (TickType_t)(sitl::uptime_us() / 1000ULL);
}

TaskHandle_t xTaskGetCurrentTaskHandle(void)
{
    return t_current;
}

void vTaskDelay(TickType_t ticks)
{
    const uint64_t until = sitl::uptime_us() + (uint64_t)ticks * 1000ULL;
    sitl::sleep_until_mono(sitl::mono_at_uptime(until));
}

// Blocks until the tick count reaches *previous_wake + period, then sets
// *previous_wake to that tick; returns at once when that tick has passed.
void vTaskDelayUntil(TickType_t *previous_wake, TickType_t period)
{
    *previous_wake += period;
    const uint64_t now_us = sitl::uptime_us();
    const int32_t ahead = (int32_t)(*previous_wake - (TickType_t)(now_us / 1000ULL));
    if (ahead <= 0) {
        return;
    }
    const uint64_t wake_us = (now_us / 1000ULL + (uint64_t)ahead) * 1000ULL;
    sitl::sleep_until_mono(sitl::mono_at_uptime(wake_us));
}

void vPortEnterCritical(portMUX_TYPE *mux)
{
    pthread_mutex_lock(&mux->mutex);
}

void vPortExitCritical(portMUX_TYPE *mux)
{
    pthread_mutex_unlock(&mux->mutex);
}

SemaphoreHandle_t xSemaphoreCreateMutex(void)
{
    auto *sem = new sitl_semaphore;
    pthread_mutex_init(&sem->mutex, nullptr);
    return sem;
}

BaseType_t xSemaphoreTake(SemaphoreHandle_t sem, TickType_t ticks)
{
    if (ticks == 0) {
        return pthread_mutex_trylock(&sem->mutex) == 0 ? pdTRUE : pdFALSE;
    }
    if (ticks == portMAX_DELAY) {
        return pthread_mutex_lock(&sem->mutex) == 0 ? pdTRUE : pdFALSE;
    }
    const double until = sitl::mono_now() + (double)ticks / configTICK_RATE_HZ;
    const timespec ts = mono_timespec(until);
    return pthread_mutex_clocklock(&sem->mutex, CLOCK_MONOTONIC, &ts) == 0 ? pdTRUE : pdFALSE;
}

BaseType_t xSemaphoreGive(SemaphoreHandle_t sem)
{
    return pthread_mutex_unlock(&sem->mutex) == 0 ? pdTRUE : pdFALSE;
}

// ---- the task watchdog -------------------------------------------------------
//
// As in Arduino-ESP32 3.x, the framework has started it (5 s, no panic) before
// setup(): esp_task_wdt_init() then answers ESP_ERR_INVALID_STATE and
// esp_task_wdt_reconfigure() applies. A subscribed task silent for timeout_ms
// is reported as ESP-IDF does; with trigger_panic the car panics: the process
// tells the world and exits, and the world resets the car.
//
// Silence is counted by the watchdog's own rounds (every timeout/20), each
// adding at most two rounds' time: a host that freezes the whole process (a
// busy machine; the chip never stops) is not the firmware's stall, a task
// that stays silent while the watchdog runs is.

namespace {

std::mutex s_wdt_lock;
esp_task_wdt_config_t s_wdt_config = {5000, 0, false};  // guarded by s_wdt_lock
struct Silence {
    double counted = 0.0;  // s of silence counted
    double since = 0.0;    // mono s up to which it is counted
};
std::map<sitl_task *, Silence> s_wdt_silent;
bool s_wdt_thread = false;

void wdt_watch()
{
    pthread_setname_np(pthread_self(), "task_wdt");
    realtime(pthread_self(), WATCHDOG_RT_PRIORITY);
    for (;;) {
        double period;
        {
            std::lock_guard<std::mutex> hold(s_wdt_lock);
            period = s_wdt_config.timeout_ms / 1000.0 / 20.0;
        }
        period = period < 0.005 ? 0.005 : period;
        std::this_thread::sleep_for(std::chrono::duration<double>(period));
        std::lock_guard<std::mutex> hold(s_wdt_lock);
        const double now = sitl::mono_now();
        const double timeout = s_wdt_config.timeout_ms / 1000.0;
        for (auto &entry : s_wdt_silent) {
            Silence &silence = entry.second;
            const double round = now - silence.since;
            silence.counted += round < 2 * period ? round : 2 * period;
            silence.since = now;
            if (silence.counted < timeout) {
                continue;
            }
            char line[160];
            snprintf(line, sizeof line,
                     "E task_wdt: Task watchdog got triggered. The following tasks did not reset "
                     "the watchdog in time: %s (CPU %d), silent %.0f ms",
                     entry.first->name.c_str(), entry.first->core, silence.counted * 1000.0);
            sitl::serial_line(line);
            if (s_wdt_config.trigger_panic) {
                sitl::fatal("task watchdog");
            }
            silence = Silence{0.0, now};
        }
    }
}

}  // namespace

esp_err_t esp_task_wdt_init(const esp_task_wdt_config_t *)
{
    return ESP_ERR_INVALID_STATE;  // the framework started it
}

esp_err_t esp_task_wdt_reconfigure(const esp_task_wdt_config_t *config)
{
    if (config == nullptr || config->timeout_ms == 0) {
        return ESP_ERR_INVALID_ARG;
    }
    std::lock_guard<std::mutex> hold(s_wdt_lock);
    s_wdt_config = *config;
    return ESP_OK;
}

esp_err_t esp_task_wdt_add(TaskHandle_t task)
{
    sitl_task *t = task != nullptr ? task : t_current;
    std::lock_guard<std::mutex> hold(s_wdt_lock);
    if (s_wdt_silent.count(t) != 0) {
        return ESP_ERR_INVALID_ARG;
    }
    s_wdt_silent[t] = Silence{0.0, sitl::mono_now()};
    if (!s_wdt_thread) {
        s_wdt_thread = true;
        std::thread(wdt_watch).detach();
    }
    return ESP_OK;
}

esp_err_t esp_task_wdt_reset(void)
{
    std::lock_guard<std::mutex> hold(s_wdt_lock);
    auto it = s_wdt_silent.find(t_current);
    if (it == s_wdt_silent.end()) {
        return ESP_ERR_NOT_FOUND;
    }
    it->second = Silence{0.0, sitl::mono_now()};
    return ESP_OK;
}
