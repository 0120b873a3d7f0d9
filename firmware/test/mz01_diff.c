/*
 * mz01_diff - the C side of the differential fuzzer (tools/vectors/difffuzz.py).
 *
 * Reads steps on stdin, one per line, runs them on the core and prints one
 * line per step with the reply and the whole car state, so that the Python
 * harness can compare them with the reference model's:
 *
 *   boot ID NONCE TOKEN MOTOR_OK CAMERA_OK  ->  boot STATE
 *   rx T_US IP PORT HEX|-                   ->  rx VERDICT REASON STATE SENT TEL
 *   tick T_US                               ->  tick STATE SENT TEL
 *   health T_US MOTOR_OK CAMERA_OK          ->  health STATE
 *   probe T_US HEX|-                        ->  probe REPLY_HEX|- STATE
 *   sensors T_US Z_BITS|- ANGLE_BITS|-      ->  sensors STATE
 *
 * STATE is ARMED ESTOP TOKEN LEFT_BITS RIGHT_BITS BOUND TELEMETRY_TO LAST_SEQ
 * LAST_FEED_US LAST_TELEMETRY_US MOTOR_OK CAMERA_OK REASON, with wheels as
 * 8 hex digits of their binary32 pattern, endpoints IP:PORT or -, reason -
 * for "". SENT is IP:PORT joined by ',' or -; TEL is the telemetry JSON sent
 * in the step (rssi 0, the gyro as the last `sensors` step set it: gyro_z and
 * gyro_angle as 8 hex digits of binary32, - for null; none before the first)
 * or - when nothing was sent. Exit 2 on a malformed line.
 */
#include "mz01_core.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LINE 4096
#define MAX_DATAGRAM 1024

static long line_no;
static mz01_board_info board; /* rssi 0; the gyro from `sensors` */

static void die(const char *what)
{
    fprintf(stderr, "mz01_diff: line %ld: %s\n", line_no, what);
    exit(2);
}

static uint64_t num(const char *s)
{
    char *end = NULL;
    if (s == NULL || *s < '0' || *s > '9') {
        die("expected a decimal number");
    }
    const unsigned long long v = strtoull(s, &end, 10);
    if (*end != '\0') {
        die("expected a decimal number");
    }
    return (uint64_t)v;
}

static uint32_t ipv4(const char *s)
{
    unsigned a, b, c, d;
    char tail;
    if (s == NULL || sscanf(s, "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) != 4 || a > 255u ||
        b > 255u || c > 255u || d > 255u) {
        die("expected a dotted IPv4 address");
    }
    return (uint32_t)(a << 24 | b << 16 | c << 8 | d);
}

static size_t unhex(const char *s, uint8_t *out)
{
    if (s == NULL) {
        die("expected hex");
    }
    if (strcmp(s, "-") == 0) {
        return 0;
    }
    const size_t n = strlen(s);
    if (n % 2u != 0u || n / 2u > MAX_DATAGRAM) {
        die("bad hex length");
    }
    for (size_t i = 0; i < n / 2u; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) {
            die("bad hex");
        }
        out[i] = (uint8_t)v;
    }
    return n / 2u;
}

/* 8 hex digits of a binary32 pattern, or - (has = false). */
static float f32_hex(const char *s, bool *has)
{
    char *end = NULL;
    if (s == NULL) {
        die("expected 8 hex digits or -");
    }
    *has = strcmp(s, "-") != 0;
    if (!*has) {
        return 0.0f;
    }
    const unsigned long v = strtoul(s, &end, 16);
    if (strlen(s) != 8u || *end != '\0') {
        die("expected 8 hex digits or -");
    }
    const uint32_t b = (uint32_t)v;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static uint32_t bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static void put_endpoint(bool has, mz01_endpoint e)
{
    if (!has) {
        fputs("-", stdout);
        return;
    }
    printf("%u.%u.%u.%u:%u", (unsigned)(e.ip >> 24), (unsigned)(e.ip >> 16 & 0xFFu),
           (unsigned)(e.ip >> 8 & 0xFFu), (unsigned)(e.ip & 0xFFu), (unsigned)e.port);
}

static void put_state(const mz01_car *c)
{
    const char *reason = mz01_reason_name(c->reason);
    printf(" %d %d %lu %08lx %08lx ", c->armed ? 1 : 0, c->estop ? 1 : 0,
           (unsigned long)c->token, (unsigned long)bits(c->left), (unsigned long)bits(c->right));
    put_endpoint(c->has_bound, c->bound);
    fputs(" ", stdout);
    put_endpoint(c->has_telemetry_to, c->telemetry_to);
    printf(" %lu %llu %llu %d %d %s", (unsigned long)c->last_seq,
           (unsigned long long)c->last_feed_us, (unsigned long long)c->last_telemetry_us,
           c->motor_ok ? 1 : 0, c->camera_ok ? 1 : 0,
           reason == NULL ? "<invalid>" : (reason[0] == '\0' ? "-" : reason));
}

static void put_sent(const mz01_car *c, const mz01_destinations *d, uint64_t now_us)
{
    fputs(" ", stdout);
    if (d->count == 0) {
        fputs("- -", stdout);
        return;
    }
    for (uint8_t i = 0; i < d->count; i++) {
        if (i > 0) {
            fputs(",", stdout);
        }
        put_endpoint(true, d->to[i]);
    }
    char json[MZ01_TELEMETRY_BUF_LEN];
    if (mz01_telemetry_format(c, now_us, &board, json, sizeof json) < 0) {
        die("telemetry did not fit MZ01_TELEMETRY_BUF_LEN");
    }
    printf(" %s", json);
}

int main(void)
{
    static char line[MAX_LINE];
    static uint8_t data[MAX_DATAGRAM];
    mz01_car car;
    bool booted = false;
    memset(&car, 0, sizeof car);
    while (fgets(line, sizeof line, stdin) != NULL) {
        line_no++;
        line[strcspn(line, "\r\n")] = '\0';
        char *f[8] = {0};
        int nf = 0;
        for (char *tok = strtok(line, " "); tok != NULL && nf < 8; tok = strtok(NULL, " ")) {
            f[nf++] = tok;
        }
        if (nf == 0) {
            continue;
        }
        if (strcmp(f[0], "boot") == 0 && nf == 6) {
            memset(&board, 0, sizeof board); /* a new car: no gyro yet */
            booted = mz01_car_init(&car, (uint8_t)num(f[1]), (uint32_t)num(f[2]),
                                   (uint32_t)num(f[3]), num(f[4]) != 0u, num(f[5]) != 0u);
            if (!booted) {
                die("the core refused the boot");
            }
            fputs("boot", stdout);
            put_state(&car);
        } else if (!booted) {
            die("a step before boot");
        } else if (strcmp(f[0], "rx") == 0 && nf == 5) {
            const uint64_t now = num(f[1]);
            const uint32_t ip = ipv4(f[2]);
            const uint16_t port = (uint16_t)num(f[3]);
            const size_t len = unhex(f[4], data);
            const mz01_rx_result r = mz01_car_receive(&car, data, len, ip, port, now);
            const char *reason = mz01_reason_name(r.reason);
            printf("rx %s %s", r.accepted ? "accept" : "reject",
                   reason == NULL ? "<invalid>" : (reason[0] == '\0' ? "-" : reason));
            put_state(&car);
            put_sent(&car, &r.telemetry, now);
        } else if (strcmp(f[0], "tick") == 0 && nf == 2) {
            const uint64_t now = num(f[1]);
            const mz01_destinations d = mz01_car_tick(&car, now);
            fputs("tick", stdout);
            put_state(&car);
            put_sent(&car, &d, now);
        } else if (strcmp(f[0], "health") == 0 && nf == 4) {
            (void)num(f[1]);
            mz01_car_set_health(&car, num(f[2]) != 0u, num(f[3]) != 0u);
            fputs("health", stdout);
            put_state(&car);
        } else if (strcmp(f[0], "sensors") == 0 && nf == 4) {
            (void)num(f[1]);
            board.gyro_z = f32_hex(f[2], &board.has_gyro_z);
            board.gyro_angle = f32_hex(f[3], &board.has_gyro_angle);
            fputs("sensors", stdout);
            put_state(&car);
        } else if (strcmp(f[0], "probe") == 0 && nf == 3) {
            uint8_t reply[MZ01_PROBE_REPLY_LEN];
            const size_t len = unhex(f[2], data);
            const size_t n = mz01_probe_reply(data, len, num(f[1]), reply);
            fputs("probe ", stdout);
            if (n == 0) {
                fputs("-", stdout);
            }
            for (size_t i = 0; i < n; i++) {
                printf("%02x", reply[i]);
            }
            put_state(&car);
        } else {
            die("unknown or malformed step");
        }
        fputs("\n", stdout);
    }
    return ferror(stdin) ? 2 : 0;
}
