// The console's reports of the watched sale: the audit trail, the refunds
// owed, and the last reconcile report. The waitlist's figures are
// ops-waitlist.js's.

import { money, number, time, when } from "./format.js";
import { call, MONEY, salePath, say, state, ui } from "./ops-state.js";
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
