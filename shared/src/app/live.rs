//! What the operator dashboard polls every second or two:
//! `GET /admin/sales/{saleId}/live`, one sale's state from every store.
//!
//! - `stock`: the total (catalog), what Redis has left (every shard summed;
//!   `null` when Redis does not hold the sale) and the status buyers see
//!   (`GET /sales/{saleId}`'s rule, [`crate::app::order_queries::public_status`]).
//! - `orders`: orders by status, counted on the `bySaleBucketStatus` index
//!   ([`OrderLedger::count_of_sale`]); every status the table holds, 0
//!   when none.
//! - `queue`: the orders queue and its DLQ. They serve every sale, so this
//!   is the system's lag, not the sale's alone.
//! - `outcomes`: cumulative purchase answers for the sale by the `Purchases`
//!   metric's outcome, from `sale:{S}:outcomes` ([`crate::observe::outcomes`]): up to
//!   a second behind, and an idle Lambda environment's last second arrives
//!   with its next invocation. The page derives rates from two polls.
//!   Every [listed](crate::domain::Outcome::is_listed) outcome is there,
//!   0 until it happens, so a page's rate of each starts from a number.
//! - `outcomeCodes`: those listed outcomes' codes in the order a page shows
//!   them ([`crate::domain::Outcome::ALL`]'s), present even when `outcomes`
//!   is `null`: the page's rows come from here, not from a copy of its own.
//! - `lastReport`: the last reconcile report, as `GET .../report` returns it.
//! - `soldOutAt`, `timeToSellOutMs`: when the sale first sold out and how
//!   long from its start ([`crate::app::console::sell_out`]).
//! - `funnel`: the outcomes per 10-second bucket since the start, oldest
//!   first, from `sale:{S}:funnel` (the same flush as `outcomes`, so the
//!   same lag; the last hour at most): the history a reload keeps.
//!
//! Everything is read, nothing written. The sale item comes first (404 for
//! an unknown sale; 503 when the table cannot be read); the other reads run
//! concurrently, and a store that cannot be read leaves its parts `null`
//! and is named in `unavailable` (`redis`, `orders`, `queue`): an operator
//! needs the rest of the view most when one store is in trouble.

use crate::app::invariants::InvariantChecker;
use crate::app::jobs::JobError;
use crate::clock;
use crate::domain::orders::OrderStatus;
use crate::domain::{Outcome, Sale, SaleId};
use crate::ports::{CatalogAdmin, OrderLedger, QueueDepth, QueueInspector, StockAdmin, StockView};
use std::collections::BTreeMap;

/// The statuses an order row can have (`QUEUED` is never stored: it is a
/// reservation without a row).
pub const STORED_STATUSES: [OrderStatus; 4] = [
    OrderStatus::PendingPayment,
    OrderStatus::Paid,
    OrderStatus::Expired,
    OrderStatus::Rejected,
];

/// Everything the view is made of, as read; `None` where a store could
/// not be read.
#[derive(Debug, Clone)]
pub struct LiveState {
    pub sale: Sale,
    /// Redis's view of the sale; the inner `None`: Redis does not hold it.
    pub stock: Option<Option<StockView>>,
    /// The orders by status and when they were counted.
    pub orders: Option<crate::ports::OrderCounts>,
    pub queue: Option<QueueDepth>,
    pub dlq: Option<QueueDepth>,
    /// From Redis, with the stock.
    pub outcomes: Option<BTreeMap<String, u64>>,
    /// The last reconcile report's JSON, if any.
    pub last_report: Option<String>,
    /// From Redis: when the sale first sold out (inner `None`: not yet).
    pub sold_out_at_ms: Option<Option<i64>>,
    /// From Redis: the outcomes per bucket, oldest first.
    pub funnel: Option<Vec<crate::ports::FunnelBucket>>,
}

impl LiveState {
    /// The stores that could not be read, as `unavailable` names them.
    pub fn unavailable(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.stock.is_none()
            || self.outcomes.is_none()
            || self.sold_out_at_ms.is_none()
            || self.funnel.is_none()
        {
            out.push("redis");
        }
        if self.orders.is_none() {
            out.push("orders");
        }
        if self.queue.is_none() || self.dlq.is_none() {
            out.push("queue");
        }
        out
    }

    /// Orders by stored status, every status present (0 when none);
    /// `None` when the table could not be read.
    pub fn order_counts(&self) -> Option<BTreeMap<&'static str, u64>> {
        self.orders.as_ref().map(|o| listed_statuses(&o.counts))
    }

    /// Purchase answers by outcome, every listed one present (0 until it
    /// happens); `None` when Redis could not be read.
    pub fn outcome_counts(&self) -> Option<BTreeMap<String, u64>> {
        self.outcomes.as_ref().map(listed_at_zero)
    }

    /// The funnel's buckets, oldest first, each with every listed outcome.
    pub fn funnel_counts(&self) -> Option<Vec<(i64, BTreeMap<String, u64>)>> {
        self.funnel.as_ref().map(|buckets| {
            buckets
                .iter()
                .map(|(at, counted)| (*at, listed_at_zero(counted)))
                .collect()
        })
    }
}

/// Counts by stored status, every one present (0 when none).
fn listed_statuses(counted: &BTreeMap<String, u64>) -> BTreeMap<&'static str, u64> {
    STORED_STATUSES
        .iter()
        .map(|s| (s.as_str(), counted.get(s.as_str()).copied().unwrap_or(0)))
        .collect()
}

/// What the live view may spend counting one sale's orders, in read units
/// a second, however many consoles poll it: a count reads the sale's index
/// entries (about [`READ_UNITS_PER_ORDER`] each, and at least half a unit
/// for each bucket and status queried), so the next count waits until the
/// last one is paid for. A small sale is counted about once a second, a
/// sale of a million orders about every eight minutes.
pub const COUNT_READ_UNITS_PER_SECOND: f64 = 100.0;

/// The buckets a sale's orders are spread over on the index: each is one
/// query per status (the adapter's `SALE_BUCKETS`; a test holds them equal).
pub const INDEX_BUCKETS: u32 = 32;

/// The index entries' read cost per order (eventually consistent reads of
/// small items); `docs/api.md` "/live in detail" derives it.
pub const READ_UNITS_PER_ORDER: f64 = 0.05;

/// How long the count of `counted` orders is shared before the next one:
/// its read units at [`COUNT_READ_UNITS_PER_SECOND`], at least a second.
pub fn count_holds(counted: &BTreeMap<String, u64>) -> std::time::Duration {
    let orders: u64 = counted.values().sum();
    #[allow(clippy::cast_precision_loss)]
    let units = 0.5 * STORED_STATUSES.len() as f64 * f64::from(INDEX_BUCKETS)
        + READ_UNITS_PER_ORDER * orders as f64;
    std::time::Duration::from_secs_f64((units / COUNT_READ_UNITS_PER_SECOND).max(1.0))
}

/// Counts by outcome with every listed outcome present, 0 until it happens.
fn listed_at_zero(counted: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let mut outcomes: BTreeMap<String, u64> = Outcome::listed()
        .map(|o| (o.as_str().to_owned(), 0))
        .collect();
    for (outcome, n) in counted {
        outcomes.insert(outcome.clone(), *n);
    }
    outcomes
}

/// A part of the view, or `None` (logged) when its store cannot be read.
fn part<T, E: std::fmt::Display>(sale_id: &SaleId, what: &str, read: Result<T, E>) -> Option<T> {
    read.map_err(|err| tracing::warn!(%sale_id, %err, "live view: cannot read {what}"))
        .ok()
}

/// Reads the sale's live state from the stores the checker reads; `None`
/// when the sale does not exist. Fails only when the sale item cannot be
/// read.
pub async fn observe<Q, S, C, O>(
    checker: &InvariantChecker<Q, S, C, O>,
    sale_id: &SaleId,
) -> Result<Option<LiveState>, JobError>
where
    Q: QueueInspector,
    S: StockAdmin,
    C: CatalogAdmin,
    O: OrderLedger,
{
    let Some((sale, last_report)) = checker.catalog().sale_with_report(sale_id).await? else {
        return Ok(None);
    };
    let stock = checker.stock();
    let dlq = async {
        checker
            .queue()
            .dlq_depth()
            .await
            .map(Option::unwrap_or_default)
    };
    // Redis first: a count is shared through it only for a sale it holds
    // (a view creates no key for a sale not loaded, or gone).
    let view = stock.view(sale_id, None).await;
    let orders = order_counts(checker, sale_id, matches!(view, Ok(Some(_))));
    let (outcomes, orders, queue, dlq, sold_out_at, funnel) = tokio::join!(
        stock.outcomes(sale_id),
        orders,
        checker.queue().depth(),
        dlq,
        stock.sold_out_at(&sale),
        stock.funnel(sale_id),
    );
    Ok(Some(LiveState {
        sale,
        stock: part(sale_id, "Redis", view),
        orders: part(sale_id, "the orders index", orders),
        queue: part(sale_id, "the orders queue", queue),
        dlq: part(sale_id, "the DLQ", dlq),
        outcomes: part(sale_id, "the outcome tally", outcomes),
        last_report,
        sold_out_at_ms: part(sale_id, "the sell-out time", sold_out_at),
        funnel: part(sale_id, "the funnel", funnel),
    }))
}

/// The sale's orders by status: the count every console shares while it
/// holds ([`count_holds`]), else a count of the index made now (and shared,
/// by the caller that claimed it). Not `shared` (Redis does not hold the
/// sale) or Redis out of reach: counted on every poll, as there is nowhere
/// to share it.
async fn order_counts<Q, S, C, O>(
    checker: &InvariantChecker<Q, S, C, O>,
    sale_id: &SaleId,
    shared: bool,
) -> Result<crate::ports::OrderCounts, JobError>
where
    Q: QueueInspector,
    S: StockAdmin,
    C: CatalogAdmin,
    O: OrderLedger,
{
    let stock = checker.stock();
    let now_ms = clock::now_ms();
    let cached = if shared {
        stock.order_counts(sale_id).await.unwrap_or_default()
    } else {
        None
    };
    let hold = cached
        .as_ref()
        .map_or(std::time::Duration::from_secs(1), |c| {
            count_holds(&c.counts)
        });
    if let Some(c) = &cached
        && now_ms - c.at_ms < i64::try_from(hold.as_millis()).unwrap_or(i64::MAX)
    {
        return Ok(c.clone());
    }
    let claimed = shared && stock.claim_order_count(sale_id, hold).await.unwrap_or(true);
    if !claimed && let Some(c) = cached {
        return Ok(c);
    }
    let count = |status: OrderStatus| async move {
        checker
            .orders()
            .count_of_sale(sale_id, status)
            .await
            .map(|n| (status.as_str().to_owned(), n))
    };
    let [a, b, c, d] = STORED_STATUSES;
    let counted = tokio::try_join!(count(a), count(b), count(c), count(d))?;
    let fresh = crate::ports::OrderCounts {
        at_ms: now_ms,
        counts: BTreeMap::from([counted.0, counted.1, counted.2, counted.3]),
    };
    if claimed && let Err(err) = stock.store_order_counts(sale_id, &fresh).await {
        tracing::debug!(%sale_id, %err, "live view: the count is not shared");
    }
    Ok(fresh)
}

/// What `GET /admin/sales/{saleId}/live` shows; `None` for an unknown sale.
pub async fn live<Q, S, C, O>(
    checker: &InvariantChecker<Q, S, C, O>,
    sale_id: &SaleId,
) -> Result<Option<LiveState>, JobError>
where
    Q: QueueInspector,
    S: StockAdmin,
    C: CatalogAdmin,
    O: OrderLedger,
{
    observe(checker, sale_id).await
}

#[cfg(test)]
mod tests {
    use super::*;

    impl LiveState {
        /// The view as the route writes it.
        fn body(&self, now_ms: i64) -> serde_json::Value {
            serde_json::to_value(crate::http::bodies::live::LiveView::of(self, now_ms)).unwrap()
        }
    }

    fn state() -> LiveState {
        LiveState {
            sale: crate::adapters::memory::test_sale("s1", 10, 1).unwrap(),
            stock: Some(Some(StockView {
                remaining: 4,
                paused: false,
                reservation: None,
            })),
            orders: Some(crate::ports::OrderCounts {
                at_ms: 1_000,
                counts: STORED_STATUSES.map(|s| (s.as_str().to_owned(), 1)).into(),
            }),
            queue: Some(QueueDepth {
                visible: 2,
                in_flight: 3,
                delayed: 1,
            }),
            dlq: Some(QueueDepth::default()),
            outcomes: Some(BTreeMap::from([
                ("ACCEPTED".into(), 6),
                ("SOLD_OUT".into(), 9),
            ])),
            last_report: Some(r#"{"saleId":"s1","violations":[]}"#.into()),
            sold_out_at_ms: Some(None),
            funnel: Some(vec![(
                20_000,
                BTreeMap::from([("ACCEPTED".into(), 2), ("SOLD_OUT".into(), 5)]),
            )]),
        }
    }

    #[test]
    fn the_body_has_every_field_of_the_contract() {
        let body = state().body(1_000);
        assert_eq!(body["saleId"], "s1");
        assert_eq!(body["atMs"], 1_000);
        assert_eq!(
            body["stock"],
            serde_json::json!({"total": 10, "remaining": 4, "status": "UPCOMING"})
        );
        assert_eq!(
            body["orders"],
            serde_json::json!({"PENDING_PAYMENT": 1, "PAID": 1, "EXPIRED": 1, "REJECTED": 1})
        );
        assert_eq!(
            body["queue"],
            serde_json::json!({"visible": 3, "inFlight": 3, "dlq": 0})
        );
        assert_eq!(body["outcomes"]["ACCEPTED"], 6);
        assert_eq!(body["outcomes"]["SOLD_OUT"], 9);
        assert_eq!(body["outcomes"]["RATE_LIMITED"], 0, "listed at 0");
        let listed: Vec<&str> = Outcome::listed().map(Outcome::as_str).collect();
        assert_eq!(body["outcomeCodes"], serde_json::json!(listed));
        let keys: Vec<&str> = body["outcomes"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut sorted = listed.clone();
        sorted.sort_unstable();
        assert_eq!(keys, sorted, "outcomes lists exactly the listed codes");
        assert_eq!(body["lastReport"]["saleId"], "s1");
        assert!(body["soldOutAt"].is_null() && body["timeToSellOutMs"].is_null());
        assert_eq!(body["funnel"][0]["atMs"], 20_000);
        assert_eq!(body["funnel"][0]["outcomes"]["SOLD_OUT"], 5);
        assert_eq!(
            body["funnel"][0]["outcomes"]["RATE_LIMITED"], 0,
            "listed at 0"
        );
        assert_eq!(body["unavailable"], serde_json::json!([]));
    }

    #[test]
    fn a_store_that_cannot_be_read_leaves_its_parts_null() {
        let mut state = state();
        state.stock = None;
        state.outcomes = None;
        state.sold_out_at_ms = None;
        state.funnel = None;
        let now = state.sale.start_ms + 1;
        let body = state.body(now);
        assert!(body["stock"]["remaining"].is_null());
        assert!(body["funnel"].is_null() && body["soldOutAt"].is_null());
        assert_eq!(body["stock"]["total"], 10);
        assert!(body["outcomes"].is_null());
        assert_eq!(body["outcomeCodes"][0], "ACCEPTED", "the rows still show");
        assert_eq!(body["orders"]["PAID"], 1, "the other stores still show");
        assert_eq!(body["unavailable"], serde_json::json!(["redis"]));
        state.orders = None;
        state.dlq = None;
        let body = state.body(now);
        assert!(body["orders"].is_null());
        assert_eq!(body["queue"]["visible"], 3);
        assert!(body["queue"]["dlq"].is_null());
        assert_eq!(
            body["unavailable"],
            serde_json::json!(["redis", "orders", "queue"])
        );
    }

    #[test]
    fn a_sale_redis_does_not_hold_has_no_remaining() {
        let mut state = state();
        state.stock = Some(None);
        state.last_report = None;
        let now = state.sale.start_ms + 1;
        let body = state.body(now);
        assert!(body["stock"]["remaining"].is_null());
        assert_eq!(body["stock"]["status"], "PAUSED");
        assert!(body["lastReport"].is_null());
        state.stock = Some(Some(StockView {
            remaining: 0,
            paused: false,
            reservation: None,
        }));
        assert_eq!(state.body(now)["stock"]["status"], "SOLD_OUT");
        assert_eq!(state.body(state.sale.end_ms)["stock"]["status"], "ENDED");
    }

    #[test]
    fn a_count_is_shared_for_as_long_as_its_read_units_take_at_the_budget() {
        assert_eq!(
            INDEX_BUCKETS,
            crate::adapters::dynamo::order_index::SALE_BUCKETS
        );
        let of = |n: u64| BTreeMap::from([("PAID".to_owned(), n)]);
        // An empty or small sale: the floor of 64 units is under a second.
        assert_eq!(count_holds(&of(0)), std::time::Duration::from_secs(1));
        assert_eq!(count_holds(&of(700)), std::time::Duration::from_secs(1));
        assert_eq!(
            count_holds(&of(2_000)),
            std::time::Duration::from_millis(1_640)
        );
        // A million orders: 50,064 units at 100 a second.
        let million = count_holds(&of(1_000_000));
        assert!((500..=501).contains(&million.as_secs()), "{million:?}");
    }
}
