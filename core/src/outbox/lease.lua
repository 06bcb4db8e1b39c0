#!lua flags=allow-oom
-- An outbox's lease: a fenced register with a time to live, nothing more
-- (every rule is the core's, core/src/outbox/). One process holds it at a
-- time; each grant has a new epoch; it lapses by itself (PX) when its
-- holder stops renewing. Beside it, the breaker state its holder left
-- (core/src/outbox/carried.rs), written only by the holder, handed to the
-- next with its age by this server's clock.
--
-- KEYS[1]  the lease: "<token> <epoch>", with the lease's TTL
-- KEYS[2]  the epoch counter (kept: epochs only grow, a fence a partner may rely on)
-- KEYS[3]  the breaker state left: a hash, s = the state, t = when (ms, TIME)
-- ARGV[1]  the caller's token (unique per process and outbox)
-- ARGV[2]  the lease's length in ms; "0" gives it up
-- ARGV[3]  the caller's breaker state, kept if it holds the lease ("": none)
-- Reply: { 1 if the caller holds the lease now else 0, the epoch (0: none) },
--        and on a new grant the state left (false: none) and its age in ms
--
-- allow-oom: a Redis at maxmemory (noeviction) still grants and renews
-- the lease (a few bytes, and a state that replaces the one before), so
-- that its holder can deliver, and so remove, what fills it.

local token, ttl, state = ARGV[1], ARGV[2], ARGV[3]
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local held = redis.call('GET', KEYS[1])
if held then
  local holder, epoch = string.match(held, '^(%S+) (%d+)$')
  if holder == token then
    if state and state ~= '' then
      redis.call('HSET', KEYS[3], 's', state, 't', now_ms())
    end
    if ttl == '0' then
      redis.call('DEL', KEYS[1])
      return { 0, tonumber(epoch) }
    end
    redis.call('SET', KEYS[1], held, 'PX', ttl)
    return { 1, tonumber(epoch) }
  end
  return { 0, tonumber(epoch) }
end
if ttl == '0' then
  return { 0, 0 }
end
local epoch = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token .. ' ' .. epoch, 'PX', ttl)
local left = redis.call('HMGET', KEYS[3], 's', 't')
if not left[1] or not tonumber(left[2]) then
  return { 1, epoch, false, 0 }
end
return { 1, epoch, left[1], math.max(0, now_ms() - tonumber(left[2])) }
