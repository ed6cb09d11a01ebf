// The operator console (an ES module; the browser loads the rest through
// its imports, no build step): every sale to pick from, the watched
// sale's settings, its draw, create and edit forms, pause / resume / end
// now / prewarm / reconcile after a confirmation, order lookups, the DLQ
// with its redrive, the refunds owed, the live numbers with the funnel,
// and the waitlist's figures.
//
// One module per concern, in layers (a module imports only those below
// it, never one above):
//   ops.js            this one: wires the hooks, starts the console
//   ops-signin.js ops-commands.js ops-editor.js ops-lookup.js
//   ops-live.js       (the live view and the change of sale)
//   ops-sales.js ops-settings.js ops-reports.js ops-dlq.js ops-chart.js
//   ops-waitlist.js   (the Waitlist card)
//   ops-widgets.js
//   ops-state.js ops-events.js (what the console knows; the hooks)
// and the shared api.js, auth.js, dom.js, store.js and format.js. The
// list of sales asks to watch a sale, and the live view to sign out,
// through ops-events.js, wired here to watch and signOut.

import { config } from "./api.js";
import { savedSession, tokenFromFragment } from "./auth.js";
import { drawFunnel } from "./ops-chart.js";
import { onSignOut, onWatch } from "./ops-events.js";
import { watch } from "./ops-live.js";
import { render, signOut, startSession } from "./ops-signin.js";
import { say, state, ui } from "./ops-state.js";
// The features that only wire their own forms and buttons.
import "./ops-commands.js";
import "./ops-editor.js";
import "./ops-lookup.js";

onWatch(watch);
onSignOut(signOut);
ui.saleInput.value = state.saleId;
drawFunnel();
// A new width (a phone turned, a window resized): draw again to fit.
let resized = 0;
window.addEventListener("resize", () => {
  clearTimeout(resized);
  resized = setTimeout(drawFunnel, 100);
});
const returning = config.auth === "local" ? null : tokenFromFragment();
const session = returning || savedSession("admin");
render();
if (session) startSession(session, false);
else say("Sign in as an operator to run the sales.", "info");
// The session lapses on its own clock: sign out when it does.
setInterval(() => {
  if (state.session && state.session.expiresAtMs <= Date.now()) signOut("Your sign-in has expired. Sign in again.");
}, 5000);
