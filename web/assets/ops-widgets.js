// The console's small pieces: a table cell, a status pill, a row, and the
// question asked before an action.

import { $ } from "./dom.js";
import { STATUS_TONE, words } from "./ops-state.js";

export function cell(tag, text, className) {
  const el = document.createElement(tag);
  el.textContent = text;
  if (className) el.className = className;
  return el;
}

export function pill(status) {
  const el = cell("span", words(status), "pill");
  el.dataset.tone = STATUS_TONE[status] || "info";
  return el;
}

// A question before an action: one misplaced click must not stop a sale
// or move a queue. `prefix` names the box (`confirm`, `dlq-confirm`).
export function question(prefix) {
  const box = $(prefix);
  const text = $(prefix + "-text");
  const yes = $(prefix + "-yes");
  const no = $(prefix + "-no");
  let pending = null; // {run, back} while the question is open
  function close(fallback) {
    const was = pending;
    pending = null;
    box.hidden = true;
    // Back to the control that asked; if the answer turned it off, to
    // where the result is written.
    const back = was && was.back;
    if (back && !back.disabled) back.focus();
    else if (fallback) fallback.focus();
  }
  yes.addEventListener("click", async () => {
    const was = pending;
    if (!was) return;
    yes.disabled = true;
    await was.run();
    yes.disabled = false;
    close(was.result);
  });
  no.addEventListener("click", () => close(null));
  box.addEventListener("keydown", (event) => {
    if (event.key === "Escape") close(null);
  });
  return {
    ask(message, run, back, result) {
      pending = { run: run, back: back, result: result };
      text.textContent = message;
      box.hidden = false;
      yes.focus();
    },
    close: () => close(null),
  };
}

export function rowOf(cells, span) {
  const row = document.createElement("tr");
  if (span) cells[0].colSpan = span;
  row.append(...cells);
  return row;
}
