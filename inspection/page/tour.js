// ---- the tour (inspection/tour.py): cards in the explainers' order, each pointing at a part of the page, saying
// this run's numbers there and showing the line of model/ that computes the step. On at the first visit, off with
// one click, resumed where it was left (the browser keeps the card). Its numbers are the page's records, read here.

const NEEDS = { qkv: "EX", scores: "EX", scale: "EX", softmax: "EX", values: "EX", residual: "EX", cache: "EX",
                next: "PATH" };  // the records a card's numbers come from: without them the page skips it
const TOUR = (DATA.tour || []).filter((card) => !NEEDS[card.key] || (NEEDS[card.key] === "EX" ? EX : PATH));
const TOUR_KEY = "kogpt-mini-tour";
let tourAt = 0;

function tourSaved() {
  try { return JSON.parse(localStorage.getItem(TOUR_KEY)); } catch (e) { return null; }  // a file page may have none
}

function tourSave(value) {
  try { localStorage.setItem(TOUR_KEY, JSON.stringify(value)); } catch (e) { /* kept for this visit only */ }
}

function tourHead() {  // the head the cards speak of: the walkthrough's, else the first shown
  if (state.explain) return [state.explain.li, state.explain.head];
  return [state.li, shownHeads()[0]];
}

// Every number a card says, from the page's records (the maps, the walkthrough's numbers, the path, the roles).
function tourNumbers() {
  const [li, h] = tourHead(), f = state.focus === null ? T - 1 : state.focus;
  const n = { T: T, f: f, token: TOKENS[f], layer: LAYERS[li], head: h, L: L, H: H, cells: T * T, all: L * H * T * T,
              V: FRAME.uniform ? Math.round(Math.pow(2, FRAME.uniform)) : "?", seen: f + 1, masked: T - 1 - f };
  if (EX) {  // the most-attended key: the walkthrough's (walkthrough.py `best`), as its cells draw it
    const best = headNumber("best", li, h, f);
    Object.assign(n, { j: best, key_token: TOKENS[best], w: att(li, h, f, best).toFixed(3) });
    const why = (k) => EX.why[((k * L + li) * H + h) * T + f];
    const keys = headRow("keys", li, h, f, EX.K), dots = headRow("dot", li, h, f, EX.K), c = keys.indexOf(best);
    Object.assign(n, { d: EX.d, C: EX.C, root: Math.sqrt(EX.d).toFixed(2), dot: c >= 0 ? dots[c].toFixed(3) : "?",
      before: why(0).toFixed(3), after: why(1).toFixed(3), largest: why(2).toFixed(3), undivided: why(3).toFixed(3),
      share: (100 * why(4)).toFixed(1), sum: headNumber("sum", li, h, f).toFixed(4),
      y: headNumber("y_norm", li, h, f).toFixed(3), out: shortVector("out", li, f)[EX.dims].toFixed(3) });
    n.cache = 2 * L * H * T * EX.d;
  }
  if (PATH && f >= PATH.first) {
    const chosen = PATH.sampling.chosen[f - PATH.first];
    Object.assign(n, { V: PATH.V, C: PATH.C, id: PATH.ids[f], next: PATH.labels[chosen],
                       p: PATH.sampling.chosen_p[f - PATH.first].toFixed(3) });
  }
  n.roles = FRAME.roles ? FRAME.roles[li].map((c, g) => g + ": " + caption(c)).join(", ") : "";
  const imp = FRAME.scores && FRAME.scores.importance;
  n.cost = imp ? (imp.loss[li][h] >= 0 ? "+" : "") + imp.loss[li][h].toFixed(3) : null;
  return n;
}

function tourTarget(card) {  // the first element of the card's list that the page shows
  for (const selector of card.target.split(",")) {
    const e = document.querySelector(selector.trim());
    if (e && !e.hidden && e.getClientRects().length && !e.closest("[hidden]")) return e;
  }
  return document.getElementById("maps");
}

function showTour(i) {
  tourAt = Math.max(0, Math.min(TOUR.length - 1, i));
  tourSave({ done: false, card: tourAt });
  const card = TOUR[tourAt], box = document.getElementById("tour"), n = tourNumbers();
  for (const e of document.querySelectorAll(".tour-target")) e.classList.remove("tour-target");
  const target = tourTarget(card);
  if (target.tagName === "DETAILS") target.open = true;
  target.classList.add("tour-target");
  target.scrollIntoView({ block: "center" });
  box.replaceChildren();
  box.hidden = false;
  box.dataset.card = card.key;
  box.appendChild(el("div", "tour-count", t("tour.count", { n: tourAt + 1, total: TOUR.length })));
  box.appendChild(el("h3", "", t("tour." + card.key)));
  const text = card.key === "test" && n.cost === null ? "tour.test_text_unmeasured" : "tour." + card.key + "_text";
  box.appendChild(el("p", "tour-text", t(text, n)));
  if (card.code) {
    box.appendChild(el("div", "tour-file", card.file + ":" + card.line));
    box.appendChild(el("code", "tour-code", card.code));
  }
  const buttons = el("div", "tour-buttons");
  for (const [id, msg, go] of [["tour-back", "tour.go_back", () => showTour(tourAt - 1)],
                               ["tour-next", tourAt === TOUR.length - 1 ? "tour.go_done" : "tour.go_next",
                                () => (tourAt === TOUR.length - 1 ? closeTour() : showTour(tourAt + 1))],
                               ["tour-close", "tour.go_close", () => closeTour()]]) {
    const b = el("button", "", t(msg));
    b.id = id;
    b.addEventListener("click", go);
    buttons.appendChild(b);
  }
  buttons.firstChild.disabled = tourAt === 0;
  box.appendChild(buttons);
}

function closeTour() {
  tourSave({ done: true, card: tourAt });
  document.getElementById("tour").hidden = true;
  for (const e of document.querySelectorAll(".tour-target")) e.classList.remove("tour-target");
}

function startTour() {  // the first visit opens it; a visit after closing it does not; the button always does
  const button = document.getElementById("tour-start");
  button.hidden = !TOUR.length;
  if (!TOUR.length) return;
  button.addEventListener("click", () => showTour((tourSaved() || {}).done ? 0 : tourAt));
  const saved = tourSaved();
  // in a notebook's frame (as tall as the page) a fixed card sits off screen: there the button opens it
  if (window.self === window.top && (!saved || !saved.done)) showTour(saved ? saved.card : 0);
}
