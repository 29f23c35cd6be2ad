// The StageFrontier web view: polls the coordinator's JSON API (/api/...) and draws with
// Chart.js. The job is chosen in the URL: #job=NAME; a token may be given once as
// #job=NAME&token=TOKEN (kept in this tab's sessionStorage, sent as a Bearer header).
"use strict";

const REFRESH_MS = 2000;
const STEPS_SHOWN = 200;
const COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
                "#ff9da7", "#9c755f", "#bab0ac"];
const LABEL_COLORS = { HEALTHY: "#59a14f", CLEAR: "#e15759", AMBIGUOUS: "#f28e2b", STALLED: "#b00000" };

const view = { charts: {}, job: "", suspects: null, refreshed: 0, errors: 0 };
window.sfView = view;  // for people in the console and for the browser test

function hashParams() { return new URLSearchParams(location.hash.slice(1)); }

function token() {
  const t = hashParams().get("token");
  if (t) sessionStorage.setItem("sf-token", t);
  return sessionStorage.getItem("sf-token") || "";
}

class ApiError extends Error {
  constructor(status, body) { super(body.error || ("HTTP " + status)); this.status = status; }
}

async function api(path, params) {
  const url = "/api/" + path + (params ? "?" + new URLSearchParams(params) : "");
  const headers = {};
  const t = token();
  if (t) headers.Authorization = "Bearer " + t;
  const r = await fetch(url, { headers, cache: "no-store" });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new ApiError(r.status, body);
  return body;
}

const ms = ns => Number(ns || 0) / 1e6;
const el = id => document.getElementById(id);

function text(tag, s, cls) {
  const e = document.createElement(tag);
  e.textContent = s;
  if (cls) e.className = cls;
  return e;
}

function fillTable(id, rows) {
  const body = el(id).querySelector("tbody");
  body.replaceChildren(...rows.map(cells => {
    const tr = document.createElement("tr");
    for (const c of cells) tr.append(c instanceof Node ? c : text("td", String(c)));
    return tr;
  }));
}

// --- charts -------------------------------------------------------------------------------

function chart(id, config) {
  if (!view.charts[id]) {
    const stale = Chart.getChart(el(id));  // from a creation that threw half-way
    if (stale) stale.destroy();
    view.charts[id] = new Chart(el(id), config);
  }
  return view.charts[id];
}

function stackedSteps(id, stages, steps, field) {
  const c = chart(id, {
    type: "bar",
    data: { labels: [], datasets: [] },
    options: {
      animation: false, maintainAspectRatio: false,
      scales: { x: { stacked: true, ticks: { maxTicksLimit: 8 } }, y: { stacked: true, beginAtZero: true } },
      plugins: { legend: { labels: { boxWidth: 10 } } },
      datasets: { bar: { barPercentage: 1, categoryPercentage: 1 } },
    },
  });
  c.data.labels = steps.map(s => s.step);
  c.data.datasets = stages.map((name, k) => ({
    label: name, backgroundColor: COLORS[k % COLORS.length],
    data: steps.map(s => ms(s.stages[k] ? s.stages[k][field] : 0)),
  }));
  c.update("none");
}

// Closed windows, then the live one (the engine's current window, still filling) when it reaches
// past the last closed window: drawn paler and labelled "live".
function timeline(verdicts, live) {
  // Stall events (STALLED, RESUMED) are not windows: the banner says them.
  const jobVerdicts = verdicts.filter(e => e.verdict.group === "job" && !e.verdict.stall);
  const lastClosed = jobVerdicts.length ? Number(jobVerdicts.at(-1).verdict.last_step) : -1;
  const showLive = live && Number(live.last_step) > lastClosed;
  if (showLive) jobVerdicts.push({ verdict: live, live: true });
  const c = chart("timeline-chart", {
    type: "bar",
    data: { labels: [], datasets: [{ label: "excess (ms)", data: [], backgroundColor: [] }] },
    options: {
      animation: false, maintainAspectRatio: false,
      scales: { y: { beginAtZero: true, title: { display: true, text: "excess in the window (ms)" } },
                x: { title: { display: true, text: "window (steps)" }, ticks: { maxTicksLimit: 10 } } },
      plugins: {
        legend: { display: false },
        tooltip: { callbacks: { afterLabel: item => describe(jobVerdicts[item.dataIndex].verdict) } },
      },
    },
  });
  c.data.labels = jobVerdicts.map(e =>
    e.verdict.first_step + "–" + e.verdict.last_step + (e.live ? " (live)" : ""));
  c.data.datasets[0].data = jobVerdicts.map(e => ms(e.verdict.total_excess_ns));
  c.data.datasets[0].backgroundColor = jobVerdicts.map(e =>
    (LABEL_COLORS[e.verdict.label] || "#999") + (e.live ? "80" : ""));
  c.update("none");
}

function integerTicks(max) {
  const ticks = [];
  for (let v = 0; v <= max; v++) ticks.push({ value: v });
  return ticks;
}

function heatmap(reply, job) {
  const stages = job.stages.map(s => s.name);
  const world = job.world_size;
  const cells = reply.excess_cells || [];
  const max = Math.max(1e-9, ...cells.map(c => ms(c.excess_ns)));
  view.heatStages = stages;  // read by the axis' tick labels, also while the chart is built
  const c = chart("heatmap-chart", {
    type: "scatter",
    data: { datasets: [{ label: "excess (ms)", data: [], pointStyle: "rect" }] },
    options: {
      animation: false, maintainAspectRatio: false,
      scales: {
        // One tick per rank and per stage, at the cells' centres (the axes run from -0.5).
        x: { min: -0.5, max: world - 0.5, title: { display: true, text: "rank" },
             afterBuildTicks: a => { a.ticks = integerTicks(a.max); },
             ticks: { autoSkip: true, maxRotation: 0 } },
        y: { min: -0.5, max: stages.length - 0.5, reverse: true,
             afterBuildTicks: a => { a.ticks = integerTicks(a.max); },
             ticks: { autoSkip: false, callback: v => view.heatStages[v] ?? "" } },
      },
      plugins: {
        legend: { display: false },
        tooltip: { callbacks: { label: item => {
          const p = item.raw;
          return `${view.heatStages[p.y]} on rank ${p.x}: ${p.v.toFixed(2)} ms over ${p.steps} steps`;
        } } },
      },
    },
  });
  c.options.scales.x.max = world - 0.5;
  c.options.scales.y.max = stages.length - 0.5;
  const idx = new Map(stages.map((s, k) => [s, k]));
  const ds = c.data.datasets[0];
  ds.data = cells.map(e => ({ x: e.rank, y: idx.get(e.stage) ?? 0, v: ms(e.excess_ns), steps: e.flagged_steps }));
  ds.backgroundColor = ds.data.map(p => `rgba(225, 87, 89, ${0.15 + 0.85 * p.v / max})`);
  ds.borderColor = ds.backgroundColor;
  // A "rect" point of radius r is a square of side r·√2: fill most of each cell.
  ds.pointRadius = ctx => {
    const a = ctx.chart.chartArea;
    if (!a) return 4;
    return Math.max(1.5, 0.68 * Math.min(a.width / Math.max(1, world), a.height / Math.max(1, stages.length)));
  };
  ds.pointHoverRadius = ds.pointRadius;
  c.update("none");
}

// --- words --------------------------------------------------------------------------------

function describe(v) {
  if (v.stall) {
    return v.stall.ended ? `RESUMED after a stall of ${secs(v.stall.stalled_ns)}`
                         : `STALLED (${stallReason(v.stall)})`;
  }
  const head = v.label + (v.reason ? " " + v.reason : "");
  if (v.label === "HEALTHY") return head;
  if (v.group_wide) return head + ": group-wide, the whole group is slower";
  const s = (v.suspects || [])[0];
  if (v.label === "CLEAR" && s) {
    return `${head}: ${s.stage} on rank ${s.rank} (${Math.round(100 * s.share)}% of the excess)`;
  }
  const ranks = (v.candidate_ranks || []).join(", ");
  const stages = (v.candidate_stages || []).join(", ");
  return `${head}: ${stages || (s ? s.stage : "?")} on ranks ${ranks || (s ? s.rank : "?")}`;
}

// "window of 100 steps (94..199; 6 profiled steps left out)": profiled steps are left out of
// the evidence, so such a window spans more steps than it has.
function windowSpan(steps, v) {
  const out = `window of ${steps} steps`;
  const left = Number(v.profiled_steps_left_out || 0);
  if (!left) return out;
  return `${out} (${v.first_step}..${v.last_step}; ${left} profiled step${left === 1 ? "" : "s"} left out)`;
}

const secs = ns => `${Math.round(Number(ns || 0) / 1e9)} s`;
const STALL_REASONS = { group_wide_pause: "group-wide pause", sidecar_lost: "sidecar lost" };
const stallReason = s => STALL_REASONS[s.reason] || s.reason || "unknown";
const STALL_RANKS_SHOWN = 8;

// One rank a stall names: "rank 0 stuck in data at step 150 for 41 s (node n0)".
function stuckRank(r) {
  const where = r.stage ? `in ${r.stage}` : "between steps";
  const node = r.node ? ` (node ${r.node})` : "";
  if (r.role === "dead") return `rank ${r.rank} dead (process gone), last ${where} at step ${r.step}${node}`;
  if (r.role === "lost") return `rank ${r.rank} unknown (its sidecar stopped reporting), last ${where} at step ${r.step}${node}`;
  return `rank ${r.rank} ${r.role || "stuck"} ${where} at step ${r.step} for ${secs(r.open_ns)}${node}`;
}

// The stall banner (a Stall as JSON): the reason, how long, the ranks named stuck, dead or lost
// with their stage, step and seconds, how many wait, and "(no alarm yet)" for a stall that does
// not alarm (a group-wide pause within its limit). The browser test checks its words.
function stallText(s) {
  let out = `STALLED (${stallReason(s)}) for ${secs(s.stalled_ns)}, no step past ${s.frontier_step}`;
  const ranks = s.ranks || [];
  const named = ranks.filter(r => r.role !== "waiting");
  const waiting = ranks.length - named.length;
  if (named.length) out += ": " + named.slice(0, STALL_RANKS_SHOWN).map(stuckRank).join("; ");
  if (named.length > STALL_RANKS_SHOWN) out += `; and ${named.length - STALL_RANKS_SHOWN} more`;
  if (waiting) out += `; ${waiting} rank${waiting === 1 ? "" : "s"} waiting`;
  if (!s.alarm) out += " (no alarm yet)";
  return out;
}

function showStall(stall) {
  const open = !!stall && !stall.ended;
  const b = el("stall");
  b.hidden = !open;
  b.textContent = open ? stallText(stall) : "";
  b.classList.toggle("quiet", open && !stall.alarm);
}

// --- refresh ------------------------------------------------------------------------------

async function refreshJobs() {
  const reply = await api("jobs");
  const jobs = reply.jobs || [];
  el("jobs").replaceChildren(...jobs.map(j => {
    const li = document.createElement("li");
    const a = text("a", j.job);
    a.href = "#job=" + encodeURIComponent(j.job);
    if (j.job === view.job) a.className = "selected";
    li.append(a);
    // A stalled job reads STALLED (its last_label says so too; the stall decides).
    const label = j.stall && !j.stall.ended ? "STALLED" : j.last_label;
    if (label) li.append(text("span", label, "badge label-" + label));
    // Every stub exited cleanly: the job is over, not stalled.
    if (j.state === "finished") li.append(text("span", "finished", "badge"));
    // A re-run under the same id is a new generation; the earlier runs stay readable.
    if (!j.current) li.append(text("span", "earlier run", "badge"));
    else if (j.generation > 1) li.append(text("span", "run " + j.generation, "badge"));
    return li;
  }));
  return jobs;
}

async function refreshNodes() {
  const reply = await api("nodes", { limit: 50 });
  fillTable("nodes", (reply.nodes || []).map(n =>
    [n.node, n.node_class, Number(n.wasted_gpu_seconds).toFixed(1), n.jobs_charged,
     Number(n.hangs || 0)]));
}

async function refreshJob(job) {
  el("job-title").textContent = `${job.job}: ${job.world_size} ranks, step ${job.last_step}` +
      (job.state === "finished" ? ", finished" : "");
  const last = Number(job.last_step);
  const [suspects, verdicts, steps, health, captures] = await Promise.all([
    api("suspects", { job: job.job }).catch(e => e),
    api("verdicts", { job: job.job }),
    api("steps", { job: job.job, from: Math.max(0, last - STEPS_SHOWN + 1), to: last }),
    api("health", { job: job.job }),
    api("captures", { job: job.job }),
  ]);
  // The suspects reply's stall is the newer; the job list's covers a failed reply.
  showStall((!(suspects instanceof Error) && suspects.verdict && suspects.verdict.stall) ||
            job.stall);
  if (suspects instanceof Error) {
    el("verdict").textContent = suspects.message;  // e.g. no accounted step yet
    el("verdict").className = "verdict";
  } else {
    view.suspects = suspects;
    const v = suspects.verdict;
    el("verdict").textContent = describe(v);
    el("verdict").className = "verdict label-" + v.label;
    el("verdict").dataset.label = v.label;
    el("explanation").textContent = v.explanation || "";
    el("window").textContent = "Current " + windowSpan(suspects.window, v);
    heatmap(suspects, job);
  }
  timeline(verdicts.verdicts || [], suspects instanceof Error ? null : suspects.verdict);
  const stageNames = steps.stages || [];
  const held = steps.steps || [];
  view.lastSteps = held;
  stackedSteps("frontier-chart", stageNames, held, "increment_ns");
  stackedSteps("mean-chart", stageNames, held, "mean_ns");
  stackedSteps("max-chart", stageNames, held, "max_ns");
  el("health-summary").textContent =
      `${health.reporting} reporting, ${health.lagging} lagging, ${health.missing} missing` +
      (health.finished ? `, ${health.finished} finished` : "") +
      (health.state === "finished" ? " (job finished)" : "") +
      ((health.detector_conditions || []).length
           ? "; detector: " + health.detector_conditions.map(c => c.name).join(", ") : "");
  fillTable("health", (health.ranks || []).map(r => [
    r.rank, text("td", r.state, "state-" + r.state), r.node, r.last_step, r.steps_behind,
    r.records_accepted, r.dropped_by_writer, r.last_error]));
  // A decision not to capture has no capture id: "—" and "not taken", never "id 0".
  fillTable("captures", (captures.decisions || []).slice(-20).reverse().map(d => [
    Number(d.id) ? d.id : "—", d.asked ? (d.manual ? "by hand" : "yes") : "not taken",
    d.missed ? `${d.reason}; missed: ${d.missed}` : d.reason,
    [...(d.suspects || []), ...(d.references || [])].join(", "),
    d.steps ? `${d.first_step}..${Number(d.first_step) + d.steps - 1}`
            : (d.kind === "stacks" ? `stacks at step ${d.first_step}` : ""),
    // A stack capture's rank is "signalled" once its sidecar sent the signal, or says why not.
    (d.answers || []).map(a => `${a.rank}: ${a.error ||
        (d.kind === "stacks" && a.state === "running" ? "signalled" : a.state || "no answer")}`)
        .join(", ")]));
}

let refreshing = false;

async function refresh() {
  if (refreshing) return;  // the timer and a hash change must not draw at once
  refreshing = true;
  view.job = hashParams().get("job") || "";
  try {
    const jobs = await refreshJobs();
    await refreshNodes();
    const job = jobs.find(j => j.job === view.job);
    el("job").hidden = !job;
    el("empty").hidden = !!job;
    el("empty").textContent =
        view.job ? `No job ${view.job} at this coordinator.` : "Pick a job.";
    if (job) await refreshJob(job);
    el("status").textContent = "updated " + new Date().toLocaleTimeString();
    el("token-form").hidden = true;
    view.refreshed++;
  } catch (e) {
    view.errors++;
    el("status").textContent = e.message;
    if (e.status === 401) el("token-form").hidden = false;
  } finally {
    refreshing = false;
  }
}

el("token-form").addEventListener("submit", ev => {
  ev.preventDefault();
  sessionStorage.setItem("sf-token", el("token").value);
  refresh();
});
window.addEventListener("hashchange", refresh);
// Until the first answer, say what is coming rather than "Pick a job.".
if (hashParams().get("job")) el("empty").textContent = `Loading job ${hashParams().get("job")}…`;
refresh();
setInterval(refresh, REFRESH_MS);
