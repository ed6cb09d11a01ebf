//! The buyer's orders: one order's status for polling (`QUEUED` while only
//! its reservation exists), a buyer's orders of a sale and their lottery
//! ticket, an order released the moment it is read past its window.

use super::*;

impl<O: OrderStore + PaymentStore + WaitlistStore, S: StockStore + StockAdmin, C: SaleCatalog>
    OrderQueries<O, S, C>
{
    /// `GET /sales/{saleId}/orders`: the caller's own orders of the sale,
    /// newest first: every row (through the buyer index, and by id for a
    /// reservation marked written that the index does not show yet), and
    /// `QUEUED` for a reservation whose row is not written yet. How a buyer
    /// who lost their `202` finds it.
    pub async fn my_orders(
        &self,
        sale_id: &SaleId,
        caller: &UserId,
    ) -> Result<Vec<Order>, QueryError> {
        let Some(sale) = self.catalog.get_sale(sale_id).await? else {
            return Err(QueryError::NotFound);
        };
        let mut orders = Vec::new();
        for order in self.orders.orders_of_buyer(sale_id, caller).await? {
            orders.push(self.released_if_due(order).await);
        }
        let reservations = self.stock.buyer_reservations(sale_id, caller).await?;
        for (order_id, resv) in reservations {
            if orders.iter().any(|o| o.order_id == order_id) {
                continue;
            }
            match resv.state.as_str() {
                "QUEUED" => orders.push(queued_order(
                    order_id,
                    sale_id.clone(),
                    caller,
                    &resv,
                    sale.price,
                )?),
                _ => {
                    if let Some(row) = self.orders.get(&order_id).await?
                        && &row.user_id == caller
                    {
                        orders.push(self.released_if_due(row).await);
                    }
                }
            }
        }
        orders.sort_by_key(|o| std::cmp::Reverse(o.created_at_ms));
        Ok(orders)
    }

    /// The caller's lottery ticket of the sale, as `GET /sales/{saleId}/orders`
    /// shows it (`None`: no window, or no ticket). A ticket still held once
    /// the window has closed first drives the draw (a bounded part, under
    /// its lock), so a buyer polling for their result gets it even when no
    /// purchase comes to run the draw.
    pub async fn my_ticket(
        &self,
        sale_id: &SaleId,
        caller: &UserId,
    ) -> Result<Option<TicketAnswer>, QueryError> {
        use crate::ports::TicketStatus;
        let Some(lottery) = &self.lottery else {
            return Ok(None);
        };
        let Some(sale) = self.catalog.get_sale(sale_id).await? else {
            return Err(QueryError::NotFound);
        };
        let Some(draw_at) = sale.window_end_ms() else {
            return Ok(None);
        };
        let mut ticket = lottery.ticket(sale_id, caller).await?;
        let held = |t: &Option<crate::ports::TicketView>| matches!(t, Some(v) if v.status == TicketStatus::Held);
        let now = clock::now_ms();
        // Nothing is decided after the end, as no purchase is: a ticket
        // still held then is told the sale ended, and never drives a draw.
        let ended = now >= sale.end_ms;
        if held(&ticket) && !ended && now >= draw_at && lottery.drive(sale_id).await {
            ticket = lottery.ticket(sale_id, caller).await?;
        }
        Ok(ticket.map(|t| {
            let (status, order_id) = match t.status {
                TicketStatus::Held if ended => ("ENDED", None),
                TicketStatus::Held => ("TICKET", None),
                TicketStatus::Won(order_id) => ("WON", Some(order_id)),
                TicketStatus::Lost => ("LOST", None),
            };
            TicketAnswer {
                status,
                quantity: t.quantity,
                order_id,
                draw_at_ms: draw_at,
            }
        }))
    }

    /// `GET /orders/{orderId}`: only the owner sees it; anyone else gets the
    /// same 404 as for an order that does not exist.
    pub async fn order(&self, order_id: &OrderId, caller: &UserId) -> Result<Order, QueryError> {
        if let Some(order) = self.orders.get(order_id).await? {
            return if &order.user_id == caller {
                Ok(self.released_if_due(order).await)
            } else {
                Err(QueryError::NotFound)
            };
        }
        self.queued(order_id, Some(caller))
            .await?
            .ok_or(QueryError::NotFound)
    }

    /// `order` as the API answers it now. One whose payment window has
    /// closed is released first, as the release job would (the ledger's
    /// conditional expiry, then its units and its buyer's count back in
    /// Redis; exactly once, whoever gets there first): from the instant the
    /// API says `EXPIRED`, the unit is back on sale and its buyer may buy
    /// again. A release that cannot be made now (a fault) still answers
    /// `EXPIRED` (it can no longer be paid); the job releases it.
    pub(super) async fn released_if_due(&self, order: Order) -> Order {
        let now = clock::now_ms();
        if order.status != OrderStatus::PendingPayment
            || order.status_at(now) != OrderStatus::Expired
        {
            return order;
        }
        // The sale's terms, for an offer to its waitlist; without them (a
        // catalog fault) the units go back to the stock as before.
        let sale = self.catalog.get_sale(&order.sale_id).await.ok().flatten();
        match release(
            &self.orders,
            &self.stock,
            sale.as_ref(),
            &order.order_id,
            now,
        )
        .await
        {
            Ok(Released::Now { order, .. }) => order,
            // Paid or released by someone else meanwhile: the row says which.
            Ok(Released::Not(_)) => match self.orders.get(&order.order_id).await {
                Ok(Some(row)) => row,
                _ => order,
            },
            Err(err) => {
                tracing::warn!(order_id = %order.order_id, %err, "could not release an order past its window now; the release job will");
                order
            }
        }
    }

    /// `GET /admin/orders/{orderId}`: any buyer's order, as its buyer sees
    /// it (`QUEUED` while only its reservation exists).
    pub async fn any_order(&self, order_id: &OrderId) -> Result<Order, QueryError> {
        if let Some(order) = self.orders.get(order_id).await? {
            return Ok(order);
        }
        self.queued(order_id, None)
            .await?
            .ok_or(QueryError::NotFound)
    }

    /// The order as `QUEUED`, if a reservation for it exists (and, with a
    /// `caller`, is theirs).
    pub(super) async fn queued(
        &self,
        order_id: &OrderId,
        caller: Option<&UserId>,
    ) -> Result<Option<Order>, QueryError> {
        if let Some(order) = self.queued_in(order_id, caller, false).await? {
            return Ok(Some(order));
        }
        // Not in the sales listed: a sale made since may hold it (a buyer
        // looks 2 s after their `202`). The list is read again, at most
        // every LIST_REFRESH_AFTER, so unknown ids cost at most two reads of
        // the (small) sales table a second.
        self.queued_in(order_id, caller, true).await
    }

    async fn queued_in(
        &self,
        order_id: &OrderId,
        caller: Option<&UserId>,
        refresh: bool,
    ) -> Result<Option<Order>, QueryError> {
        let Some(sale_ids) = self.open_sale_ids(refresh).await? else {
            return Ok(None);
        };
        for sale_id in sale_ids {
            let Some(view) = self.stock.view(&sale_id, Some(order_id)).await? else {
                continue;
            };
            let Some(resv) = view.reservation else {
                continue;
            };
            if caller.is_some_and(|c| resv.user_id != c.as_str()) || resv.state == "REJECTED" {
                return Ok(None);
            }
            let owner = match caller {
                Some(caller) => caller.clone(),
                None => UserId::parse(&resv.user_id).map_err(|e| StoreError::Protocol(e.0))?,
            };
            let price = self
                .catalog
                .get_sale(&sale_id)
                .await?
                .and_then(|sale| sale.price);
            return Ok(Some(queued_order(
                order_id.clone(),
                sale_id,
                &owner,
                &resv,
                price,
            )?));
        }
        Ok(None)
    }

    /// Sales whose Redis keys may still hold reservations.
    /// With `refresh`, only a list read again (`None` when the cached one
    /// is younger than [`LIST_REFRESH_AFTER`]: it was just read).
    async fn open_sale_ids(&self, refresh: bool) -> Result<Option<Vec<SaleId>>, QueryError> {
        if let Ok(cached) = self.open_sales.lock()
            && let Some((at, ids)) = cached.as_ref()
        {
            if refresh && at.elapsed() < LIST_REFRESH_AFTER {
                return Ok(None);
            }
            if !refresh && at.elapsed() < self.sale_list_ttl {
                return Ok(Some(ids.clone()));
            }
        }
        let now = clock::now_ms();
        let ids: Vec<SaleId> = self
            .catalog
            .list_sales()
            .await?
            .into_iter()
            .filter(|s: &Sale| s.end_ms + KEY_TTL_AFTER_END_MS > now)
            .map(|s| s.sale_id)
            .collect();
        if let Ok(mut cached) = self.open_sales.lock() {
            *cached = Some((Instant::now(), ids.clone()));
        }
        Ok(Some(ids))
    }
}

/// An order as `QUEUED`: accepted, its reservation in Redis, no row yet.
/// Its `amount` is the one the order-writer will record (the price is
/// frozen from the start).
fn queued_order(
    order_id: OrderId,
    sale_id: SaleId,
    caller: &UserId,
    resv: &crate::ports::ReservationRecord,
    price: Option<Money>,
) -> Result<Order, StoreError> {
    let quantity = Quantity::new(resv.quantity).map_err(|e| StoreError::Protocol(e.0))?;
    Ok(Order {
        order_id,
        sale_id,
        user_id: caller.clone(),
        quantity,
        status: OrderStatus::Queued,
        created_at_ms: resv.at_ms,
        expires_at_ms: None,
        reject_reason: None,
        return_seq: None,
        amount: price.and_then(|p| p.times(quantity)),
        paid_at_ms: None,
        payment_id: None,
        refunds: Vec::new(),
        offer_of: None,
        offered: 0,
    })
}
