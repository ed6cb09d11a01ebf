// The console's reports of the watched sale: the audit trail, the refunds
// owed, the last reconcile report, and the waitlist's figures.

import { money, number, time, when } from "./format.js";
import { call, MONEY, salePath, say, state, ui, WAITLIST_CELL, WAITLIST_FIGURES } from "./ops-state.js";
import { cell } from "./ops-widgets.js";

// Every admin action on the sale, newest first: who, what, when.
export async function loadAudit() {
  if (!state.session) return;
  const watching = state.watch;
  const reply = await call(salePath("/audit?last=20"));
  if (watching !== state.watch || !reply.ok || !reply.body) return;
  const entries = (reply.body.entries || []).slice().reverse();
  ui.audit.textContent = "";
  if (!entries.length) {
    ui.audit.appendChild(cell("li", "No admin action yet.", "muted"));
    return;
  }
  for (const e of entries.slice(0, 20)) {
    ui.audit.appendChild(cell("li", when(e.at) + " · " + (e.actor || "?") + " · " + e.action));
  }
}

// Payments the provider made that the sale owes back.
export async function loadRefunds() {
  if (!state.session) return;
  const watching = state.watch;
  const reply = await call(salePath("/refunds"));
  if (watching !== state.watch || !reply.ok || !reply.body) return;
  const refunds = reply.body.refunds || [];
  ui.refundsTable.hidden = refunds.length === 0;
  if (!refunds.length) {
    ui.refundsSummary.textContent = "No payment is owed back for this sale.";
    ui.refundsRows.replaceChildren();
    return;
  }
  ui.refundsSummary.textContent =
    refunds.length + (refunds.length === 1 ? " payment" : " payments") +
    " to give back through the payment provider (paid after the order expired, or paid twice).";
  ui.refundsRows.replaceChildren(
    ...refunds.map((r) => {
      const row = document.createElement("tr");
      row.dataset.payment = r.paymentId;
      row.append(
        cell("td", r.paymentId, "id"),
        cell("td", r.orderId, "id"),
        cell("td", r.userId, "id"),
        cell("td", money(r.amount, MONEY), "num"),
        cell("td", when(r.at))
      );
      return row;
    })
  );
}

export function showReport(report) {
  if (!report) {
    ui.reportSummary.textContent =
      "No reconcile report yet: reconcile runs every 5 minutes, or press Reconcile above.";
    ui.violations.replaceChildren();
    return;
  }
  const repairs = (report.repairs || []).length;
  ui.reportSummary.textContent =
    "At " +
    time(Date.parse(report.at)) +
    " · Redis stock " +
    (report.redisStock === null || report.redisStock === undefined ? "not loaded" : number(report.redisStock)) +
    " · available " +
    number(report.available) +
    " · sold " +
    number(report.sold) +
    " · " +
    repairs +
    (repairs === 1 ? " repair" : " repairs") +
    (report.countsCompared === false ? " · orders kept moving: counts compared next run" : "");
  const violations = report.violations || [];
  if (!violations.length) {
    ui.violations.replaceChildren(cell("li", "No violations.", "none"));
  } else {
    ui.violations.replaceChildren(
      ...violations.map((v) => {
        const risk = v.code === "OVERSELL_RISK";
        const item = document.createElement("li");
        item.dataset.code = v.code;
        if (risk) item.className = "oversell-risk";
        item.append(cell("strong", (risk ? "⚠ " : "") + v.code), document.createTextNode(": " + v.detail));
        return item;
      })
    );
  }
  // Say it once per report, loudly when it names an oversell risk.
  if (report.at !== state.reportAt) {
    state.reportAt = report.at;
    if (violations.some((v) => v.code === "OVERSELL_RISK")) {
      say("The last reconcile report names an OVERSELL RISK: see the report below.", "error");
    }
  }
}

// ------------------------------------------------------------ waitlist

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
