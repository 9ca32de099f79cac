/* json_out.h — writes one flat-ish JSON object; NaN and infinities as null. */
#ifndef CALIBCTL_JSON_OUT_H
#define CALIBCTL_JSON_OUT_H

#include <stdio.h>

typedef struct json_out {
    FILE *f;
    int depth;
    int first; /* no member written yet at this depth */
} json_out;

void json_begin(json_out *j, FILE *f);            /* { */
void json_end(json_out *j);                        /* }\n */
void json_num(json_out *j, const char *key, double x);
void json_uint(json_out *j, const char *key, unsigned long long x);
void json_str(json_out *j, const char *key, const char *s);
void json_str_or_null(json_out *j, const char *key, const char *s); /* NULL: null */
void json_bool(json_out *j, const char *key, int b);
void json_pair(json_out *j, const char *key, const double x[2]); /* [a, b] */
void json_object(json_out *j, const char *key);    /* "key": { */
void json_close(json_out *j);                      /* } */
void json_array(json_out *j, const char *key);     /* "key": [ */
void json_element(json_out *j);                    /* { as the array's next element */
void json_array_end(json_out *j);                  /* ] */

#endif
