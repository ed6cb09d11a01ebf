//! Reconciliation: compare Redis (stock, buyers, reservations by state), the
//! queue (visible, in flight, DLQ) and DynamoDB (sale item, orders by status)
//! for one sale; check the design's invariants; repair only what is provably
//! safe; report everything else.
//!
//! Repairs:
//! - a `QUEUED` reservation older than the grace period with no order row is
//!   relayed to the queue again (the outbox relay for a crash between Redis
//!   and SQS; a duplicate delivery writes nothing twice);
//! - one older than the maximum age is given up: recorded as a `REJECTED`
//!   row (so a late redrive cannot resurrect it), its stock released;
//! - a reservation whose row exists is marked `WRITTEN` / `REJECTED`;
//! - an order `EXPIRED` in DynamoDB whose units Redis never got back gets
//!   them back (the release crashed between its two steps);
//! - a buyer count above what the buyer provably holds is lowered.
//!
//! Anything that could mean oversell is reported as `OVERSELL_RISK` and never
//! fixed automatically.

use crate::clock;
use crate::domain::{OrderId, OrderMessage, Quantity, Sale, SaleId, UserId};
use crate::dynamo::DynamoCatalog;
use crate::dynamo_orders::DynamoOrders;
use crate::jobs::JobError;
use crate::orders::{NewOrder, Order, OrderStatus, OrderStore};
use crate::ports::{OrderQueue, Resolution, StockStore};
use crate::redis_store::{RedisStock, Returned};
use crate::sqs_queue::SqsQueue;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

#[derive(Debug, Clone, Copy)]
pub struct ReconcileSettings {
    /// A `QUEUED` reservation younger than this may still be on its way.
    pub grace: Duration,
    /// A `QUEUED` reservation older than this is given up and released.
    pub max_age: Duration,
}

impl Default for ReconcileSettings {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(60),
            max_age: Duration::from_secs(3_600),
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Violation {
    pub code: &'static str,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Repair {
    pub kind: &'static str,
    pub order_id: Option<String>,
    pub detail: String,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconcileReport {
    pub sale_id: String,
    pub at: String,
    pub redis_loaded: bool,
    pub redis_stock: Option<i64>,
    pub reservations: BTreeMap<String, usize>,
    pub queue_visible: u64,
    pub queue_in_flight: u64,
    pub dlq_visible: u64,
    pub total_stock: i64,
    pub available: i64,
    pub sold: i64,
    pub orders: BTreeMap<String, usize>,
    pub violations: Vec<Violation>,
    pub repairs: Vec<Repair>,
}

pub struct Reconciler {
    stock: RedisStock,
    catalog: DynamoCatalog,
    orders: DynamoOrders,
    queue: SqsQueue,
    sqs: aws_sdk_sqs::Client,
    dlq_url: Option<String>,
    settings: ReconcileSettings,
}

impl Reconciler {
    pub fn new(
        stock: RedisStock,
        catalog: DynamoCatalog,
        orders: DynamoOrders,
        queue: SqsQueue,
        sqs: aws_sdk_sqs::Client,
        dlq_url: Option<String>,
        settings: ReconcileSettings,
    ) -> Self {
        Self {
            stock,
            catalog,
            orders,
            queue,
            sqs,
            dlq_url,
            settings,
        }
    }

    pub fn catalog(&self) -> &DynamoCatalog {
        &self.catalog
    }

    /// The same reconciler with other grace and maximum ages.
    pub fn with_settings(mut self, settings: ReconcileSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Reconciles every sale that is running or ended within the key TTL.
    pub async fn reconcile_all(&self, now_ms: i64) -> Result<Vec<ReconcileReport>, JobError> {
        let mut reports = Vec::new();
        for sale in crate::ports::SaleCatalog::list_sales(&self.catalog).await? {
            let open = now_ms >= sale.start_ms
                && now_ms < sale.end_ms + crate::redis_store::KEY_TTL_AFTER_END_MS;
            if open && let Some(report) = self.reconcile_sale(&sale.sale_id, now_ms).await? {
                reports.push(report);
            }
        }
        Ok(reports)
    }

    /// Reconciles one sale; `None` when it does not exist.
    pub async fn reconcile_sale(
        &self,
        sale_id: &SaleId,
        now_ms: i64,
    ) -> Result<Option<ReconcileReport>, JobError> {
        let Some((sale, counters)) = self.catalog.get_record(sale_id).await? else {
            return Ok(None);
        };
        let mut report = ReconcileReport {
            sale_id: sale_id.to_string(),
            at: clock::rfc3339_ms(now_ms),
            total_stock: i64::from(sale.total_stock),
            available: counters.available,
            sold: counters.sold,
            ..ReconcileReport::default()
        };
        (report.queue_visible, report.queue_in_flight) = self.depth(self.queue.queue_url()).await?;
        if let Some(dlq) = &self.dlq_url {
            report.dlq_visible = self.depth(dlq).await?.0;
        }

        let mut rows: HashMap<String, Order> = HashMap::new();
        for status in [
            OrderStatus::PendingPayment,
            OrderStatus::Paid,
            OrderStatus::Expired,
            OrderStatus::Rejected,
        ] {
            let found = self.orders.orders_of_sale(sale_id, status).await?;
            report.orders.insert(status.as_str().into(), found.len());
            rows.extend(found.into_iter().map(|o| (o.order_id.to_string(), o)));
        }
        let mut held_by_user: HashMap<String, i64> = HashMap::new();
        for o in rows.values().filter(|o| holds_units(o.status)) {
            *held_by_user.entry(o.user_id.to_string()).or_default() += i64::from(o.quantity.get());
        }
        self.check_database(&sale, &report.clone(), &held_by_user, &mut report);

        let Some(snap) = self.stock.snapshot(sale_id).await? else {
            report.redis_loaded = false;
            self.store(&report).await;
            return Ok(Some(report));
        };
        report.redis_loaded = true;
        report.redis_stock = Some(snap.stock);
        for r in snap.reservations.values() {
            *report.reservations.entry(r.state.clone()).or_default() += 1;
        }

        let grace = millis(self.settings.grace);
        let max_age = millis(self.settings.max_age);
        let mut queued_units = 0i64;
        let mut queued_by_user: HashMap<String, i64> = HashMap::new();
        for (order_id, resv) in &snap.reservations {
            let row = rows.get(order_id);
            let at_ms = resv.at_ms.parse::<i64>().unwrap_or(now_ms);
            match (resv.state.as_str(), row) {
                ("QUEUED", None) => {
                    let age = now_ms - at_ms;
                    if age > max_age {
                        self.give_up(&sale, order_id, resv, &mut report).await;
                    } else {
                        queued_units += i64::try_from(resv.quantity).unwrap_or(0);
                        *queued_by_user.entry(resv.user_id.clone()).or_default() +=
                            i64::try_from(resv.quantity).unwrap_or(0);
                        if age > grace {
                            self.relay(&sale, order_id, resv, &mut report).await;
                        }
                    }
                }
                ("QUEUED", Some(order)) => {
                    let resolution = if order.status == OrderStatus::Rejected {
                        Resolution::Rejected
                    } else {
                        Resolution::Written
                    };
                    if let Ok(id) = OrderId::parse(order_id)
                        && self
                            .stock
                            .resolve(sale_id, &id, resolution)
                            .await
                            .unwrap_or(false)
                    {
                        report.repairs.push(Repair {
                            kind: "MARKED",
                            order_id: Some(order_id.clone()),
                            detail: format!("reservation marked {}", resolution.as_str()),
                        });
                    }
                }
                _ => {}
            }
        }
        // Expired in DynamoDB, units never given back to Redis.
        for order in rows.values().filter(|o| o.status == OrderStatus::Expired) {
            let state = snap
                .reservations
                .get(order.order_id.as_str())
                .map(|r| r.state.as_str());
            if state != Some("EXPIRED") {
                match self
                    .stock
                    .return_units(
                        sale_id,
                        &order.order_id,
                        order.user_id.as_str(),
                        order.quantity.get(),
                    )
                    .await
                {
                    Ok(Returned::Returned { .. }) => report.repairs.push(Repair {
                        kind: "UNITS_RETURNED",
                        order_id: Some(order.order_id.to_string()),
                        detail: "expired order's units given back to Redis".into(),
                    }),
                    Ok(_) => {}
                    Err(err) => report.violations.push(Violation {
                        code: "REPAIR_FAILED",
                        detail: format!("{}: {err}", order.order_id),
                    }),
                }
            }
        }
        // Buyer counts above what the buyer provably holds.
        for (user, &count) in &snap.buyers {
            let provable = held_by_user.get(user).copied().unwrap_or(0)
                + queued_by_user.get(user).copied().unwrap_or(0);
            if count > provable {
                if let Ok(now) = self.stock.lower_buyer(sale_id, user, provable).await {
                    report.repairs.push(Repair {
                        kind: "BUYER_CLEARED",
                        order_id: None,
                        detail: format!("{user}: {count} -> {now}"),
                    });
                }
            } else if count < provable {
                report.violations.push(Violation {
                    code: "OVERSELL_RISK",
                    detail: format!(
                        "{user} holds {provable} units but Redis counts {count}: the limit check could let them buy more"
                    ),
                });
            }
        }
        // Redis must never offer units DynamoDB does not have. Only judged
        // when nothing is in flight (otherwise the numbers are moving).
        if report.queue_visible + report.queue_in_flight == 0 {
            let offered = snap.stock + queued_units;
            if offered > counters.available {
                report.violations.push(Violation {
                    code: "OVERSELL_RISK",
                    detail: format!(
                        "Redis offers {} units plus {queued_units} queued, DynamoDB has {} available",
                        snap.stock, counters.available
                    ),
                });
            } else if offered < counters.available {
                report.violations.push(Violation {
                    code: "STOCK_DRIFT",
                    detail: format!(
                        "Redis offers {offered} units (stock {} + queued {queued_units}) but DynamoDB has {} available: underselling",
                        snap.stock, counters.available
                    ),
                });
            }
        }
        self.store(&report).await;
        println!("{}", emf_line(&report, now_ms));
        tracing::info!(
            sale_id = %sale_id,
            violations = report.violations.len(),
            repairs = report.repairs.len(),
            "reconciled"
        );
        Ok(Some(report))
    }

    fn check_database(
        &self,
        sale: &Sale,
        seen: &ReconcileReport,
        held_by_user: &HashMap<String, i64>,
        report: &mut ReconcileReport,
    ) {
        let held: i64 = held_by_user.values().sum();
        let total = i64::from(sale.total_stock);
        if held > total || seen.sold > total {
            report.violations.push(Violation {
                code: "OVERSELL",
                detail: format!(
                    "orders hold {held} units, sold {}, total {total}",
                    seen.sold
                ),
            });
        }
        if seen.sold != held || seen.available + seen.sold != total {
            report.violations.push(Violation {
                code: "COUNTS_DISAGREE",
                detail: format!(
                    "sale item available {} + sold {} vs total {total}; orders hold {held}",
                    seen.available, seen.sold
                ),
            });
        }
        for (user, &units) in held_by_user {
            if units > i64::from(sale.per_user_limit) {
                report.violations.push(Violation {
                    code: "USER_OVER_LIMIT",
                    detail: format!("{user} holds {units} > {}", sale.per_user_limit),
                });
            }
        }
    }

    async fn relay(
        &self,
        sale: &Sale,
        order_id: &str,
        resv: &crate::redis_store::StoredReservation,
        report: &mut ReconcileReport,
    ) {
        let Some(message) = message_of(sale, order_id, resv) else {
            report.violations.push(Violation {
                code: "BAD_RESERVATION",
                detail: order_id.into(),
            });
            return;
        };
        match self.queue.send(&message).await {
            Ok(()) => report.repairs.push(Repair {
                kind: "RELAYED",
                order_id: Some(order_id.into()),
                detail: "reservation without an order relayed to the queue".into(),
            }),
            Err(err) => report.violations.push(Violation {
                code: "REPAIR_FAILED",
                detail: format!("relay of {order_id}: {err}"),
            }),
        }
    }

    async fn give_up(
        &self,
        sale: &Sale,
        order_id: &str,
        resv: &crate::redis_store::StoredReservation,
        report: &mut ReconcileReport,
    ) {
        let Some(message) = message_of(sale, order_id, resv) else {
            return;
        };
        let at_ms = resv.at_ms.parse::<i64>().unwrap_or(0);
        let order = NewOrder::new(message, at_ms, sale.payment_window_seconds);
        // The row first: once it exists as REJECTED, a late redelivery of the
        // message is a duplicate and cannot take the units back.
        if let Err(err) = self.orders.write_rejected(&order).await {
            report.violations.push(Violation {
                code: "REPAIR_FAILED",
                detail: format!("give up {order_id}: {err}"),
            });
            return;
        }
        let id = order.message.order_id.clone();
        match self.stock.release(&sale.sale_id, &id).await {
            Ok(outcome) => {
                tracing::warn!(%order_id, ?outcome, "reservation older than the maximum age released and recorded as failed");
                report.repairs.push(Repair {
                    kind: "RELEASED_FAILED",
                    order_id: Some(order_id.into()),
                    detail: "never became an order within the maximum age; stock released".into(),
                });
            }
            Err(err) => report.violations.push(Violation {
                code: "REPAIR_FAILED",
                detail: format!("release {order_id}: {err}"),
            }),
        }
    }

    /// (visible, in flight) of a queue.
    async fn depth(&self, url: &str) -> Result<(u64, u64), JobError> {
        let depth = crate::sqs_queue::depth(&self.sqs, url)
            .await
            .map_err(JobError::Queue)?;
        Ok((depth.visible + depth.delayed, depth.in_flight))
    }

    /// The last report is kept on the sale item for the admin API.
    async fn store(&self, report: &ReconcileReport) {
        let json = serde_json::to_string(report).unwrap_or_default();
        if let Err(err) = self.catalog.store_report(&report.sale_id, &json).await {
            tracing::warn!(sale_id = %report.sale_id, %err, "could not store the reconcile report");
        }
    }
}

/// The report's counts as one CloudWatch embedded-metric-format line:
/// printed to stdout, which Lambda sends to CloudWatch Logs, where it becomes
/// the metrics `ReconcileViolations` and `ReconcileRepairs` per sale.
pub fn emf_line(report: &ReconcileReport, now_ms: i64) -> String {
    serde_json::json!({
        "_aws": {
            "Timestamp": now_ms,
            "CloudWatchMetrics": [{
                "Namespace": "Seckill",
                "Dimensions": [["SaleId"]],
                "Metrics": [
                    {"Name": "ReconcileViolations", "Unit": "Count"},
                    {"Name": "ReconcileRepairs", "Unit": "Count"},
                ],
            }],
        },
        "SaleId": report.sale_id,
        "ReconcileViolations": report.violations.len(),
        "ReconcileRepairs": report.repairs.len(),
    })
    .to_string()
}

fn holds_units(status: OrderStatus) -> bool {
    matches!(status, OrderStatus::PendingPayment | OrderStatus::Paid)
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn message_of(
    sale: &Sale,
    order_id: &str,
    resv: &crate::redis_store::StoredReservation,
) -> Option<OrderMessage> {
    Some(OrderMessage {
        v: OrderMessage::VERSION,
        order_id: OrderId::parse(order_id).ok()?,
        sale_id: sale.sale_id.clone(),
        user_id: UserId::parse(&resv.user_id).ok()?,
        quantity: Quantity::new(resv.quantity).ok()?,
        shard: 0,
        reserved_at: clock::rfc3339_ms(resv.at_ms.parse().ok()?),
    })
}

/// The reconciler over the live adapters.
pub async fn wire(
    config: &crate::config::Config,
) -> Result<Reconciler, crate::config::ConfigError> {
    let sdk = crate::aws::sdk_config(Duration::from_secs(5)).await;
    let db = crate::aws::dynamodb(&sdk);
    let sqs = crate::aws::sqs(&sdk);
    let queue_url = config.queue_url()?.to_owned();
    let stock = RedisStock::connect_lazy(&config.redis_url, config.redis_timeout).map_err(|e| {
        crate::config::ConfigError::Invalid {
            name: "REDIS_URL",
            why: e.to_string(),
        }
    })?;
    Ok(Reconciler::new(
        stock,
        DynamoCatalog::new(db.clone(), &config.sales_table),
        DynamoOrders::new(db, &config.orders_table, &config.sales_table),
        SqsQueue::new(sqs.clone(), queue_url),
        sqs,
        std::env::var("ORDERS_DLQ_URL")
            .ok()
            .filter(|v| !v.is_empty()),
        ReconcileSettings::default(),
    ))
}
