//! v) The lottery window on both pages.
//!
//! The console makes a lottery sale (its 400s next to the field), shows its
//! window and Draw card, and an edit that changes only the name keeps the
//! window and its seed. Then a sale of one unit with a 5 s window: three
//! buyers (one on the page, two through the API) each get a ticket; the
//! page says "You are in the draw", keeps it over a reload, and from the
//! draw shows the result by itself. Which buyer is on the page is chosen
//! from the seed (read from Redis, where prewarm loaded it) so that the
//! page's buyer is the one the draw decides first: the only winner, who
//! then pays on the page. A loser sees "Not drawn this time" and the sale
//! sold out; the console shows 3 tickets, 3 of 3 decided, done, and the
//! seed the admin API shows. While the draw's lock is held after the
//! window, the page says the draw is running, and a buyer without a ticket
//! (in a second tab) is told their purchase waits for it (`503 DRAWING`)
//! and sent again by itself, then that the draw sold the unit.

use super::harness::*;
use redis::AsyncCommands;
use seckill_shared::adapters::redis::SaleKeys;
use seckill_shared::clock;
use seckill_shared::domain::SaleId;
use seckill_shared::domain::draw::{DrawSeed, draw_order};
use seckill_tests::unique;
use serde_json::{Value, json};
use std::collections::HashMap;

/// The window of the sale the three buyers enter, in seconds.
const WINDOW_S: i64 = 5;

/// v) The lottery window: the console's form and Draw card, the buyer
/// page's ticket and result.
pub(super) async fn a_lottery_sale_draws_its_tickets(ui: &Ui) {
    the_console_makes_and_keeps_a_window(ui).await;
    the_page_enters_the_draw_and_shows_the_result(ui).await;
}

/// The create form's lottery field (the API's 400s next to it, nothing
/// made), the settings and the Draw card before the start, and an edit of
/// the name alone that keeps the window and the seed.
async fn the_console_makes_and_keeps_a_window(ui: &Ui) {
    let made = unique("v-made");
    let path = format!("/admin/sales/{made}");
    let start = (clock::now_ms() / 1000 + 7_200) * 1000;
    ui.console(None).await;
    ui.click("#new-sale").await;
    ui.until(
        "the create form",
        "return !document.getElementById('editor').hidden",
    )
    .await;
    ui.fill("#f-id", &made).await;
    ui.fill("#f-name", "Lottery on the console").await;
    ui.fill("#f-stock", "3").await;
    ui.set_time("#f-start", start).await;
    ui.set_time("#f-end", start + 3_600_000).await;
    ui.fill("#f-limit", "1").await;
    ui.fill("#f-admission", "11").await;
    ui.click("#editor-save").await;
    ui.until_contains(
        "#f-admission-error",
        "admission.window must be an integer from 1 to 10",
    )
    .await;
    assert_eq!(ui.active_id().await, "f-admission", "focus on the field");
    assert_eq!(ui.admin_get(&path).await.0, 404, "a refused sale was made");
    // A window needs one shard: said next to the window, nothing made.
    ui.fill("#f-admission", "3").await;
    ui.fill("#f-shards", "2").await;
    ui.click("#editor-save").await;
    ui.until_contains("#f-admission-error", "one shard").await;
    assert_eq!(ui.text("#f-shards-error").await, "");
    assert_eq!(ui.admin_get(&path).await.0, 404, "a refused sale was made");
    ui.shot("v-1-console-window-error").await;
    ui.fill("#f-shards", "1").await;
    ui.click("#editor-save").await;
    ui.until_contains("#status", &format!("Sale {made} created"))
        .await;
    ui.until_contains("#set-admission", "3 s: tickets until")
        .await;
    let (status, sale) = ui.admin_get(&path).await;
    assert_eq!(status, 200, "{sale}");
    assert_eq!(sale["admission"], json!({"window": 3}), "{sale}");
    let hash = sale["drawSeedHash"]
        .as_str()
        .expect("a seed's hash")
        .to_owned();
    assert!(
        sale.get("drawSeed").is_none(),
        "the seed shown early: {sale}"
    );
    ui.until(
        "the Draw card shown",
        "return !document.getElementById('draw').hidden",
    )
    .await;
    ui.until_text("#draw-hash", &hash).await;
    assert!(
        ui.text("#draw-seed").await.starts_with("secret until"),
        "the seed before the window closes"
    );
    ui.shot("v-2-console-lottery-settings").await;

    // An edit of the name alone: the form sends the window back.
    ui.click("#edit-button").await;
    ui.until(
        "the edit form",
        "return !document.getElementById('editor').hidden",
    )
    .await;
    assert_eq!(
        ui.js("return document.getElementById('f-admission').value")
            .await,
        json!("3"),
        "the edit form lost the window"
    );
    ui.fill("#f-name", "Lottery, renamed").await;
    ui.click("#editor-save").await;
    ui.until_contains("#status", &format!("Sale {made} saved"))
        .await;
    ui.until_text("#set-name", "Lottery, renamed").await;
    let (_, edited) = ui.admin_get(&path).await;
    assert_eq!(
        (
            &edited["name"],
            &edited["admission"],
            &edited["drawSeedHash"]
        ),
        (
            &json!("Lottery, renamed"),
            &json!({"window": 3}),
            &json!(hash)
        ),
        "the edit changed more than the name"
    );
    ui.until_contains("#set-admission", "3 s: tickets until")
        .await;
}

/// The draw seen by three buyers, the page's buyer being the winner.
async fn the_page_enters_the_draw_and_shows_the_result(ui: &Ui) {
    // Room to open the page and sign in before the start.
    let start_ms = clock::now_ms() + 10_000;
    let closes_ms = start_ms + WINDOW_S * 1000;
    let sale = ui
        .sale_with(
            "v",
            1,
            1,
            start_ms,
            json!({"admission": {"window": WINDOW_S}}),
        )
        .await;
    let buyers = [unique("v-a"), unique("v-b"), unique("v-c")];
    let seed = loaded_seed(ui, &sale).await;
    // One unit, one each: the first the draw decides wins, the others lose.
    let order = draw_order(&seed, &buyers);
    let winner = order[0].clone();
    let losers: Vec<String> = order[1..].to_vec();

    ui.open(&format!("/?sale={sale}")).await;
    ui.until(
        "sale shown",
        "return document.getElementById('sale-name').textContent.startsWith('Browser test')",
    )
    .await;
    ui.sign_in(&winner).await;
    ui.until_pill("UPCOMING").await;
    assert!(
        clock::now_ms() < start_ms,
        "the sign-in took past the start"
    );
    let line = ui.sale_line().await;
    assert!(line.buy_off, "{line:?}");
    assert!(line.label.starts_with("Opens in"), "{line:?}");
    assert!(line.hint.contains("tickets for a draw at"), "{line:?}");
    assert_eq!(ui.text("#buy-button").await, "Enter the draw");
    ui.shot("v-3-buyer-before-the-window").await;

    // The window: pill, countdown and button agree; a press is a ticket.
    ui.until_buyable("the button on at the start").await;
    let line = ui.sale_line().await;
    assert_eq!(
        (line.pill.as_str(), line.state.as_str()),
        ("DRAW OPEN", "DRAW_OPEN"),
        "{line:?}"
    );
    assert!(
        line.label.starts_with("Entries for the draw close in"),
        "{line:?}"
    );
    assert!(line.hint.contains("in a random order"), "{line:?}");
    assert_eq!(ui.text("#buy-button").await, "Enter the draw");
    ui.click("#buy-button").await;
    ui.until(
        "the ticket shown",
        "const t = document.getElementById('ticket'); \
         return !t.hidden && t.dataset.status === 'TICKET'",
    )
    .await;
    assert_eq!(ui.text("#ticket-state").await, "You are in the draw");
    ui.until_said("TICKET", "You are in the draw at").await;
    assert_eq!(ui.active_id().await, "ticket", "focus on the ticket");
    assert!(
        ui.js("return document.getElementById('order').hidden")
            .await
            == json!(true)
    );
    for loser in &losers {
        let (status, reply) = ui.buy(&sale, loser, 1).await;
        assert_eq!(status, 202, "{reply}");
        assert_eq!(reply["status"], "TICKET", "{reply}");
        assert!(reply.get("orderId").is_none(), "{reply}");
    }
    // The same buyer again: the same ticket.
    let (status, again) = ui.buy(&sale, &losers[0], 1).await;
    assert_eq!(
        (status, &again["status"]),
        (202, &json!("TICKET")),
        "{again}"
    );
    for buyer in &buyers {
        assert_eq!(ticket_of(ui, &sale, buyer).await["status"], "TICKET");
    }
    // The draw held back: its lock taken, as a purchase running it takes
    // it, before the window closes.
    let lock = hold_draw_lock(ui, &sale).await;
    assert!(
        clock::now_ms() < closes_ms,
        "the three tickets took past the window: the scenario proves nothing"
    );
    ui.shot("v-4-buyer-in-the-draw").await;
    ui.resize(375).await;
    ui.assert_fits("buyer page, ticket, 375 px").await;
    ui.shot("v-4-buyer-in-the-draw-375").await;
    ui.resize(1280).await;
    // A reload before the draw shows the ticket again.
    ui.c.refresh().await.unwrap();
    ui.until(
        "the ticket shown after a reload",
        "const t = document.getElementById('ticket'); \
         return !t.hidden && t.dataset.status === 'TICKET'",
    )
    .await;

    // After the window, while the draw cannot run: the page says it is
    // drawing (pill, countdown and button agree), a purchase is 503
    // DRAWING, and every ticket waits.
    ui.until(
        "the page drawing",
        "return document.getElementById('sale-status').dataset.state === 'DRAWING' \
         && document.getElementById('ticket-state').textContent.startsWith('Drawing')",
    )
    .await;
    assert!(
        clock::now_ms() >= closes_ms,
        "drawing before the window closed"
    );
    let line = ui.sale_line().await;
    assert_eq!(line.pill, "DRAWING", "{line:?}");
    assert!(line.label.starts_with("Drawing the tickets"), "{line:?}");
    assert!(
        line.buy_off && line.hint.contains("You are in the draw at"),
        "{line:?}"
    );
    let (status, reply) = ui.buy(&sale, &unique("v-late"), 1).await;
    assert_eq!(
        (status, &reply["code"]),
        (503, &json!("DRAWING")),
        "{reply}"
    );
    for buyer in &buyers {
        assert_eq!(ticket_of(ui, &sale, buyer).await["status"], "TICKET");
    }
    ui.shot("v-5-buyer-drawing").await;

    // A buyer without a ticket, in another tab: the purchase is held back
    // (503 DRAWING), said, and sent again by itself until the draw is
    // over; then first come, first served: the unit went to the draw.
    let winner_tab = ui.c.window().await.unwrap();
    let tab = ui.c.new_window(true).await.unwrap();
    ui.c.switch_to_window(tab.handle).await.unwrap();
    ui.open(&format!("/?sale={sale}")).await;
    ui.sign_in(&unique("v-late")).await;
    ui.until_buyable("the late buyer's button on").await;
    let before = ui.purchases_served();
    ui.click("#buy-button").await;
    ui.until_said("DRAWING", "being drawn").await;
    ui.until_contains("#buy-hint", "sent again by itself").await;
    let line = ui.sale_line().await;
    assert_eq!(
        (line.pill.as_str(), line.buy_off),
        ("DRAWING", true),
        "{line:?}"
    );
    let again =
        seckill_tests::eventually(STEP, || async { ui.purchases_served() >= before + 2 }).await;
    assert!(again, "the held purchase was not sent again by itself");
    ui.shot("v-6-late-buyer-drawing").await;
    let _: () = ui.redis().await.del(&lock).await.unwrap();
    ui.until_said("SOLD_OUT", "Sold out").await;
    ui.until_pill("SOLD OUT").await;
    ui.c.close_window().await.unwrap();
    ui.c.switch_to_window(winner_tab).await.unwrap();

    // The draw: the page asks for its result by itself.
    ui.until(
        "the ticket won",
        "return document.getElementById('ticket').dataset.status === 'WON'",
    )
    .await;
    assert!(
        clock::now_ms() >= closes_ms,
        "a result before the window closed"
    );
    assert_eq!(ui.text("#ticket-state").await, "Drawn: you won");
    ui.until_order("PENDING_PAYMENT").await;
    let order_id = ui.text("#order-id").await;
    let mut won = Vec::new();
    for buyer in &buyers {
        let ticket = ticket_of(ui, &sale, buyer).await;
        match ticket["status"].as_str() {
            Some("WON") => won.push((buyer.clone(), ticket["orderId"].clone())),
            Some("LOST") => assert_eq!(ticket["orderId"], Value::Null, "{ticket}"),
            _ => panic!("{buyer}: not decided: {ticket}"),
        }
    }
    assert_eq!(
        won,
        vec![(winner.clone(), json!(order_id))],
        "exactly one ticket won: the page's buyer's"
    );
    let written = ui.written(&order_id).await;
    assert_eq!(
        (&written["status"], &written["userId"]),
        (&json!("PENDING_PAYMENT"), &json!(winner))
    );
    let (units, reservations) = ui.held(&sale).await;
    assert_eq!(units, HashMap::from([(winner.clone(), 1)]), "units held");
    assert_eq!(reservations, HashMap::from([(winner.clone(), 1)]));
    ui.shot("v-7-buyer-won").await;

    ui.click("#pay-button").await;
    ui.until_order("PAID").await;
    assert_eq!(
        ui.order_row(&order_id)
            .await
            .map(|o| o.status.as_str().to_owned()),
        Some("PAID".to_owned())
    );
    // A reload after the result shows the same result.
    ui.c.refresh().await.unwrap();
    ui.until_order("PAID").await;
    ui.until(
        "the won ticket after a reload",
        "return document.getElementById('ticket').dataset.status === 'WON'",
    )
    .await;
    ui.shot("v-8-buyer-paid-after-reload").await;

    // A loser on the page: not drawn, and the sale sold out.
    ui.click("#sign-out").await;
    ui.sign_in(&losers[0]).await;
    ui.until(
        "the lost ticket",
        "return document.getElementById('ticket').dataset.status === 'LOST'",
    )
    .await;
    assert_eq!(ui.text("#ticket-state").await, "Not drawn this time");
    ui.until_pill("SOLD OUT").await;
    let line = ui.sale_line().await;
    assert!(line.buy_off && line.hint.contains("Sold out."), "{line:?}");
    ui.shot("v-9-buyer-lost").await;

    // The console: the Draw card, the seed the admin API shows.
    let (_, shown) = ui.admin_get(&format!("/admin/sales/{sale}")).await;
    assert_eq!(
        shown["draw"],
        json!({"tickets": 3, "decided": 3, "total": 3, "done": true}),
        "{shown}"
    );
    assert_eq!(shown["drawSeed"], json!(seed.to_hex()), "{shown}");
    ui.console(Some(&sale)).await;
    ui.until_text("#draw-tickets", "3").await;
    ui.until_text("#draw-progress", "3 of 3 decided · done")
        .await;
    ui.until_text("#draw-seed", &seed.to_hex()).await;
    ui.until_text("#draw-hash", &seed.commitment()).await;
    ui.shot("v-10-console-draw").await;
    ui.resize(375).await;
    ui.assert_fits("console, Draw card, 375 px").await;
    ui.shot("v-10-console-draw-375").await;
    ui.resize(1280).await;
}

/// The draw seed prewarm loaded into Redis: the test reads it there (the
/// admin API shows it only once the window has closed) to know the draw's
/// order in advance.
async fn loaded_seed(ui: &Ui, sale: &str) -> DrawSeed {
    let keys = SaleKeys::new(&SaleId::parse(sale).unwrap());
    let meta: HashMap<String, String> = ui.redis().await.hgetall(&keys.meta).await.unwrap();
    DrawSeed::parse_hex(meta.get("drawSeed").expect("the seed in Redis")).unwrap()
}

/// Takes the draw's lock (for 30 s at most) as a purchase running the draw
/// would: until it is deleted, no purchase draws.
async fn hold_draw_lock(ui: &Ui, sale: &str) -> String {
    let key = format!("sale:{{{sale}}}:lock:draw");
    let taken: Option<String> = redis::cmd("SET")
        .arg(&key)
        .arg("browser-test")
        .arg("NX")
        .arg("PX")
        .arg(30_000)
        .query_async(&mut ui.redis().await)
        .await
        .unwrap();
    assert!(taken.is_some(), "the draw's lock was taken already");
    key
}

/// The buyer's ticket as `GET /sales/{id}/orders` shows it.
async fn ticket_of(ui: &Ui, sale: &str, buyer: &str) -> Value {
    let (status, reply) = ui
        .api("GET", &format!("/sales/{sale}/orders"), buyer, false, "")
        .await;
    assert_eq!(status, 200, "{reply}");
    reply["ticket"].clone()
}
