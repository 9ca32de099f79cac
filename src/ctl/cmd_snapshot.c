/* cmd_snapshot.c — `calibctl snapshot FILE [MODEL]`: a calibd snapshot
 * (calibd(8), SNAPSHOTS) printed as the JSON `calibctl status` prints, by
 * the daemon's own code: each model is rebuilt from its stored
 * configuration, restored as calibd restores it, and packed by
 * status_pack. No daemon runs. `calibctl merge A B... -o OUT`:
 * snapshots merged model by model (merge.h) into one. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/mpw.h"
#include "cfg.h"
#include "clock.h"
#include "ctl.h"
#include "model.h"
#include "merge.h"
#include "msgpack_json.h"
#include "snapshot.h"
#include "state.h"
#include "status.h"

/* The whole file, malloc'ed; NULL with the reason printed. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0;
    *len = 0;
    if (!f) {
        ctl_error(path, 0, "%s", strerror(errno));
        return NULL;
    }
    for (;;) {
        if (*len == cap) {
            size_t ncap = cap ? 2 * cap : 1 << 16;
            char *nbuf = ncap > cap ? realloc(buf, ncap) : NULL;
            if (!nbuf) {
                ctl_error(path, 0, "out of memory");
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nbuf;
            cap = ncap;
        }
        size_t n = fread(buf + *len, 1, cap - *len, f);
        *len += n;
        if (n == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        ctl_error(path, 0, "cannot read it");
        free(buf);
        return NULL;
    }
    return buf;
}

static void drop_model(model *m)
{
    model_free(m);
    free(m);
}

/* Frees n models and their array. */
static void drop_models(model **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        drop_model(v[i]);
    free(v);
}

/* One model of the file, rebuilt and restored; NULL with err set, and
 * with name[0] set when the model's name was read (its section alone is
 * at fault: the others may still be read). */
static model *rebuild(const msgpack_object *o, const model_cfg *defaults, double shift,
                      char name[CFG_NAME_MAX + 1], char *err, size_t errlen)
{
    char skipped[600];
    int shaped, form;
    size_t k;
    name[0] = 0;
    if (snapshot_model_head(o, name, &shaped, &form, &k, err, errlen) != 0) {
        name[0] = 0;
        return NULL;
    }
    model_cfg c = *defaults;
    snprintf(c.name, sizeof c.name, "%s", name);
    if (snapshot_model_cfg(o, &c, err, errlen) != 0)
        return NULL;
    model *m = malloc(sizeof *m);
    if (!m || model_init(m, &c, 0, NULL) != CALIB_OK) {
        snprintf(err, errlen, "%s: out of memory", name);
        free(m);
        return NULL;
    }
    int rc = 0;
    if (shaped && (rc = model_shape(m, form, k)) == CALIB_OK) {
        /* the loop as calibd attaches it, so that its state is restored */
        rc = model_recalib_attach(m, 0);
    }
    if (rc != CALIB_OK) {
        snprintf(err, errlen, "%s: %s", name, calib_strerror(rc));
    } else if (snapshot_restore_model(m, o, shift, 1, skipped, sizeof skipped, err, errlen) !=
               0) {
        rc = -1;
    } else if (skipped[0]) {
        ctl_error(NULL, 0, "%s: not restored: %s", name, skipped);
    }
    if (rc != CALIB_OK) {
        drop_model(m);
        return NULL;
    }
    return m;
}

int cmd_snapshot(int argc, char **argv)
{
    if (argc < 2 || argc > 3 || argv[1][0] == '-') {
        ctl_error(NULL, 0, "usage: calibctl snapshot FILE [MODEL]");
        return CTL_BADINPUT;
    }
    const char *path = argv[1], *only = argc == 3 ? argv[2] : NULL;
    size_t len;
    char *data = slurp(path, &len);
    if (!data)
        return CTL_BADINPUT;
    /* what the status map opens with, from the header and these models */
    status_daemon st = {0};
    model **models = NULL;
    size_t nmodels = 0;
    daemon_cfg dc;
    snapshot_head h;
    char err[700];
    int rc = CTL_BADINPUT;
    calib_mpw w;
    calib_mpw_init(&w);
    if (config_init(&dc) != 0) {
        ctl_error(NULL, 0, "out of memory");
        free(data);
        return CTL_FAIL;
    }
    if (snapshot_open(data, len, &h, err, sizeof err) != 0) {
        ctl_error(path, 0, "%s", err);
        goto out;
    }
    st.uptime = wall_now() - h.written; /* as ever: the file's age */
    st.counts = h.counts;
    st.mem_limit = dc.memory_limit;
    st.max_models = dc.max_models;
    models = h.models <= SIZE_MAX / sizeof *models
                 ? calloc(h.models ? h.models : 1, sizeof *models) : NULL;
    if (!models) {
        ctl_error(path, 0, "out of memory for %llu models", (unsigned long long)h.models);
        goto out;
    }
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0, skipped = 0;
    int more;
    char name[CFG_NAME_MAX + 1];
    err[0] = 0;
    while ((more = snapshot_next(&h, &off, &u, err, sizeof err)) > 0 &&
           nmodels + skipped < h.models) {
        if (more == 2) { /* a damaged section: that model only */
            ctl_error(path, 0, "a model skipped: %s", err);
            err[0] = 0;
            skipped++;
            continue;
        }
        model *m = rebuild(&u.data, &dc.defaults, 0, name, err, sizeof err);
        if (!m && name[0]) { /* that model's section only: the others are read */
            ctl_error(path, 0, "model %s skipped: %s", name, err);
            err[0] = 0;
            skipped++;
            continue;
        }
        if (!m)
            break;
        model_view_fill(m, h.written);
        st.mem_bytes += m->mem.used; /* what these models hold in this process */
        models[nmodels++] = m;
    }
    msgpack_unpacked_destroy(&u);
    st.models = nmodels;
    if (more == 0 && h.sections && nmodels + skipped < h.models) {
        ctl_error(path, 0, "%llu models skipped: the file is cut short (%llu of %llu bytes "
                  "of its body)", (unsigned long long)(h.models - nmodels - skipped),
                  (unsigned long long)h.len, (unsigned long long)h.body_bytes);
        skipped = h.models - nmodels;
    }
    if (more < 0 || nmodels + skipped != h.models) {
        ctl_error(path, 0, "%s", more < 0 || err[0] ? err : "fewer models than the header says");
        goto out;
    }
    const model *one = NULL;
    for (size_t i = 0; only && i < nmodels && !one; i++)
        if (strcmp(models[i]->name, only) == 0)
            one = models[i];
    if (only && !one)
        status_error(&w, "no such model");
    else
        status_pack(&w, &st, models, nmodels, one);
    if (calib_mpw_error(&w) != CALIB_OK) {
        ctl_error(NULL, 0, "out of memory");
        rc = CTL_FAIL;
        goto out;
    }
    msgpack_unpacked_init(&u);
    off = 0;
    if (msgpack_unpack_next(&u, w.sb.data, w.sb.size, &off) == MSGPACK_UNPACK_SUCCESS) {
        msgpack_print_json(stdout, &u.data);
        fputc('\n', stdout);
        rc = CTL_OK;
    }
    msgpack_unpacked_destroy(&u);
    if (only && !one) {
        ctl_error(path, 0, "no model %s in the snapshot", only);
        rc = CTL_BADINPUT;
    }
    if (skipped) /* printed what it could; said what it skipped */
        rc = CTL_BADINPUT;
out:
    drop_models(models, nmodels);
    calib_mpw_destroy(&w);
    config_free(&dc);
    free(data);
    return rc;
}

/* ------------------------------------------------------------------ merge */

typedef struct merged {
    model **m;
    size_t n, cap;
    double written;
    snapshot_counts counts; /* the files' summed */
} merged;

static model *find(const merged *g, const char *name)
{
    for (size_t i = 0; i < g->n; i++)
        if (strcmp(g->m[i]->name, name) == 0)
            return g->m[i];
    return NULL;
}

/* Every model of one file into g: a new name is added, a known one merged
 * into. Their times move onto the wall clock (the file's "mono" is its
 * "written"). CTL_OK or an exit code, the reason printed. */
static int merge_file(merged *g, const char *path, const model_cfg *defaults)
{
    size_t len;
    char *data = slurp(path, &len);
    if (!data)
        return CTL_BADINPUT;
    snapshot_head h;
    char err[700];
    int rc = CTL_BADINPUT;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    if (snapshot_open(data, len, &h, err, sizeof err) != 0) {
        ctl_error(path, 0, "%s", err);
        goto out;
    }
    if (h.written > g->written)
        g->written = h.written;
    snapshot_counts_add(&g->counts, &h.counts);
    size_t off = 0;
    uint64_t n = 0;
    int more;
    while ((more = snapshot_next(&h, &off, &u, err, sizeof err)) > 0 && n < h.models) {
        char name[CFG_NAME_MAX + 1];
        if (more == 2) { /* a merge of a damaged file would lose a model unsaid */
            ctl_error(path, 0, "%s", err);
            goto out;
        }
        model *m = rebuild(&u.data, defaults, h.written - h.mono, name, err, sizeof err);
        if (!m) {
            ctl_error(path, 0, "%s", err);
            goto out;
        }
        n++;
        model *into = find(g, m->name);
        if (into) {
            int bad = model_merge(into, m, err, sizeof err);
            drop_model(m);
            if (bad) {
                ctl_error(path, 0, "%s", err);
                goto out;
            }
            if (err[0])
                ctl_error(path, 0, "%s", err);
            continue;
        }
        if (g->n == g->cap) {
            size_t cap = g->cap ? 2 * g->cap : 16;
            model **v = realloc(g->m, cap * sizeof *v);
            if (!v) {
                ctl_error(path, 0, "out of memory");
                drop_model(m);
                rc = CTL_FAIL;
                goto out;
            }
            g->m = v;
            g->cap = cap;
        }
        g->m[g->n++] = m;
    }
    if (more < 0 || n != h.models) {
        ctl_error(path, 0, "%s", more < 0 ? err : "fewer models than the header says");
        goto out;
    }
    rc = CTL_OK;
out:
    msgpack_unpacked_destroy(&u);
    free(data);
    return rc;
}

/* 0 when the file of head then body reads back model by model, as
 * `calibctl snapshot` and calibd read it; -1 with err set. Sums of extreme
 * states can overflow (a count past 2^64, a sum past DBL_MAX) into one the
 * readers refuse: such a merge must fail, not write a file nothing reads
 * (tests/fuzz/corpus/snapshot/crash-merge_overflow). */
static int reads_back(const calib_mpw *head, const calib_mpw *body, const model_cfg *defaults,
                      char *err, size_t errlen)
{
    size_t len = head->sb.size + body->sb.size;
    char *data = malloc(len ? len : 1);
    if (!data) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(data, head->sb.data, head->sb.size);
    if (body->sb.size)
        memcpy(data + head->sb.size, body->sb.data, body->sb.size);
    snapshot_head h;
    int rc = snapshot_open(data, len, &h, err, errlen), more = 0;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    while (rc == 0 && (more = snapshot_next(&h, &off, &u, err, errlen)) > 0) {
        char name[CFG_NAME_MAX + 1];
        model *m = more == 1 ? rebuild(&u.data, defaults, 0, name, err, errlen) : NULL;
        if (!m)
            rc = -1;
        else
            drop_model(m);
    }
    msgpack_unpacked_destroy(&u);
    free(data);
    return rc == 0 && more == 0 ? 0 : -1;
}

int cmd_merge(int argc, char **argv)
{
    const char *out = NULL;
    const char *in[256];
    int nin = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0 && i + 1 < argc && !out)
            out = argv[++i];
        else if (argv[i][0] != '-' && nin < 256)
            in[nin++] = argv[i];
        else
            nin = -1000;
    }
    if (!out || nin < 1) {
        ctl_error(NULL, 0, "usage: calibctl merge FILE... -o OUT (up to 256 files)");
        return CTL_BADINPUT;
    }
    daemon_cfg dc;
    if (config_init(&dc) != 0) {
        ctl_error(NULL, 0, "out of memory");
        return CTL_FAIL;
    }
    merged g = {0};
    int rc = CTL_OK;
    for (int i = 0; i < nin && rc == CTL_OK; i++)
        rc = merge_file(&g, in[i], &dc.defaults);
    calib_mpw body, head;
    calib_mpw_init(&body);
    calib_mpw_init(&head);
    if (rc == CTL_OK) {
        for (size_t i = 0; i < g.n; i++)
            snapshot_pack_model(&body, g.m[i]);
        snapshot_frame(&head, body.sb.data, body.sb.size, g.n, g.written, g.written,
                       &g.counts);
        if (calib_mpw_error(&body) != CALIB_OK || calib_mpw_error(&head) != CALIB_OK) {
            ctl_error(NULL, 0, "out of memory");
            rc = CTL_FAIL;
        }
    }
    if (rc == CTL_OK) {
        char err[700];
        if (reads_back(&head, &body, &dc.defaults, err, sizeof err) != 0) {
            ctl_error(out, 0, "not written: the merged state would not read back (%s)", err);
            rc = CTL_BADINPUT;
        }
    }
    if (rc == CTL_OK) {
        /* written as calibd writes its state: atomically, in OUT's folder */
        char dir[4096], err[600];
        const char *slash = strrchr(out, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - out) : 1, slash ? out : ".");
        if (slash == out)
            snprintf(dir, sizeof dir, "/");
        state_part parts[2] = {{head.sb.data, head.sb.size}, {body.sb.data, body.sb.size}};
        if (state_write_parts(dir, slash ? slash + 1 : out, NULL, parts, 2, err, sizeof err) < 0) {
            ctl_error(NULL, 0, "%s", err);
            rc = CTL_FAIL;
        } else {
            printf("{\"ok\": true, \"files\": %d, \"models\": %zu, \"bytes\": %zu}\n", nin,
                   g.n, head.sb.size + body.sb.size);
        }
    }
    drop_models(g.m, g.n);
    calib_mpw_destroy(&body);
    calib_mpw_destroy(&head);
    config_free(&dc);
    return rc;
}
