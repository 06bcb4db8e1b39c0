#!lua flags=allow-oom
-- An outbox's lease: a fenced register with a time to live, nothing more
-- (every rule is the core's, core/src/outbox/). One process holds it at a
-- time; each grant has a new epoch; it lapses by itself (PX) when its
-- holder stops renewing. Beside it, the breaker state its holder left
-- (core/src/outbox/carried.rs), written only by a holder, and handed with
-- its age by this server's clock to every caller that holds the lease (the
-- caller takes it on a grant it did not hold before: a new one, one whose
-- answer it never got, one it gave up itself as the answer came).
--
-- KEYS[1]  the lease: "<token> <epoch>", with the lease's TTL
-- KEYS[2]  the epoch counter (kept: epochs only grow, a fence a partner may rely on)
-- KEYS[3]  the breaker state left: a hash, s = the state, t = when (ms,
--          TIME), e = the epoch of the grant whose holder wrote it
-- ARGV[1]  the caller's token (unique per process and outbox)
-- ARGV[2]  the lease's length in ms; "0" gives it up
-- ARGV[3]  the caller's breaker state ("": none), kept if it holds the lease
-- ARGV[4]  the epoch the caller holds, as far as it knows ("0": none)
-- Reply: { 1 if the caller holds the lease now else 0, the epoch (0: none) },
--        and when it holds it: the state left (false: none) and its age in
--        ms (0 if its time is not a time of this server's past)
--
-- allow-oom: a Redis at maxmemory (noeviction) still grants and renews
-- the lease (a few bytes, and a state that replaces the one before), so
-- that its holder can deliver, and so remove, what fills it.

local token, ttl, state = ARGV[1], ARGV[2], ARGV[3]
local known = tonumber(ARGV[4]) or 0
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function keep(epoch)
  redis.call('HSET', KEYS[3], 's', state, 't', now_ms(), 'e', epoch)
end
local function granted(epoch)
  local left = redis.call('HMGET', KEYS[3], 's', 't')
  if not left[1] then
    return { 1, epoch, false, 0 }
  end
  local now, t = now_ms(), tonumber(left[2])
  local age = 0
  if t and t >= 0 and t <= now then
    age = now - t
  end
  return { 1, epoch, left[1], age }
end
local held = redis.call('GET', KEYS[1])
if held then
  local holder, epoch = string.match(held, '^(%S+) (%d+)$')
  epoch = tonumber(epoch)
  if holder == token then
    if state ~= '' then
      keep(epoch)
    end
    if ttl == '0' then
      redis.call('DEL', KEYS[1])
      return { 0, epoch }
    end
    redis.call('SET', KEYS[1], held, 'PX', ttl)
    return granted(epoch)
  end
  return { 0, epoch }
end
if ttl == '0' then
  return { 0, 0 }
end
local epoch = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token .. ' ' .. epoch, 'PX', ttl)
-- A holder whose grant lapsed, granted again: its state is the newest,
-- unless a later grant's holder left one since.
if state ~= '' and known > 0 then
  local e = tonumber(redis.call('HGET', KEYS[3], 'e'))
  if not e or e <= known then
    keep(epoch)
  end
end
return granted(epoch)
