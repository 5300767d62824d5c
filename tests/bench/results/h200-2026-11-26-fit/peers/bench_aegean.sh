#!/bin/bash
cd /tmp/peers; export PATH=/tmp/peers/venv_aeg/bin:$PATH
summ() { # log -> wall user sys
  awk -F': ' '/User time/{u=$2}/System time/{s=$2}/Elapsed/{e=$2}END{n=split(e,a,":"); w=(n==3)?a[1]*3600+a[2]*60+a[3]:a[1]*60+a[2]; printf "wall=%.2f user=%.2f sys=%.2f", w,u,s}' $1; }
fitt() { sed 's/\x1b\[[0-9;]*m//g' $1 | awk '/Begin fitting/{split($3,a,":"); b=a[1]*3600+a[2]*60+a[3]} /Fit [0-9]+ sources/{split($3,a,":"); e=a[1]*3600+a[2]*60+a[3]; n=$8} END{printf "fit_s=%.2f ncomp=%s", e-b, n}'; }
for n in 2048 4096 8192; do
 for r in 1 2 3; do
  l=logs/rep_bane${n}_r$r.log; /usr/bin/time -v BANE --cores 2 sim$n.fits > $l 2>&1
  echo "BANE $n cores=2 r$r $(summ $l) load=$(cut -d' ' -f1 /proc/loadavg)"
  for c in 2 1; do
   l=logs/rep_aegean${n}_c${c}_r$r.log
   /usr/bin/time -v aegean --cores $c --background sim${n}_bkg.fits --noise sim${n}_rms.fits --table aeg${n}_c${c}.fits sim$n.fits > $l 2>&1
   echo "aegean $n cores=$c r$r $(summ $l) $(fitt $l) load=$(cut -d' ' -f1 /proc/loadavg)"
  done
 done
done
