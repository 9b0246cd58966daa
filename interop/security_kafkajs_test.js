#!/usr/bin/env node
// kafkajs over SASL_SSL with SCRAM-SHA-256. Run by TestSecureClients (security_test.go)
// from this directory, after `npm ci`:
//
//   node security_kafkajs_test.js BOOTSTRAP CA_PEM TOPIC
//
// Logs in as alice (whose prefixed ACLs allow the topic and groups named sec-*),
// produces 10 messages to partition 1, then consumes the topic in group sec-kafkajs
// from the beginning until it has seen its own 10. A login as alice with a wrong
// password must fail. Prints {"produced":N,"consumed":M} on its last line; exits
// non-zero with "FAIL: ..." on any failure.
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const TIMEOUT_MS = 60000

function fail (msg) {
  console.log('FAIL: ' + msg)
  process.exit(1)
}

function client (bootstrap, ca, password) {
  return new Kafka({
    clientId: 'sluice-interop-kafkajs-secure',
    brokers: [bootstrap],
    ssl: { ca: [ca], servername: 'localhost' },
    sasl: { mechanism: 'scram-sha-256', username: 'alice', password },
    logLevel: logLevel.NOTHING,
    retry: { retries: 2 },
    connectionTimeout: 10000,
    authenticationTimeout: 10000
  })
}

async function main () {
  const [bootstrap, caPath, topic] = process.argv.slice(2)
  const ca = fs.readFileSync(caPath, 'utf8')

  const wrong = client(bootstrap, ca, 'not-her-password').producer()
  let refused = false
  try {
    await wrong.connect()
  } catch (e) {
    refused = /auth/i.test(String(e && (e.type || e.message)))
    if (!refused) fail('a wrong password failed, but not as an authentication error: ' + e)
  }
  if (!refused) fail('a wrong password was accepted')

  const kafka = client(bootstrap, ca, 'alice-secret')
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const messages = []
  for (let i = 0; i < 10; i++) messages.push({ partition: 1, key: `kjs-${i}`, value: `kafkajs-secure-${i}` })
  await producer.send({ topic, acks: -1, messages })
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: 'sec-kafkajs', sessionTimeout: 10000, heartbeatInterval: 1000 })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  const seen = new Set()
  let consumed = 0
  const done = new Promise((resolve) => {
    consumer.run({
      eachMessage: async ({ message }) => {
        consumed++
        const v = message.value.toString()
        if (v.startsWith('kafkajs-secure-')) seen.add(v)
        if (seen.size === 10) resolve()
      }
    })
  })
  const timer = setTimeout(() => fail(`consumed only ${seen.size} of the 10 messages in ${TIMEOUT_MS} ms`), TIMEOUT_MS)
  await done
  clearTimeout(timer)
  await consumer.disconnect()
  console.log(JSON.stringify({ produced: messages.length, consumed }))
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)))
