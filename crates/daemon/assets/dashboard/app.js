// Arbiter's dashboard. Plain JavaScript, no library, served by the daemon with a CSP that
// forbids inline script. Everything the API returns is set as text (textContent), never as
// HTML: job names and reasons are tenants' text. The token lives in sessionStorage only and
// goes out in the Authorization header, never in a URL.
"use strict";

const TOKEN_KEY = "arbiter-token";
const POLL_MS = 2000;
let timer = null;

function $(id) {
  return document.getElementById(id);
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function status(text, error) {
  const s = $("status");
  s.textContent = text;
  s.className = error ? "error" : "";
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

async function api(path) {
  const response = await fetch(path, { headers: { Authorization: "Bearer " + token() }, cache: "no-store" });
  if (response.status === 401) {
    signOut("The token was not accepted; sign in again.");
    throw new Error("unauthorized");
  }
  if (!response.ok) {
    let message = response.status + " " + response.statusText;
    try {
      message = (await response.json()).error || message;
    } catch (_) {
      // not JSON: keep the status line
    }
    throw new Error(message);
  }
  return response;
}

// Tenants' colours as the daemon assigns them (a colour-blind-safe palette, by the tenants'
// order: no two of the first eight alike); grey for a tenant the snapshot does not name.
let tenantColors = {};

function tenantColor(name) {
  return tenantColors[name] || "#777777";
}

// Black text on the palette's light colours (yellow, sky blue, orange), white on the rest.
function inkOn(hex) {
  const m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(hex);
  if (!m) return "#fff";
  const [r, g, b] = m.slice(1).map((x) => parseInt(x, 16));
  return 0.299 * r + 0.587 * g + 0.114 * b > 140 ? "#000" : "#fff";
}

function ago(unixS) {
  const s = Math.max(0, Math.round(Date.now() / 1000 - unixS));
  if (s < 120) return s + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  if (s < 172800) return (s / 3600).toFixed(1) + " h";
  return (s / 86400).toFixed(1) + " d";
}

function when(unixS) {
  return new Date(unixS * 1000).toLocaleString();
}

function fillRows(table, rows) {
  const body = table.tBodies[0];
  body.replaceChildren(...rows.map((cells) => {
    const tr = el("tr");
    for (const cell of cells) tr.append(cell instanceof Node ? wrapCell(cell) : el("td", cell));
    return tr;
  }));
}

function wrapCell(node) {
  const td = el("td");
  td.append(node);
  return td;
}

function jobLink(id) {
  const a = el("a", "#" + id);
  a.href = "#job/" + id;
  return a;
}

function reservationText(r) {
  const start = new Date(r.start_unix_s * 1000).toISOString().slice(0, 16).replace("T", " ");
  const hours = ((r.end_unix_s - r.start_unix_s) / 3600).toFixed(1);
  return "reserved " + start + " UTC for " + hours + " h (" + (r.maintenance ? "maintenance" : "for " + r.tenant) + ": " + r.reason + ")";
}

function renderGrid(nodes, reservations) {
  const grid = $("grid");
  grid.replaceChildren(...nodes.map((node) => {
    const row = el("div", null, "node" + (node.takes_new_runs ? "" : " down"));
    row.dataset.node = node.name;
    const reserved = (reservations || []).filter((r) => r.nodes.includes(node.name));
    const name = el("div", node.name + " · " + node.gpu_type + (node.takes_new_runs ? "" : " (down)") + (reserved.length ? " · reserved" : ""), "node-name");
    name.title = [node.cpus + " CPUs, " + node.memory_gib + " GiB", ...reserved.map(reservationText)].join("\n");
    row.append(name);
    for (const gpu of node.gpu_ids) {
      const holders = node.jobs.filter((j) => j.gpus.includes(gpu));
      const cell = el("div", null, "gpu" + (holders.length === 0 ? " free" : ""));
      cell.dataset.gpu = gpu;
      const tips = ["GPU " + gpu];
      for (const h of holders) {
        let part;
        if (h.other_tenant) {
          part = el("span", "other", "other");
          tips.push("another tenant's job");
        } else {
          part = el("span", "#" + h.id, "mine");
          part.style.background = tenantColor(h.tenant);
          part.style.color = inkOn(tenantColor(h.tenant));
          part.style.textShadow = "none";
          part.dataset.job = h.id;
          part.addEventListener("click", () => { location.hash = "#job/" + h.id; });
          tips.push("job " + h.id + " (" + h.tenant + (h.name ? ", " + h.name : "") + ")");
        }
        cell.append(part);
      }
      if (holders.length > 1) tips.push(holders.length + " jobs share this GPU");
      cell.title = tips.join("\n");
      row.append(cell);
    }
    return row;
  }));
}

// The quota tree: each group under its parent (indented), per GPU type its guaranteed quota,
// what its jobs held at the last round and how much of that is borrowed (above guaranteed:
// reclaimable), its limits and fair share. The snapshot has only what the viewer may see (a
// tenant: its own group and those above it); names are set as text like everything else.
function orNone(v) {
  return v === null || v === undefined ? "none" : v;
}

function known(v) {
  return v !== null && v !== undefined;
}

function quotaLimit(q) {
  return known(q.borrowing_limit) ? q.guaranteed + q.borrowing_limit : null;
}

// A bar's full width: the most any group shown has of that GPU type (guaranteed, held, fair
// share or limit), so that bars of one type compare down the table.
function quotaScales(q) {
  const scales = {};
  for (const g of q.groups) {
    for (const [type, x] of Object.entries(g.gpus)) {
      scales[type] = Math.max(scales[type] || 1, x.guaranteed, x.held || 0, x.fair_share || 0, quotaLimit(x) || 0);
    }
  }
  return scales;
}

function quotaBar(q, scale) {
  const held = q.held || 0;
  const limit = quotaLimit(q);
  const at = (x) => Math.min(100, 100 * x / scale) + "%";
  const bar = el("div", null, "bar qbar");
  const guaranteed = el("span", null, "guaranteed");
  guaranteed.style.width = at(q.guaranteed);
  const within = el("i");
  within.style.width = at(Math.min(held, q.guaranteed));
  const borrowed = el("i", null, "borrowed");
  borrowed.style.left = at(Math.min(held, q.guaranteed));
  borrowed.style.width = at(Math.max(0, held - q.guaranteed));
  bar.append(guaranteed, within, borrowed);
  const tips = [(known(q.held) ? q.held + " held of " : "") + q.guaranteed + " guaranteed" + (q.borrowed ? " (" + q.borrowed + " borrowed)" : "")];
  if (known(q.fair_share)) {
    const share = el("b");
    share.style.left = at(q.fair_share);
    bar.append(share);
    tips.push("fair share " + q.fair_share);
  }
  if (limit !== null) {
    const mark = el("span", null, "limit");
    mark.style.left = at(limit);
    bar.append(mark);
    tips.push("at most " + limit + " (borrowing limit " + q.borrowing_limit + ")");
  }
  bar.title = tips.join("; ");
  return bar;
}

function renderQuotas(q) {
  $("quotas-section").hidden = !q;
  if (!q) return;
  const rows = [];
  const scales = quotaScales(q);
  for (const g of q.groups) {
    const types = q.gpu_types.filter((t) => g.gpus[t]);
    const jobs = g.borrowing_jobs || [];
    // A group defined with no GPU quota (a tree not enforced shows groups as defined) gets a row.
    (types.length ? types : [null]).forEach((type, k) => {
      const tr = el("tr", null, k === 0 ? "first" : "");
      if (k === 0) {
        const name = el("td", (g.depth > 0 ? "└ " : "") + g.name, "group");
        name.style.paddingLeft = (6 + 18 * (g.depth || 0)) + "px";
        name.title = g.leaf ? "a leaf: its tenant's jobs count here" : "a group: the totals of the groups under it";
        const reclaimable = el("td", g.leaf ? jobs.length : "");
        if (jobs.length) reclaimable.title = "borrowing, reclaimable: " + jobs.map((j) => "#" + j).join(", ");
        for (const cell of [name, el("td", g.over_quota_weight), reclaimable]) {
          cell.rowSpan = Math.max(1, types.length);
          tr.append(cell);
        }
      }
      const x = type === null ? null : g.gpus[type];
      if (x === null) {
        for (let i = 0; i < 8; i++) tr.append(el("td", "-"));
      } else {
        for (const v of [type, x.guaranteed, known(x.held) ? x.held : "-", known(x.borrowed) ? x.borrowed : "-", orNone(x.borrowing_limit), orNone(x.lending_limit), known(x.fair_share) ? x.fair_share : "-"]) tr.append(el("td", v));
        tr.append(wrapCell(quotaBar(x, scales[type])));
      }
      rows.push(tr);
    });
  }
  $("quotas").tBodies[0].replaceChildren(...rows);
  const notes = [];
  if (!q.enforced) notes.push("Not enforced" + (q.error ? ": " + q.error : "") + ".");
  else notes.push("Held and borrowed as at the last round; borrowed GPUs are reclaimed when a group's jobs wait within its guaranteed quota.");
  if (q.scope === "own path") notes.push("You see your own group and the groups above it (their totals).");
  if (known(q.reclaimed_last_round) && q.reclaimed_last_round > 0) notes.push(q.reclaimed_last_round + " jobs reclaimed at the last round.");
  $("quotas-note").textContent = notes.join(" ");
}

function renderSnapshot(d) {
  $("who").textContent = "signed in as " + d.viewer + " · policy " + d.policy + " · executor " + d.executor;
  $("summary").textContent = d.gpus_held + " of " + d.gpus_total + " GPUs held · " + d.queued_visible + " queued" +
    (d.queued_total !== d.queued_visible ? " (" + d.queued_total + " in all)" : "");
  tenantColors = d.tenant_colors || {};
  renderGrid(d.nodes, d.reservations);
  fillRows($("queue"), d.queue.map((j) => [jobLink(j.id), j.tenant, j.name || "", j.gpus, j.priority, j.priority_class || "", ago(j.submitted_unix_s), j.pending_reason || "waiting for the next round"]));
  $("queue-more").textContent = d.queued_visible > d.queue.length ? "… and " + (d.queued_visible - d.queue.length) + " more" : "";
  fillRows($("tenants"), d.tenants.map((t) => {
    const bar = el("div", null, "bar");
    const held = el("i");
    held.style.width = Math.min(100, 100 * t.gpus_held / Math.max(1, d.gpus_total)) + "%";
    held.style.background = tenantColor(t.name);
    bar.append(held);
    bar.title = t.gpus_held + " GPUs held of " + d.gpus_total;
    if (t.share !== null && t.share !== undefined) {
      const share = el("b");
      share.style.left = Math.min(100, 100 * t.share) + "%";
      bar.append(share);
      bar.title += "; fair share " + (t.share * d.gpus_total).toFixed(1) + " GPUs";
    }
    const name = el("span", t.name);
    const swatch = el("span", "■ ");
    swatch.style.color = tenantColor(t.name);
    name.prepend(swatch);
    // No share where the policy ignores weights (a share from them would promise nothing).
    const share = el("span", (t.share === null || t.share === undefined) ? (d.weights_used === false ? "not used" : "-") : (100 * t.share).toFixed(1) + "%");
    if (d.weights_note) share.title = d.weights_note;
    return [name, t.gpus_held, t.queued, t.weight, share, t.gpu_quota === null ? "none" : t.gpu_quota, (t.gpu_hours || 0).toFixed(1), bar];
  }));
  $("tenants-note").textContent = d.weights_note ? "Weights: " + d.weights_note + "." : "";
  renderQuotas(d.quotas);
  fillRows($("events"), d.events.map((e) => [when(e.at_unix_s), jobLink(e.job), e.tenant, e.to, e.why]));
}

async function showCluster() {
  const d = await (await api("/v1/dashboard")).json();
  renderSnapshot(d);
  $("job").hidden = true;
  $("cluster").hidden = false;
}

async function showJob(id) {
  const j = await (await api("/v1/jobs/" + encodeURIComponent(id))).json();
  $("job-title").textContent = "Job " + j.id + (j.request.name ? " · " + j.request.name : "");
  const facts = [
    ["tenant", j.tenant], ["state", j.state.state || j.state.name || JSON.stringify(j.state)], ["GPUs", j.request.gpus],
    ["command", j.request.command], ["submitted", when(j.submitted_unix_s)], ["runs", j.runs],
    ["preemptions", j.preemptions], ["failures", j.failures], ["held GPUs for", Math.round(j.executed_s) + " s"],
    ["why pending", j.pending_reason || "-"],
  ];
  if (j.shares_gpus_with && j.shares_gpus_with.length) facts.push(["shares GPUs with", j.shares_gpus_with.map((s) => (s.id !== undefined && s.id !== null) ? "#" + s.id : "another tenant's job").join(", ")]);
  $("job-facts").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", k), el("dd", v)]));
  const p = j.progress;
  const progress = [];
  if (p) {
    progress.push(el("div", "steps " + p.steps + (j.total_steps ? " of " + j.total_steps + " (" + (100 * p.steps / j.total_steps).toFixed(1) + "%)" : "")));
    if (p.throughput !== undefined && p.throughput !== null) progress.push(el("div", "throughput " + Number(p.throughput).toFixed(2) + " steps/s"));
  } else {
    progress.push(el("div", "no progress reported"));
  }
  for (const [type, t] of Object.entries(j.throughput_by_gpu_type || {})) progress.push(el("div", "measured on " + type + ": " + Number(t).toFixed(2) + " steps/s"));
  $("job-progress").replaceChildren(...progress);
  fillRows($("job-history"), (j.history || []).slice().reverse().map((t) => [when(t.at_unix_s), t.to, t.why]));
  const log = await (await api("/v1/jobs/" + encodeURIComponent(id) + "/logs?tail_bytes=8192")).text();
  $("job-log").textContent = log || "(empty)";
  $("cluster").hidden = true;
  $("job").hidden = false;
}

async function refresh() {
  clearTimeout(timer);
  if (!token()) return;
  const m = /^#job\/(\d+)$/.exec(location.hash);
  try {
    if (m) await showJob(m[1]);
    else await showCluster();
    status("updated " + new Date().toLocaleTimeString());
  } catch (e) {
    if (e.message !== "unauthorized") status(e.message, true);
  }
  if (token() && !document.hidden) timer = setTimeout(refresh, POLL_MS);
}

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  clearTimeout(timer);
  $("cluster").hidden = true;
  $("job").hidden = true;
  $("signin").hidden = false;
  $("signout").hidden = true;
  $("who").textContent = "";
  status(message || "", Boolean(message));
}

function signedIn() {
  $("signin").hidden = true;
  $("signout").hidden = false;
  refresh();
}

document.addEventListener("DOMContentLoaded", () => {
  $("signin-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("token").value.trim();
    $("token").value = "";
    if (!value) return;
    sessionStorage.setItem(TOKEN_KEY, value);
    signedIn();
  });
  $("signout").addEventListener("click", () => signOut());
  window.addEventListener("hashchange", refresh);
  document.addEventListener("visibilitychange", () => { if (!document.hidden) refresh(); });
  if (token()) signedIn();
  else signOut();
});
