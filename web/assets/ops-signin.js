// The console's sign-in and sign-out (the forms are auth.js's), and what
// only a signed-in operator sees.

import { config } from "./api.js";
import { saveSession, wireSignIn } from "./auth.js";
import { $ } from "./dom.js";
import { loadDlq } from "./ops-dlq.js";
import { clearFigures, watch } from "./ops-live.js";
import { say, state, ui } from "./ops-state.js";

// `interactive`: the operator just signed in, so focus moves on to the
// list (not on a page load with a kept session).
export function startSession(session, interactive) {
  state.session = session;
  saveSession("admin", session);
  render();
  loadDlq();
  watch(state.saleId);
  if (!session.admin) {
    say("This token has no seckill/admin scope: the API will refuse it.", "warn");
  }
  if (interactive) ui.salesRefresh.focus();
}

export function signOut(message) {
  state.session = null;
  saveSession("admin", null);
  clearTimeout(state.timer);
  state.watch += 1;
  clearFigures("Not watching yet.");
  render();
  if (message) say(message, "error");
  (config.auth === "local" ? ui.user : ui.loginLink).focus();
}

wireSignIn(
  true,
  (session) => startSession(session, true),
  () => signOut(null)
);

// The header and the cards as the session allows, on every change of it.
export function render() {
  const signedIn = !!state.session;
  ui.signin.hidden = signedIn;
  ui.localSignin.hidden = config.auth !== "local";
  ui.cognitoSignin.hidden = config.auth === "local";
  ui.loginLink.hidden = !config.loginUrl;
  ui.who.hidden = !signedIn;
  ui.whoName.textContent = signedIn ? state.session.userId : "";
  // What only an operator can use is shown only to one.
  for (const card of [ui.sales, ui.settings, $("lookup"), $("dlq"), $("refunds")]) card.hidden = !signedIn;
  if (!signedIn) {
    ui.editor.hidden = true;
    ui.control.hidden = true;
  }
}
