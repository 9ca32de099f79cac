#!/usr/bin/env bash
# fds.sh — descriptors running short do not stop the snapshots. calibd
# starts with a soft limit of 64 descriptors (systemd's default is 1,024,
# which 1,100 idle producer connections once exhausted: every snapshot then
# failed); it raises the soft limit to the hard one, so that 200 idle TCP
# connections to its ingest port leave its snapshots writing.
. "$(dirname "$0")/lib.sh"
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] || [ "$hard" -ge 1024 ] || skip_all "a hard limit of $hard descriptors"
cat > "$work/calibd.conf" <<EOF2
[daemon]
tick = 0.2
snapshot_interval = 0.5
EOF2
# calibd inherits the soft limit of this shell, which then takes its own back
soft=$(ulimit -Sn)
ulimit -Sn 64
start_calibd -c "$work/calibd.conf" --http 127.0.0.1:0 --log-level info
ulimit -Sn "$soft"
check "the soft limit of descriptors is raised to the hard one" 'log_has "descriptors: soft limit raised from 64"'
metric() { curl -sS --max-time "$(scaled 5)" "$HTTP" | awk -v m="$1" '$1 == m {print $2; found = 1} END {if (!found) print 0}'; }
# 200 idle connections to the ingest port, held while snapshots are written
port=${INGEST##*:}
"$PY" - "$port" "$work/held" <<'PY' &
import socket, sys, time
conns = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(200)]
open(sys.argv[2], "w").write("%d\n" % len(conns))
time.sleep(600)
PY
track $!
wait_until '[ -s "$work/held" ]' || bad "the idle connections are open"
w0=$(metric calibd_snapshot_writes_total)
check "with 200 idle connections held, snapshots go on and none fails" \
    'wait_until "[ \$(metric calibd_snapshot_writes_total) -ge $((w0 + 3)) ]" && [ "$(metric calibd_snapshot_errors_total)" = 0 ]'
check "calibd stops cleanly" "stop_calibd"
finish
