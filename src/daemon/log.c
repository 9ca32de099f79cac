/* log.c — leveled, prefixed, rate-limited logging to a stream. */
#include <stdarg.h>
#include <string.h>
#include <time.h>

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

static double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

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

/* The slot of fmt, or the least recently started one to reuse. */
static log_rl_slot *rl_slot(logger *l, const char *fmt)
{
    log_rl_slot *oldest = &l->rl[0];
    for (int i = 0; i < LOG_RL_SLOTS; i++) {
        if (l->rl[i].fmt == fmt)
            return &l->rl[i];
        if (l->rl[i].start < oldest->start)
            oldest = &l->rl[i];
    }
    *oldest = (log_rl_slot){.fmt = fmt, .start = -1e300};
    return oldest;
}

void log_rl(logger *l, enum log_level level, const char *module, const char *fmt, ...)
{
    if (level > l->level)
        return;
    log_rl_slot *s = rl_slot(l, fmt);
    double now = now_mono();
    if (now - s->start >= LOG_RL_INTERVAL) {
        if (s->suppressed)
            log_msg(l, level, module, "%u similar messages suppressed", s->suppressed);
        s->start = now;
        s->shown = s->suppressed = 0;
    }
    if (s->shown >= LOG_RL_BURST) {
        s->suppressed++;
        return;
    }
    s->shown++;
    va_list ap;
    va_start(ap, fmt);
    emit(l, level, module, fmt, ap);
    va_end(ap);
}
