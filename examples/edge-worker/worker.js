// An edge worker that forwards requests to upstream hosts with one circuit
// breaker per host. While a host's breaker refuses, the answer is 503 with
// Retry-After at once and the host sees nothing.
//
//   GET /<host:port>/<path>  →  GET http://<host:port>/<path>
//
// Each host has its own Durable Object (`Host`, named by the host): it holds
// that host's breaker in memory, forwards the host's requests through it,
// and keeps the breaker's snapshot under its own storage key. So:
// - a request costs one small write of one host's state, however many hosts
//   there are (no value grows with the number of hosts);
// - one object per host runs at a time, so no two isolates hold copies of a
//   host's breaker that could overwrite each other's counts;
// - a fresh instance (after a deploy, an eviction, a restart) restores the
//   snapshot, and the time since it was taken counts (`sharedClock`: the
//   clock is `Date.now()`, the same in every instance), so an open period
//   that ended meanwhile has ended;
// - a snapshot taken with other options (a redeploy that changed
//   FAILURE_THRESHOLD) cannot be restored: that host starts afresh, with a
//   warning, rather than failing every request.
//
// Time: workerd moves `Date.now()` only across I/O (never while a request's
// code runs), which is all a breaker needs: a call's duration is the time
// across its fetch, and an open period ends on the first request after it.

import { CircuitBreaker } from 'halfopen-wasm'

function options(env, host) {
  return {
    name: host,
    clock: () => Date.now(),
    sharedClock: true,
    failureThreshold: Number(env.FAILURE_THRESHOLD ?? 5),
    openTimeoutMs: Number(env.OPEN_TIMEOUT_MS ?? 30_000),
    halfOpenMaxAttempts: Number(env.HALF_OPEN_MAX_ATTEMPTS ?? 3),
  }
}

/**
 * The request's upstream host as the URL parser writes it (lower case,
 * percent-decoded, default port dropped), so that `LOCALHOST:8000` and
 * `%6Cocalhost:8000` share the breaker of `localhost:8000`; null if none.
 */
function hostOf(request) {
  const [, segment] = new URL(request.url).pathname.split('/')
  if (!segment) return null
  try {
    return new URL(`http://${segment}`).host || null
  } catch {
    return null
  }
}

export default {
  /** Hands the request to its host's Durable Object. */
  fetch(request, env) {
    const host = hostOf(request)
    if (host === null) return new Response('GET /<host:port>/<path>\n', { status: 400 })
    return env.HOST.get(env.HOST.idFromName(host)).fetch(request)
  },
}

/** One upstream host: its breaker, and the breaker's snapshot in storage. */
export class Host {
  constructor(state, env) {
    this.storage = state.storage
    this.env = env
    this.breaker = null // a promise: requests that arrive together share one restore
  }

  breakerFor(host) {
    this.breaker ??= (async () => {
      const saved = await this.storage.get('breaker')
      if (saved !== undefined) {
        try {
          return CircuitBreaker.fromJSON(options(this.env, host), saved)
        } catch (err) {
          // Other options (a redeploy), a corrupt or foreign value: this
          // host starts afresh rather than failing every request.
          console.warn(`halfopen: ${host}'s saved breaker cannot be restored (${err.kind ?? err.name}: ${err.message}); starting afresh`)
        }
      }
      return new CircuitBreaker(options(this.env, host))
    })().catch((err) => {
      this.breaker = null // the next request tries again
      throw err
    })
    return this.breaker
  }

  async fetch(request) {
    const url = new URL(request.url)
    const [, , ...rest] = url.pathname.split('/')
    const host = hostOf(request)
    const breaker = await this.breakerFor(host)
    let response
    try {
      response = await breaker.execute(async () => {
        const upstream = await fetch(`http://${host}/${rest.join('/')}${url.search}`)
        // A 5xx is the upstream failing: the breaker counts it.
        if (upstream.status >= 500) throw Object.assign(new Error(`upstream ${upstream.status}`), { upstream })
        return upstream
      })
    } catch (err) {
      if (err.name === 'CircuitBreakerOpenError') {
        // Refused: nothing reached the host, and only the rejection counter
        // changed, which is not worth a write per refused request.
        return refused(host, err)
      }
      response = err.upstream ?? new Response(`${host} failed: ${err.message}\n`, { status: 502 })
    }
    // Kept after every call, before answering: an instance that dies after
    // a response loses nothing (workerd holds the response until the write
    // is durable).
    await this.storage.put('breaker', JSON.stringify(breaker.toJSON()))
    const headers = new Headers(response.headers)
    headers.set('x-breaker-state', breaker.getState())
    return new Response(response.body, { status: response.status, headers })
  }
}

function refused(host, err) {
  const ms = err.retryAfterMs
  return new Response(`${host} is unavailable (${err.reason})\n`, {
    status: 503,
    headers: {
      'retry-after': String(Number.isFinite(ms) ? Math.max(1, Math.ceil(ms / 1000)) : 60),
      // The exact wait, for clients that can use it (the test does).
      'x-retry-after-ms': String(ms),
      'x-breaker-state': err.state,
    },
  })
}
