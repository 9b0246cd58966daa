#!/usr/bin/python3
"""librdkafka on a compacted topic, through Debian's python3-confluent-kafka.

Run by TestCompactionClients (compaction_test.go) in two steps:

    /usr/bin/python3 compaction_librdkafka_test.py produce BOOTSTRAP TOPIC
    /usr/bin/python3 compaction_librdkafka_test.py consume BOOTSTRAP TOPIC

produce creates TOPIC compacted (AdminClient, 8 KiB segments) and writes KEYS keys x
VERSIONS versions with lz4, then a tombstone for every third key, then filler records
that push them into sealed segments. The Go test waits for the broker's cleaner; then
consume reads the partition from the beginning and checks what a compacted log must
hold: each key once, with its latest value (None for the tombstoned ones), offsets
increasing with gaps, and the log start still 0. Prints "compaction librdkafka: OK"
on success, "FAIL: ..." otherwise.
"""

import sys

from confluent_kafka import Consumer, OFFSET_BEGINNING, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

KEYS = 20
VERSIONS = 15
FILLER = 60
TIMEOUT = 30.0


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def key(k):
    return ("lrk-k%02d" % k).encode()


def latest(k):
    if k % 3 == 0:
        return None
    return ("v%02d-" % (VERSIONS - 1) + "x" * (k * 7)).encode()


def produce(bootstrap, topic):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futs = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1, config={
        "cleanup.policy": "compact",
        "segment.bytes": "8192",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "600000",
    })], operation_timeout=TIMEOUT)
    for t, f in futs.items():
        try:
            f.result(timeout=TIMEOUT)
        except Exception as e:  # noqa: BLE001 - report whatever the client raised
            fail("create %s: %r" % (t, e))
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "compression.type": "lz4",
                  "linger.ms": 5, "batch.size": 4096, "enable.idempotence": False})
    for v in range(VERSIONS):
        for k in range(KEYS):
            p.produce(topic, key=key(k), value=("v%02d-" % v + "x" * (k * 7)).encode(), partition=0, on_delivery=on_delivery)
        p.flush(TIMEOUT)
    for k in range(0, KEYS, 3):
        p.produce(topic, key=key(k), value=None, partition=0, on_delivery=on_delivery)
    p.flush(TIMEOUT)
    for i in range(FILLER):
        p.produce(topic, key=b"filler", value=b"f", partition=0, on_delivery=on_delivery)
        p.flush(TIMEOUT)
    if errors:
        fail("%d deliveries failed, first: %r" % (len(errors), errors[0]))
    print("compaction librdkafka: produced")


def consume(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "enable.partition.eof": True, "auto.offset.reset": "error"})
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)
    if lo != 0:
        fail("log start offset %d, want 0 (compaction never moves it)" % lo)
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    seen = {}
    last = -1
    gaps = 0
    while True:
        m = c.poll(TIMEOUT)
        if m is None:
            fail("no message within %.0fs" % TIMEOUT)
        if m.error():
            if m.error().code() == -191:  # _PARTITION_EOF
                break
            fail("consume: %s" % m.error())
        if m.offset() <= last:
            fail("offset %d after %d" % (m.offset(), last))
        if m.offset() > last + 1:
            gaps += 1
        last = m.offset()
        if m.key() != b"filler":
            if m.key() in seen:
                fail("key %r twice (offsets %d and %d)" % (m.key(), seen[m.key()][0], m.offset()))
            seen[m.key()] = (m.offset(), m.value())
    c.close()
    for k in range(KEYS):
        got = seen.get(key(k))
        if got is None:
            fail("key %r missing" % key(k))
        if got[1] != latest(k):
            fail("key %r = %r, want %r" % (key(k), got[1], latest(k)))
    if gaps == 0:
        fail("no offset gaps: nothing was compacted")
    print("compaction librdkafka: OK (%d keys, %d gaps, high watermark %d)" % (len(seen), gaps, hi))


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("produce", "consume"):
        fail("usage: compaction_librdkafka_test.py produce|consume BOOTSTRAP TOPIC")
    (produce if sys.argv[1] == "produce" else consume)(sys.argv[2], sys.argv[3])
