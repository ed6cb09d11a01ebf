// The buyer page's ticket, in a sale's lottery window: the ticket a
// purchase gets, its result asked for from the draw's time, shown and said
// once per change (WON hands over to the order card).

import { validId } from "./api.js";
import { now, saleId, say, state, timers, ui } from "./buyer-state.js";
import { number, time } from "./format.js";
import { store } from "./store.js";
import { loadOrders, trackOrder } from "./buyer-orders.js";
import { render, showTime } from "./buyer-render.js";
import { pollSale } from "./buyer-sale.js";

// The draw's result is asked for about once a second from `drawAt`, for
// at most RESULT_DEADLINE_MS (it takes well under a second for thousands
// of tickets).
const TICKET_POLL_MS = 1000;
const RESULT_DEADLINE_MS = 60000;

// When a sale's draw is, for an answer that does not say.
export const drawAtOf = (sale) =>
  sale && sale.admission ? sale.admission.windowEndAt : new Date(now()).toISOString();

export const ticketKey = () => "ticket." + saleId + "." + (state.session ? state.session.userId : "");

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
  render();
}

// From `drawAt`, about once a second (the first look spread over a
// second, so every page does not ask at the same instant), until the
// ticket is decided or RESULT_DEADLINE_MS has passed.
export function followTicket() {
  clearTimeout(timers.ticket);
  const ticket = state.ticket;
  if (!ticket || ticket.status !== "TICKET" || !state.session) return;
  const drawAt = Date.parse(ticket.drawAt);
  const t = now();
  if (t > drawAt + RESULT_DEADLINE_MS) return;
  const delay = t < drawAt ? drawAt - t + Math.random() * 1000 : TICKET_POLL_MS;
  timers.ticket = setTimeout(loadOrders, delay);
}

const resultLate = (ticket, t) => ticket.status === "TICKET" && t > Date.parse(ticket.drawAt) + RESULT_DEADLINE_MS;

// TICKET before the draw, DRAWING after `drawAt`, LATE past the deadline,
// else the result.
function ticketShown(ticket, t) {
  if (ticket.status !== "TICKET") return ticket.status;
  if (resultLate(ticket, t)) return "LATE";
  return t < Date.parse(ticket.drawAt) ? "TICKET" : "DRAWING";
}

const TICKET_TEXT = {
  TICKET: "You are in the draw",
  DRAWING: "Drawing… your result comes in a moment",
  LATE: "No result yet",
  WON: "Drawn: you won",
  LOST: "Not drawn this time",
  ENDED: "The sale ended before the draw",
};

function ticketNote(shown) {
  const at = time(Date.parse(state.ticket.drawAt));
  switch (shown) {
    case "TICKET":
      return "Every ticket is drawn at " + at + " in a random order, then decided against the stock. Your result shows here by itself.";
    case "LATE":
      return "The draw's result has not come in time. Reload the page to ask again.";
    case "WON":
      return "Your order is below: pay for it within its window to keep it.";
    case "ENDED":
      return "The sale was ended before your ticket was drawn. Nothing was charged.";
    case "LOST":
      return (
        "The units went to tickets drawn before yours (or you already held your limit). " +
        "Nothing was charged; from now on it is first come, first served."
      );
    default:
      return "The tickets are being drawn.";
  }
}

export function renderTicket(t) {
  const ticket = state.missing ? null : state.ticket;
  ui.ticket.hidden = !ticket;
  if (!ticket) {
    delete ui.ticket.dataset.status;
    return;
  }
  const shown = ticketShown(ticket, t);
  ui.ticket.dataset.status = ticket.status;
  ui.ticketState.textContent = TICKET_TEXT[shown] || shown;
  ui.ticketNote.textContent = ticketNote(shown);
  showTime(ui.drawAt, Date.parse(ticket.drawAt), time);
  ui.ticketQuantity.textContent = number(ticket.quantity);
}

// Says what became of the ticket, once per change, and moves the focus
// on when the result takes the buyer elsewhere (and it was idle).
export function tellTicket(t) {
  const ticket = state.ticket;
  if (!ticket) return;
  const shown = ticketShown(ticket, t);
  const told = shown + " " + ticket.drawAt;
  if (told === state.ticketTold || shown === "DRAWING") return;
  const first = state.ticketTold === "";
  state.ticketTold = told;
  const focus = document.activeElement;
  const idle = focus === document.body || focus === ui.ticket || focus === ui.buySection || focus === ui.buyButton;
  const at = time(Date.parse(ticket.drawAt));
  switch (shown) {
    case "TICKET":
      say("You are in the draw at " + at + ". Your result shows here by itself.", "ok", null, "TICKET");
      break;
    case "LATE":
      say("The draw's result has not come in time. Reload the page to ask again.", "warn", null, "DRAW_LATE");
      break;
    case "WON":
      say("You won the draw: confirming your order…", "ok", null, "WON");
      if (idle && !first) ui.order.focus();
      break;
    case "ENDED":
      say("The sale ended before the draw. Nothing was charged.", "warn", null, "ENDED");
      break;
    case "LOST":
      say("Not drawn this time. Nothing was charged.", "warn", null, "LOST");
      if (idle && !first) (ui.buyButton.disabled ? ui.buySection : ui.buyButton).focus();
      break;
  }
}
