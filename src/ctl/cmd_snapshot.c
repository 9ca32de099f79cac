/* cmd_snapshot.c — `calibctl snapshot FILE [MODEL]`: a calibd snapshot
 * (calibd(8), SNAPSHOTS) printed as the JSON `calibctl status` prints, by
 * the daemon's own code: each model is rebuilt from its stored
 * configuration, restored as calibd restores it, and packed by
 * control_pack_status. No daemon runs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/mpw.h"
#include "calibd.h"
#include "control.h"
#include "ctl.h"
#include "msgpack_json.h"
#include "snapshot.h"

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

/* One model of the file, rebuilt and restored; NULL with err set. */
static model *rebuild(const msgpack_object *o, const model_cfg *defaults, char *err,
                      size_t errlen)
{
    char name[CFG_NAME_MAX + 1], skipped[600];
    int shaped, form;
    size_t k;
    if (snapshot_model_head(o, name, &shaped, &form, &k, err, errlen) != 0)
        return NULL;
    model_cfg c = *defaults;
    snprintf(c.name, sizeof c.name, "%s", name);
    if (snapshot_model_cfg(o, &c, err, errlen) != 0)
        return NULL;
    model *m = malloc(sizeof *m);
    if (!m || model_init(m, &c, 0) != CALIB_OK) {
        snprintf(err, errlen, "%s: out of memory", name);
        free(m);
        return NULL;
    }
    int rc = 0;
    if (shaped && (rc = model_shape(m, form, k)) == CALIB_OK) {
        /* the loop as calibd attaches it, so that its state is restored */
        refit_init(&m->loop.refit, 1, c.refit_interval, 0);
        if (c.drift) {
            calib_drift_cfg dc;
            model_drift_cfg(m, &dc);
            rc = calib_drift_init(&m->loop.drift, &dc);
            m->loop.drift_on = rc == CALIB_OK;
        }
    }
    if (rc != CALIB_OK) {
        snprintf(err, errlen, "%s: %s", name, calib_strerror(rc));
    } else if (snapshot_restore_model(m, o, 0, 1, skipped, sizeof skipped, err, errlen) != 0) {
        rc = -1;
    } else if (skipped[0]) {
        ctl_error(NULL, 0, "%s: not restored: %s", name, skipped);
    }
    if (rc != CALIB_OK) {
        model_free(m);
        free(m);
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
    static calibd d; /* large: what control_pack_status reads of a daemon */
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
    d.started = h.written;
    d.messages = h.messages;
    memcpy(d.rejected, h.rejected, sizeof d.rejected);
    d.models = calloc(h.models ? h.models : 1, sizeof *d.models);
    if (!d.models || h.models > SIZE_MAX / sizeof *d.models) {
        ctl_error(path, 0, "out of memory for %llu models", (unsigned long long)h.models);
        goto out;
    }
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    int more;
    while ((more = snapshot_next(&h, &off, &u, err, sizeof err)) == 1 && d.nmodels < h.models) {
        model *m = rebuild(&u.data, &dc.defaults, err, sizeof err);
        if (!m)
            break;
        model_view_fill(m, h.written);
        d.models[d.nmodels++] = m;
    }
    msgpack_unpacked_destroy(&u);
    if (more < 0 || d.nmodels != h.models) {
        ctl_error(path, 0, "%s", more < 0 || err[0] ? err : "fewer models than the header says");
        goto out;
    }
    control_pack_status(&d, &w, only, only ? strlen(only) : 0);
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
    int found = !only;
    for (size_t i = 0; !found && i < d.nmodels; i++)
        found = strcmp(d.models[i]->name, only) == 0;
    if (!found) {
        ctl_error(path, 0, "no model %s in the snapshot", only);
        rc = CTL_BADINPUT;
    }
out:
    for (size_t i = 0; i < d.nmodels; i++) {
        model_free(d.models[i]);
        free(d.models[i]);
    }
    free(d.models);
    calib_mpw_destroy(&w);
    config_free(&dc);
    free(data);
    return rc;
}
