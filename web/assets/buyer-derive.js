// What the buyer page derives from its state, without changing it: the
// sale's one status (saleState) that the pill, the countdown and the buy
// button's reason are all drawn from; the status an order is shown with;
// how many units the buyer holds and may still buy; why the button is
// off; the ticket's status as shown; the keys the page keeps its order
// and ticket under; and whether the buyer may join the waitlist. Every
// feature reads these; they call nothing.

import { now, saleId, state, timers, ui } from "./buyer-state.js";
import { time, wait } from "./format.js";

// ------------------------------------------------------------- the sale

// Without a word from the draw, a page assumes it lasts at most this long.
const DRAW_GRACE_MS = 10000;

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
    why:
      "Sold out. A unit not paid for in time goes to the first in the waitlist, or back on sale when no one waits: " +
      "the button turns on by itself if one does.",
  },
  ENDED: { pill: "ENDED", tone: "danger", label: "Closed", why: "The sale has ended." },
};

// ----------------------------------------------------------- the orders

// The user id may hold any character, "." included; the key still names
// one (sale, user) because a sale id cannot hold a ".".
export const orderKey = () => "order." + saleId + "." + (state.session ? state.session.userId : "");

// The status the buyer is shown: an order awaiting payment whose window
// has closed on the clock is expired from that instant (the API says so
// too, and the read that first says so puts the unit back on sale: the
// page asks again a second later).
export function statusOf(order) {
  if (order.status === "PENDING_PAYMENT" && order.expiresAt && Date.parse(order.expiresAt) <= now()) {
    return "EXPIRED";
  }
  return order.status;
}

export const isLive = (order) => {
  const status = statusOf(order);
  return status === "QUEUED" || status === "PENDING_PAYMENT" || status === "PAID";
};

// What is left of the shown order's payment window (Infinity: no window).
export const windowLeft = () =>
  state.order && state.order.expiresAt ? Date.parse(state.order.expiresAt) - now() : Infinity;

// ---------------------------------------------------------- the purchase

// Units the buyer holds in this sale: their orders that still count
// against the per-buyer limit (being written, awaiting payment within
// its window, paid), as the API and this page know them.
export function held() {
  return state.orders.reduce((sum, o) => sum + (isLive(o) ? o.quantity || 1 : 0), 0);
}

// How many more the buyer may buy: the limit minus what they hold.
export const allowance = () => (state.sale ? Math.max(0, state.sale.perUserLimit - held()) : 0);

// The most the quantity choice offers: the allowance, and no more than
// is left (a larger quantity would be refused as sold out).
export function maxQuantity() {
  const left = state.sale && state.sale.remaining > 0 ? state.sale.remaining : Infinity;
  return Math.max(1, Math.min(allowance(), left, 1000));
}

export const chosenQuantity = () => Math.min(maxQuantity(), Math.max(1, Number(ui.quantity.value) || 1));

// Why the buy button is off right now, or null when it is on.
export function whyNotBuy(t) {
  const sale = saleState(t);
  if (sale === "MISSING" || sale === "LOADING") return SALE_STATES[sale].why;
  if (!state.session) return "Sign in first.";
  if (state.inFlight) return "Sending your order…";
  if (SALE_STATES[sale].why) return SALE_STATES[sale].why + (sale === "UPCOMING" ? drawNote() : "");
  if (state.refused) return refusalHint(state.refused);
  if (holdsTicket()) {
    return "You are in the draw at " + time(Date.parse(state.ticket.drawAt)) + ": your result shows here.";
  }
  const shown = state.order && statusOf(state.order);
  if (shown === "QUEUED") return "Your order is being confirmed below.";
  if (shown === "PENDING_PAYMENT") return "Pay for your order below first (or let its window close).";
  if (allowance() <= 0) {
    return (
      "You hold " +
      held() +
      " of the " +
      state.sale.perUserLimit +
      " allowed per buyer: that is the most this sale allows."
    );
  }
  if (state.gate === "needed") return "Answer the question above first.";
  if (state.gate === "solving") return "Checking your browser… (a few seconds)";
  if (t < state.retryAtMs && timers.retry) {
    return "The draw is running: your purchase is sent again by itself in " + wait((state.retryAtMs - t) / 1000) + ".";
  }
  if (t < state.retryAtMs) return "You can try again in " + wait((state.retryAtMs - t) / 1000) + ".";
  return null;
}

// For a sale with a lottery window: when its tickets are drawn.
function drawNote() {
  const closes = windowEndMs();
  if (Number.isNaN(closes)) return "";
  return (
    " Purchases in its first " + wait(state.sale.admission.window) +
    " are tickets for a draw at " + time(closes) + "."
  );
}

// What the hint under an active button says, by the sale's state.
export function readyHint(sale) {
  if (sale === "DRAW_OPEN") {
    return (
      "Every entry until " + time(windowEndMs()) +
      " is drawn then, in a random order: pressing first gains nothing. One press is enough."
    );
  }
  if (sale === "DRAWING") {
    return "The tickets are being drawn: a purchase now goes through as soon as the draw is over (seconds).";
  }
  return "One press is enough: the button turns off while we ask.";
}

function refusalHint(code) {
  if (code === "SALE_ENDED") return "The sale has ended.";
  if (code === "LIMIT_EXCEEDED") return "You hold as many as this sale allows.";
  return "Buying is closed for you on this page.";
}

// ------------------------------------------------------------ the ticket

// The draw's result is asked for from `drawAt` for at most this long (it
// takes well under a second for thousands of tickets).
export const RESULT_DEADLINE_MS = 60000;

// When a sale's draw is, for an answer that does not say.
export const drawAtOf = (sale) =>
  sale && sale.admission ? sale.admission.windowEndAt : new Date(now()).toISOString();

export const ticketKey = () => "ticket." + saleId + "." + (state.session ? state.session.userId : "");

const resultLate = (ticket, t) => ticket.status === "TICKET" && t > Date.parse(ticket.drawAt) + RESULT_DEADLINE_MS;

// TICKET before the draw, DRAWING after `drawAt`, LATE past the deadline,
// else the result.
export function ticketShown(ticket, t) {
  if (ticket.status !== "TICKET") return ticket.status;
  if (resultLate(ticket, t)) return "LATE";
  return t < Date.parse(ticket.drawAt) ? "TICKET" : "DRAWING";
}

// ---------------------------------------------------------- the waitlist

// The buyer's entry as shown (null: none): the API's status, and ENDED
// from the sale's end on (the API says so too from that instant).
export function waitlistShown(t) {
  const entry = state.waitlist;
  if (!entry) return null;
  if (entry.status === "WAITING" && saleState(t) === "ENDED") return "ENDED";
  return entry.status;
}

// Whether the page offers to join: after the sale sold out (a purchase's
// 410 SOLD_OUT or the sale's own status), or after a LOST ticket unless a
// join was told units are still on sale; never to a buyer already in it
// or at their limit (the API would refuse both).
export function mayJoin(t) {
  if (!state.session || state.waitlist || !state.sale || allowance() <= 0) return false;
  const sale = saleState(t);
  if (sale === "SOLD_OUT") return true;
  const lost = !!(state.ticket && state.ticket.status === "LOST");
  return lost && (sale === "LIVE" || sale === "DRAWING") && state.joinRefused !== "NOT_SOLD_OUT";
}

// Why the join button is off right now, or null when it is on.
export function whyNotJoin(t) {
  if (state.joining) return "Joining the waitlist…";
  if (state.gate === "needed") return "Answer the question above first.";
  if (state.gate === "solving") return "Checking your browser… (a few seconds)";
  if (t < state.joinRetryAtMs) return "You can try again in " + wait((state.joinRetryAtMs - t) / 1000) + ".";
  return null;
}

// The offered order as the page knows it best: its own copy (the order
// card's polls are fresher than the list's), else the API's.
export function offerOf(entry) {
  if (!entry || !entry.offer) return null;
  return state.orders.find((o) => o.orderId === entry.offer.orderId) || entry.offer;
}
