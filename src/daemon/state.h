/* state.h — what calibd keeps on disk across restarts: each model's current
 * parameters (and so its version), written durably before they are sent. */
#ifndef CALIBD_STATE_H
#define CALIBD_STATE_H

#include <stddef.h>

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
 * Reads the stored parameters of model into p (desc left NULL: the caller
 * resolves p->method). Returns 1 if there are none, 0 when read, -1 with
 * err set when the file exists but cannot be trusted.
 */
int state_load_params(const char *dir, const char *name, model_params *p, char *err,
                      size_t errlen);

#endif
