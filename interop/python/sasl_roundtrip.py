"""SASL round trips through Regent with Debian's two Python Kafka clients.

usage: sasl_roundtrip.py BOOTSTRAP TOPIC USER PASSWORD
For PLAIN and SCRAM-SHA-256 in turn: confluent-kafka (librdkafka, SaslHandshake
v1 + SaslAuthenticate) and kafka-python produce and read back records over
SASL_PLAINTEXT; a wrong password must fail. Prints one line per check and
exits non-zero on the first failure.
"""
import sys
import time

BOOTSTRAP, TOPIC, USER, PASSWORD = sys.argv[1:5]
COUNT = 200
DEADLINE = time.monotonic() + 120


def fail(msg):
    print("FAIL:", msg, flush=True)
    sys.exit(1)


def confluent(mech):
    from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING
    conf = {"bootstrap.servers": BOOTSTRAP, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": mech, "sasl.username": USER, "sasl.password": PASSWORD}
    tag = "confluent-" + mech
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

    # A wrong password: the producer reports an authentication error.
    bad = Producer(dict(conf, **{"sasl.password": PASSWORD + "-wrong"}))
    seen = []
    bad.produce(TOPIC, value=b"never", on_delivery=lambda err, msg: seen.append(err))
    bad.flush(5)
    md_err = None
    try:
        bad.list_topics(timeout=5)
    except Exception as e:  # KafkaException: authentication failure
        md_err = e
    if md_err is None:
        fail("%s: a wrong password was accepted" % tag)
    print("ok: %s wrong password refused (%s)" % (tag, md_err), flush=True)


def kafka_python(mech):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    conf = dict(bootstrap_servers=BOOTSTRAP, security_protocol="SASL_PLAINTEXT",
                sasl_mechanism=mech, sasl_plain_username=USER, sasl_plain_password=PASSWORD)
    tag = "kafka-python-" + mech
    p = KafkaProducer(**conf)
    for i in range(COUNT):
        p.send(TOPIC, value=("%s-%d" % (tag, i)).encode(), partition=0)
    p.flush(30)
    p.close()
    c = KafkaConsumer(consumer_timeout_ms=10000, **conf)
    c.assign([TopicPartition(TOPIC, 0)])
    c.seek_to_beginning()
    got = 0
    for m in c:
        if m.value.decode().startswith(tag + "-"):
            got += 1
            if got == COUNT:
                break
    c.close()
    if got != COUNT:
        fail("%s: consumed %d of %d" % (tag, got, COUNT))
    print("ok: %s produced and consumed %d records" % (tag, COUNT), flush=True)


for mech in ("PLAIN", "SCRAM-SHA-256"):
    confluent(mech)
for mech in ("PLAIN", "SCRAM-SHA-256"):
    try:
        kafka_python(mech)
    except ValueError as e:  # an old kafka-python without SCRAM
        print("skip: kafka-python %s: %s" % (mech, e), flush=True)
