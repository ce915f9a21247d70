// The maps: the token line, the heatmaps, where the focused token looks and what looks at it, the statistics,
// the roles and the logit lens.
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function shownHeads() {
  if (state.head === "all") return Array.from({ length: H }, (_, h) => h);
  return [Number(state.head)];
}

function headName(li, h) {
  const role = FRAME.roles ? " · " + caption(FRAME.roles[li][h]) : "";
  return t("page.layer_n", { n: LAYERS[li] }) + " " + t("page.head_n", { n: h }) + role + offName(li, h);
}

function offMode(li, h) { return FRAME.off ? FRAME.off[li][h] : ""; }  // "", "mean", "zero": the recorded forward's

function offName(li, h) {  // " · off (mean)" for a switched-off head, as the terminal names it
  const mode = offMode(li, h);
  return mode ? " · " + t("ablate.off", { mode: t("ablate.short_" + mode) }) : "";
}

function setFocus(i, pin, head) {
  if (pin) {
    state.pinned = !(state.pinned && state.focus === i);
    const h = head === undefined ? explainHead() : head;
    if (EX) state.explain = { li: state.li, head: h, q: i };
    else if (LIVE && LIVE.shown) explainLater(state.li, h, i);
  } else if (state.pinned || state.focus === i) {
    return;
  }
  state.focus = i;
  update();
}

// A click on the token line explains the head already explained, if shown, else the first head shown.
function explainHead() {
  const heads = shownHeads();
  return state.explain && heads.includes(state.explain.head) ? state.explain.head : heads[0];
}

// Hovering a box of the token line focuses its token; any box can be clicked to pin its token.
function tokenBox(i, hover, head) {
  const box = el("span", "tok");
  box.dataset.i = i;
  box.title = t("page.token_title", { i: i, token: TOKENS[i] });
  box.appendChild(el("span", "t", TOKENS[i]));
  box.appendChild(el("span", "w", ""));
  if (hover) box.addEventListener("mouseenter", () => setFocus(i, false));
  box.addEventListener("click", () => setFocus(i, true, head));
  return box;
}

function strip(parent, title, hover, head) {
  if (title) parent.appendChild(el("div", "headname", title));
  const s = el("div", "strip");
  const boxes = [];
  for (let i = 0; i < T; i++) { boxes.push(tokenBox(i, hover, head)); s.appendChild(boxes[i]); }
  parent.appendChild(s);
  return boxes;
}

// The heatmap of one head as an image: white -> dark blue, the masked future light grey, rows and
// columns the decoding has not reached yet (state.limit) lighter still.
function heatmap(li, h, cell) {
  const canvas = el("canvas");
  const n = T * cell;
  canvas.width = canvas.height = n;
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(n, n), px = img.data;
  const base = (li * H + h) * TRI;
  for (let q = 0; q < T; q++) {
    const row = base + q * (q + 1) / 2;
    for (let k = 0; k < T; k++) {
      let r = 238, g = 238, b = 238;  // the masked future
      if (q >= state.limit || k >= state.limit) { r = g = b = 250; }
      else if (k <= q) { const w = ATT[row + k] / 65535; r = 255 - 247 * w; g = 255 - 207 * w; b = 255 - 148 * w; }
      for (let y = q * cell; y < (q + 1) * cell; y++) {
        for (let x = k * cell, p = 4 * (y * n + x); x < (k + 1) * cell; x++, p += 4) {
          px[p] = r; px[p + 1] = g; px[p + 2] = b; px[p + 3] = 255;
        }
      }
    }
  }
  const cellAt = (ev) => {
    const r = canvas.getBoundingClientRect();
    return [Math.min(T - 1, Math.floor((ev.clientY - r.top) / cell)),
            Math.min(T - 1, Math.floor((ev.clientX - r.left) / cell))];
  };
  canvas.addEventListener("mousemove", (ev) => {
    const [q, k] = cellAt(ev);
    document.getElementById("cell").textContent = t("page.cell", { layer: LAYERS[li], head: h, q: q, qt: TOKENS[q],
      k: k, kt: TOKENS[k], w: att(li, h, q, k).toFixed(4) });
  });
  canvas.addEventListener("click", (ev) => setFocus(cellAt(ev)[0], true, h));
  return { canvas, img, cell };
}

function renderStats() {
  const names = t("page.stats_columns").split("|");
  const widths = [4, 9, 10, 7, 7, 7].map((w, c) => Math.max(w, columns(names[c]) + (c > 0 ? 2 : 0)));  // 한글: 2 columns
  const lines = [names.slice(0, 6).map((n, c) => padTo(n, widths[c], c > 0)).join("") +
    (FRAME.roles ? "  " + names[6] : "")];
  for (const h of shownHeads()) {
    const s = (name) => FRAME.stats[name][state.li][h];
    const cells = [String(h)].concat(["entropy", "distance", "prev", "first", "self"].map((n) => s(n) === null ? "–" : s(n).toFixed(4)));
    lines.push(cells.map((c, i) => c.padStart(widths[i])).join("") + (FRAME.roles ? "  " + caption(FRAME.roles[state.li][h]) : ""));
  }
  document.getElementById("stats").textContent = lines.concat([t("stats.defs")]).join("\n");
  renderRoles();
}

// The role scores of inspection/views/roles.py (held-out text and repeated random tokens), when the page has them.
function renderRoles() {
  const box = document.getElementById("roles"), r = FRAME.scores;
  if (!r) { box.textContent = ""; return; }
  const keys = ROLE_KEYS.concat(WORD_ROLE_KEYS.filter((k) => r.scores[k]));  // word roles: when measured
  const names = t("page.roles_columns").split("|").concat(t("roles.word_columns").split("|").slice(0, keys.length - 5));
  const widths = names.slice(1).map((n) => Math.max(11, columns(n) + 2));  // two spaces before "이전 토큰"
  const num = (x, c) => (x === null ? "-" : x.toFixed(3)).padStart(widths[c]);
  const at = FRAMES.length > 1 ? t("page.roles_at", { step: stepName(FRAME.step) }) : "";
  const imp = r.importance, signed = (x) => ((x < 0 ? "" : "+") + x.toFixed(3)).padStart(11);
  const off = imp ? t("roles.off_columns").split("|").map((n) => padTo(n, 11, true)).join("") : "";
  const lines = [t("page.roles_title", { at: at }), padTo(names[0], 6, true) + names.slice(1).map((n, c) => padTo(n, widths[c], true)).join("") + off];
  for (const h of shownHeads()) lines.push(String(h).padStart(6) + keys.map((k, c) => num(r.scores[k][state.li][h], c)).join("") +
    (imp ? signed(imp.loss[state.li][h]) + signed(imp.drop[state.li][h]) : ""));
  lines.push(padTo(t("page.chance"), 6) + keys.map((k, c) => num(r.chance[k], c)).join(""));
  lines.push(t("page.drop", { drop: num(r.loss_drop, 0).trim(),
    first: num(r.loss_first_copy, 0).trim(), second: num(r.loss_second_copy, 0).trim() }));
  if (imp) lines.push(t("roles.off", { mode: t("ablate." + imp.mode), loss: imp.full_loss.toFixed(3), drop: imp.full_drop.toFixed(3) }));
  box.textContent = lines.join("\n");
}
const ROLE_KEYS = ["previous-token", "first-token", "self", "duplicate-token", "induction"];
const WORD_ROLE_KEYS = ["same-word", "word-start", "previous-word"];  // inspection/views/words.py

function stepName(step) { return step.toLocaleString("en-US"); }  // 3000 -> "3,000", in either language

// Build everything that depends on the layer and head choice; update() then only recolours.
function render() {
  renderStats();
  const tokens = document.getElementById("tokens"), out = document.getElementById("outgoing"),
        inc = document.getElementById("incoming"), maps = document.getElementById("maps");
  for (const box of [tokens, out, inc, maps]) box.replaceChildren();
  const heads = shownHeads();
  const cell = Math.max(1, Math.floor((heads.length === 1 ? 480 : 240) / T));
  views = [{ head: null, out: strip(tokens, "", true), inc: [] }];
  for (const h of heads) {
    const name = headName(state.li, h);
    const view = { head: h, out: strip(out, name, false, h), inc: strip(inc, name, false, h) };
    Object.assign(view, heatmap(state.li, h, cell));
    const fig = el("figure"), figcaption = el("figcaption", "", name);
    if (offMode(state.li, h)) fig.title = t("ablate.map_note");  // its map is still its own attention
    fig.appendChild(view.canvas);
    fig.appendChild(figcaption);
    if (LIVE) figcaption.appendChild(headSwitch(LAYERS[state.li], h));
    maps.appendChild(fig);
    views.push(view);
  }
  update();
}

// Only what changed is written to the DOM: at 1,024 tokens a hover repaints thousands of boxes.
function paint(boxes, attOf, colour) {
  boxes.forEach((box, i) => {
    const cls = "tok" + (i === state.focus ? (state.pinned ? " pinned" : " focus") : "") + (i >= state.limit ? " later" : "");
    if (box.className !== cls) box.className = cls;
    const w = attOf === null || i >= state.limit ? null : attOf(i);  // not computed yet at this step
    const text = w === null ? "" : w.toFixed(3);
    if (box.lastChild.textContent !== text) {
      box.lastChild.textContent = text;
      box.style.background = w === null ? "#fff" : "rgba(" + colour + "," + text + ")";
    }
  });
}

// By word: each word's tokens and, from the focused word, its value beside an even spread's (inspection/views/words.py),
// on hover, since a word of more tokens gets more.
function wordTitles(boxes, f, h) {
  boxes.forEach((box, k) => {
    box.title = f === null || k > f || k >= state.limit ? "" : t("page.word_title", { i: k, token: TOKENS[k],
      n: DATA.word_tokens[k], value: att(state.li, h, f, k).toFixed(3), even: DATA.words_even[f][k].toFixed(3) });
  });
}

// Recolour for the focused token: its row (where it attends) and its column (what attends to it).
function update() {
  const f = state.focus;
  for (const v of views) {
    if (v.head === null) { paint(v.out, null, ""); continue; }
    paint(v.out, f === null ? null : (k) => att(state.li, v.head, f, k), "31,119,180");
    if (WORDS_ON) wordTitles(v.out, f, v.head);
    paint(v.inc, f === null ? null : (q) => att(state.li, v.head, q, f), "255,127,14");
    const ctx = v.canvas.getContext("2d");
    ctx.putImageData(v.img, 0, 0);
    if (f !== null) {
      ctx.strokeStyle = "#d62728";
      ctx.strokeRect(0.5, f * v.cell + 0.5, T * v.cell - 1, v.cell - 1);
      ctx.strokeRect(f * v.cell + 0.5, 0.5, v.cell - 1, T * v.cell - 1);
    }
  }
  renderExplain();
  renderLens();
  renderLines();
  renderPath();
  renderWhy();
}

// ---- the logit lens (inspection/views/lens.py): the focused token's next-token guess after each stage --------

function renderLens() {
  const box = document.getElementById("lens"), f = state.focus;
  if (!LENS || f === null || f >= LENS.rank[0].length) { box.textContent = ""; return; }
  const S = LENS.rank.length, label = (id) => LENS.labels[id];
  const lines = [t("lens.title", { query: f, choice: label(LENS.top[S - 1][f][0]) })];
  for (let s = 0; s < S; s++) {
    const name = (s === 0 ? t("lens.embeddings") : t("lens.block", { layer: s - 1 })) + (s === S - 1 ? t("lens.output") : "");
    const cells = LENS.top[s][f].map((id, k) => label(id) + " " + LENS.p[s][f][k].toFixed(3)).join("  ");
    lines.push(padTo(name, 30) + padTo(t("lens.rank", { rank: LENS.rank[s][f] }), 12) + cells);
  }
  const off = LENS.off && LENS.off.length ? [t("lens.off", { heads: LENS.off.map(([l, h, m]) =>
    l + "." + h + " " + t("ablate.off", { mode: t("ablate.short_" + m) })).join(", ") })] : [];
  box.textContent = lines.concat(off, [t("lens.caveat")]).join("\n");
}
