use super::*;
use crate::domain::{OrderId, Quantity, UserId};

fn body(order: &str, sale: &str) -> String {
    serde_json::json!({
        "v": 1, "orderId": order, "saleId": sale, "userId": "u1", "quantity": 1,
        "shard": 0, "reservedAt": "2026-11-30T03:00:00.000Z"
    })
    .to_string()
}

use crate::adapters::memory::{MemoryCatalog, MemoryOrders, MemoryStock, test_sale};
use crate::domain::orders::OrderStatus;

/// A sale of 10 units, 5 a buyer, 900 s to pay, and the writer of its
/// orders.
fn writer() -> (
    OrderWriter<MemoryOrders, MemoryStock, MemoryCatalog>,
    MemoryOrders,
) {
    let catalog = MemoryCatalog::default();
    catalog.insert(test_sale("s1", 10, 5).unwrap());
    let orders = catalog.orders();
    let writer = OrderWriter::new(orders.clone(), MemoryStock::default(), catalog);
    (writer, orders)
}

fn record(order: &str, user: &str, reserved_at_ms: i64) -> QueueRecord {
    QueueRecord {
        message_id: format!("m-{order}"),
        body: serde_json::json!({
            "v": 1, "orderId": order, "saleId": "s1", "userId": user, "quantity": 1,
            "shard": 0, "reservedAt": clock::rfc3339_ms(reserved_at_ms)
        })
        .to_string(),
        receive_count: 1,
    }
}

async fn status(orders: &MemoryOrders, order: &str) -> Option<OrderStatus> {
    let id = OrderId::parse(order).unwrap();
    orders.get(&id).await.unwrap().map(|o| o.status)
}

#[tokio::test(start_paused = true)]
async fn a_group_that_conflicts_three_times_is_written_whole() {
    let (writer, orders) = writer();
    // The whole ceiling each time: 10 + 20 + 40 ms.
    let writer = writer.with_backoff(Backoff {
        jitter: false,
        ..Backoff::default()
    });
    orders.conflict_next(3);
    let now = clock::now_ms();
    let records: Vec<_> = (1..=4)
        .map(|i| record(&format!("o{i}"), &format!("u{i}"), now))
        .collect();
    let report = writer.write_batch(&records).await;
    assert_eq!(report.failed, Vec::<String>::new(), "{report:?}");
    assert_eq!((report.written, report.rejected), (4, 0), "{report:?}");
    assert_eq!(report.conflicts_retried, 3);
    assert_eq!(report.backoff, Duration::from_millis(70));
    for i in 1..=4 {
        let order = format!("o{i}");
        assert_eq!(
            status(&orders, &order).await,
            Some(OrderStatus::PendingPayment)
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_conflict_that_never_ends_is_a_transient_failure() {
    let (writer, orders) = writer();
    orders.conflict_next(u32::MAX);
    let now = clock::now_ms();
    let records: Vec<_> = (1..=3)
        .map(|i| record(&format!("o{i}"), &format!("u{i}"), now))
        .collect();
    let started = tokio::time::Instant::now();
    let report = writer.write_batch(&records).await;
    // The retries end well inside the function's 10 s timeout.
    assert!(started.elapsed() <= Backoff::default().budget, "{report:?}");
    assert!(report.conflicts_retried > 3, "{report:?}");
    assert_eq!(report.failed.len(), 3, "{report:?}");
    assert_eq!((report.transient, report.rejected), (3, 0), "{report:?}");
    for i in 1..=3 {
        assert_eq!(status(&orders, &format!("o{i}")).await, None);
    }
}

#[tokio::test(start_paused = true)]
async fn a_group_the_service_fails_once_is_sent_again_and_written() {
    let (writer, orders) = writer();
    orders.fail_next_groups(1);
    let now = clock::now_ms();
    let records: Vec<_> = (1..=3)
        .map(|i| record(&format!("o{i}"), &format!("u{i}"), now))
        .collect();
    let report = writer.write_batch(&records).await;
    assert_eq!(report.failed, Vec::<String>::new(), "{report:?}");
    assert_eq!(report.written, 3, "{report:?}");
    for i in 1..=3 {
        let order = format!("o{i}");
        assert_eq!(
            status(&orders, &order).await,
            Some(OrderStatus::PendingPayment)
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_group_the_service_fails_twice_goes_back_to_the_queue() {
    let (writer, orders) = writer();
    orders.fail_next_groups(2);
    let now = clock::now_ms();
    let records: Vec<_> = (1..=3)
        .map(|i| record(&format!("o{i}"), &format!("u{i}"), now))
        .collect();
    let report = writer.write_batch(&records).await;
    assert_eq!((report.failed.len(), report.written), (3, 0), "{report:?}");
    assert_eq!(status(&orders, "o1").await, None);
    // Sent again by the queue: written.
    let again = writer.write_batch(&records).await;
    assert_eq!(again.written, 3, "{again:?}");
}

/// The writer's clock in [`an_order_written_late_gets_its_whole_window`].
static LATE_NOW: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

fn late_now() -> i64 {
    LATE_NOW.load(std::sync::atomic::Ordering::Relaxed)
}

#[tokio::test]
async fn an_order_written_late_gets_its_whole_window() {
    use std::sync::atomic::Ordering;
    let (writer, orders) = writer();
    let writer = writer.with_clock(late_now);
    let window_ms = 900_000;
    let written_at = clock::now_ms();
    LATE_NOW.store(written_at, Ordering::Relaxed);
    // Held back in the queue for twice the payment window.
    let reserved_at = written_at - 2 * window_ms;
    let batch = [record("o1", "u1", reserved_at)];
    let report = writer.write_batch(&batch).await;
    assert_eq!((report.written, report.failed.len()), (1, 0), "{report:?}");
    let row = orders
        .get(&OrderId::parse("o1").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.created_at_ms, reserved_at);
    let expires = row.expires_at_ms.unwrap();
    assert!(
        expires >= written_at + window_ms,
        "expiresAt {} is before the write ({}) plus the window",
        clock::rfc3339_ms(expires),
        clock::rfc3339_ms(written_at)
    );
    assert_eq!(row.status_at(written_at), OrderStatus::PendingPayment);

    // Delivered again a minute later: its items differ (a later
    // expiresAt), so the group's request token does not match them and
    // the single writes find the row: a duplicate, the first window kept.
    LATE_NOW.store(written_at + 60_000, Ordering::Relaxed);
    let again = writer.write_batch(&batch).await;
    assert_eq!((again.duplicates, again.failed.len()), (1, 0), "{again:?}");
    let kept = orders
        .get(&OrderId::parse("o1").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept.expires_at_ms, Some(expires));
}

#[test]
fn contention_is_conflicts_and_throttling_and_nothing_else() {
    let codes = |c: &[&str]| c.iter().map(|c| (*c).to_owned()).collect::<Vec<_>>();
    assert!(only_contention(&codes(&[
        "None",
        "None",
        "TransactionConflict"
    ])));
    assert!(only_contention(&codes(&["ThrottlingError", "None"])));
    assert!(!only_contention(&codes(&[
        "ConditionalCheckFailed",
        "TransactionConflict"
    ])));
    assert!(!only_contention(&codes(&["None", "None"])));
    assert!(!only_contention(&codes(&["IdempotentParameterMismatch"])));
    assert!(!only_contention(&codes(&["BuyerOverLimitInGroup"])));
}

#[test]
fn parse_refuses_poison() {
    assert!(parse(&body("o1", "s1")).is_ok());
    for bad in [
        "",
        "{}",
        "not json",
        &body("o{1}", "s1"),
        &body("o1", "s1").replace("\"v\":1", "\"v\":2"),
        &body("o1", "s1").replace("2026-11-30T03:00:00.000Z", "yesterday"),
    ] {
        assert!(parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn token_is_order_independent_and_short() {
    let order = |id: &str| {
        NewOrder::new(
            OrderMessage {
                v: 1,
                order_id: OrderId::parse(id).unwrap(),
                sale_id: SaleId::parse("s").unwrap(),
                user_id: UserId::parse("u").unwrap(),
                quantity: Quantity::ONE,
                shard: 0,
                reserved_at: String::new(),
            },
            0,
            0,
            900,
        )
    };
    let a = request_token(&[order("a"), order("b")]);
    let b = request_token(&[order("b"), order("a")]);
    assert_eq!(a, b);
    assert!(a.len() <= 36);
    assert_ne!(a, request_token(&[order("a")]));
}

#[tokio::test(start_paused = true)]
async fn the_budget_counts_the_time_the_waits_took_not_the_time_they_asked_for() {
    // The timer wakes on whole milliseconds: a wait of 1.5 ms takes 2 ms.
    // Counted as asked, 66 such waits fit a 100 ms budget and take 132 ms.
    let (writer, orders) = writer();
    let backoff = Backoff {
        base: Duration::from_micros(1_500),
        cap: Duration::from_micros(1_500),
        retries: 1_000,
        budget: Duration::from_millis(100),
        jitter: false,
    };
    let writer = writer.with_backoff(backoff);
    orders.conflict_next(u32::MAX);
    let now = clock::now_ms();
    let records = vec![record("o1", "u1", now)];
    let started = tokio::time::Instant::now();
    let report = writer.write_batch(&records).await;
    assert!(
        started.elapsed() <= backoff.budget,
        "waited {:?} of a {:?} budget: {report:?}",
        started.elapsed(),
        backoff.budget
    );
    assert!(report.backoff <= backoff.budget, "{report:?}");
    assert_eq!((report.transient, report.written), (1, 0), "{report:?}");
}
