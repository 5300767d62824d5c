/* Check suite for the FITS module (src/io/fits.c, src/io/fits_describe.c): sizes and NaN
 * counts of every real image in the data folder, beams, extended names,
 * planes, error messages for bad files, and write/read round trips.
 * In this file, in order: the real images (sizes and NaN counts, info
 * fields, beams); extended names and planes; the error messages of bad files
 * (test_read_errors, then test_hostile_reads: hostile headers,
 * tile-compressed damage, the checks made before any allocation); the card
 * rule for WCSLIB; +-Inf pixels; write/read round trips, write failures
 * (atomic output) and `skyfind info`'s description; main. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>
#include <fitsio.h>
#include <sys/resource.h>
#include "sftest.h"
#include "skyfind/fits.h"
#include "skyfind/wcs.h"

#define NEED_DATA()                                                              \
    do {                                                                         \
        if (!sftest_have_data()) {                                               \
            printf("SKIP: no test data in %s\n", sftest_data(""));              \
            return;                                                              \
        }                                                                        \
    } while (0)

/* From the data folder's INVENTORY.md: size, planes and NaN count over all planes. */
static const struct {
    const char *name;
    int nx, ny, nplanes;
    long long nnan;
} inventory[] = {
    {"optical_dss_100x100.fits.gz", 100, 100, 1, 0},
    {"optical_eso_ntt_emmi_256x256_int16_bscale.fits", 256, 256, 1, 0},
    {"optical_gemini_gmos_200x150_mef.fits", 200, 150, 1, 0},
    {"optical_ngc1316_440x300_RICE_tilecompressed.fits", 440, 300, 1, 0},
    {"quirk_2mass_20x21_int16_bscale.fits", 20, 21, 1, 0},
    {"quirk_fpack_gzip2_f64_10x10.fits.fz", 10, 10, 1, 0},
    {"quirk_obit_bitpix64_3x2.fits", 3, 2, 1, 0},
    {"quirk_ukidss_wfcam_300x300_int32_bscale_zpn.fits", 300, 300, 1, 0},
    {"radio_amila_GRB120422A_512x512x1x1.fits", 512, 512, 1, 0},
    {"radio_askap_racs_10x10x1x1.fits", 10, 10, 1, 0},
    {"radio_atca_scorpio_s17_1000x1000.fits", 1000, 1000, 1, 0},
    {"radio_hi_cube_ngc6503_64x64x30_int16.fits", 64, 64, 30, 0},
    {"radio_lofar_GRB201006A_wsclean_256x256.DERIVED.fits.gz", 256, 256, 1, 0},
    {"radio_lofar_GRB201006A_wsclean_256x256.fits", 256, 256, 1, 0},
    {"radio_lofar_dirty_beam_512x512x1x1.fits", 512, 512, 1, 0},
    {"radio_parkes_1904-66_SIN.fits", 192, 192, 1, 14837},
    {"radio_parkes_1904-66_SIN_3d.fits", 192, 192, 3, 44511},
    {"radio_parkes_1904-66_SIN_cube10.fits", 192, 192, 10, 148370},
    {"radio_parkes_1904-66_SIN_galactic.fits", 266, 210, 1, 32090},
    {"radio_parkes_1904-66_SIN_half.fits", 192, 100, 1, 8510},
    {"radio_parkes_1904-66_SIN_neg.fits", 192, 192, 1, 14837},
    {"radio_parkes_small_20x20x1x1.fits", 20, 20, 1, 0},
    {"radio_parkes_small_20x20x1x1x1.fits", 20, 20, 1, 0},
    {"radio_vla_nvas_W51_22GHz_114x124x1x1.fits", 114, 124, 1, 2827},
    {"sim_aegean_synthetic_512x256.fits", 512, 256, 1, 0},
};

static long long count_nan(const sf_image *im)
{
    long long n = 0;
    for (size_t i = 0; i < sf_npix(im->nx, im->ny); i++)
        n += isnan(im->data[i]) ? 1 : 0;
    return n;
}

/* Is there a card with this keyword in the header? Copies its 80 chars. */
static int header_card(const sf_fits_info *in, const char *key, char card[81])
{
    size_t n = strlen(key);
    for (int i = 0; in->header && i < in->ncards; i++) {
        const char *c = in->header + (size_t)i * 80;
        if (strncmp(c, key, n) == 0 && (n == 8 || c[n] == ' ' || c[n] == '=')) {
            if (card) {
                memcpy(card, c, 80);
                card[80] = '\0';
            }
            return 1;
        }
    }
    return 0;
}

START_TEST(test_inventory_sizes_and_nans)
{
    NEED_DATA();
    for (size_t f = 0; f < sizeof inventory / sizeof inventory[0]; f++) {
        long long total = 0;
        int nplanes = 1;
        for (int p = 0; p < nplanes; p++) {
            sf_image im = {0};
            sf_fits_info in;
            sf_status st = sf_fits_read(sftest_data(inventory[f].name), p, NULL, &im, &in);
            ck_assert_msg(st == SF_OK, "%s plane %d: %s", inventory[f].name, p, sf_errdetail());
            ck_assert_msg(im.nx == inventory[f].nx && im.ny == inventory[f].ny,
                          "%s: %dx%d, expected %dx%d", inventory[f].name, im.nx, im.ny,
                          inventory[f].nx, inventory[f].ny);
            ck_assert_int_eq(in.nplanes, inventory[f].nplanes);
            ck_assert_int_eq(in.plane, p);
            ck_assert_msg(count_nan(&im) == in.nnan, "%s: nnan field disagrees", inventory[f].name);
            ck_assert_int_eq(in.ncards > 0, 1);
            ck_assert_int_eq((int)strlen(in.header), in.ncards * 80);
            ck_assert_msg(!header_card(&in, "END", NULL), "%s: END card kept", inventory[f].name);
            nplanes = in.nplanes;
            total += in.nnan;
            sf_image_free(&im, NULL);
            sf_fits_info_free(&in);
        }
        ck_assert_msg(total == inventory[f].nnan, "%s: %lld NaN, INVENTORY says %lld",
                      inventory[f].name, total, inventory[f].nnan);
    }
}
END_TEST

START_TEST(test_info_fields)
{
    sf_image im = {0};
    sf_fits_info in;
    NEED_DATA();
    ck_assert_int_eq(sf_fits_read(sftest_data("radio_amila_GRB120422A_512x512x1x1.fits"), -1,
                                  NULL, &im, &in), SF_OK);
    ck_assert_int_eq(in.hdu, 1);
    ck_assert_int_eq(in.naxis, 4);
    ck_assert_int_eq((int)in.naxes[2], 1);
    ck_assert_int_eq(in.bitpix, -32);
    ck_assert_int_eq(in.plane, 0);
    ck_assert_str_eq(in.bunit, "JY/BEAM");
    ck_assert_str_eq(in.ctype[0], "RA---SIN");
    ck_assert_str_eq(in.ctype[2], "STOKES");
    ck_assert_str_eq(in.ctype[3], "VOPT");
    sf_image_free(&im, NULL);
    sf_fits_info_free(&in);

    ck_assert_int_eq(sf_fits_read(sftest_data("optical_eso_ntt_emmi_256x256_int16_bscale.fits"),
                                  0, NULL, &im, &in), SF_OK);
    ck_assert_int_eq(in.bitpix, 16);
    ck_assert(fabs(in.bscale - 2.92273835509) < 1e-12);
    ck_assert(fabs(in.bzero - 3713.66692596) < 1e-9);
    ck_assert_int_eq(in.has_beam, 0);
    ck_assert_str_eq(in.bunit, "");
    sf_image_free(&im, NULL);
    sf_fits_info_free(&in);

    ck_assert_int_eq(sf_fits_read(sftest_data("quirk_obit_bitpix64_3x2.fits"), 0, NULL, &im,
                                  &in), SF_OK);
    ck_assert_int_eq(in.bitpix, 64);
    ck_assert_int_eq(in.has_blank, 1);
    ck_assert_int_eq((int)in.blank, -32765);
    sf_image_free(&im, NULL);
    sf_fits_info_free(&in);

    /* BLANK=-1 on float data: CFITSIO ignores it, NaNs stay NaN, -1.0 stays a value */
    ck_assert_int_eq(sf_fits_read(sftest_data("radio_vla_nvas_W51_22GHz_114x124x1x1.fits"), 0,
                                  NULL, &im, &in), SF_OK);
    ck_assert_int_eq(in.has_blank, 1);
    ck_assert_int_eq((int)in.blank, -1);
    ck_assert_int_eq((int)in.nnan, 2827);
    sf_image_free(&im, NULL);
    sf_fits_info_free(&in);
}
END_TEST

static void check_beam(const char *name, const char *source, double bmaj, double bmin,
                       double bpa)
{
    sf_image im = {0};
    sf_fits_info in;
    ck_assert_msg(sf_fits_read(sftest_data(name), 0, NULL, &im, &in) == SF_OK, "%s: %s", name,
                  sf_errdetail());
    ck_assert_msg(in.has_beam, "%s: no beam found", name);
    ck_assert_str_eq(in.beam_source, source);
    ck_assert_msg(fabs(in.bmaj - bmaj) <= 1e-6 * bmaj && fabs(in.bmin - bmin) <= 1e-6 * bmin &&
                      fabs(in.bpa - bpa) < 1e-6,
                  "%s: beam %.8g %.8g %.8g, expected %.8g %.8g %.8g", name, in.bmaj, in.bmin,
                  in.bpa, bmaj, bmin, bpa);
    sf_image_free(&im, NULL);
    sf_fits_info_free(&in);
}

START_TEST(test_beam)
{
    char card[81];
    sf_image im = {0};
    sf_fits_info in;
    NEED_DATA();
    check_beam("radio_parkes_1904-66_SIN.fits", "BMAJ", 0.24, 0.24, 0.0);
    check_beam("quirk_obit_bitpix64_3x2.fits", "CLEANBMJ", 2.2222e-02, 2.2222e-02, 0.0);
    /* AIPS HISTORY cards: compare with the card itself */
    const char *hist[] = {"radio_vla_nvas_W51_22GHz_114x124x1x1.fits",
                          "radio_hi_cube_ngc6503_64x64x30_int16.fits"};
    for (int f = 0; f < 2; f++) {
        double a = 0, b = 0, c = 0;
        int found = 0;
        ck_assert_int_eq(sf_fits_read(sftest_data(hist[f]), 0, NULL, &im, &in), SF_OK);
        ck_assert(!header_card(&in, "BMAJ", card));
        for (int i = 0; i < in.ncards; i++) {
            const char *p;
            memcpy(card, in.header + (size_t)i * 80, 80);
            card[80] = '\0';
            if (!strncmp(card, "HISTORY", 7) && (p = strstr(card, "CLEAN BMAJ=")) != NULL)
                found = sscanf(p, "CLEAN BMAJ= %lf BMIN= %lf BPA= %lf", &a, &b, &c) == 3;
        }
        ck_assert_msg(found, "%s: no AIPS CLEAN card", hist[f]);
        sf_image_free(&im, NULL);
        sf_fits_info_free(&in);
        check_beam(hist[f], "HISTORY", a, b, c);
    }
    ck_assert_int_eq(sf_fits_read(sftest_data("optical_dss_100x100.fits.gz"), 0, NULL, &im,
                                  &in), SF_OK);
    ck_assert_int_eq(in.has_beam, 0);
    ck_assert_str_eq(in.beam_source, "");
    sf_image_free(&im, NULL);
    sf_fits_info_free(&in);
}
END_TEST

static void read_ok(const char *name, int hdu, int compressed, int bitpix, sf_image *im,
                    sf_fits_info *in)
{
    ck_assert_msg(sf_fits_read(sftest_data(name), 0, NULL, im, in) == SF_OK, "%s: %s", name,
                  sf_errdetail());
    ck_assert_msg(in->hdu == hdu, "%s: HDU %d, expected %d", name, in->hdu, hdu);
    ck_assert_int_eq(in->compressed, compressed);
    ck_assert_int_eq(in->bitpix, bitpix);
}

START_TEST(test_extended_names)
{
    sf_image a = {0}, b = {0};
    sf_fits_info ia, ib;
    NEED_DATA();
    /* MEF: the empty primary is skipped; [2] and [VAR] name the same HDU */
    read_ok("optical_gemini_gmos_200x150_mef.fits", 2, 0, -32, &a, &ia);
    sf_image_free(&a, NULL);
    sf_fits_info_free(&ia);
    read_ok("optical_gemini_gmos_200x150_mef.fits[SCI]", 2, 0, -32, &a, &ia);
    read_ok("optical_gemini_gmos_200x150_mef.fits[1]", 2, 0, -32, &b, &ib);
    ck_assert(memcmp(a.data, b.data, sf_npix(a.nx, a.ny) * sizeof(float)) == 0);
    sf_image_free(&a, NULL);
    sf_fits_info_free(&ia);
    sf_image_free(&b, NULL);
    sf_fits_info_free(&ib);
    read_ok("optical_gemini_gmos_200x150_mef.fits[2]", 3, 0, -32, &a, &ia);
    read_ok("optical_gemini_gmos_200x150_mef.fits[VAR]", 3, 0, -32, &b, &ib);
    ck_assert(memcmp(a.data, b.data, sf_npix(a.nx, a.ny) * sizeof(float)) == 0);
    sf_image_free(&a, NULL);
    sf_fits_info_free(&ia);
    sf_image_free(&b, NULL);
    sf_fits_info_free(&ib);
    /* [0] names the empty primary explicitly: an error, not a silent move */
    ck_assert_int_ne(sf_fits_read(sftest_data("optical_gemini_gmos_200x150_mef.fits[0]"), 0, NULL,
                                  &a, &ia), SF_OK);
    ck_assert_ptr_null(a.data);
    ck_assert_ptr_nonnull(strstr(sf_errdetail(), "NAXIS=0"));
    /* gzip file equals its parent */
    read_ok("radio_lofar_GRB201006A_wsclean_256x256.DERIVED.fits.gz", 1, 0, -32, &a, &ia);
    read_ok("radio_lofar_GRB201006A_wsclean_256x256.fits", 1, 0, -32, &b, &ib);
    ck_assert(memcmp(a.data, b.data, sf_npix(a.nx, a.ny) * sizeof(float)) == 0);
    ck_assert_int_eq(ia.ncards, ib.ncards);
    sf_image_free(&a, NULL);
    sf_fits_info_free(&ia);
    sf_image_free(&b, NULL);
    sf_fits_info_free(&ib);
    /* tile-compressed: RICE (int16) and fpack GZIP_2 (float64) */
    read_ok("optical_ngc1316_440x300_RICE_tilecompressed.fits", 2, 1, 16, &a, &ia);
    ck_assert_str_eq(ia.ctype[0], "RA---SIN");
    ck_assert(header_card(&ia, "CRVAL1", NULL));
    ck_assert(!header_card(&ia, "ZIMAGE", NULL));
    ck_assert(!header_card(&ia, "TFORM1", NULL));
    sf_image_free(&a, NULL);
    sf_fits_info_free(&ia);
    read_ok("quirk_fpack_gzip2_f64_10x10.fits.fz", 2, 1, -64, &a, &ia);
    for (int i = 0; i < 100; i++)
        ck_assert(a.data[i] == 0.0f);
    sf_image_free(&a, NULL);
    sf_fits_info_free(&ia);
    read_ok("quirk_ukidss_wfcam_300x300_int32_bscale_zpn.fits", 2, 0, 32, &a, &ia);
    ck_assert(fabs(ia.bscale - 0.7071) < 1e-12);
    sf_image_free(&a, NULL);
    sf_fits_info_free(&ia);
}
END_TEST

START_TEST(test_planes)
{
    sf_image p0 = {0}, p3 = {0}, bad = {0};
    sf_fits_info i0, i3, ib;
    const char *cube = "radio_parkes_1904-66_SIN_cube10.fits";
    size_t ndiff = 0;
    NEED_DATA();
    /* the Aegean "cube10" repeats one map 10 times: plane 3 equals plane 0 */
    ck_assert_int_eq(sf_fits_read(sftest_data(cube), -1, NULL, &p0, &i0), SF_OK);
    ck_assert_int_eq(i0.plane, 0);
    ck_assert_int_eq(i0.nplanes, 10);
    ck_assert_int_eq(sf_fits_read(sftest_data(cube), 3, NULL, &p3, &i3), SF_OK);
    ck_assert_int_eq(i3.plane, 3);
    ck_assert(memcmp(p0.data, p3.data, sf_npix(p0.nx, p0.ny) * sizeof(float)) == 0);
    sf_image_free(&p3, NULL);
    sf_fits_info_free(&i3);
    sf_image_free(&p0, NULL);
    sf_fits_info_free(&i0);
    /* the _3d file's planes are the map plus 0, 1, 2 */
    ck_assert_int_eq(sf_fits_read(sftest_data("radio_parkes_1904-66_SIN_3d.fits"), 0, NULL, &p0,
                                  &i0), SF_OK);
    ck_assert_int_eq(sf_fits_read(sftest_data("radio_parkes_1904-66_SIN_3d.fits"), 2, NULL, &p3,
                                  &i3), SF_OK);
    for (size_t i = 0; i < sf_npix(p0.nx, p0.ny); i++) {
        ck_assert_int_eq(isnan(p0.data[i]), isnan(p3.data[i]));
        if (!isnan(p0.data[i]))
            ck_assert_msg(fabsf(p3.data[i] - p0.data[i] - 2.0f) < 1e-4f, "pixel %zu: %g vs %g", i,
                          p3.data[i], p0.data[i]);
    }
    sf_image_free(&p3, NULL);
    sf_fits_info_free(&i3);
    sf_image_free(&p0, NULL);
    sf_fits_info_free(&i0);
    /* the HI cube's channels differ */
    ck_assert_int_eq(sf_fits_read(sftest_data("radio_hi_cube_ngc6503_64x64x30_int16.fits"), 0,
                                  NULL, &p0, &i0), SF_OK);
    ck_assert_int_eq(sf_fits_read(sftest_data("radio_hi_cube_ngc6503_64x64x30_int16.fits"), 15,
                                  NULL, &p3, &i3), SF_OK);
    for (size_t i = 0; i < sf_npix(p0.nx, p0.ny); i++)
        ndiff += p0.data[i] != p3.data[i];
    ck_assert_msg(ndiff > 100, "HI channel 15 differs from channel 0 in only %zu pixels", ndiff);
    bad.data = (float *)&bad; /* must come back NULL */
    ck_assert_int_eq(sf_fits_read(sftest_data(cube), 10, NULL, &bad, &ib), SF_ERR_PARAM);
    ck_assert_ptr_null(bad.data);
    ck_assert_ptr_nonnull(strstr(sf_errdetail(), cube));
    ck_assert_ptr_nonnull(strstr(sf_errdetail(), "1..10"));
    ck_assert_int_eq(sf_fits_read(sftest_data("radio_parkes_1904-66_SIN.fits"), 1, NULL, &bad,
                                  &ib), SF_ERR_PARAM);
    ck_assert_int_eq(sf_fits_read(sftest_data("radio_parkes_small_20x20x1x1x1.fits"), 0, NULL,
                                  &bad, &ib), SF_OK);
    ck_assert_int_eq(ib.nplanes, 1);
    ck_assert_int_eq(ib.naxis, 5);
    sf_image_free(&bad, NULL);
    sf_fits_info_free(&ib);
    sf_image_free(&p0, NULL);
    sf_fits_info_free(&i0);
    sf_image_free(&p3, NULL);
    sf_fits_info_free(&i3);
}
END_TEST

static char tmpdir[256];

static const char *tmp_path(const char *name)
{
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sf_test_fits.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    if (!d)
        return;
    chmod(tmpdir, 0700);
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            chmod(tmp_path(e->d_name), 0700);
            rmdir(tmp_path(e->d_name));
            remove(tmp_path(e->d_name));
        }
    }
    closedir(d);
    rmdir(tmpdir);
}

/* The read fails, names the file in one line, and leaves nothing allocated. */
static void expect_read_error(const char *path, const char *name, const char *words)
{
    sf_image im = {0};
    sf_fits_info in;
    const char *d;
    sf_status st;
    im.data = (float *)&im;
    st = sf_fits_read(path, 0, NULL, &im, &in);
    d = sf_errdetail();
    ck_assert_msg(st == SF_ERR_FITS || st == SF_ERR_FORMAT || st == SF_ERR_IO,
                  "%s: status %d (%s)", name, (int)st, d);
    ck_assert_ptr_null(im.data);
    ck_assert_ptr_null(in.header);
    ck_assert_msg(strstr(d, name) != NULL, "detail does not name %s: %s", name, d);
    ck_assert_msg(strchr(d, '\n') == NULL, "detail is not one line: %s", d);
    ck_assert_msg(words == NULL || strstr(d, words) != NULL, "detail lacks '%s': %s", words, d);
}

START_TEST(test_read_errors)
{
    FILE *in, *out;
    char buf[65536];
    size_t n, total = 0;
    fitsfile *fp = NULL;
    int status = 0;
    char *ttype[] = {"X"}, *tform[] = {"1E"};
    NEED_DATA();
    make_tmpdir();
    /* truncated copy of a real file: header intact, data cut short */
    in = fopen(sftest_data("radio_parkes_1904-66_SIN.fits"), "rb");
    out = fopen(tmp_path("truncated.fits"), "wb");
    ck_assert(in && out);
    while (total < 100000 && (n = fread(buf, 1, sizeof buf, in)) > 0) {
        if (total + n > 100000)
            n = 100000 - total;
        fwrite(buf, 1, n, out);
        total += n;
    }
    fclose(in);
    fclose(out);
    expect_read_error(tmp_path("truncated.fits"), "truncated.fits", "truncated");
    /* a text file named .fits */
    out = fopen(tmp_path("notes.fits"), "w");
    for (int i = 0; i < 100; i++)
        fprintf(out, "this is line %d of a text file, not a FITS file at all\n", i);
    fclose(out);
    expect_read_error(tmp_path("notes.fits"), "notes.fits", "not a FITS file");
    /* a table-only FITS file made with CFITSIO */
    fits_create_file(&fp, tmp_path("table.fits"), &status);
    fits_create_tbl(fp, BINARY_TBL, 0, 1, ttype, tform, NULL, "T", &status);
    fits_close_file(fp, &status);
    ck_assert_int_eq(status, 0);
    expect_read_error(tmp_path("table.fits"), "table.fits", "only tables");
    expect_read_error(sftest_data("quirk_tilecomp_uint16_bzero_3px.fits"),
                      "quirk_tilecomp_uint16_bzero_3px.fits", "NAXIS=1");
    expect_read_error(sftest_data("radio_parkes_1904-66_SIN.REF_aegean_comp.fits"),
                      "REF_aegean_comp.fits", "only tables");
    expect_read_error(tmp_path("missing.fits"), "missing.fits", "no such file");
    expect_read_error(sftest_data("optical_gemini_gmos_200x150_mef.fits[NOPE]"),
                      "optical_gemini_gmos_200x150_mef.fits", NULL);
    remove_tmpdir();
}
END_TEST

/* Append one HDU of raw header cards (as given, unchecked), ended by the
 * 8 bytes of end (NULL: "END"), and ndata data bytes (data, or zeros). */
static void append_raw_hdu(FILE *f, const char *const *cards, const char *end,
                           const unsigned char *data, size_t ndata)
{
    size_t n = 0;
    char card[81];
    for (; cards[n]; n++) {
        snprintf(card, sizeof card, "%-80s", cards[n]);
        fwrite(card, 1, 80, f);
    }
    snprintf(card, sizeof card, "%-80s", "END");
    if (end)
        memcpy(card, end, 8);
    fwrite(card, 1, 80, f);
    for (n = (n + 1) * 80; n % 2880; n++)
        fputc(' ', f);
    for (size_t i = 0; i < ndata; i++)
        fputc(data ? data[i] : 0, f);
}

/* A FITS file of raw header cards (as given, unchecked) and data bytes. */
static void write_raw_fits(const char *path, const char *const *cards, size_t ndata)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    append_raw_hdu(f, cards, NULL, NULL, ndata);
    fclose(f);
}

/* Hostile input (issue 16): the four crash reproducers of the data folder's
 * fuzz/ and the bad files of the same kinds fail with one line naming the
 * file and the problem (or, for the WCS ones, read with the bad cards left
 * out), never a signal or a memory bomb: the test runs under a 4 GB
 * address-space limit (not with AddressSanitizer, whose shadow needs more). */
START_TEST(test_hostile_reads)
{
    sf_image im = {0};
    sf_fits_info in;
    sf_wcs *w;
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define SF_NO_RLIMIT 1
#endif
#endif
#if !defined(__SANITIZE_ADDRESS__) && !defined(SF_NO_RLIMIT)
    struct rlimit rl = {4000000000UL, 4000000000UL};
    setrlimit(RLIMIT_AS, &rl);
#endif
    NEED_DATA();
    make_tmpdir();
    expect_read_error(sftest_data("fuzz/cfitsio_sigfpe_ztile0.fits.fz"),
                      "cfitsio_sigfpe_ztile0.fits.fz", "HDU 2: tile-compressed image with ZTILE1 = 0");
    expect_read_error(sftest_data("fuzz/cfitsio_gzip_tile_bomb.fits.fz"),
                      "cfitsio_gzip_tile_bomb.fits.fz", "tile 1 of the tile-compressed image is corrupt");
    /* WCSLIB aborted on these: the bad cards are counted and kept from it */
    ck_assert_int_eq(sf_fits_read(sftest_data("fuzz/wcspih_abort_specsys.fits"), 0, NULL, &im, &in),
                     SF_OK);
    ck_assert_int_eq(in.nbadcards, 1);
    w = sf_wcs_open(&in, im.nx, im.ny);
    ck_assert_msg(w != NULL, "%s", sf_errdetail());
    ck_assert_int_eq(sf_wcs_ndropped(w), 1);
    sf_wcs_close(w);
    sf_image_free(&im, NULL);
    sf_fits_info_free(&in);
    ck_assert_int_eq(sf_fits_read(sftest_data("fuzz/wcspih_abort_ctype.fits"), 0, NULL, &im, &in),
                     SF_OK);
    ck_assert_int_eq(in.nbadcards, 3);
    w = sf_wcs_open(&in, im.nx, im.ny); /* CTYPE1 is gone: no celestial WCS, no abort */
    ck_assert_ptr_null(w);
    /* outputs do not hand the bad cards on */
    ck_assert_int_eq(sf_fits_write_image(tmp_path("out.fits"), &in, SF_FITS_FLOAT32, im.data, im.nx,
                                         im.ny, 0, NULL), SF_OK);
    sf_image_free(&im, NULL);
    sf_fits_info_free(&in);
    ck_assert_int_eq(sf_fits_read(tmp_path("out.fits"), 0, NULL, &im, &in), SF_OK);
    ck_assert_int_eq(in.nbadcards, 0);
    sf_image_free(&im, NULL);
    sf_fits_info_free(&in);
    /* not regular files */
    expect_read_error(tmpdir, tmpdir + strlen(tmpdir) - 6, "is a directory, not a FITS file");
    ck_assert_int_eq(mkfifo(tmp_path("pipe.fits"), 0600), 0);
    expect_read_error(tmp_path("pipe.fits"), "pipe.fits", "is a FIFO");
    /* memory bomb: 5 kB declaring 2,000,000^2 float pixels */
    {
        const char *bomb[] = {"SIMPLE  =                    T", "BITPIX  =                  -32",
                              "NAXIS   =                    2", "NAXIS1  =              2000000",
                              "NAXIS2  =              2000000", NULL};
        const char *nan[] = {"SIMPLE  =                    T", "BITPIX  =                   16",
                             "NAXIS   =                    2", "NAXIS1  =                    4",
                             "NAXIS2  =                    4", "BSCALE  =                  NAN", NULL};
        write_raw_fits(tmp_path("bomb.fits"), bomb, 2000);
        expect_read_error(tmp_path("bomb.fits"), "bomb.fits",
                          "declares 2000000 x 2000000 pixels (1.6e+04 GB) but the file holds only "
                          "4880 bytes");
        write_raw_fits(tmp_path("bscale.fits"), nan, 32);
        expect_read_error(tmp_path("bscale.fits"), "bscale.fits", "BSCALE = NAN cannot scale");
    }
    /* fuzzing, 2026-11-29: BLANK = a string of 29 characters or more aborted
     * the process inside CFITSIO's integer conversion (a message buffer
     * overflow). Such a BLANK is no BLANK; an integer one, or one written
     * as a number with a D exponent, still is. */
    {
        static const char *blank[][2] = {
            {"BLANK   = 'not an integer at all, and rather long'", NULL},
            {"BLANK   =                   -7", "-7"},
            {"BLANK   =               1.0D+1", "10"}};
        for (int k = 0; k < 3; k++) {
            const char *c[] = {"SIMPLE  =                    T", "BITPIX  =                   16",
                               "NAXIS   =                    2", "NAXIS1  =                    4",
                               "NAXIS2  =                    4", blank[k][0], NULL};
            write_raw_fits(tmp_path("blank.fits"), c, 2880);
            ck_assert_msg(sf_fits_read(tmp_path("blank.fits"), 0, NULL, &im, &in) == SF_OK, "%s",
                          sf_errdetail());
            ck_assert_int_eq(in.has_blank, blank[k][1] != NULL);
            if (blank[k][1])
                ck_assert_int_eq(in.blank, atoll(blank[k][1]));
            sf_image_free(&im, NULL);
            sf_fits_info_free(&in);
        }
    }
    /* fuzzing, 2026-11-25: a tile-compressed HDU whose END card is "END   " and
     * two stray bytes (CFITSIO ends the header there; the pre-check did not,
     * so it checked nothing) and whose tile descriptors are garbage: CFITSIO
     * allocated the 3.6 GB a descriptor said. Refused before CFITSIO reads. */
    {
        const char *prim[] = {"SIMPLE  =                    T", "BITPIX  =                    8",
                              "NAXIS   =                    0", "EXTEND  =                    T",
                              NULL};
        const char *ext[] = {"XTENSION= 'BINTABLE'", "BITPIX  =                    8",
                             "NAXIS   =                    2", "NAXIS1  =                    8",
                             "NAXIS2  =                    2", "PCOUNT  =                   64",
                             "GCOUNT  =                    1", "TFIELDS =                    1",
                             "TTYPE1  = 'COMPRESSED_DATA'", "TFORM1  = '1PB     '",
                             "ZIMAGE  =                    T", "ZBITPIX =                   16",
                             "ZNAXIS  =                    2", "ZNAXIS1 =                    4",
                             "ZNAXIS2 =                    2", "ZTILE1  =                    4",
                             "ZTILE2  =                    1", "ZCMPTYPE= 'RICE_1  '", NULL};
        unsigned char data[2880] = {0};
        FILE *f = fopen(tmp_path("tiles.fits"), "wb");
        ck_assert_ptr_nonnull(f);
        /* row 1: 0xd7248a72 bytes at 0x81060c0a; row 2: 8 bytes at 0 */
        memcpy(data, "\xd7\x24\x8a\x72\x81\x06\x0c\x0a\x00\x00\x00\x08\x00\x00\x00\x00", 16);
        append_raw_hdu(f, prim, NULL, NULL, 0);
        append_raw_hdu(f, ext, "END   \xe2\x1a", data, sizeof data);
        fclose(f);
        expect_read_error(tmp_path("tiles.fits"), "tiles.fits",
                          "HDU 2: tile 1 of the tile-compressed image lies outside the heap");
    }
    /* fuzzing, 2026-11-25: on the way to the image, a table whose NAXIS1 is
     * garbage; CFITSIO (ffgtbp, in a long run after other files) asked calloc
     * for 1.7e16 bytes. Refused with its name; the same damaged table after
     * an image in the primary HDU does not lose the image (CFITSIO never
     * reads that header). */
    {
        const char *empty[] = {"SIMPLE  =                    T", "BITPIX  =                    8",
                               "NAXIS   =                    0", "EXTEND  =                    T",
                               NULL};
        const char *image[] = {"SIMPLE  =                    T", "BITPIX  =                  -32",
                               "NAXIS   =                    2", "NAXIS1  =                    4",
                               "NAXIS2  =                    3", "EXTEND  =                    T",
                               NULL};
        const char *table[] = {"XTENSION= 'BINTABLE'", "BITPIX  =                    8",
                               "NAXIS   =                    2",
                               "NAXIS1  =         ZZERO   =           8 / width of table in bytes",
                               "NAXIS2  =                  300", "PCOUNT  =                66896",
                               "GCOUNT  =                    1", "TFIELDS =                    1",
                               "TFORM1  = '8A      '", NULL};
        unsigned char data[2880] = {0};
        FILE *f = fopen(tmp_path("table.fits"), "wb");
        ck_assert_ptr_nonnull(f);
        append_raw_hdu(f, empty, NULL, NULL, 0);
        append_raw_hdu(f, table, NULL, data, sizeof data);
        fclose(f);
        expect_read_error(tmp_path("table.fits"), "table.fits",
                          "HDU 2: the header is damaged: NAXIS1 is missing or not an integer");
        f = fopen(tmp_path("image.fits"), "wb");
        ck_assert_ptr_nonnull(f);
        append_raw_hdu(f, image, NULL, data, sizeof data);
        append_raw_hdu(f, table, NULL, data, sizeof data);
        fclose(f);
        ck_assert_msg(sf_fits_read(tmp_path("image.fits"), 0, NULL, &im, &in) == SF_OK, "%s",
                      sf_errdetail());
        ck_assert_int_eq(im.nx, 4);
        ck_assert_int_eq(im.ny, 3);
        sf_image_free(&im, NULL);
        sf_fits_info_free(&in);
    }
    /* fuzzing (CI, 2026-11-24): ZIMAGE's value "THEAP   =..." is true for
     * CFITSIO (a logical is T when it begins with T) but was not for the
     * pre-check, which then did not walk the RICE tiles: CFITSIO's
     * fits_rdecomp_short read past a corrupt tile (SEGV under ASan). Made
     * here from the data folder's RICE image: that card, and two bytes of the
     * tile heap changed (tests/fuzz/known/cfitsio-rice-overread.sh). */
    {
        static const char card[81] =
            "ZIMAGE  =                  THEAP   =ension contains compressed image            ";
        const char *src = sftest_data("optical_ngc1316_440x300_RICE_tilecompressed.fits");
        FILE *fi = fopen(src, "rb"), *fo = fopen(tmp_path("theap.fits"), "wb");
        static unsigned char buf[86400];
        size_t nb;
        ck_assert_ptr_nonnull(fi);
        ck_assert_ptr_nonnull(fo);
        nb = fread(buf, 1, sizeof buf, fi);
        fclose(fi);
        ck_assert_uint_eq(nb, 86400);
        ck_assert_int_eq(memcmp(buf + 3680, "ZIMAGE  =", 9), 0);
        memcpy(buf + 3680, card, 80);
        buf[27190] = 0xb9;
        buf[41018] = 0x24;
        ck_assert_uint_eq(fwrite(buf, 1, nb, fo), nb);
        fclose(fo);
        expect_read_error(tmp_path("theap.fits"), "theap.fits",
                          "of the tile-compressed image is corrupt");
        /* fuzzing (CI, 2026-11-25): a blank first ZIMAGE card and a second
         * one T (in place of the first COMMENT card): CFITSIO decodes the
         * tiles, the pre-check read only the first card */
        memcpy(buf + 3680, "ZIMAGE  =                                                                       ", 80);
        memcpy(buf + 4720, "ZIMAGE  =                    T                                                  ", 80);
        fo = fopen(tmp_path("zimage2.fits"), "wb");
        ck_assert_ptr_nonnull(fo);
        ck_assert_uint_eq(fwrite(buf, 1, nb, fo), nb);
        fclose(fo);
        expect_read_error(tmp_path("zimage2.fits"), "zimage2.fits",
                          "of the tile-compressed image is corrupt");
    }
    remove_tmpdir();
}
END_TEST

/* The card check that keeps WCSLIB's parser safe. */
START_TEST(test_card_ok)
{
    char c[81];
#define CARD(text) (snprintf(c, sizeof c, "%-80s", text), c)
    ck_assert(sf_fits_card_ok(CARD("CTYPE1  = 'RA---SIN'           / axis type")));
    ck_assert(sf_fits_card_ok(CARD("OBJECT  = 'it''s here'")));
    ck_assert(sf_fits_card_ok(CARD("CRVAL1  =   1.2345678901234E+02 / deg")));
    ck_assert(sf_fits_card_ok(CARD("SIMPLE  =                    T")));
    ck_assert(sf_fits_card_ok(CARD("HISTORY anything at all: 'unbalanced")));
    ck_assert(sf_fits_card_ok(CARD("")));
    ck_assert(!sf_fits_card_ok(CARD("SPECSYS = 'TOPOCENT#")));
    ck_assert(!sf_fits_card_ok(CARD("CUNIT1  = 'deg     'x")));
    ck_assert(!sf_fits_card_ok(CARD("CRPIX2  =                360.5           !")));
    ck_assert(!sf_fits_card_ok(CARD("ctype1  = 'RA---SIN'")));
    snprintf(c, sizeof c, "%-80s", "CTYPE1  = 'RA---TAN'");
    c[18] = '\a';
    ck_assert(!sf_fits_card_ok(c));
#undef CARD
}
END_TEST

/* +-Inf pixels are blank like NaN (sf_pixel_clean), counted in nnan. */
START_TEST(test_nonfinite_pixels)
{
    float px[12] = {1, 2, INFINITY, 4, -INFINITY, 6, NAN, 8, 3.4e38f, -3.4e38f, 0, -0.0f};
    sf_image im = {0};
    sf_fits_info in;
    ck_assert(isnan(sf_pixel_clean(INFINITY)) && isnan(sf_pixel_clean(-INFINITY)) &&
              isnan(sf_pixel_clean(NAN)));
    ck_assert(sf_pixel_clean(3.4e38f) == 3.4e38f && sf_pixel_clean(-1.5f) == -1.5f);
    make_tmpdir();
    ck_assert_int_eq(sf_fits_write_image(tmp_path("inf.fits"), NULL, SF_FITS_FLOAT32, px, 4, 3, 0,
                                         NULL), SF_OK);
    ck_assert_int_eq(sf_fits_read(tmp_path("inf.fits"), 0, NULL, &im, &in), SF_OK);
    ck_assert_int_eq(in.nnan, 3);
    ck_assert(isnan(im.data[2]) && isnan(im.data[4]) && isnan(im.data[6]));
    ck_assert(im.data[8] == 3.4e38f && im.data[9] == -3.4e38f && im.data[0] == 1.0f);
    sf_image_free(&im, NULL);
    sf_fits_info_free(&in);
    remove_tmpdir();
}
END_TEST

START_TEST(test_write_roundtrip)
{
    sf_image src = {0}, back = {0};
    sf_fits_info si, bi;
    char card[81], card2[81];
    int32_t *lab;
    uint8_t *mask;
    size_t n;
    NEED_DATA();
    make_tmpdir();
    ck_assert_int_eq(sf_fits_read(sftest_data("radio_parkes_1904-66_SIN.fits"), 0, NULL, &src,
                                  &si), SF_OK);
    n = sf_npix(src.nx, src.ny);
    /* float32 with BUNIT dropped */
    ck_assert_msg(sf_fits_write_image(tmp_path("f.fits"), &si, SF_FITS_FLOAT32, src.data, src.nx,
                                      src.ny, 1, NULL) == SF_OK, "%s", sf_errdetail());
    ck_assert_int_eq(sf_fits_read(tmp_path("f.fits"), 0, NULL, &back, &bi), SF_OK);
    ck_assert_int_eq(bi.bitpix, -32);
    ck_assert(memcmp(back.data, src.data, n * sizeof(float)) == 0);
    ck_assert_int_eq((int)bi.nnan, 14837);
    ck_assert_str_eq(bi.bunit, "");
    ck_assert_str_eq(bi.ctype[0], "RA---SIN");
    ck_assert(header_card(&si, "CRVAL2", card) && header_card(&bi, "CRVAL2", card2));
    ck_assert_str_eq(card, card2);
    ck_assert(header_card(&si, "CDELT1", card) && header_card(&bi, "CDELT1", card2));
    ck_assert_str_eq(card, card2);
    ck_assert_int_eq(bi.has_beam, 1);
    ck_assert(bi.bmaj == si.bmaj);
    sf_image_free(&back, NULL);
    sf_fits_info_free(&bi);
    /* int32 labels with a new BUNIT, overwriting an existing file */
    lab = malloc(n * sizeof *lab);
    for (size_t i = 0; i < n; i++)
        lab[i] = (int32_t)(i * 2654435761u % 100000) - 7;
    ck_assert_int_eq(sf_fits_write_image(tmp_path("f.fits"), &si, SF_FITS_INT32, lab, src.nx,
                                         src.ny, 0, "label"), SF_OK);
    ck_assert_int_eq(sf_fits_read(tmp_path("f.fits"), 0, NULL, &back, &bi), SF_OK);
    ck_assert_int_eq(bi.bitpix, 32);
    ck_assert_str_eq(bi.bunit, "label");
    for (size_t i = 0; i < n; i++)
        ck_assert(back.data[i] == (float)lab[i]);
    ck_assert(header_card(&bi, "CTYPE2", NULL));
    sf_image_free(&back, NULL);
    sf_fits_info_free(&bi);
    /* uint8 mask, BUNIT kept from the source */
    mask = malloc(n);
    for (size_t i = 0; i < n; i++)
        mask[i] = isnan(src.data[i]) ? 0 : (src.data[i] > 0.1f);
    ck_assert_int_eq(sf_fits_write_image(tmp_path("m.fits"), &si, SF_FITS_UINT8, mask, src.nx,
                                         src.ny, 0, NULL), SF_OK);
    ck_assert_int_eq(sf_fits_read(tmp_path("m.fits"), 0, NULL, &back, &bi), SF_OK);
    ck_assert_int_eq(bi.bitpix, 8);
    ck_assert_str_eq(bi.bunit, "JY/BEAM");
    for (size_t i = 0; i < n; i++)
        ck_assert(back.data[i] == (float)mask[i]);
    sf_image_free(&back, NULL);
    sf_fits_info_free(&bi);
    /* no source header at all */
    ck_assert_int_eq(sf_fits_write_image(tmp_path("plain.fits"), NULL, SF_FITS_UINT8, mask, 3, 2,
                                         0, NULL), SF_OK);
    ck_assert_int_eq(sf_fits_read(tmp_path("plain.fits"), 0, NULL, &back, &bi), SF_OK);
    ck_assert_int_eq(back.nx * back.ny, 6);
    sf_image_free(&back, NULL);
    sf_fits_info_free(&bi);
    free(lab);
    free(mask);
    sf_image_free(&src, NULL);
    sf_fits_info_free(&si);

    /* 4-D input to 2-D output: WCSAXES keeps the axis-3/4 cards legal */
    ck_assert_int_eq(sf_fits_read(sftest_data("radio_vla_nvas_W51_22GHz_114x124x1x1.fits"), 0,
                                  NULL, &src, &si), SF_OK);
    ck_assert_int_eq(sf_fits_write_image(tmp_path("v.fits"), &si, SF_FITS_FLOAT32, src.data,
                                         src.nx, src.ny, 0, NULL), SF_OK);
    ck_assert_int_eq(sf_fits_read(tmp_path("v.fits"), 0, NULL, &back, &bi), SF_OK);
    ck_assert_int_eq(bi.naxis, 2);
    ck_assert(header_card(&bi, "WCSAXES", card));
    ck_assert_ptr_nonnull(strstr(card, " 4"));
    ck_assert(header_card(&bi, "CTYPE3", NULL));
    ck_assert(!header_card(&bi, "NAXIS3", NULL));
    ck_assert(!header_card(&bi, "BLANK", NULL));
    ck_assert_str_eq(bi.beam_source, "HISTORY");
    ck_assert_int_eq((int)bi.nnan, 2827);
    sf_image_free(&back, NULL);
    sf_fits_info_free(&bi);
    /* compressed input: no Z* or table cards in the output */
    sf_image_free(&src, NULL);
    sf_fits_info_free(&si);
    ck_assert_int_eq(sf_fits_read(sftest_data("optical_ngc1316_440x300_RICE_tilecompressed.fits"),
                                  0, NULL, &src, &si), SF_OK);
    ck_assert_int_eq(sf_fits_write_image(tmp_path("c.fits"), &si, SF_FITS_FLOAT32, src.data,
                                         src.nx, src.ny, 0, NULL), SF_OK);
    ck_assert_int_eq(sf_fits_read(tmp_path("c.fits"), 0, NULL, &back, &bi), SF_OK);
    ck_assert_int_eq(bi.compressed, 0);
    ck_assert(!header_card(&bi, "ZIMAGE", NULL) && !header_card(&bi, "ZCMPTYPE", NULL) &&
              !header_card(&bi, "TTYPE1", NULL) && !header_card(&bi, "TFIELDS", NULL));
    ck_assert(memcmp(back.data, src.data, sf_npix(src.nx, src.ny) * sizeof(float)) == 0);
    sf_image_free(&back, NULL);
    sf_fits_info_free(&bi);
    sf_image_free(&src, NULL);
    sf_fits_info_free(&si);
    remove_tmpdir();
}
END_TEST

static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

START_TEST(test_write_failures)
{
    float px[6] = {1, 2, 3, 4, 5, 6};
    struct stat sb;
    FILE *f;
    make_tmpdir();
    ck_assert_int_ne(sf_fits_write_image(tmp_path("nodir/x.seg.fits"), NULL, SF_FITS_FLOAT32, px,
                                         3, 2, 0, NULL), SF_OK);
    ck_assert_ptr_nonnull(strstr(sf_errdetail(), "nodir/x.seg.fits"));
    ck_assert_ptr_nonnull(strstr(sf_errdetail(), "cannot create"));
    ck_assert_int_eq(dir_entries(tmpdir), 0);
    /* a "folder" that is a regular file */
    f = fopen(tmp_path("afile"), "w");
    fclose(f);
    ck_assert_int_ne(sf_fits_write_image(tmp_path("afile/x.fits"), NULL, SF_FITS_FLOAT32, px, 3,
                                         2, 0, NULL), SF_OK);
    ck_assert_ptr_nonnull(strstr(sf_errdetail(), "afile/x.fits"));
    ck_assert_int_eq(dir_entries(tmpdir), 1);
    /* bad arguments */
    ck_assert_int_eq(sf_fits_write_image(tmp_path("y.fits"), NULL, SF_FITS_FLOAT32, px, 0, 2, 0,
                                         NULL), SF_ERR_PARAM);
    ck_assert_int_ne(stat(tmp_path("y.fits"), &sb), 0);
    /* read-only folder (root can write anywhere, so only checked for others) */
    ck_assert_int_eq(mkdir(tmp_path("ro"), 0555), 0);
    if (geteuid() != 0) {
        ck_assert_int_ne(sf_fits_write_image(tmp_path("ro/x.fits"), NULL, SF_FITS_FLOAT32, px, 3,
                                             2, 0, NULL), SF_OK);
        ck_assert_ptr_nonnull(strstr(sf_errdetail(), "ro/x.fits"));
        ck_assert_int_eq(dir_entries(tmp_path("ro")), 0);
    } else {
        printf("NOTE: running as root: read-only folder case not checked\n");
    }
    remove_tmpdir();
}
END_TEST

START_TEST(test_describe)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem;
    NEED_DATA();
    mem = open_memstream(&buf, &len);
    ck_assert_int_eq(sf_fits_describe(sftest_data("radio_vla_nvas_W51_22GHz_114x124x1x1.fits"), -1,
                                      mem, 1), SF_OK);
    ck_assert_int_eq(sf_fits_describe(sftest_data("optical_eso_ntt_emmi_256x256_int16_bscale.fits"),
                                      0, mem, 1), SF_OK);
    fclose(mem);
    ck_assert_ptr_nonnull(strstr(buf, "\"nx\":114,\"ny\":124"));
    ck_assert_ptr_nonnull(strstr(buf, "\"nnan\":2827"));
    ck_assert_ptr_nonnull(strstr(buf, "\"source\":\"HISTORY\""));
    ck_assert_ptr_nonnull(strstr(buf, "\"wcs_center\":[290.92"));
    ck_assert_ptr_nonnull(strstr(buf, "\"beam\":null"));
    ck_assert_ptr_nonnull(strstr(buf, "\"wcs_center\":null"));
    ck_assert_int_eq((int)(strchr(buf, '\n') - buf) + 1 < (int)len, 1); /* two lines */
    free(buf);
    buf = NULL;
    mem = open_memstream(&buf, &len);
    ck_assert_int_eq(sf_fits_describe(sftest_data("quirk_obit_bitpix64_3x2.fits"), 0, mem, 0),
                     SF_OK);
    fclose(mem);
    ck_assert_ptr_nonnull(strstr(buf, "median: 2\n"));
    ck_assert_ptr_nonnull(strstr(buf, "min: 1\n"));
    ck_assert_ptr_nonnull(strstr(buf, "max: 3\n"));
    ck_assert_ptr_nonnull(strstr(buf, "blank: -32765\n"));
    free(buf);
    buf = NULL;
    mem = open_memstream(&buf, &len);
    ck_assert_int_ne(sf_fits_describe(sftest_data("quirk_tilecomp_uint16_bzero_3px.fits"), 0, mem,
                                      1), SF_OK);
    fclose(mem);
    ck_assert_int_eq((int)len, 0);
    free(buf);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fits");
    TCase *tc = tcase_create("fits");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_inventory_sizes_and_nans);
    tcase_add_test(tc, test_info_fields);
    tcase_add_test(tc, test_beam);
    tcase_add_test(tc, test_extended_names);
    tcase_add_test(tc, test_planes);
    tcase_add_test(tc, test_read_errors);
    tcase_add_test(tc, test_hostile_reads);
    tcase_add_test(tc, test_card_ok);
    tcase_add_test(tc, test_nonfinite_pixels);
    tcase_add_test(tc, test_write_roundtrip);
    tcase_add_test(tc, test_write_failures);
    tcase_add_test(tc, test_describe);
    suite_add_tcase(s, tc);
    return sftest_main(s, NULL, 0);
}
