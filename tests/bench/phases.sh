#!/bin/bash
# phases.sh BIN OUT: where a CPU run's wall time goes at 1 and 16 threads
B=$1; O=$2; mkdir -p $O/ph
for n in 4096 8192; do $B simulate -q -n $n --seed 11 -o $O/ph/sim$n.fits; cat $O/ph/sim$n.fits > /dev/null; done
TIMEFORMAT="%R %U %S"
for spec in "lesson 4096" "sextractor 4096" "radio 8192" "lesson 8192"; do set -- $spec
  for t in 1 16; do for r in 1 2 3; do
    { time $B run -q -b cpu -p $1 --threads $t --json -o $O/ph/o $O/ph/sim$2.fits > $O/ph/j.json ; } 2> $O/ph/t.txt
    echo "$1 $2 t=$t wall/user/sys=$(cat $O/ph/t.txt) $(python3 -c "
import json
for l in open('$O/ph/j.json'):
    d=json.loads(l)
    if 'phases' in d: print(' '.join('%s=%.1f'%(k[:-3],v) for k,v in d['phases'].items() if k.endswith('_ms')))
")"
  done; done
done
rm -rf $O/ph
