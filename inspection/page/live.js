// ---- the live inspector (inspection/live.py): the text box, the next token, Generate -------------------

function showNext(next, heldOut) {  // the next token's top candidates under the sampling settings, Python's list
  LIVE.shownNext = next;
  if (heldOut !== undefined) LIVE.heldOut = heldOut;
  const off = LIVE.heldOut, box = document.getElementById("next"), lossBox = document.getElementById("held-out");
  box.replaceChildren();
  lossBox.replaceChildren();
  box.appendChild(el("p", "", t(off ? "page.next_off" : "page.next", { heads: offList().join(", ") })));
  const token = (c) => c.token + " (" + c.id + ")";
  if (!off) {
    richTable(box, [t("explain.token"), "p"], next.map((c) => [token(c), barCell(c.p)]), "next");
    return;
  }
  // before and after: the whole model's top tokens first, each with its two bars (grey: every head on)
  richTable(box, [t("explain.token"), t("page.before_after"), t("page.after", { heads: offList().join(", ") })],
            next.map((c) => [token(c), barCell(c.p_full, "before"), barCell(c.p)]), "next before-after");
  const largest = Math.max(off.loss, off.full), diff = off.loss - off.full;
  lossBox.appendChild(el("p", "", t("page.held_out", { loss: off.loss.toFixed(4), full: off.full.toFixed(4),
    diff: (diff >= 0 ? "+" : "") + diff.toFixed(4) })));
  const loss = (x, cls) => { const c = barCell(x / largest, cls); c.node.lastChild.textContent = " " + x.toFixed(4); return c; };
  richTable(lossBox, [t("page.loss_change"), ""], [[t("page.before_after"), loss(off.full, "before")],
                                                  [t("page.after", { heads: offList().join(", ") }), loss(off.loss)]], "loss");
}

// A switch on each head of a live page: the heads switched off (common/heads_off.py, their mean output) go
// with every request, and the page shows what changes against the full model.
const switchedOff = new Map();  // "layer.head", as the page names a head -> [layer, head], as the request sends it

function offList() { return Array.from(switchedOff.keys()).sort(); }

function headSwitch(layer, h) {
  const key = headLH(layer, h), label = el("label"), box = el("input");
  box.type = "checkbox";
  box.className = "off";
  box.dataset.head = key;
  box.checked = switchedOff.has(key);
  box.addEventListener("change", () => {
    if (box.checked) switchedOff.set(key, [layer, h]); else switchedOff.delete(key);
    inspectText();
  });
  label.appendChild(box);
  label.appendChild(document.createTextNode(" " + t("page.off_switch")));
  return label;
}

function liveMessage(text, bad) {
  const m = document.getElementById("live-msg");
  m.textContent = text;
  m.className = bad ? "bad" : "";
}

function loadView(view) {  // a new text (or the decoding so far): its tokens, frames and next token
  setText(view);
  state.frame = 0;
  state.limit = T;
  state.focus = T - 1;
  state.pinned = false;
  state.explain = null;
  useFrame(0);
  showStepper();
  showNext(view.next, view.held_out || null);
  render();
}

function settings() {
  const value = (id) => document.getElementById(id).value;
  const opt = (id, parse) => (value(id) === "" ? null : parse(value(id)));
  return { text: value("live-text"), temperature: opt("temperature", Number) ?? DATA.temperature, top_k: opt("top-k", Number),
           top_p: opt("top-p", Number), explain: false, ablate: offList().map((k) => switchedOff.get(k)) };
}

// A keystroke's view comes without the walkthrough's tensors (q, k, v, y of every head: most of its bytes);
// a click on a token asks for them, for the text shown, then opens the walkthrough there.
function explainLater(li, head, q) {
  const mine = asked, body = Object.assign({}, LIVE.shown, { explain: true });
  post("/api/inspect", body)
    .then((r) => r.json().then((j) => [r.status, j]))
    .then(([status, j]) => {
      if (mine !== asked || status === 409) return;  // a newer text is on its way
      if (status !== 200) { liveMessage(j.error || "error " + status, true); return; }
      FRAMES[0].explain = j.frames[0].explain;
      setPath(j.path);  // every token's path comes with the walkthrough's tensors
      decoded[0] = null;
      useFrame(0);
      state.explain = { li, head, q };
      update();
    })
    .catch((e) => liveMessage(String(e), true));
}

let asked = 0;  // the newest request: an older answer is dropped

// Every request names this page (the server runs each page's newest request and lets pages take turns) and is
// JSON, which is all the server takes. A request the network lost (the server restarting) is tried again.
const CLIENT = Math.random().toString(36).slice(2) + Date.now().toString(36);

function post(path, body) {
  return fetch(path, { method: "POST", headers: { "Content-Type": "application/json" },
                       body: JSON.stringify(Object.assign({ client: CLIENT }, body)) });
}

function lost(mine, again) {  // the server could not be reached: say so, and ask again while nothing newer came
  liveMessage(t("page.reconnecting"), true);
  setTimeout(() => { if (mine === asked) again(); }, 2000);
}

function inspectText() {
  const mine = ++asked, sent = performance.now(), typed = LIVE.typedAt || sent, body = settings();
  post("/api/inspect", body)
    .then((r) => r.json().then((j) => [r.status, j]))
    .then(([status, j]) => {
      if (mine !== asked || status === 409) return;
      if (status !== 200) { liveMessage(j.error || "error " + status, true); return; }
      const received = performance.now();
      LIVE.shown = body;
      loadView(j);
      const drawn = performance.now();
      liveMessage(t("page.timing", { model: j.model_ms.toFixed(0), total: (drawn - typed).toFixed(0),
        draw: (drawn - received).toFixed(0) }), false);
      Object.assign(document.body.dataset, { modelMs: j.model_ms, fetchMs: (received - sent).toFixed(1),
        drawMs: (drawn - received).toFixed(1), totalMs: (drawn - typed).toFixed(1), shownText: j.tokens.join("") });
    })
    .catch(() => lost(mine, () => { asked--; inspectText(); }));
}

function generateText() {
  asked++;  // answers to keystrokes before this are stale now
  LIVE.shown = null;  // the decoding's views come without the walkthrough's tensors; the last one has them
  const body = Object.assign(settings(), { max_new_tokens: Number(document.getElementById("max-new").value) || 1,
    seed: Number(document.getElementById("seed").value) || 0 });
  const out = document.getElementById("generated");
  out.textContent = "";
  liveMessage(t("page.generating"), false);
  post("/api/generate", body).then(async (r) => {
    if (r.status !== 200) { liveMessage((await r.json()).error, true); return; }
    const reader = r.body.getReader(), decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n")) >= 0) {
        const line = JSON.parse(buffer.slice(0, cut));
        buffer = buffer.slice(cut + 1);
        if (line.piece !== undefined) out.textContent += line.piece;
        if (line.view) loadView(line.view);
        if (line.done) { out.dataset.text = line.text; liveMessage("", false); }
      }
    }
  }).catch((e) => liveMessage(String(e), true));
}

function startLive() {
  document.getElementById("live").hidden = false;
  const box = document.getElementById("live-text");
  box.value = LIVE.text;
  document.getElementById("temperature").value = String(LIVE.temperature);
  showNext(LIVE.next);
  let timer = null;
  const soon = () => { LIVE.typedAt = performance.now(); clearTimeout(timer); timer = setTimeout(inspectText, LIVE.debounce_ms); };
  box.addEventListener("input", soon);
  box.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); clearTimeout(timer); LIVE.typedAt = performance.now(); inspectText(); }
  });
  for (const id of ["temperature", "top-k", "top-p"]) document.getElementById(id).addEventListener("change", inspectText);
  document.getElementById("generate").addEventListener("click", generateText);
}
