//! One sale in a world of in-memory stores, for the unit tests of the
//! operations path, and the steps those tests take in it: a purchase, its
//! order written, a read of what the stores hold.

use crate::adapters::memory::{MemoryCatalog, MemoryOrders, MemoryQueue, MemoryStock, test_sale};
use crate::app::jobs::Jobs;
use crate::app::reconcile::{ReconcileSettings, Reconciler};
use crate::domain::ledger::SaleCounters;
use crate::domain::orders::NewOrder;
use crate::domain::stock_state::RedisSnapshot;
use crate::domain::{OrderMessage, Quantity, Sale, SaleId, UserId};
use crate::ports::{
    CatalogAdmin, OrderStore, Reservation, ReserveOutcome, ReserveRequest, Resolution, SingleWrite,
    StockReading, StockStore, StockView,
};
use std::time::Duration;

pub(crate) type MemoryJobs = Jobs<MemoryQueue, MemoryStock, MemoryCatalog, MemoryOrders>;
pub(crate) type MemoryReconciler =
    Reconciler<MemoryQueue, MemoryQueue, MemoryStock, MemoryCatalog, MemoryOrders>;

/// Reconcile's settings with no wait before a read is confirmed.
pub(crate) const SETTINGS: ReconcileSettings = ReconcileSettings {
    grace: Duration::from_secs(60),
    max_age: Duration::from_secs(3_600),
    confirm_after: Duration::ZERO,
};

pub(crate) struct Stores {
    pub(crate) stock: MemoryStock,
    pub(crate) catalog: MemoryCatalog,
    pub(crate) orders: MemoryOrders,
    pub(crate) queue: MemoryQueue,
    pub(crate) sale: Sale,
}

impl Stores {
    /// A live sale in the catalog, not yet in the stock store.
    pub(crate) fn new(stock: u32, limit: u32) -> Self {
        Self::with(test_sale("s1", stock, limit).unwrap())
    }

    pub(crate) fn with(sale: Sale) -> Self {
        let catalog = MemoryCatalog::default();
        catalog.insert(sale.clone());
        Self {
            stock: MemoryStock::default(),
            orders: catalog.orders(),
            catalog,
            queue: MemoryQueue::default(),
            sale,
        }
    }

    pub(crate) fn sale_id(&self) -> &SaleId {
        &self.sale.sale_id
    }

    pub(crate) fn jobs(&self) -> MemoryJobs {
        Jobs::new(
            self.stock.clone(),
            self.catalog.clone(),
            self.orders.clone(),
            Some(self.queue.clone()),
            Duration::from_secs(300),
        )
    }

    pub(crate) fn reconciler(&self) -> MemoryReconciler {
        Reconciler::new(
            self.stock.clone(),
            self.catalog.clone(),
            self.orders.clone(),
            self.queue.clone(),
            self.queue.clone(),
            SETTINGS,
        )
    }

    /// Loads the sale into the stock store as prewarm does.
    pub(crate) async fn load(&self) {
        crate::app::jobs::mark_and_load(&self.catalog, &self.stock, &self.sale, 1)
            .await
            .unwrap();
    }

    pub(crate) async fn try_reserve(&self, user: &str, units: u64) -> ReserveOutcome {
        let user_id = UserId::parse(user).unwrap();
        self.stock
            .reserve(ReserveRequest {
                sale_id: self.sale_id(),
                user_id: &user_id,
                quantity: Quantity::new(units).unwrap(),
                idempotency_key: None,
                gate_nonce: None,
                gate_issued_ms: None,
                source_ip: None,
            })
            .await
            .unwrap()
    }

    pub(crate) async fn reserve(&self, user: &str, units: u64) -> Reservation {
        match self.try_reserve(user, units).await {
            ReserveOutcome::Reserved(r) => r,
            other => panic!("not reserved: {other:?}"),
        }
    }

    /// The order of a reservation, as the order-writer builds it (written
    /// at `at_ms`, the moment it was reserved).
    pub(crate) fn order_of(&self, user: &str, r: &Reservation, at_ms: i64) -> NewOrder {
        let message = OrderMessage {
            v: OrderMessage::VERSION,
            order_id: r.order_id.clone(),
            sale_id: self.sale.sale_id.clone(),
            user_id: UserId::parse(user).unwrap(),
            quantity: r.quantity,
            shard: 0,
            reserved_at: crate::clock::rfc3339_ms(at_ms),
        };
        NewOrder::new(message, at_ms, at_ms, self.sale.payment_window_seconds)
    }

    /// Writes the reservation's order (created at `at_ms`) and marks the
    /// reservation written, as the order-writer does.
    pub(crate) async fn write(&self, user: &str, r: &Reservation, at_ms: i64) {
        let order = self.order_of(user, r, at_ms);
        let written = self
            .orders
            .write_single(&order, self.sale.per_user_limit)
            .await
            .unwrap();
        assert_eq!(written, SingleWrite::Written);
        let resolved = self
            .stock
            .resolve(self.sale_id(), &r.order_id, Resolution::Written)
            .await
            .unwrap();
        assert!(resolved);
    }

    pub(crate) async fn view(&self) -> Option<StockView> {
        self.stock.view(self.sale_id(), None).await.unwrap()
    }

    pub(crate) async fn snapshot(&self) -> RedisSnapshot {
        self.stock.snapshot(self.sale_id()).await.unwrap().unwrap()
    }

    pub(crate) async fn counters(&self) -> SaleCounters {
        self.catalog
            .get_record(self.sale_id())
            .await
            .unwrap()
            .unwrap()
            .1
    }
}
