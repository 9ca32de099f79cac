/* budget.c — byte budgets shared by structures that grow (calib.h). */
#include <stdlib.h>

#include "calib/calib.h"

void calib_budget_init(calib_budget *b, size_t limit, calib_budget *parent)
{
    *b = (calib_budget){.limit = limit, .parent = parent};
}

int calib_budget_take(calib_budget *b, size_t n)
{
    for (calib_budget *p = b; p; p = p->parent)
        if (p->used > p->limit || n > p->limit - p->used) {
            for (calib_budget *q = b; q != p->parent; q = q->parent)
                q->refused++; /* b's and its parents' up to p */
            return CALIB_ENOMEM;
        }
    for (calib_budget *p = b; p; p = p->parent)
        p->used += n;
    return CALIB_OK;
}

void calib_budget_give(calib_budget *b, size_t n)
{
    for (calib_budget *p = b; p; p = p->parent)
        p->used = n < p->used ? p->used - n : 0;
}

void *calib_budget_grow(calib_budget *b, void *p, size_t had, size_t want)
{
    if (want < had || calib_budget_take(b, want - had) != CALIB_OK)
        return NULL;
    void *q = realloc(p, want ? want : 1);
    if (!q)
        calib_budget_give(b, want - had);
    return q;
}
