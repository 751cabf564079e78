#!/usr/bin/env bash
# Runs independent parts of `make test` side by side: most of their time is spent
# waiting (brokers starting, fixed-length workloads, timeouts), not computing.
#
#   tests/together.sh NAME CMD [NAME CMD]...
#
# Each CMD runs with bash -c in a process group of its own, stdin from /dev/null, its
# output (stdout and stderr) in a file of its own. When a part ends its output is printed
# as one block, between a header and a footer with its name, exit status and time, so
# that the parts' lines never interleave. Every part runs to its end even when another
# failed; the script then names the failed parts and exits 1 (0 when every part passed).
# Ctrl-C or SIGTERM stops every part (its whole process group).
set -uo pipefail

[ $# -gt 0 ] && [ $(($# % 2)) -eq 0 ] || {
	echo "usage: tests/together.sh NAME CMD [NAME CMD]..." >&2
	exit 2
}

dir=$(mktemp -d)
set -m # each part a process group of its own, for the trap below
declare -A name start log
pids=()
stop() {
	local p
	for p in "${pids[@]}"; do
		kill -TERM -- "-$p" 2>/dev/null || true
	done
	wait 2>/dev/null
	rm -rf "$dir"
	exit 130
}
trap stop INT TERM

i=0
while [ $# -gt 0 ]; do
	bash -c "$2" </dev/null >"$dir/$i.log" 2>&1 &
	name[$!]=$1
	start[$!]=$SECONDS
	log[$!]=$dir/$i.log
	pids+=($!)
	echo "== started: $1: $2"
	i=$((i + 1))
	shift 2
done

failed=()
left=${#pids[@]}
while [ "$left" -gt 0 ]; do
	id=""
	wait -n -p id
	rc=$?
	[ -n "$id" ] || continue
	left=$((left - 1))
	took=$((SECONDS - ${start[$id]}))
	echo "======== ${name[$id]}: output"
	cat "${log[$id]}"
	if [ "$rc" -eq 0 ]; then
		echo "======== ${name[$id]}: ok ($took s)"
	else
		echo "======== ${name[$id]}: FAILED, exit status $rc ($took s)"
		failed+=("${name[$id]}")
	fi
done
rm -rf "$dir"
if [ ${#failed[@]} -gt 0 ]; then
	echo "FAILED: ${failed[*]}" >&2
	exit 1
fi
