#!/usr/bin/env bash
# Call B: the deblend stage's phases (SKYFIND_DEBLEND_PROFILE) and each
# db_split / bkg_clip / bane_nodes launch's own time (ncu) at 4096^2 and 8192^2.
set -u
L=$OUT/callB.log
B=$SKYFIND_BUNDLE
mkdir -p /tmp/w
for n in 4096 8192; do
  [ -f /tmp/w/sim$n.fits ] || $B/bin/skyfind simulate -q -n $n --seed $n -o /tmp/w/sim$n.fits
  echo "== $n deblend profile" | tee -a $L
  for r in 1 2 3; do SKYFIND_DEBLEND_PROFILE=1 $B/bin/skyfind run -v -b gpu -p radio -o /tmp/dbp /tmp/w/sim$n.fits 2>&1 | grep -E "deblend|total " ; done | tee -a $L
  echo "== $n ncu per launch" | tee -a $L
  ncu --kernel-name "regex:db_split|db_prepare|bkg_clip|bane_nodes|fit_lm|bke_" --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size \
     $B/bin/skyfind run -q -b gpu -p radio -o /tmp/ncu /tmp/w/sim$n.fits 2>&1 | grep -E "^  [a-z_]|gpu__time|grid_size|block_size" | paste - - - - | sed 's/  */ /g' | tee -a $L
done
echo "=== done" | tee -a $L
