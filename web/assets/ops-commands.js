// The console's operator commands on the watched sale: pause, resume, end
// now, prewarm and reconcile, each after a question.

import { number } from "./format.js";
import { loadSlow, poll } from "./ops-live.js";
import { setControls } from "./ops-settings.js";
import { BUTTON, call, salePath, state, ui } from "./ops-state.js";
import { question } from "./ops-widgets.js";

const controlQuestion = question("confirm");

// What each action asks, and says once the API has answered.
const ACTIONS = {
  pause: {
    ask: (id) => "Pause sale " + id + "? Buyers are told to retry shortly until you resume it.",
    done: (id) => "Sale " + id + " is paused: purchases get “paused” from now on.",
  },
  resume: {
    ask: (id) => "Resume sale " + id + "? Purchases are taken again at once.",
    done: (id) => "Sale " + id + " sells again.",
  },
  end: {
    ask: (id) => "End sale " + id + " now? Purchases get “ended” from the next one, for good: an end cannot be undone.",
    done: (id) => "Sale " + id + " has ended: purchases get “ended” from now on.",
  },
  prewarm: {
    ask: (id) => "Prewarm sale " + id + "? It loads the sale into Redis (or refreshes it from the table).",
    done: (id, body) => prewarmWords(id, body),
  },
  reconcile: {
    ask: (id) => "Reconcile sale " + id + " now? It compares Redis, the queue and the orders table, and repairs what is safe.",
    done: (id, report) => {
      const violations = (report.violations || []).length;
      const repairs = (report.repairs || []).length;
      return (
        "Reconciled sale " + id + ": " +
        (violations ? violations + (violations === 1 ? " violation" : " violations") : "no violations") +
        ", " + repairs + (repairs === 1 ? " repair" : " repairs") +
        "; sold " + number(report.sold) + ", available " + number(report.available) + "."
      );
    },
  },
};

function prewarmWords(id, body) {
  switch (body && body.outcome) {
    case "LOADED":
      return "Sale " + id + " is loaded into Redis: " + number(body.stock) + " units.";
    case "REFRESHED":
      return "Sale " + id + " was already in Redis: refreshed from the table.";
    case "WAITING_FOR_QUEUE":
      return "Sale " + id + " is not loaded yet: orders are still in the queue or the DLQ. Try again once they are written.";
    case "NOT_DUE":
      return "Sale " + id + " is not loaded: it starts later than the prewarm lead; the schedule loads it in time.";
    case "ENDED":
      return "Sale " + id + " has ended: there is nothing to load.";
    default:
      return "Another prewarm of sale " + id + " is running: try again in a moment.";
  }
}

async function act(action) {
  const id = state.saleId;
  const watching = state.watch;
  const reply = await call(salePath("/" + action), { method: "POST" });
  if (watching !== state.watch) return;
  if (reply.ok) {
    ui.actionResult.dataset.tone = "ok";
    ui.actionResult.textContent = ACTIONS[action].done(id, reply.body || {});
    // The buttons follow at once; the settings (with the sell-out time,
    // which this answer does not carry) are read again.
    if (reply.body && typeof reply.body.status === "string") setControls(reply.body.status);
    loadSlow();
    poll();
  } else {
    ui.actionResult.dataset.tone = "error";
    ui.actionResult.textContent =
      reply.code === "SALE_ENDED"
        ? "Sale " + id + " has ended: there is nothing to " + action + "."
        : reply.code === "SALE_NOT_FOUND"
          ? "There is no sale “" + id + "”."
          : "Could not " + action + " sale " + id + " (" + (reply.code || "HTTP " + reply.status) + "): " +
            ((reply.body && reply.body.message) || "no answer") + ". Nothing changed; try again.";
  }
}

for (const action of Object.keys(BUTTON)) {
  BUTTON[action].addEventListener("click", () =>
    controlQuestion.ask(ACTIONS[action].ask(state.saleId), () => act(action), BUTTON[action], ui.actionResult)
  );
}
