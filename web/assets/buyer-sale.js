// The buyer page's sale: GET /sales/{id} polled gently, the server's
// clock learnt from it, and the sale's one status (saleState) that the
// pill, the countdown and the buy button's reason are all drawn from.

import { api } from "./api.js";
import { now, saleId, salePath, say, state, timers } from "./buyer-state.js";
import { isLive, restoreOrder } from "./buyer-orders.js";
import { render } from "./buyer-render.js";

// Without a word from the draw, a page assumes it lasts at most this long.
const DRAW_GRACE_MS = 10000;

// Gently: every 3 s (longer when the API's Cache-Control says so, or the
// start is far), with jitter so thousands of open pages do not ask in
// step, and not at all while the tab is hidden.
export async function pollSale() {
  clearTimeout(timers.sale);
  if (state.missing === "BAD_ID") return;
  if (document.hidden) {
    timers.sale = setTimeout(pollSale, 15000);
    return;
  }
  const reply = await api(salePath);
  let next = 3000;
  if (reply.ok && reply.body) {
    const before = state.sale ? state.sale.status : null;
    const appeared = state.missing !== null;
    state.sale = reply.body;
    state.missing = null;
    // A sale created after its link was opened: the buyer's orders now.
    if (appeared && state.session) restoreOrder();
    state.startMs = Date.parse(reply.body.startAt);
    state.endMs = Date.parse(reply.body.endAt);
    state.failures = 0;
    learnSkew(reply);
    const maxAge = /max-age=(\d+)/.exec(reply.headers.get("Cache-Control") || "");
    if (maxAge) next = Math.max(next, Number(maxAge[1]) * 1000);
    if (state.startMs - now() > 120000) next = Math.max(next, 10000);
    if (reply.body.status === "ENDED") next = 60000;
    if (reply.body.status !== before) saleChanged(before, reply.body.status);
  } else if (reply.status === 404 || reply.code === "INVALID_REQUEST") {
    // Asked again now and then: a sale announced by its link before it
    // is created shows up by itself.
    const already = state.missing === "NOT_FOUND";
    state.sale = null;
    state.missing = "NOT_FOUND";
    next = 30000;
    if (!already) sayMissing();
  } else {
    state.failures = (state.failures || 0) + 1;
    next = Math.min(30000, 3000 * 2 ** state.failures);
    if (state.failures === 2) {
      say("Connection trouble: the sale's numbers may be out of date. Still trying…", "warn", null, "NETWORK");
    }
  }
  render();
  timers.sale = setTimeout(pollSale, next * (0.8 + Math.random() * 0.4));
}

export function sayMissing() {
  const text =
    state.missing === "BAD_ID"
      ? "This link does not name a sale: “" + saleId + "” is not a sale id. Check the link."
      : "There is no sale called “" + saleId + "”. Check the link.";
  say(text, "error", [["See the shop's current sale", "/"]], "SALE_NOT_FOUND");
}

// Tell the buyer when the sale itself changes under them, before they
// press anything (once per change; not over their own order's news).
function saleChanged(before, status) {
  if ((state.order && isLive(state.order)) || state.refused || holdsTicket()) return;
  if (status === "SOLD_OUT") {
    say("Sold out: every unit has been taken.", "error", null, "SOLD_OUT");
  } else if (status === "ENDED" && before) {
    say("The sale has ended.", "error", null, "SALE_ENDED");
  } else if (status === "PAUSED") {
    say("The shop has paused the sale: buying resumes when it is back.", "warn", null, "SALE_PAUSED");
  } else if (status === "LIVE" && (before === "SOLD_OUT" || before === "PAUSED")) {
    say("The sale is on again: units are available.", "ok", null, "LIVE");
  }
}

// A buyer's clock can be minutes off; the countdown must follow the
// server's. `Date` has one-second resolution, so only a clear difference
// (over 2 s) is corrected.
function learnSkew(reply) {
  const date = Date.parse(reply.headers.get("Date") || "");
  if (Number.isNaN(date) || !reply.sentAt) return;
  const skew = date + 500 - (reply.sentAt + reply.receivedAt) / 2;
  state.skewMs = Math.abs(skew) > 2000 ? skew : 0;
}

// The sale's one status, from the API's answer and the clock: the pill,
// the countdown and the buy button's reason are all drawn from it, so
// they never disagree (the API's LIVE after the end is ENDED here; its
// UPCOMING after the start is LIVE until the next poll).
export function saleState(t) {
  if (state.missing) return "MISSING";
  const sale = state.sale;
  if (!sale) return "LOADING";
  if (t >= state.endMs || sale.status === "ENDED" || state.refused === "SALE_ENDED") return "ENDED";
  if (t < state.startMs) return "UPCOMING";
  if (sale.status === "PAUSED") return "PAUSED";
  const closes = windowEndMs();
  if (t < closes) return "DRAW_OPEN";
  if (drawRunning(t, closes)) return "DRAWING";
  if (sale.status === "SOLD_OUT") return "SOLD_OUT";
  return "LIVE";
}

// When the sale's lottery window closes (NaN: no window).
export const windowEndMs = () =>
  state.sale && state.sale.admission ? Date.parse(state.sale.admission.windowEndAt) : NaN;

// After the window, until the draw is over: while the buyer's own ticket
// waits for its result, while a purchase was last answered DRAWING, and
// (nothing having said otherwise) for DRAW_GRACE_MS.
function drawRunning(t, closes) {
  if (Number.isNaN(closes) || t < closes) return false;
  if (holdsTicket() || t < state.drawingUntilMs) return true;
  return !state.drawOver && t < closes + DRAW_GRACE_MS;
}

export const holdsTicket = () => !!(state.ticket && state.ticket.status === "TICKET");

// Per state: the pill, its tone, the countdown's label and target, and
// why the buy button is off (null: it may be on).
export const SALE_STATES = {
  MISSING: { pill: "NO SUCH SALE", tone: "danger", why: "There is no such sale." },
  LOADING: { pill: "…", tone: "info", why: "Loading the sale…" },
  UPCOMING: {
    pill: "UPCOMING",
    tone: "info",
    label: "Opens in",
    to: "start",
    why: "The button turns on by itself when the sale opens.",
  },
  LIVE: { pill: "LIVE", tone: "ok", label: "Open: closes in", to: "end", why: null },
  // The lottery window: a purchase is a ticket for the draw at its close.
  DRAW_OPEN: { pill: "DRAW OPEN", tone: "ok", label: "Entries for the draw close in", to: "window", why: null },
  // The tickets are being drawn: a purchase waits for it (503 DRAWING).
  DRAWING: { pill: "DRAWING", tone: "info", label: "Drawing the tickets: closes in", to: "end", why: null },
  PAUSED: {
    pill: "PAUSED",
    tone: "warn",
    label: "Paused: closes in",
    to: "end",
    why: "The shop has paused the sale. The button turns on by itself when it resumes.",
  },
  SOLD_OUT: {
    pill: "SOLD OUT",
    tone: "danger",
    label: "Sold out: closes in",
    to: "end",
    why: "Sold out. Units not paid for in time come back: the button turns on by itself if one does.",
  },
  ENDED: { pill: "ENDED", tone: "danger", label: "Closed", why: "The sale has ended." },
};
