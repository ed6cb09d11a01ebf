// Shared by the buyer page and the dashboard: configuration, the API client,
// sign-in and tokens, time formatting and the status region. A plain script
// (no modules, no build step) that defines one global, `Seckill`.
"use strict";

(function () {
  // /config.js sets SECKILL_CONFIG: the local stack serves it with
  // auth "local"; a deployed stack writes it into the pages bucket with auth
  // "cognito" and the hosted UI's authorize URL (`loginUrl`).
  const config = Object.assign(
    { apiBase: "", auth: "local", saleId: "demo", loginUrl: "" },
    window.SECKILL_CONFIG || {}
  );

  const ID = /^[A-Za-z0-9_-]{1,64}$/;
  const validId = (value) => typeof value === "string" && ID.test(value);
  // A user id is a token's `sub` as the identity provider issued it: 1 to
  // 255 bytes (UTF-8) without control characters (Unicode's Cc, what the
  // server's `char::is_control` refuses). Only ever shown as text.
  const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
  const validUserId = (value) =>
    typeof value === "string" &&
    !CONTROL.test(value) &&
    value.length > 0 &&
    new TextEncoder().encode(value).length <= 255;

  const $ = (id) => document.getElementById(id);

  // ------------------------------------------------------------ the API

  // Retry-After is either seconds or an HTTP date; null when absent.
  function parseRetryAfter(value) {
    if (!value) return null;
    if (/^\d+$/.test(value.trim())) return Number(value.trim());
    const at = Date.parse(value);
    return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - Date.now()) / 1000));
  }

  // API Gateway answers some refusals itself, without the API's
  // {"code": ...} body (its authorizer's 401, its throttling's 429): give
  // those a code too, so the pages have one table of messages.
  function codeOf(status, body) {
    if (body && typeof body.code === "string") return body.code;
    if (status === 401) return "UNAUTHENTICATED";
    if (status === 403) return "FORBIDDEN";
    if (status === 404) return "NOT_FOUND";
    if (status === 429) return "RATE_LIMITED";
    if (status >= 500) return "SERVER";
    return "HTTP_" + status;
  }

  // One call of the API. Never throws: a network failure or timeout is
  // {status: 0, code: "NETWORK"}, because for a purchase "we do not know"
  // is an answer the page must show, not an exception.
  async function api(path, options) {
    const opts = options || {};
    const headers = Object.assign({ Accept: "application/json" }, opts.headers || {});
    if (opts.body !== undefined) headers["Content-Type"] = "application/json";
    if (opts.token) headers.Authorization = "Bearer " + opts.token;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), opts.timeoutMs || 10000);
    const sentAt = Date.now();
    try {
      const response = await fetch(config.apiBase + path, {
        method: opts.method || "GET",
        headers: headers,
        body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
        signal: controller.signal,
        // "default" honours the API's Cache-Control; tokens travel in a
        // header, never in cookies.
        cache: "default",
        credentials: "omit",
      });
      const text = await response.text();
      let body = null;
      if (text) {
        try {
          body = JSON.parse(text);
        } catch (_) {
          body = null;
        }
      }
      return {
        ok: response.ok,
        status: response.status,
        code: response.ok ? null : codeOf(response.status, body),
        body: body,
        retryAfter: parseRetryAfter(response.headers.get("Retry-After")),
        headers: response.headers,
        sentAt: sentAt,
        receivedAt: Date.now(),
      };
    } catch (_) {
      return { ok: false, status: 0, code: "NETWORK", body: null, retryAfter: null, headers: null };
    } finally {
      clearTimeout(timer);
    }
  }

  // ------------------------------------------------------------- tokens

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

  // sessionStorage: a reload keeps the buyer signed in and their order on
  // screen; closing the tab forgets the token. Private modes may refuse
  // storage, so every access is guarded.
  const store = {
    get(key) {
      try {
        const raw = sessionStorage.getItem("seckill." + key);
        return raw ? JSON.parse(raw) : null;
      } catch (_) {
        return null;
      }
    },
    set(key, value) {
      try {
        if (value === null || value === undefined) sessionStorage.removeItem("seckill." + key);
        else sessionStorage.setItem("seckill." + key, JSON.stringify(value));
      } catch (_) {
        /* not kept: the page still works until a reload */
      }
    },
  };

  // Back from the hosted UI: its redirect_uri is the bare page (it must
  // match a registered callback URL exactly), so the query the buyer left
  // with (?sale=...) is put back from where loginUrl() kept it, before the
  // page reads it.
  if (location.hash.indexOf("access_token=") >= 0) {
    const search = store.get("login.search");
    store.set("login.search", null);
    if (search && !location.search) {
      history.replaceState(null, "", location.pathname + search + location.hash);
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
  function savedSession(role) {
    const saved = store.get("session." + role);
    if (!saved || !saved.token) return null;
    const session = sessionFrom(saved.token);
    if (!session || session.expiresAtMs <= Date.now() + 5000) {
      store.set("session." + role, null);
      return null;
    }
    return session;
  }

  function saveSession(role, session) {
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
  function wireSignIn(admin, onSession, onSignOut) {
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
  function tokenFromFragment() {
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

  // A random id in the API's id alphabet (Idempotency-Key, login state).
  function randomKey() {
    if (crypto.randomUUID) return crypto.randomUUID();
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  // ---------------------------------------------------------- formatting

  const pad = (n) => String(n).padStart(2, "0");

  // A countdown: "04:59", "1:02:03", "3 d 04:05:06".
  function clock(ms) {
    const total = Math.max(0, Math.ceil(ms / 1000));
    const days = Math.floor(total / 86400);
    const hours = Math.floor((total % 86400) / 3600);
    const minutes = Math.floor((total % 3600) / 60);
    const seconds = total % 60;
    const hms = (hours || days ? pad(hours) + ":" : "") + pad(minutes) + ":" + pad(seconds);
    return days ? days + " d " + hms : hms;
  }

  // A wait in words, for messages: "12 seconds", "4 minutes 5 seconds".
  function wait(seconds) {
    const s = Math.max(1, Math.ceil(seconds));
    const plural = (n, unit) => n + " " + unit + (n === 1 ? "" : "s");
    if (s < 60) return plural(s, "second");
    if (s < 3600) {
      const rest = s % 60;
      return plural(Math.floor(s / 60), "minute") + (rest ? " " + plural(rest, "second") : "");
    }
    const hours = Math.floor(s / 3600);
    const minutes = Math.floor((s % 3600) / 60);
    return plural(hours, "hour") + (minutes ? " " + plural(minutes, "minute") : "");
  }

  const number = (n) => (typeof n === "number" ? n.toLocaleString("en") : "–");

  const time = (ms) =>
    new Date(ms).toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit", second: "2-digit" });

  // ------------------------------------------------------- status region

  // Puts one message into a live region (role="status"): replacing its
  // text is what a screen reader announces. `links` are [text, href] pairs
  // appended as real links (text only: nothing from the API becomes HTML).
  function announce(region, message, tone, links) {
    region.dataset.tone = tone || "info";
    region.textContent = message;
    (links || []).forEach(([text, href]) => {
      region.append(" ");
      const a = document.createElement("a");
      a.textContent = text;
      a.href = href;
      region.append(a);
    });
  }

  // ------------------------------------------------ money and dates

  // A price or amount as the API gives it, {amount (minor units),
  // currency (ISO 4217)}, times `times`, in the buyer's locale: "€25.00",
  // "¥1,500". Intl knows each currency's minor units (JPY 0, EUR 2, KWD 3).
  // "" for no amount (a sale without a price).
  function money(value, times) {
    if (!value || typeof value.amount !== "number" || typeof value.currency !== "string") return "";
    const minor = value.amount * (times === undefined ? 1 : times);
    try {
      const format = new Intl.NumberFormat(undefined, { style: "currency", currency: value.currency });
      return format.format(minor / 10 ** format.resolvedOptions().maximumFractionDigits);
    } catch (_) {
      return minor + " " + value.currency + " (minor units)";
    }
  }

  // The buyer's time zone by name ("Europe/Paris"), or "" if unknown.
  function timeZone() {
    try {
      return Intl.DateTimeFormat().resolvedOptions().timeZone || "";
    } catch (_) {
      return "";
    }
  }

  // A date and time in the buyer's time zone, with the zone's short name:
  // "Tue 1 Dec 2026, 18:30 GMT+1". "–" for no time.
  function dateTime(ms) {
    if (typeof ms !== "number" || Number.isNaN(ms)) return "–";
    return new Intl.DateTimeFormat(undefined, {
      weekday: "short",
      day: "numeric",
      month: "short",
      year: "numeric",
      hour: "2-digit",
      minute: "2-digit",
      timeZoneName: "short",
    }).format(new Date(ms));
  }

  window.Seckill = {
    config,
    validId,
    validUserId,
    $,
    api,
    claimsOf,
    sessionFrom,
    savedSession,
    saveSession,
    localSignIn,
    wireSignIn,
    tokenFromFragment,
    loginUrl,
    randomKey,
    store,
    clock,
    wait,
    number,
    time,
    announce,
    money,
    timeZone,
    dateTime,
  };
})();
