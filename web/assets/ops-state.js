// The operator console's state: its elements, the sale watched (from the
// address) and what the console knows of it, the words for the API's
// codes, and the status region. Every other console module reads these.
//
// One rule runs through the console: every figure on screen belongs to
// the sale named above it. A change of sale (or an unknown id) clears them
// all at once, and an answer that arrives for a sale no longer watched is
// dropped (state.watch).

// auth.js first: back from the hosted UI, it puts the address's query back
// before this module reads it.
import "./auth.js";
import { api, config, validId } from "./api.js";
import { $, announce } from "./dom.js";
import { zoneLabel } from "./format.js";

export const ui = {
  who: $("who"),
  whoName: $("who-name"),
  signin: $("signin"),
  localSignin: $("local-signin"),
  user: $("user"),
  cognitoSignin: $("cognito-signin"),
  loginLink: $("login-link"),
  sales: $("sales"),
  salesRows: $("sales-rows"),
  salesRefresh: $("sales-refresh"),
  newSale: $("new-sale"),
  saleForm: $("sale-form"),
  saleInput: $("sale-id"),
  settings: $("settings"),
  settingsTitle: $("settings-title"),
  updated: $("updated"),
  editButton: $("edit-button"),
  editor: $("editor"),
  editorTitle: $("editor-title"),
  editorForm: $("sale-editor"),
  editorError: $("editor-error"),
  editorSave: $("editor-save"),
  editorCancel: $("editor-cancel"),
  zoneHint: $("zone-hint"),
  status: $("status"),
  tiles: $("tiles"),
  stockRemaining: $("stock-remaining"),
  stockTotal: $("stock-total"),
  stockStatus: $("stock-status"),
  stockBar: $("stock-bar"),
  queueVisible: $("queue-visible"),
  queueInflight: $("queue-inflight"),
  queueDlq: $("queue-dlq"),
  orders: $("orders"),
  ordersAt: $("orders-at"),
  outcomes: $("outcomes"),
  funnel: $("funnel"),
  reportSummary: $("report-summary"),
  violations: $("violations"),
  audit: $("audit"),
  control: $("control"),
  actionResult: $("action-result"),
  lookupOrder: $("lookup-order"),
  lookupBuyer: $("lookup-buyer"),
  lookupMessage: $("lookup-message"),
  lookupTable: $("lookup-table"),
  lookupRows: $("lookup-rows"),
  dlqRefresh: $("dlq-refresh"),
  dlqRedriveAll: $("dlq-redrive-all"),
  dlqMessage: $("dlq-message"),
  dlqCount: $("dlq-count"),
  dlqTable: $("dlq-table"),
  dlqRows: $("dlq-rows"),
  refundsSummary: $("refunds-summary"),
  refundsTable: $("refunds-table"),
  refundsRows: $("refunds-rows"),
  draw: $("draw"),
  drawTickets: $("draw-tickets"),
  drawProgress: $("draw-progress"),
  drawAt: $("draw-at"),
  drawHash: $("draw-hash"),
  drawSeed: $("draw-seed"),
  waitlistNote: $("wl-note"),
};
// The Waitlist card's figures, by the API's field names.
export const WAITLIST_FIGURES = ["waiting", "offered", "taken", "expired", "left", "returned"];
export const WAITLIST_CELL = Object.fromEntries(WAITLIST_FIGURES.map((k) => [k, $("wl-" + k)]));
export const BUTTON = {
  pause: $("pause-button"),
  resume: $("resume-button"),
  end: $("end-button"),
  prewarm: $("prewarm-button"),
  reconcile: $("reconcile-button"),
};

const query = new URLSearchParams(location.search);
export const state = {
  session: null,
  saleId: validId(query.get("sale")) ? query.get("sale") : config.saleId,
  watch: 0, // bumped when the sale changes: late answers for the old one are dropped
  timer: 0,
  polls: 0,
  failures: 0,
  down: "", // the stores the last poll could not read, as said
  previous: null, // the last poll's answer, for per-second rates
  funnel: [], // the API's buckets, oldest first
  outcomeCodes: [], // the API's listed outcomes, in its order (outcomeCodes)
  reportAt: null, // the report already announced
  sale: null, // the watched sale as GET /admin/sales/{id} answered it
  sales: [], // the list as last read
  editing: null, // null: creating; else the sale as the form was filled from
  dlqDepth: null, // /live's queue.dlq when the DLQ was last read
  waitlistBusy: false, // a read of the waitlist's figures is out
};

// Stable row order; statuses the API adds later follow, sorted. Outcome
// rows come in the order of the API's own list (`outcomeCodes`).
export const STORE_NAME = { redis: "Redis", orders: "the orders table", queue: "the orders queue" };
export const STATUS_ORDER = ["QUEUED", "PENDING_PAYMENT", "PAID", "EXPIRED", "REJECTED"];
// Words for codes; a code without one is shown as it is.
export const LABEL = {
  QUEUED: "Queued",
  PENDING_PAYMENT: "Pending payment",
  PAID: "Paid",
  EXPIRED: "Expired",
  REJECTED: "Rejected",
  ACCEPTED: "Accepted",
  REPLAYED: "Replayed (same key)",
  TICKET: "Lottery ticket",
  SOLD_OUT: "Sold out",
  LIMIT_EXCEEDED: "Limit reached",
  RATE_LIMITED: "Rate limited",
  SALE_NOT_STARTED: "Not started",
  SALE_ENDED: "Ended",
  SALE_PAUSED: "Paused",
  GATE_REQUIRED: "Gate required",
};
// Both vocabularies: the buyer's (`/live`'s stock.status) and the admin
// routes' (NOT_STARTED).
export const STATUS_TONE = {
  LIVE: "ok",
  UPCOMING: "info",
  NOT_STARTED: "info",
  SOLD_OUT: "danger",
  PAUSED: "warn",
  ENDED: "danger",
};

// The operator's own time zone, named wherever a time is shown or typed.
export const ZONE = zoneLabel();
// How the console writes money: in English, "no price" for none.
export const MONEY = { locale: "en", none: "no price" };

export const say = (message, tone) => announce(ui.status, message, tone);
export const salePath = (suffix) => "/admin/sales/" + encodeURIComponent(state.saleId) + (suffix || "");
export const call = (path, options) => api(path, Object.assign({ token: state.session.token }, options || {}));
export const words = (code) => String(code || "–").replace(/_/g, " ");
