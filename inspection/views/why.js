// ---- why this token and patching (inspection/views/why.py, patch.py), and reading by word (words.py) ----------
// The shares, their ranking, the grid and the word-level maps are Python's records (inspection/html.py): drawn here,
// computed nowhere else.

function shareBar(value, largest) {  // a share as a bar, blue pushing the model's choice up, red down
  const b = el("span", "bar");
  b.style.width = (8 * Math.abs(value) / (largest || 1)).toFixed(2) + "em";
  b.style.background = value >= 0 ? "#1f77b4" : "#d62728";
  return b;
}

function offMark(name) {  // " · off (mean)" after a switched-off head's part name, as the terminal marks it
  const off = (DATA.why.off || []).find(([l, h]) => name === "head " + headLH(l, h));
  return off ? " · " + offText(off[2]) : "";
}

function renderWhy() {
  const panel = document.getElementById("why"), W = DATA.why, f = state.focus;
  panel.replaceChildren();
  document.getElementById("why-section").hidden = !W || WORDS_ON;
  if (!W || WORDS_ON || f === null) return;
  const label = (id) => "“" + W.labels[id] + "”", order = W.order[f], largest = Math.abs(W.shares[order[0]][f]);
  panel.appendChild(el("p", "", t("page.why_for", { i: f, token: label(W.token[f]), versus: label(W.versus[f]),
    diff: W.logit_diff[f].toFixed(4), sigma: W.sigma[f].toFixed(4) })));
  const rows = order.slice(0, 12).map((p) => {
    const cell = el("span");
    cell.appendChild(shareBar(W.shares[p][f], largest));
    cell.appendChild(document.createTextNode(" " + (W.shares[p][f] >= 0 ? "+" : "") + W.shares[p][f].toFixed(4)));
    return [W.names[p] + offMark(W.names[p]), { node: cell, cls: "barcell" }];
  });
  richTable(panel, [t("why.part"), t("why.share")], rows, "why-parts");
  panel.appendChild(el("p", "hint", t("why.exact")));
  if (f === W.focus.query) {  // the focus record holds what each head pushes
    panel.appendChild(el("p", "", t("page.why_heads")));
    const heads = W.focus.parts.filter((p) => p.kind === "head");
    richTable(panel, [t("why.part"), t("why.up"), t("why.down")],
              heads.map((p) => [p.name + offMark(p.name), p.up.join(" "), p.down.join(" ")]), "why-heads");
  }
  panel.appendChild(el("p", "hint", t("why.meaning")));
  if (W.off && W.off.length)  // the heads switched off: their shares are their replacements'
    panel.appendChild(el("p", "hint", t("why.off", { heads: W.off.map(([l, h, m]) => headLHOff(l, h, m)).join(", ") })));
}

function patchColour(x) {  // recovered share: 1 blue, 0 white, negative red
  const v = Math.max(-1, Math.min(1, x)), a = Math.abs(v);
  return v >= 0 ? `rgb(${Math.round(255 - 224 * a)},${Math.round(255 - 136 * a)},${Math.round(255 - 75 * a)})`
                : `rgb(${Math.round(255 - 41 * a)},${Math.round(255 - 216 * a)},${Math.round(255 - 215 * a)})`;
}

function renderPatch() {
  const panel = document.getElementById("patch"), P = DATA.patch;
  panel.replaceChildren();
  document.getElementById("patch-section").hidden = !P;
  if (!P) return;
  panel.appendChild(el("p", "", t("patch.title", { token: "“" + P.token + "”", versus: "“" + P.versus + "”",
    clean: P.clean_diff.toFixed(4), corrupt: P.corrupt_diff.toFixed(4) })));
  panel.appendChild(el("p", "", t("patch.changed", { tokens: P.changed.map((i) => i + " “" + P.labels[i] + "”").join(", ") })));
  const stages = [t("lens.embeddings")].concat(P.grid.slice(1).map((_, s) => t("lens.block", { layer: s })));
  const table = el("table", "patch-grid"), head = el("tr");
  head.appendChild(el("th", "", ""));
  P.labels.forEach((l, i) => head.appendChild(el("th", P.changed.includes(i) ? "changed" : "", l)));
  table.appendChild(head);
  P.grid.forEach((row, s) => {
    const tr = el("tr");
    tr.appendChild(el("th", "", stages[s]));
    row.forEach((x) => { const td = el("td", "", x.toFixed(2)); td.style.background = patchColour(x); tr.appendChild(td); });
    table.appendChild(tr);
  });
  panel.appendChild(table);
  const off = (h) => P.off && P.off[h] ? " " + offText(P.off[h]) : "";
  panel.appendChild(el("p", "", t("patch.heads", { heads: P.ranked_heads.slice(0, 5).map(([h, x]) => h + " " + x.toFixed(2) + off(h)).join(", ") })));
  if (P.together !== null)
    panel.appendChild(el("p", "", t("patch.together", { heads: P.together_heads.map((h) => h + off(h)).join(", "), share: P.together.toFixed(2) })));
  const offHeads = Object.keys(P.off || {});
  if (offHeads.length)
    panel.appendChild(el("p", "hint", t("patch.off", { heads: offHeads.map((h) => h + off(h)).join(", ") })));
  panel.appendChild(el("p", "hint", t("patch.cone")));
}

// Reading by word (inspection/views/words.py): the maps of every frame swap to their word-level maps, the token line to
// the words; the walkthrough, the path, the lens and the attribution stay per token, so they step aside.
let TOKEN_VIEW = null;  // the token view kept while the words are shown (WORDS_ON: data.js)

function setWords(on) {
  if (on === WORDS_ON || !DATA.words) return;
  WORDS_ON = on;
  if (on) {
    TOKEN_VIEW = { T, TOKENS, PREFILL, LENS, PATH };
    T = DATA.words.length; TOKENS = DATA.words; PREFILL = T; LENS = null;
    setPath(null);
  } else {
    ({ T, TOKENS, PREFILL, LENS } = TOKEN_VIEW);
    setPath(TOKEN_VIEW.PATH);
  }
  TRI = T * (T + 1) / 2;
  decoded.length = 0;
  Object.assign(state, { focus: T - 1, pinned: false, limit: T, explain: null });
  document.getElementById("words").checked = on;
  document.getElementById("words-hint").hidden = !on;
  useFrame(state.frame);
  showStepper();
  render();
}
