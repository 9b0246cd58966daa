#!/usr/bin/python3
"""A long-running librdkafka group member for Sluice's interop tests (Debian's
python3-confluent-kafka), run with /usr/bin/python3 as:

    group_member.py BOOTSTRAP TOPIC GROUP CLIENT_ID

subscribe()s to TOPIC in GROUP with auto-commit (every 100 ms) from the earliest
offset and polls until stdin closes or says "stop", then close()s (committing and
leaving the group). Prints one JSON object per stdout line:

    {"event":"assign","partitions":[...]}     from on_assign
    {"event":"revoke","partitions":[...]}     from on_revoke
    {"event":"count","consumed":N}            every 50 records
    {"event":"fail","msg":...}                and exit 1, on a non-transient error
"""

import json
import select
import sys

from confluent_kafka import Consumer, KafkaError

TRANSIENT = (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)


def emit(obj):
    print(json.dumps(obj), flush=True)


def main():
    if len(sys.argv) != 5:
        emit({"event": "fail", "msg": "usage: group_member.py BOOTSTRAP TOPIC GROUP CLIENT_ID"})
        sys.exit(1)
    bootstrap, topic, group, client_id = sys.argv[1:5]
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "group.id": group,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 100,
        "fetch.wait.max.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000,
    })
    c.subscribe([topic],
                on_assign=lambda _, ps: emit({"event": "assign", "partitions": sorted(p.partition for p in ps)}),
                on_revoke=lambda _, ps: emit({"event": "revoke", "partitions": sorted(p.partition for p in ps)}))
    consumed = 0
    while True:
        m = c.poll(0.05)
        if m is not None:
            if m.error():
                if m.error().code() not in TRANSIENT or m.error().fatal():
                    emit({"event": "fail", "msg": str(m.error())})
                    sys.exit(1)
            else:
                consumed += 1
                if consumed % 50 == 0:
                    emit({"event": "count", "consumed": consumed})
        if select.select([sys.stdin], [], [], 0)[0]:
            line = sys.stdin.readline()
            if line == "" or line.strip() == "stop":
                break
    c.close()


if __name__ == "__main__":
    main()
