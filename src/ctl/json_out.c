/* json_out.c — a minimal JSON writer for calibctl's reports. */
#include <math.h>

#include "json_out.h"

static void quoted(FILE *f, const char *s)
{
    fputc('"', f);
    for (const char *c = s; *c; c++) {
        if ((unsigned char)*c < 0x20) {
            fprintf(f, "\\u%04x", (unsigned char)*c);
            continue;
        }
        if (*c == '"' || *c == '\\')
            fputc('\\', f);
        fputc(*c, f);
    }
    fputc('"', f);
}

static void key(json_out *j, const char *k)
{
    fputs(j->first ? "" : ", ", j->f);
    j->first = 0;
    quoted(j->f, k);
    fputs(": ", j->f);
}

static void number(FILE *f, double x)
{
    if (isfinite(x))
        fprintf(f, "%.17g", x);
    else
        fputs("null", f);
}

void json_begin(json_out *j, FILE *f)
{
    *j = (json_out){.f = f, .depth = 1, .first = 1};
    fputc('{', f);
}

void json_end(json_out *j)
{
    fputs("}\n", j->f);
}

void json_num(json_out *j, const char *k, double x)
{
    key(j, k);
    number(j->f, x);
}

void json_uint(json_out *j, const char *k, unsigned long long x)
{
    key(j, k);
    fprintf(j->f, "%llu", x);
}

void json_str(json_out *j, const char *k, const char *s)
{
    key(j, k);
    quoted(j->f, s);
}

/* s, or null when s is NULL */
void json_str_or_null(json_out *j, const char *k, const char *s)
{
    key(j, k);
    if (s)
        quoted(j->f, s);
    else
        fputs("null", j->f);
}

void json_bool(json_out *j, const char *k, int b)
{
    key(j, k);
    fputs(b ? "true" : "false", j->f);
}

void json_pair(json_out *j, const char *k, const double x[2])
{
    key(j, k);
    if (!isfinite(x[0]) || !isfinite(x[1])) {
        fputs("null", j->f);
        return;
    }
    fputc('[', j->f);
    number(j->f, x[0]);
    fputs(", ", j->f);
    number(j->f, x[1]);
    fputc(']', j->f);
}

void json_object(json_out *j, const char *k)
{
    key(j, k);
    fputc('{', j->f);
    j->depth++;
    j->first = 1;
}

void json_close(json_out *j)
{
    fputc('}', j->f);
    j->depth--;
    j->first = 0;
}

void json_array(json_out *j, const char *k)
{
    key(j, k);
    fputc('[', j->f);
    j->depth++;
    j->first = 1;
}

/* An element has no key: only the comma before all but the first. */
void json_element(json_out *j)
{
    fputs(j->first ? "{" : ", {", j->f);
    j->depth++;
    j->first = 1;
}

void json_array_end(json_out *j)
{
    fputc(']', j->f);
    j->depth--;
    j->first = 0;
}
