// The console's sale editor: create and edit forms over PUT
// /admin/sales/{id}, with the API's messages next to the field each names.

import { validId } from "./api.js";
import { $ } from "./dom.js";
import { amountInput, digitsOf, localInput } from "./format.js";
import { loadSlow } from "./ops-live.js";
import { choose } from "./ops-sales.js";
import { call, say, state, ui, ZONE } from "./ops-state.js";

// The API's field names, the form's inputs, and how to find a field in
// an API message (the longest names first: "price.amount" before "price").
const FIELDS = {
  "price.amount": "f-price",
  "price.currency": "f-currency",
  saleId: "f-id",
  "sale id": "f-id",
  name: "f-name",
  totalStock: "f-stock",
  startAt: "f-start",
  endAt: "f-end",
  perUserLimit: "f-limit",
  paymentWindowSeconds: "f-window",
  shards: "f-shards",
  gate: "f-gate",
  price: "f-price",
  powBits: "f-pow",
  "admission.window": "f-admission",
  admission: "f-admission",
};
const INPUTS = ["f-id", "f-name", "f-stock", "f-start", "f-end", "f-limit", "f-window", "f-shards", "f-price", "f-currency", "f-gate", "f-pow", "f-admission"];

function clearErrors() {
  ui.editorError.textContent = "";
  for (const id of INPUTS) {
    $(id + "-error").textContent = "";
    $(id).removeAttribute("aria-invalid");
  }
}

function fieldError(input, message) {
  $(input + "-error").textContent = message;
  $(input).setAttribute("aria-invalid", "true");
}

// The input an API message is about: the field it names first.
function fieldOf(message) {
  let best = null;
  for (const [name, input] of Object.entries(FIELDS)) {
    const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    const match = new RegExp("(^|[^A-Za-z.])" + escaped + "(?![A-Za-z])").exec(message);
    if (match && (!best || match.index < best.index || (match.index === best.index && name.length > best.name.length))) {
      best = { index: match.index, name: name, input: input };
    }
  }
  return best ? best.input : null;
}

function openEditor(sale) {
  state.editing = sale;
  clearErrors();
  ui.editorTitle.textContent = sale ? "Edit sale " + sale.saleId : "New sale";
  ui.editorSave.textContent = sale ? "Save the changes" : "Create the sale";
  const hour = 3600000;
  const start = sale ? sale.startAt : new Date(Math.ceil((Date.now() + hour) / 60000) * 60000).toISOString();
  const end = sale ? sale.endAt : new Date(Date.parse(start) + hour).toISOString();
  $("f-id").value = sale ? sale.saleId : "";
  $("f-id").readOnly = !!sale;
  $("f-name").value = sale ? sale.name : "";
  $("f-stock").value = sale ? String(sale.totalStock) : "";
  $("f-start").value = localInput(start);
  $("f-end").value = localInput(end);
  $("f-limit").value = sale ? String(sale.perUserLimit) : "1";
  $("f-window").value = sale ? String(sale.paymentWindowSeconds) : "900";
  $("f-shards").value = sale ? String(sale.shards) : "1";
  $("f-gate").checked = !!(sale && sale.gate);
  $("f-pow").value = sale && sale.powBits ? String(sale.powBits) : "";
  // Kept as it is on an edit: a PUT without it would remove the window.
  $("f-admission").value = sale && sale.admission ? String(sale.admission.window) : "";
  const price = sale && sale.price;
  $("f-price").value = amountInput(price);
  $("f-currency").value = price ? price.currency : "EUR";
  ui.zoneHint.textContent = "Times are in your time zone: " + ZONE + ".";
  for (const zone of document.querySelectorAll(".zone")) zone.textContent = ZONE;
  ui.editor.hidden = false;
  (sale ? $("f-name") : $("f-id")).focus();
}

function closeEditor(back) {
  ui.editor.hidden = true;
  state.editing = null;
  clearErrors();
  if (back && !back.disabled) back.focus();
}

ui.newSale.addEventListener("click", () => openEditor(null));
ui.editButton.addEventListener("click", () => {
  if (state.sale) openEditor(state.sale);
});
ui.editorCancel.addEventListener("click", () => closeEditor(state.editing ? ui.editButton : ui.newSale));
ui.editor.addEventListener("keydown", (event) => {
  if (event.key === "Escape") closeEditor(state.editing ? ui.editButton : ui.newSale);
});

// A whole number as a number; anything else as typed, so the API's
// message says what is wrong with it.
function integer(value) {
  const v = value.trim();
  return /^-?\d+$/.test(v) ? Number(v) : v;
}

// A time typed in the operator's zone as RFC 3339 UTC; the original
// instant when untouched (the input holds whole seconds only, and a
// started sale's start must not move by the milliseconds it drops).
function instant(input, original) {
  const v = input.value;
  // Unchanged: the original, to the millisecond. (A time on a whole
  // minute reads back without its ":00", so the two are compared as
  // times, not as text: an unchanged start was sent as a change.)
  if (original && v && Date.parse(v) === Date.parse(localInput(original))) return original;
  const ms = Date.parse(v);
  return v && !Number.isNaN(ms) ? new Date(ms).toISOString() : v;
}

// The body of PUT /admin/sales/{id}, or {error} for a price the page
// cannot turn into minor units.
function editorBody() {
  const was = state.editing;
  const body = {
    name: $("f-name").value,
    startAt: instant($("f-start"), was && was.startAt),
    endAt: instant($("f-end"), was && was.endAt),
    gate: $("f-gate").checked,
  };
  // Bits turn the gate on (the API refuses gate: false with them).
  const pow = $("f-pow").value.trim();
  body.powBits = pow === "" ? null : integer(pow);
  if (pow !== "") body.gate = true;
  // Empty: no window (first come, first served); else as typed, so the
  // API's message says what is wrong with it.
  const lottery = $("f-admission").value.trim();
  body.admission = lottery === "" ? null : { window: integer(lottery) };
  for (const [key, input] of [
    ["totalStock", "f-stock"],
    ["perUserLimit", "f-limit"],
    ["paymentWindowSeconds", "f-window"],
    ["shards", "f-shards"],
  ]) {
    const value = $(input).value.trim();
    if (value !== "" || key === "totalStock" || key === "perUserLimit") body[key] = integer(value);
  }
  const amount = $("f-price").value.trim();
  const currency = $("f-currency").value.trim();
  if (amount === "") {
    body.price = null;
  } else {
    const digits = /^[A-Z]{3}$/.test(currency) ? digitsOf(currency) : 2;
    const match = /^(\d+)(?:\.(\d*))?$/.exec(amount);
    if (!match || (match[2] || "").length > digits) {
      return {
        error: ["f-price", "Write the price as a number with at most " + digits + " decimals, e.g. " + (digits ? "19.99" : "1999") + "."],
      };
    }
    const minor = Number(match[1]) * 10 ** digits + Number(((match[2] || "") + "0".repeat(digits)).slice(0, digits) || 0);
    body.price = { amount: minor, currency: currency };
  }
  return { body: body };
}

// The fields a 409 SALE_STARTED is about: those the form changed among
// the ones a started sale keeps.
function startedFields(body) {
  const was = state.editing;
  if (!was) return [];
  const fields = [];
  if (body.totalStock !== was.totalStock) fields.push("f-stock");
  if (body.startAt !== was.startAt) fields.push("f-start");
  if (body.shards !== undefined && body.shards !== was.shards) fields.push("f-shards");
  if (JSON.stringify(body.price) !== JSON.stringify(was.price || null)) fields.push("f-price");
  if ((body.powBits || null) !== (was.powBits || null)) fields.push("f-pow");
  const windowOf = (admission) => (admission ? admission.window : null);
  if (windowOf(body.admission) !== windowOf(was.admission)) fields.push("f-admission");
  return fields;
}

ui.editorForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!state.session) return;
  clearErrors();
  const id = $("f-id").value.trim();
  const made = editorBody();
  if (made.error) {
    fieldError(made.error[0], made.error[1]);
    $(made.error[0]).focus();
    return;
  }
  if (!validId(id)) {
    fieldError("f-id", "A sale id is 1 to 64 letters, digits, - or _.");
    $("f-id").focus();
    return;
  }
  const creating = !state.editing;
  ui.editorSave.disabled = true;
  // PUT makes or replaces: a new sale must not overwrite one that exists.
  if (creating) {
    const existing = await call("/admin/sales/" + encodeURIComponent(id));
    if (existing.status !== 404) {
      ui.editorSave.disabled = false;
      fieldError(
        "f-id",
        existing.ok
          ? "Sale " + id + " exists already: pick it from the list and edit it, or choose another id."
          : "Could not check whether sale " + id + " exists (" + existing.code + "): try again."
      );
      $("f-id").focus();
      return;
    }
  }
  const reply = await call("/admin/sales/" + encodeURIComponent(id), { method: "PUT", body: made.body });
  ui.editorSave.disabled = false;
  if (reply.ok && reply.body) {
    const verb = reply.status === 201 ? "created" : "saved";
    const prewarm = reply.body.prewarm;
    closeEditor(null);
    // A new sale is watched at once, the focus on its settings; an
    // edited one stays, the focus back on Edit.
    if (creating || id !== state.saleId) {
      choose(id);
      ui.settingsTitle.focus();
    } else {
      loadSlow();
      ui.editButton.focus();
    }
    say(
      "Sale " + id + " " + verb + "." +
        (prewarm && prewarm.outcome === "LOADED" ? " It is loaded into Redis." : "") +
        (prewarm && prewarm.outcome === "REFRESHED" ? " Redis took the change." : ""),
      "ok"
    );
    return;
  }
  const message = (reply.body && reply.body.message) || "";
  let inputs = [];
  if (reply.code === "INVALID_REQUEST") {
    const input = fieldOf(message);
    if (input) inputs = [input];
  } else if (reply.code === "SALE_STARTED") {
    inputs = startedFields(made.body);
  } else if (reply.code === "SALE_LOADED") {
    inputs = [/shard count/.test(message) ? "f-shards" : "f-stock"];
  }
  const said = message || "The API answered " + (reply.code || "HTTP " + reply.status) + ".";
  if (inputs.length) {
    for (const input of inputs) fieldError(input, said);
    ui.editorError.textContent = "Nothing was saved: see the field" + (inputs.length > 1 ? "s" : "") + " marked above.";
    $(inputs[0]).focus();
  } else if (reply.code === "CONFLICT") {
    ui.editorError.textContent = "Nothing was saved: someone changed the sale meanwhile. Cancel, look at it again, then edit.";
    ui.editorSave.focus();
  } else {
    ui.editorError.textContent =
      "Nothing was saved: " + (reply.code === "NETWORK" ? "the API could not be reached." : said);
    ui.editorSave.focus();
  }
});
