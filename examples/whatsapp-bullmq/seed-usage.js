'use strict'
// Seed 000's usage code (the breakerFor Map, the BullMQ worker, the throttle
// webhook), ported from TypeScript to JavaScript. Against the seed, three
// things changed: the import (halfopen instead of ./circuit-breaker), the
// gateway address (an environment variable instead of the vendor's URL), and
// the webhook calls breaker.forceOpen(60_000), which the seed's own comment
// asks for. Exported pieces let the drop-in test drive it.

const { Worker } = require('bullmq')
const axios = require('axios')
const express = require('express')
const { CircuitBreaker } = require('halfopen')

const ZAP = axios.create({
  baseURL: process.env.ZAP_URL,
  headers: { Authorization: `Bearer ${process.env.ZAP_TOKEN}` },
})

// One breaker per instance: an instance in trouble does not take down the others
const breakers = new Map()

function breakerFor(instanceId) {
  if (!breakers.has(instanceId)) {
    breakers.set(
      instanceId,
      new CircuitBreaker({
        name: instanceId,
        failureThreshold: 5,
        windowMs: 60_000,
        openTimeoutMs: 30_000,
        halfOpenMaxAttempts: 3,
      }),
    )
  }
  return breakers.get(instanceId)
}

function startWorker(connection) {
  return new Worker(
    'messages',
    async (job) => {
      const { instanceId, phone, text, id } = job.data
      const breaker = breakerFor(instanceId)

      await breaker.execute(async () => {
        await ZAP.post(`/instances/${instanceId}/messages`, {
          id,
          to: phone,
          type: 'text',
          text,
        })
      })
    },
    {
      connection,
      // Configure BullMQ to retry with backoff
      // When the breaker opens, jobs fail and BullMQ reschedules
    },
  )
}

const app = express()
app.use(express.json())
app.post('/webhook/zap', async (req, res) => {
  res.status(200).send('ok')
  if (req.body.type === 'instance.throttle') {
    const breaker = breakerFor(req.body.instanceId)
    // force it open for 60 s
    breaker.forceOpen(60_000)
  }
})

module.exports = { app, breakerFor, startWorker }
