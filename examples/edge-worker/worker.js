// An edge worker that forwards requests to upstream hosts with one circuit
// breaker per host (a halfopen-wasm Registry). While a host's breaker
// refuses, the worker answers 503 with Retry-After at once and the host sees
// nothing. The breakers' state lives in a Durable Object, so a fresh isolate
// (after a deploy, an eviction, a restart) goes on where the last one stopped.
//
//   GET /<host:port>/<path>  →  GET http://<host:port>/<path>
//
// Time: workerd moves `Date.now()` only across I/O (never while a request's
// code runs), which is all a breaker needs: a call's duration is the time
// across its fetch, and an open period ends on the first request after it.
// The wall clock (not `performance.now()`, whose origin is each isolate's
// start) lets a restored open period keep counting across isolates.

import { Registry } from 'halfopen-wasm'

/** The isolate's breakers, restored from the Durable Object on first use
 * (the promise: requests that arrive together share one restore). */
let registry = null

function options(env) {
  return {
    clock: () => Date.now(),
    failureThreshold: Number(env.FAILURE_THRESHOLD ?? 5),
    openTimeoutMs: Number(env.OPEN_TIMEOUT_MS ?? 30_000),
    halfOpenMaxAttempts: Number(env.HALF_OPEN_MAX_ATTEMPTS ?? 3),
  }
}

/** The Durable Object that keeps the breakers' snapshot (one for the worker). */
function stateStub(env) {
  return env.BREAKER_STATE.get(env.BREAKER_STATE.idFromName('breakers'))
}

function breakers(env) {
  registry ??= (async () => {
    const fresh = new Registry(options(env))
    const saved = await stateStub(env).fetch('http://state/snapshot')
    if (saved.status === 200) fresh.restore(await saved.text())
    return fresh
  })().catch((err) => {
    registry = null // the next request tries again
    throw err
  })
  return registry
}

/** The isolate's saves, one after another: each sends the state as it is when
 * its turn comes, so the last one stored is the latest. */
let saving = Promise.resolve()

function save(env, hosts) {
  const body = () => JSON.stringify(hosts.toJSON())
  saving = saving
    .catch(() => {})
    .then(() => stateStub(env).fetch('http://state/snapshot', { method: 'PUT', body: body() }))
  return saving
}

async function forward(request, env) {
  const url = new URL(request.url)
  const [, host, ...rest] = url.pathname.split('/')
  if (!host) return new Response('GET /<host:port>/<path>\n', { status: 400 })
  const hosts = await breakers(env)
  let response
  try {
    response = await hosts.get(host).execute(async () => {
      const upstream = await fetch(`http://${host}/${rest.join('/')}${url.search}`)
      // A 5xx is the upstream failing: the breaker counts it.
      if (upstream.status >= 500) throw Object.assign(new Error(`upstream ${upstream.status}`), { upstream })
      return upstream
    })
  } catch (err) {
    if (err.name === 'CircuitBreakerOpenError') {
      const seconds = Number.isFinite(err.retryAfterMs) ? Math.max(1, Math.ceil(err.retryAfterMs / 1000)) : 60
      response = new Response(`${host} is unavailable (${err.reason})\n`, {
        status: 503,
        headers: { 'retry-after': String(seconds), 'x-breaker-state': err.state },
      })
    } else if (err.upstream) {
      response = err.upstream
    } else {
      response = new Response(`${host} failed: ${err.message}\n`, { status: 502 })
    }
  }
  // Kept after every request (the failures counted matter as much as the
  // state), before answering: an isolate that dies after a response loses
  // nothing. (`ctx.waitUntil` would answer sooner and risk the latest change.)
  await save(env, hosts)
  return response
}

export default {
  fetch: forward,
}

/** The Durable Object: the latest snapshot of the worker's breakers. */
export class BreakerState {
  constructor(state) {
    this.storage = state.storage
  }

  async fetch(request) {
    if (request.method === 'PUT') {
      await this.storage.put('snapshot', await request.text())
      return new Response(null, { status: 204 })
    }
    const snapshot = await this.storage.get('snapshot')
    return snapshot === undefined ? new Response(null, { status: 404 }) : new Response(snapshot)
  }
}
