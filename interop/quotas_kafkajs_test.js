#!/usr/bin/env node
// A kafkajs producer that produces as fast as it can against a producer_byte_rate quota,
// for Sluice's quota interop test. Run by TestQuotaClients (quotas_test.go) from this
// directory, after `npm ci`:
//
//   node quotas_kafkajs_test.js BOOTSTRAP TOPIC CLIENT_ID VALUE_BYTES
//
// The producer (clientId CLIENT_ID, no compression, so the bytes the broker charges are
// the bytes it appends, acks -1, not idempotent) keeps INFLIGHT sends of PER_SEND
// VALUE_BYTES-byte messages for partition 0 of TOPIC going, a new one as soon as one is
// acknowledged, until stdin closes or says "stop"; then it waits for the sends still
// going and prints its report. kafkajs does not batch across sends: each send is one
// Produce request holding one batch of about PER_SEND * VALUE_BYTES bytes, so the
// broker's log grows in small steps. Events, one JSON object per stdout line:
//
//   {"event": "delivered"}                      the first send was acknowledged
//   {"event": "report", "sends": S, "acked": N, "acked_bytes": B, "failed": F,
//       "throttles": T, "throttle_ms_max": M, "undelivered": 0}
//                                               T: responses kafkajs throttled itself
//                                               for (its debug log "Client side
//                                               throttling in effect for Mms": a
//                                               Produce v6+ response carried a non-zero
//                                               throttle_time_ms, KIP-219)
//   {"event": "fail", "msg": ...}               and exit 1, on an unexpected error
//
// kafkajs's warnings and errors go to stderr, one JSON object a line.
'use strict'

const readline = require('readline')
const { Kafka, logLevel } = require('kafkajs')

const PER_SEND = 16 // messages per send: ~16 KiB batches
const INFLIGHT = 4 // sends going at once

function emit (ev) {
  console.log(JSON.stringify(ev))
}

function fail (msg) {
  emit({ event: 'fail', msg })
  process.exit(1)
}

const THROTTLE_LOG = /^Client side throttling in effect for (\d+)ms/

async function main () {
  const args = process.argv.slice(2)
  if (args.length !== 4) fail('usage: node quotas_kafkajs_test.js BOOTSTRAP TOPIC CLIENT_ID VALUE_BYTES')
  const [bootstrap, topic, clientId] = args
  const size = Number(args[3])
  const seen = { sends: 0, acked: 0, acked_bytes: 0, failed: 0, throttles: 0, throttle_ms_max: 0 }
  const errors = []

  // kafkajs tells of client-side throttling only in a debug log line (no instrumentation
  // event carries the throttle time), so the logger runs at DEBUG and this keeps that
  // line, warnings and errors.
  const logCreator = () => ({ level, log }) => {
    if (level === logLevel.DEBUG) {
      const m = THROTTLE_LOG.exec(log.message)
      if (m) {
        const ms = Number(m[1])
        seen.throttles++
        seen.throttle_ms_max = Math.max(seen.throttle_ms_max, ms)
      }
      return
    }
    if (level <= logLevel.WARN) process.stderr.write(JSON.stringify(log) + '\n')
  }

  const kafka = new Kafka({ clientId, brokers: [bootstrap], logLevel: logLevel.DEBUG, logCreator })
  const producer = kafka.producer({ idempotent: false, allowAutoTopicCreation: false })
  await producer.connect()

  let stopping = false
  const rl = readline.createInterface({ input: process.stdin })
  rl.on('line', (line) => { if (line.trim() === 'stop') stopping = true })
  rl.on('close', () => { stopping = true })

  const value = Buffer.alloc(size, 'q')
  const messages = Array.from({ length: PER_SEND }, () => ({ partition: 0, value }))

  // One of INFLIGHT loops: a send, and the next when it is answered, until stopping.
  const loop = async () => {
    while (!stopping) {
      seen.sends++
      try {
        // No compression is kafkajs's default.
        await producer.send({ topic, acks: -1, messages })
      } catch (err) {
        seen.failed += messages.length
        errors.push((err && err.message) || String(err))
        continue
      }
      if (seen.acked === 0) emit({ event: 'delivered' })
      seen.acked += messages.length
      seen.acked_bytes += messages.length * size
    }
  }
  await Promise.all(Array.from({ length: INFLIGHT }, loop))
  rl.close()
  await producer.disconnect()
  if (errors.length > 0) fail(errors.slice(0, 10).join('; '))
  emit({ event: 'report', ...seen, undelivered: 0 })
}

main().catch((err) => fail((err && err.stack) || String(err)))
