// The buyer page's orders: the one shown (followed until written, its
// payment window counted down, paid), the buyer's others in the sale,
// kept for a reload, and the payment.

import { api, validId } from "./api.js";
import { linkedOrder, now, saleId, salePath, say, state, timers, ui } from "./buyer-state.js";
import { money, wait } from "./format.js";
import { store } from "./store.js";
import { render } from "./buyer-render.js";
import { signOut } from "./buyer-signin.js";
import { followTicket, learnTicket, ticketKey } from "./buyer-ticket.js";

// The user id may hold any character, "." included; the key still names
// one (sale, user) because a sale id cannot hold a ".".
const orderKey = () => "order." + saleId + "." + (state.session ? state.session.userId : "");

// An order as this page keeps it, from an API body.
function orderFrom(body) {
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

// Keeps `order` in the list of the buyer's orders (newest first).
function remember(order) {
  const i = state.orders.findIndex((o) => o.orderId === order.orderId);
  if (i >= 0) state.orders[i] = order;
  else state.orders.unshift(order);
}

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
  render();
}

// `delay`: a fresh order is not written yet; the first look is in 2 s.
export function trackOrder(order, delay) {
  state.order = order;
  remember(order);
  store.set(orderKey(), order);
  render();
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
    signOut("Your sign-in has expired. Sign in again to see your order.");
    return;
  } else if (reply.code === "ORDER_NOT_FOUND") {
    say("We cannot find order " + state.order.orderId + " under your sign-in.", "error", null, reply.code);
    state.orders = state.orders.filter((o) => o !== state.order);
    state.order = null;
    store.set(orderKey(), null);
    render();
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
  render();
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

export const windowLeft = () =>
  state.order && state.order.expiresAt ? Date.parse(state.order.expiresAt) - now() : Infinity;

ui.payButton.addEventListener("click", pay);

async function pay() {
  if (state.paying || !state.order || statusOf(state.order) !== "PENDING_PAYMENT") return;
  state.paying = true;
  render();
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
      signOut("Your sign-in has expired. Sign in again, then pay.");
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
  render();
  // Back on the button if it is still there, else on the order card.
  if (!ui.payButton.hidden && !ui.payButton.disabled) ui.payButton.focus();
  else ui.order.focus();
}
