#!/usr/bin/env node
// A long-running kafkajs group member for Sluice's interop tests. Run from this
// directory, after `npm ci`:
//
//   node group_member.js BOOTSTRAP TOPIC GROUP CLIENT_ID
//
// Joins GROUP subscribed to TOPIC from the beginning with consumer.run({eachMessage})
// and auto-commit, until stdin closes or says "stop"; then disconnects (LeaveGroup).
// Prints one JSON object per stdout line:
//
//   {"event":"join","memberId":...,"assignment":{topic:[partitions]}}
//   {"event":"count","consumed":N}   every 50 records
//   {"event":"fail","msg":...}       and exit 1, on a failure
'use strict'

const readline = require('readline')
const { Kafka, logLevel } = require('kafkajs')

function emit (obj) {
  console.log(JSON.stringify(obj))
}

async function main () {
  const [bootstrap, topic, groupId, clientId] = process.argv.slice(2)
  if (!bootstrap || !topic || !groupId || !clientId) {
    emit({ event: 'fail', msg: 'usage: node group_member.js BOOTSTRAP TOPIC GROUP CLIENT_ID' })
    process.exit(1)
  }
  const kafka = new Kafka({ clientId, brokers: [bootstrap], logLevel: logLevel.WARN, retry: { retries: 10, initialRetryTime: 100 } })
  const consumer = kafka.consumer({ groupId, sessionTimeout: 6000, heartbeatInterval: 300, rebalanceTimeout: 10000, maxWaitTimeInMs: 100 })
  consumer.on(consumer.events.GROUP_JOIN, e => emit({ event: 'join', memberId: e.payload.memberId, assignment: e.payload.memberAssignment }))
  consumer.on(consumer.events.CRASH, e => { emit({ event: 'fail', msg: String(e.payload.error) }); process.exit(1) })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  let consumed = 0
  await consumer.run({
    eachMessage: async () => {
      consumed++
      if (consumed % 50 === 0) emit({ event: 'count', consumed })
    }
  })
  const rl = readline.createInterface({ input: process.stdin })
  const stop = async () => {
    await consumer.disconnect()
    process.exit(0)
  }
  rl.on('line', line => { if (line.trim() === 'stop') stop() })
  rl.on('close', stop)
}

main().catch(e => { emit({ event: 'fail', msg: String(e && e.stack ? e.stack : e) }); process.exit(1) })
