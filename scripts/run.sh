#!/usr/bin/env bash
# `make run`: start the single-node broker on the embedded default (data in a local folder),
# run a short benchmark against it, print the summary, then keep the broker serving until
# Ctrl-C (SIGINT shuts it down cleanly).
#
#   scripts/run.sh BIN DATA LISTEN ADMIN
set -euo pipefail
bin=${1:-bin}
data=${2:-./data}
listen=${3:-127.0.0.1:9092}
admin=${4:-127.0.0.1:9644}

"$bin/samsa" serve --data-dir "$data" --listen "$listen" --admin-listen "$admin" &
pid=$!
trap 'kill -INT $pid 2>/dev/null; wait $pid' INT TERM

for _ in $(seq 1 100); do
	if (exec 3<>"/dev/tcp/${listen%:*}/${listen##*:}") 2>/dev/null; then
		break
	fi
	kill -0 "$pid" 2>/dev/null || { echo "broker exited during start-up" >&2; exit 1; }
	sleep 0.1
done

echo "== benchmark: max-throughput-100b for 10 s against $listen (metrics: http://$admin/metrics)"
"$bin/samsa-bench" run --brokers "$listen" --admin "http://$admin" \
	--workload max-throughput-100b --warmup 2s --duration 10s || true

echo "== broker serving on $listen with data in $data; Ctrl-C to stop"
wait "$pid"
