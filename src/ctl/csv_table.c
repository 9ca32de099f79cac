/* csv_table.c — numeric CSV through libcsv, with exact line numbers; text
 * columns where the header callback asks for them. */
#include <csv.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csv_table.h"

typedef struct reader {
    csv_header_fn header;
    csv_row_fn row;
    void *ctx;
    char *err;
    size_t errlen;
    unsigned long line;  /* line of the record being read */
    unsigned long bad_line;
    int failed;
    int sys;             /* the failure is the system's, not the file's */
    int have_header;
    char **names;        /* header fields */
    size_t ncol;
    size_t cap;
    double *v;           /* current row's numbers */
    size_t nfield;       /* fields seen in the current record */
    unsigned char *is_text; /* [ncol] the header callback's marks */
    csv_text *text;      /* [ncol] the current row's text fields */
    char *tb;            /* their bytes, each NUL-terminated, one after another */
    size_t tb_len, tb_cap;
    size_t *toff;        /* [ncol] a text field's offset in tb */
} reader;

__attribute__((format(printf, 2, 3)))
static void fail(reader *r, const char *fmt, ...)
{
    if (r->failed)
        return;
    r->failed = 1;
    r->bad_line = r->line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, r->errlen, fmt, ap);
    va_end(ap);
}

/* A field must be a whole finite decimal number; surrounding blanks were
 * trimmed by libcsv. */
static int parse_number(const char *s, size_t len, double *out)
{
    char buf[128];
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, s, len);
    buf[len] = 0;
    char *end;
    errno = 0;
    double x = strtod(buf, &end);
    if (end != buf + len || !isfinite(x))
        return -1;
    *out = x;
    return 0;
}

static void fail_oom(reader *r)
{
    r->sys = 1;
    fail(r, "out of memory");
}

static void add_name(reader *r, size_t col, const char *s, size_t len)
{
    if (col == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 16;
        char **names = realloc(r->names, cap * sizeof *names);
        if (!names) {
            fail_oom(r);
            return;
        }
        r->names = names;
        r->cap = cap;
    }
    if (!(r->names[col] = strndup(s, len))) {
        fail_oom(r);
        return;
    }
    r->ncol = col + 1;
}

/* A text column's field to tb; its pointer is set at the record's end (tb
 * may move meanwhile). */
static void keep_text(reader *r, size_t col, const char *s, size_t len)
{
    if (len >= r->tb_cap - r->tb_len) {
        size_t cap = r->tb_cap ? r->tb_cap : 256;
        while (cap - r->tb_len <= len) {
            if (cap > SIZE_MAX / 2) {
                fail_oom(r);
                return;
            }
            cap *= 2;
        }
        char *tb = realloc(r->tb, cap);
        if (!tb) {
            fail_oom(r);
            return;
        }
        r->tb = tb;
        r->tb_cap = cap;
    }
    r->toff[col] = r->tb_len;
    if (len)
        memcpy(r->tb + r->tb_len, s, len);
    r->tb[r->tb_len + len] = 0;
    r->text[col].len = len;
    r->tb_len += len + 1;
}

static void on_field(void *s, size_t len, void *data)
{
    reader *r = data;
    if (r->failed)
        return;
    size_t col = r->nfield++;
    if (!r->have_header) {
        add_name(r, col, s, len);
        return;
    }
    if (col >= r->ncol)
        return; /* counted; reported at the end of the record */
    if (r->is_text[col]) {
        keep_text(r, col, s, len);
        return;
    }
    if (parse_number(s, len, &r->v[col]) != 0) {
        char text[48];
        size_t n = len < sizeof text - 1 ? len : sizeof text - 1;
        memcpy(text, s, n);
        text[n] = 0;
        fail(r, "'%s' in column %zu is not a finite number", text, col + 1);
    }
}

static void end_header(reader *r)
{
    r->have_header = 1;
    if (!(r->v = calloc(r->ncol, sizeof *r->v)) ||
        !(r->is_text = calloc(r->ncol, sizeof *r->is_text)) ||
        !(r->text = calloc(r->ncol, sizeof *r->text)) ||
        !(r->toff = calloc(r->ncol, sizeof *r->toff))) {
        fail_oom(r);
        return;
    }
    if (r->header(r->ctx, r->names, r->ncol, r->is_text, r->err, r->errlen) != 0) {
        r->failed = 1;
        r->bad_line = r->line;
        return;
    }
    for (size_t c = 0; c < r->ncol; c++)
        if (r->is_text[c])
            r->v[c] = NAN;
}

/* The row to the callback, text fields pointing into tb. */
static int call_row(reader *r)
{
    for (size_t c = 0; c < r->ncol; c++)
        if (r->is_text[c])
            r->text[c].s = r->tb + r->toff[c];
    int rc = r->row(r->ctx, r->v, r->text, r->ncol, r->line, r->err, r->errlen);
    r->tb_len = 0;
    return rc;
}

/* libcsv calls this at each line feed: c is '\n' after a record and -1 for
 * a blank line (CSV_REPALL_NL) or a last record without a newline. */
static void on_record(int c, void *data)
{
    reader *r = data;
    size_t nfield = r->nfield;
    r->nfield = 0;
    if (!r->failed && nfield > 0) {
        if (!r->have_header)
            end_header(r);
        else if (nfield != r->ncol)
            fail(r, "row has %zu fields, the header has %zu", nfield, r->ncol);
        else if (call_row(r) != 0) {
            r->failed = 1;
            r->bad_line = r->line;
        }
    }
    if (c != -1 || nfield == 0)
        r->line++;
}

static int is_term(unsigned char c)
{
    return c == '\n';
}

static int is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

int csv_table_read(const char *path, csv_header_fn header, csv_row_fn row,
                   void *ctx, char *err, size_t errlen, unsigned long *line)
{
    reader r = {.header = header, .row = row, .ctx = ctx, .err = err,
                .errlen = errlen, .line = 1};
    struct csv_parser p;
    int rc = -1;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    *line = 0;
    if (!f) {
        snprintf(err, errlen, "%s", strerror(errno));
        return -2;
    }
    if (csv_init(&p, CSV_STRICT | CSV_REPALL_NL | CSV_STRICT_FINI) != 0) {
        snprintf(err, errlen, "out of memory");
        rc = -2;
        goto close;
    }
    csv_set_term_func(&p, is_term);
    csv_set_space_func(&p, is_space);
    char buf[1 << 16];
    size_t n;
    while (!r.failed && (n = fread(buf, 1, sizeof buf, f)) > 0) {
        if (csv_parse(&p, buf, n, on_field, on_record, &r) != n && !r.failed) {
            r.bad_line = r.line;
            r.failed = 1;
            snprintf(err, errlen, "malformed CSV: %s", csv_strerror(csv_error(&p)));
        }
    }
    if (!r.failed && ferror(f)) {
        r.failed = r.sys = 1;
        snprintf(err, errlen, "read error: %s", strerror(errno));
    }
    if (!r.failed && csv_fini(&p, on_field, on_record, &r) != 0 && !r.failed) {
        r.bad_line = r.line;
        r.failed = 1;
        snprintf(err, errlen, "malformed CSV: %s", csv_strerror(csv_error(&p)));
    }
    if (!r.failed && !r.have_header) {
        r.failed = 1;
        r.bad_line = 1;
        snprintf(err, errlen, "empty file");
    }
    rc = !r.failed ? 0 : r.sys ? -2 : -1;
    *line = rc ? r.bad_line : 0;
    csv_free(&p);
close:
    if (f != stdin)
        fclose(f);
    for (size_t i = 0; i < r.ncol; i++)
        free(r.names[i]);
    free(r.names);
    free(r.v);
    free(r.is_text);
    free(r.text);
    free(r.tb);
    free(r.toff);
    return rc;
}
