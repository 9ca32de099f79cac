/* prom.h — calibd's metrics in the Prometheus text exposition format.
 * The daemon-wide families render into one text; the models' families
 * render into one text each, so that a family's samples stay together as
 * the format wants while the models are rendered one at a time, in slices
 * of the loop (http.c's rounds): first every family's header, then each
 * model's samples appended family by family. Loop thread only. */
#ifndef CALIBD_PROM_H
#define CALIBD_PROM_H

#include <stddef.h>

#include "textbuf.h"

struct calibd;
struct model;

/* The models' families, one text each, in the order rendered; their
 * buffers are kept from render to render. */
typedef struct prom_families {
    textbuf *f; /* [n], of cap */
    size_t n, cap;
} prom_families;

/* The daemon's own families appended to t. 0, or -1 out of memory (t then
 * holds part of them). */
int prom_daemon(textbuf *t, struct calibd *d);
/* Empties the families and writes each one's HELP and TYPE lines (and the
 * daemon's rejections, which share a family with the models'). 0 or -1. */
int prom_headers(prom_families *f, const struct calibd *d);
/* Model m's samples appended to the families, family by family. 0 or -1. */
int prom_model(prom_families *f, const struct model *m);
/* The bytes of all the families' texts. */
size_t prom_families_len(const prom_families *f);
/* Frees the families' texts (the list stays, for the next render). */
void prom_families_release(prom_families *f);
void prom_families_free(prom_families *f);

#endif
