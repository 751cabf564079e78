#!/bin/bash
# The three-node figures of BENCHMARKS.md ("10,000 partitions per node", Three nodes):
# `samsa cluster start --nodes 3`, 10 topics x 1,000 partitions with replication
# factor 3 (10,000 replicas on each node), timed until no partition is
# under-replicated; then each node's descriptors, RSS and CPU over 30 s idle.
#
#   scripts/partitions-cluster.sh [bin/samsa] [data dir (default: a new temporary one)]
#
# With PROFILE_DIR set, a 30 s CPU profile of each idle node is then taken from its
# admin listener (/debug/pprof/profile) into PROFILE_DIR/node-<id>.pprof.
set -eu
BIN=${1:-bin/samsa}
D=${2:-$(mktemp -d)}
mkdir -p "$D"
"$BIN" cluster start --nodes 3 --data-dir "$D/data" > "$D/cluster.out" 2>&1 &
CL=$!
trap 'kill $CL 2>/dev/null; wait $CL 2>/dev/null' EXIT
BOOT=
for _ in $(seq 1 240); do
	BOOT=$(grep -oE "127\.0\.0\.1:[0-9]+(,127\.0\.0\.1:[0-9]+)*" "$D/cluster.out" | head -1 || true)
	[ -n "$BOOT" ] && break
	sleep 0.5
done
[ -n "$BOOT" ] || { echo "the cluster did not start; see $D/cluster.out" >&2; exit 1; }
sleep 2
PIDS=$(pgrep -f "serve --config $D/data" | tr '\n' ' ')
echo "bootstrap $BOOT, node pids $PIDS"
# The brokers register a moment after the listeners answer: wait for all three.
for _ in $(seq 1 120); do
	[ "$("$BIN" cluster describe --bootstrap-server "$BOOT" 2>/dev/null | grep -cE "^[0-9]+ .* no$")" -ge 3 ] && break
	sleep 0.5
done
t0=$(date +%s.%N)
for i in $(seq 0 9); do
	"$BIN" topics create "c$i" --partitions 1000 --replication-factor 3 --bootstrap-server "$BOOT" --timeout 300s
done
n=-1
for _ in $(seq 1 300); do
	n=$("$BIN" topics describe --under-replicated-partitions --bootstrap-server "$BOOT" 2>/dev/null | grep -c "Partition:" || true)
	[ "$n" = "0" ] && break
	sleep 1
done
t1=$(date +%s.%N)
echo "created, none under-replicated ($n left): $(echo "$t1 - $t0" | bc) s"
sleep 5
declare -A c0
for p in $PIDS; do
	echo "node pid $p: $(ls /proc/$p/fd | wc -l) descriptors, $(grep VmRSS /proc/$p/status | tr -s ' ')"
	c0[$p]=$(awk '{print $14+$15}' /proc/$p/stat)
done
sleep 30
for p in $PIDS; do
	c1=$(awk '{print $14+$15}' /proc/$p/stat)
	echo "node pid $p: idle CPU over 30 s: $(echo "scale=2; ($c1 - ${c0[$p]}) / 30" | bc)% of a core"
done
if [ -n "${PROFILE_DIR:-}" ]; then
	mkdir -p "$PROFILE_DIR"
	CP=
	for f in $(find "$D/data" -name server.properties); do
		[ -f "$f" ] || continue
		id=$(sed -n 's/^node.id=//p' "$f")
		adm=$(sed -n 's/^admin.listen=//p' "$f")
		[ -n "$adm" ] || continue
		curl -s -o "$PROFILE_DIR/node-$id.pprof" "http://$adm/debug/pprof/profile?seconds=30" &
		CP="$CP $!"
	done
	for c in $CP; do wait "$c"; done
	echo "profiles in $PROFILE_DIR"
fi
