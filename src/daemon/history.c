/* history.c — each model's history kept, loaded and saved (see
 * history.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibd.h"
#include "history.h"
#include "state.h"

void history_init(history *y, size_t points, double step)
{
    hist_init(&y->h, points, step);
    pthread_mutex_init(&y->lock, NULL);
    calib_mpw_init(&y->w);
}

void history_free(history *y)
{
    history_stop(y);
    hist_free(&y->h);
    pthread_mutex_destroy(&y->lock);
    calib_mpw_destroy(&y->w);
}

void history_add(history *y, model *m, double wall)
{
    if (!m->shaped || !m->view.have)
        return;
    pthread_mutex_lock(&y->lock);
    if (m->hist < 0)
        m->hist = hist_find(&y->h, m->name, 1); /* -1 out of memory: next step */
    if (m->hist >= 0) {
        const calib_accum *raw = &m->view.w.stat[VIEW_RAW * WS_PER_VIEW + WS_MAIN],
                          *cal = &m->view.w.stat[VIEW_CAL * WS_PER_VIEW + WS_MAIN];
        double ci[2][2];
        calib_accum_ci95(raw, ci[0]);
        calib_accum_ci95(cal, ci[1]);
        /* the label-free estimate: corrected where there is a reference */
        const calib_lfree_fig *f = &m->lf.fig;
        calib_lfree_est e = {NAN, NAN, NAN};
        if (m->lf.rec && f->n)
            e = f->corrected ? f->corrected_est[CALIB_LFREE_MAIN] : f->naive[CALIB_LFREE_MAIN];
        hist_point p = {.t = wall,
                        .v = {(float)calib_accum_mean(raw), (float)ci[0][0], (float)ci[0][1],
                              (float)calib_accum_mean(cal), (float)ci[1][0], (float)ci[1][1],
                              (float)e.mean, (float)e.lo, (float)e.hi},
                        .n = raw->n > UINT32_MAX ? UINT32_MAX : (uint32_t)raw->n};
        hist_add(&y->h, (size_t)m->hist, &p);
    }
    pthread_mutex_unlock(&y->lock);
}

/* ------------------------------------------------------------ the file */

/* The history's file written from w; 0, or -1 with err set. */
static int write_file(const calibd *d, const calib_mpw *w, char *err, size_t errlen)
{
    if (calib_mpw_error(w)) {
        snprintf(err, errlen, "history: out of memory");
        return -1;
    }
    return state_write_file(d->cfg.state_dir, "history", w->sb.data, w->sb.size, err, errlen);
}

static void logged(calibd *d, int rc, const char *err)
{
    if (rc != 0)
        log_msg(&d->log, rc < 0 ? LOG_ERROR : LOG_WARN, "http", "%s", err);
}

int history_save(history *y, calibd *d)
{
    if (!y->h.cap)
        return 0;
    calib_mpw w;
    char err[ERR_MAX];
    calib_mpw_init(&w);
    hist_write(&y->h, &w); /* the loop's own: no lock to read it */
    int rc = write_file(d, &w, err, sizeof err);
    logged(d, rc, err);
    calib_mpw_destroy(&w);
    return rc < 0 ? -1 : 0;
}

/* The periodic save, a series at a time on the loop (the loop alone
 * changes the history, so it reads it without the lock), written by a
 * worker. */
static size_t series_now(void *arg)
{
    return ((history *)arg)->h.n;
}

static void save_series(void *arg, size_t i)
{
    history *y = arg;
    hist_write_series(&y->h, i, &y->w);
}

static void save_work(uv_work_t *req)
{
    history *y = req->data;
    y->rc = write_file(y->d, &y->w, y->err, sizeof y->err);
}

static void save_done(uv_work_t *req, int status)
{
    history *y = req->data;
    y->busy = 0;
    logged(y->d, status ? -1 : y->rc, status ? uv_strerror(status) : y->err);
}

static void series_packed(void *arg)
{
    history *y = arg;
    hist_write_end(&y->w);
    y->work.data = y;
    if (uv_queue_work(y->d->loop, &y->work, save_work, save_done) != 0) {
        save_work(&y->work); /* no worker: at once */
        save_done(&y->work, 0);
    }
}

int history_start(history *y, calibd *d)
{
    y->d = d;
    return slicer_init(&y->series, d->loop, series_now, save_series, series_packed, y);
}

void history_stop(history *y)
{
    slicer_close(&y->series);
}

double history_due(history *y, double wall, double now)
{
    double point_at = 0;
    if (y->h.cap && wall >= y->next_point) {
        y->next_point = wall + y->h.step;
        point_at = wall;
    }
    if (y->next_save == 0) {
        y->next_save = now + HISTORY_SAVE;
    } else if (y->h.cap && now >= y->next_save) {
        y->next_save = now + HISTORY_SAVE;
        if (!y->busy && y->series.ready) {
            y->busy = 1;
            calib_mpw_reset(&y->w);
            hist_write_begin(&y->h, &y->w);
            slicer_start(&y->series);
        }
    }
    return point_at;
}

void history_load(history *y, calibd *d)
{
    char *buf, err[ERR_MAX], moved[4400];
    size_t len;
    if (!y->h.cap)
        return;
    /* 64 bytes a point at most, as hist_write writes them */
    size_t max = 4096 + (d->cfg.history + 16) * 64 * (d->cfg.max_models + 16);
    int rc = state_read_file(d->cfg.state_dir, "history", max, &buf, &len, err, sizeof err);
    if (rc == 1)
        return;
    pthread_mutex_lock(&y->lock);
    if (rc == 0)
        rc = hist_read(&y->h, buf, len, err, sizeof err);
    size_t series = y->h.n;
    pthread_mutex_unlock(&y->lock);
    free(buf);
    if (rc == 0) {
        log_msg(&d->log, LOG_INFO, "http", "history of %zu models restored from %s/history",
                series, d->cfg.state_dir);
        return;
    }
    if (state_move_aside(d->cfg.state_dir, "history", moved, sizeof moved) == 0)
        log_msg(&d->log, LOG_WARN, "http", "%s/history: %s; moved aside to %s, the history "
                "starts anew", d->cfg.state_dir, err, moved);
    else
        log_msg(&d->log, LOG_WARN, "http", "%s/history: %s; it could not be moved aside "
                "(%s), the history starts anew", d->cfg.state_dir, err, strerror(errno));
}
