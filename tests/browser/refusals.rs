//! Every refusal of the purchase and of the payment, said in words.

use super::harness::*;
use seckill_shared::clock;
use seckill_tests::unique;
use serde_json::{Value, json};

/// g) Every refusal of the API in words: the page's fetch answers the
/// purchase (then the payment) with each error the contract names, as the
/// server sends them (status, code, `Retry-After`), and the buyer reads what
/// happened and what to do. The sale, sign-in and the real purchase before
/// the payment errors are real.
pub(super) async fn every_refusal_is_said_in_words(ui: &Ui) {
    let sale = ui.sale("g", 5, 1, clock::now_ms() - 1_000).await;
    ui.open(&format!("/?sale={sale}")).await;
    ui.sign_in(&unique("g-buyer")).await;
    ui.until_buyable("buy button on").await;
    // The next answer to a request whose path ends with `suffix` is this
    // one (once); `null` status: the network fails.
    ui.js(
        "window.realFetch = window.fetch; window.canned = null; \
         window.fetch = async (url, init) => { \
           const c = window.canned; \
           if (c && String(url).endsWith(c.suffix)) { \
             window.canned = null; \
             if (c.status === null) throw new TypeError('Failed to fetch'); \
             const headers = {'content-type': 'application/json'}; \
             if (c.retryAfter) headers['retry-after'] = String(c.retryAfter); \
             return new Response(JSON.stringify({code: c.code, message: c.message}), {status: c.status, headers}); \
           } \
           return window.realFetch(url, init); \
         }; return true",
    )
    .await;
    // The last two leave the button off for good: a limit reached is
    // cleared by signing in as someone else, an ended sale is the end.
    let refusals: [(u16, &str, u32, &str); 9] = [
        (
            425,
            "SALE_NOT_STARTED",
            3,
            "The sale has not started yet: it opens in 3 seconds",
        ),
        (429, "RATE_LIMITED", 2, "You can try again in 2 seconds"),
        (
            503,
            "SALE_PAUSED",
            1,
            "The sale is paused for a moment. Try again in 1 second",
        ),
        (
            403,
            "GATE_REQUIRED",
            0,
            "This sale asks one question before you buy",
        ),
        (
            400,
            "INVALID_REQUEST",
            0,
            "The shop refused the request: quantity must be 1",
        ),
        (500, "INTERNAL", 0, "The shop had a problem (HTTP 500)"),
        (
            0,
            "NETWORK",
            0,
            "we do not know whether the order went through",
        ),
        (
            409,
            "LIMIT_EXCEEDED",
            0,
            "You already hold as many as this sale allows (1 per buyer)",
        ),
        (410, "SALE_ENDED", 0, "The sale has ended"),
    ];
    for (status, code, retry_after, says) in refusals {
        ui.until_buyable(&format!("buy button on before {code}"))
            .await;
        let canned = json!({
            "suffix": "/purchase",
            "status": if status == 0 { Value::Null } else { json!(status) },
            "code": code, "retryAfter": retry_after, "message": "quantity must be 1",
        });
        ui.js(&format!("window.canned = {canned}; return true"))
            .await;
        ui.click("#buy-button").await;
        ui.until_said(code, says).await;
        if code == "LIMIT_EXCEEDED" {
            ui.until(
                "buy button off at the limit",
                "return document.getElementById('buy-button').disabled",
            )
            .await;
            ui.click("#sign-out").await;
            ui.sign_in(&unique("g-other")).await;
        }
    }
    ui.shot("buyer-refused-ended-1280").await;
    assert!(!ui.buy_enabled().await, "the button stays off once ended");

    // The payment's refusals, on a real pending order of a fresh page.
    ui.js("window.fetch = window.realFetch; return true").await;
    let sale = ui.sale("g2", 5, 1, clock::now_ms() - 1_000).await;
    ui.open(&format!("/?sale={sale}")).await;
    ui.sign_in(&unique("g-payer")).await;
    ui.until_buyable("buy button on").await;
    ui.click("#buy-button").await;
    ui.until_order("PENDING_PAYMENT").await;
    for (status, code, says) in [
        (
            409,
            "ORDER_NOT_PAYABLE",
            "This order cannot be paid: it is still being written",
        ),
        (
            404,
            "ORDER_NOT_FOUND",
            "We cannot find this order under your sign-in",
        ),
        (
            409,
            "ORDER_EXPIRED",
            "The payment window closed before payment",
        ),
    ] {
        ui.js(&format!(
            "const f = window.fetch; window.fetch = async (url, init) => {{ \
               if (String(url).endsWith('/pay')) {{ window.fetch = f; \
                 return new Response(JSON.stringify({{code: {code}, message: 'it is still being written'}}), \
                   {{status: {status}, headers: {{'content-type': 'application/json'}}}}); }} \
               return f(url, init); }}; return true",
            code = json!(code),
        ))
        .await;
        ui.until(
            &format!("pay button on before {code}"),
            "const b = document.getElementById('pay-button'); return !b.hidden && !b.disabled",
        )
        .await;
        ui.click("#pay-button").await;
        ui.until_said(code, says).await;
    }
    ui.shot("buyer-pay-expired-1280").await;

    // An answer already on its way never undoes a later one. Seen once
    // under load: the page's own look at the order (sent after
    // ORDER_NOT_PAYABLE) came back after the payment's ORDER_EXPIRED and
    // put "Pay within …" back over the expiry. Here that look is held until
    // the expiry is shown, then let go (on a fresh pending order: the one
    // above is shown expired now). It is sent without the page's own
    // timeout, so it answers however long it was held.
    ui.js("window.fetch = window.realFetch; return true").await;
    let sale = ui.sale("g3", 5, 1, clock::now_ms() - 1_000).await;
    ui.open(&format!("/?sale={sale}")).await;
    ui.sign_in(&unique("g-held")).await;
    ui.until_buyable("buy button on").await;
    ui.click("#buy-button").await;
    ui.until_order("PENDING_PAYMENT").await;
    ui.js(
        "const f = window.realFetch; let pays = 0; window.slowLook = 'none'; \
         window.fetch = async (url, init) => { \
           const u = String(url); \
           if (u.endsWith('/pay')) { pays += 1; \
             const code = pays === 1 ? 'ORDER_NOT_PAYABLE' : 'ORDER_EXPIRED'; \
             return new Response(JSON.stringify({code, message: 'it is still being written'}), \
               {status: 409, headers: {'content-type': 'application/json'}}); } \
           if (u.includes('/orders/') && window.slowLook === 'none') { \
             window.slowLook = 'held'; \
             await new Promise(r => { window.letLookGo = r; }); \
             try { return await f(url, {...init, signal: undefined}); } \
             finally { setTimeout(() => { window.slowLook = 'done'; }, 200); } } \
           return f(url, init); }; return true",
    )
    .await;
    let pay_on = "const b = document.getElementById('pay-button'); return !b.hidden && !b.disabled";
    ui.until("pay button on before the held look", pay_on).await;
    ui.click("#pay-button").await;
    ui.until_said(
        "ORDER_NOT_PAYABLE",
        "This order cannot be paid: it is still being written",
    )
    .await;
    ui.until(
        "the look at the order held",
        "return window.slowLook === 'held'",
    )
    .await;
    ui.until("pay button on during the held look", pay_on).await;
    ui.click("#pay-button").await;
    let expired = "The payment window closed before payment";
    ui.until_said("ORDER_EXPIRED", expired).await;
    ui.js("window.letLookGo(); return true").await;
    ui.until(
        "the held look answered",
        "return window.slowLook === 'done'",
    )
    .await;
    let status = ui.text("#status").await;
    assert!(
        status.contains(expired),
        "an older answer undid the expiry: the page shows {status:?}"
    );
    ui.js("window.fetch = window.realFetch; return true").await;
}
