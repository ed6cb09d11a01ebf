// The console's live view of the watched sale: GET
// /admin/sales/{id}/live every 1.5 s (stock in Redis, queue, orders by
// status, purchases per second by outcome from two polls' counts, the
// funnel, the reconcile report) and beside it GET
// /admin/sales/{id}/waitlist (the Waitlist card), and a change of sale
// that clears every figure of the last one.

import { $ } from "./dom.js";
import { number, time, wait } from "./format.js";
import { drawFunnel } from "./ops-chart.js";
import { loadDlq } from "./ops-dlq.js";
import { requestSignOut } from "./ops-events.js";
import { loadAudit, loadRefunds, showReport } from "./ops-reports.js";
import { loadSales, markWatched } from "./ops-sales.js";
import { drawing, loadSale, setControls, showDraw, showSellOut } from "./ops-settings.js";
import { call, LABEL, salePath, say, state, STATUS_ORDER, STATUS_TONE, STORE_NAME, ui } from "./ops-state.js";
import { loadWaitlist, showWaitlist } from "./ops-waitlist.js";
import { cell } from "./ops-widgets.js";

// Every second or two; one request at a time (the next is scheduled when
// the last has answered), so a slow API is not piled on.
const POLL_MS = 1500;
// The settings, the refunds and the audit trail change rarely: read again
// every this many polls (and at once after an action of this page).
const SLOW_EVERY = 6;

// Watches sale `id` from now on: the last one's figures off the screen,
// and its late answers dropped (state.watch).
export function watch(id) {
  state.saleId = id;
  state.watch += 1;
  state.failures = 0;
  state.polls = 0;
  clearTimeout(state.timer);
  clearFigures("Sale " + id + " · loading…");
  markWatched();
  if (state.session) {
    say("Watching sale " + id + ".", "info");
    poll();
    loadSlow();
  }
}

// Every figure of the previous sale off the screen: the stock, queue,
// orders, outcomes, funnel, report, settings, refunds and audit all show
// "–" until the new sale's answers arrive.
export function clearFigures(heading) {
  state.previous = null;
  state.funnel = [];
  state.reportAt = null;
  state.sale = null;
  state.down = "";
  ui.updated.textContent = heading;
  ui.settingsTitle.textContent = "Sale " + state.saleId;
  for (const id of [
    "set-name", "set-status", "set-price", "set-stock", "set-sold", "set-start", "set-end",
    "set-limit", "set-window", "set-shards", "set-admission", "set-soldout", "set-ttso",
  ]) {
    $(id).textContent = "–";
  }
  ui.editButton.disabled = true;
  showDraw(null);
  ui.stockRemaining.textContent = "–";
  ui.stockTotal.textContent = "–";
  ui.stockStatus.textContent = "–";
  ui.stockStatus.dataset.tone = "info";
  ui.stockBar.max = 1;
  ui.stockBar.value = 0;
  ui.queueVisible.textContent = "–";
  ui.queueInflight.textContent = "–";
  ui.queueDlq.textContent = "–";
  ui.queueDlq.dataset.tone = "";
  ui.orders.replaceChildren();
  ui.outcomes.replaceChildren();
  ui.reportSummary.textContent = "–";
  ui.violations.replaceChildren();
  ui.audit.replaceChildren(cell("li", "–", "muted"));
  ui.refundsSummary.textContent = "–";
  ui.refundsRows.replaceChildren();
  ui.refundsTable.hidden = true;
  showWaitlist(null, null);
  ui.actionResult.textContent = "";
  ui.control.hidden = true;
  drawFunnel();
}

// The settings, the refunds, the audit trail and the list: on a change
// of sale, after an action, and every few polls.
export function loadSlow() {
  loadSale();
  loadRefunds();
  loadAudit();
  loadSales();
}

export async function poll() {
  clearTimeout(state.timer);
  if (!state.session) return;
  const watching = state.watch;
  const startedAt = Date.now();
  // The Waitlist card's figures, read beside the live view's.
  loadWaitlist();
  const reply = await call(salePath("/live"));
  if (watching !== state.watch) return;
  let next = Math.max(500, POLL_MS - (Date.now() - startedAt));
  if (reply.ok && reply.body) {
    if (state.failures > 0) say("Live again.", "ok");
    state.failures = 0;
    apply(reply.body);
    state.polls += 1;
    if (state.polls % SLOW_EVERY === 0) loadSlow();
    else if (drawing()) loadSale();
  } else {
    switch (reply.code) {
      case "UNAUTHENTICATED":
        requestSignOut("Your sign-in has expired. Sign in again.");
        return;
      case "FORBIDDEN":
        say("This token has no operator rights (the seckill/admin scope).", "error");
        return;
      case "SALE_NOT_FOUND":
        // Nothing of another sale may stay under this name.
        clearFigures("No such sale “" + state.saleId + "”.");
        say("There is no sale “" + state.saleId + "”. Checking again every 5 seconds.", "error");
        next = 5000;
        break;
      case "NOT_FOUND":
        say("This API has no live view (GET /admin/sales/{saleId}/live).", "error");
        return;
      case "SALE_PAUSED":
        // The view could not read Redis, the table or the queue: it is
        // the system's trouble, worth showing, and worth asking again.
        state.failures += 1;
        next = Math.min(15000, POLL_MS * 2 ** state.failures);
        say(
          "The API cannot read a store (Redis, the orders table or the queue) right now: retrying in " +
            wait(next / 1000) +
            ".",
          "error"
        );
        break;
      default:
        state.failures += 1;
        next = Math.min(15000, POLL_MS * 2 ** state.failures);
        say(
          (reply.code === "NETWORK" ? "Connection lost" : "The API answered HTTP " + reply.status) +
            ": retrying in " +
            wait(next / 1000) +
            ". The numbers below are from " +
            (state.previous ? time(state.previous.atMs) : "no poll yet") +
            ".",
          "warn"
        );
    }
  }
  state.timer = setTimeout(poll, next);
}

function ordered(keys, order) {
  const known = order.filter((k) => keys.indexOf(k) >= 0);
  const extra = keys.filter((k) => order.indexOf(k) < 0).sort();
  return known.concat(extra);
}

function apply(live) {
  // An answer for another sale than the one named on screen is not shown.
  if (live.saleId !== state.saleId) return;
  const previous = state.previous;
  state.previous = live;
  // A store the API could not read leaves its figures null: shown as
  // "–" while the rest stays live.
  const down = live.unavailable || [];
  const redisDown = down.indexOf("redis") >= 0;
  if (down.join() !== state.down) {
    const was = state.down;
    state.down = down.join();
    if (down.length) {
      say(
        "The API cannot read " +
          down.map((store) => STORE_NAME[store] || store).join(", ") +
          " right now: those figures show – until it can; the rest is live.",
        "warn"
      );
    } else if (was) {
      say("Every store answers again.", "ok");
    }
  }
  const stock = live.stock || {};
  const loaded = typeof stock.remaining === "number";
  ui.stockRemaining.textContent = loaded ? number(stock.remaining) : redisDown ? "–" : "not loaded";
  ui.stockTotal.textContent = number(stock.total);
  ui.stockStatus.textContent = String(stock.status || "–").replace("_", " ");
  setControls(stock.status);
  ui.stockStatus.dataset.tone = STATUS_TONE[stock.status] || "info";
  ui.stockBar.max = Math.max(1, stock.total || 0);
  ui.stockBar.value = loaded ? Math.max(0, stock.remaining) : 0;

  const queue = live.queue || {};
  ui.queueVisible.textContent = number(queue.visible);
  ui.queueInflight.textContent = number(queue.inFlight);
  ui.queueDlq.textContent = number(queue.dlq);
  ui.queueDlq.dataset.tone = queue.dlq > 0 ? "danger" : "";
  // A new depth of the DLQ: look at its messages again.
  if (typeof queue.dlq === "number" && queue.dlq !== state.dlqDepth) {
    state.dlqDepth = queue.dlq;
    loadDlq();
  }

  const unknown = (keys) => Object.fromEntries(keys.map((k) => [k, null]));
  const orders = live.orders || unknown(STATUS_ORDER.slice(1));
  // One count serves every console, refreshed as its read cost allows.
  const countedAt = Date.parse(live.ordersAt || "");
  ui.ordersAt.textContent = Number.isFinite(countedAt)
    ? "Counted at " +
      time(countedAt) +
      ", once for every open console: a big sale's count is refreshed less often."
    : "Not counted: the orders table cannot be read.";
  ui.ordersAt.dataset.countedAt = Number.isFinite(countedAt) ? String(countedAt) : "";
  ui.orders.replaceChildren(
    ...ordered(Object.keys(orders), STATUS_ORDER).map((status) => {
      const row = document.createElement("tr");
      row.dataset.status = status;
      row.append(cell("th", LABEL[status] || status), cell("td", number(orders[status]), "count"));
      row.firstChild.scope = "row";
      return row;
    })
  );

  // Per second from two polls: the server's own timestamps, so a slow
  // answer does not bend the rate. The outcome rows: the API's list
  // (kept from an earlier answer that had it), then any other code it
  // counted, sorted.
  if (Array.isArray(live.outcomeCodes)) state.outcomeCodes = live.outcomeCodes.map(String);
  const outcomes = live.outcomes || unknown(state.outcomeCodes);
  const dt = previous ? (live.atMs - previous.atMs) / 1000 : 0;
  ui.outcomes.replaceChildren(
    ...ordered(Object.keys(outcomes), state.outcomeCodes).map((outcome) => {
      const before = previous && previous.outcomes ? previous.outcomes[outcome] || 0 : null;
      const delta = before === null ? null : outcomes[outcome] - before;
      // A count that went down means the sale was loaded again: no rate.
      const rate =
        dt > 0 && live.outcomes && delta !== null && delta >= 0 ? (delta / dt).toFixed(1) : "–";
      const row = document.createElement("tr");
      row.dataset.outcome = outcome;
      const name = cell("th", LABEL[outcome] || outcome);
      name.scope = "row";
      row.append(name, cell("td", number(outcomes[outcome]), "count"), cell("td", rate, "rate"));
      return row;
    })
  );

  // The funnel is the API's (kept in Redis), so a reload keeps it; while
  // Redis cannot be read, the last one drawn stays.
  if (Array.isArray(live.funnel)) state.funnel = live.funnel;
  drawFunnel();
  if (!redisDown) showSellOut(live.soldOutAt, live.timeToSellOutMs);
  showReport(live.lastReport);
  ui.updated.textContent =
    "Sale " + live.saleId + " · updated " + time(live.atMs) + " · every " + POLL_MS / 1000 + " s";
}
