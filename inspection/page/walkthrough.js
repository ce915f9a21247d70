// ---- the walkthrough of one head at one query token, in the textbook's order --------------------

function fmt(x) { return (x < 0 ? "" : " ") + x.toFixed(4); }

function vec(a, n, total) {  // the first n values, then "…" when the vector has more (total: its length)
  const shown = Array.from(a.subarray(0, n), fmt).join(", ");
  return "[" + shown + ((total || a.length) > n ? ", …" : "") + "]";
}

function norm(a) { let s = 0; for (const x of a) s += x * x; return Math.sqrt(s); }

function dot(a, b) { let s = 0; for (let i = 0; i < a.length; i++) s += a[i] * b[i]; return s; }

function para(parent, cls, text) { const p = el("p", cls, text); parent.appendChild(p); return p; }

function tableOf(parent, header, rows, rowClass) {
  const box = el("div", "box"), table = el("table"), tr = el("tr");
  for (const name of header) tr.appendChild(el("th", "", name));
  table.appendChild(tr);
  rows.forEach((cells, r) => {
    const row = el("tr", rowClass ? rowClass(r) : "");
    cells.forEach(([cls, text]) => row.appendChild(el("td", cls, text)));
    table.appendChild(row);
  });
  box.appendChild(table);
  parent.appendChild(box);
  return table;
}

function renderExplain() {
  const panel = document.getElementById("explain");
  panel.replaceChildren();
  if (!EX || !state.explain) return;
  const { li, head: h, q: i } = state.explain, d = EX.d, root = Math.sqrt(d), dims = EX.dims;
  // the texts are the terminal's (explain.*, inspection/explain.py), the same steps in the same words
  panel.appendChild(el("h2", "", t("explain.title", { layer: LAYERS[li], head: h, i: i, token: "“" + TOKENS[i] + "”", T: T,
    C: EX.C, H: H, d: d })));
  para(panel, "", t("explain.step1", { i: i, masked: i < T - 1 ? t("explain.masked_later") : "" }));
  para(panel, "", t("explain.x", { dims: dims, C: EX.C }));
  const q = headVector("q", li, h, i);
  para(panel, "", t("explain.step2", { head: h, i: i, C: EX.C, d: d }));
  para(panel, "vec ex-q", "q = " + vec(q, dims) + "   |q| = " + norm(q).toFixed(4));
  para(panel, "", t("explain.step34", { d: d, C: EX.C, H: H, root: root.toFixed(4) }));
  para(panel, "", t("explain.step56"));
  const keys = [];
  for (let j = 0; j <= Math.min(T - 1, i + 3); j++) keys.push(j);
  const rowClass = (r) => (keys[r] === i ? "query" : keys[r] > i ? "masked" : "");
  const tables = el("div", "tables");
  const vectors = keys.map((j) => {
    const x = shortVector("x", li, j), k = headVector("k", li, h, j), v = headVector("v", li, h, j);
    return [["j", String(j)], ["tokname", TOKENS[j]], ["x", vec(x, dims, EX.C)], ["xn", x[dims].toFixed(4)],
            ["k", vec(k, dims)], ["v", vec(v, dims)]];
  });
  tableOf(tables, ["j", t("explain.token"), "1. x_j", "|x_j|", "2. k_j", "v_j"], vectors, rowClass).id = "ex-vectors";
  const scores = keys.map((j) => {
    const s = dot(q, headVector("k", li, h, j));
    return [["j", String(j)], ["tokname", TOKENS[j]], ["s", fmt(s)], ["ss", fmt(s / root)],
            ["m", j > i ? "−∞" : fmt(s / root)], ["w", att(li, h, i, j).toFixed(4)]];
  });
  tableOf(tables, ["j", t("explain.token"), "3. q·k_j", "4. ÷√d_k", "5. " + t("explain.masked"), "6. w_j"], scores, rowClass).id = "ex-keys";
  panel.appendChild(tables);
  if (T - 1 > i + 3) para(panel, "ex-more", t("explain.more_masked", { n: T - 1 - i - 3 }));
  let sum = 0;
  for (let j = 0; j <= i; j++) sum += att(li, h, i, j);
  para(panel, "vec ex-sum", "Σ w_j = " + sum.toFixed(4));
  // why, in this head's numbers (inspection.explain.why_numbers: Python's, not recomputed here)
  const why = (k) => EX.why[((k * L + li) * H + h) * T + i];
  para(panel, "why ex-why-qkv", t("explain.why_qkv", { i: i }));
  para(panel, "why ex-why-mask", t("explain.why_mask"));
  para(panel, "why ex-why-scale", t("explain.why_scale", { d: d, before: why(0).toFixed(4), after: why(1).toFixed(4),
    largest: why(2).toFixed(4), undivided: why(3).toFixed(4) }));
  const y = headVector("y", li, h, i);
  para(panel, "vec ex-y", "7. y = Σ_j w_j v_j = " + vec(y, dims) + "   |y| = " + norm(y).toFixed(4));
  para(panel, "", t("explain.largest"));
  const size = [];
  for (let j = 0; j <= i; j++) size.push([att(li, h, i, j) * norm(headVector("v", li, h, j)), j]);
  size.sort((a, b) => b[0] - a[0] || a[1] - b[1]);
  const top = size.slice(0, 3).map(([s, j]) => {
    const w = att(li, h, i, j), v = headVector("v", li, h, j);
    return [["j", String(j)], ["tokname", TOKENS[j]], ["w", w.toFixed(4)], ["vn", norm(v).toFixed(4)],
            ["c", s.toFixed(4)], ["wv", vec(v.map((x) => w * x), dims)]];
  });
  tableOf(panel, ["j", t("explain.token"), "w_j", "|v_j|", "w_j |v_j|", "w_j v_j"], top).id = "ex-top";
  para(panel, "why ex-why-mix", t("explain.why_mix", { share: (100 * why(4)).toFixed(1) }));
  const out = shortVector("out", li, i), lo = h * d;
  para(panel, "", t("explain.step8", { d: d, lo: lo, last: lo + d - 1, C: EX.C, H: H, i: i }));
  para(panel, "vec ex-out", "out_" + i + " = " + vec(out, dims, EX.C) +
    "   |out| = " + out[dims].toFixed(4));
  para(panel, "", t("explain.residual", { i: i, mlp: PATH && PATH.blocks.active ? t("explain.mlp_follows") : "" }));
  if (PATH && i >= PATH.first) {  // each head's share of out, from the path record
    const shares = PATH.blocks.share[LAYERS[li]].map((row, g) => g + ": " + row[i - PATH.first].toFixed(4));
    para(panel, "why ex-why-heads", t("explain.why_heads", { shares: shares.join(", ") }));
  }
  para(panel, "why hint", t("path.hint"));
}
