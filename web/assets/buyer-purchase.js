// The buyer page's purchase: the buy form, the purchase itself under its
// Idempotency-Key (a retry of the same purchase cannot buy twice), what
// each refusal changes, and a purchase the draw holds back sent again by
// itself; and the waitlist's join (with the gate's pass, as a purchase)
// and leave (after a question). How many the buyer may buy and why a
// button is off are buyer-derive.js's; the words of each refusal
// buyer-messages.js's; the entry itself buyer-holdings.js's.

import { api, randomKey, validId } from "./api.js";
import { now, saleId, salePath, say, state, timers, ui } from "./buyer-state.js";
import { chosenQuantity, drawAtOf, mayJoin, whyNotBuy, whyNotJoin, windowEndMs } from "./buyer-derive.js";
import { changed, requestSignOut } from "./buyer-events.js";
import { fetchQuestion } from "./buyer-gate.js";
import { learnTicket, learnWaitlist, loadOrders } from "./buyer-holdings.js";
import { DRAWING_RETRIES, messageFor, waitlistMessageFor } from "./buyer-messages.js";
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

// ---------------------------------------------------------- the waitlist

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
