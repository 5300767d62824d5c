#!/usr/bin/env python3
"""Fuzzing regression inputs kept as edits of the data folder's files.

The crash inputs the fuzzers found are mutations of the small real files of
$SKYFIND_TEST_DATA (../shared/data); real data stays there, so the
repository keeps only what the mutation changed: NAME.edits names the source
file and lists byte ranges to copy from it and the bytes (hex) that replace
the rest.

  remake.py make DATA SOURCE CRASH > NAME.edits   the edits of a new input
                                              (SOURCE relative to DATA)
  remake.py apply DATA EDITS... OUTDIR        remake each input as OUTDIR/NAME.fits
"""
import difflib
import hashlib
import os
import sys


def make(data, source, crash):
    a = open(os.path.join(data, source), "rb").read()
    b = open(crash, "rb").read()
    print(f"source {source}")
    print(f"sha256 {hashlib.sha256(b).hexdigest()}")
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            print(f"copy {i1} {i2 - i1}")
        elif j2 > j1:
            for k in range(j1, j2, 32):
                print(f"bytes {b[k:min(k + 32, j2)].hex()}")


def apply(data, edits, outdir):
    src = want = None
    parts = []
    for line in open(edits):
        key, _, val = line.strip().partition(" ")
        if key == "source":
            src = open(os.path.join(data, val), "rb").read()
        elif key == "sha256":
            want = val
        elif key == "copy":
            off, n = (int(v) for v in val.split())
            parts.append(src[off:off + n])
        elif key == "bytes":
            parts.append(bytes.fromhex(val))
        elif key:
            sys.exit(f"remake.py: {edits}: unknown line {line!r}")
    out = b"".join(parts)
    if hashlib.sha256(out).hexdigest() != want:
        sys.exit(f"remake.py: {edits}: the remade input differs from the crash input "
                 f"(is {os.path.join(data, '')} the data folder it was made from?)")
    name = os.path.splitext(os.path.basename(edits))[0] + ".fits"
    with open(os.path.join(outdir, name), "wb") as f:
        f.write(out)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) >= 5 and sys.argv[1] == "apply":
        os.makedirs(sys.argv[-1], exist_ok=True)
        for e in sys.argv[3:-1]:
            apply(sys.argv[2], e, sys.argv[-1])
    else:
        sys.exit(__doc__)
