#!/usr/bin/env node
// kafkajs consumer group check for Sluice. Run by TestKafkajsGroup
// (kafkajs_group_test.go) from this directory, after `npm ci`:
//
//   node kafkajs_group_test.js BOOTSTRAP TOPIC GROUP EXPECT CONSUMERS
//
// Starts CONSUMERS kafkajs consumers (client ids sluice-interop-kafkajs-0, -1, ...) in
// GROUP, subscribed to TOPIC from the beginning, with consumer.run({eachMessage}) and
// auto-commit after every batch. Prints one JSON object per stdout line:
//
//   {"event":"join","consumer":i,"memberId":...,"assignment":{topic:[partitions]}}
//   {"event":"consumed","count":N}   once EXPECT distinct records have been consumed
//   {"event":"report","records":[{"c":consumer,"p":partition,"o":offset,"v":value}],"joins":N}
//   {"event":"fail","msg":...}       and exit 1, on any failure
//
// After "consumed" it keeps the consumers running (heartbeating, committing) until a
// "stop" line on stdin; then it disconnects them all (LeaveGroup), prints the report and
// exits 0.
'use strict'

const readline = require('readline')
const { Kafka, logLevel } = require('kafkajs')

const TIMEOUT_MS = 60000

function fail (msg) {
  console.log(JSON.stringify({ event: 'fail', msg }))
  process.exit(1)
}

function emit (obj) {
  console.log(JSON.stringify(obj))
}

async function main () {
  const [bootstrap, topic, groupId, expectArg, consumersArg] = process.argv.slice(2)
  const expect = Number(expectArg)
  const n = Number(consumersArg)
  if (!bootstrap || !topic || !groupId || !(expect > 0) || !(n > 0)) {
    fail('usage: node kafkajs_group_test.js BOOTSTRAP TOPIC GROUP EXPECT CONSUMERS')
  }
  const records = []
  const seen = new Set()
  let joins = 0
  let consumedSent = false

  const consumers = []
  for (let i = 0; i < n; i++) {
    const kafka = new Kafka({
      clientId: `sluice-interop-kafkajs-${i}`,
      brokers: [bootstrap],
      logLevel: logLevel.WARN,
      retry: { retries: 5, initialRetryTime: 100 }
    })
    const consumer = kafka.consumer({
      groupId,
      sessionTimeout: 6000,
      heartbeatInterval: 500,
      rebalanceTimeout: 10000,
      maxWaitTimeInMs: 200,
      allowAutoTopicCreation: false
    })
    consumer.on(consumer.events.GROUP_JOIN, (e) => {
      joins++
      emit({ event: 'join', consumer: i, memberId: e.payload.memberId, leader: e.payload.isLeader, assignment: e.payload.memberAssignment })
    })
    consumer.on(consumer.events.CRASH, (e) => {
      fail(`consumer ${i} crashed (restart: ${e.payload.restart}): ${e.payload.error && e.payload.error.stack}`)
    })
    await consumer.connect()
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    await consumer.run({
      autoCommit: true,
      autoCommitInterval: 100,
      autoCommitThreshold: 1,
      eachMessage: async ({ partition, message }) => {
        const key = `${partition}/${message.offset}`
        records.push({ c: i, p: partition, o: Number(message.offset), v: message.value.toString() })
        seen.add(key)
        if (!consumedSent && seen.size >= expect) {
          consumedSent = true
          emit({ event: 'consumed', count: seen.size })
        }
      }
    })
    consumers.push(consumer)
  }

  await new Promise((resolve) => {
    const rl = readline.createInterface({ input: process.stdin })
    rl.on('line', (line) => { if (line.trim() === 'stop') { rl.close(); resolve() } })
    rl.on('close', resolve)
  })
  await Promise.all(consumers.map((c) => c.disconnect()))
  emit({ event: 'report', records, joins })
}

const timer = setTimeout(() => fail(`no result after ${TIMEOUT_MS}ms`), TIMEOUT_MS)
main().then(() => { clearTimeout(timer); process.exit(0) }, (err) => fail((err && err.stack) || String(err)))
