// The buyer page (an ES module; the browser loads the rest through its
// imports, no build step): one sale, its status and stock, sign-in, the
// gate's question, a purchase of as many units as the buyer may still
// hold (or, in a sale's lottery window, a ticket for the draw, then its
// result), its confirmation, its payment and receipt, and the buyer's
// other orders of the sale. Everything goes through the public HTTP API,
// so the page works the same on the local stack and on a deployed one.
//
// One module per concern: buyer-state.js (what the page knows),
// buyer-sale.js, buyer-signin.js, buyer-gate.js, buyer-purchase.js,
// buyer-ticket.js, buyer-orders.js, buyer-render.js; the shared ones are
// api.js, auth.js, dom.js, store.js and format.js. This one keeps the
// clock ticking and starts the page.

import { config } from "./api.js";
import { savedSession, saveSession, tokenFromFragment } from "./auth.js";
import { now, say, state, timers } from "./buyer-state.js";
import { time } from "./format.js";
import { fetchQuestion } from "./buyer-gate.js";
import { loadOrders, restoreOrder } from "./buyer-orders.js";
import { render } from "./buyer-render.js";
import { pollSale, sayMissing, windowEndMs } from "./buyer-sale.js";
import { signOut } from "./buyer-signin.js";
// Reached through the others too; named here as the page's features.
import "./buyer-purchase.js";
import "./buyer-ticket.js";

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
