// The buyer page's words for every refusal of the purchase route (the
// gate's form says them too), how many times a purchase the draw holds
// back is sent again by itself, and the waitlist's words: its card, what
// the status region says of it, and the refusals of joining and leaving.

import { saleId, state } from "./buyer-state.js";
import { number, wait } from "./format.js";

// A purchase the draw holds back (503 DRAWING) is sent again by itself at
// most this many times in a row.
export const DRAWING_RETRIES = 30;

// A human message for every refusal of the purchase route.
export function messageFor(reply) {
  const retryAfter = reply.retryAfter;
  const limit = state.sale ? state.sale.perUserLimit : null;
  switch (reply.code) {
    case "SOLD_OUT":
      return {
        text:
          "Sold out: every unit has been taken" +
          (state.keyQuantity > 1 ? " (or fewer are left than you asked for)" : "") +
          ". Nothing was charged.",
        tone: "error",
      };
    case "LIMIT_EXCEEDED":
      return {
        text:
          "You already hold as many as this sale allows" + (limit ? " (" + limit + " per buyer)." : "."),
        tone: "warn",
      };
    case "SALE_NOT_STARTED":
      return {
        text:
          "The sale has not started yet" +
          (retryAfter ? ": it opens in " + wait(retryAfter) : "") +
          ". The button turns on by itself.",
        tone: "warn",
      };
    case "SALE_ENDED":
      return { text: "The sale has ended.", tone: "error" };
    case "RATE_LIMITED":
      return {
        text: "Too many tries in a short time. You can try again in " + wait(retryAfter || 1) + ".",
        tone: "warn",
      };
    case "SALE_PAUSED":
      return {
        text:
          "The sale is paused for a moment. Try again in " +
          wait(retryAfter || 2) +
          ": a retry cannot buy twice.",
        tone: "warn",
      };
    case "DRAWING":
      return {
        text:
          state.drawingRetries > DRAWING_RETRIES
            ? "The draw is taking longer than usual. Press Buy now again in a moment: a retry cannot buy twice."
            : "The tickets of the first seconds are being drawn: your purchase is sent again by itself in " +
              wait(retryAfter || 1) +
              " (it cannot buy twice).",
        tone: "info",
      };
    case "GATE_REQUIRED":
      return {
        text:
          state.sale && state.sale.powBits
            ? "Your browser needs checking again before you buy (a few seconds); then press Buy now again."
            : "This sale asks one question before you buy: answer it above, then press Buy now again.",
        tone: "warn",
      };
    case "UNAUTHENTICATED":
      return { text: "Your sign-in has expired. Sign in again.", tone: "error" };
    case "SALE_NOT_FOUND":
      return { text: "There is no sale called “" + saleId + "”.", tone: "error" };
    case "INVALID_REQUEST":
      return {
        text: "The shop refused the request: " + ((reply.body && reply.body.message) || "invalid request") + ".",
        tone: "error",
      };
    // A retry (same key) of a purchase whose order has since ended: the
    // answer names it; a new press is a new purchase.
    case "ORDER_EXPIRED":
      return {
        text:
          "Your earlier order of this purchase expired unpaid and its unit went back on sale. Press Buy now again to buy anew.",
        tone: "warn",
      };
    case "ORDER_NOT_PAYABLE":
      return {
        text: "Your earlier order of this purchase was not accepted: no unit was left for it. Nothing was charged.",
        tone: "error",
      };
    case "NETWORK":
      return {
        text:
          "Network error: we could not reach the shop, so we do not know whether the order went through. " +
          "Press Buy now again: the retry carries the same key and cannot buy twice.",
        tone: "error",
      };
    default:
      return {
        text:
          "The shop had a problem (HTTP " +
          reply.status +
          "). Press Buy now again in a moment: a retry cannot buy twice.",
        tone: "error",
      };
  }
}

// ---------------------------------------------------------- the waitlist

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
