/* csv_table.h — a numeric CSV table with a header, read row by row; a
 * column the caller names may hold text. */
#ifndef CALIBCTL_CSV_TABLE_H
#define CALIBCTL_CSV_TABLE_H

#include <stddef.h>

/*
 * Reading calls `header` once with the header's names, then `row` once per
 * data row with the row's numbers (as many as the header has columns) and
 * its line number. Blank lines are skipped. The reader checks the shape
 * (ragged rows) and that every field is a finite number, except in the
 * columns the header callback marked as text (text[c] = 1; all start at 0),
 * whose fields it passes as they are; the callbacks check meaning. A
 * callback returns 0 to go on, or non-zero after filling err to stop.
 */
typedef struct csv_table csv_table;

/* A text field: len bytes at s, which may hold NUL bytes; s[len] is 0. */
typedef struct csv_text {
    const char *s;
    size_t len;
} csv_text;

typedef int (*csv_header_fn)(void *ctx, char *const *names, size_t ncol,
                             unsigned char *text, char *err, size_t errlen);
/* v[c] is NaN and text[c] the field for a text column; text[c].s is NULL
 * for the others. Both hold until the callback returns. */
typedef int (*csv_row_fn)(void *ctx, const double *v, const csv_text *text,
                          size_t ncol, unsigned long line, char *err,
                          size_t errlen);

/* Reads path ("-" for standard input). Returns 0; -1 when the content is
 * bad, with err holding what is wrong and *line the line it was found on;
 * -2 when the system failed (open, read, memory), with err saying how. */
int csv_table_read(const char *path, csv_header_fn header, csv_row_fn row,
                   void *ctx, char *err, size_t errlen, unsigned long *line);

#endif
