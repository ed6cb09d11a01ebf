// The buyer page (an ES module; the browser loads the rest through its
// imports, no build step): one sale, its status and stock, sign-in, the
// gate's question, a purchase of as many units as the buyer may still
// hold (or, in a sale's lottery window, a ticket for the draw, then its
// result), its confirmation, its payment and receipt, the buyer's other
// orders of the sale, and on a sold-out sale its waitlist (a place in
// line, the odds, an offer of a unit that came back, as an order).
// Everything goes through the public HTTP API, so the page works the
// same on the local stack and on a deployed one.
//
// One module per concern, in layers (a module imports only those below
// it, never one above):
//   buyer.js          this one: wires the hooks, keeps the clock ticking,
//                     starts the page
//   buyer-purchase.js buyer-render.js buyer-signin.js
//   buyer-waitlist.js (joining and leaving the waitlist; its card)
//   buyer-holdings.js (the buyer's orders, ticket and waitlist entry, as
//                     the API lists them)
//   buyer-orders.js buyer-sale.js buyer-gate.js buyer-ticket.js
//   buyer-waitlist-messages.js (the waitlist's words)
//   buyer-derive.js buyer-messages.js (pure: read the state, call nothing)
//   buyer-state.js buyer-events.js (the state; the hooks)
// and the shared api.js, auth.js, dom.js, store.js and format.js. A
// feature that must have the page drawn again or the buyer signed out
// calls buyer-events.js, wired here to render and signOut.

import { config } from "./api.js";
import { savedSession, saveSession, tokenFromFragment } from "./auth.js";
import { now, say, state, timers } from "./buyer-state.js";
import { time } from "./format.js";
import { windowEndMs } from "./buyer-derive.js";
import { onChange, onSaleFound, onSignOut } from "./buyer-events.js";
import { fetchQuestion } from "./buyer-gate.js";
import { loadOrders, restoreOrder } from "./buyer-holdings.js";
import { render } from "./buyer-render.js";
import { pollSale, sayMissing } from "./buyer-sale.js";
import { signOut } from "./buyer-signin.js";
// Reached through none of the others: it only wires the buy form.
import "./buyer-purchase.js";

onChange(render);
onSignOut(signOut);
onSaleFound(restoreOrder);

// Four times a second: the countdowns, and what depends on the time.
function tick() {
  const t = now();
  if (state.session && state.session.expiresAtMs <= Date.now()) {
    signOut("Your sign-in has expired. Sign in again.");
  }
  if (state.sale && !state.opened && t >= state.startMs) {
    state.opened = true;
    if (state.wasUpcoming) {
      if (state.session && state.sale.admission) {
        say(
          "The sale is open: enter the draw until " + time(windowEndMs()) + " (when you press in that time does not matter).",
          "ok",
          null,
          "OPEN"
        );
      } else if (state.session) say("The sale is open: you can buy now.", "ok", null, "OPEN");
      // Fresh numbers, a little later for each page: not every open page
      // at the same instant.
      clearTimeout(timers.sale);
      timers.sale = setTimeout(pollSale, Math.random() * 2000);
    }
  }
  if (state.sale && t < state.startMs) state.wasUpcoming = true;
  if (state.pass && t >= state.pass.expiresAtMs - 2000) {
    state.pass = null;
    state.gate = "unknown";
  }
  // A proof of work is served from the start only: the solve time itself
  // spreads the opening second, so no jitter is added to it.
  const opensIn = state.sale && state.sale.powBits ? 0 : 30000 - state.gateJitterMs;
  const gateDue = state.startMs - t <= opensIn && t < state.endMs && t >= state.gateRetryAtMs;
  const gated = state.sale && state.sale.gate !== false;
  if (state.session && gated && state.gate === "unknown" && gateDue) fetchQuestion();
  render();
}

document.addEventListener("visibilitychange", () => {
  if (!document.hidden) {
    pollSale();
    loadOrders();
  }
});

// -------------------------------------------------------------- start

const returning = config.auth === "local" ? null : tokenFromFragment();
const session = returning || savedSession("buyer");
if (session && !state.missing) {
  state.session = session;
  saveSession("buyer", session);
  restoreOrder();
} else if (session) {
  state.session = session;
}
if (state.missing) sayMissing();
render();
pollSale();
setInterval(tick, 250);
