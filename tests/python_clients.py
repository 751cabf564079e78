#!/usr/bin/python3
"""Compatibility test with Debian's Python Kafka clients.

kafka-python 2.0.2 (starts with ApiVersions v0 and Metadata v0) and confluent-kafka 1.7
(librdkafka): admin, produce, consume, and a consumer group of two members that splits a
topic's partitions and commits offsets.

    tests/python_clients.py BROKER_BINARY
"""
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
import kafka

passed = 0
failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok   " + name)
    else:
        failed += 1
        print("FAIL " + name + (": " + str(detail) if detail else ""), file=sys.stderr)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(addr, proc, deadline=20.0):
    host, port = addr.split(":")
    end = time.time() + deadline
    while time.time() < end:
        if proc.poll() is not None:
            raise SystemExit("broker exited during start-up")
        try:
            socket.create_connection((host, int(port)), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("broker did not listen within %.0f s" % deadline)


def test_kafka_python(broker):
    topic = "kp-" + uuid.uuid4().hex[:8]
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker)
    admin.create_topics([kafka.admin.NewTopic(topic, num_partitions=3, replication_factor=1)])
    check("kafka-python: topic created", topic in admin.list_topics())
    admin.close()

    producer = kafka.KafkaProducer(bootstrap_servers=broker, acks="all", linger_ms=5)
    n = 3000
    for i in range(n):
        producer.send(topic, key=str(i % 17).encode(), value=str(i).encode())
    producer.flush(30)
    producer.close()

    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=broker, auto_offset_reset="earliest",
                                   enable_auto_commit=False, consumer_timeout_ms=10000)
    got = sorted(int(m.value) for m in consumer)
    consumer.close()
    check("kafka-python: every record consumed once", got == list(range(n)), "%d records" % len(got))


def test_confluent_group(broker):
    topic = "cg-" + uuid.uuid4().hex[:8]
    group = "py-group-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": broker})
    fut = admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])[topic]
    fut.result(30)
    check("confluent-kafka: topic created", topic in admin.list_topics(timeout=10).topics)

    conf = {"bootstrap.servers": broker, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": 10000}
    members = [Consumer(dict(conf)), Consumer(dict(conf))]
    for c in members:
        c.subscribe([topic])

    # Poll both until the group is stable with both members assigned.
    end = time.time() + 60
    while time.time() < end and not all(len(c.assignment()) > 0 for c in members):
        for c in members:
            c.poll(0.1)
    sizes = [len(c.assignment()) for c in members]
    check("confluent-kafka: two members split four partitions", sorted(sizes) == [2, 2], sizes)

    n = 2000
    p = Producer({"bootstrap.servers": broker, "enable.idempotence": True})
    for i in range(n):
        p.produce(topic, key=str(i).encode(), value=str(i).encode())
    p.flush(30)

    seen = [[], []]
    end = time.time() + 60
    while time.time() < end and sum(len(s) for s in seen) < n:
        for idx, c in enumerate(members):
            m = c.poll(0.1)
            if m is None or m.error():
                continue
            seen[idx].append(int(m.value()))
    for c in members:
        c.commit(asynchronous=False)
    total = sorted(seen[0] + seen[1])
    check("confluent-kafka: every record consumed exactly once", total == list(range(n)), "%d records" % len(total))
    check("confluent-kafka: both members consumed", all(len(s) > 0 for s in seen), [len(s) for s in seen])

    committed = members[0].committed([TopicPartition(topic, i) for i in range(4)], timeout=10)
    check("confluent-kafka: committed offsets cover the topic",
          sum(tp.offset for tp in committed if tp.offset >= 0) == n, [tp.offset for tp in committed])
    for c in members:
        c.close()


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        broker = "127.0.0.1:%d" % free_port()
        log = open(os.path.join(tmp, "broker.log"), "w")
        proc = subprocess.Popen([binary, "serve", "--data-dir", os.path.join(tmp, "data"),
                                 "--listen", broker, "--admin-listen", "127.0.0.1:%d" % free_port()],
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_port(broker, proc)
            for test in (test_kafka_python, test_confluent_group):
                try:
                    test(broker)
                except Exception as e:  # a client error is a failure, reported, not a crash
                    check(test.__name__, False, repr(e))
        finally:
            proc.terminate()
            try:
                rc = proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = "killed"
            check("broker exits cleanly on SIGTERM", rc == 0, rc)
            if failed:
                log.flush()
                with open(os.path.join(tmp, "broker.log")) as f:
                    print("--- broker log (tail) ---\n" + "".join(f.readlines()[-40:]), file=sys.stderr)
    print("python: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
