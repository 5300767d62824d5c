"""The source finders astronomers would pick instead of skyfind's default
pipeline (pipelines/radio.pipe), on the images bench_pipeline wrote. Two
sets of settings (--work):
- harness (the default; the settings issue 18's targets name): the least
  each tool does to find islands, as radio.pipe first did it: mesh
  background (box as skyfind chose it: 4 beam widths when the header has a
  beam, else 64; 3x3 median filter), pixels above 5 x the local rms after
  subtracting the local level, 8-connected islands of at least 3 pixels, no
  deblending, no cleaning, no detection filter; flux = sum of the island's
  pixel values. radio.pipe now does more: BANE's background, the beam as
  the detection filter, 32-level deblending, a Gaussian fit of each object.
- radio: radio.pipe's detection work as far as each tool can do it: the
  same, with the restoring beam (the FITS header's BMAJ, BMIN, BPA, as a
  Gaussian of radio.pipe's size: odd, +-3 sigma of the major axis) as the
  detection filter and deblending at 32 levels, contrast 0.005 (SEP and
  SExtractor only; neither has BANE's background or a Gaussian fit). Both
  threshold the filtered image in units of the unfiltered rms, so the
  threshold is 5 sigma of the filtered noise as radio.pipe's is: 5 x
  sqrt(sum k^2) of the kernel k normalised to a sum of 1 (white noise, as
  the simulated skies have; radio.pipe measures 0.159 on them, the beam
  gives 0.159). Their rows are named "SEP (radio work)" and "SExtractor
  (radio work)".
- both: each tool with each.
The harness settings in each tool:
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
With --work radio, SEP's extract takes filter_kernel=the beam,
filter_type='conv' (SExtractor's plain convolution), deblend_cont=0.005, and
SExtractor FILTER Y with the beam as FILTER_NAME (a CONV NORM file) and
DEBLEND_MINCONT 0.005, and both the threshold 5 x sqrt(sum k^2) (above).
SEP and photutils are timed in memory (array in, catalogue arrays out) as
skyfind's "pipeline" rows are; SExtractor from FITS file to catalogue file,
as skyfind's "end-to-end" rows. Wall time; median of up to --repeat runs
while they take less than --budget seconds in all; the first run is a
warm-up and not counted when it took less than a second.
Each tool's catalogue is written to DIR/STEM.<tool>.cat.csv (x, y 0-based,
flux); one JSON object per tool and image is appended to --json.
Usage: python3 pipeline_peers.py BENCH_JSON --json FILE [--repeat N]
       [--budget S] [--threads N] [--tools sep,photutils,sextractor]
       [--work harness|radio|both]
       python3 pipeline_peers.py --sex-config DIR --box N --npix N
       [--work radio --fits IMAGE]"""
import math
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
ap.add_argument("--work", choices=("harness", "radio", "both"), default="harness",
                help="harness: no detection filter, no deblending; radio: radio.pipe's beam filter "
                "and deblending (SEP, SExtractor); both: each (the module's note)")
ap.add_argument("--fits", help="with --sex-config and --work radio: the image whose beam is the filter")
a = ap.parse_args()
if not a.sex_config and not (a.bench_json and a.json):
    ap.error("BENCH_JSON and --json are needed (or --sex-config)")
if a.sex_config and a.work == "both":
    ap.error("--sex-config writes one configuration: --work harness or radio")
if a.sex_config and a.work == "radio" and not a.fits:
    ap.error("--sex-config --work radio needs --fits (the image whose beam is the filter)")
for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(v, str(a.threads))

NSIGMA, MINAREA, FILTER = 5.0, 3, 3
DEBLEND_NTHRESH, DEBLEND_CONT = 32, 0.005  # radio.pipe's deblend stage


def fits_beam(path):
    """The restoring beam of a FITS image's primary header: (major FWHM,
    minor FWHM) in pixels (BMAJ, BMIN over |CDELT2|, or |CD2_2|) and BPA in
    degrees; None without BMAJ. Read here, so the tools need no astropy."""
    cards = {}
    with open(path, "rb") as f:
        while "END" not in cards:
            block = f.read(2880)
            if len(block) < 2880:
                break
            for i in range(0, 2880, 80):
                c = block[i:i + 80].decode("ascii", "replace")
                key = c[:8].strip()
                if key == "END":
                    cards["END"] = ""
                    break
                if c[8:10] == "= " and "'" not in c[10:]:
                    cards[key] = c[10:].split("/")[0].strip()
    num = lambda k: float(cards[k].replace("D", "E")) if k in cards else None
    bmaj, bmin, bpa = num("BMAJ"), num("BMIN"), num("BPA") or 0.0
    scale = abs(num("CDELT2") or 0.0) or abs(num("CD2_2") or 0.0)
    if not bmaj or not scale:
        return None
    return bmaj / scale, (bmin or bmaj) / scale, bpa


def beam_kernel(beam):
    """The beam as radio.pipe's convolve stage makes it (kernel=beam): a
    Gaussian of FWHM major x minor pixels, the major axis at pa degrees from
    +y towards -x, odd side +-3 sigma of the major axis, unit peak (both
    tools normalise it); a list of rows, y upwards (numpy's order, as SEP's
    arrays). Plain Python, so --sex-config needs no numpy."""
    fmaj, fmin, pa = beam
    s = 1.0 / (2.0 * math.sqrt(2.0 * math.log(2.0)))
    smaj, smin = fmaj * s, fmin * s
    h = int(math.ceil(3.0 * smaj))
    t = math.radians(pa)
    k = []
    for y in range(-h, h + 1):
        row = []
        for x in range(-h, h + 1):
            u = -x * math.sin(t) + y * math.cos(t)
            v = x * math.cos(t) + y * math.sin(t)
            row.append(math.exp(-0.5 * ((u / smaj) ** 2 + (v / smin) ** 2)))
        k.append(row)
    return k


def filtered_nsigma(k):
    """The threshold in units of the unfiltered rms that is NSIGMA sigma of
    the white noise filtered by k (normalised to a sum of 1)."""
    tot = sum(map(sum, k))
    return NSIGMA * math.sqrt(sum(v * v for row in k for v in row)) / tot


def write_conv(path, k):
    with open(path, "w") as f:
        f.write("CONV NORM\n# radio.pipe's beam filter (tests/bench/peers/pipeline_peers.py)\n")
        for row in k:
            f.write(" ".join("%.6g" % v for v in row) + "\n")


def pixstack(npix):
    """Pixel stack for SEP and SExtractor: their default (300000), or 1% of
    the image for large ones. Both allocate it whole on every call, so a
    needlessly large one costs time (50 million: about a second)."""
    return max(300_000, npix // 100)


SEX_PARAMS = "NUMBER\nX_IMAGE\nY_IMAGE\nFLUX_ISO\nISOAREA_IMAGE\n"


def sextractor_files(tmp, box, npixstack, beam=None):
    """SExtractor's parameter list and configuration in tmp, matched to
    radio.pipe (the module's note; with a beam, --work radio's: the beam as
    the filter, deblending); returns (configuration, catalogue) paths."""
    conf, par, cat = (os.path.join(tmp, n) for n in ("skyfind.sex", "skyfind.param", "cat.txt"))
    with open(par, "w") as f:
        f.write(SEX_PARAMS)
    filt, mincont, nsig = "FILTER N", 1, NSIGMA
    if beam:
        k = beam_kernel(beam)
        write_conv(os.path.join(tmp, "beam.conv"), k)
        filt = f"FILTER Y\nFILTER_NAME {os.path.join(tmp, 'beam.conv')}"
        mincont, nsig = DEBLEND_CONT, filtered_nsigma(k)
    with open(conf, "w") as f:
        f.write(f"""CATALOG_NAME {cat}
CATALOG_TYPE ASCII_HEAD
PARAMETERS_NAME {par}
DETECT_TYPE CCD
DETECT_MINAREA {MINAREA}
DETECT_THRESH {nsig:.6g}
ANALYSIS_THRESH {nsig:.6g}
THRESH_TYPE RELATIVE
{filt}
DEBLEND_NTHRESH {DEBLEND_NTHRESH}
DEBLEND_MINCONT {mincont}
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
    beam = None
    if a.work == "radio":
        beam = fits_beam(a.fits)
        if not beam:
            sys.exit(f"pipeline_peers: {a.fits}: no BMAJ (and CDELT2 or CD2_2) in the header")
    print(sextractor_files(a.sex_config, a.box, pixstack(a.npix), beam)[0])
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


def run_sep(box, beam=None):
    import sep
    k = np.array(beam_kernel(beam), dtype=np.float32) if beam else None
    cont = DEBLEND_CONT if beam else 1.0
    nsig = filtered_nsigma(beam_kernel(beam)) if beam else NSIGMA

    def fn(data):
        mask = np.isnan(data) if np.isnan(data).any() else None
        b = sep.Background(data, mask=mask, bw=box, bh=box, fw=FILTER, fh=FILTER)
        sub = data - b.back()
        while True:
            try:
                o = sep.extract(sub, nsig, err=b.rms(), mask=mask, minarea=MINAREA,
                                filter_kernel=k, filter_type="conv",
                                deblend_nthresh=DEBLEND_NTHRESH, deblend_cont=cont, clean=False)
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


def run_sextractor(box, tmp, npixstack, beam=None):
    exe = shutil.which("source-extractor") or shutil.which("sex")
    if not exe:
        raise RuntimeError("no source-extractor (or sex) on PATH")
    ver = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip()
    conf, cat = sextractor_files(tmp, box, npixstack, beam)

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
                               f"{img['input']}.{tool.lower().replace(' (radio work)', '-radio')}.cat.csv")
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
        works = ("harness", "radio") if a.work == "both" else (a.work,)
        for tool, work in [(t, w) for t in tools for w in works
                           if not (w == "radio" and t == "photutils")]:
            name = {"sep": "SEP", "photutils": "photutils", "sextractor": "SExtractor"}.get(tool, tool)
            name += " (radio work)" if work == "radio" else ""
            scope = ("file to file: FITS read to catalogue written" if tool == "sextractor"
                     else "in memory: array in, catalogue arrays out")
            stage = "end-to-end" if tool == "sextractor" else "pipeline"
            try:
                beam = None
                if work == "radio" and not (beam := fits_beam(img["fits"])):
                    raise RuntimeError("the image has no beam (BMAJ) for the radio work")
                if tool == "sextractor":
                    sub = os.path.join(tmp, work)
                    os.makedirs(sub, exist_ok=True)
                    fn, ver = run_sextractor(box, sub, pixstack(img["nx"] * img["ny"]), beam)
                    arg = img["fits"]
                elif data is None:
                    raise RuntimeError("no raw image (run bench_pipeline with --raw)")
                elif tool == "sep":
                    fn, ver = run_sep(box, beam)
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
