"""Round trips through Regent with Debian's two Python Kafka clients.

usage: roundtrip.py BOOTSTRAP TOPIC_PREFIX
Prints one line per check and exits non-zero on the first failure.
"""
import sys
import time

BOOTSTRAP, PREFIX = sys.argv[1], sys.argv[2]
COUNT = 2000
DEADLINE = time.monotonic() + 120


def fail(msg):
    print("FAIL:", msg, flush=True)
    sys.exit(1)


def confluent_roundtrip():
    from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = PREFIX + "-confluent"
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    fut = admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic]
    fut.result(timeout=30)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        p = Producer({"bootstrap.servers": BOOTSTRAP, "compression.type": codec,
                      "enable.idempotence": codec == "zstd", "linger.ms": 5})
        errors = []
        for i in range(COUNT):
            p.produce(topic, key=str(i % 7).encode(), value=("%s-%d" % (codec, i)).encode(),
                      partition=i % 3, on_delivery=lambda err, msg: err and errors.append(err))
            if i % 500 == 0:
                p.poll(0)
        left = p.flush(30)
        if left or errors:
            fail("confluent-kafka produce %s: %d unflushed, errors %s" % (codec, left, errors[:3]))
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": PREFIX + "-unused",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
    seen = {}
    want = 5 * COUNT
    got = 0
    while got < want and time.monotonic() < DEADLINE:
        for m in c.consume(num_messages=1000, timeout=1.0):
            if m.error():
                fail("confluent-kafka consume: %s" % m.error())
            codec, i = m.value().decode().rsplit("-", 1)
            key = (codec, m.partition())
            if int(i) <= seen.get(key, -1):
                fail("confluent-kafka out of order: %s partition %d after %d" % (i, m.partition(), seen[key]))
            seen[key] = int(i)
            got += 1
    c.close()
    if got != want:
        fail("confluent-kafka consumed %d of %d" % (got, want))
    lo, hi = None, None
    print("ok: confluent-kafka produced and consumed %d records with 5 codecs" % want, flush=True)


def kafka_python_roundtrip():
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = PREFIX + "-kafkapython"
    p = KafkaProducer(bootstrap_servers=BOOTSTRAP, compression_type="gzip", linger_ms=5)
    futs = [p.send(topic, value=("v-%d" % i).encode(), partition=0) for i in range(COUNT)]
    p.flush(30)
    for f in futs:
        f.get(timeout=30)
    p.close()
    c = KafkaConsumer(bootstrap_servers=BOOTSTRAP, enable_auto_commit=False, consumer_timeout_ms=5000)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got = []
    while len(got) < COUNT and time.monotonic() < DEADLINE:
        for batch in c.poll(timeout_ms=1000).values():
            got.extend(m.value.decode() for m in batch)
    c.close()
    if got != ["v-%d" % i for i in range(COUNT)]:
        fail("kafka-python read %d records, not the %d produced in order" % (len(got), COUNT))
    print("ok: kafka-python produced and consumed %d records in order" % COUNT, flush=True)


confluent_roundtrip()
kafka_python_roundtrip()
