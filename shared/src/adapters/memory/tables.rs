//! The `sales` and `orders` tables in memory, with the conditions of the
//! DynamoDB adapters (see the module map of [`super`]). [`MemoryCatalog`]
//! and the [`MemoryOrders`] it hands out ([`MemoryCatalog::orders`]) share
//! the tables, as the order writes move the sale item's counters.

use crate::domain::ledger::SaleCounters;
use crate::domain::orders::{NewOrder, Order, OrderStatus, RejectReason};
use crate::domain::{OrderId, PaymentId, Sale, SaleId, UserId};
use crate::ports::{
    CatalogAdmin, CatalogError, ExpireOutcome, GroupWrite, OrderLedger, OrderStore,
    OrderStoreError, PayOutcome, Payment, PaymentOutcome, PaymentRecord, PaymentStore, RejectWrite,
    SaleCatalog, Settlement, SingleWrite,
};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

struct SaleItem {
    sale: Sale,
    counters: SaleCounters,
    last_report: Option<String>,
}

#[derive(Default)]
struct Tables {
    sales: BTreeMap<SaleId, SaleItem>,
    orders: BTreeMap<OrderId, Order>,
    /// The per-buyer records: (sale, buyer) -> units held.
    held: BTreeMap<(SaleId, String), u64>,
    /// Request tokens of the group writes that went through, with the
    /// orders each carried.
    tokens: BTreeMap<String, Vec<NewOrder>>,
    /// The payments' records, by payment id.
    payments: BTreeMap<PaymentId, PaymentRecord>,
    /// How long a read of a whole sale's orders takes (a big ledger).
    ledger_read_delay: std::time::Duration,
    /// How many of the next order transactions (group or single) are
    /// cancelled for a conflict on the sale item ([`MemoryOrders::conflict_next`]).
    conflicts: u32,
    errors: u32,
    /// The waitlist's entries, one per (sale, buyer) (`waitlist.rs`).
    entries: BTreeMap<waitlist::EntryKey, crate::ports::WaitlistEntry>,
}

type Shared = Arc<Mutex<Tables>>;

mod handover;
mod waitlist;

fn tables(shared: &Shared) -> Result<MutexGuard<'_, Tables>, OrderStoreError> {
    shared
        .lock()
        .map_err(|_| OrderStoreError::Transient("poisoned".into()))
}

#[derive(Clone, Default)]
pub struct MemoryCatalog {
    tables: Shared,
    reads: Arc<AtomicUsize>,
}

impl MemoryCatalog {
    /// Puts a sale in the catalog: a new one with all its stock available,
    /// an existing one with its definition replaced and its counters kept.
    pub fn insert(&self, sale: Sale) {
        if let Ok(mut t) = self.tables.lock() {
            match t.sales.get_mut(&sale.sale_id) {
                // An edit, as the DynamoDB adapter's upsert: a new version.
                Some(item) => {
                    item.sale = sale;
                    item.counters.version += 1;
                }
                None => {
                    let counters = SaleCounters {
                        available: i64::from(sale.total_stock),
                        sold: 0,
                        version: 1,
                        return_seq: 0,
                        loaded: false,
                    };
                    t.sales.insert(
                        sale.sale_id.clone(),
                        SaleItem {
                            sale,
                            counters,
                            last_report: None,
                        },
                    );
                }
            }
        }
    }

    /// Reads made through [`SaleCatalog`].
    pub fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }

    /// The `orders` table beside this catalog's `sales` table.
    pub fn orders(&self) -> MemoryOrders {
        MemoryOrders {
            tables: self.tables.clone(),
        }
    }

    fn tables(&self) -> Result<MutexGuard<'_, Tables>, CatalogError> {
        self.tables
            .lock()
            .map_err(|_| CatalogError::Unavailable("poisoned".into()))
    }
}

impl SaleCatalog for MemoryCatalog {
    async fn get_sale(&self, sale_id: &SaleId) -> Result<Option<Sale>, CatalogError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        Ok(self.tables()?.sales.get(sale_id).map(|i| i.sale.clone()))
    }

    async fn list_sales(&self) -> Result<Vec<Sale>, CatalogError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let mut sales: Vec<Sale> = self
            .tables()?
            .sales
            .values()
            .map(|i| i.sale.clone())
            .collect();
        sales.sort_by(|a, b| a.sale_id.as_str().cmp(b.sale_id.as_str()));
        Ok(sales)
    }
}

impl CatalogAdmin for MemoryCatalog {
    async fn get_record(
        &self,
        sale_id: &SaleId,
    ) -> Result<Option<(Sale, SaleCounters)>, CatalogError> {
        Ok(self
            .tables()?
            .sales
            .get(sale_id)
            .map(|i| (i.sale.clone(), i.counters)))
    }

    async fn mark_loaded(&self, sale_id: &SaleId, _now_ms: i64) -> Result<bool, CatalogError> {
        let mut t = self.tables()?;
        let item = t
            .sales
            .get_mut(sale_id)
            .ok_or_else(|| CatalogError::Unavailable(format!("{sale_id}: no sale item")))?;
        let before = item.counters.loaded;
        item.counters.loaded = true;
        Ok(before)
    }

    async fn store_report(&self, sale_id: &SaleId, json: &str) -> Result<(), CatalogError> {
        let mut t = self.tables()?;
        let item = t
            .sales
            .get_mut(sale_id)
            .ok_or_else(|| CatalogError::Unavailable(format!("{sale_id}: no sale item")))?;
        item.last_report = Some(json.to_owned());
        Ok(())
    }

    async fn sale_with_report(
        &self,
        sale_id: &SaleId,
    ) -> Result<Option<(Sale, Option<String>)>, CatalogError> {
        Ok(self
            .tables()?
            .sales
            .get(sale_id)
            .map(|i| (i.sale.clone(), i.last_report.clone())))
    }
}

/// The `orders` table; [`MemoryCatalog::orders`] gives one that shares the
/// catalog's sale items (a default one has no sales: every write is
/// [`OrderStoreError::SaleMissing`]).
#[derive(Clone, Default)]
pub struct MemoryOrders {
    tables: Shared,
}

impl MemoryOrders {
    /// Makes every read of a whole sale's orders take `delay`, as a big
    /// sale's ledger does on DynamoDB.
    pub fn delay_ledger_reads(&self, delay: std::time::Duration) {
        if let Ok(mut t) = self.tables.lock() {
            t.ledger_read_delay = delay;
        }
    }

    /// Cancels the next `transactions` order writes (group or single) for
    /// a `TransactionConflict` on the sale item, as DynamoDB cancels one
    /// that meets another in flight on the hot item; `u32::MAX`: a conflict
    /// that never ends.
    pub fn conflict_next(&self, transactions: u32) {
        if let Ok(mut t) = self.tables.lock() {
            t.conflicts = transactions;
        }
    }

    /// Fails the next `writes` group writes with an error of the service,
    /// as DynamoDB's rare `InternalServerError` does, before anything is
    /// written.
    pub fn fail_next_groups(&self, writes: u32) {
        if let Ok(mut t) = self.tables.lock() {
            t.errors = writes;
        }
    }

    /// Puts a row as it is, past every condition: the state a bug or a lost
    /// write could leave, for the checks that must report it.
    pub fn insert_row(&self, order: Order) {
        if let Ok(mut t) = self.tables.lock() {
            t.orders.insert(order.order_id.clone(), order);
        }
    }
}

fn row(order: &NewOrder, status: OrderStatus, reason: Option<RejectReason>) -> Order {
    let m = &order.message;
    Order {
        order_id: m.order_id.clone(),
        sale_id: m.sale_id.clone(),
        user_id: m.user_id.clone(),
        quantity: m.quantity,
        status,
        created_at_ms: order.created_at_ms,
        expires_at_ms: (status == OrderStatus::PendingPayment).then_some(order.expires_at_ms),
        reject_reason: reason,
        return_seq: None,
        amount: order.amount,
        paid_at_ms: None,
        payment_id: None,
        refunds: Vec::new(),
        offer_of: None,
        offered: 0,
    }
}

/// Orders per page of `send_orders_of_sale`: small, so a test's sale of a
/// few dozen orders is staged over several pages, as a big one is.
const MEMORY_PAGE: usize = 16;

/// `orders` to `pages`, [`MEMORY_PAGE`] at a time, as the index's reads
/// would send them.
pub(crate) async fn send_in_pages(
    orders: Vec<Order>,
    pages: tokio::sync::mpsc::Sender<Vec<Order>>,
) -> Result<(), OrderStoreError> {
    for page in orders.chunks(MEMORY_PAGE) {
        pages
            .send(page.to_vec())
            .await
            .map_err(|_| OrderStoreError::Transient("the reader of the orders stopped".into()))?;
    }
    Ok(())
}

const FAILED: &str = "ConditionalCheckFailed";
const NONE: &str = "None";
const CONFLICT: &str = "TransactionConflict";

/// The buyer records a group's transaction updates: one per buyer.
fn buyers(orders: &[NewOrder]) -> usize {
    orders
        .iter()
        .map(|o| &o.message.user_id)
        .collect::<HashSet<_>>()
        .len()
}

impl OrderStore for MemoryOrders {
    async fn write_group(
        &self,
        sale_id: &SaleId,
        orders: &[NewOrder],
        per_user_limit: u32,
        request_token: &str,
    ) -> Result<GroupWrite, OrderStoreError> {
        let mut t = tables(&self.tables)?;
        match t.tokens.get(request_token) {
            Some(sent) if sent.as_slice() == orders => return Ok(GroupWrite::Written),
            // DynamoDB's answer to a token sent again with other items.
            Some(_) => {
                return Ok(GroupWrite::Cancelled(vec![
                    "IdempotentParameterMismatch".into(),
                ]));
            }
            None => {}
        }
        if t.errors > 0 {
            t.errors -= 1;
            return Err(OrderStoreError::Transient(
                "InternalServerError: the service failed".into(),
            ));
        }
        if t.conflicts > 0 {
            t.conflicts -= 1;
            let mut codes = vec![NONE.to_owned(); orders.len() + buyers(orders)];
            codes.push(CONFLICT.into());
            return Ok(GroupWrite::Cancelled(codes));
        }
        let mut by_buyer: BTreeMap<String, u64> = BTreeMap::new();
        for o in orders {
            *by_buyer.entry(o.message.user_id.to_string()).or_default() +=
                u64::from(o.message.quantity.get());
        }
        if by_buyer.values().any(|u| *u > u64::from(per_user_limit)) {
            return Ok(GroupWrite::Cancelled(vec!["BuyerOverLimitInGroup".into()]));
        }
        let total: u64 = by_buyer.values().sum();
        let mut codes: Vec<String> = orders
            .iter()
            .map(|o| match t.orders.contains_key(&o.message.order_id) {
                true => FAILED.into(),
                false => NONE.into(),
            })
            .collect();
        codes.extend(by_buyer.iter().map(|(user, units)| {
            let held = t
                .held
                .get(&(sale_id.clone(), user.clone()))
                .copied()
                .unwrap_or(0);
            match held + units > u64::from(per_user_limit) {
                true => FAILED.into(),
                false => NONE.into(),
            }
        }));
        let enough = t
            .sales
            .get(sale_id)
            .is_some_and(|i| i.counters.available >= i64::try_from(total).unwrap_or(i64::MAX));
        codes.push(if enough { NONE } else { FAILED }.into());
        if codes.iter().any(|c| c == FAILED) {
            return Ok(GroupWrite::Cancelled(codes));
        }
        for o in orders {
            t.orders.insert(
                o.message.order_id.clone(),
                row(o, OrderStatus::PendingPayment, None),
            );
        }
        for (user, units) in by_buyer {
            *t.held.entry((sale_id.clone(), user)).or_default() += units;
        }
        if let Some(item) = t.sales.get_mut(sale_id) {
            let total = i64::try_from(total).unwrap_or(i64::MAX);
            item.counters.available -= total;
            item.counters.sold += total;
        }
        t.tokens.insert(request_token.to_owned(), orders.to_vec());
        Ok(GroupWrite::Written)
    }

    async fn write_single(
        &self,
        order: &NewOrder,
        per_user_limit: u32,
    ) -> Result<SingleWrite, OrderStoreError> {
        let mut t = tables(&self.tables)?;
        if t.conflicts > 0 {
            t.conflicts -= 1;
            return Err(OrderStoreError::Contention(format!(
                "transaction cancelled: {:?}",
                [NONE, NONE, CONFLICT]
            )));
        }
        let m = &order.message;
        if let Some(existing) = t.orders.get(&m.order_id) {
            return Ok(SingleWrite::Duplicate(existing.clone()));
        }
        let units = u64::from(m.quantity.get());
        let buyer = (m.sale_id.clone(), m.user_id.to_string());
        if t.held.get(&buyer).copied().unwrap_or(0) + units > u64::from(per_user_limit) {
            return Ok(SingleWrite::OverLimit);
        }
        let Some(item) = t.sales.get_mut(&m.sale_id) else {
            return Err(OrderStoreError::SaleMissing(m.sale_id.clone()));
        };
        let q = i64::from(m.quantity.get());
        if item.counters.available < q {
            return Ok(SingleWrite::NoStock);
        }
        item.counters.available -= q;
        item.counters.sold += q;
        *t.held.entry(buyer).or_default() += units;
        t.orders.insert(
            m.order_id.clone(),
            row(order, OrderStatus::PendingPayment, None),
        );
        Ok(SingleWrite::Written)
    }

    async fn write_rejected(
        &self,
        order: &NewOrder,
        reason: RejectReason,
    ) -> Result<RejectWrite, OrderStoreError> {
        let mut t = tables(&self.tables)?;
        if let Some(existing) = t.orders.get(&order.message.order_id) {
            return Ok(RejectWrite::Exists(existing.clone()));
        }
        t.orders.insert(
            order.message.order_id.clone(),
            row(order, OrderStatus::Rejected, Some(reason)),
        );
        Ok(RejectWrite::Recorded)
    }

    async fn get(&self, order_id: &OrderId) -> Result<Option<Order>, OrderStoreError> {
        Ok(tables(&self.tables)?.orders.get(order_id).cloned())
    }

    async fn orders_of_buyer(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
    ) -> Result<Vec<Order>, OrderStoreError> {
        Ok(tables(&self.tables)?
            .orders
            .values()
            .filter(|o| &o.sale_id == sale_id && &o.user_id == user_id)
            .cloned()
            .collect())
    }

    async fn pay(
        &self,
        order_id: &OrderId,
        user_id: &UserId,
        now_ms: i64,
    ) -> Result<PayOutcome, OrderStoreError> {
        let amount = {
            let t = tables(&self.tables)?;
            match t.orders.get(order_id) {
                Some(order) if &order.user_id == user_id => order.amount,
                _ => return Ok(PayOutcome::NotFound),
            }
        };
        let payment = Payment {
            payment_id: PaymentId::stand_in(order_id),
            paid: amount,
            at_ms: now_ms,
        };
        Ok(PayOutcome::of_stand_in(
            self.settle_now(order_id, &payment, false)?,
        ))
    }

    async fn expire(
        &self,
        order_id: &OrderId,
        now_ms: i64,
    ) -> Result<ExpireOutcome, OrderStoreError> {
        let mut t = tables(&self.tables)?;
        let Some(order) = t.orders.get(order_id).cloned() else {
            return Ok(ExpireOutcome::NotFound);
        };
        let due = order.expires_at_ms.is_some_and(|at| at <= now_ms);
        if order.status != OrderStatus::PendingPayment || !due {
            return Ok(ExpireOutcome::NotExpirable);
        }
        let units = u64::from(order.quantity.get());
        let q = i64::from(order.quantity.get());
        let buyer = (order.sale_id.clone(), order.user_id.to_string());
        // The transaction's three conditions: the sale item holds the sold
        // units, the buyer's record (if any) holds the order's.
        if t.held.get(&buyer).is_some_and(|held| *held < units) {
            return Err(OrderStoreError::Transient(format!(
                "{order_id}: expiry cancelled: the buyer's record holds less"
            )));
        }
        let Some(item) = t.sales.get_mut(&order.sale_id) else {
            return Err(OrderStoreError::SaleMissing(order.sale_id));
        };
        if item.counters.sold < q {
            return Err(OrderStoreError::Transient(format!(
                "{order_id}: expiry cancelled: the sale item sold less"
            )));
        }
        item.counters.available += q;
        item.counters.sold -= q;
        item.counters.return_seq += 1;
        let seq = item.counters.return_seq;
        if let Some(held) = t.held.get_mut(&buyer) {
            *held -= units;
        } else {
            t.held.insert(buyer, 0);
        }
        let expired = Order {
            status: OrderStatus::Expired,
            return_seq: Some(seq),
            ..order
        };
        t.orders.insert(order_id.clone(), expired.clone());
        Ok(ExpireOutcome::Expired(expired))
    }

    /// One at a time: each expiry here is atomic already, and the outcome
    /// of a batch is the outcome of its orders expired in turn.
    async fn expire_many(
        &self,
        order_ids: &[OrderId],
        now_ms: i64,
    ) -> Result<Vec<Result<ExpireOutcome, OrderStoreError>>, OrderStoreError> {
        let mut out = Vec::with_capacity(order_ids.len());
        for order_id in order_ids {
            out.push(self.expire(order_id, now_ms).await);
        }
        Ok(out)
    }
}

impl OrderLedger for MemoryOrders {
    async fn all_orders_of_sale(&self, sale_id: &SaleId) -> Result<Vec<Order>, OrderStoreError> {
        let delay = tables(&self.tables)?.ledger_read_delay;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let mut orders: Vec<Order> = tables(&self.tables)?
            .orders
            .values()
            .filter(|o| &o.sale_id == sale_id)
            .cloned()
            .collect();
        orders.sort_by(|a, b| {
            (a.created_at_ms, a.order_id.as_str()).cmp(&(b.created_at_ms, b.order_id.as_str()))
        });
        Ok(orders)
    }

    async fn send_orders_of_sale(
        &self,
        sale_id: &SaleId,
        pages: tokio::sync::mpsc::Sender<Vec<Order>>,
    ) -> Result<(), OrderStoreError> {
        send_in_pages(self.all_orders_of_sale(sale_id).await?, pages).await
    }

    async fn count_of_sale(
        &self,
        sale_id: &SaleId,
        status: OrderStatus,
    ) -> Result<u64, OrderStoreError> {
        let t = tables(&self.tables)?;
        let n = t
            .orders
            .values()
            .filter(|o| &o.sale_id == sale_id && o.status == status)
            .count();
        Ok(u64::try_from(n).unwrap_or(u64::MAX))
    }

    async fn due_unpaid(
        &self,
        sale_id: &SaleId,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<OrderId>, OrderStoreError> {
        let t = tables(&self.tables)?;
        let mut due: Vec<(i64, &OrderId)> = t
            .orders
            .values()
            .filter(|o| &o.sale_id == sale_id && o.status == OrderStatus::PendingPayment)
            .filter_map(|o| {
                o.expires_at_ms
                    .filter(|at| *at <= now_ms)
                    .map(|at| (at, &o.order_id))
            })
            .collect();
        due.sort_by(|a, b| (a.0, a.1.as_str()).cmp(&(b.0, b.1.as_str())));
        Ok(due
            .into_iter()
            .take(limit)
            .map(|(_, id)| id.clone())
            .collect())
    }

    async fn held_by_all(
        &self,
        sale_id: &SaleId,
        users: &[&UserId],
    ) -> Result<HashMap<String, u64>, OrderStoreError> {
        let t = tables(&self.tables)?;
        Ok(users
            .iter()
            .map(|u| {
                let held = t
                    .held
                    .get(&(sale_id.clone(), u.to_string()))
                    .copied()
                    .unwrap_or(0);
                (u.to_string(), held)
            })
            .collect())
    }
}

impl MemoryOrders {
    /// [`PaymentStore::settle`] under the tables' lock (so atomic, as the
    /// conditional writes of the DynamoDB adapter are).
    fn settle_now(
        &self,
        order_id: &OrderId,
        payment: &Payment,
        record_refund: bool,
    ) -> Result<Settlement, OrderStoreError> {
        let mut t = tables(&self.tables)?;
        if let Some(record) = t.payments.get(&payment.payment_id)
            && record.order_id != *order_id
        {
            return Ok(Settlement::ForeignPayment(record.clone()));
        }
        let Some(row) = t.orders.get_mut(order_id) else {
            return Err(OrderStoreError::Transient(format!(
                "{order_id}: no such order"
            )));
        };
        let id = &payment.payment_id;
        let (outcome, settled) = if row.payment_id.as_ref() == Some(id) {
            return Ok(Settlement::Replayed(PaymentOutcome::Paid, row.clone()));
        } else if row.refunds.contains(id) {
            return Ok(Settlement::Replayed(
                PaymentOutcome::RefundNeeded,
                row.clone(),
            ));
        } else if row.status == OrderStatus::PendingPayment
            && row.expires_at_ms.is_some_and(|at| at > payment.at_ms)
        {
            row.status = OrderStatus::Paid;
            row.paid_at_ms = Some(payment.at_ms);
            row.payment_id = Some(id.clone());
            (PaymentOutcome::Paid, Settlement::Paid(row.clone()))
        } else if record_refund {
            row.refunds.push(id.clone());
            row.refunds.sort();
            (
                PaymentOutcome::RefundNeeded,
                Settlement::RefundNeeded(row.clone()),
            )
        } else {
            return Ok(Settlement::NotPayable(row.clone()));
        };
        let row = row.clone();
        t.payments.insert(
            id.clone(),
            PaymentRecord {
                payment_id: id.clone(),
                order_id: row.order_id.clone(),
                sale_id: row.sale_id.clone(),
                user_id: row.user_id.clone(),
                amount: payment.paid,
                outcome,
                at_ms: payment.at_ms,
            },
        );
        Ok(settled)
    }
}

impl PaymentStore for MemoryOrders {
    async fn settle(
        &self,
        order: &Order,
        payment: &Payment,
        record_refund: bool,
    ) -> Result<Settlement, OrderStoreError> {
        self.settle_now(&order.order_id, payment, record_refund)
    }

    async fn refunds_of_sale(
        &self,
        sale_id: &SaleId,
    ) -> Result<Vec<PaymentRecord>, OrderStoreError> {
        let t = tables(&self.tables)?;
        let mut out: Vec<PaymentRecord> = t
            .payments
            .values()
            .filter(|p| &p.sale_id == sale_id && p.outcome == PaymentOutcome::RefundNeeded)
            .cloned()
            .collect();
        out.sort_by(|a, b| (a.at_ms, a.payment_id.as_str()).cmp(&(b.at_ms, b.payment_id.as_str())));
        Ok(out)
    }
}
