-- halfopen's group store on Redis: what `MemoryStore` (core/src/group/store.rs)
-- does, in one atomic script call per exchange. Counters, a fenced register
-- and a lease; no breaker rule (those are in the core). The layout of KEYS,
-- ARGV and the reply is `group::redis` (core/src/group/redis.rs).
--
-- A call carries one request or several (a registry's names, each a group
-- of its own, in one hash slot): KEYS holds one key per request and ARGV 23
-- arguments per request, in the same order; the reply is 20 values per
-- request, in that order. Every request is applied at the same `TIME`.
--
-- A group is one hash, read whole once per request and written back in
-- one HSET (and one HDEL, when something goes): the register ("epoch",
-- "phase", "until", "open_for", "reason", "lease", "lease_until"), the
-- group's limit ("limit_epoch", "limit", "threshold"), the run of failures
-- ("run"), the window's buckets ("b:<id>" = "calls,failures,slow") and each
-- member's record ("m:<id>" = "seen,failed,active,busy,calls,failures,slow":
-- its latest exchange, its latest one that carried failures (0: none since
-- the group closed), whether it has calls to make (0/1), its calls in
-- flight, its running totals as last received).
-- Each request's ARGV: 1 member, 2 calls, 3 failures, 4 slow, 5 consecutive,
-- 6 bucket_us, 7 window_us, 8 member_ttl_us, 9 key_ttl_ms, 10 buckets kept,
-- 11 proposal (0 none, 1 open, 2 half_open, 3 closed), 12 its epoch
-- (2^64 - 1: any, an operator's force-open), 13 for_us or lease_us,
-- 14 open_for_us, 15 reason; the limit's report: 16 present (0/1), 17 its
-- epoch, 18 steps, 19 limit set (0 none), 20 its threshold, 21 active
-- (0/1); 22 the deadline (0 none): a request that arrives after it (queued
-- by a client while Redis was down, retried by a driver) was given up by
-- its process and changes nothing; 23 the member's calls in flight.

local function int(n)
  return string.format('%d', n)
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- "calls,failures,slow" as three numbers.
local function three(v)
  local c, f, s = string.match(v, '^(%d+),(%d+),(%d+)$')
  return tonumber(c), tonumber(f), tonumber(s)
end

-- A member's record, read (nil if it is not one).
local function record(v)
  local seen, failed, active, busy, c, f, s = string.match(v, '^(%d+),(%d+),([01]),(%d+),(%d+),(%d+),(%d+)$')
  if not seen then return nil end
  return {seen = tonumber(seen), failed = tonumber(failed), active = active == '1', busy = busy,
    calls = c, failures = f, slow = s}
end

local function written(m)
  return int(m.seen) .. ',' .. int(m.failed) .. ',' .. (m.active and '1' or '0') .. ',' .. m.busy .. ',' ..
    m.calls .. ',' .. m.failures .. ',' .. m.slow
end

-- Member ids as numbers: compared as decimal text of one width.
local function padded(m)
  return string.rep('0', 20 - #m) .. m
end

-- One request: its key and arguments `a`; returns its answer.
local function exchange(key, a)
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

  -- The group, read once.
  local g, buckets, members = {}, {}, {}
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    local f, v = all[i], all[i + 1]
    local kind = string.sub(f, 1, 2)
    if kind == 'b:' then
      buckets[string.sub(f, 3)] = v
    elseif kind == 'm:' then
      members[string.sub(f, 3)] = record(v)
    else
      g[f] = v
    end
  end
  local epoch = tonumber(g.epoch or '0')
  local run = tonumber(g.run or '0')
  local lepoch, limit, threshold = tonumber(g.limit_epoch or '0'), tonumber(g.limit or '0'), tonumber(g.threshold or '0')

  -- What to write back: each field's last word, set or deleted (a member
  -- back after its TTL is deleted, then set; a bucket set, then deleted
  -- by a close).
  local set, del = {}, {}
  local function put(f, v)
    set[f] = v
    del[f] = nil
  end
  local function drop(f)
    del[f] = true
    set[f] = nil
  end
  local function register(f, v)
    g[f] = v
    if v then put(f, v) else drop(f) end
  end

  if not late then
    -- Members silent for longer than their TTL leave.
    for id, m in pairs(members) do
      if m.seen < now - ttl_us then
        members[id] = nil
        drop('m:' .. id)
      end
    end

    -- Growth of the running totals since last received; a member not known
    -- yet (or whose totals went back) counts nothing this time.
    local me = members[member]
    local dc, df, ds = 0, 0, 0
    if me then
      local pc, pf, ps = tonumber(me.calls), tonumber(me.failures), tonumber(me.slow)
      if calls >= pc and failures >= pf and slow >= ps then
        dc, df, ds = calls - pc, failures - pf, slow - ps
      end
    end
    if bucket and dc > 0 then
      local id = int(bucket)
      local bc, bf, bs = 0, 0, 0
      if buckets[id] then bc, bf, bs = three(buckets[id]) end
      buckets[id] = int(bc + dc) .. ',' .. int(bf + df) .. ',' .. int(bs + ds)
      put('b:' .. id, buckets[id])
    end
    local failed = (me and me.failed) or 0
    if df > 0 then failed = now end
    if dc > df then
      run = tonumber(a[5])
    else
      run = run + df
    end

    -- The fenced register: a proposal made at another epoch changes nothing.
    local kind = tonumber(a[11])
    if kind > 0 and (tonumber(a[12]) == epoch or a[12] == '18446744073709551615') then
      epoch = epoch + 1
      local period = tonumber(a[13])
      register('epoch', int(epoch))
      if kind == 1 then
        register('phase', 'open')
        register('until', int(now + period))
        register('open_for', a[14])
        register('reason', a[15])
        register('lease', nil)
        register('lease_until', nil)
      elseif kind == 2 then
        register('phase', 'half_open')
        register('lease', member)
        register('lease_until', int(now + period))
        register('open_for', a[14])
        register('reason', a[15])
        register('until', nil)
      else
        register('phase', 'closed')
        register('reason', a[15])
        for _, f in ipairs({'until', 'open_for', 'lease', 'lease_until'}) do register(f, nil) end
        -- The window and every member's failures go with the open.
        for id in pairs(buckets) do drop('b:' .. id) end
        buckets = {}
        for id, m in pairs(members) do
          if m.failed > 0 and id ~= member then
            m.failed = 0
            put('m:' .. id, written(m))
          end
        end
        failed = 0
        run = 0
      end
    end
    put('run', int(run))

    -- The group's limit: a fenced register (a set applies at its epoch only)
    -- with a counter of steps (added at its epoch only).
    if a[16] == '1' and tonumber(a[17]) == lepoch then
      if a[19] ~= '0' then
        lepoch, limit, threshold = lepoch + 1, tonumber(a[19]), tonumber(a[20])
        put('limit_epoch', int(lepoch))
        put('limit', a[19])
        put('threshold', a[20])
      elseif a[18] ~= '0' then
        limit = limit + tonumber(a[18])
        put('limit', int(limit))
      end
    end

    me = {seen = now, failed = failed, active = a[16] == '1' and a[21] == '1', busy = '0',
      calls = a[2], failures = a[3], slow = a[4]}
    if a[16] == '1' then me.busy = a[23] end
    members[member] = me
    put('m:' .. member, written(me))
  end

  -- This member's place among the active ones, by id.
  local actives, below, mine = 0, 0, nil
  if members[member] and members[member].active then mine = padded(member) end
  local busy, live, failing = 0, 0, 0
  for id, m in pairs(members) do
    live = live + 1
    busy = busy + tonumber(m.busy)
    if m.failed > 0 and m.failed >= now - window_us then failing = failing + 1 end
    if m.active then
      actives = actives + 1
      if mine and padded(id) < mine then below = below + 1 end
    end
  end
  local rank = ''
  if mine then rank = int(below) end

  -- The merged window: the last `kept` buckets, the current one included.
  local c, f, s = 0, 0, 0
  if bucket then
    for id, v in pairs(buckets) do
      if tonumber(id) < bucket - (kept - 1) then
        if not late then drop('b:' .. id) end
      else
        local bc, bf, bs = three(v)
        c, f, s = c + bc, f + bf, s + bs
      end
    end
  end

  if not late then
    local pairs_set, fields_del = {}, {}
    for f, v in pairs(set) do
      pairs_set[#pairs_set + 1] = f
      pairs_set[#pairs_set + 1] = v
    end
    for f in pairs(del) do fields_del[#fields_del + 1] = f end
    if #pairs_set > 0 then redis.call('HSET', key, unpack(pairs_set)) end
    if #fields_del > 0 then redis.call('HDEL', key, unpack(fields_del)) end
    redis.call('PEXPIRE', key, key_ttl)
  end
  return {int(now), int(epoch), g.phase or 'closed', g['until'] or '0', g.open_for or '0', g.reason or '',
    g.lease or '0', g.lease_until or '0', int(c), int(f), int(s), int(run), int(live), int(failing),
    int(lepoch), int(limit), int(threshold), int(actives), rank, int(busy)}
end

local reply = {}
for i = 1, #KEYS do
  local a = {}
  for j = 1, 23 do a[j] = ARGV[(i - 1) * 23 + j] end
  for _, v in ipairs(exchange(KEYS[i], a)) do reply[#reply + 1] = v end
end
return reply
