'use strict'
// Seed 001's story for real, with a fleet: a redis-server with AOF, two
// local partner endpoints, and three sender processes (sender.js), each
// with an Outbox per partner. Partner A is down while the three submit
// 100,000 events for it (and 3,000 each for B, which is healthy); midway
// Redis is killed (SIGKILL) and restarted from its AOF. Still down, A's
// deliverer is killed: the next one resumes its breaker (open), so it does
// not trip again on calls of its own. A comes back and
// gets its backlog, in order; midway the process delivering it is killed
// (SIGKILL) and another takes over. Then a rolling deploy: a fourth
// process starts, old and new both submit for 5 s, and the old holder is
// stopped (SIGTERM: it closes, the new one takes over). Prints what each
// step did (`--json`: one JSON line, for the test). Seed 001's times
// scaled by 0.05 (10 s -> 500 ms).
//
//   node run.js [--events 100000] [--json]

const { fork } = require('node:child_process')
const path = require('node:path')
const Redis = require('ioredis')
const { startPartners } = require('./partner.js')
const { startRedis } = require('./redis.js')

const B_EACH = 3_000
/** The outbox's page (its default). */
const PAGE = 64
const OVERLAP_MS = 5_000

function arg(name, fallback) {
  const i = process.argv.indexOf(name)
  return i === -1 ? fallback : Number(process.argv[i + 1])
}

/** Wakes every wait at each message from a sender. */
const waiters = []
const changed = () => {
  for (const wake of waiters.splice(0)) wake()
}
async function until(check) {
  while (!check()) await new Promise((resolve) => waiters.push(resolve))
}

/** A sender process (sender.js), and what it said. */
class Sender {
  constructor(name, redisPort, base) {
    this.name = name
    this.child = fork(path.join(__dirname, 'sender.js'), [name, String(redisPort), base, 'a,b'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    this.epoch = { a: null, b: null } // the lease it holds, per partner
    this.acquired = [] // its grants: { partner, epoch, breaker }
    this.opened = [] // its breakers' opens: { partner, calls } (the sends it had made)
    this.dead = false
    this.ended = [] // grants that ended: { partner, epoch, how, unconfirmed }
    this.opens = 0
    this.refused = false
    this.timedOut = { a: new Set(), b: new Set() } // keys of sends given up at their timeout
    this.replies = []
    this.exited = new Promise((resolve) => this.child.once('exit', resolve))
    this.child.on('message', (m) => {
      if (m.acquired) {
        this.epoch[m.acquired.partner] = m.acquired.epoch
        this.acquired.push(m.acquired)
      }
      if (m.lost) {
        // A grant given back by `close` is told by its `closed` reply (its removals come first).
        const { partner, reason, removing } = m.lost
        // A loss: its removals not yet confirmed, and its sends in flight (they end, unconfirmed), are ambiguous.
        if (reason !== 'released')
          this.ended.push({
            partner,
            epoch: this.epoch[partner],
            how: `lost (${reason})`,
            unconfirmed: null,
            removing,
          })
        this.epoch[partner] = null
      }
      if (m.opened) {
        this.opens += 1
        this.opened.push({ ...m.opened, epoch: this.epoch[m.opened.partner] })
      }
      if (m.refusedFirst) this.refused = true
      if (m.timedOut) this.timedOut[m.timedOut.partner].add(m.timedOut.key)
      if (m.ready || m.submitted || m.closed || m.armed) this.replies.push(m)
      changed()
    })
    this.child.on('exit', changed)
  }

  /** SIGKILLs it; the grants it held end unconfirmed (`ended`). */
  async kill() {
    const held = Object.entries(this.epoch).filter(([, epoch]) => epoch !== null)
    this.child.kill('SIGKILL')
    this.dead = true
    await this.exited
    for (const [partner, epoch] of held) this.ended.push({ partner, epoch, how: 'killed', unconfirmed: null })
  }

  /** The next reply that has `what`. */
  async reply(what) {
    await until(() => this.replies.some((m) => m[what] !== undefined))
    const i = this.replies.findIndex((m) => m[what] !== undefined)
    return this.replies.splice(i, 1)[0][what]
  }

  /** From now on, says its first refused submit (`refused`). */
  async arm() {
    this.refused = false
    this.child.send({ arm: true })
    await this.reply('armed')
  }

  /** Submits n in [from, from + count) to `partner`; resolves with `{ count, refused, ambiguous, ambiguousKeys }`. */
  async submit(partner, from, count) {
    this.child.send({ submit: { partner, from, count } })
    await until(() => this.replies.some((m) => m.submitted?.partner === partner))
    const i = this.replies.findIndex((m) => m.submitted?.partner === partner)
    return this.replies.splice(i, 1)[0].submitted
  }
}

/** Each sender's events, in the order the partner first processed them: are they in the order submitted? */
function inOrder(received) {
  const last = new Map()
  let outOfOrder = 0
  for (const { event } of received) {
    if (event.n <= (last.get(event.from) ?? -1)) outOfOrder += 1
    last.set(event.from, event.n)
  }
  return outOfOrder
}

async function main() {
  const events = arg('--events', 100_000)
  const json = process.argv.includes('--json')
  const say = (line) => json || console.log(line)
  const redis = await startRedis()
  // However the run ends (an error, a test's timeout), Redis goes with it;
  // the senders exit when their channel closes.
  process.on('exit', () => redis.stopNow())
  process.on('SIGTERM', () => process.exit(1))
  const admin = new Redis({
    host: '127.0.0.1',
    port: redis.port,
    retryStrategy: () => 50,
  })
  admin.on('error', () => {})
  const web = await startPartners(['a', 'b'])
  const { a, b } = web.partners
  const senders = ['s1', 's2', 's3'].map((name) => new Sender(name, redis.port, web.base))
  await Promise.all(senders.map((s) => s.reply('ready')))
  const per = senders.map((_, i) => Math.floor(events / 3) + (i < events % 3 ? 1 : 0))
  const firstHalf = per.map((n) => Math.floor(n / 2))
  const submits = []
  const result = { events, b: {}, a: {} }

  // 1. A is down; the three submit the first half of A's events, and B's.
  a.up = false
  say(`partner A down; three processes submit ${events.toLocaleString('en')} events for A, ${(3 * B_EACH).toLocaleString('en')} for B`)
  submits.push(...(await Promise.all([...senders.map((s, i) => s.submit('a', 0, firstHalf[i])), ...senders.map((s) => s.submit('b', 0, B_EACH))])))

  // 2. Redis crashes; the second halves are submitted meanwhile: each
  // process is refused (never told "stored"), and submits again once
  // Redis is back from its AOF.
  const storedBeforeCrash = await admin.xlen('halfopen:outbox:v1:{a}:log')
  await Promise.all(senders.map((s) => s.arm()))
  await redis.kill()
  const second = senders.map((s, i) => s.submit('a', firstHalf[i], per[i] - firstHalf[i]))
  await until(() => senders.every((s) => s.refused))
  await redis.restart()
  submits.push(...(await Promise.all(second)))
  const storedAfterCrash = await admin.xlen('halfopen:outbox:v1:{a}:log')
  result.crash = {
    storedBeforeCrash,
    storedAfterCrash,
    refused: submits.reduce((n, s) => n + s.refused, 0),
    ambiguous: submits.reduce((n, s) => n + s.ambiguous, 0),
  }
  say(
    `  Redis SIGKILLed after ${storedBeforeCrash.toLocaleString('en')} of A's events were stored, restarted from its AOF: ` +
      `${result.crash.refused.toLocaleString('en')} submits refused meanwhile (StoreUnavailableError; ${result.crash.ambiguous} without an answer) and made again; ` +
      `A's log holds ${storedAfterCrash.toLocaleString('en')}`,
  )
  await web.until('b', () => b.received.length === 3 * B_EACH)
  result.b.deliveredWhileADown = b.received.length

  // 2b. A is still down and its deliverer dies (SIGKILL). The next holder
  // resumes the breaker state it left (open, its open period long over):
  // one probe, not five failures of its own, before its breaker opens.
  // (Killed once Redis holds an open breaker from its current grant: each
  // renewal carries the state, a change brings one soon.)
  const holderOfA = () => senders.find((s) => !s.dead && s.epoch.a !== null)
  const leftOpen = async () => {
    const h = holderOfA()
    const [state, epoch] = await admin.hmget('halfopen:outbox:v1:{a}:breaker', 's', 'e')
    return h !== undefined && state !== null && Number(epoch) === h.epoch.a && ['open', 'half_open'].includes(JSON.parse(state).phase)
  }
  while (!(await leftOpen())) await new Promise((resolve) => setTimeout(resolve, 20))
  const first = holderOfA()
  await first.kill()
  const heir = () => senders.find((s) => !s.dead && s.epoch.a !== null)
  const openOf = (s) => s.opened.find((o) => o.partner === 'a' && o.epoch === s.epoch.a)
  await until(() => heir() !== undefined && openOf(heir()) !== undefined)
  const successor = heir()
  result.a.resumed = {
    killed: first.name,
    by: successor.name,
    breaker: successor.acquired.filter((g) => g.partner === 'a').at(-1).breaker,
    callsBeforeOpen: openOf(successor).calls,
  }
  say(
    `  ${first.name}, delivering A (down), SIGKILLed: ${successor.name} took over with the breaker it left (${result.a.resumed.breaker}): ` +
      `${result.a.resumed.callsBeforeOpen} call before its breaker opened (a fresh one makes 5)`,
  )

  // 3. A comes back: its holder sends the backlog, in order. Midway the
  // holder is killed; another process takes over when the lease runs out.
  const callsWhileDown = a.callsWhileDown
  a.up = true
  const back = performance.now()
  await web.until('a', () => a.received.length >= Math.floor(events / 3))
  const killed = senders.find((s) => s.name === a.received.at(-1).sender)
  const killedAt = performance.now()
  await killed.kill()
  await web.until('a', () => a.received.at(-1).sender !== killed.name)
  const takeoverMs = performance.now() - killedAt
  await web.until('a', () => a.received.length === events)
  result.a.drainMs = Math.round(performance.now() - back)
  result.a.takeover = {
    killed: killed.name,
    at: Math.floor(events / 3),
    ms: Math.round(takeoverMs),
    by: a.received.at(-1).sender,
  }
  say(`partner A back: its ${events.toLocaleString('en')} events delivered in ${result.a.drainMs} ms`)
  say(
    `  ${killed.name}, delivering, SIGKILLed after ${result.a.takeover.at.toLocaleString('en')}: ${result.a.takeover.by} took over ${result.a.takeover.ms} ms later`,
  )

  // 4. A rolling deploy: s4 starts; for 5 s old and new submit (delivered
  // as they come); then the old holder is stopped and closes.
  const old = senders.filter((s) => !s.dead)
  const s4 = new Sender('s4', redis.port, web.base)
  await s4.reply('ready')
  const live = [...old, s4]
  const next = new Map(live.map((s) => [s, s === s4 ? 0 : per[senders.indexOf(s)]]))
  const repeatsBefore = a.duplicates.length
  const trickle = async (who, until) => {
    while (performance.now() < until) {
      submits.push(...(await Promise.all(who.map((s) => s.submit('a', next.get(s), 20)))))
      for (const s of who) next.set(s, next.get(s) + 20)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
  await trickle(live, performance.now() + OVERLAP_MS)
  const stopped = old.find((s) => s.name === a.received.at(-1).sender) ?? old[0]
  const stoppedEpoch = stopped.epoch.a
  stopped.child.send({ close: true })
  const { unremoved, lapsed } = await stopped.reply('closed')
  await stopped.exited
  stopped.ended.push({
    partner: 'a',
    epoch: stoppedEpoch,
    how: 'closed',
    unconfirmed: lapsed ? null : unremoved,
  })
  await trickle(
    live.filter((s) => s !== stopped),
    performance.now() + 1_000,
  )
  const total = events + [...next.entries()].reduce((n, [s, to]) => n + to - (s === s4 ? 0 : per[senders.indexOf(s)]), 0)
  await web.until('a', () => a.received.length === total)
  result.a.deploy = {
    events: total - events,
    stopped: stopped.name,
    held: stoppedEpoch !== null,
    unremoved,
    lapsed,
    repeats: a.duplicates.length - repeatsBefore,
  }
  say(
    `rolling deploy: s4 started, ${(total - events).toLocaleString('en')} events submitted by old and new over ${OVERLAP_MS / 1000} s and more; ${stopped.name} (holding A) closed with ${unremoved} unremoved; repeats meanwhile ${result.a.deploy.repeats}`,
  )

  // The end: every process closes; the logs are empty.
  const rest = live.filter((s) => s !== stopped)
  for (const s of rest) s.child.send({ close: true })
  for (const s of rest) result.a.unremovedAtEnd = (result.a.unremovedAtEnd ?? 0) + (await s.reply('closed')).unremoved
  await Promise.all(rest.map((s) => s.exited))

  // Every repeat at a partner is of an ambiguous outcome, named: an event
  // stored twice (its submit had no answer), a send given up at its
  // timeout (it may have arrived), or one whose removal Redis may not have
  // confirmed — the grant that sent it first was killed, lost the lease, or
  // closed with some unremoved — and then no more of them than such a grant
  // can have had out: four pages (the core reads no more while its removals are out).
  const all = [...senders, s4]
  const ambiguousKeys = new Set(submits.flatMap((s) => s.ambiguousKeys))
  // (`unconfirmed`: null when unknown — a kill, a loss.)
  const unconfirmed = new Map(all.flatMap((s) => s.ended.filter((e) => e.unconfirmed !== 0).map((e) => [`${s.name} ${e.partner} ${e.epoch}`, 0])))
  const explain = (partner, d) => {
    const first = web.partners[partner].keys.get(d.key)
    if (ambiguousKeys.has(d.key)) return 'stored twice (no answer to its submit)'
    if (all.some((s) => s.timedOut[partner].has(d.key))) return 'given up at its timeout'
    const grant = `${first.sender} ${partner} ${first.epoch}`
    if (unconfirmed.has(grant) && unconfirmed.get(grant) < 4 * PAGE) {
      unconfirmed.set(grant, unconfirmed.get(grant) + 1)
      return 'sent by a grant that ended unconfirmed'
    }
    return 'unexplained'
  }
  for (const [partner, count] of [
    ['a', total],
    ['b', 3 * B_EACH],
  ]) {
    const p = web.partners[partner]
    const why = {}
    for (const d of p.duplicates) {
      const reason = explain(partner, d)
      why[reason] = (why[reason] ?? 0) + 1
      if (reason === 'unexplained') result.unexplained = [...(result.unexplained ?? []), { first: p.keys.get(d.key), again: d }]
    }
    Object.assign(result[partner], {
      submitted: count,
      processed: p.received.length,
      outOfOrder: inOrder(p.received),
      repeats: p.duplicates.length,
      why,
      epochsBack: p.arrivals.filter((r, i) => i > 0 && r.epoch < p.arrivals[i - 1].epoch).length,
      storedAfter: await admin.xlen(`halfopen:outbox:v1:{${partner}}:log`),
    })
  }
  result.a.callsWhileDown = callsWhileDown
  result.a.opens = all.reduce((n, s) => n + s.opens, 0)
  result.grants = all.flatMap((s) => s.ended.map((e) => ({ sender: s.name, ...e })))
  admin.disconnect()
  await web.close()
  await redis.stop()
  if (json) {
    console.log(JSON.stringify(result))
    return
  }
  for (const partner of ['a', 'b']) {
    const r = result[partner]
    const why = Object.entries(r.why)
      .map(([k, v]) => `${v} ${k}`)
      .join(', ')
    say(
      `${partner.toUpperCase()}: processed ${r.processed.toLocaleString('en')} of ${r.submitted.toLocaleString('en')}, out of order ${r.outOfOrder}, ` +
        `repeats deduplicated by key ${r.repeats}${why ? ` (${why})` : ''}; left in Redis ${r.storedAfter}`,
    )
  }
  say(`A while down: ${callsWhileDown} calls (the breakers opened ${result.a.opens} times); B got all of its events while A was down`)
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
