#!/usr/bin/python3
"""A librdkafka producer that produces as fast as it can against a producer_byte_rate
quota, for Sluice's quota interop test (Debian's python3-confluent-kafka). Run by
TestQuotaClients (quotas_test.go) as:

    /usr/bin/python3 quotas_librdkafka_test.py BOOTSTRAP TOPIC CLIENT_ID VALUE_BYTES

The producer (client.id CLIENT_ID, no compression, so the bytes the broker charges are
the bytes it appends, acks=all) keeps its queue full of VALUE_BYTES-byte records for
partition 0 of TOPIC until stdin closes or says "stop"; then it purges what is left and
prints its report. Batches are at most 64 KiB, so the broker's log grows in small
steps and a rate measured from it over a few seconds is not lumpy. Events, one JSON
object per stdout line:

    {"event": "delivered"}                      the first record was acknowledged
    {"event": "report", "acked": N, "acked_bytes": B, "failed": F, "throttles": T,
        "throttle_ms_max": M}                   T: throttle events librdkafka reported
                                                (throttle_cb: a response carried a
                                                non-zero throttle_time_ms)
    {"event": "fail", "msg": ...}               and exit 1, on an unexpected error
"""

import json
import sys
import threading
import traceback

from confluent_kafka import KafkaError, Producer


def emit(**ev):
    print(json.dumps(ev), flush=True)


def main():
    if len(sys.argv) != 5:
        emit(event="fail", msg="usage: quotas_librdkafka_test.py BOOTSTRAP TOPIC CLIENT_ID VALUE_BYTES")
        sys.exit(1)
    bootstrap, topic, client_id, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    seen = {"acked": 0, "acked_bytes": 0, "failed": 0, "throttles": 0, "throttle_ms_max": 0, "errors": []}

    def on_throttle(ev):
        if ev.throttle_time > 0:
            seen["throttles"] += 1
            seen["throttle_ms_max"] = max(seen["throttle_ms_max"], int(ev.throttle_time * 1000))

    def on_error(err):
        # Transport hiccups are retried by librdkafka; anything else is reported.
        if err.code() not in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
            seen["errors"].append(str(err))

    def on_delivery(err, msg):
        if err is not None:
            # Records purged at the end fail with _PURGE_QUEUE / _PURGE_INFLIGHT.
            if err.code() not in (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT):
                seen["failed"] += 1
                seen["errors"].append(str(err))
            return
        if seen["acked"] == 0:
            emit(event="delivered")
        seen["acked"] += 1
        seen["acked_bytes"] += len(msg.value())

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "acks": "all",
        "compression.type": "none",
        "linger.ms": 5,
        "batch.size": 65536,
        # A queue that stays full under the quota: ~8 s of it at 1 MiB/s, well inside
        # the message timeout.
        "queue.buffering.max.messages": 8192,
        "message.timeout.ms": 120000,
        "throttle_cb": on_throttle,
        "error_cb": on_error,
    })

    stop = threading.Event()

    def read_stdin():
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()

    threading.Thread(target=read_stdin, daemon=True).start()

    value = b"q" * size
    while not stop.is_set():
        try:
            producer.produce(topic, value=value, partition=0, on_delivery=on_delivery)
        except BufferError:
            # The queue is full: serve the callbacks and wait for room.
            producer.poll(0.05)
            continue
        producer.poll(0)
    producer.purge(in_queue=True, in_flight=False)
    left = producer.flush(30)
    if seen["errors"]:
        emit(event="fail", msg="; ".join(seen["errors"][:10]))
        sys.exit(1)
    emit(event="report", acked=seen["acked"], acked_bytes=seen["acked_bytes"], failed=seen["failed"],
         throttles=seen["throttles"], throttle_ms_max=seen["throttle_ms_max"], undelivered=left)


if __name__ == "__main__":
    try:
        main()
    except Exception:  # noqa: BLE001 - report whatever went wrong
        emit(event="fail", msg=traceback.format_exc())
        sys.exit(1)
