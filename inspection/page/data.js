// The page's data: the text shown, its frames (maps, statistics, roles, walkthrough tensors), the texts in
// both languages, and the state of the view. The first part of the page's one script (inspection/html.py).
"use strict";
const DATA = JSON.parse(document.getElementById("data").textContent);
const L = DATA.n_layer, H = DATA.n_head, LAYERS = DATA.layers, LIVE = DATA.live;
// The text shown: its tokens and frames (a live page loads new ones as the user types).
let PATH = null, NEXT_LOGITS = null, NEXT_FULL = null;  // the text's path record (path.js), the last token's logits
// (with heads switched off, NEXT_FULL: the whole model's)
let T, TOKENS, FRAMES, TRI, PREFILL, LENS;  // TRI: values per map, the lower triangle row by row; PREFILL: rows
// 0..PREFILL-1 came from one forward, each later row from one decoding step

function setText(view) {
  T = view.T; TOKENS = view.tokens; FRAMES = view.frames; PREFILL = view.prefill; LENS = view.lens || null;
  TRI = T * (T + 1) / 2;
  setPath(view.path);
  decoded.length = 0;
}

// Every text in English and Korean (cli/messages.py); LANG is the one shown, switched in place.
const MESSAGES = DATA.messages;
let LANG = DATA.lang;

function t(key, values) {  // the text of `key` in LANG, each {name} replaced by values[name]
  let text = MESSAGES[key][LANG === "ko" ? 1 : 0];
  for (const [name, value] of Object.entries(values || {})) text = text.split("{" + name + "}").join(String(value));
  return text;
}

function headLH(layer, head) { return layer + "." + head; }  // "1.0", as common/heads_off.py's head_name

// "off (mean)" after a switched-off head (inspection/labels.py's off_mark); "1.0 off (mean)" (its off_names)
function offText(mode) { return t("ablate.off", { mode: t("ablate.short_" + mode) }); }

function headLHOff(layer, head, mode) { return headLH(layer, head) + " " + offText(mode); }

function caption(c) {  // a head's role: a [role, score] pair named in LANG, or a caption given as it is
  return typeof c === "string" ? c : t("role." + c[0]) + " " + c[1].toFixed(2);
}

function bytesOf(b64) {
  const raw = atob(b64), bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes.buffer;
}

// A frame is one set of parameters' view of the text (one snapshot of a training run, or the only one):
// its maps, statistics, head roles and walkthrough tensors. Attention arrives as little-endian uint16 in
// base64 (att = value / 65535), decoded when the frame is first shown.
let FRAME, ATT, EX;
const decoded = [];
let WORDS_ON = false;  // the maps read by word (why.js setWords)

function useFrame(i) {
  if (!decoded[i]) decoded[i] = WORDS_ON ? { att: new Uint16Array(bytesOf(FRAMES[i].words_att)), ex: null }
    : { att: new Uint16Array(bytesOf(FRAMES[i].att)), ex: explainOf(FRAMES[i].explain) };
  FRAME = FRAMES[i];
  ATT = decoded[i].att;
  EX = decoded[i].ex;
}

// li: the position of a layer in LAYERS (the page may hold only some layers).
function att(li, head, q, k) {
  if (k > q) return 0;
  return ATT[(li * H + head) * TRI + q * (q + 1) / 2 + k] / 65535;
}

// The walkthrough's numbers (float32), Python's (inspection/html.py walkthrough_data): x and out as (L, T, dims + 1) =
// first dims and the norm; q, k, v, y (L, H, T, d); per head and query the K keys listed (-1: none), their q·k_j and
// ÷√d_k, Σ w_j, |q|, |y|, |v_j|, y's largest terms (top_n of them), the most attended key and q ⊙ k of it (d values).
function explainOf(e) {
  if (!e) return null;
  const t = { d: e.d_head, C: e.n_embd, dims: e.dims, K: e.K, topN: e.top_n, future: e.future };
  for (const name of ["x", "out", "q", "k", "v", "y", "why", "keys", "dot", "scaled", "sum", "q_norm", "y_norm",
                      "v_norm", "top", "top_size", "top_terms", "best", "qk"]) t[name] = new Float32Array(bytesOf(e[name]));
  t.off = e.off;  // (L', H): "", "mean" or "zero"; a switched-off head's y is what W_O received in its place
  return t;
}

function headRow(name, li, h, t, n) {  // n numbers of one head and token: a Float32Array view
  const start = ((li * H + h) * T + t) * n;
  return EX[name].subarray(start, start + n);
}

function headNumber(name, li, h, t) { return headRow(name, li, h, t, 1)[0]; }  // one number per head and token

function headVector(name, li, h, t) { return headRow(name, li, h, t, EX.d); }  // q, k, v or y: d values

function shortVector(name, li, t) {  // x or out of one token: [first dims..., norm]
  const n = EX.dims + 1, start = (li * T + t) * n;
  return EX[name].subarray(start, start + n);
}

// The page opens where the lesson is (html.opening: the run's induction head at a token with an earlier copy, pinned,
// its walkthrough open), else on every head of the first layer at the last token: attention before any interaction.
setText(DATA);
const OPEN = DATA.open;
const state = OPEN ? { li: OPEN.li, head: String(OPEN.head), focus: OPEN.focus, pinned: true, limit: T,
                       explain: { li: OPEN.li, head: OPEN.head, q: OPEN.focus }, frame: FRAMES.length - 1 }
                   : { li: 0, head: "all", focus: T - 1, pinned: false, limit: T, explain: null, frame: FRAMES.length - 1 };
useFrame(state.frame);
let views = [];  // what render() built: {head, out: [boxes], inc: [boxes], canvas, image, cell}
