# Sourced by the CLI test scripts: a scratch folder $T removed at exit, and
# the pass/fail tally: ok, bad MESSAGE, check 'SHELL TEST' MESSAGE.
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() { if eval "$1"; then ok; else bad "$2"; fi; }
