#!/usr/bin/env bash
# Every command shown in README.md, BENCHMARKS.md, docs/DEPLOY.md and the section
# "Upgrading and resizing" of docs/CLUSTER.md works as written from a fresh
# clone. This test clones the repository (plus the working tree's uncommitted files,
# unless SAMSA_COMMANDS_FROM_HEAD=1), and in the clone runs each command verbatim, or
# in a short form: shorter durations, fewer rounds, smaller sizes, with every flag,
# variable and path of the documented command kept (the test checks that).
#
# A command is each line of a fenced code block (a trailing backslash continues it,
# `# ...` is a comment) and each inline code span that starts with a program these
# docs run (make, go, kcat, git, samsa, samsa-bench, bin/..., ./...). The steps below
# must cover exactly the commands the docs show: a new command in the docs fails this
# test until a step runs it; a step whose command left the docs fails it too.
#
#   tests/commands.sh      (as root it runs in a private network namespace, so the
#                           documented default ports 9092 and 9644 are free; needs
#                           kcat, git and python3)
set -euo pipefail
. "$(dirname "$0")/netns.sh"
private_netns "$@"

root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
bg_pids=()
cleanup() {
	local p
	for p in "${bg_pids[@]}"; do # process groups of bg and serving
		kill -TERM -- "-$p" 2>/dev/null || true
	done
	for p in $(jobs -p); do # what a documented line started with &
		kill -TERM "$p" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	[ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

command -v kcat >/dev/null || fail "kcat is not installed (apt-get install -y kcat)"
if [ -z "${SAMSA_TEST_NETNS:-}" ]; then
	for p in 9092 9644 19092 19644; do
		port_free "$p" || fail "127.0.0.1:$p is taken on this machine and the documented commands use it: run as root (a private network namespace) or free it"
	done
fi

# --- a fresh clone -------------------------------------------------------------------
clone=$tmp/samsa
git clone -q "$root" "$clone"
if [ -z "${SAMSA_COMMANDS_FROM_HEAD:-}" ]; then
	(cd "$root" && git ls-files -z --cached --others --exclude-standard |
		tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$clone"
fi
cd "$clone"

# --- the commands the docs show -------------------------------------------------------
/usr/bin/python3 - README.md BENCHMARKS.md "docs/CLUSTER.md#Upgrading and resizing" docs/DEPLOY.md >"$tmp/doc-commands" <<'PY'
import re, sys

PROGRAMS = re.compile(r"^(make|go|kcat|git|samsa|samsa-bench|bin/\S+|\./\S+)\s")

def strip_comment(line):
    q = None
    for i, c in enumerate(line):
        if q:
            if c == q:
                q = None
        elif c in "'\"":
            q = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line

def section(text, heading):
    # The lines under "## heading" up to the next heading of its level or above.
    out, inside = [], False
    for line in text.split("\n"):
        m = re.match(r"^(#+) (.*)$", line)
        if m and inside and len(m.group(1)) <= 2:
            break
        if m and m.group(2).strip() == heading:
            inside = True
            continue
        if inside:
            out.append(line)
    return "\n".join(out)

for arg in sys.argv[1:]:
    path, _, heading = arg.partition("#")
    text = open(path, encoding="utf-8").read()
    if heading:
        text = section(text, heading)
    seen = []
    block, cont, prose = False, "", []
    for line in text.split("\n"):
        if line.startswith("```"):
            block = not block
            prose.append("")
            continue
        if not block:
            prose.append(line)
            continue
        s = (cont + " " + line.strip()) if cont else line.rstrip()
        cont = ""
        if s.endswith("\\"):
            cont = s[:-1].rstrip()
            continue
        s = " ".join(strip_comment(s).split())
        if s:
            seen.append(s)
    for para in "\n".join(prose).split("\n\n"):
        for span in re.findall(r"`([^`]+)`", para):
            span = " ".join(span.split())
            if PROGRAMS.match(span):
                seen.append(span)
    for s in dict.fromkeys(seen):
        print(path + "\t" + s)
PY
cut -f2 "$tmp/doc-commands" | sort -u >"$tmp/doc-set"

# --- steps ---------------------------------------------------------------------------
# step DOC [FORM]    run FORM (default: DOC verbatim) with bash in the clone, bounded in
#                    time; DOC is the command as the docs show it.
# here DOC [FORM]    the same, evaluated in this shell: for lines that start a job in
#                    the background or set a variable that a later line uses.
# skip DOC REASON    a documented command this test does not run, and why.
# expect REGEX       the last step's output has a line matching REGEX.
# Anything else between steps is this test's own set-up and checks, not a documented
# command.
mode=collect
passed=0 skipped=0 n=0
: >"$tmp/registered"
last=""

# flags_kept DOC FORM: every flag (-x, --x) and VAR= of DOC is in FORM too.
flags_kept() {
	local t
	set -f
	for t in $1; do
		case $t in
		-[[:alpha:]]* | --[[:alpha:]]*) t=${t%%=*} ;;
		[[:upper:]_]*=*) ;;
		*) continue ;;
		esac
		case " $2 " in *" $t "* | *" $t="*) ;; *) fail "step for \`$1\`: its short form \`$2\` drops $t" ;; esac
	done
	set +f
}

register() {
	echo "$1" >>"$tmp/registered"
	[ -z "${2+x}" ] || flags_kept "$1" "$2"
}

# run_form WHERE FORM: WHERE is bash (a child shell, 10 minutes at most) or here.
run_form() {
	n=$((n + 1))
	last=$tmp/step-$n.log
	local rc=0 t0=$SECONDS
	echo "== $2"
	if [ "$1" = here ]; then
		eval "$2" >"$last" 2>&1 </dev/null || rc=$?
	else
		timeout 600 bash -c "$2" >"$last" 2>&1 </dev/null || rc=$?
	fi
	if [ "$rc" -ne 0 ]; then
		tail -n 40 "$last" >&2
		fail "\`$2\` exited $rc (output above; all of it in $last with KEEP_TMP=1)"
	fi
	passed=$((passed + 1))
	[ $((SECONDS - t0)) -lt 5 ] || echo "   ($((SECONDS - t0)) s)"
}

step() {
	if [ $mode = collect ]; then register "$@"; else run_form bash "${2:-$1}"; fi
}
here() {
	if [ $mode = collect ]; then register "$@"; else run_form here "${2:-$1}"; fi
}
skip() {
	if [ $mode = collect ]; then
		echo "$1" >>"$tmp/registered"
	else
		echo "== skipped: $1 ($2)"
		skipped=$((skipped + 1))
	fi
}
expect() {
	[ $mode = run ] || return 0
	grep -qE -- "$1" "$last" || {
		tail -n 40 "$last" >&2
		fail "the output of step $n has no line matching /$1/"
	}
}
# own CMD...: this test's set-up, run only when the steps run.
own() {
	[ $mode = run ] || return 0
	"$@"
}

# bg CMD: CMD in the background in its own process group, stopped at the end at the
# latest (stop_bg stops the newest one sooner).
bg() {
	setsid bash -c "$1" >"$tmp/bg-${#bg_pids[@]}.log" 2>&1 </dev/null &
	bg_pids+=($!)
}
stop_bg() {
	local p=${bg_pids[-1]} rc=0
	kill -TERM -- "-$p" 2>/dev/null || true
	wait "$p" 2>/dev/null || rc=$?
	unset 'bg_pids[-1]'
	[ "$rc" -eq 0 ] || [ "$rc" -eq 143 ] || fail "the background command ended with status $rc: $(tail -n 5 "$tmp/bg-${#bg_pids[@]}.log")"
	gone "$p"
}
# gone PGID: wait until no process of the group is left (30 s at most), so that the
# next broker does not meet this one's data directory or ports.
gone() {
	local i
	for i in $(seq 1 300); do
		kill -0 -- "-$1" 2>/dev/null || return 0
		sleep 0.1
	done
	fail "process group $1 still running 30 s after SIGTERM"
}
# wait_kafka HOST:PORT: until a broker answers metadata there (60 s at most).
wait_kafka() {
	local i
	for i in $(seq 1 600); do
		kcat -b "$1" -L -m 1 >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	fail "no broker answered on $1 within 60 s"
}
# serving CMD: `make run`'s short form: start CMD, wait until its broker is serving
# after the benchmark, Ctrl-C it (SIGINT to its process group), and check the broker
# said it stopped cleanly.
serving() {
	local log=$tmp/serving-$n.log i rc=0 why=""
	setsid bash -c "$1" >"$log" 2>&1 </dev/null &
	local pid=$!
	bg_pids+=("$pid")
	for i in $(seq 1 1200); do
		grep -q "== broker serving on" "$log" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	grep -q "== broker serving on" "$log" || why="make run was not serving after the benchmark"
	kill -INT -- "-$pid" 2>/dev/null || true # Ctrl-C
	wait "$pid" || rc=$?
	gone "$pid"
	unset 'bg_pids[-1]'
	cat "$log"
	[ -n "$why" ] || grep -q 'msg=stopped' "$log" || why="the broker did not stop cleanly on Ctrl-C (exit $rc)"
	[ -z "$why" ] || {
		echo "$why"
		return 1
	}
}

# wait_bg_log REGEX: until the newest background command's output has a line matching
# REGEX (90 s at most).
wait_bg_log() {
	local log=$tmp/bg-$((${#bg_pids[@]} - 1)).log i
	for i in $(seq 1 900); do
		grep -qE -- "$1" "$log" && return 0
		sleep 0.1
	done
	tail -n 20 "$log" >&2
	fail "the background command printed no line matching /$1/ within 90 s"
}
# wait_ready ADMIN: until the admin listener at ADMIN answers /ready?isr=true with 200
# (60 s at most).
wait_ready() {
	local i
	for i in $(seq 1 600); do
		curl -sf "http://$1/ready?isr=true" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	fail "http://$1/ready?isr=true did not answer 200 within 60 s"
}
# wait_describe BOOTSTRAP TOPIC REGEX COUNT: until samsa topics describe TOPIC, asked
# at BOOTSTRAP, prints COUNT partition lines matching REGEX (60 s at most).
wait_describe() {
	local i out=""
	for i in $(seq 1 600); do
		out=$(bin/samsa topics describe "$2" --bootstrap-server "$1" 2>&1 || true)
		[ "$(grep -E 'Partition: ' <<<"$out" | grep -cE -- "$3" || true)" -ge "$4" ] && return 0
		sleep 0.1
	done
	echo "$out" >&2
	fail "topics describe $2 at $1: not $4 partitions matching /$3/ within 60 s"
}
# wait_count BOOTSTRAP TOPIC N: until kcat reads N records of TOPIC to its end (the
# partitions' high watermarks), 30 s at most: after a failover the new leaders' high
# watermarks reach the acknowledged records once the remaining followers fetched.
wait_count() {
	local i got=0
	for i in $(seq 1 300); do
		got=$(kcat -b "$1" -C -t "$2" -o beginning -e -q 2>/dev/null | wc -l || true)
		[ "$got" -ge "$3" ] && return 0
		sleep 0.1
	done
	fail "kcat read $got of $3 records of $2 at $1 within 30 s"
}

short='--duration 1s --warmup 0s'
# Short forms in time: every broker these commands start forms consumer groups at once
# instead of after Kafka's 3 s group.initial.rebalance.delay.ms.
export SAMSA_GROUP_INITIAL_REBALANCE_DELAY_MS=0
steps() {
	# README.md
	step 'make build'
	skip 'make test' 'the command that runs this test'
	skip 'helm install samsa deploy/kubernetes/samsa --set clusterId=$(bin/samsa storage random-uuid)' 'needs a Kubernetes cluster; TestHelmChart renders the chart and runs its pods as processes'
	skip 'kubectl apply -f deploy/kubernetes/samsa.yaml' 'needs a Kubernetes cluster; TestHelmChart checks the manifest is the chart rendered'
	skip 'kubectl create secret generic samsa-tls --from-file=tls-combined.pem=node.pem --from-file=ca.crt=ca.pem' 'needs a Kubernetes cluster; TestHelmChartSecure gives the pods this Secret'
	skip 'kubectl create secret generic samsa-users --from-literal=broker=$(openssl rand -hex 16) --from-literal=admin=admin-secret' 'needs a Kubernetes cluster; TestHelmChartSecure gives the pods this Secret'
	skip "helm install samsa deploy/kubernetes/samsa --set clusterId=\$(bin/samsa storage random-uuid) --set tls.enabled=true --set tls.secretName=samsa-tls --set sasl.enabled=true --set sasl.secretName=samsa-users --set 'sasl.users={admin}'" 'needs a Kubernetes cluster; TestHelmChartSecure renders the chart with these values and runs its pods as processes'
	skip "bin/samsa cluster roll --bootstrap-server 10.0.0.1:9092 --restart-command 'ssh {host} sudo systemctl restart samsa'" 'needs nodes under systemd on other hosts; TestProcClusterRoll runs the roll with a restart command that stops a node with SIGTERM and starts it again'
	skip 'install -m 0755 bin/samsa /usr/local/bin/samsa' 'installs into the system; TestSystemdUnit runs the unit with this build'
	skip 'install -m 0644 deploy/systemd/samsa.service /etc/systemd/system/' 'needs systemd as PID 1; TestSystemdUnit verifies the unit'
	skip 'useradd --system --home-dir /var/lib/samsa --shell /usr/sbin/nologin samsa' 'changes the system; the unit runs as this user'
	skip 'systemctl daemon-reload && systemctl enable --now samsa' 'needs systemd as PID 1; TestSystemdUnit runs ExecStart and ExecStop'
	skip 'make image' 'needs podman or docker; TestContainerImage (cmd/samsa) runs it where one is installed'
	skip 'podman run -d --name samsa -p 9092:9092 -p 9644:9644 -e SAMSA_ADVERTISED_LISTENERS=127.0.0.1:9092 samsa:dev' 'needs a container runtime; TestContainerImage runs the image the same way, on free ports'
	skip 'make test-commands' 'the command that runs this test'
	skip 'go test -count=1 -run TestProcRollingUpgrade -v ./cmd/samsa' 'make test runs it (go test ./cmd/samsa)'
	here 'make build && bin/samsa serve &' 'bg "make build && bin/samsa serve"'
	own wait_kafka 127.0.0.1:9092
	step 'kcat -b 127.0.0.1:9092 -L'
	expect 'broker 1 at 127.0.0.1:9092'
	step 'seq 1 100000 | kcat -b 127.0.0.1:9092 -P -t lines'
	step 'kcat -b 127.0.0.1:9092 -C -t lines -o beginning -e -q | wc -l'
	expect '^100000$'
	step 'kcat -b 127.0.0.1:9092 -G readers lines -X auto.offset.reset=earliest -e -q | wc -l'
	expect '^100000$'
	step 'bin/samsa groups list'
	expect 'readers'
	step 'bin/samsa groups describe readers'
	step 'bin/samsa groups lag readers'
	expect 'lines'
	step 'bin/samsa groups reset-offsets readers --topic lines --to-earliest'
	step 'bin/samsa groups reset-offsets readers --topic lines --to-earliest --execute'
	step 'bin/samsa groups delete readers'
	step 'bin/dumplog -index-sanity-check data/logs/lines-0/00000000000000000000.log'
	step 'bin/dumplog -print-data-log data/logs/lines-0/00000000000000000000.log | head'
	expect 'baseOffset|offset'
	# README.md, transactions and users: a confluent-kafka producer leaves a
	# transaction open on lines-0, after the quickstart's 100000 records
	own /usr/bin/python3 - <<'PY'
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": "127.0.0.1:9092", "transactional.id": "loader", "transaction.timeout.ms": 600000})
p.init_transactions(30)
p.begin_transaction()
p.produce("lines", b"left open", partition=0)
if p.flush(30) != 0:
    raise SystemExit("the transactional record was not delivered")
PY
	step 'bin/samsa transactions list'
	expect '^loader +1 +[0-9]+ +Ongoing$'
	step 'bin/samsa transactions describe --transactional-id loader'
	expect 'Ongoing +600000 +[0-9]+ +[0-9]+ +lines-0$'
	step 'bin/samsa transactions describe-producers --topic lines --partition 0'
	expect ' 100000$'
	step 'bin/samsa transactions find-hanging --broker-id 1 --max-transaction-timeout 0'
	expect '^Topic +Partition +ProducerId'
	step 'bin/samsa transactions abort --topic lines --partition 0 --start-offset 100000'
	expect '^Aborted the transaction of producer [0-9]+ .* on lines-0'
	step 'bin/samsa users set --user alice --mechanism SCRAM-SHA-512 --password alice-secret'
	expect '^Set the SCRAM-SHA-512 credential of user alice'
	step 'bin/samsa users list'
	expect '^alice +SCRAM-SHA-512=iterations=4096$'
	step 'bin/samsa users delete --user alice'
	expect '^Deleted the SCRAM-SHA-512 credential of user alice'
	step 'bin/samsa quotas alter --user alice --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152'
	expect "^Completed updating quotas of user 'alice'"
	step 'bin/samsa quotas describe'
	expect "^user 'alice' +consumer_byte_rate=2097152,producer_byte_rate=1048576$"
	step 'bin/samsa configs --entity-type groups --entity-name readers --alter --add-config consumer.heartbeat.interval.ms=6000'
	expect '^Completed updating config for group readers\.$'
	step 'bin/samsa configs --entity-type groups --entity-name readers --describe'
	expect '^  consumer\.heartbeat\.interval\.ms=6000 sensitive=false synonyms=\{GROUP_CONFIG:consumer\.heartbeat\.interval\.ms=6000'
	# README.md, Auditing a cluster, with the quickstart's broker
	step 'bin/samsa audit --bootstrap-server 127.0.0.1:9092 --duration 10s' \
		'bin/samsa audit --bootstrap-server 127.0.0.1:9092 --duration 3s'
	expect '^audit: topic samsa-audit-canary: 3 partitions, replication factor 1 \(created\)'
	expect '^audit: VALID \(no anomalies\) over [0-9.]+s: [1-9][0-9]* produced, .* lost 0, duplicated 0, reordered 0, aborted-read 0, phantom 0, unseen 0; e2e p50 '
	here 'bin/samsa audit --bootstrap-server 127.0.0.1:9092 --metrics-listen 127.0.0.1:9645 --report-interval 1m &' \
		'bg "bin/samsa audit --bootstrap-server 127.0.0.1:9092 --metrics-listen 127.0.0.1:9645 --report-interval 1s"'
	own wait_bg_log '^audit: VALID \(no anomalies\) in the first [0-9.]+s: [1-9][0-9]* produced'
	own run_form bash "/usr/bin/python3 -c 'import urllib.request; print(urllib.request.urlopen(\"http://127.0.0.1:9645/metrics\").read().decode())'"
	expect '^samsa_audit_records_acknowledged_total\{producer="transactional"\} [1-9]'
	expect '^samsa_audit_anomalies_total\{kind="lost"\} 0$'
	expect '^samsa_audit_valid 1$'
	own stop_bg # SIGTERM: the audit drains and exits 0 with its verdict (1 would fail here)
	# docs/DEPLOY.md, a rolling restart: the quickstart's broker answers its probe
	step 'curl -sf http://127.0.0.1:9644/ready?isr=true'
	expect '^ready: broker [0-9]+, epoch [0-9]+, metadata offset [0-9]+, in every ISR of its replicas$'
	here 'bin/samsa-bench kfake-serve --listen 127.0.0.1:9192 &' 'bg "bin/samsa-bench kfake-serve --listen 127.0.0.1:9192"'
	own wait_kafka 127.0.0.1:9192
	step 'bin/samsa audit --bootstrap-server 127.0.0.1:9192 --duration 10s' \
		'bin/samsa audit --bootstrap-server 127.0.0.1:9192 --duration 3s'
	expect '^audit: VALID \(no anomalies\) over [0-9.]+s: [1-9][0-9]* produced, .* lost 0, duplicated 0, reordered 0, aborted-read 0, phantom 0, unseen 0; e2e p50 '
	own stop_bg
	# README.md, Pipelines, with the quickstart's broker
	skip 'make test-pipelines' 'make test runs it (its test: line); the lines below run the pipelines'
	step '(cd examples/benthos && go build -o ../../bin/samsa-benthos ./cmd/samsa-benthos)'
	here 'bin/samsa-benthos run examples/benthos/pipeline.yaml &' 'bg "bin/samsa-benthos run examples/benthos/pipeline.yaml"'
	step "echo '{\"id\":1,\"customer\":\"ada\",\"price_cents\":250,\"quantity\":3}' | kcat -b 127.0.0.1:9092 -P -t orders -k order-1"
	own wait_count 127.0.0.1:9092 orders-enriched 1
	step 'kcat -b 127.0.0.1:9092 -C -t orders-enriched -o beginning -c 1 -q'
	expect '"customer":"ADA".*"total_cents":750'
	own stop_bg
	here 'go run ./examples/wordcount/cmd/wordcount &' 'bg "go run ./examples/wordcount/cmd/wordcount"'
	own wait_bg_log 'restored the counts from the changelog'
	step "echo 'the cat and the hat' | kcat -b 127.0.0.1:9092 -P -t sentences"
	own wait_count 127.0.0.1:9092 word-counts 4
	step "kcat -b 127.0.0.1:9092 -C -t word-counts -o beginning -c 4 -q -f '%k %s\\n'"
	expect '^the 2$'
	expect '^hat 1$'
	own stop_bg
	own stop_bg
	# samsa scrub (RELIABILITY.md, tools/chaos/FINDINGS.md) over the log dirs of the
	# broker just stopped
	own run_form bash 'bin/samsa scrub --log-dirs data/logs'
	expect '^no damage found$'
	step 'bin/samsa serve -h'
	here 'make run' "serving 'make run RUN_DURATION=1s RUN_WARMUP=0s'"
	expect 'broker CPU and RSS from /proc/'
	here 'make run LISTEN=127.0.0.1:19092 ADMIN=127.0.0.1:19644 DATA=$(mktemp -d)' \
		"serving 'make run LISTEN=127.0.0.1:19092 ADMIN=127.0.0.1:19644 DATA=\$(mktemp -d) RUN_DURATION=1s RUN_WARMUP=0s'"
	expect 'benchmark: .* against the broker on 127.0.0.1:19092'
	step 'make bench' "make bench BENCH_ARGS='$short'"
	step 'make fuzz' 'make fuzz FUZZPKGS=./bench FUZZTIME=1x'
	expect '^ok .*/bench'
	step 'make lint'
	step 'make test-franz' 'make test-franz FRANZ_RUN=TestIssue769 FRANZ_NODES=1'
	expect '^one-node: 1 passed, 0 failed'

	# README.md, Cluster: three nodes from deploy/cluster/, an RF 3 topic, a node killed
	here 'id=$(bin/samsa storage random-uuid)'
	here 'bin/samsa storage format --config deploy/cluster/node-1.properties --cluster-id $id'
	expect '^Formatting log directory data/node-1/logs for cluster '
	here 'bin/samsa storage format --config deploy/cluster/node-2.properties --cluster-id $id'
	here 'bin/samsa storage format --config deploy/cluster/node-3.properties --cluster-id $id'
	here 'bin/samsa serve --config deploy/cluster/node-1.properties & node1=$!'
	here 'bin/samsa serve --config deploy/cluster/node-2.properties & node2=$!'
	here 'bin/samsa serve --config deploy/cluster/node-3.properties & node3=$!'
	own wait_kafka 127.0.0.1:9092
	own wait_kafka 127.0.0.1:9192
	own wait_kafka 127.0.0.1:9292
	step 'bin/samsa cluster describe'
	expect '^3 +127\.0\.0\.1 +9292 '
	step 'bin/samsa topics create orders --partitions 3 --replication-factor 3'
	expect 'Created topic orders'
	step 'seq 1 1000 | kcat -b 127.0.0.1:9092 -P -t orders -X acks=all'
	step 'bin/samsa topics describe orders'
	expect 'PartitionCount: 3.*ReplicationFactor: 3'
	here 'kill -9 $node1'
	own wait_describe 127.0.0.1:9192 orders 'Leader: [23].*Offline: 1' 3
	step 'bin/samsa topics describe orders --bootstrap-server 127.0.0.1:9192'
	expect 'Offline: 1'
	own wait_count 127.0.0.1:9192 orders 1000
	step 'kcat -b 127.0.0.1:9192 -C -t orders -o beginning -e -q | wc -l'
	expect '^1000$'
	here 'bin/samsa serve --config deploy/cluster/node-1.properties & node1=$!'
	own wait_kafka 127.0.0.1:9092
	own wait_describe 127.0.0.1:9192 orders 'Isr: [123],[123],[123]\s' 3
	# docs/DEPLOY.md, a rolling restart: the plan of a roll of the same three nodes
	own wait_ready 127.0.0.1:9644
	step 'bin/samsa cluster roll --dry-run'
	expect '^rolling 3 nodes: 1 \(admin 127\.0\.0\.1:9644\), 2 \(admin 127\.0\.0\.1:9744\), 3 \(admin 127\.0\.0\.1:9844\); the active controller is node [123], restarted last$'
	# docs/CLUSTER.md, Upgrading and resizing: the same three nodes' feature levels
	step 'bin/samsa features describe'
	expect '^Feature: metadata\.version.SupportedMinVersion: 3\.9-IV0.SupportedMaxVersion: 4\.4-IV2.FinalizedVersionLevel: 4\.4-IV2.Epoch: [0-9]+$'
	expect '^Feature: transaction\.version.SupportedMinVersion: 0.SupportedMaxVersion: 2.FinalizedVersionLevel: 2.Epoch: [0-9]+$'
	step 'bin/samsa features version-mapping --release-version 4.2'
	expect '^metadata\.version=29 \(4\.2\)$'
	expect '^share\.version=1$'
	step 'bin/samsa features downgrade --feature transaction.version=1'
	expect '^transaction\.version was downgraded to 1\.$'
	step 'bin/samsa features upgrade --feature transaction.version=2 --dry-run'
	expect '^transaction\.version can be upgraded to 2\.$'
	step 'bin/samsa features upgrade --feature transaction.version=2'
	expect '^transaction\.version was upgraded to 2\.$'
	step 'bin/samsa features disable --feature streams.version --dry-run'
	expect '^streams\.version can be disabled\.$'
	step 'bin/samsa features upgrade --release-version 4.4'
	expect '^metadata\.version was upgraded to 33\.$'
	here 'kill $node1 $node2 $node3' 'kill $node1 $node2 $node3 && wait $node1 $node2 $node3'
	# docs/CLUSTER.md, Resizing the controller quorum: deploy/quorum/'s dynamic quorum
	# grown from one controller to three, then one removed
	here 'id=$(bin/samsa storage random-uuid)'
	here 'bin/samsa storage format --config deploy/quorum/controller-1.properties --cluster-id $id --standalone'
	expect '^A dynamic controller quorum \(kraft\.version 1\) whose only voter is node 1, directory '
	here 'bin/samsa storage format --config deploy/quorum/controller-2.properties --cluster-id $id --no-initial-controllers'
	expect '^A controller of a dynamic quorum \(kraft\.version 1\), directory '
	here 'bin/samsa storage format --config deploy/quorum/controller-3.properties --cluster-id $id --no-initial-controllers'
	here 'bin/samsa storage format --config deploy/quorum/broker-4.properties --cluster-id $id'
	here 'bin/samsa serve --config deploy/quorum/controller-1.properties &' 'bin/samsa serve --config deploy/quorum/controller-1.properties & q1=$!'
	here 'bin/samsa serve --config deploy/quorum/controller-2.properties &' 'bin/samsa serve --config deploy/quorum/controller-2.properties & q2=$!'
	here 'bin/samsa serve --config deploy/quorum/controller-3.properties &' 'bin/samsa serve --config deploy/quorum/controller-3.properties & q3=$!'
	here 'bin/samsa serve --config deploy/quorum/broker-4.properties &' 'bin/samsa serve --config deploy/quorum/broker-4.properties & b4=$!'
	own wait_kafka 127.0.0.1:9592
	step 'bin/samsa metadata-quorum --bootstrap-controller 127.0.0.1:9593 describe --status'
	expect '^CurrentVoters: +\[\{"id":1,"directoryId":"[A-Za-z0-9_-]{22}","endpoints":\["CONTROLLER://127\.0\.0\.1:9593"\]\}\]$'
	step 'bin/samsa metadata-quorum --bootstrap-controller 127.0.0.1:9593 --command-config deploy/quorum/controller-2.properties add-controller'
	expect '^Added controller 2 with directory id [A-Za-z0-9_-]{22} and endpoints: CONTROLLER://127\.0\.0\.1:9693$'
	step 'bin/samsa metadata-quorum --bootstrap-server 127.0.0.1:9592 --command-config deploy/quorum/controller-3.properties add-controller'
	expect '^Added controller 3 with directory id '
	step 'bin/samsa metadata-quorum --bootstrap-server 127.0.0.1:9592 describe --replication'
	expect '^3 +[A-Za-z0-9_-]{22} +[0-9]+ +[0-9]+ .* Follower$'
	here "dir3=\$(bin/samsa storage info --config deploy/quorum/controller-3.properties | awk '/meta/ {print \$4}')"
	here 'bin/samsa metadata-quorum --bootstrap-controller 127.0.0.1:9593,127.0.0.1:9693 remove-controller --controller-id 3 --controller-directory-id $dir3'
	expect '^Removed KRaft controller 3 with directory id [A-Za-z0-9_-]{22}$'
	own eval 'kill $q1 $q2 $q3 $b4; wait $q1 $q2 $q3 $b4 || true'
	here 'make cluster' 'bg "make cluster CLUSTER_DATA=$tmp/cluster-data"'
	own wait_bg_log 'cluster .* ready: --bootstrap-server 127\.0\.0\.1:[0-9]+,127\.0\.0\.1:[0-9]+,127\.0\.0\.1:[0-9]+'
	own stop_bg
	# README.md, Metrics
	step 'go test -run TestMetrics ./net/node'
	expect '^ok '

	# BENCHMARKS.md
	step 'go test -c -o remote.test ./engine/remote'
	skip "for i in 1 2 3 4 5 6; do ./remote.test -test.run '^\$' -test.bench BenchmarkClient -test.benchtime 5x; done" 'minutes of uploads to versitygw; make test runs the package tests'
	step 'bin/samsa-bench limits --dir /tmp/bench' 'bin/samsa-bench limits --dir /tmp/bench --size-mb 8'
	expect 'sendfile'
	step 'bin/samsa-bench compare --targets samsa,kfake-proc,kfake --samsa-bin bin/samsa --workload max-throughput-100b --rounds 3 --duration 10s --warmup 3s --raw' \
		'bin/samsa-bench compare --targets samsa,kfake-proc,kfake --samsa-bin bin/samsa --workload max-throughput-100b --rounds 1 --duration 1s --warmup 0s --raw'
	expect 'higher is better'
	here 'bin/samsa serve --data-dir bench-out/broker-data & broker=$!'
	own wait_kafka 127.0.0.1:9092
	here 'bin/samsa-bench run --brokers 127.0.0.1:9092 --pid $broker --admin http://127.0.0.1:9644 --duration 10s --summary' \
		"bin/samsa-bench run --brokers 127.0.0.1:9092 --pid \$broker --admin http://127.0.0.1:9644 --duration 1s --warmup 0s --summary"
	expect '^verdict: ok$'
	expect 'broker [0-9.]+ µs/msg'
	here 'kill -INT $broker' 'kill -INT $broker && wait $broker'
	step 'bin/samsa-bench compare --targets samsa --samsa-bin bin/samsa --workload max-throughput-100b --rounds 1 --duration 10s --warmup 3s --raw -q' \
		'bin/samsa-bench compare --targets samsa --samsa-bin bin/samsa --workload max-throughput-100b --rounds 1 --duration 1s --warmup 0s --raw -q'
	step 'bin/samsa-bench compare --targets samsa@sync=fsync,samsa@sync=none --samsa-bin bin/samsa --workload max-throughput-100b --rounds 3 --duration 10s --warmup 3s --raw' \
		'bin/samsa-bench compare --targets samsa@sync=fsync,samsa@sync=none --samsa-bin bin/samsa --workload max-throughput-100b --rounds 1 --duration 1s --warmup 0s --raw'
	step 'bin/samsa-bench compare --targets samsa@transport=reactor,samsa@transport=std --samsa-bin bin/samsa --workload max-throughput-100b --rounds 3 --duration 10s --warmup 3s --raw' \
		'bin/samsa-bench compare --targets samsa@transport=reactor,samsa@transport=std --samsa-bin bin/samsa --workload max-throughput-100b --rounds 1 --duration 1s --warmup 0s --raw'
	step 'bin/samsa-bench compare --targets samsa,samsa@security=SSL,samsa@security=SASL_SSL --samsa-bin bin/samsa --workload max-throughput-100b --rounds 3 --duration 10s --warmup 3s' \
		'bin/samsa-bench compare --targets samsa,samsa@security=SSL,samsa@security=SASL_SSL --samsa-bin bin/samsa --workload max-throughput-100b --rounds 1 --duration 1s --warmup 0s'
	expect 'SASL_SSL'
	step 'go test -c -o /tmp/t.test ./net/transport && /tmp/t.test -test.run '"'^\$'"' -test.bench '"'Transport/'"' -test.benchtime 1s' \
		'go test -c -o /tmp/t.test ./net/transport && /tmp/t.test -test.run '"'^\$'"' -test.bench '"'Transport/'"' -test.benchtime 1x'
	step 'bin/samsa-bench compare --targets samsa,samsa@set=samsa.log.flush.concurrent.rounds=4,kfake-proc --samsa-bin bin/samsa --workload latency-20k --rounds 3 --duration 15s --warmup 3s' \
		'bin/samsa-bench compare --targets samsa,samsa@set=samsa.log.flush.concurrent.rounds=4,kfake-proc --samsa-bin bin/samsa --workload latency-20k --rounds 1 --duration 1s --warmup 0s'
	step 'bin/samsa-bench compare --targets samsa,kfake-proc --samsa-bin bin/samsa --workload latency-20k --rounds 2 --duration 15s --warmup 3s' \
		'bin/samsa-bench compare --targets samsa,kfake-proc --samsa-bin bin/samsa --workload latency-20k --rounds 1 --duration 1s --warmup 0s'
	# the compare runs above appended to results/history.jsonl of the clone
	step 'bin/samsa-bench history --figure p99.9 --target samsa --workload latency-20k'
	expect '^publish p99\.9 \(ms\) across commits'
	expect ' samsa +latency-20k +client +1 '
	step 'bin/samsa-bench compare --targets samsa,kfake-proc --samsa-bin bin/samsa --sync none --workload latency-20k --rounds 2 --duration 15s --warmup 3s' \
		'bin/samsa-bench compare --targets samsa,kfake-proc --samsa-bin bin/samsa --sync none --workload latency-20k --rounds 1 --duration 1s --warmup 0s'
	step 'bin/samsa-bench compare --targets samsa --samsa-bin bin/samsa --workload latency-100k --rounds 2 --duration 15s --warmup 3s' \
		'bin/samsa-bench compare --targets samsa --samsa-bin bin/samsa --workload latency-100k --rounds 1 --duration 1s --warmup 0s'
	step 'bin/samsa-bench compare --targets samsa,kfake-proc --samsa-bin bin/samsa --workload latency-100k-1kb --rounds 3 --duration 15s --warmup 3s' \
		'bin/samsa-bench compare --targets samsa,kfake-proc --samsa-bin bin/samsa --workload latency-100k-1kb --rounds 1 --duration 1s --warmup 0s'
	step "go test -run XXX -bench 'SmallWriteFdatasync|SmallAppendFsync' -benchtime 3000x -benchmem ./engine" \
		"go test -run XXX -bench 'SmallWriteFdatasync|SmallAppendFsync' -benchtime 20x -benchmem ./engine"
	expect '^BenchmarkSmallAppendFsync/size=3300/prealloc=true'
	step 'bin/samsa-bench compare --targets samsa@set=samsa.log.segment.preallocate.enable=false,samsa,kfake-proc --samsa-bin bin/samsa --workload latency-20k --rounds 4 --duration 15s --warmup 3s' \
		'bin/samsa-bench compare --targets samsa@set=samsa.log.segment.preallocate.enable=false,samsa,kfake-proc --samsa-bin bin/samsa --workload latency-20k --rounds 1 --duration 1s --warmup 0s'
	step "go test -run XXX -bench 'AppendVsRaw|FsyncVsRaw|IndexLookup|Read\$' -benchmem -benchtime 20000x ./engine" \
		"go test -run XXX -bench 'AppendVsRaw|FsyncVsRaw|IndexLookup|Read\$' -benchmem -benchtime 10x ./engine"
	expect '^BenchmarkAppendVsRaw'
	expect '^BenchmarkIndexLookup'
	skip "SAMSA_BENCH_BIG=1 go test -run XXX -bench 'Recovery1GiB|CleanOpen10GiB' -benchtime 1x ./engine" \
		'it writes 11 GiB; below, the same without SAMSA_BENCH_BIG shows both benchmarks exist'
	own run_form bash "go test -run XXX -bench 'Recovery1GiB|CleanOpen10GiB' -benchtime 1x -v ./engine"
	expect 'SKIP: BenchmarkRecovery1GiB'
	expect 'SKIP: BenchmarkCleanOpen10GiB'
	step "go test -p 1 -run '^\$' -bench 'BenchmarkProduce|BenchmarkFetch|BenchmarkLongPoll' -benchtime=5000x -benchmem -count 6 ./net/kafka" \
		"go test -p 1 -run '^\$' -bench 'BenchmarkProduce|BenchmarkFetch|BenchmarkLongPoll' -benchtime=20x -benchmem -count 1 ./net/kafka"
	expect '^BenchmarkProduce'
	expect '^BenchmarkFetch'
	step "go test -run XXX -bench 'InsertCancel|InsertExpire|WatchComplete' -benchtime=300000x -count=2 ./purgatory" \
		"go test -run XXX -bench 'InsertCancel|InsertExpire|WatchComplete' -benchtime=1000x -count=1 ./purgatory"
	expect '^BenchmarkInsertCancel'
	step 'go test -run XXX -bench . -benchtime 2s ./coordinator/group/' 'go test -run XXX -bench . -benchtime 1x ./coordinator/group/'
	expect '^Benchmark'
	step 'go test -run XXX -bench TxnThroughput -benchmem -benchtime 3s ./net/kafka' 'go test -run XXX -bench TxnThroughput -benchmem -benchtime 2x ./net/kafka'
	expect '^BenchmarkTxnThroughput/transactional'
	step "go test -run XXX -bench 'BenchmarkCleaner\$/codec=(none|zstd)|BenchmarkCleanerRawReadWrite' -benchtime 3x ./engine" \
		"go test -run XXX -bench 'BenchmarkCleaner\$/codec=(none|zstd)|BenchmarkCleanerRawReadWrite' -benchtime 1x ./engine"
	expect '^BenchmarkCleanerRawReadWrite'
	skip 'make soak-offsets' 'an hour of commits; its test runs shortened by hand with OFFSETS_SOAK (BENCHMARKS.md has the hour)'
	step 'go test -run XXX -bench GroupRebalanceTCP -benchtime 20x ./net/kafka' 'go test -run XXX -bench GroupRebalanceTCP/members=10 -benchtime 1x ./net/kafka'
	expect '^BenchmarkGroupRebalanceTCP'
	step "go test -run XXX -bench 'Append|ApplyCreate|Replay' -benchtime=2s ./coordinator/metadata" \
		"go test -run XXX -bench 'Append|ApplyCreate|Replay' -benchtime=1x ./coordinator/metadata"
	expect '^BenchmarkAppend'
	step 'bin/samsa-bench run --spawn samsa --samsa-bin bin/samsa --workload backlog-drain --raw' \
		'bin/samsa-bench run --spawn samsa --samsa-bin bin/samsa --workload backlog-drain --raw --duration 1s'
	expect 'backlog filled'
	# BENCHMARKS.md, Tiered storage: catch-up reads
	skip 'bin/samsa-bench run --spawn samsa --samsa-bin bin/samsa --workload tiered-catchup --rounds 3 --profile --limits' \
		'three rounds of 5 GiB filled, copied to versitygw and read twice: minutes each; go test ./bench runs the workload on 16 MiB (TestTieredCatchupSpawnedSamsa)'
	skip 'bin/samsa-bench compare --targets samsa,samsa@tiered --samsa-bin bin/samsa --workload latency-20k --topic-config segment.bytes=1048576 --rounds 3 --duration 30s --warmup 5s' \
		'six rounds of 35 s, and a window of a second copies nothing in 1 MiB segments (the round fails); go test ./bench runs both targets for 4 s in 256 KiB segments (TestTieredTargetCopiesInWindow)'
	skip 'make soak-tiered' 'the 5 GiB read-back below, with its report in bench-out/tiered-readback'
	skip 'bin/samsa-bench run --spawn samsa --samsa-bin bin/samsa --workload tiered-readback' \
		'5 GiB filled, copied to versitygw and read back through franz-go and kcat: minutes; go test ./bench runs the workload on 32 MiB (TestTieredReadBackSpawnedSamsa)'
	step "go test -run '^\$' -bench BenchmarkClient ./engine/remote" "go test -run '^\$' -bench BenchmarkClient -benchtime 1x ./engine/remote"
	expect '^BenchmarkClient'
	step "go test -run '^\$' -bench BenchmarkRemoteFetch -count 6 ./replication/tiered" \
		"go test -run '^\$' -bench BenchmarkRemoteFetch -count 1 -benchtime 1x ./replication/tiered"
	expect '^BenchmarkRemoteFetch'
	step "go test -run '^\$' -bench BenchmarkFetchFrameRemote -count 6 ./net/wire" \
		"go test -run '^\$' -bench BenchmarkFetchFrameRemote -count 1 -benchtime 1x ./net/wire"
	expect '^BenchmarkFetchFrameRemote'
	step "SAMSA_CLUSTER_BENCH=1 go test ./cmd/samsa -run '^TestClusterBench\$' -v -count=1 -timeout 20m" \
		"SAMSA_CLUSTER_BENCH=1 SAMSA_CLUSTER_BENCH_TOPICS=20 SAMSA_CLUSTER_BENCH_PARTITIONS=30 SAMSA_CLUSTER_BENCH_FAILOVERS=1 go test ./cmd/samsa -run '^TestClusterBench\$' -v -count=1 -timeout 20m"
	expect 'controller failover'
	step "SAMSA_CLUSTER_BENCH=1 go test ./cmd/samsa -run '^TestClusterBenchLeaderFailover\$' -v -count=1 -timeout 30m" \
		"SAMSA_CLUSTER_BENCH=1 SAMSA_CLUSTER_BENCH_KILLS=1 go test ./cmd/samsa -run '^TestClusterBenchLeaderFailover\$' -v -count=1 -timeout 30m"
	expect 'no acknowledgement for'
	# BENCHMARKS.md, Cluster: replication through samsa-bench, full sync, scale in the simulation
	step 'bin/samsa-bench compare --targets samsa-cluster@rf=1,samsa-cluster@rf=3 --samsa-bin bin/samsa --min-insync-replicas 2 --workload max-throughput-100b --rounds 3 --duration 10s --warmup 3s --raw' \
		'bin/samsa-bench compare --targets samsa-cluster@rf=1,samsa-cluster@rf=3 --samsa-bin bin/samsa --min-insync-replicas 2 --workload max-throughput-100b --rounds 1 --duration 1s --warmup 0s --raw'
	expect 'samsa-cluster@rf=3 +RAW +1 +[0-9]'
	step 'bin/samsa-bench compare --targets samsa-cluster@rf=1,samsa-cluster@rf=3 --samsa-bin bin/samsa --min-insync-replicas 2 --workload latency-20k --rounds 2 --duration 15s --warmup 3s' \
		'bin/samsa-bench compare --targets samsa-cluster@rf=1,samsa-cluster@rf=3 --samsa-bin bin/samsa --min-insync-replicas 2 --workload latency-20k --rounds 1 --duration 1s --warmup 0s'
	expect 'samsa-cluster@rf=3 +client +1 +[0-9]'
	step "SAMSA_CLUSTER_BENCH=1 go test ./cmd/samsa -run '^TestClusterBenchFullSync\$' -v -count=1 -timeout 30m" \
		"SAMSA_CLUSTER_BENCH=1 SAMSA_CLUSTER_BENCH_SYNC_MIB=16 SAMSA_CLUSTER_BENCH_SYNCS=2 go test ./cmd/samsa -run '^TestClusterBenchFullSync\$' -v -count=1 -timeout 30m"
	expect 'full sync of 16 MiB'
	skip "for i in 1 2 3 4 5 6; do SAMSA_CLUSTER_BENCH=1 SAMSA_CLUSTER_BENCH_SYNC_MIB=64 SAMSA_CLUSTER_BENCH_SYNCS=7 go test ./cmd/samsa -run '^TestClusterBenchFullSync\$' -v -count=1 | grep 'ISR joins'; done" 'six runs of the full-sync test, whose short form the step above runs'
	step "SAMSA_CLUSTER_BENCH=1 go test ./cmd/samsa -run '^TestWipedTieredFollower\$' -v -count=1 -timeout 30m" \
		"SAMSA_CLUSTER_BENCH=1 SAMSA_CLUSTER_BENCH_TIERED_REMOTE_MIB=32 SAMSA_CLUSTER_BENCH_TIERED_LOCAL_MIB=8 SAMSA_CLUSTER_BENCH_TIERED_FULL_MIB=16 SAMSA_CLUSTER_BENCH_SYNCS=1 go test ./cmd/samsa -run '^TestWipedTieredFollower\$' -v -count=1 -timeout 30m"
	expect 'wiped follower of 32 MiB remote \+ 8 MiB local'
	step "go test -run '^\$' -bench 'Failover|SnapshotCatchUp' -benchtime 10x -count 6 ./coordinator/controller" \
		"go test -run '^\$' -bench 'Failover|SnapshotCatchUp' -benchtime 1x -count 1 ./coordinator/controller"
	expect 'ms/catch-up'
	step "go test -run '^\$' -bench 'ScaleSnapshot|SimSnapshotCatchUp' -benchtime 3x -count 6 ./coordinator/controller/quorum" \
		"go test -run '^\$' -bench 'ScaleSnapshot|SimSnapshotCatchUp' -benchtime 1x -count 1 ./coordinator/controller/quorum"
	expect 'MiB/image'
	# BENCHMARKS.md, Tails at fixed rates (issue 35): measurements of 3 rounds of 30 s;
	# the same commands in 1-second rounds are the latency-20k and samsa-cluster steps above.
	skip 'bin/samsa-bench compare --targets samsa,kfake-proc --samsa-bin bin/samsa --workload latency-20k --rounds 3 --duration 30s --warmup 5s --limits' 'a 4-minute measurement; its 1-second form runs above'
	skip 'bin/samsa-bench compare --targets samsa,kfake-proc --samsa-bin bin/samsa --workload omb-1topic-100p-1kb --rounds 3 --duration 30s --warmup 5s' 'a 4-minute measurement; the same command with latency-20k in 1-second rounds runs above'
	skip 'bin/samsa-bench compare --targets samsa-cluster@rf=1,samsa-cluster@rf=3 --samsa-bin bin/samsa --min-insync-replicas 2 --workload latency-20k --rounds 3 --duration 30s --warmup 5s --limits' 'a 5-minute measurement; its 1-second form runs above'
	skip 'bin/samsa-bench compare --targets samsa-cluster@rf=1,samsa-cluster@rf=3 --samsa-bin bin/samsa --min-insync-replicas 2 --workload omb-1topic-100p-1kb --rounds 3 --duration 30s --warmup 5s --limits' 'a 5-minute measurement; the same command with latency-20k in 1-second rounds runs above'
	# BENCHMARKS.md, sysmon kept awake
	step 'go build -ldflags "-X runtime.godebugDefault=schedtrace=2147483647" -o /tmp/samsa-awake ./cmd/samsa'
	step 'GODEBUG=schedtrace=0 bin/samsa-bench compare --targets samsa --samsa-bin /tmp/samsa-awake --workload latency-20k --rounds 1 --duration 20s --warmup 5s' \
		'GODEBUG=schedtrace=0 bin/samsa-bench compare --targets samsa --samsa-bin /tmp/samsa-awake --workload latency-20k --rounds 1 --duration 1s --warmup 0s'
	expect 'samsa +client +1 +[0-9]'
	step 'bin/samsa-bench compare --targets samsa --samsa-bin /tmp/samsa-awake --workload latency-20k --rounds 1 --duration 20s --warmup 5s' \
		'bin/samsa-bench compare --targets samsa --samsa-bin /tmp/samsa-awake --workload latency-20k --rounds 1 --duration 1s --warmup 0s'
	expect 'samsa +client +1 +[0-9]'
	# BENCHMARKS.md, Hard workloads
	step 'go test -run XXX -bench ManyProducers -benchtime 8000x -count 1 ./engine' \
		'go test -run XXX -bench ManyProducers -benchtime 50x -count 1 ./engine'
	expect 'ManyProducers'
	step 'bin/samsa-bench compare --targets samsa,kfake-proc --samsa-bin bin/samsa --workload many-producers --rounds 3 --duration 30s --warmup 10s' \
		'bin/samsa-bench compare --targets samsa,kfake-proc --samsa-bin bin/samsa --workload many-producers --rounds 1 --duration 1s --warmup 0s'
	expect 'kfake-proc +client +1 +[0-9]'
	step 'bin/samsa-bench compare --targets samsa,kfake-proc --samsa-bin bin/samsa --workload retention-reached --rounds 3 --duration 30s --warmup 10s' \
		'bin/samsa-bench compare --targets samsa,kfake-proc --samsa-bin bin/samsa --workload retention-reached --rounds 1 --duration 1s --warmup 0s'
	expect 'retention: '
	step "go test -run 'ManyProducers|RetentionReached' ./bench"
	expect '^ok '
	step 'bin/samsa-bench compare --targets samsa,samsa@sync=none --samsa-bin bin/samsa --workload many-producers --rounds 3 --duration 30s --warmup 10s' \
		'bin/samsa-bench compare --targets samsa,samsa@sync=none --samsa-bin bin/samsa --workload many-producers --rounds 1 --duration 1s --warmup 0s'
	expect 'samsa@sync=none +client +1 +[0-9]'
	skip 'bin/samsa-bench compare --targets samsa,samsa@sync=none --samsa-bin bin/samsa --workload omb-1topic-100p-1kb --rounds 2 --duration 30s --warmup 10s' 'a 3-minute measurement; omb-1topic-100p-1kb and samsa@sync=none run in short form elsewhere in this file'
	skip 'make soak-bench' 'an hour; the shortened form below runs the same target'
	# The verdict of a short soak on a shared machine may be either: the step checks
	# that the whole path ran and judged, not Samsa's figures (make exits 2 on FAIL).
	step 'make soak-bench SOAK_BENCH_DURATION=1m SOAK_BENCH_INTERVAL=15s' 'make soak-bench SOAK_BENCH_DURATION=1m SOAK_BENCH_INTERVAL=15s || true'
	expect '^soak p99: (PASS|FAIL): publish p99 per interval over 4 intervals'
	expect '^soak RSS: (PASS|FAIL): broker RSS over [0-9]+-[0-9]+ s \(3 intervals\)'
	expect '^soak: (PASS|FAIL)$'
	step "go test -run 'JudgeSoak|IntervalMeter' ./bench"
	expect '^ok '
	# The removal of deleted segments at a bounded pace, A B A B at 150 s each; here 3 s.
	step 'bin/samsa-bench run --spawn samsa --samsa-bin bin/samsa --workload latency-20k --rate 50000 --duration 150s --warmup 5s --topic-config segment.bytes=16777216 --topic-config retention.bytes=16777216 --samsa-arg=--set=log.retention.check.interval.ms=30000 --samsa-arg=--set=log.segment.delete.delay.ms=0' \
		'bin/samsa-bench run --spawn samsa --samsa-bin bin/samsa --workload latency-20k --rate 50000 --duration 3s --warmup 1s --topic-config segment.bytes=16777216 --topic-config retention.bytes=16777216 --samsa-arg=--set=log.retention.check.interval.ms=30000 --samsa-arg=--set=log.segment.delete.delay.ms=0'
	expect '^ +samsa +client +1 +[0-9]'
	# BENCHMARKS.md, 10,000 partitions per node
	skip 'make bench-partitions' 'about 15 minutes; the two partitions lines below run its first part in a short form'
	step 'bin/samsa-bench partitions --samsa-bin bin/samsa --layout 10x1000 --rounds 3 --out bench-out/partitions' \
		'bin/samsa-bench partitions --samsa-bin bin/samsa --layout 2x20 --rounds 1 --idle 1s --out bench-out/partitions'
	expect 'restart: all writable'
	step 'bin/samsa-bench partitions --samsa-bin bin/samsa --layout 1x10000 --rounds 3 --out bench-out/partitions' \
		'bin/samsa-bench partitions --samsa-bin bin/samsa --layout 1x40 --rounds 1 --idle 1s --no-restart --out bench-out/partitions'
	expect 'fds per partition'
	skip 'scripts/partitions-cluster.sh bin/samsa' 'three nodes and 30,000 replicas: several minutes'
	skip 'bin/samsa-bench run --spawn samsa --samsa-bin bin/samsa --workload partitions-10k' '10,000 partitions at 50,000 msg/s: minutes'
	step "go test -run '^\$' -bench BenchmarkApplyNewPartitions -benchtime 2x ./replication" \
		"go test -run '^\$' -bench 'BenchmarkApplyNewPartitions/1000\$' -benchtime 1x ./replication"
	expect 'ns/partition'
}

# --- every documented command has a step, every step a documented command ------------
steps
sort -u "$tmp/registered" >"$tmp/step-set"
missing=$(comm -23 "$tmp/doc-set" "$tmp/step-set")
stale=$(comm -13 "$tmp/doc-set" "$tmp/step-set")
if [ -n "$missing" ]; then
	echo "These commands are shown in the docs, but tests/commands.sh has no step that runs them:" >&2
	awk -F'\t' 'NR == FNR { m[$0] = 1; next } m[$2] { print "  " $0 }' <(printf '%s\n' "$missing") "$tmp/doc-commands" >&2
	fail "add a step (verbatim, or a short form with the same flags and paths) to tests/commands.sh"
fi
if [ -n "$stale" ]; then
	printf '  %s\n' "$stale" >&2
	fail "tests/commands.sh has steps for commands that are no longer in README.md, BENCHMARKS.md, docs/DEPLOY.md or docs/CLUSTER.md's \"Upgrading and resizing\" (above): update or remove them"
fi
echo "$(wc -l <"$tmp/doc-set") commands in README.md, BENCHMARKS.md, docs/CLUSTER.md and docs/DEPLOY.md, each with a step; running them in a fresh clone ($clone)"

mode=run
start=$SECONDS
steps
echo "commands: $passed passed, 0 failed, $skipped skipped ($((SECONDS - start)) s)"
