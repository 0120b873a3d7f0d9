/*
 * test_core - what the golden vectors cannot express: reason strings, exact
 * wire bytes, probe replies, the float formatter against C's "%.9g", the
 * telemetry JSON (strictly valid, bounded, refused when the buffer is too
 * small), telemetry destinations and schedule, and a mutation fuzz of the
 * state machine. Exit 0 when every check passes.
 */
#include "mz01_core.h"

#include "bits.h"
#include "check.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng(void)
{
    /* xorshift64*: deterministic, good enough for test inputs */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

/* ------------------------------------------------------------------ */

static void test_reason_names(void)
{
    static const char *const expected[] = {
        "", "bad_length", "bad_magic", "wrong_robot", "bad_kind",
        "bad_flags", "bad_wheels", "bad_nonce", "bad_token", "stale_stamp",
        "nonzero_wheels", "unhealthy", "estop_latched", "not_armed",
        "not_bound", "stale_seq", "watchdog", "stop", "estop",
    };
    CHECK(sizeof expected / sizeof expected[0] == (size_t)MZ01_REASON_COUNT);
    for (int i = 0; i < (int)MZ01_REASON_COUNT; i++) {
        const char *name = mz01_reason_name((mz01_reason)i);
        CHECK(name != NULL && strcmp(name, expected[i]) == 0);
        mz01_reason back = MZ01_REASON_COUNT;
        CHECK(mz01_reason_from_name(expected[i], &back) && back == (mz01_reason)i);
    }
    CHECK(mz01_reason_name(MZ01_REASON_COUNT) == NULL);
    CHECK(mz01_reason_name((mz01_reason)-1) == NULL);
    mz01_reason r = MZ01_REASON_STOP;
    CHECK(!mz01_reason_from_name("Bad_Length", &r) && r == MZ01_REASON_STOP);
    CHECK(!mz01_reason_from_name("stop ", &r));
    CHECK(!mz01_reason_from_name(NULL, &r));
}

/* ------------------------------------------------------------------ */

static void test_codec_bytes(void)
{
    const mz01_packet p = {
        .robot_id = 0x07, .kind = MZ01_KIND_DRIVE, .flags = 0x0000,
        .boot_nonce = 0xA1B2C3D4u, .session_token = 0x01020304u,
        .seq = 0xFFFFFFFEu, .stamp_ms = 0x00010203u,
        .left = 0.5f, .right = -1.0f,
    };
    static const uint8_t wire[32] = {
        'M', 'Z', '0', '1', 0x07, 0x03, 0x00, 0x00,
        0xA1, 0xB2, 0xC3, 0xD4, 0x01, 0x02, 0x03, 0x04,
        0xFF, 0xFF, 0xFF, 0xFE, 0x00, 0x01, 0x02, 0x03,
        0x3F, 0x00, 0x00, 0x00, 0xBF, 0x80, 0x00, 0x00,
    };
    uint8_t out[32];
    mz01_encode(&p, out);
    CHECK(memcmp(out, wire, sizeof wire) == 0);

    mz01_packet d;
    memset(&d, 0, sizeof d);
    CHECK(mz01_decode(wire, sizeof wire, &d) == MZ01_REASON_NONE);
    CHECK(d.robot_id == 7 && d.kind == 3 && d.flags == 0);
    CHECK(d.boot_nonce == 0xA1B2C3D4u && d.session_token == 0x01020304u);
    CHECK(d.seq == 0xFFFFFFFEu && d.stamp_ms == 0x00010203u);
    CHECK(d.left == 0.5f && d.right == -1.0f);

    /* a failing decode leaves *out untouched */
    mz01_packet untouched;
    memset(&untouched, 0x5A, sizeof untouched);
    mz01_packet copy = untouched;
    uint8_t bad[32];
    memcpy(bad, wire, sizeof bad);
    bad[24] = 0x7F; /* left = +huge, out of range */
    bad[25] = 0x80;
    CHECK(mz01_decode(bad, sizeof bad, &untouched) == MZ01_REASON_BAD_WHEELS);
    CHECK(memcmp(&untouched, &copy, sizeof copy) == 0);
    CHECK(mz01_decode(NULL, 0, &untouched) == MZ01_REASON_BAD_LENGTH);
    CHECK(mz01_decode(wire, 31, &untouched) == MZ01_REASON_BAD_LENGTH);

    /* wheel edges: exactly +-1 and -0.0 pass; the next float out fails */
    const float edges_ok[] = {1.0f, -1.0f, -0.0f, 0.0f, FLT_MIN, -FLT_MIN,
                              bits_f32(1u) /* smallest subnormal */};
    for (size_t i = 0; i < sizeof edges_ok / sizeof edges_ok[0]; i++) {
        mz01_packet q = p;
        q.left = edges_ok[i];
        mz01_encode(&q, out);
        CHECK(mz01_decode(out, 32, &d) == MZ01_REASON_NONE);
        CHECK(f32_bits(d.left) == f32_bits(edges_ok[i]));
    }
    const uint32_t edges_bad[] = {0x3F800001u, 0xBF800001u, 0x7F800000u,
                                  0xFF800000u, 0x7FC00000u, 0xFFC00001u,
                                  0x7F800001u};
    for (size_t i = 0; i < sizeof edges_bad / sizeof edges_bad[0]; i++) {
        mz01_packet q = p;
        q.right = bits_f32(edges_bad[i]);
        mz01_encode(&q, out);
        CHECK(mz01_decode(out, 32, &d) == MZ01_REASON_BAD_WHEELS);
    }
}

/* ------------------------------------------------------------------ */

/* |x| <= 1 and finite, from the IEEE-754 fields in double arithmetic: an
 * oracle that shares nothing with the core's integer compare. */
static bool wheel_oracle(uint32_t b)
{
    const uint32_t e = (b >> 23) & 0xFFu;
    const uint32_t m = b & 0x7FFFFFu;
    if (e == 0xFFu) {
        return false; /* Inf, NaN */
    }
    const double mag = e == 0u ? ldexp((double)m, -149) : ldexp((double)(m | 0x800000u), (int)e - 150);
    return mag <= 1.0;
}

static void test_wheel_bits(void)
{
    uint8_t out[32];
    mz01_packet d;
    const mz01_packet base = {7, MZ01_KIND_DRIVE, 0, 1, 2, 3, 4, 0.0f, 0.0f};
    long tried = 0;
    /* every exponent with mantissas at both ends and a few between, both
     * signs, as left and as right wheel; then random patterns */
    for (uint32_t e = 0; e < 256u; e++) {
        const uint32_t mants[] = {0u, 1u, 2u, 0x400000u, 0x7FFFFEu, 0x7FFFFFu,
                                  (uint32_t)(rng() & 0x7FFFFFu)};
        for (size_t k = 0; k < sizeof mants / sizeof mants[0]; k++) {
            for (uint32_t sign = 0; sign < 2u; sign++) {
                const uint32_t bits = (sign << 31) | (e << 23) | mants[k];
                for (int side = 0; side < 2; side++) {
                    mz01_packet q = base;
                    if (side == 0) {
                        q.left = bits_f32(bits);
                    } else {
                        q.right = bits_f32(bits);
                    }
                    mz01_encode(&q, out);
                    const bool ok = mz01_decode(out, 32, &d) == MZ01_REASON_NONE;
                    CHECK(ok == wheel_oracle(bits));
                    tried++;
                }
            }
        }
    }
    for (int i = 0; i < 200000; i++) {
        const uint32_t bits = (uint32_t)(rng() >> 32);
        mz01_packet q = base;
        q.left = bits_f32(bits);
        mz01_encode(&q, out);
        CHECK((mz01_decode(out, 32, &d) == MZ01_REASON_NONE) == wheel_oracle(bits));
        tried++;
    }
    /* a STOP or ESTOP decodes whatever its flags and wheels hold */
    for (uint8_t kind = MZ01_KIND_STOP; kind <= MZ01_KIND_ESTOP; kind++) {
        mz01_packet q = {0, kind, 0xFFFFu, 0, 0, 0, 0, bits_f32(0x7FC00001u), bits_f32(0xFF800000u)};
        mz01_encode(&q, out);
        CHECK(mz01_decode(out, 32, &d) == MZ01_REASON_NONE && d.kind == kind && d.flags == 0xFFFFu);
        CHECK(f32_bits(d.left) == 0x7FC00001u && f32_bits(d.right) == 0xFF800000u);
    }
    printf("test_core: wheel check agrees with the IEEE-754 oracle on %ld patterns\n", tried);
}

/* ------------------------------------------------------------------ */

static void test_probe(void)
{
    static const uint8_t req[8] = {'M', 'Z', 'C', '1', 0xDE, 0xAD, 0xBE, 0xEF};
    static const uint8_t want[16] = {'M', 'Z', 'C', '1', 0xDE, 0xAD, 0xBE, 0xEF,
                                     0x00, 0x00, 0x01, 0x23, 0x45, 0x67, 0x89, 0xAB};
    uint8_t reply[16];
    memset(reply, 0, sizeof reply);
    CHECK(mz01_probe_reply(req, sizeof req, 0x00000123456789ABull, reply) == 16u);
    CHECK(memcmp(reply, want, sizeof want) == 0);

    CHECK(mz01_probe_reply(req, 8, UINT64_MAX, reply) == 16u);
    for (int i = 8; i < 16; i++) {
        CHECK(reply[i] == 0xFF);
    }
    CHECK(mz01_probe_reply(req, 8, 0, reply) == 16u);
    for (int i = 8; i < 16; i++) {
        CHECK(reply[i] == 0x00);
    }

    /* anything else: no reply, and the reply buffer is not touched */
    uint8_t big[24];
    memset(big, 0, sizeof big);
    memcpy(big, req, sizeof req);
    for (size_t len = 0; len <= sizeof big; len++) {
        if (len == 8) {
            continue;
        }
        memset(reply, 0xAA, sizeof reply);
        CHECK(mz01_probe_reply(big, len, 42, reply) == 0u);
        for (int i = 0; i < 16; i++) {
            CHECK(reply[i] == 0xAA);
        }
    }
    for (int pos = 0; pos < 4; pos++) {
        uint8_t r2[8];
        memcpy(r2, req, sizeof r2);
        r2[pos] ^= 0x20; /* "mZC1", "MzC1", ... */
        CHECK(mz01_probe_reply(r2, 8, 42, reply) == 0u);
    }
    static const uint8_t command_magic[8] = {'M', 'Z', '0', '1', 0, 0, 0, 1};
    CHECK(mz01_probe_reply(command_magic, 8, 42, reply) == 0u);
    CHECK(mz01_probe_reply(NULL, 0, 42, reply) == 0u);
}

/* ------------------------------------------------------------------ */

static size_t f32_longest;

static void check_f32(float v)
{
    char want[64];
    char got[64];
    snprintf(want, sizeof want, "%.9g", (double)v);
    int n = mz01_format_f32(v, got, sizeof got);
    CHECK(n >= 0 && (size_t)n == strlen(want));
    if (n < 0 || strcmp(want, got) != 0) {
        failures++;
        fprintf(stderr, "format_f32(0x%08" PRIx32 "): want %s got %s\n",
                f32_bits(v), want, n < 0 ? "<error>" : got);
        return;
    }
    if ((size_t)n > f32_longest) {
        f32_longest = (size_t)n;
    }
    /* round trip: 9 significant digits identify every binary32 */
    CHECK(f32_bits(strtof(got, NULL)) == f32_bits(v));
}

static void test_format_f32(void)
{
    const float specials[] = {
        0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -0.25f, 0.1f, 0.2f, 0.3f, 1.0f / 3.0f,
        2.0f / 3.0f, 1e-4f, 1e-5f, 9.9999997e-5f, 0.0001f, 100000000.0f,
        123456789.0f, 999999999.0f, 1e9f, 1e10f, 16777216.0f, 16777217.0f,
        FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX, FLT_EPSILON, 3.14159265f,
        0.999999940f, 0.99999994f, 1.00000012f, 9.99999994e-39f,
        bits_f32(1u), bits_f32(0x007FFFFFu), bits_f32(0x80000001u),
        1e38f, 1e-38f, 1e-45f, 1.5f, 2.5f, 1234.5f, 0.0009765625f,
    };
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
        check_f32(specials[i]);
    }
    /* every power of two and its neighbours */
    for (uint32_t e = 0; e < 255u; e++) {
        for (int32_t dm = -2; dm <= 2; dm++) {
            uint32_t b = (e << 23) + (uint32_t)dm;
            if (((b >> 23) & 0xFFu) == 0xFFu) {
                continue;
            }
            check_f32(bits_f32(b));
            check_f32(bits_f32(b | 0x80000000u));
        }
    }
    /* every 1/4096 step of the duty range (12-bit PWM counts) */
    for (int k = -4096; k <= 4096; k++) {
        check_f32((float)k / 4096.0f);
        check_f32((float)k / 4095.0f);
    }
    /* random bit patterns */
    for (int i = 0; i < 200000; i++) {
        uint32_t b = (uint32_t)(rng() >> 32);
        if (((b >> 23) & 0xFFu) == 0xFFu) {
            continue;
        }
        check_f32(bits_f32(b));
    }
    CHECK(f32_longest <= MZ01_F32_MAX_LEN);
    printf("test_core: format_f32 agrees with %%.9g; longest %zu chars\n",
           f32_longest);

    char buf[32];
    CHECK(mz01_format_f32(NAN, buf, sizeof buf) == MZ01_ERR_ARG);
    CHECK(mz01_format_f32(INFINITY, buf, sizeof buf) == MZ01_ERR_ARG);
    CHECK(mz01_format_f32(-INFINITY, buf, sizeof buf) == MZ01_ERR_ARG);
    CHECK(mz01_format_f32(1.0f, NULL, 8) == MZ01_ERR_ARG);

    /* too small: refused, nothing written past cap */
    const float v = -1.17549435e-38f;
    const int full = mz01_format_f32(v, buf, sizeof buf);
    CHECK(full == 15);
    for (size_t cap = 0; cap <= (size_t)full; cap++) {
        char b2[32];
        memset(b2, '#', sizeof b2);
        CHECK(mz01_format_f32(v, b2, cap) == MZ01_ERR_BUFFER);
        CHECK(cap == 0 || b2[0] == '\0');
        for (size_t i = cap; i < sizeof b2; i++) {
            CHECK(b2[i] == '#');
        }
    }
    char exact[16];
    CHECK(mz01_format_f32(v, exact, sizeof exact) == 15);
}

/* ------------------------------------------------------------------ */
/* A strict RFC 8259 checker for the telemetry object.                */

typedef struct {
    const char *s;
    size_t i;
    size_t n;
} jparse;

static bool j_value(jparse *p, int depth);

static void j_ws(jparse *p)
{
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' ||
                           p->s[p->i] == '\n' || p->s[p->i] == '\r')) {
        p->i++;
    }
}

static bool j_lit(jparse *p, const char *lit)
{
    size_t k = strlen(lit);
    if (p->n - p->i < k || memcmp(p->s + p->i, lit, k) != 0) {
        return false;
    }
    p->i += k;
    return true;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool j_number(jparse *p)
{
    if (p->i < p->n && p->s[p->i] == '-') {
        p->i++;
    }
    if (p->i >= p->n || !is_digit(p->s[p->i])) {
        return false;
    }
    if (p->s[p->i] == '0') {
        p->i++;
    } else {
        while (p->i < p->n && is_digit(p->s[p->i])) {
            p->i++;
        }
    }
    if (p->i < p->n && p->s[p->i] == '.') {
        p->i++;
        if (p->i >= p->n || !is_digit(p->s[p->i])) {
            return false;
        }
        while (p->i < p->n && is_digit(p->s[p->i])) {
            p->i++;
        }
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) {
            p->i++;
        }
        if (p->i >= p->n || !is_digit(p->s[p->i])) {
            return false;
        }
        while (p->i < p->n && is_digit(p->s[p->i])) {
            p->i++;
        }
    }
    return true;
}

static bool j_string(jparse *p)
{
    if (p->i >= p->n || p->s[p->i] != '"') {
        return false;
    }
    p->i++;
    while (p->i < p->n) {
        unsigned char c = (unsigned char)p->s[p->i++];
        if (c == '"') {
            return true;
        }
        if (c < 0x20u) {
            return false;
        }
        if (c == '\\') {
            if (p->i >= p->n) {
                return false;
            }
            char e = p->s[p->i++];
            if (e == 'u') {
                for (int k = 0; k < 4; k++) {
                    if (p->i >= p->n || !strchr("0123456789abcdefABCDEF", p->s[p->i])) {
                        return false;
                    }
                    p->i++;
                }
            } else if (!strchr("\"\\/bfnrt", e)) {
                return false;
            }
        }
    }
    return false;
}

/* After '[' or '{': items separated by ',' up to ``close``, each read by ``item``. */
static bool j_items(jparse *p, int depth, char close, bool (*item)(jparse *, int))
{
    p->i++; /* the opening bracket */
    j_ws(p);
    if (p->i < p->n && p->s[p->i] == close) {
        p->i++;
        return true;
    }
    for (;;) {
        if (!item(p, depth)) {
            return false;
        }
        j_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == close) {
            p->i++;
            return true;
        }
        return false;
    }
}

static bool j_element(jparse *p, int depth)
{
    return j_value(p, depth + 1);
}

static bool j_member(jparse *p, int depth)
{
    j_ws(p);
    if (!j_string(p)) {
        return false;
    }
    j_ws(p);
    if (p->i >= p->n || p->s[p->i] != ':') {
        return false;
    }
    p->i++;
    return j_value(p, depth + 1);
}

static bool j_array(jparse *p, int depth)
{
    return j_items(p, depth, ']', j_element);
}

static bool j_object(jparse *p, int depth)
{
    return j_items(p, depth, '}', j_member);
}

static bool j_value(jparse *p, int depth)
{
    if (depth > 16) {
        return false;
    }
    j_ws(p);
    if (p->i >= p->n) {
        return false;
    }
    switch (p->s[p->i]) {
    case '{':
        return j_object(p, depth);
    case '[':
        return j_array(p, depth);
    case '"':
        return j_string(p);
    case 't':
        return j_lit(p, "true");
    case 'f':
        return j_lit(p, "false");
    case 'n':
        return j_lit(p, "null");
    default:
        return j_number(p);
    }
}

static bool json_valid_object(const char *s)
{
    jparse p = {s, 0, strlen(s)};
    j_ws(&p);
    if (p.i >= p.n || s[p.i] != '{') {
        return false;
    }
    if (!j_value(&p, 0)) {
        return false;
    }
    j_ws(&p);
    return p.i == p.n;
}

static void test_json_checker(void)
{
    /* the checker itself must be able to fail */
    CHECK(json_valid_object("{\"a\":1,\"b\":[1.5e-3,-0,null],\"c\":\"x\"}"));
    CHECK(json_valid_object("{}"));
    CHECK(!json_valid_object("{\"a\":NaN}"));
    CHECK(!json_valid_object("{\"a\":inf}"));
    CHECK(!json_valid_object("{\"a\":1,}"));
    CHECK(!json_valid_object("{\"a\":01}"));
    CHECK(!json_valid_object("{\"a\":1.}"));
    CHECK(!json_valid_object("{\"a\":.5}"));
    CHECK(!json_valid_object("{\"a\":+1}"));
    CHECK(!json_valid_object("{\"a\":1e}"));
    CHECK(!json_valid_object("{\"a\":1}x"));
    CHECK(!json_valid_object("{\"a\":[1,2}"));
    CHECK(!json_valid_object("{a:1}"));
    CHECK(!json_valid_object("[1]"));
}

/* Raw text of the value of top-level key `key` (compact object). */
static bool json_get(const char *json, const char *key, char *out, size_t cap)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *at = strstr(json, pat);
    if (at == NULL || strstr(at + 1, pat) != NULL) {
        return false; /* missing or duplicated */
    }
    at += strlen(pat);
    size_t k = 0;
    int nest = 0;
    bool in_str = false;
    while (*at != '\0') {
        char c = *at;
        if (!in_str && nest == 0 && (c == ',' || c == '}')) {
            break;
        }
        if (c == '"') {
            in_str = !in_str;
        } else if (!in_str && c == '[') {
            nest++;
        } else if (!in_str && c == ']') {
            nest--;
        }
        if (k + 1 >= cap) {
            return false;
        }
        out[k++] = c;
        at++;
    }
    out[k] = '\0';
    return k > 0;
}

static bool get_uint(const char *json, const char *key, uint64_t *v)
{
    char t[64];
    char *end = NULL;
    if (!json_get(json, key, t, sizeof t) || !is_digit(t[0])) {
        return false;
    }
    *v = strtoull(t, &end, 10);
    return *end == '\0';
}

static bool get_bool(const char *json, const char *key, bool *v)
{
    char t[16];
    if (!json_get(json, key, t, sizeof t)) {
        return false;
    }
    if (strcmp(t, "true") == 0) {
        *v = true;
        return true;
    }
    if (strcmp(t, "false") == 0) {
        *v = false;
        return true;
    }
    return false;
}

static void check_telemetry(const mz01_car *car, uint64_t now_us,
                            const mz01_board_info *board, size_t *longest)
{
    char buf[MZ01_TELEMETRY_BUF_LEN];
    const int n = mz01_telemetry_format(car, now_us, board, buf, sizeof buf);
    CHECK(n > 0 && (size_t)n <= MZ01_TELEMETRY_MAX_LEN);
    if (n <= 0) {
        return;
    }
    CHECK((size_t)n == strlen(buf));
    if ((size_t)n > *longest) {
        *longest = (size_t)n;
    }
    CHECK(json_valid_object(buf));

    uint64_t u = 0;
    bool b = false;
    char t[64];
    CHECK(get_uint(buf, "id", &u) && u == car->robot_id);
    CHECK(get_uint(buf, "boot", &u) && u == car->boot_nonce);
    CHECK(get_uint(buf, "token", &u) && u == car->token);
    CHECK(get_uint(buf, "uptime_ms", &u) && u == now_us / 1000u);
    CHECK(get_uint(buf, "seq", &u) && u == car->last_seq);
    CHECK(get_bool(buf, "armed", &b) && b == car->armed);
    CHECK(get_bool(buf, "estop", &b) && b == car->estop);
    CHECK(get_bool(buf, "camera_ok", &b) && b == car->camera_ok);
    CHECK(get_bool(buf, "motor_ok", &b) && b == car->motor_ok);
    char want_reason[32];
    snprintf(want_reason, sizeof want_reason, "\"%s\"", mz01_reason_name(car->reason));
    CHECK(json_get(buf, "reason", t, sizeof t) && strcmp(t, want_reason) == 0);
    CHECK(json_get(buf, "rssi", t, sizeof t) &&
          strtoll(t, NULL, 10) == (long long)board->rssi_dbm);
    CHECK(json_get(buf, "duty", t, sizeof t));
    {
        float l = 0, r = 0;
        char *end = NULL;
        CHECK(t[0] == '[');
        l = strtof(t + 1, &end);
        CHECK(*end == ',');
        r = strtof(end + 1, &end);
        CHECK(strcmp(end, "]") == 0);
        CHECK(f32_bits(l) == f32_bits(car->left) && f32_bits(r) == f32_bits(car->right));
    }
    CHECK(json_get(buf, "gyro_z", t, sizeof t));
    if (board->has_gyro_z && isfinite(board->gyro_z)) {
        CHECK(f32_bits(strtof(t, NULL)) == f32_bits(board->gyro_z));
    } else {
        CHECK(strcmp(t, "null") == 0);
    }
    CHECK(json_get(buf, "gyro_angle", t, sizeof t));
    if (board->has_gyro_angle && isfinite(board->gyro_angle) &&
        fabs((double)board->gyro_angle) <= MZ01_GYRO_ANGLE_MAX) {
        CHECK(f32_bits(strtof(t, NULL)) == f32_bits(board->gyro_angle));
        CHECK(fabs(strtod(t, NULL)) <= MZ01_GYRO_ANGLE_MAX); /* the reader's test, on the text */
    } else {
        CHECK(strcmp(t, "null") == 0);
    }
    /* MZ01.md's key order: gyro_angle right after gyro_z, last */
    {
        const char *z = strstr(buf, ",\"gyro_z\":");
        const char *a = strstr(buf, ",\"gyro_angle\":");
        CHECK(z != NULL && a != NULL && a > z && strchr(z + 1, ',') == a);
        CHECK(a != NULL && strchr(a + 1, ',') == NULL && buf[n - 1] == '}');
    }

    /* every buffer too small is refused without writing past it; the
     * exact size works. Heap buffers so the sanitizer sees any overflow. */
    for (size_t cap = 0; cap <= (size_t)n; cap++) {
        char *small = malloc(cap + 8u);
        if (small == NULL) {
            CHECK(false);
            return;
        }
        memset(small, '#', cap + 8u);
        CHECK(mz01_telemetry_format(car, now_us, board, small, cap) == MZ01_ERR_BUFFER);
        CHECK(cap == 0 || small[0] == '\0');
        for (size_t i = cap; i < cap + 8u; i++) {
            CHECK(small[i] == '#');
        }
        free(small);
    }
    char *exact = malloc((size_t)n + 1u);
    if (exact != NULL) {
        CHECK(mz01_telemetry_format(car, now_us, board, exact, (size_t)n + 1u) == n);
        CHECK(strcmp(exact, buf) == 0);
        free(exact);
    }
}

static void test_telemetry(void)
{
    size_t longest = 0;
    mz01_car car;
    CHECK(mz01_car_init(&car, 3, 12345, 678, true, false));
    mz01_board_info board = {0, false, 0.0f, false, 0.0f};
    check_telemetry(&car, 0, &board, &longest);

    char buf[MZ01_TELEMETRY_BUF_LEN];
    CHECK(mz01_telemetry_format(&car, 1234567, &board, buf, sizeof buf) > 0);
    CHECK(strcmp(buf,
                 "{\"id\":3,\"boot\":12345,\"token\":678,\"uptime_ms\":1234,"
                 "\"armed\":false,\"estop\":false,\"reason\":\"\",\"rssi\":0,"
                 "\"camera_ok\":false,\"motor_ok\":true,\"seq\":0,"
                 "\"duty\":[0,0],\"gyro_z\":null,\"gyro_angle\":null}") == 0);

    /* a gyro: the rate and the integrated angle, as %.9g text */
    board.has_gyro_z = true;
    board.gyro_z = -0.5f;
    board.has_gyro_angle = true;
    board.gyro_angle = 3.14159274f; /* binary32 pi: just above pi, within the bound */
    CHECK(mz01_telemetry_format(&car, 1234567, &board, buf, sizeof buf) > 0);
    CHECK(strcmp(buf,
                 "{\"id\":3,\"boot\":12345,\"token\":678,\"uptime_ms\":1234,"
                 "\"armed\":false,\"estop\":false,\"reason\":\"\",\"rssi\":0,"
                 "\"camera_ok\":false,\"motor_ok\":true,\"seq\":0,"
                 "\"duty\":[0,0],\"gyro_z\":-0.5,\"gyro_angle\":3.14159274}") == 0);
    check_telemetry(&car, 1234567, &board, &longest);
    board.has_gyro_z = false; /* the angle is written as given: the board nulls both */
    board.gyro_angle = -0.1f;
    CHECK(mz01_telemetry_format(&car, 1234567, &board, buf, sizeof buf) > 0);
    CHECK(strstr(buf, "\"gyro_z\":null,\"gyro_angle\":-0.100000001}") != NULL);

    /* the angle's bound: the largest binary32 a reader takes (|x| <= 3.1416), the
     * next one refused, so written as null; likewise non-finite values */
    CHECK(bits_f32(MZ01_GYRO_ANGLE_MAX_BITS) <= MZ01_GYRO_ANGLE_MAX);
    CHECK(bits_f32(MZ01_GYRO_ANGLE_MAX_BITS + 1u) > MZ01_GYRO_ANGLE_MAX);
    {
        const uint32_t edges[] = {MZ01_GYRO_ANGLE_MAX_BITS, MZ01_GYRO_ANGLE_MAX_BITS + 1u,
                                  0x80000000u | MZ01_GYRO_ANGLE_MAX_BITS,
                                  0x80000000u | (MZ01_GYRO_ANGLE_MAX_BITS + 1u),
                                  0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u,
                                  0x7F7FFFFFu, 0x40800000u /* 4.0 */};
        const char *const want[] = {"3.14159989}", "null}", "-3.14159989}", "null}",
                                    "null}", "null}", "null}", "null}", "null}", "null}"};
        for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
            board.gyro_angle = bits_f32(edges[i]);
            const int len = mz01_telemetry_format(&car, 0, &board, buf, sizeof buf);
            CHECK(len > 0 && (size_t)len >= strlen(want[i]) &&
                  strcmp(buf + len - strlen(want[i]), want[i]) == 0);
            check_telemetry(&car, 0, &board, &longest);
        }
    }

    /* extremes */
    car.robot_id = 255;
    car.boot_nonce = UINT32_MAX;
    car.token = UINT32_MAX;
    car.armed = true;
    car.estop = true;
    car.last_seq = UINT32_MAX;
    car.camera_ok = true;
    const float duties[] = {-FLT_MIN, 1.0f, -1.0f, -0.0f, bits_f32(0x80000001u),
                            -0.000123456789f, 0.1f};
    const float gyros[] = {-FLT_MAX, FLT_MAX, -FLT_MIN, NAN, INFINITY, -INFINITY, 0.0f};
    const float angles[] = {-FLT_MIN, -3.14159274f, 3.14159274f, bits_f32(0x80000001u),
                            -0.000123456789f, NAN, -INFINITY, -FLT_MAX, -0.0f};
    const size_t n_angles = sizeof angles / sizeof angles[0];
    const int8_t rssis[] = {INT8_MIN, INT8_MAX, -67, 0};
    for (int r = 0; r < (int)MZ01_REASON_COUNT; r++) {
        car.reason = (mz01_reason)r;
        for (size_t d = 0; d < sizeof duties / sizeof duties[0]; d++) {
            car.left = duties[d];
            car.right = duties[(d + 3) % (sizeof duties / sizeof duties[0])];
            for (size_t g = 0; g < sizeof gyros / sizeof gyros[0]; g++) {
                board.has_gyro_z = true;
                board.gyro_z = gyros[g];
                board.rssi_dbm = rssis[(g + d) % 4];
                /* every angle meets every gyro over the reasons */
                const size_t a = (g + d + (size_t)r) % (n_angles + 1);
                board.has_gyro_angle = a < n_angles;
                board.gyro_angle = a < n_angles ? angles[a] : 1.0f;
                check_telemetry(&car, UINT64_MAX, &board, &longest);
            }
        }
    }
    board.has_gyro_z = false;
    board.gyro_z = 1.0f; /* ignored */
    board.has_gyro_angle = false;
    board.gyro_angle = 1.0f; /* ignored */
    check_telemetry(&car, 999, &board, &longest);

    /* the worst case by construction */
    car.reason = MZ01_REASON_NONZERO_WHEELS;
    car.left = car.right = -FLT_MIN;
    board.has_gyro_z = true;
    board.gyro_z = -FLT_MAX;
    board.has_gyro_angle = true;
    board.gyro_angle = -FLT_MIN; /* the longest text of any binary32 */
    board.rssi_dbm = INT8_MIN;
    check_telemetry(&car, UINT64_MAX, &board, &longest);
    CHECK(longest <= MZ01_TELEMETRY_MAX_LEN);
    CHECK(longest < MZ01_TELEMETRY_DATAGRAM_MAX);
    printf("test_core: telemetry longest object %zu chars (bound %u)\n", longest,
           MZ01_TELEMETRY_MAX_LEN);

    CHECK(mz01_telemetry_format(NULL, 0, &board, buf, sizeof buf) == MZ01_ERR_ARG);
    CHECK(mz01_telemetry_format(&car, 0, NULL, buf, sizeof buf) == MZ01_ERR_ARG);
    CHECK(mz01_telemetry_format(&car, 0, &board, NULL, 10) == MZ01_ERR_ARG);
}

/* ------------------------------------------------------------------ */

#define IP_A 0x0A000002u /* 10.0.0.2 */
#define IP_B 0x0A000003u
#define NONCE 0xA1B2C3D4u

static size_t packet(uint8_t *out, uint8_t id, uint8_t kind, uint16_t flags,
                     uint32_t token, uint32_t seq, uint32_t stamp, float l, float r)
{
    mz01_packet p = {id, kind, flags, NONCE, token, seq, stamp, l, r};
    mz01_encode(&p, out);
    return MZ01_PACKET_LEN;
}

static bool has_dest(const mz01_destinations *d, uint32_t ip, uint16_t port)
{
    for (uint8_t i = 0; i < d->count; i++) {
        if (d->to[i].ip == ip && d->to[i].port == port) {
            return true;
        }
    }
    return false;
}

static void test_destinations(void)
{
    mz01_car car;
    uint8_t b[32];
    CHECK(!mz01_car_init(&car, 0, 1, 2, true, true));
    CHECK(!mz01_car_init(NULL, 1, 1, 2, true, true));
    CHECK(mz01_car_init(&car, 5, NONCE, 10, true, true));

    /* no destination: the schedule runs but sends nowhere */
    mz01_destinations d = mz01_car_tick(&car, 100000);
    CHECK(d.count == 0);

    /* rejected HELLO: no answer, no registration */
    size_t n = packet(b, 5, MZ01_KIND_HELLO, 2, 0, 0, 0, 0, 0);
    mz01_rx_result res = mz01_car_receive(&car, b, n, IP_A, 5000, 101000);
    CHECK(!res.accepted && res.reason == MZ01_REASON_BAD_FLAGS);
    CHECK(res.telemetry.count == 0 && !car.has_telemetry_to);

    /* accepted HELLO: answered at once, to the sender only */
    n = packet(b, 0, MZ01_KIND_HELLO, 0, 0, 0, 0, 0, 0);
    res = mz01_car_receive(&car, b, n, IP_A, 5000, 102000);
    CHECK(res.accepted && res.telemetry.count == 1 && has_dest(&res.telemetry, IP_A, 5000));
    CHECK(car.has_telemetry_to && car.telemetry_to.ip == IP_A);

    /* periodic: every >= 100000 us since the last periodic one (at 100000) */
    for (uint64_t t = 105000; t < 200000; t += 5000) {
        d = mz01_car_tick(&car, t);
        CHECK(d.count == 0);
    }
    d = mz01_car_tick(&car, 200000);
    CHECK(d.count == 1 && has_dest(&d, IP_A, 5000));
    CHECK(mz01_car_tick(&car, 299999).count == 0);

    /* armed by another sender: both destinations */
    n = packet(b, 5, MZ01_KIND_ARM, 0, 10, 1, 300, 0, 0);
    res = mz01_car_receive(&car, b, n, IP_B, 6000, 300000);
    CHECK(res.accepted && res.telemetry.count == 0);
    d = mz01_car_tick(&car, 300000);
    CHECK(d.count == 2 && has_dest(&d, IP_A, 5000) && has_dest(&d, IP_B, 6000));

    /* DRIVE answers nothing at once */
    n = packet(b, 5, MZ01_KIND_DRIVE, 0, 10, 2, 350, 0.5f, 0.5f);
    res = mz01_car_receive(&car, b, n, IP_B, 6000, 350000);
    CHECK(res.accepted && res.telemetry.count == 0);

    /* the watchdog disarm tells telemetry_to and the sender it was bound to
     * at once, telemetry_to first */
    d = mz01_car_tick(&car, 650000);
    CHECK(!car.armed && car.reason == MZ01_REASON_WATCHDOG && car.token == 11);
    CHECK(d.count == 2 && d.to[0].ip == IP_A && d.to[0].port == 5000 &&
          d.to[1].ip == IP_B && d.to[1].port == 6000);

    /* bound == telemetry_to: one destination, not two */
    n = packet(b, 5, MZ01_KIND_ARM, 0, 11, 1, 700, 0, 0);
    CHECK(mz01_car_receive(&car, b, n, IP_A, 5000, 700000).accepted);
    d = mz01_car_tick(&car, 750000);
    CHECK(d.count == 1 && has_dest(&d, IP_A, 5000));

    /* a STOP from a stranger: telemetry at once to telemetry_to (also the
     * bound sender here, so once), never to the stranger */
    n = packet(b, 5, MZ01_KIND_STOP, 0, 0, 0, 0, 0, 0);
    res = mz01_car_receive(&car, b, n, IP_B, 6000, 760000);
    CHECK(res.accepted && res.telemetry.count == 1 && has_dest(&res.telemetry, IP_A, 5000));
    CHECK(car.reason == MZ01_REASON_STOP);

    /* a late tick (870000, last at 750000) restarts the period from when the
     * telemetry was actually sent, not from a fixed 100 ms grid */
    CHECK(mz01_car_tick(&car, 870000).count == 1);
    CHECK(mz01_car_tick(&car, 950000).count == 0);
    CHECK(mz01_car_tick(&car, 969999).count == 0);
    CHECK(mz01_car_tick(&car, 970000).count == 1);

    /* armed without any HELLO: telemetry goes to the bound sender */
    CHECK(mz01_car_init(&car, 5, NONCE, 10, true, true));
    n = packet(b, 5, MZ01_KIND_ARM, 0, 10, 1, 0, 0, 0);
    CHECK(mz01_car_receive(&car, b, n, IP_B, 6000, 0).accepted);
    d = mz01_car_tick(&car, 100000);
    CHECK(d.count == 1 && has_dest(&d, IP_B, 6000));

    /* a clock that runs backwards reads as a huge elapsed time: disarm */
    CHECK(mz01_car_init(&car, 5, NONCE, 10, true, true));
    n = packet(b, 5, MZ01_KIND_ARM, 0, 10, 1, 1000, 0, 0);
    CHECK(mz01_car_receive(&car, b, n, IP_A, 5000, 1000000).accepted);
    (void)mz01_car_tick(&car, 999999);
    CHECK(!car.armed && car.reason == MZ01_REASON_WATCHDOG);

    /* robot id 255 and the uptime wrap of the stamp at 2^32 ms */
    CHECK(mz01_car_init(&car, 255, NONCE, 0, true, true));
    const uint64_t wrap_us = 4294967296ull * 1000u; /* uptime_ms == 2^32 -> 0 */
    n = packet(b, 255, MZ01_KIND_ARM, 0, 0, 1, 30, 0, 0);
    CHECK(mz01_car_receive(&car, b, n, IP_A, 1, wrap_us).accepted);
    CHECK(car.last_feed_us == wrap_us);
    CHECK(mz01_car_init(&car, 255, NONCE, 0, true, true));
    n = packet(b, 255, MZ01_KIND_ARM, 0, 0, 1, 0xFFFFFF9Cu /* -100 */, 0, 0);
    CHECK(mz01_car_receive(&car, b, n, IP_A, 1, wrap_us).accepted);
    CHECK(car.last_feed_us == wrap_us - 100000u);
    CHECK(mz01_car_init(&car, 255, NONCE, 0, true, true));
    n = packet(b, 255, MZ01_KIND_ARM, 0, 0, 1, 0x80000000u, 0, 0);
    res = mz01_car_receive(&car, b, n, IP_A, 1, wrap_us);
    CHECK(!res.accepted && res.reason == MZ01_REASON_STALE_STAMP);
    n = packet(b, 255, MZ01_KIND_ARM, 0, 0, 1, 0x7FFFFFFFu, 0, 0);
    res = mz01_car_receive(&car, b, n, IP_A, 1, wrap_us);
    CHECK(!res.accepted && res.reason == MZ01_REASON_STALE_STAMP);
}

/* ------------------------------------------------------------------ */

static bool same_but_reason(const mz01_car *a, const mz01_car *b)
{
    return a->robot_id == b->robot_id && a->boot_nonce == b->boot_nonce &&
           a->token == b->token && a->armed == b->armed && a->estop == b->estop &&
           a->has_bound == b->has_bound &&
           (!a->has_bound || (a->bound.ip == b->bound.ip && a->bound.port == b->bound.port)) &&
           a->has_telemetry_to == b->has_telemetry_to &&
           (!a->has_telemetry_to || (a->telemetry_to.ip == b->telemetry_to.ip &&
                                     a->telemetry_to.port == b->telemetry_to.port)) &&
           a->last_seq == b->last_seq && f32_bits(a->left) == f32_bits(b->left) &&
           f32_bits(a->right) == f32_bits(b->right) &&
           a->last_feed_us == b->last_feed_us && a->motor_ok == b->motor_ok &&
           a->camera_ok == b->camera_ok && a->last_telemetry_us == b->last_telemetry_us;
}

static void test_fuzz(void)
{
    mz01_car car;
    CHECK(mz01_car_init(&car, 9, NONCE, 77, true, true));
    uint64_t now = 0;
    long accepted = 0, rejected = 0;
    uint8_t b[40];
    const uint32_t ips[3] = {IP_A, IP_B, 0x7F000001u};
    for (int i = 0; i < 100000; i++) {
        now += rng() % 20000u;
        /* a plausible packet, then mutate a few bytes or the length */
        const uint8_t kind = (uint8_t)(1u + rng() % 5u);
        const float wheels[] = {0.0f, -0.0f, 0.5f, -1.0f, 1.0f};
        const float l = kind == MZ01_KIND_DRIVE ? wheels[rng() % 5u] : 0.0f;
        size_t n = packet(b, (uint8_t)(rng() % 8u == 0 ? rng() : 9u), kind,
                          (uint16_t)(rng() % 8u == 0 ? rng() : 0u),
                          rng() % 4u == 0 ? (uint32_t)rng() : car.token,
                          car.last_seq + (uint32_t)(rng() % 3u),
                          (uint32_t)(now / 1000u) + (uint32_t)(rng() % 150u) - 110u,
                          l, l);
        const int mutations = (int)(rng() % 4u);
        for (int m = 0; m < mutations; m++) {
            b[rng() % 32u] = (uint8_t)rng();
        }
        if (rng() % 16u == 0) {
            n = (size_t)(rng() % sizeof b);
        }
        const uint32_t ip = ips[rng() % 3u];
        const uint16_t port = (uint16_t)(5000u + rng() % 2u);
        if (rng() % 10u == 0) {
            mz01_car_set_health(&car, rng() % 4u != 0, rng() % 4u != 0);
        }
        const mz01_car before = car;
        const mz01_rx_result res = mz01_car_receive(&car, b, n, ip, port, now);
        if (res.accepted) {
            accepted++;
            CHECK(res.reason == MZ01_REASON_NONE);
            if (car.armed && !before.armed) {
                CHECK(b[5] == MZ01_KIND_ARM && !car.estop && car.motor_ok && car.camera_ok);
                CHECK(car.left == 0.0f && car.right == 0.0f);
            }
            if (car.token != before.token) {
                CHECK(car.token == before.token + 1u && !car.armed);
                CHECK(b[5] == MZ01_KIND_STOP || b[5] == MZ01_KIND_ESTOP);
            }
            if (car.left != before.left || car.right != before.right) {
                CHECK(b[5] == MZ01_KIND_DRIVE || b[5] == MZ01_KIND_ARM ||
                      b[5] == MZ01_KIND_STOP || b[5] == MZ01_KIND_ESTOP);
            }
        } else {
            rejected++;
            CHECK(res.reason != MZ01_REASON_NONE && res.reason < MZ01_REASON_WATCHDOG);
            CHECK(car.reason == res.reason);
            CHECK(same_but_reason(&before, &car));
        }
        if (res.accepted && (b[5] == MZ01_KIND_STOP || b[5] == MZ01_KIND_ESTOP)) {
            CHECK(!car.armed && car.token == before.token + 1u);
        }
        if (rng() % 3u == 0) {
            (void)mz01_car_tick(&car, now);
            CHECK(!car.armed || now - car.last_feed_us < MZ01_WATCHDOG_US);
            CHECK(!car.armed || (car.motor_ok && car.camera_ok));
        }
        CHECK(car.armed || (car.left == 0.0f && car.right == 0.0f));
        CHECK(car.armed == car.has_bound);
        if (car.estop && rng() % 50u == 0) {
            n = packet(b, 9, MZ01_KIND_HELLO, 1, car.token, 0, 0, 0, 0);
            CHECK(mz01_car_receive(&car, b, n, ip, port, now).accepted && !car.estop);
        }
    }
    CHECK(accepted > 1000 && rejected > 1000);
    printf("test_core: fuzz 100000 datagrams: %ld accepted, %ld rejected\n",
           accepted, rejected);
}

/* ------------------------------------------------------------------ */

int main(void)
{
    test_reason_names();
    test_codec_bytes();
    test_wheel_bits();
    test_probe();
    test_format_f32();
    test_json_checker();
    test_telemetry();
    test_destinations();
    test_fuzz();
    printf("test_core: %ld checks, %ld failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
