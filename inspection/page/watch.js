// The live training page: asks /api/state for what is new every DATA.ask_every_ms and draws each run in a column,
// every run on one step axis. It draws the records inspection/watch.py made (losses, role scores and their bars, each
// head's cost, the maps of the text); it computes nothing but positions and colours.

const W = { version: null, runs: [], maps: DATA.runs.map(() => ({})), typed: null, pick: DATA.runs.map(() => null),
            lang: DATA.lang, updates: 0, lost: false };
window.watched = W;  // for tests: how many states arrived, and the last one

function say(key, fields = {}) {
  const texts = DATA.messages[key];
  const text = texts ? texts[W.lang === "ko" ? 1 : 0] : key;
  return text.replace(/\{(\w+)(?::[^}]*)?\}/g, (m, name) => (name in fields ? String(fields[name]) : m));
}

const el = (tag, attrs = {}, text = "") => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text) e.textContent = text;
  return e;
};
const fmt = (x, digits = 4) => (x === null || x === undefined ? "–" : Number(x).toFixed(digits));
const roleName = (role) => say("role." + role);

// ---- asking the server --------------------------------------------------------------------------------------

async function ask() {
  try {
    const answer = await fetch("/api/state" + (W.version === null ? "" : "?since=" + W.version), { cache: "no-store" });
    const state = await answer.json();
    W.lost = false;
    if (state.runs) {
      W.version = state.version;
      W.runs = state.runs;
      W.updates += 1;
      if (!W.font && W.runs.every((r) => r.tokens)) {  // the tokens' glyphs, once every run's tokenizer is read
        W.font = document.head.appendChild(el("link", { rel: "stylesheet", href: "/font.css" }));
      }
      if (W.typed) await showText(W.typed.text, true);  // the new evaluations' maps of the typed text too
      draw();
    }
  } catch (e) {
    if (!W.lost) { W.lost = true; drawStatus(); }
  }
  setTimeout(ask, DATA.ask_every_ms);
}

async function mapsOf(i, step) {
  if (W.typed) return W.typed.runs[i].maps[step] ? { att: W.typed.runs[i].maps[step], tokens: W.typed.runs[i].tokens } : null;
  if (!(step in W.maps[i])) {
    const answer = await fetch(`/api/maps?run=${i}&step=${step}`, { cache: "no-store" });
    if (!answer.ok) return null;
    W.maps[i][step] = await answer.json();
  }
  return W.maps[i][step];
}

async function showText(text, quiet = false) {
  const answer = await fetch("/api/text", { method: "POST", headers: { "Content-Type": "application/json" },
                                            body: JSON.stringify({ text, client: "watch" }) });
  const found = await answer.json();
  if (!answer.ok) { document.getElementById("errors").textContent = found.error || ""; return; }
  document.getElementById("errors").textContent = "";
  W.typed = { text, runs: found.runs };
  if (!quiet) draw();
}

// ---- drawing --------------------------------------------------------------------------------------------------

function lastStep() {  // the shared step axis: the longest run's planned steps
  return Math.max(1, ...W.runs.map((r) => Math.max(r.max_steps || 0, ...r.evals.map((e) => e.step))));
}

function drawStatus() {
  document.getElementById("title").textContent = say("page.watch_title") + ": " + DATA.runs.join(" | ");
  const status = W.runs.map((r) => {
    if (r.final) return say("page.watch_ended", { step: r.final.step });
    if (!r.evals.length) return say("page.watch_waiting");
    return say("page.watch_status", { step: r.evals[r.evals.length - 1].step, max: r.max_steps, n: r.evals.length });
  }).join(" | ");
  document.getElementById("status").textContent = W.lost ? say("page.watch_lost") : status;
}

function draw() {
  drawStatus();
  document.getElementById("text-label").textContent = say("page.watch_text");
  document.getElementById("show").textContent = say("page.watch_show");
  document.getElementById("reset").textContent = say("page.watch_reset");
  const box = document.getElementById("runs");
  box.style.gridTemplateColumns = `repeat(${W.runs.length}, minmax(0, 1fr))`;
  W.runs.forEach((run, i) => {
    let column = box.querySelector(`.run[data-run="${i}"]`);
    if (!column) { column = el("section", { class: "run", "data-run": i }); box.appendChild(column); }
    drawRun(column, run, i);
  });
}

function drawRun(column, run, i) {
  const scroll = column.querySelector("input[type=range]");
  const pinned = scroll && scroll.dataset.pinned === "1";
  column.replaceChildren(el("h2", {}, run.name));
  const formed = el("div", { class: "formed" });
  for (const role of ["previous-token", "induction"]) {
    const first = run.formed.find((f) => f.role === role);
    const bar = run.evals.length ? run.evals[0].bars[role] : null;
    formed.appendChild(first
      ? el("span", { class: "yes", "data-role": role, "data-step": first.step },
           say("page.watch_formed", { role: roleName(role), step: first.step, head: `${first.layer}.${first.head}` }))
      : el("span", { class: "no" }, say("page.watch_not_formed", { role: roleName(role), bar: fmt(bar, 2) })));
  }
  column.appendChild(formed);
  column.appendChild(latestTable(run));
  const xmax = lastStep();
  column.appendChild(el("h3", {}, say("page.watch_loss")));
  column.appendChild(chart(run, xmax, [
    { points: run.logged, colour: "#bbb", label: say("page.watch_logged") },
    { points: run.evals.map((e) => [e.step, e.train_loss]), colour: "#1f77b4", label: say("page.watch_train") },
    { points: run.evals.map((e) => [e.step, e.val_loss]), colour: "#ff7f0e", label: say("page.watch_val") }]));
  column.appendChild(el("h3", {}, say("page.watch_bpc")));
  column.appendChild(chart(run, xmax, [
    { points: run.evals.filter((e) => e.bpc !== undefined).map((e) => [e.step, e.bpc]), colour: "#2ca02c",
      label: say("page.watch_val") }]));
  column.appendChild(el("h3", {}, say("page.watch_roles")));
  const roles = el("div", { class: "grid roles" });
  const names = run.evals.length ? Object.keys(run.evals[0].scores) : [];
  for (const role of names) {
    roles.appendChild(heatmap(run, role, roleName(role), (e) => e.scores[role], 1, run.evals[0].bars[role], xmax));
  }
  column.appendChild(roles);
  column.appendChild(el("h3", {}, say("page.watch_costs")));
  const costs = el("div", { class: "grid costs" });
  if (run.evals.some((e) => e.costs)) {
    const top = Math.max(1, ...run.evals.filter((e) => e.costs).map((e) => Math.max(...e.costs.drop.flat(), ...e.costs.loss.flat())));
    costs.appendChild(heatmap(run, "loss", say("page.watch_cost_loss"), (e) => e.costs && e.costs.loss, top, null, xmax));
    costs.appendChild(heatmap(run, "drop", say("page.watch_cost_drop"), (e) => e.costs && e.costs.drop, top, null, xmax));
  } else {
    costs.appendChild(el("p", { class: "note" }, say("page.watch_no_costs")));
  }
  column.appendChild(costs);
  column.appendChild(el("h3", {}, say("page.watch_maps")));
  drawMaps(column, run, i, pinned ? Number(scroll.value) : null);
  const sampled = run.evals.filter((e) => e.sample);
  if (sampled.length) {
    const last = sampled[sampled.length - 1];
    column.appendChild(el("h3", {}, say("page.watch_sample", { step: last.step })));
    column.appendChild(el("p", { class: "sample" }, last.sample));
  }
}

function latestTable(run) {
  const table = el("table", { class: "latest" });
  const head = el("tr");
  for (const name of say("page.watch_columns").split("|")) head.appendChild(el("th", {}, name));
  table.appendChild(head);
  const e = run.evals[run.evals.length - 1];
  if (e) {
    const row = el("tr", { "data-step": e.step });
    for (const [key, value] of [["step", String(e.step)], ["train_loss", fmt(e.train_loss)], ["val_loss", fmt(e.val_loss)],
                                ["bpc", fmt(e.bpc)], ["loss_drop", fmt(e.loss_drop)]]) {
      row.appendChild(el("td", { "data-key": key }, value));
    }
    table.appendChild(row);
  }
  return table;
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs = {}, text = "") {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text) e.textContent = text;
  return e;
}

function chart(run, xmax, series) {  // lines over the shared step axis, with the moments the heads formed
  const w = 520, h = 170, left = 44, right = 24, top = 8, bottom = 22;
  const all = series.flatMap((s) => s.points.map((p) => p[1])).filter((y) => y !== null && Number.isFinite(y));
  const lo = all.length ? Math.min(...all) : 0, hi = all.length ? Math.max(...all) : 1;
  const pad = (hi - lo) * 0.05 || 0.5;
  const x = (s) => left + (s / xmax) * (w - left - right);
  const y = (v) => top + (1 - (v - lo + pad) / (hi - lo + 2 * pad)) * (h - top - bottom);
  const box = svg("svg", { viewBox: `0 0 ${w} ${h}`, width: "100%", class: "chart" });
  box.style.maxWidth = w * 1.4 + "px";
  box.appendChild(svg("line", { x1: left, y1: h - bottom, x2: w - right, y2: h - bottom, stroke: "#999" }));
  box.appendChild(svg("line", { x1: left, y1: top, x2: left, y2: h - bottom, stroke: "#999" }));
  for (const v of [lo, (lo + hi) / 2, hi]) box.appendChild(svg("text", { x: 2, y: y(v) + 4 }, fmt(v, 2)));
  for (const s of [0, xmax / 2, xmax]) box.appendChild(svg("text", { x: x(s), y: h - 6, "text-anchor": "middle" }, String(Math.round(s))));
  for (const f of ["previous-token", "induction"].map((r) => run.formed.find((g) => g.role === r)).filter(Boolean)) {
    box.appendChild(svg("line", { x1: x(f.step), x2: x(f.step), y1: top, y2: h - bottom, stroke: "#e08a00",
                                  "stroke-dasharray": "4 3", class: "mark" }));
    box.appendChild(svg("text", { x: x(f.step) + 3, y: top + 10 + (f.role === "induction" ? 12 : 0) },
                        say("page.watch_formed", { role: roleName(f.role), step: f.step, head: `${f.layer}.${f.head}` })));
  }
  series.forEach((s, k) => {
    const pts = s.points.filter((p) => p[1] !== null && Number.isFinite(p[1]));
    if (pts.length) {
      box.appendChild(svg("polyline", { points: pts.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" "),
                                        fill: "none", stroke: s.colour, "stroke-width": k === 0 && series.length > 1 ? 1 : 2 }));
    }
  });
  const legend = el("div", { class: "legend" });
  for (const s of series) {
    const key = el("span", {}, "— " + s.label);
    key.style.color = s.colour;
    legend.appendChild(key);
  }
  const part = el("div");
  part.append(legend, box);
  return part;
}

function colour(v, top) {  // 0 white .. top dark blue; a negative cost light red
  if (v === null || v === undefined || !Number.isFinite(v)) return "#eee";
  const t = Math.max(-1, Math.min(1, v / top));
  if (t < 0) return `rgb(255,${Math.round(255 + 80 * t)},${Math.round(255 + 80 * t)})`;
  return `rgb(${Math.round(255 - 225 * t)},${Math.round(255 - 170 * t)},${Math.round(255 - 75 * t)})`;
}

function heatmap(run, key, title, table, top, bar, xmax) {  // rows: layer.head; columns: the evaluations
  const L = run.n_layer, H = run.n_head, cw = Math.max(3, Math.min(14, Math.floor(420 / Math.max(1, run.evals.length))));
  const ch = 10, left = 28;
  const canvas = el("canvas", { width: left + cw * run.evals.length + 1, height: ch * L * H + 1, "data-key": key });
  const g = canvas.getContext("2d");
  g.font = "9px sans-serif";
  for (let li = 0; li < L; li++) {
    for (let h = 0; h < H; h++) {
      const row = li * H + h;
      g.fillStyle = "#444";
      g.fillText(`${li}.${h}`, 2, row * ch + 8);
      run.evals.forEach((e, c) => {
        const t = table(e), v = t ? t[li][h] : null;
        g.fillStyle = colour(v, top);
        g.fillRect(left + c * cw, row * ch, cw, ch);
        if (bar !== null && v !== null && v >= bar) {
          g.fillStyle = "#e08a00";
          g.fillRect(left + c * cw + cw / 2 - 1.5, row * ch + 3.5, 3, 3);
        }
      });
    }
  }
  canvas.addEventListener("mousemove", (ev) => {
    const c = Math.floor((ev.offsetX - left) / cw), row = Math.floor(ev.offsetY / ch);
    const e = run.evals[c], t = e && table(e);
    canvas.title = t && row < L * H ? say("page.watch_cell", { head: `${Math.floor(row / H)}.${row % H}`, step: e.step,
                                                                 value: fmt(t[Math.floor(row / H)][row % H], 3) }) : "";
  });
  const figure = el("figure");
  figure.appendChild(el("figcaption", {}, title));
  figure.appendChild(canvas);
  return figure;
}

function drawMaps(column, run, i, chosen) {
  const steps = W.typed ? Object.keys(W.typed.runs[i].maps).map(Number).sort((a, b) => a - b)
                        : run.evals.filter((e) => e.maps).map((e) => e.step);
  const part = el("div", { class: "maps" });
  column.appendChild(part);
  if (!steps.length) { part.appendChild(el("p", { class: "note" }, say("page.watch_no_maps"))); return; }
  const k = chosen === null ? steps.length - 1 : Math.min(chosen, steps.length - 1);
  const scroll = el("input", { type: "range", min: 0, max: steps.length - 1, value: k, step: 1 });
  scroll.dataset.pinned = chosen === null ? "0" : "1";
  const label = el("span", { class: "at" });
  const grid = el("div", { class: "grid" }), tokens = el("div", { class: "tokens" });
  const show = async () => {
    const step = steps[Number(scroll.value)];
    label.textContent = " " + say("page.watch_at", { step, k: Number(scroll.value) + 1, n: steps.length });
    const maps = await mapsOf(i, step);
    if (maps) drawHeads(grid, tokens, maps, run.evals.find((e) => e.step === step));
  };
  scroll.addEventListener("input", () => { scroll.dataset.pinned = Number(scroll.value) === steps.length - 1 ? "0" : "1"; show(); });
  part.append(scroll, label, tokens, grid);
  show();
}

function drawHeads(grid, tokens, maps, scored) {  // `scored`: the evaluation shown, whose roles name the heads
  const T = maps.tokens.length, size = Math.max(90, Math.min(160, 6 * T)), cell = size / T;
  tokens.textContent = maps.tokens.join(" · ");
  grid.replaceChildren();
  maps.att.forEach((layer, li) => layer.forEach((att, h) => {
    const canvas = el("canvas", { width: size, height: size, "data-head": `${li}.${h}` });
    const g = canvas.getContext("2d");
    att.forEach((row, q) => row.forEach((w, k) => {
      if (k <= q) { g.fillStyle = colour(w, 1); g.fillRect(k * cell, q * cell, Math.ceil(cell), Math.ceil(cell)); }
    }));
    canvas.addEventListener("mousemove", (ev) => {
      const q = Math.floor(ev.offsetY / cell), k = Math.floor(ev.offsetX / cell);
      canvas.title = q < T && k <= q ? `${maps.tokens[q]} → ${maps.tokens[k]}: ${fmt(att[q][k], 3)}` : "";
    });
    const figure = el("figure");
    const best = scored ? Object.entries(scored.scores).sort((a, b) => b[1][li][h] - a[1][li][h])[0] : null;
    figure.appendChild(el("figcaption", {}, `${li}.${h}` + (best ? ` ${roleName(best[0])} ${fmt(best[1][li][h], 2)}` : "")));
    figure.appendChild(canvas);
    grid.appendChild(figure);
  }));
}

// ---- controls -------------------------------------------------------------------------------------------------

document.getElementById("lang").value = W.lang;
document.getElementById("lang").addEventListener("change", (ev) => { W.lang = ev.target.value; draw(); });
document.getElementById("show").addEventListener("click", () => {
  const text = document.getElementById("text").value;
  if (text.trim()) showText(text);
});
document.getElementById("reset").addEventListener("click", () => { W.typed = null; draw(); });
window.addEventListener("error", (ev) => { document.getElementById("errors").textContent += ev.message + "\n"; });
draw();
ask();
