#!/usr/bin/env bash
# statedir.sh — one daemon per state directory: a second calibd on the same
# directory exits 1 naming the holder's pid, and starts once the first has
# stopped; temporary files a crash left behind are removed at start, and
# only those.
. "$(dirname "$0")/lib.sh"

mkdir -p "$work/state"
: > "$work/state/model.m.params.tmp"
: > "$work/state/endpoints.tmp"
: > "$work/state/notes.tmp" # not calibd's: kept
start_calibd --log-level info
check stale_removed '[ ! -e "$work/state/model.m.params.tmp" ] && [ ! -e "$work/state/endpoints.tmp" ]'
check foreign_kept '[ -e "$work/state/notes.tmp" ]'
check stale_logged 'grep -q "removed $work/state/model.m.params.tmp, a temporary file" "$work/calibd.log"'
check lock_holds_pid '[ "$(cat "$work/state/lock")" = "$calibd_pid" ]'

# a second daemon on the same directory, other ports: refused at once
"$CALIBD" --ingest 'tcp://127.0.0.1:*' --ingest-pull 'tcp://127.0.0.1:*' --publish 'tcp://127.0.0.1:*' \
    --control 'tcp://127.0.0.1:*' --http off --state-dir "$work/state" 2> "$work/second.log"
rc=$?
check second_exits_1 '[ $rc -eq 1 ]'
check second_names_holder 'grep -q "state directory $work/state is in use by another calibd (pid $calibd_pid" "$work/second.log"'
check first_still_answers '"$CALIBCTL" ping --control "$CONTROL" --timeout "$(scaled 5)" > /dev/null'

# stored parameters outside their method's domain are refused at start,
# never republished: T = -1 would invert every serving node's softmax
check first_stops_for_bad_params 'stop_calibd'
printf '# calibd\nversion 3\nmethod temperature\nts 1\nfit_n 10\nshadow_n 10\nparam T -1\n' \
    > "$work/state/model.neg.params"
printf '[model neg]\nform = logits\nk = 3\n' > "$work/neg.conf"
start_calibd -c "$work/neg.conf"
check bad_params_refused 'grep -q "neg: the stored parameters in $work/state/model.neg.params are refused (temperature: T = -1 must be > 0)" "$work/calibd.log"'
status > "$work/neg.json"
check bad_params_not_in_force '[ "$(json_get "$work/neg.json" "(r[\"models\"][\"neg\"][\"params\"][\"version\"], r[\"models\"][\"neg\"][\"loop\"][\"on\"])")" = "(0, False)" ]'

# the lock goes with its holder: after the daemon stops,
# a new one starts on the directory
check first_stops 'stop_calibd'
start_calibd
check restart_after_stop '"$CALIBCTL" ping --control "$CONTROL" --timeout "$(scaled 5)" > /dev/null'

# the final snapshot cannot be written (its temporary name taken by a
# directory: the same refusal as a full disk's): SIGTERM exits 1, saying so
mkdir "$work/state/snapshot.tmp"
stop_calibd
rc=$?
check final_snapshot_failure_exits_1 '[ $rc -eq 1 ] && log_has "the final snapshot was not written"'
rmdir "$work/state/snapshot.tmp"

# a state directory on a full disk for real: a tmpfs of 256 KiB over it
# (where this machine lets root mount one), too small for the snapshot of
# 3,000 pairs
if mount -t tmpfs -o size=256k tmpfs "$work/state" 2> /dev/null; then
    cleanup_mount() { umount "$work/state" 2> /dev/null; cleanup; }
    trap cleanup_mount EXIT
    printf '[daemon]\nsnapshot_interval = 3600\n[model m]\nform = logits\nk = 10\n' > "$work/full.conf"
    start_calibd -c "$work/full.conf"
    "$SIMULATE" --endpoint ">$INGEST" --linger-ms "$LINGER_MS" --model m --count 3000 \
        --batch 100 2> /dev/null
    wait_for "$work/f.json" "r['models']['m']['scored'] == 3000" || bad "the pairs are scored"
    stop_calibd
    rc=$?
    check full_disk_exits_1 '[ $rc -eq 1 ] && log_has "No space left on device" &&
        log_has "the final snapshot was not written"'
    umount "$work/state"
    trap cleanup EXIT
else
    echo "# no tmpfs mount here: the full disk was checked by the directory above only"
fi
finish
