//! Unit tests of the invariants on hand-built sale states.

use super::*;
use crate::domain::{Quantity, UserId};

fn sale(total: u32, limit: u32) -> Sale {
    Sale {
        payment_window_seconds: 60,
        ..Sale::plain(SaleId::parse("s1").unwrap(), "s", total, limit, 0, 1)
    }
}

fn row(id: &str, user: &str, qty: u32, status: OrderStatus) -> (String, Order) {
    (
        id.into(),
        Order {
            order_id: OrderId::parse(id).unwrap(),
            sale_id: SaleId::parse("s1").unwrap(),
            user_id: UserId::parse(user).unwrap(),
            quantity: Quantity::new(u64::from(qty)).unwrap(),
            status,
            created_at_ms: 0,
            expires_at_ms: None,
            reject_reason: None,
            return_seq: None,
            amount: None,
            paid_at_ms: None,
            payment_id: None,
            refunds: Vec::new(),
            offer_of: None,
            offered: 0,
        },
    )
}

fn resv(user: &str, qty: u64, state: &str) -> StoredReservation {
    StoredReservation {
        user_id: user.into(),
        quantity: qty,
        at_ms: "0".into(),
        state: state.into(),
    }
}

fn state(total: u32, available: i64, sold: i64, rows: Vec<(String, Order)>) -> SaleState {
    SaleState {
        sale: sale(total, 2),
        counters: SaleCounters {
            available,
            sold,
            version: 1,
            return_seq: 0,
            loaded: true,
        },
        rows: rows.into_iter().collect(),
        redis: None,
        queue_visible: 0,
        queue_in_flight: 0,
        dlq_visible: 0,
        settled: true,
    }
}

fn codes(v: &[Violation]) -> Vec<&'static str> {
    v.iter().map(|v| v.code).collect()
}

#[test]
fn a_consistent_sale_has_no_violation() {
    let mut s = state(
        3,
        1,
        2,
        vec![
            row("o1", "alice", 1, OrderStatus::Paid),
            row("o2", "bob", 1, OrderStatus::PendingPayment),
            row("o3", "carol", 1, OrderStatus::Expired),
        ],
    );
    s.redis = Some(RedisSnapshot {
        stock: 0,
        total: 3,
        buyers: [("alice".into(), 1), ("bob".into(), 1), ("dave".into(), 1)].into(),
        reservations: [
            ("o1".into(), resv("alice", 1, "WRITTEN")),
            ("o2".into(), resv("bob", 1, "WRITTEN")),
            ("o3".into(), resv("carol", 1, "EXPIRED")),
            ("o4".into(), resv("dave", 1, "QUEUED")),
        ]
        .into(),
        ..RedisSnapshot::default()
    });
    assert_eq!(check(&s), vec![]);
}

#[test]
fn oversell_and_a_user_over_the_limit_are_found() {
    let s = state(
        2,
        0,
        3,
        vec![
            row("o1", "alice", 2, OrderStatus::Paid),
            row("o2", "alice", 1, OrderStatus::Paid),
        ],
    );
    assert_eq!(
        codes(&check(&s)),
        vec!["OVERSELL", "COUNTS_DISAGREE", "USER_OVER_LIMIT"]
    );
}

#[test]
fn redis_offering_more_than_dynamodb_is_a_risk_and_less_is_drift() {
    let mut s = state(2, 1, 1, vec![row("o1", "alice", 1, OrderStatus::Paid)]);
    let snap = |stock| RedisSnapshot {
        stock,
        total: 2,
        buyers: [("alice".into(), 1)].into(),
        reservations: BTreeMap::new(),
        ..RedisSnapshot::default()
    };
    s.redis = Some(snap(2));
    assert_eq!(codes(&check(&s)), vec!["OVERSELL_RISK"]);
    s.redis = Some(snap(0));
    assert_eq!(codes(&check(&s)), vec!["STOCK_DRIFT"]);
    // While messages are in flight the numbers move: no judgement.
    s.queue_in_flight = 1;
    assert_eq!(check(&s), vec![]);
}

#[test]
fn counters_that_moved_during_the_read_are_not_compared() {
    // An order written between the read of the sale item and the read
    // of the rows: one row more than `sold` says.
    let mut s = state(
        3,
        2,
        1,
        vec![
            row("o1", "alice", 1, OrderStatus::Paid),
            row("o2", "bob", 1, OrderStatus::PendingPayment),
        ],
    );
    s.redis = Some(RedisSnapshot {
        stock: 0,
        total: 3,
        buyers: [("alice".into(), 1), ("bob".into(), 1)].into(),
        ..RedisSnapshot::default()
    });
    assert_eq!(codes(&check(&s)), vec!["COUNTS_DISAGREE", "STOCK_DRIFT"]);
    s.settled = false;
    assert_eq!(check(&s), vec![]);
    // What needs no comparison between stores is still judged.
    if let Some(snap) = s.redis.as_mut() {
        snap.buyers.insert("alice".into(), 3);
    }
    assert_eq!(codes(&check(&s)), vec!["USER_OVER_LIMIT"]);
}

#[test]
fn an_expired_order_not_yet_given_back_is_owed_not_drift() {
    let mut s = state(1, 1, 0, vec![row("o1", "alice", 1, OrderStatus::Expired)]);
    s.redis = Some(RedisSnapshot {
        stock: 0,
        total: 1,
        buyers: [("alice".into(), 1)].into(),
        reservations: [("o1".into(), resv("alice", 1, "WRITTEN"))].into(),
        ..RedisSnapshot::default()
    });
    assert_eq!(check(&s), vec![]);
}

#[test]
fn a_buyer_counted_below_their_holding_is_a_risk() {
    let mut s = state(2, 0, 2, vec![row("o1", "alice", 2, OrderStatus::Paid)]);
    s.redis = Some(RedisSnapshot {
        stock: 0,
        total: 2,
        buyers: [("alice".into(), 1)].into(),
        reservations: BTreeMap::new(),
        ..RedisSnapshot::default()
    });
    assert_eq!(codes(&check(&s)), vec!["OVERSELL_RISK"]);
    s.redis.as_mut().unwrap().buyers.clear();
    assert_eq!(codes(&check(&s)), vec!["OVERSELL_RISK"]);
    s.redis.as_mut().unwrap().buyers.insert("alice".into(), 3);
    assert_eq!(codes(&check(&s)), vec!["USER_OVER_LIMIT"]);
}

#[test]
fn a_read_the_sale_moved_through_is_not_compared_with_the_ledger() {
    let mut s = state(2, 1, 1, vec![row("o1", "alice", 1, OrderStatus::Paid)]);
    s.redis = Some(RedisSnapshot {
        stock: 0,
        total: 2,
        buyers: [("alice".into(), 1)].into(),
        ..RedisSnapshot::default()
    });
    assert_eq!(codes(&check(&s)), vec!["STOCK_DRIFT"]);
    s.redis.as_mut().unwrap().moving = true;
    assert_eq!(check(&s), vec![]);
}

#[test]
fn a_buyer_read_again_is_judged_on_that_read() {
    // The scan saw two queued reservations of bob's, then (later) his
    // count after one of them was released: a count below his holding
    // as scanned, which the read of his count and reservations in one
    // step shows was not one.
    let mut s = state(5, 5, 0, vec![]);
    s.redis = Some(RedisSnapshot {
        stock: 3,
        total: 5,
        buyers: [("bob".into(), 1)].into(),
        reservations: [
            ("o8".into(), resv("bob", 1, "QUEUED")),
            ("o9".into(), resv("bob", 1, "QUEUED")),
        ]
        .into(),
        moving: true,
        ..RedisSnapshot::default()
    });
    assert_eq!(codes(&check(&s)), vec!["OVERSELL_RISK"]);
    let read_again = |units| Holding {
        count: Some(1),
        reservations: [("o9".into(), resv("bob", units, "QUEUED"))].into(),
    };
    let snap = s.redis.as_mut().unwrap();
    snap.holdings.insert("bob".into(), read_again(1));
    assert_eq!(check(&s), vec![]);
    // A real one shows in the read again too.
    let snap = s.redis.as_mut().unwrap();
    snap.holdings.insert("bob".into(), read_again(2));
    assert_eq!(codes(&check(&s)), vec!["OVERSELL_RISK"]);
}

#[test]
fn buyers_whose_count_nothing_explains_are_read_again() {
    let rows: BTreeMap<String, Order> = [row("o1", "alice", 1, OrderStatus::Paid)]
        .into_iter()
        .collect();
    let snap = RedisSnapshot {
        buyers: [
            ("alice".into(), 1),
            ("bob".into(), 1),
            ("carol".into(), 2),
            ("ghost".into(), 1),
        ]
        .into(),
        reservations: [
            ("o1".into(), resv("alice", 1, "WRITTEN")),
            ("o2".into(), resv("bob", 1, "QUEUED")),
            ("o3".into(), resv("carol", 1, "QUEUED")),
            ("o4".into(), resv("dave", 1, "QUEUED")),
        ]
        .into(),
        ..RedisSnapshot::default()
    };
    assert_eq!(
        buyers_to_read_again(&rows, &snap),
        vec!["carol", "dave", "ghost"]
    );
}

#[test]
fn an_accepted_order_found_nowhere_is_lost() {
    let mut s = state(2, 0, 1, vec![row("o1", "alice", 1, OrderStatus::Paid)]);
    s.redis = Some(RedisSnapshot {
        stock: 0,
        total: 2,
        buyers: BTreeMap::new(),
        reservations: [("o2".into(), resv("bob", 1, "QUEUED"))].into(),
        ..RedisSnapshot::default()
    });
    let accepted: Vec<OrderId> = ["o1", "o2", "o3", "o4"]
        .into_iter()
        .map(|id| OrderId::parse(id).unwrap())
        .collect();
    let in_queue: HashSet<String> = ["o3".to_string()].into();
    let lost = lost_orders(&s, &accepted, &in_queue);
    assert_eq!(codes(&lost), vec!["LOST_ORDER"]);
    assert!(lost[0].detail.starts_with("o4 "));
}

/// A sale of 2: alice's order of 2 expired and handed one unit to bob on
/// the waitlist, one back to the stock; the release crashed before Redis
/// heard of it.
fn handed_over() -> SaleState {
    let mut expired = row("o1", "alice", 2, OrderStatus::Expired);
    expired.1.offered = 1;
    let mut offer = row("w1", "bob", 1, OrderStatus::PendingPayment);
    offer.1.offer_of = Some(OrderId::parse("o1").unwrap());
    let mut s = state(2, 1, 1, vec![expired, offer]);
    s.redis = Some(RedisSnapshot {
        stock: 0,
        total: 2,
        buyers: [("alice".into(), 2), ("bob".into(), 1)].into(),
        reservations: [("o1".into(), resv("alice", 2, "WRITTEN"))].into(),
        ..RedisSnapshot::default()
    });
    s
}

#[test]
fn an_expired_order_handed_to_the_line_owes_redis_only_what_went_to_stock() {
    assert_eq!(check(&handed_over()), vec![]);
}

#[test]
fn a_unit_offered_twice_is_found() {
    // Two offers of o1's one offered unit.
    let mut s = handed_over();
    let mut again = row("w2", "carol", 1, OrderStatus::PendingPayment);
    again.1.offer_of = Some(OrderId::parse("o1").unwrap());
    s.rows.insert(again.0, again.1);
    s.counters.sold = 2;
    s.counters.available = 0;
    assert!(
        codes(&check(&s)).contains(&"OFFERED_TWICE"),
        "{:?}",
        check(&s)
    );
    // One buyer offered twice (one entry per buyer and sale).
    let mut s = handed_over();
    let mut expired = row("o2", "dave", 1, OrderStatus::Expired);
    expired.1.offered = 1;
    let mut again = row("w3", "bob", 1, OrderStatus::PendingPayment);
    again.1.offer_of = Some(OrderId::parse("o2").unwrap());
    s.rows.extend([expired, again]);
    s.sale.total_stock = 3;
    s.counters.sold = 2;
    s.redis = None;
    assert_eq!(codes(&check(&s)), vec!["OFFERED_TWICE"]);
}

#[test]
fn a_unit_handed_to_the_line_with_no_offer_is_lost() {
    let mut s = handed_over();
    s.rows.remove("w1");
    s.redis = None;
    assert_eq!(codes(&check(&s)), vec!["COUNTS_DISAGREE", "OFFER_LOST"]);
    // While the sale item moved, an offer may be read before its order.
    s.settled = false;
    assert_eq!(check(&s), vec![]);
}
