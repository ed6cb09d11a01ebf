// The buyer page's purchase: the buy form, the purchase itself under its
// Idempotency-Key (a retry of the same purchase cannot buy twice), what
// each refusal changes, and a purchase the draw holds back sent again by
// itself. How many the buyer may buy and why the button is off are
// buyer-derive.js's; the words of each refusal buyer-messages.js's. The
// waitlist's join and leave are buyer-waitlist.js's.

import { api, randomKey, validId } from "./api.js";
import { now, saleId, salePath, say, state, timers, ui } from "./buyer-state.js";
import { chosenQuantity, drawAtOf, whyNotBuy, windowEndMs } from "./buyer-derive.js";
import { changed, requestSignOut } from "./buyer-events.js";
import { fetchQuestion } from "./buyer-gate.js";
import { learnTicket, loadOrders } from "./buyer-holdings.js";
import { DRAWING_RETRIES, messageFor } from "./buyer-messages.js";
import { trackOrder } from "./buyer-orders.js";
import { pollSale } from "./buyer-sale.js";

ui.buyForm.addEventListener("submit", (event) => {
  event.preventDefault();
  buy();
});

ui.quantity.addEventListener("change", () => {
  // Another quantity is another purchase: a key sent for the old one
  // would be answered with the old order.
  if (state.key && state.keyQuantity !== chosenQuantity()) state.key = null;
  changed();
});

async function buy() {
  // The first filter against double clicks: a second click or Enter finds
  // the flag set and the button already disabled, before any await.
  if (whyNotBuy(now()) !== null) return;
  const quantity = chosenQuantity();
  state.inFlight = true;
  changed();
  // The button is off while we ask: the focus waits on its section, not
  // at the top of the page.
  ui.buySection.focus();
  if (!state.key || state.keyQuantity !== quantity) {
    state.key = randomKey();
    state.keyQuantity = quantity;
  }
  const headers = { "Idempotency-Key": state.key };
  if (state.pass) headers["X-Sale-Token"] = state.pass.token;
  say("Sending your order…", "info", null, "SENDING");
  const reply = await api(salePath + "/purchase", {
    method: "POST",
    token: state.session.token,
    body: { quantity: quantity },
    headers: headers,
  });
  state.inFlight = false;
  afterDrawing(reply);
  if (reply.status === 202 && reply.body && reply.body.orderId) {
    // Fewer units than the last poll said: shown now, corrected by the
    // next poll (no extra request at the busiest moment).
    if (state.sale && state.sale.remaining > 0) {
      state.sale.remaining = Math.max(0, state.sale.remaining - quantity);
    }
    // The key and the pass are spent on this order.
    state.key = null;
    state.pass = null;
    if (state.gate === "passed") state.gate = "unknown";
    say("Order received: confirming it…", "ok", null, "ACCEPTED");
    trackOrder(
      {
        orderId: reply.body.orderId,
        status: reply.body.status || "QUEUED",
        quantity: reply.body.quantity || quantity,
        expiresAt: null,
      },
      2000
    );
    // The order card replaces the button as what to look at next.
    ui.order.focus();
  } else if (reply.status === 202 && reply.body && reply.body.status === "TICKET") {
    // A ticket, not an order: no stock taken yet. The key and the pass
    // are spent on it as on an order.
    state.key = null;
    state.pass = null;
    if (state.gate === "passed") state.gate = "unknown";
    learnTicket({
      status: "TICKET",
      quantity: reply.body.quantity || quantity,
      orderId: null,
      drawAt: reply.body.drawAt || drawAtOf(state.sale),
    });
    ui.ticket.focus();
  } else {
    purchaseRefused(reply);
    changed();
    ui.buySection.focus();
    if (!ui.buyButton.disabled) ui.buyButton.focus();
  }
  changed();
}

function purchaseRefused(reply) {
  const message = messageFor(reply);
  let links = null;
  switch (reply.code) {
    case "SOLD_OUT":
      // The API just said so: show it now, not at the next poll (which
      // also shows units that come back).
      if (state.sale) Object.assign(state.sale, { remaining: 0, status: "SOLD_OUT" });
      state.key = null;
      break;
    case "SALE_ENDED":
      state.refused = reply.code;
      state.key = null;
      break;
    case "SALE_NOT_FOUND":
      state.sale = null;
      state.missing = "NOT_FOUND";
      state.key = null;
      break;
    case "LIMIT_EXCEEDED": {
      state.refused = reply.code;
      state.key = null;
      const ids = (reply.body && reply.body.orderIds) || [];
      if (ids.length && validId(ids[0])) {
        links = [["See your order", "?sale=" + encodeURIComponent(saleId) + "&order=" + encodeURIComponent(ids[0])]];
      }
      // What the buyer holds, from the API: the allowance follows it.
      loadOrders();
      break;
    }
    case "SALE_NOT_STARTED":
      state.retryAtMs = now() + (reply.retryAfter || 1) * 1000;
      pollSale();
      break;
    case "RATE_LIMITED":
      state.retryAtMs = now() + (reply.retryAfter || 1) * 1000;
      break;
    case "SALE_PAUSED":
      state.retryAtMs = now() + (reply.retryAfter || 2) * 1000;
      break;
    case "DRAWING":
      // The same purchase (same key) again once the draw is over.
      state.retryAtMs = now() + (reply.retryAfter || 1) * 1000;
      state.drawingUntilMs = state.retryAtMs + 2000;
      if (state.drawingRetries <= DRAWING_RETRIES) {
        timers.retry = setTimeout(() => {
          timers.retry = 0;
          buy();
        }, (reply.retryAfter || 1) * 1000);
      }
      break;
    case "GATE_REQUIRED":
      state.pass = null;
      state.gate = "needed";
      fetchQuestion();
      break;
    case "UNAUTHENTICATED":
      requestSignOut(message.text);
      return;
    case "INVALID_REQUEST":
      state.key = null;
      break;
    case "ORDER_EXPIRED":
    case "ORDER_NOT_PAYABLE":
      // That purchase is over: the next press is a new one.
      state.key = null;
      loadOrders();
      break;
    case "NETWORK":
      // Unknown outcome: keep the key, so the retry is the same purchase.
      break;
    default:
      state.retryAtMs = now() + 2000;
  }
  say(message.text, message.tone, links, reply.code);
}

// What a purchase's answer says of the draw: DRAWING, it runs (counted,
// so the page stops sending it again by itself at some point); anything
// else after the window, it is over.
function afterDrawing(reply) {
  clearTimeout(timers.retry);
  timers.retry = 0;
  if (reply.code === "DRAWING") {
    state.drawingRetries += 1;
    state.drawOver = false;
  } else if (reply.code !== "NETWORK") {
    state.drawingRetries = 0;
    state.drawingUntilMs = 0;
    if (now() >= windowEndMs()) state.drawOver = true;
  }
}
