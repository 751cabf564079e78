#!/usr/bin/env bash
# Transactions with kcat's transactional producer (-X transactional.id: every message
# of one run in one transaction, committed when its input ends, aborted on Ctrl-C):
#
#   - a run that reaches the end of its input commits: read_committed reads it all;
#   - a run interrupted (SIGINT) after its records are in the log aborts them: they are
#     there for read_uncommitted, never for read_committed;
#   - a run SIGKILLed after its records are in the log leaves its transaction open:
#     read_committed reads nothing past it (the last stable offset stays before it)
#     until the next producer of the id fences it, which aborts it; that producer's own
#     committed records are then all read_committed returns.
#
# Topics have one partition: librdkafka's sticky partitioner puts a burst of records
# on one partition anyway, and the checks of what read_committed stops before need
# the open transaction in front of the record after it.
#
#   tests/kcat_txn.sh        (needs kcat and python3 on PATH; builds ./cmd/samsa)
set -euo pipefail

. "$(dirname "$0")/lib.sh"

command -v kcat >/dev/null || fail "kcat is not installed (apt-get install -y kcat)"

build_samsa
port=$(free_port)
admin=$(free_port)
broker="127.0.0.1:$port"

SAMSA_NUM_PARTITIONS=1 start_broker --data-dir "$tmp/data" --listen "$broker" --admin-listen "127.0.0.1:$admin" \
	--transport "${SAMSA_TEST_TRANSPORT:-std}"
wait_ready


read_topic() { # topic, isolation level: the values' numbers, sorted, to the end (the last stable offset for read_committed)
	kcat -b "$broker" -C -t "$1" -o beginning -e -q -X isolation.level="$2" -X fetch.wait.max.ms=50 -f '%s\n' | cut -d' ' -f1 | sort -n
}
count() { # topic, isolation level
	read_topic "$1" "$2" | wc -l | tr -d ' '
}
wait_count() { # topic, isolation level, n: polls until n records are read
	local deadline=$((SECONDS + 20))
	while [ "$SECONDS" -lt "$deadline" ]; do
		[ "$(count "$1" "$2")" -ge "$3" ] && return 0
		sleep 0.1
	done
	fail "$1: fewer than $3 records for $2 after 20 s"
}
padded() { # first, last: lines "<n> 000...", 97 bytes each
	seq "$1" "$2" | awk '{printf "%d %090d\n", $1, 0}'
}
between() { # first, last: the numbers read (stdin) within [first, last]
	awk -v a="$1" -v b="$2" '$1 >= a && $1 <= b' | wc -l | tr -d ' '
}

# Commits at the end of its input. The topic is made first: a transactional producer
# does not create it.
echo 0 | kcat -b "$broker" -P -t kt-commit || fail "create kt-commit"
seq 1 1000 | kcat -b "$broker" -P -t kt-commit -X transactional.id=kt-commit || fail "transactional produce"
check "commit: read_committed reads the transaction" "$(seq 0 1000)" "$(read_topic kt-commit read_committed)"

# A producer that stays in its transaction: it reads its input from a FIFO held open
# here, so that it never reaches the end of it (which would commit). kcat reads its
# input in 4 KiB blocks and produces the lines of each block it has read: 2,000 lines of
# 97 bytes are 48 blocks, of which all but the last partial one are produced.
open_txn() { # topic, transactional id: sets open_pid once 1,900 of its records are in the log
	rm -f "$tmp/fifo"
	mkfifo "$tmp/fifo"
	kcat -b "$broker" -P -t "$1" -X transactional.id="$2" <"$tmp/fifo" 2>>"$tmp/kcat.log" &
	open_pid=$!
	exec 3>"$tmp/fifo"
	padded 1 2000 >&3
	wait_count "$1" read_uncommitted 1901
}

echo 0 | kcat -b "$broker" -P -t kt-int || fail "create kt-int"
open_txn kt-int kt-int
check "interrupted: read_committed reads nothing of the open transaction" "0" "$(read_topic kt-int read_committed)"
# kcat takes SIGINT as a request to stop (its read of the FIFO goes on), and then the
# end of its input as the moment to abort the transaction instead of committing it.
kill -INT "$open_pid"
exec 3>&-
wait "$open_pid" 2>/dev/null || true
open_pid=""
seq 3001 3100 | kcat -b "$broker" -P -t kt-int -X transactional.id=kt-int || fail "produce after the abort"
check "interrupted: read_committed skips the aborted records" "$(echo 0; seq 3001 3100)" "$(read_topic kt-int read_committed)"
check "interrupted: read_uncommitted returns them" "yes" \
	"$(read_topic kt-int read_uncommitted | between 1 2000 | awk '{print ($1 >= 1900) ? "yes" : $1 " of them"}')"

echo 0 | kcat -b "$broker" -P -t kt-kill || fail "create kt-kill"
open_txn kt-kill kt-kill
kill -KILL "$open_pid"
exec 3>&-
wait "$open_pid" 2>/dev/null || true
open_pid=""
# A record outside any transaction after the open one: read_committed does not pass the
# open transaction to reach it.
echo 10000 | kcat -b "$broker" -P -t kt-kill || fail "produce after the kill"
wait_count kt-kill read_uncommitted 1902
check "killed: read_committed stops before the open transaction" "0" "$(read_topic kt-kill read_committed)"
seq 3001 3100 | kcat -b "$broker" -P -t kt-kill -X transactional.id=kt-kill || fail "produce with the id of the killed producer"
check "killed: the next producer of the id aborts it; read_committed reads the rest" \
	"$(echo 0; seq 3001 3100; echo 10000)" "$(read_topic kt-kill read_committed)"
check "killed: read_uncommitted returns the aborted records" "yes" \
	"$(read_topic kt-kill read_uncommitted | between 1 2000 | awk '{print ($1 >= 1900) ? "yes" : $1 " of them"}')"

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
check "broker exits cleanly on SIGTERM" 0 "$rc"

echo "kcat transactions: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
