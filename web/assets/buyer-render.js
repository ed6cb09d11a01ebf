// The buyer page drawn from its state: the sale card, sign-in, gate, the
// buy section, the order card and receipt, the other orders, the ticket,
// and the waitlist's card (buyer-waitlist.js draws and says it).
// Nothing below imports it: a feature that changes the state calls
// buyer-events.js's changed(), which buyer.js wires to render.

import { config } from "./api.js";
import { now, state, ui } from "./buyer-state.js";
import { showTime } from "./dom.js";
import { clock, money, number, timeZone } from "./format.js";
import {
  allowance,
  chosenQuantity,
  held,
  maxQuantity,
  readyHint,
  SALE_STATES,
  saleState,
  statusOf,
  whyNotBuy,
  windowEndMs,
  windowLeft,
} from "./buyer-derive.js";
import { tellOrder } from "./buyer-orders.js";
import { renderTicket, tellTicket } from "./buyer-ticket.js";
import { renderWaitlist, tellWaitlist } from "./buyer-waitlist.js";

const ORDER_TEXT = {
  QUEUED: "Confirming your order…",
  PENDING_PAYMENT: "Confirmed: waiting for your payment",
  PAID: "Paid",
  EXPIRED: "Expired: not paid in time",
  REJECTED: "Not confirmed: sold out as it was written",
};

export function render() {
  const t = now();
  const sale = state.sale;
  const saleNow = saleState(t);
  const look = SALE_STATES[saleNow];
  const missing = saleNow === "MISSING";

  ui.saleStatus.textContent = look.pill;
  ui.saleStatus.dataset.tone = look.tone;
  ui.saleStatus.dataset.state = saleNow;
  ui.countdownBox.hidden = !sale || missing;
  ui.facts.hidden = !sale || missing;
  ui.zone.hidden = !sale || missing;
  ui.stockBar.hidden = !sale || missing;
  if (missing) {
    ui.saleName.textContent = "No such sale";
    document.title = "No such sale · Seckill";
  } else if (sale) {
    ui.saleName.textContent = sale.name || sale.saleId;
    document.title = (sale.name || sale.saleId) + " · Seckill";
    ui.countdownLabel.textContent = look.label;
    if (look.to === "start") ui.countdown.textContent = clock(state.startMs - t);
    else if (look.to === "window") ui.countdown.textContent = clock(windowEndMs() - t);
    else if (look.to === "end") ui.countdown.textContent = clock(state.endMs - t);
    else ui.countdown.textContent = "Ended";
    ui.priceBox.hidden = !sale.price;
    ui.price.textContent = money(sale.price);
    ui.remaining.textContent = number(sale.remaining) + " of " + number(sale.totalStock);
    ui.limit.textContent = number(sale.perUserLimit);
    showTime(ui.starts, state.startMs);
    showTime(ui.ends, state.endMs);
    const zone = timeZone();
    ui.zone.textContent = zone ? "Times are in your time zone, " + zone + "." : "Times are in your time zone.";
    ui.stockBar.max = Math.max(1, sale.totalStock);
    ui.stockBar.value = Math.max(0, sale.remaining);
    // Red means trouble: a full bar is green, a nearly empty one amber.
    const share = sale.remaining / Math.max(1, sale.totalStock);
    ui.stockBar.dataset.level = sale.remaining <= 0 ? "none" : share <= 0.1 ? "low" : "plenty";
  }

  const signedIn = !!state.session;
  ui.signin.hidden = signedIn || missing;
  ui.localSignin.hidden = config.auth !== "local";
  ui.cognitoSignin.hidden = config.auth === "local";
  ui.loginLink.hidden = !config.loginUrl;
  ui.who.hidden = !signedIn;
  ui.whoName.textContent = signedIn ? state.session.userId : "";
  const pow = !!(state.sale && state.sale.powBits);
  ui.gate.hidden = !(signedIn && (state.gate === "needed" || state.gate === "solving")) || missing;
  ui.gateTitle.textContent = pow ? "Checking your browser" : "One question before you buy";
  ui.gateForm.hidden = pow;
  ui.powStatus.hidden = !pow;
  ui.skip.textContent = signedIn || missing ? "Skip to the buy button" : "Skip to sign-in";
  ui.skip.hidden = missing;

  // No buy section at all for a sale that is not there.
  ui.buySection.hidden = missing;
  const why = whyNotBuy(t);
  const max = maxQuantity();
  if (ui.quantity.options.length !== max) {
    const chosen = Math.min(max, Number(ui.quantity.value) || 1);
    ui.quantity.replaceChildren(
      ...Array.from({ length: max }, (_, i) => new Option(String(i + 1), String(i + 1)))
    );
    ui.quantity.value = String(chosen);
  }
  const quantity = chosenQuantity();
  // Nothing to choose from one: the control is off, and out of the way of Tab.
  ui.quantity.disabled = why !== null || max <= 1;
  ui.buyButton.disabled = why !== null;
  const total = sale && sale.price ? money(sale.price, { times: quantity }) : "";
  // Before the window closes, a press is an entry in the draw (paused
  // meanwhile too: it would be one once resumed).
  const entry =
    t < windowEndMs() && (saleNow === "UPCOMING" || saleNow === "DRAW_OPEN" || saleNow === "PAUSED");
  ui.buyButton.textContent = state.inFlight
    ? "Sending…"
    : entry
      ? quantity > 1
        ? "Enter the draw for " + quantity
        : "Enter the draw"
      : total
      ? "Buy " + quantity + " for " + total
      : quantity > 1
        ? "Buy " + quantity + " now"
        : "Buy now";
  ui.buyHint.textContent = why || readyHint(saleNow);
  ui.allowance.hidden = !(signedIn && sale);
  if (signedIn && sale) {
    const mine = held();
    ui.allowance.textContent =
      "Up to " +
      sale.perUserLimit +
      " per buyer: you hold " +
      mine +
      ", so you may buy " +
      (allowance() > 0 ? "up to " + allowance() + " more." : "no more.");
  }

  const order = missing ? null : state.order;
  ui.order.hidden = !order;
  if (!order) {
    // Nothing of an order no longer shown stays on the page (the last
    // buyer's, after a sign-out).
    delete ui.order.dataset.status;
    ui.orderId.textContent = "";
  } else {
    const shown = statusOf(order);
    ui.order.dataset.status = shown;
    ui.orderState.textContent = ORDER_TEXT[shown] || shown;
    ui.orderId.textContent = order.orderId;
    ui.orderQuantity.textContent = number(order.quantity);
    const amount = money(order.amount);
    ui.orderAmountBox.hidden = !amount;
    ui.orderAmount.textContent = amount;
    const pending = shown === "PENDING_PAYMENT";
    const left = windowLeft();
    ui.payWindowBox.hidden = !pending;
    ui.payWindow.textContent = left === Infinity ? "–" : clock(left);
    ui.payButton.hidden = !pending;
    ui.payButton.disabled = state.paying;
    const each = sale && sale.price ? money(sale.price) : "";
    ui.payButton.textContent = state.paying
      ? "Paying…"
      : amount
        ? "Pay " + (order.quantity > 1 && each ? order.quantity + " × " + each + " = " : "") + amount
        : "Pay now";
    const units = order.quantity > 1 ? "The " + order.quantity + " units" : "The unit";
    const note = {
      EXPIRED: "The payment window closed before payment. " + units + " went back on sale; nothing was charged.",
      REJECTED: "Nothing was charged.",
    }[shown];
    ui.orderNote.hidden = !note;
    ui.orderNote.textContent = note || "";
    const paid = shown === "PAID";
    ui.receipt.hidden = !paid;
    if (paid) {
      showTime(ui.paidAt, order.paidAt ? Date.parse(order.paidAt) : NaN);
      ui.paidAmountBox.hidden = !amount;
      ui.paidAmount.textContent = amount;
      ui.paymentId.textContent = order.paymentId || "–";
    }
  }
  renderOthers(order);
  renderTicket(t);
  tellTicket(t);
  renderWaitlist(t);
  tellOrder();
  // After the order's news: an offer's words say what to do with it.
  tellWaitlist(t);
}

// The buyer's other orders of this sale, one line each.
let othersDrawn = "";
function renderOthers(current) {
  const others = current ? state.orders.filter((o) => o.orderId !== current.orderId) : [];
  const lines = others.map((o) => {
    const amount = money(o.amount);
    return (
      number(o.quantity) +
      (o.quantity === 1 ? " unit · " : " units · ") +
      (ORDER_TEXT[statusOf(o)] || statusOf(o)) +
      (amount ? " · " + amount : "") +
      " · order " +
      o.orderId
    );
  });
  ui.othersBox.hidden = lines.length === 0;
  const drawn = lines.join("\n");
  if (drawn === othersDrawn) return;
  othersDrawn = drawn;
  ui.others.replaceChildren(
    ...lines.map((line) => {
      const li = document.createElement("li");
      li.textContent = line;
      return li;
    })
  );
}
