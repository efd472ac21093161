"""SASL_SSL round trips through Regent with confluent-kafka (librdkafka).

usage: sasl_ssl_roundtrip.py BOOTSTRAP CA_FILE TOPIC USER PASSWORD
For PLAIN and SCRAM-SHA-256 in turn: produce and read back records over
SASL_SSL (the broker's certificate verified against CA_FILE); a wrong
password must fail. Prints one line per check, exits non-zero on a failure.
"""
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING

BOOTSTRAP, CA, TOPIC, USER, PASSWORD = sys.argv[1:6]
COUNT = 200
DEADLINE = time.monotonic() + 120


def fail(msg):
    print("FAIL:", msg, flush=True)
    sys.exit(1)


def roundtrip(mech):
    conf = {"bootstrap.servers": BOOTSTRAP, "security.protocol": "SASL_SSL",
            "ssl.ca.location": CA, "sasl.mechanisms": mech,
            "sasl.username": USER, "sasl.password": PASSWORD}
    tag = "py-ssl-" + mech
    p = Producer(dict(conf, **{"linger.ms": 5}))
    errors = []
    for i in range(COUNT):
        p.produce(TOPIC, value=("%s-%d" % (tag, i)).encode(), partition=0,
                  on_delivery=lambda err, msg: err and errors.append(err))
    left = p.flush(30)
    if left or errors:
        fail("%s produce: %d unflushed, errors %s" % (tag, left, errors[:3]))
    c = Consumer(dict(conf, **{"group.id": "unused", "enable.auto.commit": False}))
    c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    got = 0
    while got < COUNT and time.monotonic() < DEADLINE:
        for m in c.consume(num_messages=500, timeout=1.0):
            if m.error():
                fail("%s consume: %s" % (tag, m.error()))
            if m.value().decode().startswith(tag + "-"):
                got += 1
    c.close()
    if got != COUNT:
        fail("%s: consumed %d of %d" % (tag, got, COUNT))
    print("ok: %s produced and consumed %d records" % (tag, COUNT), flush=True)

    bad = Producer(dict(conf, **{"sasl.password": PASSWORD + "-wrong"}))
    try:
        bad.list_topics(timeout=5)
    except Exception:  # KafkaException: authentication failure
        print("ok: %s wrong password refused" % tag, flush=True)
        return
    fail("%s: a wrong password was accepted" % tag)


for mech in ("PLAIN", "SCRAM-SHA-256"):
    roundtrip(mech)
