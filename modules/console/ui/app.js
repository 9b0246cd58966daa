// The Sluice console: reads /v1/console/*, /v1/transforms and /v1/plugins and draws
// them. Every value from the cluster goes into the page as text (textContent), never
// as markup.
"use strict";

const main = document.getElementById("main");
const statusEl = document.getElementById("status");
const refreshMs = Number(document.body.dataset.refreshMs) || 5000;
let timer = null;
let browseState = null; // the records form of the topic page, kept across refreshes

// h builds an element: h("td", {class: "num"}, "12", child, ...).
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function table(headers, rows, opts) {
  const head = h("tr", null, headers.map(([label, cls]) => h("th", { class: cls }, label)));
  const body = rows.length ? rows : [h("tr", null, h("td", { colspan: headers.length, class: "muted" }, (opts && opts.empty) || "none"))];
  return h("table", { id: opts && opts.id }, h("thead", null, head), h("tbody", null, body));
}

function card(label, value, cls) {
  return h("div", { class: "card " + (cls || "") }, h("div", { class: "label" }, label), h("div", { class: "value" }, value));
}

const fmtInt = (n) => (n === undefined || n === null || n < 0 ? "–" : Number(n).toLocaleString("en-US"));
function fmtBytes(n) {
  if (!(n >= 0)) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}
function fmtSecs(s) {
  if (s === null || s === undefined) return "–";
  if (s < 1) return s.toFixed(2) + " s";
  if (s < 120) return s.toFixed(1) + " s";
  if (s < 7200) return (s / 60).toFixed(1) + " min";
  return (s / 3600).toFixed(1) + " h";
}
const fmtTime = (ms) => new Date(ms).toISOString().replace("T", " ").replace("Z", "");
const ids = (a) => (a && a.length ? a.join(", ") : "–");

async function get(path) {
  const r = await fetch(path, { headers: { Accept: "application/json" } });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error((body && body.error) || r.status + " " + r.statusText);
  return body;
}

// ---- pages ------------------------------------------------------------------------

async function overview() {
  const c = await get("/v1/console/cluster");
  return [
    h("h1", null, "Cluster ", h("span", { class: "muted" }, c.cluster_id)),
    h("div", { class: "cards" },
      card("Brokers", c.brokers.length),
      card("Controller", c.controller),
      card("Topics", c.topics),
      card("Partitions", c.partitions),
      card("Under-replicated", c.under_replicated_partitions, c.under_replicated_partitions ? "bad" : "ok"),
      card("Offline", c.offline_partitions, c.offline_partitions ? "bad" : "ok")),
    h("h2", null, "Brokers"),
    table([["ID", "num"], ["Address"], ["Rack"], ["Leaders", "num"], ["Replicas", "num"], ["Role"]],
      c.brokers.map((b) => h("tr", null,
        h("td", { class: "num" }, b.id), h("td", null, b.host + ":" + b.port), h("td", null, b.rack || "–"),
        h("td", { class: "num" }, b.leaders), h("td", { class: "num" }, b.replicas),
        h("td", null, b.controller ? h("span", { class: "tag ok" }, "controller") : ""))), { id: "brokers" }),
    h("p", { class: "muted" }, "Served by broker " + c.serving_broker + "."),
  ];
}

async function topics() {
  const ts = await get("/v1/console/topics");
  return [
    h("h1", null, "Topics"),
    table([["Name"], ["Partitions", "num"], ["RF", "num"], ["Under-replicated", "num"], ["Offline", "num"], ["Records", "num"], ["Size", "num"]],
      ts.map((t) => h("tr", { class: t.offline ? "bad" : null },
        h("td", null, h("a", { href: "#/topics/" + encodeURIComponent(t.name) }, t.name), t.internal ? h("span", { class: "tag" }, " internal") : ""),
        h("td", { class: "num" }, t.partitions), h("td", { class: "num" }, t.replication_factor),
        h("td", { class: "num" }, t.under_replicated), h("td", { class: "num" }, t.offline),
        h("td", { class: "num" }, fmtInt(t.records)), h("td", { class: "num" }, fmtBytes(t.bytes)))), { id: "topics", empty: "no topics yet" }),
  ];
}

function showValue(v, enc) {
  if (v === null || v === undefined) return h("span", { class: "muted" }, "null");
  if (enc === "base64") return h("pre", { title: "not UTF-8: base64" }, "base64:" + v);
  const s = v.trim();
  if ((s.startsWith("{") || s.startsWith("[")) && s.length < 65536) {
    try { return h("pre", { class: "json" }, JSON.stringify(JSON.parse(s), null, 2)); } catch (e) { /* not JSON */ }
  }
  return h("pre", null, v);
}

async function loadRecords(topic, out) {
  const st = browseState;
  const q = new URLSearchParams({ partition: st.partition, limit: st.limit });
  if (st.mode === "offset" && st.offset !== "") q.set("offset", st.offset);
  if (st.mode === "time" && st.time !== "") q.set("timestamp", String(Date.parse(st.time + "Z")));
  out.replaceChildren(h("p", { class: "muted" }, "reading…"));
  try {
    const r = await get("/v1/console/topics/" + encodeURIComponent(topic) + "/records?" + q);
    out.replaceChildren(
      h("p", { class: "muted" }, `Partition ${r.partition}: ${r.records.length} records from offset ${r.from} (end ${r.end_offset}).`),
      table([["Offset", "num"], ["Timestamp"], ["Key"], ["Value"], ["Headers"]],
        r.records.map((rec) => h("tr", null,
          h("td", { class: "num" }, rec.offset), h("td", null, fmtTime(rec.timestamp)),
          h("td", null, showValue(rec.key, rec.key_encoding)), h("td", null, showValue(rec.value, rec.value_encoding)),
          h("td", null, rec.headers.map((hd) => h("div", null, hd.key + "=" + (hd.encoding === "base64" ? "base64:" : "") + hd.value))))),
        { id: "records", empty: "no records there" }));
  } catch (e) {
    out.replaceChildren(h("p", { class: "error" }, e.message));
  }
}

async function topic(name) {
  const t = await get("/v1/console/topics/" + encodeURIComponent(name));
  if (!browseState || browseState.topic !== name) {
    browseState = { topic: name, partition: 0, mode: "end", offset: "", time: "", limit: 20 };
  }
  const st = browseState;
  const out = h("div", { id: "records-out" });
  const set = (k) => (ev) => { st[k] = ev.target.value; };
  const form = h("form", { class: "browse", onsubmit: (ev) => { ev.preventDefault(); loadRecords(name, out); } },
    h("label", null, "Partition", h("select", { name: "partition", onchange: set("partition") },
      t.partition_list.map((p) => h("option", { value: p.partition, selected: String(p.partition) === String(st.partition) }, p.partition)))),
    h("label", null, "From", h("select", { name: "mode", onchange: set("mode") },
      [["end", "the latest"], ["offset", "an offset"], ["time", "a time (UTC)"]].map(([v, l]) => h("option", { value: v, selected: st.mode === v }, l)))),
    h("label", null, "Offset", h("input", { name: "offset", type: "number", min: 0, value: st.offset, oninput: set("offset") })),
    h("label", null, "Time (UTC)", h("input", { name: "time", type: "datetime-local", step: 1, value: st.time, oninput: set("time") })),
    h("label", null, "Records", h("input", { name: "limit", type: "number", min: 1, max: 100, value: st.limit, oninput: set("limit") })),
    h("button", { type: "submit" }, "Read"));
  return [
    h("h1", null, h("a", { href: "#/topics" }, "Topics"), " / ", name),
    h("div", { class: "cards" },
      card("Partitions", t.partitions), card("Replication factor", t.replication_factor),
      card("Under-replicated", t.under_replicated, t.under_replicated ? "bad" : "ok"),
      card("Records", fmtInt(t.records)), card("Size", fmtBytes(t.bytes))),
    h("h2", null, "Partitions"),
    table([["Partition", "num"], ["Leader", "num"], ["Replicas"], ["ISR"], ["Start", "num"], ["End", "num"], ["Size", "num"]],
      t.partition_list.map((p) => h("tr", { class: p.leader < 0 || p.isr.length < p.replicas.length ? "bad" : null },
        h("td", { class: "num" }, p.partition), h("td", { class: "num" }, p.leader < 0 ? "none" : p.leader),
        h("td", null, ids(p.replicas)), h("td", null, ids(p.isr)),
        h("td", { class: "num" }, fmtInt(p.start_offset)), h("td", { class: "num" }, fmtInt(p.end_offset)),
        h("td", { class: "num" }, fmtBytes(p.bytes)))), { id: "partitions" }),
    h("h2", null, "Records"), form, out,
    h("h2", null, "Configs"),
    table([["Name"], ["Value"], ["Source"]],
      (t.configs || []).filter((c) => c.source !== "DEFAULT_CONFIG").map((c) => h("tr", null,
        h("td", null, c.name), h("td", null, c.sensitive ? "(sensitive)" : c.value === null ? "null" : c.value), h("td", null, c.source))),
      { id: "configs", empty: "all defaults" }),
  ];
}

async function groups() {
  const gs = await get("/v1/console/groups");
  return [
    h("h1", null, "Consumer groups"),
    table([["Group"], ["Type"], ["State"], ["Assignor"], ["Members", "num"], ["Coordinator", "num"], ["Lag", "num"], ["Lag (time)", "num"]],
      gs.map((g) => h("tr", null,
        h("td", null, h("a", { href: "#/groups/" + encodeURIComponent(g.group) }, g.group)),
        h("td", null, g.type), h("td", null, h("span", { class: "tag " + (g.state === "Stable" ? "ok" : "") }, g.state)),
        h("td", null, g.protocol || "–"), h("td", { class: "num" }, g.members), h("td", { class: "num" }, g.coordinator),
        h("td", { class: "num" }, fmtInt(g.lag)), h("td", { class: "num" }, fmtSecs(g.lag_seconds)))), { id: "groups", empty: "no groups yet" }),
  ];
}

// lagChart draws the samples as two lines: lag in records (solid, left scale) and in
// seconds (dashed, right scale).
function lagChart(samples) {
  const W = 640, H = 180, P = 36;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "chart");
  svg.setAttribute("id", "lag-chart");
  svg.setAttribute("width", W);
  svg.setAttribute("height", H);
  const el = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
    return e;
  };
  if (samples.length < 2) {
    el("text", { x: P, y: H / 2 }, "collecting samples: the chart fills in while this page is open");
    return svg;
  }
  const t0 = samples[0].at_ms, t1 = samples[samples.length - 1].at_ms;
  const maxLag = Math.max(1, ...samples.map((s) => s.lag));
  const maxSecs = Math.max(1, ...samples.map((s) => s.lag_seconds));
  const x = (t) => P + ((t - t0) / Math.max(1, t1 - t0)) * (W - 2 * P);
  const y = (v, m) => H - P + 10 - (v / m) * (H - P - 10);
  el("polyline", { class: "lag", points: samples.map((s) => x(s.at_ms) + "," + y(s.lag, maxLag)).join(" ") });
  el("polyline", { class: "secs", points: samples.map((s) => x(s.at_ms) + "," + y(s.lag_seconds, maxSecs)).join(" ") });
  el("text", { x: 4, y: 14 }, fmtInt(maxLag) + " records");
  el("text", { x: W - 4, y: 14, "text-anchor": "end" }, fmtSecs(maxSecs));
  el("text", { x: P, y: H - 6 }, fmtTime(t0).slice(11, 19));
  el("text", { x: W - P, y: H - 6, "text-anchor": "end" }, fmtTime(t1).slice(11, 19));
  el("text", { x: W / 2, y: H - 6, "text-anchor": "middle" }, "solid: records behind · dashed: seconds behind");
  return svg;
}

async function group(name) {
  const g = await get("/v1/console/groups/" + encodeURIComponent(name));
  return [
    h("h1", null, h("a", { href: "#/groups" }, "Consumer groups"), " / ", name),
    h("div", { class: "cards" },
      card("State", g.state), card("Assignor", g.protocol || "–"), card("Members", g.members),
      card("Coordinator", g.coordinator), card("Lag", fmtInt(g.lag), g.lag ? "bad" : "ok"), card("Lag (time)", fmtSecs(g.lag_seconds))),
    g.error ? h("p", { class: "error" }, g.error) : "",
    h("h2", null, "Lag over time"), lagChart(g.history || []),
    h("h2", null, "Members"),
    table([["Member"], ["Client"], ["Host"], ["Assigned"]],
      g.member_list.map((m) => h("tr", null, h("td", null, m.instance_id ? m.id + " (" + m.instance_id + ")" : m.id),
        h("td", null, m.client_id), h("td", null, m.host), h("td", null, m.assigned.join(", ") || "–"))), { id: "members", empty: "no members (the group is empty)" }),
    h("h2", null, "Lag per partition"),
    table([["Topic"], ["Partition", "num"], ["Committed", "num"], ["End", "num"], ["Lag", "num"], ["Lag (time)", "num"], ["Member"]],
      g.partitions.map((p) => h("tr", { class: p.error ? "bad" : null },
        h("td", null, p.topic), h("td", { class: "num" }, p.partition), h("td", { class: "num" }, fmtInt(p.committed)),
        h("td", { class: "num" }, fmtInt(p.end)), h("td", { class: "num" }, fmtInt(p.lag)),
        h("td", { class: "num" }, fmtSecs(p.lag_seconds)), h("td", null, p.member || p.error || "–"))), { id: "lag" }),
  ];
}

// rates turns counters into per-second rates since the previous refresh of the
// same page: prev[key] holds {at, value}.
const prevCounts = {};
function rate(key, value) {
  const now = Date.now(), p = prevCounts[key];
  prevCounts[key] = { at: now, value };
  if (!p || now <= p.at || value < p.value) return "–";
  return ((value - p.value) / ((now - p.at) / 1000)).toFixed(1) + "/s";
}

async function extensions() {
  const [tr, pl] = await Promise.all([
    get("/v1/transforms").catch((e) => ({ error: e.message })),
    get("/v1/plugins").catch((e) => ({ error: e.message })),
  ]);
  const transforms = Array.isArray(tr) ? tr : [];
  const plugins = pl.plugins || [];
  return [
    h("h1", null, "Transforms"),
    tr.error ? h("p", { class: "error" }, tr.error) : table([["Name"], ["Input"], ["Mode"], ["State"], ["Records in", "num"], ["Rate in", "num"], ["Records out", "num"], ["Failures", "num"], ["Avg latency", "num"]],
      transforms.map((t) => h("tr", { class: t.state !== "running" ? "bad" : null },
        h("td", null, t.name), h("td", null, t.input), h("td", null, t.mode), h("td", null, t.state),
        h("td", { class: "num" }, fmtInt(t.records_in)), h("td", { class: "num" }, rate("t:" + t.name, t.records_in)),
        h("td", { class: "num" }, fmtInt(t.records_out)),
        h("td", { class: "num" }, fmtInt(t.failures)), h("td", { class: "num" }, ((t.latency_avg_us || 0) / 1000).toFixed(2) + " ms"))),
      { id: "transforms", empty: "no transforms deployed" }),
    h("h1", null, "Assignor plugins"),
    pl.error ? h("p", { class: "error" }, pl.error) : table([["Name"], ["State"], ["Fallback"], ["Calls", "num"], ["Call rate", "num"], ["Errors", "num"], ["Fallbacks", "num"], ["Restarts", "num"], ["Last call", "num"]],
      plugins.map((p) => h("tr", { class: p.state !== "running" ? "bad" : null },
        h("td", null, p.name), h("td", null, p.state), h("td", null, p.fallback),
        h("td", { class: "num" }, fmtInt(p.calls)), h("td", { class: "num" }, rate("p:" + p.name, p.calls)), h("td", { class: "num" }, fmtInt(p.errors)),
        h("td", { class: "num" }, fmtInt(p.fallbacks)), h("td", { class: "num" }, fmtInt(p.restarts)),
        h("td", { class: "num" }, (p.last_latency_ms || 0).toFixed(2) + " ms"))),
      { id: "plugins", empty: "no assignor plugins configured" }),
  ];
}

// ---- routing and refresh ----------------------------------------------------------

function route() {
  const parts = (location.hash.replace(/^#\/?/, "") || "overview").split("/").map(decodeURIComponent);
  switch (parts[0]) {
    case "topics": return parts[1] ? ["topics", () => topic(parts[1]), parts[1]] : ["topics", topics];
    case "groups": return parts[1] ? ["groups", () => group(parts[1]), parts[1]] : ["groups", groups];
    case "extensions": return ["extensions", extensions];
    default: return ["overview", overview];
  }
}

async function render() {
  clearTimeout(timer);
  const [tab, page, sub] = route();
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.tab === tab);
  // The topic page's records and form are not redrawn by the refresh.
  const keep = tab === "topics" && sub && main.dataset.page === "topic:" + sub;
  try {
    if (keep) {
      const fresh = await page();
      const old = document.getElementById("partitions");
      const nu = fresh.find((n) => n.id === "partitions");
      if (old && nu) old.replaceWith(nu);
    } else {
      main.replaceChildren(...(await page()));
      main.dataset.page = tab === "topics" && sub ? "topic:" + sub : tab + (sub ? ":" + sub : "");
      if (tab === "topics" && sub) loadRecords(sub, document.getElementById("records-out"));
    }
    statusEl.textContent = "updated " + new Date().toLocaleTimeString() + " · every " + refreshMs / 1000 + " s";
    statusEl.classList.remove("error");
  } catch (e) {
    statusEl.textContent = "error: " + e.message;
    statusEl.classList.add("error");
    if (!keep) main.replaceChildren(h("p", { class: "error" }, e.message));
  }
  document.body.dataset.loaded = "true";
  timer = setTimeout(render, refreshMs);
}

window.addEventListener("hashchange", () => { main.dataset.page = ""; render(); });
render();
