// Shared by the two pages: their configuration, the ids the API takes and
// the API client.

// /config.js (a classic script loaded before the modules) sets
// SECKILL_CONFIG: the local stack serves it with auth "local"; a deployed
// stack writes it into the pages bucket with auth "cognito" and the hosted
// UI's authorize URL (`loginUrl`).
export const config = Object.assign(
  { apiBase: "", auth: "local", saleId: "demo", loginUrl: "" },
  window.SECKILL_CONFIG || {}
);

const ID = /^[A-Za-z0-9_-]{1,64}$/;
export const validId = (value) => typeof value === "string" && ID.test(value);

// A user id is a token's `sub` as the identity provider issued it: 1 to
// 255 bytes (UTF-8) without control characters (Unicode's Cc, what the
// server's `char::is_control` refuses). Only ever shown as text.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
export const validUserId = (value) =>
  typeof value === "string" &&
  !CONTROL.test(value) &&
  value.length > 0 &&
  new TextEncoder().encode(value).length <= 255;

// A random id in the API's id alphabet (Idempotency-Key, login state).
export function randomKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

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
export async function api(path, options) {
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
