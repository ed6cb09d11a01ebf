// Shared by the two pages: finding an element, the status region, and a
// time element.

import { dateTime } from "./format.js";

export const $ = (id) => document.getElementById(id);

// Puts one message into a live region (role="status"): replacing its
// text is what a screen reader announces. `links` are [text, href] pairs
// appended as real links (text only: nothing from the API becomes HTML).
export function announce(region, message, tone, links) {
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

// A time element: the date and time in the reader's zone (or as `format`
// writes it), the instant in `datetime` (UTC, as the API gave it).
export function showTime(el, ms, format) {
  if (el.dataset.ms === String(ms)) return;
  el.dataset.ms = String(ms);
  const valid = typeof ms === "number" && !Number.isNaN(ms);
  const text = valid ? (format || dateTime)(ms) : "–";
  if (el.textContent !== text) el.textContent = text;
  el.dateTime = valid ? new Date(ms).toISOString() : "";
}
