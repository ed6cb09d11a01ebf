// The buyer page's ticket, in a sale's lottery window, drawn and said:
// the card shows it, and the status region says once per change what
// became of it (WON hands over to the order card). The ticket itself is
// learnt and followed by buyer-holdings.js.

import { say, state, ui } from "./buyer-state.js";
import { showTime } from "./dom.js";
import { number, time } from "./format.js";
import { ticketShown } from "./buyer-derive.js";

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
