#!/usr/bin/env bash
# franz-go's own integration suite (its pkg/kgo tests, in the module cache at the version
# go.mod requires) against Samsa at its defaults: one node (KGO_TEST_RF=1), then three
# combined nodes started by `samsa cluster start` (KGO_TEST_RF=3). Each run prints its
# count of passed, failed and skipped tests and the names of the failed and skipped ones;
# the suite fails when any test failed. `make test-franz` runs it (about 5 minutes on two
# cores); it is not part of `make test`.
#
#   tests/franz.sh                 both runs
#   FRANZ_RUN='TestTxnEtl' tests/franz.sh     only the tests go test -run selects
#   FRANZ_NODES=1 tests/franz.sh   (or 3) only one of the two runs
set -euo pipefail

. "$(dirname "$0")/lib.sh"

command -v kcat >/dev/null || fail "kcat is not installed (apt-get install -y kcat)"

build_samsa
version=$(cd "$root" && go list -m -f '{{.Version}}' github.com/twmb/franz-go)
(cd "$root" && go mod download github.com/twmb/franz-go@"$version")
run=${FRANZ_RUN:-.}
failed=0

# suite NAME RF SEEDS: runs the kgo tests against SEEDS, its output in $tmp/NAME.log.
suite() {
	local name=$1 rf=$2 seeds=$3
	echo "franz-go $version pkg/kgo against $name ($seeds), KGO_TEST_RF=$rf"
	local rc=0
	(cd "$root" && KGO_TEST_RF=$rf KGO_SEEDS=$seeds go test -count=1 -timeout 30m -v -run "$run" \
		github.com/twmb/franz-go/pkg/kgo) >"$tmp/$name.log" 2>&1 || rc=$?
	local pass fail skip
	pass=$(grep -c '^--- PASS' "$tmp/$name.log" || true)
	fail=$(grep -c '^--- FAIL' "$tmp/$name.log" || true)
	skip=$(grep -c '^--- SKIP' "$tmp/$name.log" || true)
	echo "$name: $pass passed, $fail failed, $skip skipped (go test exit $rc)"
	grep -E '^--- (FAIL|SKIP)|^    --- FAIL' "$tmp/$name.log" | sed 's/^/  /' || true
	if [ "$fail" -ne 0 ] || [ "$rc" -ne 0 ]; then
		grep -E '^\s+\S+_test.go:[0-9]+:' "$tmp/$name.log" | grep -v 'deleting\|NOT DELETING\|completed in' | head -20 | sed 's/^/  /' || true
		failed=1
	fi
}

if [ "${FRANZ_NODES:-1}" = 1 ] || [ -z "${FRANZ_NODES:-}" ]; then
	port=$(free_port)
	admin=$(free_port)
	broker="127.0.0.1:$port"
	start_broker --data-dir "$tmp/one" --listen "$broker" --admin-listen "127.0.0.1:$admin"
	wait_ready
	suite one-node 1 "$broker"
	kill -TERM "$pid"
	wait "$pid" || true
	pid=""
fi

if [ "${FRANZ_NODES:-3}" = 3 ] || [ -z "${FRANZ_NODES:-}" ]; then
	"$tmp/samsa" cluster start --nodes 3 --data-dir "$tmp/three" >"$tmp/cluster.log" 2>&1 &
	pid=$!
	for _ in $(seq 1 600); do
		grep -q 'ready: --bootstrap-server' "$tmp/cluster.log" && break
		kill -0 "$pid" 2>/dev/null || fail "samsa cluster start exited: $(tail -n 5 "$tmp/cluster.log")"
		sleep 0.1
	done
	seeds=$(grep -o 'bootstrap-server [0-9.:,]*' "$tmp/cluster.log" | cut -d' ' -f2)
	[ -n "$seeds" ] || fail "the cluster did not form: $(tail -n 5 "$tmp/cluster.log")"
	suite three-nodes 3 "$seeds"
	kill -INT "$pid"
	wait "$pid" || true
	pid=""
fi

[ "$failed" -eq 0 ]
