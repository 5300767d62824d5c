#!/usr/bin/env python3
"""Idle time of the GPU in one run of a pipeline, from sftrace's CSV
(tests/gpu/trace/sftrace.c): the timeline is cut at the large host-to-device
copies (one a pipeline run: the image's upload), and for one window (default:
the last) it prints the GPU's busy and idle time, the kernels'
totals, and the idle gaps with the activities on either side and the host
calls that ran during them. Times in microseconds.
With --detail N, the N longest gaps are shown call by call: every runtime
call in them (its start from the gap's start, and its length), and the
host's time outside any call (the library's own code between calls).
    timeline.py TRACE.csv [--window K] [--min-gap US] [--split-mb MB] [--detail N]"""
import argparse, collections, csv, sys

ap = argparse.ArgumentParser()
ap.add_argument("trace")
ap.add_argument("--window", type=int, default=-1, help="which window (default -1: the last)")
ap.add_argument("--min-gap", type=float, default=4.0, help="list idle gaps from this length (us)")
ap.add_argument("--split-mb", type=float, default=0, help="upload size that starts a window (default: half the largest)")
ap.add_argument("--top", type=int, default=30)
ap.add_argument("--detail", type=int, default=0, help="the N longest gaps call by call")
a = ap.parse_args()

rows = []
with open(a.trace) as f:
    for r in csv.DictReader(f):
        rows.append((r["kind"], int(r["start_ns"]), int(r["end_ns"]), int(r["stream"]), int(r["bytes"]), r["name"]))
gpu = sorted([r for r in rows if r[0] in "KCS"], key=lambda r: r[1])
api = sorted([r for r in rows if r[0] in "AY"], key=lambda r: r[1])
h2d = [r for r in gpu if r[0] == "C" and r[5].startswith("HtoD")]
if not h2d:
    sys.exit("timeline: no host-to-device copies in the trace")
split = a.split_mb * 1e6 if a.split_mb > 0 else max(r[4] for r in h2d) / 2
starts = [r[1] for r in h2d if r[4] >= split]
bounds = starts + [max(r[2] for r in gpu) + 1]
nw = len(bounds) - 1
w = a.window if a.window >= 0 else nw + a.window
if not 0 <= w < nw:
    sys.exit(f"timeline: {nw} windows, no window {a.window}")
t0, t1 = bounds[w], bounds[w + 1]
act = [r for r in gpu if t0 <= r[1] < t1]
last_end = max(r[2] for r in act)
t1 = min(t1, last_end)

def short(n, k=48):
    return n if len(n) <= k else n[:k - 3] + "..."

def name(r):
    if r[0] == "C":
        return f"memcpy {r[5]} {r[4]}B"
    if r[0] == "S":
        return "memset"
    return short(r[5].split("(")[0], 40)

# the union of the GPU's activity, and the gaps in it
busy, gaps = 0, []
cur_s, cur_e, cur_last = act[0][1], act[0][2], act[0]
for r in act[1:]:
    if r[1] > cur_e:
        busy += cur_e - cur_s
        gaps.append((r[1] - cur_e, cur_e, r[1], cur_last, r))
        cur_s, cur_e, cur_last = r[1], r[2], r
    elif r[2] > cur_e:
        cur_e, cur_last = r[2], r
busy += cur_e - cur_s
span = t1 - t0
print(f"window {w} of {nw}: {span/1e3:.1f} us from the upload's start to the last activity's end; "
      f"GPU busy {busy/1e3:.1f} us, idle {(span-busy)/1e3:.1f} us in {len(gaps)} gaps")

tot = collections.defaultdict(lambda: [0, 0])
for r in act:
    key = ("memcpy " + r[5] if r[0] == "C" else "memset" if r[0] == "S" else r[5].split("(")[0])
    tot[key][0] += r[2] - r[1]
    tot[key][1] += 1
print(f"\nactivity totals (us, count) in the window:")
for k, (d, n) in sorted(tot.items(), key=lambda kv: -kv[1][0])[:a.top]:
    print(f"  {d/1e3:9.1f} {n:5d}  {short(k, 70)}")

# segments between the host's cudaEventSynchronize calls (skyfind's stage
# timer waits on its stop event after every stage): each one's wall, the
# GPU's busy time in it and its largest kernels
ends = [c[2] for c in api if c[0] == "Y" and c[5] == "cudaEventSynchronize" and t0 < c[2] <= t1 + 1]
if ends:
    print("\nsegments ending at a cudaEventSynchronize (stage by stage): wall, GPU busy, largest activities")
    prev = t0
    for e in ends + [t1]:
        seg = [r for r in act if prev <= r[1] < e]
        if seg:
            b, cs, ce = 0, seg[0][1], seg[0][2]
            for r in seg[1:]:
                if r[1] > ce:
                    b += ce - cs; cs, ce = r[1], r[2]
                else:
                    ce = max(ce, r[2])
            b += min(ce, e) - cs
            k = collections.defaultdict(int)
            for r in seg:
                k[name(r)] += r[2] - r[1]
            big = ", ".join(f"{n} {d/1e3:.0f}" for n, d in sorted(k.items(), key=lambda kv: -kv[1])[:4])
            print(f"  {(e-prev)/1e3:8.1f} {b/1e3:8.1f}  {len(seg):4d} acts  {big}")
        prev = e

print(f"\nidle gaps of {a.min_gap} us or more, in time order (us from the window's start):")
pairs = collections.defaultdict(lambda: [0, 0])
for d, gs, ge, before, after in gaps:
    pairs[(name(before), name(after))][0] += d
    pairs[(name(before), name(after))][1] += 1
    if d / 1e3 < a.min_gap:
        continue
    calls = [c for c in api if c[1] < ge and c[2] > gs]
    long = sorted(calls, key=lambda c: -(min(c[2], ge) - max(c[1], gs)))[:3]
    what = ", ".join(f"{c[5]} {(min(c[2], ge) - max(c[1], gs))/1e3:.0f}" for c in long)
    print(f"  {(gs-t0)/1e3:8.1f} {d/1e3:7.1f}  {name(before)} -> {name(after)}   [{what}]")
print(f"\nidle time by neighbours (us, count):")
for (b, af), (d, n) in sorted(pairs.items(), key=lambda kv: -kv[1][0])[:a.top]:
    print(f"  {d/1e3:8.1f} {n:4d}  {b} -> {af}")

if a.detail > 0:
    print(f"\nthe {a.detail} longest gaps call by call (us from the gap's start, length; "
          f"'host' is time in no runtime call):")
    for d, gs, ge, before, after in sorted(gaps, key=lambda g: -g[0])[:a.detail]:
        calls = sorted([c for c in api if c[0] == "A" and c[1] < ge and c[2] > gs], key=lambda c: c[1])
        # the top-level calls only (a call inside another's span is its part)
        top, end = [], -1
        for c in calls:
            if c[1] >= end:
                top.append(c)
                end = c[2]
        inside = sum(min(c[2], ge) - max(c[1], gs) for c in top)
        print(f"  gap at {(gs-t0)/1e3:.1f}: {d/1e3:.1f} us, {name(before)} -> {name(after)}; "
              f"calls {inside/1e3:.1f} us, host {(d-inside)/1e3:.1f} us")
        prev = gs
        for c in top:
            if c[1] - prev > 1000:
                print(f"      {(prev-gs)/1e3:7.1f} {(c[1]-prev)/1e3:6.1f}  (host)")
            print(f"      {(c[1]-gs)/1e3:7.1f} {(c[2]-c[1])/1e3:6.1f}  {c[5]}")
            prev = max(prev, c[2])
        if ge - prev > 1000:
            print(f"      {(prev-gs)/1e3:7.1f} {(ge-prev)/1e3:6.1f}  (host)")
