"""The Python package (src/python/skyfind, ctypes over libskyfind.so) on the
CPU: its tables must be `skyfind run`'s CSV catalogues, row for row and
character for character once each value is printed with the column's own
format:
  - skyfind.find on an integer-valued simulated sky held as every NumPy
    pixel type (and big-endian, non-contiguous and masked arrays), against
    the CLI on FITS files of the same type written by astropy (BZERO for the
    unsigned types), with the sky's header (WCS, beam, BUNIT: ra/dec and Jy
    columns), with the lesson and radio pipelines;
  - skyfind.find_file on every real image of SKYFIND_TEST_DATA, and
    skyfind.find on the pixels and header astropy reads from the
    floating-point ones, against the CLI (radio pipeline);
  - the lesson's own numpy/scipy code (tests/py/test_lesson.py) against
    skyfind.find(..., pipeline="lesson"): same sigma, count, npix, centroids
    and fluxes to 1e-6;
  - maps=[...]: the background, rms, segmentation, filtered and mask
    arrays equal the check images `skyfind run --save` writes;
  - an array given through DLPack alone gives the NumPy array's catalogue;
  - errors (bad shapes, types, pipelines, parameters, backends) raise
    skyfind.SkyfindError carrying the library's message."""
import math, os, re, subprocess, sys, tempfile
import numpy as np
from astropy.io import fits

DATA = os.environ.get("SKYFIND_TEST_DATA", "../shared/data")
SKYFIND = os.environ.get("SKYFIND", "build/skyfind")
BUILD = os.environ.get("SKYFIND_BUILD", os.path.dirname(SKYFIND) or "build")
SOURCE = os.environ.get("SKYFIND_SOURCE", ".")
if os.environ.get("SKYFIND_SANITIZED"):
    print("SKIP: a sanitizer build's libskyfind.so cannot be loaded into python3 "
          "(lib_test_install runs sf_find under the sanitizers)")
    sys.exit(77)
os.environ.setdefault("SKYFIND_LIBRARY", os.path.join(BUILD, "libskyfind.so"))
os.environ.setdefault("SKYFIND_PIPELINES", os.path.join(SOURCE, "pipelines"))
sys.path.insert(0, os.path.join(SOURCE, "src", "python"))
import skyfind  # noqa: E402
from sfpy import Checks, OnlyDLPack  # noqa: E402

check = Checks()


def cli_rows(path, pipeline, out, plane=None):
    """The CLI's catalogue: the header row and the data rows."""
    args = [SKYFIND, "run", "-q", "-b", "cpu", "-p", pipeline, "-o", out, path]
    if plane:
        args[2:2] = ["--plane", str(plane)]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr.strip()
    stem = os.path.basename(path)
    for suf in (".fits.gz", ".fits.fz", ".fits", ".fz"):
        if stem.endswith(suf):
            stem = stem[:-len(suf)]
            break
    with open(os.path.join(out, stem + ".cat.csv")) as f:
        return [l.rstrip("\n") for l in f if not l.startswith("#")], ""


def table_rows(t):
    """A table printed as the CSV writer prints it (each column's format)."""
    rows = [",".join(t.colnames)]
    fmts = [t[c].meta["format"].replace("ll", "") for c in t.colnames]
    for i in range(len(t)):
        cells = []
        for c, f in zip(t.colnames, fmts):
            v = t[c][i]
            if f.endswith("d"):
                cells.append(f % int(v))
            else:
                cells.append(f % float(v) if math.isfinite(v) else "nan")
        rows.append(",".join(cells))
    return rows


def same(name, rows_cli, t, err=""):
    if rows_cli is None:
        check(False, f"{name}: the CLI failed: {err}")
        return
    rows = table_rows(t)
    bad = [i for i, (a, b) in enumerate(zip(rows, rows_cli)) if a != b]
    ok = len(rows) == len(rows_cli) and not bad
    check(ok, f"{name}: {len(rows) - 1} rows from Python, {len(rows_cli) - 1} from the CLI"
              + (f"; first difference:\n  py:  {rows[bad[0]]}\n  cli: {rows_cli[bad[0]]}" if bad else ""))
    return ok


with tempfile.TemporaryDirectory() as tmp:
    # 1. every pixel type: an integer-valued sky (noise of 1.5 counts on 10,
    # sources clipped at 120: every type holds it exactly)
    sim = os.path.join(tmp, "sim.fits")
    subprocess.run([SKYFIND, "simulate", "-q", "-n", "300", "--ny", "260", "--nsrc", "60", "--seed", "17", "-o", sim],
                   check=True)
    with fits.open(sim) as h:
        hdr = h[0].header.copy()
        d = np.asarray(h[0].data, dtype=np.float64)
    while d.ndim > 2:
        d = d[0]
    ints = np.clip(np.round(10 + 1.5 * d / (np.median(np.abs(d - np.median(d))) * 1.4826)), 0, 120)
    hdr_out = hdr.copy()
    for k in ("BSCALE", "BZERO", "BLANK"):
        hdr_out.remove(k, ignore_missing=True, remove_all=True)
    n_ok = 0
    # uint64 is written with BZERO 2^63, which the CLI decodes exactly (not as
    # CFITSIO's (double)(v - 2^63) + 2^63, which keeps no bit of small values)
    for dt in (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64,
               np.float32, np.float64):
        a = ints.astype(dt).reshape(1, 1, *ints.shape)  # the sky's NAXIS=4 shape
        path = os.path.join(tmp, f"sky_{np.dtype(dt).name}.fits")
        fits.PrimaryHDU(a, header=hdr_out).writeto(path, overwrite=True)
        for pipe in ("lesson", "radio"):
            rows, err = cli_rows(path, pipe, os.path.join(tmp, "o"))
            t = skyfind.find(a, hdr_out, pipeline=pipe, backend="cpu")
            n_ok += bool(same(f"{np.dtype(dt).name} {pipe}", rows, t, err))
    print(f"every pixel type: {n_ok} of 20 (10 types x lesson, radio) equal the CLI's catalogue; "
          f"{len(t)} radio sources (lesson: {len(skyfind.find(a, hdr_out, pipeline='lesson', backend='cpu'))}) with ra/dec/flux_jy columns: {'ra' in t.colnames and 'flux_jy' in t.colnames}")
    check("ra" in t.colnames and np.isfinite(t["flux_jy"]).all(), "the header's WCS and beam give ra and flux_jy")
    # byte order, strides, masks, bool, float16
    f32 = ints.astype(np.float32)
    base = table_rows(skyfind.find(f32, hdr_out, pipeline="radio", backend="cpu"))
    check(table_rows(skyfind.find(ints.astype(">i2"), hdr_out, pipeline="radio", backend="cpu")) == base,
          "big-endian int16 gives the native array's catalogue")
    wide = np.zeros((ints.shape[0], ints.shape[1] * 2), np.float32)
    wide[:, ::2] = f32
    check(table_rows(skyfind.find(wide[:, ::2], hdr_out, pipeline="radio", backend="cpu")) == base,
          "a strided view gives the contiguous array's catalogue")
    padded = np.zeros((ints.shape[0], ints.shape[1] + 7), np.float32)
    padded[:, :ints.shape[1]] = f32
    check(table_rows(skyfind.find(padded[:, :ints.shape[1]], hdr_out, pipeline="radio", backend="cpu")) == base,
          "rows with padding (row stride > width) give the same catalogue")
    m = np.ma.masked_array(f32, mask=np.zeros(f32.shape, bool))
    m.mask[100:110, 50:60] = True
    nanned = f32.copy()
    nanned[100:110, 50:60] = np.nan
    tm = skyfind.find(m, hdr_out, pipeline="radio", backend="cpu")
    check(table_rows(tm) == table_rows(skyfind.find(nanned, hdr_out, pipeline="radio", backend="cpu")),
          "masked pixels are blank, as NaN")
    check(table_rows(skyfind.find(ints.astype(np.float16), hdr_out, pipeline="radio", backend="cpu")) == base,
          "float16 (exact in float32) gives the float32 catalogue")
    check(table_rows(skyfind.find(ints.astype(np.uint64), hdr_out, pipeline="radio", backend="cpu")) == base,
          "uint64 gives the float32 catalogue")
    check(table_rows(skyfind.find(ints.astype(bool), hdr_out, pipeline="lesson", backend="cpu")) ==
          table_rows(skyfind.find(ints.astype(bool).astype(np.uint8), hdr_out, pipeline="lesson", backend="cpu")),
          "bool is read as uint8")

    # threads: sf_find from several threads at once (ctypes lets go of the
    # GIL during the call), each result equal to the same call made alone
    from concurrent.futures import ThreadPoolExecutor
    jobs = [(ints.astype(dt), p) for dt in (np.float32, np.int16, np.uint8, np.float64) for p in ("lesson", "radio")]
    alone = [table_rows(skyfind.find(a_, hdr_out, pipeline=p, backend="cpu")) for a_, p in jobs]
    with ThreadPoolExecutor(4) as ex:
        together = list(ex.map(lambda j: table_rows(skyfind.find(j[0], hdr_out, pipeline=j[1], backend="cpu")), jobs))
    check(together == alone, "8 find() calls on 4 threads give the catalogues of the calls made one by one")

    # maps: find(..., maps=[...]) returns the check images `skyfind run --save` writes, equal to the bit
    path = os.path.join(tmp, "sky_float32.fits")
    for pipe in ("radio", "lesson", "radio+both"):
        out = os.path.join(tmp, "maps_" + pipe)
        both = pipe.endswith("+both")  # negative detections: negative labels, mask bits 2-3
        subprocess.run([SKYFIND, "run", "-q", "-b", "cpu", "-p", pipe.split("+")[0], "--save",
                        "seg,background,rms,filtered,mask", "-o", out, path]
                       + (["--set", "threshold.sign=both"] if both else []), check=True)
        t, m = skyfind.find(fits.getdata(path), fits.getheader(path), pipeline=pipe.split("+")[0], backend="cpu",
                            maps=list(skyfind.MAPS), **({"threshold": {"sign": "both"}} if both else {}))
        files = {"background": "bkg", "rms": "rms", "segmentation": "seg", "filtered": "filt", "mask": "mask"}
        for name, suf in files.items():
            f = os.path.join(out, f"sky_float32.{suf}.fits")
            if not os.path.exists(f):
                check(m[name] is None, f"{pipe}: no {suf}.fits written, and maps['{name}'] is {type(m[name])}")
                continue
            want = np.squeeze(fits.getdata(f))
            got = m[name]
            same_bits = got is not None and got.shape == want.shape and \
                np.array_equal(got.astype(want.dtype.newbyteorder("=")), want.astype(want.dtype.newbyteorder("=")),
                               equal_nan=got.dtype.kind == "f")
            check(same_bits, f"{pipe}: maps['{name}'] equals the CLI's {suf}.fits "
                             f"({None if got is None else (got.dtype, got.shape)} vs {want.dtype}, {want.shape})")
        seg = m["segmentation"]
        check(set(np.unique(seg[seg != 0])) == set(int(i) for i in t["id"]),
              f"{pipe}: the segmentation's labels are the catalogue's ids")
    print(f"maps: background, rms, segmentation, filtered and mask of radio and lesson runs checked against "
          f"`skyfind run --save` (lesson: {sorted(k for k, v in m.items() if v is not None)}; no filtered image)")
    try:
        skyfind.find(f32, maps=["background", "beam"], backend="cpu")
        check(False, "maps=['beam'] should raise")
    except skyfind.SkyfindError as e:
        check("beam" in str(e), f"maps=['beam'] raises: {e}")

    # the per-stage report: every stage of the pipeline in order, summing to the stages' total
    sm = t.meta["stage_ms"]
    check(list(sm) == ["background", "convolve", "threshold", "segment", "deblend", "measure", "fit"] and
          all(v >= 0 for v in sm.values()) and abs(sum(sm.values()) - t.meta["stages_ms"]) < 1e-6 * max(1, t.meta["stages_ms"]),
          f"meta['stage_ms'] of radio.pipe: {sm} (stages_ms {t.meta['stages_ms']})")

    # DLPack: an object with only __dlpack__ (as a torch or JAX CPU tensor) is read through numpy.from_dlpack
    if hasattr(np, "from_dlpack"):
        check(table_rows(skyfind.find(OnlyDLPack(f32), hdr_out, pipeline="radio", backend="cpu")) == base,
              "a CPU array given through DLPack alone gives the NumPy array's catalogue")
    else:
        print("SKIP (part): this NumPy has no from_dlpack")

    # 2. the real images: find_file, and find on astropy's pixels for float images
    names = sorted(n for n in os.listdir(DATA) if (n.endswith(".fits") or n.endswith(".fits.gz") or n.endswith(".fz"))
                   and "REF_" not in n and "TRUTH" not in n and "quirk_tilecomp_uint16" not in n) if os.path.isdir(DATA) else []
    if not names:
        print("SKIP (part): no test data in", DATA)
    nf = na = 0
    for n in names:
        path = os.path.join(DATA, n)
        rows, err = cli_rows(path, "radio", os.path.join(tmp, "r"))
        if rows is None:  # images the CLI refuses: find_file must refuse them too
            try:
                skyfind.find_file(path, pipeline="radio", backend="cpu")
                check(False, f"{n}: the CLI failed ({err}) but find_file did not")
            except skyfind.SkyfindError:
                check(True, n)
            continue
        nf += bool(same(f"{n} find_file", rows, skyfind.find_file(path, pipeline="radio", backend="cpu")))
        with fits.open(path) as hl:
            # the first image HDU, judged by its header as in the file (astropy
            # rewrites BITPIX and drops BSCALE once it has scaled the data)
            k = next((i for i, x in enumerate(hl) if x.is_image and x.header.get("NAXIS", 0) >= 2), None)
            if k is None or hl[k].header.get("BITPIX") not in (-32, -64) or "BSCALE" in hl[k].header \
                    or "ZIMAGE" in hl[k].header:
                continue
            h = hl[k]
            if h.data.ndim > 2 and any(s > 1 for s in h.data.shape[:-2]):
                continue
            na += bool(same(f"{n} find(astropy)", rows, skyfind.find(h.data, h.header, pipeline="radio",
                                                                        backend="cpu")))
    print(f"real images: find_file equals the CLI on {nf}, find on astropy's pixels and header on {na}")

    # 3. the lesson's own code against pipeline="lesson"
    sys.argv = [sys.argv[0]]
    src = open(os.path.join(SOURCE, "tests", "py", "test_lesson.py")).read()
    ns = {}
    exec(src[:src.index("def first_plane")], ns)  # kappa_sigma_clipper and lesson, verbatim
    sky = os.path.join(tmp, "lesson.fits")
    subprocess.run([SKYFIND, "simulate", "-q", "-n", "500", "--ny", "400", "--nsrc", "80",
                    "--seed", "9", "-o", sky], check=True)
    with fits.open(sky) as h:
        data = np.asarray(h[0].data, dtype=np.float32)
    while data.ndim > 2:
        data = data[0]
    std, med, nsrc, lab, pos, flux = ns["lesson"](data)
    t = skyfind.find(data, pipeline="lesson", backend="cpu")
    rel = lambda a, b: np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)) if len(b) else 0.0
    check(len(t) == nsrc, f"lesson: {len(t)} sources, the lesson's code {nsrc}")
    if len(t) == nsrc and nsrc:
        check(rel(np.asarray(t["x"]), pos[:, 1] + 1) <= 1e-6 and rel(np.asarray(t["y"]), pos[:, 0] + 1) <= 1e-6,
              "lesson: centroids")
        check(rel(np.asarray(t["flux_sum"]), flux) <= 1e-6, "lesson: fluxes")
        check(np.array_equal(np.asarray(t["npix"]), np.bincount(lab.ravel(), minlength=nsrc + 1)[1:]),
              "lesson: npix")
    print(f"lesson: {len(t)} sources from skyfind.find, {nsrc} from the lesson's numpy/scipy code")

    # 4. errors
    def raises(fn, what, expect):
        try:
            fn()
            check(False, f"{what}: no error")
        except skyfind.SkyfindError as e:
            check(expect in str(e), f"{what}: message {str(e)!r} lacks {expect!r}")
    raises(lambda: skyfind.find(np.zeros(10, np.float32)), "1-D array", "2-D")
    raises(lambda: skyfind.find(np.zeros((3, 4, 5), np.float32)), "a cube", "2-D")
    raises(lambda: skyfind.find(np.zeros((4, 4), np.complex64)), "complex pixels", "not supported")
    raises(lambda: skyfind.find(f32, pipeline="no_such_pipeline"), "unknown pipeline", "no pipeline named")
    raises(lambda: skyfind.find(f32, pipeline="lesson", threshold={"nsigma": "x"}), "bad parameter", "nsigma")
    raises(lambda: skyfind.find(f32, pipeline="lesson", frobnicate={"a": 1}), "unknown stage", "frobnicate")
    raises(lambda: skyfind.find(f32, backend="tpu"), "bad backend", "tpu")
    raises(lambda: skyfind.find_file(os.path.join(tmp, "missing.fits")), "missing file", "missing.fits")
    raises(lambda: skyfind.find(np.full((50, 50), np.nan, np.float32), pipeline="lesson", backend="cpu"),
           "all-NaN image", "finite")
    pipe_text = open(os.path.join(SOURCE, "pipelines", "lesson.pipe")).read()
    check(table_rows(skyfind.find(f32, pipeline=pipe_text, backend="cpu")) ==
          table_rows(skyfind.find(f32, pipeline="lesson", backend="cpu")), "a pipeline given as .pipe text")

# 5. the registry, as `skyfind stages` lists it
st = skyfind.stages()
cli = subprocess.run([SKYFIND, "stages"], capture_output=True, text=True).stdout.splitlines()
cli_stages = [l for l in cli if l and not l.startswith(" ")]
check([s["name"] for s in st] == cli_stages, f"stages(): {[s['name'] for s in st]} vs {cli_stages}")
cli_params = [m.group(1) for m in (re.match(r"^    (\w+) +\S+ +default", l) for l in cli) if m]
py_params = [p["name"] for s in st for p in s["params"]]
check(py_params == cli_params, f"stages() parameters {py_params[:6]}... vs the CLI's {cli_params[:6]}...")
thr = next(s for s in st if s["name"] == "threshold")
ns = next(p for p in thr["params"] if p["name"] == "nsigma")
check(ns["type"] == "real" and float(ns["default"]) > 0, f"threshold.nsigma: {ns}")
print(f"stages(): {len(st)} stages, {len(py_params)} parameters, as `skyfind stages` lists them")

print(f"{check.passed} passed, {check.failed} failed")
sys.exit(1 if check.failed else 0)
