// The buyer page's gate: a gated sale's question, or its proof of work
// solved by a Web Worker (pow.js, a classic worker script), for the pass
// (X-Sale-Token) a purchase carries.

import { api } from "./api.js";
import { now, salePath, say, state, ui } from "./buyer-state.js";
import { changed, requestSignOut } from "./buyer-events.js";
import { messageFor } from "./buyer-messages.js";

// A gated sale (`gate: true` in GET /sales) issues its question from 30 s
// before the start, its proof of work (`powBits`) from the start; a sale
// without one is never asked. An API that does not say (no `gate`) is
// asked, and its 400 means no gate. A 403 GATE_REQUIRED asks again.
export async function fetchQuestion() {
  if (state.gateBusy || !state.session) return;
  state.gateBusy = true;
  const reply = await api(salePath + "/challenge", { token: state.session.token });
  state.gateBusy = false;
  if (reply.ok && reply.body && reply.body.kind === "pow") {
    solve(reply.body);
  } else if (reply.ok && reply.body) {
    const first = state.gate !== "needed";
    state.gate = "needed";
    ui.question.textContent = reply.body.question;
    // Sent back with the answer: it is checked against this question only.
    state.challengeId = reply.body.challengeId || null;
    if (first) say("This sale asks one question before you buy: answer it above the buy button.", "info");
  } else if (reply.code === "INVALID_REQUEST" || reply.code === "SALE_ENDED") {
    state.gate = "none";
  } else if (reply.code === "UNAUTHENTICATED") {
    requestSignOut("Your sign-in has expired. Sign in again.");
  } else {
    // Too early, or a network error: ask again shortly. Buying is not
    // held up by it: a purchase without a pass gets 403 and asks too.
    state.gateRetryAtMs = now() + (reply.retryAfter || 5) * 1000;
  }
  changed();
}

// The proof of work: solved by a Web Worker (assets/pow.js) so the page
// stays responsive, then sent for the pass. A new challenge replaces a
// running one.
function solve(challenge) {
  stopSolving();
  state.gate = "solving";
  ui.powStatus.textContent = "Checking your browser… (a few seconds)";
  const worker = new Worker("/assets/pow.js");
  state.worker = worker;
  worker.onmessage = async (event) => {
    if (state.worker !== worker) return;
    const found = event.data;
    if (found.nonce === undefined) {
      ui.powStatus.dataset.tried = String(found.tried);
      return;
    }
    stopSolving();
    ui.powStatus.dataset.solvedMs = String(Math.round(found.ms));
    ui.powStatus.dataset.tried = String(found.tried);
    if (!state.session) return;
    const reply = await api(salePath + "/challenge", {
      method: "POST",
      token: state.session.token,
      body: { challengeId: challenge.challengeId, nonce: found.nonce },
    });
    if (reply.ok && reply.body) {
      state.pass = { token: reply.body.token, expiresAtMs: Date.parse(reply.body.expiresAt) };
      state.gate = "passed";
      changed();
      say("Your browser is checked: press Buy now.", "ok", null, "POW_PASSED");
      if (!ui.buyButton.disabled) ui.buyButton.focus();
    } else {
      // Expired while solving, or refused: start again from a new one.
      state.gate = "unknown";
      state.gateRetryAtMs = now() + (reply.retryAfter || 1) * 1000;
      changed();
    }
  };
  worker.onerror = () => {
    stopSolving();
    state.gate = "unknown";
    state.gateRetryAtMs = now() + 5000;
    say("Your browser could not run the check; trying again shortly.", "error", null, "POW_FAILED");
  };
  worker.postMessage({ challenge: challenge.challenge, bits: challenge.bits });
  changed();
}

export function stopSolving() {
  if (state.worker) state.worker.terminate();
  state.worker = null;
}

ui.gateForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  const answer = Number(ui.answer.value.trim());
  if (!Number.isInteger(answer) || !state.session) {
    say("Answer with a whole number.", "error");
    ui.answer.focus();
    return;
  }
  const reply = await api(salePath + "/challenge", {
    method: "POST",
    token: state.session.token,
    body: state.challengeId ? { answer: answer, challengeId: state.challengeId } : { answer: answer },
  });
  if (reply.ok && reply.body) {
    state.pass = { token: reply.body.token, expiresAtMs: Date.parse(reply.body.expiresAt) };
    state.gate = "passed";
    ui.answer.value = "";
    changed();
    say("Right. The pass holds for a minute: press Buy now.", "ok");
    ui.buySection.focus();
    if (!ui.buyButton.disabled) ui.buyButton.focus();
  } else if (reply.code === "INVALID_REQUEST" && /expired/.test(reply.body && reply.body.message)) {
    // The question's window passed while the buyer thought: a new one.
    ui.answer.value = "";
    await fetchQuestion();
    say("That question expired: here is a new one.", "error", null, "WRONG_ANSWER");
    ui.answer.focus();
  } else if (reply.code === "INVALID_REQUEST") {
    say("That answer is not right. Try again.", "error", null, "WRONG_ANSWER");
    ui.answer.select();
  } else {
    say(messageFor(reply).text, "error", null, reply.code);
  }
});
