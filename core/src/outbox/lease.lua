#!lua flags=allow-oom
-- An outbox's lease: a fenced register with a time to live, nothing more
-- (every rule is the core's, core/src/outbox/). One process holds it at a
-- time; each grant has a new epoch; it lapses by itself (PX) when its
-- holder stops renewing.
--
-- KEYS[1]  the lease: "<token> <epoch>", with the lease's TTL
-- KEYS[2]  the epoch counter (kept: epochs only grow, a fence a partner may rely on)
-- ARGV[1]  the caller's token (unique per process and outbox)
-- ARGV[2]  the lease's length in ms; "0" gives it up
-- Reply: { 1 if the caller holds the lease now else 0, the epoch (0: none) }
--
-- allow-oom: a Redis at maxmemory (noeviction) still grants and renews
-- the lease (a few bytes), so that its holder can deliver, and so remove,
-- what fills it.

local token, ttl = ARGV[1], ARGV[2]
local held = redis.call('GET', KEYS[1])
if held then
  local holder, epoch = string.match(held, '^(%S+) (%d+)$')
  if holder == token then
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
return { 1, epoch }
