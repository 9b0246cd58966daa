#!/usr/bin/python3
"""librdkafka interop check for Sluice, through Debian's python3-confluent-kafka.

Run by TestLibrdkafka (librdkafka_test.go) as:

    /usr/bin/python3 librdkafka_test.py BOOTSTRAP [TOPIC_PREFIX]

Exits 0 and prints one "librdkafka interop: OK ..." line when every check passed;
exits 1 with "FAIL: ..." lines otherwise. Consumers here use assign() on explicit
partitions and never commit; librdkafka_group_test.py covers consumer groups.
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
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

CODECS = ["gzip", "snappy", "lz4", "zstd"]
MESSAGES = 300  # per codec
TIMEOUT = 30.0  # seconds, for each wait below


class CheckFailed(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise CheckFailed(msg)


def expected(codec, i):
    """The i-th record produced with codec: key, value, headers (in order)."""
    key = ("key-%s-%04d" % (codec, i)).encode()
    # Compressible and varying in size, so batches really shrink under each codec.
    value = ("value-%s-%04d|" % (codec, i) + "abcdefgh" * (i % 40)).encode()
    headers = [("seq", str(i).encode()), ("codec", codec.encode())]
    if i % 7 == 0:
        headers.append(("empty", b""))
    if i % 11 == 0:
        headers.append(("seq", b"repeated-key"))  # duplicate header keys keep their order
    return key, value, headers


def wait_futures(futs, what):
    """Waits for a dict of admin futures, raising with every error."""
    errors = []
    for name, fut in futs.items():
        try:
            fut.result(timeout=TIMEOUT)
        except Exception as e:  # noqa: BLE001 - report whatever the client raised
            errors.append("%s %s: %r" % (what, name, e))
    if errors:
        raise CheckFailed("; ".join(errors))


def topic_partitions(admin, topic):
    # All-topics metadata: a request naming the topic could auto-create it.
    md = admin.list_topics(timeout=TIMEOUT)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return t


def wait_for(cond, what, timeout=TIMEOUT):
    deadline = time.time() + timeout
    while True:
        if cond():
            return
        if time.time() > deadline:
            raise CheckFailed("timed out after %.0fs waiting for %s" % (timeout, what))
        time.sleep(0.1)


def produce(bootstrap, topic, codec):
    reports = []

    def on_delivery(err, msg):
        reports.append((err, msg))

    p = Producer({
        "bootstrap.servers": bootstrap,
        "client.id": "sluice-interop-librdkafka",
        "acks": "all",
        "compression.type": codec,
        "linger.ms": 20,
        "batch.num.messages": 100,
        "enable.idempotence": False,
    })
    for i in range(MESSAGES):
        key, value, headers = expected(codec, i)
        p.produce(topic, value=value, key=key, headers=headers, partition=0, on_delivery=on_delivery)
        p.poll(0)
    left = p.flush(TIMEOUT)
    check(left == 0, "%s: %d messages still undelivered after %.0fs" % (codec, left, TIMEOUT))
    check(len(reports) == MESSAGES, "%s: %d delivery reports, want %d" % (codec, len(reports), MESSAGES))
    failed = [(err, m.key()) for err, m in reports if err is not None]
    check(not failed, "%s: %d deliveries failed, first: %r" % (codec, len(failed), failed[:1]))
    offsets = [m.offset() for _, m in reports]
    check(sorted(offsets) == list(range(MESSAGES)),
          "%s: delivery report offsets are not 0..%d: first %r" % (codec, MESSAGES - 1, offsets[:10]))


def consume(bootstrap, topic, codec):
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "client.id": "sluice-interop-librdkafka",
        "group.id": "sluice-interop-unused",  # required by the client; no group is joined
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
    })
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = []
        deadline = time.time() + TIMEOUT
        while True:
            check(time.time() < deadline, "%s: consumed %d of %d messages before the deadline" % (codec, len(got), MESSAGES))
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    if len(got) >= MESSAGES:
                        break
                    continue
                raise CheckFailed("%s: consume error: %s" % (codec, m.error()))
            got.append(m)
    finally:
        c.close()
    check(len(got) == MESSAGES, "%s: consumed %d messages, want exactly %d" % (codec, len(got), MESSAGES))
    for i, m in enumerate(got):
        key, value, headers = expected(codec, i)
        check(m.offset() == i, "%s: message %d has offset %d" % (codec, i, m.offset()))
        check(m.key() == key, "%s: offset %d key %r, want %r" % (codec, i, m.key(), key))
        check(m.value() == value, "%s: offset %d value %r, want %r" % (codec, i, m.value()[:60], value[:60]))
        got_headers = [(k, v if v is not None else b"") for k, v in (m.headers() or [])]
        check(got_headers == headers, "%s: offset %d headers %r, want %r" % (codec, i, got_headers, headers))


LARGE_SIZES = [1, 1000, 300000, 900000, 5, 600000]


def large_value(i, size):
    """Deterministic, poorly compressible bytes."""
    seed = bytes((i * 31 + j * 17 + (j >> 8)) % 256 for j in range(256))
    return (seed * (size // 256 + 1))[:size]


def large_messages(bootstrap, topic):
    """Messages up to 900 KB, read back with fetch limits far below their size: the broker
    must return a whole first batch however small the limits are."""
    reports = []
    p = Producer({
        "bootstrap.servers": bootstrap,
        "client.id": "sluice-interop-librdkafka",
        "acks": "all",
        "compression.type": "none",
        "message.max.bytes": 1000000,
    })
    for i, size in enumerate(LARGE_SIZES):
        p.produce(topic, value=large_value(i, size), key=b"large-%d" % i, partition=0,
                  on_delivery=lambda err, msg: reports.append((err, msg)))
    left = p.flush(TIMEOUT)
    check(left == 0, "large: %d messages undelivered" % left)
    failed = [err for err, _ in reports if err is not None]
    check(not failed, "large: deliveries failed: %r" % failed[:2])

    c = Consumer({
        "bootstrap.servers": bootstrap,
        "client.id": "sluice-interop-librdkafka",
        "group.id": "sluice-interop-unused",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "message.max.bytes": 65536,  # librdkafka wants fetch.max.bytes >= this
        "fetch.max.bytes": 65536,
        "max.partition.fetch.bytes": 16384,
    })
    got = []
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.time() + TIMEOUT
        while len(got) < len(LARGE_SIZES):
            check(time.time() < deadline, "large: consumed %d of %d messages before the deadline (sizes %r)"
                  % (len(got), len(LARGE_SIZES), LARGE_SIZES))
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise CheckFailed("large: consume error: %s" % m.error())
            got.append(m)
    finally:
        c.close()
    for i, m in enumerate(got):
        want = large_value(i, LARGE_SIZES[i])
        check(m.offset() == i and m.key() == b"large-%d" % i and m.value() == want,
              "large: offset %d: key %r, %d value bytes (match: %s), want offset %d, %d bytes"
              % (m.offset(), m.key(), len(m.value() or b""), m.value() == want, i, len(want)))


def describe(admin, topic):
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    futs = admin.describe_configs([res])
    out = {}
    for _, fut in futs.items():
        for name, entry in fut.result(timeout=TIMEOUT).items():
            out[name] = entry.value
    return out


def admin_checks(bootstrap, prefix):
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "sluice-interop-librdkafka"})
    done = []
    topic = prefix + "admin"
    dry = prefix + "admin-validate-only"

    # validate_only creates nothing.
    wait_futures(admin.create_topics([NewTopic(dry, num_partitions=2, replication_factor=1)],
                                     validate_only=True, request_timeout=TIMEOUT), "create_topics(validate_only)")
    check(topic_partitions(admin, dry) is None, "validate_only create_topics created %s" % dry)
    done.append("create_topics(validate_only)")

    # Create with configs.
    wait_futures(admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1,
                                               config={"retention.ms": "3600000", "cleanup.policy": "delete"})],
                                     request_timeout=TIMEOUT), "create_topics")
    wait_for(lambda: topic_partitions(admin, topic) is not None, "topic %s in metadata" % topic)
    t = topic_partitions(admin, topic)
    check(len(t.partitions) == 1, "%s: %d partitions after create, want 1" % (topic, len(t.partitions)))
    done.append("create_topics")

    cfg = describe(admin, topic)
    check(cfg.get("retention.ms") == "3600000", "describe_configs retention.ms = %r, want '3600000'" % cfg.get("retention.ms"))
    check(cfg.get("cleanup.policy") == "delete", "describe_configs cleanup.policy = %r, want 'delete'" % cfg.get("cleanup.policy"))
    done.append("describe_configs")

    # Broker configs answer too.
    bfuts = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "1")])
    for _, fut in bfuts.items():
        bcfg = fut.result(timeout=TIMEOUT)
        check(len(bcfg) > 0, "describe_configs(BROKER 1) returned no configs")
    done.append("describe_configs(broker)")

    # alter_configs replaces the topic's whole set of dynamic configs.
    wait_futures(admin.alter_configs([ConfigResource(ConfigResource.Type.TOPIC, topic,
                                                     set_config={"retention.ms": "7200000", "cleanup.policy": "delete"})],
                                     request_timeout=TIMEOUT), "alter_configs")
    wait_for(lambda: describe(admin, topic).get("retention.ms") == "7200000", "retention.ms = 7200000 after alter_configs")
    done.append("alter_configs")

    if hasattr(admin, "incremental_alter_configs"):
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry
        res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
            ConfigEntry("retention.ms", "10800000", incremental_operation=AlterConfigOpType.SET)])
        wait_futures(admin.incremental_alter_configs([res]), "incremental_alter_configs")
        wait_for(lambda: describe(admin, topic).get("retention.ms") == "10800000",
                 "retention.ms = 10800000 after incremental_alter_configs")
        done.append("incremental_alter_configs")

    wait_futures(admin.create_partitions([NewPartitions(topic, 3)], request_timeout=TIMEOUT), "create_partitions")
    wait_for(lambda: len(topic_partitions(admin, topic).partitions) == 3, "%s to have 3 partitions" % topic)
    done.append("create_partitions")

    md = admin.list_topics(timeout=TIMEOUT)
    check(len(md.brokers) == 1 and 1 in md.brokers, "list_topics brokers = %r, want only broker 1" % md.brokers)
    for codec in CODECS:
        check(prefix + codec in md.topics, "list_topics lacks %s" % (prefix + codec))
    done.append("list_topics")

    if hasattr(admin, "describe_cluster"):
        desc = admin.describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT)
        check(len(desc.nodes) == 1 and desc.nodes[0].id == 1, "describe_cluster nodes = %r" % desc.nodes)
        done.append("describe_cluster")

    wait_futures(admin.delete_topics([topic], request_timeout=TIMEOUT), "delete_topics")
    wait_for(lambda: topic not in admin.list_topics(timeout=TIMEOUT).topics, "%s to disappear after delete_topics" % topic)
    done.append("delete_topics")
    return done


def main():
    if len(sys.argv) < 2:
        print("usage: librdkafka_test.py BOOTSTRAP [TOPIC_PREFIX]", file=sys.stderr)
        return 2
    bootstrap = sys.argv[1]
    prefix = sys.argv[2] if len(sys.argv) > 2 else "lrk-"
    print("confluent-kafka %s, librdkafka %s, broker %s" % (version()[0], libversion()[0], bootstrap), flush=True)
    started = time.time()
    step = "setup"
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "sluice-interop-librdkafka"})
        step = "create codec topics"
        wait_futures(admin.create_topics([NewTopic(prefix + c, num_partitions=1, replication_factor=1)
                                          for c in CODECS + ["large"]],
                                         request_timeout=TIMEOUT), "create_topics")
        for codec in CODECS:
            wait_for(lambda: topic_partitions(admin, prefix + codec) is not None, "topic %s%s in metadata" % (prefix, codec))
            step = "produce " + codec
            produce(bootstrap, prefix + codec, codec)
            step = "consume " + codec
            consume(bootstrap, prefix + codec, codec)
            print("ok  %-6s %d messages produced (acks=all) and consumed back exactly" % (codec, MESSAGES), flush=True)
        step = "large messages"
        wait_for(lambda: topic_partitions(admin, prefix + "large") is not None, "topic %slarge in metadata" % prefix)
        large_messages(bootstrap, prefix + "large")
        print("ok  large  messages of %s bytes, fetched with max.partition.fetch.bytes=16384"
              % "/".join(str(n) for n in LARGE_SIZES), flush=True)
        step = "admin"
        done = admin_checks(bootstrap, prefix)
        print("ok  admin: " + ", ".join(done), flush=True)
    except (CheckFailed, KafkaException) as e:
        print("FAIL: %s: %s" % (step, e), flush=True)
        return 1
    except Exception:  # noqa: BLE001 - any surprise is a failure with a trace
        print("FAIL: %s: unexpected exception:\n%s" % (step, traceback.format_exc()), flush=True)
        return 1
    print("librdkafka interop: OK (%d codecs x %d messages, admin checks) in %.1fs"
          % (len(CODECS), MESSAGES, time.time() - started), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
