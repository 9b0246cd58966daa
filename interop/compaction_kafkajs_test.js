#!/usr/bin/env node
// kafkajs on a compacted topic. Run by TestCompactionClients (compaction_test.go) from
// this directory, after `npm ci`, in two steps:
//
//   node compaction_kafkajs_test.js produce BOOTSTRAP TOPIC
//   node compaction_kafkajs_test.js consume BOOTSTRAP TOPIC
//
// produce creates TOPIC compacted (1 KiB segments) and writes KEYS keys x VERSIONS
// versions gzip-compressed, a tombstone for every third key and filler records; the Go
// test waits for the broker's cleaner; consume reads it from the beginning through a
// fresh consumer group (kafkajs consumes only through groups) and checks each key
// once with its latest value, null for the tombstoned ones, offsets increasing with
// gaps. Prints "compaction kafkajs: OK" on success, "FAIL: ..." otherwise.
'use strict'

const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

const KEYS = 20
const VERSIONS = 15
const FILLER = 60
const TIMEOUT_MS = 60000

function fail (msg) {
  console.log('FAIL: ' + msg)
  process.exit(1)
}

const key = (k) => `kjs-k${String(k).padStart(2, '0')}`
const value = (k, v) => `v${String(v).padStart(2, '0')}-` + 'y'.repeat(k * 5)
const latest = (k) => (k % 3 === 0 ? null : value(k, VERSIONS - 1))

async function produce (kafka, topic) {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({
    waitForLeaders: true,
    topics: [{
      topic,
      numPartitions: 1,
      replicationFactor: 1,
      configEntries: [
        { name: 'cleanup.policy', value: 'compact' },
        { name: 'segment.bytes', value: '1024' },
        { name: 'min.cleanable.dirty.ratio', value: '0.01' },
        { name: 'delete.retention.ms', value: '600000' }
      ]
    }]
  })
  await admin.disconnect()
  const p = kafka.producer({ allowAutoTopicCreation: false })
  await p.connect()
  for (let v = 0; v < VERSIONS; v++) {
    const messages = []
    for (let k = 0; k < KEYS; k++) messages.push({ partition: 0, key: key(k), value: value(k, v) })
    await p.send({ topic, acks: -1, compression: CompressionTypes.GZIP, messages })
  }
  const tombstones = []
  for (let k = 0; k < KEYS; k += 3) tombstones.push({ partition: 0, key: key(k), value: null })
  await p.send({ topic, acks: -1, messages: tombstones })
  for (let i = 0; i < FILLER; i++) {
    await p.send({ topic, acks: -1, messages: [{ partition: 0, key: 'filler', value: 'f' }] })
  }
  await p.disconnect()
  console.log('compaction kafkajs: produced')
}

async function consume (kafka, topic) {
  const admin = kafka.admin()
  await admin.connect()
  const [{ high, low }] = await admin.fetchTopicOffsets(topic)
  await admin.disconnect()
  if (low !== '0') fail(`log start offset ${low}, want 0`)
  const end = Number(high)
  const seen = new Map()
  let last = -1
  let gaps = 0
  const c = kafka.consumer({ groupId: `compaction-${Date.now()}` })
  await c.connect()
  await c.subscribe({ topic, fromBeginning: true })
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`consumed up to ${last} of ${end} within ${TIMEOUT_MS} ms`)), TIMEOUT_MS)
    c.run({
      eachMessage: async ({ message }) => {
        const off = Number(message.offset)
        if (off <= last) reject(new Error(`offset ${off} after ${last}`))
        if (off > last + 1) gaps++
        last = off
        const k = message.key.toString()
        if (k !== 'filler') {
          if (seen.has(k)) reject(new Error(`key ${k} twice`))
          seen.set(k, message.value === null ? null : message.value.toString())
        }
        if (off >= end - 1) {
          clearTimeout(timer)
          resolve()
        }
      }
    })
  }).catch((e) => fail(e.message))
  await c.disconnect()
  for (let k = 0; k < KEYS; k++) {
    if (!seen.has(key(k))) fail(`key ${key(k)} missing`)
    if (seen.get(key(k)) !== latest(k)) fail(`key ${key(k)} = ${seen.get(key(k))}, want ${latest(k)}`)
  }
  if (gaps === 0) fail('no offset gaps: nothing was compacted')
  console.log(`compaction kafkajs: OK (${seen.size} keys, ${gaps} gaps)`)
}

async function main () {
  const [mode, bootstrap, topic] = process.argv.slice(2)
  if (!['produce', 'consume'].includes(mode) || !topic) fail('usage: compaction_kafkajs_test.js produce|consume BOOTSTRAP TOPIC')
  const kafka = new Kafka({ clientId: 'sluice-interop-kafkajs', brokers: [bootstrap], logLevel: logLevel.NOTHING })
  await (mode === 'produce' ? produce(kafka, topic) : consume(kafka, topic))
}

main().catch((e) => fail(e.stack || String(e)))
