"""The Lua scripts of :mod:`colo.store`: atomic bind (node fit, quota charges, gang groups), release,
admission, allocation sums and leases.

Scripts flagged ``#!lua flags=no-cluster`` build their key names from stems (JSON, from
:class:`colo.keys.Keys`) instead of declaring one key per bind: one argument per chunk instead of fifteen
per bind, which cost the client more than the binds cost Redis. Amounts travel as decimal strings and are
written with the string (``HINCRBY`` of a Lua number past 1e14 would be sent in exponent form); Lua
numbers are only compared (exact below 2^53).
"""

from __future__ import annotations

QUOTA_FN = """
local qnames = {'cpu', 'memory', 'batch_cpu', 'batch_memory', 'mid_cpu', 'mid_memory', 'pods'}
local function quota_refusal(stem, quotas, req, used_of)
  for _, qn in ipairs(quotas) do
    local mx = redis.call('HMGET', stem.quotamax .. qn, unpack(qnames))
    local used = used_of(stem.quotaused .. qn)
    local bad = {}
    for r = 1, 7 do
      local q = 1
      if r < 7 then q = tonumber(req[r]) end
      if mx[r] and q > 0 and used[r] + q > tonumber(mx[r]) then table.insert(bad, qnames[r]) end
    end
    if #bad > 0 then return 'quota ' .. qn .. ' exceeded: ' .. table.concat(bad, ', ') end
  end
  return nil
end
local function quota_charge(stem, quotas, req, binding)
  if #quotas == 0 then return end
  for _, qn in ipairs(quotas) do
    local key = stem.quotaused .. qn
    for r = 1, 6 do
      if tonumber(req[r]) > 0 then redis.call('HINCRBY', key, qnames[r], req[r]) end
    end
    if redis.call('HINCRBY', key, 'pods', 1) == 1 then redis.call('SADD', stem.quotas, qn) end
  end
  redis.call('HSET', binding, 'quotas', cjson.encode(quotas))
end
local function quota_read(key)
  local v = redis.call('HMGET', key, unpack(qnames))
  local out = {}
  for r = 1, 7 do out[r] = tonumber(v[r] or '0') end
  return out
end
"""
"""Lua shared by the bind scripts (here and :mod:`colo.reservations`): ``quota_refusal`` checks, for each
quota named, every resource it has a max for (``{p}:quotamax:{name}``; absent = unlimited) that the pod
requests (> 0; every pod requests one ``pods``): ``used + request <= max``, else returns ``"quota <name>
exceeded: <resources>"``; ``used_of(key)`` gives the seven used amounts as numbers. ``quota_charge`` adds
the requests to each quota's ``{p}:quotaused:{name}`` (names into ``{p}:quotas``) and records the list
(JSON) in the binding, which release reads to give them back."""

BIND_LUA = """#!lua flags=no-cluster
""" + QUOTA_FN + """
local stem = cjson.decode(ARGV[1])
local binds = cjson.decode(ARGV[3])
local out = {}
if ARGV[2] ~= '' and redis.call('GET', stem.lease) ~= ARGV[2] then
  for i = 1, #binds do out[i] = 'lease lost' end
  return table.concat(out, '\\n')
end
local names = {'cpu', 'memory', 'batch_cpu', 'batch_memory', 'mid_cpu', 'mid_memory', 'pods'}
local labels = {'cpu', 'memory', 'kubernetes.io/batch-cpu', 'kubernetes.io/batch-memory',
                'kubernetes.io/mid-cpu', 'kubernetes.io/mid-memory'}
local pend, taken = {}, {}  -- deltas and uids of the checked, not yet written members of the current group
local function current(key)
  local v = redis.call('HMGET', key, unpack(names))
  local d = pend[key]
  local cur = {}
  for r = 1, 7 do cur[r] = tonumber(v[r] or '0') + (d and d[r] or 0) end
  return cur
end
local function add(key, req)
  local d = pend[key]
  if not d then d = {0, 0, 0, 0, 0, 0, 0}; pend[key] = d end
  for r = 1, 6 do d[r] = d[r] + tonumber(req[r]) end
  d[7] = d[7] + 1
end
local function check(b, member)
  local uid, node, req, quotas = b[1], b[2], b[4], b[5] or {}
  local bound = taken[uid] or redis.call('HGET', stem.binding .. uid, 'node')
  if bound then return 'already bound to ' .. bound end
  if redis.call('EXISTS', stem.node .. node) == 0 then return 'unknown node ' .. node end
  local alloc = stem.alloc .. node
  local lim = redis.call('HMGET', stem.limits .. node, unpack(names))
  local al = current(alloc)
  local bad = {}
  for r = 1, 6 do
    local q = tonumber(req[r])
    if q > 0 and al[r] + q > tonumber(lim[r] or '0') then table.insert(bad, 'Insufficient ' .. labels[r]) end
  end
  local maxpods = tonumber(lim[7] or '0')
  if maxpods > 0 and al[7] + 1 > maxpods then table.insert(bad, 'Too many pods') end
  if #bad > 0 then return table.concat(bad, ', ') end
  local refused = quota_refusal(stem, quotas, req, current)
  if refused then return refused end
  if member then
    taken[uid] = node
    add(alloc, req)
    for _, qn in ipairs(quotas) do add(stem.quotaused .. qn, req) end
  end
  return ''
end
local function commit(b)
  local uid, node, at, req = b[1], b[2], b[3], b[4]
  local binding, alloc = stem.binding .. uid, stem.alloc .. node
  for r = 1, 6 do
    if tonumber(req[r]) > 0 then redis.call('HINCRBY', alloc, names[r], req[r]) end
  end
  redis.call('HINCRBY', alloc, 'pods', 1)
  redis.call('HSET', binding, 'node', node, 'at', at, 'cpu', req[1], 'memory', req[2], 'batch_cpu', req[3],
             'batch_memory', req[4], 'mid_cpu', req[5], 'mid_memory', req[6])
  quota_charge(stem, b[5] or {}, req, binding)
  if b[7] and b[7] ~= '' then redis.call('HSET', binding, 'cpuset', b[7]) end
  if b[8] and b[8] ~= '' then redis.call('HSET', binding, 'devices', b[8]) end
  redis.call('HSET', stem.podstate .. uid, 'node', node, 'bound_at', at, 'updated_at', at)
  redis.call('SADD', stem.nodepods .. node, uid)
end
local i, n = 1, #binds
while i <= n do
  local group = binds[i][6] or ''
  local j = i
  if group ~= '' then
    while j < n and (binds[j + 1][6] or '') == group do j = j + 1 end
    pend, taken = {}, {}
  end
  local first = nil
  for k = i, j do
    out[k] = check(binds[k], group ~= '')
    if out[k] ~= '' and not first then first = k end
  end
  if first then
    local why = 'gang member ' .. binds[first][1] .. ' refused: ' .. out[first]
    for k = i, j do
      if out[k] == '' then out[k] = why end
    end
  else
    for k = i, j do commit(binds[k]) end
  end
  i = j + 1
end
return table.concat(out, '\\n')
"""
"""Binds pods in order, each seeing the earlier ones; a run of consecutive binds with the same non-empty
group is all-or-nothing (every member checked, each seeing the earlier members; written only when all
fit). ARGV: the key stems (JSON), the fence value ('' = unfenced), the binds as JSON ``[[uid, node, at,
[six requests as strings], [quota names], group], ...]`` (the last two may be left off: no quota, no
group). Returns one line per bind: '' when bound, else the reason."""

RELEASE_LUA = """#!lua flags=no-cluster
local node = redis.call('HGET', KEYS[1], 'node')
if not node then return 0 end
if node ~= ARGV[1] then return -1 end
local names = {'cpu', 'memory', 'batch_cpu', 'batch_memory', 'mid_cpu', 'mid_memory'}
local vals = redis.call('HMGET', KEYS[1], unpack(names))
local back = {'0', '0', '0', '0', '0', '0'}
local rsv = redis.call('HMGET', KEYS[1], 'reservation', 'rsv_use')
local rsvkey = rsv[1] and (ARGV[7] .. rsv[1])
if rsv[2] and redis.call('HGET', rsvkey, 'state') == 'Available' then back = cjson.decode(rsv[2]) end
for i = 1, 6 do
  local v, b = tonumber(vals[i] or '0'), tonumber(back[i])
  if v - b > 0 then redis.call('HINCRBY', KEYS[3], names[i], string.format('%d', b - v)) end
  if b > 0 then redis.call('HINCRBY', rsvkey, names[i], back[i]) end
end
redis.call('HINCRBY', KEYS[3], 'pods', -1)
local quotas = redis.call('HGET', KEYS[1], 'quotas')
if quotas then
  for _, qn in ipairs(cjson.decode(quotas)) do
    local used = ARGV[6] .. qn
    for i = 1, 6 do
      if tonumber(vals[i] or '0') > 0 then redis.call('HINCRBY', used, names[i], '-' .. vals[i]) end
    end
    redis.call('HINCRBY', used, 'pods', -1)
  end
end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[4], ARGV[5])
redis.call('HSET', KEYS[2], 'phase', ARGV[2], 'reason', ARGV[3], 'updated_at', ARGV[4])
return 1
"""
"""Frees binding KEYS[1] (pod state KEYS[2], node allocation KEYS[3], node pod set KEYS[4]) when it is on
node ARGV[1]: the node's and every charged quota's (stem ARGV[6]) amounts, once; the part a pod took from a
reusable reservation (``rsv_use``) goes back to that reservation (stem ARGV[7]) instead of the node while it
is available. ARGV[2..5]: phase, reason, time, uid. Returns 1 freed, 0 no binding, -1 bound elsewhere."""

ADMIT_LUA = """#!lua flags=no-cluster
local stem = cjson.decode(ARGV[1])
local uids = cjson.decode(ARGV[3])
local out = {}
for i, uid in ipairs(uids) do
  out[i] = '0'
  if redis.call('EXISTS', stem.binding .. uid) == 0 then
    local state = stem.podstate .. uid
    local st = redis.call('HMGET', state, 'phase', 'node', 'reason')
    local reason = st[3] or ''
    local replaceable = st[1] == 'Failed' and (string.sub(reason, 1, 9) == 'Rejected:' or reason == 'Deleted'
                                               or string.sub(reason, 1, 8) == 'Deleted:')
    if replaceable or not (st[1] and (st[1] ~= 'Pending' or (st[2] and st[2] ~= ''))) then
      redis.call('SET', stem.pod .. uid, ARGV[3 + i])
      redis.call('HSET', state, 'phase', 'Pending', 'node', '', 'reason', '', 'updated_at', ARGV[2], 'bound_at', '0.0')
      redis.call('SADD', stem.pods, uid)
      out[i] = '1'
    end
  end
end
return table.concat(out)
"""
"""Writes each pod as Pending unless bound or ran/finished (a record admission refused or a deleted pod,
``Failed`` with reason ``Rejected: …``, ``Deleted: …`` or ``Deleted`` (:mod:`colo.store_rejected`), is replaced). ARGV: key stems (JSON), time, uids (JSON),
then one spec JSON per uid. Returns one character per pod: '1' written, '0' not."""

ALLOCATED_LUA = """#!lua flags=no-cluster
local stem = cjson.decode(ARGV[1])
local fields = {'cpu', 'memory', 'batch_cpu', 'batch_memory', 'mid_cpu', 'mid_memory', 'pods'}
local out = {}
for i, node in ipairs(cjson.decode(ARGV[2])) do
  local v = redis.call('HMGET', stem.alloc .. node, unpack(fields))
  for j = 1, 7 do v[j] = v[j] or '0' end
  out[i] = v
end
return cjson.encode(out)
"""
"""Allocation sums of the nodes named in ARGV[2] (JSON), as JSON ``[[cpu, memory, batch_cpu, batch_memory,
mid_cpu, mid_memory, pods], ...]`` of decimal strings (exact: Lua numbers would round past 2^53)."""

ACQUIRE_LUA = """
local cur = redis.call('GET', KEYS[1])
if cur then return {0, cur} end
local token = redis.call('INCR', KEYS[2])
local value = token .. ':' .. ARGV[1]
redis.call('SET', KEYS[1], value, 'PX', ARGV[2])
return {token, value}
"""
"""Takes lease KEYS[1] for holder ARGV[1] for ARGV[2] ms with the next token of KEYS[2]; ``{0, holder}``
when held."""

RENEW_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""
"""Extends lease KEYS[1] to ARGV[2] ms when it still has value ARGV[1]."""

DROP_LEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
"""Deletes lease KEYS[1] when it still has value ARGV[1]."""

DELETE_QUOTA_LUA = """#!lua flags=no-cluster
local stem = cjson.decode(ARGV[1])
redis.call('DEL', stem.quotamax .. ARGV[2])
local used = redis.call('HVALS', stem.quotaused .. ARGV[2])
for _, v in ipairs(used) do
  if tonumber(v) ~= 0 then return 0 end
end
redis.call('DEL', stem.quotaused .. ARGV[2])
redis.call('SREM', stem.quotas, ARGV[2])
return 1
"""
"""Drops quota ARGV[2]'s max; its usage too (and its name from ``{p}:quotas``) unless pods still charge it.
Returns 1 when the quota is gone, 0 when usage remains."""

DELETE_NODE_LUA = """#!lua flags=no-cluster
if ARGV[2] ~= '1' then
  local bound = redis.call('SMEMBERS', KEYS[5])
  if #bound > 0 then return bound end
end
redis.call('SREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
return {}
"""
"""Forgets node ARGV[1]: drops it from set KEYS[1], deletes its spec KEYS[2], resources KEYS[3] and limits KEYS[4];
with ARGV[2] ``0`` only while no pod is bound to it (set KEYS[5]): else returns those uids and changes nothing.
Atomic against the bind script, which refuses a node without a spec."""
