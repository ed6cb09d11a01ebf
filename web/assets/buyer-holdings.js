// What the buyer holds in this sale, as the API lists it (GET
// /sales/{id}/orders): their orders, their ticket in a lottery window's
// draw, and their waitlist entry. Asked for on sign-in, after a reload,
// about once a second from the draw's time until the ticket is decided,
// and every few seconds while the buyer waits in the waitlist; a won
// ticket and an offer from the waitlist hand over to the order card
// (buyer-orders.js).

import { api, validId } from "./api.js";
import { linkedOrder, now, salePath, state, timers } from "./buyer-state.js";
import { store } from "./store.js";
import { isLive, offerOf, orderKey, RESULT_DEADLINE_MS, statusOf, ticketKey } from "./buyer-derive.js";
import { changed } from "./buyer-events.js";
import { orderFrom, trackOrder } from "./buyer-orders.js";
import { pollSale } from "./buyer-sale.js";

// The draw's result is asked for about once a second from `drawAt`, for
// at most RESULT_DEADLINE_MS.
const TICKET_POLL_MS = 1000;
// A waiting entry's place and odds, and an offer, are asked for about
// this often (spread, so the pages of a long line do not ask in step).
const WAITLIST_POLL_MS = 4000;

// An order kept from before a reload, or the one a link names, is shown
// at once and asked for; the API's list of the buyer's orders of this
// sale (QUEUED ones included) fills in the rest, so a new tab or another
// browser shows them and what the buyer may still buy.
export function restoreOrder() {
  const kept = store.get(ticketKey());
  if (kept) learnTicket(kept);
  const saved = store.get(orderKey());
  if (linkedOrder) trackOrder({ orderId: linkedOrder, status: "QUEUED", quantity: 1, expiresAt: null }, 0);
  else if (saved && validId(saved.orderId)) trackOrder(Object.assign({ quantity: 1 }, saved), 0);
  loadOrders();
}

export async function loadOrders() {
  if (!state.session || state.missing) return;
  const session = state.session;
  const reply = await api(salePath + "/orders", { token: session.token });
  if (state.session !== session) return;
  if (!reply.ok || !reply.body) {
    followTicket();
    followWaitlist();
    return;
  }
  const listed = (reply.body.orders || []).filter((o) => o && validId(o.orderId)).map(orderFrom);
  // The list is the API's word on every order but the one this page is
  // following (its own polls are fresher).
  const current = state.order;
  state.orders = listed.map((o) => (current && o.orderId === current.orderId ? current : o));
  if (current && !listed.some((o) => o.orderId === current.orderId)) state.orders.unshift(current);
  if (!current && listed.length) {
    // The one that needs the buyer: being written or awaiting payment,
    // else the newest that counts, else the newest.
    const pick =
      listed.find((o) => statusOf(o) === "QUEUED" || statusOf(o) === "PENDING_PAYMENT") ||
      listed.find(isLive) ||
      listed[0];
    trackOrder(pick, 0);
  }
  // An API that says nothing of tickets leaves the page's own.
  if ("ticket" in reply.body) learnTicket(reply.body.ticket);
  // Likewise for the waitlist.
  if ("waitlist" in reply.body) learnWaitlist(reply.body.waitlist);
  else followWaitlist();
  changed();
}

// The buyer's ticket as the API (GET /sales/{id}/orders' `ticket`, or the
// purchase's 202) gives it; kept for a reload. A result that comes in
// while the page watches is said, and WON hands over to the order card.
export function learnTicket(body) {
  const was = state.ticket;
  const ticket =
    body && typeof body.status === "string" && typeof body.drawAt === "string"
      ? {
          status: body.status,
          quantity: body.quantity || 1,
          orderId: validId(body.orderId) ? body.orderId : null,
          drawAt: body.drawAt,
        }
      : null;
  state.ticket = ticket;
  store.set(ticketKey(), ticket);
  if (ticket && ticket.status !== "TICKET") state.drawOver = true;
  const decided = was && was.status === "TICKET" && ticket && ticket.status !== "TICKET";
  // Won on this page: its order is the one to follow. (Later, the order
  // shown may be another one the buyer bought after it.)
  const won = decided && ticket.status === "WON" && ticket.orderId;
  if (won && (!state.order || state.order.orderId !== ticket.orderId)) {
    trackOrder({ orderId: ticket.orderId, status: "QUEUED", quantity: ticket.quantity, expiresAt: null }, 0);
  }
  // The draw took stock: the sale's numbers, fresh.
  if (decided) pollSale();
  followTicket();
  changed();
}

// From `drawAt`, about once a second (the first look spread over a
// second, so every page does not ask at the same instant), until the
// ticket is decided or RESULT_DEADLINE_MS has passed.
function followTicket() {
  clearTimeout(timers.ticket);
  const ticket = state.ticket;
  if (!ticket || ticket.status !== "TICKET" || !state.session) return;
  const drawAt = Date.parse(ticket.drawAt);
  const t = now();
  if (t > drawAt + RESULT_DEADLINE_MS) return;
  const delay = t < drawAt ? drawAt - t + Math.random() * 1000 : TICKET_POLL_MS;
  timers.ticket = setTimeout(loadOrders, delay);
}

// The buyer's waitlist entry as the API (GET /sales/{id}/orders'
// `waitlist`, or the join's and the leave's answers) gives it. An offer
// that needs the buyer (being written, or awaiting payment) hands over
// to the order card, unless the card shows another order that needs them.
export function learnWaitlist(body) {
  const entry =
    body && typeof body.status === "string"
      ? {
          status: body.status,
          position: typeof body.position === "number" ? body.position : null,
          ahead: typeof body.ahead === "number" ? body.ahead : null,
          odds: body.odds && typeof body.odds.chance === "number" ? body.odds : null,
          offer: body.offer && validId(body.offer.orderId) ? orderFrom(body.offer) : null,
          joinedAt: body.joinedAt || null,
        }
      : null;
  state.waitlist = entry;
  const offer = entry && entry.status === "OFFERED" ? offerOf(entry) : null;
  const needs = (o) => !!o && (statusOf(o) === "QUEUED" || statusOf(o) === "PENDING_PAYMENT");
  if (offer && needs(offer) && !(state.order && state.order.orderId === offer.orderId) && !needs(state.order)) {
    trackOrder(offer, 0);
  }
  followWaitlist();
  changed();
}

// While the buyer waits in line (and the sale is not over), their entry
// is asked for again every few seconds: its place, its odds, an offer.
function followWaitlist() {
  clearTimeout(timers.waitlist);
  const entry = state.waitlist;
  if (!entry || entry.status !== "WAITING" || !state.session) return;
  if (state.endMs && now() >= state.endMs + 5000) return;
  const delay = document.hidden ? 15000 : WAITLIST_POLL_MS * (0.8 + Math.random() * 0.4);
  timers.waitlist = setTimeout(loadOrders, delay);
}
