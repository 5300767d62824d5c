#!/usr/bin/env python3
"""skyfind against the tools astronomers would pick instead, on the same
images in one invocation:
  1. bench_pipeline (the C driver in tests/bench/) simulates the images,
     times every stage of the lesson and radio pipelines on the CPU and the
     GPU (when there is one), the whole pipeline and FITS-to-catalogue, and
     writes the images (FITS and raw float32) and skyfind's catalogues;
  2. peers/lesson_peers.py runs the GPU lesson's own numpy/scipy and
     CuPy/cupyx code on them, peers/pipeline_peers.py runs SEP, photutils and
     SExtractor with settings matched to pipelines/radio.pipe (--peer-work:
     harness, the least each does to find islands; radio, with radio.pipe's
     beam filter and deblending as SEP and SExtractor do them; both);
  3. every peer catalogue is matched to skyfind's (same pipeline) within
     1 pixel: matched fraction of each side and the median flux ratio;
  4. one table goes to stdout, results.md and results.json in --out, and a
     log-log plot of time against image size, results.png, when matplotlib
     can be imported (otherwise: harness.py --plot-only results.json later).
A peer that cannot run (no CuPy, no photutils, no source-extractor) is
listed as "not run: reason". Nothing here is a dependency of skyfind.
Usage: harness.py [--build DIR] [--sizes 512,1024,2048] [--out DIR] [FITS...]
       harness.py --plot-only results.json [--merge other.json] [--out DIR]"""
import argparse, csv, json, math, os, platform, shutil, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fits", nargs="*", help="FITS images to add to the simulated ones")
    ap.add_argument("--build", default=os.environ.get("SKYFIND_BUILD"),
                    help="build folder holding tests/bench/bench_pipeline (default $SKYFIND_BUILD, "
                         "else build-bench or build beside this repository)")
    ap.add_argument("--sizes", default="512,1024,2048", help="simulated square sizes")
    ap.add_argument("--out", default="bench-results", help="folder for results.{md,json,png}")
    ap.add_argument("--repeat", type=int, default=10, help="timed GPU runs (after a warm-up)")
    ap.add_argument("--cpu-repeat", type=int, default=3, help="timed CPU runs of skyfind")
    ap.add_argument("--peer-repeat", type=int, default=3, help="timed runs of each peer")
    ap.add_argument("--peer-budget", type=float, default=30.0,
                    help="seconds per peer and image before it stops repeating")
    ap.add_argument("--cpu-max", type=int, default=0,
                    help="skip the CPU backends (skyfind and numpy) above this size")
    ap.add_argument("--threads", type=int, default=1,
                    help="CPU threads for skyfind (OMP_NUM_THREADS) and SExtractor (default 1, "
                         "as SEP, photutils and numpy run)")
    ap.add_argument("--pipelines", default="lesson,radio,sextractor",
                    help="skyfind pipelines to time (bench_pipeline -p)")
    ap.add_argument("--peers", default="numpy,cupy,sep,photutils,sextractor")
    ap.add_argument("--peer-work", choices=("harness", "radio", "both"), default="harness",
                    help="SEP's and SExtractor's settings (peers/pipeline_peers.py --work)")
    ap.add_argument("--keep", action="store_true", help="keep the images in OUT/work")
    ap.add_argument("--plot-only", metavar="JSON", help="remake table, Markdown and plot from a "
                    "results.json")
    ap.add_argument("--merge", metavar="JSON", help="with --plot-only: add the rows of tools that "
                    "this results.json did not run from another run (noted with its host)")
    return ap.parse_args()


# ---- catalogues and matching ------------------------------------------------

def read_skyfind_csv(path):
    """x, y (converted to 0-based) and flux_sum of a skyfind CSV catalogue."""
    xs, ys, fs = [], [], []
    with open(path) as f:
        rows = csv.reader(line for line in f if not line.startswith("#"))
        head = next(rows, None)
        if head is None:
            return xs, ys, fs
        ix, iy, jf = head.index("x"), head.index("y"), head.index("flux_sum")
        for r in rows:
            if r:
                xs.append(float(r[ix]) - 1.0)  # skyfind's CSV is 1-based (FITS convention)
                ys.append(float(r[iy]) - 1.0)
                fs.append(float(r[jf]))
    return xs, ys, fs


def read_peer_csv(path):
    """x, y (0-based) and flux from a peer's catalogue (header x,y,flux)."""
    import numpy as np
    t = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    if t.size == 0:
        return [], [], []
    return list(t[:, 0]), list(t[:, 1]), list(t[:, 2])


def match(ref, other, radius=1.0):
    """One-to-one matches (mutual nearest neighbours within radius pixels).
    Returns (n matched, fraction of ref, fraction of other, median flux
    ratio other/ref)."""
    import numpy as np
    rx, ry, rf = (np.asarray(v, dtype=float) for v in ref)
    ox, oy, of = (np.asarray(v, dtype=float) for v in other)
    if len(rx) == 0 or len(ox) == 0:
        return 0, 0.0 if len(rx) else None, 0.0 if len(ox) else None, None
    ok_r = np.isfinite(rx) & np.isfinite(ry)
    ok_o = np.isfinite(ox) & np.isfinite(oy)
    from scipy.spatial import cKDTree
    tr, to = cKDTree(np.column_stack([rx[ok_r], ry[ok_r]])), cKDTree(np.column_stack([ox[ok_o], oy[ok_o]]))
    ir = np.flatnonzero(ok_r)
    io = np.flatnonzero(ok_o)
    d1, j1 = to.query(np.column_stack([rx[ok_r], ry[ok_r]]), distance_upper_bound=radius)
    d2, j2 = tr.query(np.column_stack([ox[ok_o], oy[ok_o]]), distance_upper_bound=radius)
    pairs = [(ir[i], io[j]) for i, j in enumerate(j1)
             if np.isfinite(d1[i]) and j2[j] == i]
    n = len(pairs)
    ratio = None
    if n:
        r = np.array([of[b] / rf[a] for a, b in pairs if rf[a] != 0])
        ratio = float(np.median(r)) if len(r) else None
    return n, n / len(rx), n / len(ox), ratio


# ---- running the tools --------------------------------------------------------

def find_bench(build):
    cands = []
    if build:
        cands += [os.path.join(build, "tests", "bench", "bench_pipeline"),
                  os.path.join(build, "bench_pipeline")]
    cands += [os.path.join(ROOT, d, "tests", "bench", "bench_pipeline")
              for d in ("build-bench", "build")]
    for c in cands:
        if os.access(c, os.X_OK):
            return c
    sys.exit("harness: no bench_pipeline found (build it, then give --build DIR or $SKYFIND_BUILD); "
             "looked at: " + ", ".join(cands))


def tee(cmd, log, env=None):
    """Run cmd, echoing its output to stdout and to the file log."""
    print("$ " + " ".join(cmd), flush=True)
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        for line in p.stdout:
            sys.stdout.write(line)
            f.write(line)
        sys.stdout.flush()
        return p.wait()


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def run_all(a):
    out = os.path.abspath(a.out)
    work = os.path.join(out, "work")
    os.makedirs(work, exist_ok=True)
    bench = find_bench(a.build)
    env = dict(os.environ)
    env.setdefault("SKYFIND_PIPELINES", os.path.join(ROOT, "pipelines"))
    env["OMP_NUM_THREADS"] = str(a.threads)
    bjson = os.path.join(out, "skyfind.json")
    cmd = [bench, "--sizes", a.sizes, "-p", a.pipelines, "--repeat", str(a.repeat),
           "--cpu-repeat", str(a.cpu_repeat), "--workdir", work, "--raw", "--json", bjson,
           "--md", os.path.join(out, "skyfind.md")]
    if a.cpu_max:
        cmd += ["--cpu-max", str(a.cpu_max)]
    t0 = time.time()
    rc = tee(cmd + [os.path.abspath(p) for p in a.fits], os.path.join(out, "skyfind.txt"), env)
    if rc != 0:
        sys.exit(f"harness: bench_pipeline failed (exit {rc}); see {out}/skyfind.txt")
    b = json.load(open(bjson))
    peers = [p.strip().lower() for p in a.peers.split(",") if p.strip()]
    penv = dict(os.environ)
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        penv[v] = str(a.threads)
    peer_rows = []
    sims = [str(i["sim_size"]) for i in b["images"] if i["sim_size"]]
    if sims and ({"numpy", "cupy"} & set(peers)):
        lj = os.path.join(out, "lesson_peers.jsonl")
        if os.path.exists(lj):
            os.unlink(lj)
        cmd = [sys.executable, os.path.join(HERE, "peers", "lesson_peers.py"), work, *sims,
               "--repeat", str(a.peer_repeat), "--cpu-max", str(a.cpu_max or 1 << 30),
               "--json", lj, "--cat", work]
        tee(cmd, os.path.join(out, "lesson_peers.txt"), penv)
        for r in read_jsonl(lj):
            tool = r["tool"].split()[0].lower()
            if tool in peers:
                peer_rows.append(dict(r, pipeline="lesson"))
    tools = [t for t in ("sep", "photutils", "sextractor") if t in peers]
    if tools:
        pj = os.path.join(out, "pipeline_peers.jsonl")
        if os.path.exists(pj):
            os.unlink(pj)
        cmd = [sys.executable, os.path.join(HERE, "peers", "pipeline_peers.py"), bjson, "--json", pj,
               "--repeat", str(a.peer_repeat), "--budget", str(a.peer_budget),
               "--threads", str(a.threads), "--tools", ",".join(tools), "--work", a.peer_work]
        tee(cmd, os.path.join(out, "pipeline_peers.txt"), penv)
        peer_rows += [dict(r, pipeline="radio") for r in read_jsonl(pj)]
    res = build_results(a, b, peer_rows, time.time() - t0)
    if not a.keep:
        for img in b["images"]:
            for p in (img["raw"], img["fits"] if img["sim_size"] else ""):
                if p and p.startswith(work) and os.path.exists(p):
                    os.unlink(p)
    return res, out


def versions():
    v = {"python": platform.python_version()}
    for m in ("numpy", "scipy", "cupy", "sep", "photutils", "astropy", "matplotlib"):
        try:
            v[m] = __import__(m).__version__
        except Exception as e:  # not importable here: say why
            v[m] = f"not importable: {type(e).__name__}"
    exe = shutil.which("source-extractor") or shutil.which("sex")
    v["source-extractor"] = (subprocess.run([exe, "--version"], capture_output=True, text=True)
                             .stdout.strip() if exe else "not on PATH")
    return v


def build_results(a, b, peer_rows, secs):
    """Rows of the combined table, with the agreement columns filled in."""
    rows = []
    cats = {}  # (input, pipeline) -> skyfind catalogue used as the reference
    for img in b["images"]:
        for pipe, p in img["pipelines"].items():
            ref = p.get("cat_cpu") or p.get("cat_gpu")
            if ref and os.path.exists(ref):
                cats[(img["input"], pipe)] = read_skyfind_csv(ref)
    for r in b["rows"]:
        row = {"input": r["input"], "nx": r["nx"], "ny": r["ny"], "tool": "skyfind " + r["pipeline"],
               "pipeline": r["pipeline"], "stage": r["stage"], "backend": r["backend"],
               "ms": r["ms"] if r["runs"] else None, "runs": r["runs"],
               "gbps": r["gbps"] if r["runs"] and r["bytes"] > 0 else None,
               "floor_ms": r["floor_ms"] if r["runs"] and r["floor_ms"] > 0 else None,
               "nsources": r["nsources"] if r["nsources"] >= 0 else None, "note": r["note"],
               "host": platform.node()}
        if r["backend"] == "gpu" and r["stage"] == "pipeline" and r["runs"]:
            img = next(i for i in b["images"] if i["input"] == r["input"])
            p = img["pipelines"][r["pipeline"]]
            if p.get("cat_cpu") and p.get("cat_gpu") and os.path.exists(p["cat_gpu"]):
                agree(row, cats[(r["input"], r["pipeline"])], read_skyfind_csv(p["cat_gpu"]))
        rows.append(row)
    for r in peer_rows:
        row = {"input": r["input"], "nx": r["nx"], "ny": r["ny"], "tool": r["tool"],
               "pipeline": r["pipeline"], "stage": r["stage"], "backend": r["backend"],
               "ms": r["ms"], "runs": r["runs"], "gbps": None, "floor_ms": None,
               "nsources": r["nsources"], "note": "; ".join(x for x in (r.get("version", ""), r["note"],
                                                                       r.get("scope", "")) if x),
               "host": platform.node()}
        ref = cats.get((r["input"], r["pipeline"]))
        if r.get("catalog") and ref is not None and os.path.exists(r["catalog"]):
            agree(row, ref, read_peer_csv(r["catalog"]))
        rows.append(row)
    meta = {k: b[k] for k in ("repeat", "cpu_repeat", "cpu_threads", "host_copy_gbps", "gpu_run",
                              "gpu", "device_copy_gbps", "gpu_note", "cpu_max")}
    meta.update(host=platform.node(), cpu=cpu_model(), ncpu=os.cpu_count(), versions=versions(),
                date=time.strftime("%Y-%m-%d %H:%M:%S %Z"), seconds=round(secs, 1),
                sizes=a.sizes, threads=a.threads, peer_repeat=a.peer_repeat,
                images=[{k: i[k] for k in ("input", "nx", "ny", "sim_size", "beam_pix")} |
                        {"box": i["pipelines"].get("radio", {}).get("box")} for i in b["images"]])
    return {"meta": meta, "rows": rows}


def agree(row, ref, other):
    n, fr, fo, ratio = match(ref, other)
    row.update(matched=n, matched_of_skyfind=fr, matched_of_tool=fo, flux_ratio=ratio)


# ---- the table, Markdown, JSON and plot -----------------------------------------

GROUP = {"skyfind lesson": 0, "numpy lesson": 1, "CuPy lesson": 2, "skyfind radio": 3,
         "skyfind sextractor": 3.5, "SEP": 4, "SEP (radio work)": 4.5,
         "photutils": 5, "SExtractor": 6, "SExtractor (radio work)": 6.5}
COLS = ["size", "tool", "stage", "backend", "median ms", "runs", "GB/s", "floor ms", "sources",
        "matched sf/tool", "flux ratio", "note"]


def cells(r):
    pct = lambda v: "-" if v is None else f"{100 * v:.0f}%"
    m = "-"
    if r.get("matched") is not None:
        m = f"{pct(r['matched_of_skyfind'])}/{pct(r['matched_of_tool'])}"
    num = lambda v, f: "-" if v is None else format(v, f)
    return [f"{r['nx']}x{r['ny']}", r["tool"], r["stage"], r["backend"],
            num(r["ms"], ".3f" if (r["ms"] or 0) < 100 else ".1f"), str(r["runs"]),
            num(r["gbps"], ".2f" if (r["gbps"] or 0) < 10 else ".1f"), num(r["floor_ms"], ".3f"),
            num(r["nsources"], "d"), m, num(r.get("flux_ratio"), ".4f"), r["note"]]


def ordered(res):
    order = {i["input"]: k for k, i in enumerate(res["meta"]["images"])}
    return sorted(res["rows"], key=lambda r: (order.get(r["input"], 99), r["nx"] * r["ny"],
                                              GROUP.get(r["tool"], 9), r["backend"]))


def header_lines(res):
    m = res["meta"]
    v = m["versions"]
    lines = [f"host {m['host']}: {m['cpu']}, {m['ncpu']} CPUs; {m['date']}; {m['seconds']} s in all",
             f"skyfind CPU rows: {m['cpu_threads']} OpenMP thread(s), floor from the host copy "
             f"bandwidth {m['host_copy_gbps']:.1f} GB/s (memcpy, read+write); median of "
             f"{m['cpu_repeat']} runs after a warm-up"]
    if m["gpu_run"]:
        lines.append(f"skyfind GPU rows: {m['gpu']}, CUDA-event device time per stage, floor from the "
                     f"device-to-device copy bandwidth {m['device_copy_gbps']:.1f} GB/s measured in "
                     f"this run; median of {m['repeat']} runs after a warm-up")
    else:
        lines.append(f"{m['gpu_note']} (and the CuPy peer with them)")
    if m.get("cpu_max"):
        lines.append(f"CPU backends (skyfind, numpy) skipped above {m['cpu_max']} px (--cpu-max)")
    lines.append("peers: " + ", ".join(f"{k} {v[k]}" for k in ("numpy", "scipy", "cupy", "sep",
                                                               "photutils", "source-extractor")))
    lines.append("matched sf/tool: sources matched one-to-one within 1 pixel, as a fraction of "
                 "skyfind's catalogue (same pipeline, CPU) and of the tool's; flux ratio: median "
                 "tool/skyfind over the matches (skyfind flux_sum: the island's pixel sum, less "
                 "the local background where the pipeline's measure subtracts it; SEP, photutils, "
                 "SExtractor: background-subtracted isophotal sums; the lesson code: raw pixel sums)")
    lines.append("times: skyfind 'pipeline' and the numpy, CuPy, SEP and photutils rows are in "
                 "memory (image array in, catalogue out); skyfind 'end-to-end' and SExtractor are "
                 "FITS file to catalogue file")
    for x in m.get("merged", []):
        lines.append(x)
    return lines


def text_table(res):
    rows = [COLS] + [cells(r) for r in ordered(res)]
    w = [max(len(r[i]) for r in rows) for i in range(len(COLS) - 1)]
    out = ["# " + s for s in header_lines(res)]
    for r in rows:
        out.append("  ".join(c.ljust(w[i]) if i in (1, 2, 3) else c.rjust(w[i])
                             for i, c in enumerate(r[:-1])) + "  " + r[-1])
    return "\n".join(out)


def summary_table(res):
    """The rows to set side by side: skyfind's whole-pipeline times and the
    peers', with the note only where a row was not run."""
    keep = [r for r in ordered(res) if not r["tool"].startswith("skyfind")
            or r["stage"] in ("pipeline", "end-to-end", "all")]
    pick = [0, 1, 2, 3, 4, 5, 8, 9, 10]  # size .. runs, sources, matched, flux ratio
    rows = [[COLS[i] for i in pick]]
    notes = [""]
    for r in keep:
        c = cells(r)
        rows.append([c[i] for i in pick])
        other = r.get("host") and r["host"] != res["meta"]["host"]
        notes.append(c[11].split(";")[0][:60] if r["ms"] is None else
                     f"run on {r['host']}" if other else "")
    w = [max(len(r[i]) for r in rows) for i in range(len(pick))]
    out = ["# summary: whole-pipeline times (skyfind 'pipeline' in memory, 'end-to-end' FITS to "
           "catalogue) beside the peers; every stage in results.md"]
    for r, n in zip(rows, notes):
        out.append(("  ".join(c.ljust(w[i]) if i in (1, 2, 3) else c.rjust(w[i])
                              for i, c in enumerate(r)) + "  " + n).rstrip())
    return "\n".join(out)


def markdown(res):
    out = ["# skyfind benchmark harness", ""] + [f"- {s}" for s in header_lines(res)] + [""]
    out.append("| " + " | ".join(COLS) + " |")
    out.append("|" + "|".join("--:" if c in ("median ms", "runs", "GB/s", "floor ms", "sources",
                                               "flux ratio") else "---" for c in COLS) + "|")
    for r in ordered(res):
        out.append("| " + " | ".join(c.replace("|", "/") for c in cells(r)) + " |")
    return "\n".join(out) + "\n"


def series(res):
    """Time against size per tool and backend: skyfind's in-memory
    'pipeline' rows beside the in-memory peers, and its 'end-to-end' rows
    beside SExtractor."""
    s = {}
    for r in res["rows"]:
        if r["ms"] is None or r["stage"] not in ("pipeline", "end-to-end"):
            continue
        if r["tool"].startswith("skyfind"):
            label = f"{r['tool']} {r['backend']}" + (" (FITS to catalogue)" if r["stage"] == "end-to-end" else "")
        else:
            label = f"{r['tool']} {r['backend']}"
            if r.get("host") and r["host"] != res["meta"]["host"]:
                label += f" (on {r['host']})"
        s.setdefault(label, []).append((math.sqrt(r["nx"] * r["ny"]), r["ms"], r["stage"]))
    return {k: sorted(v) for k, v in s.items()}


def plot(res, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:
        return f"no plot: matplotlib not importable ({type(e).__name__}); make it later with " \
               f"harness.py --plot-only results.json"
    fig, ax = plt.subplots(figsize=(9, 6))
    colours = plt.get_cmap("tab20").colors
    sides = set()
    for k, (label, pts) in enumerate(sorted(series(res).items())):
        x = [p[0] for p in pts]
        y = [p[1] for p in pts]
        sides.update(x)
        dashed = pts[0][2] == "end-to-end"
        ax.plot(x, y, "--" if dashed else "-", marker="s" if "skyfind" in label else "o",
                color=colours[k % len(colours)], label=label, lw=2 if "skyfind" in label else 1.2)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sorted(sides))
    ax.set_xticklabels([f"{v:.0f}" for v in sorted(sides)])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel("image side (pixels)")
    ax.set_ylabel("median time (ms)")
    m = res["meta"]
    ax.set_title(f"skyfind and peers: {m['cpu'][:40]}" + (f" + {m['gpu']}" if m["gpu_run"] else ", no GPU"),
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return f"plot: {path}"


def merge(res, other):
    """Rows of tools this run did not run (no time), taken from another run."""
    have = {(r["input"], r["tool"], r["backend"], r["stage"]) for r in res["rows"] if r["ms"] is not None}
    host = other["meta"]["host"]
    n = 0
    for r in other["rows"]:
        key = (r["input"], r["tool"], r["backend"], r["stage"])
        if r["ms"] is None or key in have or r["tool"].startswith("skyfind"):
            continue
        res["rows"] = [x for x in res["rows"] if (x["input"], x["tool"], x["backend"], x["stage"]) != key]
        res["rows"].append(dict(r, note=f"run on {host} ({other['meta']['cpu']}); " + r["note"]))
        n += 1
    res["meta"].setdefault("merged", []).append(
        f"{n} rows of tools not run here are from {host} ({other['meta']['cpu']}), "
        f"{other['meta']['date']}: their times are that machine's")


def write_outputs(res, out):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(markdown(res))
    msg = plot(res, os.path.join(out, "results.png"))
    print()
    print(text_table(res))
    print()
    print(summary_table(res))
    print(f"\nharness: wrote {out}/results.md, {out}/results.json; {msg}")


def main():
    a = parse_args()
    if a.plot_only:
        res = json.load(open(a.plot_only))
        if a.merge:
            merge(res, json.load(open(a.merge)))
        out = a.out if a.out != "bench-results" else os.path.dirname(os.path.abspath(a.plot_only))
        write_outputs(res, out)
        return
    res, out = run_all(a)
    write_outputs(res, out)


if __name__ == "__main__":
    main()
