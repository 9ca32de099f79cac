/* log.h — calibd's log: levels, a module prefix on every line, and a rate
 * limit per message format so a flood of bad input cannot flood the log. */
#ifndef CALIBD_LOG_H
#define CALIBD_LOG_H

#include <stdint.h>
#include <stdio.h>

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

#define LOG_RL_SLOTS 64      /* distinct rate-limited formats tracked */
#define LOG_RL_BURST 10      /* lines per format per interval */
#define LOG_RL_INTERVAL 10.0 /* seconds */

typedef struct log_rl_slot {
    const char *fmt; /* key: the format string's address */
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

#endif
