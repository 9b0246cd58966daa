#!/usr/bin/python3
"""librdkafka transactional and idempotent producers that keep running while the test
SIGKILLs and restarts the broker. Run by TestLibrdkafkaTransactionsBrokerKills
(txn_librdkafka_test.go) as:

    /usr/bin/python3 txn_librdkafka_kill_test.py BOOTSTRAP TXN_TOPIC IDEM_TOPIC TXN_ID

Loops until stdin is closed: each round is one transaction of 10 records to TXN_TOPIC
(2 partitions), committed (every fifth one aborted), plus 10 records from an idempotent
producer to IDEM_TOPIC. A commit that fails with a retriable error is retried; one that
requires an abort is aborted. Prints one JSON line per ended transaction
({"event": "txn", "committed": ..., "records": [[partition, value], ...]}) and, at the
end, {"event": "idem", "delivered": [[partition, offset, value], ...], "failed": [...]}.
A fatal error prints {"event": "fail", "msg": ...} and exits 1.
"""

import json
import sys
import threading
import time

from confluent_kafka import KafkaException, Producer

PARTITIONS = 2
PER_ROUND = 10
END_TIMEOUT = 120.0  # seconds to get one transaction's outcome


def emit(**ev):
    print(json.dumps(ev), flush=True)


def end_txn(txn, commit):
    """Commits or aborts the open transaction, retrying retriable errors; returns whether
    it committed. Raises on a fatal error."""
    deadline = time.time() + END_TIMEOUT
    while True:
        try:
            if commit:
                txn.commit_transaction(30)
            else:
                txn.abort_transaction(30)
            return commit
        except KafkaException as e:
            err = e.args[0]
            if time.time() > deadline:
                raise
            if err.txn_requires_abort():
                commit = False  # abort instead; the records are not committed
                continue
            if err.retriable():
                time.sleep(0.2)
                continue
            raise


def main():
    bootstrap, txn_topic, idem_topic, txn_id = sys.argv[1:5]
    conf = {"bootstrap.servers": bootstrap, "client.id": "sluice-interop-librdkafka-kill"}
    txn = Producer(dict(conf, **{"transactional.id": txn_id, "transaction.timeout.ms": 30000}))
    idem = Producer(dict(conf, **{"enable.idempotence": True, "acks": "all", "linger.ms": 5}))
    delivered, failed = [], []

    def on_idem(err, msg):
        if err is not None:
            failed.append([msg.partition(), msg.value().decode(), str(err)])
        else:
            delivered.append([msg.partition(), msg.offset(), msg.value().decode()])

    stop = threading.Event()

    def watch_stdin():
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    i = 0
    try:
        txn.init_transactions(60)
        emit(event="ready")
        while not stop.is_set():
            txn.begin_transaction()
            records = []
            for k in range(PER_ROUND):
                p, v = k % PARTITIONS, "T%05d-%d" % (i, k)
                records.append([p, v])
                txn.produce(txn_topic, value=v.encode(), partition=p)
                idem.produce(idem_topic, value=("I%05d-%d" % (i, k)).encode(), partition=p, on_delivery=on_idem)
            idem.poll(0)
            # Flush before ending: an abort_transaction() racing the registration of the
            # transaction's partitions can send EndTxn(abort) for partitions the
            # coordinator never saw and get a fatal INVALID_TXN_STATE (librdkafka issue
            # 4849; Kafka answers the same), and the aborted records should be in the log.
            left = txn.flush(END_TIMEOUT)
            if left:
                raise KafkaException("round %d: %d records still undelivered after %.0fs" % (i, left, END_TIMEOUT))
            committed = end_txn(txn, i % 5 != 4)
            emit(event="txn", round=i, committed=committed, records=records)
            i += 1
        left = idem.flush(END_TIMEOUT)
        emit(event="idem", delivered=delivered, failed=failed, undelivered=left)
    except KafkaException as e:
        emit(event="fail", msg="round %d: %s" % (i, e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
