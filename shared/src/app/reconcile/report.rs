//! What a reconcile run is told ([`ReconcileSettings`]) and what it
//! reports ([`ReconcileReport`], its [`Repair`]s and [`Violation`]s): kept
//! on the sale item and answered by `POST /admin/sales/{saleId}/reconcile`.

use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Clone, Copy)]
pub struct ReconcileSettings {
    /// A `QUEUED` reservation younger than this may still be on its way.
    pub grace: Duration,
    /// A `QUEUED` reservation older than this is given up and released.
    pub max_age: Duration,
    /// A read that shows violations is taken again after this long, and
    /// only what shows both times is reported: the index DynamoDB's orders
    /// are queried by lags the table, and an order released between the
    /// read of its row and the read of Redis looks like a buyer Redis
    /// under-counts. A real violation stays; those pass.
    pub confirm_after: Duration,
}

impl Default for ReconcileSettings {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(60),
            max_age: Duration::from_secs(3_600),
            confirm_after: Duration::from_secs(1),
        }
    }
}

pub use crate::app::invariants::Violation;

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
    /// False when orders kept being written or released through every read
    /// of this run: counters, rows and Redis were not compared with each
    /// other (the next run does).
    pub counts_compared: bool,
    pub violations: Vec<Violation>,
    pub repairs: Vec<Repair>,
}
