#!/usr/bin/env node
// kafkajs idempotent and transactional producers against Sluice: the seed's snippets.
// Run by TestKafkajsTransactions (txn_kafkajs_test.go) from this directory, after
// `npm ci`:
//
//   node txn_kafkajs_test.js BOOTSTRAP PREFIX
//
// Creates PREFIX+'idem' and PREFIX+'out' (3 partitions each). An idempotent producer
// ({ idempotent: true, maxInFlightRequests: 5 }, sends with acks -1) writes numbered
// messages, sequentially and in concurrent sends. A transactional producer
// ({ transactionalId }) runs three transactions: tx.send + tx.sendOffsets + tx.commit
// (offsets 10/11/12 of the idem topic for group PREFIX+'g'), tx.send + tx.sendOffsets
// (offsets 20/21/22) + tx.abort, and tx.send + tx.commit. The last stdout line is a JSON
// report of everything written, which the Go test checks with franz-go (read_committed
// and read_uncommitted) and kadm (the group's offsets). Exits non-zero with "FAIL: ..."
// on any failure.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const PARTITIONS = 3

function fail (msg) {
  console.log('FAIL: ' + msg)
  process.exit(1)
}

async function main () {
  const [bootstrap, prefix] = process.argv.slice(2)
  if (!bootstrap || !prefix) fail('usage: node txn_kafkajs_test.js BOOTSTRAP PREFIX')
  const started = Date.now()
  const idemTopic = prefix + 'idem'
  const outTopic = prefix + 'out'
  const group = prefix + 'g'
  const kafka = new Kafka({
    clientId: 'sluice-interop-kafkajs-txn',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    retry: { retries: 5 }
  })

  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({
    topics: [idemTopic, outTopic].map((topic) => ({ topic, numPartitions: PARTITIONS, replicationFactor: 1 })),
    waitForLeaders: true
  })
  await admin.disconnect()

  // The seed's idempotent producer.
  const idem = kafka.producer({ idempotent: true, maxInFlightRequests: 5 })
  await idem.connect()
  const idemWritten = [] // { partition, value } in send order within each send
  const sendIdem = async (send, count) => {
    const messages = []
    for (let i = 0; i < count; i++) {
      const m = { partition: (send + i) % PARTITIONS, value: `idem-s${String(send).padStart(2, '0')}-${String(i).padStart(3, '0')}` }
      messages.push(m)
      idemWritten.push(m)
    }
    const res = await idem.send({ topic: idemTopic, acks: -1, messages })
    for (const r of res) {
      if (r.errorCode !== 0) fail(`idempotent send ${send}: partition ${r.partition} error ${r.errorCode}`)
    }
  }
  for (let s = 0; s < 8; s++) await sendIdem(s, 30)
  await Promise.all([8, 9, 10, 11, 12, 13].map((s) => sendIdem(s, 20))) // up to 5 in flight
  await idem.disconnect()
  console.log(`idempotent producer: ${idemWritten.length} messages`)

  // The seed's transactional producer.
  const txp = kafka.producer({ transactionalId: prefix + 'txn', idempotent: true, maxInFlightRequests: 1 })
  await txp.connect()
  const out = [] // { partition, value, committed }
  const runTxn = async (name, offsets, commit) => {
    const tx = await txp.transaction()
    const messages = []
    for (let i = 0; i < 24; i++) messages.push({ partition: i % PARTITIONS, value: `${name}-${String(i).padStart(2, '0')}` })
    await tx.send({ topic: outTopic, acks: -1, messages })
    if (offsets) {
      await tx.sendOffsets({
        consumerGroupId: group,
        topics: [{ topic: idemTopic, partitions: offsets.map((offset, partition) => ({ partition, offset: String(offset) })) }]
      })
    }
    if (commit) await tx.commit()
    else await tx.abort()
    for (const m of messages) out.push({ partition: m.partition, value: m.value, committed: commit })
    console.log(`transaction ${name}: ${messages.length} messages, offsets ${JSON.stringify(offsets)}, ${commit ? 'committed' : 'aborted'}`)
  }
  await runTxn('T1', [10, 11, 12], true)
  await runTxn('T2', [20, 21, 22], false)
  await runTxn('T3', null, true)
  await txp.disconnect()

  console.log(`done in ${Date.now() - started}ms`)
  console.log(JSON.stringify({ idemTopic, idem: idemWritten, outTopic, out, group, offsets: { 0: 10, 1: 11, 2: 12 } }))
}

main().catch((e) => fail((e && e.stack) || String(e)))
