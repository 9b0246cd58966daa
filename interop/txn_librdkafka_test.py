#!/usr/bin/python3
"""librdkafka transactions against Sluice, through Debian's python3-confluent-kafka.

Run by TestLibrdkafkaTransactions (txn_librdkafka_test.go) as:

    /usr/bin/python3 txn_librdkafka_test.py BOOTSTRAP TOPIC_PREFIX

A group consumer reads an input topic; a transactional producer (init_transactions)
then runs: txn 1 commits 30 records and the group's offsets 10/10 (send_offsets_to_
transaction); txn 2 writes 30 records and offsets 20/20 and aborts; txn 3 commits 30
records; plain records go in between. A fourth transaction is left open while a
read_committed consumer reads to the end (it must stop before it), then committed.
read_committed consumers must see exactly the committed and plain records, in order;
read_uncommitted ones the aborted records too; the group's committed offsets must be
txn 1's. Exits 0 with one "librdkafka transactions: OK" line, 1 with "FAIL: ..." lines.
"""

import sys
import time
import traceback

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    OFFSET_BEGINNING,
    Producer,
    TopicPartition,
    libversion,
    version,
)
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 2
INPUT = 40
PER_TXN = 30
TIMEOUT = 30.0


class CheckFailed(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise CheckFailed(msg)


def wait_for(cond, what, timeout=TIMEOUT):
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            raise CheckFailed("timed out after %.0fs waiting for %s" % (timeout, what))
        time.sleep(0.1)


def base_conf(bootstrap):
    return {"bootstrap.servers": bootstrap, "client.id": "sluice-interop-librdkafka-txn"}


def produce_plain(bootstrap, topic, values):
    """Writes values (partition i % PARTITIONS) with an idempotent producer; returns
    {partition: [values]}."""
    p = Producer(dict(base_conf(bootstrap), **{"acks": "all", "enable.idempotence": True}))
    errors = []
    out = {}
    for i, v in enumerate(values):
        part = i % PARTITIONS
        out.setdefault(part, []).append(v)
        p.produce(topic, value=v.encode(), partition=part,
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
    left = p.flush(TIMEOUT)
    check(left == 0 and not errors, "plain produce to %s: %d undelivered, errors %r" % (topic, left, errors[:2]))
    return out


def read_all(bootstrap, topic, isolation):
    """Reads every partition of topic from the beginning to its end (partition EOF, which
    for read_committed is the last stable offset); returns {partition: [values]}."""
    c = Consumer(dict(base_conf(bootstrap), **{
        "group.id": "sluice-interop-unused",  # required; assign() joins no group
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": isolation,
    }))
    got = {}
    eof = set()
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.time() + TIMEOUT
        while len(eof) < PARTITIONS:
            check(time.time() < deadline, "%s %s: end of %d of %d partitions reached before the deadline (read so far: %r)"
                  % (isolation, topic, len(eof), PARTITIONS, {p: len(v) for p, v in got.items()}))
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    continue
                raise CheckFailed("%s %s: consume error: %s" % (isolation, topic, m.error()))
            got.setdefault(m.partition(), []).append(m.value().decode())
    finally:
        c.close()
    return got


def merge(*parts):
    out = {}
    for part in parts:
        for p, vs in part.items():
            out.setdefault(p, []).extend(vs)
    return out


def same(what, got, want):
    for p in range(PARTITIONS):
        g, w = got.get(p, []), want.get(p, [])
        check(g == w, "%s: partition %d: %d records %r..., want %d records %r..."
              % (what, p, len(g), g[:6], len(w), w[:6]))


def main():
    if len(sys.argv) != 3:
        print("usage: txn_librdkafka_test.py BOOTSTRAP TOPIC_PREFIX", file=sys.stderr)
        return 2
    bootstrap, prefix = sys.argv[1], sys.argv[2]
    topic_in, topic_out, group = prefix + "in", prefix + "out", prefix + "g"
    print("confluent-kafka %s, librdkafka %s, broker %s" % (version()[0], libversion()[0], bootstrap), flush=True)
    started = time.time()
    step = "create topics"
    consumer = None
    try:
        admin = AdminClient(base_conf(bootstrap))
        for name, fut in admin.create_topics([NewTopic(t, num_partitions=PARTITIONS, replication_factor=1)
                                              for t in (topic_in, topic_out)], request_timeout=TIMEOUT).items():
            fut.result(timeout=TIMEOUT)
        wait_for(lambda: all(t in admin.list_topics(timeout=TIMEOUT).topics for t in (topic_in, topic_out)),
                 "both topics in metadata")

        step = "input"
        produce_plain(bootstrap, topic_in, ["in-%02d" % i for i in range(INPUT)])

        step = "group consumer"
        consumer = Consumer(dict(base_conf(bootstrap), **{
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }))
        consumer.subscribe([topic_in])
        consumed = 0
        deadline = time.time() + TIMEOUT
        while consumed < INPUT:
            check(time.time() < deadline, "the group consumer read %d of %d input records" % (consumed, INPUT))
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                consumed += 1

        step = "init_transactions"
        txn = Producer(dict(base_conf(bootstrap), **{"transactional.id": prefix + "txn", "transaction.timeout.ms": 60000}))
        txn.init_transactions(TIMEOUT)

        def run_txn(name, offsets, commit):
            txn.begin_transaction()
            written = {}
            for i in range(PER_TXN):
                v = "%s-%02d" % (name, i)
                written.setdefault(i % PARTITIONS, []).append(v)
                txn.produce(topic_out, value=v.encode(), partition=i % PARTITIONS)
            if offsets is not None:
                txn.send_offsets_to_transaction(
                    [TopicPartition(topic_in, p, offsets) for p in range(PARTITIONS)],
                    consumer.consumer_group_metadata(), TIMEOUT)
            # Flush first: abort_transaction purges records not yet sent, and the
            # read_uncommitted check wants the aborted records in the log.
            check(txn.flush(TIMEOUT) == 0, "%s: records not delivered" % name)
            if commit:
                txn.commit_transaction(TIMEOUT)
            else:
                txn.abort_transaction(TIMEOUT)
            return written

        step = "txn 1 (commit, offsets 10)"
        t1 = run_txn("T1", 10, True)
        plain1 = produce_plain(bootstrap, topic_out, ["P1-%d" % i for i in range(10)])
        step = "txn 2 (abort, offsets 20)"
        t2 = run_txn("T2", 20, False)
        plain2 = produce_plain(bootstrap, topic_out, ["P2-%d" % i for i in range(10)])
        step = "txn 3 (commit)"
        t3 = run_txn("T3", None, True)

        step = "read_committed"
        committed = merge(t1, plain1, plain2, t3)
        same("read_committed", read_all(bootstrap, topic_out, "read_committed"), committed)
        step = "read_uncommitted"
        same("read_uncommitted", read_all(bootstrap, topic_out, "read_uncommitted"), merge(t1, plain1, t2, plain2, t3))
        print("ok  read_committed: %d records of txns 1 and 3 and plain ones; read_uncommitted: txn 2's aborted ones too"
              % sum(len(v) for v in committed.values()), flush=True)

        step = "committed offsets"
        got = consumer.committed([TopicPartition(topic_in, p) for p in range(PARTITIONS)], timeout=TIMEOUT)
        offs = sorted((tp.partition, tp.offset) for tp in got)
        check(offs == [(p, 10) for p in range(PARTITIONS)],
              "group %s committed offsets %r, want 10 on every partition (txn 1 committed them, txn 2 aborted 20)" % (group, offs))
        print("ok  group offsets from send_offsets_to_transaction: %r" % offs, flush=True)

        step = "open transaction"
        txn.begin_transaction()
        t4 = {}
        for i in range(4):
            v = "T4-%d" % i
            t4.setdefault(i % PARTITIONS, []).append(v)
            txn.produce(topic_out, value=v.encode(), partition=i % PARTITIONS)
        check(txn.flush(TIMEOUT) == 0, "txn 4: records not delivered")
        same("read_committed with txn 4 open", read_all(bootstrap, topic_out, "read_committed"), committed)
        txn.commit_transaction(TIMEOUT)
        same("read_committed after txn 4 committed", read_all(bootstrap, topic_out, "read_committed"), merge(committed, t4))
        print("ok  an open transaction is invisible to read_committed until committed", flush=True)
    except (CheckFailed, KafkaException) as e:
        print("FAIL: %s: %s" % (step, e), flush=True)
        return 1
    except Exception:  # noqa: BLE001 - any surprise is a failure with a trace
        print("FAIL: %s: unexpected exception:\n%s" % (step, traceback.format_exc()), flush=True)
        return 1
    finally:
        if consumer is not None:
            consumer.close()
    print("librdkafka transactions: OK in %.1fs" % (time.time() - started), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
