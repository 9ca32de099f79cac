/* log.c — leveled, prefixed, rate-limited logging to a stream. */
#include <stdarg.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void log_init(logger *l, enum log_level level, FILE *out)
{
    memset(l, 0, sizeof *l);
    l->level = level;
    l->out = out;
}

int log_level_parse(const char *s)
{
    for (int i = 0; i <= LOG_DEBUG; i++)
        if (strcmp(s, level_names[i]) == 0)
            return i;
    return -1;
}

__attribute__((format(printf, 4, 0)))
static void emit(logger *l, enum log_level level, const char *module,
                 const char *fmt, va_list ap)
{
    char stamp[32];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(l->out, "%s.%03ldZ %s: %s: ", stamp, ts.tv_nsec / 1000000,
            level_names[level], module);
    vfprintf(l->out, fmt, ap);
    fputc('\n', l->out);
    fflush(l->out);
}

void log_msg(logger *l, enum log_level level, const char *module, const char *fmt, ...)
{
    if (level > l->level)
        return;
    va_list ap;
    va_start(ap, fmt);
    emit(l, level, module, fmt, ap);
    va_end(ap);
}

/* The slot of key, or the least recently started one to reuse. */
static log_rl_slot *rl_slot(logger *l, const char *key, int named)
{
    log_rl_slot *oldest = &l->rl[0];
    for (int i = 0; i < LOG_RL_SLOTS; i++) {
        const log_rl_slot *s = &l->rl[i];
        if (s->key && s->named == named && (s->key == key || strcmp(s->key, key) == 0))
            return &l->rl[i];
        if (l->rl[i].start < oldest->start)
            oldest = &l->rl[i];
    }
    *oldest = (log_rl_slot){.key = key, .named = named, .start = -1e300};
    return oldest;
}

/* Whether a line of the slot's key may be shown now; opens a new interval
 * (saying how many lines the last one suppressed) when one is due. */
static int rl_admit(logger *l, log_rl_slot *s, enum log_level level, const char *module)
{
    double now = mono_now();
    if (now - s->start >= LOG_RL_INTERVAL) {
        if (s->suppressed && s->named)
            log_msg(l, level, module, "%u more \"%s\" messages suppressed", s->suppressed,
                    s->key);
        else if (s->suppressed)
            log_msg(l, level, module, "%u similar messages suppressed", s->suppressed);
        s->start = now;
        s->shown = s->suppressed = 0;
    }
    if (s->shown >= LOG_RL_BURST) {
        s->suppressed++;
        return 0;
    }
    s->shown++;
    return 1;
}

void log_rl(logger *l, enum log_level level, const char *module, const char *fmt, ...)
{
    if (level > l->level || !rl_admit(l, rl_slot(l, fmt, 0), level, module))
        return;
    va_list ap;
    va_start(ap, fmt);
    emit(l, level, module, fmt, ap);
    va_end(ap);
}

void log_rl_key(logger *l, const char *key, enum log_level level, const char *module,
                const char *fmt, ...)
{
    if (level > l->level || !rl_admit(l, rl_slot(l, key, 1), level, module))
        return;
    va_list ap;
    va_start(ap, fmt);
    emit(l, level, module, fmt, ap);
    va_end(ap);
}

char *log_escape(char *out, size_t cap, const void *bytes, size_t len, size_t max)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *b = bytes;
    size_t o = 0, n = len < max ? len : max;
    if (cap == 0)
        return out;
    for (size_t i = 0; i < n && b; i++) {
        unsigned c = b[i];
        int plain = c >= 0x20 && c <= 0x7e && c != '\\' && c != '"';
        if (o + (plain ? 1 : 4) >= cap)
            break;
        if (plain) {
            out[o++] = (char)c;
            continue;
        }
        out[o++] = '\\';
        out[o++] = 'x';
        out[o++] = hex[c >> 4];
        out[o++] = hex[c & 15];
    }
    out[o] = 0;
    if (len > n)
        snprintf(out + o, cap - o, "...(%zu bytes)", len);
    return out;
}
