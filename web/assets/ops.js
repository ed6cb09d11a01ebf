// The operator dashboard: one sale, live. Polls GET
// /admin/sales/{saleId}/live (admin token) every 1.5 s and shows the stock
// in Redis, the queue, orders by status, purchases per second by outcome
// (from the difference of two polls' cumulative counts), the last reconcile
// report, and the funnel over time as an SVG chart drawn here (no library).
"use strict";

(function () {
  const S = window.Seckill;
  const $ = S.$;
  const SVG_NS = "http://www.w3.org/2000/svg";

  // Every second or two; one request at a time (the next is scheduled when
  // the last has answered), so a slow API is not piled on.
  const POLL_MS = 1500;
  // About six minutes of history at that pace.
  const HISTORY = 240;

  const ui = {
    who: $("who"),
    whoName: $("who-name"),
    signin: $("signin"),
    localSignin: $("local-signin"),
    user: $("user"),
    cognitoSignin: $("cognito-signin"),
    loginLink: $("login-link"),
    saleForm: $("sale-form"),
    saleInput: $("sale-id"),
    updated: $("updated"),
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
    outcomes: $("outcomes"),
    funnel: $("funnel"),
    reportSummary: $("report-summary"),
    violations: $("violations"),
    audit: $("audit"),
    control: $("control"),
    pauseButton: $("pause-button"),
    resumeButton: $("resume-button"),
    confirm: $("confirm"),
    confirmText: $("confirm-text"),
    confirmYes: $("confirm-yes"),
    confirmNo: $("confirm-no"),
  };

  const query = new URLSearchParams(location.search);
  const state = {
    session: null,
    saleId: S.validId(query.get("sale")) ? query.get("sale") : S.config.saleId,
    watch: 0, // bumped when the sale changes: late answers for the old one are dropped
    timer: 0,
    failures: 0,
    down: "", // the stores the last poll could not read, as said
    previous: null, // the last poll's answer, for per-second rates
    history: [], // {at, stock, accepted, written, paid}
    outcomeCodes: [], // the API's listed outcomes, in its order (outcomeCodes)
    reportAt: null, // the report already announced
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
    SOLD_OUT: "Sold out",
    LIMIT_EXCEEDED: "Limit reached",
    RATE_LIMITED: "Rate limited",
    SALE_NOT_STARTED: "Not started",
    SALE_ENDED: "Ended",
    SALE_PAUSED: "Paused",
    GATE_REQUIRED: "Gate required",
  };
  const STATUS_TONE = { LIVE: "ok", UPCOMING: "info", SOLD_OUT: "danger", PAUSED: "warn", ENDED: "danger" };

  const say = (message, tone) => S.announce(ui.status, message, tone);

  // ------------------------------------------------------------ sign-in

  // `interactive`: the operator just signed in, so focus moves on to the
  // sale (not on a page load with a kept session).
  function startSession(session, interactive) {
    state.session = session;
    S.saveSession("admin", session);
    render();
    watch(state.saleId);
    if (!session.admin) {
      say("This token has no seckill/admin scope: the API will refuse it.", "warn");
    }
    if (interactive) ui.saleInput.focus();
  }

  function signOut(message) {
    state.session = null;
    S.saveSession("admin", null);
    clearTimeout(state.timer);
    state.watch += 1;
    render();
    if (message) say(message, "error");
    (S.config.auth === "local" ? ui.user : ui.loginLink).focus();
  }

  S.wireSignIn(
    true,
    (session) => startSession(session, true),
    () => signOut(null)
  );

  // -------------------------------------------------------------- watch

  ui.saleForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const id = ui.saleInput.value.trim();
    if (!S.validId(id)) {
      say("A sale id is 1 to 64 letters, digits, - or _.", "error");
      return;
    }
    // The address names the sale, so a reload or a shared link shows it.
    history.replaceState(null, "", "?sale=" + encodeURIComponent(id));
    watch(id);
  });

  function watch(id) {
    state.saleId = id;
    state.watch += 1;
    state.previous = null;
    state.history = [];
    state.reportAt = null;
    state.failures = 0;
    clearTimeout(state.timer);
    if (state.session) {
      say("Watching sale " + id + ".", "info");
      poll();
      loadAudit();
    }
  }

  // Every admin action on the sale, newest first: who, what, when.
  async function loadAudit() {
    if (!state.session) return;
    const watching = state.watch;
    const reply = await S.api("/admin/sales/" + encodeURIComponent(state.saleId) + "/audit", {
      token: state.session.token,
    });
    if (watching !== state.watch || !reply.ok || !reply.body) return;
    const entries = (reply.body.entries || []).slice().reverse();
    ui.audit.textContent = "";
    if (!entries.length) {
      ui.audit.appendChild(cell("li", "No admin action yet.", "muted"));
      return;
    }
    for (const e of entries.slice(0, 20)) {
      ui.audit.appendChild(
        cell("li", S.time(Date.parse(e.at)) + " · " + (e.actor || "?") + " · " + e.action)
      );
    }
  }

  async function poll() {
    clearTimeout(state.timer);
    if (!state.session) return;
    const watching = state.watch;
    const startedAt = Date.now();
    const reply = await S.api("/admin/sales/" + encodeURIComponent(state.saleId) + "/live", {
      token: state.session.token,
    });
    if (watching !== state.watch) return;
    let next = Math.max(500, POLL_MS - (Date.now() - startedAt));
    if (reply.ok && reply.body) {
      if (state.failures > 0) say("Live again.", "ok");
      state.failures = 0;
      apply(reply.body);
    } else {
      switch (reply.code) {
        case "UNAUTHENTICATED":
          signOut("Your sign-in has expired. Sign in again.");
          return;
        case "FORBIDDEN":
          say("This token has no operator rights (the seckill/admin scope).", "error");
          return;
        case "SALE_NOT_FOUND":
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

  // Pause and resume ask first: one misplaced click must not stop a sale.
  let pending = null; // "pause" or "resume" while the question is open

  function ask(action) {
    pending = action;
    ui.confirmText.textContent =
      action === "pause"
        ? "Pause sale " + state.saleId + "? Buyers are told to retry shortly until you resume it."
        : "Resume sale " + state.saleId + "? Purchases are taken again at once.";
    ui.confirm.hidden = false;
    ui.confirmYes.focus();
  }

  function closeQuestion() {
    const was = pending;
    pending = null;
    ui.confirm.hidden = true;
    (was === "resume" ? ui.resumeButton : ui.pauseButton).focus();
  }

  async function act() {
    const action = pending;
    if (!action || !state.session) return;
    ui.confirmYes.disabled = true;
    const reply = await S.api(
      "/admin/sales/" + encodeURIComponent(state.saleId) + "/" + action,
      { method: "POST", token: state.session.token }
    );
    ui.confirmYes.disabled = false;
    closeQuestion();
    if (reply.ok) {
      loadAudit();
      say(
        action === "pause"
          ? "Sale " + state.saleId + " is paused: purchases get “paused” from now on."
          : "Sale " + state.saleId + " is live again.",
        "ok"
      );
      poll();
    } else if (reply.code === "SALE_ENDED") {
      say("Sale " + state.saleId + " has ended: there is nothing to " + action + ".", "error");
    } else if (reply.code === "SALE_NOT_FOUND") {
      say("There is no sale “" + state.saleId + "”.", "error");
    } else {
      say(
        "Could not " + action + " the sale (" + (reply.code || "HTTP " + reply.status) + "). Nothing changed; try again.",
        "error"
      );
    }
  }

  ui.pauseButton.addEventListener("click", () => ask("pause"));
  ui.resumeButton.addEventListener("click", () => ask("resume"));
  ui.confirmYes.addEventListener("click", act);
  ui.confirmNo.addEventListener("click", closeQuestion);
  ui.confirm.addEventListener("keydown", (event) => {
    if (event.key === "Escape") closeQuestion();
  });

  // ------------------------------------------------------------- render

  const sum = (counts) => Object.values(counts || {}).reduce((a, n) => a + (Number(n) || 0), 0);

  function ordered(keys, order) {
    const known = order.filter((k) => keys.indexOf(k) >= 0);
    const extra = keys.filter((k) => order.indexOf(k) < 0).sort();
    return known.concat(extra);
  }

  function cell(tag, text, className) {
    const el = document.createElement(tag);
    el.textContent = text;
    if (className) el.className = className;
    return el;
  }

  function apply(live) {
    const previous = state.previous;
    state.previous = live;
    // A store the API could not read leaves its figures null: shown as
    // "–" (and as a gap in the chart) while the rest stays live.
    const down = live.unavailable || [];
    const redisDown = down.indexOf("redis") >= 0;
    if (down.join() !== state.down) {
      state.down = down.join();
      if (down.length) {
        say(
          "The API cannot read " +
            down.map((store) => STORE_NAME[store] || store).join(", ") +
            " right now: those figures show – until it can; the rest is live.",
          "warn"
        );
      } else {
        say("Every store answers again.", "ok");
      }
    }
    const stock = live.stock || {};
    const loaded = typeof stock.remaining === "number";
    ui.stockRemaining.textContent = loaded ? S.number(stock.remaining) : redisDown ? "–" : "not loaded";
    ui.stockTotal.textContent = S.number(stock.total);
    ui.stockStatus.textContent = String(stock.status || "–").replace("_", " ");
    ui.control.hidden = false;
    ui.pauseButton.disabled = stock.status === "PAUSED" || stock.status === "ENDED";
    ui.resumeButton.disabled = stock.status !== "PAUSED";
    ui.stockStatus.dataset.tone = STATUS_TONE[stock.status] || "info";
    ui.stockBar.max = Math.max(1, stock.total || 0);
    ui.stockBar.value = loaded ? Math.max(0, stock.remaining) : 0;

    const queue = live.queue || {};
    ui.queueVisible.textContent = S.number(queue.visible);
    ui.queueInflight.textContent = S.number(queue.inFlight);
    ui.queueDlq.textContent = S.number(queue.dlq);
    ui.queueDlq.dataset.tone = queue.dlq > 0 ? "danger" : "";

    const unknown = (keys) => Object.fromEntries(keys.map((k) => [k, null]));
    const orders = live.orders || unknown(STATUS_ORDER.slice(1));
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
    // answer does not bend the rate.
    // The outcome rows: the API's list (kept from an earlier answer that had
    // it), then any other code it counted, sorted.
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

    state.history.push({
      at: live.atMs,
      stock: loaded ? stock.remaining : null,
      accepted: live.outcomes ? outcomes.ACCEPTED || 0 : null,
      written: live.orders ? sum(orders) : null,
      paid: live.orders ? orders.PAID || 0 : null,
      total: stock.total || 0,
    });
    if (state.history.length > HISTORY) state.history.shift();
    drawFunnel();
    showReport(live.lastReport);
    ui.updated.textContent =
      "Sale " + live.saleId + " · updated " + S.time(live.atMs) + " · every " + POLL_MS / 1000 + " s";
  }

  function showReport(report) {
    if (!report) {
      ui.reportSummary.textContent =
        "No reconcile report yet: reconcile runs every 5 minutes, or on POST /admin/sales/{saleId}/reconcile.";
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
    ["stock", "Stock left"],
    ["accepted", "Accepted"],
    ["written", "Orders written"],
    ["paid", "Paid"],
  ];

  function drawFunnel() {
    const points = state.history;
    // Drawn at the container's own width in CSS pixels, not scaled: the
    // labels keep their size on a phone and on a wide screen.
    const W = Math.max(280, Math.round(ui.funnel.clientWidth));
    const H = W < 500 ? 200 : 260;
    const left = 46;
    const right = 12;
    const top = 10;
    const bottom = 26;
    const last = points[points.length - 1];
    const axis = yAxis(
      Math.max(last ? last.total : 0, ...points.map((p) => Math.max(p.stock || 0, p.accepted, p.written, p.paid)))
    );
    const yMax = axis.top;
    const t0 = points.length ? points[0].at : 0;
    const t1 = points.length ? last.at : 1;
    const x = (at) => (t1 > t0 ? left + ((at - t0) / (t1 - t0)) * (W - left - right) : W - right);
    const y = (v) => top + (1 - v / yMax) * (H - top - bottom);

    const summary = last
      ? "Funnel: " + SERIES.map(([key, label]) => label + " " + (last[key] === null ? "not loaded" : last[key])).join(", ")
      : "Funnel: no data yet";
    const chart = svg("svg", {
      viewBox: "0 0 " + W + " " + H,
      width: W,
      height: H,
      role: "img",
      "aria-label": summary,
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
      // A gap where the value is unknown (stock not loaded): a new subpath.
      let d = "";
      let pen = "M";
      points.forEach((p) => {
        if (p[key] === null) {
          pen = "M";
          return;
        }
        d += pen + x(p.at).toFixed(1) + " " + y(p[key]).toFixed(1) + " ";
        pen = "L";
      });
      if (d) chart.append(svg("path", { class: "series " + key, d: d.trim() }));
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
  else say("Sign in as an operator to watch the sale.", "info");
  // The session lapses on its own clock: sign out when it does.
  setInterval(() => {
    if (state.session && state.session.expiresAtMs <= Date.now()) signOut("Your sign-in has expired. Sign in again.");
  }, 5000);
})();
