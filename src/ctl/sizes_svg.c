/*
 * sizes_svg.c — the plot of `calibctl sizes`: per panel, each estimator's
 * mean against the test-set size n (log scale) with the band between its
 * 5% and 95% quantiles. Hand-written SVG: a <path> per estimator (its
 * means), a <polygon> per band, axes, ticks and a legend.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>

#include "sizes.h"

enum {
    SVG_W = 980,
    TITLE_H = 56,  /* the title above the panels */
    PANEL_H = 330, /* a panel: its title, plot, ticks and axis label */
    PLOT_X = 80,   /* left edge of the plot area */
    PLOT_W = 600,
    PLOT_TOP = 34, /* plot area, from the panel's top */
    PLOT_H = 230,
    LEGEND_X = PLOT_X + PLOT_W + 24,
};

/* tab10: distinct colours that stay apart for the colour-blind */
static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                      "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                      "#bcbd22", "#17becf"};
#define NCOLOURS (sizeof palette / sizeof palette[0])

static const char *const panel_title[SIZES_PANELS] = {
    "Calibration error: binned estimates (biased lower bounds) and RBS (upper bound)",
    "Mean proper scores (unbiased at every n)",
};
static const char *const panel_ylabel[SIZES_PANELS] = {"calibration error", "mean score"};

/* Text content: XML's five specials escaped; bytes XML 1.0 forbids
 * (controls) and non-ASCII bytes, which may not be UTF-8, as '?'. */
static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default: fputc(c < 0x20 || c >= 0x7f ? '?' : c, f); break;
        }
    }
}

/* A value the plot can place: finite and not absurdly large, so that the
 * axis range and every coordinate stay finite. */
static int drawable(double v)
{
    return isfinite(v) && fabs(v) < 1e100;
}

typedef struct axis {
    double lo, hi; /* data range (log10 n for x) */
    double px, len; /* pixel start and length; y grows downwards */
    int flip;
} axis;

static double to_px(const axis *a, double v)
{
    double t = (v - a->lo) / (a->hi - a->lo);
    return a->flip ? a->px + (1 - t) * a->len : a->px + t * a->len;
}

/* A step of 1, 2 or 5 times a power of ten giving four to six intervals. */
static double nice_step(double span)
{
    double raw = span / 6, mag = pow(10, floor(log10(raw)));
    double m = raw / mag;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * mag;
}

/* The y range of one panel's estimators, 0 included (errors and Brier
 * scores are >= 0: their distance from 0 is what matters), widened to
 * whole steps. Returns 0 when the panel has no estimator. */
static int panel_range(const sizes_result *r, int panel, double *lo, double *hi,
                       double *step)
{
    int any = 0;
    double a = 0, b = 0;
    for (size_t e = 0; e < r->nest; e++) {
        if (r->est[e].panel != panel)
            continue;
        any = 1;
        for (size_t s = 0; s < r->nsizes; s++) {
            const sizes_stat *st = &r->stat[s * r->nest + e];
            const double v[3] = {st->mean, st->q05, st->q95};
            for (int i = 0; i < 3; i++)
                if (drawable(v[i])) {
                    a = v[i] < a ? v[i] : a;
                    b = v[i] > b ? v[i] : b;
                }
        }
    }
    if (!any)
        return 0;
    if (!(b > a))
        b = a + 1;
    *step = nice_step(b - a);
    *lo = floor(a / *step) * *step;
    *hi = ceil(b / *step) * *step;
    if (*hi - b < 0.02 * (*hi - *lo)) /* keep the top clear of the frame */
        *hi += *step;
    return 1;
}

static void tick_label(FILE *f, double x, double y, const char *anchor, double v,
                       int decimals)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">%.*f</text>\n", x, y,
            anchor, decimals, v);
}

/* The log-x axis of a panel: decades labelled, 2..9 times them as minor
 * ticks (2 and 5 labelled too when the range is short), grid lines. */
static void x_ticks(FILE *f, const axis *ax, double ybot, double ytop)
{
    int labelled_minor = ax->hi - ax->lo < 2.5;
    for (double d = floor(ax->lo); d <= ceil(ax->hi); d++) {
        for (int m = 1; m <= 9; m++) {
            double v = m * pow(10, d), lv = log10(v);
            if (lv < ax->lo || lv > ax->hi)
                continue;
            double x = to_px(ax, lv);
            int major = m == 1, label = major || (labelled_minor && (m == 2 || m == 5));
            if (major)
                fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                        "y2=\"%.1f\"/>\n", x, ytop, x, ybot);
            fprintf(f, "<line class=\"tick\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                    x, ybot, x, ybot + (major ? 6 : 3));
            if (label)
                tick_label(f, x, ybot + 19, "middle", v, v < 1 ? 1 : 0);
        }
    }
}

static void y_ticks(FILE *f, const axis *ax, double step, double xleft, double xright)
{
    int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    long n = lround((ax->hi - ax->lo) / step);
    for (long i = 0; i <= n; i++) {
        double v = ax->lo + (double)i * step, y = to_px(ax, v);
        fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                xleft, y, xright, y);
        fprintf(f, "<line class=\"tick\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                xleft - 5, y, xleft, y);
        tick_label(f, xleft - 8, y + 4, "end", fabs(v) < step / 1e6 ? 0 : v, decimals);
    }
}

/* One estimator: band (q05..q95) under its mean line and points. Non-finite
 * values break the line; the band needs every size. */
static void series(FILE *f, const sizes_result *r, size_t e, const axis *ax,
                   const axis *ay, const char *colour)
{
    int band = 1;
    for (size_t s = 0; s < r->nsizes; s++) {
        const sizes_stat *st = &r->stat[s * r->nest + e];
        band = band && drawable(st->q05) && drawable(st->q95);
    }
    if (band && r->nsizes == 1) {
        /* one size: the band as a bar, which a polygon of no width is not */
        double x = to_px(ax, log10((double)r->size[0]));
        const sizes_stat *st = &r->stat[e];
        fprintf(f, "<polygon class=\"band\" fill=\"%s\" points=\"%.2f,%.2f %.2f,%.2f "
                "%.2f,%.2f %.2f,%.2f\"/>\n", colour, x - 6, to_px(ay, st->q95), x + 6,
                to_px(ay, st->q95), x + 6, to_px(ay, st->q05), x - 6, to_px(ay, st->q05));
    } else if (band) {
        fprintf(f, "<polygon class=\"band\" fill=\"%s\" points=\"", colour);
        for (size_t s = 0; s < r->nsizes; s++)
            fprintf(f, "%s%.2f,%.2f", s ? " " : "", to_px(ax, log10((double)r->size[s])),
                    to_px(ay, r->stat[s * r->nest + e].q95));
        for (size_t s = r->nsizes; s-- > 0;)
            fprintf(f, " %.2f,%.2f", to_px(ax, log10((double)r->size[s])),
                    to_px(ay, r->stat[s * r->nest + e].q05));
        fputs("\"/>\n", f);
    }
    fprintf(f, "<path id=\"mean-%s\" class=\"mean%s\" stroke=\"%s\" d=\"", r->est[e].name,
            r->est[e].upper ? " upper" : "", colour);
    int pen = 0;
    for (size_t s = 0; s < r->nsizes; s++) {
        double m = r->stat[s * r->nest + e].mean;
        if (!drawable(m)) {
            pen = 0;
            continue;
        }
        fprintf(f, "%s%.2f %.2f", pen ? " L" : (s ? " M" : "M"),
                to_px(ax, log10((double)r->size[s])), to_px(ay, m));
        pen = 1;
    }
    fputs("\"/>\n", f);
    for (size_t s = 0; s < r->nsizes; s++) {
        double m = r->stat[s * r->nest + e].mean;
        if (drawable(m))
            fprintf(f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"2.5\" fill=\"%s\"/>\n",
                    to_px(ax, log10((double)r->size[s])), to_px(ay, m), colour);
    }
}

static void legend(FILE *f, const sizes_result *r, int panel, double top)
{
    double y = top + 8;
    fprintf(f, "<text class=\"note\" x=\"%d\" y=\"%.1f\">line: mean; band: 5%%-95%%</text>\n",
            LEGEND_X, y);
    y += 22;
    for (size_t e = 0; e < r->nest; e++) {
        if (r->est[e].panel != panel)
            continue;
        const char *colour = palette[e % NCOLOURS];
        fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"26\" height=\"10\" fill=\"%s\" "
                "class=\"band\"/>\n", LEGEND_X, y - 9, colour);
        fprintf(f, "<line class=\"mean%s\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
                "stroke=\"%s\"/>\n", r->est[e].upper ? " upper" : "", LEGEND_X, y - 4,
                LEGEND_X + 26, y - 4, colour);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\">%s</text>\n", LEGEND_X + 34, y, r->est[e].name);
        y += 20;
    }
}

int sizes_svg_write(const sizes_result *r, FILE *f)
{
    int npanels = 0, on[SIZES_PANELS];
    double lo[SIZES_PANELS], hi[SIZES_PANELS], step[SIZES_PANELS];
    for (int p = 0; p < SIZES_PANELS; p++)
        npanels += on[p] = panel_range(r, p, &lo[p], &hi[p], &step[p]);
    int height = TITLE_H + npanels * PANEL_H + 10;

    /* x: log10 n over the sizes, padded; one size gets a decade around it */
    axis ax = {.lo = log10((double)r->size[0]),
               .hi = log10((double)r->size[r->nsizes - 1]),
               .px = PLOT_X,
               .len = PLOT_W};
    if (ax.hi - ax.lo < 1e-9) {
        ax.lo -= 0.5;
        ax.hi += 0.5;
    }
    double pad = 0.04 * (ax.hi - ax.lo);
    ax.lo -= pad;
    ax.hi += pad;

    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
            SVG_W, height, SVG_W, height);
    fputs("<style>\n"
          ".grid { stroke: #e4e4e4; stroke-width: 1; }\n"
          ".tick, .frame { stroke: #333; stroke-width: 1; fill: none; }\n"
          ".band { fill-opacity: 0.16; stroke: none; }\n"
          ".mean { fill: none; stroke-width: 2; }\n"
          ".upper { stroke-dasharray: 7 4; }\n"
          ".title { font-size: 15px; font-weight: bold; }\n"
          ".ptitle { font-size: 13px; font-weight: bold; }\n"
          ".note { fill: #555; }\n"
          "</style>\n"
          "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n", f);
    fputs("<text class=\"title\" x=\"20\" y=\"24\">calibctl sizes: ", f);
    xml_text(f, r->path);
    fprintf(f, "</text>\n<text class=\"note\" x=\"20\" y=\"44\">%zu rows", r->rows);
    if (r->k)
        fprintf(f, ", K = %zu", r->k);
    fprintf(f, ", %s; %lu random subsamples per size without replacement (seed %llu); "
            "Gruber &amp; Buettner, NeurIPS 2022</text>\n", r->form, r->reps,
            (unsigned long long)r->seed);

    int slot = 0;
    for (int p = 0; p < SIZES_PANELS; p++) {
        if (!on[p])
            continue;
        double top = TITLE_H + slot++ * PANEL_H + PLOT_TOP, bot = top + PLOT_H;
        axis ay = {.lo = lo[p], .hi = hi[p], .px = top, .len = PLOT_H, .flip = 1};
        fprintf(f, "<g id=\"panel-%d\">\n", p);
        fprintf(f, "<text class=\"ptitle\" x=\"%d\" y=\"%.1f\">%s</text>\n", PLOT_X,
                top - 12, panel_title[p]);
        y_ticks(f, &ay, step[p], PLOT_X, PLOT_X + PLOT_W);
        x_ticks(f, &ax, bot, top);
        for (size_t e = 0; e < r->nest; e++)
            if (r->est[e].panel == p)
                series(f, r, e, &ax, &ay, palette[e % NCOLOURS]);
        fprintf(f, "<rect class=\"frame\" x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\"/>\n",
                PLOT_X, top, PLOT_W, PLOT_H);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"middle\">test-set size n "
                "(log scale)</text>\n", PLOT_X + PLOT_W / 2, bot + 40);
        fprintf(f, "<text x=\"20\" y=\"%.1f\" text-anchor=\"middle\" "
                "transform=\"rotate(-90 20 %.1f)\">%s</text>\n", top + PLOT_H / 2.0,
                top + PLOT_H / 2.0, panel_ylabel[p]);
        legend(f, r, p, top);
        fputs("</g>\n", f);
    }
    fputs("</svg>\n", f);
    if (ferror(f)) {
        if (!errno)
            errno = EIO;
        return -1;
    }
    return 0;
}
