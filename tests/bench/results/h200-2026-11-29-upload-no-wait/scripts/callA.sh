#!/usr/bin/env bash
# Call A (diagnosis): Nsight Compute sections and per-line counts of the
# 15x15 direct convolution in radio.pipe at 8192^2, its SASS; thread scaling
# of the CPU backend on this host's cores at 4096^2 and 8192^2.
set -u
L=$OUT/callA.log
B=$SKYFIND_BUNDLE; SF=$B/bin/skyfind
W=/tmp/w; mkdir -p $W
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; echo "code: $(cat $B/extra/HEAD)"; nproc; } | tee $L
$SF simulate -q -n 8192 --seed 8192 -o $W/sim8192.fits
echo "=== ncu sections direct2d_rb" | tee -a $L
timeout 200 ncu --kernel-name-base demangled --kernel-name "regex:direct2d_rb<" --launch-count 1 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats --section WarpStateStats \
  --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
  $SF run -q -b gpu -p radio -o $W/o $W/sim8192.fits > $OUT/ncu-rb.txt 2>&1
grep -vE '^==PROF==|^ *$' $OUT/ncu-rb.txt | grep -E "Duration|Throughput|Issue|Eligible|Active|Occupancy|Registers|Stall|cycles|Warp Cycles|Executed Ipc|Pipe|Shared" | head -60 | tee -a $L
echo "=== ncu source direct2d_rb" | tee -a $L
timeout 200 ncu --kernel-name-base demangled --kernel-name "regex:direct2d_rb<" --launch-count 1 --section SourceCounters \
  --section WarpStateStats -f -o $W/rbsrc $SF run -q -b gpu -p radio -o $W/o $W/sim8192.fits > $W/rbsrc.log 2>&1
ncu -i $W/rbsrc.ncu-rep --page source --csv --print-source sass > $OUT/rb-source.csv 2>>$W/rbsrc.log
ncu -i $W/rbsrc.ncu-rep --page details > $OUT/rb-details.txt 2>&1
tail -3 $W/rbsrc.log | tee -a $L
cuobjdump -sass -fun _Z11direct2d_rbILb0ELi16ELi4ELb1ELi15EEvPKfmPfmiiiiiiifS1_ $SF > $OUT/rb.sass 2>&1
wc -l $OUT/rb.sass $OUT/rb-source.csv | tee -a $L
echo "=== threads" | tee -a $L
PIPES="radio sextractor lesson" timeout 330 tests/bench/threads.sh $SF /tmp/thr "4096 8192" 3 > $OUT/threads.out 2>&1
echo "threads rc=$?" | tee -a $L
cp /tmp/thr/threads.md /tmp/thr/threads.csv $OUT/ 2>/dev/null; cat /tmp/thr/threads.md | tee -a $L
echo "=== done" | tee -a $L
