#!/usr/bin/env python3
"""Where a kernel's instructions go, by source line.

Joins Nsight Compute's per-SASS-instruction counts (`ncu -i REP --page source
--csv --print-source sass`, in address order) with nvdisasm's line
information for the same function (`nvdisasm --print-line-info` of the cubin
that `cuobjdump -xelf all` extracts from the binary), and prints the source
lines that execute the most warp instructions, with their share of the
kernel's stall samples. NAME is the kernel's name as ncu prints it (a
template's arguments dropped); of the functions whose mangled name holds it,
the one with as many instructions as the report is taken.
  sass_lines.py ALL.SASS SOURCE.CSV NAME [TOP]
"""
import collections
import csv
import re
import sys


def main():
    sass, csvf, name = sys.argv[1:4]
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 40
    lines = open(sass).read().splitlines()
    rows = list(csv.reader(open(csvf)))
    hi = next(i for i, r in enumerate(rows) if "Instructions Executed" in r)
    h = rows[hi]
    data = rows[hi + 1:]
    heads = [i for i, l in enumerate(lines) if l.startswith(".text.") and l.endswith(":")]
    hset = set(heads)
    seq, fname = [], None
    for k, st in enumerate(heads):
        if name not in lines[st]:
            continue
        en = next((i for i in range(st + 1, len(lines)) if lines[i].startswith(".section") or i in hset),
                  len(lines))
        cur, s1 = None, []
        for l in lines[st:en]:
            m = re.search(r'File "([^"]*)", line (\d+)', l)
            if "//##" in l and m:
                cur = m.group(1).split("/")[-1] + ":" + m.group(2)
                continue
            m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", l)
            if m:
                s1.append((cur, m.group(2).strip()))
        if len(s1) == len(data):
            seq, fname = s1, lines[st][6:-1]
            break
    if not seq:
        sys.exit(f"no function holding {name} has {len(data)} instructions")
    name = fname
    ie, ws = h.index("Instructions Executed"), h.index("Warp Stall Sampling (All Samples)")
    agg = collections.defaultdict(lambda: [0.0, 0.0])
    tot = [0.0, 0.0]
    for (ln, _), r in zip(seq, data):
        a, b = float(r[ie] or 0), float(r[ws] or 0)
        agg[ln][0] += a
        agg[ln][1] += b
        tot[0] += a
        tot[1] += b
    print(f"{name}: {tot[0]:.0f} warp instructions executed, {tot[1]:.0f} stall samples")
    for ln, (a, b) in sorted(agg.items(), key=lambda t: -t[1][0])[:top]:
        print(f"{100 * a / max(tot[0], 1):5.1f}% inst {100 * b / max(tot[1], 1):5.1f}% stall  {ln}")


if __name__ == "__main__":
    main()
