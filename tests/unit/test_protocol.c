/* test_protocol.c — the protocol v1 decoder: forms, rejects, hostile bytes. */
#include "unit.h"

#include <stdlib.h>
#include <string.h>

#include "calib/protocol.h"

#include "mp.h"

static int decode(calib_msg *m, const payload *p)
{
    return calib_msg_decode(m, "model-1", 7, p->sb.data, p->sb.size);
}

/* Decodes the payload built by fmt and returns the reason. */
#define REJECTS(reason, ...)                                                  \
    do {                                                                      \
        payload p_;                                                           \
        calib_msg m_;                                                         \
        pl_init(&p_);                                                         \
        mp(&p_, __VA_ARGS__);                                                 \
        calib_msg_init(&m_);                                                  \
        int r_ = decode(&m_, &p_);                                            \
        if (r_ != (reason))                                                   \
            print_error("got %s, want %s\n", calib_reject_name(r_),           \
                        calib_reject_name(reason));                           \
        assert_int_equal(r_, (reason));                                       \
        assert_int_equal(m_.n, 0);                                            \
        calib_msg_destroy(&m_);                                               \
        pl_free(&p_);                                                         \
    } while (0)

/* The head of a payload map: format HF, then count, HA(type), ... */
#define HF "M s u s s "
#define HA(type) "v", 1, "type", type

/* ------------------------------------------------------------------ names */

static void reject_names(void **state)
{
    for (int r = 0; r < CALIB_REJ_COUNT; r++) {
        const char *name = calib_reject_name(r);
        assert_string_not_equal(name, "unknown");
        for (const char *c = name; *c; c++)
            assert_true((*c >= 'a' && *c <= 'z') || *c == '_');
        for (int q = 0; q < r; q++)
            assert_string_not_equal(name, calib_reject_name(q));
    }
    assert_string_equal(calib_reject_name(CALIB_REJ_COUNT), "unknown");
    assert_string_equal(calib_reject_name(-1), "unknown");
    assert_string_equal(calib_reject_name(CALIB_REJ_BIN_LENGTH), "bin_length");
    assert_false(calib_reject_is_record(CALIB_REJ_NONE));
    assert_false(calib_reject_is_record(CALIB_REJ_MISSING_ID));
    assert_true(calib_reject_is_record(CALIB_REJ_NONFINITE));
    assert_true(calib_reject_is_record(CALIB_REJ_BAD_ID));
    /* added after the record reasons, but a whole-message one */
    assert_string_equal(calib_reject_name(CALIB_REJ_BIN_AMBIGUOUS), "bin_ambiguous");
    assert_false(calib_reject_is_record(CALIB_REJ_BIN_AMBIGUOUS));
}

static void number_helper(void **state)
{
    payload p;
    pl_init(&p);
    mp(&p, "A u i f d U s", 6, 7, -3, 0.25, 1e300, UINT64_MAX, "x");
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    assert_int_equal(msgpack_unpack_next(&u, p.sb.data, p.sb.size, &off),
                     MSGPACK_UNPACK_SUCCESS);
    const msgpack_object *o = u.data.via.array.ptr;
    double v;
    assert_true(calib_proto_number(&o[0], &v)); assert_close(v, 7, 0);
    assert_true(calib_proto_number(&o[1], &v)); assert_close(v, -3, 0);
    assert_true(calib_proto_number(&o[2], &v)); assert_close(v, 0.25, 0);
    assert_true(calib_proto_number(&o[3], &v)); assert_close(v, 1e300, 0);
    assert_true(calib_proto_number(&o[4], &v)); assert_close(v, 18446744073709551615.0, 0);
    assert_false(calib_proto_number(&o[5], &v));
    msgpack_unpacked_destroy(&u);
    pl_free(&p);
}

/* ------------------------------------------------------------------ forms */

static void row_logits_mixed_array(void **state)
{
    payload p;
    calib_msg m;
    calib_msg_rec rec;
    double x[4];
    pl_init(&p);
    mp(&p, "M s u s s s s s A u i f d", 4, "v", 1, "type", "pred", "id", "a1",
       "logits", 4, 1, -2, 0.5, 3.0);
    calib_msg_init(&m);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    assert_int_equal(m.type, CALIB_MSG_PRED);
    assert_int_equal(m.form, CALIB_FORM_LOGITS);
    assert_int_equal(m.batch, 0);
    assert_int_equal(m.n, 1);
    assert_int_equal(m.k, 4);
    assert_int_equal(m.width, 4);
    assert_nan(m.ts);
    assert_int_equal(m.topic_len, 7);
    assert_memory_equal(m.topic, "model-1", 7);
    assert_int_equal(calib_msg_record(&m, 0, &rec, x), CALIB_REJ_NONE);
    assert_int_equal(rec.id_kind, CALIB_MSG_ID_STR);
    assert_int_equal(rec.id_len, 2);
    assert_memory_equal(rec.id, "a1", 2);
    assert_false(rec.has_y);
    assert_nan(rec.ts);
    assert_close(x[0], 1, 0);
    assert_close(x[1], -2, 0);
    assert_close(x[2], 0.5, 0);
    assert_close(x[3], 3, 0);
    assert_int_equal(calib_msg_record(&m, 1, &rec, x), CALIB_EINVAL);
    assert_int_equal(calib_msg_record(&m, 0, &rec, NULL), CALIB_EINVAL);
    calib_msg_destroy(&m);
    pl_free(&p);
}

static void row_probs_bin32(void **state)
{
    const float pr[3] = {0.2f, 0.3f, 0.5f};
    payload p;
    calib_msg m;
    calib_msg_rec rec;
    double x[3];
    pl_init(&p);
    mp(&p, HF "s u s 4 s d s u s u", 7, HA("pred"), "id", 42, "probs", pr,
       (size_t)3, "ts", 1700000000.5, "k", 3, "y", 2);
    calib_msg_init(&m);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    assert_int_equal(m.form, CALIB_FORM_PROBS);
    assert_int_equal(m.k, 3);
    assert_close(m.ts, 1700000000.5, 0);
    assert_int_equal(calib_msg_record(&m, 0, &rec, x), CALIB_REJ_NONE);
    assert_int_equal(rec.id_kind, CALIB_MSG_ID_UINT);
    assert_true(rec.id_num == 42);
    assert_true(rec.has_y);
    assert_close(rec.y, 2, 0);
    assert_close(rec.ts, 1700000000.5, 0);
    for (int j = 0; j < 3; j++)
        assert_close(x[j], pr[j], 0);
    calib_msg_destroy(&m);
    pl_free(&p);
}

/* A float32 row longer than a vector (load_le_row widens four at a time,
 * then the rest one by one): every value widened exactly, signs,
 * extremes and subnormals included. */
static void row_logits_bin32_long(void **state)
{
    (void)state;
    const float z[11] = {-3.5f, 0.0f, 1e-40f, -0.0f, 3.4028235e38f, 7.25f,
                         -1.1754944e-38f, 0.1f, -2e-45f, 123456.789f, -9.5f};
    payload p;
    calib_msg m;
    calib_msg_rec rec;
    double x[11];
    pl_init(&p);
    mp(&p, HF "s u s 4 s u", 5, HA("pred"), "id", 7, "logits", z, (size_t)11, "k", 11);
    calib_msg_init(&m);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    assert_int_equal(m.k, 11);
    assert_int_equal(calib_msg_record(&m, 0, &rec, x), CALIB_REJ_NONE);
    for (int j = 0; j < 11; j++) {
        double want = z[j];
        assert_memory_equal(&x[j], &want, sizeof want);
    }
    calib_msg_destroy(&m);
    pl_free(&p);
}

static void row_probs_bin64_and_logits_bin(void **state)
{
    const double pr[2] = {0.25, 0.75};
    payload p;
    calib_msg m;
    calib_msg_rec rec;
    double x[2];
    pl_init(&p);
    mp(&p, HF "s s s 8 s u", 5, HA("pred"), "id", "q", "probs", pr, (size_t)2,
       "k", 2);
    calib_msg_init(&m);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    assert_int_equal(calib_msg_record(&m, 0, &rec, x), CALIB_REJ_NONE);
    assert_close(x[0], 0.25, 0);
    assert_close(x[1], 0.75, 0);
    pl_free(&p);
    /* an unaligned bin: one odd-length unknown key before it */
    const float z[2] = {-1.5f, 2.25f};
    pl_init(&p);
    mp(&p, HF "s s s s s 4 s u", 6, HA("pred"), "zz", "odd", "id", "q",
       "logits", z, (size_t)2, "k", 2);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    assert_int_equal(calib_msg_record(&m, 0, &rec, x), CALIB_REJ_NONE);
    assert_close(x[0], -1.5, 0);
    assert_close(x[1], 2.25, 0);
    calib_msg_destroy(&m);
    pl_free(&p);
}

static void row_binary_and_gaussian(void **state)
{
    payload p;
    calib_msg m;
    calib_msg_rec rec;
    double x[2];
    pl_init(&p);
    mp(&p, HF "s s s d s u", 5, HA("pred"), "id", "b", "p", 0.7, "y", 1);
    calib_msg_init(&m);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    assert_int_equal(m.form, CALIB_FORM_BINARY);
    assert_int_equal(m.k, 2);
    assert_int_equal(m.width, 1);
    assert_int_equal(calib_msg_record(&m, 0, &rec, x), CALIB_REJ_NONE);
    assert_close(x[0], 0.7, 0);
    assert_close(rec.y, 1, 0);
    pl_free(&p);

    /* regression, no id (y given), integer ts */
    pl_init(&p);
    mp(&p, HF "s d s u s f s u", 6, HA("pred"), "mean", -1.5, "var", 2,
       "y", 0.3, "ts", 1700000000);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    assert_int_equal(m.form, CALIB_FORM_GAUSSIAN);
    assert_int_equal(m.k, 0);
    assert_int_equal(m.width, 2);
    assert_int_equal(calib_msg_record(&m, 0, &rec, x), CALIB_REJ_NONE);
    assert_int_equal(rec.id_kind, CALIB_MSG_ID_NONE);
    assert_close(x[0], -1.5, 0);
    assert_close(x[1], 2, 0);
    assert_close(rec.y, 0.3f, 0);
    assert_close(rec.ts, 1700000000, 0);
    calib_msg_destroy(&m);
    pl_free(&p);
}

static void batch_logits_bin64(void **state)
{
    const double z[6] = {1, 2, -3, 4, 0.5, -0.5};
    payload p;
    calib_msg m;
    calib_msg_rec rec;
    double x[2];
    pl_init(&p);
    mp(&p, HF "s u s u s A s s s s 8 s A d d d", 7, HA("pred"), "n", 3, "k", 2,
       "id", 3, "r0", "r1", "r2", "logits", z, (size_t)6, "ts", 3, 10.0, 11.0,
       12.0);
    calib_msg_init(&m);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    assert_int_equal(m.batch, 1);
    assert_int_equal(m.n, 3);
    assert_int_equal(m.k, 2);
    assert_nan(m.ts);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(calib_msg_record(&m, i, &rec, x), CALIB_REJ_NONE);
        assert_int_equal(rec.id_len, 2);
        assert_int_equal(rec.id[1], (char)('0' + i));
        assert_close(rec.ts, 10.0 + (double)i, 0);
        assert_close(x[0], z[2 * i], 0);
        assert_close(x[1], z[2 * i + 1], 0);
    }
    calib_msg_destroy(&m);
    pl_free(&p);
}

static void batch_probs_nested(void **state)
{
    payload p;
    calib_msg m;
    calib_msg_rec rec;
    double x[3];
    pl_init(&p);
    mp(&p, HF "s u s u s A u u s A A d d d A f u d s d s A u u", 8, HA("pred"),
       "n", 2, "k", 3, "id", 2, 5, 6,
       "probs", 2, 3, 0.1, 0.2, 0.7, 3, 0.5, 0, 0.5,
       "ts", 99.0, "y", 2, 2, 0);
    calib_msg_init(&m);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    assert_close(m.ts, 99, 0);
    assert_int_equal(calib_msg_record(&m, 0, &rec, x), CALIB_REJ_NONE);
    assert_true(rec.id_num == 5);
    assert_close(x[2], 0.7, 0);
    assert_close(rec.y, 2, 0);
    assert_close(rec.ts, 99, 0);
    assert_int_equal(calib_msg_record(&m, 1, &rec, x), CALIB_REJ_NONE);
    assert_true(rec.id_num == 6);
    assert_close(x[0], 0.5, 0);
    assert_close(x[1], 0, 0);
    assert_close(x[2], 0.5, 0);
    assert_close(rec.y, 0, 0);
    calib_msg_destroy(&m);
    pl_free(&p);
}

static void batch_binary_and_gaussian(void **state)
{
    const float pv[3] = {0.1f, 0.9f, 0.5f};
    const double mv[3] = {1, 2, 3};
    payload p;
    calib_msg m;
    calib_msg_rec rec;
    double x[2];
    pl_init(&p);
    mp(&p, HF "s u s 4 s A u u u", 5, HA("pred"), "n", 3, "p", pv, (size_t)3,
       "y", 3, 0, 1, 1);
    calib_msg_init(&m);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    assert_int_equal(m.form, CALIB_FORM_BINARY);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(calib_msg_record(&m, i, &rec, x), CALIB_REJ_NONE);
        assert_int_equal(rec.id_kind, CALIB_MSG_ID_NONE);
        assert_close(x[0], pv[i], 0);
    }
    pl_free(&p);

    /* p as an array of mixed numbers; mean as a bin, var as an array */
    pl_init(&p);
    mp(&p, HF "s u s A u f d s A u u u", 5, HA("pred"), "n", 3, "p", 3, 1, 0.25,
       0.0, "id", 3, 1, 2, 3);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    assert_int_equal(calib_msg_record(&m, 0, &rec, x), CALIB_REJ_NONE);
    assert_close(x[0], 1, 0);
    assert_int_equal(calib_msg_record(&m, 1, &rec, x), CALIB_REJ_NONE);
    assert_close(x[0], 0.25, 0);
    pl_free(&p);

    pl_init(&p);
    mp(&p, HF "s u s 8 s A u d f s A i d u", 6, HA("pred"), "n", 3, "mean", mv,
       (size_t)3, "var", 3, 1, 2.5, 0.5, "y", 3, -4, 0.5, 7);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    assert_int_equal(m.form, CALIB_FORM_GAUSSIAN);
    assert_int_equal(calib_msg_record(&m, 2, &rec, x), CALIB_REJ_NONE);
    assert_close(x[0], 3, 0);
    assert_close(x[1], 0.5, 0);
    assert_close(rec.y, 7, 0);
    assert_int_equal(calib_msg_record(&m, 0, &rec, x), CALIB_REJ_NONE);
    assert_close(rec.y, -4, 0);
    calib_msg_destroy(&m);
    pl_free(&p);
}

/* Segment j of record i is key=val. */
static void check_seg(const calib_msg *m, size_t i, size_t j, const char *key, const char *val)
{
    const char *k, *v;
    size_t kl, vl;
    assert_int_equal(calib_msg_seg(m, i, j, &k, &kl, &v, &vl), CALIB_OK);
    assert_int_equal(kl, strlen(key));
    assert_memory_equal(k, key, kl);
    assert_int_equal(vl, strlen(val));
    assert_memory_equal(v, val, vl);
}

/* "seg": a map of keys to a value, in the batch form also to an array of
 * n values; checked whole at decoding; a label's is ignored. */
static void segments(void **state)
{
    (void)state;
    payload p;
    calib_msg m;
    calib_msg_init(&m);
    pl_init(&p);
    mp(&p, HF "s d s u s M s s s s", 5, HA("pred"), "p", 0.7, "id", 9, "seg", 2,
       "country", "DE", "device", "S\xc3\xa3o ios");
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    assert_int_equal(m.nseg, 2);
    check_seg(&m, 0, 0, "country", "DE");
    check_seg(&m, 0, 1, "device", "S\xc3\xa3o ios");
    const char *k, *v;
    size_t kl, vl;
    assert_int_equal(calib_msg_seg(&m, 0, 2, &k, &kl, &v, &vl), CALIB_EINVAL);
    assert_int_equal(calib_msg_seg(&m, 1, 0, &k, &kl, &v, &vl), CALIB_EINVAL);
    pl_free(&p);

    /* batch: one key per record, one for all */
    pl_init(&p);
    mp(&p, HF "s u s A d d d s A u u u s M s A s s s s s", 6, HA("pred"), "n", 3, "p", 3,
       0.1, 0.2, 0.3, "id", 3, 1, 2, 3, "seg", 2, "country", 3, "DE", "FR", "DE",
       "tier", "gold");
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    check_seg(&m, 1, 0, "country", "FR");
    check_seg(&m, 2, 0, "country", "DE");
    check_seg(&m, 2, 1, "tier", "gold");
    pl_free(&p);

    /* none: nseg 0 */
    pl_init(&p);
    mp(&p, HF "s d s u", 4, HA("pred"), "p", 0.7, "id", 9);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    assert_int_equal(m.nseg, 0);
    pl_free(&p);

    /* a label's seg is not read (a bad one too) */
    pl_init(&p);
    mp(&p, HF "s u s u s u", 5, HA("label"), "id", 9, "y", 1, "seg", 3);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    assert_int_equal(m.nseg, 0);
    pl_free(&p);
    calib_msg_destroy(&m);

    /* rejects */
    REJECTS(CALIB_REJ_BAD_SEGMENT, HF "s d s u s u", 5, HA("pred"), "p", 0.7, "id", 9, "seg", 3);
    REJECTS(CALIB_REJ_BAD_SEGMENT, HF "s d s u s M s s", 5, HA("pred"), "p", 0.7, "id", 9,
            "seg", 1, "a b", "x");
    REJECTS(CALIB_REJ_BAD_SEGMENT, HF "s d s u s M s s", 5, HA("pred"), "p", 0.7, "id", 9,
            "seg", 1, "a", "");
    REJECTS(CALIB_REJ_BAD_SEGMENT, HF "s d s u s M s s", 5, HA("pred"), "p", 0.7, "id", 9,
            "seg", 1, "a", "x\ny");
    REJECTS(CALIB_REJ_BAD_SEGMENT, HF "s d s u s M s u", 5, HA("pred"), "p", 0.7, "id", 9,
            "seg", 1, "a", 5);
    REJECTS(CALIB_REJ_BAD_SEGMENT, HF "s d s u s M s s s s", 5, HA("pred"), "p", 0.7, "id", 9,
            "seg", 2, "a", "x", "a", "y");
    /* an array in the row form */
    REJECTS(CALIB_REJ_BAD_SEGMENT, HF "s d s u s M s A s", 5, HA("pred"), "p", 0.7, "id", 9,
            "seg", 1, "a", 1, "x");
    /* an array of the wrong length, or with a bad value */
    REJECTS(CALIB_REJ_BAD_SEGMENT, HF "s u s A d d s A u u s M s A s", 6, HA("pred"), "n", 2,
            "p", 2, 0.1, 0.2, "id", 2, 1, 2, "seg", 1, "a", 1, "x");
    REJECTS(CALIB_REJ_BAD_SEGMENT, HF "s u s A d d s A u u s M s A s u", 6, HA("pred"), "n", 2,
            "p", 2, 0.1, 0.2, "id", 2, 1, 2, "seg", 1, "a", 2, "x", 3);
    /* nine keys */
    REJECTS(CALIB_REJ_BAD_SEGMENT, HF "s d s u s M s s s s s s s s s s s s s s s s s s", 5,
            HA("pred"), "p", 0.7, "id", 9, "seg", 9, "a", "x", "b", "x", "c", "x", "d", "x",
            "e", "x", "f", "x", "g", "x", "h", "x", "i", "x");
    char long_val[CALIB_PROTO_MAX_SEG_NAME + 2];
    memset(long_val, 'v', sizeof long_val - 1);
    long_val[sizeof long_val - 1] = 0;
    REJECTS(CALIB_REJ_BAD_SEGMENT, HF "s d s u s M s s", 5, HA("pred"), "p", 0.7, "id", 9,
            "seg", 1, "a", long_val);
    long_val[CALIB_PROTO_MAX_SEG_NAME] = 0;
    assert_true(calib_proto_seg_value_ok(long_val, CALIB_PROTO_MAX_SEG_NAME));
    assert_true(calib_proto_seg_key_ok(long_val, CALIB_PROTO_MAX_SEG_NAME));
    assert_false(calib_proto_seg_key_ok("a=b", 3));
    assert_false(calib_proto_seg_key_ok("", 0));
    /* UTF-8: valid sequences pass; DEL, broken, overlong, surrogate, above
     * U+10FFFF and C1 controls do not */
    assert_true(calib_proto_seg_value_ok("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9));
    static const char *const bad[] = {"a\x7f", "\xff", "\xc3", "\xc3(", "\xc0\xaf",
                                      "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                      "\xc2\x85"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_false(calib_proto_seg_value_ok(bad[i], strlen(bad[i])));
    REJECTS(CALIB_REJ_BAD_SEGMENT, HF "s d s u s M s s", 5, HA("pred"), "p", 0.7, "id", 9,
            "seg", 1, "a", "\xff");
}

static void labels(void **state)
{
    payload p;
    calib_msg m;
    calib_msg_rec rec;
    pl_init(&p);
    mp(&p, HF "s s s u s d s s", 6, HA("label"), "id", "abc", "y", 3, "ts", 5.5,
       "extra", "ignored");
    calib_msg_init(&m);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    assert_int_equal(m.type, CALIB_MSG_LABEL);
    assert_int_equal(m.n, 1);
    assert_int_equal(m.width, 0);
    assert_int_equal(calib_msg_record(&m, 0, &rec, NULL), CALIB_REJ_NONE);
    assert_memory_equal(rec.id, "abc", 3);
    assert_true(rec.has_y);
    assert_close(rec.y, 3, 0);
    assert_close(rec.ts, 5.5, 0);
    /* the daemon checks y against the model */
    assert_int_equal(calib_proto_check_y(CALIB_FORM_LOGITS, 4, rec.y), CALIB_REJ_NONE);
    assert_int_equal(calib_proto_check_y(CALIB_FORM_LOGITS, 3, rec.y), CALIB_REJ_LABEL_RANGE);
    assert_int_equal(calib_proto_check_y(CALIB_FORM_BINARY, 2, rec.y), CALIB_REJ_LABEL_RANGE);
    assert_int_equal(calib_proto_check_y(CALIB_FORM_BINARY, 0, 1), CALIB_REJ_NONE);
    assert_int_equal(calib_proto_check_y(CALIB_FORM_GAUSSIAN, 0, -7.5), CALIB_REJ_NONE);
    assert_int_equal(calib_proto_check_y(CALIB_FORM_PROBS, 3, 1.5), CALIB_REJ_LABEL_RANGE);
    assert_int_equal(calib_proto_check_y(CALIB_FORM_GAUSSIAN, 0, NAN), CALIB_REJ_NONFINITE);
    pl_free(&p);

    pl_init(&p);
    mp(&p, HF "s u s A s u s s A u d i", 5, HA("label"), "n", 3, "id", 3, "x",
       9, "z", "y", 3, 1, 0.5, -2);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    assert_int_equal(m.n, 3);
    assert_int_equal(calib_msg_record(&m, 0, &rec, NULL), CALIB_REJ_NONE);
    assert_int_equal(rec.id_kind, CALIB_MSG_ID_STR);
    assert_nan(rec.ts);
    assert_int_equal(calib_msg_record(&m, 1, &rec, NULL), CALIB_REJ_NONE);
    assert_int_equal(rec.id_kind, CALIB_MSG_ID_UINT);
    assert_close(rec.y, 0.5, 0);
    assert_int_equal(calib_msg_record(&m, 2, &rec, NULL), CALIB_REJ_NONE);
    assert_close(rec.y, -2, 0);
    calib_msg_destroy(&m);
    pl_free(&p);
}

static void topics(void **state)
{
    payload p;
    calib_msg m;
    char long_topic[CALIB_PROTO_MAX_TOPIC + 1];
    pl_init(&p);
    mp(&p, HF "s s s u", 4, HA("label"), "id", "a", "y", 1);
    calib_msg_init(&m);
    memset(long_topic, 'a', sizeof long_topic);
    assert_int_equal(calib_msg_decode(&m, long_topic, CALIB_PROTO_MAX_TOPIC,
                                      p.sb.data, p.sb.size), CALIB_REJ_NONE);
    assert_int_equal(calib_msg_decode(&m, long_topic, sizeof long_topic,
                                      p.sb.data, p.sb.size), CALIB_REJ_BAD_TOPIC);
    assert_int_equal(calib_msg_decode(&m, "A.z_0:9-x", 9, p.sb.data, p.sb.size),
                     CALIB_REJ_NONE);
    assert_int_equal(calib_msg_decode(&m, "", 0, p.sb.data, p.sb.size),
                     CALIB_REJ_BAD_TOPIC);
    assert_int_equal(calib_msg_decode(&m, NULL, 0, p.sb.data, p.sb.size),
                     CALIB_REJ_BAD_TOPIC);
    assert_int_equal(calib_msg_decode(&m, "a b", 3, p.sb.data, p.sb.size),
                     CALIB_REJ_BAD_TOPIC);
    assert_int_equal(calib_msg_decode(&m, "a/b", 3, p.sb.data, p.sb.size),
                     CALIB_REJ_BAD_TOPIC);
    assert_int_equal(calib_msg_decode(&m, "caf\xc3\xa9", 5, p.sb.data, p.sb.size),
                     CALIB_REJ_BAD_TOPIC);
    assert_int_equal(calib_msg_decode(&m, "a\0b", 3, p.sb.data, p.sb.size),
                     CALIB_REJ_BAD_TOPIC);
    /* the rule itself, shared with calibd's configuration and the client */
    assert_true(calib_proto_topic_ok("A.z_0:9-x", 9));
    assert_true(calib_proto_topic_ok(long_topic, CALIB_PROTO_MAX_TOPIC));
    assert_false(calib_proto_topic_ok(long_topic, sizeof long_topic));
    assert_false(calib_proto_topic_ok("", 0));
    assert_false(calib_proto_topic_ok(NULL, 0));
    assert_false(calib_proto_topic_ok("a/b", 3));
    calib_msg_destroy(&m);
    pl_free(&p);
}

/* A row-form bin without "k": a length that is a multiple of 4 and not of 8
 * is float32; otherwise the caller's K tells the element size, and without
 * it the bin is ambiguous (never guessed). */
static void row_bin_without_k(void **state)
{
    const float f2[2] = {0.4f, 0.6f}, f3[3] = {0.2f, 0.3f, 0.5f},
                f4[4] = {0.1f, 0.2f, 0.3f, 0.4f};
    const double d2[2] = {0.25, 0.75};
    const unsigned char junk[7] = {0};
    payload p;
    calib_msg m;
    calib_msg_rec r;
    double x[4];
    calib_msg_init(&m);

    pl_init(&p); /* 12 bytes: only 3 float32 fit */
    mp(&p, HF "s s s 4", 4, HA("pred"), "id", "a", "probs", f3, (size_t)3);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    assert_int_equal(m.k, 3);
    assert_int_equal(calib_msg_record(&m, 0, &r, x), CALIB_REJ_NONE);
    assert_true(x[2] == 0.5f);
    pl_free(&p);

    pl_init(&p); /* 16 bytes, hint 2: two float64 */
    mp(&p, HF "s s s 8", 4, HA("pred"), "id", "a", "probs", d2, (size_t)2);
    assert_int_equal(decode(&m, &p), CALIB_REJ_BIN_AMBIGUOUS);
    assert_string_equal(m.fault.key, "probs");
    assert_int_equal(m.fault.bin_bytes, 16);
    assert_int_equal(calib_msg_decode_k(&m, "m", 1, p.sb.data, p.sb.size, 2), CALIB_REJ_NONE);
    assert_null(m.fault.key);
    assert_int_equal(m.k, 2);
    assert_int_equal(calib_msg_record(&m, 0, &r, x), CALIB_REJ_NONE);
    assert_true(x[0] == 0.25 && x[1] == 0.75);
    /* hint 3: 16 bytes are neither 3 float32 nor 3 float64 */
    assert_int_equal(calib_msg_decode_k(&m, "m", 1, p.sb.data, p.sb.size, 3),
                     CALIB_REJ_BIN_LENGTH);
    assert_string_equal(m.fault.key, "probs");
    assert_int_equal(m.fault.bin_bytes, 16);
    assert_int_equal(m.fault.bin_values, 3);
    pl_free(&p);

    pl_init(&p); /* 16 bytes, hint 4: four float32 */
    mp(&p, HF "s s s 4", 4, HA("pred"), "id", "a", "logits", f4, (size_t)4);
    assert_int_equal(calib_msg_decode_k(&m, "m", 1, p.sb.data, p.sb.size, 4), CALIB_REJ_NONE);
    assert_int_equal(m.k, 4);
    /* without the hint: 4 float32 or 2 float64 */
    assert_int_equal(decode(&m, &p), CALIB_REJ_BIN_AMBIGUOUS);
    assert_string_equal(m.fault.key, "logits");
    assert_int_equal(m.n, 0);
    pl_free(&p);

    pl_init(&p); /* 8 bytes: 2 float32 or 1 float64, ambiguous too */
    mp(&p, HF "s s s 4", 4, HA("pred"), "id", "a", "probs", f2, (size_t)2);
    assert_int_equal(decode(&m, &p), CALIB_REJ_BIN_AMBIGUOUS);
    assert_int_equal(m.fault.bin_bytes, 8);
    /* "k" settles it */
    pl_free(&p);
    pl_init(&p);
    mp(&p, HF "s s s 4 s u", 5, HA("pred"), "id", "a", "probs", f2, (size_t)2, "k", 2);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    assert_int_equal(m.k, 2);
    assert_int_equal(calib_msg_record(&m, 0, &r, x), CALIB_REJ_NONE);
    assert_true(x[0] == 0.4f && x[1] == 0.6f);
    pl_free(&p);

    pl_init(&p); /* 7 bytes fit no K at all */
    mp(&p, HF "s s s b", 4, HA("pred"), "id", "a", "logits", junk, (size_t)7);
    assert_int_equal(decode(&m, &p), CALIB_REJ_BIN_LENGTH);
    assert_string_equal(m.fault.key, "logits");
    assert_int_equal(m.fault.bin_bytes, 7);
    assert_int_equal(m.fault.bin_values, 0);
    pl_free(&p);

    pl_init(&p); /* 0 or 4 bytes: K of 0 or 1 */
    mp(&p, HF "s s s b", 4, HA("pred"), "id", "a", "logits", junk, (size_t)0);
    assert_int_equal(decode(&m, &p), CALIB_REJ_K_RANGE);
    pl_free(&p);
    pl_init(&p);
    mp(&p, HF "s s s b", 4, HA("pred"), "id", "a", "logits", junk, (size_t)4);
    assert_int_equal(decode(&m, &p), CALIB_REJ_K_RANGE);
    assert_string_equal(m.fault.key, "logits");
    pl_free(&p);
    calib_msg_destroy(&m);
}

/* ------------------------------------------------------------------ structural */

static void structural_rejects(void **state)
{
    const float f3[3] = {0.2f, 0.3f, 0.5f};
    const unsigned char junk[7] = {0};
    char id65[66];
    memset(id65, 'i', 65);
    id65[65] = '\0';

    /* framing and msgpack */
    REJECTS(CALIB_REJ_NOT_A_MAP, "A u u", 2, 1, 2);
    REJECTS(CALIB_REJ_NOT_A_MAP, "s", "pred");
    REJECTS(CALIB_REJ_BAD_KEY, "M s u u u s s", 3, "v", 1, 7, 7, "type", "pred");
    REJECTS(CALIB_REJ_BAD_KEY, "M n u s u", 2, 1, "v", 1);
    REJECTS(CALIB_REJ_DUPLICATE_KEY, "M s u s u s s", 3, "v", 1, "v", 1, "type", "pred");
    REJECTS(CALIB_REJ_DUPLICATE_KEY, HF "s s s s s u", 5, HA("label"), "id", "a", "id", "b", "y", 1);
    /* version */
    REJECTS(CALIB_REJ_BAD_VERSION, "M s s s s s u", 3, "type", "label", "id", "a", "y", 1);
    REJECTS(CALIB_REJ_BAD_VERSION, "M s u s s", 2, "v", 2, "type", "pred");
    REJECTS(CALIB_REJ_BAD_VERSION, "M s u s s", 2, "v", 0, "type", "pred");
    REJECTS(CALIB_REJ_BAD_VERSION, "M s i s s", 2, "v", -1, "type", "pred");
    REJECTS(CALIB_REJ_BAD_VERSION, "M s d s s", 2, "v", 1.0, "type", "pred");
    REJECTS(CALIB_REJ_BAD_VERSION, "M s s s s", 2, "v", "1", "type", "pred");
    /* type */
    REJECTS(CALIB_REJ_BAD_TYPE, "M s u s s", 2, "v", 1, "id", "a");
    REJECTS(CALIB_REJ_BAD_TYPE, "M s u s s", 2, "v", 1, "type", "params");
    REJECTS(CALIB_REJ_BAD_TYPE, "M s u s s", 2, "v", 1, "type", "pre");
    REJECTS(CALIB_REJ_BAD_TYPE, "M s u s u", 2, "v", 1, "type", 1);
    /* missing keys and ids */
    REJECTS(CALIB_REJ_MISSING_KEY, HF "s s", 3, HA("label"), "id", "a");
    REJECTS(CALIB_REJ_MISSING_KEY, HF "s s s d", 4, HA("pred"), "id", "a", "mean", 1.0);
    REJECTS(CALIB_REJ_MISSING_KEY, HF "s s s d", 4, HA("pred"), "id", "a", "var", 1.0);
    {   /* a row bin of 16 bytes without "k" (and no hint): 4 x f32 or 2 x f64 */
        const float f4[4] = {0.1f, 0.2f, 0.3f, 0.4f};
        REJECTS(CALIB_REJ_BIN_AMBIGUOUS, HF "s s s 4", 4, HA("pred"), "id", "a", "probs", f4,
                (size_t)4);
    }
    REJECTS(CALIB_REJ_MISSING_KEY, HF "s u s A s s A A u u s A u", 6, HA("pred"),
            "n", 1, "id", 1, "a", "logits", 1, 2, 1, 2, "y", 1, 0);
    REJECTS(CALIB_REJ_MISSING_ID, HF "s d", 3, HA("pred"), "p", 0.5);
    REJECTS(CALIB_REJ_MISSING_ID, HF "s u s A d", 4, HA("pred"), "n", 1, "p", 1, 0.5);
    REJECTS(CALIB_REJ_MISSING_ID, HF "s u", 3, HA("label"), "y", 1);
    REJECTS(CALIB_REJ_MISSING_ID, HF "s u s A u", 4, HA("label"), "n", 1, "y", 1, 1);
    /* mistyped values */
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s s s s", 4, HA("pred"), "id", "a", "p", "0.5");
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s s s n", 4, HA("pred"), "id", "a", "p");
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s s s d s s", 5, HA("pred"), "id", "a", "p", 0.5, "ts", "now");
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s s s d s A d", 5, HA("pred"), "id", "a", "p", 0.5, "ts", 1, 1.0);
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s s s d s t", 5, HA("pred"), "id", "a", "p", 0.5, "y");
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s s s u", 4, HA("pred"), "id", "a", "logits", 5);
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s s s A u n", 4, HA("pred"), "id", "a", "logits", 2, 1);
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s s s A u u s s", 5, HA("pred"), "id", "a", "logits", 2, 1, 2, "k", "2");
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s d s A d s A s", 5, HA("pred"), "n", 1.0, "p", 1, 0.5, "id", 1, "a");
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s u s s s A d", 5, HA("pred"), "n", 1, "id", "a", "p", 1, 0.5);
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s u s A s s d", 5, HA("pred"), "n", 1, "id", 1, "a", "p", 0.5);
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s u s A s s A s", 5, HA("pred"), "n", 1, "id", 1, "a", "p", 1, "x");
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s u s u s A s s A d", 6, HA("pred"), "n", 1, "k", 2, "id", 1, "a",
            "logits", 1, 0.5);
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s u s u s A s s A A d s", 6, HA("pred"), "n", 1, "k", 2, "id", 1, "a",
            "logits", 1, 2, 0.5, "x");
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s u s A s s A d s 4", 6, HA("pred"), "n", 1, "id", 1, "a",
            "p", 1, 0.5, "y", f3, (size_t)1);
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s u s A s s 4", 5, HA("label"), "n", 1, "id", 1, "a",
            "y", f3, (size_t)1);
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s s s s", 4, HA("label"), "id", "a", "y", "1");
    REJECTS(CALIB_REJ_KEY_TYPE, HF "s s s 4", 4, HA("pred"), "id", "a", "p", f3, (size_t)1);
    /* bins */
    REJECTS(CALIB_REJ_BIN_LENGTH, HF "s s s u s b", 5, HA("pred"), "id", "a", "k", 2, "logits",
            junk, (size_t)7);
    REJECTS(CALIB_REJ_BIN_LENGTH, HF "s s s u s 4", 5, HA("pred"), "id", "a", "k", 2, "probs",
            f3, (size_t)3);
    REJECTS(CALIB_REJ_BIN_LENGTH, HF "s u s A s s 4", 5, HA("pred"), "n", 1, "id", 1, "a",
            "p", f3, (size_t)3);
    REJECTS(CALIB_REJ_BIN_LENGTH, HF "s u s A s s A d s b", 6, HA("pred"), "n", 1, "id", 1, "a",
            "mean", 1, 1.0, "var", junk, (size_t)0);
    /* ranges */
    REJECTS(CALIB_REJ_N_RANGE, HF "s u s A s d", 5, HA("pred"), "n", 0, "p", 0, "y", 1.0);
    REJECTS(CALIB_REJ_N_RANGE, HF "s i s d", 4, HA("pred"), "n", -1, "p", 0.5);
    REJECTS(CALIB_REJ_N_RANGE, HF "s u s d", 4, HA("pred"), "n", CALIB_PROTO_MAX_N + 1, "p", 0.5);
    REJECTS(CALIB_REJ_K_RANGE, HF "s s s A u s u", 5, HA("pred"), "id", "a", "logits", 1, 1, "k", 1);
    REJECTS(CALIB_REJ_K_RANGE, HF "s s s A u", 4, HA("pred"), "id", "a", "logits", 1, 1);
    REJECTS(CALIB_REJ_K_RANGE, HF "s s s A", 4, HA("pred"), "id", "a", "probs", 0);
    REJECTS(CALIB_REJ_K_RANGE, HF "s s s A u u s u", 5, HA("pred"), "id", "a", "logits", 2, 1, 2,
            "k", CALIB_PROTO_MAX_K + 1);
    REJECTS(CALIB_REJ_K_RANGE, HF "s s s A u u s i", 5, HA("pred"), "id", "a", "logits", 2, 1, 2,
            "k", -2);
    /* output forms */
    REJECTS(CALIB_REJ_AMBIGUOUS_OUTPUT, HF "s s", 3, HA("pred"), "id", "a");
    REJECTS(CALIB_REJ_AMBIGUOUS_OUTPUT, HF "s s s d s A u u", 5, HA("pred"), "id", "a", "p", 0.5,
            "logits", 2, 1, 2);
    REJECTS(CALIB_REJ_AMBIGUOUS_OUTPUT, HF "s s s d s d", 5, HA("pred"), "id", "a", "p", 0.5,
            "mean", 0.5);
    REJECTS(CALIB_REJ_AMBIGUOUS_OUTPUT, HF "s s s A u u s A u u", 5, HA("pred"), "id", "a",
            "probs", 2, 1, 0, "logits", 2, 1, 2);
    /* array lengths */
    REJECTS(CALIB_REJ_ARRAY_LENGTH, HF "s s s A u u u s u", 5, HA("pred"), "id", "a",
            "logits", 3, 1, 2, 3, "k", 2);
    REJECTS(CALIB_REJ_ARRAY_LENGTH, HF "s u s A s s A d d", 5, HA("pred"), "n", 3, "id", 1, "a",
            "p", 2, 0.5, 0.5);
    REJECTS(CALIB_REJ_ARRAY_LENGTH, HF "s u s A s s A d d", 5, HA("pred"), "n", 2, "id", 1, "a",
            "p", 2, 0.5, 0.5);
    REJECTS(CALIB_REJ_ARRAY_LENGTH, HF "s u s u s A s s A A u u u A u u u", 6, HA("pred"), "n", 2,
            "k", 2, "id", 1, "a", "logits", 2, 3, 1, 2, 3, 3, 1, 2, 3);
    REJECTS(CALIB_REJ_ARRAY_LENGTH, HF "s u s A d s A u u", 5, HA("pred"), "n", 1, "p", 1, 0.5,
            "y", 2, 1, 1);
    REJECTS(CALIB_REJ_ARRAY_LENGTH, HF "s u s A s s A u u", 5, HA("label"), "n", 2, "id", 1, "a",
            "y", 2, 1, 1);
    REJECTS(CALIB_REJ_ARRAY_LENGTH, HF "s u s A s s s A u u s A d", 6, HA("label"), "n", 2,
            "id", 2, "a", "b", "y", 2, 1, 1, "ts", 1, 1.0);
    /* an id's type is a record-level fault, not a structural one */
    payload p;
    calib_msg m;
    calib_msg_rec rec;
    double x[1];
    pl_init(&p);
    mp(&p, HF "s s s d", 4, HA("pred"), "id", id65, "p", 0.5);
    calib_msg_init(&m);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    assert_int_equal(calib_msg_record(&m, 0, &rec, x), CALIB_REJ_BAD_ID);
    calib_msg_destroy(&m);
    pl_free(&p);
}

/* ------------------------------------------------------------------ records */

/* Decodes a batch of 3 whose middle record is bad: only it is rejected. */
static void expect_middle(int reason, payload *p)
{
    calib_msg m;
    calib_msg_rec rec;
    double x[3];
    calib_msg_init(&m);
    int r = decode(&m, p);
    if (r)
        print_error("decode: %s\n", calib_reject_name(r));
    assert_int_equal(r, CALIB_REJ_NONE);
    assert_int_equal(m.n, 3);
    for (size_t i = 0; i < 3; i++) {
        r = calib_msg_record(&m, i, &rec, x);
        if (r != (i == 1 ? reason : CALIB_REJ_NONE))
            print_error("record %zu: %s, want %s\n", i, calib_reject_name(r),
                        calib_reject_name(reason));
        assert_int_equal(r, i == 1 ? reason : CALIB_REJ_NONE);
        assert_true(calib_reject_is_record(reason));
    }
    calib_msg_destroy(&m);
    pl_free(p);
}

#define MIDDLE(reason, ...)                                                   \
    do {                                                                      \
        payload p_;                                                           \
        pl_init(&p_);                                                         \
        mp(&p_, __VA_ARGS__);                                                 \
        expect_middle((reason), &p_);                                         \
    } while (0)

#define IDS3 "s A s s s"
#define IDS3_ARGS "id", 3, "a", "b", "c"

static void record_rejects(void **state)
{
    char id65[66];
    memset(id65, 'i', 65);
    id65[65] = '\0';
    const float pv[3] = {0.5f, (float)NAN, 0.5f};
    const double probs_bad[6] = {0.5, 0.5, 1.5, -0.5, 0.25, 0.75};
    const double sum_bad[6] = {0.5, 0.5, 0.5, 0.4, 0.25, 0.75};
    const double lo_inf[6] = {1, 2, INFINITY, 0, 3, 4};
    const double z6[6] = {1, 2, 3, 4, 5, 6};

    MIDDLE(CALIB_REJ_NONFINITE, HF "s u" IDS3 "s 4", 5, HA("pred"), "n", 3,
           IDS3_ARGS, "p", pv, (size_t)3);
    MIDDLE(CALIB_REJ_NONFINITE, HF "s u s u" IDS3 "s 8", 6, HA("pred"), "n", 3,
           "k", 2, IDS3_ARGS, "logits", lo_inf, (size_t)6);
    MIDDLE(CALIB_REJ_NONFINITE, HF "s u" IDS3 "s A d d d s A d d d", 6, HA("pred"),
           "n", 3, IDS3_ARGS, "mean", 3, 1.0, -INFINITY, 1.0, "var", 3, 1.0, 1.0, 1.0);
    MIDDLE(CALIB_REJ_NONFINITE, HF "s u" IDS3 "s A d d d s A d d d", 6, HA("pred"),
           "n", 3, IDS3_ARGS, "p", 3, 0.5, 0.5, 0.5, "ts", 3, 1.0, NAN, 2.0);
    MIDDLE(CALIB_REJ_NONFINITE, HF "s u" IDS3 "s A d d d s A d d d", 6, HA("pred"),
           "n", 3, IDS3_ARGS, "p", 3, 0.5, 0.5, 0.5, "y", 3, 1.0, NAN, 0.0);
    MIDDLE(CALIB_REJ_NONFINITE, HF "s u" IDS3 "s A d d d", 5, HA("label"),
           "n", 3, IDS3_ARGS, "y", 3, 1.0, INFINITY, 0.0);
    MIDDLE(CALIB_REJ_PROB_RANGE, HF "s u s u" IDS3 "s 8", 6, HA("pred"), "n", 3,
           "k", 2, IDS3_ARGS, "probs", probs_bad, (size_t)6);
    MIDDLE(CALIB_REJ_PROB_RANGE, HF "s u" IDS3 "s A d d d", 5, HA("pred"), "n", 3,
           IDS3_ARGS, "p", 3, 0.5, 1.2, 0.5);
    MIDDLE(CALIB_REJ_PROB_RANGE, HF "s u" IDS3 "s A d i d", 5, HA("pred"), "n", 3,
           IDS3_ARGS, "p", 3, 0.5, -1, 0.5);
    MIDDLE(CALIB_REJ_PROB_SUM, HF "s u s u" IDS3 "s 8", 6, HA("pred"), "n", 3,
           "k", 2, IDS3_ARGS, "probs", sum_bad, (size_t)6);
    MIDDLE(CALIB_REJ_PROB_SUM, HF "s u s u" IDS3 "s A A d d A u u A d d", 6, HA("pred"),
           "n", 3, "k", 2, IDS3_ARGS, "probs", 3, 2, 0.5, 0.5, 2, 1, 1, 2, 0.0, 1.0);
    MIDDLE(CALIB_REJ_VAR_NONPOSITIVE, HF "s u" IDS3 "s A d d d s A d u d", 6, HA("pred"),
           "n", 3, IDS3_ARGS, "mean", 3, 1.0, 1.0, 1.0, "var", 3, 1.0, 0, 1.0);
    MIDDLE(CALIB_REJ_VAR_NONPOSITIVE, HF "s u" IDS3 "s A d d d s A d i d", 6, HA("pred"),
           "n", 3, IDS3_ARGS, "mean", 3, 1.0, 1.0, 1.0, "var", 3, 1.0, -2, 1.0);
    MIDDLE(CALIB_REJ_LABEL_RANGE, HF "s u s u s 8 s A u u u", 6, HA("pred"), "n", 3,
           "k", 2, "logits", z6, (size_t)6,
           "y", 3, 0, 2, 1);
    MIDDLE(CALIB_REJ_LABEL_RANGE, HF "s u" IDS3 "s A d d d s A u d u", 6, HA("pred"),
           "n", 3, IDS3_ARGS, "p", 3, 0.5, 0.5, 0.5, "y", 3, 0, 0.5, 1);
    MIDDLE(CALIB_REJ_LABEL_RANGE, HF "s u" IDS3 "s A d d d s A u i u", 6, HA("pred"),
           "n", 3, IDS3_ARGS, "p", 3, 0.5, 0.5, 0.5, "y", 3, 0, -1, 1);
    MIDDLE(CALIB_REJ_LABEL_RANGE, HF "s u" IDS3 "s A d d d s A u u u", 6, HA("pred"),
           "n", 3, IDS3_ARGS, "p", 3, 0.5, 0.5, 0.5, "y", 3, 0, 2, 1);
    MIDDLE(CALIB_REJ_BAD_ID, HF "s u s A s s s s A d d d", 5, HA("pred"), "n", 3,
           "id", 3, "a", "", "c", "p", 3, 0.5, 0.5, 0.5);
    MIDDLE(CALIB_REJ_BAD_ID, HF "s u s A s s s s A d d d", 5, HA("pred"), "n", 3,
           "id", 3, "a", id65, "c", "p", 3, 0.5, 0.5, 0.5);
    MIDDLE(CALIB_REJ_BAD_ID, HF "s u s A s i s s A d d d", 5, HA("pred"), "n", 3,
           "id", 3, "a", -5, "c", "p", 3, 0.5, 0.5, 0.5);
    MIDDLE(CALIB_REJ_BAD_ID, HF "s u s A s n s s A d d d", 5, HA("pred"), "n", 3,
           "id", 3, "a", "c", "p", 3, 0.5, 0.5, 0.5);
    MIDDLE(CALIB_REJ_BAD_ID, HF "s u s A u d u s A u u u", 5, HA("label"), "n", 3,
           "id", 3, 1, 2.0, 3, "y", 3, 0, 1, 0);
    MIDDLE(CALIB_REJ_BAD_ID, HF "s u s A u A u u s A u u u", 5, HA("label"), "n", 3,
           "id", 3, 1, 1, 0, 3, "y", 3, 0, 1, 0);

    /* a non-finite batch-wide ts rejects every record */
    payload p;
    calib_msg m;
    calib_msg_rec rec;
    double x[1];
    pl_init(&p);
    mp(&p, HF "s u" IDS3 "s A d d d s d", 6, HA("pred"), "n", 3, IDS3_ARGS,
       "p", 3, 0.5, 0.5, 0.5, "ts", INFINITY);
    calib_msg_init(&m);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(calib_msg_record(&m, i, &rec, x), CALIB_REJ_NONFINITE);
    calib_msg_destroy(&m);
    pl_free(&p);
}

/* ------------------------------------------------------------------ faults */

/* Decodes the payload built by fmt: the reason, and the key named at fault
 * (NULL: none). */
#define FAULT(reason, want_key, ...)                                          \
    do {                                                                      \
        payload p_;                                                           \
        calib_msg m_;                                                         \
        pl_init(&p_);                                                         \
        mp(&p_, __VA_ARGS__);                                                 \
        calib_msg_init(&m_);                                                  \
        assert_int_equal(decode(&m_, &p_), (reason));                         \
        check_key(m_.fault.key, (want_key));                                  \
        calib_msg_destroy(&m_);                                               \
        pl_free(&p_);                                                         \
    } while (0)

static void check_key(const char *got, const char *want)
{
    if (want == NULL) {
        assert_null(got);
        return;
    }
    assert_non_null(got);
    assert_string_equal(got, want);
}

/* Record 1 of a batch of 3 is rejected for reason, at key. */
static void middle_key(int reason, const char *key, payload *p)
{
    calib_msg m;
    calib_msg_rec rec;
    double x[6];
    calib_msg_init(&m);
    assert_int_equal(decode(&m, p), CALIB_REJ_NONE);
    assert_int_equal(calib_msg_record(&m, 0, &rec, x), CALIB_REJ_NONE);
    assert_null(rec.fault_key);
    assert_int_equal(calib_msg_record(&m, 1, &rec, x), reason);
    check_key(rec.fault_key, key);
    calib_msg_destroy(&m);
    pl_free(p);
}

#define MIDDLE_AT(reason, want_key, ...)                                      \
    do {                                                                      \
        payload p_;                                                           \
        pl_init(&p_);                                                         \
        mp(&p_, __VA_ARGS__);                                                 \
        middle_key((reason), (want_key), &p_);                                \
    } while (0)

/* Every rejection names the key at fault, where one key is. */
static void fault_keys(void **state)
{
    const float f3[3] = {0.2f, 0.3f, 0.5f};
    const double lo_inf[6] = {1, 2, INFINITY, 0, 3, 4};

    FAULT(CALIB_REJ_NOT_A_MAP, NULL, "A u u", 2, 1, 2);
    FAULT(CALIB_REJ_BAD_KEY, NULL, "M s u u u s s", 3, "v", 1, 7, 7, "type", "pred");
    FAULT(CALIB_REJ_DUPLICATE_KEY, "id", HF "s s s s s u", 5, HA("label"), "id", "a",
          "id", "b", "y", 1);
    FAULT(CALIB_REJ_BAD_VERSION, "v", "M s u s s", 2, "v", 2, "type", "pred");
    FAULT(CALIB_REJ_BAD_TYPE, "type", "M s u s s", 2, "v", 1, "type", "pre");
    FAULT(CALIB_REJ_N_RANGE, "n", HF "s u s d", 4, HA("pred"), "n", 0, "p", 0.5);
    FAULT(CALIB_REJ_KEY_TYPE, "n", HF "s d s A d s A s", 5, HA("pred"), "n", 1.0,
          "p", 1, 0.5, "id", 1, "a");
    FAULT(CALIB_REJ_KEY_TYPE, "p", HF "s s s s", 4, HA("pred"), "id", "a", "p", "0.5");
    FAULT(CALIB_REJ_KEY_TYPE, "ts", HF "s s s d s s", 5, HA("pred"), "id", "a", "p", 0.5,
          "ts", "now");
    FAULT(CALIB_REJ_KEY_TYPE, "k", HF "s s s A u u s s", 5, HA("pred"), "id", "a",
          "logits", 2, 1, 2, "k", "2");
    FAULT(CALIB_REJ_KEY_TYPE, "logits", HF "s s s u", 4, HA("pred"), "id", "a", "logits", 5);
    FAULT(CALIB_REJ_KEY_TYPE, "id", HF "s u s s s A d", 5, HA("pred"), "n", 1, "id", "a",
          "p", 1, 0.5);
    FAULT(CALIB_REJ_KEY_TYPE, "y", HF "s s s s", 4, HA("label"), "id", "a", "y", "1");
    FAULT(CALIB_REJ_MISSING_KEY, "y", HF "s s", 3, HA("label"), "id", "a");
    FAULT(CALIB_REJ_MISSING_KEY, "var", HF "s s s d", 4, HA("pred"), "id", "a", "mean", 1.0);
    FAULT(CALIB_REJ_MISSING_KEY, "mean", HF "s s s d", 4, HA("pred"), "id", "a", "var", 1.0);
    FAULT(CALIB_REJ_MISSING_KEY, "k", HF "s u s A s s A A u u s A u", 6, HA("pred"),
          "n", 1, "id", 1, "a", "logits", 1, 2, 1, 2, "y", 1, 0);
    FAULT(CALIB_REJ_MISSING_ID, "id", HF "s d", 3, HA("pred"), "p", 0.5);
    FAULT(CALIB_REJ_MISSING_ID, "id", HF "s u", 3, HA("label"), "y", 1);
    FAULT(CALIB_REJ_K_RANGE, "k", HF "s s s A u u s u", 5, HA("pred"), "id", "a",
          "logits", 2, 1, 2, "k", 1);
    FAULT(CALIB_REJ_K_RANGE, "logits", HF "s s s A u", 4, HA("pred"), "id", "a", "logits", 1, 1);
    FAULT(CALIB_REJ_AMBIGUOUS_OUTPUT, NULL, HF "s s", 3, HA("pred"), "id", "a");
    FAULT(CALIB_REJ_AMBIGUOUS_OUTPUT, "probs", HF "s s s A u u s A u u", 5, HA("pred"),
          "id", "a", "probs", 2, 1, 0, "logits", 2, 1, 2);
    FAULT(CALIB_REJ_AMBIGUOUS_OUTPUT, "mean", HF "s s s d s d", 5, HA("pred"), "id", "a",
          "p", 0.5, "mean", 0.5);
    FAULT(CALIB_REJ_ARRAY_LENGTH, "logits", HF "s s s A u u u s u", 5, HA("pred"), "id", "a",
          "logits", 3, 1, 2, 3, "k", 2);
    FAULT(CALIB_REJ_ARRAY_LENGTH, "y", HF "s u s A d s A u u", 5, HA("pred"), "n", 1,
          "p", 1, 0.5, "y", 2, 1, 1);
    FAULT(CALIB_REJ_ARRAY_LENGTH, "ts", HF "s u s A s s s A u u s A d", 6, HA("label"), "n", 2,
          "id", 2, "a", "b", "y", 2, 1, 1, "ts", 1, 1.0);
    FAULT(CALIB_REJ_BIN_AMBIGUOUS, "probs", HF "s s s 4", 4, HA("pred"), "id", "a", "probs",
          f3, (size_t)2);

    {   /* a bin of the wrong length: its bytes and the values it had to hold */
        payload p;
        calib_msg m;
        pl_init(&p);
        mp(&p, HF "s u s A s s s 4", 5, HA("pred"), "n", 2, "id", 2, "a", "b", "var", f3,
           (size_t)3);
        calib_msg_init(&m);
        assert_int_equal(decode(&m, &p), CALIB_REJ_MISSING_KEY); /* no mean */
        pl_free(&p);
        pl_init(&p);
        mp(&p, HF "s u s A s s s 4", 5, HA("pred"), "n", 2, "id", 2, "a", "b", "p", f3,
           (size_t)3);
        assert_int_equal(decode(&m, &p), CALIB_REJ_BIN_LENGTH);
        check_key(m.fault.key, "p");
        assert_int_equal(m.fault.bin_bytes, 12);
        assert_int_equal(m.fault.bin_values, 2);
        /* the topic has no key; a success clears the fault */
        assert_int_equal(calib_msg_decode(&m, "a b", 3, p.sb.data, p.sb.size),
                         CALIB_REJ_BAD_TOPIC);
        assert_null(m.fault.key);
        assert_int_equal(m.fault.bin_bytes, 0);
        pl_free(&p);
        pl_init(&p);
        mp(&p, HF "s s s d", 4, HA("pred"), "id", "a", "p", 0.5);
        assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
        assert_null(m.fault.key);
        calib_msg_destroy(&m);
        pl_free(&p);
    }

    /* records */
    MIDDLE_AT(CALIB_REJ_BAD_ID, "id", HF "s u s A s s s s A d d d", 5, HA("pred"), "n", 3,
              "id", 3, "a", "", "c", "p", 3, 0.5, 0.5, 0.5);
    MIDDLE_AT(CALIB_REJ_NONFINITE, "ts", HF "s u" IDS3 "s A d d d s A d d d", 6, HA("pred"),
              "n", 3, IDS3_ARGS, "p", 3, 0.5, 0.5, 0.5, "ts", 3, 1.0, NAN, 2.0);
    MIDDLE_AT(CALIB_REJ_NONFINITE, "logits", HF "s u s u" IDS3 "s 8", 6, HA("pred"), "n", 3,
              "k", 2, IDS3_ARGS, "logits", lo_inf, (size_t)6);
    MIDDLE_AT(CALIB_REJ_PROB_RANGE, "p", HF "s u" IDS3 "s A d d d", 5, HA("pred"), "n", 3,
              IDS3_ARGS, "p", 3, 0.5, 1.2, 0.5);
    MIDDLE_AT(CALIB_REJ_PROB_SUM, "probs", HF "s u s u" IDS3 "s A A d d A u u A d d", 6,
              HA("pred"), "n", 3, "k", 2, IDS3_ARGS, "probs", 3, 2, 0.5, 0.5, 2, 1, 1, 2,
              0.0, 1.0);
    MIDDLE_AT(CALIB_REJ_NONFINITE, "mean", HF "s u" IDS3 "s A d d d s A d d d", 6, HA("pred"),
              "n", 3, IDS3_ARGS, "mean", 3, 1.0, NAN, 1.0, "var", 3, 1.0, 1.0, 1.0);
    MIDDLE_AT(CALIB_REJ_VAR_NONPOSITIVE, "var", HF "s u" IDS3 "s A d d d s A d u d", 6,
              HA("pred"), "n", 3, IDS3_ARGS, "mean", 3, 1.0, 1.0, 1.0, "var", 3, 1.0, 0, 1.0);
    MIDDLE_AT(CALIB_REJ_LABEL_RANGE, "y", HF "s u" IDS3 "s A d d d s A u u u", 6, HA("pred"),
              "n", 3, IDS3_ARGS, "p", 3, 0.5, 0.5, 0.5, "y", 3, 0, 2, 1);
    MIDDLE_AT(CALIB_REJ_NONFINITE, "y", HF "s u" IDS3 "s A d d d", 5, HA("label"),
              "n", 3, IDS3_ARGS, "y", 3, 1.0, INFINITY, 0.0);
}

/* ------------------------------------------------------------------ hostile */

/* Every strict prefix of a valid payload is truncated msgpack. */
static void check_prefixes(const payload *p)
{
    calib_msg m;
    calib_msg_init(&m);
    assert_int_equal(decode(&m, p), CALIB_REJ_NONE);
    for (size_t len = 0; len < p->sb.size; len++) {
        /* a heap copy of exactly len bytes, so ASan sees any over-read */
        char *copy = malloc(len ? len : 1);
        assert_non_null(copy);
        memcpy(copy, p->sb.data, len);
        assert_int_equal(calib_msg_decode(&m, "t", 1, copy, len),
                         CALIB_REJ_BAD_MSGPACK);
        assert_int_equal(m.n, 0);
        free(copy);
    }
    calib_msg_destroy(&m);
}

static void truncated_prefixes(void **state)
{
    const double z[6] = {1, 2, 3, 4, 5, 6};
    const float f[3] = {0.1f, 0.2f, 0.7f};
    payload p;
    pl_init(&p);
    mp(&p, HF "s u s u s A s U s s 8 s A d d d s A u u u", 8, HA("pred"),
       "n", 3, "k", 2, "id", 3, "a", (uint64_t)1 << 40, "ccccccccccccccccccccccccccccccccc",
       "logits", z, (size_t)6, "ts", 3, 1.0, 2.0, 3.0, "y", 3, 0, 1, 0);
    check_prefixes(&p);
    pl_free(&p);
    pl_init(&p);
    mp(&p, HF "s s s 4 s u s f s M s A n", 7, HA("pred"), "id", "x", "probs", f,
       (size_t)3, "k", 3, "ts", 1.5, "meta", 1, "tags", 1);
    check_prefixes(&p);
    pl_free(&p);
    pl_init(&p);
    mp(&p, HF "s u s A i s s A u u", 5, HA("label"), "n", 2, "id", 2, 7, "x",
       "y", 2, 300, 70000);
    check_prefixes(&p);
    pl_free(&p);
}

static void trailing_bytes(void **state)
{
    payload p;
    calib_msg m;
    pl_init(&p);
    mp(&p, HF "s s s u", 4, HA("label"), "id", "a", "y", 1);
    calib_msg_init(&m);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    msgpack_pack_nil(&p.pk);
    assert_int_equal(decode(&m, &p), CALIB_REJ_TRAILING_BYTES);
    mp(&p, HF "s s s u", 4, HA("label"), "id", "a", "y", 1);
    assert_int_equal(decode(&m, &p), CALIB_REJ_TRAILING_BYTES);
    calib_msg_destroy(&m);
    pl_free(&p);
}

static int decode_raw(const unsigned char *b, size_t len)
{
    calib_msg m;
    calib_msg_init(&m);
    int r = calib_msg_decode(&m, "t", 1, b, len);
    calib_msg_destroy(&m);
    return r;
}

/* Declared counts far beyond the bytes left must be refused before msgpack-c
 * allocates them (the ASan build would abort on a 100 GB request). */
static void huge_counts(void **state)
{
    const unsigned char map32[] = {0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'v', 0x01};
    const unsigned char arr32[] = {0xdd, 0xff, 0xff, 0xff, 0xff, 0x00};
    const unsigned char arr16[] = {0xdc, 0xff, 0xff, 0x01, 0x02, 0x03};
    const unsigned char map16[] = {0xde, 0x00, 0x04, 0xa1, 'v', 0x01};
    const unsigned char inner[] = {0x81, 0xa1, 'x', 0xdd, 0x7f, 0xff, 0xff, 0xff, 0x01};
    const unsigned char bin32[] = {0x81, 0xa1, 'x', 0xc6, 0xff, 0xff, 0xff, 0xff, 0x00};
    const unsigned char str32[] = {0x81, 0xa1, 'x', 0xdb, 0x00, 0x01, 0x00, 0x00, 'a'};
    const unsigned char ext32[] = {0x81, 0xa1, 'x', 0xc9, 0xff, 0xff, 0xff, 0xf0, 0x01};
    const unsigned char fix[] = {0x9f, 0x01, 0x02};
    const unsigned char c1[] = {0x81, 0xa1, 'x', 0xc1};
    const unsigned char hdr[] = {0x81, 0xa1, 'x', 0xdd, 0x00};
    /* a whole array of 2^16 - 1 declared arrays of 2^32 - 1 each */
    unsigned char nest[3 + 5 * 64];
    nest[0] = 0xdc; nest[1] = 0xff; nest[2] = 0xff;
    for (size_t i = 0; i < 64; i++) {
        unsigned char *q = nest + 3 + 5 * i;
        q[0] = 0xdd; q[1] = q[2] = q[3] = q[4] = 0xff;
    }
    assert_int_equal(decode_raw(map32, sizeof map32), CALIB_REJ_BAD_MSGPACK);
    assert_int_equal(decode_raw(arr32, sizeof arr32), CALIB_REJ_BAD_MSGPACK);
    assert_int_equal(decode_raw(arr16, sizeof arr16), CALIB_REJ_BAD_MSGPACK);
    assert_int_equal(decode_raw(map16, sizeof map16), CALIB_REJ_BAD_MSGPACK);
    assert_int_equal(decode_raw(inner, sizeof inner), CALIB_REJ_BAD_MSGPACK);
    assert_int_equal(decode_raw(bin32, sizeof bin32), CALIB_REJ_BAD_MSGPACK);
    assert_int_equal(decode_raw(str32, sizeof str32), CALIB_REJ_BAD_MSGPACK);
    assert_int_equal(decode_raw(ext32, sizeof ext32), CALIB_REJ_BAD_MSGPACK);
    assert_int_equal(decode_raw(fix, sizeof fix), CALIB_REJ_BAD_MSGPACK);
    assert_int_equal(decode_raw(c1, sizeof c1), CALIB_REJ_BAD_MSGPACK);
    assert_int_equal(decode_raw(hdr, sizeof hdr), CALIB_REJ_BAD_MSGPACK);
    assert_int_equal(decode_raw(nest, sizeof nest), CALIB_REJ_BAD_MSGPACK);
    assert_int_equal(decode_raw(NULL, 0), CALIB_REJ_BAD_MSGPACK);
    size_t end = 99;
    assert_int_equal(calib_proto_scan(arr32, sizeof arr32, &end), CALIB_REJ_BAD_MSGPACK);
    assert_int_equal(calib_proto_scan(arr32 + 5, 1, &end), CALIB_REJ_NONE);
    assert_int_equal(end, 1);
}

/* A label whose unknown key "x" holds `depth` nested arrays. */
static int decode_nested(int depth)
{
    payload p;
    pl_init(&p);
    mp(&p, HF "s s s u s", 5, HA("label"), "id", "a", "y", 1, "x");
    for (int i = 0; i < depth; i++)
        msgpack_pack_array(&p.pk, i + 1 < depth ? 1 : 0);
    calib_msg m;
    calib_msg_init(&m);
    int r = decode(&m, &p);
    calib_msg_destroy(&m);
    pl_free(&p);
    return r;
}

static void nesting_depth(void **state)
{
    /* the payload map is one level: 31 more is msgpack-c's limit of 32 */
    assert_int_equal(decode_nested(31), CALIB_REJ_NONE);
    assert_int_equal(decode_nested(32), CALIB_REJ_TOO_DEEP);
    assert_int_equal(decode_nested(40), CALIB_REJ_TOO_DEEP);
    assert_int_equal(decode_nested(1000), CALIB_REJ_TOO_DEEP);
    /* depth is refused even when the containers lie about their counts */
    unsigned char deep[40];
    memset(deep, 0x91, sizeof deep);
    assert_int_equal(decode_raw(deep, sizeof deep), CALIB_REJ_TOO_DEEP);
}

/* Whatever the raw walk accepts, msgpack-c must decode to the same end. */
static void scan_agrees(const unsigned char *b, size_t len)
{
    size_t end = 0, off = 0;
    if (calib_proto_scan(b, len, &end) != CALIB_REJ_NONE)
        return;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    assert_int_equal(msgpack_unpack_next(&u, (const char *)b, len, &off),
                     MSGPACK_UNPACK_SUCCESS);
    assert_int_equal(off, end);
    msgpack_unpacked_destroy(&u);
}

/* Decodes b and, if accepted, every record: the results must be defined. */
static int fuzz_one(calib_msg *m, const unsigned char *b, size_t len, double *x)
{
    if (len > 0)
        scan_agrees(b, len);
    int r = calib_msg_decode(m, "fuzz", 4, b, len);
    assert_true(r >= 0 && r < CALIB_REJ_COUNT);
    if (r != CALIB_REJ_NONE) {
        assert_false(calib_reject_is_record(r));
        assert_int_equal(m->n, 0);
        return r;
    }
    assert_true(m->n >= 1 && m->n <= CALIB_PROTO_MAX_N);
    assert_true(m->width <= CALIB_PROTO_MAX_K);
    for (size_t i = 0; i < m->n; i++) {
        calib_msg_rec rec;
        int q = calib_msg_record(m, i, &rec, x);
        assert_true(q == CALIB_REJ_NONE || calib_reject_is_record(q));
        if (q == CALIB_REJ_NONE && rec.id_kind == CALIB_MSG_ID_STR)
            assert_true(rec.id_len >= 1 && rec.id_len <= CALIB_PROTO_MAX_ID &&
                        rec.id >= (const char *)b &&
                        rec.id + rec.id_len <= (const char *)b + len);
    }
    return r;
}

static void build_seed(payload *p, int which)
{
    const double z[6] = {0.1, 0.2, 0.7, 0.3, 0.3, 0.4};
    const float f[4] = {0.5f, 0.5f, 0.25f, 0.75f};
    switch (which) {
    case 0:
        mp(p, HF "s u s u s A s u s 8 s A d d s A u u", 8, HA("pred"), "n", 2,
           "k", 3, "id", 2, "a", 2, "probs", z, (size_t)6, "ts", 2, 1.0, 2.0,
           "y", 2, 2, 0);
        break;
    case 1:
        mp(p, HF "s u s A A f f A d i s A s s s u", 6, HA("pred"), "n", 2,
           "logits", 2, 2, 0.5, 1.5, 2, 3.0, -4, "id", 2, "x", "y", "k", 2);
        break;
    case 2:
        mp(p, HF "s s s d s d s d", 6, HA("pred"), "id", "r", "mean", 1.0,
           "var", 2.0, "ts", 3.0);
        break;
    case 3:
        mp(p, HF "s u s A u u s A u u s d", 6, HA("label"), "n", 2, "id", 2, 1,
           2, "y", 2, 0, 1, "ts", 5.0);
        break;
    default:
        mp(p, HF "s u s A u u s 4 s u", 6, HA("pred"), "n", 2, "id", 2, 1, 2,
           "probs", f, (size_t)4, "k", 2);
        break;
    }
}

static void random_bytes(void **state)
{
    enum { ROUNDS = 200000, MAXLEN = 96 };
    calib_rng rng;
    calib_msg m;
    double *x = malloc(CALIB_PROTO_MAX_K * sizeof *x);
    unsigned char *buf = malloc(4096);
    payload seeds[5];
    long accepted = 0, mutated_ok = 0;

    assert_non_null(x);
    assert_non_null(buf);
    calib_rng_seed(&rng, 20261121);
    calib_msg_init(&m);
    for (int s = 0; s < 5; s++) {
        pl_init(&seeds[s]);
        build_seed(&seeds[s], s);
        assert_true(seeds[s].sb.size <= 4096);
        assert_int_equal(fuzz_one(&m, (unsigned char *)seeds[s].sb.data,
                                  seeds[s].sb.size, x), CALIB_REJ_NONE);
    }
    for (long round = 0; round < ROUNDS; round++) {
        uint64_t u = calib_rng_next(&rng);
        size_t len;
        if (round % 2 == 0) {
            /* random bytes, biased towards msgpack's container headers */
            len = (size_t)(u % MAXLEN);
            for (size_t i = 0; i < len; i++) {
                uint64_t v = calib_rng_next(&rng);
                buf[i] = v % 4 == 0 ? (unsigned char)(0x80 + (v >> 8) % 0x20)
                                    : (unsigned char)(v >> 16);
            }
        } else {
            /* a valid payload with a few bytes changed, cut or extended */
            const payload *sp = &seeds[u % 5];
            len = sp->sb.size;
            memcpy(buf, sp->sb.data, len);
            int flips = 1 + (int)((u >> 8) % 4);
            for (int f = 0; f < flips; f++) {
                uint64_t v = calib_rng_next(&rng);
                buf[v % len] = (unsigned char)(v >> 32);
            }
            if ((u >> 16) % 8 == 0)
                len = (size_t)((u >> 24) % len);
            else if ((u >> 16) % 8 == 1)
                buf[len++] = (unsigned char)(u >> 40);
        }
        /* an exact-size heap copy: ASan catches any over-read */
        unsigned char *copy = malloc(len ? len : 1);
        assert_non_null(copy);
        memcpy(copy, buf, len);
        if (fuzz_one(&m, copy, len, x) == CALIB_REJ_NONE) {
            accepted++;
            mutated_ok += round % 2;
        }
        free(copy);
    }
    /* mutations of valid payloads must sometimes survive, or the fuzzing
     * only ever reached the first check */
    assert_true(mutated_ok > 100);
    print_message("random_bytes: %ld of %d accepted\n", accepted, ROUNDS);
    for (int s = 0; s < 5; s++)
        pl_free(&seeds[s]);
    calib_msg_destroy(&m);
    free(buf);
    free(x);
}

/* A full-size batch: n = 65536 float32 probabilities through a bin. */
static void max_batch(void **state)
{
    size_t n = CALIB_PROTO_MAX_N;
    float *pv = malloc(n * sizeof *pv);
    assert_non_null(pv);
    for (size_t i = 0; i < n; i++)
        pv[i] = (float)(i % 101) / 100.0f;
    payload p;
    calib_msg m;
    calib_msg_rec rec;
    double x[1];
    pl_init(&p);
    mp(&p, HF "s u s 4 s d", 6, HA("pred"), "n", (int)n, "p", pv, n, "ts", 7.0);
    msgpack_pack_str(&p.pk, 1);
    msgpack_pack_str_body(&p.pk, "y", 1);
    msgpack_pack_array(&p.pk, n);
    for (size_t i = 0; i < n; i++)
        msgpack_pack_uint64(&p.pk, i % 2);
    calib_msg_init(&m);
    assert_int_equal(decode(&m, &p), CALIB_REJ_NONE);
    assert_int_equal(m.n, n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(calib_msg_record(&m, i, &rec, x), CALIB_REJ_NONE);
        assert_true(x[0] == (double)pv[i]);
    }
    calib_msg_destroy(&m);
    pl_free(&p);
    free(pv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reject_names),
        cmocka_unit_test(number_helper),
        cmocka_unit_test(row_logits_mixed_array),
        cmocka_unit_test(row_probs_bin32),
        cmocka_unit_test(row_logits_bin32_long),
        cmocka_unit_test(row_probs_bin64_and_logits_bin),
        cmocka_unit_test(row_binary_and_gaussian),
        cmocka_unit_test(batch_logits_bin64),
        cmocka_unit_test(batch_probs_nested),
        cmocka_unit_test(batch_binary_and_gaussian),
        cmocka_unit_test(labels),
        cmocka_unit_test(segments),
        cmocka_unit_test(topics),
        cmocka_unit_test(structural_rejects),
        cmocka_unit_test(record_rejects),
        cmocka_unit_test(fault_keys),
        cmocka_unit_test(truncated_prefixes),
        cmocka_unit_test(trailing_bytes),
        cmocka_unit_test(huge_counts),
        cmocka_unit_test(nesting_depth),
        cmocka_unit_test(random_bytes),
        cmocka_unit_test(max_batch),
        cmocka_unit_test(row_bin_without_k),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
