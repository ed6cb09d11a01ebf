//! The waitlist's record in the ledger: one entry per (sale, buyer), the
//! line they form, and the one transaction that hands an expired order's
//! units to the head of that line (`adapters::dynamo::waitlist`).

use crate::domain::orders::Order;
use crate::domain::waitlist::EntryStatus;
use crate::domain::{SaleId, UserId};
use crate::ports::{ExpireOutcome, OrderStoreError};

/// One buyer's entry as the ledger holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitlistEntry {
    pub sale_id: SaleId,
    pub user_id: UserId,
    /// Its place: [`crate::domain::waitlist::LineKey::sort_key`].
    pub line_key: String,
    pub status: EntryStatus,
    pub joined_at_ms: i64,
}

/// What a join did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Joined {
    /// A new entry, at the back of the line.
    New(WaitlistEntry),
    /// The buyer's entry from before, as it stands: no new place.
    Existing(WaitlistEntry),
}

/// The terms of the orders an expiry offers: what a purchase's order of
/// the sale gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfferTerms {
    pub per_user_limit: u32,
    pub payment_window_secs: u32,
    pub price: Option<crate::domain::money::Money>,
}

impl OfferTerms {
    /// The terms of `sale`'s orders.
    pub fn of(sale: &crate::domain::Sale) -> Self {
        Self {
            per_user_limit: sale.per_user_limit,
            payment_window_secs: sale.payment_window_seconds,
            price: sale.price,
        }
    }
}

/// A head of the line and the order it would be offered
/// ([`crate::domain::waitlist::offer_order_id`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub entry: WaitlistEntry,
    pub offer_id: crate::domain::OrderId,
}

/// What handing an expired order's units to the line did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handover {
    /// The order is `EXPIRED`; `offers` are the new orders (one unit each,
    /// `PENDING_PAYMENT`, their entries `OFFERED`), and `to_stock` units
    /// went back to the sale item because the line was shorter.
    Done {
        expired: Order,
        offers: Vec<Order>,
        to_stock: u32,
    },
    /// Paid, expired already, not due, or absent: nothing changed.
    Not(ExpireOutcome),
}

/// What handing a given-up reservation's units to the line did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GiveUp {
    /// The reservation is recorded `REJECTED` (`ABANDONED`) with
    /// `rejected.offered` of its units offered: `offers` are the new
    /// orders, taken from the sale item's `available` at the ledger
    /// position `rejected.return_seq`.
    Offered { rejected: Order, offers: Vec<Order> },
    /// A row of that order id exists (the writer wrote it meanwhile, or an
    /// earlier give-up recorded it): it decides, as for any give-up.
    Exists(Order),
    /// Nobody could take a unit (or the store keeps no waitlist): nothing
    /// was written; the give-up goes on as without a line.
    Nobody,
}

/// A sale's line in figures, for the console.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineStats {
    pub waiting: u64,
    /// Entries offered a unit (each offer is an order).
    pub offered: u64,
    /// Offers paid.
    pub taken: u64,
    /// Offers that lapsed unpaid (their units went on down the line).
    pub expired: u64,
    pub left: u64,
    /// Orders the sale has had back so far (expiries: the sale item's
    /// `returnSeq`).
    pub returned: u64,
}

/// The waitlist's entries and the offer of returned units. The default
/// methods are a store that keeps no waitlist: it has no entries, and every
/// return goes back to the stock, as before the waitlist.
pub trait WaitlistStore: Send + Sync {
    /// The buyer's entry: a new one keyed `line_key` at `now_ms`, or the
    /// one they had (whatever became of it).
    fn join(
        &self,
        _sale_id: &SaleId,
        _user_id: &UserId,
        _line_key: &str,
        _now_ms: i64,
    ) -> impl Future<Output = Result<Joined, OrderStoreError>> + Send {
        std::future::ready(Err(OrderStoreError::Transient(
            "this order store keeps no waitlist".into(),
        )))
    }

    /// A waiting entry becomes `LEFT`; any other stays. The entry as it
    /// is after, `None` without one.
    fn leave(
        &self,
        _sale_id: &SaleId,
        _user_id: &UserId,
        _now_ms: i64,
    ) -> impl Future<Output = Result<Option<WaitlistEntry>, OrderStoreError>> + Send {
        std::future::ready(Ok(None))
    }

    fn entry(
        &self,
        _sale_id: &SaleId,
        _user_id: &UserId,
    ) -> impl Future<Output = Result<Option<WaitlistEntry>, OrderStoreError>> + Send {
        std::future::ready(Ok(None))
    }

    /// Entries still waiting ahead of `entry` (an index read: it may lag
    /// the table by a moment).
    fn ahead(
        &self,
        _entry: &WaitlistEntry,
    ) -> impl Future<Output = Result<u64, OrderStoreError>> + Send {
        std::future::ready(Ok(0))
    }

    /// The first `n` waiting entries, head first (an index read; the
    /// handover's conditions decide on the table itself).
    fn heads(
        &self,
        _sale_id: &SaleId,
        _n: usize,
    ) -> impl Future<Output = Result<Vec<WaitlistEntry>, OrderStoreError>> + Send {
        std::future::ready(Ok(Vec::new()))
    }

    /// How many orders the sale has had back (its `returnSeq`).
    fn returns(
        &self,
        _sale_id: &SaleId,
    ) -> impl Future<Output = Result<u64, OrderStoreError>> + Send {
        std::future::ready(Ok(0))
    }

    /// In one transaction: `order` (as read, `PENDING_PAYMENT` and due at
    /// `now_ms`) becomes `EXPIRED`, each of its units becomes a new order
    /// of one unit for the next of `heads` that can take it (their entry
    /// still `WAITING`, their record within the limit), units beyond the
    /// line go back to the sale item, and the return is numbered like any
    /// expiry's. A head that cannot take its unit is passed over (it stays
    /// waiting); a head that left or was offered meanwhile too.
    fn expire_to_line(
        &self,
        _order: &Order,
        _heads: &[Candidate],
        _terms: &OfferTerms,
        _now_ms: i64,
    ) -> impl Future<Output = Result<Handover, OrderStoreError>> + Send {
        std::future::ready(Err(OrderStoreError::Transient(
            "this order store keeps no waitlist".into(),
        )))
    }

    /// In one transaction: the reservation `order` (accepted, never
    /// written, given up by reconcile) is recorded `REJECTED`
    /// (`ABANDONED`), and each of its units becomes a new order of one
    /// unit for the next of `heads` that can take it, taken from the sale
    /// item's `available` (where the unit stayed: the order was never
    /// written) at the next ledger position. Units beyond the line stay
    /// in `available`, and go back to Redis's stock with the give-up.
    fn abandon_to_line(
        &self,
        _order: &crate::domain::orders::NewOrder,
        _heads: &[Candidate],
        _terms: &OfferTerms,
        _now_ms: i64,
    ) -> impl Future<Output = Result<GiveUp, OrderStoreError>> + Send {
        std::future::ready(Ok(GiveUp::Nobody))
    }

    fn stats(
        &self,
        _sale_id: &SaleId,
    ) -> impl Future<Output = Result<LineStats, OrderStoreError>> + Send {
        std::future::ready(Ok(LineStats::default()))
    }
}
