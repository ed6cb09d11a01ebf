//! What the ledger (DynamoDB) says of a sale, as the operations path reads
//! it: the sale item's counters, and what a rebuild of Redis loads from the
//! ledger (the decided orders as reservations, each buyer's units). Values
//! only; [`crate::ports::CatalogAdmin`] and [`crate::ports::OrderLedger`]
//! read them, [`crate::ports::StockLoading::stage_rebuild`] loads them.

use crate::domain::orders::{Order, OrderStatus};

/// The counters the order-writer and the unpaid release move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaleCounters {
    pub available: i64,
    pub sold: i64,
    pub version: i64,
    /// How many expiries have returned units to `available` (each sets the
    /// next number on its order row): the ledger position a rebuild loads
    /// Redis at. 0 before the first.
    pub return_seq: u64,
    /// Prewarm has loaded it into Redis (`loadedAtMs`): its shard count is
    /// fixed from then on.
    pub loaded: bool,
}

/// Where the ledger stood when a rebuild read it: the sale item's
/// `available` and `returnSeq`, one consistent read taken before the rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LedgerPosition {
    pub available: i64,
    pub return_seq: u64,
}

/// One page of a sale's order rows as a rebuild stages them: each decided
/// order as the reservation Redis keeps for it (a `WRITTEN` one holds its
/// units for its buyer). A rebuild reads and stages the ledger a page at a
/// time, so its memory is a page's, whatever the size of the sale.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LedgerPage {
    pub decided: Vec<DecidedOrder>,
    /// The page's `EXPIRED` orders (id, units), whatever their position: a
    /// shard that survived a partial loss may still be owed their return.
    pub expired: Vec<(String, i64)>,
}

impl LedgerPage {
    /// The page of `rows`, read after the sale item at `at`: an expiry
    /// after that read (a higher `returnSeq`) still held its units at that
    /// position, and its return is still to be made, so it loads as
    /// `WRITTEN`; one at or before it is in `available` and loads as
    /// `EXPIRED` (its return is never made twice). A row still `QUEUED`
    /// has decided nothing.
    pub fn of_rows(rows: &[Order], at: LedgerPosition) -> Self {
        let mut page = Self::default();
        for order in rows {
            let units = u64::from(order.quantity.get());
            let state = match order.status {
                OrderStatus::PendingPayment | OrderStatus::Paid => "WRITTEN",
                OrderStatus::Expired => {
                    page.expired.push((
                        order.order_id.to_string(),
                        i64::try_from(units).unwrap_or(0),
                    ));
                    if order.return_seq.is_none_or(|seq| seq <= at.return_seq) {
                        "EXPIRED"
                    } else {
                        "WRITTEN"
                    }
                }
                OrderStatus::Rejected => "REJECTED",
                OrderStatus::Queued => continue,
            };
            page.decided.push(DecidedOrder {
                order_id: order.order_id.to_string(),
                user_id: order.user_id.to_string(),
                quantity: units,
                at_ms: order.created_at_ms,
                state,
            });
        }
        page
    }

    /// The units each order of the page holds for its buyer.
    pub fn held(&self) -> impl Iterator<Item = &DecidedOrder> {
        self.decided.iter().filter(|d| d.state == "WRITTEN")
    }
}

/// An order the ledger has decided, as a reservation in `resv`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecidedOrder {
    pub order_id: String,
    pub user_id: String,
    pub quantity: u64,
    pub at_ms: i64,
    /// `WRITTEN`, `EXPIRED` or `REJECTED`.
    pub state: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{OrderId, Quantity, SaleId, UserId};

    fn row(id: &str, status: OrderStatus, return_seq: Option<u64>) -> Order {
        Order {
            order_id: OrderId::parse(id).unwrap(),
            sale_id: SaleId::parse("s1").unwrap(),
            user_id: UserId::parse(&format!("u-{id}")).unwrap(),
            quantity: Quantity::new(2).unwrap(),
            status,
            created_at_ms: 7,
            expires_at_ms: None,
            reject_reason: None,
            return_seq,
            amount: None,
            paid_at_ms: None,
            payment_id: None,
            refunds: Vec::new(),
            offer_of: None,
            offered: 0,
        }
    }

    #[test]
    fn a_page_holds_what_each_row_decided_at_the_position_read() {
        let at = LedgerPosition {
            available: 10,
            return_seq: 5,
        };
        let rows = [
            row("pending", OrderStatus::PendingPayment, None),
            row("paid", OrderStatus::Paid, None),
            row("returned", OrderStatus::Expired, Some(5)),
            row("later", OrderStatus::Expired, Some(6)),
            row("rejected", OrderStatus::Rejected, None),
            row("queued", OrderStatus::Queued, None),
        ];
        let page = LedgerPage::of_rows(&rows, at);
        let states: Vec<(&str, &str)> = page
            .decided
            .iter()
            .map(|d| (d.order_id.as_str(), d.state))
            .collect();
        // An expiry after the position read still held its units there:
        // its return is still to be made, so it loads as held.
        assert_eq!(
            states,
            [
                ("pending", "WRITTEN"),
                ("paid", "WRITTEN"),
                ("returned", "EXPIRED"),
                ("later", "WRITTEN"),
                ("rejected", "REJECTED"),
            ]
        );
        let held: Vec<&str> = page.held().map(|d| d.order_id.as_str()).collect();
        assert_eq!(held, ["pending", "paid", "later"]);
        assert_eq!(
            page.expired,
            [("returned".to_owned(), 2), ("later".to_owned(), 2)]
        );
    }
}
