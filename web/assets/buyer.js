// The buyer page: one sale, its countdown and stock, sign-in, the gate's
// question, one purchase, its confirmation and its payment. Everything goes
// through the public HTTP API, so the page works the same on the local stack
// and on a deployed one.
"use strict";

(function () {
  const S = window.Seckill;
  const $ = S.$;

  const query = new URLSearchParams(location.search);
  // ?sale=<id> picks another sale than the configured one (links to a sale).
  const saleId = S.validId(query.get("sale")) ? query.get("sale") : S.config.saleId;
  const salePath = "/sales/" + encodeURIComponent(saleId);
  // ?order=<id>: the LIMIT_EXCEEDED message links to the buyer's order.
  const linkedOrder = S.validId(query.get("order")) ? query.get("order") : null;

  const ui = {
    saleName: $("sale-name"),
    saleStatus: $("sale-status"),
    countdownLabel: $("countdown-label"),
    countdown: $("countdown"),
    remaining: $("remaining"),
    limit: $("limit"),
    ends: $("ends"),
    stockBar: $("stock-bar"),
    who: $("who"),
    whoName: $("who-name"),
    signin: $("signin"),
    localSignin: $("local-signin"),
    user: $("user"),
    cognitoSignin: $("cognito-signin"),
    loginLink: $("login-link"),
    gate: $("gate"),
    gateForm: $("gate-form"),
    question: $("question"),
    answer: $("answer"),
    buySection: $("buy"),
    buyForm: $("buy-form"),
    buyButton: $("buy-button"),
    buyHint: $("buy-hint"),
    status: $("status"),
    order: $("order"),
    orderState: $("order-state"),
    orderId: $("order-id"),
    payWindowBox: $("pay-window-box"),
    payWindow: $("pay-window"),
    payButton: $("pay-button"),
  };

  const state = {
    sale: null, // the last GET /sales/{id} answer
    startMs: 0,
    endMs: 0,
    saleMissing: false,
    skewMs: 0, // the server's clock minus ours
    session: null, // {token, userId, expiresAtMs}
    gate: "unknown", // unknown | none | needed | passed
    gateBusy: false,
    challengeId: null, // the id of the question shown
    gateRetryAtMs: 0,
    // Pages open since long before the start would all ask for the gate's
    // question at the same second; each waits a little of its own.
    gateJitterMs: Math.random() * 10000,
    pass: null, // the gate's {token, expiresAtMs}
    inFlight: false, // a purchase request is out
    retryAtMs: 0, // Retry-After: no purchase before this (server time)
    refused: null, // a refusal that ends buying here: SOLD_OUT, SALE_ENDED, ...
    key: null, // Idempotency-Key of the purchase being attempted
    order: null, // {orderId, status, expiresAt}
    paying: false,
    opened: false, // the countdown reached zero while this page was open
    wasUpcoming: false, // this page saw the sale before its start
    failures: 0, // sale polls failed in a row
  };

  // `closed`: the pay window's end was already acted on.
  const timers = { sale: 0, order: 0, closed: false };
  const now = () => Date.now() + state.skewMs;

  function say(message, tone, links, code) {
    ui.status.dataset.code = code || "";
    S.announce(ui.status, message, tone, links);
  }

  // --------------------------------------------------------------- sale

  // Gently: every 3 s (longer when the API's Cache-Control says so, or the
  // start is far), with jitter so thousands of open pages do not ask in
  // step, and not at all while the tab is hidden.
  async function pollSale() {
    clearTimeout(timers.sale);
    if (document.hidden) {
      timers.sale = setTimeout(pollSale, 15000);
      return;
    }
    const reply = await S.api(salePath);
    let next = 3000;
    if (reply.ok && reply.body) {
      const before = state.sale ? state.sale.status : null;
      state.sale = reply.body;
      state.saleMissing = false;
      state.startMs = Date.parse(reply.body.startAt);
      state.endMs = Date.parse(reply.body.endAt);
      state.failures = 0;
      learnSkew(reply);
      const maxAge = /max-age=(\d+)/.exec(reply.headers.get("Cache-Control") || "");
      if (maxAge) next = Math.max(next, Number(maxAge[1]) * 1000);
      if (state.startMs - now() > 120000) next = Math.max(next, 10000);
      if (reply.body.status === "ENDED") next = 60000;
      if (reply.body.status !== before) saleChanged(before, reply.body.status);
    } else if (reply.status === 404 || reply.code === "INVALID_REQUEST") {
      state.saleMissing = true;
      next = 30000;
      say("There is no sale called “" + saleId + "”. Check the link.", "error", null, "SALE_NOT_FOUND");
    } else {
      state.failures = (state.failures || 0) + 1;
      next = Math.min(30000, 3000 * 2 ** state.failures);
      if (state.failures === 2) {
        say("Connection trouble: the sale's numbers may be out of date. Still trying…", "warn", null, "NETWORK");
      }
    }
    render();
    timers.sale = setTimeout(pollSale, next * (0.8 + Math.random() * 0.4));
  }

  // Tell the buyer when the sale itself changes under them, before they
  // press anything (once per change; not over their own order's news).
  function saleChanged(before, status) {
    if (state.order || state.refused) return;
    if (status === "SOLD_OUT") {
      say("Sold out: every unit has been taken.", "error", null, "SOLD_OUT");
    } else if (status === "ENDED" && before) {
      say("The sale has ended.", "error", null, "SALE_ENDED");
    } else if (status === "PAUSED") {
      say("The sale is paused for a moment; buying resumes when it is back.", "warn", null, "SALE_PAUSED");
    } else if (status === "LIVE" && (before === "SOLD_OUT" || before === "PAUSED")) {
      say("The sale is on again: units are available.", "ok", null, "LIVE");
    }
  }

  // A buyer's clock can be minutes off; the countdown must follow the
  // server's. `Date` has one-second resolution, so only a clear difference
  // (over 2 s) is corrected.
  function learnSkew(reply) {
    const date = Date.parse(reply.headers.get("Date") || "");
    if (Number.isNaN(date) || !reply.sentAt) return;
    const skew = date + 500 - (reply.sentAt + reply.receivedAt) / 2;
    state.skewMs = Math.abs(skew) > 2000 ? skew : 0;
  }

  // ------------------------------------------------------------ sign-in

  function startSession(session) {
    state.session = session;
    S.saveSession("buyer", session);
    restoreOrder();
    render();
    // Straight on to the buy section: the next Tab reaches the button.
    ui.buySection.focus();
  }

  function signOut(message) {
    state.session = null;
    S.saveSession("buyer", null);
    Object.assign(state, {
      gate: "unknown",
      pass: null,
      refused: null,
      key: null,
      order: null,
      paying: false,
      retryAtMs: 0,
    });
    clearTimeout(timers.order);
    render();
    if (message) say(message, "error", null, "UNAUTHENTICATED");
    (S.config.auth === "local" ? ui.user : ui.loginLink).focus();
  }

  S.wireSignIn(
    false,
    (session) => {
      startSession(session);
      say("Signed in as " + session.userId + ".", "ok");
    },
    () => signOut(null)
  );

  // --------------------------------------------------------------- gate

  // A gated sale issues its question from 30 s before the start. GET
  // /sales does not say whether a sale is gated: the first question asked
  // tells (400 means no gate), and a 403 GATE_REQUIRED asks again.
  async function fetchQuestion() {
    if (state.gateBusy || !state.session) return;
    state.gateBusy = true;
    const reply = await S.api(salePath + "/challenge", { token: state.session.token });
    state.gateBusy = false;
    if (reply.ok && reply.body) {
      const first = state.gate !== "needed";
      state.gate = "needed";
      ui.question.textContent = reply.body.question;
      // Sent back with the answer: it is checked against this question only.
      state.challengeId = reply.body.challengeId || null;
      if (first) say("This sale asks one question before you buy: answer it above the buy button.", "info");
    } else if (reply.code === "INVALID_REQUEST" || reply.code === "SALE_ENDED") {
      state.gate = "none";
    } else if (reply.code === "UNAUTHENTICATED") {
      signOut("Your sign-in has expired. Sign in again.");
    } else {
      // Too early, or a network error: ask again shortly. Buying is not
      // held up by it: a purchase without a pass gets 403 and asks too.
      state.gateRetryAtMs = now() + (reply.retryAfter || 5) * 1000;
    }
    render();
  }

  ui.gateForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const answer = Number(ui.answer.value.trim());
    if (!Number.isInteger(answer) || !state.session) {
      say("Answer with a whole number.", "error");
      ui.answer.focus();
      return;
    }
    const reply = await S.api(salePath + "/challenge", {
      method: "POST",
      token: state.session.token,
      body: state.challengeId ? { answer: answer, challengeId: state.challengeId } : { answer: answer },
    });
    if (reply.ok && reply.body) {
      state.pass = { token: reply.body.token, expiresAtMs: Date.parse(reply.body.expiresAt) };
      state.gate = "passed";
      ui.answer.value = "";
      render();
      say("Right. The pass holds for a minute: press Buy now.", "ok");
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

  // ----------------------------------------------------------- purchase

  // Why the buy button is off right now, or null when it is on.
  function whyNotBuy(t) {
    if (!state.sale) return state.saleMissing ? "There is no such sale." : "Loading the sale…";
    if (!state.session) return "Sign in first.";
    if (state.inFlight) return "Sending your order…";
    if (state.order && !reorderable(state.order.status)) return "Your order is below.";
    if (state.refused) return refusalHint(state.refused);
    if (t < state.startMs) return "The button turns on by itself when the sale opens.";
    if (t >= state.endMs) return "The sale has ended.";
    if (state.sale.status === "SOLD_OUT") return "Sold out.";
    if (state.gate === "needed") return "Answer the question above first.";
    if (t < state.retryAtMs) return "You can try again in " + S.wait((state.retryAtMs - t) / 1000) + ".";
    return null;
  }

  const reorderable = (status) => status === "EXPIRED" || status === "REJECTED";

  function refusalHint(code) {
    if (code === "SOLD_OUT") return "Sold out.";
    if (code === "SALE_ENDED") return "The sale has ended.";
    if (code === "LIMIT_EXCEEDED") return "You hold as many as this sale allows.";
    if (code === "SALE_NOT_FOUND") return "There is no such sale.";
    return "Buying is closed for you on this page.";
  }

  ui.buyForm.addEventListener("submit", (event) => {
    event.preventDefault();
    buy();
  });

  async function buy() {
    // The first filter against double clicks: a second click or Enter finds
    // the flag set and the button already disabled, before any await.
    if (whyNotBuy(now()) !== null) return;
    state.inFlight = true;
    render();
    if (!state.key) state.key = S.randomKey();
    const headers = { "Idempotency-Key": state.key };
    if (state.pass) headers["X-Sale-Token"] = state.pass.token;
    say("Sending your order…", "info", null, "SENDING");
    const reply = await S.api(salePath + "/purchase", {
      method: "POST",
      token: state.session.token,
      body: { quantity: 1 },
      headers: headers,
    });
    state.inFlight = false;
    if (reply.status === 202 && reply.body && reply.body.orderId) {
      // One unit fewer than the last poll said: shown now, corrected by
      // the next poll (no extra request at the busiest moment).
      if (state.sale && state.sale.remaining > 0) state.sale.remaining -= 1;
      // The key and the pass are spent on this order.
      state.key = null;
      state.pass = null;
      if (state.gate === "passed") state.gate = "unknown";
      say("Order received: confirming it…", "ok", null, "ACCEPTED");
      trackOrder({ orderId: reply.body.orderId, status: reply.body.status || "QUEUED", expiresAt: null }, 2000);
    } else {
      purchaseRefused(reply);
    }
    render();
  }

  // A human message for every refusal of the purchase route.
  function messageFor(reply) {
    const wait = reply.retryAfter;
    const limit = state.sale ? state.sale.perUserLimit : null;
    switch (reply.code) {
      case "SOLD_OUT":
        return { text: "Sold out: every unit has been taken. Nothing was charged.", tone: "error" };
      case "LIMIT_EXCEEDED":
        return {
          text:
            "You already hold as many as this sale allows" + (limit ? " (" + limit + " per buyer)." : "."),
          tone: "warn",
        };
      case "SALE_NOT_STARTED":
        return {
          text:
            "The sale has not started yet" +
            (wait ? ": it opens in " + S.wait(wait) : "") +
            ". The button turns on by itself.",
          tone: "warn",
        };
      case "SALE_ENDED":
        return { text: "The sale has ended.", tone: "error" };
      case "RATE_LIMITED":
        return {
          text: "Too many tries in a short time. You can try again in " + S.wait(wait || 1) + ".",
          tone: "warn",
        };
      case "SALE_PAUSED":
        return {
          text:
            "The sale is paused for a moment. Try again in " +
            S.wait(wait || 2) +
            ": a retry cannot buy twice.",
          tone: "warn",
        };
      case "GATE_REQUIRED":
        return {
          text: "This sale asks one question before you buy: answer it above, then press Buy now again.",
          tone: "warn",
        };
      case "UNAUTHENTICATED":
        return { text: "Your sign-in has expired. Sign in again.", tone: "error" };
      case "SALE_NOT_FOUND":
        return { text: "There is no sale called “" + saleId + "”.", tone: "error" };
      case "INVALID_REQUEST":
        return {
          text: "The shop refused the request: " + ((reply.body && reply.body.message) || "invalid request") + ".",
          tone: "error",
        };
      case "NETWORK":
        return {
          text:
            "Network error: we could not reach the shop, so we do not know whether the order went through. " +
            "Press Buy now again: the retry carries the same key and cannot buy twice.",
          tone: "error",
        };
      default:
        return {
          text:
            "The shop had a problem (HTTP " +
            reply.status +
            "). Press Buy now again in a moment: a retry cannot buy twice.",
          tone: "error",
        };
    }
  }

  function purchaseRefused(reply) {
    const message = messageFor(reply);
    let links = null;
    switch (reply.code) {
      case "SOLD_OUT":
        // The API just said so: show it now, not at the next poll.
        if (state.sale) Object.assign(state.sale, { remaining: 0, status: "SOLD_OUT" });
        state.refused = reply.code;
        state.key = null;
        break;
      case "SALE_ENDED":
      case "SALE_NOT_FOUND":
        state.refused = reply.code;
        state.key = null;
        break;
      case "LIMIT_EXCEEDED": {
        state.refused = reply.code;
        state.key = null;
        const ids = (reply.body && reply.body.orderIds) || [];
        if (ids.length && S.validId(ids[0])) {
          links = [["See your order", "?sale=" + encodeURIComponent(saleId) + "&order=" + encodeURIComponent(ids[0])]];
        }
        break;
      }
      case "SALE_NOT_STARTED":
        state.retryAtMs = now() + (reply.retryAfter || 1) * 1000;
        pollSale();
        break;
      case "RATE_LIMITED":
        state.retryAtMs = now() + (reply.retryAfter || 1) * 1000;
        break;
      case "SALE_PAUSED":
        state.retryAtMs = now() + (reply.retryAfter || 2) * 1000;
        break;
      case "GATE_REQUIRED":
        state.pass = null;
        state.gate = "needed";
        fetchQuestion();
        break;
      case "UNAUTHENTICATED":
        signOut(message.text);
        return;
      case "INVALID_REQUEST":
        state.key = null;
        break;
      case "NETWORK":
        // Unknown outcome: keep the key, so the retry is the same purchase.
        break;
      default:
        state.retryAtMs = now() + 2000;
    }
    say(message.text, message.tone, links, reply.code);
  }

  // -------------------------------------------------------------- order

  // The user id may hold any character, "." included; the key still names
  // one (sale, user) because a sale id cannot hold a ".".
  const orderKey = () => "order." + saleId + "." + (state.session ? state.session.userId : "");

  // An order kept from before a reload, or the one a link names: its
  // status is asked for at once.
  // Without either (a purchase whose answer never arrived, another
  // browser), the API lists the buyer's orders of this sale, QUEUED ones
  // included: the newest one that still counts is shown.
  function restoreOrder() {
    const saved = S.store.get(orderKey());
    if (linkedOrder) trackOrder({ orderId: linkedOrder, status: "QUEUED", expiresAt: null }, 0);
    else if (saved && S.validId(saved.orderId)) trackOrder(saved, 0);
    else findOrders();
  }

  async function findOrders() {
    if (!state.session) return;
    const session = state.session;
    const reply = await S.api("/sales/" + encodeURIComponent(saleId) + "/orders", { token: session.token });
    if (state.session !== session || state.order || !reply.ok || !reply.body) return;
    const orders = reply.body.orders || [];
    const current = orders.find((o) => !reorderable(o.status)) || orders[0];
    if (current && S.validId(current.orderId)) {
      trackOrder({ orderId: current.orderId, status: current.status, expiresAt: current.expiresAt || null }, 0);
    }
  }

  // `delay`: a fresh order is not written yet; the first look is in 2 s.
  function trackOrder(order, delay) {
    state.order = order;
    timers.closed = false;
    S.store.set(orderKey(), order);
    render();
    clearTimeout(timers.order);
    timers.order = setTimeout(pollOrder, delay);
  }

  // Every 2 s while the order is being written (QUEUED); then the page
  // counts the payment window down itself, and checks again when it closes.
  // Every answer about the order takes a number; a look that comes back
  // after a later answer (a payment's) is stale and changes nothing.
  let orderAnswers = 0;

  async function pollOrder() {
    clearTimeout(timers.order);
    if (!state.order || !state.session) return;
    const asked = ++orderAnswers;
    const reply = await S.api("/orders/" + encodeURIComponent(state.order.orderId), {
      token: state.session.token,
    });
    if (!state.order || asked !== orderAnswers) return;
    if (reply.ok && reply.body) {
      updateOrder(reply.body);
    } else if (reply.code === "UNAUTHENTICATED") {
      signOut("Your sign-in has expired. Sign in again to see your order.");
      return;
    } else if (reply.code === "ORDER_NOT_FOUND") {
      say("We cannot find order " + state.order.orderId + " under your sign-in.", "error", null, reply.code);
      state.order = null;
      S.store.set(orderKey(), null);
      render();
      return;
    } else {
      say("Connection trouble: still checking your order…", "warn", null, reply.code);
    }
    const status = state.order && state.order.status;
    if (status === "QUEUED" || !reply.ok) timers.order = setTimeout(pollOrder, 2000);
    else if (status === "PENDING_PAYMENT" && windowLeft() <= 0) timers.order = setTimeout(pollOrder, 10000);
  }

  function updateOrder(body) {
    const before = state.order ? state.order.status : null;
    state.order = { orderId: body.orderId, status: body.status, expiresAt: body.expiresAt || null };
    S.store.set(orderKey(), state.order);
    if (body.status !== before) {
      const focusWasIdle = document.activeElement === document.body || document.activeElement === ui.buyButton;
      render();
      switch (body.status) {
        case "PENDING_PAYMENT":
          say(
            "Your order is confirmed. Pay within " + S.wait(windowLeft() / 1000) + " to keep it.",
            "ok",
            null,
            body.status
          );
          if (focusWasIdle) ui.payButton.focus();
          break;
        case "PAID":
          say("Paid. Thank you: the unit is yours.", "ok", null, body.status);
          break;
        case "EXPIRED":
          say("The payment window closed before payment: the unit went back on sale.", "warn", null, body.status);
          break;
        case "REJECTED":
          say(
            "We could not confirm your order: the stock ran out as it was written. Nothing was charged.",
            "error",
            null,
            body.status
          );
          break;
      }
    }
    render();
  }

  const windowLeft = () =>
    state.order && state.order.expiresAt ? Date.parse(state.order.expiresAt) - now() : Infinity;

  ui.payButton.addEventListener("click", pay);

  async function pay() {
    if (state.paying || !state.order || state.order.status !== "PENDING_PAYMENT" || windowLeft() <= 0) return;
    state.paying = true;
    render();
    say("Paying…", "info", null, "PAYING");
    const reply = await S.api("/orders/" + encodeURIComponent(state.order.orderId) + "/pay", {
      method: "POST",
      token: state.session.token,
    });
    orderAnswers += 1;
    state.paying = false;
    if (reply.ok && reply.body) {
      updateOrder(reply.body);
      return;
    }
    switch (reply.code) {
      case "ORDER_EXPIRED":
        state.order.status = "EXPIRED";
        say("The payment window closed before payment: the unit went back on sale.", "warn", null, reply.code);
        break;
      case "ORDER_NOT_PAYABLE":
        say(
          "This order cannot be paid: " + ((reply.body && reply.body.message) || "it is not waiting for payment") + ".",
          "error",
          null,
          reply.code
        );
        pollOrder();
        break;
      case "ORDER_NOT_FOUND":
        say("We cannot find this order under your sign-in.", "error", null, reply.code);
        break;
      case "UNAUTHENTICATED":
        signOut("Your sign-in has expired. Sign in again, then pay.");
        return;
      default:
        say(
          (reply.code === "NETWORK" ? "Network error" : "The shop had a problem (HTTP " + reply.status + ")") +
            " while paying. Press Pay now again: paying twice charges once.",
          "error",
          null,
          reply.code
        );
    }
    render();
  }

  // ------------------------------------------------------------- render

  const ORDER_TEXT = {
    QUEUED: "Confirming your order…",
    PENDING_PAYMENT: "Confirmed: waiting for your payment",
    PAID: "Paid",
    EXPIRED: "Expired: not paid in time",
    REJECTED: "Not confirmed: sold out as it was written",
  };

  const STATUS_TONE = { LIVE: "ok", UPCOMING: "info", SOLD_OUT: "danger", PAUSED: "warn", ENDED: "danger" };

  function render() {
    const t = now();
    const sale = state.sale;
    if (sale) {
      ui.saleName.textContent = sale.name || sale.saleId;
      document.title = (sale.name || sale.saleId) + " · Seckill";
      const status = sale.status === "UPCOMING" && t >= state.startMs && t < state.endMs ? "LIVE" : sale.status;
      ui.saleStatus.textContent = status.replace("_", " ");
      ui.saleStatus.dataset.tone = STATUS_TONE[status] || "info";
      ui.remaining.textContent = S.number(sale.remaining) + " of " + S.number(sale.totalStock);
      ui.limit.textContent = S.number(sale.perUserLimit);
      // "18:30" today, "30 Nov 18:30" another day: short enough for a phone.
      const ends = new Date(state.endMs);
      const hm = ends.toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit" });
      ui.ends.textContent =
        ends.toDateString() === new Date().toDateString()
          ? hm
          : ends.toLocaleDateString("en-GB", { day: "numeric", month: "short" }) + " " + hm;
      ui.stockBar.max = Math.max(1, sale.totalStock);
      ui.stockBar.value = Math.max(0, sale.remaining);
      if (t < state.startMs) {
        ui.countdownLabel.textContent = "Opens in";
        ui.countdown.textContent = S.clock(state.startMs - t);
      } else if (t < state.endMs) {
        ui.countdownLabel.textContent = "Open: closes in";
        ui.countdown.textContent = S.clock(state.endMs - t);
      } else {
        ui.countdownLabel.textContent = "Closed";
        ui.countdown.textContent = "00:00";
      }
    } else if (state.saleMissing) {
      ui.saleName.textContent = "No such sale";
    }

    const signedIn = !!state.session;
    ui.signin.hidden = signedIn;
    ui.localSignin.hidden = S.config.auth !== "local";
    ui.cognitoSignin.hidden = S.config.auth === "local";
    ui.loginLink.hidden = !S.config.loginUrl;
    ui.who.hidden = !signedIn;
    ui.whoName.textContent = signedIn ? state.session.userId : "";
    ui.gate.hidden = !(signedIn && state.gate === "needed");

    const why = whyNotBuy(t);
    ui.buyButton.disabled = why !== null;
    ui.buyButton.textContent = state.inFlight ? "Sending…" : "Buy now";
    ui.buyHint.textContent = why || "One press is enough: the button turns off while we ask.";

    const order = state.order;
    ui.order.hidden = !order;
    if (order) {
      ui.order.dataset.status = order.status;
      ui.orderState.textContent = ORDER_TEXT[order.status] || order.status;
      ui.orderId.textContent = order.orderId;
      const pending = order.status === "PENDING_PAYMENT";
      const left = windowLeft();
      ui.payWindowBox.hidden = !pending;
      ui.payWindow.textContent = left <= 0 ? "closed" : left === Infinity ? "–" : S.clock(left);
      ui.payButton.hidden = !pending;
      ui.payButton.disabled = state.paying || left <= 0;
      ui.payButton.textContent = state.paying ? "Paying…" : "Pay now";
    }
  }

  // Four times a second: the countdowns, and what depends on the time.
  function tick() {
    const t = now();
    if (state.session && state.session.expiresAtMs <= Date.now()) {
      signOut("Your sign-in has expired. Sign in again.");
    }
    if (state.sale && !state.opened && t >= state.startMs) {
      state.opened = true;
      if (state.wasUpcoming) {
        if (state.session) say("The sale is open: you can buy now.", "ok", null, "OPEN");
        // Fresh numbers, a little later for each page: not every open page
        // at the same instant.
        clearTimeout(timers.sale);
        timers.sale = setTimeout(pollSale, Math.random() * 2000);
      }
    }
    if (state.sale && t < state.startMs) state.wasUpcoming = true;
    if (state.pass && t >= state.pass.expiresAtMs - 2000) {
      state.pass = null;
      state.gate = "unknown";
    }
    const gateDue =
      state.startMs - t <= 30000 - state.gateJitterMs && t < state.endMs && t >= state.gateRetryAtMs;
    if (state.session && state.sale && state.gate === "unknown" && gateDue) fetchQuestion();
    if (state.order && state.order.status === "PENDING_PAYMENT" && windowLeft() <= 0 && !timers.closed) {
      // The window just closed: ask for the final state (the release runs
      // every minute, so EXPIRED may take a while to show).
      timers.closed = true;
      pollOrder();
    }
    render();
  }

  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) pollSale();
  });

  // -------------------------------------------------------------- start

  const returning = S.config.auth === "local" ? null : S.tokenFromFragment();
  const session = returning || S.savedSession("buyer");
  if (session) {
    state.session = session;
    S.saveSession("buyer", session);
    restoreOrder();
  }
  render();
  pollSale();
  setInterval(tick, 250);
})();
