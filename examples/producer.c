/* producer.c — payload building shared by the example producers. */
#include <stdlib.h>
#include <string.h>

#include "producer.h"

int pack_buf_write(void *data, const char *buf, size_t len)
{
    pack_buf *b = data;
    if (b->oom)
        return -1;
    if (len > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap - b->len < len) {
            if (cap > SIZE_MAX / 2) {
                b->oom = 1;
                return -1;
            }
            cap *= 2;
        }
        char *d = realloc(b->data, cap);
        if (!d) {
            b->oom = 1;
            return -1;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, buf, len);
    b->len += len;
    return 0;
}

void pack_str(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

void store_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

void store_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
