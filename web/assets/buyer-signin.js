// The buyer page's sign-in and sign-out (the forms are auth.js's), and the
// "Skip to …" link that follows the next step.

import { config } from "./api.js";
import { saveSession, wireSignIn } from "./auth.js";
import { say, state, timers, ui } from "./buyer-state.js";
import { changed } from "./buyer-events.js";
import { stopSolving } from "./buyer-gate.js";
import { restoreOrder } from "./buyer-holdings.js";

function startSession(session) {
  state.session = session;
  saveSession("buyer", session);
  restoreOrder();
  changed();
  // Straight on to the buy section: the next Tab reaches the quantity.
  ui.buySection.focus();
}

export function signOut(message) {
  state.session = null;
  saveSession("buyer", null);
  stopSolving();
  Object.assign(state, {
    gate: "unknown",
    pass: null,
    refused: state.refused === "SALE_ENDED" ? "SALE_ENDED" : null,
    key: null,
    order: null,
    orders: [],
    told: "",
    paying: false,
    retryAtMs: 0,
    ticket: null,
    ticketTold: "",
    drawOver: false,
    drawingUntilMs: 0,
    drawingRetries: 0,
    waitlist: null,
    waitlistTold: "",
    joining: false,
    leaving: false,
    joinRetryAtMs: 0,
    joinRefused: null,
  });
  ui.waitlistConfirm.hidden = true;
  clearTimeout(timers.order);
  clearTimeout(timers.ticket);
  clearTimeout(timers.waitlist);
  clearTimeout(timers.retry);
  timers.retry = 0;
  changed();
  if (message) say(message, "error", null, "UNAUTHENTICATED");
  else say("You are signed out. Sign in to buy.", "info", null, "SIGNED_OUT");
  (config.auth === "local" ? ui.user : ui.loginLink).focus();
}

wireSignIn(
  false,
  (session) => {
    // First: news of an order kept from before (said as the session
    // starts) comes after, and stays on screen.
    say("Signed in as " + session.userId + ".", "ok");
    startSession(session);
  },
  () => signOut(null)
);

// "Skip to …" goes where the next step is: the sign-in form while signed
// out, the buy button (or its section, with the reason it is off) after.
ui.skip.addEventListener("click", (event) => {
  event.preventDefault();
  skipTarget().focus();
});

function skipTarget() {
  if (state.missing) return ui.status;
  if (!state.session) {
    if (config.auth === "local") return ui.user;
    return config.loginUrl ? ui.loginLink : ui.tokenInput;
  }
  return ui.buyButton.disabled ? ui.buySection : ui.buyButton;
}
