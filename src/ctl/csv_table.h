/* csv_table.h — a numeric CSV table with a header, read row by row. */
#ifndef CALIBCTL_CSV_TABLE_H
#define CALIBCTL_CSV_TABLE_H

#include <stddef.h>

/*
 * Reading calls `row` once per data row with the row's numbers (as many as
 * the header has columns) and its line number. Blank lines are skipped. The
 * reader checks the shape (ragged rows) and that every field is a finite
 * number; the callback checks meaning. A callback returns 0 to go on, or
 * non-zero after filling err to stop.
 */
typedef struct csv_table csv_table;

typedef int (*csv_header_fn)(void *ctx, char *const *names, size_t ncol,
                             char *err, size_t errlen);
typedef int (*csv_row_fn)(void *ctx, const double *v, size_t ncol,
                          unsigned long line, char *err, size_t errlen);

/* Reads path ("-" for standard input). Returns 0; -1 when the content is
 * bad, with err holding what is wrong and *line the line it was found on;
 * -2 when the system failed (open, read, memory), with err saying how. */
int csv_table_read(const char *path, csv_header_fn header, csv_row_fn row,
                   void *ctx, char *err, size_t errlen, unsigned long *line);

#endif
