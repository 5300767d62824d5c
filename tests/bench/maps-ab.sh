#!/usr/bin/env bash
# Are two skyfind builds' background maps and catalogues the same bytes?
# Both run radio.pipe on the CPU backend with --save background,rms over
# simulated skies (2048², 4096², a 1031x777 sky with beam-correlated noise,
# a 3000² sky of 3000 sources), the 1031x777 sky with other BANE steps and
# boxes (8/48, 5/30, and 10/45, where no box is cell-aligned and every node
# reads its pixels), and the real radio images of SKYFIND_TEST_DATA, at one
# and two threads; then every map and catalogue is compared. The check
# behind each change to a CPU twin whose output must not move.
#   tests/bench/maps-ab.sh OLD NEW OUTDIR
# Exits 1 when a file differs or a run fails (both listed).
set -u
OLD=${1:?old skyfind}
NEW=${2:?new skyfind}
OUT=${3:?output folder}
D=${SKYFIND_TEST_DATA:-$(cd "$(dirname "$0")/../.." && pwd)/../shared/data}
W=$OUT/maps-ab
rm -rf "$W"
mkdir -p "$W"
"$NEW" simulate -q -n 2048 --seed 1 -o "$W/s2048.fits" &&
    "$NEW" simulate -q -n 4096 --seed 1 -o "$W/s4096.fits" &&
    "$NEW" simulate -q -n 1000 --nx 1031 --ny 777 --noise-corr beam --seed 5 -o "$W/odd.fits" &&
    "$NEW" simulate -q -n 3000 --seed 7 --nsrc 3000 -o "$W/dense.fits" || exit 2
real="radio_atca_scorpio_s17_1000x1000 radio_amila_GRB120422A_512x512x1x1
radio_lofar_GRB201006A_wsclean_256x256 radio_lofar_dirty_beam_512x512x1x1 radio_parkes_1904-66_SIN
radio_vla_nvas_W51_22GHz_114x124x1x1 sim_aegean_synthetic_512x256 radio_parkes_1904-66_SIN_galactic"
fail=0
runs=0
run() { # name threads file [--set ...]: both builds
    local name=$1 t=$2 f=$3
    shift 3
    for which in old new; do
        local b=$OLD
        [ $which = new ] && b=$NEW
        if ! OMP_NUM_THREADS=$t "$b" run -q -b cpu --threads "$t" --save background,rms \
            -o "$W/$which/$name" "$@" "$f" 2>"$W/$which-$name.err"; then
            echo "FAILED: $which $name ($(head -1 "$W/$which-$name.err"))"
            fail=1
        fi
    done
    runs=$((runs + 1))
}
for t in 1 2; do
    run s2048_t$t $t "$W/s2048.fits"
    run odd_t$t $t "$W/odd.fits"
    run dense_t$t $t "$W/dense.fits"
    run odd_s8_t$t $t "$W/odd.fits" --set background.step=8 --set background.box=48
    run odd_s5_t$t $t "$W/odd.fits" --set background.step=5 --set background.box=30
    run odd_nc_t$t $t "$W/odd.fits" --set background.step=10 --set background.box=45
    for f in $real; do
        [ -f "$D/$f.fits" ] && run "${f}_t$t" $t "$D/$f.fits"
    done
done
run s4096_t1 1 "$W/s4096.fits"
nfiles=0
for f in $(cd "$W/old" && find . -type f \( -name '*.fits' -o -name '*.csv' \) | sort); do
    nfiles=$((nfiles + 1))
    cmp -s "$W/old/$f" "$W/new/$f" || { echo "DIFFERENT: $f"; fail=1; }
done
[ "$(cd "$W/new" && find . -type f \( -name '*.fits' -o -name '*.csv' \) | wc -l)" = $nfiles ] ||
    { echo "DIFFERENT: the builds wrote different sets of files"; fail=1; }
[ $fail = 0 ] && echo "maps-ab: $runs runs, $nfiles files, every one the same bytes" ||
    echo "maps-ab: $runs runs, $nfiles files: see above"
exit $fail
