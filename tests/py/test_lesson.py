"""The lesson pipeline (pipelines/lesson.pipe) on the CPU against the
GPU-programming lesson's own numpy/scipy code, on every NaN-free radio image
in SKYFIND_TEST_DATA and on a simulated image: same clipped sigma (1e-6
relative), same number of sources, identical labels, centroids and fluxes
equal to 1e-6 relative."""
import csv, json, os, subprocess, sys, tempfile
import numpy as np
from astropy.io import fits
from scipy.ndimage import label, center_of_mass, sum_labels

DATA = os.environ.get("SKYFIND_TEST_DATA", "../shared/data")
SKYFIND = os.environ.get("SKYFIND", "build/skyfind")
IMAGES = [
    "radio_amila_GRB120422A_512x512x1x1.fits",
    "radio_askap_racs_10x10x1x1.fits",
    "radio_atca_scorpio_s17_1000x1000.fits",
    "radio_lofar_GRB201006A_wsclean_256x256.fits",
    "radio_lofar_GRB201006A_wsclean_256x256.DERIVED.fits.gz",
    "radio_lofar_dirty_beam_512x512x1x1.fits",
    "radio_parkes_small_20x20x1x1.fits",
    "radio_parkes_small_20x20x1x1x1.fits",
    "radio_hi_cube_ngc6503_64x64x30_int16.fits",
    "sim_aegean_synthetic_512x256.fits",
]
passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what)


# The lesson's code, verbatim in method.
def kappa_sigma_clipper(data_flat):
    while True:
        med = np.median(data_flat)
        std = np.std(data_flat)
        clipped_lower = data_flat.compress(data_flat > med - 3 * std)
        clipped_both = clipped_lower.compress(clipped_lower < med + 3 * std)
        if len(clipped_both) == len(data_flat):
            break
        data_flat = clipped_both
    return data_flat


def lesson(data):
    clipped = kappa_sigma_clipper(data.ravel())
    std = clipped.std()
    segmented = np.where(data > 5 * std, 1, 0)
    labelled = np.empty(data.shape, dtype=np.int32)
    n = label(segmented, output=labelled)
    idx = range(1, n + 1)
    pos = np.array(center_of_mass(data, labelled, idx)).reshape(-1, 2)
    flux = np.array(sum_labels(data, labelled, idx))
    return std, np.median(clipped), n, labelled, pos, flux


def first_plane(path):
    with fits.open(path) as hl:
        for h in hl:
            if h.data is not None and h.is_image:
                d = np.asarray(h.data, dtype=np.float32)
                while d.ndim > 2:
                    d = d[0]
                return d
    raise RuntimeError("no image in " + path)


def read_catalog(path):
    rows = [r for r in csv.reader(l for l in open(path) if not l.startswith("#"))]
    head, body = rows[0], rows[1:]
    return {k: np.array([float(r[i]) for r in body]) for i, k in enumerate(head)}


def compare(name, path, out):
    data = first_plane(path)
    assert not np.isnan(data).any(), name + " has NaN"
    std, med, n, lab, pos, flux = lesson(data)
    r = subprocess.run([SKYFIND, "run", "-q", "-p", "lesson", "-b", "cpu", "--json",
                        "--save", "seg", "-o", out, path], capture_output=True, text=True)
    check(r.returncode == 0, f"{name}: skyfind exit {r.returncode}: {r.stderr.strip()}")
    if r.returncode:
        return
    rep = [json.loads(l) for l in r.stdout.strip().splitlines() if l.startswith("{\"file\"")][-1]
    sig = rep["background"]["sigma"]
    check(abs(sig - float(std)) <= 1e-6 * float(std), f"{name}: sigma {sig} vs numpy {std}")
    check(rep["nsources"] == n, f"{name}: {rep['nsources']} sources vs scipy {n}")
    stem = os.path.basename(rep["catalog"])[:-len(".cat.csv")]
    seg = fits.getdata(os.path.join(out, stem + ".seg.fits"))
    check(seg.shape == lab.shape and np.array_equal(seg, lab),
          f"{name}: labels differ in {np.count_nonzero(seg != lab) if seg.shape == lab.shape else 'shape'} pixels")
    cat = read_catalog(rep["catalog"])
    if n:
        # catalogue x, y are 1-based FITS pixels; scipy gives 0-based (row, col)
        ref_x, ref_y = pos[:, 1] + 1, pos[:, 0] + 1
        rel = lambda a, b: np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300))
        check(rel(cat["x"], ref_x) <= 1e-6, f"{name}: x rel diff {rel(cat['x'], ref_x):.3g}")
        check(rel(cat["y"], ref_y) <= 1e-6, f"{name}: y rel diff {rel(cat['y'], ref_y):.3g}")
        check(rel(cat["flux_sum"], flux) <= 1e-6, f"{name}: flux rel diff {rel(cat['flux_sum'], flux):.3g}")
        npix = np.bincount(lab.ravel(), minlength=n + 1)[1:]
        check(np.array_equal(cat["npix"].astype(int), npix), f"{name}: npix differ")
    print(f"{name}: {data.shape[1]}x{data.shape[0]} sigma {sig:.9g} (numpy {float(std):.9g}), "
          f"{rep['nsources']} sources (scipy {n})")


with tempfile.TemporaryDirectory() as tmp:
    todo = [(n, os.path.join(DATA, n)) for n in IMAGES if os.path.exists(os.path.join(DATA, n))]
    if not todo:
        print("SKIP: no test data in", DATA)
        sys.exit(77)
    sim = os.path.join(tmp, "sim.fits")
    subprocess.run([SKYFIND, "simulate", "-q", "-n", "700", "--ny", "600", "--nsrc", "150",
                    "--seed", "7", "-o", sim], check=True)
    todo.append(("simulated 700x600", sim))
    for name, path in todo:
        compare(name, path, tmp)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
