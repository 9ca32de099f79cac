/* state.c — durable per-model parameters. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calib/protocol.h"
#include "log.h"
#include "state.h"

static void state_path(char *buf, size_t len, const char *dir, const char *name,
                       const char *suffix)
{
    snprintf(buf, len, "%s/model.%s.params%s", dir, name, suffix);
}

/* fsync of a file or directory by path. */
static int sync_path(const char *path, int flags)
{
    int fd = open(path, flags);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

int state_write_file(const char *dir, const char *name, const void *data, size_t len,
                     char *err, size_t errlen)
{
    const state_part part = {data, len};
    return state_write_parts(dir, name, NULL, &part, 1, err, errlen);
}

/* f, the open path.tmp, made path: synced, closed, renamed, the directory
 * synced. 0; 1 when stored but the directory could not be synced; -1
 * (nothing stored, tmp removed). err says why. */
static int commit(const char *dir, const char *path, const char *tmp, FILE *f, char *err,
                  size_t errlen)
{
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
        int saved = errno;
        fclose(f);
        errno = saved;
        goto fail;
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        goto fail;
    /* renamed: the new content is the stored one from now on, whatever
     * follows */
    if (sync_path(dir, O_RDONLY | O_DIRECTORY) != 0) {
        snprintf(err, errlen, "%s stored, but the directory %s could not be synced: %s",
                 path, dir, strerror(errno));
        return 1;
    }
    return 0;
fail:
    snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
    unlink(tmp);
    return -1;
}

int state_write_parts(const char *dir, const char *name, const char *tag,
                      const state_part *parts, int n, char *err, size_t errlen)
{
    char path[4352], tmp[4480];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp%s%s", path, tag ? "." : "", tag ? tag : "");
    FILE *f = fopen(tmp, "we");
    if (!f) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (parts[i].len && fwrite(parts[i].data, 1, parts[i].len, f) != parts[i].len) {
            int saved = errno;
            fclose(f);
            unlink(tmp);
            snprintf(err, errlen, "cannot write %s: %s", path, strerror(saved));
            return -1;
        }
    return commit(dir, path, tmp, f, err, errlen);
}

FILE *state_open_tmp(const char *dir, const char *name, char *err, size_t errlen)
{
    char path[4360];
    snprintf(path, sizeof path, "%s/%s.tmp", dir, name);
    FILE *f = fopen(path, "we");
    if (!f)
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
    return f;
}

int state_commit_tmp(const char *dir, const char *name, FILE *f, const void *head, size_t len,
                     char *err, size_t errlen)
{
    char path[4352], tmp[4360];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (fflush(f) != 0 || pwrite(fileno(f), head, len, 0) != (ssize_t)len) {
        int saved = errno ? errno : EIO;
        fclose(f);
        unlink(tmp);
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(saved));
        return -1;
    }
    return commit(dir, path, tmp, f, err, errlen);
}

void state_drop_tmp(const char *dir, const char *name, FILE *f)
{
    char tmp[4360];
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name);
    fclose(f);
    unlink(tmp);
}

int state_save_params(const char *dir, const char *name, const model_params *p,
                      char *err, size_t errlen)
{
    char file[CFG_NAME_MAX + 32];
    char *text = NULL;
    size_t len = 0;
    snprintf(file, sizeof file, "model.%s.params", name);
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        snprintf(err, errlen, "cannot write %s/%s: %s", dir, file, strerror(errno));
        return -1;
    }
    fprintf(f, "# calibd: parameters of model %s, written before they were published\n"
               "version %llu\nmethod %s\nts %.17g\nfit_n %llu\nshadow_n %llu\n"
               "before %.17g %.17g\nafter %.17g %.17g\nimprovement %.17g %.17g %.17g\n",
            name, (unsigned long long)p->version, p->method, p->ts,
            (unsigned long long)p->fit_n, (unsigned long long)p->shadow_n, p->before[0],
            p->before[1], p->after[0], p->after[1], p->improvement, p->ci[0], p->ci[1]);
    for (unsigned i = 0; i < p->n; i++)
        fprintf(f, "param %s %.17g\n", p->desc ? p->desc->param_names[i] : "?", p->values[i]);
    /* a segment's values in the order of the param lines, then KEY=VALUE
     * to the end of the line (a value may hold spaces, never a newline) */
    if (p->nw && p->nw <= CALIB_PUBMSG_MAX_WEIGHTS) { /* the prior correction */
        fputs("prior_weights", f);
        for (unsigned j = 0; j < p->nw; j++)
            fprintf(f, " %.17g", p->w[j]);
        fprintf(f, "\nlabel_free %d\n", p->label_free ? 1 : 0);
    }
    for (unsigned i = 0; i < p->nseg && p->n; i++) {
        fputs("segment", f);
        for (unsigned j = 0; j < p->n; j++)
            fprintf(f, " %.17g", p->seg[i].values[j]);
        fprintf(f, " %s=%s\n", p->seg[i].key, p->seg[i].value);
    }
    if (ferror(f) | fclose(f)) {
        snprintf(err, errlen, "cannot write %s/%s: out of memory", dir, file);
        free(text);
        return -1;
    }
    int rc = state_write_file(dir, file, text, len, err, errlen);
    free(text);
    return rc;
}

int state_read_file(const char *dir, const char *name, size_t max, char **data, size_t *len,
                    char *err, size_t errlen)
{
    char path[4352];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT)
            return 1;
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    char *buf = NULL;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
        snprintf(err, errlen, "%s is not a regular file of at most %zu bytes", path, max);
        goto fail;
    }
    size_t n = (size_t)st.st_size;
    if (!(buf = malloc(n ? n : 1))) {
        snprintf(err, errlen, "cannot read %s: out of memory", path);
        goto fail;
    }
    if (fread(buf, 1, n, f) != n) {
        snprintf(err, errlen, "cannot read %s: %s", path, ferror(f) ? strerror(errno)
                 : "shorter than its size");
        goto fail;
    }
    fclose(f);
    *data = buf;
    *len = n;
    return 0;
fail:
    free(buf);
    fclose(f);
    return -1;
}

/* The first of NAME.bad, NAME.bad.1, NAME.bad.2, ... that does not exist
 * (into aside): an earlier file kept aside is never overwritten. 0, or -1
 * (errno EEXIST) when the first thousand are all taken. */
static int aside_name(const char *dir, const char *name, char *aside, size_t len)
{
    struct stat st;
    for (int i = 0; i < 1000; i++) {
        if (i == 0)
            snprintf(aside, len, "%s/%s.bad", dir, name);
        else
            snprintf(aside, len, "%s/%s.bad.%d", dir, name, i);
        if (lstat(aside, &st) != 0 && errno == ENOENT)
            return 0;
    }
    errno = EEXIST;
    return -1;
}

int state_move_aside(const char *dir, const char *name, char *moved, size_t movedlen)
{
    char path[4352];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (aside_name(dir, name, moved, movedlen) != 0)
        return -1;
    return rename(path, moved);
}

int state_keep_aside(const char *dir, const char *name, const void *data, size_t len,
                     char *kept, size_t keptlen)
{
    char err[ERR_MAX];
    if (aside_name(dir, name, kept, keptlen) != 0)
        return -1;
    const char *base = strrchr(kept, '/');
    const state_part part = {data, len};
    return state_write_parts(dir, base ? base + 1 : kept, NULL, &part, 1, err, sizeof err) < 0 ? -1 : 0;
}

/* "V1 ... Vn KEY=VALUE\n" of a segment, after the n param lines; 0 or -1. */
static int parse_segment(const char *s, model_params *p)
{
    if (!p->n || p->nseg >= CALIB_PUBMSG_MAX_SEGMENTS)
        return -1;
    calib_params_segment *sg = &p->seg[p->nseg];
    for (unsigned j = 0; j < p->n; j++) {
        int used = 0;
        if (sscanf(s, " %lf%n", &sg->values[j], &used) != 1 || !isfinite(sg->values[j]) ||
            s[used] != ' ')
            return -1;
        s += used;
    }
    s++;
    const char *eq = strchr(s, '='), *end = strchr(s, '\n');
    if (!end) /* a last line without its newline */
        end = s + strlen(s);
    size_t klen = eq ? (size_t)(eq - s) : 0, vlen = eq && end > eq ? (size_t)(end - eq - 1) : 0;
    if (!eq || !end || !calib_proto_seg_key_ok(s, klen) || !calib_proto_seg_value_ok(eq + 1, vlen))
        return -1;
    memcpy(sg->key, s, klen);
    sg->key[klen] = 0;
    memcpy(sg->value, eq + 1, vlen);
    sg->value[vlen] = 0;
    p->nseg++;
    return 0;
}

/* "W1 ... WK\n": the prior correction, once; 0 or -1. */
static int parse_weights(const char *s, model_params *p)
{
    unsigned n = 0;
    if (p->nw)
        return -1;
    for (char *end; *s && *s != '\n'; s = end) {
        if (n == CALIB_PUBMSG_MAX_WEIGHTS)
            return -1;
        p->w[n] = strtod(s, &end);
        if (end == s)
            return -1;
        n++;
        while (*end == ' ')
            end++;
    }
    if (!calib_prior_weights_ok(p->w, n))
        return -1;
    p->nw = n;
    return 0;
}

/* One "key value..." line into p; 0, or -1 if malformed. */
static int parse_line(const char *line, model_params *p, state_param_names names,
                      unsigned *seen)
{
    unsigned long long u;
    char word[CALIB_PLUGIN_NAME_MAX + 1];
    double a, b, c;
    if (line[0] == '#' || line[0] == '\n')
        return 0;
    if (sscanf(line, "version %llu", &u) == 1)
        return p->version = u, *seen |= 1, 0;
    if (sscanf(line, "method %63[A-Za-z0-9._-]", p->method) == 1)
        return *seen |= 2, 0;
    if (sscanf(line, "ts %lf", &a) == 1)
        return p->ts = a, 0;
    if (sscanf(line, "fit_n %llu", &u) == 1)
        return p->fit_n = u, 0;
    if (sscanf(line, "shadow_n %llu", &u) == 1)
        return p->shadow_n = u, 0;
    if (sscanf(line, "before %lf %lf", &a, &b) == 2)
        return p->before[0] = a, p->before[1] = b, 0;
    if (sscanf(line, "after %lf %lf", &a, &b) == 2)
        return p->after[0] = a, p->after[1] = b, 0;
    if (sscanf(line, "improvement %lf %lf %lf", &a, &b, &c) == 3)
        return p->improvement = a, p->ci[0] = b, p->ci[1] = c, 0;
    if (sscanf(line, "param %63s %lf", word, &a) == 2 && isfinite(a) && p->n < PARAMS_MAX &&
        !p->nseg) {
        snprintf(names[p->n], sizeof names[p->n], "%s", word);
        p->values[p->n++] = a;
        return 0;
    }
    if (strncmp(line, "segment ", 8) == 0)
        return parse_segment(line + 8, p);
    if (strncmp(line, "prior_weights ", 14) == 0)
        return parse_weights(line + 14, p);
    if (sscanf(line, "label_free %llu", &u) == 1 && u <= 1)
        return p->label_free = (int)u, 0;
    return -1;
}

int state_load_params(const char *dir, const char *name, model_params *p,
                      state_param_names names, char *err, size_t errlen)
{
    /* a segment's line: 8 + 8 x 25 + 130 bytes at most; the weights':
     * 14 + 64 x 25 */
    char path[4352], line[2048];
    state_path(path, sizeof path, dir, name, "");
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT)
            return 1;
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    memset(p, 0, sizeof *p);
    unsigned seen = 0, lineno = 0;
    int rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            rc = -1;
            break;
        }
        if (parse_line(line, p, names, &seen) != 0) {
            rc = -1;
            break;
        }
    }
    fclose(f);
    if (rc != 0) {
        snprintf(err, errlen, "%s:%u: not a line calibd writes", path, lineno);
        return -1;
    }
    if (seen != 3 || p->n == 0) {
        snprintf(err, errlen, "%s: no version, method or parameters", path);
        return -1;
    }
    return 0;
}

int state_params_by_name(model_params *p, state_param_names names,
                         const calib_plugin *desc, char *err, size_t errlen)
{
    double v[PARAMS_MAX];
    unsigned found = 0;
    for (unsigned i = 0; i < desc->nparams; i++) {
        unsigned hits = 0;
        for (unsigned j = 0; j < p->n; j++)
            if (strcmp(names[j], desc->param_names[i]) == 0) {
                v[i] = p->values[j];
                hits++;
            }
        if (hits != 1) {
            snprintf(err, errlen, "%s parameter %s is %s", desc->name, desc->param_names[i],
                     hits ? "stored twice" : "not stored");
            return -1;
        }
        found++;
    }
    if (found != p->n) {
        snprintf(err, errlen, "%u parameters stored, %s has %u (%s, ...)", p->n, desc->name,
                 desc->nparams, desc->param_names[0]);
        return -1;
    }
    memcpy(p->values, v, desc->nparams * sizeof *v);
    /* the segments' values were stored in the order of the param lines */
    for (unsigned e = 0; e < p->nseg; e++) {
        double sv[PARAMS_MAX];
        for (unsigned i = 0; i < desc->nparams; i++)
            for (unsigned j = 0; j < p->n; j++)
                if (strcmp(names[j], desc->param_names[i]) == 0)
                    sv[i] = p->seg[e].values[j];
        memcpy(p->seg[e].values, sv, desc->nparams * sizeof *sv);
        char why[ERR_MAX];
        if (calib_plugin_params_check(desc, p->seg[e].values, why, sizeof why) != CALIB_OK) {
            snprintf(err, errlen, "segment %s=%s: %s", p->seg[e].key, p->seg[e].value, why);
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ the directory */

int state_lock(const char *dir, char *err, size_t errlen)
{
    char path[4352];
    if (mkdir(dir, 0750) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "state directory %s: %s", dir, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof path, "%s/lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = 0;
        pid[strcspn(pid, "\n")] = 0;
        if (e == EWOULDBLOCK)
            snprintf(err, errlen, "state directory %s is in use by another calibd "
                     "(pid %s, holding %s); one daemon per state directory", dir,
                     pid[0] ? pid : "unknown", path);
        else
            snprintf(err, errlen, "cannot lock %s: %s", path, strerror(e));
        close(fd);
        return -1;
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* A name calibd writes as a temporary file. */
static int stale_name(const char *name)
{
    size_t len = strlen(name);
    if (strcmp(name, "endpoints.tmp") == 0 || strcmp(name, "history.tmp") == 0 ||
        strcmp(name, "snapshot.tmp") == 0)
        return 1;
    return len > strlen("model..params.tmp") && strncmp(name, "model.", 6) == 0 &&
           strcmp(name + len - strlen(".params.tmp"), ".params.tmp") == 0;
}

int state_remove_stale(const char *dir, void (*report)(void *arg, const char *name),
                       void *arg)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return -1;
    int removed = 0;
    struct dirent *e;
    char path[4352];
    while ((e = readdir(dp))) {
        if (!stale_name(e->d_name))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) == 0) {
            removed++;
            report(arg, e->d_name);
        }
    }
    closedir(dp);
    return removed;
}
