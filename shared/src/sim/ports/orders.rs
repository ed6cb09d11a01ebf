//! The order table behind the scheduler's gates ([`SimOrders`]), with
//! every version of every row kept so the sale-keyed index reads may lag
//! behind the table.

use crate::adapters::memory::MemoryOrders;
use crate::domain::orders::{NewOrder, Order, OrderStatus, RejectReason};
use crate::domain::{OrderId, SaleId, UserId};
use crate::ports::{
    ExpireOutcome, GroupWrite, OrderLedger, OrderStore, OrderStoreError, PayOutcome, Payment,
    PaymentRecord, PaymentStore, RejectWrite, Settlement, SingleWrite,
};
use crate::sim::sched::{Sched, Step};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

fn dynamo_down(effect: &str) -> OrderStoreError {
    OrderStoreError::Transient(format!("simulated: {effect} did not answer"))
}

/// Every version of every order row, with when it was written: what the
/// sale-keyed indexes (`all_orders_of_sale`, `due_unpaid`) serve, behind.
type RowHistory = BTreeMap<OrderId, Vec<(i64, Option<Order>)>>;

#[derive(Clone)]
pub(crate) struct SimOrders {
    pub(crate) inner: MemoryOrders,
    pub(crate) sched: Arc<Sched>,
    pub(crate) history: Arc<std::sync::Mutex<RowHistory>>,
    /// Whether index reads lag (a global secondary index is eventually
    /// consistent: a read may miss the last writes of up to this long).
    pub(crate) index_lag_ms: u64,
    /// Every version of every waitlist entry (`waitlist.rs`).
    pub(crate) entries: Arc<std::sync::Mutex<super::EntryHistory>>,
    /// Print the waitlist's calls (`make simulate SEED=n TRACE=1`).
    pub(crate) tracing: bool,
}

impl SimOrders {
    /// Keeps the rows `ids` as they are now, for the lagging index reads.
    pub(super) async fn record(&self, ids: &[OrderId]) {
        let at = crate::sim::world::now();
        for id in ids {
            let row = self.inner.get(id).await.ok().flatten();
            if let Ok(mut h) = self.history.lock() {
                h.entry(id.clone()).or_default().push((at, row));
            }
        }
    }

    /// When the row was first written with `status`.
    pub(crate) fn first_written_as(&self, id: &OrderId, status: OrderStatus) -> Option<i64> {
        let h = self.history.lock().ok()?;
        h.get(id)?
            .iter()
            .find(|(_, row)| row.as_ref().is_some_and(|o| o.status == status))
            .map(|(at, _)| *at)
    }

    /// How far behind this index read is (0: up to date).
    pub(super) fn lag(&self) -> i64 {
        if self.index_lag_ms == 0 || self.sched.is_calm() || !self.sched.chance(300) {
            return 0;
        }
        self.sched.count("index read behind the table");
        i64::try_from(self.sched.draw(self.index_lag_ms + 1)).unwrap_or(0)
    }

    /// The sale's rows as the index held them `lag_ms` ago.
    fn rows_behind(&self, sale_id: &SaleId, lag_ms: i64) -> Vec<Order> {
        let cutoff = crate::sim::world::now() - lag_ms;
        let Ok(h) = self.history.lock() else {
            return Vec::new();
        };
        let mut rows: Vec<Order> = h
            .values()
            .filter_map(|versions| {
                versions
                    .iter()
                    .rev()
                    .find(|(at, _)| *at <= cutoff)
                    .and_then(|(_, row)| row.clone())
            })
            .filter(|o| &o.sale_id == sale_id)
            .collect();
        rows.sort_by(|a, b| {
            (a.created_at_ms, a.order_id.as_str()).cmp(&(b.created_at_ms, b.order_id.as_str()))
        });
        rows
    }
}

macro_rules! dynamo {
    ($self:ident, $effect:literal, $writes:expr, $call:expr) => {
        gated!($self.sched, $effect, $writes, dynamo_down($effect), $call)
    };
}

impl OrderStore for SimOrders {
    async fn write_group(
        &self,
        sale_id: &SaleId,
        orders: &[NewOrder],
        per_user_limit: u32,
        request_token: &str,
    ) -> Result<GroupWrite, OrderStoreError> {
        let step = self.sched.gate("dynamo.write_group", true).await;
        if step == Step::FailBefore {
            // A transaction refused before it was applied: cancelled for a
            // conflict, throttled, or an error of the service.
            let why = match self.sched.draw(3) {
                0 => "TransactionConflict",
                1 => "ThrottlingError",
                _ => return Err(dynamo_down("dynamo.write_group")),
            };
            self.sched.count(format!("transaction cancelled: {why}"));
            return Ok(GroupWrite::Cancelled(vec![why.to_owned()]));
        }
        let call = self
            .inner
            .write_group(sale_id, orders, per_user_limit, request_token);
        let out = if step == Step::Go {
            call.await
        } else {
            if step.applies() {
                let _ = call.await;
            }
            Err(dynamo_down("dynamo.write_group"))
        };
        let ids: Vec<OrderId> = orders.iter().map(|o| o.message.order_id.clone()).collect();
        self.record(&ids).await;
        out
    }

    async fn write_single(
        &self,
        order: &NewOrder,
        per_user_limit: u32,
    ) -> Result<SingleWrite, OrderStoreError> {
        let out = dynamo!(
            self,
            "dynamo.write_single",
            true,
            self.inner.write_single(order, per_user_limit)
        );
        self.record(std::slice::from_ref(&order.message.order_id))
            .await;
        out
    }

    async fn write_rejected(
        &self,
        order: &NewOrder,
        reason: RejectReason,
    ) -> Result<RejectWrite, OrderStoreError> {
        let out = dynamo!(
            self,
            "dynamo.write_rejected",
            true,
            self.inner.write_rejected(order, reason)
        );
        self.record(std::slice::from_ref(&order.message.order_id))
            .await;
        out
    }

    async fn get(&self, order_id: &OrderId) -> Result<Option<Order>, OrderStoreError> {
        dynamo!(self, "dynamo.get", false, self.inner.get(order_id))
    }

    async fn orders_of_buyer(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
    ) -> Result<Vec<Order>, OrderStoreError> {
        dynamo!(
            self,
            "dynamo.orders_of_buyer",
            false,
            self.inner.orders_of_buyer(sale_id, user_id)
        )
    }

    async fn pay(
        &self,
        order_id: &OrderId,
        user_id: &UserId,
        now_ms: i64,
    ) -> Result<PayOutcome, OrderStoreError> {
        let out = dynamo!(
            self,
            "dynamo.pay",
            true,
            self.inner.pay(order_id, user_id, now_ms)
        );
        self.record(std::slice::from_ref(order_id)).await;
        out
    }

    async fn expire(
        &self,
        order_id: &OrderId,
        now_ms: i64,
    ) -> Result<ExpireOutcome, OrderStoreError> {
        let out = dynamo!(
            self,
            "dynamo.expire",
            true,
            self.inner.expire(order_id, now_ms)
        );
        self.record(std::slice::from_ref(order_id)).await;
        out
    }

    async fn expire_many(
        &self,
        order_ids: &[OrderId],
        now_ms: i64,
    ) -> Result<Vec<Result<ExpireOutcome, OrderStoreError>>, OrderStoreError> {
        let out = dynamo!(
            self,
            "dynamo.expire_many",
            true,
            self.inner.expire_many(order_ids, now_ms)
        );
        self.record(order_ids).await;
        out
    }
}

impl PaymentStore for SimOrders {
    async fn settle(
        &self,
        order: &Order,
        payment: &Payment,
        record_refund: bool,
    ) -> Result<Settlement, OrderStoreError> {
        let out = dynamo!(
            self,
            "dynamo.settle",
            true,
            self.inner.settle(order, payment, record_refund)
        );
        self.record(std::slice::from_ref(&order.order_id)).await;
        out
    }

    async fn refunds_of_sale(
        &self,
        sale_id: &SaleId,
    ) -> Result<Vec<PaymentRecord>, OrderStoreError> {
        dynamo!(
            self,
            "dynamo.refunds_of_sale",
            false,
            self.inner.refunds_of_sale(sale_id)
        )
    }
}

impl OrderLedger for SimOrders {
    async fn all_orders_of_sale(&self, sale_id: &SaleId) -> Result<Vec<Order>, OrderStoreError> {
        let rows = dynamo!(
            self,
            "dynamo.all_orders_of_sale",
            false,
            self.inner.all_orders_of_sale(sale_id)
        )?;
        let lag = self.lag();
        Ok(if lag == 0 {
            rows
        } else {
            self.rows_behind(sale_id, lag)
        })
    }

    async fn send_orders_of_sale(
        &self,
        sale_id: &SaleId,
        pages: tokio::sync::mpsc::Sender<Vec<Order>>,
    ) -> Result<(), OrderStoreError> {
        // The same read, faults and lag as the whole listing, then paged.
        let rows = self.all_orders_of_sale(sale_id).await?;
        crate::adapters::memory::send_in_pages(rows, pages).await
    }

    async fn count_of_sale(
        &self,
        sale_id: &SaleId,
        status: OrderStatus,
    ) -> Result<u64, OrderStoreError> {
        dynamo!(
            self,
            "dynamo.count_of_sale",
            false,
            self.inner.count_of_sale(sale_id, status)
        )
    }

    async fn due_unpaid(
        &self,
        sale_id: &SaleId,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<OrderId>, OrderStoreError> {
        let due = dynamo!(
            self,
            "dynamo.due_unpaid",
            false,
            self.inner.due_unpaid(sale_id, now_ms, limit)
        )?;
        let lag = self.lag();
        if lag == 0 {
            return Ok(due);
        }
        let mut due: Vec<(i64, OrderId)> = self
            .rows_behind(sale_id, lag)
            .into_iter()
            .filter(|o| o.status == OrderStatus::PendingPayment)
            .filter_map(|o| {
                o.expires_at_ms
                    .filter(|at| *at <= now_ms)
                    .map(|at| (at, o.order_id))
            })
            .collect();
        due.sort_by(|a, b| (a.0, a.1.as_str()).cmp(&(b.0, b.1.as_str())));
        Ok(due.into_iter().take(limit).map(|(_, id)| id).collect())
    }

    async fn held_by_all(
        &self,
        sale_id: &SaleId,
        users: &[&UserId],
    ) -> Result<HashMap<String, u64>, OrderStoreError> {
        dynamo!(
            self,
            "dynamo.held_by_all",
            false,
            self.inner.held_by_all(sale_id, users)
        )
    }
}
