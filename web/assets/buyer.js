// The buyer page: one sale, its status and stock, sign-in, the gate's
// question, a purchase of as many units as the buyer may still hold (or,
// in a sale's lottery window, a ticket for the draw, then its result), its
// confirmation, its payment and receipt, and the buyer's other orders of
// the sale. Everything goes through the public HTTP API, so the page works
// the same on the local stack and on a deployed one.
"use strict";

(function () {
  const S = window.Seckill;
  const $ = S.$;

  const query = new URLSearchParams(location.search);
  // ?sale=<id> picks another sale than the configured one (links to a
  // sale). A link whose id is no sale id names no sale: the page says so
  // and never falls back to the configured sale, so a broken link cannot
  // sell the wrong item.
  const askedSale = query.get("sale");
  const saleId = askedSale === null ? S.config.saleId : askedSale;
  const salePath = "/sales/" + encodeURIComponent(saleId);
  // ?order=<id>: the LIMIT_EXCEEDED message links to the buyer's order.
  const linkedOrder = S.validId(query.get("order")) ? query.get("order") : null;

  const ui = {
    skip: $("skip"),
    saleName: $("sale-name"),
    pillLine: $("sale-pill-line"),
    saleStatus: $("sale-status"),
    countdownBox: $("countdown-box"),
    countdownLabel: $("countdown-label"),
    countdown: $("countdown"),
    facts: $("sale-facts"),
    priceBox: $("price-box"),
    price: $("price"),
    remaining: $("remaining"),
    limit: $("limit"),
    starts: $("starts"),
    ends: $("ends"),
    zone: $("zone"),
    stockBar: $("stock-bar"),
    who: $("who"),
    whoName: $("who-name"),
    signin: $("signin"),
    localSignin: $("local-signin"),
    user: $("user"),
    cognitoSignin: $("cognito-signin"),
    loginLink: $("login-link"),
    tokenInput: $("token-input"),
    gate: $("gate"),
    gateForm: $("gate-form"),
    gateTitle: $("gate-title"),
    powStatus: $("pow-status"),
    question: $("question"),
    answer: $("answer"),
    buySection: $("buy"),
    buyForm: $("buy-form"),
    quantity: $("quantity"),
    allowance: $("allowance"),
    buyButton: $("buy-button"),
    buyHint: $("buy-hint"),
    status: $("status"),
    order: $("order"),
    orderState: $("order-state"),
    orderNote: $("order-note"),
    orderId: $("order-id"),
    orderQuantity: $("order-quantity"),
    orderAmountBox: $("order-amount-box"),
    orderAmount: $("order-amount"),
    payWindowBox: $("pay-window-box"),
    payWindow: $("pay-window"),
    receipt: $("receipt"),
    paidAt: $("paid-at"),
    paidAmountBox: $("paid-amount-box"),
    paidAmount: $("paid-amount"),
    paymentId: $("payment-id"),
    payButton: $("pay-button"),
    othersBox: $("other-orders-box"),
    others: $("other-orders"),
    ticket: $("ticket"),
    ticketState: $("ticket-state"),
    ticketNote: $("ticket-note"),
    drawAt: $("draw-at"),
    ticketQuantity: $("ticket-quantity"),
  };

  const state = {
    sale: null, // the last GET /sales/{id} answer
    startMs: 0,
    endMs: 0,
    // Why there is no sale to show: BAD_ID (the link's id is no id: never
    // asked for), NOT_FOUND (the API has no such sale), or null.
    missing: S.validId(saleId) ? null : "BAD_ID",
    skewMs: 0, // the server's clock minus ours
    session: null, // {token, userId, expiresAtMs}
    gate: "unknown", // unknown | none | needed | solving | passed
    worker: null, // the proof of work's Web Worker while it runs
    gateBusy: false,
    challengeId: null, // the id of the question shown
    gateRetryAtMs: 0,
    // Pages open since long before the start would all ask for the gate's
    // question at the same second; each waits a little of its own.
    gateJitterMs: Math.random() * 10000,
    pass: null, // the gate's {token, expiresAtMs}
    inFlight: false, // a purchase request is out
    retryAtMs: 0, // Retry-After: no purchase before this (server time)
    refused: null, // a refusal that ends buying here: SALE_ENDED, LIMIT_EXCEEDED
    key: null, // Idempotency-Key of the purchase being attempted
    keyQuantity: 0, // the quantity that key was sent with
    order: null, // the order shown: {orderId, status, quantity, expiresAt, amount, paidAt, paymentId}
    orders: [], // every order of the buyer's in this sale this page knows, newest first
    told: "", // "<orderId> <status>": what the status region last said about the order
    paying: false,
    opened: false, // the countdown reached zero while this page was open
    wasUpcoming: false, // this page saw the sale before its start
    failures: 0, // sale polls failed in a row
    // The lottery window (a sale with `admission`): the buyer's ticket
    // {status TICKET|WON|LOST|ENDED, quantity, orderId, drawAt} or null; whether
    // anything has shown the draw to be over; until when a 503 DRAWING
    // says it runs; how many purchases it has sent back in a row.
    ticket: null,
    ticketTold: "", // "<status> <drawAt>": what the status region last said about it
    drawOver: false,
    drawingUntilMs: 0,
    drawingRetries: 0,
  };

  const timers = { sale: 0, order: 0, ticket: 0, retry: 0 };
  // The draw's result is asked for about once a second from `drawAt`, for
  // at most this long (it takes well under a second for thousands of
  // tickets); without a word from the draw, a page assumes it lasts at
  // most DRAW_GRACE_MS; a purchase the draw holds back is sent again at
  // most DRAWING_RETRIES times.
  const TICKET_POLL_MS = 1000;
  const RESULT_DEADLINE_MS = 60000;
  const DRAW_GRACE_MS = 10000;
  const DRAWING_RETRIES = 30;
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
    if (state.missing === "BAD_ID") return;
    if (document.hidden) {
      timers.sale = setTimeout(pollSale, 15000);
      return;
    }
    const reply = await S.api(salePath);
    let next = 3000;
    if (reply.ok && reply.body) {
      const before = state.sale ? state.sale.status : null;
      const appeared = state.missing !== null;
      state.sale = reply.body;
      state.missing = null;
      // A sale created after its link was opened: the buyer's orders now.
      if (appeared && state.session) restoreOrder();
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
      // Asked again now and then: a sale announced by its link before it
      // is created shows up by itself.
      const already = state.missing === "NOT_FOUND";
      state.sale = null;
      state.missing = "NOT_FOUND";
      next = 30000;
      if (!already) sayMissing();
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

  function sayMissing() {
    const text =
      state.missing === "BAD_ID"
        ? "This link does not name a sale: “" + saleId + "” is not a sale id. Check the link."
        : "There is no sale called “" + saleId + "”. Check the link.";
    say(text, "error", [["See the shop's current sale", "/"]], "SALE_NOT_FOUND");
  }

  // Tell the buyer when the sale itself changes under them, before they
  // press anything (once per change; not over their own order's news).
  function saleChanged(before, status) {
    if ((state.order && isLive(state.order)) || state.refused || holdsTicket()) return;
    if (status === "SOLD_OUT") {
      say("Sold out: every unit has been taken.", "error", null, "SOLD_OUT");
    } else if (status === "ENDED" && before) {
      say("The sale has ended.", "error", null, "SALE_ENDED");
    } else if (status === "PAUSED") {
      say("The shop has paused the sale: buying resumes when it is back.", "warn", null, "SALE_PAUSED");
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

  // The sale's one status, from the API's answer and the clock: the pill,
  // the countdown and the buy button's reason are all drawn from it, so
  // they never disagree (the API's LIVE after the end is ENDED here; its
  // UPCOMING after the start is LIVE until the next poll).
  function saleState(t) {
    if (state.missing) return "MISSING";
    const sale = state.sale;
    if (!sale) return "LOADING";
    if (t >= state.endMs || sale.status === "ENDED" || state.refused === "SALE_ENDED") return "ENDED";
    if (t < state.startMs) return "UPCOMING";
    if (sale.status === "PAUSED") return "PAUSED";
    const closes = windowEndMs();
    if (t < closes) return "DRAW_OPEN";
    if (drawRunning(t, closes)) return "DRAWING";
    if (sale.status === "SOLD_OUT") return "SOLD_OUT";
    return "LIVE";
  }

  // When the sale's lottery window closes (NaN: no window).
  const windowEndMs = () =>
    state.sale && state.sale.admission ? Date.parse(state.sale.admission.windowEndAt) : NaN;

  // After the window, until the draw is over: while the buyer's own ticket
  // waits for its result, while a purchase was last answered DRAWING, and
  // (nothing having said otherwise) for DRAW_GRACE_MS.
  function drawRunning(t, closes) {
    if (Number.isNaN(closes) || t < closes) return false;
    if (holdsTicket() || t < state.drawingUntilMs) return true;
    return !state.drawOver && t < closes + DRAW_GRACE_MS;
  }

  const holdsTicket = () => !!(state.ticket && state.ticket.status === "TICKET");

  // Per state: the pill, its tone, the countdown's label and target, and
  // why the buy button is off (null: it may be on).
  const SALE_STATES = {
    MISSING: { pill: "NO SUCH SALE", tone: "danger", why: "There is no such sale." },
    LOADING: { pill: "…", tone: "info", why: "Loading the sale…" },
    UPCOMING: {
      pill: "UPCOMING",
      tone: "info",
      label: "Opens in",
      to: "start",
      why: "The button turns on by itself when the sale opens.",
    },
    LIVE: { pill: "LIVE", tone: "ok", label: "Open: closes in", to: "end", why: null },
    // The lottery window: a purchase is a ticket for the draw at its close.
    DRAW_OPEN: { pill: "DRAW OPEN", tone: "ok", label: "Entries for the draw close in", to: "window", why: null },
    // The tickets are being drawn: a purchase waits for it (503 DRAWING).
    DRAWING: { pill: "DRAWING", tone: "info", label: "Drawing the tickets: closes in", to: "end", why: null },
    PAUSED: {
      pill: "PAUSED",
      tone: "warn",
      label: "Paused: closes in",
      to: "end",
      why: "The shop has paused the sale. The button turns on by itself when it resumes.",
    },
    SOLD_OUT: {
      pill: "SOLD OUT",
      tone: "danger",
      label: "Sold out: closes in",
      to: "end",
      why: "Sold out. Units not paid for in time come back: the button turns on by itself if one does.",
    },
    ENDED: { pill: "ENDED", tone: "danger", label: "Closed", why: "The sale has ended." },
  };

  // ------------------------------------------------------------ sign-in

  function startSession(session) {
    state.session = session;
    S.saveSession("buyer", session);
    restoreOrder();
    render();
    // Straight on to the buy section: the next Tab reaches the quantity.
    ui.buySection.focus();
  }

  function signOut(message) {
    state.session = null;
    S.saveSession("buyer", null);
    stopSolving();
    Object.assign(state, {
      gate: "unknown",
      pass: null,
      refused: state.refused === "SALE_ENDED" ? "SALE_ENDED" : null,
      key: null,
      order: null,
      orders: [],
      told: "",
      paying: false,
      retryAtMs: 0,
      ticket: null,
      ticketTold: "",
      drawOver: false,
      drawingUntilMs: 0,
      drawingRetries: 0,
    });
    clearTimeout(timers.order);
    clearTimeout(timers.ticket);
    clearTimeout(timers.retry);
    timers.retry = 0;
    render();
    if (message) say(message, "error", null, "UNAUTHENTICATED");
    else say("You are signed out. Sign in to buy.", "info", null, "SIGNED_OUT");
    (S.config.auth === "local" ? ui.user : ui.loginLink).focus();
  }

  S.wireSignIn(
    false,
    (session) => {
      // First: news of an order kept from before (said as the session
      // starts) comes after, and stays on screen.
      say("Signed in as " + session.userId + ".", "ok");
      startSession(session);
    },
    () => signOut(null)
  );

  // "Skip to …" goes where the next step is: the sign-in form while signed
  // out, the buy button (or its section, with the reason it is off) after.
  ui.skip.addEventListener("click", (event) => {
    event.preventDefault();
    skipTarget().focus();
  });

  function skipTarget() {
    if (state.missing) return ui.status;
    if (!state.session) {
      if (S.config.auth === "local") return ui.user;
      return S.config.loginUrl ? ui.loginLink : ui.tokenInput;
    }
    return ui.buyButton.disabled ? ui.buySection : ui.buyButton;
  }

  // --------------------------------------------------------------- gate

  // A gated sale (`gate: true` in GET /sales) issues its question from 30 s
  // before the start, its proof of work (`powBits`) from the start; a sale
  // without one is never asked. An API that does not say (no `gate`) is
  // asked, and its 400 means no gate. A 403 GATE_REQUIRED asks again.
  async function fetchQuestion() {
    if (state.gateBusy || !state.session) return;
    state.gateBusy = true;
    const reply = await S.api(salePath + "/challenge", { token: state.session.token });
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
      signOut("Your sign-in has expired. Sign in again.");
    } else {
      // Too early, or a network error: ask again shortly. Buying is not
      // held up by it: a purchase without a pass gets 403 and asks too.
      state.gateRetryAtMs = now() + (reply.retryAfter || 5) * 1000;
    }
    render();
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
      const reply = await S.api(salePath + "/challenge", {
        method: "POST",
        token: state.session.token,
        body: { challengeId: challenge.challengeId, nonce: found.nonce },
      });
      if (reply.ok && reply.body) {
        state.pass = { token: reply.body.token, expiresAtMs: Date.parse(reply.body.expiresAt) };
        state.gate = "passed";
        render();
        say("Your browser is checked: press Buy now.", "ok", null, "POW_PASSED");
        if (!ui.buyButton.disabled) ui.buyButton.focus();
      } else {
        // Expired while solving, or refused: start again from a new one.
        state.gate = "unknown";
        state.gateRetryAtMs = now() + (reply.retryAfter || 1) * 1000;
        render();
      }
    };
    worker.onerror = () => {
      stopSolving();
      state.gate = "unknown";
      state.gateRetryAtMs = now() + 5000;
      say("Your browser could not run the check; trying again shortly.", "error", null, "POW_FAILED");
    };
    worker.postMessage({ challenge: challenge.challenge, bits: challenge.bits });
    render();
  }

  function stopSolving() {
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

  // ----------------------------------------------------------- purchase

  // Units the buyer holds in this sale: their orders that still count
  // against the per-buyer limit (being written, awaiting payment within
  // its window, paid), as the API and this page know them.
  function held() {
    return state.orders.reduce((sum, o) => sum + (isLive(o) ? o.quantity || 1 : 0), 0);
  }

  // How many more the buyer may buy: the limit minus what they hold.
  const allowance = () => (state.sale ? Math.max(0, state.sale.perUserLimit - held()) : 0);

  // The most the quantity choice offers: the allowance, and no more than
  // is left (a larger quantity would be refused as sold out).
  function maxQuantity() {
    const left = state.sale && state.sale.remaining > 0 ? state.sale.remaining : Infinity;
    return Math.max(1, Math.min(allowance(), left, 1000));
  }

  const chosenQuantity = () => Math.min(maxQuantity(), Math.max(1, Number(ui.quantity.value) || 1));

  // Why the buy button is off right now, or null when it is on.
  function whyNotBuy(t) {
    const sale = saleState(t);
    if (sale === "MISSING" || sale === "LOADING") return SALE_STATES[sale].why;
    if (!state.session) return "Sign in first.";
    if (state.inFlight) return "Sending your order…";
    if (SALE_STATES[sale].why) return SALE_STATES[sale].why + (sale === "UPCOMING" ? drawNote() : "");
    if (state.refused) return refusalHint(state.refused);
    if (holdsTicket()) {
      return "You are in the draw at " + S.time(Date.parse(state.ticket.drawAt)) + ": your result shows here.";
    }
    const shown = state.order && statusOf(state.order);
    if (shown === "QUEUED") return "Your order is being confirmed below.";
    if (shown === "PENDING_PAYMENT") return "Pay for your order below first (or let its window close).";
    if (allowance() <= 0) {
      return (
        "You hold " +
        held() +
        " of the " +
        state.sale.perUserLimit +
        " allowed per buyer: that is the most this sale allows."
      );
    }
    if (state.gate === "needed") return "Answer the question above first.";
    if (state.gate === "solving") return "Checking your browser… (a few seconds)";
    if (t < state.retryAtMs && timers.retry) {
      return "The draw is running: your purchase is sent again by itself in " + S.wait((state.retryAtMs - t) / 1000) + ".";
    }
    if (t < state.retryAtMs) return "You can try again in " + S.wait((state.retryAtMs - t) / 1000) + ".";
    return null;
  }

  // For a sale with a lottery window: when its tickets are drawn.
  function drawNote() {
    const closes = windowEndMs();
    if (Number.isNaN(closes)) return "";
    return (
      " Purchases in its first " + S.wait(state.sale.admission.window) +
      " are tickets for a draw at " + S.time(closes) + "."
    );
  }

  // What the hint under an active button says, by the sale's state.
  function readyHint(sale) {
    if (sale === "DRAW_OPEN") {
      return (
        "Every entry until " + S.time(windowEndMs()) +
        " is drawn then, in a random order: pressing first gains nothing. One press is enough."
      );
    }
    if (sale === "DRAWING") {
      return "The tickets are being drawn: a purchase now goes through as soon as the draw is over (seconds).";
    }
    return "One press is enough: the button turns off while we ask.";
  }

  function refusalHint(code) {
    if (code === "SALE_ENDED") return "The sale has ended.";
    if (code === "LIMIT_EXCEEDED") return "You hold as many as this sale allows.";
    return "Buying is closed for you on this page.";
  }

  ui.buyForm.addEventListener("submit", (event) => {
    event.preventDefault();
    buy();
  });

  ui.quantity.addEventListener("change", () => {
    // Another quantity is another purchase: a key sent for the old one
    // would be answered with the old order.
    if (state.key && state.keyQuantity !== chosenQuantity()) state.key = null;
    render();
  });

  async function buy() {
    // The first filter against double clicks: a second click or Enter finds
    // the flag set and the button already disabled, before any await.
    if (whyNotBuy(now()) !== null) return;
    const quantity = chosenQuantity();
    state.inFlight = true;
    render();
    // The button is off while we ask: the focus waits on its section, not
    // at the top of the page.
    ui.buySection.focus();
    if (!state.key || state.keyQuantity !== quantity) {
      state.key = S.randomKey();
      state.keyQuantity = quantity;
    }
    const headers = { "Idempotency-Key": state.key };
    if (state.pass) headers["X-Sale-Token"] = state.pass.token;
    say("Sending your order…", "info", null, "SENDING");
    const reply = await S.api(salePath + "/purchase", {
      method: "POST",
      token: state.session.token,
      body: { quantity: quantity },
      headers: headers,
    });
    state.inFlight = false;
    afterDrawing(reply);
    if (reply.status === 202 && reply.body && reply.body.orderId) {
      // Fewer units than the last poll said: shown now, corrected by the
      // next poll (no extra request at the busiest moment).
      if (state.sale && state.sale.remaining > 0) {
        state.sale.remaining = Math.max(0, state.sale.remaining - quantity);
      }
      // The key and the pass are spent on this order.
      state.key = null;
      state.pass = null;
      if (state.gate === "passed") state.gate = "unknown";
      say("Order received: confirming it…", "ok", null, "ACCEPTED");
      trackOrder(
        {
          orderId: reply.body.orderId,
          status: reply.body.status || "QUEUED",
          quantity: reply.body.quantity || quantity,
          expiresAt: null,
        },
        2000
      );
      // The order card replaces the button as what to look at next.
      ui.order.focus();
    } else if (reply.status === 202 && reply.body && reply.body.status === "TICKET") {
      // A ticket, not an order: no stock taken yet. The key and the pass
      // are spent on it as on an order.
      state.key = null;
      state.pass = null;
      if (state.gate === "passed") state.gate = "unknown";
      learnTicket({
        status: "TICKET",
        quantity: reply.body.quantity || quantity,
        orderId: null,
        drawAt: reply.body.drawAt || drawAtOf(state.sale),
      });
      ui.ticket.focus();
    } else {
      purchaseRefused(reply);
      render();
      ui.buySection.focus();
      if (!ui.buyButton.disabled) ui.buyButton.focus();
    }
    render();
  }

  // A human message for every refusal of the purchase route.
  function messageFor(reply) {
    const wait = reply.retryAfter;
    const limit = state.sale ? state.sale.perUserLimit : null;
    switch (reply.code) {
      case "SOLD_OUT":
        return {
          text:
            "Sold out: every unit has been taken" +
            (state.keyQuantity > 1 ? " (or fewer are left than you asked for)" : "") +
            ". Nothing was charged.",
          tone: "error",
        };
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
      case "DRAWING":
        return {
          text:
            state.drawingRetries > DRAWING_RETRIES
              ? "The draw is taking longer than usual. Press Buy now again in a moment: a retry cannot buy twice."
              : "The tickets of the first seconds are being drawn: your purchase is sent again by itself in " +
                S.wait(wait || 1) +
                " (it cannot buy twice).",
          tone: "info",
        };
      case "GATE_REQUIRED":
        return {
          text:
            state.sale && state.sale.powBits
              ? "Your browser needs checking again before you buy (a few seconds); then press Buy now again."
              : "This sale asks one question before you buy: answer it above, then press Buy now again.",
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
      // A retry (same key) of a purchase whose order has since ended: the
      // answer names it; a new press is a new purchase.
      case "ORDER_EXPIRED":
        return {
          text:
            "Your earlier order of this purchase expired unpaid and its unit went back on sale. Press Buy now again to buy anew.",
          tone: "warn",
        };
      case "ORDER_NOT_PAYABLE":
        return {
          text: "Your earlier order of this purchase was not accepted: no unit was left for it. Nothing was charged.",
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
        // The API just said so: show it now, not at the next poll (which
        // also shows units that come back).
        if (state.sale) Object.assign(state.sale, { remaining: 0, status: "SOLD_OUT" });
        state.key = null;
        break;
      case "SALE_ENDED":
        state.refused = reply.code;
        state.key = null;
        break;
      case "SALE_NOT_FOUND":
        state.sale = null;
        state.missing = "NOT_FOUND";
        state.key = null;
        break;
      case "LIMIT_EXCEEDED": {
        state.refused = reply.code;
        state.key = null;
        const ids = (reply.body && reply.body.orderIds) || [];
        if (ids.length && S.validId(ids[0])) {
          links = [["See your order", "?sale=" + encodeURIComponent(saleId) + "&order=" + encodeURIComponent(ids[0])]];
        }
        // What the buyer holds, from the API: the allowance follows it.
        loadOrders();
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
      case "DRAWING":
        // The same purchase (same key) again once the draw is over.
        state.retryAtMs = now() + (reply.retryAfter || 1) * 1000;
        state.drawingUntilMs = state.retryAtMs + 2000;
        if (state.drawingRetries <= DRAWING_RETRIES) {
          timers.retry = setTimeout(() => {
            timers.retry = 0;
            buy();
          }, (reply.retryAfter || 1) * 1000);
        }
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
      case "ORDER_EXPIRED":
      case "ORDER_NOT_PAYABLE":
        // That purchase is over: the next press is a new one.
        state.key = null;
        loadOrders();
        break;
      case "NETWORK":
        // Unknown outcome: keep the key, so the retry is the same purchase.
        break;
      default:
        state.retryAtMs = now() + 2000;
    }
    say(message.text, message.tone, links, reply.code);
  }

  // What a purchase's answer says of the draw: DRAWING, it runs (counted,
  // so the page stops sending it again by itself at some point); anything
  // else after the window, it is over.
  function afterDrawing(reply) {
    clearTimeout(timers.retry);
    timers.retry = 0;
    if (reply.code === "DRAWING") {
      state.drawingRetries += 1;
      state.drawOver = false;
    } else if (reply.code !== "NETWORK") {
      state.drawingRetries = 0;
      state.drawingUntilMs = 0;
      if (now() >= windowEndMs()) state.drawOver = true;
    }
  }

  // ------------------------------------------------------------- ticket

  // When a sale's draw is, for an answer that does not say.
  const drawAtOf = (sale) =>
    sale && sale.admission ? sale.admission.windowEndAt : new Date(now()).toISOString();

  const ticketKey = () => "ticket." + saleId + "." + (state.session ? state.session.userId : "");

  // The buyer's ticket as the API (GET /sales/{id}/orders' `ticket`, or the
  // purchase's 202) gives it; kept for a reload. A result that comes in
  // while the page watches is said, and WON hands over to the order card.
  function learnTicket(body) {
    const was = state.ticket;
    const ticket =
      body && typeof body.status === "string" && typeof body.drawAt === "string"
        ? {
            status: body.status,
            quantity: body.quantity || 1,
            orderId: S.validId(body.orderId) ? body.orderId : null,
            drawAt: body.drawAt,
          }
        : null;
    state.ticket = ticket;
    S.store.set(ticketKey(), ticket);
    if (ticket && ticket.status !== "TICKET") state.drawOver = true;
    const decided = was && was.status === "TICKET" && ticket && ticket.status !== "TICKET";
    // Won on this page: its order is the one to follow. (Later, the order
    // shown may be another one the buyer bought after it.)
    const won = decided && ticket.status === "WON" && ticket.orderId;
    if (won && (!state.order || state.order.orderId !== ticket.orderId)) {
      trackOrder({ orderId: ticket.orderId, status: "QUEUED", quantity: ticket.quantity, expiresAt: null }, 0);
    }
    // The draw took stock: the sale's numbers, fresh.
    if (decided) pollSale();
    followTicket();
    render();
  }

  // From `drawAt`, about once a second (the first look spread over a
  // second, so every page does not ask at the same instant), until the
  // ticket is decided or RESULT_DEADLINE_MS has passed.
  function followTicket() {
    clearTimeout(timers.ticket);
    const ticket = state.ticket;
    if (!ticket || ticket.status !== "TICKET" || !state.session) return;
    const drawAt = Date.parse(ticket.drawAt);
    const t = now();
    if (t > drawAt + RESULT_DEADLINE_MS) return;
    const delay = t < drawAt ? drawAt - t + Math.random() * 1000 : TICKET_POLL_MS;
    timers.ticket = setTimeout(loadOrders, delay);
  }

  const resultLate = (ticket, t) => ticket.status === "TICKET" && t > Date.parse(ticket.drawAt) + RESULT_DEADLINE_MS;

  // TICKET before the draw, DRAWING after `drawAt`, LATE past the deadline,
  // else the result.
  function ticketShown(ticket, t) {
    if (ticket.status !== "TICKET") return ticket.status;
    if (resultLate(ticket, t)) return "LATE";
    return t < Date.parse(ticket.drawAt) ? "TICKET" : "DRAWING";
  }

  const TICKET_TEXT = {
    TICKET: "You are in the draw",
    DRAWING: "Drawing… your result comes in a moment",
    LATE: "No result yet",
    WON: "Drawn: you won",
    LOST: "Not drawn this time",
    ENDED: "The sale ended before the draw",
  };

  function ticketNote(shown) {
    const at = S.time(Date.parse(state.ticket.drawAt));
    switch (shown) {
      case "TICKET":
        return "Every ticket is drawn at " + at + " in a random order, then decided against the stock. Your result shows here by itself.";
      case "LATE":
        return "The draw's result has not come in time. Reload the page to ask again.";
      case "WON":
        return "Your order is below: pay for it within its window to keep it.";
      case "ENDED":
        return "The sale was ended before your ticket was drawn. Nothing was charged.";
      case "LOST":
        return (
          "The units went to tickets drawn before yours (or you already held your limit). " +
          "Nothing was charged; from now on it is first come, first served."
        );
      default:
        return "The tickets are being drawn.";
    }
  }

  function renderTicket(t) {
    const ticket = state.missing ? null : state.ticket;
    ui.ticket.hidden = !ticket;
    if (!ticket) {
      delete ui.ticket.dataset.status;
      return;
    }
    const shown = ticketShown(ticket, t);
    ui.ticket.dataset.status = ticket.status;
    ui.ticketState.textContent = TICKET_TEXT[shown] || shown;
    ui.ticketNote.textContent = ticketNote(shown);
    showTime(ui.drawAt, Date.parse(ticket.drawAt), S.time);
    ui.ticketQuantity.textContent = S.number(ticket.quantity);
  }

  // Says what became of the ticket, once per change, and moves the focus
  // on when the result takes the buyer elsewhere (and it was idle).
  function tellTicket(t) {
    const ticket = state.ticket;
    if (!ticket) return;
    const shown = ticketShown(ticket, t);
    const told = shown + " " + ticket.drawAt;
    if (told === state.ticketTold || shown === "DRAWING") return;
    const first = state.ticketTold === "";
    state.ticketTold = told;
    const focus = document.activeElement;
    const idle = focus === document.body || focus === ui.ticket || focus === ui.buySection || focus === ui.buyButton;
    const at = S.time(Date.parse(ticket.drawAt));
    switch (shown) {
      case "TICKET":
        say("You are in the draw at " + at + ". Your result shows here by itself.", "ok", null, "TICKET");
        break;
      case "LATE":
        say("The draw's result has not come in time. Reload the page to ask again.", "warn", null, "DRAW_LATE");
        break;
      case "WON":
        say("You won the draw: confirming your order…", "ok", null, "WON");
        if (idle && !first) ui.order.focus();
        break;
      case "ENDED":
        say("The sale ended before the draw. Nothing was charged.", "warn", null, "ENDED");
        break;
      case "LOST":
        say("Not drawn this time. Nothing was charged.", "warn", null, "LOST");
        if (idle && !first) (ui.buyButton.disabled ? ui.buySection : ui.buyButton).focus();
        break;
    }
  }

  // -------------------------------------------------------------- order

  // The user id may hold any character, "." included; the key still names
  // one (sale, user) because a sale id cannot hold a ".".
  const orderKey = () => "order." + saleId + "." + (state.session ? state.session.userId : "");

  // An order as this page keeps it, from an API body.
  function orderFrom(body) {
    return {
      orderId: body.orderId,
      status: body.status,
      quantity: body.quantity || 1,
      expiresAt: body.expiresAt || null,
      amount: body.amount || null,
      paidAt: body.paidAt || null,
      paymentId: body.paymentId || null,
    };
  }

  // The status the buyer is shown: an order awaiting payment whose window
  // has closed on the clock is expired from that instant (the API says so
  // too, and the read that first says so puts the unit back on sale: the
  // page asks again a second later).
  function statusOf(order) {
    if (order.status === "PENDING_PAYMENT" && order.expiresAt && Date.parse(order.expiresAt) <= now()) {
      return "EXPIRED";
    }
    return order.status;
  }

  const isLive = (order) => {
    const status = statusOf(order);
    return status === "QUEUED" || status === "PENDING_PAYMENT" || status === "PAID";
  };

  // Keeps `order` in the list of the buyer's orders (newest first).
  function remember(order) {
    const i = state.orders.findIndex((o) => o.orderId === order.orderId);
    if (i >= 0) state.orders[i] = order;
    else state.orders.unshift(order);
  }

  // An order kept from before a reload, or the one a link names, is shown
  // at once and asked for; the API's list of the buyer's orders of this
  // sale (QUEUED ones included) fills in the rest, so a new tab or another
  // browser shows them and what the buyer may still buy.
  function restoreOrder() {
    const kept = S.store.get(ticketKey());
    if (kept) learnTicket(kept);
    const saved = S.store.get(orderKey());
    if (linkedOrder) trackOrder({ orderId: linkedOrder, status: "QUEUED", quantity: 1, expiresAt: null }, 0);
    else if (saved && S.validId(saved.orderId)) trackOrder(Object.assign({ quantity: 1 }, saved), 0);
    loadOrders();
  }

  async function loadOrders() {
    if (!state.session || state.missing) return;
    const session = state.session;
    const reply = await S.api(salePath + "/orders", { token: session.token });
    if (state.session !== session) return;
    if (!reply.ok || !reply.body) {
      followTicket();
      return;
    }
    const listed = (reply.body.orders || []).filter((o) => o && S.validId(o.orderId)).map(orderFrom);
    // The list is the API's word on every order but the one this page is
    // following (its own polls are fresher).
    const current = state.order;
    state.orders = listed.map((o) => (current && o.orderId === current.orderId ? current : o));
    if (current && !listed.some((o) => o.orderId === current.orderId)) state.orders.unshift(current);
    if (!current && listed.length) {
      // The one that needs the buyer: being written or awaiting payment,
      // else the newest that counts, else the newest.
      const pick =
        listed.find((o) => statusOf(o) === "QUEUED" || statusOf(o) === "PENDING_PAYMENT") ||
        listed.find(isLive) ||
        listed[0];
      trackOrder(pick, 0);
    }
    // An API that says nothing of tickets leaves the page's own.
    if ("ticket" in reply.body) learnTicket(reply.body.ticket);
    render();
  }

  // `delay`: a fresh order is not written yet; the first look is in 2 s.
  function trackOrder(order, delay) {
    state.order = order;
    remember(order);
    S.store.set(orderKey(), order);
    render();
    clearTimeout(timers.order);
    timers.order = setTimeout(pollOrder, delay);
  }

  // Every 2 s while the order is being written (QUEUED); then the page
  // counts the payment window down itself and shows the expiry the
  // instant it closes. Every answer about the order takes a number; a look
  // that comes back after a later answer (a payment's) is stale and
  // changes nothing.
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
      state.orders = state.orders.filter((o) => o !== state.order);
      state.order = null;
      S.store.set(orderKey(), null);
      render();
      return;
    } else {
      say("Connection trouble: still checking your order…", "warn", null, reply.code);
    }
    if (state.order && (state.order.status === "QUEUED" || !reply.ok)) {
      timers.order = setTimeout(pollOrder, 2000);
    }
  }

  function updateOrder(body) {
    if (state.order && body.orderId !== state.order.orderId) return;
    state.order = orderFrom(body);
    remember(state.order);
    S.store.set(orderKey(), state.order);
    render();
  }

  // Says what became of the order shown, once per change of what the
  // buyer sees (from the API, or from the clock at the window's close),
  // and keeps the keyboard's focus on the control that took over.
  function tellOrder() {
    const order = state.order;
    if (!order) return;
    const shown = statusOf(order);
    const told = order.orderId + " " + shown;
    if (told === state.told) return;
    const first = state.told === "";
    state.told = told;
    const focus = document.activeElement;
    const focusIdle =
      focus === document.body || focus === ui.order || focus === ui.buySection || focus === ui.buyButton;
    const units = order.quantity > 1 ? "the " + order.quantity + " units" : "the unit";
    switch (shown) {
      case "PENDING_PAYMENT": {
        const amount = S.money(order.amount);
        say(
          "Your order is confirmed. Pay " +
            (amount ? amount + " " : "") +
            "within " +
            S.wait(windowLeft() / 1000) +
            " to keep it.",
          "ok",
          null,
          shown
        );
        if (focusIdle && !first) ui.payButton.focus();
        break;
      }
      case "PAID":
        say("Paid. Thank you: " + units + (order.quantity > 1 ? " are" : " is") + " yours.", "ok", null, shown);
        break;
      case "EXPIRED":
        say(
          "The payment window closed before payment: your order expired and " +
            units +
            " went back on sale. Nothing was charged.",
          "warn",
          null,
          shown
        );
        // A buyer who lost a unit can buy again, if any is left.
        state.refused = state.refused === "LIMIT_EXCEEDED" ? null : state.refused;
        if (focus === ui.payButton || focus === document.body) ui.order.focus();
        // Closed on this page's clock: the API's word a moment later (it
        // answers EXPIRED from the same instant, releasing the order as it
        // does, or PAID if a payment made elsewhere got in first).
        if (order.status === "PENDING_PAYMENT") setTimeout(pollOrder, 1000);
        break;
      case "REJECTED":
        say(
          "We could not confirm your order: the stock ran out as it was written. Nothing was charged.",
          "error",
          null,
          shown
        );
        state.refused = state.refused === "LIMIT_EXCEEDED" ? null : state.refused;
        break;
    }
  }

  const windowLeft = () =>
    state.order && state.order.expiresAt ? Date.parse(state.order.expiresAt) - now() : Infinity;

  ui.payButton.addEventListener("click", pay);

  async function pay() {
    if (state.paying || !state.order || statusOf(state.order) !== "PENDING_PAYMENT") return;
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
      // The receipt replaces the button: the focus goes to the order card.
      ui.order.focus();
      return;
    }
    switch (reply.code) {
      case "ORDER_EXPIRED":
        state.order.status = "EXPIRED";
        state.told = state.order.orderId + " EXPIRED";
        say(
          "The payment window closed before payment: your order expired and the unit went back on sale. Nothing was charged.",
          "warn",
          null,
          reply.code
        );
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
    // Back on the button if it is still there, else on the order card.
    if (!ui.payButton.hidden && !ui.payButton.disabled) ui.payButton.focus();
    else ui.order.focus();
  }

  // ------------------------------------------------------------- render

  const ORDER_TEXT = {
    QUEUED: "Confirming your order…",
    PENDING_PAYMENT: "Confirmed: waiting for your payment",
    PAID: "Paid",
    EXPIRED: "Expired: not paid in time",
    REJECTED: "Not confirmed: sold out as it was written",
  };

  function render() {
    const t = now();
    const sale = state.sale;
    const saleNow = saleState(t);
    const look = SALE_STATES[saleNow];
    const missing = saleNow === "MISSING";

    ui.saleStatus.textContent = look.pill;
    ui.saleStatus.dataset.tone = look.tone;
    ui.saleStatus.dataset.state = saleNow;
    ui.countdownBox.hidden = !sale || missing;
    ui.facts.hidden = !sale || missing;
    ui.zone.hidden = !sale || missing;
    ui.stockBar.hidden = !sale || missing;
    if (missing) {
      ui.saleName.textContent = "No such sale";
      document.title = "No such sale · Seckill";
    } else if (sale) {
      ui.saleName.textContent = sale.name || sale.saleId;
      document.title = (sale.name || sale.saleId) + " · Seckill";
      ui.countdownLabel.textContent = look.label;
      if (look.to === "start") ui.countdown.textContent = S.clock(state.startMs - t);
      else if (look.to === "window") ui.countdown.textContent = S.clock(windowEndMs() - t);
      else if (look.to === "end") ui.countdown.textContent = S.clock(state.endMs - t);
      else ui.countdown.textContent = "Ended";
      ui.priceBox.hidden = !sale.price;
      ui.price.textContent = S.money(sale.price);
      ui.remaining.textContent = S.number(sale.remaining) + " of " + S.number(sale.totalStock);
      ui.limit.textContent = S.number(sale.perUserLimit);
      showTime(ui.starts, state.startMs);
      showTime(ui.ends, state.endMs);
      const zone = S.timeZone();
      ui.zone.textContent = zone ? "Times are in your time zone, " + zone + "." : "Times are in your time zone.";
      ui.stockBar.max = Math.max(1, sale.totalStock);
      ui.stockBar.value = Math.max(0, sale.remaining);
      // Red means trouble: a full bar is green, a nearly empty one amber.
      const share = sale.remaining / Math.max(1, sale.totalStock);
      ui.stockBar.dataset.level = sale.remaining <= 0 ? "none" : share <= 0.1 ? "low" : "plenty";
    }

    const signedIn = !!state.session;
    ui.signin.hidden = signedIn || missing;
    ui.localSignin.hidden = S.config.auth !== "local";
    ui.cognitoSignin.hidden = S.config.auth === "local";
    ui.loginLink.hidden = !S.config.loginUrl;
    ui.who.hidden = !signedIn;
    ui.whoName.textContent = signedIn ? state.session.userId : "";
    const pow = !!(state.sale && state.sale.powBits);
    ui.gate.hidden = !(signedIn && (state.gate === "needed" || state.gate === "solving")) || missing;
    ui.gateTitle.textContent = pow ? "Checking your browser" : "One question before you buy";
    ui.gateForm.hidden = pow;
    ui.powStatus.hidden = !pow;
    ui.skip.textContent = signedIn || missing ? "Skip to the buy button" : "Skip to sign-in";
    ui.skip.hidden = missing;

    // No buy section at all for a sale that is not there.
    ui.buySection.hidden = missing;
    const why = whyNotBuy(t);
    const max = maxQuantity();
    if (ui.quantity.options.length !== max) {
      const chosen = Math.min(max, Number(ui.quantity.value) || 1);
      ui.quantity.replaceChildren(
        ...Array.from({ length: max }, (_, i) => new Option(String(i + 1), String(i + 1)))
      );
      ui.quantity.value = String(chosen);
    }
    const quantity = chosenQuantity();
    // Nothing to choose from one: the control is off, and out of the way of Tab.
    ui.quantity.disabled = why !== null || max <= 1;
    ui.buyButton.disabled = why !== null;
    const total = sale && sale.price ? S.money(sale.price, quantity) : "";
    // Before the window closes, a press is an entry in the draw (paused
    // meanwhile too: it would be one once resumed).
    const entry =
      t < windowEndMs() && (saleNow === "UPCOMING" || saleNow === "DRAW_OPEN" || saleNow === "PAUSED");
    ui.buyButton.textContent = state.inFlight
      ? "Sending…"
      : entry
        ? quantity > 1
          ? "Enter the draw for " + quantity
          : "Enter the draw"
        : total
        ? "Buy " + quantity + " for " + total
        : quantity > 1
          ? "Buy " + quantity + " now"
          : "Buy now";
    ui.buyHint.textContent = why || readyHint(saleNow);
    ui.allowance.hidden = !(signedIn && sale);
    if (signedIn && sale) {
      const mine = held();
      ui.allowance.textContent =
        "Up to " +
        sale.perUserLimit +
        " per buyer: you hold " +
        mine +
        ", so you may buy " +
        (allowance() > 0 ? "up to " + allowance() + " more." : "no more.");
    }

    const order = missing ? null : state.order;
    ui.order.hidden = !order;
    if (!order) {
      // Nothing of an order no longer shown stays on the page (the last
      // buyer's, after a sign-out).
      delete ui.order.dataset.status;
      ui.orderId.textContent = "";
    } else {
      const shown = statusOf(order);
      ui.order.dataset.status = shown;
      ui.orderState.textContent = ORDER_TEXT[shown] || shown;
      ui.orderId.textContent = order.orderId;
      ui.orderQuantity.textContent = S.number(order.quantity);
      const amount = S.money(order.amount);
      ui.orderAmountBox.hidden = !amount;
      ui.orderAmount.textContent = amount;
      const pending = shown === "PENDING_PAYMENT";
      const left = windowLeft();
      ui.payWindowBox.hidden = !pending;
      ui.payWindow.textContent = left === Infinity ? "–" : S.clock(left);
      ui.payButton.hidden = !pending;
      ui.payButton.disabled = state.paying;
      const each = sale && sale.price ? S.money(sale.price) : "";
      ui.payButton.textContent = state.paying
        ? "Paying…"
        : amount
          ? "Pay " + (order.quantity > 1 && each ? order.quantity + " × " + each + " = " : "") + amount
          : "Pay now";
      const units = order.quantity > 1 ? "The " + order.quantity + " units" : "The unit";
      const note = {
        EXPIRED: "The payment window closed before payment. " + units + " went back on sale; nothing was charged.",
        REJECTED: "Nothing was charged.",
      }[shown];
      ui.orderNote.hidden = !note;
      ui.orderNote.textContent = note || "";
      const paid = shown === "PAID";
      ui.receipt.hidden = !paid;
      if (paid) {
        showTime(ui.paidAt, order.paidAt ? Date.parse(order.paidAt) : NaN);
        ui.paidAmountBox.hidden = !amount;
        ui.paidAmount.textContent = amount;
        ui.paymentId.textContent = order.paymentId || "–";
      }
    }
    renderOthers(order);
    renderTicket(t);
    tellTicket(t);
    tellOrder();
  }

  // A time element: the date and time in the buyer's zone (or as `format`
  // writes it), the instant in `datetime` (UTC, as the API gave it).
  function showTime(el, ms, format) {
    if (el.dataset.ms === String(ms)) return;
    el.dataset.ms = String(ms);
    const valid = typeof ms === "number" && !Number.isNaN(ms);
    const text = valid ? (format || S.dateTime)(ms) : "–";
    if (el.textContent !== text) el.textContent = text;
    el.dateTime = valid ? new Date(ms).toISOString() : "";
  }

  // The buyer's other orders of this sale, one line each.
  let othersDrawn = "";
  function renderOthers(current) {
    const others = current ? state.orders.filter((o) => o.orderId !== current.orderId) : [];
    const lines = others.map((o) => {
      const amount = S.money(o.amount);
      return (
        S.number(o.quantity) +
        (o.quantity === 1 ? " unit · " : " units · ") +
        (ORDER_TEXT[statusOf(o)] || statusOf(o)) +
        (amount ? " · " + amount : "") +
        " · order " +
        o.orderId
      );
    });
    ui.othersBox.hidden = lines.length === 0;
    const drawn = lines.join("\n");
    if (drawn === othersDrawn) return;
    othersDrawn = drawn;
    ui.others.replaceChildren(
      ...lines.map((line) => {
        const li = document.createElement("li");
        li.textContent = line;
        return li;
      })
    );
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
        if (state.session && state.sale.admission) {
          say(
            "The sale is open: enter the draw until " + S.time(windowEndMs()) + " (when you press in that time does not matter).",
            "ok",
            null,
            "OPEN"
          );
        } else if (state.session) say("The sale is open: you can buy now.", "ok", null, "OPEN");
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
    // A proof of work is served from the start only: the solve time itself
    // spreads the opening second, so no jitter is added to it.
    const opensIn = state.sale && state.sale.powBits ? 0 : 30000 - state.gateJitterMs;
    const gateDue = state.startMs - t <= opensIn && t < state.endMs && t >= state.gateRetryAtMs;
    const gated = state.sale && state.sale.gate !== false;
    if (state.session && gated && state.gate === "unknown" && gateDue) fetchQuestion();
    render();
  }

  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) {
      pollSale();
      loadOrders();
    }
  });

  // -------------------------------------------------------------- start

  const returning = S.config.auth === "local" ? null : S.tokenFromFragment();
  const session = returning || S.savedSession("buyer");
  if (session && !state.missing) {
    state.session = session;
    S.saveSession("buyer", session);
    restoreOrder();
  } else if (session) {
    state.session = session;
  }
  if (state.missing) sayMissing();
  render();
  pollSale();
  setInterval(tick, 250);
})();
