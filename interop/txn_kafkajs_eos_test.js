#!/usr/bin/env node
// A kafkajs consume-transform-produce pipeline built from the seed's transaction snippet:
// a group consumer's eachBatch runs producer.transaction(), tx.send (the batch's values
// prefixed with "out-", same partition of the output topic), tx.sendOffsets (the
// batch's next offset for the group) and tx.commit. Run by TestKafkajsEOSKills
// (txn_kafkajs_eos_test.go), which SIGKILLs it and the broker mid-stream:
//
//   node txn_kafkajs_eos_test.js BOOTSTRAP GROUP IN OUT TRANSACTIONAL_ID
//
// Crash-only: any failure (a transaction that cannot commit, a consumer crash) makes it
// exit non-zero, and the test starts it again with the same transactional id, whose
// initialisation fences and aborts what the previous process left open. It prints JSON
// events ({"event": "txn", ...}) on stdout and leaves cleanly (exit 0) when its stdin is
// closed.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const PACE_MS = 20 // each transaction stays open this long before its commit

function event (obj) {
  console.log(JSON.stringify(obj))
}

function die (code, msg) {
  event({ event: 'exit', code, msg })
  process.exit(code)
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function main () {
  const [bootstrap, group, inTopic, outTopic, txnId] = process.argv.slice(2)
  if (!txnId) die(2, 'usage: node txn_kafkajs_eos_test.js BOOTSTRAP GROUP IN OUT TRANSACTIONAL_ID')
  const kafka = new Kafka({ clientId: 'sluice-interop-kafkajs-eos', brokers: [bootstrap], logLevel: logLevel.WARN })

  const producer = kafka.producer({ transactionalId: txnId, idempotent: true, maxInFlightRequests: 1, transactionTimeout: 20000 })
  await producer.connect()
  // Initialise the producer id before consuming (an empty transaction sends nothing
  // else): that fences the killed predecessor and aborts its open transaction.
  const init = await producer.transaction()
  await init.abort()

  const consumer = kafka.consumer({
    groupId: group,
    sessionTimeout: 6000, // a killed predecessor leaves the group after this
    heartbeatInterval: 1000,
    rebalanceTimeout: 10000,
    maxWaitTimeInMs: 200,
    maxBytesPerPartition: 512, // a few small input batches per transaction
    readUncommitted: false
  })
  consumer.on(consumer.events.CRASH, (e) => die(4, 'consumer crashed: ' + (e.payload && e.payload.error)))
  await consumer.connect()
  await consumer.subscribe({ topic: inTopic, fromBeginning: true })

  let total = 0
  let stopping = false
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset, isRunning, isStale }) => {
      if (batch.messages.length === 0 || !isRunning() || isStale() || stopping) return
      const next = (BigInt(batch.lastOffset()) + 1n).toString()
      let tx
      try {
        tx = await producer.transaction()
        await tx.send({
          topic: outTopic,
          acks: -1,
          messages: batch.messages.map((m) => ({ partition: batch.partition, key: m.key, value: 'out-' + m.value.toString() }))
        })
        await tx.sendOffsets({ consumerGroupId: group, topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: next }] }] })
        await sleep(PACE_MS)
        await tx.commit()
      } catch (e) {
        event({ event: 'abort', partition: batch.partition, error: String(e) })
        if (tx) await tx.abort().catch(() => {}) // fails when fenced or the broker is down
        die(3, 'transaction failed: ' + String(e))
      }
      resolveOffset(batch.lastOffset()) // the next fetch starts after the batch
      total += batch.messages.length
      event({ event: 'txn', partition: batch.partition, records: batch.messages.length, next, total })
    }
  })
  event({ event: 'ready' })

  process.stdin.on('data', () => {})
  process.stdin.on('end', async () => {
    stopping = true
    await consumer.disconnect()
    await producer.disconnect()
    event({ event: 'stopped', total })
    process.exit(0)
  })
}

main().catch((e) => die(1, (e && e.stack) || String(e)))
