/*
 * run_vectors - runs an MZ01 golden-vector file (the text format of
 * protocol/MZ01.md) against the C core. Usage: run_vectors FILE
 *
 * Exit 0 when every step matches; 1 on the first mismatch (scenario, line,
 * expected and got are printed); 2 on a malformed file or usage error.
 * Each rx and tick checks the whole car state (wheels bit for bit) and the
 * telemetry destinations of the step, in order. Besides, every rejected
 * datagram is checked to have changed nothing but `reason`.
 */
#include "mz01_core.h"

#include "bits.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LINE 20000
#define MAX_FIELDS 32
#define STATE_FIELDS 13
#define MAX_DATAGRAM 8192

typedef struct {
    const char *path;
    long line_no;
    char scenario[256];
    bool in_scenario;
    bool booted;
    uint64_t last_t;
    mz01_car car;
    long scenarios;
    long steps;
} runner;

static void die_malformed(const runner *r, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "run_vectors: %s:%ld: malformed: ", r->path, r->line_no);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}

static void fail(const runner *r, const char *step, const char *expected,
                 const char *got)
{
    fprintf(stderr,
            "FAIL %s:%ld scenario %s, %s\n  expected: %s\n  got:      %s\n",
            r->path, r->line_no, r->scenario, step, expected, got);
    exit(1);
}

/* ---- field parsers (strict: the whole token must parse) ---- */

static uint64_t parse_u64(const runner *r, const char *s, uint64_t max,
                          const char *what)
{
    if (*s < '0' || *s > '9') {
        die_malformed(r, "%s '%s' is not a decimal integer", what, s);
    }
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max) {
        die_malformed(r, "%s '%s' is not a decimal integer <= %llu", what, s,
                      (unsigned long long)max);
    }
    return (uint64_t)v;
}

static bool parse_bit(const runner *r, const char *s, const char *what)
{
    if (strcmp(s, "0") == 0) {
        return false;
    }
    if (strcmp(s, "1") == 0) {
        return true;
    }
    die_malformed(r, "%s '%s' is not 0 or 1", what, s);
    return false;
}

static float parse_f32(const runner *r, const char *s, const char *what)
{
    errno = 0;
    char *end = NULL;
    float v = strtof(s, &end);
    /* ERANGE with a nonzero finite result is a subnormal: a valid binary32.
     * Decided on the bits, so that a fast-math build of this runner (which
     * flushes subnormals to zero in compares) reads the file the same way. */
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    const uint32_t mag = b & 0x7FFFFFFFu;
    const bool out_of_range = errno == ERANGE && (mag == 0u || mag >= 0x7F800000u);
    if (*s == '\0' || *end != '\0' || out_of_range) {
        die_malformed(r, "%s '%s' is not a binary32 number", what, s);
    }
    return v;
}

static uint32_t parse_ipv4(const runner *r, const char *s)
{
    uint32_t ip = 0;
    const char *p = s;
    for (int i = 0; i < 4; i++) {
        if (*p < '0' || *p > '9') {
            die_malformed(r, "address '%s' is not a dotted IPv4 quad", s);
        }
        unsigned v = 0;
        int digits = 0;
        while (*p >= '0' && *p <= '9') {
            v = v * 10u + (unsigned)(*p - '0');
            p++;
            if (++digits > 3 || v > 255u) {
                die_malformed(r, "address '%s' is not a dotted IPv4 quad", s);
            }
        }
        ip = (ip << 8) | v;
        if (i < 3) {
            if (*p != '.') {
                die_malformed(r, "address '%s' is not a dotted IPv4 quad", s);
            }
            p++;
        }
    }
    if (*p != '\0') {
        die_malformed(r, "address '%s' is not a dotted IPv4 quad", s);
    }
    return ip;
}

/* "IP:PORT" or "-" (none). */
static bool parse_endpoint(const runner *r, char *s, mz01_endpoint *out)
{
    if (strcmp(s, "-") == 0) {
        out->ip = 0;
        out->port = 0;
        return false;
    }
    char *colon = strrchr(s, ':');
    if (colon == NULL) {
        die_malformed(r, "endpoint '%s' is not IP:PORT or -", s);
        return false;
    }
    *colon = '\0';
    out->ip = parse_ipv4(r, s);
    out->port = (uint16_t)parse_u64(r, colon + 1, 65535, "PORT");
    *colon = ':';
    return true;
}

static int hex_nibble(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

/* Lowercase hex, or "-" for no bytes. Returns the byte count. */
static size_t parse_hex(const runner *r, const char *s, uint8_t *out,
                        size_t cap, const char *what)
{
    if (strcmp(s, "-") == 0) {
        return 0;
    }
    size_t n = strlen(s);
    if (n == 0 || n % 2u != 0u || n / 2u > cap) {
        die_malformed(r, "%s: bad hex length %zu", what, n);
    }
    for (size_t i = 0; i < n / 2u; i++) {
        int hi = hex_nibble(s[2 * i]);
        int lo = hex_nibble(s[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            die_malformed(r, "%s: not lowercase hex", what);
        }
        out[i] = (uint8_t)((hi << 4) | lo);
    }
    return n / 2u;
}

static mz01_reason parse_reason(const runner *r, const char *s)
{
    mz01_reason reason = MZ01_REASON_NONE;
    if (strcmp(s, "-") == 0) {
        return MZ01_REASON_NONE;
    }
    if (s[0] == '\0' || !mz01_reason_from_name(s, &reason)) {
        die_malformed(r, "unknown reason '%s'", s);
    }
    return reason;
}

static const char *reason_text(mz01_reason reason)
{
    const char *name = mz01_reason_name(reason);
    if (name == NULL) {
        return "<invalid>";
    }
    return name[0] == '\0' ? "-" : name;
}

/* ---- state comparison ---- */

/* The whole car state of a vector line, and a step's telemetry destinations. */
typedef struct {
    bool armed;
    bool estop;
    uint32_t token;
    uint32_t left_bits;
    uint32_t right_bits;
    bool has_bound;
    mz01_endpoint bound;
    bool has_telemetry_to;
    mz01_endpoint telemetry_to;
    uint32_t last_seq;
    uint64_t last_feed_us;
    uint64_t last_telemetry_us;
    bool motor_ok;
    bool camera_ok;
    mz01_reason reason;
} observed;

static void endpoint_text(char *out, size_t cap, bool has, mz01_endpoint e)
{
    if (!has) {
        snprintf(out, cap, "-");
        return;
    }
    snprintf(out, cap, "%u.%u.%u.%u:%u", (unsigned)(e.ip >> 24),
             (unsigned)((e.ip >> 16) & 0xFFu), (unsigned)((e.ip >> 8) & 0xFFu),
             (unsigned)(e.ip & 0xFFu), (unsigned)e.port);
}


static void describe(char *out, size_t cap, const observed *o)
{
    char bound[32], tel[32];
    endpoint_text(bound, sizeof bound, o->has_bound, o->bound);
    endpoint_text(tel, sizeof tel, o->has_telemetry_to, o->telemetry_to);
    snprintf(out, cap,
             "armed=%d estop=%d token=%lu left=%.9g right=%.9g bound=%s "
             "telemetry_to=%s seq=%lu feed=%llu tel=%llu motor=%d camera=%d reason=%s",
             o->armed ? 1 : 0, o->estop ? 1 : 0, (unsigned long)o->token,
             (double)bits_f32(o->left_bits), (double)bits_f32(o->right_bits), bound, tel,
             (unsigned long)o->last_seq, (unsigned long long)o->last_feed_us,
             (unsigned long long)o->last_telemetry_us, o->motor_ok ? 1 : 0,
             o->camera_ok ? 1 : 0, reason_text(o->reason));
}

static observed observe(const mz01_car *car)
{
    observed o;
    memset(&o, 0, sizeof o);
    o.armed = car->armed;
    o.estop = car->estop;
    o.token = car->token;
    o.left_bits = f32_bits(car->left);
    o.right_bits = f32_bits(car->right);
    o.has_bound = car->has_bound;
    if (car->has_bound) {
        o.bound = car->bound;
    }
    o.has_telemetry_to = car->has_telemetry_to;
    if (car->has_telemetry_to) {
        o.telemetry_to = car->telemetry_to;
    }
    o.last_seq = car->last_seq;
    o.last_feed_us = car->last_feed_us;
    o.last_telemetry_us = car->last_telemetry_us;
    o.motor_ok = car->motor_ok;
    o.camera_ok = car->camera_ok;
    o.reason = car->reason;
    return o;
}

static bool endpoint_same(bool ha, mz01_endpoint a, bool hb, mz01_endpoint b)
{
    return ha == hb && (!ha || (a.ip == b.ip && a.port == b.port));
}

/* Exact: wheels bit for bit (the sign of a zero counts). */
static bool same(const observed *a, const observed *b)
{
    return a->armed == b->armed && a->estop == b->estop && a->token == b->token &&
           a->left_bits == b->left_bits && a->right_bits == b->right_bits &&
           endpoint_same(a->has_bound, a->bound, b->has_bound, b->bound) &&
           endpoint_same(a->has_telemetry_to, a->telemetry_to, b->has_telemetry_to,
                         b->telemetry_to) &&
           a->last_seq == b->last_seq && a->last_feed_us == b->last_feed_us &&
           a->last_telemetry_us == b->last_telemetry_us && a->motor_ok == b->motor_ok &&
           a->camera_ok == b->camera_ok && a->reason == b->reason;
}

/* Everything of the car but `reason`. */
static bool car_same_but_reason(const mz01_car *a, const mz01_car *b)
{
    observed oa = observe(a);
    observed ob = observe(b);
    oa.reason = ob.reason;
    return a->robot_id == b->robot_id && a->boot_nonce == b->boot_nonce && same(&oa, &ob);
}

static bool same_destinations(const mz01_destinations *a, const mz01_destinations *b)
{
    if (a->count != b->count) {
        return false;
    }
    for (uint8_t i = 0; i < a->count; i++) {
        if (!endpoint_same(true, a->to[i], true, b->to[i])) {
            return false;
        }
    }
    return true;
}

static void destinations_text(char *out, size_t cap, const mz01_destinations *d)
{
    if (d->count == 0) {
        snprintf(out, cap, "-");
        return;
    }
    size_t k = 0;
    for (uint8_t i = 0; i < d->count && k < cap; i++) {
        char one[32];
        endpoint_text(one, sizeof one, true, d->to[i]);
        k += (size_t)snprintf(out + k, cap - k, "%s%s", i ? "," : "", one);
    }
}

/* ---- records ---- */

static uint64_t step_time(runner *r, const char *s)
{
    uint64_t t = parse_u64(r, s, UINT64_MAX, "T_US");
    if (t < r->last_t) {
        die_malformed(r, "time %llu goes backwards (last %llu)",
                      (unsigned long long)t, (unsigned long long)r->last_t);
    }
    r->last_t = t;
    return t;
}

static void need_car(const runner *r, const char *what)
{
    if (!r->in_scenario || !r->booted) {
        die_malformed(r, "'%s' outside a booted scenario", what);
    }
}

static void do_boot(runner *r, char **f, int nf)
{
    if (!r->in_scenario || r->booted || nf != 6) {
        die_malformed(r, "boot needs 5 fields, once, inside a scenario");
    }
    uint8_t id = (uint8_t)parse_u64(r, f[1], 255, "ROBOT_ID");
    uint32_t nonce = (uint32_t)parse_u64(r, f[2], UINT32_MAX, "NONCE");
    uint32_t token = (uint32_t)parse_u64(r, f[3], UINT32_MAX, "TOKEN");
    bool motor = parse_bit(r, f[4], "MOTOR_OK");
    bool camera = parse_bit(r, f[5], "CAMERA_OK");
    if (!mz01_car_init(&r->car, id, nonce, token, motor, camera)) {
        die_malformed(r, "robot id %u refused by the core", (unsigned)id);
    }
    r->booted = true;
    r->last_t = 0;
}

static void do_health(runner *r, char **f, int nf)
{
    need_car(r, "health");
    if (nf != 4) {
        die_malformed(r, "health needs 3 fields");
    }
    (void)step_time(r, f[1]);
    mz01_car_set_health(&r->car, parse_bit(r, f[2], "MOTOR_OK"),
                        parse_bit(r, f[3], "CAMERA_OK"));
    r->steps++;
}

static observed parse_observed(const runner *r, char **f)
{
    observed o;
    memset(&o, 0, sizeof o);
    o.armed = parse_bit(r, f[0], "ARMED");
    o.estop = parse_bit(r, f[1], "ESTOP");
    o.token = (uint32_t)parse_u64(r, f[2], UINT32_MAX, "TOKEN");
    o.left_bits = f32_bits(parse_f32(r, f[3], "LEFT"));
    o.right_bits = f32_bits(parse_f32(r, f[4], "RIGHT"));
    o.has_bound = parse_endpoint(r, f[5], &o.bound);
    o.has_telemetry_to = parse_endpoint(r, f[6], &o.telemetry_to);
    o.last_seq = (uint32_t)parse_u64(r, f[7], UINT32_MAX, "LAST_SEQ");
    o.last_feed_us = parse_u64(r, f[8], UINT64_MAX, "LAST_FEED_US");
    o.last_telemetry_us = parse_u64(r, f[9], UINT64_MAX, "LAST_TELEMETRY_US");
    o.motor_ok = parse_bit(r, f[10], "MOTOR_OK");
    o.camera_ok = parse_bit(r, f[11], "CAMERA_OK");
    o.reason = parse_reason(r, f[12]);
    return o;
}

/* SENT: "-" or IP:PORT joined by ',' (at most MZ01_MAX_DESTINATIONS). */
static mz01_destinations parse_sent(const runner *r, char *s)
{
    mz01_destinations d;
    memset(&d, 0, sizeof d);
    if (strcmp(s, "-") == 0) {
        return d;
    }
    char *p = s;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma != NULL) {
            *comma = '\0';
        }
        if (d.count == MZ01_MAX_DESTINATIONS) {
            die_malformed(r, "SENT lists more than %u destinations", MZ01_MAX_DESTINATIONS);
        }
        if (!parse_endpoint(r, p, &d.to[d.count])) {
            die_malformed(r, "SENT holds '-' inside a list");
        }
        d.count++;
        if (comma == NULL) {
            return d;
        }
        p = comma + 1;
    }
}

/* Compares state and destinations after a step; fails with both spelled out. */
static void check_step(const runner *r, const char *step, const char *verdict_want,
                       const char *verdict_got, const observed *want, const observed *got,
                       const mz01_destinations *sent_want, const mz01_destinations *sent_got)
{
    if (strcmp(verdict_want, verdict_got) == 0 && same(want, got) &&
        same_destinations(sent_want, sent_got)) {
        return;
    }
    char exp_s[1024], got_s[1024], a[512], b[512], sa[80], sb[80];
    describe(a, sizeof a, want);
    describe(b, sizeof b, got);
    destinations_text(sa, sizeof sa, sent_want);
    destinations_text(sb, sizeof sb, sent_got);
    snprintf(exp_s, sizeof exp_s, "%s %s sent=%s", verdict_want, a, sa);
    snprintf(got_s, sizeof got_s, "%s %s sent=%s", verdict_got, b, sb);
    fail(r, step, exp_s, got_s);
}

static void do_rx(runner *r, char **f, int nf)
{
    static uint8_t datagram[MAX_DATAGRAM];
    need_car(r, "rx");
    if (nf != 8 + STATE_FIELDS) {
        die_malformed(r, "rx needs %d fields, got %d", 7 + STATE_FIELDS, nf - 1);
    }
    uint64_t t = step_time(r, f[1]);
    uint32_t ip = parse_ipv4(r, f[2]);
    uint16_t port = (uint16_t)parse_u64(r, f[3], 65535, "SRC_PORT");
    size_t len = parse_hex(r, f[4], datagram, sizeof datagram, "HEX");
    bool want_accept;
    if (strcmp(f[5], "accept") == 0) {
        want_accept = true;
    } else if (strcmp(f[5], "reject") == 0) {
        want_accept = false;
    } else {
        die_malformed(r, "VERDICT '%s' is not accept or reject", f[5]);
        return;
    }
    mz01_reason want_reason = parse_reason(r, f[6]);
    if (want_accept != (want_reason == MZ01_REASON_NONE)) {
        die_malformed(r, "verdict %s with reason %s", f[5], f[6]);
    }
    observed want = parse_observed(r, f + 7);
    mz01_destinations want_sent = parse_sent(r, f[7 + STATE_FIELDS]);

    mz01_car before = r->car;
    mz01_rx_result res = mz01_car_receive(&r->car, datagram, len, ip, port, t);
    observed got = observe(&r->car);

    char verdict_want[64], verdict_got[64];
    snprintf(verdict_want, sizeof verdict_want, "%s %s", want_accept ? "accept" : "reject",
             reason_text(want_reason));
    snprintf(verdict_got, sizeof verdict_got, "%s %s", res.accepted ? "accept" : "reject",
             reason_text(res.reason));
    check_step(r, "rx", verdict_want, verdict_got, &want, &got, &want_sent, &res.telemetry);
    if (!res.accepted) {
        if (r->car.reason != res.reason) {
            fail(r, "rx (rejection must set the car's reason)",
                 reason_text(res.reason), reason_text(r->car.reason));
        }
        if (!car_same_but_reason(&before, &r->car)) {
            fail(r, "rx (a rejection changes nothing but reason)",
                 "state unchanged", "state changed");
        }
    }
    r->steps++;
}

static void do_tick(runner *r, char **f, int nf)
{
    need_car(r, "tick");
    if (nf != 3 + STATE_FIELDS) {
        die_malformed(r, "tick needs %d fields, got %d", 2 + STATE_FIELDS, nf - 1);
    }
    uint64_t t = step_time(r, f[1]);
    observed want = parse_observed(r, f + 2);
    mz01_destinations want_sent = parse_sent(r, f[2 + STATE_FIELDS]);

    mz01_destinations sent = mz01_car_tick(&r->car, t);
    observed got = observe(&r->car);
    check_step(r, "tick", "tick", "tick", &want, &got, &want_sent, &sent);
    r->steps++;
}

static void hex_text(char *out, size_t cap, const uint8_t *b, size_t n)
{
    if (n == 0) {
        snprintf(out, cap, "-");
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < n && k + 3 <= cap; i++) {
        k += (size_t)snprintf(out + k, cap - k, "%02x", b[i]);
    }
}

static void do_probe(runner *r, char **f, int nf)
{
    static uint8_t request[MAX_DATAGRAM];
    uint8_t expect[MZ01_PROBE_REPLY_LEN];
    uint8_t reply[MZ01_PROBE_REPLY_LEN];
    need_car(r, "probe");
    if (nf != 4) {
        die_malformed(r, "probe needs 3 fields, got %d", nf - 1);
    }
    uint64_t t = step_time(r, f[1]);
    size_t req_len = parse_hex(r, f[2], request, sizeof request, "REQUEST_HEX");
    size_t exp_len = parse_hex(r, f[3], expect, sizeof expect, "REPLY_HEX");
    if (exp_len != 0 && exp_len != MZ01_PROBE_REPLY_LEN) {
        die_malformed(r, "REPLY_HEX must be 16 bytes or -");
    }
    const mz01_car before = r->car;
    memset(reply, 0, sizeof reply);
    size_t got_len = mz01_probe_reply(request, req_len, t, reply);
    if (got_len != exp_len || memcmp(reply, expect, exp_len) != 0) {
        char got_s[64];
        hex_text(got_s, sizeof got_s, reply, got_len);
        fail(r, "probe", f[3], got_s);
    }
    if (!car_same_but_reason(&before, &r->car) || before.reason != r->car.reason) {
        fail(r, "probe (read-only)", "state unchanged", "state changed");
    }
    r->steps++;
}

static int split(char *line, char **fields)
{
    int n = 0;
    char *p = line;
    while (*p != '\0') {
        if (n == MAX_FIELDS) {
            return -1;
        }
        fields[n++] = p;
        char *sp = strchr(p, ' ');
        if (sp == NULL) {
            break;
        }
        *sp = '\0';
        p = sp + 1;
        if (*p == '\0' || *p == ' ') {
            return -1; /* fields are separated by exactly one space */
        }
    }
    return n;
}

int main(int argc, char **argv)
{
    static char line[MAX_LINE];
    static runner r;
    if (argc != 2) {
        fprintf(stderr, "usage: %s VECTORS.txt\n", argv[0]);
        return 2;
    }
    r.path = argv[1];
    FILE *fp = fopen(r.path, "r");
    if (fp == NULL) {
        fprintf(stderr, "run_vectors: cannot open %s: %s\n", r.path,
                strerror(errno));
        return 2;
    }
    while (fgets(line, sizeof line, fp) != NULL) {
        r.line_no++;
        size_t n = strlen(line);
        if (n == sizeof line - 1 && line[n - 1] != '\n') {
            die_malformed(&r, "line longer than %d characters", MAX_LINE - 2);
        }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) {
            line[--n] = '\0';
        }
        if (n == 0 || line[0] == '#') {
            continue;
        }
        char *f[MAX_FIELDS];
        int nf = split(line, f);
        if (nf <= 0) {
            die_malformed(&r, "bad field separation");
        }
        if (strcmp(f[0], "scenario") == 0) {
            if (r.in_scenario || nf != 2) {
                die_malformed(&r, "scenario NAME, not inside another");
            }
            snprintf(r.scenario, sizeof r.scenario, "%s", f[1]);
            r.in_scenario = true;
            r.booted = false;
        } else if (strcmp(f[0], "end") == 0) {
            if (!r.in_scenario || nf != 1) {
                die_malformed(&r, "end without scenario");
            }
            r.in_scenario = false;
            r.scenarios++;
        } else if (strcmp(f[0], "boot") == 0) {
            do_boot(&r, f, nf);
        } else if (strcmp(f[0], "health") == 0) {
            do_health(&r, f, nf);
        } else if (strcmp(f[0], "rx") == 0) {
            do_rx(&r, f, nf);
        } else if (strcmp(f[0], "tick") == 0) {
            do_tick(&r, f, nf);
        } else if (strcmp(f[0], "probe") == 0) {
            do_probe(&r, f, nf);
        } else {
            die_malformed(&r, "unknown record '%s'", f[0]);
        }
    }
    if (ferror(fp)) {
        fprintf(stderr, "run_vectors: read error on %s\n", r.path);
        return 2;
    }
    fclose(fp);
    if (r.in_scenario) {
        die_malformed(&r, "file ends inside scenario %s", r.scenario);
    }
    if (r.scenarios == 0) {
        fprintf(stderr, "run_vectors: %s holds no scenario\n", r.path);
        return 2;
    }
    printf("run_vectors: %s: %ld scenarios, %ld steps passed\n", r.path,
           r.scenarios, r.steps);
    return 0;
}
