# Sourced by the shell suites that run one broker (kcat.sh, kcat_txn.sh, kcat_tiered.sh, sasl_ssl.sh):
#
#   . "$(dirname "$0")/lib.sh"
#
# It sets root (the repository) and tmp (a scratch directory, removed on exit unless
# KEEP_TMP is set), and on exit SIGKILLs the broker (pid), a client the suite keeps
# running in the background (open_pid) and a server it started beside the broker
# (store_pid: kcat_tiered.sh's object store), if any. The suite builds the broker into $tmp
# (build_samsa), starts it (start_broker), its address in broker, and waits until it
# answers (wait_ready). fail reports a failure with the end of the broker's log and
# exits.

root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
pid=""
open_pid=""
store_pid=""
cleanup() {
	for p in $pid $open_pid $store_pid; do
		kill -KILL "$p" 2>/dev/null || true
	done
	[ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	if [ -f "$tmp/broker.log" ]; then
		echo "--- broker log (last 40 lines) ---" >&2
		tail -n 40 "$tmp/broker.log" >&2
	fi
	exit 1
}

free_port() { # a free TCP port on 127.0.0.1 (with $py if the suite set it, else python3)
	"${py:-python3}" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

build_samsa() { # builds ./cmd/samsa into $tmp/samsa
	(cd "$root" && go build -o "$tmp/samsa" ./cmd/samsa)
}

start_broker() { # serve arguments...: starts $tmp/samsa serve in the background, its output appended to $tmp/broker.log; sets pid
	"$tmp/samsa" serve "$@" >>"$tmp/broker.log" 2>&1 &
	pid=$!
}

wait_ready() { # kcat options...: until kcat with them lists the metadata of $broker (20 s), or fail
	for _ in $(seq 1 200); do
		if kcat "$@" -b "$broker" -L -m 2 >/dev/null 2>&1; then
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || fail "broker exited during start-up"
		sleep 0.1
	done
	fail "broker did not answer metadata within 20 s"
}

# check NAME EXPECTED ACTUAL counts a check in passed or failed and says which.
passed=0
failed=0
check() {
	if [ "$2" == "$3" ]; then
		passed=$((passed + 1))
		echo "ok   $1"
	else
		failed=$((failed + 1))
		echo "FAIL $1: expected [$2], got [$3]" >&2
	fi
}
