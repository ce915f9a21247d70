// ---- the path of the focused token through the whole forward pass (inspection/views/path.py) ----------------
// Every number of the path comes from the page's data, the record of the model's own forward pass; nothing
// of it is computed here. The one rule computed here: the offline page's next-token bars apply model/sampling.py's
// sampling_probs to the last token's logits, so that they move with the settings without a server (docs/page.md:
// tests hold it equal to Python's on many random logits, ties included). A live page shows Python's list instead.

function setPath(path) {
  PATH = path || null;
  NEXT_LOGITS = PATH ? new Float32Array(bytesOf(PATH.next_logits)) : null;
  NEXT_FULL = PATH && PATH.next_logits_full ? new Float32Array(bytesOf(PATH.next_logits_full)) : null;
}

function pathVector(name, index) {  // "[ 0.1234, -0.5678, …]   |·| = 1.2345" of one vector of the record
  let dims = PATH[name + "_dims"], n = PATH[name + "_norm"];
  for (const i of index) { dims = dims[i]; n = n[i]; }
  return "[" + dims.map(fmt).join(",") + ", …]   |·| = " + n.toFixed(4);
}

// One step of the path: its text (what it computes and why), then its picture.
function pathStep(panel, text) {
  const step = el("div", "step");
  step.appendChild(el("p", "", text));
  panel.appendChild(step);
  return step;
}

function headLink(layer, h, i) {  // a head of the path: a click opens its walkthrough at this token
  const a = el("a", "headlink", headLH(layer, h));
  a.href = "#";
  a.addEventListener("click", (e) => {
    e.preventDefault();
    const li = LAYERS.indexOf(layer);
    if (li < 0) return;  // a layer the page left out
    state.li = li; state.head = String(h); state.focus = i; state.pinned = true;
    document.getElementById("layer").value = String(li);
    document.getElementById("head").value = state.head;
    if (EX) state.explain = { li, head: h, q: i };
    else if (LIVE && LIVE.shown) explainLater(li, h, i);
    render();
    document.getElementById("explain").scrollIntoView();
  });
  return a;
}

function renderPath() {
  const panel = document.getElementById("path");
  panel.replaceChildren();
  document.getElementById("path-section").hidden = !PATH;
  if (!PATH || state.focus === null) return;
  const P = PATH, id = P.ids[state.focus], label = (x) => P.labels[x];
  if (state.focus < P.first) {  // a live keystroke brings the last token's path; a click brings every token's
    panel.appendChild(el("p", "hint", t("page.path_click")));
    return;
  }
  const i = state.focus - P.first;  // the record's index of the focused token
  const at = state.focus;  // its position in the text
  panel.appendChild(el("h3", "", t("path.title", { i: at, token: "“" + label(id) + "”", id: id, T: P.T, L: P.L, C: P.C, V: P.V })));
  const embed = pathStep(panel, t("path.embed", { id: id, i: at, C: P.C }));
  for (const [name, text] of [["tok", "tok_emb[" + id + "]"], ["pos", "pos_emb[" + at + "]"], ["sum", "tok + pos"]])
    embed.appendChild(el("div", "vec path-" + name, text + " = " + pathVector(name, [i])));
  const b = P.blocks, mlp = b.active ? "" : "_no_mlp";  // an attention-only model: no MLP to name
  const blocks = pathStep(panel, t("path.blocks" + mlp, { C: P.C, H: P.H, d: P.d, i: at }));
  const largest = Math.max(...b.block_norm.map((row) => row[i]), P.sum_norm[i]);
  const norms = el("div", "norms");  // the picture: the stream's norm after each step, growing block by block
  const norm = (text, value) => {
    const row = el("div", "normrow");
    row.appendChild(el("span", "normname", text));
    row.appendChild(bar(value / largest, "#7f7f7f"));
    row.appendChild(el("span", "vec", " " + value.toFixed(4)));
    norms.appendChild(row);
  };
  norm("tok + pos", P.sum_norm[i]);
  for (let l = 0; l < P.L; l++) {
    norm("block " + l + " + attention", b.mid_norm[l][i]);
    if (b.active) norm("block " + l + " + MLP", b.block_norm[l][i]);
  }
  blocks.appendChild(norms);
  for (let l = 0; l < P.L; l++) {
    const block = el("div", "block");
    block.appendChild(el("div", "vec", t("path.block" + mlp, { layer: l, resid: b.resid_norm[l][i].toFixed(4),
      out: b.out_norm[l][i].toFixed(4), mid: b.mid_norm[l][i].toFixed(4), block: b.block_norm[l][i].toFixed(4) })));
    const rows = [];
    for (let h = 0; h < P.H; h++) {
      const j = b.key[l][h][i], a = b.att[l][h][i];
      const cell = el("span");
      cell.appendChild(bar(a));
      cell.appendChild(document.createTextNode(" " + a.toFixed(4)));
      const mode = b.off[l][h];  // a switched-off head's share is its replacement's (mean W_O, or 0)
      rows.push([{ node: headLink(l, h, at) }, TOKENS[j], String(j), { node: cell, cls: "barcell" }, b.share[l][h][i].toFixed(4),
                 mode ? offText(mode) : ""]);
    }
    richTable(block, ["head", t("path.key"), "j", "att", "|share|", ""], rows, "path-heads");
    const off = b.off[l].map((m, h) => (m ? headLHOff(l, h, m) : "")).filter((name) => name);
    if (off.length) block.appendChild(el("div", "vec", t("path.off_note", { heads: off.join(", ") })));
    if (b.active) block.appendChild(el("div", "vec", t("path.mlp", { mlp: b.mlp_norm[l][i].toFixed(4),
      active: (100 * b.active[l][i]).toFixed(1), hidden: 4 * P.C })));
    blocks.appendChild(block);
  }
  const final = pathStep(panel, t("path.final", { C: P.C, V: P.V }));
  final.appendChild(el("div", "vec", "ln_f = " + pathVector("final", [i])));
  final.appendChild(el("div", "vec", t("path.logits", { max: P.logit_max[i].toFixed(4), min: P.logit_min[i].toFixed(4) })));
  const S = P.sampling;
  for (const stage of S.stages) {
    const step = pathStep(panel, t("path." + stage.name, { value: stage.value === undefined ? "" : stage.value, kept: stage.kept[i], V: P.V }));
    const rows = stage.top[i].map((x, r) => {
      const cell = el("span");
      cell.appendChild(bar(stage.p[i][r]));
      cell.appendChild(document.createTextNode(" " + stage.p[i][r].toFixed(4)));
      return [String(r + 1), label(x), { node: cell, cls: "barcell" }].concat(stage.logit ? [stage.logit[i][r].toFixed(4)] : []);
    });
    richTable(step, [t("path.rank"), t("explain.token"), "p"].concat(stage.logit ? ["logit"] : []), rows, "path-" + stage.name);
  }
  const chosen = S.chosen[i];
  pathStep(panel, t("path.chosen", { token: "“" + label(chosen) + "”", id: chosen, p: S.chosen_p[i].toFixed(4), seed: S.seed }))
    .classList.add("chosen");
  pathStep(panel, t("path.hint")).classList.add("hint");
}

// ---- the next token's probabilities under the settings on the page: model/sampling.py's sampling_probs ----

function samplingProbs(logits, temperature, topK, topP) {  // Float32Array logits -> Float64Array probabilities
  const V = logits.length, z = new Float64Array(V);
  let top = -Infinity, arg = 0;
  for (let j = 0; j < V; j++) if (logits[j] > top) { top = logits[j]; arg = j; }
  if (temperature === 0) { z[arg] = 1; return z; }
  const tau = Math.max(temperature, 1.1754943508222875e-38);  // float32's smallest normal, as model.sampling
  for (let j = 0; j < V; j++) z[j] = (logits[j] - top) / tau;
  if (topK !== null && topK < V) {  // keep the k largest (ties with the k-th too)
    const kth = Float64Array.from(z).sort().reverse()[topK - 1];
    for (let j = 0; j < V; j++) if (z[j] < kth) z[j] = -Infinity;
  }
  if (topP !== null && topP < 1) {  // keep the smallest set of most likely tokens whose probability reaches p
    const order = Array.from(z.keys()).sort((a, b) => z[b] - z[a] || a - b), p = softmax(order.map((j) => z[j]));
    let before = 0;
    order.forEach((j, r) => { if (r > 0 && before >= topP) z[j] = -Infinity; before += p[r]; });
  }
  return Float64Array.from(softmax(Array.from(z)));
}

function softmax(values) {
  const top = Math.max(...values.filter((x) => x !== -Infinity));
  const e = values.map((x) => (x === -Infinity ? 0 : Math.exp(x - top))), sum = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / sum);
}

function showSettings() {  // the inputs start at the settings the path was drawn with, else at the defaults
  document.getElementById("temperature").value = String(DATA.temperature);  // model/sampling.py's TEMPERATURE
  if (!PATH) return;
  for (const stage of PATH.sampling.stages) {
    const input = document.getElementById(stage.name.replace("_", "-"));  // the page has no box for some settings
    if (input && stage.value !== undefined) input.value = String(stage.value);
  }
}

function samplingSettings() {  // the settings typed on the page (empty: not used)
  const value = (id) => document.getElementById(id).value;
  const opt = (id) => (value(id) === "" ? null : Number(value(id)));
  return { temperature: opt("temperature") ?? DATA.temperature, top_k: opt("top-k"), top_p: opt("top-p") };
}

function renderBars() {
  const panel = document.getElementById("bars");
  panel.replaceChildren();
  document.getElementById("sampling").hidden = !NEXT_LOGITS && !LIVE;  // a live page sends the settings
  if (!NEXT_LOGITS || LIVE) return;  // a live page shows the server's one list (live.js showNext), Python's
  const s = samplingSettings();
  if (!(s.temperature >= 0) || (s.top_k !== null && !(s.top_k >= 1)) || (s.top_p !== null && !(s.top_p > 0 && s.top_p <= 1))) {
    panel.appendChild(el("p", "bad", t("page.bad_settings")));
    return;
  }
  const p = samplingProbs(NEXT_LOGITS, s.temperature, s.top_k === null ? null : Math.floor(s.top_k), s.top_p);
  const top = (q) => Array.from(q.keys()).sort((a, b) => q[b] - q[a] || a - b).slice(0, 10).filter((j) => q[j] > 0);
  const kept = p.reduce((n, x) => n + (x > 0 ? 1 : 0), 0), name = (j) => PATH.labels[j] ?? "<id " + j + ">";
  panel.appendChild(el("p", "", t("page.bars", { token: "“" + TOKENS[T - 1] + "”", kept: kept, V: p.length })));
  if (!NEXT_FULL) {
    richTable(panel, [t("path.rank"), t("explain.token"), "p"], top(p).map((j, r) => [String(r + 1), name(j), barCell(p[j])]),
              "bars");
    return;
  }
  // heads switched off: before and after, the whole model's top tokens kept (grey bars) beside the ablated model's
  const full = samplingProbs(NEXT_FULL, s.temperature, s.top_k === null ? null : Math.floor(s.top_k), s.top_p);
  const before = top(full), rows = before.concat(top(p).filter((j) => !before.includes(j)));
  richTable(panel, [t("path.rank"), t("explain.token"), t("page.before_after"), t("page.after", { heads: offHeads() })],
            rows.map((j, r) => [String(r + 1), name(j), barCell(full[j], "before"), barCell(p[j])]), "bars before-after");
}

function offHeads() {  // "1.0, 0.3": the heads the page's model has switched off, in any layer
  return FRAME.off.flatMap((row, li) => row.map((m, h) => (m ? headLH(LAYERS[li], h) : "")).filter((x) => x)).join(", ");
}

// ---- the glossary (inspection/glossary.py), in the page's language ---------------------------------------

function renderGlossary() {
  const list = document.getElementById("glossary-list");
  list.replaceChildren();
  for (const [term, name, en, ko] of DATA.glossary) {  // the Korean name first, the English in brackets
    list.appendChild(el("dt", "", LANG === "ko" ? name : term));
    list.appendChild(el("dd", "", LANG === "ko" ? ko : en));
  }
}
