// What the buyer holds in this sale, as the API lists it (GET
// /sales/{id}/orders): their orders and their ticket in a lottery
// window's draw. Asked for on sign-in, after a reload, and about once a
// second from the draw's time until the ticket is decided; a won ticket
// hands over to the order card (buyer-orders.js).

import { api, validId } from "./api.js";
import { linkedOrder, now, salePath, state, timers } from "./buyer-state.js";
import { store } from "./store.js";
import { isLive, orderKey, RESULT_DEADLINE_MS, statusOf, ticketKey } from "./buyer-derive.js";
import { changed } from "./buyer-events.js";
import { orderFrom, trackOrder } from "./buyer-orders.js";
import { pollSale } from "./buyer-sale.js";

// The draw's result is asked for about once a second from `drawAt`, for
// at most RESULT_DEADLINE_MS.
const TICKET_POLL_MS = 1000;

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
