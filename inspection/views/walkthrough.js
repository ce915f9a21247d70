// ---- the walkthrough of one head at one query token, in the textbook's order --------------------

function fmt(x) { return (x < 0 ? "" : " ") + x.toFixed(4); }

function vec(a, n, total) {  // the first n values, then "…" when the vector has more (total: its length)
  const shown = Array.from(a.subarray(0, n), fmt).join(", ");
  return "[" + shown + ((total || a.length) > n ? ", …" : "") + "]";
}

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
  para(panel, "", t("explain.step34", { d: d, C: EX.C, H: H, root: root.toFixed(4) }));
  para(panel, "", t("explain.step56"));
  // the keys Python lists (inspection.views.walkthrough.listed_keys), with the column of each in the record
  const listed = Array.from(headRow("keys", li, h, i, EX.K)).map((j, c) => [j, c]).filter(([j]) => j >= 0);
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
  tableOf(tables, ["j", t("explain.token"), "1. x_j", "|x_j|", "2. k_j", "v_j"], vectors, vectorClass).id = "ex-vectors";
  const dots = headRow("dot", li, h, i, EX.K), scaled = headRow("scaled", li, h, i, EX.K);
  const [scores, scoreClass] = rowsOf((j, c) => [["j", String(j)], ["tokname", TOKENS[j]], ["s", fmt(dots[c])],
    ["ss", fmt(scaled[c])], ["m", j > i ? "−∞" : fmt(scaled[c])], ["w", att(li, h, i, j).toFixed(4)]]);
  tableOf(tables, ["j", t("explain.token"), "3. q·k_j", "4. ÷√d_k", "5. " + t("explain.masked"), "6. w_j"], scores, scoreClass).id = "ex-keys";
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
