// ---- the walkthrough of one head at one query token, in the textbook's order --------------------

function fmt(x) { return (x < 0 ? "" : " ") + x.toFixed(4); }

function vec(a, n, total) {  // the first n values, then "…" when the vector has more (total: its length)
  const shown = Array.from(a.subarray(0, n), fmt).join(", ");
  return "[" + shown + ((total || a.length) > n ? ", …" : "") + "]";
}

function para(parent, cls, text) { const p = el("p", cls, text); parent.appendChild(p); return p; }

function tableOf(parent, header, rows, rowClass) {  // a cell: [class, text] or [class, text, colour, its value]
  const box = el("div", "box"), table = el("table"), tr = el("tr");
  for (const name of header) tr.appendChild(el("th", "", name));
  table.appendChild(tr);
  rows.forEach((cells, r) => {
    const row = el("tr", rowClass ? rowClass(r) : "");
    cells.forEach(([cls, text, colour, value]) => {
      const td = row.appendChild(el("td", cls, text));
      if (colour) { td.style.background = colour; td.dataset.v = String(value); }
    });
    table.appendChild(row);
  });
  box.appendChild(table);
  parent.appendChild(box);
  return table;
}

// ---- vectors as cells: one per dimension, red above 0, blue below, white at 0; the number on hover (title) and in
// data-v, the record's own. The colour is the only thing worked out here: how strong a number looks, never a number.

function mix(rgb, a) {  // white at a = 0, rgb at a = 1
  return "rgb(" + rgb.map((c) => Math.round(255 + (c - 255) * a)).join(",") + ")";
}

function diverging(x, scale) {
  return mix(x >= 0 ? [202, 0, 32] : [5, 113, 176], scale > 0 ? Math.min(1, Math.abs(x) / scale) : 0);
}

function attColour(w) { return mix([31, 119, 180], Math.max(0, Math.min(1, w))); }  // the heatmaps' blue, white at 0

function peak(...arrays) {  // the largest |value|: what a scale draws at full colour
  let m = 0;
  for (const a of arrays) for (const x of a) if (Math.abs(x) > m) m = Math.abs(x);
  return m;
}

const CELL = "padding:0;width:13px;min-width:13px;height:15px;border:1px solid #fff;";

function cellsOf(row, values, scale, name) {  // one <td> per value: name[c] = value on hover
  values.forEach((x, c) => {
    const td = row.appendChild(el("td", "cell"));
    td.style.cssText = CELL + "background:" + diverging(x, scale);
    td.title = name + "[" + c + "] = " + x.toFixed(4);
    td.dataset.v = String(x);
  });
}

// The cells of step 1 to 3 for the query i and its most attended key j: x_i and x_j (the record keeps their first
// dims values and norm), q, k_j, v_j and q ⊙ k_j (d values each), whose sum is q·k_j (step 3's column).
function vectorCells(panel, li, h, i, listed) {
  const d = EX.d, dims = EX.dims, j = headNumber("best", li, h, i), c = listed.find(([key]) => key === j)[1];
  para(panel, "ex-cells-hint", t("explain.cells", { i: i, j: j, token: "“" + TOKENS[j] + "”",
    w: att(li, h, i, j).toFixed(4) }));
  const table = el("table", "cells"), head = el("tr");
  head.appendChild(el("th", "", ""));
  for (let c = 0; c < d; c++) head.appendChild(el("th", "", c % 4 === 0 ? String(c) : ""));
  table.appendChild(head);
  const q = headVector("q", li, h, i), k = headVector("k", li, h, j), v = headVector("v", li, h, j);
  const qk = headVector("qk", li, h, i), xs = [shortVector("x", li, i), shortVector("x", li, j)];
  const xScale = peak(...xs.map((x) => x.subarray(0, dims))), scale = peak(q, k, v);
  const rows = [["x", "1. x_" + i, xs[0], "|x| = " + xs[0][dims].toFixed(4)],
                ["x", "1. x_" + j, xs[1], "|x| = " + xs[1][dims].toFixed(4)],
                ["q", "2. q", q, "|q| = " + headNumber("q_norm", li, h, i).toFixed(4)], ["k", "2. k_" + j, k, ""],
                ["v", "2. v_" + j, v, ""],
                ["qk", "3. q ⊙ k_" + j, qk, "Σ = q·k_" + j + " = " + headRow("dot", li, h, i, EX.K)[c].toFixed(4)]];
  for (const [cls, name, values, end] of rows) {
    const row = el("tr", "ex-" + cls);
    row.appendChild(el("td", "tokname", name));
    if (cls === "x") {  // its first dims of C values, then how many more
      cellsOf(row, values.subarray(0, dims), xScale, name.slice(3));
      const more = row.appendChild(el("td", "more", "… " + (EX.C - dims)));
      more.colSpan = Math.max(1, d - dims);
    } else cellsOf(row, values, cls === "qk" ? peak(qk) : scale, name.slice(3));
    row.appendChild(el("td", "end", end));
    table.appendChild(row);
  }
  panel.appendChild(table);
}

// Step 7 drawn: the value rows v_j of the listed keys the query sees, each as strong as its weight w_j (a bar), and
// under them their weighted sum y, all in one scale.
function valueStack(panel, li, h, i, listed) {
  const rows = listed.filter(([j]) => j <= i).map(([j]) => j), y = headVector("y", li, h, i);
  const vs = rows.map((j) => headVector("v", li, h, j)), scale = peak(y, ...vs);
  para(panel, "ex-stack-hint", t("explain.stack"));
  const table = el("table", "cells ex-stack");
  rows.forEach((j, r) => {
    const w = att(li, h, i, j), row = el("tr", "ex-wv" + (j === i ? " query" : ""));
    row.dataset.j = String(j);
    row.appendChild(el("td", "j", String(j)));
    row.appendChild(el("td", "tokname", TOKENS[j]));
    const weight = row.appendChild(el("td", "barcell"));
    const cell = barCell(w);
    weight.appendChild(cell.node);
    weight.dataset.v = String(w);
    cellsOf(row, vs[r], scale, "v_" + j);
    for (const td of row.querySelectorAll("td.cell")) td.style.opacity = String(Math.max(0.03, w));  // as w_j v_j
    table.appendChild(row);
  });
  const sum = el("tr", "ex-ysum");
  sum.appendChild(el("td", "j", ""));
  sum.appendChild(el("td", "tokname", "y"));
  sum.appendChild(el("td", "", "Σ_j w_j v_j ="));
  cellsOf(sum, y, scale, "y");
  sum.style.borderTop = "2px solid #333";
  table.appendChild(sum);
  panel.appendChild(table);
}

function renderExplain() {
  renderCache();
  const panel = document.getElementById("explain");
  panel.replaceChildren();
  if (!EX || !state.explain) return;
  const { li, head: h, q: i } = state.explain, d = EX.d, root = Math.sqrt(d), dims = EX.dims;
  // the texts are the terminal's (explain.*, inspection/views/walkthrough.py), the same steps in the same words
  panel.appendChild(el("h2", "", t("explain.title", { layer: LAYERS[li], head: h, i: i, token: "“" + TOKENS[i] + "”", T: T,
    C: EX.C, H: H, d: d })));
  const off = EX.off[li][h];  // "" when on; else its y below is what replaced it (inspection/trace.py)
  if (off) para(panel, "ex-off", t("explain.off", { layer: LAYERS[li], head: h, mode: t("ablate." + off) }));
  para(panel, "", t("explain.step1", { i: i, masked: i < T - 1 ? t("explain.masked_later") : "" }));
  para(panel, "", t("explain.x", { dims: dims, C: EX.C }));
  const q = headVector("q", li, h, i);
  para(panel, "", t("explain.step2", { head: h, i: i, C: EX.C, d: d }));
  para(panel, "vec ex-q", "q = " + vec(q, dims) + "   |q| = " + headNumber("q_norm", li, h, i).toFixed(4));
  // the keys Python lists (inspection.views.walkthrough.listed_keys), with the column of each in the record
  const listed = Array.from(headRow("keys", li, h, i, EX.K)).map((j, c) => [j, c]).filter(([j]) => j >= 0);
  vectorCells(panel, li, h, i, listed);
  para(panel, "", t("explain.step34", { d: d, C: EX.C, H: H, root: root.toFixed(4) }));
  para(panel, "", t("explain.step56"));
  const seen = listed.filter(([j]) => j <= i).length;
  if (seen < i + 1) para(panel, "ex-some", t("explain.some_keys", { shown: seen, n: i + 1 }));
  const gap = (cells) => cells.map(([cls]) => [cls, cls === "j" ? "…" : ""]);
  const rowsOf = (cells) => {  // one row per key, and a "…" row wherever keys are skipped, as the terminal does
    const rows = [], keys = [];
    listed.forEach(([j, c], r) => {
      if (r > 0 && j > listed[r - 1][0] + 1) { rows.push(gap(cells(j, c))); keys.push(-1); }
      rows.push(cells(j, c)); keys.push(j);
    });
    return [rows, (r) => (keys[r] === i ? "query" : keys[r] > i ? "masked" : keys[r] < 0 ? "gap" : "")];
  };
  const tables = el("div", "tables");
  const [vectors, vectorClass] = rowsOf((j) => {
    const x = shortVector("x", li, j), k = headVector("k", li, h, j), v = headVector("v", li, h, j);
    return [["j", String(j)], ["tokname", TOKENS[j]], ["x", vec(x, dims, EX.C)], ["xn", x[dims].toFixed(4)],
            ["k", vec(k, dims)], ["v", vec(v, dims)]];
  });
  const numbers = el("details", "ex-numbers");  // the cells' numbers as the terminal prints them, folded
  numbers.appendChild(el("summary", "", t("explain.numbers")));
  tableOf(numbers, ["j", t("explain.token"), "1. x_j", "|x_j|", "2. k_j", "v_j"], vectors, vectorClass).id =
    "ex-vectors";
  // steps 3 to 6 as coloured columns, a cell per key: q·k_j and ÷√d_k each in its own scale, the masked keys grey
  const dots = headRow("dot", li, h, i, EX.K), scaled = headRow("scaled", li, h, i, EX.K);
  const cs = listed.filter(([j]) => j <= i).map(([, c]) => c);  // the scales: the keys the query sees
  const dotScale = peak(cs.map((c) => dots[c])), scaledScale = peak(cs.map((c) => scaled[c]));
  const later = (colour, j) => j > i ? "#eee" : colour;  // a key after the query: grey, as masked it counts for nothing
  const [scores, scoreClass] = rowsOf((j, c) => [["j", String(j)], ["tokname", TOKENS[j]],
    ["s", fmt(dots[c]), later(diverging(dots[c], dotScale), j), dots[c]],
    ["ss", fmt(scaled[c]), later(diverging(scaled[c], scaledScale), j), scaled[c]],
    j > i ? ["m", "−∞", "#ccc", "-Infinity"] : ["m", fmt(scaled[c]), diverging(scaled[c], scaledScale), scaled[c]],
    ["w", att(li, h, i, j).toFixed(4), attColour(att(li, h, i, j)), att(li, h, i, j)]]);
  tableOf(tables, ["j", t("explain.token"), "3. q·k_j", "4. ÷√d_k", "5. " + t("explain.masked"), "6. w_j"], scores, scoreClass).id = "ex-keys";
  tables.appendChild(numbers);
  panel.appendChild(tables);
  if (T - 1 - i > EX.future) para(panel, "ex-more", t("explain.more_masked", { n: T - 1 - i - EX.future }));
  para(panel, "vec ex-sum", "Σ w_j = " + headNumber("sum", li, h, i).toFixed(4));
  // why, in this head's numbers (inspection.views.walkthrough.why_numbers: Python's, not recomputed here)
  const why = (k) => EX.why[((k * L + li) * H + h) * T + i];
  para(panel, "why ex-why-qkv", t("explain.why_qkv", { i: i }));
  para(panel, "why ex-why-scale", t("explain.why_scale", { d: d, before: why(0).toFixed(4), after: why(1).toFixed(4),
    largest: why(2).toFixed(4), undivided: why(3).toFixed(4) }));
  para(panel, "why ex-why-mask", t("explain.why_mask"));
  const y = headVector("y", li, h, i);
  const yNorm = headNumber("y_norm", li, h, i).toFixed(4);
  para(panel, "vec ex-y", off ? t("explain.step7_off", { y: vec(y, dims), norm: yNorm })
                              : "7. y = Σ_j w_j v_j = " + vec(y, dims) + "   |y| = " + yNorm);
  valueStack(panel, li, h, i, listed);
  para(panel, "", t("explain.largest"));
  const topKeys = headRow("top", li, h, i, EX.topN), sizes = headRow("top_size", li, h, i, EX.topN);
  const terms = headRow("top_terms", li, h, i, EX.topN * dims);
  const top = [];
  topKeys.forEach((j, r) => {
    if (j > i) return;  // a key after the query adds nothing
    top.push([["j", String(j)], ["tokname", TOKENS[j]], ["w", att(li, h, i, j).toFixed(4)],
              ["vn", headNumber("v_norm", li, h, j).toFixed(4)], ["c", sizes[r].toFixed(4)],
              ["wv", vec(terms.subarray(r * dims, (r + 1) * dims), dims, d)]]);
  });
  tableOf(panel, ["j", t("explain.token"), "w_j", "|v_j|", "w_j |v_j|", "w_j v_j"], top).id = "ex-top";
  para(panel, "why ex-why-mix", t("explain.why_mix", { share: (100 * why(4)).toFixed(1) }));
  const out = shortVector("out", li, i), lo = h * d;
  para(panel, "", t("explain.step8", { d: d, lo: lo, last: lo + d - 1, C: EX.C, H: H, i: i }));
  para(panel, "vec ex-out", "out_" + i + " = " + vec(out, dims, EX.C) +
    "   |out| = " + out[dims].toFixed(4));
  para(panel, "", t("explain.residual", { i: i, mlp: PATH && PATH.blocks.active ? t("explain.mlp_follows") : "" }));
  if (PATH && i >= PATH.first) {  // each head's share of out, from the path record
    const shares = PATH.blocks.share[LAYERS[li]].map((row, g) => g + ": " + row[i - PATH.first].toFixed(4) +
      (EX.off[li][g] ? t("explain.off_mark") : ""));
    para(panel, "why ex-why-heads", t("explain.why_heads", { shares: shares.join(", ") }));
  }
  para(panel, "why hint", t(off ? "explain.off_hint" : "path.hint"));
}

// ---- the KV cache of a decoding (the stepper, page/controls.js): at each step only the new token's k, v and q are
// computed; the keys and values before it are read from the cache. Drawn for one head (the walkthrough's, else the
// first shown) from the walkthrough's k, v and q, which one forward over the same tokens recorded: what the cache held
// (tests/test_kv_cache.py: cached and full forwards agree).

let cacheDrawn = "";  // what the section shows now, so that a hover redraws nothing
let CACHE_ROWS = 64;  // rows drawn at most: a 1,024-token decoding stays a light table (a test lowers it)

function renderCache() {
  const section = document.getElementById("kv-section");
  section.hidden = !EX || PREFILL >= T;
  const li = state.li, h = section.hidden ? 0 : explainHead(), n = state.limit, newest = n - 1, step = n - PREFILL;
  const drawn = [section.hidden, LANG, li, h, n, state.frame].join();
  if (drawn === cacheDrawn) return;
  cacheDrawn = drawn;
  const box = document.getElementById("kv");
  box.replaceChildren();
  if (section.hidden) return;
  para(box, "kv-caption", step === 0 ? t("page.kv_prefill", { layer: LAYERS[li], head: h, last: newest, keys: n })
    : t("page.kv_step", { layer: LAYERS[li], head: h, step: step, last: newest, token: TOKENS[newest], keys: n }));
  const d = EX.d, ks = [], vs = [];
  for (let j = 0; j < T; j++) { ks.push(headVector("k", li, h, j)); vs.push(headVector("v", li, h, j)); }
  const kScale = peak(...ks), vScale = peak(...vs), q = headVector("q", li, h, newest);
  const table = el("table", "cells kv"), head = el("tr");
  table.style.cssText = "border-collapse:collapse;font-size:12px;";
  for (const [name, span] of [["j", 1], [t("explain.token"), 1], ["K", d], ["", 1], ["V", d], ["", 1],
                              ["q_" + newest, d], ["", 1]]) head.appendChild(el("th", "", name)).colSpan = span;
  table.appendChild(head);
  const first = Math.max(0, n - CACHE_ROWS);  // a long text: its last rows drawn, the earlier ones counted
  if (first > 0) {
    const more = table.appendChild(el("tr", "kv-more")).appendChild(el("td", "", t("page.kv_more", { n: first })));
    more.colSpan = 3 * d + 5;
  }
  for (let j = first; j < n; j++) {  // a row per token so far: the ones the cache holds, and this step's
    const fresh = step === 0 || j === newest, row = el("tr", "kv-row" + (fresh ? " new" : ""));
    row.dataset.j = String(j);
    row.appendChild(el("td", "j", String(j)));
    row.appendChild(el("td", "tokname", TOKENS[j]));
    cellsOf(row, ks[j], kScale, "k_" + j);
    row.appendChild(el("td", "gap", ""));
    cellsOf(row, vs[j], vScale, "v_" + j);
    row.appendChild(el("td", "gap", ""));
    if (j === newest) {
      cellsOf(row, q, peak(q), "q_" + j);
      if (step > 0) for (const td of row.querySelectorAll("td.cell")) td.style.borderColor = "#d62728";
      row.appendChild(el("td", "kv-mark", "← " + t(step === 0 ? "page.kv_prefilled" : "page.kv_new")));
    } else row.appendChild(el("td", "kv-mark", "")).colSpan = d + 1;
    table.appendChild(row);
  }
  const scroll = el("div", "box");
  scroll.style.cssText = "max-height:30em;overflow:auto;display:inline-block;border:1px solid #ddd;";
  scroll.appendChild(table);
  box.appendChild(scroll);
  scroll.scrollTop = scroll.scrollHeight;  // the newest row in view
}
