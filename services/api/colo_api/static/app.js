// Colo dashboard: plain JavaScript, no build step, nothing loaded from elsewhere (works offline).
// Reads /v1/nodes, /v1/pods, /v1/quotas and /v1/explain/{ns}/{name}; follows /v1/events (Server-Sent Events,
// read with fetch so that the bearer token can go in the Authorization header) and refreshes what an event
// touches. CPU is shown in cores (the API's milli-cores / 1000), memory in GiB, times as the services' clock.
"use strict";

const $ = (sel) => document.querySelector(sel);
const state = {
  token: localStorage.getItem("colo.token") || "",
  nodes: [], pods: [], quotas: [], selected: null, timeline: [], events: 0, authWaiters: [],
};
const TIMELINE_MAX = 300;

function headers() {
  return state.token ? { Authorization: "Bearer " + state.token } : {};
}

function esc(v) {
  return String(v ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
function cores(m) {  // milli-cores as cores ("2", "1.50"), below one core as milli ("250m")
  m = m || 0;
  if (m === 0) return "0";
  if (Math.abs(m) < 1000) return m + "m";
  return (m / 1000).toFixed(m % 1000 ? 2 : 0);
}
const gib = (b) => ((b || 0) / 2 ** 30).toFixed(1) + "Gi";
function when(at) {
  if (!at) return "-";
  if (at > 1e9) return new Date(at * 1000).toLocaleTimeString();
  return "t=" + Math.round(at) + "s";
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

class AuthNeeded extends Error {}

function needAuth(message) {
  $("#auth").hidden = false;
  $("#auth-error").textContent = message || "";
  return new Promise((resolve) => state.authWaiters.push(resolve));
}

$("#auth").addEventListener("submit", (e) => {
  e.preventDefault();
  state.token = $("#token").value.trim();
  localStorage.setItem("colo.token", state.token);
  $("#auth").hidden = true;
  const waiters = state.authWaiters.splice(0);
  waiters.forEach((w) => w());
  refreshAll();
});

async function api(path) {
  const r = await fetch(path, { headers: headers() });
  if (r.status === 401) {
    const body = await r.json().catch(() => ({}));
    needAuth(body.error || "unauthorized");
    throw new AuthNeeded(body.error);
  }
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || "HTTP " + r.status);
  return body;
}

// ---------------------------------------------------------------- nodes

function bar(n) {
  const alloc = n.spec.allocatable.cpu || 1;
  const u = n.usage || {};
  const pct = (v) => Math.min(100, (100 * (v || 0)) / alloc).toFixed(1);
  const ls = pct(u.ls_cpu), be = pct(u.be_cpu), al = pct((n.allocated || {}).cpu);
  const batch = n.offered ? pct(n.offered.batch_cpu) : null;
  return `<div class="bar" title="LS ${cores(u.ls_cpu)} · BE ${cores(u.be_cpu)} · allocated ${cores((n.allocated || {}).cpu)} of ${cores(alloc)} cores">` +
    `<span class="ls" style="left:0;width:${ls}%"></span>` +
    `<span class="be" style="left:${ls}%;width:${be}%"></span>` +
    `<span class="alloc" style="left:0;width:${al}%"></span>` +
    (batch !== null ? `<span class="batch" style="left:calc(${batch}% - 1px)"></span>` : "") + `</div>`;
}

function renderNodes() {
  const rows = state.nodes.map((n) => {
    const u = n.usage, o = n.offered, a = n.allocated || {};
    return `<tr data-node="${esc(n.name)}"><td>${esc(n.name)}</td>` +
      `<td class="num cpu">${cores(n.spec.allocatable.cpu)}</td><td class="num memory">${gib(n.spec.allocatable.memory)}</td>` +
      `<td class="num ls-use">${u ? cores(u.ls_cpu) + " / " + gib(u.ls_memory) : "-"}</td>` +
      `<td class="num be-use">${u ? cores(u.be_cpu) + " / " + gib(u.be_memory) : "-"}</td>` +
      `<td class="num allocated">${cores(a.cpu)} / ${gib(a.memory)}` +
      `${a.batch_cpu || a.batch_memory ? ` · batch ${cores(a.batch_cpu)} / ${gib(a.batch_memory)}` : ""}` +
      `${a.mid_cpu || a.mid_memory ? ` · mid ${cores(a.mid_cpu)} / ${gib(a.mid_memory)}` : ""}</td>` +
      `<td class="num batch-offered">${o ? cores(o.batch_cpu) + " / " + gib(o.batch_memory) : "-"}</td>` +
      `<td class="num">${o ? cores(o.mid_cpu) + " / " + gib(o.mid_memory) : "-"}</td>` +
      `<td class="num">${a.pods || 0}</td><td>${bar(n)}</td></tr>`;
  });
  $("#nodes tbody").innerHTML = rows.join("") || `<tr><td colspan="10" class="muted">no nodes registered</td></tr>`;
  renderSummary();
}

function applyMetric(m) {  // a NodeMetric from the stream: the node's usage without a round trip
  const n = state.nodes.find((x) => x.name === m.node);
  if (!n) return false;
  const pods = m.pods || [];
  const sum = (ps, k) => ps.reduce((s, p) => s + (p[k] || 0), 0);
  const be = pods.filter((p) => p.qos_class === "BE"), ls = pods.filter((p) => p.qos_class !== "BE");
  n.usage = { at: m.at, cpu: (m.node_usage || {}).cpu || 0, memory: (m.node_usage || {}).memory || 0,
    ls_cpu: sum(ls, "cpu"), ls_memory: sum(ls, "memory"), be_cpu: sum(be, "cpu"), be_memory: sum(be, "memory"),
    be_cpu_allowed: m.be_cpu_allowed ?? -1, pods: pods.length };
  return true;
}

// ---------------------------------------------------------------- pods

function requests(p) {
  const r = p.requests || {};
  const parts = [];
  if (r.cpu || r.memory) parts.push(`cpu ${cores(r.cpu)} mem ${gib(r.memory)}`);
  if (r.batch_cpu || r.batch_memory) parts.push(`batch-cpu ${cores(r.batch_cpu)} batch-mem ${gib(r.batch_memory)}`);
  if (r.mid_cpu || r.mid_memory) parts.push(`mid-cpu ${cores(r.mid_cpu)} mid-mem ${gib(r.mid_memory)}`);
  return parts.join(" · ") || "-";
}

function renderPods(changed) {
  const filter = $("#pod-filter").value;
  const pods = state.pods.filter((p) => !filter || p.state === filter);
  $("#pods tbody").innerHTML = pods.map((p) => {
    const key = p.namespace + "/" + p.name;
    const cls = ["pod", state.selected === key ? "selected" : "", changed.has(key) ? "changed" : ""].join(" ");
    return `<tr class="${cls}" data-pod="${esc(key)}"><td>${esc(key)}</td>` +
      `<td class="state state-${esc(p.state)}">${esc(p.state)}</td><td>${esc(p.node || "-")}</td>` +
      `<td>${esc(p.qos)}</td><td>${esc(requests(p))}</td><td class="reason">${esc(p.reason || "-")}</td></tr>`;
  }).join("") || `<tr><td colspan="6" class="muted">no pods</td></tr>`;
  renderSummary();
}

$("#pods tbody").addEventListener("click", (e) => {
  const tr = e.target.closest("tr[data-pod]");
  if (!tr) return;
  state.selected = tr.dataset.pod;
  renderPods(new Set());
  explain();
});
$("#pod-filter").addEventListener("change", () => renderPods(new Set()));
$("#explain-close").addEventListener("click", () => { state.selected = null; $("#explain").hidden = true; renderPods(new Set()); });

function renderSummary() {
  const by = {};
  state.pods.forEach((p) => { by[p.state] = (by[p.state] || 0) + 1; });
  const pods = Object.entries(by).map(([k, v]) => `${v} ${k}`).join(", ") || "no pods";
  $("#summary").textContent = `${state.nodes.length} nodes · ${pods} · ${state.events} events since the page opened`;
}

// ---------------------------------------------------------------- explain

function scoreCell(s, max, runner) {
  const w = max > 0 ? Math.max(1, Math.round((80 * Math.abs(s.weighted)) / max)) : 1;
  return `<td class="num">${esc(s.raw)} → ${esc(s.normalized)} × ${esc(s.weight)} = <b>${esc(s.weighted)}</b> ` +
    `<span class="score-bar${runner ? " runner" : ""}" style="width:${w}px"></span></td>`;
}

function renderExplain(d) {
  const nodes = Object.keys(d.scores || {});
  let html = `<p><b class="status">${esc(d.status)}</b> · attempt ${esc(d.attempt)} at ${esc(when(d.at))} · ` +
    `node <b class="chosen">${esc(d.node ?? "-")}</b> · runner-up ${esc(d.runner_up ?? "-")} · feasible ` +
    `${esc(d.feasible)}/${esc(d.nodes)} · ${esc(d.decision_ms)} ms</p><p class="message">${esc(d.message)}</p>`;
  if (nodes.length) {
    const plugins = Object.keys(d.scores[nodes[0]].plugins);
    const max = Math.max(0, ...nodes.flatMap((n) => plugins.map((p) => Math.abs(d.scores[n].plugins[p].weighted))));
    html += `<table class="scores"><thead><tr><th>score plugin</th>${nodes.map((n, i) =>
      `<th>${esc(n)} ${i === 0 ? "(chosen)" : "(runner-up)"}: raw → normalized × weight</th>`).join("")}</tr></thead><tbody>` +
      plugins.map((p) => `<tr data-plugin="${esc(p)}"><td>${esc(p)}</td>${nodes.map((n, i) =>
        scoreCell(d.scores[n].plugins[p], max, i > 0)).join("")}</tr>`).join("") +
      `<tr><td><b>total</b></td>${nodes.map((n) => `<td class="num"><b>${esc(d.scores[n].total)}</b></td>`).join("")}</tr>` +
      `</tbody></table>`;
  }
  const filters = Object.entries(d.filters || {});
  if (filters.length) {
    html += `<h3>Filters (first rejecting filter per node)</h3><table class="filters"><thead><tr><th>filter</th>` +
      `<th>nodes rejected</th><th>reasons</th></tr></thead><tbody>` + filters.map(([name, f]) =>
      `<tr><td>${esc(name)}</td><td class="num">${esc(f.rejected)}</td><td>${esc(Object.entries(f.reasons || {})
        .map(([r, c]) => `${r} (${c})`).join(", "))}</td></tr>`).join("") + `</tbody></table>`;
  }
  const rejected = Object.entries(d.rejected_nodes || {}).slice(0, 20);
  if (rejected.length) {
    html += `<h3>Rejected nodes</h3><table><tbody>` + rejected.map(([n, r]) =>
      `<tr><td>${esc(n)}</td><td>${esc(r.plugin)}</td><td>${esc(r.reason ?? "")}</td></tr>`).join("") + `</tbody></table>`;
  }
  $("#explain-body").innerHTML = html;
}

async function explain() {
  const key = state.selected;
  if (!key) return;
  const [ns, ...rest] = key.split("/");
  $("#explain").hidden = false;
  $("#explain-pod").textContent = key;
  try {
    const d = await api(`/v1/explain/${encodeURIComponent(ns)}/${encodeURIComponent(rest.join("/"))}`);
    if (state.selected === key) renderExplain(d);
  } catch (e) {
    if (state.selected === key && !(e instanceof AuthNeeded)) {
      $("#explain-body").innerHTML = `<p class="muted explain-error">${esc(e.message)}</p>`;
    }
  }
}

// ---------------------------------------------------------------- timeline

function addTimeline(item) {
  state.timeline.push(item);
  if (state.timeline.length > TIMELINE_MAX) state.timeline.shift();
  renderTimeline();
}

function renderTimeline() {
  const items = state.timeline;
  $("#timeline").innerHTML = items.slice().reverse().map((t) =>
    `<li class="event k-${esc(t.kind)}"><span class="muted">${esc(when(t.at))}</span> <span class="kind">${esc(t.kind)}</span>` +
    ` ${esc(t.node)} ${esc(t.text)}</li>`).join("") || `<li class="muted">no QoS events or evictions yet</li>`;
  if (!items.length) { $("#timeline-strip").innerHTML = ""; return; }
  const lo = Math.min(...items.map((t) => t.at)), hi = Math.max(...items.map((t) => t.at));
  const span = Math.max(1, hi - lo);
  const rows = { suppress: 10, burst: 22, cgroup: 22, oom: 34, evict: 46, eviction: 46 };
  const colors = { suppress: "#e0902a", burst: "#2f6fd6", cgroup: "#999", oom: "#800", evict: "#b33", eviction: "#b33" };
  $("#timeline-strip").innerHTML = items.map((t) =>
    `<circle cx="${(10 + (980 * (t.at - lo)) / span).toFixed(1)}" cy="${rows[t.kind] || 22}" r="4" fill="${colors[t.kind] || "#555"}">` +
    `<title>${esc(when(t.at))} ${esc(t.kind)} ${esc(t.node)} ${esc(t.text)}</title></circle>`).join("");
}

// ---------------------------------------------------------------- refresh and events

const pacers = {};  // name → {timer, last, running}: at most one refresh per gap, the last request always served
let nodesDraw = null;

async function refreshPods() {
  const before = new Map(state.pods.map((p) => [p.namespace + "/" + p.name, p.state + p.node + p.reason]));
  const body = await api("/v1/pods");
  state.pods = body.items;
  const changed = new Set(state.pods.filter((p) => before.get(p.namespace + "/" + p.name) !== p.state + p.node + p.reason)
    .map((p) => p.namespace + "/" + p.name));
  renderPods(changed);
}
async function refreshNodes() { state.nodes = (await api("/v1/nodes")).items; renderNodes(); }
async function refreshQuotas() {
  state.quotas = (await api("/v1/quotas")).items;
  const fmt = (o) => Object.entries(o || {}).map(([k, v]) => `${k}=${/cpu/.test(k) ? cores(v) : /memory/.test(k) ? gib(v) : v}`).join(" ") || "-";
  // a quota the scheduler refused (or has not accepted yet) is marked, not shown as if it were in force
  $("#quotas tbody").innerHTML = state.quotas.map((q) => `<tr${q.in_force ? "" : ' class="refused"'}><td>${esc(q.name)}` +
    `${q.in_force ? "" : ' <span class="badge bad" title="refused or not yet accepted: see colo get quotas / the dead-letter stream">not in force</span>'}</td>` +
    `<td>${esc((q.spec || q.status || {}).parent || "-")}</td><td>${esc(fmt((q.spec || {}).min))}</td>` +
    `<td>${esc(fmt((q.spec || {}).max || q.max))}</td><td>${esc(fmt((q.status || {}).used || q.used))}</td>` +
    `<td>${esc(fmt((q.status || {}).runtime))}</td></tr>`).join("") || `<tr><td colspan="6" class="muted">no quotas</td></tr>`;
}

function later(name, fn, gapMs) {
  // A burst of events (a hundred pods bound in one cycle) costs one refresh per gap, not one per event: the list
  // of waiting pods asks the scheduler once per waiting pod.
  // The gap counts from the end of the last refresh and is at least twice what it took (a large cluster's list).
  const p = pacers[name] || (pacers[name] = { timer: null, last: 0, cost: 0, running: false });
  if (p.timer) return;
  const wait = Math.max(100, p.last + Math.max(gapMs, 2 * p.cost) - Date.now());
  p.timer = setTimeout(async () => {
    p.timer = null;
    if (p.running) { later(name, fn, gapMs); return; }
    p.running = true;
    const started = Date.now();
    try { await fn(); } catch (e) { /* shown by the next refresh */ } finally {
      p.running = false;
      p.last = Date.now();
      p.cost = p.last - started;
    }
  }, wait);
}

function onEvent(ev) {
  state.events += 1;
  const s = ev.subject, m = ev.message || {};
  if (s.startsWith("pod.") || s.startsWith("workload.")) {
    later("pods", refreshPods, 1000);
    later("nodes", refreshNodes, 1000);
    const uid = m.uid || (m.spec && m.spec.uid);
    const sel = state.pods.find((p) => p.namespace + "/" + p.name === state.selected);
    if (sel && uid === sel.uid && (s.startsWith("pod.bound") || s === "pod.unschedulable")) setTimeout(explain, 250);
  }
  if (s.startsWith("pod.evict.")) addTimeline({ at: m.at, kind: "eviction", node: m.node, text: `${m.uid} ${m.reason}${m.by ? " by " + m.by : ""}` });
  if (s.startsWith("pod.status.") && (m.reason === "Evicted" || m.reason === "OOMKilled")) {
    addTimeline({ at: m.at, kind: m.reason === "OOMKilled" ? "oom" : "evict", node: m.node, text: `${m.uid} ${m.phase} ${m.reason}` });
  }
  if (s.startsWith("node.qos.")) addTimeline(qosItem(ev));
  if (s.startsWith("node.metric.")) {
    if (applyMetric(m) && !nodesDraw) nodesDraw = setTimeout(() => { nodesDraw = null; renderNodes(); }, 500);
  } else if (s.startsWith("node.")) later("nodes", refreshNodes, 1000);
  if (s.startsWith("quota.")) later("quotas", refreshQuotas, 2000);
  if (state.events % 20 === 0) renderSummary();
}

function setLive(on, text) {
  const b = $("#live");
  b.className = "badge " + (on ? "on" : "off");
  b.textContent = text || (on ? "live" : "disconnected");
}

async function follow() {
  for (;;) {
    try {
      const r = await fetch("/v1/events", { headers: headers() });
      if (r.status === 401) {
        const body = await r.json().catch(() => ({}));
        setLive(false, "token needed");
        await needAuth(body.error);
        continue;
      }
      if (!r.ok || !r.body) throw new Error("HTTP " + r.status);
      const reader = r.body.getReader();
      const decoder = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          if (block.startsWith(": subscribed")) { setLive(true); document.body.dataset.live = "1"; continue; }
          const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
          const isMessage = block.split("\n").some((l) => l === "event: message");
          if (data && isMessage) {
            try { onEvent(JSON.parse(data)); } catch (e) { console.error("event", e); }
          }
        }
      }
    } catch (e) {
      console.warn("event stream:", e);
    }
    setLive(false);
    document.body.dataset.live = "0";
    await sleep(2000);
    refreshAll();
  }
}

function qosItem(ev) {  // a node.qos.* Event as a timeline entry
  const m = ev.message || {};
  const pods = (m.pods || []).slice(0, 3).join(", ") + ((m.pods || []).length > 3 ? "…" : "");
  const detail = Object.entries(m.detail || {}).slice(0, 3).map(([k, v]) => `${k}=${v}`).join(" ");
  return { at: m.at, kind: m.kind, node: m.node, text: [m.reason, pods, detail].filter(Boolean).join(" · ") };
}

async function loadTimeline() {  // the QoS actions the bus kept before the page opened (or reconnected)
  const body = await api("/v1/qos-events?limit=200");
  const seen = new Set(state.timeline.map((t) => `${t.at}|${t.node}|${t.kind}|${t.text}`));
  const older = body.items.filter((e) => e.message).map(qosItem).filter((t) => !seen.has(`${t.at}|${t.node}|${t.kind}|${t.text}`));
  state.timeline = older.concat(state.timeline).sort((a, b) => a.at - b.at).slice(-TIMELINE_MAX);
  renderTimeline();
}

async function refreshAll() {
  await Promise.all([refreshNodes(), refreshPods(), refreshQuotas(), loadTimeline()]).catch((e) => {
    if (!(e instanceof AuthNeeded)) console.warn(e);
  });
}

refreshAll();
follow();
