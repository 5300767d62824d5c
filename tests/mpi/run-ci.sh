#!/usr/bin/env bash
# CI for the MPI build: configures build-mpi (-DSKYFIND_MPI=ON, CPU only),
# builds the tool and runs the tests labelled mpi (tests/cli/test_batch_mpi.sh:
# mpirun -n 3 against one process). Needs libopenmpi-dev and openmpi-bin
# (tests/install-deps.sh installs them). Usage: tests/mpi/run-ci.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-build-mpi}
cmake -S . -B "$dir" -DSKYFIND_MPI=ON -DSKYFIND_WITH_CUDA=OFF >/dev/null
cmake --build "$dir" -j"$(nproc)" --target skyfind_cli
ctest --test-dir "$dir" -L mpi --output-on-failure --no-tests=error
