// The buyer page's words for every refusal of the purchase route (the
// gate's form says them too), and how many times a purchase the draw
// holds back is sent again by itself. The waitlist's words are
// buyer-waitlist-messages.js's.

import { saleId, state } from "./buyer-state.js";
import { wait } from "./format.js";

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
