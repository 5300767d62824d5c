/* PNG previews (libpng): the image with an asinh or zscale stretch, the label
 * map in hashed colours, and the image with an ellipse and an id per source.
 * FITS orientation (row 0 at the bottom); written atomically; host only. */
#include <math.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "skyfind/catalog.h"
#include "skyfind/preview.h"

#define SF_PV_MAXSAMPLE (1 << 20) /* asinh: pixels sampled for the percentiles */
#define SF_PV_ZS_NSAMPLE 1000     /* zscale, as astropy's ZScaleInterval */
#define SF_PV_ZS_CONTRAST 0.25
#define SF_PV_ZS_KREJ 2.5
#define SF_PV_ZS_MAXITER 5
#define SF_PV_ZS_MINPIX 5
#define SF_PV_ZS_MAXREJECT 0.5
#define SF_PV_MINSIDE 512         /* overlay: longer side at least this */
#define SF_PV_FONT 2              /* overlay: glyph magnification */

typedef struct {
    sf_stretch stretch;
    double lo, hi;   /* clamp limits */
    double m, a;     /* asinh: centre and softening */
    double f0, f1;   /* asinh: f(lo), f(hi) */
} sf_pv_limits;

/* ---- statistics -------------------------------------------------------- */

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static size_t count_finite(const sf_image *img)
{
    size_t n = 0;
    for (int y = 0; y < img->ny; y++) {
        const float *r = img->data + (size_t)y * img->stride;
        for (int x = 0; x < img->nx; x++)
            n += isfinite(r[x]) != 0;
    }
    return n;
}

/* Every k-th finite pixel in raster order, at most max of them; returns the count. */
static size_t sample_finite(const sf_image *img, size_t k, size_t max, float *out)
{
    size_t i = 0, n = 0;
    for (int y = 0; y < img->ny && n < max; y++) {
        const float *r = img->data + (size_t)y * img->stride;
        for (int x = 0; x < img->nx && n < max; x++) {
            if (!isfinite(r[x]))
                continue;
            if (i++ % k == 0)
                out[n++] = r[x];
        }
    }
    return n;
}

/* Percentile p (0..1) of sorted s[0..n-1], linear interpolation (numpy's default). */
static double pct(const float *s, size_t n, double p)
{
    double pos = p * (double)(n - 1);
    size_t i = (size_t)floor(pos);
    double f = pos - (double)i;
    if (i + 1 >= n)
        return s[n - 1];
    return (1.0 - f) * s[i] + f * s[i + 1];
}

static sf_status limits_asinh(const sf_image *img, size_t nfin, sf_pv_limits *L)
{
    size_t k = (nfin + SF_PV_MAXSAMPLE - 1) / SF_PV_MAXSAMPLE, n;
    float *s = malloc(sizeof(float) * (nfin / k + 1));
    if (!s)
        return sf_fail(SF_ERR_NOMEM, "preview: cannot allocate %zu samples", nfin / k + 1);
    n = sample_finite(img, k, nfin / k + 1, s);
    qsort(s, n, sizeof *s, cmp_float);
    L->lo = pct(s, n, 0.005);
    L->hi = pct(s, n, 0.998);
    L->m = pct(s, n, 0.5);
    for (size_t i = 0; i < n; i++)
        s[i] = (float)fabs(s[i] - L->m);
    qsort(s, n, sizeof *s, cmp_float);
    L->a = 3.0 * 1.4826 * pct(s, n, 0.5);
    free(s);
    if (!(L->a > 0))
        L->a = (L->hi - L->lo) / 100.0;
    if (!(L->a > 0))
        L->a = 1.0;
    L->f0 = asinh((L->lo - L->m) / L->a);
    L->f1 = asinh((L->hi - L->m) / L->a);
    return SF_OK;
}

/* Least-squares line through (i, s[i]) for the points with bad[i] == 0. */
static void fit_line(const float *s, const unsigned char *bad, size_t n, double *slope,
                     double *icpt)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0, cnt = 0, mx, my;
    for (size_t i = 0; i < n; i++)
        if (!bad[i]) {
            sx += (double)i;
            sy += s[i];
            cnt += 1;
        }
    mx = sx / cnt;
    my = sy / cnt;
    for (size_t i = 0; i < n; i++)
        if (!bad[i]) {
            sxx += ((double)i - mx) * ((double)i - mx);
            sxy += ((double)i - mx) * (s[i] - my);
        }
    *slope = sxx > 0 ? sxy / sxx : 0.0;
    *icpt = my - *slope * mx;
}

/* IRAF zscale following astropy.visualization.ZScaleInterval step by step. */
static sf_status limits_zscale(const sf_image *img, size_t nfin, sf_pv_limits *L)
{
    size_t k = nfin / SF_PV_ZS_NSAMPLE, n, c, minpix, ngrow, ngood, last;
    float *s = NULL;
    unsigned char *bad = NULL, *grown = NULL;
    double slope = 0, icpt = 0, med;
    int fitted = 0;
    sf_status st = SF_OK;
    if (k < 1)
        k = 1;
    s = malloc(sizeof(float) * SF_PV_ZS_NSAMPLE);
    bad = calloc(SF_PV_ZS_NSAMPLE, 1);
    grown = calloc(SF_PV_ZS_NSAMPLE, 1);
    if (!s || !bad || !grown) {
        st = sf_fail(SF_ERR_NOMEM, "preview: zscale: out of memory");
        goto fail;
    }
    n = sample_finite(img, k, SF_PV_ZS_NSAMPLE, s);
    qsort(s, n, sizeof *s, cmp_float);
    L->lo = s[0];
    L->hi = s[n - 1];
    minpix = (size_t)(n * SF_PV_ZS_MAXREJECT);
    if (minpix < SF_PV_ZS_MINPIX)
        minpix = SF_PV_ZS_MINPIX;
    ngrow = n / 100 > 1 ? n / 100 : 1;
    ngood = n;
    last = n + 1;
    for (int it = 0; it < SF_PV_ZS_MAXITER; it++) {
        double sum = 0, sum2 = 0, thr;
        size_t cnt = 0;
        if (ngood >= last || ngood < minpix)
            break;
        fit_line(s, bad, n, &slope, &icpt);
        fitted = 1;
        for (size_t i = 0; i < n; i++)
            if (!bad[i]) {
                double f = s[i] - (slope * (double)i + icpt);
                sum += f;
                sum2 += f * f;
                cnt++;
            }
        sum /= (double)cnt;
        thr = SF_PV_ZS_KREJ * sqrt(fmax(0.0, sum2 / (double)cnt - sum * sum));
        for (size_t i = 0; i < n; i++) {
            double f = s[i] - (slope * (double)i + icpt);
            if (f < -thr || f > thr)
                bad[i] = 1;
        }
        /* dilate like np.convolve(bad, ones(ngrow), "same") */
        for (size_t i = 0; i < n; i++) {
            long hi = (long)i + (long)(ngrow - 1) / 2, lo = hi - (long)ngrow + 1;
            grown[i] = 0;
            for (long j = lo < 0 ? 0 : lo; j <= hi && j < (long)n; j++)
                if (bad[j]) {
                    grown[i] = 1;
                    break;
                }
        }
        memcpy(bad, grown, n);
        last = ngood;
        ngood = 0;
        for (size_t i = 0; i < n; i++)
            ngood += !bad[i];
    }
    if (fitted && ngood >= minpix) {
        slope /= SF_PV_ZS_CONTRAST;
        c = (n - 1) / 2;
        med = n % 2 ? s[n / 2] : 0.5 * ((double)s[n / 2 - 1] + s[n / 2]);
        L->lo = fmax(L->lo, med - ((double)c - 1.0) * slope);
        L->hi = fmin(L->hi, med + (double)(n - c) * slope);
    }
fail:
    free(s);
    free(bad);
    free(grown);
    return st;
}

static sf_status compute_limits(const char *path, const sf_image *img, sf_stretch stretch,
                                sf_pv_limits *L)
{
    size_t nfin;
    memset(L, 0, sizeof *L);
    L->stretch = stretch;
    if (!img || !img->data || img->loc != SF_HOST || img->nx < 1 || img->ny < 1)
        return sf_fail(SF_ERR_PARAM, "%s: preview needs a non-empty host image", path);
    if (stretch != SF_STRETCH_ASINH && stretch != SF_STRETCH_ZSCALE)
        return sf_fail(SF_ERR_PARAM, "%s: unknown stretch %d", path, (int)stretch);
    nfin = count_finite(img);
    if (nfin == 0)
        return sf_fail(SF_ERR_EMPTY, "%s: no finite pixel to show", path);
    return stretch == SF_STRETCH_ASINH ? limits_asinh(img, nfin, L) : limits_zscale(img, nfin, L);
}

static uint8_t grey_of(const sf_pv_limits *L, float v)
{
    double t, x = v < L->lo ? L->lo : v > L->hi ? L->hi : v;
    if (!(L->hi > L->lo))
        return 0;
    if (L->stretch == SF_STRETCH_ASINH)
        t = (asinh((x - L->m) / L->a) - L->f0) / (L->f1 - L->f0);
    else
        t = (x - L->lo) / (L->hi - L->lo);
    t = 255.0 * t + 0.5;
    return (uint8_t)(t < 0 ? 0 : t > 255 ? 255 : t);
}

/* ---- rendering --------------------------------------------------------- */

/* Stretched image into out (W = s*nx, H = s*ny, ch = 1 or 3 channels), flipped
 * so image row 0 is the last PNG row. */
static void render_image(const sf_image *img, const sf_pv_limits *L, int s, int ch, uint8_t *out)
{
    size_t W = (size_t)img->nx * s;
    for (int y = 0; y < img->ny; y++) {
        const float *r = img->data + (size_t)y * img->stride;
        uint8_t *row = out + (size_t)(img->ny - 1 - y) * s * W * ch;
        for (int x = 0; x < img->nx; x++) {
            uint8_t px[3];
            if (isfinite(r[x])) {
                px[0] = px[1] = px[2] = grey_of(L, r[x]);
            } else {
                px[0] = SF_PREVIEW_NAN_R;
                px[1] = SF_PREVIEW_NAN_G;
                px[2] = SF_PREVIEW_NAN_B;
            }
            for (int i = 0; i < s; i++)
                memcpy(row + ((size_t)x * s + i) * ch, px, ch);
        }
        for (int j = 1; j < s; j++)
            memcpy(row + (size_t)j * W * ch, row, W * ch);
    }
}

static uint32_t hash32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

void sf_preview_label_colour(int32_t id, uint8_t rgb[3])
{
    uint32_t h = hash32((uint32_t)id);
    double hue = fmod((double)id * 0.6180339887498949, 1.0) * 6.0;
    double sat = 0.6 + 0.4 * (double)(h & 255) / 255.0;
    double val = 0.85 + 0.15 * (double)((h >> 8) & 255) / 255.0;
    int sector = (int)hue;
    double f = hue - sector, p = val * (1 - sat), q = val * (1 - sat * f),
           t = val * (1 - sat * (1 - f)), r, g, b;
    switch (sector % 6) {
    case 0: r = val; g = t; b = p; break;
    case 1: r = q; g = val; b = p; break;
    case 2: r = p; g = val; b = t; break;
    case 3: r = p; g = q; b = val; break;
    case 4: r = t; g = p; b = val; break;
    default: r = val; g = p; b = q; break;
    }
    rgb[0] = (uint8_t)(255.0 * r + 0.5);
    rgb[1] = (uint8_t)(255.0 * g + 0.5);
    rgb[2] = (uint8_t)(255.0 * b + 0.5);
}

int sf_preview_overlay_scale(int nx, int ny)
{
    int m = nx > ny ? nx : ny;
    if (m < 1)
        return 1;
    return m >= SF_PV_MINSIDE ? 1 : (SF_PV_MINSIDE + m - 1) / m;
}

static void put_px(uint8_t *out, int W, int H, int X, int Y, uint8_t r, uint8_t g, uint8_t b)
{
    uint8_t *p;
    if (X < 0 || Y < 0 || X >= W || Y >= H)
        return;
    p = out + ((size_t)Y * W + X) * 3;
    p[0] = r;
    p[1] = g;
    p[2] = b;
}

/* A ring about 2 PNG pixels wide along the ellipse of semi-axes A, B (PNG
 * pixels) centred on (cx, cy), its A axis at t degrees counter-clockwise
 * from +x as displayed (image y up, PNG rows down). The distance to the
 * ellipse is taken along the ray from the centre: r (1 - 1/rho), rho the
 * ellipse's normalised radius of the point. */
static void draw_ellipse(uint8_t *out, int W, int H, double cx, double cy, double A, double B,
                         double t)
{
    const double hw = 1.0; /* half width of the ring in PNG pixels */
    double c = cos(t * M_PI / 180.0), sn = sin(t * M_PI / 180.0);
    double ex = sqrt(A * A * c * c + B * B * sn * sn), ey = sqrt(A * A * sn * sn + B * B * c * c);
    int x0 = (int)floor(cx - ex - 2), x1 = (int)ceil(cx + ex + 2);
    int y0 = (int)floor(cy - ey - 2), y1 = (int)ceil(cy + ey + 2);
    if (x0 < 0) x0 = 0;
    if (y0 < 0) y0 = 0;
    if (x1 > W - 1) x1 = W - 1;
    if (y1 > H - 1) y1 = H - 1;
    for (int Y = y0; Y <= y1; Y++)
        for (int X = x0; X <= x1; X++) {
            double dx = X - cx, dy = cy - Y; /* y up */
            double u = dx * c + dy * sn, v = -dx * sn + dy * c;
            double rho = sqrt((u / A) * (u / A) + (v / B) * (v / B)), r = hypot(u, v);
            double d = rho > 0 ? r * (1.0 - 1.0 / rho) : -hypot(A, B);
            if (fabs(d) <= hw)
                put_px(out, W, H, X, Y, SF_PREVIEW_CIRCLE_R, SF_PREVIEW_CIRCLE_G,
                       SF_PREVIEW_CIRCLE_B);
        }
}

void sf_preview_ellipse(const sf_source *o, double *A, double *B, double *theta)
{
    if (isfinite(o->a) && isfinite(o->b) && isfinite(o->theta) && o->a > 0) {
        double k;
        *A = 1.1774100225154747 * o->a; /* sqrt(2 ln 2): half width at half maximum */
        *B = 1.1774100225154747 * o->b;
        *theta = o->theta;
        k = *A < 3.0 ? 3.0 / *A : 1.0;
        *A *= k;
        *B *= k;
        if (*B < 1.0)
            *B = 1.0;
    } else {
        double r = sqrt((double)o->npix / M_PI);
        *A = *B = r > 3.0 ? r : 3.0;
        *theta = 0.0;
    }
}

/* 3x5 digit glyphs, one row per entry, bit 2 = left column. */
static const uint8_t sf_pv_digits[10][5] = {
    {7, 5, 5, 5, 7}, {2, 6, 2, 2, 7}, {7, 1, 7, 4, 7}, {7, 1, 7, 1, 7}, {5, 5, 7, 1, 1},
    {7, 4, 7, 1, 7}, {7, 4, 7, 5, 7}, {7, 1, 1, 1, 1}, {7, 5, 7, 5, 7}, {7, 5, 7, 1, 7},
};

static int glyph_on(const char *txt, int len, int gx, int gy)
{
    int ci = gx / 4, col = gx % 4;
    if (gx < 0 || gy < 0 || gy >= 5 || ci >= len || col == 3)
        return 0;
    return (sf_pv_digits[txt[ci] - '0'][gy] >> (2 - col)) & 1;
}

/* The digits of id with their top-left corner at (X0, Y0), magnified
 * SF_PV_FONT times, with a one-pixel black outline for contrast. */
static void draw_id(uint8_t *out, int W, int H, int X0, int Y0, int id)
{
    char txt[16];
    int len = snprintf(txt, sizeof txt, "%d", id), w, h;
    if (len <= 0 || id < 0)
        return;
    w = (len * 4 - 1) * SF_PV_FONT;
    h = 5 * SF_PV_FONT;
    for (int pass = 0; pass < 2; pass++)
        for (int Y = -1; Y <= h; Y++)
            for (int X = -1; X <= w; X++) {
                int on = 0;
                if (pass == 0) { /* outline: any set pixel in the 3x3 neighbourhood */
                    for (int dy = -1; dy <= 1 && !on; dy++)
                        for (int dx = -1; dx <= 1 && !on; dx++) {
                            int xx = X + dx, yy = Y + dy;
                            on = xx >= 0 && yy >= 0 &&
                                 glyph_on(txt, len, xx / SF_PV_FONT, yy / SF_PV_FONT);
                        }
                    if (on)
                        put_px(out, W, H, X0 + X, Y0 + Y, 0, 0, 0);
                } else if (X >= 0 && Y >= 0 &&
                           glyph_on(txt, len, X / SF_PV_FONT, Y / SF_PV_FONT)) {
                    put_px(out, W, H, X0 + X, Y0 + Y, SF_PREVIEW_TEXT_R, SF_PREVIEW_TEXT_G,
                           SF_PREVIEW_TEXT_B);
                }
            }
}

/* ---- PNG output -------------------------------------------------------- */

typedef struct {
    char msg[256];
} sf_pv_pngerr;

static void on_png_error(png_structp png, png_const_charp msg)
{
    sf_pv_pngerr *e = png_get_error_ptr(png);
    snprintf(e->msg, sizeof e->msg, "%s", msg ? msg : "libpng error");
    png_longjmp(png, 1);
}

static void on_png_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

/* Write W x H pixels of ch channels (1 grey, 3 RGB), top row first. */
static sf_status write_png(const char *path, const uint8_t *buf, int W, int H, int ch)
{
    char tmp[4096];
    void *fv = NULL;
    sf_pv_pngerr err = {""};
    png_structp png = NULL;
    png_infop info = NULL;
    sf_status st = sf_atomic_open(path, tmp, sizeof tmp, &fv);
    if (st)
        return st;
    png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &err, on_png_error, on_png_warning);
    if (png)
        info = png_create_info_struct(png);
    if (!png || !info) {
        png_destroy_write_struct(&png, info ? &info : NULL);
        sf_atomic_abort(fv, tmp);
        return sf_fail(SF_ERR_NOMEM, "%s: cannot create the PNG writer", path);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        sf_atomic_abort(fv, tmp);
        return sf_fail(SF_ERR_IO, "%s: PNG write failed: %s", path, err.msg);
    }
    png_init_io(png, (FILE *)fv);
    png_set_IHDR(png, info, (png_uint_32)W, (png_uint_32)H, 8,
                 ch == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < H; y++)
        png_write_row(png, (png_const_bytep)(buf + (size_t)y * W * ch));
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return sf_atomic_commit(fv, tmp, path);
}

static uint8_t *alloc_pixels(const char *path, size_t W, size_t H, int ch)
{
    uint8_t *b = NULL;
    if (W > 0x7fffffff || H > 0x7fffffff)
        sf_fail(SF_ERR_PARAM, "%s: preview of %zu x %zu pixels is too large for PNG", path, W, H);
    else if (!(b = malloc(W * H * ch)))
        sf_fail(SF_ERR_NOMEM, "%s: cannot allocate %zu x %zu preview pixels", path, W, H);
    return b;
}

/* ---- public API -------------------------------------------------------- */

sf_status sf_preview_image(const char *path, const sf_image *img, sf_stretch stretch)
{
    sf_pv_limits L;
    uint8_t *buf = NULL;
    int ch;
    sf_status st = compute_limits(path, img, stretch, &L);
    if (st)
        goto fail;
    ch = count_finite(img) == sf_npix(img->nx, img->ny) ? 1 : 3;
    if (!(buf = alloc_pixels(path, (size_t)img->nx, (size_t)img->ny, ch))) {
        st = SF_ERR_NOMEM;
        goto fail;
    }
    render_image(img, &L, 1, ch, buf);
    st = write_png(path, buf, img->nx, img->ny, ch);
fail:
    free(buf);
    return st;
}

sf_status sf_preview_segmap(const char *path, const sf_labels *labels)
{
    uint8_t *buf = NULL;
    sf_status st = SF_OK;
    int nx, ny;
    if (!labels || !labels->data || labels->loc != SF_HOST || labels->nx < 1 || labels->ny < 1) {
        st = sf_fail(SF_ERR_PARAM, "%s: segmap preview needs a non-empty host label map", path);
        goto fail;
    }
    nx = labels->nx;
    ny = labels->ny;
    if (!(buf = alloc_pixels(path, (size_t)nx, (size_t)ny, 3))) {
        st = SF_ERR_NOMEM;
        goto fail;
    }
    for (int y = 0; y < ny; y++) {
        const int32_t *r = labels->data + (size_t)y * labels->stride;
        uint8_t *row = buf + (size_t)(ny - 1 - y) * nx * 3;
        for (int x = 0; x < nx; x++) {
            if (r[x] > 0)
                sf_preview_label_colour(r[x], row + (size_t)x * 3);
            else
                row[(size_t)x * 3] = row[(size_t)x * 3 + 1] = row[(size_t)x * 3 + 2] = 0;
        }
    }
    st = write_png(path, buf, nx, ny, 3);
fail:
    free(buf);
    return st;
}

sf_status sf_preview_overlay(const char *path, const sf_image *img, const sf_source *src,
                             int n, sf_stretch stretch)
{
    sf_pv_limits L;
    uint8_t *buf = NULL;
    int s, W, H;
    sf_status st = compute_limits(path, img, stretch, &L);
    if (st)
        goto fail;
    if (n < 0 || (n > 0 && !src)) {
        st = sf_fail(SF_ERR_PARAM, "%s: overlay needs %d sources", path, n);
        goto fail;
    }
    s = sf_preview_overlay_scale(img->nx, img->ny);
    W = img->nx * s;
    H = img->ny * s;
    if (!(buf = alloc_pixels(path, (size_t)W, (size_t)H, 3))) {
        st = SF_ERR_NOMEM;
        goto fail;
    }
    render_image(img, &L, s, 3, buf);
    for (int pass = 0; pass < 2; pass++) /* all ellipses first, then all ids on top */
        for (int i = 0; i < n; i++) {
            const sf_source *o = &src[i];
            double cx = (o->x + 0.5) * s - 0.5, cy = (img->ny - o->y - 0.5) * s - 0.5;
            double A, B, t, c, sn, ex;
            if (!isfinite(cx) || !isfinite(cy))
                continue;
            sf_preview_ellipse(o, &A, &B, &t);
            A *= s;
            B *= s;
            c = cos(t * M_PI / 180.0);
            sn = sin(t * M_PI / 180.0);
            ex = sqrt(A * A * c * c + B * B * sn * sn); /* half extent in x */
            if (pass == 0)
                draw_ellipse(buf, W, H, cx, cy, A, B, t);
            else
                draw_id(buf, W, H, (int)lround(cx + ex + 3), (int)lround(cy - 2.5 * SF_PV_FONT),
                        o->id);
        }
    st = write_png(path, buf, W, H, 3);
fail:
    free(buf);
    return st;
}
