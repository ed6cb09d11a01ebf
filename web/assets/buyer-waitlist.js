// The buyer page's waitlist: joining it (with the gate's pass, as a
// purchase) and leaving it (after a question, as leaving is final), what
// each refusal changes, and its card drawn and said. Whether the buyer
// may join and why the button is off are buyer-derive.js's; the words
// buyer-waitlist-messages.js's; the entry itself, as the API lists it,
// buyer-holdings.js's. buyer-render.js calls renderWaitlist and
// tellWaitlist with the rest of the page.

import { api } from "./api.js";
import { now, salePath, say, state, ui } from "./buyer-state.js";
import { mayJoin, offerOf, saleState, statusOf, waitlistShown, whyNotJoin } from "./buyer-derive.js";
import { changed, requestSignOut } from "./buyer-events.js";
import { fetchQuestion } from "./buyer-gate.js";
import { learnWaitlist, loadOrders } from "./buyer-holdings.js";
import { pollSale } from "./buyer-sale.js";
import { oddsWords, waitlistLine, waitlistMessageFor, waitlistNews, waitlistNote } from "./buyer-waitlist-messages.js";

ui.waitlistJoin.addEventListener("click", join);
ui.waitlistLeave.addEventListener("click", askLeave);
ui.waitlistConfirmYes.addEventListener("click", () => {
  closeQuestion(null);
  leave();
});
ui.waitlistConfirmNo.addEventListener("click", () => closeQuestion(ui.waitlistLeave));
ui.waitlistConfirm.addEventListener("keydown", (event) => {
  if (event.key === "Escape") closeQuestion(ui.waitlistLeave);
});

// Joins the sale's waitlist, with the gate's pass as a purchase sends it
// (X-Sale-Token). 201: joined; 200: already in (the same place kept, or
// LEFT: leaving is final). The pass is kept: an entry is no purchase,
// and an offer is an order that needs none.
async function join() {
  const t = now();
  if (!mayJoin(t) || whyNotJoin(t) !== null) return;
  state.joining = true;
  changed();
  ui.waitlist.focus();
  const session = state.session;
  const headers = state.pass ? { "X-Sale-Token": state.pass.token } : {};
  say("Joining the waitlist…", "info", null, "JOINING");
  const reply = await api(salePath + "/waitlist", { method: "POST", token: session.token, headers: headers });
  state.joining = false;
  if (state.session !== session) return;
  if (reply.ok && reply.body) {
    state.joinRefused = null;
    learnWaitlist(reply.body);
    if (reply.body.status === "LEFT") {
      say("You left this sale's waitlist earlier: leaving is final, so there is no new place.", "warn", null, "LEFT");
    }
  } else {
    waitlistRefused(reply, false);
  }
  changed();
  ui.waitlist.focus();
}

// Leaving asks first: it is final (no new place later).
function askLeave() {
  if (state.leaving || !state.waitlist || state.waitlist.status !== "WAITING") return;
  ui.waitlistConfirm.hidden = false;
  ui.waitlistConfirmYes.focus();
}

function closeQuestion(back) {
  ui.waitlistConfirm.hidden = true;
  if (back && !back.hidden && !back.disabled) back.focus();
  else ui.waitlist.focus();
}

// 200 with the entry: LEFT, or still OFFERED (an offer is an order,
// the buyer's to pay or let lapse).
async function leave() {
  if (state.leaving || !state.session) return;
  state.leaving = true;
  changed();
  const session = state.session;
  const reply = await api(salePath + "/waitlist", { method: "DELETE", token: session.token });
  state.leaving = false;
  if (state.session !== session) return;
  if (reply.ok && reply.body) learnWaitlist(reply.body);
  else waitlistRefused(reply, true);
  changed();
  ui.waitlist.focus();
}

// What each refusal of a join or a leave changes, then its words.
function waitlistRefused(reply, leaving) {
  const message = waitlistMessageFor(reply, leaving);
  const later = (seconds) => {
    state.joinRetryAtMs = now() + (reply.retryAfter || seconds) * 1000;
  };
  switch (reply.code) {
    case "NOT_SOLD_OUT":
      // Buy instead: the sale's numbers, fresh.
      state.joinRefused = "NOT_SOLD_OUT";
      pollSale();
      break;
    case "LIMIT_EXCEEDED":
      loadOrders();
      break;
    case "NOT_IN_WAITLIST":
      state.waitlist = null;
      break;
    case "SALE_ENDED":
      state.refused = reply.code;
      break;
    case "SALE_NOT_FOUND":
      state.sale = null;
      state.missing = "NOT_FOUND";
      break;
    case "SALE_NOT_STARTED":
      later(1);
      pollSale();
      break;
    case "RATE_LIMITED":
    case "DRAWING":
      later(1);
      break;
    case "SALE_PAUSED":
      later(2);
      break;
    case "GATE_REQUIRED":
      state.pass = null;
      state.gate = "needed";
      fetchQuestion();
      break;
    case "UNAUTHENTICATED":
      requestSignOut(message.text);
      return;
    case "NETWORK":
      // Unknown outcome: the API's word on the entry (a retry is safe).
      loadOrders();
      break;
    default:
      later(2);
  }
  say(message.text, message.tone, null, reply.code);
}

// The waitlist's card: the offer to join (sold out, or a lost ticket),
// else the buyer's entry: their place and odds, an offer, or how it
// ended. `data-state` names what it shows (JOIN, WAITING, OFFERED, LEFT,
// ENDED) for the tests and the page's own checks.
export function renderWaitlist(t) {
  const shown = state.missing ? null : waitlistShown(t) || (mayJoin(t) ? "JOIN" : null);
  ui.waitlist.hidden = !shown;
  if (!shown) {
    delete ui.waitlist.dataset.state;
    ui.waitlistConfirm.hidden = true;
    return;
  }
  const entry = state.waitlist;
  const offer = offerOf(entry);
  ui.waitlist.dataset.state = shown;
  ui.waitlistState.textContent = waitlistLine(shown, entry, saleState(t) === "SOLD_OUT");
  ui.waitlistNote.textContent = waitlistNote(shown, offer ? statusOf(offer) : null);
  const waiting = shown === "WAITING";
  ui.waitlistOdds.hidden = !waiting;
  ui.waitlistOdds.textContent = waiting ? oddsWords(entry.odds) : "";
  ui.waitlistOdds.dataset.poor = String(!!(waiting && entry.odds && entry.odds.poor));
  const why = shown === "JOIN" ? whyNotJoin(t) : null;
  ui.waitlistJoin.hidden = shown !== "JOIN";
  ui.waitlistJoin.disabled = why !== null;
  ui.waitlistJoin.textContent = state.joining ? "Joining…" : "Join the waitlist";
  ui.waitlistHint.hidden = !why;
  ui.waitlistHint.textContent = why || "";
  ui.waitlistLeave.hidden = !waiting;
  ui.waitlistLeave.disabled = state.leaving;
  ui.waitlistLeave.textContent = state.leaving ? "Leaving…" : "Leave the waitlist";
  if (!waiting) ui.waitlistConfirm.hidden = true;
}

// Says what became of the entry, once per change (its place moving up is
// shown, not said: a long line would talk all the time).
export function tellWaitlist(t) {
  const shown = waitlistShown(t);
  if (!shown) return;
  const offer = offerOf(state.waitlist);
  const told = shown + " " + (offer ? offer.orderId : "");
  if (told === state.waitlistTold) return;
  const first = state.waitlistTold === "";
  state.waitlistTold = told;
  const news = waitlistNews(shown, state.waitlist);
  // An offer already settled (paid, lapsed) when first seen is the
  // order card's to say.
  if (!news || (shown === "OFFERED" && first && offer && statusOf(offer) !== "PENDING_PAYMENT" && statusOf(offer) !== "QUEUED")) {
    return;
  }
  say(news.text, news.tone, null, news.code);
  if (shown === "OFFERED" && !first) {
    const focus = document.activeElement;
    if (focus === document.body || focus === ui.waitlist || focus === ui.buySection) ui.order.focus();
  }
}
