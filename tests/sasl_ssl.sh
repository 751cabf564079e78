#!/usr/bin/env bash
# SASL_SSL with librdkafka (kcat) and confluent-kafka-python against a node configured
# the way a Kafka operator configures one: a CA and a server certificate made here with
# openssl, listeners=SASL_SSL://..., PLAIN users in the listener's JAAS configuration,
# SCRAM-SHA-512 credentials created over the wire (AlterUserScramCredentials), Kafka's
# StandardAuthorizer with super.users and ACLs (CreateAcls).
#
# Checks: the super user (PLAIN) creates a topic, a SCRAM user, an ACL, and lists and
# changes them with samsa's users and acls commands (--command-config); the SCRAM user
# produces with kcat and consumes with confluent-kafka; a user without ACLs is refused
# (TOPIC_AUTHORIZATION_FAILED); a wrong password fails authentication; the broker keeps
# serving.
#
#   tests/sasl_ssl.sh        (needs kcat, openssl and /usr/bin/python3 with confluent_kafka)
set -euo pipefail

. "$(dirname "$0")/lib.sh"

for c in kcat openssl; do command -v $c >/dev/null || fail "$c is not installed"; done
py=/usr/bin/python3
$py -c 'import confluent_kafka' 2>/dev/null || fail "confluent_kafka is not importable by $py (apt-get install -y python3-confluent-kafka)"

# The PKI: a CA and a server certificate for 127.0.0.1.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=samsa test CA" \
	-keyout "$tmp/ca.key" -out "$tmp/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
	-keyout "$tmp/server.key" -out "$tmp/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$tmp/ext.cnf"
openssl x509 -req -in "$tmp/server.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" -CAcreateserial -days 1 \
	-extfile "$tmp/ext.cnf" -out "$tmp/server.pem" 2>/dev/null
openssl pkcs8 -topk8 -nocrypt -in "$tmp/server.key" -out "$tmp/server.p8" 2>/dev/null
cat "$tmp/server.p8" "$tmp/server.pem" >"$tmp/keystore.pem"

build_samsa
(cd "$root" && go build -o "$tmp/sasl_admin" ./tests/sasl_admin)
port=$(free_port)
cport=$(free_port)
broker="127.0.0.1:$port"
cat >"$tmp/server.properties" <<EOF
listeners=SASL_SSL://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
inter.broker.listener.name=SASL_SSL
controller.listener.names=CONTROLLER
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret";
ssl.keystore.type=PEM
ssl.keystore.location=$tmp/keystore.pem
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin
connection.failed.authentication.delay.ms=10
EOF

start_broker --config "$tmp/server.properties" --data-dir "$tmp/data" --admin-listen ""

# kcat's properties per user.
kc() { # user password mechanism
	printf 'security.protocol=SASL_SSL\nsasl.mechanisms=%s\nsasl.username=%s\nsasl.password=%s\nssl.ca.location=%s\n' \
		"$3" "$1" "$2" "$tmp/ca.pem" >"$tmp/$1.conf"
	echo "$tmp/$1.conf"
}
admin_conf=$(kc admin admin-secret PLAIN)
wait_ready -F "$admin_conf" # the super user's metadata over SASL_SSL

passed=0
check() { # name, expected, actual
	if [ "$2" == "$3" ]; then
		passed=$((passed + 1))
		echo "ok   $1"
	else
		fail "$1: expected [$2], got [$3]"
	fi
}

# The super user: a topic, SCRAM credentials, alice's ACLs (a franz-go admin client:
# Debian's confluent-kafka 1.7 has no ACL or SCRAM admin calls; kcat has none).
"$tmp/sasl_admin" -broker "$broker" -ca "$tmp/ca.pem" -user admin -pass admin-secret -topic orders \
	-scram alice=alice-secret -scram bob=bob-secret \
	-acl User:alice:topic:orders:WRITE -acl User:alice:topic:orders:READ -acl User:alice:group:alice-g:READ \
	|| fail "admin setup"
check "super user: topic, SCRAM credential, ACLs" 0 0

# samsa's operator commands with Kafka client properties (--command-config): the super
# user over SASL_SSL with PLAIN, the CA as a PEM trust store.
cat >"$tmp/admin.properties" <<EOF
security.protocol=SASL_SSL
sasl.mechanism=PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\
    username="admin" password="admin-secret";
ssl.truststore.type=PEM
ssl.truststore.location=$tmp/ca.pem
EOF
sa() { "$tmp/samsa" "$@" --bootstrap-server "$broker" --command-config "$tmp/admin.properties" --timeout 20s; }
out=$(sa users list 2>&1) || fail "samsa users list: $out"
check "samsa users list (--command-config, SASL_SSL)" 1 "$(grep -cE '^alice +SCRAM-SHA-512=iterations=[0-9]+$' <<<"$out")"
out=$(sa acls list --topic orders 2>&1) || fail "samsa acls list: $out"
check "samsa acls list shows alice's WRITE" 1 "$(grep -c 'principal=User:alice, host=\*, operation=WRITE, permissionType=ALLOW' <<<"$out")"
out=$(sa acls create --allow-principal User:carol --operation Read --topic orders 2>&1) || fail "samsa acls create: $out"
out=$(sa acls delete --topic orders --allow-principal User:carol 2>&1) || fail "samsa acls delete: $out"
check "samsa acls create, then delete, carol's ACL" "1 ACLs removed." "$(tail -n 1 <<<"$out")"

# alice produces with kcat over SCRAM-SHA-512.
alice_conf=$(kc alice alice-secret SCRAM-SHA-512)
# SASL_DEBUG=1 shows librdkafka's SASL exchange.
[ -n "${SASL_DEBUG:-}" ] && kcat -F "$alice_conf" -b "$broker" -L -d security,broker 2>&1 | grep -i 'scram\|nonce\|sasl' | head -30 || true
seq 1 100 | kcat -F "$alice_conf" -b "$broker" -P -t orders 2>"$tmp/alice.err" || fail "alice produces: $(cat "$tmp/alice.err")"
check "alice produces 100 records (kcat, SCRAM-SHA-512)" 0 0

# alice consumes them with confluent-kafka in her group.
got=$($py - "$broker" "$tmp/ca.pem" <<'EOF'
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
              "sasl.username": "alice", "sasl.password": "alice-secret", "ssl.ca.location": sys.argv[2],
              "group.id": "alice-g", "auto.offset.reset": "earliest"})
c.subscribe(["orders"])
n, deadline = 0, time.time() + 30
while n < 100 and time.time() < deadline:
    m = c.poll(1)
    if m is not None and m.error() is None:
        n += 1
c.close()
print(n)
EOF
)
check "alice consumes 100 records (confluent-kafka, SCRAM-SHA-512)" 100 "$got"

# mallory (a PLAIN user unknown to the broker) and a wrong password: authentication fails.
mallory_conf=$(kc mallory x PLAIN)
out=$(kcat -F "$mallory_conf" -b "$broker" -L -m 3 2>&1 || true)
check "unknown user refused" 1 "$(grep -c -i 'authentication failed\|SASL_AUTHENTICATION_FAILED\|Authentication' <<<"$out" | sed 's/^[1-9][0-9]*$/1/')"
wrong_conf=$(printf 'security.protocol=SASL_SSL\nsasl.mechanisms=SCRAM-SHA-512\nsasl.username=alice\nsasl.password=nope\nssl.ca.location=%s\n' "$tmp/ca.pem" >"$tmp/wrong.conf"; echo "$tmp/wrong.conf")
out=$(kcat -F "$wrong_conf" -b "$broker" -L -m 3 2>&1 || true)
check "wrong password refused" 1 "$(grep -c -i 'authentication' <<<"$out" | sed 's/^[1-9][0-9]*$/1/')"

# bob has a credential but no ACL: producing is refused with TOPIC_AUTHORIZATION_FAILED.
bob_code=$($py - "$broker" "$tmp/ca.pem" <<'EOF'
import sys
from confluent_kafka import Producer, KafkaError
errs = []
p = Producer({"bootstrap.servers": sys.argv[1], "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
              "sasl.username": "bob", "sasl.password": "bob-secret", "ssl.ca.location": sys.argv[2],
              "message.timeout.ms": 10000})
p.produce("orders", b"x", on_delivery=lambda err, msg: errs.append(err))
p.flush(15)
print(errs[0].name() if errs and errs[0] else "delivered")
EOF
)
check "bob without ACLs is refused" TOPIC_AUTHORIZATION_FAILED "$bob_code"

# The broker still serves alice.
seq 1 5 | kcat -F "$alice_conf" -b "$broker" -P -t orders 2>/dev/null || fail "alice after the refusals"
check "alice served after the refusals" 0 0

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[ "$rc" -eq 0 ] || fail "broker exited with status $rc on SIGTERM"
echo "sasl_ssl.sh: $passed checks passed"
