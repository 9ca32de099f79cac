/* cs.c — a confidence sequence for a bounded mean by betting (see cs.h and
 * calib_cs(3)): Waudby-Smith & Ramdas's hedged capital process with
 * predictable plug-in bets, on an adaptive grid of candidate means. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "calib/cs.h"
#include "vec4.h"

/* Every factor lies in [1 - c, 1 + lambda] = [2^-1, 1 + lambda]: after
 * factors of at most FOLD_BITS bits in all since its last fold, a product
 * part lies in [2^-FOLD_BITS, 2^FOLD_BITS], and so does the product of the
 * two parts a test forms, far from underflow and overflow. */
#define FOLD_BITS 500.0

/* Arrays in the one allocation: lp pp ap qp lm pm am qm m cp cm tp tm,
 * scratch (5). */
#define ARRAYS 18

/* The lattice: [0, 1] in 2^52 units. */
#define UNIT ((uint64_t)1 << CALIB_CS_LATTICE_BITS)

#define VN 4 /* lanes of calib_vec4 (vec4.h) */

static int cfg_ok(double lo, double hi, double alpha)
{
    /* the level ln(2 / alpha) finite: a smaller alpha is no test */
    return isfinite(lo) && isfinite(hi) && lo < hi && isfinite(hi - lo) &&
           alpha > 0 && alpha < 1 && isfinite(2 / alpha);
}

static uint32_t grid_size(uint32_t grid)
{
    if (grid == 0)
        return CALIB_CS_GRID;
    return grid >= CALIB_CS_GRID_MIN && grid <= CALIB_CS_GRID_MAX ? grid : 0;
}

size_t calib_cs_bytes(uint32_t grid)
{
    return (size_t)grid_size(grid) * ARRAYS * sizeof(double);
}

/* n ln(1 - c): every factor is at least 1 - c, so no capital is below it. */
static double cs_floor(uint64_t n)
{
    return (double)n * log1p(-CALIB_CS_TRUNC);
}

/* The product at or above which l + ln p may have reached the level:
 * exp(level - l) (+inf for a very negative l: never). */
static double trigger(const calib_cs *cs, double l)
{
    return exp(cs->level - l);
}

static double lattice(uint64_t k)
{
    return ldexp((double)k, -CALIB_CS_LATTICE_BITS); /* exact: k <= 2^52 */
}

/* m_j, c / m_j and c / (1 - m_j) of the current grid. */
static void derive_grid(calib_cs *cs)
{
    for (uint32_t j = 0; j < cs->gsize; j++) {
        double m = lattice(cs->gbase + j * cs->gstride);
        cs->m[j] = m;
        /* a bet on a side that cannot lose (m = 0 for K+) has no cap */
        cs->cp[j] = m > 0 ? CALIB_CS_TRUNC / m : INFINITY;
        cs->cm[j] = m < 1 ? CALIB_CS_TRUNC / (1 - m) : INFINITY;
    }
}

/* Folds candidate j's product parts into its log parts. */
static void fold(calib_cs *cs, uint32_t j)
{
    cs->lp[j] += log(cs->pp[j]);
    cs->ap[j] += log(cs->qp[j]);
    cs->pp[j] = cs->qp[j] = 1;
    cs->tp[j] = trigger(cs, cs->lp[j] + cs->ap[j]);
    cs->lm[j] += log(cs->pm[j]);
    cs->am[j] += log(cs->qm[j]);
    cs->pm[j] = cs->qm[j] = 1;
    cs->tm[j] = trigger(cs, cs->lm[j] + cs->am[j]);
}

static void fold_all(calib_cs *cs)
{
    for (uint32_t j = cs->first; j < cs->last; j++)
        fold(cs, j);
    cs->fold_bits = 0;
}

/* ------------------------------------------------------------------ grids */

/* The candidates of a CS as a source of lower bounds: m ascending, and
 * the folded parts M+, A+, M-, A-; `floor` where a source has none. */
typedef struct pts {
    const double *m, *mp, *ap, *mm, *am;
    uint32_t k;
    double floor;
} pts;

/* Copies cs's candidates into buf (5 grid doubles). An empty cs stopped
 * multiplying its factors: only its floor still bounds its capitals. */
static void take_points(const calib_cs *cs, double *buf, pts *p)
{
    uint32_t k = cs->empty ? 0 : cs->last - cs->first;
    size_t g = cs->grid;
    double *m = buf, *mp = buf + g, *ap = buf + 2 * g, *mm = buf + 3 * g,
           *am = buf + 4 * g;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t j = cs->first + i;
        m[i] = cs->m[j];
        mp[i] = cs->lp[j] + log(cs->pp[j]);
        ap[i] = cs->ap[j] + log(cs->qp[j]);
        mm[i] = cs->lm[j] + log(cs->pm[j]);
        am[i] = cs->am[j] + log(cs->qm[j]);
    }
    *p = (pts){.m = m, .mp = mp, .ap = ap, .mm = mm, .am = am, .k = k,
               .floor = cs_floor(cs->n)};
}

/* The number of candidates of p below mu (binary search: m ascending). */
static uint32_t pts_below(const pts *p, double mu)
{
    uint32_t lo = 0, hi = p->k;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (p->m[mid] < mu)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/*
 * Lower bounds of ln K+(mu) and ln K-(mu) from p, i = pts_below(p, mu):
 * at a candidate, its own (the lattice is exact: an old candidate is found
 * again); between two, M from the neighbour that monotonicity allows
 * (above for K+, below for K-) and A from the chord (A is concave);
 * beyond the candidates, the nearest one where monotonicity allows it (K+
 * below them, K- above), else the floor.
 */
static void pts_bounds(const pts *p, double mu, uint32_t i, double *plus,
                       double *minus)
{
    if (i < p->k && p->m[i] == mu) {
        *plus = p->mp[i] + p->ap[i];
        *minus = p->mm[i] + p->am[i];
    } else if (i == 0) {
        *plus = p->k ? p->mp[0] + p->ap[0] : p->floor;
        *minus = p->floor;
    } else if (i == p->k) {
        *plus = p->floor;
        *minus = p->mm[i - 1] + p->am[i - 1];
    } else {
        double w = (mu - p->m[i - 1]) / (p->m[i] - p->m[i - 1]);
        *plus = p->mp[i] + p->ap[i - 1] + w * (p->ap[i] - p->ap[i - 1]);
        *minus = p->mm[i - 1] + p->am[i - 1] + w * (p->am[i] - p->am[i - 1]);
    }
}

/*
 * Lays the grid of `size` candidates (gbase + j gstride) 2^-52, every
 * candidate's M starting from the sum over the sources of their lower
 * bounds (one source for a refinement; two, the capitals multiplied, for
 * a merge) and its A from 0, and all of it kept.
 */
static void lay(calib_cs *cs, uint64_t base, uint64_t stride, uint32_t size,
                const pts *src, int nsrc)
{
    cs->gbase = base;
    cs->gstride = stride;
    cs->gsize = size;
    cs->refines++;
    derive_grid(cs);
    uint32_t at[2] = {0, 0};
    for (uint32_t j = 0; j < size; j++) {
        double mu = cs->m[j], vp = 0, vm = 0;
        for (int s = 0; s < nsrc; s++) {
            const pts *p = &src[s];
            uint32_t i = at[s];
            while (i < p->k && p->m[i] < mu)
                i++; /* the first candidate at or above mu */
            at[s] = i;
            double bp, bm;
            pts_bounds(p, mu, i, &bp, &bm);
            vp += bp;
            vm += bm;
        }
        cs->lp[j] = vp;
        cs->lm[j] = vm;
        cs->ap[j] = cs->am[j] = 0;
        cs->pp[j] = cs->qp[j] = cs->pm[j] = cs->qm[j] = 1;
        cs->tp[j] = trigger(cs, vp);
        cs->tm[j] = trigger(cs, vm);
    }
    cs->first = 0;
    cs->last = size;
    cs->fold_bits = 0;
}

/* The candidates still in the set: [first + low_out, last - high_out). */
static uint32_t inside(const calib_cs *cs)
{
    uint32_t a = cs->first + (uint32_t)cs->low_out;
    uint32_t b = cs->last - (uint32_t)cs->high_out;
    return b > a ? b - a : 0;
}

/*
 * After exclusions. Empty once one candidate is left: it is then excluded
 * by one side at least (a bracket not excluded is 0 or 1, and they cannot
 * meet), and everything beyond it by the other side or by [0, 1]. Fewer
 * than grid / 4 candidates in the set: a finer grid over the brackets,
 * its stride the old one over the largest power of two 2^r that keeps it
 * within `grid` candidates (and at least CALIB_CS_MIN_STRIDE), so that old
 * candidate first + i is new candidate i 2^r, values and all, and the
 * brackets keep their flags. Once the stride is minimal the set may lie
 * between two adjacent candidates, reported as their bracket.
 */
static void shrink(calib_cs *cs)
{
    if (cs->first + 1 >= cs->last) {
        cs->empty = 1;
        return;
    }
    if (inside(cs) >= cs->grid / 4)
        return;
    uint64_t spans = cs->last - 1 - cs->first; /* >= 1 */
    unsigned r = 0;
    while ((cs->gstride >> (r + 1)) >= CALIB_CS_MIN_STRIDE &&
           (spans << (r + 1)) + 1 <= cs->grid)
        r++;
    if (r == 0)
        return;
    pts p;
    take_points(cs, cs->scratch, &p);
    lay(cs, cs->gbase + cs->first * cs->gstride, cs->gstride >> r,
        (uint32_t)((spans << r) + 1), &p, 1);
}

/*
 * Excludes every candidate whose capital reached the level: one excluded
 * by K+ takes every m below it along (K+ is nonincreasing in m), one
 * excluded by K- every m above it. A scan of every candidate kept, after a
 * merge.
 */
static void settle(calib_cs *cs)
{
    uint32_t a = cs->first, b = cs->last, up = a, down = b;
    int low_out = cs->low_out, high_out = cs->high_out;
    fold_all(cs);
    for (uint32_t j = a; j < b; j++) {
        if (cs->lp[j] + cs->ap[j] >= cs->level)
            up = j, low_out = 1;
        if (cs->lm[j] + cs->am[j] >= cs->level && down == b)
            down = j, high_out = 1;
    }
    if (up >= down && down < b) { /* everything is excluded */
        cs->empty = 1;
        return;
    }
    cs->first = up;
    cs->low_out = low_out;
    cs->last = down < b ? down + 1 : b;
    cs->high_out = high_out;
    shrink(cs);
}

/*
 * The same after a value, at the two ends only. The lower bounds are
 * monotone along the grid like the capitals themselves: l+ nonincreasing
 * and l- nondecreasing in m, at the start (all 0), after a refinement or a
 * merge (each new candidate takes a neighbour's M, or the floor, which is
 * below every bound, and a chord of A, which is monotone), and after every
 * factor (monotone in m too). So K+ reaches the level first at the lowest
 * candidate in the set and K- at the highest, and a value needs only their
 * tests. The tests reach the opposite bracket too: a candidate excluded by
 * both sides empties the set.
 */
static void settle_ends(calib_cs *cs)
{
    int moved = 0;
    for (;;) {
        uint32_t j = cs->first + (uint32_t)cs->low_out;
        if (j >= cs->last || !(cs->pp[j] * cs->qp[j] >= cs->tp[j]))
            break;
        fold(cs, j);
        if (cs->lp[j] + cs->ap[j] < cs->level)
            break; /* the trigger's rounding: not yet */
        cs->first = j;
        cs->low_out = 1;
        moved = 1;
    }
    for (;;) {
        if (cs->last < 1 + (uint32_t)cs->high_out)
            break;
        uint32_t j = cs->last - 1 - (uint32_t)cs->high_out;
        if (j < cs->first || !(cs->pm[j] * cs->qm[j] >= cs->tm[j]))
            break;
        fold(cs, j);
        if (cs->lm[j] + cs->am[j] < cs->level)
            break;
        cs->last = j + 1;
        cs->high_out = 1;
        moved = 1;
    }
    if (moved)
        shrink(cs);
}

/* ------------------------------------------------------------------ API */

void calib_cs_reset(calib_cs *cs)
{
    if (!cs || !cs->m)
        return;
    cs->n = cs->clamped = cs->refines = 0;
    cs->sum = cs->sq = 0;
    cs->low_out = cs->high_out = cs->empty = 0;
    /* 2^p + 1 candidates over [0, 1], the most within `grid` */
    unsigned p = 0;
    while (((uint64_t)2 << p) + 1 <= cs->grid)
        p++;
    cs->gbase = 0;
    cs->gstride = UNIT >> p;
    cs->gsize = (1u << p) + 1;
    derive_grid(cs);
    for (uint32_t j = 0; j < cs->gsize; j++) {
        cs->lp[j] = cs->ap[j] = cs->lm[j] = cs->am[j] = 0;
        cs->pp[j] = cs->qp[j] = cs->pm[j] = cs->qm[j] = 1;
        cs->tp[j] = cs->tm[j] = trigger(cs, 0);
    }
    cs->first = 0;
    cs->last = cs->gsize;
    cs->fold_bits = 0;
}

int calib_cs_init(calib_cs *cs, double lo, double hi, double alpha, uint32_t grid)
{
    if (!cs)
        return CALIB_EINVAL;
    *cs = (calib_cs){0};
    uint32_t g = grid_size(grid);
    if (!cfg_ok(lo, hi, alpha) || g == 0)
        return CALIB_EINVAL;
    double *block = malloc(calib_cs_bytes(g));
    if (!block)
        return CALIB_ENOMEM;
    /* ln(1 / (theta alpha)) with theta = 1/2: a side excludes m once its
     * capital reaches 2 / alpha, i.e. max(K+, K-) / 2 >= 1 / alpha */
    *cs = (calib_cs){.lo = lo, .hi = hi, .alpha = alpha, .grid = g,
                     .level = log(2 / alpha), .init_lo = lo, .init_hi = hi,
                     .init_alpha = alpha, .init_grid = g};
    double **arrays[] = {&cs->lp, &cs->pp, &cs->ap, &cs->qp, &cs->lm,
                         &cs->pm, &cs->am, &cs->qm, &cs->m, &cs->cp,
                         &cs->cm, &cs->tp, &cs->tm, &cs->scratch};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        *arrays[i] = block + i * g; /* scratch last: 5 g */
    calib_cs_reset(cs);
    return CALIB_OK;
}

int calib_cs_copy(calib_cs *dst, const calib_cs *src)
{
    *dst = *src;
    if (!src->lp) /* never initialised, or freed */
        return CALIB_OK;
    size_t bytes = calib_cs_bytes(src->grid);
    double *block = malloc(bytes);
    if (!block) {
        *dst = (calib_cs){0};
        return CALIB_ENOMEM;
    }
    memcpy(block, src->lp, bytes);
    /* every array is in the block that lp starts: each keeps its place */
    double **arrays[] = {&dst->lp, &dst->pp, &dst->ap, &dst->qp, &dst->lm,
                         &dst->pm, &dst->am, &dst->qm, &dst->m, &dst->cp,
                         &dst->cm, &dst->tp, &dst->tm, &dst->scratch};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        *arrays[i] = block + (*arrays[i] - src->lp);
    return CALIB_OK;
}

void calib_cs_free(calib_cs *cs)
{
    if (!cs)
        return;
    free(cs->lp); /* the block */
    *cs = (calib_cs){0};
}

/* ln(1 + t) for the bet, of t rounded down to its 8 leading bits: it
 * moves the bet by under 0.05% (ln(1 + t) is flat: t' >= t (1 - 2^-7)), is
 * a function of t alone, and takes a log once per 2^(bits of t - 8) values,
 * kept in the cache ln_key, ln_val (a pair that is always consistent, so
 * it needs no reset and no snapshot; 0: empty). Any predictable bet keeps
 * the guarantee; this one saves a log1p (~8 ns) a value. */
static double bet_ln1p(calib_cs *cs, uint64_t t)
{
    if (t == 0) /* n + 1 wrapped (a crafted snapshot's n): the largest t */
        t = UINT64_MAX;
    unsigned bits = 0;
#if defined(__GNUC__)
    bits = 64 - (unsigned)__builtin_clzll(t);
#else
    for (uint64_t v = t; v; v >>= 1)
        bits++;
#endif
    uint64_t key = bits > 8 ? t >> (bits - 8) << (bits - 8) : t;
    if (key != cs->ln_key) {
        cs->ln_val = log1p((double)key);
        cs->ln_key = key;
    }
    return cs->ln_val;
}

/* The predictable plug-in bet for value t = n + 1 (WSR 2024, Section 4):
 * lambda_t = sqrt(2 ln(2 / alpha) / (s2_{t-1} t ln(1 + t'))) (t' of
 * bet_ln1p; the paper has t), with
 * s2_{t-1} = (1/4 + sq) / t. Its rate, 1 / sqrt(t ln t), keeps the CS
 * tight at every t rather than at one n chosen in advance. */
static double bet(calib_cs *cs)
{
    double t = (double)cs->n + 1, s2 = (0.25 + cs->sq) / t;
    return sqrt(2 * cs->level / (s2 * t * bet_ln1p(cs, cs->n + 1)));
}

/*
 * One factor per side and candidate kept: two multiplications, no log,
 * no test (the ends are tested after, and the products folded into the
 * logs before the bits they may have gathered reach FOLD_BITS). While the
 * bet is below every candidate's caps c / m and c / (1 - m) (all but the
 * first values of a stream that is not almost constant), the factors are
 * 1 + lambda y - lambda m and 1 - lambda y + lambda m, logs of positive
 * affine functions of m over the whole kept range: concave, they go to
 * the A parts (q). The others go to the M parts (p).
 */
/* qp[j] *= up - lambda m[j] and qm[j] *= down + lambda m[j] for j in
 * [j, b): the factors of every candidate whose caps the bet is below. */
CALIB_CLONES
static void scale_parts(double *restrict qp, double *restrict qm, const double *restrict m,
                        uint32_t j, uint32_t b, double up, double down, double lambda)
{
#ifdef CALIB_VEC4
    const calib_vec4 vup = {up, up, up, up}, vdown = {down, down, down, down};
    const calib_vec4 vl = {lambda, lambda, lambda, lambda};
    for (; j + VN <= b; j += VN) {
        calib_vec4 mj, p, q;
        memcpy(&mj, m + j, sizeof mj);
        memcpy(&p, qp + j, sizeof p);
        memcpy(&q, qm + j, sizeof q);
        calib_vec4 lm = vl * mj;
        p *= vup - lm;
        q *= vdown + lm;
        memcpy(qp + j, &p, sizeof p);
        memcpy(qm + j, &q, sizeof q);
    }
#endif
    for (; j < b; j++) {
        qp[j] *= up - lambda * m[j];
        qm[j] *= down + lambda * m[j];
    }
}

static void update(calib_cs *cs, double y, double lambda)
{
    /* log2(1 + lambda) <= lambda / ln 2; and a factor may also halve */
    double bits = lambda * 1.4426950408889634;
    bits = bits > 1 ? bits : 1;
    if (cs->fold_bits + bits > FOLD_BITS)
        fold_all(cs);
    cs->fold_bits += bits;
    uint32_t j = cs->first;
    const uint32_t b = cs->last;
    const double *m = cs->m;
    if (lambda <= cs->cp[b - 1] && lambda <= cs->cm[j]) {
        scale_parts(cs->qp, cs->qm, m, j, b, 1 + lambda * y, 1 - lambda * y, lambda);
    } else {
        const double *cp = cs->cp, *cm = cs->cm;
        double *pp = cs->pp, *pm = cs->pm;
        for (; j < b; j++) {
            double d = y - m[j];
            double bp = lambda < cp[j] ? lambda : cp[j];
            double bm = lambda < cm[j] ? lambda : cm[j];
            pp[j] *= 1 + bp * d;
            pm[j] *= 1 - bm * d;
        }
    }
    settle_ends(cs);
}

void calib_cs_add(calib_cs *cs, double x)
{
    if (!cs || !cs->m || isnan(x))
        return;
    if (x < cs->lo || x > cs->hi) {
        cs->clamped++;
        x = x < cs->lo ? cs->lo : cs->hi;
    }
    double y = (x - cs->lo) / (cs->hi - cs->lo);
    y = y < 0 ? 0 : y > 1 ? 1 : y;
    if (!cs->empty)
        update(cs, y, bet(cs));
    /* the statistics of the next bets include this value only now */
    cs->n++;
    cs->sum += y;
    double mu = (0.5 + cs->sum) / ((double)cs->n + 1);
    cs->sq += (y - mu) * (y - mu);
}

int calib_cs_interval(const calib_cs *cs, double *low, double *high)
{
    double l = NAN, h = NAN;
    int rc = CALIB_EINVAL;
    if (cs && cs->m) {
        rc = cs->empty ? CALIB_CS_EMPTY : CALIB_OK;
        if (!cs->empty) {
            /* the range's ends exactly, the others clamped to it */
            double w = cs->hi - cs->lo, a = cs->m[cs->first], b = cs->m[cs->last - 1];
            l = a == 0 ? cs->lo : fmax(cs->lo, cs->lo + a * w);
            h = b == 1 ? cs->hi : fmin(cs->hi, cs->lo + b * w);
        }
    }
    if (low)
        *low = l;
    if (high)
        *high = h;
    return rc;
}

double calib_cs_step(const calib_cs *cs)
{
    if (!cs || !cs->m)
        return NAN;
    return lattice(cs->gstride) * (cs->hi - cs->lo);
}

/* Copies src's state into dst (same configuration). */
static void copy_state(calib_cs *dst, const calib_cs *src)
{
    dst->n = src->n;
    dst->clamped = src->clamped;
    dst->refines = src->refines;
    dst->sum = src->sum;
    dst->sq = src->sq;
    dst->gbase = src->gbase;
    dst->gstride = src->gstride;
    dst->gsize = src->gsize;
    dst->low_out = src->low_out;
    dst->high_out = src->high_out;
    dst->empty = src->empty;
    dst->first = src->first;
    dst->last = src->last;
    derive_grid(dst);
    size_t from = src->first, count = src->last - src->first;
    double *const to[] = {dst->lp, dst->pp, dst->ap, dst->qp, dst->lm,
                          dst->pm, dst->am, dst->qm, dst->tp, dst->tm};
    const double *const of[] = {src->lp, src->pp, src->ap, src->qp, src->lm,
                                src->pm, src->am, src->qm, src->tp, src->tm};
    for (size_t i = 0; i < sizeof to / sizeof to[0]; i++)
        memcpy(to[i] + from, of[i] + from, count * sizeof(double));
    dst->fold_bits = src->fold_bits;
}

/* The product's lower bounds at mu: the sums of the two sources'. */
static void product_at(const pts *p, double mu, double *plus, double *minus)
{
    double a, b, c, d;
    pts_bounds(&p[0], mu, pts_below(&p[0], mu), &a, &b);
    pts_bounds(&p[1], mu, pts_below(&p[1], mu), &c, &d);
    *plus = a + c;
    *minus = b + d;
}

/* The highest candidate of either source that the product's lower bound
 * excludes by K+ (or -1), and the lowest it excludes by K- (or 2). */
static void product_ends(const pts *p, double level, double *low, double *high)
{
    *low = -1;
    *high = 2;
    for (int s = 0; s < 2; s++)
        for (uint32_t i = 0; i < p[s].k; i++) {
            double mu = p[s].m[i], plus, minus;
            product_at(p, mu, &plus, &minus);
            if (mu > *low && plus >= level)
                *low = mu;
            if (mu < *high && minus >= level)
                *high = mu;
        }
}

int calib_cs_merge(calib_cs *dst, const calib_cs *src)
{
    if (!dst || !src || !dst->m || !src->m || dst == src ||
        dst->lo != src->lo || dst->hi != src->hi || dst->alpha != src->alpha ||
        dst->grid != src->grid)
        return CALIB_EINVAL;
    if (src->n == 0)
        return CALIB_OK; /* a capital of 1 everywhere */
    if (dst->n == 0) {
        copy_state(dst, src); /* its own process, history and all */
        return CALIB_OK;
    }
    if (dst->empty || src->empty) {
        /* An empty input stopped multiplying its capitals: only the floor
         * would bound them, which leaves the product nothing to exclude
         * for a long time. The other input's process alone is still a
         * CS; the counts add up (a larger n only lowers the floor and the
         * bets, both valid). */
        calib_cs from = *src; /* the counts only; src's arrays unread */
        if (dst->empty && !src->empty) {
            from = *dst;
            copy_state(dst, src);
        }
        dst->n += from.n;
        dst->clamped += from.clamped;
        dst->refines += from.refines;
        dst->sum += from.sum;
        dst->sq += from.sq;
        return CALIB_OK;
    }
    double *buf = malloc(5 * (size_t)dst->grid * sizeof *buf);
    if (!buf)
        return CALIB_ENOMEM;
    pts p[2];
    take_points(dst, dst->scratch, &p[0]);
    take_points(src, buf, &p[1]);
    /* The new grid spans the widest candidates the product excludes (by
     * K+ from below, K- from above), or the range's ends: the inputs' past
     * exclusions are not the product's. Its stride: the finest power of
     * two within `grid` candidates, its ends aligned outwards (beyond an
     * excluded candidate, still excluded). With a >= b every m is
     * excluded by one side or the other: the grid spans them anyway, and
     * settle finds it so. */
    double a, b;
    product_ends(p, dst->level, &a, &b);
    uint64_t ka = a >= 0 ? (uint64_t)ldexp(a, CALIB_CS_LATTICE_BITS) : 0;
    uint64_t kb = b <= 1 ? (uint64_t)ldexp(b, CALIB_CS_LATTICE_BITS) : UNIT;
    if (ka > kb) {
        uint64_t t = ka;
        ka = kb;
        kb = t;
    }
    uint64_t stride = CALIB_CS_MIN_STRIDE, base, top;
    for (;;) {
        base = ka & ~(stride - 1);
        top = (kb + stride - 1) & ~(stride - 1); /* <= UNIT, a multiple */
        if (top == base) { /* one point: two are needed */
            if (top < UNIT)
                top += stride;
            else
                base -= stride;
        }
        if ((top - base) / stride + 1 <= dst->grid)
            break;
        stride <<= 1;
    }
    dst->low_out = a >= 0;
    dst->high_out = b <= 1;
    dst->empty = 0;
    dst->n += src->n;
    dst->clamped += src->clamped;
    dst->refines += src->refines;
    dst->sum += src->sum;
    dst->sq += src->sq;
    lay(dst, base, stride, (uint32_t)((top - base) / stride + 1), p, 2);
    free(buf);
    settle(dst); /* the product may exclude candidates of the grid at once */
    return CALIB_OK;
}

/* A state written from a snapshot: in range, finite, consistent. */
static int state_ok(const calib_cs *cs)
{
    uint64_t s = cs->gstride;
    if (s < CALIB_CS_MIN_STRIDE || s > UNIT || (s & (s - 1)) ||
        cs->gbase % s || cs->gbase > UNIT || cs->gsize < 2 ||
        cs->gsize > cs->grid || (UNIT - cs->gbase) / s < cs->gsize - 1)
        return 0;
    if (cs->first >= cs->last || cs->last > cs->gsize ||
        (cs->low_out != 0 && cs->low_out != 1) ||
        (cs->high_out != 0 && cs->high_out != 1) ||
        (cs->empty != 0 && cs->empty != 1) || cs->clamped > cs->n)
        return 0;
    /* a bracket not excluded is the range's end */
    if ((!cs->low_out && cs->gbase + cs->first * s != 0) ||
        (!cs->high_out && cs->gbase + (cs->last - 1) * s != UNIT))
        return 0;
    double n = (double)cs->n;
    if (!(cs->sum >= 0 && cs->sum <= n) || !(cs->sq >= 0 && cs->sq <= n + 1))
        return 0;
    if (cs->empty)
        return 1; /* its arrays are no longer used */
    if (!(cs->fold_bits >= 0 && cs->fold_bits <= FOLD_BITS))
        return 0;
    for (uint32_t j = cs->first; j < cs->last; j++) {
        const double l[] = {cs->lp[j], cs->ap[j], cs->lm[j], cs->am[j]};
        const double q[] = {cs->pp[j], cs->qp[j], cs->pm[j], cs->qm[j]};
        for (int i = 0; i < 4; i++)
            /* a product part has gathered at most fold_bits bits since it
             * was last folded (update), so it stays far from overflow */
            if (!isfinite(l[i]) || !(q[i] > 0 && q[i] < INFINITY) ||
                !(fabs(log2(q[i])) <= cs->fold_bits + 1))
                return 0;
    }
    return 1;
}

int calib_cs_restore(calib_cs *cs)
{
    if (!cs || !cs->m)
        return CALIB_EINVAL;
    /* the configuration must be init's (the storage is sized for its
     * grid): a snapshot of another one is refused, as is an inconsistent
     * state; either way the cs starts again */
    if (cs->lo != cs->init_lo || cs->hi != cs->init_hi ||
        cs->alpha != cs->init_alpha || cs->grid != cs->init_grid || !state_ok(cs)) {
        cs->lo = cs->init_lo;
        cs->hi = cs->init_hi;
        cs->alpha = cs->init_alpha;
        cs->grid = cs->init_grid;
        calib_cs_reset(cs);
        return CALIB_EINVAL;
    }
    derive_grid(cs);
    /* the triggers as the last fold of each candidate set them (from the
     * same l + a): no fold here, so that a restored sequence goes on
     * exactly as the one saved would have, bit for bit */
    for (uint32_t j = cs->first; !cs->empty && j < cs->last; j++) {
        cs->tp[j] = trigger(cs, cs->lp[j] + cs->ap[j]);
        cs->tm[j] = trigger(cs, cs->lm[j] + cs->am[j]);
    }
    return CALIB_OK;
}
