/* Convolution kernels for the `convolve` stage (both backends): Gaussian
 * beams, top-hats, SExtractor .conv filters and arrays (FITS PSFs: the I/O
 * layer's src/io/kernel_fits.c); their sums,
 * rank-one (separable) factors, noise gain, and the FFT's sizes (the
 * picker behind method=auto, sf_convolve_pick, is in cpu/convolve.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "skyfind/convolve.h"

/* Largest kernel side accepted at all (the FFT methods take any size up to
 * this; the direct methods stop at SF_KERNEL_MAX). */
#define KERNEL_SIDE_LIMIT 16384
/* Rank-one test: |w - col*row| <= SEP_RTOL * max|w| for every weight. */
#define SEP_RTOL 1e-6f

static sf_status kernel_new(sf_kernel *k, int nx, int ny, int sep)
{
    memset(k, 0, sizeof *k);
    if (nx < 1 || ny < 1 || nx > KERNEL_SIDE_LIMIT || ny > KERNEL_SIDE_LIMIT)
        return sf_fail(SF_ERR_PARAM, "kernel size %dx%d: sides must be in [1, %d]", nx, ny,
                       KERNEL_SIDE_LIMIT);
    k->nx = nx;
    k->ny = ny;
    k->w = calloc(sf_npix(nx, ny), sizeof *k->w);
    if (sep) {
        k->row = malloc((size_t)nx * sizeof *k->row);
        k->col = malloc((size_t)ny * sizeof *k->col);
    }
    if (!k->w || (sep && (!k->row || !k->col))) {
        sf_kernel_free(k);
        return sf_fail(SF_ERR_NOMEM, "kernel %dx%d: out of memory", nx, ny);
    }
    return SF_OK;
}

void sf_kernel_free(sf_kernel *k)
{
    if (!k)
        return;
    free(k->w);
    free(k->row);
    free(k->col);
    memset(k, 0, sizeof *k);
}

static void kernel_sums(sf_kernel *k)
{
    double s = 0, s2 = 0;
    for (size_t i = 0; i < sf_npix(k->nx, k->ny); i++) {
        s += k->w[i];
        s2 += (double)k->w[i] * k->w[i];
    }
    k->sum = s;
    k->sum2 = s2;
}

/* 1 if col[j]*row[i], rounded to float, equals w (exact) or is within tol. */
static int factors_match(const sf_kernel *k, const float *row, const float *col, float tol)
{
    for (int j = 0; j < k->ny; j++)
        for (int i = 0; i < k->nx; i++) {
            float p = col[j] * row[i], w = k->w[(size_t)j * k->nx + i];
            if (tol == 0 ? p != w : !(fabsf(p - w) <= tol))
                return 0;
        }
    return 1;
}

/* Rank-one detection: the row and the column through the largest weight
 * give the factors (col[jp] = 1 exactly, row = that row); accepted when the
 * product reproduces every weight to SEP_RTOL of the largest. */
static void kernel_detect_rank_one(sf_kernel *k)
{
    size_t n = sf_npix(k->nx, k->ny), p = 0;
    float m = 0, *row = NULL, *col = NULL;
    for (size_t i = 0; i < n; i++)
        if (fabsf(k->w[i]) > m) {
            m = fabsf(k->w[i]);
            p = i;
        }
    if (!(m > 0) || !isfinite(m))
        return; /* zero (or broken) kernel: no factors */
    row = malloc((size_t)k->nx * sizeof *row);
    col = malloc((size_t)k->ny * sizeof *col);
    if (!row || !col)
        goto no; /* the general path works without factors */
    int jp = (int)(p / (size_t)k->nx), ip = (int)(p % (size_t)k->nx);
    double piv = k->w[p];
    for (int i = 0; i < k->nx; i++)
        row[i] = k->w[(size_t)jp * k->nx + i];
    for (int j = 0; j < k->ny; j++)
        col[j] = j == jp ? 1.0f : (float)(k->w[(size_t)j * k->nx + ip] / piv);
    if (!factors_match(k, row, col, SEP_RTOL * m))
        goto no;
    k->row = row;
    k->col = col;
    return;
no:
    free(row);
    free(col);
}

void sf_kernel_update(sf_kernel *k)
{
    kernel_sums(k);
    /* keep factors that reproduce w exactly (those sf_kernel_gauss made) */
    if (k->row && k->col && factors_match(k, k->row, k->col, 0))
        return;
    free(k->row);
    free(k->col);
    k->row = k->col = NULL;
    kernel_detect_rank_one(k);
}

sf_status sf_kernel_normalise(sf_kernel *k)
{
    kernel_sums(k);
    if (k->sum == 0 || !isfinite(k->sum))
        return sf_fail(SF_ERR_PARAM, "kernel%s%s: cannot normalise, the weights sum to %g",
                       k->desc[0] ? " " : "", k->desc, k->sum);
    if (k->row && k->col && factors_match(k, k->row, k->col, 0)) {
        /* scale both factors to unit sum and rebuild w from them, so that w
         * stays exactly col*row */
        double rs = 0, cs = 0;
        for (int i = 0; i < k->nx; i++)
            rs += k->row[i];
        for (int j = 0; j < k->ny; j++)
            cs += k->col[j];
        if (rs != 0 && cs != 0 && isfinite(rs) && isfinite(cs)) {
            for (int i = 0; i < k->nx; i++)
                k->row[i] = (float)(k->row[i] / rs);
            for (int j = 0; j < k->ny; j++)
                k->col[j] = (float)(k->col[j] / cs);
            for (int j = 0; j < k->ny; j++)
                for (int i = 0; i < k->nx; i++)
                    k->w[(size_t)j * k->nx + i] = k->col[j] * k->row[i];
            kernel_sums(k);
            return SF_OK;
        }
    }
    for (size_t i = 0; i < sf_npix(k->nx, k->ny); i++)
        k->w[i] = (float)(k->w[i] / k->sum);
    sf_kernel_update(k);
    return SF_OK;
}

double sf_kernel_noise_gain(const sf_kernel *k)
{
    return sqrt(k->sum2) / fabs(k->sum); /* +inf for a zero-sum kernel */
}

/* ---- constructors -------------------------------------------------------- */

/* Normalised 1-D Gaussian samples at i - n/2, rounded to float. */
static void gauss_1d(float *f, int n, double sigma)
{
    double s = 0;
    for (int i = 0; i < n; i++) {
        double d = i - n / 2;
        s += exp(-0.5 * d * d / (sigma * sigma));
    }
    for (int i = 0; i < n; i++) {
        double d = i - n / 2;
        f[i] = (float)(exp(-0.5 * d * d / (sigma * sigma)) / s);
    }
}

sf_status sf_kernel_gauss(sf_kernel *k, double fwhm_maj, double fwhm_min, double pa_deg, int size)
{
    const double f2s = 1.0 / (2.0 * sqrt(2.0 * log(2.0))); /* FWHM -> sigma */
    sf_kernel t;
    sf_status s;
    if (!(fwhm_maj > 0) || !isfinite(fwhm_maj))
        return sf_fail(SF_ERR_PARAM, "gauss kernel: fwhm_maj %g must be a positive number of pixels", fwhm_maj);
    if (!(fwhm_min > 0) || !isfinite(fwhm_min))
        return sf_fail(SF_ERR_PARAM, "gauss kernel: fwhm_min %g must be a positive number of pixels", fwhm_min);
    if (fwhm_min > fwhm_maj)
        return sf_fail(SF_ERR_PARAM, "gauss kernel: fwhm_min %g is larger than fwhm_maj %g", fwhm_min, fwhm_maj);
    if (!isfinite(pa_deg))
        return sf_fail(SF_ERR_PARAM, "gauss kernel: position angle %g is not a number", pa_deg);
    if (size < 0 || size > KERNEL_SIDE_LIMIT)
        return sf_fail(SF_ERR_PARAM, "gauss kernel: size %d must be 0 (auto) or in [1, %d]", size, KERNEL_SIDE_LIMIT);
    double smaj = fwhm_maj * f2s, smin = fwhm_min * f2s;
    if (size == 0) {
        double half = ceil(3.0 * smaj);
        size = half > SF_KERNEL_MAX / 2 ? SF_KERNEL_MAX : 2 * (int)half + 1;
    }
    double q = remainder(pa_deg, 90.0);
    int sep = fwhm_maj == fwhm_min || fabs(q) < 1e-9;
    if ((s = kernel_new(&t, size, size, sep)) != SF_OK)
        return s;
    if (sep) {
        /* major axis along y at PA 0, 180, ...; along x at PA 90, 270, ... */
        int along_x = fwhm_maj != fwhm_min && (llround((pa_deg - q) / 90.0) & 1);
        gauss_1d(t.row, size, along_x ? smaj : smin);
        gauss_1d(t.col, size, along_x ? smin : smaj);
        for (int j = 0; j < size; j++)
            for (int i = 0; i < size; i++)
                t.w[(size_t)j * size + i] = t.col[j] * t.row[i];
    } else {
        double th = pa_deg * M_PI / 180.0, sn = sin(th), cs = cos(th), sum = 0;
        double *v = malloc(sf_npix(size, size) * sizeof *v);
        if (!v) {
            sf_kernel_free(&t);
            return sf_fail(SF_ERR_NOMEM, "gauss kernel %dx%d: out of memory", size, size);
        }
        for (int j = 0; j < size; j++)
            for (int i = 0; i < size; i++) {
                double dx = i - size / 2, dy = j - size / 2;
                double a = -dx * sn + dy * cs; /* along the major axis (PA from +y to -x) */
                double b = dx * cs + dy * sn;  /* along the minor axis */
                double e = exp(-0.5 * (a * a / (smaj * smaj) + b * b / (smin * smin)));
                v[(size_t)j * size + i] = e;
                sum += e;
            }
        for (size_t i = 0; i < sf_npix(size, size); i++)
            t.w[i] = (float)(v[i] / sum);
        free(v);
    }
    sf_kernel_update(&t);
    snprintf(t.desc, sizeof t.desc, "gauss fwhm %gx%g px pa %g deg, %dx%d", fwhm_maj,
             fwhm_min, pa_deg, size, size);
    *k = t;
    return SF_OK;
}

sf_status sf_kernel_tophat(sf_kernel *k, double radius)
{
    sf_kernel t;
    sf_status s;
    if (!(radius > 0) || !isfinite(radius) || radius > KERNEL_SIDE_LIMIT / 2 - 1)
        return sf_fail(SF_ERR_PARAM, "tophat kernel: radius %g must be in (0, %d] pixels", radius,
                       KERNEL_SIDE_LIMIT / 2 - 1);
    int h = (int)ceil(radius), n = 2 * h + 1;
    if ((s = kernel_new(&t, n, n, 0)) != SF_OK)
        return s;
    long cnt = 0;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++)
            if ((double)(i - h) * (i - h) + (double)(j - h) * (j - h) <= radius * radius) {
                t.w[(size_t)j * n + i] = 1;
                cnt++;
            }
    for (size_t i = 0; i < sf_npix(n, n); i++)
        t.w[i] = (float)(t.w[i] / (double)cnt);
    sf_kernel_update(&t);
    snprintf(t.desc, sizeof t.desc, "tophat radius %g px, %dx%d (%ld pixels)", radius, n, n, cnt);
    *k = t;
    return SF_OK;
}

static sf_status kernel_check_finite(const float *w, int nx, int ny, const char *what)
{
    for (int j = 0; j < ny; j++)
        for (int i = 0; i < nx; i++)
            if (!isfinite(w[(size_t)j * nx + i]))
                return sf_fail(SF_ERR_PARAM, "%s: weight (x=%d, y=%d) is %g (kernels must be finite)",
                               what, i, j, w[(size_t)j * nx + i]);
    return SF_OK;
}

sf_status sf_kernel_from_array(sf_kernel *k, const float *w, int nx, int ny, int normalise)
{
    sf_kernel t;
    sf_status s;
    if (!w)
        return sf_fail(SF_ERR_PARAM, "kernel from array: no weights given");
    if ((s = kernel_new(&t, nx, ny, 0)) != SF_OK)
        return s;
    if ((s = kernel_check_finite(w, nx, ny, "kernel from array")) != SF_OK) {
        sf_kernel_free(&t);
        return s;
    }
    memcpy(t.w, w, sf_npix(nx, ny) * sizeof *w);
    snprintf(t.desc, sizeof t.desc, "array %dx%d%s", nx, ny, normalise ? " normalised" : "");
    if (normalise && (s = sf_kernel_normalise(&t)) != SF_OK) {
        sf_kernel_free(&t);
        return s;
    }
    sf_kernel_update(&t);
    *k = t;
    return SF_OK;
}

/* ---- SExtractor filter files --------------------------------------------- */

sf_status sf_kernel_read_conv(sf_kernel *k, const char *path)
{
    FILE *f = NULL;
    char *line = NULL;
    size_t cap = 0;
    float *w = NULL;
    size_t nw = 0, capw = 0;
    int nx = 0, ny = 0, lineno = 0, norm = 1, have_norm = 0;
    sf_kernel t;
    sf_status s = SF_OK;

    if (!(f = fopen(path, "r")))
        return sf_fail(SF_ERR_IO, "cannot open the filter file %s: %s", path, strerror(errno));
    while (getline(&line, &cap, f) >= 0) {
        char *p = line, *tok, *save = NULL;
        lineno++;
        /* cut the comment, then tokenise */
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        if (lineno == 1) {
            tok = strtok_r(p, " \t\r\n", &save);
            if (!tok || strcmp(tok, "CONV") != 0) {
                s = sf_fail(SF_ERR_PARAM, "%s:1: not a SExtractor convolution filter (the first "
                            "line must be \"CONV NORM\" or \"CONV NONORM\")", path);
                goto done;
            }
            if ((tok = strtok_r(NULL, " \t\r\n", &save))) {
                if (strcmp(tok, "NORM") == 0)
                    norm = 1;
                else if (strcmp(tok, "NONORM") == 0)
                    norm = 0;
                else {
                    s = sf_fail(SF_ERR_PARAM, "%s:1: \"%s\" after CONV: expected NORM or NONORM",
                                path, tok);
                    goto done;
                }
                have_norm = 1;
                if ((tok = strtok_r(NULL, " \t\r\n", &save))) {
                    s = sf_fail(SF_ERR_PARAM, "%s:1: unexpected \"%s\" after CONV %s", path,
                                tok, norm ? "NORM" : "NONORM");
                    goto done;
                }
            }
            continue;
        }
        int nrow = 0;
        for (tok = strtok_r(p, " \t\r\n\f\v", &save); tok; tok = strtok_r(NULL, " \t\r\n\f\v", &save)) {
            char *end;
            errno = 0;
            double v = strtod(tok, &end);
            if (end == tok || *end) {
                s = sf_fail(SF_ERR_PARAM, "%s:%d: \"%s\" is not a number", path, lineno, tok);
                goto done;
            }
            if (!isfinite(v) || fabs(v) > 3.4e38) {
                s = sf_fail(SF_ERR_PARAM, "%s:%d: weight \"%s\" is not a finite float", path,
                            lineno, tok);
                goto done;
            }
            if (nw == capw) {
                size_t nc = capw ? 2 * capw : 256;
                float *nwp = realloc(w, nc * sizeof *w);
                if (!nwp) {
                    s = sf_fail(SF_ERR_NOMEM, "%s: out of memory reading the filter", path);
                    goto done;
                }
                w = nwp;
                capw = nc;
            }
            w[nw++] = (float)v;
            nrow++;
        }
        if (nrow == 0)
            continue; /* blank or comment line */
        if (ny == 0)
            nx = nrow;
        else if (nrow != nx) {
            s = sf_fail(SF_ERR_PARAM, "%s:%d: row %d has %d weights but the first row has %d "
                        "(rows must have equal length)", path, lineno, ny + 1, nrow, nx);
            goto done;
        }
        if (++ny > KERNEL_SIDE_LIMIT || nx > KERNEL_SIDE_LIMIT) {
            s = sf_fail(SF_ERR_PARAM, "%s:%d: filter larger than %d pixels on a side", path,
                        lineno, KERNEL_SIDE_LIMIT);
            goto done;
        }
    }
    if (ferror(f)) {
        s = sf_fail(SF_ERR_IO, "%s: read error after line %d: %s", path, lineno, strerror(errno));
        goto done;
    }
    if (lineno == 0) {
        s = sf_fail(SF_ERR_PARAM, "%s: empty file (expected \"CONV NORM\" or \"CONV NONORM\", "
                    "then rows of weights)", path);
        goto done;
    }
    if (ny == 0) {
        s = sf_fail(SF_ERR_PARAM, "%s:%d: no weights after the CONV line", path, lineno);
        goto done;
    }
    if ((s = kernel_new(&t, nx, ny, 0)) != SF_OK)
        goto done;
    memcpy(t.w, w, nw * sizeof *w);
    if (norm) {
        /* SExtractor (filter.c, getconv) divides by the sum of the absolute
         * weights, whatever their signs */
        double sa = 0;
        for (size_t i = 0; i < nw; i++)
            sa += fabs(t.w[i]);
        if (!(sa > 0)) {
            sf_kernel_free(&t);
            s = sf_fail(SF_ERR_PARAM, "%s: CONV NORM filter whose weights are all zero", path);
            goto done;
        }
        for (size_t i = 0; i < nw; i++)
            t.w[i] = (float)(t.w[i] / sa);
    }
    sf_kernel_update(&t);
    const char *base = strrchr(path, '/');
    snprintf(t.desc, sizeof t.desc, "conv %.100s %dx%d %s", base ? base + 1 : path, nx, ny,
             !have_norm ? "NORM (implied)" : norm ? "NORM" : "NONORM");
    *k = t;
done:
    free(w);
    free(line);
    fclose(f);
    return s;
}

/* ---- FFT sizes (the method picker: cpu/convolve.c) ---------------------- */

int sf_fft_size(int n)
{
    if (n <= 1)
        return 1;
    for (int m = n;; m++) {
        int r = m;
        while (r % 2 == 0)
            r /= 2;
        while (r % 3 == 0)
            r /= 3;
        while (r % 5 == 0)
            r /= 5;
        while (r % 7 == 0)
            r /= 7;
        if (r == 1)
            return m;
    }
}
