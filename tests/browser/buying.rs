//! Buying: wait for the start, buy, pay; one purchase per double press;
//! a sold-out sale; a gated sale; a proof-of-work sale.

use super::harness::*;
use fantoccini::Locator;
use fantoccini::actions::{InputSource, MOUSE_BUTTON_LEFT, MouseActions, PointerAction};
use fantoccini::key::Key;
use seckill_shared::clock;
use seckill_tests::unique;
use serde_json::json;

/// a) Sign in before the start; the countdown runs; the button turns on by
/// itself at the start; buy; pending payment; pay; paid.
pub(super) async fn buyer_waits_buys_and_pays(ui: &Ui) {
    // Room for a loaded machine to open the page and sign in before the
    // start (the countdown must still show single-digit seconds).
    let start_ms = clock::now_ms() + 9_000;
    let sale = ui.sale("a", 5, 1, start_ms).await;
    ui.open(&format!("/?sale={sale}")).await;
    ui.until(
        "sale shown",
        "return document.getElementById('sale-name').textContent.startsWith('Browser test')",
    )
    .await;
    let buyer = unique("alice");
    ui.sign_in(&buyer).await;
    assert!(
        clock::now_ms() < start_ms,
        "the sign-in took past the start"
    );
    assert!(!ui.buy_enabled().await, "the button is on before the start");
    assert_eq!(ui.text("#countdown-label").await, "Opens in");
    let countdown = ui.text("#countdown").await;
    assert!(
        countdown.starts_with("00:0") && countdown != "00:00",
        "countdown shows {countdown:?}"
    );
    ui.assert_fits("buyer page, countdown, 1280 px").await;
    ui.shot("buyer-countdown-1280").await;

    ui.until_buyable("buy button on at the start").await;
    let now = clock::now_ms();
    assert!(
        now >= start_ms,
        "the button came on {} ms before the start",
        start_ms - now
    );
    assert_eq!(ui.text("#countdown-label").await, "Open: closes in");

    ui.click("#buy-button").await;
    ui.until_order("PENDING_PAYMENT").await;
    let order_id = ui.text("#order-id").await;
    assert!(ui.text("#status").await.contains("confirmed"));
    let window = ui.text("#pay-window").await;
    assert!(
        window.starts_with("0") && window.contains(':'),
        "pay window {window:?}"
    );
    ui.shot("buyer-pending-1280").await;

    ui.click("#pay-button").await;
    ui.until_order("PAID").await;
    assert!(ui.text("#status").await.starts_with("Paid."));
    assert!(
        ui.js("return document.getElementById('pay-button').hidden")
            .await
            == json!(true)
    );
    ui.shot("buyer-paid-1280").await;

    let row = ui
        .order_row(&order_id)
        .await
        .expect("the order row is written");
    assert_eq!(row.status.as_str(), "PAID", "{row:?}");
    assert_eq!(row.user_id.as_str(), buyer);
    assert_eq!(row.sale_id.as_str(), sale);
}

/// b) Two clicks of the pointer in quick succession, Enter pressed twice,
/// and two clicks from one script: one purchase each, by the gateway's own
/// count and by Redis (one unit and one reservation per buyer).
pub(super) async fn a_second_press_sends_nothing(ui: &Ui) {
    // A limit of 3: a second purchase would be accepted, so only the page
    // stands between a double press and a second order.
    let sale = ui.sale("b", 10, 3, clock::now_ms() - 1_000).await;
    ui.open(&format!("/?sale={sale}")).await;

    // Two clicks of a real pointer, back to back.
    let clicker = unique("b-click");
    ui.sign_in(&clicker).await;
    ui.until_buyable("buy button on").await;
    let before = ui.purchases_served();
    let button = ui.c.find(Locator::Id("buy-button")).await.unwrap();
    let double_click = MouseActions::new("mouse".into())
        .then(PointerAction::MoveToElement {
            element: button,
            duration: None,
            x: 0.0,
            y: 0.0,
        })
        .then(PointerAction::Down {
            button: MOUSE_BUTTON_LEFT,
        })
        .then(PointerAction::Up {
            button: MOUSE_BUTTON_LEFT,
        })
        .then(PointerAction::Down {
            button: MOUSE_BUTTON_LEFT,
        })
        .then(PointerAction::Up {
            button: MOUSE_BUTTON_LEFT,
        });
    ui.c.perform_actions(double_click).await.unwrap();
    // Settled: the order is written, so a second request would have been
    // counted long before.
    ui.until_order("PENDING_PAYMENT").await;
    assert_eq!(
        ui.purchases_served() - before,
        1,
        "a double click sent two purchases"
    );

    // Enter twice on the focused button, in one burst of keys.
    ui.click("#sign-out").await;
    let typist = unique("b-enter");
    ui.sign_in(&typist).await;
    ui.until_buyable("buy button on").await;
    let before = ui.purchases_served();
    ui.js("document.getElementById('buy-button').focus(); return true")
        .await;
    ui.keys(&format!("{}{}", Key::Enter, Key::Enter)).await;
    ui.until_order("PENDING_PAYMENT").await;
    assert_eq!(
        ui.purchases_served() - before,
        1,
        "Enter twice sent two purchases"
    );

    // And two clicks within one task, faster than any hand.
    ui.click("#sign-out").await;
    // Signed out, the page keeps nothing of the last buyer's order: a
    // hidden card that still said PENDING_PAYMENT and its id let the next
    // buyer's wait below end at once, on the wrong order (seen in CI under
    // load: "the order found again after a reload" then failed).
    assert_eq!(
        ui.js("const o = document.getElementById('order'); \
               return [o.hidden, o.dataset.status || '', document.getElementById('order-id').textContent]")
            .await,
        json!([true, "", ""]),
        "the last buyer's order is still on the page"
    );
    let script = unique("b-script");
    ui.sign_in(&script).await;
    ui.until_buyable("buy button on").await;
    let before = ui.purchases_served();
    ui.js("const b = document.getElementById('buy-button'); b.click(); b.click(); return true")
        .await;
    ui.until_order("PENDING_PAYMENT").await;
    assert_eq!(
        ui.purchases_served() - before,
        1,
        "two synchronous clicks sent two purchases"
    );

    let (buyers, reservations) = ui.held(&sale).await;
    for user in [&clicker, &typist, &script] {
        assert_eq!(
            buyers.get(user.as_str()),
            Some(&1),
            "{user} holds {buyers:?}"
        );
        assert_eq!(
            reservations.get(user.as_str()),
            Some(&1),
            "{user}: {reservations:?}"
        );
    }
    assert_eq!(buyers.len(), 3, "{buyers:?}");

    // The answer was lost (another browser, cleared storage): on load the
    // page asks the API for this buyer's orders and shows the one it holds.
    let held = ui
        .js("return document.getElementById('order-id').textContent")
        .await;
    ui.js("localStorage.clear(); sessionStorage.clear(); return true")
        .await;
    ui.open(&format!("/?sale={sale}")).await;
    ui.sign_in(&script).await;
    ui.until(
        "the order found again after a reload",
        &format!("return document.getElementById('order-id').textContent === {held}"),
    )
    .await;
    ui.until_order("PENDING_PAYMENT").await;
}

/// c) The last unit goes to someone else; the page says sold out, whether
/// it learns it from the sale's numbers or from its own purchase.
pub(super) async fn a_sold_out_sale_says_so(ui: &Ui) {
    let sale = ui.sale("c", 1, 1, clock::now_ms() - 1_000).await;
    ui.open(&format!("/?sale={sale}")).await;
    ui.sign_in(&unique("c-late")).await;
    ui.until_buyable("buy button on").await;
    let (status, reply) = ui
        .api(
            "POST",
            &format!("/sales/{sale}/purchase"),
            &unique("c-first"),
            false,
            "{}",
        )
        .await;
    assert_eq!(status, 202, "{reply}");
    // Either the click reaches the API (410 SOLD_OUT) or the page's poll
    // got there first and the button is already off: both say sold out.
    ui.click("#buy-button").await;
    ui.until(
        "sold-out message",
        "return document.getElementById('status').dataset.code === 'SOLD_OUT'",
    )
    .await;
    assert!(
        ui.text("#status").await.starts_with("Sold out"),
        "{}",
        ui.text("#status").await
    );
    ui.until(
        "buy button off",
        "return document.getElementById('buy-button').disabled",
    )
    .await;
    assert!(
        ui.js("return document.getElementById('order').hidden")
            .await
            == json!(true)
    );
    ui.shot("buyer-sold-out-1280").await;
}

/// f) A gated sale: the question shows before the button turns on; a wrong
/// answer is said so; the right one lets the buyer buy.
pub(super) async fn a_gated_sale_asks_first(ui: &Ui) {
    let sale = ui
        .sale_with("f", 5, 1, clock::now_ms() - 1_000, json!({"gate": true}))
        .await;
    ui.open(&format!("/?sale={sale}")).await;
    // A `sub` as Auth0 issues it: the sign-in form takes it, and the gate
    // pass (whose separator is `|`) serves it.
    ui.sign_in(&format!("auth0|{}", unique("f-buyer"))).await;
    ui.until(
        "the question",
        "return !document.getElementById('gate').hidden",
    )
    .await;
    assert!(
        !ui.buy_enabled().await,
        "the button is on before the answer"
    );
    let question = ui.text("#question").await;
    // "What is a + b?"
    let numbers: Vec<i64> = question
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(numbers.len(), 2, "{question}");
    ui.shot("buyer-gate-question-1280").await;
    let answer = ui.c.find(Locator::Id("answer")).await.unwrap();
    answer
        .send_keys(&format!("{}{}", numbers[0] + numbers[1] + 1, Key::Enter))
        .await
        .unwrap();
    ui.until(
        "a wrong answer said so",
        "return document.getElementById('status').dataset.code === 'WRONG_ANSWER'",
    )
    .await;
    assert!(!ui.buy_enabled().await);
    answer.clear().await.unwrap();
    answer
        .send_keys(&format!("{}{}", numbers[0] + numbers[1], Key::Enter))
        .await
        .unwrap();
    ui.until_buyable("the buy button on after the answer").await;
    assert!(ui.js("return document.getElementById('gate').hidden").await == json!(true));
    ui.shot("buyer-gate-passed-1280").await;
    ui.click("#buy-button").await;
    ui.until_order("PENDING_PAYMENT").await;
}

/// u) A proof-of-work sale: nothing to solve before the start; from the
/// start the page says it is checking the browser while a Web Worker
/// solves the challenge at the default difficulty, the page stays
/// responsive, and the pass buys; the second unit takes a second solve.
/// Prints the measured solve time.
pub(super) async fn a_proof_of_work_sale_checks_the_browser(ui: &Ui) {
    let bits = seckill_shared::domain::pow::DEFAULT_POW_BITS;
    let start = clock::now_ms() + 4_000;
    let sale = ui
        .sale_with("u", 5, 2, start, json!({"powBits": bits}))
        .await;
    ui.open(&format!("/?sale={sale}")).await;
    let buyer = unique("u-buyer");
    ui.sign_in(&buyer).await;
    // The longest the page's main thread went without running a timer.
    ui.js("window.__gap = 0; let last = performance.now(); \
         setInterval(() => { const t = performance.now(); \
         window.__gap = Math.max(window.__gap, t - last); last = t; }, 20); return 0;")
        .await;
    assert!(
        clock::now_ms() < start,
        "the sale started before the page was ready: the test cannot see the wait"
    );
    assert_eq!(
        ui.js("return document.getElementById('gate').hidden").await,
        json!(true),
        "the gate shows before the start"
    );
    ui.until(
        "the browser check",
        "const s = document.getElementById('pow-status'); \
         return !document.getElementById('gate').hidden && !s.hidden \
         && s.textContent.includes('Checking your browser')",
    )
    .await;
    assert!(clock::now_ms() >= start, "the check ran before the start");
    assert!(!ui.buy_enabled().await, "the button is on before the check");
    ui.shot("buyer-pow-checking-1280").await;
    ui.until(
        "the pass",
        "return document.getElementById('status').dataset.code === 'POW_PASSED'",
    )
    .await;
    let solved_ms = ui
        .js("return Number(document.getElementById('pow-status').dataset.solvedMs)")
        .await;
    let tried = ui
        .js("return Number(document.getElementById('pow-status').dataset.tried)")
        .await;
    let gap = ui.js("return window.__gap").await;
    let (ms, n) = (solved_ms.as_f64().unwrap(), tried.as_f64().unwrap());
    println!(
        "proof of work at {bits} bits: solved in {ms:.0} ms after {n} hashes \
         ({:.0} hashes/s: {:.0} ms expected for 2^{bits}); the page's longest pause {gap} ms",
        n * 1000.0 / ms.max(1.0),
        (1u64 << bits) as f64 * ms / n
    );
    assert!(
        gap.as_f64().unwrap() < 500.0,
        "the page froze for {gap} ms while solving"
    );
    ui.until_buyable("the buy button on after the check").await;
    assert!(ui.js("return document.getElementById('gate').hidden").await == json!(true));
    ui.click("#buy-button").await;
    ui.until_order("PENDING_PAYMENT").await;
    // The second unit the limit allows: paid for the first, the page
    // solves again (a solution's pass buys once) and buys it.
    ui.click("#pay-button").await;
    ui.until_order("PAID").await;
    ui.until_buyable("the buy button on after the second check")
        .await;
    ui.click("#buy-button").await;
    ui.until_order("PENDING_PAYMENT").await;
    let (status, orders) = ui
        .api("GET", &format!("/sales/{sale}/orders"), &buyer, false, "")
        .await;
    assert_eq!(status, 200, "{orders}");
    assert_eq!(
        orders["orders"].as_array().map(Vec::len),
        Some(2),
        "two purchases, one per solution: {orders}"
    );
}
