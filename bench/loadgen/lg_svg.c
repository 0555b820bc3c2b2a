/* The SVG chart, written by hand (no dependency): on the left one bar per
 * target with its throughput, on the right the acquisition latency against
 * the percentile on a "nines" axis (0 %, 90 %, 99 %, 99.9 %, 99.99 %: x =
 * log10(1 / (1 - p))) with latency on a log axis, one line per target, and
 * a legend. Plain SVG 1.1 that any browser opens. */
#include <errno.h>
#include <math.h>
#include <stdio.h>

#include "bench/loadgen/lg_report.h"

#define W         980
#define H         470
#define TOP       70
#define BOTTOM    400
#define BAR_L     90
#define BAR_R     400
#define LAT_L     530
#define LAT_R     950
#define MAX_NINES 4.0
#define NINE_STEP 0.02

static const char *color_of(enum lg_target t)
{
    static const char *const colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"};

    return colors[t];
}

/* 1, 2, 2.5, 5 x 10^k at or above v. */
static double nice_ceil(double v)
{
    static const double steps[] = {1, 2, 2.5, 5, 10};
    double p;

    if (v <= 0)
        return 1;
    p = pow(10, floor(log10(v)));
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        if (steps[i] * p >= v)
            return steps[i] * p;
    }
    return 10 * p;
}

static void fmt_ops(char *buf, size_t cap, double v)
{
    if (v >= 1e6)
        snprintf(buf, cap, "%.2fM", v / 1e6);
    else if (v >= 1e3)
        snprintf(buf, cap, "%.1fk", v / 1e3);
    else
        snprintf(buf, cap, "%.0f", v);
}

static void fmt_us(char *buf, size_t cap, double us)
{
    if (us >= 1e6)
        snprintf(buf, cap, "%g s", us / 1e6);
    else if (us >= 1e3)
        snprintf(buf, cap, "%g ms", us / 1e3);
    else
        snprintf(buf, cap, "%g \xc2\xb5s", us);
}

static void axis_line(FILE *f, int x1, int y1, int x2, int y2)
{
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n", x1, y1, x2, y2);
}

static void grid_line(FILE *f, int x1, double y1, int x2, double y2)
{
    fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x1, y1, x2,
            y2);
}

/* Axis title rotated to read bottom-up, centred on (x, y). */
static void vertical_label(FILE *f, int x, int y, const char *text)
{
    fprintf(f,
            "<text x=\"0\" y=\"0\" text-anchor=\"middle\" class=\"label\" "
            "transform=\"translate(%d %d) rotate(-90)\">%s</text>\n",
            x, y, text);
}

/* ---- throughput bars --------------------------------------------------- */

static void bars_axes(FILE *f, double ymax)
{
    char label[32];

    for (int i = 0; i <= 5; i++) {
        double y = BOTTOM - (BOTTOM - TOP) * i / 5.0;

        grid_line(f, BAR_L, y, BAR_R, y);
        fmt_ops(label, sizeof(label), ymax * i / 5);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" class=\"tick\">%s</text>\n",
                BAR_L - 6, y + 4, label);
    }
    axis_line(f, BAR_L, TOP, BAR_L, BOTTOM);
    axis_line(f, BAR_L, BOTTOM, BAR_R, BOTTOM);
    vertical_label(f, 28, (TOP + BOTTOM) / 2, "throughput (acquire+release pairs/s)");
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" class=\"label\">target</text>\n",
            (BAR_L + BAR_R) / 2, BOTTOM + 44);
}

static void draw_bars(FILE *f, const struct lg_result *res, unsigned n)
{
    double max = 0, slot = (double)(BAR_R - BAR_L) / (n ? n : 1), ymax;
    char label[32];

    for (unsigned i = 0; i < n; i++)
        max = fmax(max, lg_result_ops(&res[i]));
    ymax = nice_ceil(max * 1.1);
    bars_axes(f, ymax);
    for (unsigned i = 0; i < n; i++) {
        double v = lg_result_ops(&res[i]), h = (BOTTOM - TOP) * v / ymax;
        double x = BAR_L + slot * i + slot * 0.2, w = slot * 0.6;

        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", x,
                BOTTOM - h, w, h, color_of(res[i].target));
        fmt_ops(label, sizeof(label), v);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" class=\"val\">%s</text>\n",
                x + w / 2, BOTTOM - h - 6, res[i].ran ? label : "did not run");
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" class=\"tick\">%s</text>\n",
                x + w / 2, BOTTOM + 18, lg_target_name(res[i].target));
    }
}

/* ---- latency percentiles ----------------------------------------------- */

struct lat_scale {
    double lo; /* log10 of the lowest decade, us */
    double hi; /* log10 of the highest decade, us */
};

static double lat_x(double nines)
{
    return LAT_L + (LAT_R - LAT_L) * nines / MAX_NINES;
}

static double lat_y(const struct lat_scale *s, double us)
{
    double l = log10(fmax(us, 0.001));

    return BOTTOM - (BOTTOM - TOP) * (l - s->lo) / (s->hi - s->lo);
}

static struct lat_scale lat_range(const struct lg_result *res, unsigned n)
{
    double lo = INFINITY, hi = -INFINITY;
    struct lat_scale s;

    for (unsigned i = 0; i < n; i++) {
        if (!res[i].ran || res[i].hist->count == 0)
            continue;
        lo = fmin(lo, log10(fmax((double)res[i].hist->min / 1000, 0.1)));
        hi = fmax(hi, log10(fmax((double)res[i].hist->max / 1000, 0.1)));
    }
    if (lo > hi) {
        lo = 1;
        hi = 3;
    }
    s.lo = floor(lo);
    s.hi = ceil(hi) > floor(lo) ? ceil(hi) : floor(lo) + 1;
    return s;
}

static void lat_axes(FILE *f, const struct lat_scale *s)
{
    static const char *const xl[] = {"0%", "90%", "99%", "99.9%", "99.99%"};
    char label[32];

    for (int i = 0; i <= (int)MAX_NINES; i++) {
        double x = lat_x(i);

        grid_line(f, (int)x, TOP, (int)x, BOTTOM);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" class=\"tick\">%s</text>\n", x,
                BOTTOM + 18, xl[i]);
    }
    for (double d = s->lo; d <= s->hi + 1e-9; d += 1) {
        double y = lat_y(s, pow(10, d));

        grid_line(f, LAT_L, y, LAT_R, y);
        fmt_us(label, sizeof(label), pow(10, d));
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" class=\"tick\">%s</text>\n",
                LAT_L - 6, y + 4, label);
    }
    axis_line(f, LAT_L, TOP, LAT_L, BOTTOM);
    axis_line(f, LAT_L, BOTTOM, LAT_R, BOTTOM);
    vertical_label(f, LAT_L - 62, (TOP + BOTTOM) / 2, "acquisition latency (log scale)");
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" class=\"label\">percentile</text>\n",
            (LAT_L + LAT_R) / 2, BOTTOM + 44);
}

static void lat_curve(FILE *f, const struct lat_scale *s, const struct lg_result *res)
{
    double top = fmin(MAX_NINES, log10((double)res->hist->count));

    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
            color_of(res->target));
    for (double x = 0; x <= top + 1e-9; x += NINE_STEP) {
        double pct = 100.0 * (1.0 - pow(10, -x));

        fprintf(f, "%.1f,%.1f ", lat_x(x), lat_y(s, lg_result_lat_us(res, pct)));
    }
    fprintf(f, "\"/>\n");
}

/* Bottom right: latency grows with the percentile, so that corner is the
 * one the curves leave empty. */
static void lat_legend(FILE *f, const struct lg_result *res, unsigned n)
{
    int h = 8 + 18 * (int)n, x = LAT_R - 160, y0 = BOTTOM - 10 - h, y = y0 + 12;

    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"150\" height=\"%d\" fill=\"white\" "
            "fill-opacity=\"0.85\" stroke=\"#999\"/>\n",
            x, y0, h);
    for (unsigned i = 0; i < n; i++, y += 18) {
        fprintf(f,
                "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
                "stroke-width=\"3\"/>\n",
                x + 8, y, x + 32, y, color_of(res[i].target));
        fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"tick\">%s</text>\n", x + 38, y + 4,
                lg_target_name(res[i].target));
    }
}

static void draw_latency(FILE *f, const struct lg_result *res, unsigned n)
{
    struct lat_scale s = lat_range(res, n);

    lat_axes(f, &s);
    for (unsigned i = 0; i < n; i++) {
        if (res[i].ran && res[i].hist->count > 0)
            lat_curve(f, &s, &res[i]);
    }
    lat_legend(f, res, n);
}

/* ---- document ---------------------------------------------------------- */

static void header(FILE *f, const struct lg_opts *o)
{
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n",
            W, H, W, H);
    fprintf(f, "<style>.tick{font-size:12px;fill:#333}.label{font-size:13px;fill:#000}"
               ".val{font-size:12px;font-weight:bold;fill:#000}"
               ".title{font-size:16px;font-weight:bold}</style>\n");
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f,
            "<text x=\"%d\" y=\"28\" text-anchor=\"middle\" class=\"title\">lockproxy-bench: "
            "%s, %u clients, %u keys, hold %llu \xc2\xb5s, %.1f s measured%s%s%s</text>\n",
            W / 2, lg_workload_name(o->workload), o->clients, lg_opts_nkeys(o),
            (unsigned long long)o->hold_us, o->duration_s, o->pipeline ? ", pipelined" : "",
            o->proxy.is_unix ? ", proxy via Unix socket" : "",
            o->redis.is_unix ? ", Redis via Unix socket" : "");
    fprintf(f, "<text x=\"%d\" y=\"52\" text-anchor=\"middle\" class=\"label\">Throughput</text>\n",
            (BAR_L + BAR_R) / 2);
    fprintf(f,
            "<text x=\"%d\" y=\"52\" text-anchor=\"middle\" class=\"label\">Acquisition "
            "latency by percentile</text>\n",
            (LAT_L + LAT_R) / 2);
}

int lg_svg_write(const char *path, const struct lg_opts *o, const struct lg_result *res, unsigned n)
{
    FILE *f = fopen(path, "w");

    if (!f)
        return -errno;
    header(f, o);
    draw_bars(f, res, n);
    draw_latency(f, res, n);
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0)
        return -errno;
    return 0;
}
