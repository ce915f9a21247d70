// ---- controls ---------------------------------------------------------------------------------

function setStep(step) {
  step = Math.max(0, Math.min(T - PREFILL, step));
  document.getElementById("step").value = String(step);
  state.limit = PREFILL + step;
  state.focus = state.limit - 1;
  stepText();
  render();
}

function stepText() {  // what the decoding step shown did
  const step = state.limit - PREFILL, newest = state.limit - 1;
  const next = state.limit < T ? t("page.chose", { n: state.limit, token: TOKENS[state.limit] }) : "";
  document.getElementById("step-text").textContent = step === 0
    ? t("page.prefill", { last: newest, keys: state.limit, next: next })
    : t("page.decode", { step: step, steps: T - PREFILL, last: newest, token: TOKENS[newest], keys: state.limit, next: next });
}

function setFrame(i) {
  i = Math.max(0, Math.min(FRAMES.length - 1, i));
  document.getElementById("frame").value = String(i);
  state.frame = i;
  useFrame(i);
  frameText();
  renderBars();
  renderGlossary();
  render();
}

// ▶ plays the snapshots in order, from the first when at the last, and stops at the last: the heads form as it plays.
let playing = null;
const PLAY_MS = 700;

function play(on) {
  clearInterval(playing);
  playing = null;
  if (on) {
    if (state.frame === FRAMES.length - 1) setFrame(0);
    playing = setInterval(() => { if (state.frame >= FRAMES.length - 1) play(false); else setFrame(state.frame + 1); }, PLAY_MS);
  }
  const button = document.getElementById("frame-play");
  button.dataset.msg = on ? "page.pause" : "page.play";
  button.textContent = t(button.dataset.msg);
}

function frameText() {  // which snapshot is shown
  if (FRAME.step === null) return;
  document.getElementById("frame-text").textContent = t("page.frame", { step: stepName(FRAME.step), n: state.frame + 1,
    total: FRAMES.length });
}

// Every text in LANG: the fixed labels, the pickers, then whatever depends on the view.
function setLanguage(lang) {
  LANG = lang === "ko" ? "ko" : "en";
  document.documentElement.lang = LANG;
  document.getElementById("lang").value = LANG;
  for (const e of document.querySelectorAll("[data-msg]")) e.textContent = t(e.dataset.msg);
  Array.from(document.getElementById("layer").options).forEach((o, li) => { o.textContent = t("page.layer_n", { n: LAYERS[li] }); });
  Array.from(document.getElementById("head").options).forEach((o) => {
    o.textContent = o.value === "all" ? t("page.all_heads") : t("page.head_n", { n: o.value });
  });
  if (PREFILL < T) stepText();
  if (LIVE) showNext(LIVE.shownNext || LIVE.next);
  frameText();
  renderBars();
  renderGlossary();
  renderPatch();
  render();
  if (TOUR.length && !document.getElementById("tour").hidden) showTour(tourAt);  // the card in the new language
}

function fillControls() {
  const layer = document.getElementById("layer"), head = document.getElementById("head");
  LAYERS.forEach((l, li) => layer.appendChild(new Option("", String(li))));  // texts: setLanguage
  head.appendChild(new Option("", "all"));
  for (let h = 0; h < H; h++) head.appendChild(new Option("", String(h)));
  const lang = document.getElementById("lang");
  lang.addEventListener("change", () => setLanguage(lang.value));
  layer.addEventListener("change", () => { state.li = Number(layer.value); render(); });
  const words = document.getElementById("words");
  document.getElementById("words-switch").hidden = !DATA.words;
  words.addEventListener("change", () => setWords(words.checked));
  head.addEventListener("change", () => { state.head = head.value; render(); });
  if (FRAMES.length > 1) {  // snapshots of a training run: step through them
    const frame = document.getElementById("frame");
    frame.max = String(FRAMES.length - 1);
    document.getElementById("trainer").hidden = false;
    frame.addEventListener("input", () => setFrame(Number(frame.value)));
    document.getElementById("frame-back").addEventListener("click", () => setFrame(state.frame - 1));
    document.getElementById("frame-on").addEventListener("click", () => setFrame(state.frame + 1));
    document.getElementById("frame-play").addEventListener("click", () => play(!playing));
  }
  const step = document.getElementById("step");  // maps from decoding: step through it
  step.addEventListener("input", () => setStep(Number(step.value)));
  document.getElementById("step-back").addEventListener("click", () => setStep(Number(step.value) - 1));
  document.getElementById("step-on").addEventListener("click", () => setStep(Number(step.value) + 1));
  showStepper();
  showSettings();
  for (const id of ["temperature", "top-k", "top-p"]) document.getElementById(id).addEventListener("input", renderBars);
  if (LIVE) startLive();
}

function showStepper() {  // the decoding slider, at its last step, when the text came from a decoding
  const step = document.getElementById("step");
  step.max = String(T - PREFILL);
  step.value = step.max;
  document.getElementById("stepper").hidden = PREFILL >= T;
}
