// The console's list of sales (GET /admin/sales), and the choice of the
// sale to watch, from the list or by id.

import { validId } from "./api.js";
import { money, number, when } from "./format.js";
import { watchSale } from "./ops-events.js";
import { call, MONEY, say, state, ui } from "./ops-state.js";
import { cell, pill, rowOf } from "./ops-widgets.js";

export async function loadSales() {
  if (!state.session) return;
  const reply = await call("/admin/sales");
  if (!state.session) return;
  if (!reply.ok || !reply.body) {
    ui.salesRows.replaceChildren(
      rowOf([cell("td", "The list could not be read (" + (reply.code || reply.status) + "): try Refresh.", "muted")], 6)
    );
    return;
  }
  state.sales = reply.body.sales || [];
  if (!state.sales.length) {
    ui.salesRows.replaceChildren(rowOf([cell("td", "No sale yet: make one with New sale.", "muted")], 6));
    return;
  }
  // The same sales as shown: their figures change in place, so a button
  // is never swapped away under the operator's pointer or focus.
  const shown = Array.from(ui.salesRows.children, (row) => row.dataset.sale);
  if (shown.join("\n") === state.sales.map((sale) => sale.saleId).join("\n")) {
    state.sales.forEach((sale, i) => {
      const row = ui.salesRows.children[i];
      row.querySelector(".sale-name").textContent = sale.name;
      row.querySelector(".sale-status").replaceChildren(pill(sale.status));
      row.querySelector(".sale-price").textContent = money(sale.price, MONEY);
      row.querySelector(".sale-sold").textContent = number(sale.sold) + " of " + number(sale.totalStock);
      row.querySelector(".sale-available").textContent = number(sale.available);
      row.querySelector(".sale-start").textContent = when(sale.startAt);
    });
    markWatched();
    return;
  }
  ui.salesRows.replaceChildren(
    ...state.sales.map((sale) => {
      const row = document.createElement("tr");
      row.dataset.sale = sale.saleId;
      const head = document.createElement("th");
      head.scope = "row";
      const pick = cell("button", sale.saleId, "small watch");
      pick.type = "button";
      pick.setAttribute("aria-label", "Watch sale " + sale.saleId + ": " + sale.name);
      pick.addEventListener("click", () => choose(sale.saleId));
      head.append(pick, cell("span", sale.name, "muted sale-name"));
      const status = document.createElement("td");
      status.className = "sale-status";
      status.append(pill(sale.status));
      row.append(
        head,
        status,
        cell("td", money(sale.price, MONEY), "num sale-price"),
        cell("td", number(sale.sold) + " of " + number(sale.totalStock), "num sale-sold"),
        cell("td", number(sale.available), "num sale-available"),
        cell("td", when(sale.startAt), "sale-start")
      );
      return row;
    })
  );
  markWatched();
}

export function markWatched() {
  for (const row of ui.salesRows.querySelectorAll("tr[data-sale]")) {
    if (row.dataset.sale === state.saleId) row.setAttribute("aria-current", "true");
    else row.removeAttribute("aria-current");
  }
}

// A sale picked from the list or typed: the address names it, so a
// reload or a shared link shows it.
export function choose(id) {
  ui.saleInput.value = id;
  history.replaceState(null, "", "?sale=" + encodeURIComponent(id));
  watchSale(id);
}

ui.salesRefresh.addEventListener("click", () => loadSales());

ui.saleForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const id = ui.saleInput.value.trim();
  if (!validId(id)) {
    say("A sale id is 1 to 64 letters, digits, - or _.", "error");
    return;
  }
  choose(id);
});
