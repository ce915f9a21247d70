// The maps (inspection/views/maps.py): the token line coloured by each token's surprise, the labelled heatmaps, every
// layer and head as small line pictures, where the focused token looks and what looks at it, and, folded away, the
// statistics, the roles and the logit lens as tables.

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
  return mode ? " · " + offText(mode) : "";
}

// A head's colour in the lines, the same in the head view and the overview (bertviz's: one colour per head).
const HEAD_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                      "#bcbd22", "#17becf", "#393b79", "#637939"];

function headColour(h) { return HEAD_COLOURS[h % HEAD_COLOURS.length]; }

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

// ---- each token's surprise: -log2 p of the token given those before it (Python's, maps.py `surprise`) --------

function surpriseColour(bits) {  // white at 0 bits, orange at log2(V) bits: what a uniform guess would be surprised
  const a = Math.min(1, bits / FRAME.uniform);
  return "rgb(" + Math.round(255 - 25 * a) + "," + Math.round(255 - 170 * a) + "," + Math.round(255 - 242 * a) + ")";
}

// The top line: each token coloured by its surprise, the model's expected tokens on hover (the first token, which
// nothing predicts, and the words have none).
function paintSurprise(boxes) {
  const S = WORDS_ON ? null : FRAME.surprise;
  boxes.forEach((box, i) => {
    const bits = S && i > 0 && i < state.limit ? S[i - 1] : null;
    box.lastChild.textContent = bits === null ? "" : bits.toFixed(1);
    box.style.background = bits === null ? "#fff" : surpriseColour(bits);
    box.dataset.surprise = bits === null ? "" : String(bits);
    box.title = t("page.token_title", { i: i, token: TOKENS[i] }) + (bits === null ? "" : "\n" + t("page.surprise_title", {
      bits: bits.toFixed(2), p: Math.pow(2, -bits).toFixed(4), expected: FRAME.expected[i - 1].map((id, r) =>
        FRAME.expected_labels[id] + " " + FRAME.expected_p[i - 1][r].toFixed(3)).join(", ") }));
  });
  document.getElementById("surprise-note").textContent = S ? t("page.surprise_note", {
    mean: (S.reduce((a, b) => a + b, 0) / S.length).toFixed(2) }) : "";
}

// ---- the heatmap of one head: white -> dark blue, the masked future light grey, rows and columns the decoding has
// not reached yet (state.limit) lighter still; a switched-off head's in grey; the tokens along both axes --------

function shortLabel(label) { return label.length > 8 ? label.slice(0, 7) + "…" : label; }

function labelFont(px) { return px + 'px "EmbeddedNanumGothic", sans-serif'; }

function heatmap(li, h, cell, labelled) {
  const font = Math.max(9, Math.min(13, cell - 2)), off = offMode(li, h);
  let left = 0, top = 0;
  if (labelled) {  // room for the labels: the query's on the left, the key's slanted above
    const ctx = document.createElement("canvas").getContext("2d");
    ctx.font = labelFont(font);
    const widest = Math.max(...TOKENS.map((x) => ctx.measureText(shortLabel(x)).width));
    left = Math.ceil(widest) + 8;
    top = Math.ceil(widest * 0.72 + font) + 6;
  }
  const canvas = el("canvas"), n = T * cell;
  canvas.width = left + n;
  canvas.height = top + n;
  Object.assign(canvas.dataset, { left: left, top: top, cell: cell, layer: LAYERS[li], head: h });
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(n, n), px = img.data;
  const base = (li * H + h) * TRI;
  for (let q = 0; q < T; q++) {
    const row = base + q * (q + 1) / 2;
    for (let k = 0; k < T; k++) {
      let r = 238, g = 238, b = 238;  // the masked future
      if (q >= state.limit || k >= state.limit) { r = g = b = 250; }
      else if (k <= q) {
        const w = ATT[row + k] / 65535;
        if (off) { r = g = b = 255 - 190 * w; } else { r = 255 - 247 * w; g = 255 - 207 * w; b = 255 - 148 * w; }
      }
      for (let y = q * cell; y < (q + 1) * cell; y++) {
        for (let x = k * cell, p = 4 * (y * n + x); x < (k + 1) * cell; x++, p += 4) {
          px[p] = r; px[p + 1] = g; px[p + 2] = b; px[p + 3] = 255;
        }
      }
    }
  }
  const cellAt = (ev) => {
    const r = canvas.getBoundingClientRect();
    const q = Math.floor((ev.clientY - r.top - top) / cell), k = Math.floor((ev.clientX - r.left - left) / cell);
    return q >= 0 && k >= 0 && q < T && k < T ? [q, k] : null;
  };
  canvas.addEventListener("mousemove", (ev) => {
    const at = cellAt(ev);
    if (!at) return;
    const [q, k] = at;
    document.getElementById("cell").textContent = t("page.cell", { layer: LAYERS[li], head: h, q: q, qt: TOKENS[q],
      k: k, kt: TOKENS[k], w: att(li, h, q, k).toFixed(4) });
  });
  canvas.addEventListener("click", (ev) => { const at = cellAt(ev); if (at) setFocus(at[0], true, h); });
  return { canvas, img, cell, left, top, font, labelled };
}

function drawAxes(v) {  // the token labels of a heatmap, the focused token's in red
  if (!v.labelled) return;
  const ctx = v.canvas.getContext("2d"), f = state.focus;
  ctx.clearRect(0, 0, v.canvas.width, v.top);
  ctx.clearRect(0, v.top, v.left, v.canvas.height - v.top);
  ctx.font = labelFont(v.font);
  ctx.textBaseline = "middle";
  for (let i = 0; i < T; i++) {
    ctx.fillStyle = i === f ? "#d62728" : i >= state.limit ? "#bbb" : "#333";
    ctx.textAlign = "right";
    ctx.fillText(shortLabel(TOKENS[i]), v.left - 4, v.top + (i + 0.5) * v.cell);
    ctx.save();
    ctx.translate(v.left + (i + 0.5) * v.cell, v.top - 4);
    ctx.rotate(-Math.PI / 4);
    ctx.textAlign = "left";
    ctx.fillText(shortLabel(TOKENS[i]), 0, 0);
    ctx.restore();
  }
}

// ---- the statistics, the roles and the logit lens: real tables, folded under their headings ----------------

function number(x, digits) { return x === null || x === undefined ? "–" : x.toFixed(digits); }

function renderStats() {
  const box = document.getElementById("stats");
  box.replaceChildren();
  const names = t("page.stats_columns").split("|");
  const rows = shownHeads().map((h) => {
    const s = (name) => FRAME.stats[name][state.li][h];
    return [String(h)].concat(["entropy", "distance", "prev", "first", "self"].map((n) => number(s(n), 4)))
      .concat(FRAME.roles ? [caption(FRAME.roles[state.li][h])] : []);
  });
  richTable(box, FRAME.roles ? names : names.slice(0, 6), rows, "stats");
  box.appendChild(el("p", "hint", t("stats.defs")));
  renderRoles();
}

// The role scores of inspection/views/roles.py (held-out text and repeated random tokens), when the page has them.
function renderRoles() {
  const box = document.getElementById("roles"), r = FRAME.scores;
  box.replaceChildren();
  document.getElementById("roles-box").hidden = !r;
  if (!r) return;
  const keys = ROLE_KEYS.concat(WORD_ROLE_KEYS.filter((k) => r.scores[k]));  // word roles: when measured
  const names = t("page.roles_columns").split("|").concat(t("roles.word_columns").split("|").slice(0, keys.length - 5));
  const imp = r.importance, signed = (x) => (x < 0 ? "" : "+") + x.toFixed(3);
  const at = FRAMES.length > 1 ? t("page.roles_at", { step: stepName(FRAME.step) }) : "";
  box.appendChild(el("p", "", t("page.roles_title", { at: at })));
  const rows = shownHeads().map((h) => [String(h)].concat(keys.map((k) => number(r.scores[k][state.li][h], 3)),
    imp ? [signed(imp.loss[state.li][h]), signed(imp.drop[state.li][h])] : []));
  rows.push([t("page.chance")].concat(keys.map((k) => number(r.chance[k], 3))));
  richTable(box, names.concat(imp ? t("roles.off_columns").split("|") : []), rows, "roles");
  box.appendChild(el("p", "", t("page.drop", { drop: number(r.loss_drop, 3), first: number(r.loss_first_copy, 3),
    second: number(r.loss_second_copy, 3) })));
  if (imp) box.appendChild(el("p", "hint", t("roles.off", { mode: t("ablate." + imp.mode), loss: imp.full_loss.toFixed(3),
    drop: imp.full_drop.toFixed(3) })));
}
const ROLE_KEYS = ["previous-token", "first-token", "self", "duplicate-token", "induction"];
const WORD_ROLE_KEYS = ["same-word", "word-start", "previous-word"];  // inspection/views/words.py

function stepName(step) { return step.toLocaleString("en-US"); }  // 3000 -> "3,000", in either language

// ---- every layer and head at a glance: small line pictures (bertviz's model view) ----------------------------
// A previous-token head draws parallel lines one row down, an induction head lines to the token after an earlier
// copy, a first-token head a fan into the first token: seen without a number. A click opens that head.

const OVERVIEW_WIDTH = 84;

function lineThumb(li, h) {
  const rows = Math.min(T, state.limit), height = Math.max(48, Math.min(150, 4 * rows)), dy = height / rows;
  const canvas = el("canvas");
  canvas.width = OVERVIEW_WIDTH;
  canvas.height = height;
  Object.assign(canvas.dataset, { layer: LAYERS[li], head: h });
  const ctx = canvas.getContext("2d"), off = offMode(li, h);
  ctx.strokeStyle = off ? "#888" : headColour(h);
  ctx.lineWidth = 1;
  for (let q = 0; q < rows; q++) {
    for (let k = 0; k <= q; k++) {
      const w = att(li, h, q, k);
      if (w < 0.02) continue;  // a faint line adds nothing a learner sees, and costs the drawing
      ctx.globalAlpha = Math.min(1, w);
      ctx.beginPath();
      ctx.moveTo(10, (q + 0.5) * dy);
      ctx.lineTo(OVERVIEW_WIDTH - 10, (k + 0.5) * dy);
      ctx.stroke();
    }
  }
  canvas.addEventListener("click", () => {
    state.li = li; state.head = String(h);
    document.getElementById("layer").value = String(li);
    document.getElementById("head").value = state.head;
    render();
    document.getElementById("tokens").scrollIntoView();
  });
  return canvas;
}

let overviewKey = "";  // what the overview shows: redrawn only when the frame, the text or the decoding step change

function renderOverview() {
  const key = [state.frame, T, state.limit, WORDS_ON, FRAMES.length, TOKENS.join("\u0000")].join("|");
  const box = document.getElementById("overview");
  if (key !== overviewKey) {
    overviewKey = key;
    box.replaceChildren();
    const table = el("table"), head = el("tr");
    head.appendChild(el("td", "", ""));
    for (let h = 0; h < H; h++) head.appendChild(el("td", "", t("page.head_n", { n: h })));
    table.appendChild(head);
    LAYERS.forEach((layer, li) => {
      const tr = el("tr");
      tr.appendChild(el("td", "", t("page.layer_n", { n: layer })));
      for (let h = 0; h < H; h++) {
        const td = el("td");
        td.dataset.layer = layer;
        td.dataset.head = h;
        td.appendChild(lineThumb(li, h));
        td.appendChild(el("div", "", FRAME.roles ? caption(FRAME.roles[li][h]) : ""));
        if (offMode(li, h)) td.appendChild(el("div", "", offText(offMode(li, h))));
        tr.appendChild(td);
      }
      table.appendChild(tr);
    });
    box.appendChild(table);
  }
  const heads = shownHeads();
  for (const td of box.querySelectorAll("td[data-layer]"))
    td.classList.toggle("chosen", Number(td.dataset.layer) === LAYERS[state.li] && heads.includes(Number(td.dataset.head)));
}

// Build everything that depends on the layer and head choice; update() then only recolours.
function render() {
  renderStats();
  const tokens = document.getElementById("tokens"), out = document.getElementById("outgoing"),
        inc = document.getElementById("incoming"), maps = document.getElementById("maps");
  for (const box of [tokens, out, inc, maps]) box.replaceChildren();
  const heads = shownHeads();
  const cell = Math.max(1, Math.floor((heads.length === 1 ? 480 : 220) / T));
  views = [{ head: null, out: strip(tokens, "", true), inc: [] }];
  paintSurprise(views[0].out);
  for (const h of heads) {
    const name = headName(state.li, h);
    const view = { head: h, out: strip(out, name, false, h), inc: strip(inc, name, false, h) };
    Object.assign(view, heatmap(state.li, h, cell, cell >= 8));
    const fig = el("figure", offMode(state.li, h) ? "off" : ""), figcaption = el("figcaption", "", name);
    if (offMode(state.li, h)) figcaption.appendChild(el("span", "offnote", t("page.off_map", {
      mode: t("ablate." + offMode(state.li, h)) })));  // its map is still its own attention; its output is replaced
    fig.style.width = view.canvas.width + 2 + "px";  // the caption wraps under its map, not beside the next one
    fig.appendChild(view.canvas);
    fig.appendChild(figcaption);
    if (LIVE) figcaption.appendChild(headSwitch(LAYERS[state.li], h));
    maps.appendChild(fig);
    views.push(view);
  }
  renderOverview();
  update();
}

// Only what changed is written to the DOM: at 1,024 tokens a hover repaints thousands of boxes.
function paint(boxes, attOf, colour) {
  boxes.forEach((box, i) => {
    const cls = "tok" + (i === state.focus ? (state.pinned ? " pinned" : " focus") : "") + (i >= state.limit ? " later" : "");
    if (box.className !== cls) box.className = cls;
    if (attOf === null) return;  // the top line keeps its surprise
    const w = i >= state.limit ? null : attOf(i);  // not computed yet at this step
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
    ctx.putImageData(v.img, v.left, v.top);
    drawAxes(v);
    if (f !== null) {
      ctx.strokeStyle = "#d62728";
      ctx.strokeRect(v.left + 0.5, v.top + f * v.cell + 0.5, T * v.cell - 1, v.cell - 1);
      ctx.strokeRect(v.left + f * v.cell + 0.5, v.top + 0.5, v.cell - 1, T * v.cell - 1);
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
  box.replaceChildren();
  document.getElementById("lens-box").hidden = !LENS;
  if (!LENS || f === null || f >= LENS.rank[0].length) return;
  const S = LENS.rank.length, label = (id) => LENS.labels[id];
  box.appendChild(el("p", "", t("lens.title", { query: f, choice: label(LENS.top[S - 1][f][0]) })));
  const rows = [];
  for (let s = 0; s < S; s++) {
    const name = (s === 0 ? t("lens.embeddings") : t("lens.block", { layer: s - 1 })) + (s === S - 1 ? t("lens.output") : "");
    rows.push([name, String(LENS.rank[s][f])].concat(LENS.top[s][f].map((id, k) => ({ node: document.createTextNode(
      label(id) + " " + LENS.p[s][f][k].toFixed(3)), cls: "name" }))));
  }
  richTable(box, [t("lens.stage"), t("lens.rank_column")].concat(LENS.top[0][f].map((_, k) => "#" + (k + 1))), rows, "lens");
  if (LENS.off && LENS.off.length) box.appendChild(el("p", "hint", t("lens.off", { heads: LENS.off.map(([l, h, m]) =>
    headLHOff(l, h, m)).join(", ") })));
  box.appendChild(el("p", "hint", t("lens.caveat")));
}

// ---- the lines (bertviz's head view): every query (left) to every key it attends to (right), a colour per head;
// the focused query's lines strong, the others faint. Built once per render; a new focus restyles two queries' lines.

const LINE_TOKENS = 80;  // tokens drawn: all of a short text; of a long one the first and the 79 before the focus
const LINE_MIN = 0.01;  // lighter lines are left out (a row's attention sums to 1, so at most 100 lines a query)
let LINES = null;  // {byQuery: Map q -> [line elements], focus: the query drawn strong}

function lineTokens() {
  const last = Math.min(T, state.limit) - 1, f = state.focus === null ? last : Math.min(state.focus, last);
  if (last + 1 <= LINE_TOKENS) return Array.from({ length: last + 1 }, (_, i) => i);
  const end = Math.max(f, LINE_TOKENS - 1), shown = [0];
  for (let i = end - LINE_TOKENS + 2; i <= end; i++) shown.push(i);
  return shown;
}

function styleLine(line, strong) {
  const w = Number(line.dataset.att);
  line.setAttribute("stroke-width", strong ? (0.6 + 6 * w).toFixed(2) : "1");
  line.setAttribute("stroke-opacity", (strong ? Math.min(1, 0.2 + w) : 0.35 * w).toFixed(3));
}

function renderLines() {
  const fig = document.getElementById("lines"), f = state.focus, heads = shownHeads();
  const key = [LANG, state.li, heads.map((h) => h + ":" + offMode(state.li, h)).join(","), state.limit, T, state.frame,
               WORDS_ON, TOKENS.join("\u0000"), f === null ? -1 : f].join("|");  // the focus last: it only restyles
  if (LINES && LINES.key.slice(0, LINES.key.lastIndexOf("|")) === key.slice(0, key.lastIndexOf("|"))) {
    if (LINES.focus !== f) {  // the same picture: restyle the old focus's lines and the new one's
      (LINES.byQuery.get(LINES.focus) || []).forEach((l) => styleLine(l, false));
      (LINES.byQuery.get(f) || []).forEach((l) => styleLine(l, true));
      LINES.labels.forEach((text) => text.classList.toggle("focus", Number(text.dataset.i) === f));
      LINES.focus = f;
      LINES.key = key;
      fig.lastChild.textContent = linesCaption(heads, f);
    }
    return;
  }
  fig.replaceChildren();
  const shown = lineTokens(), row = 18, left = 100, right = 240, width = 340;
  const holder = el("div");
  holder.innerHTML = "<svg></svg>";  // the HTML parser gives it SVG's namespace, which createElementNS reuses below
  const svg = holder.firstChild;
  svg.setAttribute("width", width);
  svg.setAttribute("height", row * shown.length + 6);
  const add = (tag, attributes, text) => {
    const e = document.createElementNS(svg.namespaceURI, tag);
    Object.entries(attributes).forEach(([k, v]) => e.setAttribute(k, v));
    if (text !== undefined) e.textContent = text;
    svg.appendChild(e);
    return e;
  };
  const y = (r) => row * (r + 1) - 5;
  const byQuery = new Map(), labels = [];
  for (const h of heads) {
    shown.forEach((q, rq) => {
      shown.forEach((k, rk) => {
        if (k > q) return;
        const w = att(state.li, h, q, k);
        if (w < LINE_MIN) return;
        const line = add("line", { x1: left, y1: y(rq), x2: right, y2: y(rk), stroke: offMode(state.li, h) ? "#888" : headColour(h),
                                   "data-q": q, "data-k": k, "data-head": h, "data-att": w.toFixed(4) });
        styleLine(line, q === f);
        if (!byQuery.has(q)) byQuery.set(q, []);
        byQuery.get(q).push(line);
      });
    });
  }
  shown.forEach((i, r) => {
    const gap = r > 0 && i > shown[r - 1] + 1 ? "… " : "";  // "…": tokens left out
    for (const [x, anchor] of [[left - 6, "end"], [right + 6, "start"]]) {
      const text = add("text", { x: x, y: y(r) + 4, "text-anchor": anchor, "data-i": i,
                                 class: i === f ? "focus" : "" }, (anchor === "start" ? gap : "") + shortLabel(TOKENS[i]));
      text.addEventListener("mouseenter", () => setFocus(i, false));
      text.addEventListener("click", () => setFocus(i, true));
      labels.push(text);
    }
  });
  fig.appendChild(svg);
  fig.appendChild(el("figcaption", "", linesCaption(heads, f)));
  LINES = { key, byQuery, labels, focus: f };
}

function linesCaption(heads, f) {
  const name = heads.length === 1 ? headName(state.li, heads[0]) : t("page.layer_n", { n: LAYERS[state.li] }) + " · " +
    t("page.all_heads");
  return f === null ? name : t("page.lines", { name: name, i: f, token: TOKENS[f] });
}
