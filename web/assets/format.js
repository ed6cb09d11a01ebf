// Every formatting helper of the two pages, in one place: durations and
// waits, clock times and dates, time zones, counts and money. Pure
// functions of their arguments (and the browser's locale and zone): no
// page state, no DOM.

const pad = (n) => String(n).padStart(2, "0");

// ------------------------------------------------------------ durations

// A countdown: "04:59", "1:02:03", "3 d 04:05:06".
export function clock(ms) {
  const total = Math.max(0, Math.ceil(ms / 1000));
  const days = Math.floor(total / 86400);
  const hours = Math.floor((total % 86400) / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const seconds = total % 60;
  const hms = (hours || days ? pad(hours) + ":" : "") + pad(minutes) + ":" + pad(seconds);
  return days ? days + " d " + hms : hms;
}

// A wait in words, for messages: "12 seconds", "4 minutes 5 seconds".
export function wait(seconds) {
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

// A measured duration: "3.250 s" (to the millisecond, as the API counts
// it), "4 min 05 s", "2 h 03 min". "–" for no number.
export function duration(ms) {
  if (typeof ms !== "number") return "–";
  if (ms < 60000) return (ms / 1000).toFixed(3) + " s";
  const s = Math.round(ms / 1000);
  if (s < 3600) return Math.floor(s / 60) + " min " + pad(s % 60) + " s";
  return Math.floor(s / 3600) + " h " + pad(Math.floor((s % 3600) / 60)) + " min";
}

// --------------------------------------------------------------- counts

export const number = (n) => (typeof n === "number" ? n.toLocaleString("en") : "–");

// ---------------------------------------------------------------- times

// A time of day: "15:04:05".
export const time = (ms) =>
  new Date(ms).toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit", second: "2-digit" });

// A date and time in the reader's time zone, with the zone's short name:
// "Tue 1 Dec 2026, 18:30 GMT+1" (the buyer page). "–" for no time.
export function dateTime(ms) {
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

// An instant (ms or an RFC 3339 string) to the second, in the reader's
// zone, without the zone: "1 Dec 2026, 15:04:05" (the console, which names
// its zone apart). "–" for none; text that is no time as it is.
export function when(iso) {
  if (!iso) return "–";
  const ms = typeof iso === "number" ? iso : Date.parse(iso);
  if (Number.isNaN(ms)) return String(iso);
  return new Date(ms).toLocaleString("en-GB", {
    day: "numeric",
    month: "short",
    year: "numeric",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
  });
}

// What a datetime-local input holds for an instant, in the reader's zone:
// "2026-12-01T15:04:05"; "" for no time.
export function localInput(iso) {
  const d = new Date(Date.parse(iso));
  if (Number.isNaN(d.getTime())) return "";
  return (
    d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) +
    "T" + pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds())
  );
}

// ----------------------------------------------------------- time zones

// The reader's time zone by name ("Europe/Paris"), or "" if unknown.
export function timeZone() {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || "";
  } catch (_) {
    return "";
  }
}

// The zone by name and offset, "Europe/Paris, UTC+01:00" (or the offset
// alone), for a page that names it wherever a time is shown or typed.
export function zoneLabel() {
  const offset = -new Date().getTimezoneOffset();
  const sign = offset < 0 ? "-" : "+";
  const abs = Math.abs(offset);
  const utc = "UTC" + sign + pad(Math.floor(abs / 60)) + ":" + pad(abs % 60);
  const name = timeZone();
  return name ? name + ", " + utc : utc;
}

// ---------------------------------------------------------------- money

// Minor units per major unit of a currency (2 for EUR, 0 for JPY, 3 for
// KWD); 2 for a code Intl does not know.
export function digitsOf(currency) {
  try {
    return new Intl.NumberFormat("en", { style: "currency", currency: currency }).resolvedOptions()
      .maximumFractionDigits;
  } catch (_) {
    return 2;
  }
}

// An amount in major units as a form's input holds it, "19.99" for
// {"amount": 1999, "currency": "EUR"}; "" for none.
export function amountInput(value) {
  if (!value || typeof value.amount !== "number") return "";
  const digits = digitsOf(value.currency);
  return (value.amount / 10 ** digits).toFixed(digits);
}

// A price or amount as the API gives it, {amount (minor units), currency
// (ISO 4217)}, times `times`, in `locale` (the reader's by default):
// "€25.00", "¥1,500". `none` (default "") for no amount (a sale without a
// price).
export function money(value, { times = 1, locale, none = "" } = {}) {
  if (!value || typeof value.amount !== "number" || typeof value.currency !== "string") return none;
  const minor = value.amount * times;
  try {
    const format = new Intl.NumberFormat(locale, { style: "currency", currency: value.currency });
    return format.format(minor / 10 ** format.resolvedOptions().maximumFractionDigits);
  } catch (_) {
    return minor + " " + value.currency + " (minor units)";
  }
}
