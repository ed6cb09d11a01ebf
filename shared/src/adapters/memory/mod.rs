//! In-memory adapters of every port, for fast unit tests of the use cases.
//! A mutex stands in for Redis's one-script-at-a-time and for DynamoDB's
//! transactions, so each call is atomic as its real counterpart is.
//!
//! - `stock.rs`: [`MemoryStock`], the stock store and its administration
//!   (`StockStore`, `StockAdmin`), one key group per sale.
//! - `queue.rs`: [`MemoryQueue`], the order queue and its inspection
//!   (every message sent stays on it; it has no DLQ).
//! - `tables.rs`: [`MemoryCatalog`] and [`MemoryOrders`], the `sales` and
//!   `orders` tables (`SaleCatalog`, `CatalogAdmin`, `OrderStore`,
//!   `OrderLedger`, `PaymentStore`), sharing one set of tables as the two
//!   DynamoDB adapters share the sale item's counters. The waitlist's
//!   entries and its handover (`WaitlistStore`) are in `tables/waitlist.rs`
//!   and `tables/handover.rs`; Redis's side of it (`WaitlistStock`) in
//!   `stock/waitlist.rs`.
//!
//! The rules they keep, as the code relies on them:
//!
//! - stock store (the Lua scripts): only a `QUEUED` reservation is released
//!   or resolved, a decided one never changes again; `REJECTED` and
//!   `ABANDONED` take the units off the buyer's count, `ABANDONED` and a
//!   release give the stock back capped at the total; a return of an
//!   expired order's units is made once (the reservation is marked
//!   `EXPIRED`, a marker is made when there was none) and not at all when
//!   the sale was rebuilt from a ledger position at or after the expiry's;
//!   a load never overwrites live stock; a rebuild loads only an absent
//!   sale; the buyer and stock repairs are compare-and-set on the value
//!   read; a pause reaches only a loaded sale. One shard per sale: there
//!   are no transfers to complete and no survivors to read.
//! - tables (the DynamoDB conditions): an order row is written once
//!   (`attribute_not_exists`), with its units off `available`
//!   (`available >= q`) and onto its buyer's record (`held + q <= limit`),
//!   all or nothing, a group as one transaction (a retried request token
//!   is the same success with the same orders, `IdempotentParameterMismatch`
//!   with others; a test can have the next transactions cancelled for a
//!   `TransactionConflict`); a rejection never overwrites a row; payment and
//!   expiry are conditional on `PENDING_PAYMENT` (and the deadline), a
//!   payment id is applied once (kept on the row: `paymentId`, or the
//!   refunds of an order that could not be paid) and recorded; an
//!   expiry gives the units back to `available` and off the buyer's record
//!   and numbers the return (`returnSeq`). The index reads do not lag.
//! - waitlist (the DynamoDB and Lua conditions): an entry is put once per
//!   (sale, buyer) and leaves `WAITING` once; a handover is one step under
//!   the tables' lock, conditional as the transaction is (the source still
//!   due or never written, each head still waiting and within its limit,
//!   else passed over), and moves a unit to the line or back to the
//!   stock, never both; a join is admitted only with nothing on sale and
//!   room under the limit; an offer is counted for its buyer in the stock
//!   store once, not at all when a rebuild from the ledger counted it.

mod queue;
mod stock;
mod tables;
#[cfg(test)]
pub(crate) use tables::send_in_pages;

pub use queue::{MemoryQueue, QueueMode};
pub use stock::{MemoryStock, StockCheckpoint};
pub use tables::{MemoryCatalog, MemoryOrders};

use crate::clock;
use crate::domain::{OrderId, Sale, SaleId};

/// An order id made the way `purchase.lua` makes a keyed one: `prefix` and
/// 31 hex digits of a hash of `sale|user|last`. The user id may hold any
/// character, so it is never put into the id itself (it could leave the
/// id alphabet); the hash input names one (sale, user, last) because
/// neither the sale id nor `last` (a key or a number) can hold `|`.
fn derived_order_id(
    prefix: char,
    sale: &SaleId,
    user: &crate::domain::UserId,
    last: &str,
) -> Result<OrderId, crate::domain::InvalidValue> {
    let digest = aws_lc_rs::digest::digest(
        &aws_lc_rs::digest::SHA256,
        format!("{sale}|{user}|{last}").as_bytes(),
    );
    let mut id: String = std::iter::once(prefix.to_string())
        .chain(digest.as_ref().iter().map(|b| format!("{b:02x}")))
        .collect();
    id.truncate(32);
    OrderId::parse(&id)
}

/// A sale for tests: open from a minute ago for an hour.
pub fn test_sale(id: &str, stock: u32, limit: u32) -> Result<Sale, crate::domain::InvalidValue> {
    let now = clock::now_ms();
    Ok(Sale::plain(
        SaleId::parse(id)?,
        format!("test sale {id}"),
        stock,
        limit,
        now - 60_000,
        now + 3_600_000,
    ))
}
