/* state.h — what calibd keeps on disk across restarts: each model's current
 * parameters (and so its version), written durably before they are sent. */
#ifndef CALIBD_STATE_H
#define CALIBD_STATE_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "model.h"

/*
 * STATE_DIR/model.NAME.params, a text file of "key value" lines (see
 * calibd(8), FILES). Saving writes a temporary file, fsyncs it, renames it
 * over the old one and fsyncs the directory: after a crash the file holds
 * the old or the new parameters in full. Returns 0; 1 when the file was
 * replaced but the directory's fsync failed (the new parameters are the
 * stored ones, but may not survive a power loss), with err set; -1 with
 * err set when nothing was replaced.
 */
int state_save_params(const char *dir, const char *name, const model_params *p,
                      char *err, size_t errlen);

/*
 * Writes len bytes of data as STATE_DIR/NAME the same way (NAME.tmp,
 * fsync, rename, directory fsync). Returns as state_save_params.
 */
int state_write_file(const char *dir, const char *name, const void *data, size_t len,
                     char *err, size_t errlen);
/* The same for a file written in parts, one after the other. */
typedef struct state_part {
    const void *data;
    size_t len;
} state_part;
/* tag: the temporary file is NAME.tmp.TAG (NULL: NAME.tmp), for a
 * directory that several writers share (kafka.h) */
int state_write_parts(const char *dir, const char *name, const char *tag,
                      const state_part *parts, int n, char *err, size_t errlen);
/* A file written in pieces over time (a snapshot's body, streamed): NAME.tmp
 * opened for writing (NULL, err set, when it cannot be), then either
 * committed -- len bytes of head written over its start, synced, renamed
 * to NAME, the directory synced, returning as state_write_parts (f closed
 * whatever happens) -- or dropped (closed and removed). */
FILE *state_open_tmp(const char *dir, const char *name, char *err, size_t errlen);
int state_commit_tmp(const char *dir, const char *name, FILE *f, const void *head, size_t len,
                     char *err, size_t errlen);
void state_drop_tmp(const char *dir, const char *name, FILE *f);
/*
 * Reads STATE_DIR/NAME, a regular file of at most max bytes, into *data
 * (malloc'd, the caller frees it) and *len. Returns 0; 1 when there is no
 * such file; -1 with err set when it cannot be read.
 */
int state_read_file(const char *dir, const char *name, size_t max, char **data, size_t *len,
                    char *err, size_t errlen);
/* Renames STATE_DIR/NAME to NAME.bad, or NAME.bad.1, .2, ... where that is
 * taken (the path in moved): a file that cannot be trusted is kept for a
 * human, and not read again; an earlier one is never overwritten. 0 or -1
 * (errno set). */
int state_move_aside(const char *dir, const char *name, char *moved, size_t movedlen);
/* The same for a copy of data (the file stays in place, to be written over
 * later): into the path in kept. 0 or -1 (errno set). */
int state_keep_aside(const char *dir, const char *name, const void *data, size_t len,
                     char *kept, size_t keptlen);

/* The names of stored parameters, in the file's order. */
typedef char state_param_names[PARAMS_MAX][CALIB_PLUGIN_NAME_MAX + 1];

/*
 * Reads the stored parameters of model into p and their names into names,
 * in the file's order (desc left NULL: the caller resolves p->method, then
 * orders the values with state_params_by_name). Returns 1 if there are
 * none, 0 when read, -1 with err set when the file exists but cannot be
 * trusted.
 */
int state_load_params(const char *dir, const char *name, model_params *p,
                      state_param_names names, char *err, size_t errlen);

/*
 * Puts p's values in the order of desc->param_names by their stored names:
 * a method's parameters are restored by name, never by position. 0, or -1
 * with err set when a name is missing, unknown to the method, or twice.
 */
int state_params_by_name(model_params *p, state_param_names names,
                         const calib_plugin *desc, char *err, size_t errlen);

/*
 * Makes the state directory if need be and takes its lock, STATE_DIR/lock:
 * an exclusive flock(2) held on an open descriptor (close-on-exec, so no
 * child keeps it) for the life of the process, with the holder's pid
 * written in the file. Returns the descriptor; -1 with err set, naming the
 * holder's pid, when another process holds it or the directory cannot be
 * used. Two daemons on one directory would publish versions over each
 * other's.
 */
int state_lock(const char *dir, char *err, size_t errlen);

/*
 * Removes the temporary files a crash can leave behind (model.*.params.tmp,
 * endpoints.tmp): they are never read, and only a daemon holding the lock
 * writes them. Calls report(arg, name) for each one removed; returns how
 * many, or -1 if the directory cannot be read.
 */
int state_remove_stale(const char *dir, void (*report)(void *arg, const char *name),
                       void *arg);

#endif
