// The console's Waitlist card: the watched sale's waitlist figures (GET
// /admin/sales/{id}/waitlist), read by ops-live.js beside every live poll
// and cleared with the rest on a change of sale. Its cells and state are
// ops-state.js's.

import { number } from "./format.js";
import { call, salePath, state, ui, WAITLIST_CELL, WAITLIST_FIGURES } from "./ops-state.js";

const WAITLIST_HINT =
  "Units returned by orders not paid in time go to the head of the line as new orders, else back on sale.";

// The sale's waitlist (GET /admin/sales/{id}/waitlist), read beside every
// live poll: one read at a time, an answer for a sale no longer watched
// dropped. Anything but the watched sale's figures (no such sale, an API
// without the route, an error) shows "–", never the last figures.
export async function loadWaitlist() {
  if (!state.session || state.waitlistBusy) return;
  state.waitlistBusy = true;
  const watching = state.watch;
  const reply = await call(salePath("/waitlist"));
  state.waitlistBusy = false;
  if (watching !== state.watch || !state.session) return;
  if (reply.ok && reply.body && reply.body.saleId === state.saleId) {
    showWaitlist(reply.body, null);
  } else if (reply.code === "SALE_NOT_FOUND") {
    showWaitlist(null, "No such sale: no waitlist.");
  } else if (reply.code === "NOT_FOUND") {
    showWaitlist(null, "This API has no waitlist view (GET /admin/sales/{saleId}/waitlist).");
  } else {
    showWaitlist(
      null,
      "The waitlist could not be read (" + (reply.code || "HTTP " + reply.status) + "): asked again with the next poll."
    );
  }
}

// `figures` null: every figure "–", and `note` says why (none: the
// card's own hint, as on a change of sale).
export function showWaitlist(figures, note) {
  for (const key of WAITLIST_FIGURES) {
    const value = figures ? figures[key] : null;
    WAITLIST_CELL[key].textContent = typeof value === "number" ? number(value) : "–";
  }
  ui.waitlistNote.dataset.tone = note ? "warn" : "";
  ui.waitlistNote.textContent = note || WAITLIST_HINT;
}
