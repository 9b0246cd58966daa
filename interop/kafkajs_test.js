#!/usr/bin/env node
// kafkajs interop check for Sluice. Run by TestKafkajs (kafkajs_test.go) from this
// directory, after `npm ci`:
//
//   node kafkajs_test.js BOOTSTRAP TOPIC
//
// Creates TOPIC (3 partitions), produces keyed messages with headers (acks -1, gzip, not
// idempotent) with explicit partitions, checks the admin API's view, and prints on its
// last stdout line a JSON description of every message it wrote, so the Go test can read
// them back with franz-go (kafkajs consumes only through a consumer group; that is
// kafkajs_group_test.js). Exits non-zero with "FAIL: ..." on any failure.
'use strict'

const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

const PARTITIONS = 3
const TIMEOUT_MS = 60000

function fail (msg) {
  console.log('FAIL: ' + msg)
  process.exit(1)
}

function check (cond, msg) {
  if (!cond) fail(msg)
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function waitFor (what, fn) {
  const deadline = Date.now() + 20000
  for (;;) {
    if (await fn()) return
    if (Date.now() > deadline) fail('timed out waiting for ' + what)
    await sleep(100)
  }
}

// The i-th message: explicit partition, a key (null for some), a value, headers as
// kafkajs takes them (an array value becomes repeated headers with the same key).
function message (i) {
  const headers = { seq: String(i), source: 'kafkajs' }
  if (i % 4 === 0) headers.multi = ['first', 'second']
  return {
    partition: i % PARTITIONS,
    key: i % 25 === 7 ? null : `kjs-key-${i}`,
    value: `kjs-value-${i}-` + 'xyz'.repeat(i % 30),
    headers
  }
}

// What the broker should hand back for a message: headers flattened in wire order.
function expected (m) {
  const headers = []
  for (const k of Object.keys(m.headers)) {
    const v = m.headers[k]
    for (const one of Array.isArray(v) ? v : [v]) headers.push([k, one])
  }
  return { partition: m.partition, key: m.key, value: m.value, headers }
}

async function main () {
  const [bootstrap, topic] = process.argv.slice(2)
  if (!bootstrap || !topic) fail('usage: node kafkajs_test.js BOOTSTRAP TOPIC')
  const started = Date.now()
  const kafka = new Kafka({
    clientId: 'sluice-interop-kafkajs',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    retry: { retries: 3 }
  })
  const done = []

  const admin = kafka.admin()
  await admin.connect()

  const created = await admin.createTopics({
    topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }],
    waitForLeaders: true
  })
  check(created === true, `createTopics(${topic}) returned ${created}, want true`)
  // The same again must answer "exists" (false); quiet, since kafkajs logs that as an error.
  const quiet = new Kafka({ clientId: 'sluice-interop-kafkajs', brokers: [bootstrap], logLevel: logLevel.NOTHING }).admin()
  await quiet.connect()
  const again = await quiet.createTopics({ topics: [{ topic, numPartitions: PARTITIONS }] })
  await quiet.disconnect()
  check(again === false, `createTopics of an existing topic returned ${again}, want false`)
  done.push('createTopics')

  const md = await admin.fetchTopicMetadata({ topics: [topic] })
  check(md.topics.length === 1 && md.topics[0].name === topic, 'fetchTopicMetadata: ' + JSON.stringify(md))
  const parts = md.topics[0].partitions.slice().sort((a, b) => a.partitionId - b.partitionId)
  check(parts.length === PARTITIONS, `fetchTopicMetadata: ${parts.length} partitions, want ${PARTITIONS}`)
  parts.forEach((p, i) => {
    check(p.partitionId === i && p.partitionErrorCode === 0 && p.leader === 1 &&
      JSON.stringify(p.replicas) === '[1]' && JSON.stringify(p.isr) === '[1]',
    'fetchTopicMetadata partition: ' + JSON.stringify(p))
  })
  done.push('fetchTopicMetadata')

  const producer = kafka.producer({ idempotent: false, allowAutoTopicCreation: false })
  await producer.connect()
  const written = []
  const counts = new Array(PARTITIONS).fill(0)
  // Two sends, so the second one's base offsets follow the first one's records.
  for (const [from, to] of [[0, 60], [60, 100]]) {
    const messages = []
    for (let i = from; i < to; i++) messages.push(message(i))
    const res = await producer.send({ topic, acks: -1, compression: CompressionTypes.GZIP, messages })
    check(res.length === PARTITIONS, 'send result: ' + JSON.stringify(res))
    for (const r of res) {
      check(r.topicName === topic && r.errorCode === 0, 'send result: ' + JSON.stringify(r))
      check(String(r.baseOffset) === String(counts[r.partition]),
        `send: partition ${r.partition} baseOffset ${r.baseOffset}, want ${counts[r.partition]}`)
    }
    for (const m of messages) {
      counts[m.partition]++
      written.push(expected(m))
    }
  }
  // Three sends at once, one partition each: requests pipelined on one connection, so the
  // responses must come back in order and match.
  const concurrent = [[], [], []]
  for (let i = 100; i < 160; i++) concurrent[i % PARTITIONS].push(message(i))
  const results = await Promise.all(concurrent.map((messages) =>
    producer.send({ topic, acks: -1, compression: CompressionTypes.GZIP, messages })))
  results.forEach((res, k) => {
    check(res.length === 1 && res[0].partition === k && res[0].errorCode === 0 &&
      String(res[0].baseOffset) === String(counts[k]),
    `concurrent send to partition ${k}: ${JSON.stringify(res)}, want baseOffset ${counts[k]}`)
  })
  for (const messages of concurrent) {
    for (const m of messages) {
      counts[m.partition]++
      written.push(expected(m))
    }
  }
  await producer.disconnect()
  done.push('producer.send(gzip, acks -1)', 'concurrent sends')

  const offsets = await admin.fetchTopicOffsets(topic)
  check(offsets.length === PARTITIONS, 'fetchTopicOffsets: ' + JSON.stringify(offsets))
  for (const o of offsets) {
    check(o.high === String(counts[o.partition]) && o.offset === o.high && o.low === '0',
      `fetchTopicOffsets partition ${o.partition}: ${JSON.stringify(o)}, want high ${counts[o.partition]}, low 0`)
  }
  done.push('fetchTopicOffsets')

  const doomed = topic + '-delete-me'
  check(await admin.createTopics({ topics: [{ topic: doomed, numPartitions: 1 }], waitForLeaders: true }),
    `createTopics(${doomed}) returned false`)
  await waitFor(`${doomed} in listTopics`, async () => (await admin.listTopics()).includes(doomed))
  await admin.deleteTopics({ topics: [doomed], timeout: 10000 })
  await waitFor(`${doomed} gone from listTopics`, async () => !(await admin.listTopics()).includes(doomed))
  check((await admin.listTopics()).includes(topic), `listTopics lost ${topic} after deleting ${doomed}`)
  done.push('deleteTopics', 'listTopics')
  await admin.disconnect()

  console.log(`kafkajs interop: OK (${done.join(', ')}) in ${Date.now() - started}ms`)
  console.log(JSON.stringify({ topic, partitions: PARTITIONS, messages: written }))
}

const timer = setTimeout(() => fail(`no result after ${TIMEOUT_MS}ms`), TIMEOUT_MS)
main().then(() => clearTimeout(timer), (err) => fail((err && err.stack) || String(err)))
