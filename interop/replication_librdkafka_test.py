#!/usr/bin/python3
"""An idempotent acks=all librdkafka producer that keeps producing while the test
SIGKILLs and restarts brokers of a three-broker cluster. Run by
TestReplicationClientsBrokerKills (replication_clients_test.go) as:

    /usr/bin/python3 replication_librdkafka_test.py BOOTSTRAPS TOPIC PARTITIONS TAG

BOOTSTRAPS is every broker, comma-separated. The producer (enable.idempotence, acks=all,
unlimited retries, no message timeout) writes numbered values "TAG-p<partition>-<seq>"
(seq counts per partition from 0) round-robin over the partitions, at most RATE records
a second and at most INFLIGHT undelivered, until stdin is closed; then it flushes and
prints its report. Events, one JSON object per stdout line:

    {"event": "ready"}                          the producer is created
    {"event": "progress", "delivered": N, "failed": F, "partitions": [delivered per
        partition]}                             every 250ms
    {"event": "report", "sent": [n per partition], "delivered": [[partition, offset, value],
        ...], "failed": [[partition, value, error], ...], "undelivered": N,
        "errors": E, "retries": R}             E: errors librdkafka reported (error_cb),
                                                R: records it transmitted again
    {"event": "fail", "msg": ...}               and exit 1, on an unexpected exception
"""

import json
import sys
import threading
import time
import traceback

from confluent_kafka import Producer

RATE = 1000.0  # records a second, at most
INFLIGHT = 500  # produced but not yet reported, at most
FLUSH_TIMEOUT = 120.0


def emit(**ev):
    print(json.dumps(ev), flush=True)


def main():
    bootstraps, topic, partitions, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    # What the kills did to the producer: errors librdkafka reported (transport failures)
    # and records it transmitted more than once (its statistics count the records queued
    # and transmitted per partition).
    seen = {"errors": 0, "retries": 0}

    def on_error(err):
        seen["errors"] += 1

    def on_stats(js):
        parts = json.loads(js).get("topics", {}).get(topic, {}).get("partitions", {}).values()
        seen["retries"] = sum(p["txmsgs"] - p["msgs"] for p in parts if p["partition"] >= 0)

    producer = Producer({
        "bootstrap.servers": bootstraps,
        "client.id": "sluice-interop-librdkafka-repl",
        "enable.idempotence": True,
        "acks": "all",
        "retries": 2147483647,
        "message.timeout.ms": 0,  # never give up on a record
        "linger.ms": 5,
        "retry.backoff.ms": 100,
        "reconnect.backoff.max.ms": 1000,
        "topic.metadata.refresh.interval.ms": 1000,
        "statistics.interval.ms": 500,
        "error_cb": on_error,
        "stats_cb": on_stats,
    })
    sent = [0] * partitions
    delivered_per = [0] * partitions
    delivered, failed = [], []

    def on_delivery(err, msg):
        if err is not None:
            failed.append([msg.partition(), msg.value().decode(), str(err)])
        else:
            delivered.append([msg.partition(), msg.offset(), msg.value().decode()])
            delivered_per[msg.partition()] += 1

    stop = threading.Event()

    def watch_stdin():
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    emit(event="ready")
    start = time.monotonic()
    last_progress = 0.0
    total = 0
    while not stop.is_set():
        now = time.monotonic()
        if now - last_progress >= 0.25:
            emit(event="progress", delivered=len(delivered), failed=len(failed), partitions=delivered_per)
            last_progress = now
        if total - len(delivered) - len(failed) >= INFLIGHT or total >= (now - start) * RATE:
            producer.poll(0.01)  # serves delivery reports
            continue
        p = total % partitions
        value = "%s-p%d-%08d" % (tag, p, sent[p])
        try:
            producer.produce(topic, value=value.encode(), partition=p, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.05)  # the local queue is full: try the same record again
            continue
        sent[p] += 1
        total += 1
        producer.poll(0)
    left = producer.flush(FLUSH_TIMEOUT)
    producer.poll(0.6)  # one more statistics callback
    emit(event="report", sent=sent, delivered=delivered, failed=failed, undelivered=left,
         errors=seen["errors"], retries=seen["retries"])
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:  # noqa: BLE001 - reported to the test, which fails
        emit(event="fail", msg=traceback.format_exc())
        sys.exit(1)
