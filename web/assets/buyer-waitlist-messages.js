// The waitlist's words on the buyer page: its card (the headline, the
// note under it, the odds), what the status region says once per change
// of the entry, and the refusals of joining and leaving. Pure, as
// buyer-messages.js is: they read the state and change nothing. The codes
// a purchase shares are said in that module's words, so both say them
// alike.

import { state } from "./buyer-state.js";
import { number, wait } from "./format.js";
import { messageFor } from "./buyer-messages.js";

// 1st, 2nd, 3rd, 4th … 11th, 12th, 13th … 21st, 22nd.
export function ordinal(n) {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? "th" : ["th", "st", "nd", "rd"][n % 10] || "th";
  return number(n) + suffix;
}

// "a 42%", "an 8%", "an 11%", "an 80%": the article as the number is said.
const aPercent = (p) => (p === 11 || p === 18 || String(p).charAt(0) === "8" ? "an " : "a ") + p + "%";

// The card's headline for an entry shown as `shown` (JOIN: none yet;
// `soldOut`: the sale says so, not only a lost ticket).
export function waitlistLine(shown, entry, soldOut) {
  switch (shown) {
    case "JOIN":
      return soldOut ? "Sold out: join the waitlist" : "Join the waitlist";
    case "WAITING":
      if (typeof entry.position !== "number") return "You are in line";
      return (
        "You are " + ordinal(entry.position) + " in line — " +
        (entry.ahead > 0 ? number(entry.ahead) : "no one") + " ahead of you"
      );
    case "OFFERED":
      return "A unit came back for you";
    case "LEFT":
      return "You left the waitlist";
    case "ENDED":
      return "The sale ended before a unit came back for you";
    default:
      return shown;
  }
}

// The card's explanation, under the headline.
export function waitlistNote(shown, offerStatus) {
  switch (shown) {
    case "JOIN":
      return (
        "When an order is not paid in time, its unit goes to the first in line as an order to pay. " +
        "Joining charges nothing, and you can leave at any time."
      );
    case "WAITING":
      return (
        "When a unit comes back (an order not paid in time), the first in line is offered it as an order to pay. " +
        "This card changes by itself: keep the page open, or come back to it."
      );
    case "OFFERED":
      return {
        QUEUED: "Your order for it is being confirmed below.",
        PENDING_PAYMENT: "Your order for it is below: pay within its window to keep it.",
        PAID: "You paid for it: it is yours.",
        EXPIRED: "Its payment window closed before payment, so it went to the next in line. Nothing was charged.",
        REJECTED: "Its order could not be confirmed. Nothing was charged.",
      }[offerStatus] || "Your order for it is below.";
    case "LEFT":
      return "Leaving is final: your place went to the others in line. Nothing was charged.";
    case "ENDED":
      return "You were still in line when the sale closed. Nothing was charged.";
    default:
      return "";
  }
}

// The chance of an offer, in plain words; null: no unit has come back
// yet, so the API has nothing to estimate from.
export function oddsWords(odds) {
  if (!odds || typeof odds.chance !== "number") {
    return "No unit has come back yet, so there is no estimate of your chances.";
  }
  const p = Math.round(odds.chance * 100);
  const chance =
    odds.chance < 0.005
      ? "less than a 1% chance"
      : odds.chance >= 0.995
        ? "all but certain (over 99%) to get"
        : "about " + aPercent(p) + " chance";
  const of = odds.chance >= 0.995 ? " an offer before the sale ends" : " of an offer before the sale ends";
  const from = " (estimated from the units that have come back so far).";
  if (odds.poor) return "The odds are poor: " + chance + of + from;
  return chance.charAt(0).toUpperCase() + chance.slice(1) + of + from;
}

// What the status region says when the entry becomes `shown` (once per
// change), and the code it is said with.
export function waitlistNews(shown, entry) {
  switch (shown) {
    case "WAITING":
      return {
        text:
          "You are on the waitlist" +
          (typeof entry.position === "number" ? ", " + ordinal(entry.position) + " in line" : "") +
          ". A unit that comes back is offered to you here by itself.",
        tone: "ok",
        code: "WAITLIST",
      };
    case "OFFERED":
      return { text: "A unit came back for you: pay for your order below within its window to keep it.", tone: "ok", code: "OFFERED" };
    case "LEFT":
      return { text: "You left the waitlist. Nothing was charged.", tone: "info", code: "LEFT" };
    case "ENDED":
      return { text: "The sale ended before a unit came back for you. Nothing was charged.", tone: "warn", code: "WAITLIST_ENDED" };
    default:
      return null;
  }
}

// A human message for every refusal of joining (POST) or leaving (DELETE)
// the waitlist; the codes a purchase shares are said as for a purchase.
export function waitlistMessageFor(reply, leaving) {
  const again = leaving ? "Leave the waitlist" : "Join the waitlist";
  const limit = state.sale ? state.sale.perUserLimit : null;
  switch (reply.code) {
    case "NOT_SOLD_OUT":
      return { text: "Units are still on sale: buy one instead of waiting.", tone: "warn" };
    case "LIMIT_EXCEEDED":
      return {
        text:
          "You already hold as many as this sale allows" + (limit ? " (" + limit + " per buyer)" : "") +
          ": the waitlist is for buyers who may buy more.",
        tone: "warn",
      };
    case "NOT_IN_WAITLIST":
      return { text: "You are not on this sale's waitlist.", tone: "warn" };
    case "GATE_REQUIRED":
      return {
        text:
          state.sale && state.sale.powBits
            ? "Your browser needs checking before you join (a few seconds); then press Join the waitlist again."
            : "This sale asks one question first: answer it above, then press Join the waitlist again.",
        tone: "warn",
      };
    case "SALE_PAUSED":
      return { text: "The sale is paused for a moment. Try again in " + wait(reply.retryAfter || 2) + ".", tone: "warn" };
    case "DRAWING":
      return {
        text: "The tickets of the first seconds are being drawn: try again in " + wait(reply.retryAfter || 1) + ".",
        tone: "info",
      };
    case "SALE_ENDED":
    case "RATE_LIMITED":
    case "SALE_NOT_STARTED":
    case "SALE_NOT_FOUND":
    case "UNAUTHENTICATED":
      return messageFor(reply);
    case "NETWORK":
      return {
        text:
          "Network error: we could not reach the shop, so we do not know whether it was done. Press " + again +
          " again: " + (leaving ? "leaving twice leaves once." : "joining twice keeps one place."),
        tone: "error",
      };
    default:
      return {
        text:
          "The shop had a problem (HTTP " + reply.status + "). Press " + again + " again in a moment" +
          (leaving ? "." : ": joining twice keeps one place."),
        tone: "error",
      };
  }
}
