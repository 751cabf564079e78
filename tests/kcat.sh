#!/usr/bin/env bash
# Shell-level compatibility test with librdkafka's kcat: metadata, produce 100,000 lines,
# consume them back and count them; the same with idempotence and each compression codec;
# then a graceful restart must keep every record.
#
#   tests/kcat.sh            (needs kcat and python3 on PATH; builds ./cmd/samsa)
#   SAMSA_TEST_TRANSPORT=reactor tests/kcat.sh    (the broker on the epoll reactor)
set -euo pipefail

. "$(dirname "$0")/lib.sh"

command -v kcat >/dev/null || fail "kcat is not installed (apt-get install -y kcat)"

build_samsa
port=$(free_port)
admin=$(free_port)
broker="127.0.0.1:$port"

start() {
	SAMSA_NUM_PARTITIONS=4 SAMSA_LOG_CLEANER_BACKOFF_MS=100 start_broker --data-dir "$tmp/data" --listen "$broker" --admin-listen "127.0.0.1:$admin" \
		--transport "${SAMSA_TEST_TRANSPORT:-std}"
	wait_ready
}

stop() {
	kill -TERM "$pid"
	local rc=0
	wait "$pid" || rc=$?
	pid=""
	[ "$rc" -eq 0 ] || fail "broker exited with status $rc on SIGTERM"
}


start

# Metadata: the broker lists itself at the advertised address.
meta=$(kcat -b "$broker" -L -m 5)
check "metadata lists the broker" 1 "$(grep -c "at $broker" <<<"$meta")"

n=100000
seq 1 "$n" >"$tmp/lines"
expected_sum=$(awk '{s+=$1} END {print s}' "$tmp/lines")

produce_consume() { # topic, extra producer args...
	local topic=$1
	shift
	kcat -b "$broker" -P -t "$topic" -m 30 "$@" <"$tmp/lines" || fail "produce to $topic"
	kcat -b "$broker" -C -t "$topic" -o beginning -e -q -m 30 >"$tmp/out.$topic" || fail "consume $topic"
	check "$topic: count" "$n" "$(wc -l <"$tmp/out.$topic" | tr -d ' ')"
	check "$topic: sum" "$expected_sum" "$(awk '{s+=$1} END {print s}' "$tmp/out.$topic")"
}

produce_consume kcat-plain
produce_consume kcat-idempotent -X enable.idempotence=true
for codec in gzip snappy lz4 zstd; do
	produce_consume "kcat-$codec" -z "$codec"
done

# Order within a partition is the produce order.
kcat -b "$broker" -P -t kcat-order -p 0 <"$tmp/lines" || fail "produce to one partition"
kcat -b "$broker" -C -t kcat-order -p 0 -o beginning -e -q >"$tmp/out.kcat-order" || fail "consume one partition"
check "kcat-order: order" "" "$(diff "$tmp/lines" "$tmp/out.kcat-order" | head -1)"

# A balanced consumer group of two kcat members splits the topic's four partitions.
group_member() { # name; sets member_pid
	kcat -b "$broker" -G kcat-group kcat-grouped -u -X auto.offset.reset=earliest -X auto.commit.interval.ms=200 \
		-f '%s\n' >"$tmp/group.$1" 2>"$tmp/group.$1.log" &
	member_pid=$!
}
echo 0 | kcat -b "$broker" -P -t kcat-grouped || fail "create the grouped topic" # consumers do not auto-create
group_member a
ma=$member_pid
group_member b
mb=$member_pid
assigned() { # partitions in a member's latest assignment
	grep "assigned:" "$tmp/group.$1.log" | tail -n 1 | grep -o "kcat-grouped \[" | wc -l
}
for _ in $(seq 1 300); do # until the latest assignments of a and b share the four partitions
	if [ "$(assigned a)" -gt 0 ] && [ "$(assigned b)" -gt 0 ] && [ $(($(assigned a) + $(assigned b))) -eq 4 ]; then
		break
	fi
	sleep 0.1
done
seq 1 1000 | sed 's/.*/&:&/' | kcat -b "$broker" -P -t kcat-grouped -K: || fail "produce to the grouped topic"
for _ in $(seq 1 300); do
	[ "$(cat "$tmp/group.a" "$tmp/group.b" | wc -l)" -ge 1001 ] && break
	sleep 0.1
done
check "kcat -G: every record consumed" "$(seq 0 1000)" "$(sort -n "$tmp/group.a" "$tmp/group.b")"
check "kcat -G: both members consumed" "yes" "$([ -s "$tmp/group.a" ] && [ -s "$tmp/group.b" ] && echo yes || echo no)"
kill -INT "$ma" "$mb" # members commit their offsets as they leave
wait "$ma" "$mb" || true
# Committed offsets survive the broker's SIGKILL: a new member of the same group, after
# the restart, resumes from them and finds nothing left to read.
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
pid=""
start
timeout 60 kcat -b "$broker" -G kcat-group kcat-grouped -X auto.offset.reset=earliest -e -q -f '%s\n' \
	>"$tmp/group.c" 2>/dev/null || true
check "kcat -G: committed offsets survive SIGKILL" 0 "$(wc -l <"$tmp/group.c" | tr -d ' ')"

# Keys and headers round-trip. The topic has four partitions and the two keys may hash
# to different ones, so the records are compared as a sorted set (kcat-order checks order).
printf 'k1:v1\nk2:v2\n' | kcat -b "$broker" -P -t kcat-keys -K: -H h=1 || fail "keyed produce"
keys=$(kcat -b "$broker" -C -t kcat-keys -o beginning -e -q -f '%k=%s;%h\n' | sort)
check "keys and headers" $'k1=v1;h=1\nk2=v2;h=1' "$keys"

# A compacted topic of many small segments, written by an idempotent producer: once the
# cleaner has run, a reader from the beginning gets the last value of every key, with no
# "might be too large" (librdkafka's word for a fetch of empty batches only) and no
# MaxWait at each older segment (a fetch on an older segment answers at once).
"$tmp/samsa" topics create kcat-compact --bootstrap-server "$broker" --partitions 1 --config cleanup.policy=compact \
	--config segment.bytes=4096 --config min.cleanable.dirty.ratio=0.01 --config min.compaction.lag.ms=0 \
	--config delete.retention.ms=100 >/dev/null || fail "create kcat-compact"
for round in 1 2 3 4 5; do
	seq 1 400 | awk -v r="$round" '{print "k" ($1 % 40) ":v" r "-" $1}' |
		kcat -b "$broker" -P -t kcat-compact -K: -X enable.idempotence=true -X batch.num.messages=20 || fail "produce to kcat-compact"
done
compacted=no
for _ in $(seq 1 100); do # until the cleaner has removed superseded values
	got=$(timeout 30 kcat -b "$broker" -C -t kcat-compact -o beginning -e -q -f '%k=%s\n' 2>"$tmp/compact.err" | wc -l)
	if [ "$got" -lt 2000 ]; then
		compacted=yes
		break
	fi
	sleep 0.2
done
check "kcat-compact: the cleaner ran" yes "$compacted"
start_read=$(date +%s%N)
timeout 30 kcat -b "$broker" -C -t kcat-compact -o beginning -e -q -f '%k=%s\n' >"$tmp/compact.out" 2>"$tmp/compact.err" || fail "consume kcat-compact"
read_ms=$((($(date +%s%N) - start_read) / 1000000))
check "kcat-compact: no 'too large'" 0 "$(grep -c "too large" "$tmp/compact.err" || true)"
check "kcat-compact: the last value of each key" "$(seq 1 400 | awk '{print "k" ($1 % 40) "=v5-" $1}' | tail -n 40 | sort)" \
	"$(awk -F= '{last[$1]=$0} END {for (k in last) print last[k]}' "$tmp/compact.out" | sort)"
echo "     kcat-compact: read from the beginning in $read_ms ms"

# A graceful restart keeps every record.
stop
start
kcat -b "$broker" -C -t kcat-plain -o beginning -e -q -m 30 >"$tmp/out.restart" || fail "consume after restart"
check "after restart: count" "$n" "$(wc -l <"$tmp/out.restart" | tr -d ' ')"
stop

echo "kcat-${SAMSA_TEST_TRANSPORT:-std}: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
