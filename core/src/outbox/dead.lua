#!lua flags=allow-oom
-- An outbox's dead letter: the event moves from the log to the dead
-- letters with its reason, once. Retried after a late answer, it finds the
-- event gone from the log and writes nothing (one dead letter per event).
--
-- KEYS[1]  the log, KEYS[2]  the dead letters
-- ARGV[1]  the event's id in the log, ARGV[2] the reason, then the
--          event's fields as name, value pairs (its key and payload)
-- Reply: 1 if it moved the event now, 0 if it was no longer in the log
--
-- allow-oom: at maxmemory (noeviction) a dead letter still leaves the log.

if redis.call('XDEL', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local fields = {}
for i = 3, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
fields[#fields + 1] = 'r'
fields[#fields + 1] = ARGV[2]
fields[#fields + 1] = 'i'
fields[#fields + 1] = ARGV[1]
redis.call('XADD', KEYS[2], '*', unpack(fields))
return 1
