/*
 * mz01_core.h - the portable core of the stigmesh car firmware.
 *
 * Implements protocol/MZ01.md: the 32-byte command codec, the safety state
 * machine (HELLO, ARM, DRIVE, STOP, ESTOP, watchdog), the periodic telemetry
 * schedule, the MZC1 clock probe responder and the telemetry JSON object.
 *
 * Sans-IO: every function takes bytes and the car's uptime `now_us` and
 * returns results; sockets, timers, motors and locks belong to the caller.
 * No heap, no Arduino or ESP-IDF headers, no stdio. Not thread-safe: the
 * caller serialises every call that takes a `mz01_car *`.
 */
#ifndef MZ01_CORE_H
#define MZ01_CORE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h> /* size_t */

#ifdef __cplusplus
extern "C" {
#endif

/* Wire sizes and ports. */
#define MZ01_PACKET_LEN 32u
#define MZ01_PROBE_REQUEST_LEN 8u
#define MZ01_PROBE_REPLY_LEN 16u
#define MZ01_PORT_COMMAND 4210u
#define MZ01_PORT_PROBE 4211u
#define MZ01_PORT_CAMERA 8080u

/* Timing rules, integer microseconds / milliseconds. */
#define MZ01_TICK_US 5000u
#define MZ01_WATCHDOG_US 300000u
#define MZ01_TELEMETRY_PERIOD_US 100000u
/* d = int32(stamp_ms - uptime_ms) must lie in MZ01_STAMP_MIN_MS ..
 * MZ01_STAMP_MAX_MS (ARM and DRIVE; derivation in MZ01.md "Stamp window"). */
#define MZ01_STAMP_MIN_MS (-100)
#define MZ01_STAMP_MAX_MS 30

/* Telemetry: a datagram is at most 8192 bytes; the object this core writes
 * never exceeds MZ01_TELEMETRY_MAX_LEN characters (+1 for the NUL), so a
 * buffer of MZ01_TELEMETRY_BUF_LEN always suffices. */
#define MZ01_TELEMETRY_DATAGRAM_MAX 8192u
#define MZ01_TELEMETRY_MAX_LEN 320u
#define MZ01_TELEMETRY_BUF_LEN (MZ01_TELEMETRY_MAX_LEN + 1u)

/* Longest output of mz01_format_f32 ("-1.17549435e-38"), without the NUL. */
#define MZ01_F32_MAX_LEN 15u

/* Error returns of the formatting functions. */
#define MZ01_ERR_BUFFER (-1) /* the output does not fit: nothing usable written */
#define MZ01_ERR_ARG (-2)    /* a required pointer is NULL */

typedef enum {
    MZ01_KIND_HELLO = 1,
    MZ01_KIND_ARM = 2,
    MZ01_KIND_DRIVE = 3,
    MZ01_KIND_STOP = 4,
    MZ01_KIND_ESTOP = 5
} mz01_kind;

#define MZ01_FLAG_RESET_ESTOP 0x0001u

/* Every reason of MZ01.md. MZ01_REASON_NONE is the empty reason "". */
typedef enum {
    MZ01_REASON_NONE = 0,
    /* rejections */
    MZ01_REASON_BAD_LENGTH,
    MZ01_REASON_BAD_MAGIC,
    MZ01_REASON_WRONG_ROBOT,
    MZ01_REASON_BAD_KIND,
    MZ01_REASON_BAD_FLAGS,
    MZ01_REASON_BAD_WHEELS,
    MZ01_REASON_BAD_NONCE,
    MZ01_REASON_BAD_TOKEN,
    MZ01_REASON_STALE_STAMP,
    MZ01_REASON_NONZERO_WHEELS,
    MZ01_REASON_UNHEALTHY,
    MZ01_REASON_ESTOP_LATCHED,
    MZ01_REASON_NOT_ARMED,
    MZ01_REASON_NOT_BOUND,
    MZ01_REASON_STALE_SEQ,
    /* disarms */
    MZ01_REASON_WATCHDOG,
    MZ01_REASON_STOP,
    MZ01_REASON_ESTOP,
    MZ01_REASON_COUNT
} mz01_reason;

/* The exact string of MZ01.md ("" for MZ01_REASON_NONE); NULL when `r` is
 * not a reason. */
const char *mz01_reason_name(mz01_reason r);

/* Inverse of mz01_reason_name: true and *out set when `name` is one of the
 * strings (including ""); false otherwise. */
bool mz01_reason_from_name(const char *name, mz01_reason *out);

/* One decoded command datagram, fields as on the wire. */
typedef struct {
    uint8_t robot_id;
    uint8_t kind;
    uint16_t flags;
    uint32_t boot_nonce;
    uint32_t session_token;
    uint32_t seq;
    uint32_t stamp_ms;
    float left;
    float right;
} mz01_packet;

/* The codec checks of MZ01.md in order: length, magic, kind; then, for
 * HELLO, ARM and DRIVE only, flags and wheels (a STOP or ESTOP is decoded
 * whatever its flags and wheels hold, so *out may carry NaN wheels). Returns
 * MZ01_REASON_NONE and fills *out when the datagram passes; otherwise the
 * first failing reason, and *out is left untouched. The robot id and the
 * state checks are the state machine's business. `buf` may be NULL only when
 * `len` is 0. Wheels are checked on their bit pattern, never with float
 * arithmetic. */
mz01_reason mz01_decode(const uint8_t *buf, size_t len, mz01_packet *out);

/* Writes the 32 wire bytes of `p` without validating it (tests build bad
 * packets with it). */
void mz01_encode(const mz01_packet *p, uint8_t out[MZ01_PACKET_LEN]);

/* An IPv4 address as a u32 (a.b.c.d = a<<24 | b<<16 | c<<8 | d) and a port. */
typedef struct {
    uint32_t ip;
    uint16_t port;
} mz01_endpoint;

/* The car state of MZ01.md plus the telemetry schedule. Read it freely;
 * change it only through the functions below. */
typedef struct {
    uint8_t robot_id;
    uint32_t boot_nonce;
    uint32_t token;
    bool armed;
    bool estop;
    bool has_bound;
    mz01_endpoint bound;
    bool has_telemetry_to;
    mz01_endpoint telemetry_to;
    uint32_t last_seq;
    float left;
    float right;
    uint64_t last_feed_us;
    bool motor_ok;
    bool camera_ok;
    mz01_reason reason;
    uint64_t last_telemetry_us; /* time of the last periodic telemetry */
} mz01_car;

/* A fresh car at uptime 0. Returns false (and leaves *car zeroed and
 * unusable) when robot_id is 0: a car's id is 1..255. */
bool mz01_car_init(mz01_car *car, uint8_t robot_id, uint32_t boot_nonce,
                   uint32_t token, bool motor_ok, bool camera_ok);

/* Health from the hardware. It gates ARM; an armed car that is unhealthy at
 * its next tick is disarmed there with reason `unhealthy`. */
void mz01_car_set_health(mz01_car *car, bool motor_ok, bool camera_ok);

/* Where telemetry must be sent now: 0, 1 or 2 distinct destinations,
 * `telemetry_to` first. */
#define MZ01_MAX_DESTINATIONS 2u
typedef struct {
    uint8_t count;
    mz01_endpoint to[MZ01_MAX_DESTINATIONS];
} mz01_destinations;

typedef struct {
    bool accepted;
    mz01_reason reason;          /* MZ01_REASON_NONE when accepted */
    /* Telemetry to send at once: to the sender of an accepted HELLO; after an
     * accepted STOP or ESTOP (a disarm) to `telemetry_to` and the sender
     * the car was bound to before it. Empty otherwise. */
    mz01_destinations telemetry;
} mz01_rx_result;

/* One datagram on UDP 4210 from src_ip:src_port at uptime now_us. */
mz01_rx_result mz01_car_receive(mz01_car *car, const uint8_t *buf, size_t len,
                                uint32_t src_ip, uint16_t src_port,
                                uint64_t now_us);

/* One tick at uptime now_us: the watchdog, then health, then the periodic
 * telemetry schedule. Returns the destinations due for telemetry now: after a
 * disarm `telemetry_to` and the sender the car was bound to; when the period
 * is due `telemetry_to` and the bound sender. */
mz01_destinations mz01_car_tick(mz01_car *car, uint64_t now_us);

/* The MZC1 clock probe. Returns MZ01_PROBE_REPLY_LEN and fills reply when
 * `req` is a valid request; 0 (and no reply) for anything else. */
size_t mz01_probe_reply(const uint8_t *req, size_t len, uint64_t now_us,
                        uint8_t reply[MZ01_PROBE_REPLY_LEN]);

/* The reader's bound on |gyro_angle| (MZ01.md: 3.1416, pi rounded up past
 * binary32's pi) as the bit pattern of the largest binary32 within it. */
#define MZ01_GYRO_ANGLE_MAX 3.1416
#define MZ01_GYRO_ANGLE_MAX_BITS 0x40490FF9u /* 3.14159989f */

/* Board values that the state machine does not hold. */
typedef struct {
    int8_t rssi_dbm;      /* Wi-Fi signal in dBm; 0 in simulation */
    bool has_gyro_z;      /* false: "gyro_z": null */
    float gyro_z;         /* rad/s; a non-finite value is written as null */
    bool has_gyro_angle;  /* false: "gyro_angle": null */
    float gyro_angle;     /* rad, wrapped to (-pi, pi]; a value a reader would
                           * refuse (not finite, or beyond MZ01_GYRO_ANGLE_MAX)
                           * is written as null */
} mz01_board_info;

/* Writes the telemetry JSON object of `car` at uptime now_us into buf
 * (NUL-terminated, compact, keys in MZ01.md's order). Returns its length,
 * or MZ01_ERR_BUFFER when it does not fit in `cap` bytes including the NUL
 * (then buf holds "" if cap > 0), or MZ01_ERR_ARG. Never writes past cap. */
int mz01_telemetry_format(const mz01_car *car, uint64_t now_us,
                          const mz01_board_info *board, char *buf, size_t cap);

/* Formats a finite binary32 exactly as C's "%.9g" would (correctly rounded,
 * so strtof gives back the same value), without stdio. The text is a valid
 * JSON number. Returns the length, MZ01_ERR_ARG for a non-finite value or a
 * NULL buf, or MZ01_ERR_BUFFER when it does not fit in cap (NUL included). */
int mz01_format_f32(float value, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* MZ01_CORE_H */
