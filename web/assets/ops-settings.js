// The console's settings card of the watched sale (GET
// /admin/sales/{id}), with its sell-out time, and the Draw card of a sale
// with a lottery window (tickets, progress, the seed's SHA-256 then the
// seed).

import { $ } from "./dom.js";
import { duration, money, number, wait, when } from "./format.js";
import { BUTTON, call, MONEY, salePath, state, ui, ZONE } from "./ops-state.js";
import { pill } from "./ops-widgets.js";

export async function loadSale() {
  if (!state.session) return;
  const watching = state.watch;
  const reply = await call(salePath());
  if (watching !== state.watch || !reply.ok || !reply.body) return;
  showSale(reply.body);
}

function showSale(sale) {
  if (sale.saleId !== state.saleId) return;
  state.sale = sale;
  ui.settingsTitle.textContent = "Sale " + sale.saleId;
  $("set-name").textContent = sale.name;
  $("set-status").replaceChildren(pill(sale.status));
  $("set-price").textContent = money(sale.price, MONEY);
  $("set-stock").textContent = number(sale.totalStock) + " units";
  $("set-sold").textContent = number(sale.sold) + " · " + number(sale.available);
  $("set-start").textContent = when(sale.startAt) + " (" + ZONE + ")";
  $("set-end").textContent = when(sale.endAt) + " (" + ZONE + ")";
  $("set-limit").textContent = number(sale.perUserLimit);
  $("set-window").textContent = wait(sale.paymentWindowSeconds);
  $("set-shards").textContent = number(sale.shards) + " · " + (sale.powBits ? "proof of work, " + sale.powBits + " bits" : sale.gate ? "gated" : "no gate");
  $("set-admission").textContent = sale.admission
    ? sale.admission.window + " s: tickets until " + when(windowEnd(sale)) + ", then a draw"
    : "none (first come, first served)";
  showSellOut(sale.soldOutAt, sale.timeToSellOutMs);
  showDraw(sale);
  ui.editButton.disabled = false;
  setControls(sale.status);
}

// The instant a sale's lottery window closes (ms), or NaN without one.
const windowEnd = (sale) =>
  sale && sale.admission ? Date.parse(sale.startAt) + sale.admission.window * 1000 : NaN;

// The Draw card of a sale with a lottery window (hidden otherwise, and
// emptied on a change of sale): `draw` is {tickets, decided, total,
// done}, `total` null until the order of the draw is recorded.
export function showDraw(sale) {
  const draw = sale && sale.admission ? sale.draw || null : null;
  ui.draw.hidden = !(sale && sale.admission);
  ui.draw.dataset.done = String(!!(draw && draw.done));
  const closes = windowEnd(sale);
  ui.drawTickets.textContent = draw ? number(draw.tickets) : "–";
  ui.drawProgress.textContent = drawProgress(draw, closes);
  ui.drawAt.textContent = Number.isNaN(closes) ? "–" : when(closes) + " (" + ZONE + ")";
  ui.drawHash.textContent = (sale && sale.drawSeedHash) || "–";
  ui.drawSeed.textContent =
    sale && sale.drawSeed
      ? sale.drawSeed
      : Number.isNaN(closes)
        ? "–"
        : "secret until the window closes (its SHA-256 is above)";
}

function drawProgress(draw, closes) {
  if (!draw) return "–";
  if (typeof draw.done !== "boolean") return "– (Redis cannot say now)";
  const total = typeof draw.total === "number" ? draw.total : null;
  if (draw.done) return number(draw.decided) + " of " + number(total === null ? draw.decided : total) + " decided · done";
  if (Date.now() < closes) return "not yet: the window is open";
  if (total === null) return "0 decided · the order is not recorded yet";
  return number(draw.decided) + " of " + number(total) + " decided · drawing";
}

// A started sale whose draw is not over: its settings (and so the Draw
// card) are read on every poll, not every few.
export function drawing() {
  const sale = state.sale;
  return !!(sale && sale.admission && !(sale.draw && sale.draw.done) && Date.now() >= Date.parse(sale.startAt));
}

export function showSellOut(soldOutAt, ms) {
  $("set-soldout").textContent = soldOutAt ? when(soldOutAt) : "not sold out";
  $("set-ttso").textContent = typeof ms === "number" ? duration(ms) : "–";
}

// Either vocabulary (the admin routes' or /live's stock.status).
export function setControls(status) {
  ui.control.hidden = false;
  const ended = status === "ENDED";
  BUTTON.pause.disabled = status === "PAUSED" || ended;
  BUTTON.resume.disabled = status !== "PAUSED";
  BUTTON.end.disabled = ended;
}
