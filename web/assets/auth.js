// Shared by the two pages: sign-in and tokens. A session is
// {token, userId, expiresAtMs, admin}, kept per role ("buyer", "admin").

import { api, config, randomKey, validUserId } from "./api.js";
import { $ } from "./dom.js";
import { store } from "./store.js";

// Back from the hosted UI: its redirect_uri is the bare page (it must
// match a registered callback URL exactly), so the query the buyer left
// with (?sale=...) is put back from where loginUrl() kept it, before the
// page reads it. (At load: every page module that reads the query imports
// this one, so this runs first.)
if (location.hash.indexOf("access_token=") >= 0) {
  const search = store.get("login.search");
  store.set("login.search", null);
  if (search && !location.search) {
    history.replaceState(null, "", location.pathname + search + location.hash);
  }
}

// A JWT's claims, or null. Only read for display and expiry: the API
// checks the signature.
function claimsOf(token) {
  const parts = String(token || "").split(".");
  if (parts.length !== 3) return null;
  try {
    const b64 = parts[1].replace(/-/g, "+").replace(/_/g, "/");
    const json = decodeURIComponent(
      atob(b64 + "===".slice((b64.length + 3) % 4))
        .split("")
        .map((c) => "%" + c.charCodeAt(0).toString(16).padStart(2, "0"))
        .join("")
    );
    const claims = JSON.parse(json);
    return claims && typeof claims === "object" ? claims : null;
  } catch (_) {
    return null;
  }
}

// A session from a token: who, until when, and whether it is an admin's.
function sessionFrom(token) {
  const claims = claimsOf(token);
  if (!claims || typeof claims.sub !== "string") return null;
  const scopes = String(claims.scope || "").split(/\s+/);
  return {
    token: token,
    userId: claims["cognito:username"] || claims.username || claims.sub,
    expiresAtMs: typeof claims.exp === "number" ? claims.exp * 1000 : Infinity,
    admin: scopes.indexOf("seckill/admin") >= 0,
  };
}

// The session kept under `role` ("buyer" or "admin") if still valid.
export function savedSession(role) {
  const saved = store.get("session." + role);
  if (!saved || !saved.token) return null;
  const session = sessionFrom(saved.token);
  if (!session || session.expiresAtMs <= Date.now() + 5000) {
    store.set("session." + role, null);
    return null;
  }
  return session;
}

export function saveSession(role, session) {
  store.set("session." + role, session ? { token: session.token } : null);
}

// Local stack: a user name exchanged for a local token.
async function localSignIn(user, admin) {
  const reply = await api("/local/token", { method: "POST", body: { user: user, admin: admin } });
  if (!reply.ok) return { error: reply };
  return { session: sessionFrom(reply.body.token) };
}

// The sign-in forms both pages share (the same element ids): a user name
// for a local token, a pasted token, the identity provider's login link,
// and sign-out. `onSession(session)` runs after a good sign-in,
// `onSignOut()` on the button; the pages decide what follows.
export function wireSignIn(admin, onSession, onSignOut) {
  const user = $("user");
  const userError = $("user-error");
  const tokenInput = $("token-input");
  const tokenError = $("token-error");
  $("local-signin").addEventListener("submit", async (event) => {
    event.preventDefault();
    userError.textContent = "";
    user.removeAttribute("aria-invalid");
    const name = user.value.trim();
    if (!validUserId(name)) {
      // The page's own words (a form with `novalidate` shows no browser
      // bubble), tied to the field by its aria-describedby.
      userError.textContent = name
        ? "Use 1 to 255 bytes of text without control characters."
        : "Enter a user name: any text up to 255 bytes, such as jane@example.com.";
      user.setAttribute("aria-invalid", "true");
      user.focus();
      return;
    }
    const result = await localSignIn(name, admin);
    if (result.session) onSession(result.session);
    else if (result.error.code === "NETWORK") {
      userError.textContent = "Cannot reach the server. Check the connection and try again.";
    } else if (result.error.status === 404) {
      userError.textContent = "Local sign-in is not available here.";
    } else {
      userError.textContent = (result.error.body && result.error.body.message) || "Sign-in refused.";
    }
  });
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const session = sessionFrom(tokenInput.value.trim());
    if (!tokenInput.value.trim()) {
      tokenError.textContent = "Paste an access token first.";
    } else if (!session) {
      tokenError.textContent = "This does not look like a token (three dot-separated parts).";
    } else if (session.expiresAtMs <= Date.now()) {
      tokenError.textContent = "This token has expired. Sign in again for a new one.";
    } else {
      tokenError.textContent = "";
      tokenInput.value = "";
      onSession(session);
    }
  });
  $("login-link").addEventListener("click", (event) => {
    event.preventDefault();
    const url = loginUrl();
    if (url) location.assign(url);
  });
  $("sign-out").addEventListener("click", () => onSignOut());
}

// Cognito's hosted UI (implicit grant) comes back with the token in the
// URL fragment. Take it, check the state we sent, and clear the fragment so
// the token is not left in the address bar or the history.
export function tokenFromFragment() {
  if (!location.hash || location.hash.indexOf("access_token=") < 0) return null;
  const params = new URLSearchParams(location.hash.slice(1));
  history.replaceState(null, "", location.pathname + location.search);
  const expected = store.get("login.state");
  store.set("login.state", null);
  if (!expected || params.get("state") !== expected) return null;
  return sessionFrom(params.get("access_token"));
}

// The hosted UI's authorize URL, returning to this page.
function loginUrl() {
  if (!config.loginUrl) return "";
  const state = randomKey();
  store.set("login.state", state);
  store.set("login.search", location.search);
  const url = new URL(config.loginUrl, location.href);
  if (!url.searchParams.has("redirect_uri")) {
    url.searchParams.set("redirect_uri", location.origin + location.pathname);
  }
  url.searchParams.set("state", state);
  return url.toString();
}
