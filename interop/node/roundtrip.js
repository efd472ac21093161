'use strict'
// Round trips through Regent with kafkajs (interop/kafkajs_test.go runs
// it): admin calls, plain / GZIP / acks=0 / idempotent producers, record
// details (timestamps, null keys and values, headers), a consumer group
// that rebalances and resumes from its commits, and transactions (commit,
// abort, the last stable offset, consume-transform-produce).
//
// usage: node roundtrip.js BROKERS [TOPIC_PREFIX]
//   BROKERS is host:port[,host:port...] (or REGENT_BROKERS); TOPIC_PREFIX
//   (or REGENT_PREFIX, default "kjs") starts every topic and group name.
// Prints one summary line on success; on the first mismatch prints
// "FAIL: ...", what passed before and kafkajs's last log lines, and exits 1.
// REGENT_DEADLINE_MS (default 90000) bounds the whole run; REGENT_TIMING=1
// adds each check's elapsed milliseconds to the summary.

const { AssignerProtocol, Kafka, CompressionTypes, ConfigResourceTypes, Partitioners, logLevel } = require('kafkajs')

const brokers = (process.argv[2] || process.env.REGENT_BROKERS || '').split(',').filter(Boolean)
const prefix = process.argv[3] || process.env.REGENT_PREFIX || 'kjs'
if (brokers.length === 0) {
  console.error('usage: node roundtrip.js HOST:PORT[,HOST:PORT...] [TOPIC_PREFIX]')
  process.exit(2)
}

const DEADLINE_MS = Number(process.env.REGENT_DEADLINE_MS || 90000)
const started = Date.now()
const checks = []

class Mismatch extends Error {}

function fail (msg) {
  throw new Mismatch(msg)
}

function check (cond, msg) {
  if (!cond) fail(msg)
}

function ok (what) {
  checks.push(process.env.REGENT_TIMING ? `${what} @${Date.now() - started}` : what)
}

// waitFor polls cond (async, truthy when done) every 50 ms until limitMs,
// then fails with what it was waiting for.
async function waitFor (what, limitMs, cond) {
  const until = Date.now() + limitMs
  for (;;) {
    const v = await cond()
    if (v) return v
    if (Date.now() > until || Date.now() > started + DEADLINE_MS) fail(`timed out waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 50))
  }
}

// kafkajs logs (warnings and up) are kept and printed only on failure: a
// passing run prints its one summary line. Some errors are expected (the
// rebalance's REBALANCE_IN_PROGRESS, CreateTopics of an existing topic).
const kafkaLog = []
const logCreator = () => ({ namespace, level, log }) => {
  const { message, timestamp, logger, ...extra } = log
  kafkaLog.push(`${timestamp} ${level === logLevel.ERROR ? 'ERROR' : 'WARN'} [${namespace}] ${message} ${JSON.stringify(extra)}`)
  if (kafkaLog.length > 200) kafkaLog.shift()
}

// settled runs a read-and-check (an async function that throws on a
// mismatch) that follows a write. On one broker it must pass at once. In a
// cluster kafkajs sends each admin call to the "controller" of its latest
// Metadata, which Regent's nodes (as KRaft brokers) answer with their own
// id: a write acknowledged by one node may not have reached the node the
// read goes to, so there the check is retried for up to 10 s.
async function settled (checkFn) {
  const until = Date.now() + (brokers.length > 1 ? 10000 : 0)
  for (;;) {
    try {
      return await checkFn()
    } catch (err) {
      if (Date.now() >= until) throw err
    }
    await new Promise(resolve => setTimeout(resolve, 100))
  }
}

const kafka = new Kafka({
  clientId: `${prefix}-client`,
  brokers,
  connectionTimeout: 3000,
  requestTimeout: 10000,
  retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 2000 },
  logLevel: logLevel.WARN,
  logCreator
})

// Consumers heartbeat often so a rebalance completes in well under a second.
const groupTiming = { sessionTimeout: 10000, rebalanceTimeout: 10000, heartbeatInterval: 300, maxWaitTimeInMs: 200 }

const newProducer = opts => kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, ...opts })

function message (tag, i, partitions) {
  return {
    key: `key-${i % 13}`,
    value: `${tag}-${i}`,
    partition: i % partitions,
    headers: { seq: String(i), tag, bin: Buffer.from([i & 0xff, 0, 0xff]) }
  }
}

// A Log is what a test wrote (value -> message) and what consumers read back.
class Log {
  constructor (topic) {
    this.topic = topic
    this.sent = new Map()
    this.seen = new Map() // value -> times seen
    this.lastSeq = new Map() // `${consumer}/${partition}` -> last seq read
  }

  add (msgs) {
    for (const m of msgs) this.sent.set(m.value, m)
  }

  // record checks one consumed message against what was sent and that, per
  // consumer and partition, sequence numbers only grow (each test writes a
  // partition in increasing seq order). reset forgets a consumer's
  // positions: after a rebalance it may restart a partition at its commit.
  record (consumer, partition, m) {
    const value = m.value.toString()
    const want = this.sent.get(value)
    check(want !== undefined, `${this.topic}: read unexpected value ${value} on partition ${partition}`)
    check(partition === want.partition, `${this.topic}: ${value} read on partition ${partition}, sent to ${want.partition}`)
    check(m.key && m.key.toString() === want.key, `${this.topic}: ${value} has key ${m.key}, want ${want.key}`)
    const h = m.headers || {}
    for (const [k, v] of Object.entries(want.headers)) {
      const got = h[k]
      check(got !== undefined && Buffer.from(got).equals(Buffer.from(v)), `${this.topic}: ${value} header ${k} is ${got}, want ${v}`)
    }
    check(Object.keys(h).length === Object.keys(want.headers).length, `${this.topic}: ${value} has headers ${Object.keys(h)}`)
    const seq = Number(want.headers.seq)
    const pos = `${consumer}/${partition}`
    const last = this.lastSeq.get(pos)
    check(last === undefined || seq > last, `${this.topic}: partition ${partition} out of order for ${consumer}: seq ${seq} after ${last}`)
    this.lastSeq.set(pos, seq)
    this.seen.set(value, (this.seen.get(value) || 0) + 1)
  }

  reset (consumer) {
    for (const k of [...this.lastSeq.keys()]) if (k.startsWith(`${consumer}/`)) this.lastSeq.delete(k)
  }

  missing () {
    return [...this.sent.keys()].filter(v => !this.seen.has(v))
  }

  duplicates () {
    return [...this.seen.values()].reduce((n, c) => n + c - 1, 0)
  }
}

// endOffsets maps partition -> high watermark (as a Number).
async function endOffsets (admin, topic) {
  const offs = await admin.fetchTopicOffsets(topic)
  return new Map(offs.map(o => [o.partition, Number(o.high)]))
}

async function committed (admin, groupId, topic) {
  const res = await admin.fetchOffsets({ groupId, topics: [topic] })
  const t = res.find(r => r.topic === topic)
  return new Map((t ? t.partitions : []).map(p => [p.partition, Number(p.offset)]))
}

function sameOffsets (a, b) {
  if (a.size !== b.size) return false
  for (const [p, o] of a) if (b.get(p) !== o) return false
  return true
}

const fmt = m => JSON.stringify(Object.fromEntries(m))

// ---------------------------------------------------------------------------

async function adminChecks (admin) {
  const topic = `${prefix}-admin`
  const cl = await admin.describeCluster()
  check(cl.brokers.length === brokers.length && cl.controller !== null && cl.clusterId,
    `describeCluster: ${JSON.stringify(cl)}, want ${brokers.length} brokers, a controller and a cluster id`)
  const advertised = cl.brokers.map(b => `${b.host}:${b.port}`).sort()
  check(JSON.stringify(advertised) === JSON.stringify([...brokers].sort()), `describeCluster brokers ${advertised}, seeds ${brokers}`)
  ok('describeCluster')
  check(await admin.createTopics({
    topics: [{ topic, numPartitions: 3, replicationFactor: 1, configEntries: [{ name: 'retention.ms', value: '3600000' }] }],
    waitForLeaders: true
  }), `createTopics ${topic} returned false`)
  const again = await admin.createTopics({ topics: [{ topic, numPartitions: 3 }] })
  check(again === false, `createTopics of an existing topic returned ${again}, want false`)

  await settled(async () => {
    const md = await admin.fetchTopicMetadata({ topics: [topic] })
    check(md.topics.length === 1 && md.topics[0].name === topic, `fetchTopicMetadata: ${JSON.stringify(md.topics)}`)
    check(md.topics[0].partitions.length === 3, `fetchTopicMetadata: ${md.topics[0].partitions.length} partitions, want 3`)
    for (const p of md.topics[0].partitions) {
      check(p.partitionErrorCode === 0 && p.leader >= 0 && p.isr.length >= 1, `partition ${JSON.stringify(p)}`)
    }
  })
  ok('createTopics+metadata')

  await settled(async () => {
    const dc = await admin.describeConfigs({
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['retention.ms', 'cleanup.policy'] }],
      includeSynonyms: false
    })
    const entries = new Map(dc.resources[0].configEntries.map(e => [e.configName, e]))
    check(dc.resources[0].errorCode === 0, `describeConfigs error ${dc.resources[0].errorCode}`)
    check(entries.get('retention.ms') && entries.get('retention.ms').configValue === '3600000',
      `describeConfigs retention.ms = ${JSON.stringify(entries.get('retention.ms'))}`)
    check(entries.get('cleanup.policy') && entries.get('cleanup.policy').configValue === 'delete' && entries.get('cleanup.policy').isDefault,
      `describeConfigs cleanup.policy = ${JSON.stringify(entries.get('cleanup.policy'))}`)
  })
  ok('describeConfigs')

  await admin.alterConfigs({
    validateOnly: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: [{ name: 'retention.ms', value: '7200000' }, { name: 'max.message.bytes', value: '500000' }] }]
  })
  await settled(async () => {
    const altered = await admin.describeConfigs({
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['retention.ms', 'max.message.bytes'] }],
      includeSynonyms: false
    })
    const after = Object.fromEntries(altered.resources[0].configEntries.map(e => [e.configName, e.configValue]))
    check(after['retention.ms'] === '7200000' && after['max.message.bytes'] === '500000', `after alterConfigs: ${JSON.stringify(after)}`)
  })
  ok('alterConfigs')

  await admin.createPartitions({ topicPartitions: [{ topic, count: 5 }] })
  const md = await waitFor('5 partitions after createPartitions', 10000, async () => {
    const m = await admin.fetchTopicMetadata({ topics: [topic] })
    return m.topics[0].partitions.length === 5 && m
  })
  check(md.topics[0].partitions.every(p => p.partitionErrorCode === 0), `after createPartitions: ${JSON.stringify(md.topics[0].partitions)}`)
  ok('createPartitions')

  // deleteTopicRecords: 20 records in partition 1, then everything below 12 goes.
  const p = newProducer()
  await p.connect()
  const msgs = Array.from({ length: 20 }, (_, i) => ({ ...message('dr', i, 1), partition: 1 }))
  await p.send({ topic, messages: msgs, acks: -1 })
  await p.disconnect()
  await admin.deleteTopicRecords({ topic, partitions: [{ partition: 1, offset: '12' }] })
  const offs = (await admin.fetchTopicOffsets(topic)).find(o => o.partition === 1)
  check(offs.low === '12' && offs.high === '20', `after deleteTopicRecords: low ${offs.low} high ${offs.high}, want 12 and 20`)
  const consumer = kafka.consumer({ groupId: `${prefix}-admin-reader`, ...groupTiming })
  const read = []
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({ eachMessage: async ({ partition, message: m }) => { read.push([partition, Number(m.offset)]) } })
  await waitFor('8 records left after deleteTopicRecords', 20000, () => read.length >= 8)
  await consumer.disconnect()
  check(read.length === 8 && read.every(([pp, o], i) => pp === 1 && o === 12 + i), `after deleteTopicRecords read ${JSON.stringify(read)}`)
  ok('deleteTopicRecords')

  await admin.deleteTopics({ topics: [topic], timeout: 10000 })
  await waitFor(`${topic} gone from listTopics`, 10000, async () => !(await admin.listTopics()).includes(topic))
  ok('deleteTopics')
}

// recordChecks: explicit timestamps, null keys and values, repeated
// headers, acks=0, ListOffsets by timestamp, fetches cut to one batch, and
// the admin's setOffsets on an idle group (in the promise it returns as done).
async function recordChecks (admin) {
  const topic = `${prefix}-records`
  const groupId = `${prefix}-records-group`
  check(await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true }), `createTopics ${topic}`)
  const t0 = Date.now() - 600000
  const msgs = Array.from({ length: 10 }, (_, i) => ({
    key: i % 3 === 0 ? null : `k${i}`,
    value: i % 4 === 1 ? null : `v${i}`,
    timestamp: String(t0 + i * 1000),
    headers: { multi: ['x', `y${i}`], one: `h${i}` }
  }))
  const p = newProducer()
  await p.connect()
  for (let i = 0; i < msgs.length; i += 2) {
    // Five batches of two (larger than the 64-byte fetches below).
    await p.send({ topic, messages: msgs.slice(i, i + 2), acks: -1, compression: i % 4 === 0 ? CompressionTypes.GZIP : CompressionTypes.None })
  }
  // acks=0: the broker must not answer, and the records still land.
  await p.send({ topic, messages: [{ key: 'a0', value: 'acks0-a' }, { key: 'a0', value: 'acks0-b' }], acks: 0 })
  await p.disconnect()
  await waitFor('the acks=0 records to land', 10000, async () => (await endOffsets(admin, topic)).get(0) === 12)
  ok('acks=0')

  const [byTime] = await admin.fetchTopicOffsetsByTimestamp(topic, t0 + 4500)
  check(byTime.partition === 0 && byTime.offset === '5', `fetchTopicOffsetsByTimestamp(t0+4.5s) = ${JSON.stringify(byTime)}, want offset 5`)
  const [future] = await admin.fetchTopicOffsetsByTimestamp(topic, Date.now() + 3600000)
  check(future.offset === '12', `fetchTopicOffsetsByTimestamp(an hour ahead) = ${JSON.stringify(future)}, want the end, 12`)
  ok('ListOffsets by timestamp')

  // A fetch of at most 64 bytes still returns the first whole batch (KIP-74).
  const read = []
  const c = kafka.consumer({ groupId, ...groupTiming, maxBytesPerPartition: 64, maxBytes: 64 })
  let crashed = null
  c.on(c.events.CRASH, e => { crashed = e.payload.error })
  await c.connect()
  await c.subscribe({ topics: [topic], fromBeginning: true })
  await c.run({ eachMessage: async ({ message: m }) => { read.push(m) } })
  await waitFor('12 records with 64-byte fetches', 20000, () => {
    if (crashed) fail(`consumer on ${topic} crashed: ${crashed}`)
    return read.length >= 12
  })
  await c.disconnect()
  check(read.length === 12, `read ${read.length} records, want 12`)
  for (let i = 0; i < 10; i++) {
    const m = read[i]
    const want = msgs[i]
    const str = b => (b === null ? null : b.toString())
    check(Number(m.offset) === i, `record ${i} at offset ${m.offset}`)
    check(str(m.key) === want.key && str(m.value) === want.value, `record ${i}: key ${str(m.key)} value ${str(m.value)}, want ${want.key} ${want.value}`)
    check(m.timestamp === want.timestamp, `record ${i}: timestamp ${m.timestamp}, want ${want.timestamp}`)
    const multi = [].concat(m.headers.multi).map(String)
    check(JSON.stringify(multi) === JSON.stringify(want.headers.multi) && String(m.headers.one) === want.headers.one,
      `record ${i}: headers ${JSON.stringify(m.headers)}, want ${JSON.stringify(want.headers)}`)
  }
  check(read[10].value.toString() === 'acks0-a' && read[11].value.toString() === 'acks0-b', 'acks=0 records out of order')
  check(Math.abs(Number(read[10].timestamp) - Date.now()) < 120000, `acks=0 record timestamp ${read[10].timestamp} is not about now`)
  ok('timestamps, null keys/values, repeated headers, 64-byte fetches')

  await waitFor(`${groupId} to be empty`, 10000, async () => (await describeGroup(admin, groupId)).state === 'Empty')
  check((await committed(admin, groupId, topic)).get(0) === 12, `${groupId} did not commit 12`)
  // setOffsets joins the group with a paused consumer and returns after
  // its first (empty) fetch, which kafkajs waits 5 s for: the caller runs
  // this tail alongside the other checks.
  const done = (async () => {
    await admin.setOffsets({ groupId, topic, partitions: [{ partition: 0, offset: '4' }] })
    const got = await committed(admin, groupId, topic)
    check(got.get(0) === 4, `after setOffsets(4): committed ${fmt(got)}`)
    await admin.deleteGroups([groupId])
    await settled(async () => {
      const listed = await admin.listGroups()
      check(!listed.groups.some(g => g.groupId === groupId), `${groupId} still listed after deleteGroups`)
    })
    ok('setOffsets+deleteGroups')
  })()
  // Until it is awaited, a failure there must not go unhandled.
  done.catch(() => {})
  return { done }
}

// produce writes n records of tag to topic over its partitions, GZIP for
// every other batch, with a plain or idempotent producer.
async function produce (producer, log, tag, from, n, partitions, batch) {
  for (let i = from; i < from + n; i += batch) {
    const msgs = []
    for (let j = i; j < Math.min(i + batch, from + n); j++) msgs.push(message(tag, j, partitions))
    log.add(msgs)
    const res = await producer.send({
      topic: log.topic,
      messages: msgs,
      acks: -1,
      compression: (i / batch) % 2 === 1 ? CompressionTypes.GZIP : CompressionTypes.None
    })
    for (const r of res) check(r.errorCode === 0, `produce ${tag}: ${JSON.stringify(r)}`)
  }
}

// groupMember runs a consumer in groupId over log.topic that records into log.
async function groupMember (name, groupId, log, opts = {}) {
  const c = kafka.consumer({ groupId, ...groupTiming, ...opts })
  const state = { c, name, assigned: [], crashed: null }
  c.on(c.events.GROUP_JOIN, e => {
    state.assigned = (e.payload.memberAssignment[log.topic] || []).slice().sort((a, b) => a - b)
    log.reset(name)
  })
  c.on(c.events.CRASH, e => { state.crashed = e.payload.error })
  await c.connect()
  await c.subscribe({ topics: [log.topic], fromBeginning: true })
  await c.run({
    eachMessage: async ({ partition, message: m }) => log.record(name, partition, m)
  })
  return state
}

async function describeGroup (admin, groupId) {
  const { groups } = await admin.describeGroups([groupId])
  return groups.find(g => g.groupId === groupId)
}

async function groupChecks (admin) {
  const topic = `${prefix}-main`
  const groupId = `${prefix}-group`
  const partitions = 6
  check(await admin.createTopics({ topics: [{ topic, numPartitions: partitions }], waitForLeaders: true }), `createTopics ${topic}`)
  const log = new Log(topic)

  const plain = newProducer()
  await plain.connect()
  await produce(plain, log, 'plain', 0, 1000, partitions, 100)
  await plain.disconnect()
  ok('produce 1000 (gzip/none, keys, headers, 6 partitions)')

  // One member reads all 1000.
  const a = await groupMember('a', groupId, log)
  await waitFor('member a to read 1000 records', 30000, () => {
    if (a.crashed) fail(`consumer a crashed: ${a.crashed}`)
    return log.seen.size === 1000
  })
  check(a.assigned.length === partitions, `member a assigned ${a.assigned}, want all ${partitions}`)

  // Wait until its commits reach the end before a second member joins:
  // what is committed is not read again.
  let ends = await endOffsets(admin, topic)
  await waitFor('group commits to reach the end offsets', 15000, async () => sameOffsets(await committed(admin, groupId, topic), ends))
  ok('group read 1000')

  // A second member joins: both must end up sharing the partitions.
  const b = await groupMember('b', groupId, log)
  await waitFor('a rebalance giving both members partitions', 20000, async () => {
    if (a.crashed || b.crashed) fail(`consumer crashed: ${a.crashed || b.crashed}`)
    const g = await describeGroup(admin, groupId)
    return g && g.state === 'Stable' && g.members.length === 2 &&
      a.assigned.length > 0 && b.assigned.length > 0 && a.assigned.length + b.assigned.length === partitions &&
      a.assigned.every(p => !b.assigned.includes(p))
  })
  const listed = await admin.listGroups()
  check(listed.groups.some(g => g.groupId === groupId && g.protocolType === 'consumer'), `listGroups: ${JSON.stringify(listed.groups)}`)
  const g = await describeGroup(admin, groupId)
  check(g.protocolType === 'consumer' && g.protocol === 'RoundRobinAssigner', `describeGroups: ${JSON.stringify({ ...g, members: undefined })}`)
  const described = g.members.map(m => {
    const meta = AssignerProtocol.MemberMetadata.decode(m.memberMetadata)
    const asg = AssignerProtocol.MemberAssignment.decode(m.memberAssignment)
    check(m.clientId === `${prefix}-client` && m.clientHost && meta && meta.topics.includes(topic),
      `describeGroups member ${m.memberId}: client ${m.clientId} host ${m.clientHost} metadata ${JSON.stringify(meta)}`)
    return (asg.assignment[topic] || []).slice().sort((x, y) => x - y).join(',')
  }).sort()
  const want = [a.assigned.join(','), b.assigned.join(',')].sort()
  check(JSON.stringify(described) === JSON.stringify(want), `describeGroups assignments ${described}, members have ${want}`)
  ok(`rebalance (a ${a.assigned}, b ${b.assigned}) + listGroups/describeGroups`)

  // New records from an idempotent producer reach the two members.
  const idem = newProducer({ idempotent: true, maxInFlightRequests: 1 })
  await idem.connect()
  await produce(idem, log, 'idem', 1000, 500, partitions, 50)
  await idem.disconnect()
  await waitFor('members a and b to read 1500 records', 30000, () => {
    if (a.crashed || b.crashed) fail(`consumer crashed: ${a.crashed || b.crashed}`)
    return log.seen.size === 1500
  })
  ok('idempotent produce 500 read by 2 members')

  // Both leave; kafkajs commits what it processed on the way out.
  await Promise.all([a.c.disconnect(), b.c.disconnect()])
  ends = await endOffsets(admin, topic)
  const total = [...ends.values()].reduce((s, o) => s + o, 0)
  check(total === 1500, `end offsets ${fmt(ends)} sum to ${total}, want 1500`)
  const got = await committed(admin, groupId, topic)
  check(sameOffsets(got, ends), `committed ${fmt(got)} != end offsets ${fmt(ends)}`)
  check(log.missing().length === 0, `never read: ${log.missing().slice(0, 5)}`)
  const dupBeforeRestart = log.duplicates()
  ok('committed == end offsets')

  // A restarted member resumes at the commits: it reads only the new records.
  await waitFor('the group to be empty', 10000, async () => (await describeGroup(admin, groupId)).state === 'Empty')
  const plain2 = newProducer()
  await plain2.connect()
  await produce(plain2, log, 'after', 1500, 120, partitions, 60)
  await plain2.disconnect()
  const seenBefore = new Map(log.seen)
  const c = await groupMember('c', groupId, log)
  await waitFor('restarted member to read the 120 new records', 30000, () => {
    if (c.crashed) fail(`consumer c crashed: ${c.crashed}`)
    return log.seen.size === 1620
  })
  await c.c.disconnect()
  for (const [v, n] of seenBefore) check(log.seen.get(v) === n, `restarted member read ${v} again`)
  check(log.duplicates() === dupBeforeRestart, 'restarted member read a record twice')
  ends = await endOffsets(admin, topic)
  const after = await committed(admin, groupId, topic)
  check(sameOffsets(after, ends), `after restart committed ${fmt(after)} != end offsets ${fmt(ends)}`)
  ok(`restart resumed at commits (duplicates before: ${dupBeforeRestart})`)

  await admin.deleteGroups([groupId])
  return log
}

// readAll reads topic from the start with a fresh group until it has want
// records and the end offsets are reached, and returns them.
async function readAll (admin, topic, groupId, want, opts = {}) {
  const records = []
  const c = kafka.consumer({ groupId, ...groupTiming, ...opts })
  let crashed = null
  c.on(c.events.CRASH, e => { crashed = e.payload.error })
  await c.connect()
  await c.subscribe({ topics: [topic], fromBeginning: true })
  await c.run({
    eachBatch: async ({ batch }) => {
      for (const m of batch.messages) records.push({ partition: batch.partition, offset: Number(m.offset), value: m.value.toString() })
    }
  })
  const ends = await endOffsets(admin, topic)
  // Done once the group's commits (kafkajs commits after each batch) reach
  // the end offsets, past any trailing transaction marker: a record read
  // late, or read twice, is then counted.
  await waitFor(`${topic}: ${want} records read`, 20000, async () => {
    if (crashed) fail(`consumer on ${topic} crashed: ${crashed}`)
    if (records.length < want) return false
    const got = await committed(admin, groupId, topic)
    return [...ends].every(([p, o]) => o === 0 || got.get(p) === o)
  })
  await c.disconnect()
  return records
}

async function txnChecks (admin, mainLog) {
  const topic = `${prefix}-txn`
  const partitions = 3
  check(await admin.createTopics({ topics: [{ topic, numPartitions: partitions }], waitForLeaders: true }), `createTopics ${topic}`)
  const producer = newProducer({ transactionalId: `${prefix}-tx`, idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  const sendIn = async (tag, from, n, end) => {
    const txn = await producer.transaction()
    const msgs = Array.from({ length: n }, (_, i) => message(tag, from + i, partitions))
    await txn.send({ topic, messages: msgs.slice(0, n / 2) })
    await txn.send({ topic, messages: msgs.slice(n / 2), compression: CompressionTypes.GZIP })
    await (end === 'commit' ? txn.commit() : txn.abort())
  }
  await sendIn('committed', 0, 60, 'commit')
  await sendIn('aborted', 60, 60, 'abort')
  await sendIn('committed', 120, 60, 'commit')

  const committedRead = await readAll(admin, topic, `${prefix}-txn-rc`, 120, { readUncommitted: false })
  const values = committedRead.map(r => r.value)
  check(values.every(v => v.startsWith('committed-')), `read_committed read aborted records: ${values.filter(v => !v.startsWith('committed-')).slice(0, 5)}`)
  check(values.length === 120 && new Set(values).size === 120, `read_committed read ${values.length} records (${new Set(values).size} distinct), want 120`)
  for (let p = 0; p < partitions; p++) {
    const seqs = committedRead.filter(r => r.partition === p).map(r => Number(r.value.split('-')[1]))
    check(seqs.every((s, i) => i === 0 || s > seqs[i - 1]), `read_committed partition ${p} out of order: ${seqs}`)
  }
  ok('txn commit/abort: read_committed saw 120 of 120 committed, 0 aborted')

  const uncommittedRead = await readAll(admin, topic, `${prefix}-txn-ru`, 180, { readUncommitted: true })
  check(uncommittedRead.length === 180, `read_uncommitted read ${uncommittedRead.length} records, want 180`)
  ok('read_uncommitted saw all 180')

  // An open transaction holds the last stable offset: kafkajs's admin
  // lists offsets read_committed, so the ends stay until it commits.
  // Its records carry timestamps ten minutes ahead, one second apart, so a
  // lookup by timestamp lands on the fifth record of each partition, past
  // the last stable offset: Kafka answers no offset there (kafkajs then
  // gives the end offset), as a read_committed consumer cannot fetch it.
  const before = await endOffsets(admin, topic)
  const future = Date.now() + 600000
  const pending = Array.from({ length: 30 }, (_, i) => ({ ...message('pending', 180 + i, partitions), timestamp: String(future + i * 1000) }))
  const open = await producer.transaction()
  await open.send({ topic, messages: pending })
  const during = await endOffsets(admin, topic)
  check(sameOffsets(during, before), `read_committed end offsets moved to ${fmt(during)} from ${fmt(before)} under an open transaction`)
  const byTimeOpen = new Map((await admin.fetchTopicOffsetsByTimestamp(topic, future + 12000)).map(o => [o.partition, Number(o.offset)]))
  check(sameOffsets(byTimeOpen, before), `read_committed offsets by timestamp under an open transaction ${fmt(byTimeOpen)}, want the last stable offsets ${fmt(before)}`)
  await open.commit()
  const afterCommit = await endOffsets(admin, topic)
  const byTime = new Map((await admin.fetchTopicOffsetsByTimestamp(topic, future + 12000)).map(o => [o.partition, Number(o.offset)]))
  for (const [p, o] of before) {
    // Ten records and the commit marker per partition.
    check(afterCommit.get(p) === o + 11, `partition ${p}: end offset ${afterCommit.get(p)} after the commit, want ${o} + 11`)
    check(byTime.get(p) === o + 4, `partition ${p}: offset by timestamp ${byTime.get(p)} after the commit, want ${o} + 4`)
  }
  ok('last stable offset held by an open transaction (end and by-timestamp offsets)')

  // Consume-transform-produce: a group reads the main topic, writes each
  // value upper-cased to the output topic and commits its offsets in the
  // same transaction. One transaction in the middle is aborted: its
  // records must not show and its offsets must not count.
  const out = `${prefix}-ctp-out`
  const groupId = `${prefix}-ctp`
  check(await admin.createTopics({ topics: [{ topic: out, numPartitions: 2 }], waitForLeaders: true }), `createTopics ${out}`)
  const ctp = newProducer({ transactionalId: `${prefix}-ctp-tx`, idempotent: true, maxInFlightRequests: 1 })
  await ctp.connect()
  const consumer = kafka.consumer({ groupId, ...groupTiming, readUncommitted: false })
  let crashed = null
  let batches = 0
  let aborted = 0
  let copied = 0
  consumer.on(consumer.events.CRASH, e => { crashed = e.payload.error })
  await consumer.connect()
  await consumer.subscribe({ topics: [mainLog.topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
      if (batch.isEmpty()) return
      const txn = await ctp.transaction()
      const msgs = batch.messages.map(m => ({ key: m.key, value: m.value.toString().toUpperCase(), headers: m.headers }))
      await txn.send({ topic: out, messages: msgs })
      const next = String(Number(batch.lastOffset()) + 1)
      await txn.sendOffsets({ consumerGroupId: groupId, topics: [{ topic: mainLog.topic, partitions: [{ partition: batch.partition, offset: next }] }] })
      if (batches++ === 1) {
        // Aborted: neither the copies nor the offsets stay; the consumer
        // is sent back to its last commit on this partition.
        await txn.abort()
        aborted += msgs.length
        consumer.seek({ topic: mainLog.topic, partition: batch.partition, offset: batch.firstOffset() })
        return
      }
      await txn.commit()
      copied += msgs.length
      for (const m of batch.messages) resolveOffset(m.offset)
      await heartbeat()
    }
  })
  const ends = await endOffsets(admin, mainLog.topic)
  await waitFor('consume-transform-produce to commit the end offsets', 30000, async () => {
    if (crashed) fail(`consume-transform-produce consumer crashed: ${crashed}`)
    return sameOffsets(await committed(admin, groupId, mainLog.topic), ends)
  })
  await consumer.disconnect()
  await ctp.disconnect()
  await producer.disconnect()
  check(aborted > 0, 'consume-transform-produce aborted no transaction')
  const total = mainLog.sent.size
  check(copied === total, `consume-transform-produce committed ${copied} copies, want ${total}`)
  const copies = await readAll(admin, out, `${prefix}-ctp-check`, total, { readUncommitted: false })
  const want = new Set([...mainLog.sent.keys()].map(v => v.toUpperCase()))
  const got = new Set(copies.map(r => r.value))
  check(copies.length === total && got.size === total && [...want].every(v => got.has(v)),
    `consume-transform-produce output: ${copies.length} records (${got.size} distinct), want the ${total} inputs upper-cased`)
  ok(`consume-transform-produce ${total} records (${aborted} in an aborted txn) with sendOffsets`)
}

async function main () {
  const timer = setTimeout(() => {
    console.error(`FAIL: not done within ${DEADLINE_MS} ms; passed so far: ${checks.join('; ')}`)
    console.error(`last kafkajs log lines:\n${kafkaLog.slice(-60).join('\n')}`)
    process.exit(1)
  }, DEADLINE_MS)
  const admin = kafka.admin()
  await admin.connect()
  try {
    await adminChecks(admin)
    const offsets = await recordChecks(admin)
    const mainLog = await groupChecks(admin)
    await txnChecks(admin, mainLog)
    await offsets.done
  } finally {
    await admin.disconnect()
  }
  clearTimeout(timer)
  console.log(`ok: kafkajs ${require('kafkajs/package.json').version} against ${brokers.length} broker(s) in ${Date.now() - started} ms: ${checks.join('; ')}`)
}

main().catch(err => {
  if (err instanceof Mismatch) {
    console.error(`FAIL: ${err.message}`)
  } else {
    console.error(`FAIL: ${err && err.stack ? err.stack : err}`)
    if (err && err.cause) console.error('cause:', err.cause)
  }
  console.error(`passed before the failure: ${checks.join('; ') || 'nothing'}`)
  if (kafkaLog.length) console.error(`last kafkajs log lines:\n${kafkaLog.slice(-60).join('\n')}`)
  process.exit(1)
})
