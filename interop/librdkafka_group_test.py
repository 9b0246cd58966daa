#!/usr/bin/python3
"""librdkafka consumer group check for Sluice, through Debian's python3-confluent-kafka.

Run by TestLibrdkafkaGroup (librdkafka_group_test.go) as:

    /usr/bin/python3 librdkafka_group_test.py BOOTSTRAP TOPIC GROUP MODE EXPECT CONSUMERS [FIRST_ID]

Starts CONSUMERS subscribe()d consumers (client ids sluice-interop-librdkafka-FIRST_ID,
FIRST_ID+1, ...; FIRST_ID defaults to 0)
in GROUP, polled in turn from this one thread, with auto.offset.reset=earliest. MODE is
"auto" (enable.auto.commit, every 100ms, and close() commits) or "manual" (no
auto-commit; commit(asynchronous=False) every 25 messages, on revoke, once everything is
consumed and before close()). Prints one JSON object per stdout line:

    {"event":"assign","consumer":i,"partitions":[...]}     from on_assign
    {"event":"revoke","consumer":i,"partitions":[...]}     from on_revoke
    {"event":"consumed","count":N}   once EXPECT distinct records are consumed and every
                                     consumer has partitions (manual: and has committed)
    {"event":"report","records":[{"c":..,"p":..,"o":..,"v":..}],"assigned":{i:[[...],...]}}
    {"event":"fail","msg":...}       and exit 1, on any failure

    {"event":"error","consumer":i,"msg":...}   a transport error poll() returned

LRK_DEBUG in the environment sets librdkafka's debug contexts (e.g. cgrp,fetch).

After "consumed" the consumers keep polling until a "stop" line on stdin; then they
commit (manual) and close(), the report is printed and it exits 0. An "expect N" line
asks for another "consumed" event once N distinct records have been consumed in all.
"""

import json
import os
import select
import sys
import time
import traceback

from confluent_kafka import Consumer, KafkaError, KafkaException

TIMEOUT = 60.0
# Errors poll() may return while the broker restarts; anything else fails.
TRANSIENT = (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)


def emit(obj):
    print(json.dumps(obj), flush=True)


def fail(msg):
    emit({"event": "fail", "msg": msg})
    sys.exit(1)


def commit_sync(c):
    """Synchronous commit of the consumed offsets; nothing to commit is fine."""
    try:
        c.commit(asynchronous=False)
    except KafkaException as e:
        if e.args[0].code() != KafkaError._NO_OFFSET:
            raise


def main():
    if len(sys.argv) not in (7, 8) or sys.argv[4] not in ("auto", "manual"):
        fail("usage: librdkafka_group_test.py BOOTSTRAP TOPIC GROUP auto|manual EXPECT CONSUMERS [FIRST_ID]")
    bootstrap, topic, group, mode = sys.argv[1:5]
    expect, n = int(sys.argv[5]), int(sys.argv[6])
    first_id = int(sys.argv[7]) if len(sys.argv) == 8 else 0
    manual = mode == "manual"

    records = []
    seen = set()
    current = {}   # consumer → partitions assigned now
    assigned = {}  # consumer → every assignment it got
    since_commit = {}
    consumers = []

    def make(i):
        def on_assign(c, parts):
            ps = sorted(p.partition for p in parts)
            current[i] = ps
            assigned.setdefault(i, []).append(ps)
            emit({"event": "assign", "consumer": i, "partitions": ps})

        def on_revoke(c, parts):
            emit({"event": "revoke", "consumer": i, "partitions": sorted(p.partition for p in parts)})
            if manual:
                commit_sync(c)
            current[i] = []

        debug = {"debug": os.environ["LRK_DEBUG"]} if os.environ.get("LRK_DEBUG") else {}
        c = Consumer({
            **debug,
            "bootstrap.servers": bootstrap,
            "client.id": "sluice-interop-librdkafka-%d" % (first_id + i),
            "group.id": group,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": not manual,
            "auto.commit.interval.ms": 100,
            "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
            "reconnect.backoff.max.ms": 1000,  # back soon after a broker restart
        })
        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        return c

    for i in range(n):
        consumers.append(make(i))
        since_commit[i] = 0

    deadline = time.time() + TIMEOUT
    consumed_sent = False
    stop = False
    while not stop:
        if time.time() > deadline:
            fail("no stop after %.0fs: %d distinct records consumed of %d, assignments %r"
                 % (TIMEOUT, len(seen), expect, current))
        for i, c in enumerate(consumers):
            m = c.poll(0.05)
            if m is None:
                continue
            if m.error():
                if m.error().code() in TRANSIENT and not m.error().fatal():
                    emit({"event": "error", "consumer": i, "msg": str(m.error())})
                    continue
                fail("consumer %d: %s" % (i, m.error()))
            records.append({"c": i, "p": m.partition(), "o": m.offset(), "v": m.value().decode()})
            seen.add((m.partition(), m.offset()))
            since_commit[i] += 1
            if manual and since_commit[i] >= 25:
                commit_sync(c)
                since_commit[i] = 0
        if not consumed_sent and len(seen) >= expect and all(current.get(i) for i in range(n)):
            if manual:
                for c in consumers:
                    commit_sync(c)
            consumed_sent = True
            emit({"event": "consumed", "count": len(seen)})
        if select.select([sys.stdin], [], [], 0)[0]:
            line = sys.stdin.readline()
            if line.startswith("expect "):
                expect, consumed_sent = int(line.split()[1]), False
                deadline = time.time() + TIMEOUT
            else:
                stop = line == "" or line.strip() == "stop"

    for c in consumers:
        if manual:
            commit_sync(c)
        c.close()
    emit({"event": "report", "records": records, "assigned": {str(k): v for k, v in assigned.items()}})
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SystemExit:
        raise
    except Exception:  # noqa: BLE001 - any surprise is a failure with a trace
        fail("unexpected exception:\n" + traceback.format_exc())
