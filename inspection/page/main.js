// A link can choose the view: attention.html#layer=1&head=0&focus=3&explain=1 (head=all: all heads; focus: a
// pinned token; explain=1: open that head's walkthrough at it; step=500: the snapshot of that training step;
// lang=ko or lang=en: the language; words=1: the maps by word).
function readHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  if (params.get("lang") === "ko" || params.get("lang") === "en") LANG = params.get("lang");
  const frame = FRAMES.findIndex((f) => String(f.step) === params.get("step"));
  if (frame >= 0) state.frame = frame;
  const li = LAYERS.indexOf(Number(params.get("layer"))), head = params.get("head");
  if (params.has("layer") && li >= 0) state.li = li;
  if (head === "all" || (/^[0-9]+$/.test(head || "") && Number(head) < H)) state.head = head;
  if (["layer", "head", "focus"].some((name) => params.has(name)))  // a link's view, not the lesson's
    Object.assign(state, { focus: T - 1, pinned: false, explain: null });
  const focus = params.get("focus");
  if (/^[0-9]+$/.test(focus || "") && Number(focus) < T) { state.focus = Number(focus); state.pinned = true; }
  // explain=1 with a pinned token and one head: open that head's walkthrough at it, as a click would
  if (EX && state.pinned && params.get("explain") === "1" && state.head !== "all")
    state.explain = { li: state.li, head: Number(state.head), q: state.focus };
  document.getElementById("layer").value = String(state.li);
  document.getElementById("head").value = state.head;
}

fillControls();
readHash();
document.getElementById("frame").value = String(state.frame);
useFrame(state.frame);
setLanguage(LANG);  // draws the view
if (new URLSearchParams(location.hash.slice(1)).get("words") === "1") setWords(true);
// the heatmaps' labels are drawn on canvas in the embedded font, which may arrive after the first drawing
if (document.fonts) document.fonts.load('12px "EmbeddedNanumGothic"', "가").then(() => update()).catch(() => {});
startTour();
document.body.dataset.readyMs = String(Math.round(performance.now()));  // read by bench/page_speed.py
