/* log.h — calibd's log: levels, a module prefix on every line, and rate
 * limits (per key: a message format, or a name such as a rejection reason)
 * so that a flood of bad input cannot flood the log, nor one kind of line
 * hide the others. */
#ifndef CALIBD_LOG_H
#define CALIBD_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* The size of every buffer for an error message: one may name a file of
 * the state directory (a path up to PATH_MAX, 4096) and say why. */
#define ERR_MAX 4800

#define LOG_RL_SLOTS 64      /* distinct rate-limit keys tracked */
#define LOG_RL_BURST 10      /* lines per key per interval */
#define LOG_RL_INTERVAL 10.0 /* seconds */

typedef struct log_rl_slot {
    const char *key; /* a format string, or a name (compared by content) */
    int named;       /* key is a name, said in the suppression count */
    double start;    /* start of the current interval */
    unsigned shown, suppressed;
} log_rl_slot;

typedef struct logger {
    enum log_level level;
    FILE *out;
    log_rl_slot rl[LOG_RL_SLOTS];
} logger;

void log_init(logger *l, enum log_level level, FILE *out);
/* "error", "warn", "info", "debug" -> level; -1 if unknown. */
int log_level_parse(const char *s);

void log_msg(logger *l, enum log_level level, const char *module, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* As log_msg, but at most LOG_RL_BURST lines per format per interval; the
 * count of suppressed lines is reported when the next interval starts. */
void log_rl(logger *l, enum log_level level, const char *module, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* As log_rl, with the budget of the name `key` (a string that outlives the
 * logger, e.g. a rejection reason's name) instead of the format's: lines of
 * different keys never suppress one another. */
void log_rl_key(logger *l, const char *key, enum log_level level, const char *module,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Room log_escape needs for `max` bytes: 4 per byte, the marks, the NUL. */
#define LOG_ESCAPE_SIZE(max) (4 * (size_t)(max) + 32)
/* Writes bytes[0..len) into out (cap bytes, NUL-terminated) as printable
 * ASCII: a byte outside 0x20..0x7e, a backslash or a double quote as \xHH,
 * at most `max` bytes of the input, then "...(N bytes)" when there are more.
 * For a topic, an id or anything else a producer chose. Returns out. */
char *log_escape(char *out, size_t cap, const void *bytes, size_t len, size_t max);

#endif
