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
"$CALIBD" --ingest 'tcp://127.0.0.1:*' --publish 'tcp://127.0.0.1:*' \
    --control 'tcp://127.0.0.1:*' --http off --state-dir "$work/state" 2> "$work/second.log"
rc=$?
check second_exits_1 '[ $rc -eq 1 ]'
check second_names_holder 'grep -q "state directory $work/state is in use by another calibd (pid $calibd_pid" "$work/second.log"'
check first_still_answers '"$CALIBCTL" ping --control "$CONTROL" --timeout 5 > /dev/null'

# the lock goes with its holder: after the daemon stops,
# a new one starts on the directory
check first_stops 'stop_calibd'
start_calibd
check restart_after_stop '"$CALIBCTL" ping --control "$CONTROL" --timeout 5 > /dev/null'
finish
