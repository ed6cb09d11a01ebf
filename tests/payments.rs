//! Money: a sale's price, each order's amount, expiry seen at
//! once, and the payment provider's callback (`POST /payments/callback`)
//! through the real orders-api handler, against real Redis and the
//! emulator's DynamoDB. Each test has its own sale, tables and queue.
//!
//! The callback: a bad signature (missing, malformed, wrong key, tampered
//! body), a replayed one (signed more than 300 s ago), a bad body, an
//! unknown order and a wrong amount change nothing; a payment id is applied
//! once (a retry is the same answer); a payment that comes after the window
//! closed, or for an order another payment paid, is recorded
//! `REFUND_NEEDED` and never sells the unit twice; callbacks fired at once,
//! and racing the release job, have exactly one effect. `POST
//! /orders/{id}/pay` goes through the same settlement.

use seckill_infra::token::TokenSettings;
use seckill_shared::adapters::dynamo::orders::DynamoOrders;
use seckill_shared::clock;
use seckill_shared::domain::money::{Currency, Money};
use seckill_shared::domain::orders::{Order, OrderStatus};
use seckill_shared::domain::payment::PaymentKey;
use seckill_shared::domain::{OrderId, PaymentId, Sale};
use seckill_shared::ports::{ExpireOutcome, OrderStore, PaymentOutcome, PaymentStore};
use seckill_tests::{
    App, LocalStack, Reply, StackClient, TEST_PAYMENT_SECRET, eventually, invoke_writer, live_sale,
    order_body, sqs_event,
};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CALLBACK_EVENT: &str = include_str!("../events/payments-callback.json");
const PAY_EVENT: &str = include_str!("../events/orders-pay.json");
const GET_ORDER_EVENT: &str = include_str!("../events/orders-get.json");
const MY_ORDERS_EVENT: &str = include_str!("../events/sales-orders.json");

fn eur(amount: u64) -> Money {
    Money {
        amount,
        currency: Currency::parse("EUR").unwrap(),
    }
}

/// A live sale at 19.99 EUR a unit (or none), its orders written straight
/// through the order-writer, and the orders API that reads and pays them.
struct Shop {
    app: App,
    sale: Sale,
    queries: Arc<orders_api::LiveQueries>,
    store: Arc<DynamoOrders>,
    writer: Arc<order_writer::LiveWriter>,
}

impl Shop {
    async fn open(stock: u32, price: Option<Money>, window_secs: u32) -> Shop {
        let app = App::spawn().await;
        let mut sale = live_sale(stock, 5);
        sale.price = price;
        sale.payment_window_seconds = window_secs;
        app.open_sale(&sale).await;
        let queries = Arc::new(orders_api::wire(&app.config).await.unwrap());
        let store = Arc::new(DynamoOrders::new(
            app.db.clone(),
            &app.config.orders_table,
            &app.config.sales_table,
        ));
        let writer = app.writer().await;
        Shop {
            app,
            sale,
            queries,
            store,
            writer,
        }
    }

    fn sale_id(&self) -> &str {
        self.sale.sale_id.as_str()
    }

    /// Writes `order` for `user` (as the order-writer does from the queue),
    /// reserved at `reserved_at_ms`: due `window` seconds after that.
    async fn write(&self, order: &str, user: &str, quantity: u32, reserved_at_ms: i64) -> Order {
        let body = order_body(order, self.sale_id(), user, quantity, reserved_at_ms);
        // As SQS would: a batch the busy emulator failed is delivered again.
        for _ in 0..5 {
            if invoke_writer(&self.writer, sqs_event(&[("m", &body)]))
                .await
                .is_ok_and(|failures| failures.is_empty())
            {
                return self.order(order).await.unwrap();
            }
        }
        panic!("{order} was never written");
    }

    /// Writes an order of a one-second window and waits until the window
    /// has closed (it runs from the write: no order is born expired).
    async fn write_past_window(&self, order: &str, user: &str, quantity: u32) -> Order {
        let row = self.write(order, user, quantity, clock::now_ms()).await;
        let due = row.expires_at_ms.unwrap();
        assert!(
            eventually(
                Duration::from_secs(30),
                || async move { clock::now_ms() > due }
            )
            .await,
            "{order}: the window never closed"
        );
        row
    }

    async fn order(&self, order: &str) -> Option<Order> {
        self.store
            .get(&OrderId::parse(order).unwrap())
            .await
            .unwrap()
    }

    async fn ask(&self, request: lambda_http::Request) -> Reply {
        Reply::from(
            orders_api::handler::handle(&self.queries, request)
                .await
                .unwrap(),
        )
    }

    /// What a payment can change: the order row, the sale's counters, the
    /// sale's refunds and this payment id's record.
    async fn state(&self, order: &str) -> (Option<Order>, (i64, i64), usize) {
        let refunds = self
            .store
            .refunds_of_sale(&self.sale.sale_id)
            .await
            .unwrap()
            .len();
        (
            self.order(order).await,
            self.app.sale_counters(self.sale_id()).await,
            refunds,
        )
    }
}

/// The callback's body.
fn payment(payment_id: &str, order: &str, amount: u64, currency: &str) -> String {
    json!({"paymentId": payment_id, "orderId": order, "amount": amount,
           "currency": currency, "status": "SUCCEEDED"})
    .to_string()
}

/// The provider's signature of `body` at `t` with the tests' key.
fn sign_at(t: i64, body: &str) -> String {
    PaymentKey::new(TEST_PAYMENT_SECRET.as_bytes()).sign(t, body.as_bytes())
}

fn signed(body: &str) -> String {
    sign_at(clock::now_ms() / 1000, body)
}

/// `events/payments-callback.json` with this body and signature header.
fn callback(body: &str, signature: Option<&str>) -> lambda_http::Request {
    let mut event: Value = serde_json::from_str(CALLBACK_EVENT).unwrap();
    event["body"] = body.into();
    let headers = event["headers"].as_object_mut().unwrap();
    match signature {
        Some(sig) => headers.insert("payment-signature".into(), sig.into()),
        None => headers.remove("payment-signature"),
    };
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

/// A buyer's route of the orders API (`file` in `events/`) for this order.
fn buyer_event(template: &str, path_param: (&str, &str), user: &str) -> lambda_http::Request {
    let mut event: Value = serde_json::from_str(template).unwrap();
    let (name, value) = path_param;
    let path = event["routeKey"]
        .as_str()
        .unwrap()
        .split_once(' ')
        .unwrap()
        .1
        .replace(&format!("{{{name}}}"), value);
    event["pathParameters"][name] = value.into();
    event["rawPath"] = path.clone().into();
    event["requestContext"]["http"]["path"] = path.into();
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = user.into();
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

fn get_order(order: &str, user: &str) -> lambda_http::Request {
    buyer_event(GET_ORDER_EVENT, ("orderId", order), user)
}

fn pay(order: &str, user: &str) -> lambda_http::Request {
    buyer_event(PAY_EVENT, ("orderId", order), user)
}

// ---------------------------------------------------------------------------
// Price and amount, over the local gateway.

#[tokio::test]
async fn a_price_is_set_shown_frozen_and_recorded_as_each_orders_amount() {
    let stack = LocalStack::start().await;
    let client = StackClient::new(&stack);
    let id = seckill_tests::unique("p");
    let now = clock::now_ms();
    let mut sale = json!({
        "name": "Desk lamp", "totalStock": 10, "perUserLimit": 3,
        "startAt": clock::rfc3339_ms(now - 1_000), "endAt": clock::rfc3339_ms(now + 3_600_000),
        "price": {"amount": 1999, "currency": "EUR"},
    });

    // A bad price names its field and writes nothing.
    for (bad, field) in [
        (json!({"amount": -1, "currency": "EUR"}), "price.amount"),
        (json!({"amount": 1.5, "currency": "EUR"}), "price.amount"),
        (json!({"amount": 10, "currency": "eur"}), "price.currency"),
        (json!({"amount": 10}), "price.currency"),
        (json!("19.99"), "price"),
    ] {
        let mut body = sale.clone();
        body["price"] = bad.clone();
        let (status, err) = client.put_sale(&id, &body).await;
        assert_eq!(
            (status, err["code"].as_str()),
            (400, Some("INVALID_REQUEST")),
            "{bad}"
        );
        assert!(
            err["message"].as_str().unwrap().contains(field),
            "{bad}: {err}"
        );
    }
    // (Asked of the admin API: the public view would cache the 404.)
    let (status, _) = client
        .admin("GET", &format!("/admin/sales/{id}/audit"), "")
        .await;
    assert_eq!(status, 404, "nothing was written");

    let (status, created) = client.put_sale(&id, &sale).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["price"], json!({"amount": 1999, "currency": "EUR"}));
    let (_, public) = stack.request("GET", &format!("/sales/{id}"), &[], "").await;
    assert_eq!(
        public["price"],
        json!({"amount": 1999, "currency": "EUR"}),
        "{public}"
    );
    // The demo sale has no price: null, as every sale before prices.
    let (_, demo) = stack
        .request("GET", &format!("/sales/{}", stack.demo_sale), &[], "")
        .await;
    assert_eq!(demo["price"], Value::Null, "{demo}");

    // Started: the price is frozen like the stock, and stays what it was.
    sale["price"] = json!({"amount": 999, "currency": "EUR"});
    let (status, err) = client.put_sale(&id, &sale).await;
    assert_eq!(
        (status, err["code"].as_str()),
        (409, Some("SALE_STARTED")),
        "{err}"
    );
    sale["price"] = Value::Null;
    let (status, _) = client.put_sale(&id, &sale).await;
    assert_eq!(status, 409, "nor can it be taken away");
    let (_, public) = stack.request("GET", &format!("/sales/{id}"), &[], "").await;
    assert_eq!(public["price"]["amount"], 1999);

    // Two units: the order's amount is 2 x 19.99, QUEUED as written.
    let (status, accepted) = client
        .as_buyer(
            "POST",
            &format!("/sales/{id}/purchase"),
            "ann",
            r#"{"quantity": 2}"#,
        )
        .await;
    assert_eq!(status, 202, "{accepted}");
    let order_id = accepted["orderId"].as_str().unwrap().to_owned();
    let seen = std::sync::Mutex::new(Vec::new());
    let written = eventually(Duration::from_secs(30), || {
        let (client, order_id, seen) = (&client, &order_id, &seen);
        async move {
            let (status, order) = client
                .as_buyer("GET", &format!("/orders/{order_id}"), "ann", "")
                .await;
            assert_eq!(status, 200, "{order}");
            assert_eq!(
                order["amount"],
                json!({"amount": 3998, "currency": "EUR"}),
                "{order}"
            );
            seen.lock()
                .unwrap()
                .push(order["status"].as_str().unwrap().to_owned());
            order["status"] == "PENDING_PAYMENT"
        }
    })
    .await;
    assert!(written, "{:?}", seen.lock().unwrap());
    let (_, mine) = client.my_orders(&id, "ann").await;
    assert_eq!(mine["orders"][0]["amount"]["amount"], 3998, "{mine}");
    assert_eq!(
        (
            mine["orders"][0]["paidAt"].clone(),
            mine["orders"][0]["paymentId"].clone()
        ),
        (Value::Null, Value::Null)
    );
    // Paid through the stand-in: its own payment id, the time, the amount.
    let (status, paid) = client
        .as_buyer("POST", &format!("/orders/{order_id}/pay"), "ann", "")
        .await;
    assert_eq!(
        (status, paid["status"].as_str()),
        (200, Some("PAID")),
        "{paid}"
    );
    assert_eq!(paid["paymentId"], format!("local-{order_id}"));
    assert!(paid["paidAt"].as_str().is_some(), "{paid}");
    assert_eq!(paid["amount"]["amount"], 3998);
}

// ---------------------------------------------------------------------------
// Expiry at once.

#[tokio::test]
async fn an_order_past_its_window_is_expired_at_once_and_cannot_be_paid() {
    // A one-second window, written two seconds after the reservation.
    let shop = Shop::open(3, Some(eur(500)), 1).await;
    let row = shop.write_past_window("late-1", "bea", 1).await;
    assert_eq!(
        row.status,
        OrderStatus::PendingPayment,
        "the row as written"
    );
    assert_eq!(row.amount, Some(eur(500)));

    let seen = shop.ask(get_order("late-1", "bea")).await;
    assert_eq!(
        (seen.status, seen.body["status"].as_str()),
        (200, Some("EXPIRED")),
        "{}",
        seen.body
    );
    let mine = shop
        .ask(buyer_event(
            MY_ORDERS_EVENT,
            ("saleId", shop.sale_id()),
            "bea",
        ))
        .await;
    assert_eq!(mine.body["orders"][0]["status"], "EXPIRED", "{}", mine.body);

    let before = shop.state("late-1").await;
    let refused = shop.ask(pay("late-1", "bea")).await;
    assert_eq!(
        (refused.status, refused.code()),
        (409, "ORDER_EXPIRED"),
        "{}",
        refused.body
    );
    assert_eq!(
        shop.state("late-1").await,
        before,
        "the stand-in records nothing"
    );
    // The read that first said EXPIRED released it: the
    // row flipped and the unit is back, so the release job has nothing left.
    assert_eq!(before.0.unwrap().status, OrderStatus::Expired);
    assert_eq!(before.1, (3, 0));
    assert_eq!(shop.app.stock(shop.sale_id()).await, Some(3));
    let report = shop
        .app
        .jobs()
        .await
        .release_unpaid(clock::now_ms(), Instant::now() + Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(
        (report.expired, report.units_returned),
        (0, 0),
        "{report:?}"
    );
    assert_eq!(shop.app.sale_counters(shop.sale_id()).await, (3, 0));
    assert_eq!(shop.app.stock(shop.sale_id()).await, Some(3));
}

// ---------------------------------------------------------------------------
// The callback's refusals: nothing parsed, nothing changed.

#[tokio::test]
async fn the_callback_refuses_missing_wrong_and_tampered_signatures() {
    let shop = Shop::open(3, Some(eur(1999)), 900).await;
    shop.write("sig-1", "cal", 1, clock::now_ms()).await;
    let body = payment("pay_sig_1", "sig-1", 1999, "EUR");
    let before = shop.state("sig-1").await;
    let other = PaymentKey::new(b"another key of thirty-two bytes!")
        .sign(clock::now_ms() / 1000, body.as_bytes());
    let tampered = payment("pay_sig_1", "sig-1", 1, "EUR");
    for (what, sent, sig) in [
        ("missing", body.clone(), None),
        ("empty", body.clone(), Some(String::new())),
        ("malformed", body.clone(), Some("v1=abc".to_owned())),
        (
            "not hex",
            body.clone(),
            Some(format!(
                "t={},v1={}",
                clock::now_ms() / 1000,
                "z".repeat(64)
            )),
        ),
        ("another key", body.clone(), Some(other)),
        ("another body", tampered, Some(signed(&body))),
    ] {
        let reply = shop.ask(callback(&sent, sig.as_deref())).await;
        assert_eq!(
            (reply.status, reply.code()),
            (401, "INVALID_SIGNATURE"),
            "{what}: {}",
            reply.body
        );
        assert!(
            !reply.body.to_string().contains("sig-1"),
            "{what}: nothing echoed"
        );
    }
    assert_eq!(shop.state("sig-1").await, before, "nothing changed");
    // The same body, signed: it pays (the refusals above were the signature).
    let reply = shop.ask(callback(&body, Some(&signed(&body)))).await;
    assert_eq!(
        (reply.status, reply.body["outcome"].as_str()),
        (200, Some("PAID")),
        "{}",
        reply.body
    );
}

#[tokio::test]
async fn the_callback_refuses_a_replayed_signature() {
    let shop = Shop::open(3, Some(eur(1999)), 900).await;
    shop.write("rep-1", "dan", 1, clock::now_ms()).await;
    let body = payment("pay_rep_1", "rep-1", 1999, "EUR");
    let now = clock::now_ms() / 1000;
    let before = shop.state("rep-1").await;
    // Captured six minutes ago (or signed by a clock far ahead): refused.
    // Far enough past the 300 s tolerance that a slow request does not
    // bring the future one back inside it.
    for t in [now - 301, now - 3_600, now + 400] {
        let reply = shop.ask(callback(&body, Some(&sign_at(t, &body)))).await;
        assert_eq!(
            (reply.status, reply.code()),
            (401, "INVALID_SIGNATURE"),
            "t={t}"
        );
    }
    assert_eq!(shop.state("rep-1").await, before);
    // Within the tolerance it is the provider's delivery, not a replay.
    let reply = shop
        .ask(callback(&body, Some(&sign_at(now - 240, &body))))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["outcome"], "PAID");
}

#[tokio::test]
async fn the_callback_refuses_bad_bodies_unknown_orders_and_wrong_amounts() {
    let shop = Shop::open(3, Some(eur(1999)), 900).await;
    shop.write("bad-1", "eve", 1, clock::now_ms()).await;
    let before = shop.state("bad-1").await;
    for (body, code) in [
        ("not json".to_owned(), "INVALID_REQUEST"),
        (payment("p#1", "bad-1", 1999, "EUR"), "INVALID_REQUEST"),
        (payment("pay_b1", "bad-1", 1999, "eur"), "INVALID_REQUEST"),
        (
            json!({"paymentId": "pay_b1", "orderId": "bad-1", "amount": 1999,
                   "currency": "EUR", "status": "FAILED"})
            .to_string(),
            "INVALID_REQUEST",
        ),
        (payment("pay_b1", "bad-1", 1998, "EUR"), "AMOUNT_MISMATCH"),
        (payment("pay_b1", "bad-1", 1999, "USD"), "AMOUNT_MISMATCH"),
    ] {
        let reply = shop.ask(callback(&body, Some(&signed(&body)))).await;
        assert_eq!(
            (reply.status, reply.code()),
            (400, code),
            "{body}: {}",
            reply.body
        );
    }
    let unknown = payment("pay_b2", "no-such-order", 1999, "EUR");
    let reply = shop.ask(callback(&unknown, Some(&signed(&unknown)))).await;
    assert_eq!((reply.status, reply.code()), (404, "ORDER_NOT_FOUND"));
    assert_eq!(shop.state("bad-1").await, before, "nothing changed");

    // An order of a sale without a price owes nothing through the provider.
    let free = Shop::open(3, None, 900).await;
    free.write("free-1", "fay", 1, clock::now_ms()).await;
    let body = payment("pay_f1", "free-1", 0, "EUR");
    let reply = free.ask(callback(&body, Some(&signed(&body)))).await;
    assert_eq!(
        (reply.status, reply.code()),
        (400, "AMOUNT_MISMATCH"),
        "{}",
        reply.body
    );
    assert_eq!(
        free.order("free-1").await.unwrap().status,
        OrderStatus::PendingPayment
    );
}

// ---------------------------------------------------------------------------
// The effect: once per payment id; refunds instead of a second sale.

#[tokio::test]
async fn a_duplicate_callback_is_the_same_payment_and_a_second_payment_is_refunded() {
    let shop = Shop::open(3, Some(eur(1999)), 900).await;
    shop.write("dup-1", "gus", 1, clock::now_ms()).await;
    let body = payment("pay_dup_1", "dup-1", 1999, "EUR");
    let first = shop.ask(callback(&body, Some(&signed(&body)))).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(
        (
            first.body["paymentId"].as_str(),
            first.body["orderId"].as_str(),
            first.body["outcome"].as_str()
        ),
        (Some("pay_dup_1"), Some("dup-1"), Some("PAID"))
    );
    assert_eq!(first.body["order"]["status"], "PAID");
    assert_eq!(first.body["order"]["paymentId"], "pay_dup_1");
    let paid_at = first.body["order"]["paidAt"].clone();
    assert!(paid_at.is_string());
    // The provider retries (a lost answer): the same answer, nothing new.
    let state = shop.state("dup-1").await;
    for _ in 0..3 {
        let again = shop.ask(callback(&body, Some(&signed(&body)))).await;
        assert_eq!(again.status, 200);
        assert_eq!(again.body, first.body, "the same answer");
    }
    assert_eq!(shop.state("dup-1").await, state);
    assert_eq!(state.1, (2, 1), "one unit sold");

    // The buyer's click after the provider paid: the same success, no record.
    let click = shop.ask(pay("dup-1", "gus")).await;
    assert_eq!(
        (click.status, click.body["paymentId"].as_str()),
        (200, Some("pay_dup_1"))
    );
    assert_eq!(shop.state("dup-1").await, state);

    // A second payment for the paid order is owed back; the order keeps its
    // payment and the unit is not sold again.
    let second = payment("pay_dup_2", "dup-1", 1999, "EUR");
    let reply = shop.ask(callback(&second, Some(&signed(&second)))).await;
    assert_eq!(
        (reply.status, reply.body["outcome"].as_str()),
        (200, Some("REFUND_NEEDED")),
        "{}",
        reply.body
    );
    assert_eq!(reply.body["order"]["status"], "PAID");
    assert_eq!(reply.body["order"]["paymentId"], "pay_dup_1");
    assert_eq!(reply.body["order"]["paidAt"], paid_at);
    assert_eq!(reply.body["order"]["refund"], "NEEDED");
    let retried = shop.ask(callback(&second, Some(&signed(&second)))).await;
    assert_eq!(
        retried.body["outcome"], "REFUND_NEEDED",
        "a retry of it too"
    );
    let (order, counters, refunds) = shop.state("dup-1").await;
    assert_eq!((counters, refunds), ((2, 1), 1));
    let order = order.unwrap();
    assert_eq!(order.refunds, vec![PaymentId::parse("pay_dup_2").unwrap()]);
    let listed = shop
        .store
        .refunds_of_sale(&shop.sale.sale_id)
        .await
        .unwrap();
    assert_eq!(
        (
            listed[0].payment_id.as_str(),
            listed[0].order_id.as_str(),
            listed[0].user_id.as_str(),
            listed[0].amount
        ),
        ("pay_dup_2", "dup-1", "gus", Some(eur(1999)))
    );
}

#[tokio::test]
async fn a_late_payment_is_recorded_as_a_refund_and_the_unit_still_goes_back() {
    let shop = Shop::open(3, Some(eur(700)), 1).await;
    shop.write_past_window("late-2", "hal", 1).await;
    // Past its window, the row not flipped yet: the provider's payment
    // comes late. The order is not paid, the money is owed back.
    let body = payment("pay_late_1", "late-2", 700, "EUR");
    let reply = shop.ask(callback(&body, Some(&signed(&body)))).await;
    assert_eq!(
        (reply.status, reply.body["outcome"].as_str()),
        (200, Some("REFUND_NEEDED")),
        "{}",
        reply.body
    );
    assert_eq!(
        reply.body["order"]["status"], "EXPIRED",
        "seen expired at once"
    );
    assert_eq!(reply.body["order"]["paymentId"], Value::Null);
    let row = shop.order("late-2").await.unwrap();
    assert_eq!(
        row.status,
        OrderStatus::PendingPayment,
        "the row waits for the job"
    );
    assert_eq!(shop.app.sale_counters(shop.sale_id()).await, (2, 1));

    // The release job is not stopped by the refund: the unit comes back.
    let report = shop
        .app
        .jobs()
        .await
        .release_unpaid(clock::now_ms(), Instant::now() + Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(report.expired, 1, "{report:?}");
    assert_eq!(shop.app.sale_counters(shop.sale_id()).await, (3, 0));
    assert_eq!(shop.app.stock(shop.sale_id()).await, Some(3));

    // After the flip, a later payment is owed back too.
    let after = payment("pay_late_2", "late-2", 700, "EUR");
    let reply = shop.ask(callback(&after, Some(&signed(&after)))).await;
    assert_eq!(reply.body["outcome"], "REFUND_NEEDED", "{}", reply.body);
    let row = shop.order("late-2").await.unwrap();
    assert_eq!(row.status, OrderStatus::Expired);
    assert_eq!(row.refunds.len(), 2);
    assert_eq!(row.payment_id, None);
    let refunds = shop
        .store
        .refunds_of_sale(&shop.sale.sale_id)
        .await
        .unwrap();
    let ids: Vec<&str> = refunds.iter().map(|r| r.payment_id.as_str()).collect();
    assert_eq!(ids, ["pay_late_1", "pay_late_2"]);
    assert!(
        refunds
            .iter()
            .all(|r| r.outcome == PaymentOutcome::RefundNeeded)
    );
}

// ---------------------------------------------------------------------------
// Concurrency: exactly one effect.

#[tokio::test]
async fn callbacks_fired_at_once_pay_an_order_exactly_once() {
    let shop = Arc::new(Shop::open(5, Some(eur(250)), 900).await);
    shop.write("race-1", "ida", 2, clock::now_ms()).await;
    // Four deliveries of one payment and four other payments, all at once.
    let ids: Vec<String> = (0..8)
        .map(|i| {
            if i % 2 == 0 {
                "pay_same".to_owned()
            } else {
                format!("pay_other_{i}")
            }
        })
        .collect();
    let gate = Arc::new(tokio::sync::Barrier::new(ids.len()));
    let mut tasks = Vec::new();
    for id in ids.clone() {
        let (shop, gate) = (shop.clone(), gate.clone());
        tasks.push(tokio::spawn(async move {
            let body = payment(&id, "race-1", 500, "EUR");
            let request = callback(&body, Some(&signed(&body)));
            gate.wait().await;
            (id, shop.ask(request).await)
        }));
    }
    let mut paid_by = std::collections::BTreeSet::new();
    let mut refunded = std::collections::BTreeSet::new();
    for task in tasks {
        let (id, reply) = task.await.unwrap();
        assert_eq!(reply.status, 200, "{id}: {}", reply.body);
        match reply.body["outcome"].as_str() {
            Some("PAID") => paid_by.insert(id),
            Some("REFUND_NEEDED") => refunded.insert(id),
            other => panic!("{id}: {other:?}"),
        };
    }
    assert_eq!(paid_by.len(), 1, "one payment paid it: {paid_by:?}");
    assert!(refunded.is_disjoint(&paid_by), "{paid_by:?} / {refunded:?}");
    let row = shop.order("race-1").await.unwrap();
    assert_eq!(row.status, OrderStatus::Paid);
    let winner = paid_by.iter().next().unwrap();
    assert_eq!(
        row.payment_id.as_ref().map(PaymentId::as_str),
        Some(winner.as_str())
    );
    // Every other distinct payment id is owed back, once each.
    let distinct: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(refunded.len(), distinct.len() - 1);
    assert_eq!(row.refunds.len(), distinct.len() - 1);
    let refunds = shop
        .store
        .refunds_of_sale(&shop.sale.sale_id)
        .await
        .unwrap();
    assert_eq!(refunds.len(), distinct.len() - 1);
    assert_eq!(
        shop.app.sale_counters(shop.sale_id()).await,
        (3, 2),
        "two units sold, once"
    );
}

#[tokio::test]
async fn late_callbacks_racing_the_release_job_return_the_unit_once() {
    // Orders whose window has just closed: the release job and four late
    // payments for each, fired at once. The job expires the order and gives
    // its unit back once; every payment is owed back; none sells the unit.
    // (Payments racing the deadline itself, paid or expired, are
    // `orders::pay_and_expire_race_has_one_winner`: the buyer's stand-in
    // goes through this same settlement.)
    let shop = Arc::new(Shop::open(10, Some(eur(100)), 1).await);
    for round in 0..10 {
        let order = format!("late-{round}");
        shop.write_past_window(&order, &format!("u{round}"), 1)
            .await;
        let gate = Arc::new(tokio::sync::Barrier::new(5));
        let payers: Vec<_> = (0..4)
            .map(|i| {
                let (shop, gate) = (shop.clone(), gate.clone());
                let body = payment(&format!("pay_{round}_{i}"), &order, 100, "EUR");
                tokio::spawn(async move {
                    let request = callback(&body, Some(&signed(&body)));
                    gate.wait().await;
                    shop.ask(request).await
                })
            })
            .collect();
        let expirer = {
            let (shop, gate, id) = (shop.clone(), gate.clone(), OrderId::parse(&order).unwrap());
            tokio::spawn(async move {
                gate.wait().await;
                shop.store.expire(&id, clock::now_ms()).await.unwrap()
            })
        };
        for payer in payers {
            let reply = payer.await.unwrap();
            assert_eq!(
                (reply.status, reply.body["outcome"].as_str()),
                (200, Some("REFUND_NEEDED")),
                "round {round}: {}",
                reply.body
            );
        }
        let expire = expirer.await.unwrap();
        assert!(
            matches!(expire, ExpireOutcome::Expired(_)),
            "round {round}: {expire:?}"
        );
        let row = shop.order(&order).await.unwrap();
        assert_eq!(
            (row.status, row.refunds.len(), row.payment_id),
            (OrderStatus::Expired, 4, None),
            "round {round}"
        );
    }
    assert_eq!(
        shop.app.sale_counters(shop.sale_id()).await,
        (10, 0),
        "every unit back, once"
    );
    let refunds = shop
        .store
        .refunds_of_sale(&shop.sale.sale_id)
        .await
        .unwrap();
    assert_eq!(refunds.len(), 40);
}

// ---------------------------------------------------------------------------
// Over the local gateway, signed as `seckill-local sign-payment` prints it,
// and the operator's refunds view.

#[tokio::test]
async fn the_callback_is_public_sign_payment_prints_calls_and_refunds_are_listed() {
    let stack = LocalStack::start().await;
    let client = StackClient::new(&stack);
    let id = seckill_tests::unique("g");
    let now = clock::now_ms();
    let (status, _) = client
        .put_sale(
            &id,
            &json!({"name": "Mug", "totalStock": 5, "perUserLimit": 1,
                    "startAt": clock::rfc3339_ms(now - 1_000),
                    "endAt": clock::rfc3339_ms(now + 3_600_000),
                    "price": {"amount": 1250, "currency": "GBP"}}),
        )
        .await;
    assert_eq!(status, 201);
    let (_, accepted) = client.buy(&id, "ivy").await;
    let order_id = accepted["orderId"].as_str().unwrap().to_owned();
    let written = eventually(Duration::from_secs(30), || {
        let (client, order_id) = (&client, &order_id);
        async move {
            let (_, order) = client
                .as_buyer("GET", &format!("/orders/{order_id}"), "ivy", "")
                .await;
            order["status"] == "PENDING_PAYMENT"
        }
    })
    .await;
    assert!(written);

    let settings = seckill_infra::local::LocalSettings {
        queue_name: stack
            .config
            .sales_table
            .trim_end_matches("-sales")
            .to_owned(),
        sales_table: stack.config.sales_table.clone(),
        orders_table: stack.config.orders_table.clone(),
        listen: stack.addr.to_string(),
        ..seckill_infra::local::LocalSettings::from_env()
    };
    let curl = seckill_infra::sign_payment::sign_payment(
        &seckill_infra::sign_payment::SignRequest {
            order_id: order_id.clone(),
            payment_id: Some("pay_cli_1".into()),
            amount: None,
            url: None,
        },
        &settings,
    )
    .await
    .unwrap();
    assert!(
        curl.starts_with(&format!(
            "curl -sS -X POST 'http://{}/payments/callback'",
            stack.addr
        )),
        "{curl}"
    );
    // What the command sends: its header and body, as curl would.
    let quoted: Vec<&str> = curl.split('\'').skip(1).step_by(2).collect();
    let signature = quoted[2].strip_prefix("Payment-Signature: ").unwrap();
    let body = quoted[3];
    assert_eq!(
        serde_json::from_str::<Value>(body).unwrap(),
        json!({"paymentId": "pay_cli_1", "orderId": order_id, "amount": 1250,
               "currency": "GBP", "status": "SUCCEEDED"})
    );
    // No token: the route is public, and unsigned it is refused.
    let (status, err) = stack.request("POST", "/payments/callback", &[], body).await;
    assert_eq!(
        (status, err["code"].as_str()),
        (401, Some("INVALID_SIGNATURE")),
        "{err}"
    );
    let (status, answer) = stack
        .request(
            "POST",
            "/payments/callback",
            &[("payment-signature", signature)],
            body,
        )
        .await;
    assert_eq!(
        (status, answer["outcome"].as_str()),
        (200, Some("PAID")),
        "{answer}"
    );
    let tokens = TokenSettings::from_env();
    let ivy = format!("Bearer {}", tokens.mint("ivy", false, 300).unwrap());
    let (_, order) = stack
        .request(
            "GET",
            &format!("/orders/{order_id}"),
            &[("authorization", &ivy)],
            "",
        )
        .await;
    assert_eq!(
        (order["status"].as_str(), order["paymentId"].as_str()),
        (Some("PAID"), Some("pay_cli_1"))
    );

    // The operator's refunds view: empty, then the second payment of the
    // paid order, owed back to ivy.
    let refunds = format!("/admin/sales/{id}/refunds");
    let (status, view) = client.admin("GET", &refunds, "").await;
    assert_eq!((status, view), (200, json!({"refunds": []})));
    let curl = seckill_infra::sign_payment::sign_payment(
        &seckill_infra::sign_payment::SignRequest {
            order_id: order_id.clone(),
            payment_id: Some("pay_cli_2".into()),
            amount: None,
            url: None,
        },
        &settings,
    )
    .await
    .unwrap();
    let quoted: Vec<&str> = curl.split('\'').skip(1).step_by(2).collect();
    let signature = quoted[2].strip_prefix("Payment-Signature: ").unwrap();
    let (status, answer) = stack
        .request(
            "POST",
            "/payments/callback",
            &[("payment-signature", signature)],
            quoted[3],
        )
        .await;
    assert_eq!(
        (status, answer["outcome"].as_str()),
        (200, Some("REFUND_NEEDED")),
        "{answer}"
    );
    let (status, view) = client.admin("GET", &refunds, "").await;
    assert_eq!(status, 200, "{view}");
    let listed = view["refunds"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{view}");
    assert_eq!(
        (
            listed[0]["paymentId"].clone(),
            listed[0]["orderId"].clone(),
            listed[0]["userId"].clone(),
            listed[0]["amount"].clone()
        ),
        (
            json!("pay_cli_2"),
            json!(order_id),
            json!("ivy"),
            json!({"amount": 1250, "currency": "GBP"})
        )
    );
    assert!(
        listed[0]["at"]
            .as_str()
            .is_some_and(|at| clock::parse_rfc3339_ms(at).is_some())
    );
    // Admin only; an unknown sale is 404, a bad id 400.
    let (status, _) = client.as_buyer("GET", &refunds, "ivy", "").await;
    assert_eq!(status, 403);
    let (status, err) = client
        .admin("GET", "/admin/sales/no-such-sale/refunds", "")
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (404, Some("SALE_NOT_FOUND"))
    );
    let (status, _) = client
        .admin("GET", "/admin/sales/bad%20id/refunds", "")
        .await;
    assert_eq!(status, 400);
}

// ---------------------------------------------------------------------------
// The buyer's stand-in for the provider, as AWS runs it.

/// The environment `template.yaml` deploys `function` with: the Globals'
/// variables and its own, each literal as the template writes it. The
/// resources the template creates (Redis, the tables, the queues) are this
/// test's own; the secrets' ARNs are left out (nothing here reads them).
fn deployed_env(
    function: &str,
    config: &seckill_shared::config::Config,
) -> std::collections::HashMap<String, String> {
    let template = crate::cfn::template_json();
    let ours = |name: &str| match name {
        "REDIS_URL" => Some(config.redis_url.clone()),
        "SALES_TABLE" => Some(config.sales_table.clone()),
        "ORDERS_TABLE" => Some(config.orders_table.clone()),
        "ORDERS_QUEUE_URL" => config.orders_queue_url.clone(),
        "ORDERS_DLQ_URL" => config.orders_dlq_url.clone(),
        _ => None,
    };
    let mut env = std::collections::HashMap::new();
    for vars in [
        &template["Globals"]["Function"]["Environment"]["Variables"],
        &template["Resources"][function]["Properties"]["Environment"]["Variables"],
    ] {
        for (name, value) in vars.as_object().unwrap() {
            let value = match value.as_str() {
                Some(literal) => Some(literal.to_owned()),
                None => ours(name),
            };
            if let Some(value) = value {
                env.insert(name.clone(), value);
            }
        }
    }
    env
}

/// `POST /orders/{id}/pay`, the buyer's stand-in for the
/// payment provider, marked any `PENDING_PAYMENT` order of theirs `PAID`,
/// price or not, and `template.yaml` deploys it: on AWS a buyer of a priced
/// sale got the goods for nothing. The orders-api function wired from the
/// template's environment, called with the event API Gateway sends, now
/// refuses a priced order (`409 ORDER_NOT_PAYABLE`, nothing changed), the
/// provider's signed callback still pays it, and an order with no amount
/// (nothing is owed) is still paid by it.
/// One unit bought by `user` through the purchase function, and its
/// order written by the order-writer from the message it sent.
async fn buy_and_write(shop: &Shop, user: &str) -> String {
    let reply = shop.app.purchase(shop.sale_id(), user, "").await;
    assert_eq!(reply.status, 202, "{reply:?}");
    let order = reply.body["orderId"].as_str().unwrap().to_owned();
    let message = shop
        .app
        .drain_queue()
        .await
        .into_iter()
        .find(|m| m.order_id.as_str() == order)
        .expect("the purchase's message");
    let body = serde_json::to_string(&message).unwrap();
    for _ in 0..5 {
        if invoke_writer(&shop.writer, sqs_event(&[("m", &body)]))
            .await
            .is_ok_and(|failures| failures.is_empty())
        {
            return order;
        }
    }
    panic!("{order} was never written");
}

#[tokio::test]
async fn the_stand_in_pay_route_never_pays_a_priced_order_as_the_template_deploys_it() {
    let shop = Shop::open(5, Some(eur(1999)), 900).await;
    let order = buy_and_write(&shop, "u1").await;
    let order = order.as_str();
    let env = deployed_env("OrdersApiFunction", &shop.app.config);
    let config = orders_api::config(&|name: &str| env.get(name).cloned()).unwrap();
    let deployed = orders_api::wire(&config).await.unwrap();

    let before = shop.state(order).await;
    let reply = Reply::from(
        orders_api::handler::handle(&deployed, pay(order, "u1"))
            .await
            .unwrap(),
    );
    assert_eq!(
        (reply.status, reply.code()),
        (409, "ORDER_NOT_PAYABLE"),
        "{reply:?}"
    );
    assert_eq!(shop.state(order).await, before, "nothing changed");

    // The provider's callback pays it, for its amount.
    let body = payment("pay-stand-in", order, 1999, "EUR");
    let paid = shop.ask(callback(&body, Some(&signed(&body)))).await;
    assert_eq!(paid.status, 200, "{paid:?}");
    assert_eq!(shop.order(order).await.unwrap().status, OrderStatus::Paid);

    // An order with no amount owes nothing: the stand-in pays it.
    let free = Shop::open(5, None, 900).await;
    let free_order = buy_and_write(&free, "u1").await;
    let env = deployed_env("OrdersApiFunction", &free.app.config);
    let config = orders_api::config(&|name: &str| env.get(name).cloned()).unwrap();
    let deployed = orders_api::wire(&config).await.unwrap();
    let reply = Reply::from(
        orders_api::handler::handle(&deployed, pay(&free_order, "u1"))
            .await
            .unwrap(),
    );
    assert_eq!(
        (reply.status, reply.body["status"].as_str()),
        (200, Some("PAID")),
        "{reply:?}"
    );
    seckill_tests::assert_clean(&shop.app.checker(), shop.sale_id(), &[order.to_owned()]).await;
    seckill_tests::assert_clean(&free.app.checker(), free.sale_id(), &[free_order]).await;
}

/// From the instant an unpaid order's window closes the
/// API calls it `EXPIRED`, but its unit and its buyer's count came back only
/// when the release job next ran (every minute): the buyer, told
/// `EXPIRED`, was refused `409 LIMIT_EXCEEDED` naming that very order, and
/// the sale still showed the unit taken (`SOLD_OUT` for everyone else). A
/// read or payment that finds the window closed now releases the order
/// first, exactly once, as the release job would: `EXPIRED` always means
/// the unit and the buyer's count are back. Through each of the three
/// routes that can say it.
#[tokio::test]
async fn an_order_the_api_calls_expired_no_longer_counts_against_its_buyer() {
    let app = App::spawn().await;
    let mut sale = live_sale(1, 1);
    sale.payment_window_seconds = 1;
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str().to_owned();
    let queries = orders_api::wire(&app.config).await.unwrap();
    let ask = |request: lambda_http::Request| {
        let queries = &queries;
        async move { Reply::from(orders_api::handler::handle(queries, request).await.unwrap()) }
    };
    let buy = |user: &str| {
        let (app, id, user) = (&app, id.clone(), user.to_owned());
        async move {
            let reply = app.purchase(&id, &user, "").await;
            assert_eq!(reply.status, 202, "{user}: {reply:?}");
            app.write_queued_orders().await;
            let order = reply.body["orderId"].as_str().unwrap().to_owned();
            let due = app.orders().await[&order].expires_at_ms.unwrap();
            assert!(
                eventually(Duration::from_secs(30), || async { clock::now_ms() > due }).await,
                "the window never closed"
            );
            order
        }
    };
    let mut accepted = Vec::new();

    // GET /orders/{id}.
    let a = buy("u1").await;
    accepted.push(a.clone());
    let read = ask(get_order(&a, "u1")).await;
    assert_eq!(read.body["status"], "EXPIRED", "{read:?}");
    let again = app.purchase(&id, "u1", "").await;
    assert_eq!(
        (again.status, again.code()),
        (202, ""),
        "told EXPIRED, then refused: {again:?}"
    );
    app.write_queued_orders().await;
    accepted.push(again.body["orderId"].as_str().unwrap().to_owned());
    let b = again.body["orderId"].as_str().unwrap().to_owned();
    let due = app.orders().await[&b].expires_at_ms.unwrap();
    assert!(eventually(Duration::from_secs(30), || async { clock::now_ms() > due }).await);

    // GET /sales/{id}/orders: then the unit is back for anyone.
    let mine = ask(buyer_event(MY_ORDERS_EVENT, ("saleId", &id), "u1")).await;
    assert_eq!(mine.status, 200, "{mine:?}");
    let listed: Vec<&str> = mine.body["orders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["status"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["EXPIRED", "EXPIRED"], "{mine:?}");
    assert_eq!(app.stock(&id).await, Some(1), "the unit is back");
    let c = buy("u2").await;
    accepted.push(c.clone());

    // POST /orders/{id}/pay.
    let paid = ask(pay(&c, "u2")).await;
    assert_eq!(
        (paid.status, paid.code()),
        (409, "ORDER_EXPIRED"),
        "{paid:?}"
    );
    let before_u3 = clock::now_ms();
    let reply = app.purchase(&id, "u3", "").await;
    assert_eq!(reply.status, 202, "the unit u2 let expire: {reply:?}");
    app.write_queued_orders().await;
    accepted.push(reply.body["orderId"].as_str().unwrap().to_owned());

    // Each was released once: the release job finds nothing left to do,
    // and the ledger has one unit sold, to u3.
    let report = app
        .jobs()
        .await
        .release_unpaid(before_u3, Instant::now() + Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(
        (report.expired, report.units_returned),
        (0, 0),
        "{report:?}"
    );
    assert_eq!(app.sale_counters(&id).await, (0, 1));
    assert_eq!(app.buyers(&id).await, [("u3".to_owned(), 1)].into());
    seckill_tests::assert_clean(&app.checker(), &id, &accepted).await;
}
