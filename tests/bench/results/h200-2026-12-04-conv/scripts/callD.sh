#!/bin/bash
# Call D, 2026-12-04 (stop 57): the landed band kernel (bench2_final: e3d2337's
# against 3300edc's cpu/convolve_fma.c) on small and large kernels, 3 passes.
O=${OUT:-/tmp/out}
for pass in 1 2 3; do
for simd in default avx2; do
  for k in "3 3" "5 5" "7 7" "9 9" "15 15" "21 21" "31 31"; do
    if [ $simd = default ]; then .pb/bench2_final 2048 $k 9; else SKYFIND_SIMD=avx2 .pb/bench2_final 2048 $k 9; fi | sed "s/^/pass $pass $simd /"
  done
done
done | tee $O/callD.log
