#!/usr/bin/python3
"""Transactions with Debian's confluent-kafka (librdkafka's transactional producer).

init_transactions / begin / commit / abort, read_committed and read_uncommitted
consumers, an open transaction aborted when the next producer of its id fences it,
and consume-transform-produce with send_offsets_to_transaction (the group's offsets
committed in the transaction: TxnOffsetCommit).

    tests/python_txn.py BROKER_BINARY
"""
import os
import subprocess
import sys
import tempfile
import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_clients import free_port, wait_port  # noqa: E402

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


def create(broker, *topics, partitions=1):
    admin = AdminClient({"bootstrap.servers": broker})
    for f in admin.create_topics([NewTopic(t, partitions, 1) for t in topics]).values():
        f.result(30)


def consume(broker, topic, isolation, done, deadline=20.0, assign=False):
    """Reads topic from its start until done(values) holds or the deadline passes;
    with assign, its partition 0 without joining a group (no initial rebalance delay)."""
    c = Consumer({"bootstrap.servers": broker, "group.id": "read-" + uuid.uuid4().hex[:8],
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "isolation.level": isolation})
    if assign:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    else:
        c.subscribe([topic])
    got = []
    end = time.time() + deadline
    try:
        while not done(got) and time.time() < end:
            m = c.poll(0.5)  # a long poll: returns as soon as a record arrives
            if m is None:
                continue
            if m.error():
                raise RuntimeError(str(m.error()))
            got.append(m.value().decode())
    finally:
        c.close()
    return got


def seq(prefix, a, b):
    return ["%s-%d" % (prefix, i) for i in range(a, b)]


def test_commit_abort(broker):
    topic = "pytxn-" + uuid.uuid4().hex[:8]
    create(broker, topic)
    p = Producer({"bootstrap.servers": broker, "transactional.id": "py-" + topic})
    p.init_transactions(30)
    for values, commit in ((seq("c", 0, 5), True), (seq("a", 0, 5), False), (seq("c", 5, 10), True)):
        p.begin_transaction()
        for v in values:
            p.produce(topic, v.encode())
        p.flush(30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    committed = consume(broker, topic, "read_committed", lambda got: "c-9" in got)
    check("confluent-kafka: read_committed sees the committed transactions only",
          committed == seq("c", 0, 10), committed)
    everything = consume(broker, topic, "read_uncommitted", lambda got: len(got) >= 15)
    check("confluent-kafka: read_uncommitted sees the aborted transaction too",
          everything == seq("c", 0, 5) + seq("a", 0, 5) + seq("c", 5, 10), everything)


def test_fenced_open(broker):
    """A producer left in its transaction (its records flushed, no end sent) is fenced
    by the next producer of its transactional id, whose init_transactions aborts the
    open transaction: read_committed never returns its records, read_uncommitted does,
    and the old producer's commit fails."""
    topic = "pyfence-" + uuid.uuid4().hex[:8]
    create(broker, topic)
    tid = "py-" + topic
    old = Producer({"bootstrap.servers": broker, "transactional.id": tid})
    old.init_transactions(30)
    old.begin_transaction()
    for v in seq("open", 0, 5):
        old.produce(topic, v.encode())
    old.flush(30)
    young = Producer({"bootstrap.servers": broker, "transactional.id": tid})
    young.init_transactions(30)
    young.begin_transaction()
    for v in seq("young", 0, 5):
        young.produce(topic, v.encode())
    young.commit_transaction(30)
    committed = consume(broker, topic, "read_committed", lambda got: "young-4" in got, assign=True)
    check("confluent-kafka: the fenced producer's open transaction is aborted for read_committed",
          committed == seq("young", 0, 5), committed)
    everything = consume(broker, topic, "read_uncommitted", lambda got: len(got) >= 10, assign=True)
    check("confluent-kafka: read_uncommitted returns the aborted records",
          everything == seq("open", 0, 5) + seq("young", 0, 5), everything)
    try:
        old.commit_transaction(10)
        fenced = False
    except Exception as e:  # KafkaException: the producer was fenced
        fenced = "fenced" in str(e).lower() or "epoch" in str(e).lower()
    check("confluent-kafka: the fenced producer cannot commit", fenced)


def test_send_offsets(broker):
    src, dst = "pyin-" + uuid.uuid4().hex[:8], "pyout-" + uuid.uuid4().hex[:8]
    create(broker, src, dst, partitions=2)
    n = 20
    plain = Producer({"bootstrap.servers": broker})
    for v in seq("in", 0, n):
        plain.produce(src, v.encode())
    plain.flush(30)

    group = "pyctp-" + uuid.uuid4().hex[:8]
    c = Consumer({"bootstrap.servers": broker, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    c.subscribe([src])
    p = Producer({"bootstrap.servers": broker, "transactional.id": "py-" + group})
    p.init_transactions(30)
    got, end = [], time.time() + 20
    while len(got) < n and time.time() < end:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            raise RuntimeError(str(m.error()))
        got.append(m.value().decode())
    check("confluent-kafka: transform input consumed", len(got) == n, got)
    p.begin_transaction()
    for v in got:
        p.produce(dst, v.replace("in", "out").encode())
    p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    committed = c.committed([TopicPartition(src, 0), TopicPartition(src, 1)], 10)
    c.close()
    total = sum(tp.offset for tp in committed if tp.offset >= 0)
    check("confluent-kafka: offsets committed in the transaction", total == n, committed)
    out = consume(broker, dst, "read_committed", lambda got: len(got) >= n)
    check("confluent-kafka: transformed output committed once", sorted(out) == sorted(seq("out", 0, n)), out)


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
            for test in (test_commit_abort, test_fenced_open, test_send_offsets):
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
    print("python transactions: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
