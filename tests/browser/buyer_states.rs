//! The buyer page in every state a buyer meets,
//! each scenario on its own sale:
//! i) an order's payment window closes: expired at once, in words, from the
//!    page's own clock and from the API's `EXPIRED`; the unit comes back;
//! j) a quantity up to what the buyer may still hold; more after a paid
//!    order; a new tab finds the orders and the allowance; off at the limit;
//! k) a bad or unknown sale id: an error, no buy button, never another sale;
//! l) paused: the button off with the reason; the pill, the countdown and
//!    the button agree when upcoming, live, paused, sold out and ended;
//! m) the amount before paying and a receipt after (EUR; JPY without minor
//!    units);
//! n) the start and end as dates and times in the buyer's time zone;
//! o) focus after Buy and Pay, the skip link, no gate request for a sale
//!    without a gate, sign-out, a steady header, a bad name, the stock bar.

use super::harness::*;
use fantoccini::Locator;
use fantoccini::key::Key;
use seckill_infra::local::Job;
use seckill_shared::clock;
use seckill_tests::unique;
use serde_json::json;
use std::time::Duration;

/// The quantities the page offers ([] when it offers no choice at all).
async fn quantities(ui: &Ui) -> Vec<String> {
    let v = ui
        .js("const q = document.getElementById('quantity'); \
             return q ? Array.from(q.options, (o) => o.value) : []")
        .await;
    serde_json::from_value(v).unwrap()
}

async fn shown(ui: &Ui, id: &str) -> bool {
    ui.holds(&format!(
        "const e = document.getElementById({}); return !!e && e.offsetParent !== null",
        json!(id)
    ))
    .await
}

/// i) The window closes: the page says so at once, whatever the API is
/// doing, then a new tab hears it from the API; the release job returns
/// the unit, and the buyer may buy again.
pub(super) async fn an_order_expires_in_words(ui: &Ui) {
    let sale = ui
        .sale_with(
            "i",
            5,
            1,
            clock::now_ms() - 1_000,
            json!({"paymentWindowSeconds": 60}),
        )
        .await;
    ui.open(&format!("/?sale={sale}")).await;
    let buyer = unique("i-buyer");
    ui.sign_in(&buyer).await;
    ui.until_buyable("buy button on").await;
    ui.click("#buy-button").await;
    ui.until_order("PENDING_PAYMENT").await;
    let order_id = ui.text("#order-id").await;
    // A sale without a price: no amount anywhere.
    assert_eq!(ui.text("#pay-button").await, "Pay now");
    assert!(!shown(ui, "order-amount-box").await);
    assert!(!shown(ui, "price-box").await);

    // Its window now closes in 6 s; the page reads that on a reload.
    let closes = clock::now_ms() + 6_000;
    ui.close_window_at(&order_id, closes).await;
    ui.c.refresh().await.unwrap();
    ui.until(
        "the window's new end read",
        "return document.getElementById('pay-window').textContent.startsWith('00:0')",
    )
    .await;
    // From here every look at the order is held: the page knows from its
    // own clock, as it must when the API is slow or the release job late.
    ui.js("window.realFetch = window.fetch; window.heldLooks = 0; \
         window.fetch = (url, init) => String(url).includes('/orders/') \
           ? (window.heldLooks += 1, new Promise(() => {})) : window.realFetch(url, init); \
         return true")
        .await;
    let expired = "const o = document.getElementById('order'); \
        return o.dataset.status === 'EXPIRED' \
          && document.getElementById('status').textContent.includes('went back on sale') \
          && document.getElementById('order-note').textContent.includes('went back on sale') \
          && document.getElementById('pay-button').hidden \
          && document.getElementById('pay-window-box').hidden \
          && !document.body.innerText.includes('Pay within')";
    let within = Duration::from_millis((closes + 3_000 - clock::now_ms()).max(0) as u64);
    ui.until_within("the expiry said at once", expired, within)
        .await;
    assert!(
        clock::now_ms() >= closes,
        "expired shown before the window closed"
    );
    assert_eq!(ui.text("#order-state").await, "Expired: not paid in time");
    ui.shot("buyer-1-expired").await;

    // The API answers EXPIRED from the same instant: a new tab shows it.
    let (status, order) = ui
        .api("GET", &format!("/orders/{order_id}"), &buyer, false, "")
        .await;
    assert_eq!((status, order["status"].as_str()), (200, Some("EXPIRED")));
    ui.open(&format!("/?sale={sale}")).await;
    ui.sign_in(&buyer).await;
    ui.until_order("EXPIRED").await;
    ui.until(
        "the API's expiry said",
        "return document.getElementById('status').textContent.includes('went back on sale')",
    )
    .await;
    assert_eq!(ui.text("#order-id").await, order_id);
    // The limit is 1 and that unit is no longer held: buy again.
    ui.until_buyable("buy button on after the expiry").await;

    // The release job returns the unit: the ledger and Redis agree.
    ui.stack.scheduled.invoke(Job::ReleaseUnpaid).await;
    let row = ui.order_row(&order_id).await.unwrap();
    assert_eq!(row.status.as_str(), "EXPIRED", "{row:?}");
    let (buyers, _) = ui.held(&sale).await;
    assert_eq!(buyers.get(&buyer).copied().unwrap_or(0), 0, "{buyers:?}");
    let (_, view) = ui
        .api("GET", &format!("/sales/{sale}"), &buyer, false, "")
        .await;
    assert_eq!(view["remaining"], 5, "{view}");
}

/// j) A quantity up to the allowance; more after a paid order; a new tab
/// finds the orders (the API's list) and what is left to buy; off with the
/// reason at the limit.
pub(super) async fn a_buyer_buys_up_to_the_limit(ui: &Ui) {
    let sale = ui.sale("j", 10, 3, clock::now_ms() - 1_000).await;
    ui.open(&format!("/?sale={sale}")).await;
    let buyer = unique("j-buyer");
    ui.sign_in(&buyer).await;
    ui.until_buyable("buy button on").await;
    assert_eq!(quantities(ui).await, ["1", "2", "3"]);
    assert!(
        ui.text("#allowance")
            .await
            .ends_with("you may buy up to 3 more."),
        "{}",
        ui.text("#allowance").await
    );
    ui.c.find(Locator::Id("quantity"))
        .await
        .unwrap()
        .select_by_value("2")
        .await
        .unwrap();
    ui.until(
        "the button says 2",
        "return document.getElementById('buy-button').textContent === 'Buy 2 now'",
    )
    .await;
    ui.click("#buy-button").await;
    ui.until_order("PENDING_PAYMENT").await;
    let first = ui.text("#order-id").await;
    assert_eq!(ui.text("#order-quantity").await, "2");
    // Nothing more until this one is paid or gone.
    assert!(!ui.buy_enabled().await);
    ui.click("#pay-button").await;
    ui.until_order("PAID").await;
    ui.until_buyable("buy button on after a paid order of 2 of 3")
        .await;
    assert_eq!(quantities(ui).await, ["1"]);
    assert!(
        ui.text("#allowance")
            .await
            .contains("you hold 2, so you may buy up to 1 more.")
    );
    ui.shot("buyer-2-more-after-paid").await;

    // A new tab: nothing kept but the sign-in; the API lists the orders.
    ui.open(&format!("/?sale={sale}")).await;
    ui.sign_in(&buyer).await;
    ui.until_order("PAID").await;
    assert_eq!(ui.text("#order-id").await, first);
    ui.until_buyable("buy button on in a new tab").await;
    assert!(
        ui.text("#allowance")
            .await
            .contains("you hold 2, so you may buy up to 1 more."),
        "{}",
        ui.text("#allowance").await
    );
    ui.click("#buy-button").await;
    ui.until(
        "the second order shown",
        &format!(
            "return document.getElementById('order').dataset.status === 'PENDING_PAYMENT' \
             && document.getElementById('order-id').textContent !== {}",
            json!(first)
        ),
    )
    .await;
    ui.click("#pay-button").await;
    ui.until_order("PAID").await;
    ui.until(
        "the limit said",
        "return document.getElementById('buy-button').disabled \
         && document.getElementById('buy-hint').textContent.startsWith('You hold 3 of the 3 allowed per buyer')",
    )
    .await;
    assert!(ui.text("#other-orders").await.contains(&first));
    ui.shot("buyer-2-limit-reached").await;

    let (buyers, _) = ui.held(&sale).await;
    assert_eq!(buyers.get(&buyer), Some(&3), "{buyers:?}");
    let (_, list) = ui
        .api("GET", &format!("/sales/{sale}/orders"), &buyer, false, "")
        .await;
    let statuses: Vec<(i64, &str)> = list["orders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["quantity"].as_i64().unwrap(),
                o["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(statuses, [(1, "PAID"), (2, "PAID")], "{list}");
}

/// k) A link with a bad sale id, or one of no sale: said so, no buy button,
/// no sign-in, never another sale, even for a buyer already signed in.
pub(super) async fn a_bad_sale_link_sells_nothing(ui: &Ui) {
    let (_, demo) = ui
        .api(
            "GET",
            &format!("/sales/{}", ui.stack.demo_sale),
            "k",
            false,
            "",
        )
        .await;
    let demo_name = demo["name"].as_str().unwrap().to_owned();
    // Signed in on a real sale first: the session is kept across the links.
    let real = ui.sale("k", 5, 1, clock::now_ms() - 1_000).await;
    ui.open(&format!("/?sale={real}")).await;
    ui.sign_in(&unique("k-buyer")).await;
    ui.until_buyable("buy button on").await;

    let unknown = unique("k-none");
    for (path, says, shot) in [
        (
            "/?sale=bad%20id".to_owned(),
            "This link does not name a sale: “bad id” is not a sale id.",
            "buyer-3-bad-id",
        ),
        (
            format!("/?sale={unknown}"),
            "There is no sale called",
            "buyer-3-unknown-id",
        ),
    ] {
        // Off the last page first, so none of its polls is counted here.
        ui.c.goto("about:blank").await.unwrap();
        let asked = ui.served("GET", "/sales/{saleId}");
        ui.c.goto(&format!("{}{path}", ui.base)).await.unwrap();
        ui.until(
            &format!("{shot}: the error said"),
            &format!(
                "return document.getElementById('status').textContent.includes({})",
                json!(says)
            ),
        )
        .await;
        assert_eq!(ui.text("#sale-name").await, "No such sale");
        assert!(!shown(ui, "buy-button").await, "{path}: a buy button");
        assert!(!shown(ui, "signin").await, "{path}: a sign-in form");
        assert!(!shown(ui, "countdown-box").await, "{path}: a countdown");
        let page = ui.js("return document.body.innerText").await;
        assert!(
            !page.as_str().unwrap().contains(&demo_name),
            "{path}: the demo sale shown: {page}"
        );
        if path.contains("bad") {
            // Not even asked for: a bad id names nothing to ask about.
            assert_eq!(ui.served("GET", "/sales/{saleId}"), asked, "{path}");
        }
        ui.shot(shot).await;
    }
}

/// The pill, the countdown's label and the button agree with each other.
fn agrees(line: &SaleLine, pill: &str, label: &str, buyable: bool, hint: &str) {
    assert_eq!(line.pill, pill, "{line:?}");
    assert!(line.label.starts_with(label), "{line:?}");
    assert_eq!(!line.buy_off, buyable, "{line:?}");
    assert!(line.hint.contains(hint), "{line:?}");
}

/// l) Upcoming, live, paused, live again, sold out, ended: one status on
/// the pill, the countdown and the button each time.
pub(super) async fn a_paused_sale_says_why(ui: &Ui) {
    let upcoming = ui.upcoming_sale("l-up", clock::now_ms() + 3_600_000).await;
    ui.open(&format!("/?sale={upcoming}")).await;
    ui.sign_in(&unique("l-early")).await;
    ui.until_pill("UPCOMING").await;
    agrees(
        &ui.sale_line().await,
        "UPCOMING",
        "Opens in",
        false,
        "turns on by itself when the sale opens",
    );

    let sale = ui.sale("l", 2, 1, clock::now_ms() - 1_000).await;
    ui.open(&format!("/?sale={sale}")).await;
    ui.sign_in(&unique("l-buyer")).await;
    ui.until_buyable("buy button on").await;
    agrees(&ui.sale_line().await, "LIVE", "Open: closes in", true, "");

    let (status, reply) = ui
        .admin("POST", &format!("/admin/sales/{sale}/pause"))
        .await;
    assert_eq!(status, 200, "{reply}");
    ui.until(
        "the button off while paused",
        "return document.getElementById('sale-status').textContent === 'PAUSED' \
         && document.getElementById('buy-button').disabled",
    )
    .await;
    let line = ui.sale_line().await;
    agrees(&line, "PAUSED", "Paused", false, "paused the sale");
    assert_eq!(line.state, "PAUSED");
    ui.until_said("SALE_PAUSED", "paused").await;
    ui.shot("buyer-4-paused").await;

    let (status, _) = ui
        .admin("POST", &format!("/admin/sales/{sale}/resume"))
        .await;
    assert_eq!(status, 200);
    ui.until_buyable("buy button on after the resume").await;
    agrees(&ui.sale_line().await, "LIVE", "Open: closes in", true, "");

    for _ in 0..2 {
        let (status, reply) = ui
            .api(
                "POST",
                &format!("/sales/{sale}/purchase"),
                &unique("l-other"),
                false,
                "{}",
            )
            .await;
        assert_eq!(status, 202, "{reply}");
    }
    ui.until_pill("SOLD OUT").await;
    agrees(
        &ui.sale_line().await,
        "SOLD OUT",
        "Sold out",
        false,
        "Sold out.",
    );
    ui.shot("buyer-4-sold-out").await;

    let (status, reply) = ui.admin("POST", &format!("/admin/sales/{sale}/end")).await;
    assert_eq!(status, 200, "{reply}");
    ui.until_pill("ENDED").await;
    let line = ui.sale_line().await;
    agrees(&line, "ENDED", "Closed", false, "The sale has ended.");
    assert_eq!(line.countdown, "Ended");
    ui.shot("buyer-4-ended").await;
}

/// m) The amount before paying, the receipt after; JPY has no minor units.
pub(super) async fn the_amount_and_the_receipt(ui: &Ui) {
    let sale = ui
        .sale_with(
            "m",
            10,
            2,
            clock::now_ms() - 1_000,
            json!({"price": {"amount": 1250, "currency": "EUR"}}),
        )
        .await;
    ui.open(&format!("/?sale={sale}")).await;
    ui.until(
        "the price shown",
        "return document.getElementById('price').textContent === '€12.50'",
    )
    .await;
    let buyer = unique("m-buyer");
    ui.sign_in(&buyer).await;
    ui.until_buyable("buy button on").await;
    ui.c.find(Locator::Id("quantity"))
        .await
        .unwrap()
        .select_by_value("2")
        .await
        .unwrap();
    ui.until(
        "the total on the button",
        "return document.getElementById('buy-button').textContent === 'Buy 2 for €25.00'",
    )
    .await;
    ui.click("#buy-button").await;
    ui.until_order("PENDING_PAYMENT").await;
    let order_id = ui.text("#order-id").await;
    assert_eq!(ui.text("#pay-button").await, "Pay 2 × €12.50 = €25.00");
    assert_eq!(ui.text("#order-amount").await, "€25.00");
    assert!(
        ui.text("#status").await.contains("Pay €25.00 within"),
        "{}",
        ui.text("#status").await
    );
    ui.shot("buyer-5-amount").await;

    ui.click("#pay-button").await;
    ui.until_order("PAID").await;
    assert!(shown(ui, "receipt").await, "no receipt");
    let (_, order) = ui
        .api("GET", &format!("/orders/{order_id}"), &buyer, false, "")
        .await;
    assert_eq!(order["amount"], json!({"amount": 2500, "currency": "EUR"}));
    assert_eq!(ui.text("#order-quantity").await, "2");
    assert_eq!(ui.text("#paid-amount").await, "€25.00");
    assert_eq!(
        ui.text("#payment-id").await,
        order["paymentId"].as_str().unwrap()
    );
    let paid_at = order["paidAt"].as_str().unwrap();
    assert!(
        ui.holds(&format!(
            "const t = document.getElementById('paid-at'); \
             return Date.parse(t.dateTime) === Date.parse({}) && t.textContent.length > 10",
            json!(paid_at)
        ))
        .await,
        "the receipt's paid time is not {paid_at}"
    );
    let row = ui.order_row(&order_id).await.unwrap();
    assert_eq!(row.status.as_str(), "PAID");
    ui.shot("buyer-5-receipt").await;

    // Yen: 1500 minor units are ¥1,500, not ¥15.00.
    let yen = ui
        .sale_with(
            "m-yen",
            10,
            1,
            clock::now_ms() - 1_000,
            json!({"price": {"amount": 1500, "currency": "JPY"}}),
        )
        .await;
    ui.open(&format!("/?sale={yen}")).await;
    ui.until(
        "the yen price shown",
        "return document.getElementById('price').textContent.endsWith('¥1,500')",
    )
    .await;
    ui.sign_in(&unique("m-yen")).await;
    ui.until_buyable("buy button on").await;
    let price = ui.text("#price").await;
    ui.click("#buy-button").await;
    ui.until_order("PENDING_PAYMENT").await;
    assert_eq!(ui.text("#pay-button").await, format!("Pay {price}"));
}

/// n) The start and the end in the buyer's time zone, named: a buyer in
/// India (UTC+05:30, no summer time) reads them in Indian time.
pub(super) async fn times_in_the_buyers_zone(ui: &Ui) {
    ui.time_zone("Asia/Kolkata").await;
    let start_ms = clock::now_ms() + 2 * 3_600_000;
    let sale = ui.upcoming_sale("n", start_ms).await;
    ui.open(&format!("/?sale={sale}")).await;
    // ICU may name it by its older name.
    let zone = ui
        .js("return Intl.DateTimeFormat().resolvedOptions().timeZone")
        .await;
    let zone = zone.as_str().unwrap_or_default().to_owned();
    assert!(
        ["Asia/Kolkata", "Asia/Calcutta"].contains(&zone.as_str()),
        "the browser did not take the time zone: {zone}"
    );
    ui.until(
        "the start shown",
        "return document.getElementById('starts').textContent.length > 5",
    )
    .await;
    // What a clock in India reads: UTC plus 5 h 30 (the same instant), in
    // the browser's own locale's style (24 h "22:37" or 12 h "10:37 PM").
    let local = |ms: i64| {
        let ist = clock::rfc3339_ms(ms + 19_800_000);
        let day: u32 = ist[8..10].parse().unwrap();
        let hour: u32 = ist[11..13].parse().unwrap();
        let minute = &ist[14..16];
        let twelve = format!(
            "{}:{minute} {}",
            (hour + 11) % 12 + 1,
            if hour < 12 { "AM" } else { "PM" }
        );
        (day.to_string(), [format!("{hour:02}:{minute}"), twelve])
    };
    for (id, ms) in [("starts", start_ms), ("ends", start_ms + 3_600_000)] {
        let (day, hm) = local(ms);
        let text = ui.text(&format!("#{id}")).await;
        assert!(
            hm.iter().any(|hm| text.contains(hm.as_str())) && text.contains(&day),
            "#{id} shows {text:?}, not {day} … {hm:?} in {zone}"
        );
        // Exactly what the browser's Intl writes for that instant in India.
        let india = ui
            .js(&format!(
                "return new Intl.DateTimeFormat(undefined, {{weekday: 'short', day: 'numeric', \
                   month: 'short', year: 'numeric', hour: '2-digit', minute: '2-digit', \
                   timeZoneName: 'short', timeZone: 'Asia/Kolkata'}}).format(new Date({ms}))"
            ))
            .await;
        assert_eq!(json!(text), india, "#{id}");
        assert!(
            ui.holds(&format!(
                "return Date.parse(document.getElementById({}).dateTime) === {ms}",
                json!(id)
            ))
            .await,
            "#{id}'s datetime is not the instant"
        );
    }
    assert!(
        ui.text("#zone").await.contains(&zone),
        "{}",
        ui.text("#zone").await
    );
    assert_eq!(ui.sale_line().await.label, "Opens in");
    ui.shot("buyer-6-time-zone").await;
    ui.time_zone("").await;
}

/// o) The small things: focus after Buy and Pay, the skip link, no gate
/// request for a sale without a gate, sign-out said, the header steady on
/// sign-in, a bad name in the page's words, a full stock bar not red.
pub(super) async fn the_small_things(ui: &Ui) {
    let sale = ui.sale("o", 10, 1, clock::now_ms() - 1_000).await;
    let challenges = ui.served("GET", "/sales/{saleId}/challenge");
    let header = "return document.querySelector('header').getBoundingClientRect().height";
    for width in [375, 1280] {
        ui.resize(width).await;
        ui.open(&format!("/?sale={sale}")).await;
        ui.until(
            "sign-in form shown",
            "return !document.getElementById('local-signin').hidden",
        )
        .await;
        let out = ui.js(header).await;
        // A long name, as identity providers issue them.
        ui.sign_in(&unique("o-a-rather-long-user-name@example.com"))
            .await;
        let signed_in = ui.js(header).await;
        assert_eq!(out, signed_in, "the header jumps on sign-in at {width} px");
        ui.assert_fits(&format!("signed in, {width} px")).await;
    }

    // The skip link, signed out, goes to the sign-in form.
    ui.click("#sign-out").await;
    ui.until_said("SIGNED_OUT", "You are signed out").await;
    assert_eq!(ui.active_id().await, "user");
    ui.js("document.getElementById('skip').focus(); return true")
        .await;
    ui.keys(&Key::Enter.to_string()).await;
    assert_eq!(ui.active_id().await, "user", "the skip link, signed out");

    // An empty name: the page's own words, on the field.
    ui.js("document.getElementById('user').value = ''; return true")
        .await;
    ui.click("#local-signin button[type=submit]").await;
    ui.until(
        "a bad name said by the page",
        "return document.getElementById('user-error').textContent.startsWith('Enter a user name')",
    )
    .await;
    assert_eq!(ui.active_id().await, "user");
    assert!(
        ui.holds("return document.getElementById('user').getAttribute('aria-invalid') === 'true'")
            .await
    );
    ui.shot("buyer-7-bad-name").await;

    let buyer = unique("o-buyer");
    ui.sign_in(&buyer).await;
    ui.until_buyable("buy button on").await;
    // Full: the bar is not the alarm's red.
    let colour = ui
        .js("return getComputedStyle(document.getElementById('stock-bar')).accentColor")
        .await;
    assert_ne!(colour, json!("rgb(180, 35, 47)"), "a full stock bar is red");
    // Signed in, the skip link goes to the buy button.
    ui.js("document.getElementById('skip').focus(); return true")
        .await;
    ui.keys(&Key::Enter.to_string()).await;
    assert_eq!(
        ui.active_id().await,
        "buy-button",
        "the skip link, signed in"
    );

    // Buy and pay by keyboard: the focus follows the control that changed.
    ui.keys(&Key::Enter.to_string()).await;
    ui.until_order("PENDING_PAYMENT").await;
    ui.until(
        "the focus on the pay button after Buy",
        "return document.activeElement.id === 'pay-button'",
    )
    .await;
    ui.keys(&Key::Enter.to_string()).await;
    ui.until_order("PAID").await;
    ui.until(
        "the focus on the order after Pay",
        "return document.activeElement.id === 'order'",
    )
    .await;
    ui.shot("buyer-7-focus-after-pay").await;

    // Not one question asked for a sale without a gate.
    assert_eq!(
        ui.served("GET", "/sales/{saleId}/challenge") - challenges,
        0,
        "GET /challenge for a sale without a gate"
    );
    let (buyers, _) = ui.held(&sale).await;
    assert_eq!(buyers.get(&buyer), Some(&1), "{buyers:?}");
}
