// The operator console: every sale to pick from (GET /admin/sales), the
// watched sale's settings (GET /admin/sales/{id}) with its sell-out time
// and, for a sale with a lottery window, its draw (tickets, progress, the
// seed's SHA-256 then the seed), create and edit forms over PUT /admin/sales/{id} with the API's messages
// next to the field each names, pause / resume / end now / prewarm /
// reconcile after a confirmation, order lookups by id and by buyer, the DLQ
// with its redrive, the refunds owed, and the live numbers: GET
// /admin/sales/{id}/live every 1.5 s (stock in Redis, queue, orders by
// status, purchases per second by outcome from two polls' counts, the
// reconcile report) and the funnel drawn from the API's own 10-second
// buckets, so a reload keeps its history.
//
// One rule runs through it: every figure on screen belongs to the sale
// named above it. A change of sale (or an unknown id) clears them all at
// once, and an answer that arrives for a sale no longer watched is dropped.
"use strict";

(function () {
  const S = window.Seckill;
  const $ = S.$;
  const SVG_NS = "http://www.w3.org/2000/svg";

  // Every second or two; one request at a time (the next is scheduled when
  // the last has answered), so a slow API is not piled on.
  const POLL_MS = 1500;
  // The settings, the refunds and the audit trail change rarely: read again
  // every this many polls (and at once after an action of this page).
  const SLOW_EVERY = 6;
  // The API's funnel bucket (`/live`'s `funnel`).
  const BUCKET_MS = 10000;

  const ui = {
    who: $("who"),
    whoName: $("who-name"),
    signin: $("signin"),
    localSignin: $("local-signin"),
    user: $("user"),
    cognitoSignin: $("cognito-signin"),
    loginLink: $("login-link"),
    sales: $("sales"),
    salesRows: $("sales-rows"),
    salesRefresh: $("sales-refresh"),
    newSale: $("new-sale"),
    saleForm: $("sale-form"),
    saleInput: $("sale-id"),
    settings: $("settings"),
    settingsTitle: $("settings-title"),
    updated: $("updated"),
    editButton: $("edit-button"),
    editor: $("editor"),
    editorTitle: $("editor-title"),
    editorForm: $("sale-editor"),
    editorError: $("editor-error"),
    editorSave: $("editor-save"),
    editorCancel: $("editor-cancel"),
    zoneHint: $("zone-hint"),
    status: $("status"),
    tiles: $("tiles"),
    stockRemaining: $("stock-remaining"),
    stockTotal: $("stock-total"),
    stockStatus: $("stock-status"),
    stockBar: $("stock-bar"),
    queueVisible: $("queue-visible"),
    queueInflight: $("queue-inflight"),
    queueDlq: $("queue-dlq"),
    orders: $("orders"),
    ordersAt: $("orders-at"),
    outcomes: $("outcomes"),
    funnel: $("funnel"),
    reportSummary: $("report-summary"),
    violations: $("violations"),
    audit: $("audit"),
    control: $("control"),
    actionResult: $("action-result"),
    lookupOrder: $("lookup-order"),
    lookupBuyer: $("lookup-buyer"),
    lookupMessage: $("lookup-message"),
    lookupTable: $("lookup-table"),
    lookupRows: $("lookup-rows"),
    dlqRefresh: $("dlq-refresh"),
    dlqRedriveAll: $("dlq-redrive-all"),
    dlqMessage: $("dlq-message"),
    dlqCount: $("dlq-count"),
    dlqTable: $("dlq-table"),
    dlqRows: $("dlq-rows"),
    refundsSummary: $("refunds-summary"),
    refundsTable: $("refunds-table"),
    refundsRows: $("refunds-rows"),
    draw: $("draw"),
    drawTickets: $("draw-tickets"),
    drawProgress: $("draw-progress"),
    drawAt: $("draw-at"),
    drawHash: $("draw-hash"),
    drawSeed: $("draw-seed"),
  };
  const BUTTON = {
    pause: $("pause-button"),
    resume: $("resume-button"),
    end: $("end-button"),
    prewarm: $("prewarm-button"),
    reconcile: $("reconcile-button"),
  };

  const query = new URLSearchParams(location.search);
  const state = {
    session: null,
    saleId: S.validId(query.get("sale")) ? query.get("sale") : S.config.saleId,
    watch: 0, // bumped when the sale changes: late answers for the old one are dropped
    timer: 0,
    polls: 0,
    failures: 0,
    down: "", // the stores the last poll could not read, as said
    previous: null, // the last poll's answer, for per-second rates
    funnel: [], // the API's buckets, oldest first
    outcomeCodes: [], // the API's listed outcomes, in its order (outcomeCodes)
    reportAt: null, // the report already announced
    sale: null, // the watched sale as GET /admin/sales/{id} answered it
    sales: [], // the list as last read
    editing: null, // null: creating; else the sale as the form was filled from
    dlqDepth: null, // /live's queue.dlq when the DLQ was last read
  };

  // Stable row order; statuses the API adds later follow, sorted. Outcome
  // rows come in the order of the API's own list (`outcomeCodes`).
  const STORE_NAME = { redis: "Redis", orders: "the orders table", queue: "the orders queue" };
  const STATUS_ORDER = ["QUEUED", "PENDING_PAYMENT", "PAID", "EXPIRED", "REJECTED"];
  // Words for codes; a code without one is shown as it is.
  const LABEL = {
    QUEUED: "Queued",
    PENDING_PAYMENT: "Pending payment",
    PAID: "Paid",
    EXPIRED: "Expired",
    REJECTED: "Rejected",
    ACCEPTED: "Accepted",
    REPLAYED: "Replayed (same key)",
    TICKET: "Lottery ticket",
    SOLD_OUT: "Sold out",
    LIMIT_EXCEEDED: "Limit reached",
    RATE_LIMITED: "Rate limited",
    SALE_NOT_STARTED: "Not started",
    SALE_ENDED: "Ended",
    SALE_PAUSED: "Paused",
    GATE_REQUIRED: "Gate required",
  };
  // Both vocabularies: the buyer's (`/live`'s stock.status) and the admin
  // routes' (NOT_STARTED).
  const STATUS_TONE = {
    LIVE: "ok",
    UPCOMING: "info",
    NOT_STARTED: "info",
    SOLD_OUT: "danger",
    PAUSED: "warn",
    ENDED: "danger",
  };

  const say = (message, tone) => S.announce(ui.status, message, tone);
  const salePath = (suffix) => "/admin/sales/" + encodeURIComponent(state.saleId) + (suffix || "");
  const call = (path, options) => S.api(path, Object.assign({ token: state.session.token }, options || {}));
  const words = (code) => String(code || "–").replace(/_/g, " ");

  // ------------------------------------------------------------ formats

  // The operator's own time zone, named wherever a time is shown or typed.
  const ZONE = (() => {
    const offset = -new Date().getTimezoneOffset();
    const sign = offset < 0 ? "-" : "+";
    const abs = Math.abs(offset);
    const utc = "UTC" + sign + pad(Math.floor(abs / 60)) + ":" + pad(abs % 60);
    let name = "";
    try {
      name = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
    } catch (_) {
      name = "";
    }
    return name ? name + ", " + utc : utc;
  })();

  function pad(n) {
    return String(n).padStart(2, "0");
  }

  // A date and time in the operator's zone: "1 Dec 2026, 15:04:05".
  function when(iso) {
    if (!iso) return "–";
    const ms = typeof iso === "number" ? iso : Date.parse(iso);
    if (Number.isNaN(ms)) return String(iso);
    return new Date(ms).toLocaleString("en-GB", {
      day: "numeric",
      month: "short",
      year: "numeric",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit",
    });
  }

  // What a datetime-local input holds for an instant, in the operator's zone.
  function localInput(iso) {
    const d = new Date(Date.parse(iso));
    if (Number.isNaN(d.getTime())) return "";
    return (
      d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) +
      "T" + pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds())
    );
  }

  // A duration: "3.250 s" (to the millisecond, as the API counts it),
  // "4 min 05 s", "2 h 03 min".
  function duration(ms) {
    if (typeof ms !== "number") return "–";
    if (ms < 60000) return (ms / 1000).toFixed(3) + " s";
    const s = Math.round(ms / 1000);
    if (s < 3600) return Math.floor(s / 60) + " min " + pad(s % 60) + " s";
    return Math.floor(s / 3600) + " h " + pad(Math.floor((s % 3600) / 60)) + " min";
  }

  // Minor units per major unit of a currency (2 for EUR, 0 for JPY).
  function digitsOf(currency) {
    try {
      return new Intl.NumberFormat("en", { style: "currency", currency: currency }).resolvedOptions()
        .maximumFractionDigits;
    } catch (_) {
      return 2;
    }
  }

  // {"amount": 1999, "currency": "EUR"} as "€19.99"; null as "no price".
  function money(value) {
    if (!value || typeof value.amount !== "number") return "no price";
    const digits = digitsOf(value.currency);
    const major = value.amount / 10 ** digits;
    try {
      return new Intl.NumberFormat("en", { style: "currency", currency: value.currency }).format(major);
    } catch (_) {
      return major.toFixed(digits) + " " + value.currency;
    }
  }

  function cell(tag, text, className) {
    const el = document.createElement(tag);
    el.textContent = text;
    if (className) el.className = className;
    return el;
  }

  function pill(status) {
    const el = cell("span", words(status), "pill");
    el.dataset.tone = STATUS_TONE[status] || "info";
    return el;
  }

  // A question before an action: one misplaced click must not stop a sale
  // or move a queue. `prefix` names the box (`confirm`, `dlq-confirm`).
  function question(prefix) {
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

  // ------------------------------------------------------------ sign-in

  // `interactive`: the operator just signed in, so focus moves on to the
  // list (not on a page load with a kept session).
  function startSession(session, interactive) {
    state.session = session;
    S.saveSession("admin", session);
    render();
    loadDlq();
    watch(state.saleId);
    if (!session.admin) {
      say("This token has no seckill/admin scope: the API will refuse it.", "warn");
    }
    if (interactive) ui.salesRefresh.focus();
  }

  function signOut(message) {
    state.session = null;
    S.saveSession("admin", null);
    clearTimeout(state.timer);
    state.watch += 1;
    clearFigures("Not watching yet.");
    render();
    if (message) say(message, "error");
    (S.config.auth === "local" ? ui.user : ui.loginLink).focus();
  }

  S.wireSignIn(
    true,
    (session) => startSession(session, true),
    () => signOut(null)
  );

  // --------------------------------------------------------- the list

  async function loadSales() {
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
        row.querySelector(".sale-price").textContent = money(sale.price);
        row.querySelector(".sale-sold").textContent = S.number(sale.sold) + " of " + S.number(sale.totalStock);
        row.querySelector(".sale-available").textContent = S.number(sale.available);
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
          cell("td", money(sale.price), "num sale-price"),
          cell("td", S.number(sale.sold) + " of " + S.number(sale.totalStock), "num sale-sold"),
          cell("td", S.number(sale.available), "num sale-available"),
          cell("td", when(sale.startAt), "sale-start")
        );
        return row;
      })
    );
    markWatched();
  }

  function rowOf(cells, span) {
    const row = document.createElement("tr");
    if (span) cells[0].colSpan = span;
    row.append(...cells);
    return row;
  }

  function markWatched() {
    for (const row of ui.salesRows.querySelectorAll("tr[data-sale]")) {
      if (row.dataset.sale === state.saleId) row.setAttribute("aria-current", "true");
      else row.removeAttribute("aria-current");
    }
  }

  // A sale picked from the list or typed: the address names it, so a
  // reload or a shared link shows it.
  function choose(id) {
    ui.saleInput.value = id;
    history.replaceState(null, "", "?sale=" + encodeURIComponent(id));
    watch(id);
  }

  ui.salesRefresh.addEventListener("click", () => loadSales());

  ui.saleForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const id = ui.saleInput.value.trim();
    if (!S.validId(id)) {
      say("A sale id is 1 to 64 letters, digits, - or _.", "error");
      return;
    }
    choose(id);
  });

  // -------------------------------------------------------------- watch

  function watch(id) {
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
  function clearFigures(heading) {
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
    ui.actionResult.textContent = "";
    ui.control.hidden = true;
    drawFunnel();
  }

  // The settings, the refunds, the audit trail and the list: on a change
  // of sale, after an action, and every few polls.
  function loadSlow() {
    loadSale();
    loadRefunds();
    loadAudit();
    loadSales();
  }

  async function loadSale() {
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
    $("set-price").textContent = money(sale.price);
    $("set-stock").textContent = S.number(sale.totalStock) + " units";
    $("set-sold").textContent = S.number(sale.sold) + " · " + S.number(sale.available);
    $("set-start").textContent = when(sale.startAt) + " (" + ZONE + ")";
    $("set-end").textContent = when(sale.endAt) + " (" + ZONE + ")";
    $("set-limit").textContent = S.number(sale.perUserLimit);
    $("set-window").textContent = S.wait(sale.paymentWindowSeconds);
    $("set-shards").textContent = S.number(sale.shards) + " · " + (sale.powBits ? "proof of work, " + sale.powBits + " bits" : sale.gate ? "gated" : "no gate");
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
  function showDraw(sale) {
    const draw = sale && sale.admission ? sale.draw || null : null;
    ui.draw.hidden = !(sale && sale.admission);
    ui.draw.dataset.done = String(!!(draw && draw.done));
    const closes = windowEnd(sale);
    ui.drawTickets.textContent = draw ? S.number(draw.tickets) : "–";
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
    if (draw.done) return S.number(draw.decided) + " of " + S.number(total === null ? draw.decided : total) + " decided · done";
    if (Date.now() < closes) return "not yet: the window is open";
    if (total === null) return "0 decided · the order is not recorded yet";
    return S.number(draw.decided) + " of " + S.number(total) + " decided · drawing";
  }

  // A started sale whose draw is not over: its settings (and so the Draw
  // card) are read on every poll, not every few.
  function drawing() {
    const sale = state.sale;
    return !!(sale && sale.admission && !(sale.draw && sale.draw.done) && Date.now() >= Date.parse(sale.startAt));
  }

  function showSellOut(soldOutAt, ms) {
    $("set-soldout").textContent = soldOutAt ? when(soldOutAt) : "not sold out";
    $("set-ttso").textContent = typeof ms === "number" ? duration(ms) : "–";
  }

  // Either vocabulary (the admin routes' or /live's stock.status).
  function setControls(status) {
    ui.control.hidden = false;
    const ended = status === "ENDED";
    BUTTON.pause.disabled = status === "PAUSED" || ended;
    BUTTON.resume.disabled = status !== "PAUSED";
    BUTTON.end.disabled = ended;
  }

  // Every admin action on the sale, newest first: who, what, when.
  async function loadAudit() {
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
  async function loadRefunds() {
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
          cell("td", money(r.amount), "num"),
          cell("td", when(r.at))
        );
        return row;
      })
    );
  }

  async function poll() {
    clearTimeout(state.timer);
    if (!state.session) return;
    const watching = state.watch;
    const startedAt = Date.now();
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
          signOut("Your sign-in has expired. Sign in again.");
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
              S.wait(next / 1000) +
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
              S.wait(next / 1000) +
              ". The numbers below are from " +
              (state.previous ? S.time(state.previous.atMs) : "no poll yet") +
              ".",
            "warn"
          );
      }
    }
    state.timer = setTimeout(poll, next);
  }

  // ------------------------------------------------------------ control

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
          "; sold " + S.number(report.sold) + ", available " + S.number(report.available) + "."
        );
      },
    },
  };

  function prewarmWords(id, body) {
    switch (body && body.outcome) {
      case "LOADED":
        return "Sale " + id + " is loaded into Redis: " + S.number(body.stock) + " units.";
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

  // ------------------------------------------------------------- editor

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
    $("f-price").value = price ? (price.amount / 10 ** digitsOf(price.currency)).toFixed(digitsOf(price.currency)) : "";
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
    if (!S.validId(id)) {
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

  // ------------------------------------------------------------ lookups

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
          cell("td", S.number(o.quantity), "num"),
          cell("td", LABEL[o.status] || o.status, "o-status"),
          cell("td", money(o.amount), "num o-amount"),
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
    if (!S.validId(id)) {
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
    if (!S.validUserId(buyer)) {
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

  // ---------------------------------------------------------------- DLQ

  const dlqQuestion = question("dlq-confirm");

  function dlqSays(message, tone) {
    ui.dlqMessage.dataset.tone = tone;
    ui.dlqMessage.textContent = message;
  }

  async function loadDlq() {
    if (!state.session) return;
    const reply = await call("/admin/dlq");
    if (!state.session) return;
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
        cells[4].textContent = S.number(m.receiveCount);
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
          cell("td", S.number(m.quantity), "num"),
          cell("td", S.number(m.receiveCount), "num"),
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

  // ------------------------------------------------------------- render

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
    ui.stockRemaining.textContent = loaded ? S.number(stock.remaining) : redisDown ? "–" : "not loaded";
    ui.stockTotal.textContent = S.number(stock.total);
    ui.stockStatus.textContent = String(stock.status || "–").replace("_", " ");
    setControls(stock.status);
    ui.stockStatus.dataset.tone = STATUS_TONE[stock.status] || "info";
    ui.stockBar.max = Math.max(1, stock.total || 0);
    ui.stockBar.value = loaded ? Math.max(0, stock.remaining) : 0;

    const queue = live.queue || {};
    ui.queueVisible.textContent = S.number(queue.visible);
    ui.queueInflight.textContent = S.number(queue.inFlight);
    ui.queueDlq.textContent = S.number(queue.dlq);
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
        S.time(countedAt) +
        ", once for every open console: a big sale's count is refreshed less often."
      : "Not counted: the orders table cannot be read.";
    ui.ordersAt.dataset.countedAt = Number.isFinite(countedAt) ? String(countedAt) : "";
    ui.orders.replaceChildren(
      ...ordered(Object.keys(orders), STATUS_ORDER).map((status) => {
        const row = document.createElement("tr");
        row.dataset.status = status;
        row.append(cell("th", LABEL[status] || status), cell("td", S.number(orders[status]), "count"));
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
        row.append(name, cell("td", S.number(outcomes[outcome]), "count"), cell("td", rate, "rate"));
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
      "Sale " + live.saleId + " · updated " + S.time(live.atMs) + " · every " + POLL_MS / 1000 + " s";
  }

  function showReport(report) {
    if (!report) {
      ui.reportSummary.textContent =
        "No reconcile report yet: reconcile runs every 5 minutes, or press Reconcile above.";
      ui.violations.replaceChildren();
      return;
    }
    const repairs = (report.repairs || []).length;
    ui.reportSummary.textContent =
      "At " +
      S.time(Date.parse(report.at)) +
      " · Redis stock " +
      (report.redisStock === null || report.redisStock === undefined ? "not loaded" : S.number(report.redisStock)) +
      " · available " +
      S.number(report.available) +
      " · sold " +
      S.number(report.sold) +
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

  // ---------------------------------------------------------- the chart

  function svg(tag, attrs, text) {
    const el = document.createElementNS(SVG_NS, tag);
    Object.entries(attrs || {}).forEach(([k, v]) => el.setAttribute(k, v));
    if (text !== undefined) el.textContent = text;
    return el;
  }

  // The y axis: about four whole-number steps of 1, 2, 2.5 or 5 times a
  // power of ten, and a top that is a multiple of the step.
  function yAxis(max) {
    const raw = Math.max(1, max) / 4;
    const power = 10 ** Math.floor(Math.log10(raw));
    const step = [1, 2, 2.5, 5, 10]
      .map((m) => m * power)
      .filter(Number.isInteger)
      .find((m) => m >= raw);
    return { step: step, top: Math.max(step, Math.ceil(Math.max(1, max) / step) * step) };
  }

  const SERIES = [
    ["accepted", "Accepted"],
    ["soldOut", "Sold out"],
    ["refused", "Other refusals"],
  ];

  // The API's buckets as running totals: each point is the end of a
  // bucket, after a first point at 0 where the first bucket begins.
  function funnelPoints() {
    const buckets = state.funnel;
    if (!buckets.length) return [];
    const totals = { accepted: 0, soldOut: 0, refused: 0 };
    const points = [{ at: buckets[0].atMs, accepted: 0, soldOut: 0, refused: 0 }];
    for (const b of buckets) {
      const o = b.outcomes || {};
      for (const [code, n] of Object.entries(o)) {
        const count = Number(n) || 0;
        if (code === "ACCEPTED") totals.accepted += count;
        else if (code === "SOLD_OUT") totals.soldOut += count;
        // A lottery ticket is neither an order nor a refusal.
        else if (code !== "REPLAYED" && code !== "TICKET") totals.refused += count;
      }
      points.push(Object.assign({ at: b.atMs + BUCKET_MS }, totals));
    }
    return points;
  }

  function drawFunnel() {
    const points = funnelPoints();
    // Drawn at the container's own width in CSS pixels, not scaled: the
    // labels keep their size on a phone and on a wide screen.
    const W = Math.max(280, Math.round(ui.funnel.clientWidth));
    const H = W < 500 ? 200 : 260;
    const left = 46;
    const right = 12;
    const top = 10;
    const bottom = 26;
    const last = points[points.length - 1];
    const axis = yAxis(last ? Math.max(last.accepted, last.soldOut, last.refused) : 0);
    const yMax = axis.top;
    const t0 = points.length ? points[0].at : 0;
    const t1 = points.length ? last.at : 1;
    const x = (at) => (t1 > t0 ? left + ((at - t0) / (t1 - t0)) * (W - left - right) : W - right);
    const y = (v) => top + (1 - v / yMax) * (H - top - bottom);

    const summary = last
      ? "Funnel since " + S.time(t0) + ": " + SERIES.map(([key, label]) => label + " " + last[key]).join(", ")
      : "Funnel: no purchase answers yet";
    const chart = svg("svg", {
      viewBox: "0 0 " + W + " " + H,
      width: W,
      height: H,
      role: "img",
      "aria-label": summary,
      "data-from": points.length ? String(t0) : "",
      "data-buckets": String(Math.max(0, points.length - 1)),
    });
    chart.append(svg("title", {}, summary));

    for (let value = 0; value <= yMax; value += axis.step) {
      chart.append(svg("line", { class: "grid", x1: left, x2: W - right, y1: y(value), y2: y(value) }));
      chart.append(
        svg("text", { class: "axis-label", x: left - 6, y: y(value) + 4, "text-anchor": "end" }, S.number(value))
      );
    }
    if (points.length) {
      chart.append(svg("text", { class: "axis-label", x: left, y: H - 6 }, S.time(t0)));
      chart.append(svg("text", { class: "axis-label", x: W - right, y: H - 6, "text-anchor": "end" }, S.time(t1)));
    }
    SERIES.forEach(([key]) => {
      if (!points.length) return;
      const d = points.map((p, i) => (i ? "L" : "M") + x(p.at).toFixed(1) + " " + y(p[key]).toFixed(1)).join(" ");
      chart.append(svg("path", { class: "series " + key, d: d }));
    });
    ui.funnel.replaceChildren(chart);
  }

  function render() {
    const signedIn = !!state.session;
    ui.signin.hidden = signedIn;
    ui.localSignin.hidden = S.config.auth !== "local";
    ui.cognitoSignin.hidden = S.config.auth === "local";
    ui.loginLink.hidden = !S.config.loginUrl;
    ui.who.hidden = !signedIn;
    ui.whoName.textContent = signedIn ? state.session.userId : "";
    // What only an operator can use is shown only to one.
    for (const card of [ui.sales, ui.settings, $("lookup"), $("dlq"), $("refunds")]) card.hidden = !signedIn;
    if (!signedIn) {
      ui.editor.hidden = true;
      ui.control.hidden = true;
    }
  }

  // -------------------------------------------------------------- start

  ui.saleInput.value = state.saleId;
  drawFunnel();
  // A new width (a phone turned, a window resized): draw again to fit.
  let resized = 0;
  window.addEventListener("resize", () => {
    clearTimeout(resized);
    resized = setTimeout(drawFunnel, 100);
  });
  const returning = S.config.auth === "local" ? null : S.tokenFromFragment();
  const session = returning || S.savedSession("admin");
  render();
  if (session) startSession(session, false);
  else say("Sign in as an operator to run the sales.", "info");
  // The session lapses on its own clock: sign out when it does.
  setInterval(() => {
    if (state.session && state.session.expiresAtMs <= Date.now()) signOut("Your sign-in has expired. Sign in again.");
  }, 5000);
})();
