// The buyer page's order: the one shown, followed until written, its
// payment window counted down, kept for a reload, said once per change,
// and its payment. The list of the buyer's orders is buyer-holdings.js's.

import { api } from "./api.js";
import { say, state, timers, ui } from "./buyer-state.js";
import { money, wait } from "./format.js";
import { store } from "./store.js";
import { orderKey, statusOf, windowLeft } from "./buyer-derive.js";
import { changed, requestSignOut } from "./buyer-events.js";

// An order as this page keeps it, from an API body.
export function orderFrom(body) {
  return {
    orderId: body.orderId,
    status: body.status,
    quantity: body.quantity || 1,
    expiresAt: body.expiresAt || null,
    amount: body.amount || null,
    paidAt: body.paidAt || null,
    paymentId: body.paymentId || null,
  };
}

// Keeps `order` in the list of the buyer's orders (newest first).
function remember(order) {
  const i = state.orders.findIndex((o) => o.orderId === order.orderId);
  if (i >= 0) state.orders[i] = order;
  else state.orders.unshift(order);
}

// `delay`: a fresh order is not written yet; the first look is in 2 s.
export function trackOrder(order, delay) {
  state.order = order;
  remember(order);
  store.set(orderKey(), order);
  changed();
  clearTimeout(timers.order);
  timers.order = setTimeout(pollOrder, delay);
}

// Every 2 s while the order is being written (QUEUED); then the page
// counts the payment window down itself and shows the expiry the
// instant it closes. Every answer about the order takes a number; a look
// that comes back after a later answer (a payment's) is stale and
// changes nothing.
let orderAnswers = 0;

async function pollOrder() {
  clearTimeout(timers.order);
  if (!state.order || !state.session) return;
  const asked = ++orderAnswers;
  const reply = await api("/orders/" + encodeURIComponent(state.order.orderId), {
    token: state.session.token,
  });
  if (!state.order || asked !== orderAnswers) return;
  if (reply.ok && reply.body) {
    updateOrder(reply.body);
  } else if (reply.code === "UNAUTHENTICATED") {
    requestSignOut("Your sign-in has expired. Sign in again to see your order.");
    return;
  } else if (reply.code === "ORDER_NOT_FOUND") {
    say("We cannot find order " + state.order.orderId + " under your sign-in.", "error", null, reply.code);
    state.orders = state.orders.filter((o) => o !== state.order);
    state.order = null;
    store.set(orderKey(), null);
    changed();
    return;
  } else {
    say("Connection trouble: still checking your order…", "warn", null, reply.code);
  }
  if (state.order && (state.order.status === "QUEUED" || !reply.ok)) {
    timers.order = setTimeout(pollOrder, 2000);
  }
}

function updateOrder(body) {
  if (state.order && body.orderId !== state.order.orderId) return;
  state.order = orderFrom(body);
  remember(state.order);
  store.set(orderKey(), state.order);
  changed();
}

// Says what became of the order shown, once per change of what the
// buyer sees (from the API, or from the clock at the window's close),
// and keeps the keyboard's focus on the control that took over.
export function tellOrder() {
  const order = state.order;
  if (!order) return;
  const shown = statusOf(order);
  const told = order.orderId + " " + shown;
  if (told === state.told) return;
  const first = state.told === "";
  state.told = told;
  const focus = document.activeElement;
  const focusIdle =
    focus === document.body || focus === ui.order || focus === ui.buySection || focus === ui.buyButton;
  const units = order.quantity > 1 ? "the " + order.quantity + " units" : "the unit";
  switch (shown) {
    case "PENDING_PAYMENT": {
      const amount = money(order.amount);
      say(
        "Your order is confirmed. Pay " +
          (amount ? amount + " " : "") +
          "within " +
          wait(windowLeft() / 1000) +
          " to keep it.",
        "ok",
        null,
        shown
      );
      if (focusIdle && !first) ui.payButton.focus();
      break;
    }
    case "PAID":
      say("Paid. Thank you: " + units + (order.quantity > 1 ? " are" : " is") + " yours.", "ok", null, shown);
      break;
    case "EXPIRED":
      say(
        "The payment window closed before payment: your order expired and " +
          units +
          " went back on sale. Nothing was charged.",
        "warn",
        null,
        shown
      );
      // A buyer who lost a unit can buy again, if any is left.
      state.refused = state.refused === "LIMIT_EXCEEDED" ? null : state.refused;
      if (focus === ui.payButton || focus === document.body) ui.order.focus();
      // Closed on this page's clock: the API's word a moment later (it
      // answers EXPIRED from the same instant, releasing the order as it
      // does, or PAID if a payment made elsewhere got in first).
      if (order.status === "PENDING_PAYMENT") setTimeout(pollOrder, 1000);
      break;
    case "REJECTED":
      say(
        "We could not confirm your order: the stock ran out as it was written. Nothing was charged.",
        "error",
        null,
        shown
      );
      state.refused = state.refused === "LIMIT_EXCEEDED" ? null : state.refused;
      break;
  }
}

ui.payButton.addEventListener("click", pay);

async function pay() {
  if (state.paying || !state.order || statusOf(state.order) !== "PENDING_PAYMENT") return;
  state.paying = true;
  changed();
  say("Paying…", "info", null, "PAYING");
  const reply = await api("/orders/" + encodeURIComponent(state.order.orderId) + "/pay", {
    method: "POST",
    token: state.session.token,
  });
  orderAnswers += 1;
  state.paying = false;
  if (reply.ok && reply.body) {
    updateOrder(reply.body);
    // The receipt replaces the button: the focus goes to the order card.
    ui.order.focus();
    return;
  }
  switch (reply.code) {
    case "ORDER_EXPIRED":
      state.order.status = "EXPIRED";
      state.told = state.order.orderId + " EXPIRED";
      say(
        "The payment window closed before payment: your order expired and the unit went back on sale. Nothing was charged.",
        "warn",
        null,
        reply.code
      );
      break;
    case "ORDER_NOT_PAYABLE":
      say(
        "This order cannot be paid: " + ((reply.body && reply.body.message) || "it is not waiting for payment") + ".",
        "error",
        null,
        reply.code
      );
      pollOrder();
      break;
    case "ORDER_NOT_FOUND":
      say("We cannot find this order under your sign-in.", "error", null, reply.code);
      break;
    case "UNAUTHENTICATED":
      requestSignOut("Your sign-in has expired. Sign in again, then pay.");
      return;
    default:
      say(
        (reply.code === "NETWORK" ? "Network error" : "The shop had a problem (HTTP " + reply.status + ")") +
          " while paying. Press Pay now again: paying twice charges once.",
        "error",
        null,
        reply.code
      );
  }
  changed();
  // Back on the button if it is still there, else on the order card.
  if (!ui.payButton.hidden && !ui.payButton.disabled) ui.payButton.focus();
  else ui.order.focus();
}
