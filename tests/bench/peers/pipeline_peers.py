"""The source finders astronomers would pick instead of skyfind's default
pipeline (pipelines/radio.pipe), on the images bench_pipeline wrote, with
settings matched to radio.pipe as closely as each allows:
  radio.pipe: mesh background (box as skyfind chose it: 4 beam widths when the
  header has a beam, else 64; SExtractor's estimator; 3x3 median filter;
  bicubic maps), pixels above 5 x the local rms after subtracting the local
  level, 8-connected islands of at least 3 pixels, no deblending, no
  cleaning, no detection filter; flux = sum of the island's pixel values.
  SEP:        sep.Background(bw=bh=box, fw=fh=3), sep.extract(data - back,
              5, err=rms map, minarea=3, filter_kernel=None, deblend_cont=1.0,
              clean=False); flux = sum of background-subtracted pixels.
  photutils:  Background2D(box, filter_size=3, SExtractorBackground,
              3-sigma clipping), detect_sources(data - background,
              5 * background_rms, 3, connectivity=8), SourceCatalog
              (segment_flux, centroid) on the subtracted image.
  SExtractor: source-extractor with BACK_SIZE box, BACK_FILTERSIZE 3,
              DETECT_THRESH 5 (relative to the local rms), DETECT_MINAREA 3,
              FILTER N, DEBLEND_MINCONT 1, CLEAN N; FLUX_ISO, X_IMAGE/Y_IMAGE
              (1-based, converted to 0-based here); NTHREADS --threads.
SEP and photutils are timed in memory (array in, catalogue arrays out) as
skyfind's "pipeline" rows are; SExtractor from FITS file to catalogue file,
as skyfind's "end-to-end" rows. Wall time; median of up to --repeat runs
while they take less than --budget seconds in all; the first run is a
warm-up and not counted when it took less than a second.
Each tool's catalogue is written to DIR/STEM.<tool>.cat.csv (x, y 0-based,
flux); one JSON object per tool and image is appended to --json.
Usage: python3 pipeline_peers.py BENCH_JSON --json FILE [--repeat N]
       [--budget S] [--threads N] [--tools sep,photutils,sextractor]"""
import argparse, json, os, shutil, subprocess, sys, tempfile, time

ap = argparse.ArgumentParser()
ap.add_argument("bench_json", nargs="?", help="bench_pipeline --json output (its images and raw files)")
ap.add_argument("--json", help="append one JSON object per row here")
ap.add_argument("--sex-config", metavar="DIR", help="only write SExtractor's configuration for "
                "--box and --npix (DIR/skyfind.sex, reading DIR/skyfind.param, writing DIR/cat.txt): "
                "what tests/bench/cpu-ab.sh runs it with")
ap.add_argument("--box", type=int, default=64, help="with --sex-config: BACK_SIZE")
ap.add_argument("--npix", type=int, default=0, help="with --sex-config: the image's pixels")
ap.add_argument("--repeat", type=int, default=3)
ap.add_argument("--budget", type=float, default=30.0, help="seconds per tool and image")
ap.add_argument("--threads", type=int, default=1, help="SExtractor's NTHREADS")
ap.add_argument("--tools", default="sep,photutils,sextractor")
ap.add_argument("--pipeline", default="radio", help="the skyfind pipeline the settings follow")
a = ap.parse_args()
if not a.sex_config and not (a.bench_json and a.json):
    ap.error("BENCH_JSON and --json are needed (or --sex-config)")
for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(v, str(a.threads))

NSIGMA, MINAREA, FILTER = 5.0, 3, 3


def pixstack(npix):
    """Pixel stack for SEP and SExtractor: their default (300000), or 1% of
    the image for large ones. Both allocate it whole on every call, so a
    needlessly large one costs time (50 million: about a second)."""
    return max(300_000, npix // 100)


SEX_PARAMS = "NUMBER\nX_IMAGE\nY_IMAGE\nFLUX_ISO\nISOAREA_IMAGE\n"


def sextractor_files(tmp, box, npixstack):
    """SExtractor's parameter list and configuration in tmp, matched to
    radio.pipe (the module's note); returns (configuration, catalogue) paths."""
    conf, par, cat = (os.path.join(tmp, n) for n in ("skyfind.sex", "skyfind.param", "cat.txt"))
    with open(par, "w") as f:
        f.write(SEX_PARAMS)
    with open(conf, "w") as f:
        f.write(f"""CATALOG_NAME {cat}
CATALOG_TYPE ASCII_HEAD
PARAMETERS_NAME {par}
DETECT_TYPE CCD
DETECT_MINAREA {MINAREA}
DETECT_THRESH {NSIGMA}
ANALYSIS_THRESH {NSIGMA}
THRESH_TYPE RELATIVE
FILTER N
DEBLEND_NTHRESH 32
DEBLEND_MINCONT 1
CLEAN N
MASK_TYPE NONE
WEIGHT_TYPE NONE
BACK_TYPE AUTO
BACK_SIZE {box}
BACK_FILTERSIZE {FILTER}
BACKPHOTO_TYPE GLOBAL
CHECKIMAGE_TYPE NONE
SATUR_LEVEL 1e20
GAIN 0
MEMORY_OBJSTACK 10000
MEMORY_PIXSTACK {npixstack}
MEMORY_BUFSIZE 1024
NTHREADS {a.threads}
VERBOSE_TYPE QUIET
WRITE_XML N
""")
    return conf, cat


if a.sex_config:
    os.makedirs(a.sex_config, exist_ok=True)
    print(sextractor_files(a.sex_config, a.box, pixstack(a.npix))[0])
    sys.exit(0)
import numpy as np


def timed(fn, data):
    """Run fn(data) up to --repeat times (see the module's note); returns
    (median ms, runs, last result, note)."""
    t = time.perf_counter()
    res = fn(data)
    first = time.perf_counter() - t
    times, note = [], "wall time"
    if first >= 1.0:
        times.append(first * 1e3)
        note += ", no warm-up (the first run took over 1 s)"
    else:
        note += ", after a warm-up"
    while len(times) < a.repeat and sum(times) < a.budget * 1e3:
        t = time.perf_counter()
        res = fn(data)
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.median(times)), len(times), res, note


def run_sep(box):
    import sep

    def fn(data):
        mask = np.isnan(data) if np.isnan(data).any() else None
        b = sep.Background(data, mask=mask, bw=box, bh=box, fw=FILTER, fh=FILTER)
        sub = data - b.back()
        while True:
            try:
                o = sep.extract(sub, NSIGMA, err=b.rms(), mask=mask, minarea=MINAREA,
                                filter_kernel=None, deblend_cont=1.0, clean=False)
                break
            except Exception as e:  # pixel buffer full: grow it (the warm-up absorbs this)
                if "pixel" not in str(e) or sep.get_extract_pixstack() >= data.size:
                    raise
                sep.set_extract_pixstack(min(data.size, 4 * sep.get_extract_pixstack()))
        return o["x"], o["y"], o["flux"]
    return fn, f"sep {sep.__version__}"


def run_photutils(box):
    import photutils
    from photutils.background import Background2D, SExtractorBackground
    from photutils.segmentation import SourceCatalog, detect_sources

    def fn(data):
        mask = np.isnan(data) if np.isnan(data).any() else None
        b = Background2D(data, (box, box), filter_size=(FILTER, FILTER), mask=mask,
                         bkg_estimator=SExtractorBackground())
        sub = data - b.background
        seg = detect_sources(sub, NSIGMA * b.background_rms, MINAREA, connectivity=8, mask=mask)
        if seg is None:
            return np.zeros(0), np.zeros(0), np.zeros(0)
        cat = SourceCatalog(sub, seg, mask=mask)
        x = getattr(cat, "x_centroid", None)  # photutils >= 3 renamed xcentroid
        y = getattr(cat, "y_centroid", None)
        if x is None:
            x, y = cat.xcentroid, cat.ycentroid
        return np.asarray(x), np.asarray(y), np.asarray(cat.segment_flux)
    return fn, f"photutils {photutils.__version__} (one thread)"


def run_sextractor(box, tmp, npixstack):
    exe = shutil.which("source-extractor") or shutil.which("sex")
    if not exe:
        raise RuntimeError("no source-extractor (or sex) on PATH")
    ver = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip()
    conf, cat = sextractor_files(tmp, box, npixstack)

    def fn(fits):
        if os.path.exists(cat):
            os.unlink(cat)
        p = subprocess.run([exe, fits, "-c", conf], capture_output=True, text=True)
        if p.returncode != 0 or not os.path.exists(cat):
            raise RuntimeError(f"source-extractor failed: {p.stderr.strip()[-300:]}")
        t = np.loadtxt(cat, comments="#", ndmin=2)
        if t.size == 0:
            return np.zeros(0), np.zeros(0), np.zeros(0)
        return t[:, 1] - 1.0, t[:, 2] - 1.0, t[:, 3]  # 1-based to 0-based
    return fn, f"{ver or 'source-extractor'} (NTHREADS {a.threads})"


def emit(img, tool, stage, scope, ms=None, runs=0, res=None, note="", version=""):
    catpath = ""
    ns = None
    if res is not None:
        x, y, flux = (np.asarray(v, dtype=float) for v in res)
        ns = int(len(x))
        catpath = os.path.join(os.path.dirname(img["raw"] or img["fits"]),
                               f"{img['input']}.{tool.lower()}.cat.csv")
        np.savetxt(catpath, np.column_stack([x, y, flux]), delimiter=",", header="x,y,flux",
                   comments="", fmt="%.10g")
    rec = {"input": img["input"], "nx": img["nx"], "ny": img["ny"], "tool": tool, "backend": "cpu",
           "stage": stage, "ms": ms, "runs": runs, "nsources": ns, "catalog": catpath,
           "scope": scope, "version": version, "note": note}
    with open(a.json, "a") as f:
        f.write(json.dumps(rec) + "\n")
    shown = f"{ms:10.1f} {runs:5d} {ns:8d}" if ms is not None else f"{'-':>10} {'-':>5} {'-':>8}"
    print(f"{img['input']:<14} {tool:<11} {shown}  {version}{'; ' if version and note else ''}{note}",
          flush=True)


bench = json.load(open(a.bench_json))
tools = [t.strip().lower() for t in a.tools.split(",") if t.strip()]
print(f"{'input':<14} {'tool':<11} {'median_ms':>10} {'runs':>5} {'sources':>8}  note")
with tempfile.TemporaryDirectory(prefix="skyfind-peers-") as tmp:
    for img in bench["images"]:
        pipe = img["pipelines"].get(a.pipeline, {})
        box = pipe.get("box") or 0  # the mesh skyfind used; if it did not run, its box=auto rule
        if box <= 0:
            box = round(4 * img["beam_pix"]) if img.get("beam_pix", 0) > 0 else 64
        data = None
        if img.get("raw"):
            data = np.fromfile(img["raw"], dtype=np.float32).reshape(img["ny"], img["nx"])
        for tool in tools:
            name = {"sep": "SEP", "photutils": "photutils", "sextractor": "SExtractor"}.get(tool, tool)
            scope = ("file to file: FITS read to catalogue written" if tool == "sextractor"
                     else "in memory: array in, catalogue arrays out")
            stage = "end-to-end" if tool == "sextractor" else "pipeline"
            try:
                if tool == "sextractor":
                    fn, ver = run_sextractor(box, tmp, pixstack(img["nx"] * img["ny"]))
                    arg = img["fits"]
                elif data is None:
                    raise RuntimeError("no raw image (run bench_pipeline with --raw)")
                elif tool == "sep":
                    fn, ver = run_sep(box)
                    import sep
                    sep.set_extract_pixstack(pixstack(data.size))
                    arg = data
                elif tool == "photutils":
                    fn, ver = run_photutils(box)
                    arg = data
                else:
                    raise RuntimeError(f"unknown tool '{tool}'")
            except ImportError as e:
                emit(img, name, stage, scope, note=f"not run: cannot import {e.name or e}")
                continue
            except Exception as e:
                emit(img, name, stage, scope, note=f"not run: {e}")
                continue
            try:
                ms, runs, res, note = timed(fn, arg)
            except Exception as e:
                emit(img, name, stage, scope, note=f"failed: {type(e).__name__}: {e}", version=ver)
                continue
            emit(img, name, stage, scope, ms, runs, res, f"{note}; box {box}", ver)
