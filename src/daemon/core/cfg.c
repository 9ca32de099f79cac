/* cfg.c — INI configuration through libinih, checked key by key. */
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "calib/calib.h"
#include "calib/plugin.h"
#include "calib/protocol.h"
#include "segment.h"
#include "calib/pubmsg.h"
#include "cfg.h"
#include "log.h"

/* ------------------------------------------------------------ values */

static int parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    if (*s == '-' || *s == 0)
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_seconds(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v <= 0)
        return -1;
    *out = v;
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    static const char *yes[] = {"yes", "true", "on", "1"}, *no[] = {"no", "false", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0)
            return *out = 1, 0;
        if (strcasecmp(s, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

static int parse_form(const char *s, int *out)
{
    if (strcmp(s, "auto") == 0)
        return *out = -1, 0;
    return (*out = calib_form_parse(s)) >= 0 ? 0 : -1;
}

/* ------------------------------------------------------------ model keys */

enum key_type {
    K_UINT,     /* in [min, max] */
    K_SECONDS,  /* > 0 */
    K_SECONDS0, /* >= 0; 0 turns the feature off */
    K_NONNEG,   /* a finite number >= 0 */
    K_PROB,     /* in (0, 1) */
    K_FRAC,     /* in [0, 1) */
    K_FORM,
    K_BOOL,
    K_METHOD,
    K_TENSOR,   /* a tensor's name: 1..63 printable characters, or "auto" */
    K_KSFORM,   /* auto, logits, probs or p */
    K_PARAMS,   /* all, or parameter names separated by commas or spaces */
};

static const struct model_key {
    const char *name;
    enum key_type type;
    size_t offset;
    uint64_t min, max;
    const char *expect;
} model_keys[] = {
#define F(field) offsetof(model_cfg, field)
    {"form", K_FORM, F(form), 0, 0, "logits, probs, binary, gaussian or auto"},
    {"k", K_UINT, F(k), 0, 65536, "0 (auto) or 2..65536"},
    {"label_ttl", K_SECONDS, F(label_ttl), 0, 0, "seconds > 0"},
    {"max_pending", K_UINT, F(max_pending), 1, 100000000, "1..1e8"},
    {"joined_memory", K_UINT, F(joined_memory), 1, 100000000, "1..1e8"},
    {"window", K_SECONDS, F(window), 0, 0, "seconds > 0"},
    {"window_panes", K_UINT, F(window_panes), 1, 3600, "1..3600"},
    {"bins", K_UINT, F(bins), 1, 1000, "1..1000"},
    {"ring", K_UINT, F(ring), 1, 10000000, "1..1e7"},
    {"reservoir", K_UINT, F(reservoir), 1, 10000000, "1..1e7"},
    {"seed", K_UINT, F(seed), 0, UINT64_MAX, "an unsigned integer"},
    {"method", K_METHOD, F(method), 0, 0,
     "auto, temperature, platt, variance, location_scale or a plugin's name "
     "([A-Za-z0-9._-], 1..63)"},
    {"fit_params", K_PARAMS, F(fit_params), 0, 0,
     "all, or the method's parameter names to fit, separated by commas (location_scale: "
     "a subset of a, b, c)"},
    {"drift", K_BOOL, F(drift), 0, 0, "yes or no"},
    {"drift_alpha", K_PROB, F(drift_alpha), 0, 0, "a level in (0, 1)"},
    {"drift_min_effect", K_NONNEG, F(drift_min_effect), 0, 1, "a number in [0, 1]"},
    {"drift_quantile", K_PROB, F(drift_quantile), 0, 0, "a quantile in (0, 1)"},
    {"drift_reference", K_UINT, F(drift_reference), 100, 1000000, "100..1e6"},
    {"refit_interval", K_SECONDS0, F(refit_interval), 0, 0, "seconds >= 0 (0: never)"},
    {"refit_min_samples", K_UINT, F(refit_min_samples), 10, 10000000, "10..1e7"},
    {"refit_samples", K_UINT, F(refit_samples), 10, 10000000, "10..1e7"},
    {"auto_publish", K_BOOL, F(auto_publish), 0, 0, "yes or no"},
    {"rollback", K_BOOL, F(rollback), 0, 0, "yes or no"},
    {"cs_alpha", K_NONNEG, F(cs_alpha), 0, 1, "0 (off) or a level in (0, 1)"},
    {"gate_alpha", K_PROB, F(gate_alpha), 0, 0, "a level in (0, 1)"},
    {"min_improvement", K_NONNEG, F(min_improvement), 0, 2, "a number in [0, 2)"},
    {"gate_dss_clip", K_SECONDS, F(gate_dss_clip), 0, 0, "a number > 0"},
    {"gate_max_samples", K_UINT, F(gate_max_samples), 1, 100000000, "1..1e8"},
    {"miscal_trigger", K_BOOL, F(miscal_trigger), 0, 0, "yes or no"},
    {"miscal_alpha", K_PROB, F(miscal_alpha), 0, 0, "a level in (0, 1)"},
    {"miscal_min_effect", K_NONNEG, F(miscal_min_effect), 0, 2, "a number in [0, 2)"},
    {"miscal_period", K_UINT, F(miscal_period), 100, 100000000, "100..1e8"},
    {"alert_brier", K_NONNEG, F(alert_brier), 0, 0, "a level >= 0 (0: off)"},
    {"alert_rbs", K_NONNEG, F(alert_rbs), 0, 0, "a level >= 0 (0: off)"},
    {"alert_ece", K_NONNEG, F(alert_ece), 0, 0, "a level >= 0 (0: off)"},
    {"alert_dss", K_NONNEG, F(alert_dss), 0, 0, "a level >= 0 (0: off)"},
    {"alert_min_samples", K_UINT, F(alert_min_samples), 1, 100000000, "1..1e8"},
    {"alert_hysteresis", K_PROB, F(alert_hysteresis), 0, 0, "a fraction in (0, 1)"},
    {"alert_cooldown", K_SECONDS0, F(alert_cooldown), 0, 0, "seconds >= 0"},
    {"label_starvation", K_SECONDS0, F(label_starvation), 0, 0, "seconds >= 0 (0: off)"},
    {"join_memory", K_UINT, F(join_memory), 1 << 16, (uint64_t)1 << 40, "65536..2^40 bytes"},
    {"sample_memory", K_UINT, F(sample_memory), 1 << 16, (uint64_t)1 << 40,
     "65536..2^40 bytes"},
    {"kserve_output", K_TENSOR, F(kserve_output), 0, 0,
     "auto or a tensor's name (1..63 printable characters)"},
    {"kserve_form", K_KSFORM, F(kserve_form), 0, 0, "auto, logits, probs or p"},
    {"segment_keys", K_UINT, F(segment_keys), 0, SEG_MAX_KEYS, "0 (off) .. 8"},
    {"segment_values", K_UINT, F(segment_values), 1, SEG_MAX_VALUES, "1..4096"},
    {"segment_alpha", K_PROB, F(segment_alpha), 0, 0, "a level in (0, 1)"},
    {"segment_min_effect", K_FRAC, F(segment_min_effect), 0, 0, "a number in [0, 1)"},
    {"segment_metrics", K_UINT, F(segment_metrics), 0, SEG_MAX_VALUES, "0..4096"},
    {"segment_status", K_UINT, F(segment_status), 0, SEG_MAX_VALUES, "0..4096"},
    {"segment_refit", K_BOOL, F(segment_refit), 0, 0, "yes or no"},
    {"segment_refit_samples", K_UINT, F(segment_refit_samples), 50, 1000000, "50..1e6"},
    {"label_free_recent", K_UINT, F(label_free_recent), 0, 10000000, "0 (off) .. 1e7"},
    {"label_free_memory", K_UINT, F(label_free_memory), 1 << 16, (uint64_t)1 << 40,
     "65536..2^40 bytes"},
    {"label_free_interval", K_SECONDS, F(label_free_interval), 0, 0, "seconds > 0"},
    {"label_shift_alpha", K_FRAC, F(label_shift_alpha), 0, 0, "0 (off) or a level in (0, 1)"},
    {"label_shift_reference", K_UINT, F(label_shift_reference), 10, 10000000, "10..1e7"},
    {"label_shift_adapt", K_BOOL, F(label_shift_adapt), 0, 0, "yes or no"},
#undef F
};
enum { N_MODEL_KEYS = sizeof model_keys / sizeof model_keys[0] };
_Static_assert(N_MODEL_KEYS <= 64, "model_cfg.set has 64 bits");

static int parse_number(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

static int parse_method(const char *s, char *out)
{
    size_t len = strlen(s);
    if (!calib_plugin_name_ok(s, len))
        return -1;
    memcpy(out, s, len + 1);
    return 0;
}

/* "all" is ""; else 1..8 names of [A-Za-z0-9_] (1..15 each), separated
 * by commas or spaces, stored separated by one space. */
int cfg_parse_params(const char *s, char *out)
{
    if (strcmp(s, "all") == 0) {
        out[0] = 0;
        return 0;
    }
    char buf[CFG_METHOD_MAX + 1];
    size_t n = 0, names = 0;
    for (const char *p = s; *p;) {
        while (*p == ',' || *p == ' ')
            p++;
        size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
        if (!*p)
            break;
        if (len == 0 || len > 15 || (p[len] && p[len] != ',' && p[len] != ' ') ||
            ++names > 8 || n + len + 1 >= sizeof buf)
            return -1;
        if (n)
            buf[n++] = ' ';
        memcpy(buf + n, p, len);
        n += len;
        p += len;
    }
    if (!names)
        return -1;
    buf[n] = 0;
    memcpy(out, buf, n + 1);
    return 0;
}

/* "auto" is "" (the first usable output). */
static int parse_tensor(const char *s, char *out)
{
    size_t len = strlen(s);
    if (len == 0 || len > CFG_METHOD_MAX)
        return -1;
    for (size_t i = 0; i < len; i++)
        if (s[i] <= ' ' || s[i] > '~')
            return -1;
    memcpy(out, strcmp(s, "auto") == 0 ? "" : s, strcmp(s, "auto") == 0 ? 1 : len + 1);
    return 0;
}

static int parse_ksform(const char *s, int *out)
{
    if (strcmp(s, "p") == 0)
        return *out = CALIB_FORM_BINARY, 0;
    if (strcmp(s, "auto") == 0 || strcmp(s, "logits") == 0 || strcmp(s, "probs") == 0)
        return parse_form(s, out);
    return -1;
}

static int parse_key(const struct model_key *k, const char *value, void *field)
{
    double v;
    switch (k->type) {
    case K_UINT: return parse_uint(value, k->min, k->max, field);
    case K_SECONDS: return parse_seconds(value, field);
    case K_FORM: return parse_form(value, field);
    case K_BOOL: return parse_bool(value, field);
    case K_METHOD: return parse_method(value, field);
    case K_TENSOR: return parse_tensor(value, field);
    case K_KSFORM: return parse_ksform(value, field);
    case K_PARAMS: return cfg_parse_params(value, field);
    case K_SECONDS0:
    case K_NONNEG:
    case K_PROB:
    case K_FRAC:
        if (parse_number(value, &v) != 0 || v < 0 || (k->type == K_PROB && (v <= 0 || v >= 1)) ||
            (k->type == K_FRAC && v >= 1))
            return -1;
        if (k->max && v > (double)k->max) /* an upper bound for this key */
            return -1;
        *(double *)field = v;
        return 0;
    }
    return -1;
}

static size_t key_size(enum key_type t)
{
    switch (t) {
    case K_FORM:
    case K_KSFORM:
    case K_BOOL: return sizeof(int);
    case K_UINT: return sizeof(uint64_t);
    case K_METHOD:
    case K_PARAMS:
    case K_TENSOR: return CFG_METHOD_MAX + 1;
    default: return sizeof(double);
    }
}

static int set_model_key(model_cfg *m, const char *key, const char *value,
                         char *err, size_t errlen)
{
    for (size_t i = 0; i < N_MODEL_KEYS; i++) {
        const struct model_key *k = &model_keys[i];
        if (strcmp(key, k->name) != 0)
            continue;
        int rc = parse_key(k, value, (char *)m + k->offset);
        if (rc == 0 && k->type == K_UINT && strcmp(key, "k") == 0 && m->k == 1)
            rc = -1;
        if (rc != 0) {
            snprintf(err, errlen, "%s = '%s': expected %s", key, value, k->expect);
            return -1;
        }
        m->set |= (uint64_t)1 << i;
        return 0;
    }
    return 1; /* unknown */
}

int config_set_model(model_cfg *m, const char *key, const char *value, char *err,
                     size_t errlen)
{
    return set_model_key(m, key, value, err, errlen);
}

const char *config_model_key(size_t i, const model_cfg *m, char *value, size_t len)
{
    if (i >= N_MODEL_KEYS)
        return NULL;
    const struct model_key *k = &model_keys[i];
    const void *f = (const char *)m + k->offset;
    switch (k->type) {
    case K_UINT: snprintf(value, len, "%llu", (unsigned long long)*(const uint64_t *)f); break;
    case K_FORM: {
        int form = *(const int *)f;
        snprintf(value, len, "%s", form < 0 ? "auto" : calib_form_name(form));
        break;
    }
    case K_BOOL: snprintf(value, len, "%s", *(const int *)f ? "yes" : "no"); break;
    case K_METHOD: snprintf(value, len, "%s", (const char *)f); break;
    case K_PARAMS:
        snprintf(value, len, "%s", *(const char *)f ? (const char *)f : "all");
        break;
    case K_TENSOR:
        snprintf(value, len, "%s", *(const char *)f ? (const char *)f : "auto");
        break;
    case K_KSFORM: {
        int form = *(const int *)f;
        snprintf(value, len, "%s", form < 0 ? "auto" : form == CALIB_FORM_BINARY ? "p"
                                                      : calib_form_name(form));
        break;
    }
    default: snprintf(value, len, "%.17g", *(const double *)f); break;
    }
    return k->name;
}

/* Copies the fields src sets onto dst. */
static void overlay(model_cfg *dst, const model_cfg *src)
{
    for (size_t i = 0; i < N_MODEL_KEYS; i++) {
        if (!(src->set & ((uint64_t)1 << i)))
            continue;
        size_t off = model_keys[i].offset;
        memcpy((char *)dst + off, (const char *)src + off, key_size(model_keys[i].type));
    }
}

/* ------------------------------------------------------------ daemon keys */

static int set_string(char **field, const char *value)
{
    char *s = strdup(value);
    if (!s)
        return -1;
    free(*field);
    *field = s;
    return 0;
}

/* A comma-separated list of `what`s (endpoints, topic prefixes) added to
 * l; blanks around each are ignored, an empty one is an error. */
static int add_list(endpoint_list *l, const char *value, const char *what, char *err,
                    size_t errlen)
{
    const char *p = value;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        size_t len = strcspn(p, ",");
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (len == 0) {
            snprintf(err, errlen, "empty %s in '%s'", what, value);
            return -1;
        }
        if (l->n == CFG_MAX_ENDPOINTS) {
            snprintf(err, errlen, "more than %d %ss", CFG_MAX_ENDPOINTS, what);
            return -1;
        }
        if (!(l->ep[l->n] = strndup(p, len))) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        l->n++;
        p += strcspn(p, ",");
        if (*p == 0)
            return 0;
        p++; /* the comma: another item must follow */
    }
}

void config_clear_endpoints(endpoint_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->ep[i]);
    l->n = 0;
}

/*
 * The [daemon] keys: one table, the setter a switch on the kind (Redis's
 * static_configs[]); the suggestions for a misspelt key read the names
 * from it too (nearest_key).
 */
enum dkind {
    DK_STRING,   /* any non-empty text */
    DK_LEVEL,    /* log_level: a level's name */
    DK_ABSOLUTE, /* an absolute path (run without a shell) */
    DK_FILE,     /* a file, or "none" (the default): none */
    DK_LIST,     /* a comma list of endpoints, added to the ones before */
    DK_PULL,     /* the same, or "none": no socket */
    DK_PREFIXES, /* a comma list of topic prefixes, replacing the ones before */
    DK_BOOL,     /* yes or no */
    DK_SECONDS,  /* seconds in (0, max] */
    DK_SECONDS0, /* seconds in [0, max], 0 meaning what `zero` says */
    DK_UINT,     /* an integer in [min, max] */
};

typedef struct daemon_key {
    const char *name;
    enum dkind kind;
    size_t offset;
    uint64_t min, max; /* DK_UINT's range; DK_SECONDS*'s max */
    const char *zero;  /* DK_SECONDS0: what 0 means */
} daemon_key;

#define DK(name, kind, field, ...) {name, kind, offsetof(daemon_cfg, field), __VA_ARGS__}
static const daemon_key daemon_keys[] = {
    DK("alert_exec", DK_ABSOLUTE, alert_exec, 0, 0, NULL),
    DK("alert_exec_timeout", DK_SECONDS, alert_exec_timeout, 0, 86400, NULL),
    DK("auto_models", DK_BOOL, auto_models, 0, 0, NULL),
    DK("control", DK_STRING, control, 0, 0, NULL),
    DK("curve_operators", DK_FILE, curve_operators, 0, 0, NULL),
    DK("curve_producers", DK_FILE, curve_producers, 0, 0, NULL),
    DK("curve_secret_key", DK_FILE, curve_secret_key, 0, 0, NULL),
    DK("curve_subscribers", DK_FILE, curve_subscribers, 0, 0, NULL),
    DK("drain_time", DK_SECONDS, drain_time, 0, 1, NULL),
    DK("health_timeout", DK_SECONDS, health_timeout, 0, 3600, NULL),
    DK("history", DK_UINT, history, 0, 100000, NULL),
    DK("history_step", DK_SECONDS, history_step, 0, 3600, NULL),
    DK("http", DK_STRING, http, 0, 0, NULL),
    DK("http_auth_basic_file", DK_FILE, http_auth_basic_file, 0, 0, NULL),
    DK("http_auth_metrics", DK_BOOL, http_auth_metrics, 0, 0, NULL),
    DK("http_auth_token_file", DK_FILE, http_auth_token_file, 0, 0, NULL),
    DK("http_ingest", DK_BOOL, http_ingest, 0, 0, NULL),
    DK("http_ingest_token_file", DK_FILE, http_ingest_token_file, 0, 0, NULL),
    DK("http_max_connections", DK_UINT, http_max_connections, 1, 100000, NULL),
    DK("http_max_per_address", DK_UINT, http_max_per_address, 1, 100000, NULL),
    DK("http_timeout", DK_SECONDS, http_timeout, 0, 3600, NULL),
    DK("http_tls_cert", DK_FILE, http_tls_cert, 0, 0, NULL),
    DK("http_tls_key", DK_FILE, http_tls_key, 0, 0, NULL),
    DK("ingest", DK_LIST, ingest, 0, 0, NULL),
    DK("ingest_memory", DK_UINT, ingest_memory, 1u << 20, (uint64_t)1 << 40, NULL),
    DK("ingest_pull", DK_PULL, ingest_pull, 0, 0, NULL),
    DK("log_level", DK_LEVEL, log_level, 0, 0, NULL),
    DK("max_models", DK_UINT, max_models, 1, CFG_MAX_MODELS, NULL),
    DK("max_msg_size", DK_UINT, max_msg_size, 1024, (uint64_t)1 << 31, NULL),
    DK("memory_limit", DK_UINT, memory_limit, 1u << 24, (uint64_t)1 << 44, NULL),
    DK("model_idle_ttl", DK_SECONDS0, model_idle_ttl, 0, 31536000, "never"),
    DK("params_interval", DK_SECONDS, params_interval, 0, 86400, NULL),
    DK("plugin_dir", DK_STRING, plugin_dir, 0, 0, NULL),
    DK("publish", DK_STRING, publish, 0, 0, NULL),
    DK("publish_memory", DK_UINT, publish_memory, 1u << 16, (uint64_t)1 << 34, NULL),
    DK("rcvhwm", DK_UINT, rcvhwm, 1, 100000000, NULL),
    DK("snapshot_interval", DK_SECONDS0, snapshot_interval, 0, 86400, "off"),
    DK("sndhwm", DK_UINT, sndhwm, 1, 100000000, NULL),
    DK("state_dir", DK_STRING, state_dir, 0, 0, NULL),
    DK("subscribe", DK_PREFIXES, subscribe, 0, 0, NULL),
    DK("tick", DK_SECONDS, tick, 0, 60, NULL),
};
#undef DK
#define N_DAEMON_KEYS (sizeof daemon_keys / sizeof daemon_keys[0])

/* A text key's value into its field. */
static int set_text(const daemon_key *dk, char **str, const char *value, char *err,
                    size_t errlen)
{
    if (*value == 0) {
        snprintf(err, errlen, "%s: empty value", dk->name);
        return -1;
    }
    if (dk->kind == DK_LEVEL && log_level_parse(value) < 0) {
        snprintf(err, errlen, "log_level = '%s': expected error, warn, info or debug", value);
        return -1;
    }
    if (dk->kind == DK_ABSOLUTE && value[0] != '/') {
        snprintf(err, errlen, "%s = '%s': expected an absolute path (it is run without a "
                 "shell)", dk->name, value);
        return -1;
    }
    if (dk->kind == DK_FILE && strcmp(value, "none") == 0) { /* the default: no file */
        free(*str);
        *str = NULL;
        return 0;
    }
    if (set_string(str, value) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* A number of seconds in [0 or (0, max] into *f. */
static int set_seconds(const daemon_key *dk, double *f, const char *value, char *err,
                       size_t errlen)
{
    if (dk->kind == DK_SECONDS) {
        if (parse_seconds(value, f) != 0 || *f > (double)dk->max) {
            snprintf(err, errlen, "%s = '%s': expected seconds in (0, %g]", dk->name, value,
                     (double)dk->max);
            return -1;
        }
        return 0;
    }
    char *end;
    double v = strtod(value, &end);
    if (end == value || *end || !isfinite(v) || v < 0 || v > (double)dk->max) {
        snprintf(err, errlen, "%s = '%s': expected seconds in [0, %g] (0: %s)", dk->name, value,
                 (double)dk->max, dk->zero);
        return -1;
    }
    *f = v;
    return 0;
}

int config_set_daemon(daemon_cfg *c, const char *key, const char *value, char *err,
                      size_t errlen)
{
    const daemon_key *dk = NULL;
    for (size_t i = 0; i < N_DAEMON_KEYS && !dk; i++)
        dk = strcmp(key, daemon_keys[i].name) == 0 ? &daemon_keys[i] : NULL;
    if (!dk)
        return 1; /* unknown */
    void *field = (char *)c + dk->offset;
    int b;
    switch (dk->kind) {
    case DK_STRING:
    case DK_LEVEL:
    case DK_ABSOLUTE:
    case DK_FILE: return set_text(dk, field, value, err, errlen);
    case DK_PULL:
        if (strcmp(value, "none") == 0) { /* no PULL socket */
            config_clear_endpoints(field);
            return 0;
        }
        return add_list(field, value, "endpoint", err, errlen);
    case DK_LIST: return add_list(field, value, "endpoint", err, errlen);
    case DK_PREFIXES:
        config_clear_endpoints(field);
        return add_list(field, value, "topic prefix", err, errlen);
    case DK_BOOL:
        if (parse_bool(value, &b) != 0) {
            snprintf(err, errlen, "%s = '%s': expected yes or no", key, value);
            return -1;
        }
        *(int *)field = b;
        return 0;
    case DK_SECONDS:
    case DK_SECONDS0: return set_seconds(dk, field, value, err, errlen);
    case DK_UINT:
        if (parse_uint(value, dk->min, dk->max, field) != 0) {
            snprintf(err, errlen, "%s = '%s': expected an integer in %llu..%llu", key, value,
                     (unsigned long long)dk->min, (unsigned long long)dk->max);
            return -1;
        }
        return 0;
    }
    return 1;
}

uint64_t config_rcvhwm(const daemon_cfg *c)
{
    uint64_t fit = c->ingest_memory / c->max_msg_size;
    fit = fit ? fit : 1;
    return c->rcvhwm < fit ? c->rcvhwm : fit;
}

uint64_t config_sndhwm(const daemon_cfg *c)
{
    uint64_t fit = c->publish_memory / CALIB_PUBMSG_MAX_BYTES;
    fit = fit ? fit : 1;
    return c->sndhwm < fit ? c->sndhwm : fit;
}

/* ------------------------------------------------------------ defaults */

int config_init(daemon_cfg *c)
{
    char err[ERR_MAX];
    memset(c, 0, sizeof *c);
    c->auto_models = 1;
    c->max_models = 1024;
    c->max_msg_size = 1u << 20;
    c->ingest_memory = 256u << 20;
    c->memory_limit = (uint64_t)2 << 30;
    c->drain_time = 0.005;
    c->http_timeout = 10;
    c->health_timeout = 10;
    c->history = 1440;
    c->history_step = 60;
    c->snapshot_interval = 30;
    c->http_max_connections = 256;
    c->http_max_per_address = 16;
    c->rcvhwm = 100000;
    c->sndhwm = 100000;
    c->publish_memory = (uint64_t)8 << 20;
    c->tick = 1.0;
    c->defaults = (model_cfg){
        .form = -1, .k = 0, .label_ttl = 3600, .max_pending = 100000,
        .joined_memory = 100000, .window = 3600, .window_panes = 12, .bins = 15,
        .ring = 10000, .reservoir = 10000, .seed = 1,
        .join_memory = 32u << 20, .sample_memory = 192u << 20,
        .method = "auto", .drift = 1, .drift_alpha = 0.01, .drift_min_effect = 0.01,
        .drift_quantile = 0.9, .drift_reference = 2000, .refit_interval = 0,
        .refit_min_samples = 1000, .refit_samples = 10000, .auto_publish = 1,
        .rollback = 1, .cs_alpha = 0.05,
        .gate_alpha = 0.01, .min_improvement = 0.001, .gate_dss_clip = 10,
        .gate_max_samples = 20000, .miscal_trigger = 1, .miscal_alpha = 0.01,
        .miscal_min_effect = 0.001, .miscal_period = 20000, .alert_min_samples = 1000,
        .alert_hysteresis = 0.1, .alert_cooldown = 300, .label_starvation = 0,
        .kserve_output = "", .kserve_form = -1,
        .segment_keys = 4, .segment_values = 64, .segment_alpha = 0.05,
        .segment_min_effect = 0.02, .segment_metrics = 10, .segment_status = 20, .segment_refit = 0,
        .segment_refit_samples = 500,
        .label_free_recent = 10000, .label_free_memory = 8u << 20, .label_free_interval = 5,
        .label_shift_alpha = 0.01, .label_shift_reference = 2000,
    };
    c->params_interval = 10;
    c->model_idle_ttl = 86400;
    c->alert_exec_timeout = 5;
    if (config_set_daemon(c, "ingest", CFG_DEFAULT_INGEST, err, sizeof err) ||
        config_set_daemon(c, "ingest_pull", CFG_DEFAULT_PULL, err, sizeof err) ||
        config_set_daemon(c, "publish", CFG_DEFAULT_PUBLISH, err, sizeof err) ||
        config_set_daemon(c, "control", CFG_DEFAULT_CONTROL, err, sizeof err) ||
        config_set_daemon(c, "http", CFG_DEFAULT_HTTP, err, sizeof err) ||
        config_set_daemon(c, "state_dir", CFG_DEFAULT_STATE_DIR, err, sizeof err) ||
        config_set_daemon(c, "log_level", "info", err, sizeof err) ||
        config_set_daemon(c, "plugin_dir", PKGLIBDIR, err, sizeof err)) {
        config_free(c);
        return -1;
    }
    return 0;
}

void config_free(daemon_cfg *c)
{
    config_clear_endpoints(&c->ingest);
    config_clear_endpoints(&c->ingest_pull);
    config_clear_endpoints(&c->subscribe);
    free(c->publish);
    free(c->control);
    free(c->http);
    free(c->state_dir);
    free(c->log_level);
    free(c->alert_exec);
    free(c->plugin_dir);
    free(c->http_tls_cert);
    free(c->http_tls_key);
    free(c->http_auth_token_file);
    free(c->http_auth_basic_file);
    free(c->http_ingest_token_file);
    c->http_tls_cert = c->http_tls_key = NULL;
    c->http_auth_token_file = c->http_auth_basic_file = c->http_ingest_token_file = NULL;
    free(c->curve_secret_key);
    free(c->curve_producers);
    free(c->curve_operators);
    free(c->curve_subscribers);
    c->curve_secret_key = c->curve_producers = c->curve_operators = NULL;
    c->curve_subscribers = NULL;
    kafka_cfg *k = &c->kafka;
    free(k->brokers);
    free(k->group);
    free(k->state_dir);
    for (size_t i = 0; i < k->ntopics; i++)
        free(k->topics[i]);
    for (size_t i = 0; i < k->nprops; i++) {
        free(k->prop_key[i]);
        free(k->prop_value[i]);
    }
    *k = (kafka_cfg){0};
    free(c->models);
    c->publish = c->control = c->http = c->state_dir = c->log_level = NULL;
    c->alert_exec = c->plugin_dir = NULL;
    c->models = NULL;
    c->nmodels = 0;
}

/* ------------------------------------------------------------ [kafka] */

int config_kafka_topic_ok(const char *t, size_t len)
{
    if (len == 0 || len > KAFKA_TOPIC_MAX || (len == 1 && t[0] == '.') ||
        (len == 2 && t[0] == '.' && t[1] == '.'))
        return 0;
    for (size_t i = 0; i < len; i++) {
        char ch = t[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-'))
            return 0;
    }
    return 1;
}

/* *dst = a copy of value: 0, or -1 out of memory (err set). */
static int set_copy(char **dst, const char *value, char *err, size_t errlen)
{
    char *v = strdup(value);
    if (!v) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    free(*dst);
    *dst = v;
    return 0;
}

/* topics = a, b, c: each checked, none twice; a second topics line adds to
 * the first (a file's lines are short). */
static int set_topics(kafka_cfg *k, const char *value, char *err, size_t errlen)
{
    char *list[KAFKA_MAX_TOPICS];
    size_t n = 0;
    int rc = 0;
    for (const char *p = value; *p && rc == 0;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (!*p)
            break;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ' && *e != '\t')
            e++;
        size_t len = (size_t)(e - p);
        if (config_kafka_topic_ok(p, len) && len > KAFKA_TOPIC_FILE_MAX) {
            snprintf(err, errlen, "topics: '%.32s...' is longer than %d characters, which "
                     "calibd names its partitions' files after", p, KAFKA_TOPIC_FILE_MAX);
            rc = -1;
        } else if (!config_kafka_topic_ok(p, len)) {
            snprintf(err, errlen, "topics: '%.*s' is no topic name (1..%d characters of "
                     "[A-Za-z0-9._-])", (int)(len > 64 ? 64 : len), p, KAFKA_TOPIC_FILE_MAX);
            rc = -1;
        } else if (k->ntopics + n == KAFKA_MAX_TOPICS) {
            snprintf(err, errlen, "topics: more than %d", KAFKA_MAX_TOPICS);
            rc = -1;
        } else if (!(list[n] = strndup(p, len))) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
        } else {
            for (size_t i = 0; i < k->ntopics + n && rc == 0; i++)
                if (strcmp(i < k->ntopics ? k->topics[i] : list[i - k->ntopics],
                           list[n]) == 0) {
                    snprintf(err, errlen, "topics: '%s' is listed twice", list[n]);
                    rc = -1;
                }
            n++;
        }
        p = e;
    }
    if (rc == 0 && n == 0) {
        snprintf(err, errlen, "topics: expected a comma list of topic names");
        rc = -1;
    }
    if (rc != 0) {
        for (size_t i = 0; i < n; i++)
            free(list[i]);
        return -1;
    }
    memcpy(k->topics + k->ntopics, list, n * sizeof *list);
    k->ntopics += n;
    return 0;
}

/* The properties calibd sets itself from its own keys, or must own for its
 * offsets to be right (kafka.h). */
static const char *const kafka_owned[] = {
    "bootstrap.servers", "metadata.broker.list", "group.id", "enable.auto.commit",
    "enable.auto.offset.store", "enable.partition.eof", "log.queue", NULL};

/* [kafka]'s keys: calibd's own, and librdkafka's two without a dot (any
 * key with a dot is a librdkafka property too) */
enum { KK_STRING, KK_TOPICS, KK_PROPERTY };
typedef struct kafka_key {
    const char *name; /* first: the names' table for config_nearest */
    int kind;
    size_t field; /* KK_STRING: the char * in kafka_cfg */
} kafka_key;
static const kafka_key kafka_keys[] = {
    {"brokers", KK_STRING, offsetof(kafka_cfg, brokers)},
    {"topics", KK_TOPICS, 0},
    {"group", KK_STRING, offsetof(kafka_cfg, group)},
    {"state_dir", KK_STRING, offsetof(kafka_cfg, state_dir)},
    {"debug", KK_PROPERTY, 0},
    {"partitioner", KK_PROPERTY, 0}, /* a producer's, which calibd reads to
                                        know its producers' (kafka.h) */
};
#define N_KAFKA_KEYS (sizeof kafka_keys / sizeof kafka_keys[0])

int config_set_kafka(kafka_cfg *k, const char *key, const char *value, char *err,
                     size_t errlen)
{
    const kafka_key *kk = NULL;
    for (size_t i = 0; i < N_KAFKA_KEYS && !kk; i++)
        kk = strcmp(key, kafka_keys[i].name) == 0 ? &kafka_keys[i] : NULL;
    if (kk && kk->kind == KK_STRING) {
        if (!value[0]) {
            snprintf(err, errlen, "%s: expected a value", key);
            return -1;
        }
        return set_copy((char **)((char *)k + kk->field), value, err, errlen);
    }
    if (kk && kk->kind == KK_TOPICS)
        return set_topics(k, value, err, errlen);
    if (!kk && !strchr(key, '.'))
        return 1;
    for (size_t i = 0; kafka_owned[i]; i++)
        if (strcmp(key, kafka_owned[i]) == 0) {
            snprintf(err, errlen, "%s is calibd's to set (brokers, group; offsets are "
                     "committed by calibd after each snapshot)", key);
            return -1;
        }
    size_t i = 0;
    while (i < k->nprops && strcmp(k->prop_key[i], key) != 0)
        i++;
    if (i == KAFKA_MAX_PROPS) {
        snprintf(err, errlen, "more than %d librdkafka properties", KAFKA_MAX_PROPS);
        return -1;
    }
    if (i == k->nprops) {
        if (!(k->prop_key[i] = strdup(key))) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        k->prop_value[i] = NULL;
        k->nprops++;
    }
    return set_copy(&k->prop_value[i], value, err, errlen);
}

/* [kafka] as a whole: brokers, topics, group and state_dir go together. */
static int check_kafka(const kafka_cfg *k, const char *path, char *err, size_t errlen)
{
    if (!k->brokers && !k->ntopics && !k->group && !k->state_dir && !k->nprops)
        return 0;
    const char *missing = !k->brokers ? "brokers" : !k->ntopics ? "topics"
                          : !k->group ? "group" : !k->state_dir ? "state_dir" : NULL;
    if (missing) {
        snprintf(err, errlen, "%s: [kafka]: %s is missing (brokers, topics, group and "
                 "state_dir go together)", path, missing);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ the file */

typedef struct load_state {
    daemon_cfg *c;
    const char *path;
    unsigned long line; /* lines handed to inih so far */
    FILE *f;
    config_warn_fn warn;
    void *arg;
    char *err;
    size_t errlen;
    int ingest_seen, pull_seen;
    model_cfg *models; /* as written, before defaults */
    size_t nmodels;
    size_t current;    /* the model of the last [model NAME] header + 1 (0:
                          none): libinih cuts section names at 49 bytes,
                          so a longer NAME comes to on_key cut */
} load_state;

_Static_assert(CFG_NAME_MAX == CALIB_PROTO_MAX_TOPIC, "a model name is a topic");
_Static_assert(CFG_METHOD_MAX == CALIB_PLUGIN_NAME_MAX, "a method is a plugin's name");

static int valid_model_name(const char *n)
{
    return calib_proto_topic_ok(n, strlen(n));
}

static model_cfg *model_section(load_state *s, const char *name)
{
    for (size_t i = 0; i < s->nmodels; i++)
        if (strcmp(s->models[i].name, name) == 0)
            return &s->models[i];
    if (s->nmodels == CFG_MAX_MODELS)
        return NULL;
    model_cfg *m = realloc(s->models, (s->nmodels + 1) * sizeof *m);
    if (!m)
        return NULL;
    s->models = m;
    m = &s->models[s->nmodels++];
    *m = (model_cfg){0};
    snprintf(m->name, sizeof m->name, "%s", name);
    return m;
}

/* ------------------------------------------------------------ names */

static const char *const section_names[] = {"daemon", "defaults", "kafka", "model NAME", NULL};

const char *config_daemon_key(size_t i)
{
    return i < N_DAEMON_KEYS ? daemon_keys[i].name : NULL;
}

const char *config_kafka_key(size_t i)
{
    return i < N_KAFKA_KEYS ? kafka_keys[i].name : NULL;
}

/* Levenshtein's distance of a and b, each cut at 63 bytes. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strnlen(a, 63), lb = strnlen(b, 63), row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            best = up + 1 < best ? up + 1 : best;
            best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

/* The nearest to word of n names, each the first member of a table's
 * entry of `stride` bytes from *first (a key table's, or a list's). */
static const char *nearest_of(const char *word, const char *const *first, size_t n,
                              size_t stride)
{
    const char *best = NULL;
    size_t d = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        const char *name = *(const char *const *)((const char *)first + i * stride);
        size_t e = edit_distance(word, name);
        if (e < d) {
            d = e;
            best = name;
        }
    }
    /* close enough to be the same word mistyped: a third of it, 2 at least */
    size_t len = strlen(word), most = len / 3 > 2 ? len / 3 : 2;
    return d <= most ? best : NULL;
}

const char *config_nearest(const char *word, const char *const *names)
{
    size_t n = 0;
    while (names[n])
        n++;
    return nearest_of(word, names, n, sizeof *names);
}

/* A section's key nearest to key: each section's table. */
static const char *nearest_key(const char *section, const char *key)
{
    if (strcmp(section, "daemon") == 0)
        return nearest_of(key, &daemon_keys[0].name, N_DAEMON_KEYS, sizeof daemon_keys[0]);
    if (strcmp(section, "kafka") == 0)
        return nearest_of(key, &kafka_keys[0].name, N_KAFKA_KEYS, sizeof kafka_keys[0]);
    return nearest_of(key, &model_keys[0].name, N_MODEL_KEYS, sizeof model_keys[0]);
}

static int fail(load_state *s, const char *msg)
{
    snprintf(s->err, s->errlen, "%s:%lu: %s", s->path, s->line, msg);
    return 0; /* inih: stop, report this line */
}

/* A "[model NAME]" header creates the model even when no key follows:
 * inih reports keys only, and an empty section must not vanish. Returns -1
 * (with the error set) for a bad name. */
static int note_section(load_state *s, const char *line)
{
    /* an indented line may be a value's continuation (inih's multiline):
     * inih decides, and on_key refuses a section it does not know */
    int indented = *line == ' ' || *line == '\t';
    while (*line == ' ' || *line == '\t')
        line++;
    if (line[0] != '[')
        return 0;
    if (strncmp(line, "[model ", 7) != 0) {
        if (indented)
            return 0;
        /* any other header must be one of the sections */
        const char *end = strchr(line, ']');
        if (!end)
            return 0; /* inih reports the syntax error */
        char sec[64];
        size_t len = (size_t)(end - line - 1);
        snprintf(sec, sizeof sec, "%.*s", (int)(len < 63 ? len : 63), line + 1);
        if (strcmp(sec, "daemon") == 0 || strcmp(sec, "defaults") == 0 ||
            strcmp(sec, "kafka") == 0)
            return 0;
        char msg[256];
        if (strcmp(sec, "model") == 0)
            snprintf(msg, sizeof msg, "[model] needs the model's name: [model NAME] (or "
                     "[defaults], for every model)");
        else {
            const char *near = config_nearest(sec, section_names);
            snprintf(msg, sizeof msg, "unknown section [%s]%s%s%s", sec,
                     near ? "; the nearest is [" : " (sections: [daemon], [defaults], "
                                                   "[model NAME], [kafka])",
                     near ? near : "", near ? "]" : "");
        }
        fail(s, msg);
        return -1;
    }
    const char *name = line + 7, *end = strchr(name, ']');
    while (*name == ' ')
        name++;
    if (!end)
        return 0; /* inih reports the syntax error */
    char buf[CFG_NAME_MAX + 2];
    size_t len = (size_t)(end - name);
    while (len && name[len - 1] == ' ')
        len--;
    if (len > CFG_NAME_MAX)
        len = CFG_NAME_MAX + 1; /* too long: refused below */
    memcpy(buf, name, len);
    buf[len] = 0;
    if (!valid_model_name(buf)) {
        fail(s, "a model name is 1..128 characters of [A-Za-z0-9._:-]");
        return -1;
    }
    model_cfg *m = model_section(s, buf);
    if (!m) {
        fail(s, "too many models, or out of memory");
        return -1;
    }
    s->current = (size_t)(m - s->models) + 1;
    return 0;
}

/* inih's reader, counting lines so that messages can name them; it ends
 * the parse early (an error is then set) on a bad section header. */
static char *read_line(char *str, int num, void *stream)
{
    load_state *s = stream;
    char *r = fgets(str, num, s->f);
    if (r) {
        s->line++;
        if (note_section(s, r) != 0)
            return NULL;
    }
    return r;
}

/* An unknown key stops the load, naming the nearest known one. */
static int unknown_key(load_state *s, const char *section, const char *key,
                       const char *near)
{
    char msg[512];
    if (near)
        snprintf(msg, sizeof msg, "unknown key '%s' in [%s]; the nearest is '%s'", key,
                 section, near);
    else
        snprintf(msg, sizeof msg, "unknown key '%s' in [%s] (calibd.conf(5) lists them)",
                 key, section);
    return fail(s, msg);
}

static int on_key(void *user, const char *section, const char *key, const char *value)
{
    load_state *s = user;
    char err[ERR_MAX];
    int rc;
    if (strcmp(section, "daemon") == 0) {
        /* the file's ingest list replaces the built-in default */
        if (strcmp(key, "ingest") == 0 && !s->ingest_seen++)
            config_clear_endpoints(&s->c->ingest);
        if (strcmp(key, "ingest_pull") == 0 && !s->pull_seen++)
            config_clear_endpoints(&s->c->ingest_pull);
        rc = config_set_daemon(s->c, key, value, err, sizeof err);
    } else if (strcmp(section, "defaults") == 0) {
        rc = set_model_key(&s->c->defaults, key, value, err, sizeof err);
    } else if (strncmp(section, "model ", 6) == 0) {
        const char *name = section + 6;
        while (*name == ' ')
            name++;
        if (!valid_model_name(name))
            return fail(s, "a model name is 1..128 characters of [A-Za-z0-9._:-]");
        /* the header's model, which note_section read whole */
        model_cfg *m = s->current && strncmp(s->models[s->current - 1].name, name,
                                             strlen(name)) == 0
                           ? &s->models[s->current - 1]
                           : model_section(s, name);
        if (!m)
            return fail(s, "too many models, or out of memory");
        rc = set_model_key(m, key, value, err, sizeof err);
    } else if (strcmp(section, "kafka") == 0) {
        rc = config_set_kafka(&s->c->kafka, key, value, err, sizeof err);
    } else {
        return fail(s, "unknown section"); /* note_section saw its header first */
    }
    if (rc < 0)
        return fail(s, err);
    if (rc > 0)
        return unknown_key(s, section, key, nearest_key(section, key));
    if (strcmp(key, "method") == 0 || strcmp(key, "fit_params") == 0) {
        /* where it was set, for their check (main.c) */
        model_cfg *m = strcmp(section, "defaults") == 0 ? &s->c->defaults
                       : s->current ? &s->models[s->current - 1] : NULL;
        if (m)
            *(key[0] == 'm' ? &m->method_line : &m->fit_params_line) = s->line;
    }
    return 1;
}

/* Rules that tie keys together, on a model's resolved settings. */
static int check_model(const model_cfg *m, const char *path, char *err, size_t errlen)
{
    const char *where = m->name[0] ? m->name : "defaults";
    if (m->refit_samples < m->refit_min_samples) {
        snprintf(err, errlen, "%s: [%s%s]: refit_samples (%llu) is below refit_min_samples "
                 "(%llu): no refit could ever start", path, m->name[0] ? "model " : "", where,
                 (unsigned long long)m->refit_samples, (unsigned long long)m->refit_min_samples);
        return -1;
    }
    if (m->cs_alpha >= 1 || (m->cs_alpha > 0 && !isfinite(2 / m->cs_alpha))) {
        snprintf(err, errlen, "%s: [%s%s]: cs_alpha = %g: expected 0 (off) or a level in "
                 "(0, 1)", path, m->name[0] ? "model " : "", where, m->cs_alpha);
        return -1;
    }
    if (m->min_improvement >= 2 || m->min_improvement >= m->gate_dss_clip) {
        snprintf(err, errlen, "%s: [%s%s]: min_improvement (%g) must be below 2 and below "
                 "gate_dss_clip (%g): no candidate could ever pass", path,
                 m->name[0] ? "model " : "", where, m->min_improvement, m->gate_dss_clip);
        return -1;
    }
    if (m->miscal_min_effect >= 2 || m->miscal_min_effect >= m->gate_dss_clip) {
        snprintf(err, errlen, "%s: [%s%s]: miscal_min_effect (%g) must be below 2 and below "
                 "gate_dss_clip (%g): the trigger could never reject", path,
                 m->name[0] ? "model " : "", where, m->miscal_min_effect, m->gate_dss_clip);
        return -1;
    }
    return 0;
}

int config_load(daemon_cfg *c, const char *path, config_warn_fn warn, void *arg,
                char *err, size_t errlen)
{
    load_state s = {.c = c, .path = path, .warn = warn, .arg = arg, .err = err,
                    .errlen = errlen};
    err[0] = 0;
    if (!(s.f = fopen(path, "r"))) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    int rc = ini_parse_stream(read_line, &s, on_key, &s);
    fclose(s.f);
    if (rc != 0 || err[0]) {
        if (!err[0]) /* a syntax error inih found itself */
            snprintf(err, errlen, "%s:%d: syntax error", path, rc);
        free(s.models);
        return -1;
    }
    if (check_model(&c->defaults, path, err, errlen) != 0 ||
        check_kafka(&c->kafka, path, err, errlen) != 0) {
        free(s.models);
        return -1;
    }
    /* resolve each model over the (complete) defaults */
    free(c->models);
    c->models = s.models;
    c->nmodels = s.nmodels;
    for (size_t i = 0; i < c->nmodels; i++) {
        model_cfg own = c->models[i];
        c->models[i] = c->defaults;
        overlay(&c->models[i], &own);
        memcpy(c->models[i].name, own.name, sizeof own.name);
        if (own.method_line)
            c->models[i].method_line = own.method_line;
        if (own.fit_params_line)
            c->models[i].fit_params_line = own.fit_params_line;
        if (check_model(&c->models[i], path, err, errlen) != 0)
            return -1;
    }
    return 0;
}

const model_cfg *config_find_model(const daemon_cfg *c, const char *name)
{
    for (size_t i = 0; i < c->nmodels; i++)
        if (strcmp(c->models[i].name, name) == 0)
            return &c->models[i];
    return NULL;
}

void config_model_for(const daemon_cfg *c, const char *name, model_cfg *out)
{
    const model_cfg *m = config_find_model(c, name);
    if (m) {
        *out = *m;
        return;
    }
    *out = c->defaults;
    snprintf(out->name, sizeof out->name, "%s", name);
}
