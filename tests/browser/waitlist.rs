//! w) The waitlist on both pages, on one sale of one unit:
//! a) a first buyer takes the unit (through the API); a second buyer on
//!    the page sees it sold out, joins the waitlist and is told "1st in
//!    line" and that there is no estimate yet (no unit has come back);
//!    joining again keeps the place; the console's Waitlist card counts
//!    one waiting; a new tab finds the entry again;
//! b) the first buyer's order expires unpaid (its window closed, the
//!    release job run): the unit goes to the waiting buyer as a new order,
//!    the page says OFFERED and shows that order with its pay button by
//!    itself, the buyer pays it and sees it paid;
//! c) a third buyer joins (now with an estimate: a unit has come back),
//!    is asked before leaving (Cancel keeps the place), leaves and sees
//!    LEFT; leaving is final (joining again answers the LEFT entry);
//! d) the console's Waitlist card shows the API's figures (1 offer made,
//!    1 taken, 1 left, 1 unit returned), and "–" for a sale it cannot read.

use super::harness::*;
use seckill_infra::local::Job;
use seckill_shared::clock;
use seckill_tests::{eventually, unique};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The Waitlist card's figures on the console, in the API's names.
const FIGURES: [&str; 6] = ["waiting", "offered", "taken", "expired", "left", "returned"];

/// w) A sale of one unit, its waitlist on the buyer page and the console.
pub(super) async fn a_sold_out_sale_has_a_waitlist(ui: &Ui) {
    let sale = ui
        .sale_with(
            "w",
            1,
            1,
            clock::now_ms() - 1_000,
            json!({"paymentWindowSeconds": 60}),
        )
        .await;
    let first = unique("w-first");
    let waiter = unique("w-waiter");
    let leaver = unique("w-leaver");

    // Each step boxed: the scenarios run in one task on a worker thread's
    // stack, and a debug build's futures are large (unboxed, this one
    // overflowed it in a later scenario's poll).
    let first_order = Box::pin(a_buyer_joins_a_sold_out_sale(ui, &sale, &first, &waiter)).await;
    Box::pin(the_console_counts(
        ui,
        &sale,
        [1, 0, 0, 0, 0, 0],
        "w-2-console-waiting",
    ))
    .await;
    // A new tab: the entry comes back from the API.
    Box::pin(ui.open(&format!("/?sale={sale}"))).await;
    Box::pin(ui.sign_in(&waiter)).await;
    Box::pin(until_waitlist(ui, "WAITING")).await;
    Box::pin(ui.until_contains("#waitlist-state", "1st in line")).await;

    Box::pin(a_returned_unit_is_offered_and_paid(
        ui,
        &sale,
        &first_order,
        &waiter,
    ))
    .await;
    Box::pin(a_buyer_leaves(ui, &sale, &leaver)).await;
    Box::pin(the_console_counts(
        ui,
        &sale,
        [0, 1, 1, 0, 1, 1],
        "w-6-console-after",
    ))
    .await;
    Box::pin(the_console_shows_nothing_it_cannot_read(ui)).await;
}

/// a) Sold out on the page, joined, 1st in line, no estimate yet.
async fn a_buyer_joins_a_sold_out_sale(ui: &Ui, sale: &str, first: &str, waiter: &str) -> String {
    let (status, reply) = ui.buy(sale, first, 1).await;
    assert_eq!(status, 202, "{reply}");
    let first_order = reply["orderId"].as_str().expect("an order id").to_owned();
    let written = ui.written(&first_order).await;
    assert_eq!(written["status"], "PENDING_PAYMENT", "{written}");

    ui.open(&format!("/?sale={sale}")).await;
    ui.sign_in(waiter).await;
    ui.until_pill("SOLD OUT").await;
    until_waitlist(ui, "JOIN").await;
    assert_eq!(ui.text("#waitlist-join").await, "Join the waitlist");
    assert!(
        !visible(ui, "waitlist-leave").await,
        "a leave button before joining"
    );
    // Nobody is in line yet: the API has no entry for this buyer.
    assert_eq!(waitlist_of(ui, sale, waiter).await, Value::Null);
    ui.shot("w-1-sold-out-join").await;

    ui.click("#waitlist-join").await;
    until_waitlist(ui, "WAITING").await;
    ui.until_contains("#waitlist-state", "1st in line").await;
    assert!(
        ui.text("#waitlist-state").await.contains("no one ahead"),
        "{}",
        ui.text("#waitlist-state").await
    );
    ui.until_contains(
        "#waitlist-odds",
        "No unit has come back yet, so there is no estimate",
    )
    .await;
    ui.until_said("WAITLIST", "You are on the waitlist, 1st in line")
        .await;
    assert!(!visible(ui, "waitlist-join").await, "the join button stays");
    assert!(visible(ui, "waitlist-leave").await, "no leave button");
    let view = waitlist_of(ui, sale, waiter).await;
    assert_eq!(
        (
            &view["status"],
            &view["position"],
            &view["ahead"],
            &view["odds"],
            &view["offer"]
        ),
        (
            &json!("WAITING"),
            &json!(1),
            &json!(0),
            &Value::Null,
            &Value::Null
        ),
        "{view}"
    );
    // Joining again keeps the place.
    let (status, again) = join(ui, sale, waiter).await;
    assert_eq!((status, &again["position"]), (200, &json!(1)), "{again}");
    assert_eq!(again["joinedAt"], view["joinedAt"], "{again}");
    ui.shot("w-1-waiting").await;
    ui.resize(375).await;
    ui.assert_fits("buyer page, waitlist, 375 px").await;
    ui.shot("w-1-waiting-375").await;
    ui.resize(1280).await;
    first_order
}

/// b) The first order expires unpaid; the returned unit is offered to the
/// head of the line as a new order, which the page shows and pays.
async fn a_returned_unit_is_offered_and_paid(ui: &Ui, sale: &str, first_order: &str, waiter: &str) {
    ui.close_window_at(first_order, clock::now_ms() - 1_000)
        .await;
    // The release job, as its schedule runs it, until the unit is offered
    // (each run is safe to repeat: an order expires once).
    let deadline = Instant::now() + STEP;
    loop {
        ui.stack.scheduled.invoke(Job::ReleaseUnpaid).await;
        let offered = eventually(Duration::from_secs(2), || async {
            waitlist_of(ui, sale, waiter).await["status"] == "OFFERED"
        })
        .await;
        if offered {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the returned unit was not offered: {}",
            waitlist_of(ui, sale, waiter).await
        );
    }
    let view = waitlist_of(ui, sale, waiter).await;
    let offer = view["offer"]["orderId"]
        .as_str()
        .unwrap_or_else(|| panic!("OFFERED without an order: {view}"))
        .to_owned();
    assert_ne!(offer, first_order, "the offer is a new order");
    assert_eq!(
        (&view["position"], &view["ahead"]),
        (&Value::Null, &Value::Null),
        "a place after the offer: {view}"
    );
    let expired = ui.order_row(first_order).await.expect("the first order");
    assert_eq!(expired.status.as_str(), "EXPIRED", "{expired:?}");

    // The page finds it by itself, and shows the order with its button.
    until_waitlist(ui, "OFFERED").await;
    assert_eq!(ui.text("#waitlist-state").await, "A unit came back for you");
    ui.until_order("PENDING_PAYMENT").await;
    assert_eq!(ui.text("#order-id").await, offer);
    assert!(
        visible(ui, "pay-button").await,
        "no pay button for the offer"
    );
    assert!(
        !visible(ui, "waitlist-leave").await,
        "leave offered after the offer"
    );
    assert!(
        ui.text("#waitlist-note")
            .await
            .contains("pay within its window"),
        "{}",
        ui.text("#waitlist-note").await
    );
    ui.shot("w-3-offered").await;

    ui.click("#pay-button").await;
    ui.until_order("PAID").await;
    ui.until_contains("#waitlist-note", "You paid for it").await;
    let paid = ui.order_row(&offer).await.expect("the offered order");
    assert_eq!(
        (paid.status.as_str(), paid.user_id.as_str()),
        ("PAID", waiter),
        "{paid:?}"
    );
    // Still OFFERED: the entry resolved once, to this order.
    let view = waitlist_of(ui, sale, waiter).await;
    assert_eq!(
        (
            &view["status"],
            &view["offer"]["orderId"],
            &view["offer"]["status"]
        ),
        (&json!("OFFERED"), &json!(offer), &json!("PAID")),
        "{view}"
    );
    ui.shot("w-4-offer-paid").await;
}

/// c) A third buyer joins, is asked before leaving, and leaves for good.
async fn a_buyer_leaves(ui: &Ui, sale: &str, leaver: &str) {
    ui.click("#sign-out").await;
    ui.sign_in(leaver).await;
    ui.until_pill("SOLD OUT").await;
    until_waitlist(ui, "JOIN").await;
    ui.click("#waitlist-join").await;
    until_waitlist(ui, "WAITING").await;
    ui.until_contains("#waitlist-state", "1st in line").await;
    // A unit has come back: the API estimates, and the page says it.
    let view = waitlist_of(ui, sale, leaver).await;
    let odds = &view["odds"];
    assert!(odds["chance"].is_number(), "no odds after a return: {view}");
    ui.until_contains("#waitlist-odds", "an offer before the sale ends")
        .await;
    let words = ui.text("#waitlist-odds").await;
    assert_eq!(
        words.starts_with("The odds are poor"),
        odds["poor"] == json!(true),
        "odds {odds} said as {words:?}"
    );

    // Asked first: Cancel keeps the place.
    ui.click("#waitlist-leave").await;
    ui.until(
        "the question before leaving",
        "return !document.getElementById('waitlist-confirm').hidden",
    )
    .await;
    assert_eq!(ui.active_id().await, "waitlist-confirm-yes");
    ui.shot("w-5-leave-asked").await;
    ui.click("#waitlist-confirm-no").await;
    ui.until(
        "the question closed",
        "return document.getElementById('waitlist-confirm').hidden",
    )
    .await;
    assert_eq!(
        ui.active_id().await,
        "waitlist-leave",
        "focus back on Leave"
    );
    assert_eq!(waitlist_of(ui, sale, leaver).await["status"], "WAITING");

    ui.click("#waitlist-leave").await;
    ui.answer("waitlist-confirm", true).await;
    until_waitlist(ui, "LEFT").await;
    assert_eq!(ui.text("#waitlist-state").await, "You left the waitlist");
    ui.until_said("LEFT", "You left the waitlist").await;
    assert!(
        !visible(ui, "waitlist-join").await,
        "a join button after leaving"
    );
    assert!(
        !visible(ui, "waitlist-leave").await,
        "a leave button after leaving"
    );
    // Leaving is final: joining again answers the LEFT entry, no place.
    let (status, again) = join(ui, sale, leaver).await;
    assert_eq!(
        (status, &again["status"], &again["position"]),
        (200, &json!("LEFT"), &Value::Null),
        "{again}"
    );
    // A reload says the same.
    ui.c.refresh().await.unwrap();
    until_waitlist(ui, "LEFT").await;
    ui.shot("w-5-left").await;
}

/// d) The console's Waitlist card, as the admin API counts: `want` in the
/// order of [`FIGURES`].
async fn the_console_counts(ui: &Ui, sale: &str, want: [u64; 6], shot: &str) {
    let (status, figures) = ui.admin_get(&format!("/admin/sales/{sale}/waitlist")).await;
    assert_eq!(status, 200, "{figures}");
    assert_eq!(figures["saleId"], json!(sale), "{figures}");
    for (name, want) in FIGURES.iter().zip(want) {
        assert_eq!(figures[*name], json!(want), "{name}: {figures}");
    }
    ui.console(Some(sale)).await;
    for (name, want) in FIGURES.iter().zip(want) {
        ui.until_text(&format!("#wl-{name}"), &want.to_string())
            .await;
    }
    ui.until_contains("#updated", &format!("Sale {sale} · updated"))
        .await;
    ui.shot(shot).await;
}

/// d) A sale the console cannot read leaves no figure of the last one.
async fn the_console_shows_nothing_it_cannot_read(ui: &Ui) {
    let unknown = unique("w-none");
    ui.fill("#sale-id", &unknown).await;
    ui.click("#sale-form button[type=submit]").await;
    ui.until_contains("#status", &format!("There is no sale “{unknown}”"))
        .await;
    for name in FIGURES {
        ui.until_text(&format!("#wl-{name}"), "–").await;
    }
}

/// Until the buyer page's waitlist card shows `state` (JOIN, WAITING,
/// OFFERED, LEFT, ENDED).
async fn until_waitlist(ui: &Ui, state: &str) {
    ui.until(
        &format!("the waitlist card {state}"),
        &format!(
            "const w = document.getElementById('waitlist'); \
             return !!w && !w.hidden && w.dataset.state === {}",
            json!(state)
        ),
    )
    .await;
}

/// Whether the element `id` is drawn on the page.
async fn visible(ui: &Ui, id: &str) -> bool {
    ui.holds(&format!(
        "const e = document.getElementById({}); return !!e && e.offsetParent !== null",
        json!(id)
    ))
    .await
}

/// The buyer's waitlist entry as `GET /sales/{id}/orders` shows it.
async fn waitlist_of(ui: &Ui, sale: &str, buyer: &str) -> Value {
    let (status, reply) = ui
        .api("GET", &format!("/sales/{sale}/orders"), buyer, false, "")
        .await;
    assert_eq!(status, 200, "{reply}");
    reply["waitlist"].clone()
}

/// `POST /sales/{id}/waitlist` as `buyer`, through the API.
async fn join(ui: &Ui, sale: &str, buyer: &str) -> (u16, Value) {
    ui.api("POST", &format!("/sales/{sale}/waitlist"), buyer, false, "")
        .await
}
