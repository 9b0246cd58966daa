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
//
//   node kafkajs_group_test.js admin BOOTSTRAP TOPIC GROUP
//
// runs the admin client's group calls against an Empty GROUP whose offsets of TOPIC are
// committed at the end: listGroups, describeGroups, fetchOffsets, setOffsets and
// deleteGroups, then prints {"event":"admin","done":[...]}.
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

function check (cond, msg) {
  if (!cond) fail(msg)
}

// admin mode: kafkajs's group admin calls against GROUP, which must be Empty (no running
// consumer) with its offsets of TOPIC committed at the end offsets.
async function admin () {
  const [, bootstrap, topic, groupId] = process.argv.slice(2)
  const kafka = new Kafka({ clientId: 'sluice-interop-kafkajs-admin', brokers: [bootstrap], logLevel: logLevel.WARN })
  const adm = kafka.admin()
  await adm.connect()
  const done = []
  const committed = async () => {
    const res = await adm.fetchOffsets({ groupId, topics: [topic] })
    check(res.length === 1 && res[0].topic === topic, 'fetchOffsets: ' + JSON.stringify(res))
    const out = {}
    for (const p of res[0].partitions) out[p.partition] = p.offset
    return out
  }

  const listed = (await adm.listGroups()).groups.find((g) => g.groupId === groupId)
  check(listed && listed.protocolType === 'consumer', `listGroups: ${groupId} is ${JSON.stringify(listed)}, want protocolType consumer`)
  done.push('listGroups')

  const desc = await adm.describeGroups([groupId])
  check(desc.groups.length === 1 && desc.groups[0].groupId === groupId && desc.groups[0].errorCode === 0 &&
    desc.groups[0].state === 'Empty' && desc.groups[0].members.length === 0,
  'describeGroups: ' + JSON.stringify(desc))
  done.push('describeGroups')

  const ends = {}
  for (const o of await adm.fetchTopicOffsets(topic)) ends[o.partition] = o.high
  let got = await committed()
  check(JSON.stringify(got) === JSON.stringify(ends), `fetchOffsets ${JSON.stringify(got)}, want the end offsets ${JSON.stringify(ends)}`)
  done.push('fetchOffsets')

  // setOffsets joins the group with a temporary consumer, seeks and commits. (It takes
  // 5s: that consumer pauses the topic, and kafkajs then sleeps maxWaitTimeInMs, 5000 by
  // default, before the fetch round it waits for.)
  const t0 = Date.now()
  await adm.setOffsets({ groupId, topic, partitions: [{ partition: 0, offset: '5' }, { partition: 1, offset: '7' }] })
  const setMs = Date.now() - t0
  got = await committed()
  const want = Object.assign({}, ends, { 0: '5', 1: '7' })
  check(JSON.stringify(got) === JSON.stringify(want), `after setOffsets: ${JSON.stringify(got)}, want ${JSON.stringify(want)}`)
  done.push(`setOffsets (${setMs}ms)`)

  const deleted = await adm.deleteGroups([groupId])
  check(deleted.length === 1 && deleted[0].groupId === groupId && deleted[0].errorCode === 0, 'deleteGroups: ' + JSON.stringify(deleted))
  check(!(await adm.listGroups()).groups.some((g) => g.groupId === groupId), `listGroups still lists ${groupId} after deleteGroups`)
  got = await committed()
  check(Object.values(got).every((o) => o === '-1'), `fetchOffsets after deleteGroups: ${JSON.stringify(got)}, want -1 everywhere`)
  done.push('deleteGroups')
  await adm.disconnect()
  emit({ event: 'admin', done })
}

const timer = setTimeout(() => fail(`no result after ${TIMEOUT_MS}ms`), TIMEOUT_MS)
const run = process.argv[2] === 'admin' ? admin : main
run().then(() => { clearTimeout(timer); process.exit(0) }, (err) => fail((err && err.stack) || String(err)))
