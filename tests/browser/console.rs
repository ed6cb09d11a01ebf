//! The operator console running sales: each scenario on its own sales,
//! each step asserting what the operator sees and what the API then holds.
//!
//! p) an unknown sale id clears every figure of the sale watched before,
//!    and a switch of sale shows none of the old one's numbers, not even
//!    from an answer that arrives late;
//! q) the list of sales, the picked sale's settings and sell-out time, the
//!    create and edit forms with the API's 400/409 messages next to the
//!    field (and nothing changed on error);
//! r) pause, resume, prewarm, reconcile and end now, each after a question
//!    (by keyboard too: Enter asks, Escape closes, the focus comes back),
//!    each obeyed by the next purchase or shown in the audit trail;
//! s) an order found by id and a buyer's orders, with status, amount, paid
//!    time and refund, and the refunds the sale owes;
//! t) the DLQ's messages with why they failed, one redriven from the page,
//!    then the rest with Redrive all, and their orders written.

use super::harness::*;
use fantoccini::key::Key;
use seckill_shared::clock;
use seckill_shared::domain::payment::PaymentKey;
use seckill_tests::{eventually, order_body, unique};
use serde_json::{Value, json};
use std::time::Duration;

/// p) Problem 8: the figures on screen are always the named sale's.
pub(super) async fn a_changed_sale_shows_none_of_the_last(ui: &Ui) {
    let now = clock::now_ms();
    let a = ui.sale("p-a", 5, 1, now - 1_000).await;
    let b = ui.sale("p-b", 7, 1, now - 1_000).await;
    for buyer in [unique("p1"), unique("p2")] {
        assert_eq!(ui.buy(&a, &buyer, 1).await.0, 202);
    }
    ui.console(Some(&a)).await;
    ui.until_text("#stock-remaining", "3").await;
    ui.until_contains("#updated", &format!("Sale {a} ·")).await;

    // An id no sale has: said, and nothing of sale A left on screen.
    let unknown = unique("p-none");
    ui.fill("#sale-id", &unknown).await;
    ui.click("#sale-form button[type=submit]").await;
    ui.until_contains("#status", &format!("There is no sale “{unknown}”"))
        .await;
    ui.until_contains("#updated", &format!("No such sale “{unknown}”"))
        .await;
    let shown = ui.js(CONSOLE_FIGURES).await;
    assert_eq!(
        shown,
        json!({"stock": "–", "total": "–", "pill": "–", "visible": "–", "dlq": "–",
               "name": "–", "statuses": 0, "outcomes": 0, "report": "–",
               "updated": format!("No such sale “{unknown}”.")}),
        "an unknown sale shows the previous sale's figures"
    );
    ui.shot("ops-8-unknown-sale").await;

    // Back to A; then every /live answer is held, so A's next one arrives
    // only after the switch to B.
    ui.fill("#sale-id", &a).await;
    ui.click("#sale-form button[type=submit]").await;
    ui.until_text("#stock-remaining", "3").await;
    ui.js("window.held = []; window.realFetch = window.fetch; \
         window.fetch = async (...args) => { \
           const r = await window.realFetch(...args); \
           if (!String(args[0]).endsWith('/live') || window.releaseAll) return r; \
           return new Promise((resolve) => window.held.push(() => resolve(r))); \
         }; return true")
        .await;
    ui.until(
        "an answer for sale A held",
        "return window.held.length >= 1",
    )
    .await;
    // Every value the stock figure takes from now on.
    ui.js(
        "window.seen = []; const e = document.getElementById('stock-remaining'); \
         new MutationObserver(() => window.seen.push(e.textContent)) \
           .observe(e, {childList: true, characterData: true, subtree: true}); return true",
    )
    .await;
    ui.fill("#sale-id", &b).await;
    ui.click("#sale-form button[type=submit]").await;
    ui.until_contains("#updated", &format!("Sale {b} ·")).await;
    let shown = ui.js(CONSOLE_FIGURES).await;
    assert_eq!(
        (
            &shown["stock"],
            &shown["total"],
            &shown["statuses"],
            &shown["outcomes"]
        ),
        (&json!("–"), &json!("–"), &json!(0), &json!(0)),
        "sale B named over sale A's figures: {shown}"
    );
    ui.shot("ops-8-switching").await;
    // A's late answer, then B's own.
    ui.js("window.releaseAll = true; window.held.forEach((release) => release()); return true")
        .await;
    ui.until_text("#stock-remaining", "7").await;
    ui.until_contains("#updated", &format!("Sale {b} · updated"))
        .await;
    let seen = ui.js("return window.seen").await;
    assert!(
        !seen.as_array().unwrap().contains(&json!("3")),
        "sale A's stock was shown under sale B: {seen}"
    );
    ui.js("window.fetch = window.realFetch; return true").await;
}

/// How the console writes a time to sell out (as `duration` in
/// web/assets/format.js): to the millisecond under a minute.
fn sell_out_words(ms: i64) -> String {
    if ms < 60_000 {
        format!("{}.{:03} s", ms / 1000, ms % 1000)
    } else {
        let s = (ms + 500) / 1000;
        format!("{} min {:02} s", s / 60, s % 60)
    }
}

/// q) The list, the settings, and the forms over `PUT /admin/sales/{id}`.
pub(super) async fn sales_are_listed_made_and_edited(ui: &Ui) {
    let now = clock::now_ms();
    let live = ui
        .sale_with(
            "q",
            5,
            2,
            now - 1_000,
            json!({"price": {"amount": 1999, "currency": "EUR"}}),
        )
        .await;
    let (status, first) = ui.buy(&live, &unique("q1"), 1).await;
    assert_eq!(status, 202, "{first}");
    ui.written(first["orderId"].as_str().unwrap()).await;

    ui.console(None).await;
    let row = format!("tr[data-sale=\"{live}\"]");
    ui.until_text(&format!("{row} .sale-status"), "LIVE").await;
    ui.until_text(&format!("{row} .sale-price"), "€19.99").await;
    ui.until_text(&format!("{row} .sale-sold"), "1 of 5").await;
    ui.until_text(&format!("{row} .sale-available"), "4").await;

    // Picked from the list: its settings, the focus still on the control.
    ui.click(&format!("{row} button.watch")).await;
    ui.until_text("#set-name", "Browser test: q").await;
    for (css, want) in [
        ("#set-price", "€19.99"),
        ("#set-stock", "5 units"),
        ("#set-sold", "1 · 4"),
        ("#set-limit", "2"),
        ("#set-window", "2 minutes"),
        ("#set-shards", "1 · no gate"),
        ("#set-soldout", "not sold out"),
        ("#set-ttso", "–"),
    ] {
        ui.until_text(css, want).await;
    }
    let zone = ui
        .js("return Intl.DateTimeFormat().resolvedOptions().timeZone")
        .await;
    assert!(
        ui.text("#set-start").await.contains(zone.as_str().unwrap()),
        "the start names the operator's time zone"
    );
    assert!(
        ui.holds(&format!(
            "return document.activeElement.closest('tr').dataset.sale === {}",
            json!(live)
        ))
        .await,
        "the focus left the sale picked"
    );
    assert!(
        ui.text("#updated")
            .await
            .starts_with(&format!("Sale {live} ·"))
    );

    // Sold out: the sell-out time and how long it took, the API's figures.
    for i in 0..2 {
        let (status, reply) = ui.buy(&live, &unique(&format!("q{}", i + 2)), 2).await;
        assert_eq!(status, 202, "{reply}");
    }
    let (_, sale) = ui.admin_get(&format!("/admin/sales/{live}")).await;
    let ttso = sale["timeToSellOutMs"].as_i64().expect("sold out");
    ui.until_text("#set-ttso", &sell_out_words(ttso)).await;
    assert_ne!(ui.text("#set-soldout").await, "not sold out");
    ui.shot("ops-9-settings").await;

    // Create: a bad stock, then an end before the start, each said next
    // to its field, and no sale made; then the sale.
    let made = unique("q-made");
    let start = (now / 1000 + 7_200) * 1000;
    ui.click("#new-sale").await;
    ui.until(
        "the create form",
        "return !document.getElementById('editor').hidden",
    )
    .await;
    ui.fill("#f-id", &made).await;
    ui.fill("#f-name", "Made on the console").await;
    ui.fill("#f-stock", "0").await;
    ui.set_time("#f-start", start).await;
    ui.set_time("#f-end", start + 3_600_000).await;
    ui.fill("#f-limit", "3").await;
    ui.fill("#f-window", "300").await;
    ui.fill("#f-price", "12.50").await;
    ui.fill("#f-currency", "EUR").await;
    ui.click("#editor-save").await;
    ui.until_contains("#f-stock-error", "totalStock must be an integer from 1")
        .await;
    assert_eq!(ui.active_id().await, "f-stock", "focus on the field named");
    assert_eq!(ui.text("#f-name-error").await, "");
    ui.shot("ops-9-form-error").await;
    let path = format!("/admin/sales/{made}");
    assert_eq!(ui.admin_get(&path).await.0, 404, "a refused sale was made");
    ui.fill("#f-stock", "10").await;
    ui.set_time("#f-end", start - 3_600_000).await;
    ui.click("#editor-save").await;
    ui.until_contains("#f-start-error", "startAt must be before endAt")
        .await;
    assert_eq!(ui.text("#f-stock-error").await, "", "the old error stays");
    assert_eq!(ui.admin_get(&path).await.0, 404, "a refused sale was made");
    ui.set_time("#f-end", start + 3_600_000).await;
    // Proof-of-work bits out of bounds: said next to them, nothing made;
    // in bounds, they turn the gate on with the box unticked.
    ui.fill("#f-pow", "30").await;
    ui.click("#editor-save").await;
    ui.until_contains("#f-pow-error", "powBits must be an integer from 8 to 26")
        .await;
    assert_eq!(ui.admin_get(&path).await.0, 404, "a refused sale was made");
    ui.fill("#f-pow", "12").await;
    ui.click("#editor-save").await;
    ui.until_contains("#status", &format!("Sale {made} created"))
        .await;
    ui.until_text("#set-shards", "1 · proof of work, 12 bits")
        .await;
    ui.until_text("#set-name", "Made on the console").await;
    ui.until_text(
        &format!("tr[data-sale=\"{made}\"] .sale-status"),
        "NOT STARTED",
    )
    .await;
    assert_eq!(
        ui.active_id().await,
        "settings-title",
        "focus on the new sale"
    );
    let (status, sale) = ui.admin_get(&path).await;
    assert_eq!(status, 200);
    assert_eq!(
        (
            &sale["startAt"],
            &sale["endAt"],
            &sale["totalStock"],
            &sale["perUserLimit"],
            &sale["paymentWindowSeconds"],
            &sale["price"],
            &sale["gate"],
            &sale["powBits"],
        ),
        (
            &json!(clock::rfc3339_ms(start)),
            &json!(clock::rfc3339_ms(start + 3_600_000)),
            &json!(10),
            &json!(3),
            &json!(300),
            &json!({"amount": 1250, "currency": "EUR"}),
            &json!(true),
            &json!(12),
        ),
        "{sale}"
    );

    // A new sale under an id in use replaces nothing.
    ui.click("#new-sale").await;
    ui.fill("#f-id", &made).await;
    ui.fill("#f-name", "Overwritten").await;
    ui.fill("#f-stock", "3").await;
    ui.click("#editor-save").await;
    ui.until_contains("#f-id-error", &format!("Sale {made} exists already"))
        .await;
    assert_eq!(ui.admin_get(&path).await.1["name"], "Made on the console");
    ui.click("#editor-cancel").await;
    assert_eq!(ui.active_id().await, "new-sale", "focus back on New sale");

    // Edit the started sale: more stock is 409, said next to the stock,
    // and the sale unchanged; a new name alone is saved, the start kept to
    // the millisecond.
    let live_path = format!("/admin/sales/{live}");
    let (_, before) = ui.admin_get(&live_path).await;
    ui.click(&format!("tr[data-sale=\"{live}\"] button.watch"))
        .await;
    ui.until_text("#set-name", "Browser test: q").await;
    ui.until(
        "the edit button on",
        "return !document.getElementById('edit-button').disabled",
    )
    .await;
    ui.click("#edit-button").await;
    ui.until_contains("#editor-title", &format!("Edit sale {live}"))
        .await;
    ui.fill("#f-stock", "6").await;
    ui.click("#editor-save").await;
    ui.until_contains("#f-stock-error", "the sale has started")
        .await;
    assert_eq!(
        ui.text("#f-start-error").await,
        "",
        "the start was not changed"
    );
    let (_, after) = ui.admin_get(&live_path).await;
    assert_eq!(
        (&after["totalStock"], &after["name"], &after["startAt"]),
        (&before["totalStock"], &before["name"], &before["startAt"]),
        "a refused edit changed the sale"
    );
    ui.shot("ops-9-edit-refused").await;
    ui.resize(375).await;
    ui.assert_fits("console with a refused edit, 375 px").await;
    ui.shot("ops-9-edit-refused-375").await;
    ui.resize(1280).await;
    ui.fill("#f-stock", "5").await;
    ui.fill("#f-name", "Renamed on the console").await;
    ui.click("#editor-save").await;
    ui.until_contains("#status", &format!("Sale {live} saved"))
        .await;
    ui.until_text("#set-name", "Renamed on the console").await;
    let (_, after) = ui.admin_get(&live_path).await;
    assert_eq!(after["name"], "Renamed on the console");
    assert_eq!(
        (&after["startAt"], &after["endAt"], &after["price"]),
        (&before["startAt"], &before["endAt"], &before["price"]),
        "an edit of the name moved something else"
    );
    ui.assert_fits("console with the form, 1280 px").await;
}

/// The answer of a purchase's code, as `(status, code)`.
async fn bought(ui: &Ui, sale: &str) -> (u16, String) {
    let (status, reply) = ui.buy(sale, &unique("r-buyer"), 1).await;
    (
        status,
        reply["code"].as_str().unwrap_or_default().to_owned(),
    )
}

/// r) Each action asks, is said in words, and the backend obeys it.
pub(super) async fn actions_ask_and_are_obeyed(ui: &Ui) {
    let sale = ui.sale("r", 10, 1, clock::now_ms() - 1_000).await;
    ui.console(Some(&sale)).await;
    ui.until_text("#stock-remaining", "10").await;

    // Pause: a cancel changes nothing; yes is obeyed by the next purchase.
    ui.until(
        "the pause button on",
        "return !document.getElementById('pause-button').disabled",
    )
    .await;
    // By keyboard: Enter asks, the focus on Yes; Escape closes the
    // question and gives the focus back; nothing is paused.
    ui.js("document.getElementById('pause-button').focus(); return true")
        .await;
    ui.keys(&Key::Enter.to_string()).await;
    ui.until_contains("#confirm-text", &format!("Pause sale {sale}?"))
        .await;
    assert_eq!(ui.active_id().await, "confirm-yes", "focus on the answer");
    ui.keys(&Key::Escape.to_string()).await;
    assert!(
        ui.holds("return document.getElementById('confirm').hidden")
            .await
    );
    assert_eq!(ui.active_id().await, "pause-button", "focus back on Pause");
    ui.click("#pause-button").await;
    ui.answer("confirm", false).await;
    assert_eq!(ui.active_id().await, "pause-button", "focus back on Pause");
    assert_eq!(bought(ui, &sale).await.0, 202, "a cancel paused the sale");
    ui.click("#pause-button").await;
    ui.answer("confirm", true).await;
    ui.until_text(
        "#action-result",
        &format!("Sale {sale} is paused: purchases get “paused” from now on."),
    )
    .await;
    assert_eq!(bought(ui, &sale).await, (503, "SALE_PAUSED".into()));
    // Pause is now off: the focus is on the words that say what happened.
    assert_eq!(ui.active_id().await, "action-result");
    ui.until_text("#stock-status", "PAUSED").await;

    ui.until(
        "the resume button on",
        "return !document.getElementById('resume-button').disabled",
    )
    .await;
    ui.click("#resume-button").await;
    ui.answer("confirm", true).await;
    ui.until_text("#action-result", &format!("Sale {sale} sells again."))
        .await;
    assert_eq!(bought(ui, &sale).await.0, 202);

    // Prewarm: Redis already holds it, so it is refreshed, as the audit
    // trail keeps.
    ui.click("#prewarm-button").await;
    ui.answer("confirm", true).await;
    ui.until_text(
        "#action-result",
        &format!("Sale {sale} was already in Redis: refreshed from the table."),
    )
    .await;
    assert_eq!(ui.active_id().await, "prewarm-button");
    let (_, audit) = ui.admin_get(&format!("/admin/sales/{sale}/audit")).await;
    let last = audit["entries"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (&last["action"], &last["actor"], &last["after"]["outcome"]),
        (&json!("prewarm"), &json!("ops"), &json!("REFRESHED")),
        "{audit}"
    );

    // Reconcile, once both orders are written: the report's own figures.
    let written = eventually(STEP, || async {
        let (_, sale) = ui.admin_get(&format!("/admin/sales/{sale}")).await;
        sale["sold"] == 2
    })
    .await;
    assert!(written, "the two orders were not written");
    ui.click("#reconcile-button").await;
    ui.answer("confirm", true).await;
    ui.until_text(
        "#action-result",
        &format!("Reconciled sale {sale}: no violations, 0 repairs; sold 2, available 8."),
    )
    .await;
    let (_, report) = ui.admin_get(&format!("/admin/sales/{sale}/report")).await;
    assert_eq!(
        (&report["sold"], &report["available"]),
        (&json!(2), &json!(8))
    );
    ui.until(
        "the report shown",
        "return document.querySelector('#violations li.none') !== null",
    )
    .await;

    // End now: a cancel leaves it live; yes ends it for the next purchase.
    ui.click("#end-button").await;
    ui.answer("confirm", false).await;
    assert_eq!(bought(ui, &sale).await.0, 202, "a cancel ended the sale");
    ui.click("#end-button").await;
    ui.until_contains("#confirm-text", "cannot be undone").await;
    ui.answer("confirm", true).await;
    ui.until_text(
        "#action-result",
        &format!("Sale {sale} has ended: purchases get “ended” from now on."),
    )
    .await;
    assert_eq!(bought(ui, &sale).await, (410, "SALE_ENDED".into()));
    ui.until_text("#stock-status", "ENDED").await;
    ui.until_text("#set-status", "ENDED").await;
    for button in ["end-button", "pause-button", "resume-button"] {
        ui.until(
            &format!("{button} off once ended"),
            &format!("return document.getElementById('{button}').disabled"),
        )
        .await;
    }
    ui.until_contains("#audit", "ops · end").await;
    ui.shot("ops-9-actions").await;
}

/// s) Orders by id and by buyer; a second payment for a paid order shows
/// as a refund owed.
pub(super) async fn orders_are_found_and_refunds_listed(ui: &Ui) {
    let sale = ui
        .sale_with(
            "s",
            5,
            2,
            clock::now_ms() - 1_000,
            json!({"price": {"amount": 500, "currency": "EUR"}}),
        )
        .await;
    let buyer = format!("auth0|{}", unique("s"));
    let (status, reply) = ui.buy(&sale, &buyer, 2).await;
    assert_eq!(status, 202, "{reply}");
    let order = reply["orderId"].as_str().unwrap().to_owned();
    ui.written(&order).await;

    ui.console(Some(&sale)).await;
    ui.until_text("#stock-remaining", "3").await;
    ui.until_text("#refunds-summary", "No payment is owed back for this sale.")
        .await;
    ui.fill("#lookup-order", &order).await;
    ui.click("#order-lookup button[type=submit]").await;
    let row = format!("#lookup-rows tr[data-order=\"{order}\"]");
    ui.until_text(&format!("{row} .o-status"), "Pending payment")
        .await;
    for (css, want) in [
        (".o-amount", "€10.00"),
        (".o-paid", "–"),
        (".o-refund", "–"),
    ] {
        assert_eq!(ui.text(&format!("{row} {css}")).await, want, "{css}");
    }

    // Paid by the buyer, then paid again by the provider: the order stays
    // paid once, and the second payment is owed back.
    let (status, paid) = ui
        .api("POST", &format!("/orders/{order}/pay"), &buyer, false, "")
        .await;
    assert_eq!(status, 200, "{paid}");
    let payment = unique("pay");
    let body = json!({"paymentId": payment, "orderId": order, "amount": 1000,
                      "currency": "EUR", "status": "SUCCEEDED"})
    .to_string();
    let signature = PaymentKey::new(seckill_infra::local::DEFAULT_PAYMENT_SECRET.as_bytes())
        .sign(clock::now_ms() / 1000, body.as_bytes());
    let (status, reply) = ui
        .stack
        .request(
            "POST",
            "/payments/callback",
            &[
                ("payment-signature", &signature),
                ("content-type", "application/json"),
            ],
            &body,
        )
        .await;
    assert_eq!(
        (status, &reply["outcome"]),
        (200, &json!("REFUND_NEEDED")),
        "{reply}"
    );

    ui.fill("#lookup-buyer", &buyer).await;
    ui.click("#buyer-lookup button[type=submit]").await;
    ui.until_text(
        "#lookup-message",
        &format!("Buyer {buyer} has 1 order in sale {sale}."),
    )
    .await;
    ui.until_text(&format!("{row} .o-status"), "Paid").await;
    assert_eq!(ui.text(&format!("{row} .o-refund")).await, "Owed");
    assert_eq!(ui.text(&format!("{row} .o-amount")).await, "€10.00");
    let paid_at = ui.text(&format!("{row} .o-paid")).await;
    assert!(
        paid_at.contains(&clock::rfc3339_ms(clock::now_ms())[..4]),
        "paid at {paid_at:?}"
    );
    ui.until_contains(
        "#refunds-summary",
        "1 payment to give back through the payment provider",
    )
    .await;
    ui.until_text(
        &format!("#refunds-rows tr[data-payment=\"{payment}\"] td.num"),
        "€10.00",
    )
    .await;
    ui.shot("ops-9-orders").await;

    // No such order, and a buyer without one: said, and no stale row.
    ui.fill("#lookup-order", "no-such-order").await;
    ui.click("#order-lookup button[type=submit]").await;
    ui.until_text("#lookup-message", "There is no order “no-such-order”.")
        .await;
    assert!(
        ui.holds("return document.getElementById('lookup-table').hidden")
            .await
    );
    ui.fill("#lookup-buyer", "AUTH0|nobody").await;
    ui.click("#buyer-lookup button[type=submit]").await;
    ui.until_text(
        "#lookup-message",
        &format!("Buyer AUTH0|nobody has no order in sale {sale}."),
    )
    .await;
}

/// t) Two orders the writer could not write (their sale did not exist
/// yet): the page shows them in the DLQ with why; once the sale exists, a
/// redrive of one from the page writes it, and Redrive all the other.
pub(super) async fn the_dlq_is_shown_and_redriven(ui: &Ui) {
    let sdk = seckill_shared::adapters::aws::sdk_config(
        seckill_shared::adapters::aws::Caller::Tool,
        Duration::from_secs(20),
    )
    .await;
    let sqs = seckill_shared::adapters::aws::sqs(&sdk);
    let sale = unique("t");
    let order = format!("{sale}-o1");
    let buyer = "auth0|dead-letter";
    let (other, other_buyer) = (format!("{sale}-o2"), "auth0|dead-letter-2");
    for (id, user, units) in [(&order, buyer, 2), (&other, other_buyer, 1)] {
        sqs.send_message()
            .queue_url(&ui.stack.queues.orders_url)
            .message_body(order_body(id, &sale, user, units, clock::now_ms()))
            .send()
            .await
            .unwrap();
    }
    // The writer fails it on every receive; the queue moves it to the DLQ
    // after the fifth.
    let dead = eventually(Duration::from_secs(120), || async {
        let (_, dlq) = ui.admin_get("/admin/dlq").await;
        dlq["messages"].as_array().is_some_and(|m| {
            [&order, &other]
                .iter()
                .all(|id| m.iter().any(|m| m["orderId"] == id.as_str()))
        })
    })
    .await;
    assert!(dead, "the orders did not reach the DLQ");

    ui.console(None).await;
    let row = format!("#dlq-rows tr[data-order=\"{order}\"]");
    ui.until_text(
        &format!("{row} .last-error"),
        "the sale is not in the sales table",
    )
    .await;
    let cells: Value = ui
        .js(&format!(
            "return Array.from(document.querySelectorAll({} + ' td')).map((c) => c.textContent)",
            json!(row)
        ))
        .await;
    assert_eq!(
        (&cells[0], &cells[1], &cells[2], &cells[3]),
        (&json!(order), &json!(sale), &json!(buyer), &json!("2")),
        "{cells}"
    );
    let receives: u64 = cells[4].as_str().unwrap().parse().unwrap();
    assert!(receives > 5, "receive count {receives}");
    ui.until_contains("#dlq-count", "2 messages in the DLQ.")
        .await;

    // The cause fixed: the sale exists (opening in an hour, not in Redis).
    let now = clock::now_ms();
    let (status, reply) = ui
        .api(
            "PUT",
            &format!("/admin/sales/{sale}"),
            "browser-admin",
            true,
            &json!({"name": "Browser test: t", "totalStock": 5,
                    "startAt": clock::rfc3339_ms(now + 3_600_000),
                    "endAt": clock::rfc3339_ms(now + 7_200_000), "perUserLimit": 2})
            .to_string(),
        )
        .await;
    assert_eq!(status, 201, "{reply}");

    // Redrive asks; a cancel moves nothing; yes writes the order.
    ui.click(&format!("{row} button.redrive")).await;
    ui.until_contains(
        "#dlq-confirm-text",
        &format!("Send order {order} (sale {sale})"),
    )
    .await;
    ui.answer("dlq-confirm", false).await;
    let (_, dlq) = ui.admin_get("/admin/dlq").await;
    assert!(
        dlq["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["orderId"] == order.as_str()),
        "a cancel moved the message"
    );
    ui.shot("ops-9-dlq").await;
    // A look at the DLQ that began before the redrive (the live view asks
    // on every change of its depth) and answers after it: held here until
    // the redrive is done, it must not list the moved message again.
    ui.js("const real = window.fetch; \
         window.fetch = (url, opts) => { \
           const answer = real(url, opts); \
           if (window.staleLook || !String(url).endsWith('/admin/dlq')) return answer; \
           window.staleLook = 'held'; \
           return new Promise((give) => { window.releaseStaleLook = () => \
             answer.then(async (r) => { \
               give(new Response(await r.text(), { status: r.status, headers: r.headers })); \
               setTimeout(() => { window.staleLook = 'given'; }, 50); \
             }); }); \
         };")
        .await;
    ui.click("#dlq-refresh").await;
    ui.until("a look held", "return window.staleLook === 'held'")
        .await;
    ui.click(&format!("{row} button.redrive")).await;
    ui.answer("dlq-confirm", true).await;
    ui.until_contains("#dlq-message", "Sent 1 message back to the orders queue")
        .await;
    let gone = format!("return document.querySelector({}) === null", json!(row));
    assert!(
        ui.holds(&gone).await,
        "the redriven message is still listed"
    );
    ui.js("window.releaseStaleLook()").await;
    ui.until(
        "the stale look answered",
        "return window.staleLook === 'given'",
    )
    .await;
    assert!(
        ui.holds(&gone).await,
        "a look older than the redrive listed the message again"
    );
    let written = ui.written(&order).await;
    assert_eq!(
        (&written["status"], &written["quantity"], &written["userId"]),
        (&json!("PENDING_PAYMENT"), &json!(2), &json!(buyer))
    );
    ui.until_contains("#dlq-count", "1 message in the DLQ.")
        .await;

    // The rest at once: Redrive all asks too.
    ui.click("#dlq-redrive-all").await;
    ui.until_contains("#dlq-confirm-text", "every message of the DLQ")
        .await;
    ui.answer("dlq-confirm", true).await;
    ui.until_contains("#dlq-message", "Sent 1 message back to the orders queue")
        .await;
    ui.until_contains("#dlq-count", "The DLQ is empty.").await;
    assert_eq!(ui.written(&other).await["status"], "PENDING_PAYMENT");
    let (_, sale_view) = ui.admin_get(&format!("/admin/sales/{sale}")).await;
    assert_eq!(
        (&sale_view["sold"], &sale_view["available"]),
        (&json!(3), &json!(2))
    );
    ui.shot("ops-9-dlq-redriven").await;
}
