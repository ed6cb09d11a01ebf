// The console's dead letters: the orders DLQ's messages and why they
// failed, and their redrive (one, or all), each after a question.

import { number } from "./format.js";
import { call, state, ui } from "./ops-state.js";
import { cell, question } from "./ops-widgets.js";

const dlqQuestion = question("dlq-confirm");

function dlqSays(message, tone) {
  ui.dlqMessage.dataset.tone = tone;
  ui.dlqMessage.textContent = message;
}

// Looks at the DLQ overlap (the live view asks on every change of its
// depth, and a redrive asks after it moved messages): an answer to a look
// that began before the one shown last is older, and would list messages
// the redrive has moved.
let looksBegun = 0;
let lookShown = 0;

export async function loadDlq() {
  if (!state.session) return;
  const look = ++looksBegun;
  const reply = await call("/admin/dlq");
  if (!state.session || look < lookShown) return;
  lookShown = look;
  if (!reply.ok || !reply.body) {
    ui.dlqCount.dataset.tone = "error";
    ui.dlqCount.textContent = "The DLQ could not be read (" + reply.code + "): look again.";
    return;
  }
  const messages = reply.body.messages || [];
  ui.dlqTable.hidden = messages.length === 0;
  ui.dlqRedriveAll.disabled = messages.length === 0;
  // The count apart from what the last redrive said: a look at the DLQ
  // (on a change of its depth) must not wipe the answer of an action.
  ui.dlqCount.dataset.tone = messages.length ? "warn" : "ok";
  ui.dlqCount.textContent = (
    messages.length
      ? messages.length + (messages.length === 1 ? " message" : " messages") + " in the DLQ" +
          (messages.length >= (reply.body.limit || Infinity) ? " (the first " + reply.body.limit + " shown)" : "") + "."
      : "The DLQ is empty."
  );
  // The same messages as shown: their figures change in place, so a
  // Redrive button is never swapped away under the operator's pointer
  // (every look at the DLQ adds one to a message's receive count).
  const shown = Array.from(ui.dlqRows.children, (row) => row.dataset.message);
  if (shown.length && shown.join("\n") === messages.map((m) => m.messageId).join("\n")) {
    messages.forEach((m, i) => {
      const cells = ui.dlqRows.children[i].children;
      cells[4].textContent = number(m.receiveCount);
      cells[5].textContent = m.lastError || "unknown";
    });
    return;
  }
  ui.dlqRows.replaceChildren(
    ...messages.map((m) => {
      const row = document.createElement("tr");
      row.dataset.message = m.messageId;
      if (m.orderId) row.dataset.order = m.orderId;
      const act = document.createElement("td");
      const button = cell("button", "Redrive", "small redrive");
      button.type = "button";
      const what = m.orderId ? "order " + m.orderId : "message " + m.messageId;
      button.setAttribute("aria-label", "Redrive " + what);
      button.addEventListener("click", () =>
        dlqQuestion.ask(
          "Send " + what + (m.saleId ? " (sale " + m.saleId + ")" : "") +
            " back to the orders queue? Fix what it failed with first, or it comes back here.",
          () => redrive([m.messageId]),
          ui.dlqRefresh,
          ui.dlqMessage
        )
      );
      act.append(button);
      row.append(
        cell("td", m.orderId || "not an order", "id"),
        cell("td", m.saleId || "–", "id"),
        cell("td", m.userId || "–", "id"),
        cell("td", number(m.quantity), "num"),
        cell("td", number(m.receiveCount), "num"),
        cell("td", m.lastError || "unknown", "last-error"),
        act
      );
      return row;
    })
  );
}

async function redrive(ids) {
  const reply = await call("/admin/dlq/redrive", { method: "POST", body: ids ? { messageIds: ids } : {} });
  if (reply.ok && reply.body) {
    const n = reply.body.redriven;
    const missing = (reply.body.missing || []).length;
    await loadDlq();
    dlqSays(
      "Sent " + n + (n === 1 ? " message" : " messages") + " back to the orders queue; the order-writer writes " +
        (n === 1 ? "its order" : "their orders") + " in a moment." +
        (missing ? " " + missing + (missing === 1 ? " was" : " were") + " no longer in the DLQ." : ""),
      "ok"
    );
  } else {
    dlqSays(
      "Nothing was moved (" + (reply.code || "HTTP " + reply.status) + "): " +
        ((reply.body && reply.body.message) || "try again") + ".",
      "error"
    );
  }
}

ui.dlqRefresh.addEventListener("click", () => loadDlq());
ui.dlqRedriveAll.addEventListener("click", () =>
  dlqQuestion.ask(
    "Send every message of the DLQ back to the orders queue? Fix what they failed with first, or they come back here.",
    () => redrive(null),
    ui.dlqRedriveAll,
    ui.dlqMessage
  )
);
