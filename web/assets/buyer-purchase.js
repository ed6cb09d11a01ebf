// The buyer page's purchase: how many the buyer may still buy, why the
// button is off, the purchase itself under its Idempotency-Key (a retry
// of the same purchase cannot buy twice), and a message for every
// refusal.

import { api, randomKey, validId } from "./api.js";
import { now, saleId, salePath, say, state, timers, ui } from "./buyer-state.js";
import { time, wait } from "./format.js";
import { fetchQuestion } from "./buyer-gate.js";
import { isLive, loadOrders, statusOf, trackOrder } from "./buyer-orders.js";
import { render } from "./buyer-render.js";
import { holdsTicket, pollSale, SALE_STATES, saleState, windowEndMs } from "./buyer-sale.js";
import { signOut } from "./buyer-signin.js";
import { drawAtOf, learnTicket } from "./buyer-ticket.js";

// A purchase the draw holds back (503 DRAWING) is sent again by itself at
// most this many times in a row.
const DRAWING_RETRIES = 30;

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

ui.buyForm.addEventListener("submit", (event) => {
  event.preventDefault();
  buy();
});

ui.quantity.addEventListener("change", () => {
  // Another quantity is another purchase: a key sent for the old one
  // would be answered with the old order.
  if (state.key && state.keyQuantity !== chosenQuantity()) state.key = null;
  render();
});

async function buy() {
  // The first filter against double clicks: a second click or Enter finds
  // the flag set and the button already disabled, before any await.
  if (whyNotBuy(now()) !== null) return;
  const quantity = chosenQuantity();
  state.inFlight = true;
  render();
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
    render();
    ui.buySection.focus();
    if (!ui.buyButton.disabled) ui.buyButton.focus();
  }
  render();
}

// A human message for every refusal of the purchase route.
export function messageFor(reply) {
  const retryAfter = reply.retryAfter;
  const limit = state.sale ? state.sale.perUserLimit : null;
  switch (reply.code) {
    case "SOLD_OUT":
      return {
        text:
          "Sold out: every unit has been taken" +
          (state.keyQuantity > 1 ? " (or fewer are left than you asked for)" : "") +
          ". Nothing was charged.",
        tone: "error",
      };
    case "LIMIT_EXCEEDED":
      return {
        text:
          "You already hold as many as this sale allows" + (limit ? " (" + limit + " per buyer)." : "."),
        tone: "warn",
      };
    case "SALE_NOT_STARTED":
      return {
        text:
          "The sale has not started yet" +
          (retryAfter ? ": it opens in " + wait(retryAfter) : "") +
          ". The button turns on by itself.",
        tone: "warn",
      };
    case "SALE_ENDED":
      return { text: "The sale has ended.", tone: "error" };
    case "RATE_LIMITED":
      return {
        text: "Too many tries in a short time. You can try again in " + wait(retryAfter || 1) + ".",
        tone: "warn",
      };
    case "SALE_PAUSED":
      return {
        text:
          "The sale is paused for a moment. Try again in " +
          wait(retryAfter || 2) +
          ": a retry cannot buy twice.",
        tone: "warn",
      };
    case "DRAWING":
      return {
        text:
          state.drawingRetries > DRAWING_RETRIES
            ? "The draw is taking longer than usual. Press Buy now again in a moment: a retry cannot buy twice."
            : "The tickets of the first seconds are being drawn: your purchase is sent again by itself in " +
              wait(retryAfter || 1) +
              " (it cannot buy twice).",
        tone: "info",
      };
    case "GATE_REQUIRED":
      return {
        text:
          state.sale && state.sale.powBits
            ? "Your browser needs checking again before you buy (a few seconds); then press Buy now again."
            : "This sale asks one question before you buy: answer it above, then press Buy now again.",
        tone: "warn",
      };
    case "UNAUTHENTICATED":
      return { text: "Your sign-in has expired. Sign in again.", tone: "error" };
    case "SALE_NOT_FOUND":
      return { text: "There is no sale called “" + saleId + "”.", tone: "error" };
    case "INVALID_REQUEST":
      return {
        text: "The shop refused the request: " + ((reply.body && reply.body.message) || "invalid request") + ".",
        tone: "error",
      };
    // A retry (same key) of a purchase whose order has since ended: the
    // answer names it; a new press is a new purchase.
    case "ORDER_EXPIRED":
      return {
        text:
          "Your earlier order of this purchase expired unpaid and its unit went back on sale. Press Buy now again to buy anew.",
        tone: "warn",
      };
    case "ORDER_NOT_PAYABLE":
      return {
        text: "Your earlier order of this purchase was not accepted: no unit was left for it. Nothing was charged.",
        tone: "error",
      };
    case "NETWORK":
      return {
        text:
          "Network error: we could not reach the shop, so we do not know whether the order went through. " +
          "Press Buy now again: the retry carries the same key and cannot buy twice.",
        tone: "error",
      };
    default:
      return {
        text:
          "The shop had a problem (HTTP " +
          reply.status +
          "). Press Buy now again in a moment: a retry cannot buy twice.",
        tone: "error",
      };
  }
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
      signOut(message.text);
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
