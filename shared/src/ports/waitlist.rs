//! The waitlist's record in the ledger: one entry per (sale, buyer), the
//! line they form, and the one transaction that hands an expired order's
//! units to the head of that line (`adapters::dynamo::waitlist`); and its
//! part in the stock store ([`WaitlistStock`]): admission, and the claims
//! that keep an offer within the buyer's limit.

use crate::domain::OrderId;
use crate::domain::orders::Order;
use crate::domain::waitlist::EntryStatus;
use crate::domain::{SaleId, UserId};
use crate::ports::{ExpireOutcome, OrderStoreError, Returned, StoreError};

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

/// Whether a buyer may join a sale's waitlist, as the stock store decides
/// it: the purchase's checks but for the stock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitlistAdmission {
    /// May join; the store's clock (ms), the join time every environment
    /// shares.
    Admitted {
        now_ms: i64,
    },
    SaleMissing,
    Paused,
    NotStarted {
        start_ms: i64,
    },
    Ended,
    /// A lottery window's tickets are not drawn yet.
    Drawing,
    /// Units are on sale: buy instead.
    Available {
        remaining: u32,
    },
    GateRequired,
    LimitExceeded {
        order_ids: Vec<OrderId>,
    },
    RateLimited {
        retry_after_ms: u64,
    },
}

/// The stock store's part of the waitlist: admission to it, and the
/// buyers of the orders it is offered (claimed before the ledger writes
/// them, held after). The default methods are a store that keeps no
/// waitlist: it admits nobody and is never handed an offer.
pub trait WaitlistStock: Send + Sync {
    /// Whether `user_id` may join the sale's waitlist (a verified gate
    /// pass, if any, is used up by an admission).
    fn admit_waitlist(
        &self,
        _req: WaitlistJoin<'_>,
    ) -> impl Future<Output = Result<WaitlistAdmission, StoreError>> + Send {
        std::future::ready(Err(StoreError::Unavailable(
            "this stock store keeps no waitlist".into(),
        )))
    }

    /// The suffix an offered order's id carries to name the buyer's home
    /// shard (`""` for a sale of one shard).
    fn offer_suffix(
        &self,
        _sale_id: &SaleId,
        _user_id: &UserId,
    ) -> impl Future<Output = Result<String, StoreError>> + Send {
        std::future::ready(Ok(String::new()))
    }

    /// Before the ledger offers `order_id` (one unit) to `user_id`: their
    /// count goes up by it if it stays within the sale's limit as the
    /// stock store counts it (purchases still on the queue included), so
    /// the offer is never past the limit and the buyer cannot buy past it
    /// while it is made. A store that keeps no count admits every claim.
    fn claim_offer(
        &self,
        _sale_id: &SaleId,
        _order_id: &OrderId,
        _user_id: &UserId,
        _at_ms: i64,
    ) -> impl Future<Output = Result<OfferClaim, StoreError>> + Send {
        std::future::ready(Ok(OfferClaim::Claimed))
    }

    /// The ledger did not offer `order_id` after all: its claim, if still
    /// only a claim, is taken back.
    fn unclaim_offer(
        &self,
        _sale_id: &SaleId,
        _order_id: &OrderId,
        _user_id: &UserId,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        std::future::ready(Ok(()))
    }

    /// The buyer of `order_id`, an order the waitlist was offered at ledger
    /// position `return_seq`, holds it: counted once for their limit (its
    /// claim stands; without one, counted now).
    fn hold_offer(
        &self,
        _sale_id: &SaleId,
        _order_id: &OrderId,
        _user_id: &UserId,
        _at_ms: i64,
        _return_seq: u64,
    ) -> impl Future<Output = Result<Returned, StoreError>> + Send {
        std::future::ready(Ok(Returned::SaleMissing))
    }
}

/// What a claim of an offer did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfferClaim {
    /// Counted (or counted already, by an earlier claim of the same order).
    Claimed,
    /// The buyer's count is at the limit: not to be offered now.
    AtLimit,
    /// The stock store does not hold the sale: its load counts the offer
    /// from the ledger.
    SaleMissing,
}

/// One join's request, as the edge parsed it.
#[derive(Debug, Clone, Copy)]
pub struct WaitlistJoin<'a> {
    pub sale_id: &'a SaleId,
    pub user_id: &'a UserId,
    pub gate_nonce: Option<&'a str>,
    pub gate_issued_ms: Option<i64>,
    pub source_ip: Option<&'a str>,
}
