#!/usr/bin/env bash
# `make run` starts its own broker or fails at once with the reason. With another
# process on the Kafka port, on the admin port, or holding the Kafka port bound without
# listening (so that only the broker's own bind finds out), `make run` must exit non-zero
# within seconds, name the address and the override (LISTEN= / ADMIN=), print no
# benchmark, and send the other process nothing.
#
#   tests/make_run.sh     (as root it runs in a private network namespace, on the
#                          default ports 9092 and 9644; builds bin/ with make)
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/netns.sh
private_netns "$@"

tmp=$(mktemp -d)
decoy_pid=""
cleanup() {
	[ -z "$decoy_pid" ] || kill "$decoy_pid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	for f in "$tmp"/out "$tmp"/decoy.log; do
		[ -f "$f" ] && { echo "--- $f" >&2; cat "$f" >&2; }
	done
	exit 1
}

kafka=9092 admin=9644
if [ -z "${SAMSA_TEST_NETNS:-}" ]; then # the machine's loopback: ports nobody uses
	kafka=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	admin=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
fi
port_free "$kafka" && port_free "$admin" || fail "127.0.0.1:$kafka or :$admin is already taken before the test starts"

# decoy PORT MODE: MODE listen accepts connections and logs every byte it is sent;
# MODE bind holds the port without listening (connections are refused).
decoy() {
	/usr/bin/python3 - "$1" "$2" >"$tmp/decoy.log" 2>&1 <<'PY' &
import socket, sys, time
port, mode = int(sys.argv[1]), sys.argv[2]
s = socket.socket()
s.bind(("127.0.0.1", port))
if mode == "listen":
    s.listen(64)
print("ready", flush=True)
while mode == "bind":  # hold the port until killed
    time.sleep(3600)
while True:
    c, _ = s.accept()
    c.settimeout(1)
    try:
        while True:
            d = c.recv(65536)
            if not d:
                break
            print("received", len(d), "bytes", flush=True)
    except OSError:
        pass
    c.close()
PY
	decoy_pid=$!
	for _ in $(seq 1 100); do
		grep -q ready "$tmp/decoy.log" 2>/dev/null && return 0
		sleep 0.05
	done
	fail "the decoy did not start"
}

stop_decoy() {
	kill "$decoy_pid" 2>/dev/null || true
	wait "$decoy_pid" 2>/dev/null || true
	decoy_pid=""
}

# refuses NAME WANT...: make run exits non-zero within 60 s, its output holds each WANT,
# it ran no benchmark, and the decoy was sent nothing.
refuses() {
	local name=$1 rc=0 start=$SECONDS
	shift
	timeout 60 make run DATA="$tmp/data" LISTEN="127.0.0.1:$kafka" ADMIN="127.0.0.1:$admin" RUN_DURATION=1s RUN_WARMUP=0s </dev/null >"$tmp/out" 2>&1 || rc=$?
	[ "$rc" -ne 0 ] || fail "$name: make run exited 0"
	[ "$rc" -ne 124 ] || fail "$name: make run did not stop within 60 s"
	for want in "$@"; do
		grep -qF -- "$want" "$tmp/out" || fail "$name: the output does not say \"$want\""
	done
	! grep -q "== benchmark" "$tmp/out" || fail "$name: make run benchmarked the other process"
	! grep -q received "$tmp/decoy.log" || fail "$name: the other process was sent requests"
	echo "ok: $name: make run refused in $((SECONDS - start)) s: $(grep -m1 -E 'address already in use' "$tmp/out" | sed 's/^.*err=//' | cut -c1-160)"
}

make build >/dev/null

decoy "$kafka" listen
refuses "another listener on the Kafka port" "kafka listener 127.0.0.1:$kafka: address already in use" "LISTEN="
stop_decoy

decoy "$admin" listen
refuses "another listener on the admin port" "admin listener 127.0.0.1:$admin: address already in use" "ADMIN="
stop_decoy

decoy "$kafka" bind
refuses "the Kafka port bound, not listening" "kafka listener 127.0.0.1:$kafka: address already in use: pass --listen or LISTEN=" "exited during start-up"
stop_decoy

# The same arguments straight to the script make run calls.
decoy "$kafka" listen
rc=0
scripts/run.sh bin "$tmp/data" "127.0.0.1:$kafka" "127.0.0.1:$admin" 1s 0s </dev/null >"$tmp/out" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && grep -qF "LISTEN=" "$tmp/out" && ! grep -q "== benchmark" "$tmp/out" || fail "scripts/run.sh with a taken Kafka port (exit $rc)"
echo "ok: scripts/run.sh refused the taken Kafka port"
stop_decoy
echo "make run: 4 passed, 0 failed"
