#!/bin/sh
# Checks for the Debian 12 packages skyfind needs to build and test; as root
# it installs the missing ones (apt-get), otherwise it names them and fails.
# The CUDA toolkit (nvcc, cuFFT) is optional: without it the CPU-only tool is built.
# Open MPI is for the optional MPI build and its test (tests/mpi/run-ci.sh);
# source-extractor (SExtractor 2.25) is the reference of the deblending test.
# zlib1g-dev and libbz2-dev let the tool link CFITSIO's static library
# (CMakeLists.txt, SKYFIND_STATIC_CFITSIO: no libcurl loaded at start).
pkgs="cmake make gcc g++ pkg-config libcfitsio-dev zlib1g-dev libbz2-dev wcslib-dev libfftw3-dev libpng-dev check python3 python3-numpy python3-scipy python3-astropy python3-sep source-extractor libopenmpi-dev openmpi-bin"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
    echo "skyfind: installing Debian packages:$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing >/dev/null || {
        echo "skyfind: apt-get install failed for:$missing" >&2; exit 1; }
    exit 0
fi
echo "skyfind: missing Debian packages:$missing" >&2
echo "Install them with: sudo apt-get install$missing" >&2
exit 1
