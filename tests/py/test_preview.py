#!/usr/bin/env python3
"""Checks the PNG previews (src/io/preview.c) from outside: runs
$SKYFIND_BUILD/tests/sf_preview_tool on a real radio image with NaNs and on a
simulated image, decodes the PNGs by hand (zlib, no PNG library needed) and
checks sizes, orientation, stretch, NaN colour, label colours and the source
ellipses.
Prints `N passed, M failed`."""
import csv
import math
import os
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np
from astropy.io import fits
from astropy.visualization import ZScaleInterval

NAN_RGB = (40, 70, 170)
CIRCLE_RGB = (0, 255, 0)
passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what)


def read_png(path):
    """8-bit grey or RGB, non-interlaced: returns an (H, W, C) uint8 array."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        n, typ = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        crc = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0]
        assert zlib.crc32(typ + body) & 0xffffffff == crc, "bad CRC"
        if typ == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif typ == b"IDAT":
            idat += body
        elif typ == b"IEND":
            break
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = ihdr
    assert depth == 8 and ctype in (0, 2) and interlace == 0, "unsupported PNG %r" % (ihdr,)
    c = 1 if ctype == 0 else 3
    raw = zlib.decompress(idat)
    stride = w * c
    out = np.zeros((h, stride), dtype=np.int32)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(h):
        ft = raw[y * (stride + 1)]
        line = np.frombuffer(raw, np.uint8, stride, y * (stride + 1) + 1).astype(np.int32)
        cur = np.zeros(stride, dtype=np.int32)
        if ft == 0:
            cur = line
        elif ft == 2:
            cur = (line + prev) & 255
        else:  # Sub, Average, Paeth need the left neighbour: byte by byte
            for i in range(stride):
                a = cur[i - c] if i >= c else 0
                b = prev[i]
                cc = prev[i - c] if i >= c else 0
                if ft == 1:
                    p = a
                elif ft == 3:
                    p = (a + b) // 2
                else:
                    pa, pb, pc = abs(b - cc), abs(a - cc), abs(a + b - 2 * cc)
                    p = a if pa <= pb and pa <= pc else (b if pb <= pc else cc)
                cur[i] = (line[i] + p) & 255
        out[y] = cur
        prev = cur
    return out.reshape(h, w, c).astype(np.uint8)


def find_tool():
    build = os.environ.get("SKYFIND_BUILD", "")
    here = os.path.dirname(os.path.abspath(__file__))
    for d in ([build] if build else []) + [os.path.join(here, "..", "..", "build-png"),
                                           os.path.join(here, "..", "..", "build")]:
        t = os.path.join(d, "tests", "sf_preview_tool")
        if os.path.isfile(t) and os.access(t, os.X_OK):
            return t
    return None


def load_sources(path):
    with open(path) as f:
        rows = [r for r in f if not r.startswith("#")]
    return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(rows)]


def overlay_scale(nx, ny):
    m = max(nx, ny)
    return 1 if m >= 512 else (512 + m - 1) // m


def check_case(tag, fits_path, tool, out):
    os.makedirs(out, exist_ok=True)
    r = subprocess.run([tool, fits_path, out], capture_output=True, text=True)
    check(r.returncode == 0, "%s: sf_preview_tool rc %d: %s" % (tag, r.returncode, r.stderr))
    if r.returncode != 0:
        return
    nx, ny, nlab, nsrc = map(int, r.stdout.split())
    data = np.squeeze(fits.getdata(fits_path)).astype(np.float64)
    check(data.shape == (ny, nx), "%s: FITS shape %r vs %dx%d" % (tag, data.shape, nx, ny))
    src = load_sources(os.path.join(out, "sources.csv"))
    check(len(src) == nsrc and nsrc > 0, "%s: %d sources in the CSV, %d reported" % (tag, len(src), nsrc))
    finite = np.isfinite(data)
    flip = data[::-1]          # FITS row 0 at the bottom of the PNG
    fflip = finite[::-1]
    pngs = {}
    for name in ("image", "image_zscale", "segmap", "overlay"):
        try:
            pngs[name] = read_png(os.path.join(out, name + ".png"))
            check(True, "")
        except Exception as e:  # noqa: BLE001
            check(False, "%s: %s.png does not decode: %s" % (tag, name, e))
            return
    # sizes and types as documented in preview.h
    s = overlay_scale(nx, ny)
    nch = 1 if finite.all() else 3
    for name in ("image", "image_zscale"):
        check(pngs[name].shape == (ny, nx, nch), "%s: %s.png shape %r" % (tag, name, pngs[name].shape))
    check(pngs["segmap"].shape == (ny, nx, 3), "%s: segmap shape %r" % (tag, pngs["segmap"].shape))
    check(pngs["overlay"].shape == (ny * s, nx * s, 3), "%s: overlay shape %r, scale %d"
          % (tag, pngs["overlay"].shape, s))
    check(max(pngs["overlay"].shape[:2]) >= 512, "%s: overlay smaller than 512 px" % tag)

    img = pngs["image"].astype(int)
    grey = img[..., 0]
    check(grey.max() - grey.min() > 100, "%s: image preview nearly constant (%d..%d)"
          % (tag, grey.min(), grey.max()))
    if nch == 3:
        nanpix = img[~fflip]
        check(len(nanpix) > 0 and (nanpix == NAN_RGB).all(), "%s: NaN pixels not in the NaN colour" % tag)
        fin = img[fflip]
        check((fin[:, 0] == fin[:, 1]).all() and (fin[:, 1] == fin[:, 2]).all(),
              "%s: finite pixels not grey" % tag)
    # the stretch is monotonic and the PNG is flipped: greys sorted by pixel value never drop
    order = np.argsort(flip[fflip], kind="stable")
    g = grey[fflip][order]
    drops = int((np.diff(g) < 0).sum())
    check(drops == 0, "%s: grey not monotonic in the pixel value (flipped): %d drops" % (tag, drops))
    # brightest source: its peak is at the top of the grey range, where the flip puts it
    b = max(src, key=lambda q: q["peak"])
    px, py = int(b["peak_x"]) - 1, int(b["peak_y"]) - 1
    check(grey[ny - 1 - py, px] >= 250, "%s: brightest source peak at (%d,%d) grey %d"
          % (tag, px, py, grey[ny - 1 - py, px]))
    # a source in the bottom third of the FITS image appears in the bottom third of the PNG
    low = [q for q in src if q["peak_y"] - 1 < ny / 3]
    if low:
        q = max(low, key=lambda q: q["peak"])
        qx, qy = int(q["peak_x"]) - 1, int(q["peak_y"]) - 1
        vals = grey[fflip]
        check(ny - 1 - qy > 2 * ny / 3 and grey[ny - 1 - qy, qx] >= np.percentile(vals, 99),
              "%s: low source (%d,%d) not bright near the PNG bottom (grey %d)"
              % (tag, qx, qy, grey[ny - 1 - qy, qx]))
    # zscale against astropy's ZScaleInterval (same sampling: every k-th finite pixel)
    vals = data[finite]
    z1, z2 = ZScaleInterval().get_limits(vals.astype(np.float32))
    exp = np.clip(np.floor(255 * (np.clip(flip, z1, z2) - z1) / (z2 - z1) + 0.5), 0, 255)
    diff = np.abs(pngs["image_zscale"][..., 0].astype(int) - exp)[fflip]
    check((diff <= 1).mean() >= 0.999, "%s: zscale differs from astropy (z1 %g z2 %g): max diff %d, %.4f within 1"
          % (tag, z1, z2, diff.max(), (diff <= 1).mean()))

    # segmap: black background, one colour per label (rule: at least nlabels - nlabels//100
    # distinct colours, never more), labelled pixels = sum of npix, peaks coloured
    seg = pngs["segmap"].reshape(-1, 3)
    nonblack = seg[(seg != 0).any(axis=1)]
    ncol = len({tuple(c) for c in nonblack})
    check(nlab - nlab // 100 <= ncol <= nlab, "%s: %d segmap colours for %d labels" % (tag, ncol, nlab))
    check(len(nonblack) == int(sum(q["npix"] for q in src)),
          "%s: %d coloured segmap pixels, catalogue npix sum %d" % (tag, len(nonblack), sum(q["npix"] for q in src)))
    sg = pngs["segmap"]
    ok = all((sg[ny - 1 - (int(q["peak_y"]) - 1), int(q["peak_x"]) - 1] != 0).any() for q in src)
    check(ok, "%s: a source peak is black in the segmap" % tag)
    check(int(sg.max(axis=2)[sg.max(axis=2) > 0].min()) >= 216, "%s: a label colour is dark" % tag)

    # overlay: the ellipse colour on each source's ellipse (>= half of the in-bounds
    # points): semi-axes sqrt(2 ln 2) (a, b) scaled up to a >= 3 px, b >= 1 px, at theta
    # counter-clockwise from +x (image y up); a circle for a source without a shape
    ov = pngs["overlay"]
    H, W = ov.shape[:2]
    circ = np.all(ov == CIRCLE_RGB, axis=2)
    # ids are drawn last, over ellipses: points covered by a label's glyphs or their
    # black outline do not count
    text = np.all(ov == (255, 230, 0), axis=2) | np.all(ov == 0, axis=2)
    bad = []
    nell = 0
    for q in src:
        x0, y0 = q["x"] - 1, q["y"] - 1
        cx, cy = (x0 + 0.5) * s - 0.5, (ny - y0 - 0.5) * s - 0.5
        if all(math.isfinite(q[k]) for k in ("a", "b", "theta")) and q["a"] > 0:
            A, B, th = 1.1774100225154747 * q["a"], 1.1774100225154747 * q["b"], q["theta"]
            k = 3.0 / A if A < 3.0 else 1.0
            A, B = A * k, max(B * k, 1.0)
            nell += A > B * 1.2
        else:
            A = B = max(3.0, math.sqrt(q["npix"] / math.pi))
            th = 0.0
        c, sn = math.cos(math.radians(th)), math.sin(math.radians(th))
        hit = tot = 0
        for k in range(24):
            t = 2 * math.pi * k / 24
            u, v = A * s * math.cos(t), B * s * math.sin(t)
            X, Y = int(round(cx + u * c - v * sn)), int(round(cy - (u * sn + v * c)))
            if 1 <= X < W - 1 and 1 <= Y < H - 1 and not text[Y - 1:Y + 2, X - 1:X + 2].any():
                tot += 1
                hit += bool(circ[Y - 1:Y + 2, X - 1:X + 2].any())
        if tot and hit < tot / 2:
            bad.append((int(q["id"]), hit, tot))
    check(not bad, "%s: ellipses missing (id, hits, points): %r" % (tag, bad[:5]))
    print("%s: %dx%d, %d labels, %d sources (%d drawn elongated), overlay scale %d, %d segmap "
          "colours" % (tag, nx, ny, nlab, nsrc, nell, s, ncol))


def main():
    tool = find_tool()
    if not tool:
        print("SKIP: sf_preview_tool not built")
        return 77
    data_dir = os.environ.get("SKYFIND_TEST_DATA",
                              os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data"))
    with tempfile.TemporaryDirectory() as tmp:
        parkes = os.path.join(data_dir, "radio_parkes_1904-66_SIN.fits")
        if os.path.exists(parkes):
            check_case("parkes", parkes, tool, os.path.join(tmp, "parkes"))
        else:
            check(False, "missing %s" % parkes)
        cli = os.environ.get("SKYFIND", "")
        if not cli:
            cli = os.path.join(os.path.dirname(os.path.dirname(tool)), "skyfind")
        sim = os.path.join(tmp, "x.fits")
        r = subprocess.run([cli, "simulate", "-q", "-n", "300", "--nsrc", "20", "-o", sim],
                           capture_output=True, text=True)
        check(r.returncode == 0, "skyfind simulate failed: %s" % r.stderr)
        if r.returncode == 0:
            check_case("simulated", sim, tool, os.path.join(tmp, "sim"))
        # errors name the path and leave nothing behind
        bad_out = os.path.join(tmp, "no_such_dir", "image.png")
        r = subprocess.run([tool, parkes, os.path.join(tmp, "no_such_dir")], capture_output=True, text=True)
        check(r.returncode != 0 and "no_such_dir" in r.stderr and not os.path.exists(bad_out),
              "bad output folder: rc %d, stderr %r" % (r.returncode, r.stderr))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
