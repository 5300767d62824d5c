#!/usr/bin/env bash
# Call B, 2026-12-02, H200 host: gpu/background_bane.cu split in two (the
# nodes; background_bane_grid.cu: the grid's pack, maps and summary), no
# change of kernels: tests/gpu/run-all.sh bane (the background and
# threshold suites against the CPU twins, compute-sanitizer memcheck,
# racecheck, initcheck and synccheck on background_bane and threshold and
# on whole radio runs, skyfind compare on the real images and skies, every
# stage of radio.pipe timed). Carry .gpu-bundle.tar.xz.
set -u
O=${OUT:-/tmp/out}
tar xJf .gpu-bundle.tar.xz
. .gpu-bundle/env.sh
export SKYFIND_TEST_DATA=$PWD/.gpu-bundle/extra/data CK_FORK=no
SUITES="background_bane background background_mesh threshold" SAN_SUITES="background_bane threshold" \
    SAN_JOBS=8 tests/gpu/run-all.sh /tmp/ra bane 2>&1 | tee $O/callB.log
echo "run-all rc=${PIPESTATUS[0]}" | tee -a $O/callB.log
