"""Reads a topic with librdkafka (confluent-kafka) as a consumer in a rack.

usage: follower_reads.py BOOTSTRAP TOPIC RACK COUNT
Prints the values read, one per line, after "VALUES"; exits non-zero when
COUNT records were not read within 60 s.
"""
import sys
import time

from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING

BOOTSTRAP, TOPIC, RACK, COUNT = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "follower-reads-py",
              "enable.auto.commit": False, "client.rack": RACK,
              "isolation.level": "read_committed"})
c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
values = []
deadline = time.monotonic() + 60
while len(values) < COUNT and time.monotonic() < deadline:
    m = c.poll(1.0)
    if m is None:
        continue
    if m.error():
        print("error:", m.error(), flush=True)
        continue
    values.append(m.value().decode())
c.close()
print("VALUES")
for v in values:
    print(v)
if len(values) < COUNT:
    print("FAIL: read %d of %d" % (len(values), COUNT), flush=True)
    sys.exit(1)
