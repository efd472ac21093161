"""A librdkafka producer with its default pipelining sends large records to
a cluster at acks=all faster than the leader commits them.

librdkafka allows a million requests in flight per connection (without
idempotence), so it keeps sending while the broker tells it to wait; the
broker must push back (stop reading) rather than close the connection, or
the producer reconnects, floods again and delivers almost nothing.

usage: pipeline_flood.py BOOTSTRAP TOPIC COUNT SIZE
Produces COUNT records of SIZE bytes, one per request, to one partition
with replication factor 3, then checks every delivery report (offsets 0..
COUNT-1, in order) and reads every record back. Prints one line per check
and exits non-zero on the first failure.
"""
import struct
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP, TOPIC, COUNT, SIZE = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])


def fail(msg):
    print("FAIL:", msg, flush=True)
    sys.exit(1)


def value(i):
    return struct.pack(">I", i) * (SIZE // 4)


admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=3)])[TOPIC].result(timeout=30)

# librdkafka's defaults but one record per request: many requests, each large.
p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "batch.num.messages": 1,
              "queue.buffering.max.kbytes": 2097151, "message.timeout.ms": 120000})
offsets, errors = [], []


def report(err, msg):
    if err:
        errors.append(err)
    else:
        offsets.append((struct.unpack(">I", msg.value()[:4])[0], msg.offset()))


start = time.monotonic()
for i in range(COUNT):
    p.produce(TOPIC, value=value(i), partition=0, on_delivery=report)
    p.poll(0)
left = p.flush(120)
took = time.monotonic() - start
if left or errors:
    fail("produce: %d undelivered, %d errors %s" % (left, len(errors), errors[:3]))
if offsets != [(i, i) for i in range(COUNT)]:
    fail("delivery reports out of order or offsets wrong: first %s" % offsets[:5])
print("produced %d x %d bytes at acks=all in %.1f s: every delivery report in order" % (COUNT, SIZE, took), flush=True)

c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": TOPIC + "-check", "enable.auto.commit": False})
c.assign([TopicPartition(TOPIC, 0, 0)])
deadline = time.monotonic() + 60
i = 0
while i < COUNT and time.monotonic() < deadline:
    m = c.poll(1.0)
    if m is None:
        continue
    if m.error():
        fail("consume: %s" % m.error())
    if m.offset() != i or m.value() != value(i):
        fail("record at offset %d is not record %d" % (m.offset(), i))
    i += 1
c.close()
if i != COUNT:
    fail("consumed %d of %d records" % (i, COUNT))
print("consumed all %d records, in order, byte for byte" % COUNT, flush=True)
