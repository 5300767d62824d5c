#!/bin/bash
# Call B, 2026-12-04 (stop 57), on the H200 host: the AVX-512 band kernel's
# variants, each in one binary with the previous main's (proto/bench2.c,
# carried as .pb/): bench2_NB_R is cpu/convolve_fma.c built with NB512=NB
# blocks of 16 columns and groups of up to R rows (-DNB512=NB -DRMAX512=R
# -DSF_CONV2D_VEC=max(32, 16 NB) in the prototype); 4_4 is what landed.
O=${OUT:-/tmp/out}
for k in "5 5" "7 7" "9 9" "11 11" "15 15" "15 9" "21 21" "27 27"; do
  for v in 2_4 4_4 2_8; do .pb/bench2_$v 2048 $k 9 | sed "s/^/nb_r $v /"; done
done | tee $O/callB.log
.pb/bench2_2_4 4096 15 15 5 | sed "s/^/nb_r 2_4 /" | tee -a $O/callB.log
.pb/bench2_4_4 4096 15 15 5 | sed "s/^/nb_r 4_4 /" | tee -a $O/callB.log
.pb/bench2_2_8 4096 15 15 5 | sed "s/^/nb_r 2_8 /" | tee -a $O/callB.log
