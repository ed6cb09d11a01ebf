// The buyer page's state: the sale it shows (from the address), its
// elements, what it knows and is doing, its timers and clock, and its
// status region. Every other buyer module reads and changes these.

// auth.js first: back from the hosted UI, it puts the address's query back
// before this module reads it.
import "./auth.js";
import { config, validId } from "./api.js";
import { $, announce } from "./dom.js";

const query = new URLSearchParams(location.search);
// ?sale=<id> picks another sale than the configured one (links to a
// sale). A link whose id is no sale id names no sale: the page says so
// and never falls back to the configured sale, so a broken link cannot
// sell the wrong item.
const askedSale = query.get("sale");
export const saleId = askedSale === null ? config.saleId : askedSale;
export const salePath = "/sales/" + encodeURIComponent(saleId);
// ?order=<id>: the LIMIT_EXCEEDED message links to the buyer's order.
export const linkedOrder = validId(query.get("order")) ? query.get("order") : null;

export const ui = {
  skip: $("skip"),
  saleName: $("sale-name"),
  pillLine: $("sale-pill-line"),
  saleStatus: $("sale-status"),
  countdownBox: $("countdown-box"),
  countdownLabel: $("countdown-label"),
  countdown: $("countdown"),
  facts: $("sale-facts"),
  priceBox: $("price-box"),
  price: $("price"),
  remaining: $("remaining"),
  limit: $("limit"),
  starts: $("starts"),
  ends: $("ends"),
  zone: $("zone"),
  stockBar: $("stock-bar"),
  who: $("who"),
  whoName: $("who-name"),
  signin: $("signin"),
  localSignin: $("local-signin"),
  user: $("user"),
  cognitoSignin: $("cognito-signin"),
  loginLink: $("login-link"),
  tokenInput: $("token-input"),
  gate: $("gate"),
  gateForm: $("gate-form"),
  gateTitle: $("gate-title"),
  powStatus: $("pow-status"),
  question: $("question"),
  answer: $("answer"),
  buySection: $("buy"),
  buyForm: $("buy-form"),
  quantity: $("quantity"),
  allowance: $("allowance"),
  buyButton: $("buy-button"),
  buyHint: $("buy-hint"),
  status: $("status"),
  order: $("order"),
  orderState: $("order-state"),
  orderNote: $("order-note"),
  orderId: $("order-id"),
  orderQuantity: $("order-quantity"),
  orderAmountBox: $("order-amount-box"),
  orderAmount: $("order-amount"),
  payWindowBox: $("pay-window-box"),
  payWindow: $("pay-window"),
  receipt: $("receipt"),
  paidAt: $("paid-at"),
  paidAmountBox: $("paid-amount-box"),
  paidAmount: $("paid-amount"),
  paymentId: $("payment-id"),
  payButton: $("pay-button"),
  othersBox: $("other-orders-box"),
  others: $("other-orders"),
  ticket: $("ticket"),
  ticketState: $("ticket-state"),
  ticketNote: $("ticket-note"),
  drawAt: $("draw-at"),
  ticketQuantity: $("ticket-quantity"),
  waitlist: $("waitlist"),
  waitlistState: $("waitlist-state"),
  waitlistNote: $("waitlist-note"),
  waitlistOdds: $("waitlist-odds"),
  waitlistJoin: $("waitlist-join"),
  waitlistLeave: $("waitlist-leave"),
  waitlistHint: $("waitlist-hint"),
  waitlistConfirm: $("waitlist-confirm"),
  waitlistConfirmYes: $("waitlist-confirm-yes"),
  waitlistConfirmNo: $("waitlist-confirm-no"),
};

export const state = {
  sale: null, // the last GET /sales/{id} answer
  startMs: 0,
  endMs: 0,
  // Why there is no sale to show: BAD_ID (the link's id is no id: never
  // asked for), NOT_FOUND (the API has no such sale), or null.
  missing: validId(saleId) ? null : "BAD_ID",
  skewMs: 0, // the server's clock minus ours
  session: null, // {token, userId, expiresAtMs}
  gate: "unknown", // unknown | none | needed | solving | passed
  worker: null, // the proof of work's Web Worker while it runs
  gateBusy: false,
  challengeId: null, // the id of the question shown
  gateRetryAtMs: 0,
  // Pages open since long before the start would all ask for the gate's
  // question at the same second; each waits a little of its own.
  gateJitterMs: Math.random() * 10000,
  pass: null, // the gate's {token, expiresAtMs}
  inFlight: false, // a purchase request is out
  retryAtMs: 0, // Retry-After: no purchase before this (server time)
  refused: null, // a refusal that ends buying here: SALE_ENDED, LIMIT_EXCEEDED
  key: null, // Idempotency-Key of the purchase being attempted
  keyQuantity: 0, // the quantity that key was sent with
  order: null, // the order shown: {orderId, status, quantity, expiresAt, amount, paidAt, paymentId}
  orders: [], // every order of the buyer's in this sale this page knows, newest first
  told: "", // "<orderId> <status>": what the status region last said about the order
  paying: false,
  opened: false, // the countdown reached zero while this page was open
  wasUpcoming: false, // this page saw the sale before its start
  failures: 0, // sale polls failed in a row
  // The lottery window (a sale with `admission`): the buyer's ticket
  // {status TICKET|WON|LOST|ENDED, quantity, orderId, drawAt} or null; whether
  // anything has shown the draw to be over; until when a 503 DRAWING
  // says it runs; how many purchases it has sent back in a row.
  ticket: null,
  ticketTold: "", // "<status> <drawAt>": what the status region last said about it
  drawOver: false,
  drawingUntilMs: 0,
  drawingRetries: 0,
  // The sale's waitlist (a sold-out sale, or after a LOST ticket): the
  // buyer's entry as GET /sales/{id}/orders' `waitlist` gives it
  // {status WAITING|OFFERED|LEFT|ENDED, position, ahead, odds, offer,
  // joinedAt}, or null; a join or leave request out; no join before
  // joinRetryAtMs (Retry-After); joinRefused: NOT_SOLD_OUT once a join
  // was told units are still on sale.
  waitlist: null,
  waitlistTold: "", // "<status> <offer's orderId>": what the status region last said about it
  joining: false,
  leaving: false,
  joinRetryAtMs: 0,
  joinRefused: null,
};

// The page's timers (setTimeout ids): the sale's poll, the order's, the
// ticket's, a purchase sent again after the draw, and the waitlist's.
export const timers = { sale: 0, order: 0, ticket: 0, retry: 0, waitlist: 0 };

// The server's time, as the page has learnt its clock (state.skewMs).
export function now() {
  return Date.now() + state.skewMs;
}

// One message in the status region; `code` names it for the tests and the
// page's own checks (data-code).
export function say(message, tone, links, code) {
  ui.status.dataset.code = code || "";
  announce(ui.status, message, tone, links);
}
