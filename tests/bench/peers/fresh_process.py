#!/usr/bin/env python3
"""Wall time of one fresh process per image, FITS file in, catalogue file out:
skyfind run (one pipeline, --threads N) against SExtractor 2.25 as a user
runs both from a shell, process start and exit included (the harness's
'end-to-end' rows repeat the engine inside one process, so they leave out
the start and reuse memory between runs).

SExtractor runs twice: with the harness's radio-like configuration
(pipeline_peers.py: BACK_SIZE 102, DETECT_THRESH 5, no filter, no
deblending) and with its own defaults (default.sex of 2.25: BACK_SIZE 64,
BACK_FILTERSIZE 3, DETECT_THRESH 1.5, default.conv, DEBLEND_MINCONT 0.005,
CLEAN N to match skyfind), the configuration sextractor.pipe mirrors.

Usage: fresh_process.py SKYFIND IMAGE.fits [IMAGE.fits ...] [--pipelines
sextractor,lesson] [--threads 1] [--repeat 7]; prints a Markdown table.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
CONV = os.path.join(ROOT, "pipelines", "sextractor_default.conv")

COMMON = """CATALOG_TYPE ASCII_HEAD
DETECT_TYPE CCD
THRESH_TYPE RELATIVE
CLEAN N
MASK_TYPE NONE
WEIGHT_TYPE NONE
BACK_TYPE AUTO
BACKPHOTO_TYPE GLOBAL
CHECKIMAGE_TYPE NONE
SATUR_LEVEL 1e20
GAIN 0
MEMORY_OBJSTACK 10000
MEMORY_PIXSTACK 3000000
MEMORY_BUFSIZE 1024
VERBOSE_TYPE QUIET
WRITE_XML N
"""
CONFIGS = {
    "harness (box 102, 5 sigma, no filter, no deblending)":
        "DETECT_MINAREA 3\nDETECT_THRESH 5\nANALYSIS_THRESH 5\nFILTER N\nDEBLEND_NTHRESH 32\n"
        "DEBLEND_MINCONT 1\nBACK_SIZE 102\nBACK_FILTERSIZE 3\n",
    "defaults (box 64, 1.5 sigma, default.conv, deblending)":
        f"DETECT_MINAREA 3\nDETECT_THRESH 1.5\nANALYSIS_THRESH 1.5\nFILTER Y\nFILTER_NAME {CONV}\n"
        "DEBLEND_NTHRESH 32\nDEBLEND_MINCONT 0.005\nBACK_SIZE 64\nBACK_FILTERSIZE 3\n",
}
PARAMS = "NUMBER\nX_IMAGE\nY_IMAGE\nFLUX_ISO\nISOAREA_IMAGE\n"


def wall(cmd, env, repeat):
    subprocess.run(cmd, env=env, check=True, capture_output=True)  # warm-up (page cache)
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        ts.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(ts), min(ts), max(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("skyfind")
    ap.add_argument("images", nargs="+")
    ap.add_argument("--pipelines", default="sextractor,lesson,radio")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    env.setdefault("SKYFIND_PIPELINES", os.path.join(ROOT, "pipelines"))
    sex = shutil.which("source-extractor") or shutil.which("sex")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        par = os.path.join(tmp, "p.param")
        with open(par, "w") as f:
            f.write(PARAMS)
        for img in a.images:
            name = os.path.basename(img)
            for p in a.pipelines.split(","):
                cmd = [a.skyfind, "run", "-p", p, "--threads", str(a.threads), "-q", img,
                       "-o", os.path.join(tmp, "sf")]
                rows.append((name, f"skyfind {p}.pipe", *wall(cmd, env, a.repeat)))
            if not sex:
                continue
            for label, conf in CONFIGS.items():
                cf = os.path.join(tmp, "c.sex")
                with open(cf, "w") as f:
                    f.write(COMMON + conf + f"PARAMETERS_NAME {par}\n"
                            f"CATALOG_NAME {os.path.join(tmp, 'cat.txt')}\nNTHREADS {a.threads}\n")
                rows.append((name, f"SExtractor, {label}",
                             *wall([sex, img, "-c", cf], env, a.repeat)))
    print(f"| image | tool | median ms | min | max |  (fresh process per run, {a.repeat} runs "
          f"after a warm-up, {a.threads} thread(s))")
    print("|---|---|--:|--:|--:|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.1f} | {r[3]:.1f} | {r[4]:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
