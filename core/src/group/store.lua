-- halfopen's group store on Redis: what `MemoryStore` (core/src/group/store.rs)
-- does, in one atomic script call per exchange. Counters, a fenced register
-- and a lease; no breaker rule (those are in the core). The layout of KEYS,
-- ARGV and the reply is `group::redis` (core/src/group/redis.rs).
--
-- A call carries one request or several (a registry's names, each a
-- group of its own, in one hash slot): KEYS holds 8 keys per request and
-- ARGV 23 arguments per request, in the same order; the reply is 20
-- values per request, in that order. Every request is applied at the same
-- `TIME`.
--
-- Each request's KEYS: 1 register (hash; the group's limit in it too), 2 window buckets
-- (hash "<id>:c|f|s"), 3 running totals by member (hash
-- "calls,failures,slow"), 4 members by last exchange (zset), 5 members by
-- last failure (zset), 6 the group's run (string), 7 members with calls to
-- make (zset), 8 each member's calls in flight (hash).
-- Its ARGV: 1 member, 2 calls, 3 failures, 4 slow, 5 consecutive, 6 bucket_us,
-- 7 window_us, 8 member_ttl_us, 9 key_ttl_ms, 10 buckets kept, 11 proposal
-- (0 none, 1 open, 2 half_open, 3 closed), 12 its epoch (2^64 - 1: any,
-- an operator's force-open), 13 for_us or
-- lease_us, 14 open_for_us, 15 reason; the limit's report: 16 present
-- (0/1), 17 its epoch, 18 steps, 19 limit set (0 none), 20 its threshold,
-- 21 active (0/1); 22 the deadline (0 none): a request that arrives after
-- it (queued by a client while Redis was down, retried by a driver) was
-- given up by its process and changes nothing; 23 the member's calls in
-- flight.

local function int(n)
  return string.format('%d', n)
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- One request: its keys `k` and arguments `a`; returns its answer.
local function exchange(k, a)
  local member = a[1]
  local calls, failures, slow = tonumber(a[2]), tonumber(a[3]), tonumber(a[4])
  local bucket_us, window_us, ttl_us = tonumber(a[6]), tonumber(a[7]), tonumber(a[8])
  local key_ttl, kept = tonumber(a[9]), tonumber(a[10])
  local deadline = tonumber(a[22])
  local late = deadline > 0 and now > deadline

  local bucket = nil
  if bucket_us > 0 then
    bucket = math.floor(now / bucket_us)
  end
  local run = tonumber(redis.call('GET', k[6]) or '0')
  local fields = {'epoch', 'phase', 'until', 'open_for', 'reason', 'lease', 'lease_until'}
  local reg = redis.call('HMGET', k[1], unpack(fields))
  local epoch = tonumber(reg[1] or '0')
  local lim = redis.call('HMGET', k[1], 'limit_epoch', 'limit', 'threshold')
  local lepoch, limit, threshold = tonumber(lim[1] or '0'), tonumber(lim[2] or '0'), tonumber(lim[3] or '0')

  if not late then
    -- Members silent for longer than their TTL leave.
    local gone = redis.call('ZRANGEBYSCORE', k[4], '-inf', '(' .. int(now - ttl_us))
    for _, m in ipairs(gone) do
      redis.call('ZREM', k[4], m)
      redis.call('ZREM', k[5], m)
      redis.call('ZREM', k[7], m)
      redis.call('HDEL', k[3], m)
      redis.call('HDEL', k[8], m)
    end
    redis.call('ZADD', k[4], int(now), member)

    -- Growth of the running totals since last received; a member not known
    -- yet (or whose totals went back) counts nothing this time.
    local dc, df, ds = 0, 0, 0
    local prev = redis.call('HGET', k[3], member)
    if prev then
      local pc, pf, ps = string.match(prev, '^(%d+),(%d+),(%d+)$')
      pc, pf, ps = tonumber(pc), tonumber(pf), tonumber(ps)
      if pc and calls >= pc and failures >= pf and slow >= ps then
        dc, df, ds = calls - pc, failures - pf, slow - ps
      end
    end
    redis.call('HSET', k[3], member, a[2] .. ',' .. a[3] .. ',' .. a[4])
    if bucket and dc > 0 then
      redis.call('HINCRBY', k[2], int(bucket) .. ':c', dc)
      redis.call('HINCRBY', k[2], int(bucket) .. ':f', df)
      redis.call('HINCRBY', k[2], int(bucket) .. ':s', ds)
    end
    if df > 0 then
      redis.call('ZADD', k[5], int(now), member)
    end
    if dc > df then
      run = tonumber(a[5])
    else
      run = run + df
    end
    redis.call('SET', k[6], int(run))

    -- The fenced register: a proposal made at another epoch changes nothing.
    local kind = tonumber(a[11])
    if kind > 0 and (tonumber(a[12]) == epoch or a[12] == '18446744073709551615') then
      epoch = epoch + 1
      local period = tonumber(a[13])
      if kind == 1 then
        redis.call('HSET', k[1], 'epoch', int(epoch), 'phase', 'open', 'until', int(now + period),
          'open_for', a[14], 'reason', a[15])
        redis.call('HDEL', k[1], 'lease', 'lease_until')
      elseif kind == 2 then
        redis.call('HSET', k[1], 'epoch', int(epoch), 'phase', 'half_open', 'lease', member,
          'lease_until', int(now + period), 'open_for', a[14], 'reason', a[15])
        redis.call('HDEL', k[1], 'until')
      else
        redis.call('HSET', k[1], 'epoch', int(epoch), 'phase', 'closed')
        redis.call('HDEL', k[1], 'until', 'open_for', 'reason', 'lease', 'lease_until')
        redis.call('DEL', k[2], k[5])
        run = 0
        redis.call('SET', k[6], '0')
      end
      reg = redis.call('HMGET', k[1], unpack(fields))
    end

    -- The group's limit: a fenced register (a set applies at its epoch only)
    -- with a counter of steps (added at its epoch only).
    if a[16] == '1' and tonumber(a[17]) == lepoch then
      if a[19] ~= '0' then
        lepoch, limit, threshold = lepoch + 1, tonumber(a[19]), tonumber(a[20])
        redis.call('HSET', k[1], 'limit_epoch', int(lepoch), 'limit', a[19], 'threshold', a[20])
      elseif a[18] ~= '0' then
        limit = redis.call('HINCRBY', k[1], 'limit', a[18])
      end
    end
    if a[16] == '1' and a[21] == '1' then
      redis.call('ZADD', k[7], int(now), member)
    else
      redis.call('ZREM', k[7], member)
    end
    if a[16] == '1' then
      redis.call('HSET', k[8], member, a[23])
    else
      redis.call('HDEL', k[8], member)
    end
  end

  -- This member's place among the active ones, by id (as numbers: compared
  -- as decimal text of one width).
  local function padded(m)
    return string.rep('0', 20 - #m) .. m
  end
  local actives = redis.call('ZRANGE', k[7], 0, -1)
  local rank = ''
  if redis.call('ZSCORE', k[7], member) then
    local mine, below = padded(member), 0
    for _, m in ipairs(actives) do
      if padded(m) < mine then below = below + 1 end
    end
    rank = int(below)
  end

  -- The merged window: the last `kept` buckets, the current one included.
  local c, f, s = 0, 0, 0
  if bucket then
    local counts = redis.call('HGETALL', k[2])
    for i = 1, #counts, 2 do
      local id, which = string.match(counts[i], '^(%d+):(%a)$')
      if tonumber(id) < bucket - (kept - 1) then
        if not late then redis.call('HDEL', k[2], counts[i]) end
      else
        local n = tonumber(counts[i + 1])
        if which == 'c' then c = c + n elseif which == 'f' then f = f + n else s = s + n end
      end
    end
  end

  local busy = 0
  for _, n in ipairs(redis.call('HVALS', k[8])) do
    busy = busy + tonumber(n)
  end

  local live = redis.call('ZCARD', k[4])
  local failing = redis.call('ZCOUNT', k[5], int(now - window_us), '+inf')
  if not late then
    for i = 1, 8 do
      redis.call('PEXPIRE', k[i], key_ttl)
    end
  end
  return {int(now), int(epoch), reg[2] or 'closed', reg[3] or '0', reg[4] or '0', reg[5] or '',
    reg[6] or '0', reg[7] or '0', int(c), int(f), int(s), int(run), int(live), int(failing),
    int(lepoch), int(limit), int(threshold), int(#actives), rank, int(busy)}
end

local reply = {}
for i = 0, #KEYS / 8 - 1 do
  local k, a = {}, {}
  for j = 1, 8 do k[j] = KEYS[i * 8 + j] end
  for j = 1, 23 do a[j] = ARGV[i * 23 + j] end
  for _, v in ipairs(exchange(k, a)) do reply[#reply + 1] = v end
end
return reply
