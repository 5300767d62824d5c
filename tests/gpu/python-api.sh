#!/usr/bin/env bash
# The Python package on the GPU machine (tests/gpu/run-all.sh python):
# skyfind.find on CuPy arrays in place (tests/gpu/python_api_gpu.py) on
# simulated 2048^2 and 8192^2 skies. Needs numpy and CuPy; the library is
# the bundle's libskyfind.so.0 (carried for tests/lib's consumer).
set -u
B=${SKYFIND_BUNDLE:?source .gpu-bundle/env.sh first}
export SKYFIND_LIBRARY=${SKYFIND_LIBRARY:-$(find "$B" -name 'libskyfind.so.0' | head -1)}
export PYTHONPATH=$PWD/src/python${PYTHONPATH:+:$PYTHONPATH} SKYFIND_PIPELINES=$PWD/pipelines
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for n in 2048 8192; do "$B/bin/skyfind" simulate -q -n $n --seed $n -o "$T/sim$n.fits"; done
python3 tests/gpu/python_api_gpu.py "$B/bin/skyfind" "$T/sim2048.fits" "$T/sim8192.fits"
