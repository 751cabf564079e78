#!/usr/bin/env bash
# `make run`: start the single-node broker on the embedded default (data in a local
# folder), run a short benchmark against it, print the summary, then keep the broker
# serving until Ctrl-C (SIGINT shuts it down cleanly).
#
#   scripts/run.sh BIN DATA LISTEN ADMIN [DURATION [WARMUP]]
#
# It starts its own broker or fails at once with the reason: when LISTEN or ADMIN is
# taken by another process it says so, names the override (make run LISTEN=... /
# ADMIN=...) and exits 1 without measuring that process. The benchmark runs only
# against the broker this script started, once that broker has logged that it
# listens. ADMIN empty: no admin listener (the benchmark then reads the broker's CPU
# and RSS from /proc only).
set -euo pipefail
bin=${1:-bin}
data=${2:-./data}
listen=${3:-127.0.0.1:9092}
admin=${4-127.0.0.1:9644}
duration=${5:-10s}
warmup=${6:-2s}

die() {
	echo "make run: $*" >&2
	exit 1
}

# holder HOST:PORT: who listens there ("pid 123 (kafka)"), when ss can tell.
holder() {
	local port=${1##*:} line
	command -v ss >/dev/null || return 0
	line=$(ss -Hltnp "sport = :$port" 2>/dev/null | head -1)
	[[ $line =~ users:\(\(\"([^\"]+)\",pid=([0-9]+) ]] && echo " by pid ${BASH_REMATCH[2]} (${BASH_REMATCH[1]})"
	return 0
}

# taken HOST:PORT: something accepts connections there (port 0 never is).
taken() {
	local host=${1%:*} port=${1##*:}
	host=${host#[}
	host=${host%]}
	[ "$port" = 0 ] && return 1
	case $host in "" | 0.0.0.0 | ::) host=127.0.0.1 ;; esac
	(exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
}

[ -x "$bin/samsa" ] && [ -x "$bin/samsa-bench" ] || die "$bin/samsa and $bin/samsa-bench are not built: run make build"
if taken "$listen"; then
	die "kafka listener $listen: address already in use$(holder "$listen"): pass --listen or LISTEN= (make run LISTEN=127.0.0.1:19092), or stop that process; make run measures only a broker it started"
fi
if [ -n "$admin" ] && taken "$admin"; then
	die "admin listener $admin: address already in use$(holder "$admin"): pass --admin-listen or ADMIN= (make run ADMIN=127.0.0.1:19644, or ADMIN= for none), or stop that process"
fi

mkdir -p "$data"
log=$(mktemp "${TMPDIR:-/tmp}/samsa-run.XXXXXX")
# The broker's log goes to the terminal and to $log, where start-up is watched. tee
# ignores Ctrl-C and ends when the broker does, so the broker's shutdown lines are not
# written into a closed pipe.
"$bin/samsa" serve --data-dir "$data" --listen "$listen" --admin-listen "$admin" 2> >(
	trap '' INT TERM
	exec tee "$log" >&2
) &
pid=$!
stop() {
	kill -INT "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	rm -f "$log"
	exit 130
}
trap stop INT TERM

# Ready when this broker logs `msg=listening addr=...` (after both listeners are
# bound); failed when it exits first (its error, with the fix, is on the terminal).
deadline=$((SECONDS + 300)) # recovery of a large data dir after a crash takes time
addr=
while [ -z "$addr" ]; do
	if ! kill -0 "$pid" 2>/dev/null; then
		rc=0
		wait "$pid" || rc=$?
		sleep 0.1 # let tee print the last line
		rm -f "$log"
		die "the broker exited during start-up (exit $rc); its reason is above"
	fi
	[ $SECONDS -lt $deadline ] || {
		kill -INT "$pid"
		die "the broker did not finish starting within 300 s"
	}
	addr=$(sed -n 's/.* msg=listening addr=\([^ ]*\).*/\1/p' "$log" | head -1)
	[ -n "$addr" ] || sleep 0.1
done
bench=(--brokers "$addr" --pid "$pid")
metrics=""
if [ -n "$admin" ]; then
	admin_addr=$(sed -n 's/.* msg="admin listening" addr=\([^ ]*\).*/\1/p' "$log" | head -1)
	bench+=(--admin "http://${admin_addr:-$admin}")
	metrics=" (metrics: http://${admin_addr:-$admin}/metrics)"
fi

echo "== benchmark: max-throughput-100b for $duration against the broker on $addr, pid $pid$metrics"
if ! "$bin/samsa-bench" run "${bench[@]}" --workload max-throughput-100b --warmup "$warmup" --duration "$duration"; then
	echo "== the benchmark reported a failure (above); the broker keeps serving"
fi

echo "== broker serving on $addr (pid $pid) with data in $data; Ctrl-C to stop"
rc=0
wait "$pid" || rc=$?
rm -f "$log"
exit $rc
