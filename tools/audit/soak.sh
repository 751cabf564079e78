#!/usr/bin/env bash
# samsa audit against a three-node cluster (deploy/cluster's files, run in DIR) under
# faults, with the audit's and the nodes' metrics scraped by a real Prometheus:
# every 20-40 s a random node is SIGKILLed and started again 5 s later, or SIGSTOPped
# for 10 s. At the end it prints the audit's verdict lines, the faults, and what
# Prometheus recorded (anomalies, acknowledged records, the longest time without an
# acknowledgement), and exits with the audit's status (0: no anomaly).
#
#   tools/audit/soak.sh [SECONDS (3600)] [DIR (/tmp/samsa-audit-soak)]
#
# Needs bin/samsa (make build), curl and prometheus (Debian's); uses the ports of
# deploy/cluster (9092-9293, 9644-9844), 9645 (the audit) and 9090 (Prometheus).
set -euo pipefail
dur=${1:-3600}
dir=${2:-/tmp/samsa-audit-soak}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/bin/samsa
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir"
declare -A pid
cleanup() {
	for p in "${pid[@]}" ${prom:-} ${audit:-}; do kill -CONT "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
start() { # disowned: bash does not report the SIGKILLs
	"$bin" serve --config "$root/deploy/cluster/node-$1.properties" >>"node-$1.log" 2>&1 &
	pid[$1]=$!
	disown "$!"
}

id=$("$bin" storage random-uuid)
for i in 1 2 3; do "$bin" storage format --config "$root/deploy/cluster/node-$i.properties" --cluster-id "$id" >/dev/null; done
for i in 1 2 3; do start "$i"; done
for port in 9644 9744 9844; do
	for _ in $(seq 1 600); do curl -sf "127.0.0.1:$port/ready" >/dev/null && break; sleep 0.1; done
done
cat >prom.yml <<'YML'
global: {scrape_interval: 5s}
scrape_configs:
  - job_name: audit
    static_configs: [{targets: ['127.0.0.1:9645']}]
  - job_name: samsa
    static_configs: [{targets: ['127.0.0.1:9644', '127.0.0.1:9744', '127.0.0.1:9844']}]
YML
prometheus --config.file=prom.yml --storage.tsdb.path=prom --web.listen-address=127.0.0.1:9090 >prom.log 2>&1 &
prom=$!
"$bin" audit --bootstrap-server 127.0.0.1:9092,127.0.0.1:9192,127.0.0.1:9292 --duration "${dur}s" \
	--metrics-listen 127.0.0.1:9645 --report-interval 5m >audit.log 2>&1 &
audit=$!

end=$((SECONDS + dur - 30))
kills=0 pauses=0
while [ $SECONDS -lt $end ] && kill -0 "$audit" 2>/dev/null; do
	sleep $((20 + RANDOM % 21))
	[ $SECONDS -lt $end ] || break
	n=$((1 + RANDOM % 3))
	if [ $((RANDOM % 2)) -eq 0 ]; then
		echo "$(date -u +%T) SIGKILL node $n, started again 5 s later" >>faults.log
		kill -9 "${pid[$n]}"
		sleep 5
		start "$n"
		kills=$((kills + 1))
	else
		echo "$(date -u +%T) SIGSTOP node $n for 10 s" >>faults.log
		kill -STOP "${pid[$n]}"
		sleep 10
		kill -CONT "${pid[$n]}"
		pauses=$((pauses + 1))
	fi
done
rc=0
wait "$audit" || rc=$?
q() { curl -sf --get "127.0.0.1:9090/api/v1/query" --data-urlencode "query=$1" | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(" ".join("%s=%s" % (",".join(v for k, v in x["metric"].items() if k not in ("job", "instance", "__name__")) or "value", x["value"][1]) for x in r) or "none")'; }
echo "faults: $kills SIGKILL, $pauses SIGSTOP (faults.log)"
grep -E '^audit: (VALID|INVALID)' audit.log || tail -n 5 audit.log
range="[$((dur + 120))s]"
echo "prometheus: samsa_audit_anomalies_total: $(q "max_over_time(samsa_audit_anomalies_total$range)")"
echo "prometheus: acknowledged: $(q "max_over_time(samsa_audit_records_acknowledged_total$range)")"
echo "prometheus: samsa_audit_valid min: $(q "min_over_time(samsa_audit_valid$range)")"
echo "prometheus: longest no-ack (s) per partition: $(q "max_over_time(samsa_audit_longest_no_ack_seconds$range)")"
echo "prometheus: scrapes of the nodes that failed (a node down or paused): $(q "sum(count_over_time((up{job=\"samsa\"} == 0)[$((dur + 120))s:5s]))")"
exit $rc
