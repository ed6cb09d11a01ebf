//! The metrics contract end to end: one small sale through the real
//! handlers of every function (purchase, order-writer, orders-api,
//! release-unpaid, prewarm, reconcile) on a real Redis and the emulator,
//! with the EMF lines they write captured as Lambda would ship them
//! (one line per invocation) and checked against what the sale did,
//! including the payments' (`PaidAmount`, `PaymentsNeedingRefund`).
//!
//! The test runs alone in a process of its own ([`seckill_tests::in_own_process`]):
//! the emitter is process-wide, like stdout.

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Context, LambdaEvent};
use seckill_shared::clock;
use seckill_shared::domain::money::{Currency, Money};
use seckill_shared::domain::orders::OrderStatus;
use seckill_shared::domain::payment::PaymentKey;
use seckill_shared::observe::metrics::{self, Emitter, Flush, Sink};
use seckill_tests::{
    App, Captured, Reply, eventually, live_sale, order_body, purchase_event, sqs_event,
};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const NAMESPACE: &str = "Seckill/metrics-test";
const PAY_EVENT: &str = include_str!("../events/orders-pay.json");
const SCHEDULE_EVENT: &str = include_str!("../events/schedule-release-unpaid.json");
const CALLBACK_EVENT: &str = include_str!("../events/payments-callback.json");

/// Every line the functions wrote (as CloudWatch Logs would receive them),
/// each of which must be one JSON object.
fn lines(captured: &Captured) -> Vec<Value> {
    captured
        .text()
        .lines()
        .map(|line| {
            let value: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            assert!(value.is_object(), "{line}");
            value
        })
        .collect()
}

/// The contract: each metric's unit and the functions that may emit it.
fn contract() -> BTreeMap<&'static str, (&'static str, &'static [&'static str])> {
    let all: &[&str] = &[
        "purchase",
        "order-writer",
        "orders-api",
        "admin-api",
        "prewarm",
        "release-unpaid",
        "reconcile",
    ];
    BTreeMap::from([
        ("Purchases", ("Count", &["purchase"][..])),
        ("SoldOutFastPath", ("Count", &["purchase"][..])),
        ("LuaLatency", ("Milliseconds", &["purchase"][..])),
        ("OrdersWritten", ("Count", &["order-writer"][..])),
        ("OrderDuplicates", ("Count", &["order-writer"][..])),
        ("OrdersRejected", ("Count", &["order-writer"][..])),
        ("OrderFailures", ("Count", &["order-writer"][..])),
        ("DlqMoves", ("Count", &["order-writer"][..])),
        (
            "TransactionConflictsRetried",
            ("Count", &["order-writer"][..]),
        ),
        ("OrdersPaid", ("Count", &["orders-api"][..])),
        ("PaidAmount", ("None", &["orders-api"][..])),
        ("PaymentsNeedingRefund", ("Count", &["orders-api"][..])),
        ("Releases", ("Count", &["release-unpaid", "admin-api"][..])),
        (
            "ReleasedUnits",
            ("Count", &["release-unpaid", "admin-api"][..]),
        ),
        (
            "ReconcileViolations",
            ("Count", &["reconcile", "admin-api"][..]),
        ),
        ("OversellRisk", ("Count", &["reconcile", "admin-api"][..])),
        (
            "ReconcileRepairs",
            ("Count", &["reconcile", "admin-api"][..]),
        ),
        ("SalesPrewarmed", ("Count", &["prewarm", "admin-api"][..])),
        ("StockLeft", ("Count", &["prewarm", "admin-api"][..])),
        (
            "StockLeftPercent",
            ("Percent", &["prewarm", "admin-api"][..]),
        ),
        ("ColdStarts", ("Count", all)),
    ])
}

/// Sums of every metric, by (function, metric) and purchases by outcome,
/// after checking each line against the EMF specification and the contract.
#[derive(Debug, Default)]
struct Totals {
    counts: BTreeMap<(String, String), u64>,
    outcomes: BTreeMap<String, u64>,
    latencies: Vec<f64>,
}

impl Totals {
    fn of(lines: &[Value]) -> Totals {
        let contract = contract();
        let mut totals = Totals::default();
        for line in lines {
            let aws = &line["_aws"];
            let ts = aws["Timestamp"].as_i64().expect("_aws.Timestamp");
            assert!(
                (clock::now_ms() - ts).abs() < 600_000,
                "timestamp not now: {line}"
            );
            let function = line["Function"].as_str().expect("Function").to_owned();
            let directives = aws["CloudWatchMetrics"].as_array().expect("directives");
            assert!(!directives.is_empty(), "{line}");
            for d in directives {
                assert_eq!(d["Namespace"], NAMESPACE, "{line}");
                let dims = d["Dimensions"].as_array().unwrap();
                assert_eq!(dims[0], serde_json::json!(["Function"]), "{line}");
                let mut names = Vec::new();
                for m in d["Metrics"].as_array().unwrap() {
                    let name = m["Name"].as_str().unwrap();
                    let (unit, functions) = contract
                        .get(name)
                        .unwrap_or_else(|| panic!("{name} is not in the contract: {line}"));
                    assert_eq!(m["Unit"], *unit, "{line}");
                    assert!(
                        functions.contains(&function.as_str()),
                        "{function} emits {name}: {line}"
                    );
                    names.push(name);
                }
                // Purchases alone carries the Outcome set, and the stock
                // left alone the SaleId set; nothing else does.
                if names == ["Purchases"] {
                    assert_eq!(
                        d["Dimensions"],
                        serde_json::json!([["Function"], ["Function", "Outcome"]])
                    );
                } else if names == ["StockLeft", "StockLeftPercent"] {
                    assert_eq!(
                        d["Dimensions"],
                        serde_json::json!([["Function"], ["Function", "SaleId"]])
                    );
                    assert!(line["SaleId"].is_string(), "{line}");
                } else {
                    assert_eq!(d["Dimensions"], serde_json::json!([["Function"]]), "{line}");
                    assert!(!names.contains(&"Purchases"), "{line}");
                }
                for name in names {
                    let value = &line[name];
                    // A gauge (what a sale has left), not a count to sum.
                    if name.starts_with("StockLeft") {
                        assert!(value.as_f64().is_some_and(|v| v >= 0.0), "{line}");
                        // Counted as lines written.
                        *totals
                            .counts
                            .entry((function.clone(), name.to_owned()))
                            .or_default() += 1;
                        continue;
                    }
                    let n = match value {
                        Value::Array(values) => {
                            assert!(values.len() <= 100, "{line}");
                            assert_eq!(name, "LuaLatency", "{line}");
                            totals
                                .latencies
                                .extend(values.iter().map(|v| v.as_f64().unwrap()));
                            values.len() as u64
                        }
                        other => other
                            .as_u64()
                            .unwrap_or_else(|| panic!("{name} is not a count: {line}")),
                    };
                    if name == "Purchases" {
                        let outcome = line["Outcome"].as_str().expect("Outcome").to_owned();
                        *totals.outcomes.entry(outcome).or_default() += n;
                    }
                    *totals
                        .counts
                        .entry((function.clone(), name.to_owned()))
                        .or_default() += n;
                }
            }
        }
        totals
    }

    fn get(&self, function: &str, name: &str) -> Option<u64> {
        self.counts
            .get(&(function.to_owned(), name.to_owned()))
            .copied()
    }
}

/// The captured lines of one function.
fn lines_of<'a>(lines: &'a [Value], function: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["Function"] == function).collect()
}

/// `events/orders-pay.json` for this order and buyer.
fn pay_event(order_id: &str, user: &str) -> lambda_http::Request {
    let mut event: Value = serde_json::from_str(PAY_EVENT).unwrap();
    event["pathParameters"]["orderId"] = order_id.into();
    event["rawPath"] = format!("/orders/{order_id}/pay").into();
    event["requestContext"]["http"]["path"] = format!("/orders/{order_id}/pay").into();
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = user.into();
    event["requestContext"]["requestId"] = format!("pay-{user}").into();
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

/// `events/payments-callback.json` with this body, signed by the provider.
fn callback_event(body: &str) -> lambda_http::Request {
    let mut event: Value = serde_json::from_str(CALLBACK_EVENT).unwrap();
    event["body"] = body.into();
    event["headers"]["payment-signature"] =
        PaymentKey::new(seckill_tests::TEST_PAYMENT_SECRET.as_bytes())
            .sign(clock::now_ms() / 1000, body.as_bytes())
            .into();
    event["requestContext"]["requestId"] = "callback".into();
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

/// A scheduler tick with a Lambda request id.
fn tick(request_id: &str) -> LambdaEvent<Value> {
    let mut context = Context::default();
    context.request_id = request_id.into();
    LambdaEvent::new(serde_json::from_str(SCHEDULE_EVENT).unwrap(), context)
}

async fn write(writer: &order_writer::LiveWriter, event: SqsEvent) -> Vec<String> {
    let mut context = Context::default();
    context.request_id = "writer-invocation".into();
    order_writer::handler::handle(writer, LambdaEvent::new(event, context))
        .await
        .unwrap()
        .batch_item_failures
        .into_iter()
        .map(|f| f.item_identifier)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sale_through_every_function_writes_the_contracts_metrics() {
    if !seckill_tests::in_own_process(
        "metrics::a_sale_through_every_function_writes_the_contracts_metrics",
    )
    .await
    {
        return;
    }
    let captured = Captured::default();
    assert!(
        metrics::install(Emitter::new(
            Sink::new(captured.clone()),
            Flush::EachInvocation
        )),
        "this process installs the emitter once"
    );
    let app = App::spawn_with(|config| config.metrics_namespace = NAMESPACE.into()).await;
    let mut sale = live_sale(5, 1);
    // Long enough to pay three orders, short enough to see two expire.
    sale.payment_window_seconds = 8;
    // 19.99 a unit: each payment's amount is a PaidAmount line.
    sale.price = Some(Money {
        amount: 1999,
        currency: Currency::parse("EUR").unwrap(),
    });
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();

    // 1. Purchases: 5 units, one per buyer.
    let keyed =
        |user: &str, key: &str| purchase_event(id, Some(user), "", &[("idempotency-key", key)]);
    let mut replies: Vec<(&str, Reply)> = Vec::new();
    replies.push(("u0", app.call(keyed("u0", "k-u0")).await));
    replies.push(("u0-again", app.purchase(id, "u0", "").await));
    for user in ["u1", "u2", "u3", "u4", "u5", "u6", "u7"] {
        replies.push((user, app.purchase(id, user, "").await));
    }
    // A winner's retry reaches Redis through the sold-out flag and replays.
    replies.push(("u0-retry", app.call(keyed("u0", "k-u0")).await));
    replies.push(("bad-body", app.purchase(id, "u8", "{").await));
    replies.push((
        "no-token",
        app.call(purchase_event(id, None, "", &[])).await,
    ));
    let got: Vec<(&str, u16, String)> = replies
        .iter()
        .map(|(who, r)| (*who, r.status, r.code().to_owned()))
        .collect();
    let statuses: Vec<u16> = got.iter().map(|g| g.1).collect();
    assert_eq!(
        statuses,
        [202, 409, 202, 202, 202, 202, 410, 410, 410, 202, 400, 401],
        "{got:?}"
    );
    let order_of: BTreeMap<&str, String> = replies
        .iter()
        .filter(|(_, r)| r.status == 202)
        .map(|(who, r)| (*who, r.body["orderId"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(order_of["u0"], order_of["u0-retry"]);

    // 2. The order-writer: the five winners (and u0 again) in one batch, then a batch with
    // a redelivery, an order the database has no stock for, and two poison
    // records, one of them on its last receive.
    let writer = order_writer::wire(&app.config).await.unwrap();
    // Six: u0's retry sent its order again (it cannot know the first
    // request's send reached the queue).
    let messages = app.take_messages().await;
    assert_eq!(messages.len(), 6);
    let records: Vec<(&str, &str)> = messages
        .iter()
        .map(|(m, b)| (m.as_str(), b.as_str()))
        .collect();
    assert!(write(&writer, sqs_event(&records)).await.is_empty());
    let extra = order_body("extra-order", id, "u9", 1, clock::now_ms());
    let mut second = sqs_event(&[
        ("redelivered", messages[0].1.as_str()),
        ("extra", &extra),
        ("poison-first", "not json"),
        ("poison-last", "{\"v\": 1}"),
    ]);
    second.records[3]
        .attributes
        .insert("ApproximateReceiveCount".into(), "5".into());
    let failed = write(&writer, second).await;
    assert_eq!(failed, ["poison-first", "poison-last"]);
    let orders = app.orders().await;
    assert_eq!(orders["extra-order"].status, OrderStatus::Rejected);

    // 3. Three buyers pay; one clicks twice.
    let queries = orders_api::wire(&app.config).await.unwrap();
    for user in ["u1", "u2", "u3", "u1"] {
        let reply = Reply::from(
            orders_api::handler::handle(&queries, pay_event(&order_of[user], user))
                .await
                .unwrap(),
        );
        assert_eq!(reply.status, 200, "{user} pays: {}", reply.body);
    }

    // 4. The other two orders expire unpaid and are released.
    let due = orders
        .values()
        .filter(|o| o.sale_id.as_str() == id && o.status == OrderStatus::PendingPayment)
        .filter_map(|o| o.expires_at_ms)
        .max()
        .unwrap();
    assert!(eventually(Duration::from_secs(30), || async { clock::now_ms() > due }).await);
    let jobs = release_unpaid::wire(&app.config).await.unwrap();
    let report = release_unpaid::handler::handle(&jobs, tick("release-invocation"))
        .await
        .unwrap();
    assert_eq!(
        (&report["expired"], &report["unitsReturned"]),
        (&2.into(), &2.into()),
        "{report}"
    );
    // ... and the provider's payment for one of them comes too late: owed
    // back (PaymentsNeedingRefund), twice delivered, counted once.
    let late = serde_json::json!({"paymentId": "pay_late", "orderId": order_of["u4"],
        "amount": 1999, "currency": "EUR", "status": "SUCCEEDED"})
    .to_string();
    for _ in 0..2 {
        let reply = Reply::from(
            orders_api::handler::handle(&queries, callback_event(&late))
                .await
                .unwrap(),
        );
        assert_eq!(reply.body["outcome"], "REFUND_NEEDED", "{}", reply.body);
    }

    // 5. Prewarm loads a sale that starts soon (and refreshes the live one).
    let mut soon = live_sale(7, 1);
    soon.start_ms = clock::now_ms() + 120_000;
    soon.end_ms = soon.start_ms + 3_600_000;
    assert!(app.catalog.create_sale(&soon).await.unwrap());
    let prewarm = prewarm::wire(&app.config).await.unwrap();
    let done = prewarm::handler::handle(&prewarm, tick("prewarm-invocation"))
        .await
        .unwrap();
    assert!(done.to_string().contains("LOADED"), "{done}");

    // 6. Reconcile the live sale.
    let reconciler = reconcile::wire(&app.config).await.unwrap();
    let reports = reconcile::handler::handle(&reconciler, tick("reconcile-invocation"))
        .await
        .unwrap();
    let reports = reports.as_array().unwrap();
    assert_eq!(reports.len(), 1, "{reports:?}");
    let violations = reports[0]["violations"].as_array().unwrap();
    let oversell = violations
        .iter()
        .filter(|v| v["code"] == "OVERSELL_RISK")
        .count() as u64;
    let repairs = reports[0]["repairs"].as_array().unwrap().len() as u64;

    // The lines, as CloudWatch would read them.
    let lines = lines(&captured);
    let totals = Totals::of(&lines);
    let expected_outcomes = BTreeMap::from([
        ("ACCEPTED".to_owned(), 5),
        ("REPLAYED".to_owned(), 1),
        ("LIMIT_EXCEEDED".to_owned(), 1),
        ("SOLD_OUT".to_owned(), 3),
        ("INVALID_REQUEST".to_owned(), 1),
        ("UNAUTHENTICATED".to_owned(), 1),
    ]);
    assert_eq!(totals.outcomes, expected_outcomes, "{lines:#?}");
    let expect = [
        ("purchase", "Purchases", 12),
        // u6 and u7: answered from memory after u5's refusal armed the flag.
        ("purchase", "SoldOutFastPath", 2),
        // Every call that reached Redis: 5 sold, u0's limit, u5, the replay.
        ("purchase", "LuaLatency", 8),
        ("order-writer", "OrdersWritten", 5),
        ("order-writer", "OrderDuplicates", 1),
        ("order-writer", "OrdersRejected", 1),
        ("order-writer", "OrderFailures", 2),
        ("order-writer", "DlqMoves", 1),
        ("orders-api", "OrdersPaid", 3),
        // Three payments of 19.99: one line each, summed.
        ("orders-api", "PaidAmount", 3 * 1999),
        ("orders-api", "PaymentsNeedingRefund", 1),
        ("release-unpaid", "Releases", 2),
        ("release-unpaid", "ReleasedUnits", 2),
        ("prewarm", "SalesPrewarmed", 1),
        ("reconcile", "ReconcileViolations", violations.len() as u64),
        ("reconcile", "OversellRisk", oversell),
        ("reconcile", "ReconcileRepairs", repairs),
    ];
    for (function, name, n) in expect {
        assert_eq!(
            totals.get(function, name),
            Some(n),
            "{function} {name}: {:#?}",
            totals.counts
        );
    }
    assert_eq!(
        oversell, 0,
        "a clean sale has no oversell risk: {violations:?}"
    );
    assert!(
        totals.latencies.iter().all(|&ms| ms > 0.0 && ms < 2_000.0),
        "{:?}",
        totals.latencies
    );
    for function in [
        "purchase",
        "order-writer",
        "orders-api",
        "release-unpaid",
        "prewarm",
        "reconcile",
    ] {
        assert_eq!(
            totals.get(function, "ColdStarts"),
            Some(1),
            "{function}: one cold start per wiring"
        );
    }
    // Every metric name of the contract was written (admin-api only repeats them).
    let written: BTreeSet<&str> = totals.counts.keys().map(|(_, n)| n.as_str()).collect();
    let named: BTreeSet<&str> = contract().keys().copied().collect();
    assert_eq!(written, named);

    // One line per invocation, carrying that invocation's ids.
    let purchase_lines = lines_of(&lines, "purchase");
    assert_eq!(purchase_lines.len(), 12, "one line per purchase invocation");
    for line in &purchase_lines {
        assert!(line["requestId"].is_string(), "{line}");
        if line["Outcome"] == "ACCEPTED" || line["Outcome"] == "REPLAYED" {
            assert_eq!(line["saleId"], id, "{line}");
            let order = line["orderId"].as_str().unwrap();
            assert!(order_of.values().any(|o| o == order), "{line}");
        } else if line["Outcome"] != "UNAUTHENTICATED" && line["Outcome"] != "INVALID_REQUEST" {
            assert_eq!(line["saleId"], id, "{line}");
            assert!(line.get("orderId").is_none(), "{line}");
        }
    }
    for (function, request_id, count) in [
        ("order-writer", "writer-invocation", 2),
        // u1's second click paid nothing: no line.
        ("orders-api", "pay-u1", 1),
        ("release-unpaid", "release-invocation", 1),
        ("prewarm", "prewarm-invocation", 1),
        ("reconcile", "reconcile-invocation", 1),
    ] {
        let with_id = lines_of(&lines, function)
            .into_iter()
            .filter(|l| l["requestId"] == request_id)
            .count();
        assert_eq!(with_id, count, "{function} lines with {request_id}");
    }
    // A payment's lines name its order; the callback's refund line has no
    // order in its path, and carries the counter alone.
    let api = lines_of(&lines, "orders-api");
    assert!(
        api.iter().all(|l| l.get("saleId").is_none()
            && (l.get("PaymentsNeedingRefund").is_some() || l["orderId"].is_string())),
        "{api:#?}"
    );
    let amounts: Vec<&Value> = api
        .iter()
        .filter(|l| l.get("PaidAmount").is_some())
        .copied()
        .collect();
    assert_eq!(amounts.len(), 3, "{amounts:#?}");
    assert!(
        amounts
            .iter()
            .all(|l| l["currency"] == "EUR" && l["PaidAmount"] == 1999)
    );
}
