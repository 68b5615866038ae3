"""The Lua scripts of :mod:`colo.reservations` (key names built from stems, as :mod:`colo.store_lua`)."""

from __future__ import annotations

from colo.reservation_spec import OWNED_BY_FN
from colo.store_lua import QUOTA_FN

END_FN = """
local function finish(stem, name, state, reason, at, history)
  local key = stem.rsv .. name
  local f = redis.call('HMGET', key, 'state', 'node', 'cpu', 'memory', 'batch_cpu', 'batch_memory',
                       'mid_cpu', 'mid_memory', 'pods')
  if f[1] ~= 'Available' then return 0 end
  local names = {'cpu', 'memory', 'batch_cpu', 'batch_memory', 'mid_cpu', 'mid_memory', 'pods'}
  local alloc = stem.alloc .. f[2]
  for r = 1, 7 do
    local v = tonumber(f[r + 2] or '0')
    if v > 0 then redis.call('HINCRBY', alloc, names[r], -v) end
    redis.call('HSET', key, names[r], 0)
  end
  redis.call('HSET', key, 'state', state, 'reason', reason, 'ended_at', at)
  redis.call('ZREM', stem.rsvs, name)
  redis.call('EXPIRE', key, history)
  return 1
end
"""
"""Lua ``finish(stem, name, state, reason, at, history)``: ends an available reservation with ``state`` and
``reason``, its held room returned to the node; 1 when it was available."""

RESERVE_LUA = """#!lua flags=no-cluster
local stem = cjson.decode(ARGV[1])
local r = cjson.decode(ARGV[2])
local key = stem.rsv .. r.name
local state = redis.call('HGET', key, 'state')
if state == 'Available' then
  if redis.call('HGET', key, 'node') == r.node then return '' end
  return 'reservation ' .. r.name .. ' exists on another node'
end
if redis.call('EXISTS', stem.node .. r.node) == 0 then return 'unknown node ' .. r.node end
local names = {'cpu', 'memory', 'batch_cpu', 'batch_memory', 'mid_cpu', 'mid_memory', 'pods'}
local labels = {'cpu', 'memory', 'kubernetes.io/batch-cpu', 'kubernetes.io/batch-memory',
                'kubernetes.io/mid-cpu', 'kubernetes.io/mid-memory'}
local alloc = stem.alloc .. r.node
local lim = redis.call('HMGET', stem.limits .. r.node, unpack(names))
local al = redis.call('HMGET', alloc, unpack(names))
local bad = {}
for i = 1, 6 do
  local q = tonumber(r.held[i])
  if q > 0 and tonumber(al[i] or '0') + q > tonumber(lim[i] or '0') then
    table.insert(bad, 'Insufficient ' .. labels[i])
  end
end
local maxpods = tonumber(lim[7] or '0')
if maxpods > 0 and tonumber(al[7] or '0') + 1 > maxpods then table.insert(bad, 'Too many pods') end
if #bad > 0 then return table.concat(bad, ', ') end
redis.call('ZADD', stem.rsvs, r.expires_at, r.name)  -- first: a failing write must not follow the room's
redis.call('SREM', stem.rsvpending, r.name)
redis.call('DEL', key)
for i = 1, 6 do
  local q = tonumber(r.held[i])
  if q > 0 then redis.call('HINCRBY', alloc, names[i], r.held[i]) end
  redis.call('HSET', key, names[i], r.held[i])
end
redis.call('HINCRBY', alloc, 'pods', 1)
redis.call('HSET', key, 'pods', 1, 'name', r.name, 'node', r.node, 'owner_uid', r.owner_uid,
           'owner_workload', r.owner_workload, 'allocate_once', r.allocate_once, 'expires_at', r.expires_at,
           'created_at', r.created_at, 'state', 'Available', 'reason', r.reason, 'consumed_by', '',
           'owners', r.owners, 'placed_at', r.at)
return ''
"""
"""Creates reservation ``r`` (JSON: name, node, owner_uid, owner_workload, owners (JSON list), held [six decimal
strings], allocate_once '1'/'0', expires_at, at, created_at, reason), replacing a pending or ended one of that name, when its room fits the node as a bind would; '' when
held (also when it already is, on that node), else the reason."""

BIND_ON_LUA = """#!lua flags=no-cluster
""" + END_FN + QUOTA_FN + OWNED_BY_FN + """
local stem = cjson.decode(ARGV[1])
local b = cjson.decode(ARGV[2])
local key = stem.rsv .. b.name
if ARGV[5] ~= '' and redis.call('GET', ARGV[4]) ~= ARGV[5] then return 'lease lost' end
local bound = redis.call('HGET', stem.binding .. b.uid, 'node')
if bound then return 'already bound to ' .. bound end
if redis.call('EXISTS', stem.node .. b.node) == 0 then return 'unknown node ' .. b.node end
local f = redis.call('HMGET', key, 'state', 'node', 'owner_uid', 'owner_workload', 'expires_at', 'allocate_once')
if f[1] ~= 'Available' or f[2] ~= b.node then
  return 'reservation not available: ' .. b.name .. ' (' .. tostring(f[1] or 'unknown') .. ')'
end
if tonumber(f[5]) <= tonumber(b.at) then
  finish(stem, b.name, 'Expired', 'ttl passed', b.at, tonumber(ARGV[3]))
  return 'reservation not available: ' .. b.name .. ' (Expired)'
end
if not (f[3] == b.uid or (f[4] ~= '' and f[4] == b.workload) or owned_by(redis.call('HGET', key, 'owners'), b)) then
  return "not the reservation's owner: " .. b.name
end
local names = {'cpu', 'memory', 'batch_cpu', 'batch_memory', 'mid_cpu', 'mid_memory', 'pods'}
local labels = {'cpu', 'memory', 'kubernetes.io/batch-cpu', 'kubernetes.io/batch-memory',
                'kubernetes.io/mid-cpu', 'kubernetes.io/mid-memory'}
local alloc = stem.alloc .. b.node
local lim = redis.call('HMGET', stem.limits .. b.node, unpack(names))
local al = redis.call('HMGET', alloc, unpack(names))
local held = redis.call('HMGET', key, unpack(names))
local once = f[6] == '1'
local use, extra, bad = {}, {}, {}
for i = 1, 6 do
  local q, h = tonumber(b.req[i]), tonumber(held[i] or '0')
  use[i] = math.min(q, h)
  extra[i] = q - use[i]
  if extra[i] > 0 and tonumber(al[i] or '0') + extra[i] > tonumber(lim[i] or '0') then
    table.insert(bad, 'Insufficient ' .. labels[i])
  end
end
local covered, holds = false, false
for i = 1, 6 do
  if use[i] > 0 then covered = true end
  if tonumber(held[i] or '0') > 0 then holds = true end
end
if holds and not covered then return "covers none of the pod's requests: " .. b.name end
local slot = once and tonumber(held[7] or '0') > 0
local maxpods = tonumber(lim[7] or '0')
if not slot and maxpods > 0 and tonumber(al[7] or '0') + 1 > maxpods then table.insert(bad, 'Too many pods') end
if #bad > 0 then return table.concat(bad, ', ') end
local refused = quota_refusal(stem, b.quotas, b.req, quota_read)
if refused then return refused end
for i = 1, 6 do
  if extra[i] > 0 then redis.call('HINCRBY', alloc, names[i], extra[i]) end
  if use[i] > 0 then redis.call('HINCRBY', key, names[i], -use[i]) end
end
if slot then
  redis.call('HSET', key, 'pods', 0)
else
  redis.call('HINCRBY', alloc, 'pods', 1)
end
redis.call('HSET', stem.binding .. b.uid, 'node', b.node, 'at', b.at, 'cpu', b.req[1], 'memory', b.req[2],
           'batch_cpu', b.req[3], 'batch_memory', b.req[4], 'mid_cpu', b.req[5], 'mid_memory', b.req[6],
           'reservation', b.name)
quota_charge(stem, b.quotas, b.req, stem.binding .. b.uid)
if not once then
  local back = {}
  for i = 1, 6 do back[i] = string.format('%d', use[i]) end
  redis.call('HSET', stem.binding .. b.uid, 'rsv_use', cjson.encode(back))
end
redis.call('HSET', stem.podstate .. b.uid, 'node', b.node, 'bound_at', b.at, 'updated_at', b.at)
redis.call('SADD', stem.nodepods .. b.node, b.uid)
redis.call('HSET', key, 'consumed_by', b.uid)
if once then finish(stem, b.name, 'Succeeded', 'consumed by ' .. b.uid, b.at, tonumber(ARGV[3])) end
return ''
"""
"""Binds pod ``b.uid`` on ``b.node`` on the reservation ``b.name`` (JSON: name, the pod's
:func:`colo.reservation_spec.pod_facts`, node, at,
req [six decimal strings], quotas [names charged the full requests]); ARGV[3] the history seconds; ARGV[4], ARGV[5] the fencing lease's key and
value ('' = unfenced). '' when bound, else the reason (nothing changed); refused with "covers none of the pod's
requests" when the reservation holds room (other than a pod slot) and the pod takes none of it (a batch-* pod on
native cpu/memory room: it would end the reservation while using nothing of it). On a reusable reservation the
binding records the part of the held room the pod took (``rsv_use``), which its release gives back."""

RELEASE_LUA = """#!lua flags=no-cluster
""" + END_FN + """
local stem = cjson.decode(ARGV[1])
return finish(stem, ARGV[2], ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6]))
"""
"""Ends reservation ARGV[2] with state ARGV[3], reason ARGV[4] at ARGV[5]; 1 when it was available."""

SWEEP_LUA = """#!lua flags=no-cluster
""" + END_FN + """
local stem = cjson.decode(ARGV[1])
local due = redis.call('ZRANGEBYSCORE', stem.rsvs, '-inf', ARGV[2])
for _, name in ipairs(due) do
  if finish(stem, name, 'Expired', 'ttl passed', ARGV[2], tonumber(ARGV[3])) == 0 then
    redis.call('ZREM', stem.rsvs, name)
  end
end
return due
"""
"""Ends every available reservation whose expiry is at or before ARGV[2]; returns their names."""

PENDING_LUA = """#!lua flags=no-cluster
local stem = cjson.decode(ARGV[1])
local r = cjson.decode(ARGV[2])
local key = stem.rsv .. r.name
local st = redis.call('HMGET', key, 'state', 'created_at')
if st[1] and st[2] == r.created_at then return 'known' end
if st[1] == 'Available' then return 'exists' end
redis.call('DEL', key)
redis.call('HSET', key, 'name', r.name, 'node', r.node, 'owner_uid', '', 'owner_workload', '', 'owners', r.owners,
           'allocate_once', r.allocate_once, 'expires_at', r.expires_at, 'created_at', r.created_at,
           'state', 'Pending', 'reason', r.reason, 'consumed_by', '', 'spec', ARGV[3])
for i, n in ipairs({'cpu', 'memory', 'batch_cpu', 'batch_memory', 'mid_cpu', 'mid_memory'}) do
  redis.call('HSET', key, n, r.held[i])
end
redis.call('HSET', key, 'pods', 1)
redis.call('SADD', stem.rsvpending, r.name)
return ''
"""
"""Records reservation ``r`` (JSON as :data:`RESERVE_LUA`'s) as Pending, with its submission ARGV[3], unless a
reservation of that name exists with the same ``created_at`` ('known': a replay) or is available ('exists');
'' when recorded. A pending reservation holds nothing (``held`` is the room it asks for)."""

END_PENDING_LUA = """#!lua flags=no-cluster
local stem = cjson.decode(ARGV[1])
local key = stem.rsv .. ARGV[2]
if redis.call('HGET', key, 'state') ~= 'Pending' then
  redis.call('SREM', stem.rsvpending, ARGV[2])
  return 0
end
if ARGV[3] == 'Pending' then
  redis.call('HSET', key, 'reason', ARGV[4])
  return 1
end
redis.call('HSET', key, 'state', ARGV[3], 'reason', ARGV[4], 'ended_at', ARGV[5])
redis.call('SREM', stem.rsvpending, ARGV[2])
redis.call('EXPIRE', key, tonumber(ARGV[6]))
return 1
"""
"""Pending reservation ARGV[2]: with state ARGV[3] 'Pending' only its reason becomes ARGV[4]; otherwise it ends
with that state and reason at ARGV[5], kept ARGV[6] seconds. 1 when it was pending."""
