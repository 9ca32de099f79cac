# tap.sh — the Test Anything Protocol for the test scripts, which automake's
# tap-driver.sh reads (Makefile.am): one "ok N - name" or "not ok N - name"
# per check, the plan "1..N" at the end (finish), "1..0 # SKIP why" for a
# script that cannot run here (skip_all). Other lines are comments to TAP.
# A script that dies before finish has no plan: the driver reports an error.
tap_n=0 tap_fail=0

# tap_line STATUS NAME: the first line of NAME is the check's; the rest
# becomes TAP diagnostics
tap_line() {
    local first=${2%%$'\n'*} rest=${2#*$'\n'}
    tap_n=$((tap_n + 1))
    echo "$1 $tap_n - ${first//#/\\#}"
    [ "$first" = "$2" ] || [ -z "$rest" ] || printf '%s\n' "$rest" | sed 's/^/# /'
}
ok()  { tap_line ok "$1"; }
bad() { tap_fail=$((tap_fail + 1)); tap_line "not ok" "$1"; }
# check NAME SHELL-CONDITION
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
# skip_all REASON: the whole script is skipped
skip_all() { echo "1..0 # SKIP $1"; exit 0; }
# finish: the plan; fails when a check did (the driver reads the "not ok"
# lines, a shell running the script alone reads the status)
finish() {
    echo "1..$tap_n"
    echo "# $((tap_n - tap_fail)) passed, $tap_fail failed"
    [ "$tap_fail" -eq 0 ]
}
