#!/bin/bash
# Call F, 2026-12-04 (stop 57): the band kernel without compile-time widths
# (bu32, bu4, bu1: the tap loop unrolled by 32, 4, 1 on a runtime width)
# against the landed one with a copy per width up to 27 (bspec_ALL); each
# binary also runs e3d2337's kernel ("old") as the yardstick. 2 passes.
O=${OUT:-/tmp/out}
for pass in 1 2; do
for simd in default avx2; do
  for k in "3 3" "7 7" "15 15" "21 21" "31 31"; do
    for v in bspec_ALL bu32 bu4 bu1; do
      if [ $simd = default ]; then .pb/$v 2048 $k 7; else SKYFIND_SIMD=avx2 .pb/$v 2048 $k 7; fi | sed "s/^/pass $pass $simd $v /"
    done
  done
done
done | tee $O/callF.log
