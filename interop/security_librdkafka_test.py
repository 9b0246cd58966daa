#!/usr/bin/python3
"""librdkafka over SASL_SSL, through Debian's python3-confluent-kafka.

Run by TestSecureClients (security_test.go):

    /usr/bin/python3 security_librdkafka_test.py allowed BOOTSTRAP CA_PEM TOPIC
    /usr/bin/python3 security_librdkafka_test.py denied BOOTSTRAP CA_PEM TOPIC

allowed logs in as alice (prefixed ACLs on sec-* topics, groups and transactional
ids): 20 records to partition 2 with an idempotent acks=all producer (PLAIN), consumed
back in group sec-librdkafka with a commit (SCRAM-SHA-256), then one committed and one
aborted transaction of 5 records each (transactional id sec-txn), read back with
read_committed: only the committed five. denied logs in as bob, who has no ACLs: his
explicit metadata request names TOPIC_AUTHORIZATION_FAILED, his produce fails with it,
his group join fails with GROUP_AUTHORIZATION_FAILED, his transactional producer with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; a wrong password fails authentication. Prints
"security librdkafka: OK" on success, "FAIL: ..." otherwise.
"""

import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

TIMEOUT = 30.0


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def conf(bootstrap, ca, user, password, mech, **extra):
    c = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": mech,
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": ca,
    }
    c.update(extra)
    return c


def consume(c, want, pred, timeout=TIMEOUT):
    got = []
    deadline = time.time() + timeout
    while len(got) < want and time.time() < deadline:
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            fail("consume: %s" % m.error())
        if pred(m.value()):
            got.append(m.value())
    return got


def allowed(bootstrap, ca, topic):
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)

    p = Producer(conf(bootstrap, ca, "alice", "alice-secret", "PLAIN", **{
        "enable.idempotence": True, "acks": "all", "linger.ms": 5}))
    for i in range(20):
        p.produce(topic, key=b"k%d" % i, value=b"lrk-secure-%d" % i, partition=2, on_delivery=on_delivery)
    if p.flush(TIMEOUT) != 0 or errors:
        fail("produce as alice: %r" % errors[:1])

    c = Consumer(conf(bootstrap, ca, "alice", "alice-secret", "SCRAM-SHA-256", **{
        "group.id": "sec-librdkafka", "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    c.subscribe([topic])
    got = consume(c, 20, lambda v: v.startswith(b"lrk-secure-"))
    if len(got) != 20:
        fail("consumed %d of alice's 20 records in the group" % len(got))
    c.commit(asynchronous=False)
    c.close()

    tp = Producer(conf(bootstrap, ca, "alice", "alice-secret", "SCRAM-SHA-256", **{
        "transactional.id": "sec-txn"}))
    tp.init_transactions(TIMEOUT)
    for outcome in ("commit", "abort"):
        tp.begin_transaction()
        for i in range(5):
            tp.produce(topic, value=("lrk-txn-%s-%d" % (outcome, i)).encode(), partition=0)
        if outcome == "commit":
            tp.commit_transaction(TIMEOUT)
        else:
            tp.flush(TIMEOUT)
            tp.abort_transaction(TIMEOUT)

    rc = Consumer(conf(bootstrap, ca, "alice", "alice-secret", "SCRAM-SHA-512", **{
        "group.id": "sec-librdkafka-rc-" + uuid.uuid4().hex[:6], "auto.offset.reset": "earliest",
        "isolation.level": "read_committed", "enable.auto.commit": False}))
    rc.assign([TopicPartition(topic, 0, 0)])
    got = consume(rc, 5, lambda v: v.startswith(b"lrk-txn-"), timeout=15.0)
    # Wait a little more for anything that should not be there.
    got += consume(rc, 1, lambda v: v.startswith(b"lrk-txn-"), timeout=2.0)
    rc.close()
    if sorted(got) != sorted(("lrk-txn-commit-%d" % i).encode() for i in range(5)):
        fail("read_committed saw %r, want the committed five only" % got)


def expect_error(what, fn, code):
    try:
        fn()
    except KafkaException as e:
        if e.args[0].code() == code:
            return
        fail("%s: %s, want %s" % (what, e.args[0], KafkaError(code).name()))
    fail("%s succeeded, want %s" % (what, KafkaError(code).name()))


def denied(bootstrap, ca, topic):
    p = Producer(conf(bootstrap, ca, "bob", "bob-secret", "SCRAM-SHA-512"))
    md = p.list_topics(topic, timeout=TIMEOUT)
    t = md.topics.get(topic)
    if t is None or t.error is None or t.error.code() != KafkaError.TOPIC_AUTHORIZATION_FAILED:
        fail("bob's metadata for %s: %r, want TOPIC_AUTHORIZATION_FAILED" % (topic, t and t.error))
    # librdkafka refuses at once when the metadata it holds already says the topic is
    # not authorized; otherwise the delivery report carries the broker's code.
    errs = []
    try:
        p.produce(topic, value=b"denied", partition=0, on_delivery=lambda err, msg: errs.append(err))
        p.flush(TIMEOUT)
    except KafkaException as e:
        errs.append(e.args[0])
    if len(errs) != 1 or errs[0] is None or errs[0].code() != KafkaError.TOPIC_AUTHORIZATION_FAILED:
        fail("bob's produce: %r, want TOPIC_AUTHORIZATION_FAILED" % errs)

    c = Consumer(conf(bootstrap, ca, "bob", "bob-secret", "SCRAM-SHA-256", **{
        "group.id": "sec-bob", "auto.offset.reset": "earliest"}))
    c.subscribe(["sec-data"])
    deadline = time.time() + TIMEOUT
    seen = None
    while time.time() < deadline and seen is None:
        m = c.poll(1.0)
        if m is not None and m.error():
            seen = m.error()
        elif m is not None:
            fail("bob consumed a record: %r" % m.value())
    c.close()
    if seen is None or seen.code() not in (KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED):
        fail("bob's group consumer: %r, want GROUP_AUTHORIZATION_FAILED" % seen)

    tp = Producer(conf(bootstrap, ca, "bob", "bob-secret", "SCRAM-SHA-256", **{"transactional.id": "sec-bob-txn"}))
    expect_error("bob's init_transactions", lambda: tp.init_transactions(TIMEOUT),
                 KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)

    auth_errors = []
    wrong = Producer(conf(bootstrap, ca, "alice", "not-her-password", "SCRAM-SHA-256", **{
        "error_cb": lambda err: auth_errors.append(err)}))
    try:
        wrong.list_topics(timeout=5)
    except KafkaException:
        pass
    deadline = time.time() + TIMEOUT
    while not auth_errors and time.time() < deadline:
        wrong.poll(0.5)  # error_cb runs from poll
    if not any(e.code() == KafkaError._AUTHENTICATION for e in auth_errors):
        fail("a wrong password: errors %r, want _AUTHENTICATION" % auth_errors)


def main():
    mode, bootstrap, ca, topic = sys.argv[1:5]
    if mode == "allowed":
        allowed(bootstrap, ca, topic)
    elif mode == "denied":
        denied(bootstrap, ca, topic)
    else:
        fail("unknown mode " + mode)
    print("security librdkafka: OK")


if __name__ == "__main__":
    main()
