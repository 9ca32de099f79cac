/* textbuf.c — a growing text buffer (see textbuf.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "textbuf.h"

void textbuf_vput(textbuf *t, const char *fmt, va_list ap)
{
    if (t->failed)
        return;
    for (;;) {
        va_list aq;
        va_copy(aq, ap);
        int n = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? t->cap - t->len : 0, fmt, aq);
        va_end(aq);
        if (n < 0) {
            t->failed = 1;
            return;
        }
        if (t->buf && (size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap * 2 + (size_t)n + 1;
        char *b = realloc(t->buf, cap);
        if (!b) {
            t->failed = 1;
            return;
        }
        t->buf = b;
        t->cap = cap;
    }
}

void textbuf_put(textbuf *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    textbuf_vput(t, fmt, ap);
    va_end(ap);
}

void textbuf_json_str(textbuf *t, const char *s)
{
    textbuf_put(t, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            textbuf_put(t, "\\%c", c);
        else if (c < 0x20)
            textbuf_put(t, "\\u%04x", c);
        else
            textbuf_put(t, "%c", c);
    }
    textbuf_put(t, "\"");
}
