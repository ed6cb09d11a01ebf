//! The operator's dashboard: a sale's numbers, Redis unavailable, pause
//! and resume with the audit trail, the funnel's history after a reload.

use super::harness::*;
use seckill_shared::clock;
use seckill_tests::{eventually, unique};
use serde_json::json;

/// d) The dashboard shows a sale the test ran: stock left, orders by
/// status, purchase outcomes, the reconcile report.
pub(super) async fn dashboard_shows_the_sale(ui: &Ui) {
    let sale = ui.sale("d", 5, 1, clock::now_ms() - 1_000).await;
    let buyers: Vec<String> = (0..3).map(|i| unique(&format!("d{i}"))).collect();
    let mut orders = Vec::new();
    for buyer in &buyers {
        let (status, reply) = ui
            .api(
                "POST",
                &format!("/sales/{sale}/purchase"),
                buyer,
                false,
                "{}",
            )
            .await;
        assert_eq!(status, 202, "{reply}");
        orders.push(reply["orderId"].as_str().unwrap().to_owned());
    }
    let (status, _) = ui
        .api(
            "POST",
            &format!("/sales/{sale}/purchase"),
            &buyers[0],
            false,
            "{}",
        )
        .await;
    assert_eq!(status, 409, "a second purchase of a buyer at the limit");
    // The first order written, then paid.
    let written = eventually(STEP, || async {
        ui.api(
            "POST",
            &format!("/orders/{}/pay", orders[0]),
            &buyers[0],
            false,
            "",
        )
        .await
        .0 == 200
    })
    .await;
    assert!(written, "the first order was not written and paid");
    let (status, report) = ui
        .api(
            "POST",
            &format!("/admin/sales/{sale}/reconcile"),
            "browser-admin",
            true,
            "",
        )
        .await;
    assert_eq!(status, 200, "{report}");

    ui.open(&format!("/ops?sale={sale}")).await;
    ui.until(
        "dashboard sign-in",
        "return !document.getElementById('local-signin').hidden",
    )
    .await;
    ui.click("#local-signin button[type=submit]").await;
    for (what, css, want) in [
        ("stock left", "#stock-remaining", "2"),
        ("paid orders", "[data-status=PAID] .count", "1"),
        (
            "pending orders",
            "[data-status=PENDING_PAYMENT] .count",
            "2",
        ),
        ("accepted purchases", "[data-outcome=ACCEPTED] .count", "3"),
        (
            "limit refusals",
            "[data-outcome=LIMIT_EXCEEDED] .count",
            "1",
        ),
        ("queue drained", "#queue-visible", "0"),
    ] {
        ui.until(
            &format!("dashboard {what} {want}"),
            &format!(
                "const e = document.querySelector({}); return !!e && e.textContent.trim() === {}",
                json!(css),
                json!(want)
            ),
        )
        .await;
    }
    ui.until(
        "when the orders were counted",
        "const e = document.getElementById('orders-at'); \
         return !!e && e.textContent.startsWith('Counted at ') && e.dataset.countedAt !== ''",
    )
    .await;
    ui.until(
        "report without violations",
        "return document.querySelector('#violations li.none') !== null",
    )
    .await;
    assert!(ui.text("#report-summary").await.contains("sold"));
    ui.until(
        "the funnel is drawn",
        "return document.querySelectorAll('#funnel path.series').length >= 3",
    )
    .await;

    // Two more sales while it watches: a per-second rate shows up, and the
    // stock runs out.
    for buyer in [unique("d3"), unique("d4")] {
        let (status, _) = ui
            .api(
                "POST",
                &format!("/sales/{sale}/purchase"),
                &buyer,
                false,
                "{}",
            )
            .await;
        assert_eq!(status, 202);
    }
    ui.until(
        "a purchase rate",
        "const e = document.querySelector('[data-outcome=ACCEPTED] .rate'); return !!e && parseFloat(e.textContent) > 0",
    )
    .await;
    ui.until(
        "stock gone",
        "return document.getElementById('stock-remaining').textContent === '0'",
    )
    .await;
    ui.assert_fits("dashboard, 1280 px").await;
    ui.shot("ops-1280").await;
    ui.resize(375).await;
    ui.assert_fits("dashboard, 375 px").await;
    // The chart is drawn again at the new width (labels keep their size).
    ui.until(
        "the funnel redrawn at 375 px",
        "const s = document.querySelector('#funnel svg'); \
         return !!s && Math.abs(s.width.baseVal.value - document.getElementById('funnel').clientWidth) < 2",
    )
    .await;
    ui.shot("ops-375").await;
    ui.resize(1280).await;

    // Redis unreadable: the API answers with those parts null and names the
    // store (faked in the page's fetch on the real answers, as the stack's
    // Redis serves every other test); the page says so, shows "–" there and
    // keeps the rest live. The outcome rows still come from the answer's
    // `outcomeCodes`; a code the page has no words for (added here) is
    // shown as the code itself, after the others.
    ui.js(
        "window.realFetch = window.fetch; \
         window.fetch = async (...args) => { \
           const r = await window.realFetch(...args); \
           if (!String(args[0]).endsWith('/live') || !r.ok) return r; \
           const body = await r.json(); \
           body.stock.remaining = null; body.outcomes = null; body.unavailable = ['redis']; \
           body.outcomeCodes = body.outcomeCodes.concat(['SOME_NEW_CODE']); \
           return new Response(JSON.stringify(body), {status: 200, headers: {'content-type': 'application/json'}}); \
         }; return true",
    )
    .await;
    ui.until(
        "the page says Redis is down",
        "return document.getElementById('status').textContent.includes('cannot read Redis right now')",
    )
    .await;
    for (what, script) in [
        (
            "stock shown as unknown",
            "return document.getElementById('stock-remaining').textContent === '–'",
        ),
        (
            "outcomes shown as unknown",
            "const e = document.querySelector('[data-outcome=ACCEPTED] .count'); return !!e && e.textContent === '–'",
        ),
        (
            "a code without words shown as the code, last",
            "const rows = document.querySelectorAll('[data-outcome]'); \
             const last = rows[rows.length - 1]; \
             return !!last && last.dataset.outcome === 'SOME_NEW_CODE' \
               && last.querySelector('th').textContent === 'SOME_NEW_CODE' \
               && last.querySelector('.count').textContent === '–'",
        ),
        (
            "orders still live",
            "const e = document.querySelector('[data-status=PAID] .count'); return !!e && e.textContent === '1'",
        ),
    ] {
        ui.until(what, script).await;
    }
    ui.shot("ops-redis-down-1280").await;
    ui.js("window.fetch = window.realFetch; return true").await;
    ui.until(
        "the page says every store answers",
        "return document.getElementById('status').textContent.includes('Every store answers again')",
    )
    .await;
    ui.until(
        "stock shown again",
        "return document.getElementById('stock-remaining').textContent === '0'",
    )
    .await;

    // Pause and resume from the dashboard: each asks first; a cancel
    // changes nothing; yes is obeyed by the next purchase.
    ui.until(
        "the pause button on",
        "return !document.getElementById('pause-button').disabled",
    )
    .await;
    ui.click("#pause-button").await;
    ui.until(
        "the pause question",
        "return !document.getElementById('confirm').hidden && document.getElementById('confirm-text').textContent.includes('Pause sale')",
    )
    .await;
    ui.click("#confirm-no").await;
    assert!(
        ui.js("return document.getElementById('confirm').hidden")
            .await
            == json!(true)
    );
    let (_, view) = ui
        .api("GET", &format!("/sales/{sale}"), "x", false, "")
        .await;
    assert_eq!(view["status"], "SOLD_OUT", "a cancel pauses nothing");
    ui.click("#pause-button").await;
    ui.click("#confirm-yes").await;
    ui.until(
        "the status pill says paused",
        "return document.getElementById('stock-status').textContent === 'PAUSED'",
    )
    .await;
    let (status, reply) = ui
        .api(
            "POST",
            &format!("/sales/{sale}/purchase"),
            &unique("d5"),
            false,
            "{}",
        )
        .await;
    assert_eq!((status, reply["code"].as_str()), (503, Some("SALE_PAUSED")));
    ui.shot("ops-paused-1280").await;
    ui.until(
        "the resume button on",
        "return !document.getElementById('resume-button').disabled",
    )
    .await;
    ui.click("#resume-button").await;
    ui.click("#confirm-yes").await;
    ui.until(
        "the status pill says sold out again",
        "return document.getElementById('stock-status').textContent === 'SOLD OUT'",
    )
    .await;
    let (status, reply) = ui
        .api(
            "POST",
            &format!("/sales/{sale}/purchase"),
            &unique("d6"),
            false,
            "{}",
        )
        .await;
    assert_eq!((status, reply["code"].as_str()), (410, Some("SOLD_OUT")));
    // Both actions are in the audit trail on the page, with who did them.
    ui.until(
        "the audit trail shows the pause and the resume",
        "const t = document.getElementById('audit').textContent; \
         return t.includes('pause') && t.includes('resume') && t.includes('ops')",
    )
    .await;

    // The funnel is the API's (kept in Redis with the tally), so a reload
    // draws the whole history again, from the sale's first bucket: 5
    // accepted, the 1 sold out, and 2 other refusals (the limit, the pause).
    let from = eventually(STEP, || async {
        let (_, live) = ui.admin_get(&format!("/admin/sales/{sale}/live")).await;
        live["funnel"][0]["atMs"].is_i64()
            && live["outcomes"]["SOLD_OUT"] == 1
            && live["outcomes"]["SALE_PAUSED"] == 1
    })
    .await;
    assert!(from, "the funnel has no bucket");
    let (_, live) = ui.admin_get(&format!("/admin/sales/{sale}/live")).await;
    let first = live["funnel"][0]["atMs"].as_i64().unwrap();
    let address = ui.c.current_url().await.unwrap();
    ui.c.goto(address.as_str()).await.unwrap();
    let drawn = format!(
        "const s = document.querySelector('#funnel svg'); \
         return !!s && s.getAttribute('data-from') === '{first}' \
           && s.getAttribute('aria-label').endsWith('Accepted 5, Sold out 1, Other refusals 2') \
           && document.querySelectorAll('#funnel path.series').length === 3"
    );
    ui.until("the funnel's history drawn after a reload", &drawn)
        .await;
    ui.shot("ops-9-funnel-after-reload").await;
}
