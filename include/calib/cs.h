/*
 * An anytime-valid confidence sequence (CS) for the mean of a bounded
 * stream, by betting: the hedged capital process of Waudby-Smith & Ramdas,
 * "Estimating means of bounded random variables by betting" (J. R. Stat.
 * Soc. B 86, 2024; arXiv 2010.09686), Section 4 ("Hedged CS"), with their
 * predictable plug-in bets, evaluated on an adaptive grid of candidate
 * means. See calib_cs(3).
 *
 * If every value has the same conditional mean mu given the past (i.i.d.
 * values, say), then P(exists t: mu not in [low_t, high_t]) <= alpha: the
 * interval may be looked at after every value, and it never widens (it is
 * the running intersection).
 *
 * calib_cs_init allocates the grid once; calib_cs_add allocates nothing and
 * costs O(candidates kept), at most `grid` of them.
 */
#ifndef CALIB_CS_H
#define CALIB_CS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Default and bounds of the grid size (candidate means per grid). */
#define CALIB_CS_GRID 257
#define CALIB_CS_GRID_MIN 17
#define CALIB_CS_GRID_MAX 1048577
/* The bet cap c: lambda+(m) <= c / m, lambda-(m) <= c / (1 - m). */
#define CALIB_CS_TRUNC 0.5
/* Candidates lie on the lattice k 2^-52 of [0, 1] (y units), exactly
 * representable; a grid's stride is a power of two of lattice units, at
 * least 2^12: the finest step is 2^-40 (9.1e-13) of hi - lo. */
#define CALIB_CS_LATTICE_BITS 52
#define CALIB_CS_MIN_STRIDE 4096
/* calib_cs_interval's return when the running intersection is empty. */
#define CALIB_CS_EMPTY 1

/*
 * Values x are clamped to [lo, hi] and mapped to y = (x - lo) / (hi - lo)
 * in [0, 1]; candidate means m are in [0, 1] too. For each candidate the
 * two capital processes
 *
 *   K+_t(m) = prod_{i <= t} (1 + min(lambda_i, c / m) (y_i - m)),
 *   K-_t(m) = prod_{i <= t} (1 - min(lambda_i, c / (1 - m)) (y_i - m)),
 *
 * are nonnegative martingales when m is the mean, and so is their average
 * (K+ + K-) / 2; by Ville's inequality the running intersection of
 * {m : max(K+_t(m), K-_t(m)) / 2 < 1 / alpha} is a CS. The bet
 * lambda_t = sqrt(2 ln(2 / alpha) / (s2_{t-1} t ln(1 + t'))), t' being t
 * rounded down to its 8 leading bits (the paper has t; within 0.05%), with
 * s2_t = (1/4 + sum_{i <= t} (y_i - mu_i)^2) / (t + 1) and
 * mu_i = (1/2 + sum_{k <= i} y_k) / (i + 1), does not depend on m. Each
 * factor of K+ is nonincreasing in m and each of K- nondecreasing, so a
 * candidate excluded by K+ excludes every m below it, and one excluded by
 * K- every m above: the set is an interval, reported as [m_first,
 * m_last-1] between the excluded candidates that bracket it (or 0 and 1):
 * less than a grid step wider at each end than the candidates still in,
 * and about a step wider than the exact hedged CS (calib_cs(3), Precision).
 *
 * The grid: gsize candidates m_j = (gbase + j gstride) 2^-52, j < gsize
 * (at first 2^p + 1 of them over [0, 1], the most that `grid` allows). The
 * candidates kept are [first, last): those still in the set and the two
 * that bracket it, m_first (excluded by K+ when low_out, else 0) and
 * m_last-1 (excluded by K- when high_out, else 1). When fewer than
 * grid / 4 remain in the set, a finer grid is laid over [m_first,
 * m_last-1] (a refinement): the stride divided by the largest power of two
 * that keeps it within `grid` candidates, so every old candidate is a new
 * one and keeps its capital exactly. A new candidate in between has no
 * history of its own; it starts from a lower bound of its capitals:
 *  - each capital is kept in two parts, ln K = M + A. A sums the factors
 *    of the values whose bet was below every kept candidate's cap (the
 *    usual case after the first values): each is concave in m over the
 *    kept range (the log of a positive affine function), so A is, and
 *    lies above its chord between two candidates. M sums the others and
 *    what the candidate started from; it is monotone like K.
 *  - so for m between candidates m_a < m < m_b:
 *    ln K+(m) >= M+(m_b) + chord of A+ at m, ln K-(m) >= M-(m_a) + chord
 *    of A- at m; beyond every candidate (a merge), the nearest one's M + A
 *    on the side where monotonicity allows it, else n ln(1 - c) (every
 *    factor is >= 1 - c).
 * The new candidate's M is that bound and its A starts at 0. Every bound
 * kept is thus a lower bound of the true capital, and an exclusion on it
 * is an exclusion of the exact hedged CS with these bets: the guarantee is
 * untouched.
 *
 * The parts are kept as l + ln p: the factors multiply into p, and into l
 * (with a log) only at an end that may have crossed the level, or when p
 * may approach the limits of a double: a value costs two multiplications
 * per candidate kept.
 *
 * Fields. Configuration, written by calib_cs_init, part of the state a
 * snapshot keeps: lo, hi, alpha, grid. State (a snapshot writes and reads
 * exactly these; the arrays only over [first, last)): n, clamped, sum, sq,
 * gbase, gstride, gsize, first, last, low_out, high_out, empty, refines,
 * fold_bits, and the eight arrays lp, pp, ap, qp, lm, pm, am, qm. Derived
 * (recomputed by calib_cs_restore, never written): m, cp, cm, tp, tm,
 * scratch, level, the bet's cache ln_key and ln_val, and init_* (set by
 * calib_cs_init only). A restored
 * sequence goes on exactly as the saved one would have.
 */
typedef struct calib_cs {
    /* configuration (read-only) */
    double lo, hi;      /* the range; values are clamped to it */
    double alpha;       /* level, (0, 1) */
    uint32_t grid;      /* candidates per grid, at most */
    /* state */
    uint32_t gsize;     /* candidates of the current grid */
    uint64_t gbase;     /* its first, in lattice units (2^-52) */
    uint64_t gstride;   /* its step, in lattice units: a power of two */
    uint32_t first, last; /* the candidates kept: [first, last) */
    int low_out;        /* 1: m_first is excluded (by K+) */
    int high_out;       /* 1: m_last-1 is excluded (by K-) */
    int empty;          /* 1: the intersection became empty (sticky) */
    uint64_t n;         /* values added (NaN excluded) */
    uint64_t clamped;   /* of which were outside [lo, hi] and clamped */
    uint64_t refines;   /* grids laid since the start (0: the first) */
    double sum;         /* sum of y_i, y = (clamp(x) - lo) / (hi - lo) */
    double sq;          /* sum of (y_i - mu_i)^2, mu_i the running mean
                           (1/2 + sum_{k <= i} y_k) / (i + 1) */
    /* [grid]: ln K+(m_j) >= M+ + A+, M+ = lp[j] + ln pp[j] and
     * A+ = ap[j] + ln qp[j]; ln K-(m_j) >= lm[j] + ln pm[j] + am[j] +
     * ln qm[j] likewise */
    double *lp, *pp, *ap, *qp;
    double *lm, *pm, *am, *qm;
    /* derived */
    double *m;          /* [grid] the candidates, in [0, 1] (y units) */
    double *cp, *cm;    /* [grid] c / m_j and c / (1 - m_j) (inf at 0, 1) */
    double *tp, *tm;    /* [grid] pp qp, pm qm at or above this: fold, test */
    double *scratch;    /* [5 grid] for refinements and merges */
    double fold_bits;   /* state (see Fields): bound on |log2| of any product part */
    double level;       /* ln(2 / alpha), the log capital that excludes */
    uint64_t ln_key;    /* the bet's ln(1 + t), cached: t rounded to 8 bits */
    double ln_val;      /* and its value (a pure function of ln_key) */
    /* the configuration given to calib_cs_init, which restore checks */
    double init_lo, init_hi, init_alpha;
    uint32_t init_grid;
} calib_cs;

/* Bytes calib_cs_init allocates for a grid of that size (0: the default);
 * 0 for a size it refuses. */
size_t calib_cs_bytes(uint32_t grid);

/* CALIB_EINVAL unless lo < hi, both finite with hi - lo finite, alpha in
 * (0, 1) and grid 0 (CALIB_CS_GRID) or in [CALIB_CS_GRID_MIN,
 * CALIB_CS_GRID_MAX]; CALIB_ENOMEM. On failure *cs is zeroed (calib_cs_free
 * is safe). */
int calib_cs_init(calib_cs *cs, double lo, double hi, double alpha, uint32_t grid);
void calib_cs_free(calib_cs *cs);
/* dst becomes a copy of src that shares no memory with it (free it with
 * calib_cs_free): CALIB_OK, or CALIB_ENOMEM (dst then holds nothing). */
int calib_cs_copy(calib_cs *dst, const calib_cs *src);
/* Starts again from no values (same configuration and storage). */
void calib_cs_reset(calib_cs *cs);
/* Adds one value: NaN is ignored, anything else is clamped to [lo, hi]
 * (counted in `clamped` when it was outside). */
void calib_cs_add(calib_cs *cs, double x);
/* The running interval [*low, *high], in x units, and CALIB_OK; before any
 * value it is [lo, hi]. CALIB_CS_EMPTY (both NaN) once the intersection is
 * empty: under the assumption (a constant conditional mean) that happens
 * with probability <= alpha, so it is evidence that the mean has changed;
 * only a reset ends it. CALIB_EINVAL (both NaN) for a NULL cs. */
int calib_cs_interval(const calib_cs *cs, double *low, double *high);
/* The grid step in x units: the ends move by whole steps, and each lies
 * within about a step outside the exact hedged CS. */
double calib_cs_step(const calib_cs *cs);
/*
 * Merges src into dst (same lo, hi, alpha and grid): for streams that
 * share the conditional mean (shards of one stream, or consecutive
 * periods), the product of two capital processes is one capital process
 * of the combined stream, so dst becomes the CS of the product, at the
 * same level alpha. Its running intersection restarts from the product's
 * set at the merge (each input's past exclusions are not carried over,
 * which would cost a union bound). CALIB_EINVAL for a mismatch,
 * CALIB_ENOMEM (dst unchanged); src is not changed.
 */
int calib_cs_merge(calib_cs *dst, const calib_cs *src);
/* After a snapshot's state fields (and the eight arrays over [first,
 * last)) are written into a cs initialised with the same configuration:
 * checks them and recomputes the derived arrays. CALIB_EINVAL (and a
 * reset cs) if they are inconsistent or the configuration is not init's. */
int calib_cs_restore(calib_cs *cs);

#ifdef __cplusplus
}
#endif

#endif
