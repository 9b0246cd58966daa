#!/usr/bin/env node
// kafkajs producer for the WASM transform tests (transforms_test.go), run from this
// directory after `npm ci`:
//
//   node transforms_test.js BOOTSTRAP TOPIC MESSAGES_JSON
//
// MESSAGES_JSON is an array of {"key": string|null, "value": string}. They are sent in
// one producer.send (acks -1, no compression, not idempotent) to TOPIC, which must exist
// (no auto-creation). Prints "OK <n> messages" on its last stdout line; exits non-zero
// with "FAIL: ..." on any failure, the broker's error included (so an inline transform
// that rejects the batch is visible to the Go test).
'use strict'

const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

function fail (msg) {
  console.log('FAIL: ' + msg)
  process.exit(1)
}

async function main () {
  const [bootstrap, topic, messagesJSON] = process.argv.slice(2)
  if (!bootstrap || !topic || !messagesJSON) fail('usage: node transforms_test.js BOOTSTRAP TOPIC MESSAGES_JSON')
  const messages = JSON.parse(messagesJSON)
  if (!Array.isArray(messages) || messages.length === 0) fail('MESSAGES_JSON: want a non-empty array')

  const kafka = new Kafka({
    clientId: 'sluice-interop-transforms',
    brokers: [bootstrap],
    logLevel: logLevel.ERROR,
    connectionTimeout: 10000,
    requestTimeout: 30000,
    retry: { retries: 3, initialRetryTime: 100 }
  })
  const producer = kafka.producer({ allowAutoTopicCreation: false, idempotent: false })
  await producer.connect()
  try {
    const res = await producer.send({
      topic,
      acks: -1,
      compression: CompressionTypes.None,
      messages: messages.map((m) => ({ key: m.key, value: m.value }))
    })
    for (const r of res) {
      if (r.errorCode !== 0) fail(`partition ${r.partition}: error code ${r.errorCode}`)
    }
  } finally {
    await producer.disconnect()
  }
  console.log(`OK ${messages.length} messages`)
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)))
