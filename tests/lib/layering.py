#!/usr/bin/env python3
"""The layers of README.md's "Code map", checked on the sources' #include lines.

Lowest first: public headers (include/skyfind) and the twins' shared
arithmetic (src/calc); the twins (cpu/, gpu/); the core (src/core); I/O and
the simulator (src/io, src/sim); the entry points over them, sf_find and the
batch engine (src/engine); the CLI (src/cli). A file may include the public headers, headers of its own folder,
and private headers of a layer below its own; src/cli includes nothing of
src/ but its own folder (the CLI is a client of the public API alone, as a
program linking libskyfind.so is); the public headers include only each
other and the C library's. "../" in an include is refused (it would reach
past the include paths that CMakeLists.txt gives each layer). The build
enforces the same rules (each layer an object library with only its own
include paths); this test says which line breaks them, and also catches a
"../" include, which the compiler would accept.

  layering.py SOURCE_DIR      exit 0: clean; 1: the broken rules, one a line
  layering.py --selftest      the checker on a made-up tree that breaks each rule
"""
import os
import re
import subprocess
import sys
import tempfile

LAYER = {"include/skyfind": 0, "src/calc": 0, "cpu": 1, "gpu": 1, "src/core": 2,
         "src/io": 3, "src/sim": 3, "src/engine": 4, "src/cli": 5}

if len(sys.argv) > 1 and sys.argv[1] == "--selftest":
    # one file a broken rule, and one clean tree: the checker must name each
    bad = {"src/cli/a.c": '#include "state.h"', "src/core/b.c": '#include "../io/x.h"',
           "src/core/c.c": '#include "fits_internal.h"', "include/skyfind/d.h": '#include "state.h"',
           "cpu/e.c": '#include "skyfind/nosuch.h"'}
    base = {"src/core/state.h": "", "src/io/fits_internal.h": "", "src/io/x.h": "",
            "include/skyfind/ok.h": "", "src/calc/sum.h": "", "cpu/f.c": '#include "sum.h"\n#include "skyfind/ok.h"',
            "src/engine/g.c": '#include "fits_internal.h"', "src/cli/h.c": '#include "skyfind/ok.h"'}
    with tempfile.TemporaryDirectory() as t:
        for name, text in base.items():
            os.makedirs(os.path.join(t, os.path.dirname(name)), exist_ok=True)
            open(os.path.join(t, name), "w").write(text + "\n")
        r = subprocess.run([sys.executable, __file__, t], capture_output=True, text=True)
        ok = r.returncode == 0 and "0 broken rules" in r.stdout
        print("selftest clean tree: %s" % ("ok" if ok else "FAILED\n" + r.stdout + r.stderr))
        for name, text in bad.items():
            open(os.path.join(t, name), "w").write(text + "\n")
            r = subprocess.run([sys.executable, __file__, t], capture_output=True, text=True)
            hit = r.returncode == 1 and name.split("/")[-1] + ":1:" in r.stdout and "1 broken rules" in r.stdout
            print("selftest %-22s %s: %s" % (name, text, "caught" if hit else "MISSED\n" + r.stdout + r.stderr))
            ok = ok and hit
            os.remove(os.path.join(t, name))
    sys.exit(0 if ok else 1)

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
SOURCES = (".c", ".h", ".cu", ".cuh")
INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"')

def folder_of(path):
    rel = os.path.relpath(path, ROOT)
    return os.path.dirname(rel)

headers = {}  # base name -> folders that hold a header of that name
for folder in LAYER:
    d = os.path.join(ROOT, folder)
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if f.endswith((".h", ".cuh")):
            headers.setdefault(f, []).append(folder)

problems, nfiles, nincl = [], 0, 0
for folder, layer in sorted(LAYER.items()):
    d = os.path.join(ROOT, folder)
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if not f.endswith(SOURCES):
            continue
        nfiles += 1
        path = os.path.join(d, f)
        for no, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
            m = INC.match(line)
            if not m:
                continue
            nincl += 1
            inc, where = m.group(1), "%s/%s:%d" % (folder, f, no)
            if ".." in inc.split("/"):
                problems.append('%s: #include "%s" reaches out with ../' % (where, inc))
                continue
            if inc.startswith("skyfind/"):
                if not os.path.exists(os.path.join(ROOT, "include", inc)):
                    problems.append('%s: #include "%s": no such public header' % (where, inc))
                continue
            if folder == "include/skyfind":
                problems.append('%s: a public header includes "%s", which is not public' % (where, inc))
                continue
            if os.path.exists(os.path.join(d, inc)):
                continue  # its own folder
            if folder == "src/cli":
                problems.append('%s: the CLI includes "%s": only public headers and src/cli\'s own' % (where, inc))
                continue
            homes = headers.get(os.path.basename(inc), [])
            if not homes:
                problems.append('%s: #include "%s" is in no folder of the layers' % (where, inc))
                continue
            if not any(LAYER[h] < layer or h == "src/calc" for h in homes):
                problems.append('%s: #include "%s" from %s, a layer not below %s' % (where, inc, " or ".join(homes), folder))

for p in problems:
    print(p)
print("layering: %d files, %d quoted includes, %d broken rules" % (nfiles, nincl, len(problems)))
sys.exit(1 if problems else 0)
