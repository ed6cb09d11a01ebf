// The buyer page's sale: GET /sales/{id} polled gently, the server's
// clock learnt from it, and the buyer told when the sale changes under
// them. Its one status (saleState) is buyer-derive.js's.

import { api } from "./api.js";
import { now, saleId, salePath, say, state, timers } from "./buyer-state.js";
import { holdsTicket, isLive } from "./buyer-derive.js";
import { changed, saleFound } from "./buyer-events.js";

// Gently: every 3 s (longer when the API's Cache-Control says so, or the
// start is far), with jitter so thousands of open pages do not ask in
// step, and not at all while the tab is hidden.
export async function pollSale() {
  clearTimeout(timers.sale);
  if (state.missing === "BAD_ID") return;
  if (document.hidden) {
    timers.sale = setTimeout(pollSale, 15000);
    return;
  }
  const reply = await api(salePath);
  let next = 3000;
  if (reply.ok && reply.body) {
    const before = state.sale ? state.sale.status : null;
    const appeared = state.missing !== null;
    state.sale = reply.body;
    state.missing = null;
    // A sale created after its link was opened: the buyer's orders now.
    if (appeared && state.session) saleFound();
    state.startMs = Date.parse(reply.body.startAt);
    state.endMs = Date.parse(reply.body.endAt);
    state.failures = 0;
    learnSkew(reply);
    const maxAge = /max-age=(\d+)/.exec(reply.headers.get("Cache-Control") || "");
    if (maxAge) next = Math.max(next, Number(maxAge[1]) * 1000);
    if (state.startMs - now() > 120000) next = Math.max(next, 10000);
    if (reply.body.status === "ENDED") next = 60000;
    if (reply.body.status !== before) saleChanged(before, reply.body.status);
  } else if (reply.status === 404 || reply.code === "INVALID_REQUEST") {
    // Asked again now and then: a sale announced by its link before it
    // is created shows up by itself.
    const already = state.missing === "NOT_FOUND";
    state.sale = null;
    state.missing = "NOT_FOUND";
    next = 30000;
    if (!already) sayMissing();
  } else {
    state.failures = (state.failures || 0) + 1;
    next = Math.min(30000, 3000 * 2 ** state.failures);
    if (state.failures === 2) {
      say("Connection trouble: the sale's numbers may be out of date. Still trying…", "warn", null, "NETWORK");
    }
  }
  changed();
  timers.sale = setTimeout(pollSale, next * (0.8 + Math.random() * 0.4));
}

export function sayMissing() {
  const text =
    state.missing === "BAD_ID"
      ? "This link does not name a sale: “" + saleId + "” is not a sale id. Check the link."
      : "There is no sale called “" + saleId + "”. Check the link.";
  say(text, "error", [["See the shop's current sale", "/"]], "SALE_NOT_FOUND");
}

// Tell the buyer when the sale itself changes under them, before they
// press anything (once per change; not over their own order's news).
function saleChanged(before, status) {
  if ((state.order && isLive(state.order)) || state.refused || holdsTicket()) return;
  if (status === "SOLD_OUT") {
    say("Sold out: every unit has been taken.", "error", null, "SOLD_OUT");
  } else if (status === "ENDED" && before) {
    say("The sale has ended.", "error", null, "SALE_ENDED");
  } else if (status === "PAUSED") {
    say("The shop has paused the sale: buying resumes when it is back.", "warn", null, "SALE_PAUSED");
  } else if (status === "LIVE" && (before === "SOLD_OUT" || before === "PAUSED")) {
    say("The sale is on again: units are available.", "ok", null, "LIVE");
  }
}

// A buyer's clock can be minutes off; the countdown must follow the
// server's. `Date` has one-second resolution, so only a clear difference
// (over 2 s) is corrected.
function learnSkew(reply) {
  const date = Date.parse(reply.headers.get("Date") || "");
  if (Number.isNaN(date) || !reply.sentAt) return;
  const skew = date + 500 - (reply.sentAt + reply.receivedAt) / 2;
  state.skewMs = Math.abs(skew) > 2000 ? skew : 0;
}
