#!/usr/bin/env bash
# kcat reads a tiered topic back (tiered storage, KIP-405): one broker with
# remote.log.storage.system.enable over versitygw, an S3-compatible server over a
# directory, run here as a child process (.ci/run installs it); a one-partition topic
# with remote.storage.enable, 64 KiB segments and local.retention.bytes 0 gets 20,000
# lines of 100 bytes, so that its sealed segments are copied to the store and deleted
# from the broker's disk; `kcat -C -o beginning -e` then reads every line back, in
# order, most of them from the store.
#
#   tests/kcat_tiered.sh     (needs kcat, python3 and versitygw; builds ./cmd/samsa)
set -euo pipefail

. "$(dirname "$0")/lib.sh"

command -v kcat >/dev/null || fail "kcat is not installed (apt-get install -y kcat)"
gw=$(command -v versitygw || echo "$(go env GOPATH)/bin/versitygw")
[ -x "$gw" ] || fail "versitygw is not installed (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0, as .ci/run does)"

build_samsa
s3port=$(free_port)
port=$(free_port)
admin=$(free_port)
broker="127.0.0.1:$port"
access="kcat$RANDOM$RANDOM"
secret="secret$RANDOM$RANDOM$RANDOM"

mkdir -p "$tmp/s3/tiered" # the bucket: a directory of the posix backend's root
"$gw" --port "127.0.0.1:$s3port" --access "$access" --secret "$secret" --quiet posix "$tmp/s3" >"$tmp/versitygw.log" 2>&1 &
store_pid=$!
for i in $(seq 1 100); do # until it accepts connections (10 s)
	(exec 3<>"/dev/tcp/127.0.0.1/$s3port") 2>/dev/null && break
	kill -0 "$store_pid" 2>/dev/null || fail "versitygw exited: $(cat "$tmp/versitygw.log")"
	[ "$i" -lt 100 ] || fail "versitygw did not listen on 127.0.0.1:$s3port within 10 s"
	sleep 0.1
done

start_broker --data-dir "$tmp/data" --listen "$broker" --admin-listen "127.0.0.1:$admin" \
	--set remote.log.storage.system.enable=true --set remote.log.manager.task.interval.ms=200 \
	--set rsm.config.storage.s3.bucket.name=tiered --set rsm.config.storage.s3.region=us-east-1 \
	--set "rsm.config.storage.s3.endpoint.url=http://127.0.0.1:$s3port" --set rsm.config.storage.s3.path.style.access.enabled=true \
	--set "rsm.config.storage.aws.access.key.id=$access" --set "rsm.config.storage.aws.secret.access.key=$secret" \
	--set rsm.config.chunk.size=4194304 --set rlmm.config.remote.log.metadata.topic.num.partitions=3
wait_ready


"$tmp/samsa" topics create kcat-tiered --bootstrap-server "$broker" --partitions 1 --config remote.storage.enable=true \
	--config segment.bytes=65536 --config local.retention.bytes=0 --config retention.ms=-1 >/dev/null || fail "create kcat-tiered"
n=20000
pad=$(printf '%0.s.' $(seq 1 91))
seq 1 "$n" | awk -v pad="$pad" '{printf "%08d %s\n", $1, pad}' >"$tmp/lines"
# Batches of 100 lines (11 KB): a batch larger than segment.bytes is refused (MESSAGE_TOO_LARGE, as Kafka does).
kcat -b "$broker" -P -t kcat-tiered -p 0 -X batch.num.messages=100 <"$tmp/lines" || fail "produce to kcat-tiered"

# The copies, then the local deletions: the broker's oldest local segment starts past
# the first half of the lines (a deleted segment is renamed *.log.deleted first).
part="$tmp/data/logs/kcat-tiered-0"
[ -d "$part" ] || fail "no partition directory $part"
local_start=0
for _ in $(seq 1 300); do # up to 30 s
	first=$(cd "$part" && ls -- *.log 2>/dev/null | sort | head -n 1 || true)
	[ -n "$first" ] && local_start=$((10#${first%.log}))
	[ "$local_start" -ge $((n / 2)) ] && break
	sleep 0.1
done
copies=$(find "$tmp/s3/tiered" -name '*.log' | wc -l | tr -d ' ')
echo "     kcat-tiered: $copies segments copied to the store, the local log starts at offset $local_start of $n"
check "kcat-tiered: most of the log only in the store" yes "$([ "$local_start" -ge $((n / 2)) ] && [ "$copies" -gt 0 ] && echo yes || echo no)"

start_read=$(date +%s%N)
timeout 60 kcat -b "$broker" -C -t kcat-tiered -p 0 -o beginning -e -q >"$tmp/out.kcat-tiered" 2>"$tmp/tiered.err" || fail "consume kcat-tiered: $(tail -n 5 "$tmp/tiered.err")"
read_ms=$((($(date +%s%N) - start_read) / 1000000))
check "kcat-tiered: count" "$n" "$(wc -l <"$tmp/out.kcat-tiered" | tr -d ' ')"
check "kcat-tiered: every line once, in order" "" "$(diff "$tmp/lines" "$tmp/out.kcat-tiered" | head -n 1)"
echo "     kcat-tiered: read from the beginning in $read_ms ms"

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[ "$rc" -eq 0 ] || fail "broker exited with status $rc on SIGTERM"
kill -KILL "$store_pid"
wait "$store_pid" 2>/dev/null || true
store_pid=""

echo "kcat-tiered: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
