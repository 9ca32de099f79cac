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

static int is_container(const msgpack_object *o)
{
    return o->type == MSGPACK_OBJECT_MAP || o->type == MSGPACK_OBJECT_ARRAY;
}

/* A map, or an array that holds a map or an array, on lines of their own
 * (its members indent more than it, by `indent` spaces a level); an array
 * of scalars on one line. */
static int on_lines(const msgpack_object *o, int indent)
{
    if (!indent)
        return 0;
    if (o->type == MSGPACK_OBJECT_MAP)
        return o->via.map.size > 0;
    for (uint32_t i = 0; o->type == MSGPACK_OBJECT_ARRAY && i < o->via.array.size; i++)
        if (is_container(&o->via.array.ptr[i]))
            return 1;
    return 0;
}

static void print(FILE *f, const msgpack_object *o, int indent, int depth)
{
    int lines = on_lines(o, indent);
    const char *sep = lines ? ",\n" : ", ";
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
        fputs(lines ? "[\n" : "[", f);
        for (uint32_t i = 0; i < o->via.array.size; i++) {
            if (i)
                fputs(sep, f);
            fprintf(f, "%*s", lines ? (depth + 1) * indent : 0, "");
            print(f, &o->via.array.ptr[i], indent, depth + 1);
        }
        fprintf(f, lines ? "\n%*s]" : "%*s]", lines ? depth * indent : 0, "");
        break;
    case MSGPACK_OBJECT_MAP:
        fputs(lines ? "{\n" : "{", f);
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            const msgpack_object_kv *kv = &o->via.map.ptr[i];
            if (i)
                fputs(sep, f);
            fprintf(f, "%*s", lines ? (depth + 1) * indent : 0, "");
            if (kv->key.type == MSGPACK_OBJECT_STR)
                json_string(f, kv->key.via.str.ptr, kv->key.via.str.size);
            else
                fputs("\"?\"", f);
            fputs(": ", f);
            print(f, &kv->val, indent, depth + 1);
        }
        fprintf(f, lines ? "\n%*s}" : "%*s}", lines ? depth * indent : 0, "");
        break;
    default: fputs("null", f); break; /* bin and ext: not in our own messages */
    }
}

void msgpack_print_json(FILE *f, const msgpack_object *o)
{
    print(f, o, 0, 0);
}

void msgpack_print_json_indented(FILE *f, const msgpack_object *o, int indent)
{
    print(f, o, indent > 0 ? indent : 0, 0);
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
