// The console's order lookups: by order id, and by buyer in the watched
// sale.

import { validId, validUserId } from "./api.js";
import { $ } from "./dom.js";
import { money, number, when } from "./format.js";
import { call, LABEL, MONEY, state, ui } from "./ops-state.js";
import { cell } from "./ops-widgets.js";

function showOrders(orders) {
  ui.lookupTable.hidden = orders.length === 0;
  ui.lookupRows.replaceChildren(
    ...orders.map((o) => {
      const row = document.createElement("tr");
      row.dataset.order = o.orderId;
      row.append(
        cell("td", o.orderId, "id"),
        cell("td", o.saleId, "id"),
        cell("td", o.userId, "id"),
        cell("td", number(o.quantity), "num"),
        cell("td", LABEL[o.status] || o.status, "o-status"),
        cell("td", money(o.amount, MONEY), "num o-amount"),
        cell("td", when(o.createdAt), "o-created"),
        cell("td", o.paidAt ? when(o.paidAt) : "–", "o-paid"),
        cell("td", o.refund === "NEEDED" ? "Owed" : "–", "o-refund")
      );
      return row;
    })
  );
}

function lookupSays(message, tone) {
  ui.lookupMessage.dataset.tone = tone;
  ui.lookupMessage.textContent = message;
}

$("order-lookup").addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!state.session) return;
  const id = ui.lookupOrder.value.trim();
  if (!validId(id)) {
    lookupSays("An order id is 1 to 64 letters, digits, - or _.", "error");
    showOrders([]);
    return;
  }
  const reply = await call("/admin/orders/" + encodeURIComponent(id));
  if (reply.ok && reply.body) {
    lookupSays("Order " + id + ": " + (LABEL[reply.body.status] || reply.body.status) + ".", "ok");
    showOrders([reply.body]);
  } else {
    lookupSays(
      reply.code === "ORDER_NOT_FOUND" ? "There is no order “" + id + "”." : "The lookup failed (" + reply.code + "); try again.",
      "error"
    );
    showOrders([]);
  }
});

$("buyer-lookup").addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!state.session) return;
  const buyer = ui.lookupBuyer.value;
  if (!validUserId(buyer)) {
    lookupSays("A user id is 1 to 255 bytes of text without control characters.", "error");
    showOrders([]);
    return;
  }
  const sale = state.saleId;
  const reply = await call(
    "/admin/sales/" + encodeURIComponent(sale) + "/orders?buyer=" + encodeURIComponent(buyer)
  );
  if (reply.ok && reply.body) {
    const orders = reply.body.orders || [];
    lookupSays(
      orders.length
        ? "Buyer " + buyer + " has " + orders.length + (orders.length === 1 ? " order" : " orders") + " in sale " + sale + "."
        : "Buyer " + buyer + " has no order in sale " + sale + ".",
      orders.length ? "ok" : "info"
    );
    showOrders(orders);
  } else {
    lookupSays(
      reply.code === "SALE_NOT_FOUND" ? "There is no sale “" + sale + "”." : "The lookup failed (" + reply.code + "); try again.",
      "error"
    );
    showOrders([]);
  }
});
