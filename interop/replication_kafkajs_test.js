#!/usr/bin/env node
// An idempotent acks=-1 kafkajs producer that keeps producing while the test SIGKILLs and
// restarts brokers of a three-broker cluster. Run by TestReplicationClientsBrokerKills
// (replication_clients_test.go) from this directory, after `npm ci`:
//
//   node replication_kafkajs_test.js BOOTSTRAPS TOPIC PARTITIONS TAG
//
// BOOTSTRAPS is every broker, comma-separated. The producer ({ idempotent: true }, so
// unlimited retries, here with short backoffs) writes numbered values
// "TAG-p<partition>-<seq>" (seq counts per partition from 0): one loop per partition,
// each awaiting one send() of BATCH messages to its partition at a time, at most RATE
// records a second in all, until stdin is closed; then the loops finish their sends and
// it prints its report. One partition per send and one send per partition at a time on
// purpose: kafkajs rolls a failed request's sequence numbers back, so a second send in
// flight to the same partition would reuse them, and a send to several leaders keeps
// the answers of the leaders that answered when it retries after a leader change.
// Events, one JSON object per stdout line:
//
//   {"event":"ready"}                              connected
//   {"event":"progress","delivered":N,"failed":F,"partitions":[delivered per partition]}
//                                                  every 250ms
//   {"event":"report","sent":[n per partition],"delivered":[[partition,offset,value],...],
//    "failed":[[partition,value,error],...],"undelivered":0,"errors":E,"retries":R}
//                                                  E: error log entries, R: failed send
//                                                  attempts (retried)
//   {"event":"fail","msg":...}                     and exit 1, on an unexpected failure
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const RATE = 1000 // records a second, at most
const BATCH = 10 // messages per send

function event (obj) {
  console.log(JSON.stringify(obj))
}

function die (msg) {
  event({ event: 'fail', msg })
  process.exit(1)
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function main () {
  const [bootstraps, topic, partitionsArg, tag] = process.argv.slice(2)
  const partitions = Number(partitionsArg)
  if (!tag || !(partitions > 0)) die('usage: node replication_kafkajs_test.js BOOTSTRAPS TOPIC PARTITIONS TAG')
  // What the kills did to the producer: error log entries, and of them the producer's
  // failed attempts at a send (each is retried). Nothing is printed: every outcome is in
  // the report.
  const seen = { errors: 0, retries: 0 }
  const kafka = new Kafka({
    clientId: 'sluice-interop-kafkajs-repl',
    brokers: bootstraps.split(','),
    logLevel: logLevel.ERROR,
    logCreator: () => ({ namespace, log }) => {
      seen.errors++
      if (namespace === 'Producer' && log.retryCount !== undefined) seen.retries++
    },
    connectionTimeout: 3000,
    requestTimeout: 30000
  })
  const producer = kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    retry: { retries: Number.MAX_SAFE_INTEGER, initialRetryTime: 100, maxRetryTime: 1000 }
  })
  await producer.connect()

  const sent = new Array(partitions).fill(0)
  const deliveredPer = new Array(partitions).fill(0)
  const delivered = []
  const failed = []
  let stopping = false
  process.stdin.on('data', () => {})
  process.stdin.on('end', () => { stopping = true })

  const started = Date.now()
  let produced = 0 // across partitions, for the rate limit
  const loop = async (p) => {
    while (!stopping) {
      const ahead = produced + BATCH - ((Date.now() - started) / 1000) * RATE
      if (ahead > 0) {
        await sleep(Math.ceil((ahead / RATE) * 1000))
        continue
      }
      const values = []
      for (let i = 0; i < BATCH; i++) values.push(`${tag}-p${p}-${String(sent[p] + i).padStart(8, '0')}`)
      sent[p] += BATCH
      produced += BATCH
      try {
        const res = await producer.send({ topic, acks: -1, messages: values.map((value) => ({ partition: p, value })) })
        const r = res.find((r) => r.partition === p)
        if (!r || r.errorCode !== 0) {
          const why = r ? `error code ${r.errorCode}` : 'no answer for the partition'
          for (const v of values) failed.push([p, v, why])
          continue
        }
        const base = BigInt(r.baseOffset)
        values.forEach((v, i) => delivered.push([p, Number(base + BigInt(i)), v]))
        deliveredPer[p] += values.length
      } catch (e) {
        for (const v of values) failed.push([p, v, String(e)])
      }
    }
  }

  event({ event: 'ready' })
  const progress = setInterval(() => event({ event: 'progress', delivered: delivered.length, failed: failed.length, partitions: deliveredPer }), 250)
  const loops = []
  for (let p = 0; p < partitions; p++) loops.push(loop(p))
  await Promise.all(loops)
  clearInterval(progress)
  await producer.disconnect()
  // The report is a long line: exit once it is written (process.exit may cut a pending
  // write to a pipe short).
  process.stdout.write(JSON.stringify({ event: 'report', sent, delivered, failed, undelivered: 0, ...seen }) + '\n', () => process.exit(0))
}

main().catch((e) => die((e && e.stack) || String(e)))
