/* msgpack_json.c — a msgpack object as JSON, for calibctl's output and
 * calibd's alert exec sink. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "msgpack_json.h"

static void json_string(FILE *f, const char *s, size_t len)
{
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

void msgpack_print_json(FILE *f, const msgpack_object *o)
{
    switch (o->type) {
    case MSGPACK_OBJECT_NIL: fputs("null", f); break;
    case MSGPACK_OBJECT_BOOLEAN: fputs(o->via.boolean ? "true" : "false", f); break;
    case MSGPACK_OBJECT_POSITIVE_INTEGER: fprintf(f, "%llu", (unsigned long long)o->via.u64); break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: fprintf(f, "%lld", (long long)o->via.i64); break;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        if (isfinite(o->via.f64))
            fprintf(f, "%.17g", o->via.f64);
        else
            fputs("null", f);
        break;
    case MSGPACK_OBJECT_STR: json_string(f, o->via.str.ptr, o->via.str.size); break;
    case MSGPACK_OBJECT_ARRAY:
        fputc('[', f);
        for (uint32_t i = 0; i < o->via.array.size; i++) {
            if (i)
                fputs(", ", f);
            msgpack_print_json(f, &o->via.array.ptr[i]);
        }
        fputc(']', f);
        break;
    case MSGPACK_OBJECT_MAP:
        fputc('{', f);
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            const msgpack_object_kv *kv = &o->via.map.ptr[i];
            if (i)
                fputs(", ", f);
            if (kv->key.type == MSGPACK_OBJECT_STR)
                json_string(f, kv->key.via.str.ptr, kv->key.via.str.size);
            else
                fputs("\"?\"", f);
            fputs(": ", f);
            msgpack_print_json(f, &kv->val);
        }
        fputc('}', f);
        break;
    default: fputs("null", f); break; /* bin and ext: not in our own messages */
    }
}


char *msgpack_to_json(const char *buf, size_t len, size_t *out_len)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    char *text = NULL;
    size_t off = 0;
    if (msgpack_unpack_next(&u, buf, len, &off) == MSGPACK_UNPACK_SUCCESS) {
        FILE *f = open_memstream(&text, out_len);
        if (f) {
            msgpack_print_json(f, &u.data);
            fputc('\n', f);
            if (ferror(f) | fclose(f)) {
                free(text);
                text = NULL;
            }
        }
    }
    msgpack_unpacked_destroy(&u);
    return text;
}
