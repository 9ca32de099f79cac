/* textbuf.h — a growing text buffer, for what HTTP serves: the Prometheus
 * exposition (prom.c) and the JSON of /history (http.c). A write that
 * cannot grow the buffer sets failed, and every later write does nothing:
 * the caller checks once, at the end. */
#ifndef CALIBD_TEXTBUF_H
#define CALIBD_TEXTBUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct textbuf {
    char *buf;  /* malloc'ed, or NULL: the first write allocates */
    size_t len, cap;
    int failed; /* out of memory, or a format error: the text is incomplete */
} textbuf;

/* Appends the formatted text. */
__attribute__((format(printf, 2, 3)))
void textbuf_put(textbuf *t, const char *fmt, ...);
__attribute__((format(printf, 2, 0)))
void textbuf_vput(textbuf *t, const char *fmt, va_list ap);
/* Appends s as a JSON string, quoted and escaped. */
void textbuf_json_str(textbuf *t, const char *s);

#endif
