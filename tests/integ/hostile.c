/*
 * hostile.c — the hostile sender of the integration tests: one message of
 * every rejection class of the wire contract (protocol.md, calibd-protocol(7)),
 * to a calibd that must count each one and keep running.
 *
 * usage: hostile [--endpoint EP] [--push] [--seed S] [--random N]
 *                [--warmup-ms MS] [--max-bytes B] [--linger-ms MS] [--map]
 *
 * For every class it sends, it prints `<class-label> <count>` to stdout, one
 * line each, in sending order; the count is the number of rejections the
 * class should cause (messages for a structural class, bad records for a
 * record class). --map prints `<class-label> <reason>` instead, the reason
 * name calibd is expected to count (calib_reject_name(), or the daemon's own
 * "framing"), and sends nothing.
 *
 * Every message goes to topic "hostile" unless the class is about the topic;
 * the Gaussian record class goes to "hostile.gaussian", because calibd fixes
 * a model's output form at its first accepted prediction and "hostile" is
 * shaped by the first record-class batch as a K = 3 classifier; the
 * ambiguous bin goes to "hostile.ambiguous", a model whose K is unknown.
 *
 * The classes (label: expected reason — what is sent):
 *
 *  framing
 *   frames_1               framing          the topic frame alone
 *   frames_3               framing          topic, a valid payload, an extra frame
 *  topic
 *   topic_empty            bad_topic        a zero-length topic
 *   topic_129              bad_topic        129 bytes of 'a'
 *   topic_chars            bad_topic        "hostile/model name\xff"
 *  msgpack
 *   msgpack_garbage        bad_msgpack      0xc1 (never used by msgpack) + random bytes
 *   msgpack_truncated      bad_msgpack      a valid row prediction less its last 3 bytes
 *   trailing_bytes         trailing_bytes   a valid row prediction and a nil after it
 *   not_a_map              not_a_map        the array [1, "pred"]
 *   huge_count             bad_msgpack      "logits" declared as an array32 of
 *                                           2^32-1 items in a ~40-byte payload
 *   depth_40               too_deep         an unknown key holding 40 nested arrays
 *  version
 *   v_missing              bad_version      no "v"
 *   v_2                    bad_version      "v": 2
 *   v_string               bad_version      "v": "1"
 *   v_0                    bad_version      "v": 0
 *   v_negative             bad_version      "v": -1
 *  type
 *   type_unknown           bad_type         "type": "prediction"
 *   type_missing           bad_type         no "type"
 *   type_not_string        bad_type         "type": 1
 *  missing keys
 *   pred_no_output         ambiguous_output a pred with id and y but none of
 *                                           logits/probs/p/mean+var
 *   label_no_y             missing_key      a label with an id only
 *   pred_no_id_no_y        missing_id       a pred with logits, no id, no y
 *   label_no_id_no_y       missing_id       a label with neither
 *  mistyped keys, ranges
 *   n_string               key_type         batch with "n": "3"
 *   logits_string          key_type         row with "logits": "0.1,0.2,0.7"
 *   bin_length             bin_length       batch n = 2, k = 3, a 20-byte bin
 *   n_zero                 n_range          batch with "n": 0
 *   n_65537                n_range          batch with "n": 65537
 *   k_mismatch_row         array_length     batch n = 3, k = 3, row 1 of 2 numbers
 *   bin_ambiguous          bin_ambiguous    row, probs a bin of 4 float32 (16 bytes,
 *                                           or 2 float64) without "k", to
 *                                           "hostile.ambiguous", a model with no K
 *  records: a batch of 3 predictions with ids and inline y; one record bad
 *   rec_nan                nonfinite        a logit NaN
 *   rec_inf                nonfinite        a logit +inf
 *   rec_prob_range         prob_range       probs (1.5, -0.5, 0)
 *   rec_prob_sum           prob_sum         probs (0.5, 0.3, 0.1)
 *   rec_var_nonpositive    var_nonpositive  var 0 (topic hostile.gaussian)
 *   rec_label_range        label_range      y = 3 with K = 3
 *   rec_id_empty           bad_id           id ""
 *   rec_id_65              bad_id           id of 65 bytes
 *   rec_id_float           bad_id           id 1.5
 *  extra
 *   random                 (varies)         --random N payloads of 1..256 random
 *                                           bytes; each is rejected, the reason
 *                                           depends on the bytes
 *   oversize               (none)           last: a *valid* row prediction padded by
 *                                           an unknown bin key to --max-bytes bytes
 *                                           (default 1 MiB + 1). A daemon with
 *                                           max_msg_size below that never sees it:
 *                                           libzmq drops it and the connection,
 *                                           so it must not be scored (the model
 *                                           "hostile" must not gain a prediction).
 *                                           Sent last because of that disconnect.
 *
 * The valid records of the record-class batches carry inline y, so they are
 * scored at once: "hostile" gains 2 scored predictions per record class on
 * that topic (14), "hostile.gaussian" 2, and nothing waits in a join table.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <msgpack.h>
#include <zmq.h>

#include "calib/calib.h"
#include "producer.h"

#define PROG "hostile"
#define TOPIC "hostile"
#define TOPIC_GAUSS "hostile.gaussian"
#define TOPIC_AMBIGUOUS "hostile.ambiguous"
#define MIN_MAX_BYTES 256

/* ------------------------------------------------------------ packing */

typedef struct hostile {
    void *ctx, *sock;
    pack_buf pb;
    msgpack_packer pk;
    calib_rng rng;
    uint64_t max_bytes;
    int linger_ms;
} hostile;

static msgpack_packer *begin(hostile *h)
{
    h->pb.len = 0;
    msgpack_packer_init(&h->pk, &h->pb, pack_buf_write);
    return &h->pk;
}

static void kv_uint(msgpack_packer *pk, const char *k, uint64_t v)
{
    pack_str(pk, k);
    msgpack_pack_uint64(pk, v);
}

static void kv_str(msgpack_packer *pk, const char *k, const char *v)
{
    pack_str(pk, k);
    pack_str(pk, v);
}

static void doubles(msgpack_packer *pk, const double *v, size_t n)
{
    msgpack_pack_array(pk, n);
    for (size_t i = 0; i < n; i++)
        msgpack_pack_double(pk, v[i]);
}

static const double good_logits[3] = {0.1, 0.2, 0.7};

/* The rest of a valid row prediction: id, k, logits, y (4 entries). */
static void row_body(msgpack_packer *pk)
{
    kv_str(pk, "id", "h-row");
    kv_uint(pk, "k", 3);
    pack_str(pk, "logits");
    doubles(pk, good_logits, 3);
    kv_uint(pk, "y", 0);
}

static void good_row(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 6);
    kv_uint(pk, "v", 1);
    kv_str(pk, "type", "pred");
    row_body(pk);
}

/* ------------------------------------------------------------ sending */

static int send_frames(hostile *h, const void *const *part, const size_t *len,
                       size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (zmq_send(h->sock, part[i], len[i], i + 1 < n ? ZMQ_SNDMORE : 0) < 0) {
            fprintf(stderr, PROG ": send: %s\n", zmq_strerror(zmq_errno()));
            return -1;
        }
    return 0;
}

/* Topic and the payload packed in h->pb. */
static int send_msg(hostile *h, const char *topic, size_t topic_len)
{
    if (h->pb.oom) {
        fprintf(stderr, PROG ": out of memory\n");
        return -1;
    }
    const void *part[2] = {topic, h->pb.data};
    size_t len[2] = {topic_len, h->pb.len};
    return send_frames(h, part, len, 2);
}

static int send_on(hostile *h, const char *topic)
{
    return send_msg(h, topic, strlen(topic));
}

/* ------------------------------------------------------------ framing, topic */

static int frames_1(hostile *h)
{
    const void *part[1] = {TOPIC};
    size_t len[1] = {strlen(TOPIC)};
    return send_frames(h, part, len, 1);
}

static int frames_3(hostile *h)
{
    good_row(begin(h));
    if (h->pb.oom)
        return -1;
    const void *part[3] = {TOPIC, h->pb.data, "extra"};
    size_t len[3] = {strlen(TOPIC), h->pb.len, 5};
    return send_frames(h, part, len, 3);
}

static int topic_empty(hostile *h)
{
    good_row(begin(h));
    return send_msg(h, "", 0);
}

static int topic_129(hostile *h)
{
    char topic[129];
    memset(topic, 'a', sizeof topic);
    good_row(begin(h));
    return send_msg(h, topic, sizeof topic);
}

static int topic_chars(hostile *h)
{
    good_row(begin(h));
    return send_on(h, "hostile/model name\xff");
}

/* ------------------------------------------------------------ msgpack */

static int msgpack_garbage(hostile *h)
{
    unsigned char b[32];
    b[0] = 0xc1;
    for (size_t i = 1; i < sizeof b; i++)
        b[i] = (unsigned char)calib_rng_next(&h->rng);
    begin(h);
    pack_buf_write(&h->pb, (const char *)b, sizeof b);
    return send_on(h, TOPIC);
}

static int msgpack_truncated(hostile *h)
{
    good_row(begin(h));
    h->pb.len -= 3;
    return send_on(h, TOPIC);
}

static int trailing_bytes(hostile *h)
{
    good_row(begin(h));
    msgpack_pack_nil(&h->pk);
    return send_on(h, TOPIC);
}

static int not_a_map(hostile *h)
{
    msgpack_packer *pk = begin(h);
    msgpack_pack_array(pk, 2);
    msgpack_pack_uint64(pk, 1);
    pack_str(pk, "pred");
    return send_on(h, TOPIC);
}

/* An array32 header claiming 2^32-1 items with nothing after it: a decoder
 * that trusts the count allocates 16 GiB of objects up front. */
static int huge_count(hostile *h)
{
    static const unsigned char hdr[5] = {0xdd, 0xff, 0xff, 0xff, 0xff};
    msgpack_packer *pk = begin(h);
    msgpack_pack_map(pk, 4);
    kv_uint(pk, "v", 1);
    kv_str(pk, "type", "pred");
    kv_str(pk, "id", "h-huge");
    pack_str(pk, "logits");
    pack_buf_write(&h->pb, (const char *)hdr, sizeof hdr);
    return send_on(h, TOPIC);
}

static int depth_40(hostile *h)
{
    msgpack_packer *pk = begin(h);
    msgpack_pack_map(pk, 7);
    kv_uint(pk, "v", 1);
    kv_str(pk, "type", "pred");
    row_body(pk);
    pack_str(pk, "deep");
    for (int i = 0; i < 39; i++)
        msgpack_pack_array(pk, 1);
    msgpack_pack_array(pk, 0);
    return send_on(h, TOPIC);
}

/* ------------------------------------------------------------ version, type */

enum v_kind { V_MISSING, V_2, V_STRING, V_0, V_NEGATIVE };

static int send_v(hostile *h, int kind)
{
    msgpack_packer *pk = begin(h);
    msgpack_pack_map(pk, kind == V_MISSING ? 5 : 6);
    switch (kind) {
    case V_2: kv_uint(pk, "v", 2); break;
    case V_STRING: kv_str(pk, "v", "1"); break;
    case V_0: kv_uint(pk, "v", 0); break;
    case V_NEGATIVE:
        pack_str(pk, "v");
        msgpack_pack_int64(pk, -1);
        break;
    }
    kv_str(pk, "type", "pred");
    row_body(pk);
    return send_on(h, TOPIC);
}

static int v_missing(hostile *h) { return send_v(h, V_MISSING); }
static int v_2(hostile *h) { return send_v(h, V_2); }
static int v_string(hostile *h) { return send_v(h, V_STRING); }
static int v_0(hostile *h) { return send_v(h, V_0); }
static int v_negative(hostile *h) { return send_v(h, V_NEGATIVE); }

enum type_kind { TYPE_UNKNOWN, TYPE_MISSING, TYPE_NOT_STRING };

static int send_type(hostile *h, int kind)
{
    msgpack_packer *pk = begin(h);
    msgpack_pack_map(pk, kind == TYPE_MISSING ? 5 : 6);
    kv_uint(pk, "v", 1);
    if (kind == TYPE_UNKNOWN)
        kv_str(pk, "type", "prediction");
    else if (kind == TYPE_NOT_STRING)
        kv_uint(pk, "type", 1);
    row_body(pk);
    return send_on(h, TOPIC);
}

static int type_unknown(hostile *h) { return send_type(h, TYPE_UNKNOWN); }
static int type_missing(hostile *h) { return send_type(h, TYPE_MISSING); }
static int type_not_string(hostile *h) { return send_type(h, TYPE_NOT_STRING); }

/* ------------------------------------------------------------ missing keys */

static void head(msgpack_packer *pk, size_t entries, const char *type)
{
    msgpack_pack_map(pk, entries);
    kv_uint(pk, "v", 1);
    kv_str(pk, "type", type);
}

static int pred_no_output(hostile *h)
{
    msgpack_packer *pk = begin(h);
    head(pk, 4, "pred");
    kv_str(pk, "id", "h-noout");
    kv_uint(pk, "y", 0);
    return send_on(h, TOPIC);
}

static int label_no_y(hostile *h)
{
    msgpack_packer *pk = begin(h);
    head(pk, 3, "label");
    kv_str(pk, "id", "h-noy");
    return send_on(h, TOPIC);
}

static int pred_no_id_no_y(hostile *h)
{
    msgpack_packer *pk = begin(h);
    head(pk, 4, "pred");
    kv_uint(pk, "k", 3);
    pack_str(pk, "logits");
    doubles(pk, good_logits, 3);
    return send_on(h, TOPIC);
}

static int label_no_id_no_y(hostile *h)
{
    msgpack_packer *pk = begin(h);
    head(pk, 3, "label");
    pack_str(pk, "ts");
    msgpack_pack_double(pk, 1.7e9);
    return send_on(h, TOPIC);
}

/* ------------------------------------------------------------ types, ranges */

/* A batch prediction of n records, k = 3, with the given "n" value written
 * by put_n, ids, and logits as a float32 bin of bin_len bytes. */
static int send_batch(hostile *h, size_t ids, size_t bin_len,
                      void (*put_n)(msgpack_packer *))
{
    msgpack_packer *pk = begin(h);
    head(pk, 6, "pred");
    pack_str(pk, "n");
    put_n(pk);
    kv_uint(pk, "k", 3);
    pack_str(pk, "id");
    msgpack_pack_array(pk, ids);
    for (size_t i = 0; i < ids; i++)
        msgpack_pack_uint64(pk, 1000 + i);
    pack_str(pk, "logits");
    msgpack_pack_bin(pk, bin_len);
    for (size_t i = 0; i < bin_len; i++)
        pack_buf_write(&h->pb, "\0", 1); /* 0.0f: valid logits */
    return send_on(h, TOPIC);
}

static void n_as_string(msgpack_packer *pk) { pack_str(pk, "3"); }
static void n_two(msgpack_packer *pk) { msgpack_pack_uint64(pk, 2); }
static void n_as_zero(msgpack_packer *pk) { msgpack_pack_uint64(pk, 0); }
static void n_too_big(msgpack_packer *pk) { msgpack_pack_uint64(pk, 65537); }

static int n_string(hostile *h) { return send_batch(h, 3, 36, n_as_string); }
static int bin_length(hostile *h) { return send_batch(h, 2, 20, n_two); }
static int n_zero(hostile *h) { return send_batch(h, 0, 0, n_as_zero); }
static int n_65537(hostile *h) { return send_batch(h, 3, 36, n_too_big); }

static int logits_string(hostile *h)
{
    msgpack_packer *pk = begin(h);
    head(pk, 6, "pred");
    kv_str(pk, "id", "h-str");
    kv_uint(pk, "k", 3);
    kv_str(pk, "logits", "0.1,0.2,0.7");
    kv_uint(pk, "y", 0);
    return send_on(h, TOPIC);
}

static int k_mismatch_row(hostile *h)
{
    msgpack_packer *pk = begin(h);
    head(pk, 6, "pred");
    kv_uint(pk, "n", 3);
    kv_uint(pk, "k", 3);
    pack_str(pk, "id");
    msgpack_pack_array(pk, 3);
    for (uint64_t i = 0; i < 3; i++)
        msgpack_pack_uint64(pk, 2000 + i);
    pack_str(pk, "logits");
    msgpack_pack_array(pk, 3);
    doubles(pk, good_logits, 3);
    doubles(pk, good_logits, 2);
    doubles(pk, good_logits, 3);
    return send_on(h, TOPIC);
}

/* The typical first producer: float32 probabilities of an even K as bytes,
 * in the row form, without "k", for a model whose K nobody configured. */
static int bin_ambiguous(hostile *h)
{
    static const float probs[4] = {0.1f, 0.2f, 0.3f, 0.4f};
    unsigned char b[sizeof probs];
    for (size_t i = 0; i < 4; i++) {
        uint32_t u;
        memcpy(&u, &probs[i], sizeof u);
        for (size_t j = 0; j < 4; j++)
            b[4 * i + j] = (unsigned char)(u >> (8 * j));
    }
    msgpack_packer *pk = begin(h);
    head(pk, 4, "pred");
    kv_str(pk, "id", "h-ambiguous");
    pack_str(pk, "probs");
    msgpack_pack_bin(pk, sizeof b);
    msgpack_pack_bin_body(pk, b, sizeof b);
    return send_on(h, TOPIC_AMBIGUOUS);
}

/* ------------------------------------------------------------ record classes */

/* What is wrong with record 1 of a record-class batch. */
enum rec_fault {
    REC_NAN, REC_INF, REC_PROB_RANGE, REC_PROB_SUM, REC_VAR, REC_LABEL,
    REC_ID_EMPTY, REC_ID_65, REC_ID_FLOAT,
};

static void rec_ids(msgpack_packer *pk, int fault, uint64_t base)
{
    char id[66];
    pack_str(pk, "id");
    msgpack_pack_array(pk, 3);
    for (uint64_t i = 0; i < 3; i++) {
        if (i != 1 || fault < REC_ID_EMPTY) {
            snprintf(id, sizeof id, "h-%" PRIu64, base + i);
            pack_str(pk, id);
        } else if (fault == REC_ID_EMPTY) {
            pack_str(pk, "");
        } else if (fault == REC_ID_65) {
            memset(id, 'i', 65);
            id[65] = 0;
            pack_str(pk, id);
        } else {
            msgpack_pack_double(pk, 1.5);
        }
    }
}

static void rec_outputs(msgpack_packer *pk, int fault)
{
    static const double range[3] = {1.5, -0.5, 0}, sum[3] = {0.5, 0.3, 0.1};
    double bad[3] = {0.1, fault == REC_NAN ? NAN : INFINITY, 0.3};
    int probs = fault == REC_PROB_RANGE || fault == REC_PROB_SUM;

    kv_uint(pk, "k", 3);
    pack_str(pk, probs ? "probs" : "logits");
    msgpack_pack_array(pk, 3);
    for (int i = 0; i < 3; i++) {
        if (i == 1 && fault == REC_PROB_RANGE)
            doubles(pk, range, 3);
        else if (i == 1 && fault == REC_PROB_SUM)
            doubles(pk, sum, 3);
        else if (i == 1 && (fault == REC_NAN || fault == REC_INF))
            doubles(pk, bad, 3);
        else
            doubles(pk, probs ? (const double[3]){0.2, 0.3, 0.5} : good_logits, 3);
    }
}

static int send_rec(hostile *h, int fault)
{
    msgpack_packer *pk = begin(h);
    int gauss = fault == REC_VAR;
    head(pk, 8, "pred");
    kv_uint(pk, "n", 3);
    pack_str(pk, "ts");
    msgpack_pack_double(pk, 1.7e9);
    rec_ids(pk, fault, 100 * (uint64_t)fault);
    if (gauss) {
        static const double mean[3] = {0, 1, 2}, var[3] = {1, 0, 1};
        pack_str(pk, "mean");
        doubles(pk, mean, 3);
        pack_str(pk, "var");
        doubles(pk, var, 3);
        pack_str(pk, "y");
        doubles(pk, mean, 3);
    } else {
        rec_outputs(pk, fault);
        pack_str(pk, "y");
        msgpack_pack_array(pk, 3);
        for (uint64_t i = 0; i < 3; i++)
            msgpack_pack_uint64(pk, i == 1 && fault == REC_LABEL ? 3 : i);
    }
    return send_on(h, gauss ? TOPIC_GAUSS : TOPIC);
}

static int rec_nan(hostile *h) { return send_rec(h, REC_NAN); }
static int rec_inf(hostile *h) { return send_rec(h, REC_INF); }
static int rec_prob_range(hostile *h) { return send_rec(h, REC_PROB_RANGE); }
static int rec_prob_sum(hostile *h) { return send_rec(h, REC_PROB_SUM); }
static int rec_var(hostile *h) { return send_rec(h, REC_VAR); }
static int rec_label_range(hostile *h) { return send_rec(h, REC_LABEL); }
static int rec_id_empty(hostile *h) { return send_rec(h, REC_ID_EMPTY); }
static int rec_id_65(hostile *h) { return send_rec(h, REC_ID_65); }
static int rec_id_float(hostile *h) { return send_rec(h, REC_ID_FLOAT); }

/* ------------------------------------------------------------ extras */

static int random_payload(hostile *h)
{
    unsigned char b[256];
    size_t n = 1 + (size_t)(calib_rng_next(&h->rng) % sizeof b);
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)calib_rng_next(&h->rng);
    begin(h);
    pack_buf_write(&h->pb, (const char *)b, n);
    return send_on(h, TOPIC);
}

/* A valid row prediction whose unknown key "pad" (a bin32, whatever its
 * size) brings the payload to exactly max_bytes. */
static int oversize(hostile *h)
{
    static const char zeros[4096];
    msgpack_packer *pk = begin(h);
    msgpack_pack_map(pk, 7);
    kv_uint(pk, "v", 1);
    kv_str(pk, "type", "pred");
    row_body(pk);
    pack_str(pk, "pad");
    /* max_bytes >= MIN_MAX_BYTES leaves room for the ~60 bytes above */
    size_t pad = (size_t)h->max_bytes - h->pb.len - 5;
    unsigned char hdr[5] = {0xc6, (unsigned char)(pad >> 24), (unsigned char)(pad >> 16),
                            (unsigned char)(pad >> 8), (unsigned char)pad};
    pack_buf_write(&h->pb, (const char *)hdr, sizeof hdr);
    for (size_t left = pad; left && !h->pb.oom;) {
        size_t chunk = left < sizeof zeros ? left : sizeof zeros;
        pack_buf_write(&h->pb, zeros, chunk);
        left -= chunk;
    }
    return send_on(h, TOPIC); /* reports an oom */
}

/* ------------------------------------------------------------ the classes */

typedef struct hostile_class {
    const char *label;
    const char *reason; /* what calibd should count; see the top comment */
    int (*send)(hostile *);
} hostile_class;

static const hostile_class classes[] = {
    {"frames_1", "framing", frames_1},
    {"frames_3", "framing", frames_3},
    {"topic_empty", "bad_topic", topic_empty},
    {"topic_129", "bad_topic", topic_129},
    {"topic_chars", "bad_topic", topic_chars},
    {"msgpack_garbage", "bad_msgpack", msgpack_garbage},
    {"msgpack_truncated", "bad_msgpack", msgpack_truncated},
    {"trailing_bytes", "trailing_bytes", trailing_bytes},
    {"not_a_map", "not_a_map", not_a_map},
    {"huge_count", "bad_msgpack", huge_count},
    {"depth_40", "too_deep", depth_40},
    {"v_missing", "bad_version", v_missing},
    {"v_2", "bad_version", v_2},
    {"v_string", "bad_version", v_string},
    {"v_0", "bad_version", v_0},
    {"v_negative", "bad_version", v_negative},
    {"type_unknown", "bad_type", type_unknown},
    {"type_missing", "bad_type", type_missing},
    {"type_not_string", "bad_type", type_not_string},
    {"pred_no_output", "ambiguous_output", pred_no_output},
    {"label_no_y", "missing_key", label_no_y},
    {"pred_no_id_no_y", "missing_id", pred_no_id_no_y},
    {"label_no_id_no_y", "missing_id", label_no_id_no_y},
    {"n_string", "key_type", n_string},
    {"logits_string", "key_type", logits_string},
    {"bin_length", "bin_length", bin_length},
    {"n_zero", "n_range", n_zero},
    {"n_65537", "n_range", n_65537},
    {"k_mismatch_row", "array_length", k_mismatch_row},
    {"bin_ambiguous", "bin_ambiguous", bin_ambiguous},
    {"rec_nan", "nonfinite", rec_nan},
    {"rec_inf", "nonfinite", rec_inf},
    {"rec_prob_range", "prob_range", rec_prob_range},
    {"rec_prob_sum", "prob_sum", rec_prob_sum},
    {"rec_var_nonpositive", "var_nonpositive", rec_var},
    {"rec_label_range", "label_range", rec_label_range},
    {"rec_id_empty", "bad_id", rec_id_empty},
    {"rec_id_65", "bad_id", rec_id_65},
    {"rec_id_float", "bad_id", rec_id_float},
};

#define NCLASSES (sizeof classes / sizeof classes[0])

/* ------------------------------------------------------------ main */

typedef struct hostile_opts {
    const char *endpoint;
    int push, map;
    uint64_t seed, random;
    int warmup_ms, linger_ms;
    uint64_t max_bytes;
} hostile_opts;

static void usage(FILE *f)
{
    fputs("usage: hostile [OPTIONS]\n"
          "Sends one message of every rejection class of protocol v1 and prints\n"
          "'<class-label> <count>' for each.\n"
          "  -e, --endpoint EP   >EP connects, @EP binds, no prefix connects\n"
          "                      (default >tcp://127.0.0.1:7450)\n"
          "      --push          a PUSH socket instead of PUB\n"
          "  -s, --seed S        seed of the random bytes (default 1)\n"
          "      --random N      also N payloads of random bytes (default 0)\n"
          "      --warmup-ms MS  PUB: wait for a subscription, MS at most (default 10000)\n"
          "      --linger-ms MS  ZMQ_LINGER at exit (default 5000)\n"
          "      --max-bytes B   size of the oversized payload (default 1048577)\n"
          "      --map           print '<class-label> <reason>' and send nothing\n"
          "  -h, --help          this help\n", f);
}

static int parse_u64(const char *opt, const char *s, uint64_t lo, uint64_t hi,
                     uint64_t *out)
{
    return producer_parse_u64(PROG, opt, s, lo, hi, out);
}

/* 0 to run, 1 after --help, -1 on a bad option (reported). */
static int parse_options(hostile_opts *o, int argc, char **argv)
{
    enum { OPT_PUSH = 256, OPT_RANDOM, OPT_WARMUP, OPT_LINGER, OPT_MAX, OPT_MAP };
    static const struct option opts[] = {
        {"endpoint", required_argument, NULL, 'e'},
        {"push", no_argument, NULL, OPT_PUSH},
        {"seed", required_argument, NULL, 's'},
        {"random", required_argument, NULL, OPT_RANDOM},
        {"warmup-ms", required_argument, NULL, OPT_WARMUP},
        {"linger-ms", required_argument, NULL, OPT_LINGER},
        {"max-bytes", required_argument, NULL, OPT_MAX},
        {"map", no_argument, NULL, OPT_MAP},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    uint64_t v;
    int c;

    *o = (hostile_opts){.endpoint = ">tcp://127.0.0.1:7450", .seed = 1,
                        .warmup_ms = 10000, .linger_ms = 5000,
                        .max_bytes = (1u << 20) + 1};
    while ((c = getopt_long(argc, argv, "e:s:h", opts, NULL)) != -1) {
        switch (c) {
        case 'e': o->endpoint = optarg; break;
        case OPT_PUSH: o->push = 1; break;
        case OPT_MAP: o->map = 1; break;
        case 's':
            if (parse_u64("seed", optarg, 0, UINT64_MAX, &o->seed))
                return -1;
            break;
        case OPT_RANDOM:
            if (parse_u64("random", optarg, 0, 100000000, &o->random))
                return -1;
            break;
        case OPT_WARMUP:
        case OPT_LINGER:
            if (parse_u64(c == OPT_WARMUP ? "warmup-ms" : "linger-ms", optarg, 0,
                          3600000, &v))
                return -1;
            *(c == OPT_WARMUP ? &o->warmup_ms : &o->linger_ms) = (int)v;
            break;
        case OPT_MAX:
            /* bin32 caps the pad; the floor leaves room for the valid part */
            if (parse_u64("max-bytes", optarg, MIN_MAX_BYTES, (uint64_t)1 << 31,
                          &o->max_bytes))
                return -1;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    return 0;
}

static int open_socket(hostile *h, const hostile_opts *o)
{
    return producer_open(PROG, o->endpoint, o->push, 0, o->warmup_ms, NULL, NULL, NULL,
                         &h->ctx, &h->sock);
}

static void close_socket(hostile *h)
{
    if (h->sock) {
        zmq_setsockopt(h->sock, ZMQ_LINGER, &h->linger_ms, sizeof h->linger_ms);
        zmq_close(h->sock);
    }
    if (h->ctx)
        zmq_ctx_term(h->ctx);
}

static int send_all(hostile *h, const hostile_opts *o)
{
    for (size_t i = 0; i < NCLASSES; i++) {
        if (classes[i].send(h))
            return -1;
        printf("%s 1\n", classes[i].label);
    }
    for (uint64_t i = 0; i < o->random; i++)
        if (random_payload(h))
            return -1;
    if (o->random)
        printf("random %" PRIu64 "\n", o->random);
    if (oversize(h))
        return -1;
    printf("oversize 1\n");
    return 0;
}

int main(int argc, char **argv)
{
    hostile_opts o;
    int r = parse_options(&o, argc, argv);
    if (r)
        return r > 0 ? 0 : 2;
    if (o.map) {
        for (size_t i = 0; i < NCLASSES; i++)
            printf("%s %s\n", classes[i].label, classes[i].reason);
        printf("random varies\noversize none\n");
        return 0;
    }

    hostile h;
    memset(&h, 0, sizeof h);
    h.max_bytes = o.max_bytes;
    h.linger_ms = o.linger_ms;
    calib_rng_seed(&h.rng, o.seed);
    int rc = open_socket(&h, &o) == 0 && send_all(&h, &o) == 0 ? 0 : 1;
    if (fflush(stdout) != 0)
        rc = 1;
    close_socket(&h);
    free(h.pb.data);
    return rc;
}
