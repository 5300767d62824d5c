#!/usr/bin/env python3
"""Stage `convolve` against scipy, in float64: scipy.ndimage.convolve (every
edge mode) and scipy.signal.fftconvolve (edge zero: full mode cropped at
k//2), on random images and real images from SKYFIND_TEST_DATA; odd, even
and non-square kernels from 1x1 to 63x63, kernels larger than the image, a
real 512x512 dirty beam, NaN regions (normalised convolution), methods
direct, fft and auto. Kernels made by the tool (Gaussian, .conv) are also
checked against formulas written here. Needs only numpy and scipy (the tool
reads the FITS files and dumps what it read); tools in $SKYFIND_BUILD/tests.

SKYFIND_CONV_BACKENDS="cpu gpu" (default "cpu") also runs the GPU backend;
a tool exit 77 (no CUDA device) is a printed skip, not a pass.
Pass: relative L2 error ||out-ref||/||ref|| over non-NaN pixels < 1e-6 for
direct and < 1e-5 for fft and auto, with identical NaN positions.

Reference for NaN (convolve.h): num = conv(where(nan, 0, v)), den =
conv(valid) with pixels outside the image valid in edge mode zero (scipy
cval=1 for the mask), out = num/den*sum(w), NaN where v is NaN or den == 0.
scipy 1.10's mode='reflect' reads outside its buffer when the kernel is more
than 8 times the image side, so there the reference pads explicitly
(np.pad 'symmetric', period 2N) and convolves the padded image."""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.ndimage as ndi
import scipy.signal as sps

TOL = {"direct": 1e-6, "fft": 1e-5, "auto": 1e-5}
SCIPY_MODE = {"zero": "constant", "nearest": "nearest", "reflect": "reflect", "wrap": "wrap"}
NP_PAD = {"zero": "constant", "nearest": "edge", "reflect": "symmetric", "wrap": "wrap"}
EDGES = ("zero", "nearest", "reflect", "wrap")

passed = failed = skipped = 0
worst = {}  # (backend, method) -> (err, what)


def report(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {what}: {detail}")


class Tool:
    def __init__(self, path, tmp):
        self.path = path
        self.tmp = tmp
        self.skipped_gpu = False

    def _run(self, args):
        return subprocess.run([self.path] + args, capture_output=True, text=True)

    def run(self, src, kspec, method, edge, backend):
        """src: ('raw', array) or ('fits', path, shape). Returns the output,
        None for a skip (exit 77); raises RuntimeError on failure."""
        out = os.path.join(self.tmp, "out.f32")
        args = ["--kernel", kspec, "--method", method, "--edge", edge, "--backend", backend,
                "--out", out]
        if src[0] == "raw":
            img = np.ascontiguousarray(src[1], dtype=np.float32)
            ipath = os.path.join(self.tmp, "in.f32")
            img.tofile(ipath)
            args += ["--raw", ipath, str(img.shape[1]), str(img.shape[0])]
            shape = img.shape
        else:
            args += ["--fits", src[1]]
            shape = src[2]
        r = self._run(args)
        if r.returncode == 77:
            return None
        if r.returncode != 0:
            raise RuntimeError(f"exit {r.returncode}: {(r.stderr or r.stdout).strip()}")
        return np.fromfile(out, dtype=np.float32).reshape(shape)

    def read_fits(self, path):
        """The image as the tool reads it (first plane, BLANK as NaN)."""
        dpath = os.path.join(self.tmp, "dump.f32")
        r = self._run(["--fits", path, "--kernel", "gauss:3", "--method", "direct",
                       "--dump-in", dpath])
        if r.returncode != 0:
            raise RuntimeError(f"exit {r.returncode}: {r.stderr.strip()}")
        words = r.stdout.split()
        i = words.index("image")
        nx, ny = int(words[i + 1]), int(words[i + 2])
        return np.fromfile(dpath, dtype=np.float32).reshape(ny, nx)

    def kernel(self, kspec):
        """The tool's weights for a kernel spec (via a 1x1 image)."""
        kpath = os.path.join(self.tmp, "kk.f32")
        ipath = os.path.join(self.tmp, "one.f32")
        np.zeros(1, np.float32).tofile(ipath)
        r = self._run(["--raw", ipath, "1", "1", "--kernel", kspec, "--method", "fft",
                       "--dump-kernel", kpath])
        if r.returncode != 0:
            raise RuntimeError(f"kernel {kspec}: exit {r.returncode}: {r.stderr.strip()}")
        kx, ky = (int(t) for t in r.stdout.split()[:2])
        return np.fromfile(kpath, dtype=np.float32).reshape(ky, kx)


def pad_ext(v, w, edge, cval=0.0):
    ky, kx = w.shape
    pad = ((ky - 1 - ky // 2, ky // 2), (kx - 1 - kx // 2, kx // 2))
    if edge == "zero":
        return np.pad(v, pad, mode="constant", constant_values=cval)
    return np.pad(v, pad, mode=NP_PAD[edge])


def conv64(v, w, edge, cval=0.0, how="ndi"):
    """convolve.h's definition in float64: scipy.ndimage.convolve, or the
    explicitly padded image convolved ('pad': ndimage, 'padfft': fftconvolve)."""
    if how == "ndi":
        return ndi.convolve(v, w, mode=SCIPY_MODE[edge], cval=cval)
    e = pad_ext(v, w, edge, cval)
    if how == "padfft":
        return sps.fftconvolve(e, w, mode="valid")
    ky, kx = w.shape
    full = ndi.convolve(e, w, mode="constant", cval=0.0)
    oy, ox = ky - 1 - ky // 2, kx - 1 - kx // 2
    return full[oy:oy + v.shape[0], ox:ox + v.shape[1]]


def reference(img32, k32, edge, how=None):
    v = img32.astype(np.float64)
    w = k32.astype(np.float64)
    ky, kx = w.shape
    if how is None:
        how = "ndi"
        if edge == "reflect" and (kx > 8 * v.shape[1] or ky > 8 * v.shape[0]):
            how = "pad"
    bad = np.isnan(v)
    if not bad.any():
        return conv64(v, w, edge, 0.0, how)
    num = conv64(np.where(bad, 0.0, v), w, edge, 0.0, how)
    den = conv64((~bad).astype(np.float64), w, edge, 1.0, how)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = num / den * w.sum()
    out[bad | (den == 0)] = np.nan
    return out


def rel_err(out, ref):
    if out.shape != ref.shape:
        return None, f"shape {out.shape} vs {ref.shape}"
    no, nr = np.isnan(out), np.isnan(ref)
    if not np.array_equal(no, nr):
        ys, xs = np.nonzero(no != nr)
        return None, (f"NaN positions differ at {len(ys)} pixels, first (x={xs[0]}, y={ys[0]}): "
                      f"{out[ys[0], xs[0]]} vs {ref[ys[0], xs[0]]}")
    m = ~nr
    d = np.linalg.norm((out[m].astype(np.float64) - ref[m]))
    n = np.linalg.norm(ref[m])
    return (d / n if n > 0 else d), ""


def short(spec):
    """A kernel spec without its folder names (raw:/tmp/x/k.f32:5:5 -> raw:k.f32:5:5)."""
    kind, _, rest = spec.partition(":")
    return f"{kind}:{os.path.basename(rest)}" if "/" in rest else spec


def check(tool, src, img32, kspec, k32, edge, methods, backends, what, ref=None, how=None):
    """Run the tool for each backend and method; compare to the reference."""
    global skipped
    if ref is None:
        ref = reference(img32, k32, edge, how)
    for be in backends:
        for method in methods:
            name = f"{what} kernel {short(kspec)} {k32.shape[1]}x{k32.shape[0]} edge {edge} {method} [{be}]"
            try:
                res = tool.run(src, kspec, method, edge, be)
            except RuntimeError as e:
                report(False, name, str(e))
                continue
            if res is None:
                if not tool.skipped_gpu:
                    print(f"SKIP: no CUDA device ({be} backend not run)")
                tool.skipped_gpu = True
                skipped += 1
                continue
            err, why = rel_err(res, ref)
            if err is None:
                report(False, name, why)
                continue
            key = (be, method)
            if key not in worst or err > worst[key][0]:
                worst[key] = (err, name)
            report(err < TOL[method], name, f"relative L2 error {err:.3g} >= {TOL[method]:g}")
    return ref


def random_image(rng, ny, nx, nan=False):
    v = rng.normal(size=(ny, nx)) + 0.3
    # a few bright compact sources, as on a sky image
    for _ in range(max(1, nx * ny // 2000)):
        cy, cx = rng.uniform(0, ny), rng.uniform(0, nx)
        yy, xx = np.mgrid[0:ny, 0:nx]
        v += rng.uniform(5, 50) * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * 1.5 ** 2))
    if nan:
        v[rng.random((ny, nx)) < 0.05] = np.nan
        # a blanked block and a blanked row, as at a mosaic edge
        v[: max(1, ny // 3), : max(1, nx // 4)] = np.nan
        v[ny // 2, :] = np.nan
    return v.astype(np.float32)


def raw_kernel(tool, rng, kx, ky, separable=False, signed=False):
    if separable:
        w = np.outer(rng.uniform(0.1, 1, ky), rng.uniform(0.1, 1, kx)).astype(np.float32)
    else:
        w = rng.uniform(-0.5 if signed else 0.05, 1, (ky, kx)).astype(np.float32)
    path = os.path.join(tool.tmp, f"k{kx}x{ky}{'s' if separable else ''}.f32")
    w.tofile(path)
    return f"raw:{path}:{kx}:{ky}", w


def gauss_formula(fmaj, fmin, pa, n):
    """The elliptical Gaussian of convolve.h, PA from +y towards -x, centre
    at index n//2, unit sum (float64)."""
    f2s = 1 / (2 * np.sqrt(2 * np.log(2)))
    smaj, smin = fmaj * f2s, fmin * f2s
    t = np.deg2rad(pa)
    yy, xx = np.mgrid[0:n, 0:n] - n // 2
    a = -xx * np.sin(t) + yy * np.cos(t)
    b = xx * np.cos(t) + yy * np.sin(t)
    g = np.exp(-0.5 * (a ** 2 / smaj ** 2 + b ** 2 / smin ** 2))
    return g / g.sum()


def check_kernels(tool):
    """Kernels built by the library against formulas written here."""
    for fmaj, fmin, pa, size in [(3, 3, 0, 0), (6, 2, 0, 0), (6, 2, 90, 0), (7, 3, 30, 0),
                                 (5, 2.5, -60, 16), (4, 4, 0, 8), (200, 100, 10, 0)]:
        spec = f"gauss:{fmaj},{fmin},{pa},{size}"
        k = tool.kernel(spec)
        f2s = 1 / (2 * np.sqrt(2 * np.log(2)))
        n = size or min(127, 2 * int(np.ceil(3 * fmaj * f2s)) + 1)
        if k.shape != (n, n):
            report(False, f"kernel {spec}", f"shape {k.shape}, expected {(n, n)}")
            continue
        g = gauss_formula(fmaj, fmin, pa, n)
        err = np.abs(k - g).max() / g.max()
        report(err < 1e-6 and abs(k.astype(np.float64).sum() - 1) < 1e-6, f"kernel {spec}",
               f"max |w - formula| / max {err:.3g}, sum {k.sum():.9g}")
    k = tool.kernel("tophat:2.5")
    yy, xx = np.mgrid[-3:4, -3:4]
    t = (xx ** 2 + yy ** 2 <= 2.5 ** 2).astype(np.float64)
    report(k.shape == t.shape and np.abs(k - t / t.sum()).max() < 1e-7, "kernel tophat:2.5",
           f"weights differ from the disc of radius 2.5")
    for head, rows, norm in [("CONV NORM", [[1, 2, 1], [2, 4, 2], [1, 2, 1]], 16.0),
                             ("CONV NONORM", [[1, -2, 3, 0.5], [0, 1, 0, 2]], 1.0),
                             ("CONV NORM", [[-1, -1, -1], [-1, 8, -1], [-1, -1, -1]], 16.0)]:
        path = os.path.join(tool.tmp, "f.conv")
        with open(path, "w") as f:
            f.write(head + "\n# a comment\n" + "\n".join(" ".join(str(x) for x in r) for r in rows) + "\n")
        k = tool.kernel("conv:" + path)
        want = np.array(rows, dtype=np.float64) / norm  # NORM: / sum|w|, as SExtractor
        report(k.shape == want.shape and np.abs(k - want).max() < 1e-7, f"kernel {head} {rows}",
               f"got {k.tolist()}")


def main():
    t0 = time.time()
    build = os.environ.get("SKYFIND_BUILD")
    if not build:
        print("SKIP: SKYFIND_BUILD is not set")
        return 77
    path = os.path.join(build, "tests", "sf_convolve_tool")
    if not os.access(path, os.X_OK):
        print(f"FAIL: no tool {path} (build the sf_convolve_tool target)")
        return 1
    data = os.environ.get("SKYFIND_TEST_DATA") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data")
    backends = os.environ.get("SKYFIND_CONV_BACKENDS", "cpu").split()
    rng = np.random.default_rng(20240615)
    with tempfile.TemporaryDirectory() as tmp:
        tool = Tool(path, tmp)
        check_kernels(tool)

        # 1. kernel sides 1..63, odd, even and non-square; every edge mode;
        #    both methods; NaN on every other kernel; image sizes cycled
        sides = [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (8, 8), (15, 15), (16, 16), (31, 31),
                 (41, 41), (63, 63), (3, 8), (15, 4), (1, 9), (9, 1), (63, 5), (16, 41), (2, 7)]
        shapes = [(37, 53), (64, 41), (100, 80), (33, 31), (1, 70), (70, 1), (128, 96)]
        for n, (kx, ky) in enumerate(sides):
            ny, nx = shapes[n % len(shapes)]
            if kx * ky > 1000:
                ny, nx = min(ny, 72), min(nx, 64)  # keeps the float64 references quick
            img = random_image(rng, ny, nx, nan=n % 2 == 1)
            spec, w = raw_kernel(tool, rng, kx, ky, separable=n % 3 == 2, signed=n % 5 == 4)
            for edge in EDGES:
                ref = check(tool, ("raw", img), img, spec, w, edge, ("direct", "fft"), backends,
                            f"random {nx}x{ny}{' NaN' if n % 2 else ''}")
                if edge == "zero" and n % 2 == 0:
                    # the independent FFT reference: full linear convolution cropped at k//2
                    full = sps.fftconvolve(img.astype(np.float64), w.astype(np.float64), mode="full")
                    ref2 = full[ky // 2:ky // 2 + ny, kx // 2:kx // 2 + nx]
                    check(tool, ("raw", img), img, spec, w, edge, ("direct", "fft"), backends,
                          f"random {nx}x{ny} vs fftconvolve", ref=ref2)
                    err, _ = rel_err(ref, ref2)
                    report(err is not None and err < 1e-12, "reference self-check: ndimage == fftconvolve",
                           f"{err}")

        # 2. images smaller than the kernel (reflect period 2N, wrap period N)
        for ny, nx in [(1, 1), (2, 3), (5, 7), (4, 10), (9, 2)]:
            for kx, ky in [(15, 15), (31, 31), (63, 63), (16, 41), (8, 3)]:
                nan = (nx * ny + kx) % 3 == 0 and nx * ny > 1
                img = random_image(rng, ny, nx, nan=nan)
                spec, w = raw_kernel(tool, rng, kx, ky)
                for edge in EDGES:
                    check(tool, ("raw", img), img, spec, w, edge, ("direct", "fft"), backends,
                          f"small {nx}x{ny}{' NaN' if nan else ''}")
        # the padded reference agrees with scipy where scipy's reflect is sound
        img = random_image(rng, 5, 7)
        w = rng.uniform(0.1, 1, (31, 31))
        for edge in EDGES:
            a = conv64(img.astype(np.float64), w, edge, how="ndi")
            b = conv64(img.astype(np.float64), w, edge, how="pad")
            report(np.allclose(a, b, rtol=1e-12, atol=0), f"reference self-check: padded == ndimage ({edge})")

        # 3. NaN regions: scattered, blocks, a NaN-only row/column, an isolated
        #    valid pixel inside NaN; kernels of every kind, method auto too
        img = random_image(rng, 90, 120, nan=True)
        img[:, 100] = np.nan
        img[60:80, 20:50] = np.nan
        img[70, 35] = 5.0
        for spec in ["gauss:5", "gauss:9,4,30", "gauss:7,3,90,16", "tophat:6.5"]:
            k = tool.kernel(spec)
            for edge in EDGES:
                check(tool, ("raw", img), img, spec, k, edge, ("direct", "fft", "auto"), backends,
                      "NaN regions 120x90")
        nan_only = np.full((6, 9), np.nan, np.float32)
        check(tool, ("raw", nan_only), nan_only, "gauss:3", tool.kernel("gauss:3"), "reflect",
              ("direct", "fft"), backends, "NaN-only 9x6")

        # 4. real images (read by the tool, NaN blanks kept)
        reals = [("radio_parkes_1904-66_SIN.fits", ["gauss:5", "gauss:9,5,40", "tophat:4"]),
                 ("optical_eso_ntt_emmi_256x256_int16_bscale.fits",
                  ["conv:" + os.path.join(data, "optical_eso_ntt_emmi_256x256_int16_bscale.REF_sextractor_default_conv.txt"),
                   "gauss:2.5", "gauss:12,6,-35,41"]),
                 ("radio_vla_nvas_W51_22GHz_114x124x1x1.fits", ["gauss:4,3,80", "tophat:10"]),
                 ("radio_parkes_1904-66_SIN_galactic.fits", ["gauss:6", "gauss:20,8,15,63"]),
                 ("optical_dss_100x100.fits.gz", ["gauss:3"])]
        nreal = 0
        for name, specs in reals:
            fpath = os.path.join(data, name)
            if not os.path.exists(fpath):
                print(f"  {name}: not in {data}, skipped")
                continue
            try:
                img = tool.read_fits(fpath)
            except RuntimeError as e:
                report(False, f"read {name}", str(e))
                continue
            shape = img.shape
            nreal += 1
            for i, spec in enumerate(specs):
                k = tool.kernel(spec)
                for edge in EDGES:
                    methods = ("direct", "fft", "auto") if i == 0 else ("direct", "fft")
                    check(tool, ("fits", fpath, shape), img, spec, k, edge, methods, backends,
                          f"{name} ({shape[1]}x{shape[0]}, {int(np.isnan(img).sum())} NaN)")
        print(f"  {nreal} real images compared")

        # 5. a real dirty beam (512x512, sidelobes) as the kernel: FFT (auto) only
        beam = os.path.join(data, "radio_lofar_dirty_beam_512x512x1x1.fits")
        dss = os.path.join(data, "optical_dss_100x100.fits.gz")
        if os.path.exists(beam) and os.path.exists(dss):
            spec = "fits:" + beam
            k = tool.kernel(spec)
            img = tool.read_fits(dss)
            for edge in ("zero", "reflect", "wrap"):
                ref = reference(img, k, edge, how="padfft")
                check(tool, ("fits", dss, img.shape), img, spec, k, edge, ("fft", "auto"), backends,
                      "dss 100x100 with a 512x512 dirty beam", ref=ref)

    print(f"convolve vs scipy: {passed} passed, {failed} failed, {skipped} skipped "
          f"({time.time() - t0:.1f} s)")
    for (be, method), (err, what) in sorted(worst.items()):
        print(f"  worst relative L2 [{be}] {method}: {err:.3g} ({what})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
