"""The lesson's CuPy pipeline looping over FITS files, as a user would batch
it: read each file (numpy, straight from the file: the header's 2880-byte
blocks, then big-endian pixels), run the lesson's code on the GPU, write a
CSV catalogue. Prints files/s and MB/s of the whole loop (wall clock, the
first file as warm-up excluded) and one JSON line with --json.
Usage: python3 batch_cupy.py OUTDIR FILE... [--json]"""
import json, os, sys, time
import numpy as np
from lesson_code import run_cupy

BITPIX = {8: ">u1", 16: ">i2", 32: ">i4", 64: ">i8", -32: ">f4", -64: ">f8"}


def read_fits(path):
    """First HDU's 2-D (or degenerate N-D) image as float32, BSCALE/BZERO applied."""
    cards, off = {}, 0
    with open(path, "rb") as f:
        while True:
            block = f.read(2880)
            if len(block) < 2880:
                raise ValueError(f"{path}: no END card")
            off += 2880
            done = False
            for k in range(36):
                c = block[80 * k:80 * k + 80].decode("ascii", "replace")
                key = c[:8].strip()
                if key == "END":
                    done = True
                    break
                if c[8:10] == "= ":
                    cards[key] = c[10:].split("/")[0].strip()
            if done:
                break
        nx, ny = int(cards["NAXIS1"]), int(cards["NAXIS2"])
        bp = int(cards["BITPIX"])
        f.seek(off)
        d = np.fromfile(f, dtype=BITPIX[bp], count=nx * ny).reshape(ny, nx).astype(np.float32)
    bs, bz = float(cards.get("BSCALE", 1)), float(cards.get("BZERO", 0))
    if bs != 1 or bz != 0:
        d = d * np.float32(bs) + np.float32(bz)
    return d


def main():
    args = [a for a in sys.argv[1:] if a != "--json"]
    out, files = args[0], args[1:]
    os.makedirs(out, exist_ok=True)
    nbytes, times = 0, []
    for i, p in enumerate(files):
        t = time.perf_counter()
        d = read_fits(p)
        std, n, pos, flux = run_cupy(d)
        p_arr = np.asarray(pos, dtype=float).reshape(-1, 2)
        stem = os.path.basename(p).split(".fits")[0]
        np.savetxt(os.path.join(out, stem + ".cupy.csv"),
                   np.column_stack([p_arr[:, 1], p_arr[:, 0], np.asarray(flux, dtype=float)]),
                   delimiter=",", header="x,y,flux", comments="", fmt="%.10g")
        times.append(time.perf_counter() - t)
        if i:
            nbytes += d.nbytes
    wall = sum(times[1:])
    nf = len(files) - 1
    res = {"tool": "cupy lesson loop", "files": nf, "wall_s": wall, "files_per_s": nf / wall,
           "mb_per_s": nbytes / 1e6 / wall, "first_file_s": times[0]}
    print(f"cupy lesson loop: {nf} files (after 1 warm-up) in {wall:.2f} s: "
          f"{nf / wall:.2f} files/s, {nbytes / 1e6 / wall:.0f} MB/s")
    if "--json" in sys.argv:
        print(json.dumps(res))


if __name__ == "__main__":
    main()
