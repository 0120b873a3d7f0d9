/*
 * mz01_core.c - see mz01_core.h and protocol/MZ01.md (normative).
 */
#include "mz01_core.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Every decision on a float (finite? within [-1, 1]? zero?) is taken on its
 * IEEE-754 bit pattern with integer compares, so no optimisation flag can
 * change it. Flags that let the compiler assume there are no NaN, Inf or
 * subnormals are refused outright all the same: under them the rest of the
 * program cannot be trusted to keep those values apart either. */
#if defined(__FAST_MATH__)
#error "mz01_core.c refuses -ffast-math (and -Ofast): the safety checks need IEEE-754 semantics"
#endif
#if defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__
#error "mz01_core.c refuses -ffinite-math-only: the safety checks need IEEE-754 semantics"
#endif

_Static_assert(sizeof(float) == 4, "MZ01 wheels are IEEE-754 binary32");
_Static_assert(sizeof(uint32_t) == sizeof(float), "float/u32 punning");

/* ------------------------------------------------------------------ */
/* Reasons                                                             */
/* ------------------------------------------------------------------ */

static const char *const reason_names[MZ01_REASON_COUNT] = {
    [MZ01_REASON_NONE] = "",
    [MZ01_REASON_BAD_LENGTH] = "bad_length",
    [MZ01_REASON_BAD_MAGIC] = "bad_magic",
    [MZ01_REASON_WRONG_ROBOT] = "wrong_robot",
    [MZ01_REASON_BAD_KIND] = "bad_kind",
    [MZ01_REASON_BAD_FLAGS] = "bad_flags",
    [MZ01_REASON_BAD_WHEELS] = "bad_wheels",
    [MZ01_REASON_BAD_NONCE] = "bad_nonce",
    [MZ01_REASON_BAD_TOKEN] = "bad_token",
    [MZ01_REASON_STALE_STAMP] = "stale_stamp",
    [MZ01_REASON_NONZERO_WHEELS] = "nonzero_wheels",
    [MZ01_REASON_UNHEALTHY] = "unhealthy",
    [MZ01_REASON_ESTOP_LATCHED] = "estop_latched",
    [MZ01_REASON_NOT_ARMED] = "not_armed",
    [MZ01_REASON_NOT_BOUND] = "not_bound",
    [MZ01_REASON_STALE_SEQ] = "stale_seq",
    [MZ01_REASON_WATCHDOG] = "watchdog",
    [MZ01_REASON_STOP] = "stop",
    [MZ01_REASON_ESTOP] = "estop",
};

const char *mz01_reason_name(mz01_reason r)
{
    if ((int)r < 0 || r >= MZ01_REASON_COUNT) {
        return NULL;
    }
    return reason_names[r];
}

bool mz01_reason_from_name(const char *name, mz01_reason *out)
{
    if (name == NULL || out == NULL) {
        return false;
    }
    for (int i = 0; i < (int)MZ01_REASON_COUNT; i++) {
        if (strcmp(name, reason_names[i]) == 0) {
            *out = (mz01_reason)i;
            return true;
        }
    }
    return false;
}

/* ------------------------------------------------------------------ */
/* Big-endian helpers                                                  */
/* ------------------------------------------------------------------ */

static uint16_t get_u16(const uint8_t *p)
{
    return (uint16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]);
}

static uint32_t get_u32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
           ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static float bits_to_f32(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint32_t f32_to_bits(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}

static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void put_u64(uint8_t *p, uint64_t v)
{
    put_u32(p, (uint32_t)(v >> 32));
    put_u32(p + 4, (uint32_t)v);
}

static void put_f32(uint8_t *p, float f)
{
    put_u32(p, f32_to_bits(f));
}

/* ------------------------------------------------------------------ */
/* Codec                                                               */
/* ------------------------------------------------------------------ */

static const uint8_t command_magic[4] = {'M', 'Z', '0', '1'};
static const uint8_t probe_magic[4] = {'M', 'Z', 'C', '1'};

#define F32_MAGNITUDE 0x7FFFFFFFu /* every bit but the sign */
#define F32_ONE 0x3F800000u       /* 1.0f */
#define F32_EXPONENT 0x7F800000u  /* all ones: Inf or NaN */

/* Finite and within [-1, 1]: |w| <= 1.0 compares as integers because
 * binary32 magnitudes order like their bit patterns; Inf and NaN have
 * magnitude bits >= 0x7F800000 > 0x3F800000. */
static bool wheel_ok(uint32_t bits)
{
    return (bits & F32_MAGNITUDE) <= F32_ONE;
}

/* +0.0 or -0.0 (a subnormal is not zero). */
static bool f32_is_zero(float w)
{
    return (f32_to_bits(w) & F32_MAGNITUDE) == 0u;
}

static bool f32_is_finite(float w)
{
    return (f32_to_bits(w) & F32_EXPONENT) != F32_EXPONENT;
}

static bool kind_stops(uint8_t kind)
{
    return kind == MZ01_KIND_STOP || kind == MZ01_KIND_ESTOP;
}

mz01_reason mz01_decode(const uint8_t *buf, size_t len, mz01_packet *out)
{
    if (buf == NULL || len != MZ01_PACKET_LEN) {
        return MZ01_REASON_BAD_LENGTH;
    }
    if (memcmp(buf, command_magic, sizeof command_magic) != 0) {
        return MZ01_REASON_BAD_MAGIC;
    }
    const uint8_t kind = buf[5];
    if (kind < MZ01_KIND_HELLO || kind > MZ01_KIND_ESTOP) {
        return MZ01_REASON_BAD_KIND;
    }
    const uint16_t flags = get_u16(buf + 6);
    const uint32_t left = get_u32(buf + 24);
    const uint32_t right = get_u32(buf + 28);
    if (!kind_stops(kind)) { /* a STOP or ESTOP stops whatever these hold */
        if ((flags & (uint16_t)~MZ01_FLAG_RESET_ESTOP) != 0u ||
            ((flags & MZ01_FLAG_RESET_ESTOP) != 0u && kind != MZ01_KIND_HELLO)) {
            return MZ01_REASON_BAD_FLAGS;
        }
        if (!wheel_ok(left) || !wheel_ok(right)) {
            return MZ01_REASON_BAD_WHEELS;
        }
    }
    if (out != NULL) {
        out->robot_id = buf[4];
        out->kind = kind;
        out->flags = flags;
        out->boot_nonce = get_u32(buf + 8);
        out->session_token = get_u32(buf + 12);
        out->seq = get_u32(buf + 16);
        out->stamp_ms = get_u32(buf + 20);
        out->left = bits_to_f32(left);
        out->right = bits_to_f32(right);
    }
    return MZ01_REASON_NONE;
}

void mz01_encode(const mz01_packet *p, uint8_t out[MZ01_PACKET_LEN])
{
    memcpy(out, command_magic, sizeof command_magic);
    out[4] = p->robot_id;
    out[5] = p->kind;
    put_u16(out + 6, p->flags);
    put_u32(out + 8, p->boot_nonce);
    put_u32(out + 12, p->session_token);
    put_u32(out + 16, p->seq);
    put_u32(out + 20, p->stamp_ms);
    put_f32(out + 24, p->left);
    put_f32(out + 28, p->right);
}

/* ------------------------------------------------------------------ */
/* State machine                                                       */
/* ------------------------------------------------------------------ */

bool mz01_car_init(mz01_car *car, uint8_t robot_id, uint32_t boot_nonce,
                   uint32_t token, bool motor_ok, bool camera_ok)
{
    if (car == NULL) {
        return false;
    }
    memset(car, 0, sizeof *car);
    if (robot_id == 0u) {
        return false;
    }
    car->robot_id = robot_id;
    car->boot_nonce = boot_nonce;
    car->token = token;
    car->armed = false;
    car->estop = false;
    car->has_bound = false;
    car->has_telemetry_to = false;
    car->last_seq = 0u;
    car->left = 0.0f;
    car->right = 0.0f;
    car->last_feed_us = 0u;
    car->motor_ok = motor_ok;
    car->camera_ok = camera_ok;
    car->reason = MZ01_REASON_NONE;
    car->last_telemetry_us = 0u;
    return true;
}

void mz01_car_set_health(mz01_car *car, bool motor_ok, bool camera_ok)
{
    car->motor_ok = motor_ok;
    car->camera_ok = camera_ok;
}

static bool endpoint_eq(mz01_endpoint a, mz01_endpoint b)
{
    return a.ip == b.ip && a.port == b.port;
}

static bool is_bound_to(const mz01_car *car, mz01_endpoint src)
{
    return car->has_bound && endpoint_eq(car->bound, src);
}

static void add_destination(mz01_destinations *d, mz01_endpoint to)
{
    for (uint8_t i = 0; i < d->count; i++) {
        if (endpoint_eq(d->to[i], to)) {
            return;
        }
    }
    if (d->count < MZ01_MAX_DESTINATIONS) {
        d->to[d->count] = to;
        d->count++;
    }
}

/* The one place that disarms (STOP, ESTOP, watchdog, health). Adds the
 * telemetry it owes at once: `telemetry_to`, then the sender the car was
 * bound to. */
static void disarm(mz01_car *car, mz01_reason why, mz01_destinations *notify)
{
    if (car->has_telemetry_to) {
        add_destination(notify, car->telemetry_to);
    }
    if (car->has_bound) {
        add_destination(notify, car->bound);
    }
    car->left = 0.0f;
    car->right = 0.0f;
    car->armed = false;
    car->has_bound = false;
    car->bound.ip = 0u;
    car->bound.port = 0u;
    car->token += 1u; /* u32: wraps modulo 2^32 */
    car->reason = why;
}

/* int32(stamp_ms - uptime_ms), computed in u32 first: no signed overflow. */
static int32_t stamp_offset_ms(uint32_t stamp_ms, uint64_t now_us)
{
    const uint32_t uptime_ms = (uint32_t)(now_us / 1000u);
    const uint32_t diff = stamp_ms - uptime_ms;
    if (diff <= (uint32_t)INT32_MAX) {
        return (int32_t)diff;
    }
    return (int32_t)(diff - (uint32_t)INT32_MAX - 1u) + INT32_MIN;
}

static bool stamp_fresh(int32_t d)
{
    return d >= MZ01_STAMP_MIN_MS && d <= MZ01_STAMP_MAX_MS;
}

/* Where the watchdog lease of an accepted ARM or DRIVE starts: at its stamp
 * when the stamp is in the past (d < 0), else now; never before boot. */
static uint64_t lease_start_us(uint64_t now_us, int32_t d)
{
    const uint64_t lag_us = d < 0 ? (uint64_t)(-(int64_t)d) * 1000u : 0u;
    return now_us >= lag_us ? now_us - lag_us : 0u;
}

static mz01_reason check_session(const mz01_car *car, const mz01_packet *p)
{
    if (p->boot_nonce != car->boot_nonce) {
        return MZ01_REASON_BAD_NONCE;
    }
    if (p->session_token != car->token) {
        return MZ01_REASON_BAD_TOKEN;
    }
    return MZ01_REASON_NONE;
}

static mz01_reason on_hello(mz01_car *car, const mz01_packet *p)
{
    if ((p->flags & MZ01_FLAG_RESET_ESTOP) != 0u) {
        const mz01_reason r = check_session(car, p);
        if (r != MZ01_REASON_NONE) {
            return r;
        }
        car->estop = false;
    }
    return MZ01_REASON_NONE;
}

static mz01_reason on_arm(mz01_car *car, const mz01_packet *p,
                          mz01_endpoint src, uint64_t now_us)
{
    const mz01_reason r = check_session(car, p);
    if (r != MZ01_REASON_NONE) {
        return r;
    }
    if (car->estop) {
        return MZ01_REASON_ESTOP_LATCHED;
    }
    if (!car->motor_ok || !car->camera_ok) {
        return MZ01_REASON_UNHEALTHY;
    }
    if (!f32_is_zero(p->left) || !f32_is_zero(p->right)) {
        return MZ01_REASON_NONZERO_WHEELS;
    }
    const int32_t d = stamp_offset_ms(p->stamp_ms, now_us);
    if (!stamp_fresh(d)) {
        return MZ01_REASON_STALE_STAMP;
    }
    if (car->armed && !is_bound_to(car, src)) {
        return MZ01_REASON_NOT_BOUND;
    }
    if (car->armed && p->seq <= car->last_seq) {
        return MZ01_REASON_STALE_SEQ;
    }
    car->armed = true;
    car->has_bound = true;
    car->bound = src;
    car->last_seq = p->seq;
    car->left = 0.0f;
    car->right = 0.0f;
    car->last_feed_us = lease_start_us(now_us, d);
    car->reason = MZ01_REASON_NONE;
    return MZ01_REASON_NONE;
}

static mz01_reason on_drive(mz01_car *car, const mz01_packet *p,
                            mz01_endpoint src, uint64_t now_us)
{
    const mz01_reason r = check_session(car, p);
    if (r != MZ01_REASON_NONE) {
        return r;
    }
    if (!car->armed) {
        return MZ01_REASON_NOT_ARMED;
    }
    const int32_t d = stamp_offset_ms(p->stamp_ms, now_us);
    if (!stamp_fresh(d)) {
        return MZ01_REASON_STALE_STAMP;
    }
    if (!is_bound_to(car, src)) {
        return MZ01_REASON_NOT_BOUND;
    }
    if (p->seq <= car->last_seq) {
        return MZ01_REASON_STALE_SEQ;
    }
    car->left = p->left;
    car->right = p->right;
    car->last_seq = p->seq;
    car->last_feed_us = lease_start_us(now_us, d);
    return MZ01_REASON_NONE;
}

mz01_rx_result mz01_car_receive(mz01_car *car, const uint8_t *buf, size_t len,
                                uint32_t src_ip, uint16_t src_port,
                                uint64_t now_us)
{
    mz01_rx_result res;
    memset(&res, 0, sizeof res);
    const mz01_endpoint src = {src_ip, src_port};

    mz01_packet p;
    memset(&p, 0, sizeof p);
    mz01_reason r = mz01_decode(buf, len, &p);
    /* id 0 means "any car" for HELLO, STOP and ESTOP */
    const bool any_car = p.robot_id == 0u && p.kind != MZ01_KIND_ARM &&
                         p.kind != MZ01_KIND_DRIVE;
    if (r == MZ01_REASON_NONE && p.robot_id != car->robot_id && !any_car) {
        r = MZ01_REASON_WRONG_ROBOT;
    }
    if (r == MZ01_REASON_NONE) {
        switch ((mz01_kind)p.kind) {
        case MZ01_KIND_HELLO:
            r = on_hello(car, &p);
            break;
        case MZ01_KIND_ARM:
            r = on_arm(car, &p, src, now_us);
            break;
        case MZ01_KIND_DRIVE:
            r = on_drive(car, &p, src, now_us);
            break;
        case MZ01_KIND_STOP:
            disarm(car, MZ01_REASON_STOP, &res.telemetry);
            break;
        case MZ01_KIND_ESTOP:
            car->estop = true;
            disarm(car, MZ01_REASON_ESTOP, &res.telemetry);
            break;
        default: /* unreachable: mz01_decode checked the kind */
            r = MZ01_REASON_BAD_KIND;
            break;
        }
    }

    if (r != MZ01_REASON_NONE) {
        car->reason = r; /* a rejection changes nothing else */
        res.accepted = false;
        res.reason = r;
        return res;
    }
    res.accepted = true;
    res.reason = MZ01_REASON_NONE;
    if (p.kind == MZ01_KIND_HELLO) {
        car->has_telemetry_to = true;
        car->telemetry_to = src;
        add_destination(&res.telemetry, src);
    }
    return res;
}

mz01_destinations mz01_car_tick(mz01_car *car, uint64_t now_us)
{
    mz01_destinations due;
    memset(&due, 0, sizeof due);

    /* Unsigned differences: a clock that ran backwards reads as a huge
     * elapsed time, so it disarms (fails safe) instead of freezing. */
    if (car->armed && now_us - car->last_feed_us >= MZ01_WATCHDOG_US) {
        disarm(car, MZ01_REASON_WATCHDOG, &due);
    }
    if (car->armed && (!car->motor_ok || !car->camera_ok)) {
        disarm(car, MZ01_REASON_UNHEALTHY, &due);
    }

    if (now_us - car->last_telemetry_us >= MZ01_TELEMETRY_PERIOD_US) {
        car->last_telemetry_us = now_us;
        if (car->has_telemetry_to) {
            add_destination(&due, car->telemetry_to);
        }
        if (car->armed && car->has_bound) {
            add_destination(&due, car->bound);
        }
    }
    return due;
}

/* ------------------------------------------------------------------ */
/* Clock probe                                                         */
/* ------------------------------------------------------------------ */

size_t mz01_probe_reply(const uint8_t *req, size_t len, uint64_t now_us,
                        uint8_t reply[MZ01_PROBE_REPLY_LEN])
{
    if (req == NULL || reply == NULL || len != MZ01_PROBE_REQUEST_LEN ||
        memcmp(req, probe_magic, sizeof probe_magic) != 0) {
        return 0u;
    }
    memcpy(reply, req, MZ01_PROBE_REQUEST_LEN);
    put_u64(reply + MZ01_PROBE_REQUEST_LEN, now_us);
    return MZ01_PROBE_REPLY_LEN;
}

/* ------------------------------------------------------------------ */
/* Bounded text writer                                                 */
/* ------------------------------------------------------------------ */

typedef struct {
    char *buf;
    size_t cap; /* bytes available, NUL included */
    size_t len;
    bool overflow;
} writer;

static void w_char(writer *w, char c)
{
    if (w->overflow || w->len + 1u >= w->cap) {
        w->overflow = true;
        return;
    }
    w->buf[w->len++] = c;
}

static void w_str(writer *w, const char *s)
{
    while (*s != '\0') {
        w_char(w, *s++);
    }
}

static void w_u64(writer *w, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + (int)(v % 10u));
        v /= 10u;
    } while (v != 0u);
    while (n > 0) {
        w_char(w, tmp[--n]);
    }
}

static void w_i64(writer *w, int64_t v)
{
    if (v < 0) {
        w_char(w, '-');
        w_u64(w, (uint64_t)(-(v + 1)) + 1u);
    } else {
        w_u64(w, (uint64_t)v);
    }
}

static void w_bool(writer *w, bool v)
{
    w_str(w, v ? "true" : "false");
}

static int w_finish(writer *w)
{
    if (w->overflow) {
        if (w->cap > 0u) {
            w->buf[0] = '\0';
        }
        return MZ01_ERR_BUFFER;
    }
    w->buf[w->len] = '\0';
    return (int)w->len;
}

/* ------------------------------------------------------------------ */
/* binary32 -> "%.9g", exactly, without stdio                          */
/* ------------------------------------------------------------------ */

/* A float's exact value is N * 10^exp10 with N an integer of at most ~115
 * decimal digits (m * 5^k for the negative binary exponents). N lives in
 * base-10^9 limbs, least significant first. */
#define BIG_LIMBS 14
#define BIG_BASE 1000000000u

typedef struct {
    uint32_t limb[BIG_LIMBS];
    int n;
} bigdec;

static void big_mul_small(bigdec *b, uint32_t factor)
{
    uint64_t carry = 0;
    for (int i = 0; i < b->n; i++) {
        const uint64_t v = (uint64_t)b->limb[i] * factor + carry;
        b->limb[i] = (uint32_t)(v % BIG_BASE);
        carry = v / BIG_BASE;
    }
    while (carry != 0u && b->n < BIG_LIMBS) {
        b->limb[b->n++] = (uint32_t)(carry % BIG_BASE);
        carry /= BIG_BASE;
    }
}

/* b *= base^count, in steps of at most base^max_step. */
static void big_mul_pow(bigdec *b, uint32_t base, int max_step, int count)
{
    while (count > 0) {
        const int step = count < max_step ? count : max_step;
        uint32_t factor = 1u;
        for (int i = 0; i < step; i++) {
            factor *= base;
        }
        big_mul_small(b, factor);
        count -= step;
    }
}

/* Writes the decimal digits of b (most significant first, no leading
 * zeros) into digits; returns their count. */
static int big_digits(const bigdec *b, char *digits)
{
    int nd = 0;
    char tmp[9];
    uint32_t top = b->limb[b->n - 1];
    int t = 0;
    do {
        tmp[t++] = (char)('0' + (int)(top % 10u));
        top /= 10u;
    } while (top != 0u);
    while (t > 0) {
        digits[nd++] = tmp[--t];
    }
    for (int i = b->n - 2; i >= 0; i--) {
        uint32_t v = b->limb[i];
        for (int j = 8; j >= 0; j--) {
            digits[nd + j] = (char)('0' + (int)(v % 10u));
            v /= 10u;
        }
        nd += 9;
    }
    return nd;
}

#define SIG_DIGITS 9

int mz01_format_f32(float value, char *buf, size_t cap)
{
    if (buf == NULL || !f32_is_finite(value)) {
        return MZ01_ERR_ARG;
    }
    writer w = {buf, cap, 0u, false};
    const uint32_t bits = f32_to_bits(value);
    const bool negative = (bits >> 31) != 0u;
    const uint32_t exp_field = (bits >> 23) & 0xFFu;
    uint32_t mant = bits & 0x7FFFFFu;
    int exp2;
    if (exp_field == 0u) {
        exp2 = -149;
    } else {
        mant |= 0x800000u;
        exp2 = (int)exp_field - 150;
    }
    if (negative) {
        w_char(&w, '-');
    }
    if (mant == 0u) {
        w_char(&w, '0');
        return w_finish(&w);
    }

    bigdec n;
    memset(&n, 0, sizeof n);
    n.limb[0] = mant; /* < 2^24 < BIG_BASE */
    n.n = 1;
    int exp10 = 0;
    if (exp2 >= 0) {
        big_mul_pow(&n, 2u, 31, exp2); /* 2^31 * BIG_BASE fits in a u64 */
    } else {
        big_mul_pow(&n, 5u, 13, -exp2); /* so does 5^13 * BIG_BASE */
        exp10 = exp2;
    }

    char digits[BIG_LIMBS * 9];
    int nd = big_digits(&n, digits);
    /* value = 0.d1d2d3... * 10^(nd + exp10); scientific exponent: */
    int sci = nd + exp10 - 1;

    /* Round to SIG_DIGITS significant digits, ties to even (as glibc). */
    char sig[SIG_DIGITS];
    for (int i = 0; i < SIG_DIGITS; i++) {
        sig[i] = i < nd ? digits[i] : '0';
    }
    if (nd > SIG_DIGITS) {
        const char next = digits[SIG_DIGITS];
        bool rest_nonzero = false;
        for (int i = SIG_DIGITS + 1; i < nd; i++) {
            if (digits[i] != '0') {
                rest_nonzero = true;
                break;
            }
        }
        const bool last_odd = ((sig[SIG_DIGITS - 1] - '0') & 1) != 0;
        const bool up = next > '5' || (next == '5' && (rest_nonzero || last_odd));
        if (up) {
            int i = SIG_DIGITS - 1;
            while (i >= 0 && sig[i] == '9') {
                sig[i] = '0';
                i--;
            }
            if (i >= 0) {
                sig[i]++;
            } else {
                sig[0] = '1'; /* 999999999 -> 1000000000 */
                sci++;
            }
        }
    }
    int ns = SIG_DIGITS;
    while (ns > 1 && sig[ns - 1] == '0') {
        ns--;
    }

    if (sci < -4 || sci >= SIG_DIGITS) {
        w_char(&w, sig[0]);
        if (ns > 1) {
            w_char(&w, '.');
            for (int i = 1; i < ns; i++) {
                w_char(&w, sig[i]);
            }
        }
        w_char(&w, 'e');
        w_char(&w, sci < 0 ? '-' : '+');
        const int mag = sci < 0 ? -sci : sci;
        if (mag < 10) {
            w_char(&w, '0');
        }
        w_u64(&w, (uint64_t)mag);
    } else if (sci >= 0) {
        for (int i = 0; i <= sci; i++) {
            w_char(&w, sig[i]);
        }
        if (ns > sci + 1) {
            w_char(&w, '.');
            for (int i = sci + 1; i < ns; i++) {
                w_char(&w, sig[i]);
            }
        }
    } else {
        w_str(&w, "0.");
        for (int i = 0; i < -sci - 1; i++) {
            w_char(&w, '0');
        }
        for (int i = 0; i < ns; i++) {
            w_char(&w, sig[i]);
        }
    }
    return w_finish(&w);
}

/* ------------------------------------------------------------------ */
/* Telemetry                                                           */
/* ------------------------------------------------------------------ */

static void w_float_or_null(writer *w, float v)
{
    char tmp[MZ01_F32_MAX_LEN + 1u];
    if (mz01_format_f32(v, tmp, sizeof tmp) < 0) {
        w_str(w, "null");
    } else {
        w_str(w, tmp);
    }
}

/* Finite and |a| <= MZ01_GYRO_ANGLE_MAX, on the bit pattern as wheel_ok. */
static bool gyro_angle_ok(float a)
{
    return (f32_to_bits(a) & F32_MAGNITUDE) <= MZ01_GYRO_ANGLE_MAX_BITS;
}

int mz01_telemetry_format(const mz01_car *car, uint64_t now_us,
                          const mz01_board_info *board, char *buf, size_t cap)
{
    if (car == NULL || board == NULL || buf == NULL) {
        return MZ01_ERR_ARG;
    }
    const char *reason = mz01_reason_name(car->reason);
    if (reason == NULL) {
        reason = ""; /* unreachable through the API */
    }
    writer w = {buf, cap, 0u, false};
    w_str(&w, "{\"id\":");
    w_u64(&w, car->robot_id);
    w_str(&w, ",\"boot\":");
    w_u64(&w, car->boot_nonce);
    w_str(&w, ",\"token\":");
    w_u64(&w, car->token);
    w_str(&w, ",\"uptime_ms\":");
    w_u64(&w, now_us / 1000u);
    w_str(&w, ",\"armed\":");
    w_bool(&w, car->armed);
    w_str(&w, ",\"estop\":");
    w_bool(&w, car->estop);
    /* Reason names are [a-z_]: nothing to escape. */
    w_str(&w, ",\"reason\":\"");
    w_str(&w, reason);
    w_str(&w, "\",\"rssi\":");
    w_i64(&w, board->rssi_dbm);
    w_str(&w, ",\"camera_ok\":");
    w_bool(&w, car->camera_ok);
    w_str(&w, ",\"motor_ok\":");
    w_bool(&w, car->motor_ok);
    w_str(&w, ",\"seq\":");
    w_u64(&w, car->last_seq);
    w_str(&w, ",\"duty\":[");
    w_float_or_null(&w, car->left);
    w_char(&w, ',');
    w_float_or_null(&w, car->right);
    w_str(&w, "],\"gyro_z\":");
    if (board->has_gyro_z) {
        w_float_or_null(&w, board->gyro_z);
    } else {
        w_str(&w, "null");
    }
    w_str(&w, ",\"gyro_angle\":");
    if (board->has_gyro_angle && gyro_angle_ok(board->gyro_angle)) {
        w_float_or_null(&w, board->gyro_angle);
    } else {
        w_str(&w, "null");
    }
    w_char(&w, '}');
    return w_finish(&w);
}
