//! The checks after a run, over what the stores hold and what every client
//! was told: the invariant checker reconcile runs (stock, limits, counters,
//! Redis against the ledger, lost orders), the promises only the
//! clients' side can judge, and the waitlist's (`check/waitlist.rs`).

use super::world::{Command, World};
use crate::domain::OrderId;
use crate::domain::orders::OrderStatus;
use std::collections::BTreeMap;

mod waitlist;
pub(crate) use waitlist::offer_counts;

/// Every broken promise of the run, one line each.
pub(crate) async fn violations(w: &World) -> Vec<String> {
    let mut found = Vec::new();
    // A copy: the checks below await the stores.
    let log = w.log().clone();
    let rows = w.rows();
    // Excused only if it did end with no row: most such reservations had
    // their send still on its way, and were written.
    let accepted: Vec<OrderId> = log
        .accepted
        .keys()
        .filter(|id| !w.excused(id.as_str()) || rows.contains_key(id.as_str()))
        .cloned()
        .collect();
    found.extend(log.over_offers.iter().cloned());
    let first_loss = log
        .failovers
        .iter()
        .chain(log.flushes.iter())
        .min()
        .copied();

    match w
        .reconciler
        .checker()
        .check_sale(&w.sale.sale_id, &accepted)
        .await
    {
        Ok(Some(list)) => found.extend(
            list.into_iter()
                .map(|v| format!("{}: {}", v.code, v.detail)),
        ),
        Ok(None) => found.push("CHECKER: the sale is gone".into()),
        Err(err) => found.push(format!("CHECKER: could not read the sale: {err}")),
    }

    found.extend(waitlist::violations(w, &rows));

    let sale = &w.sale;
    // No unit sold twice or made up, no buyer over the limit: from the rows
    // alone, apart from the checker's own sums.
    let mut held: BTreeMap<&str, u64> = BTreeMap::new();
    let mut sold = 0_u64;
    for o in rows.values() {
        if matches!(o.status, OrderStatus::PendingPayment | OrderStatus::Paid) {
            sold += u64::from(o.quantity.get());
            *held.entry(o.user_id.as_str()).or_default() += u64::from(o.quantity.get());
        }
    }
    if sold > u64::from(sale.total_stock) {
        found.push(format!(
            "OVERSOLD: {sold} units held of {}",
            sale.total_stock
        ));
    }
    for (user, units) in &held {
        if *units > u64::from(sale.per_user_limit) {
            found.push(format!(
                "OVER_LIMIT: {user} holds {units} (limit {})",
                sale.per_user_limit
            ));
        }
    }
    // Every 202 ends as an order row (its status says which end).
    for id in &accepted {
        if !rows.contains_key(id.as_str()) {
            found.push(format!("NO_ROW: {id} was answered 202 and has no row"));
        }
    }
    // Redis decides first: while it has lost nothing, every order it
    // reserved is one DynamoDB has the stock and the limit for. A rejected
    // 202 means Redis offered what it did not have (a unit returned twice,
    // a buyer's count lowered twice).
    for id in log.accepted.keys() {
        if let Some(o) = rows.get(id.as_str())
            && o.status == OrderStatus::Rejected
            && let Some(rejected_at) = w.orders.first_written_as(id, OrderStatus::Rejected)
            && first_loss.is_none_or(|lost| lost > rejected_at)
        {
            found.push(format!(
                "REJECTED_WITHOUT_LOSS: {id} was answered 202 and rejected ({:?}) though Redis had lost nothing",
                o.reject_reason
            ));
        }
    }
    // A payment answered paid stays paid: never expired, never undone.
    for id in &log.paid {
        match rows.get(id.as_str()) {
            Some(o) if o.status == OrderStatus::Paid => {}
            Some(o) => found.push(format!(
                "PAID_UNDONE: {id} was answered paid and is {}",
                o.status.as_str()
            )),
            None => found.push(format!(
                "PAID_UNDONE: {id} was answered paid and has no row"
            )),
        }
    }
    // The sale item's counters: every unit is available or held, none
    // returned twice.
    if let Some((_, counters)) = w.memory_catalog_record() {
        let total = i64::from(sale.total_stock);
        if counters.available + counters.sold != total
            || counters.sold != i64::try_from(sold).unwrap_or(i64::MAX)
        {
            found.push(format!(
                "COUNTERS: available {} + sold {} against stock {total} and rows holding {sold}",
                counters.available, counters.sold
            ));
        }
        // Redis, settled, offers exactly what DynamoDB has available.
        if let Some(left) = w.memory_stock.stock_of(&sale.sale_id)
            && i64::from(left) != counters.available
        {
            found.push(format!(
                "REDIS_STOCK: Redis offers {left}, DynamoDB has {} available",
                counters.available
            ));
        }
    }
    // Operators obeyed: Redis makes no reservation after a pause was
    // answered (until a resume was sent, whatever became of it), or after
    // an end was answered.
    let new_orders = w
        .stock
        .reserved
        .lock()
        .map(|r| r.clone())
        .unwrap_or_default();
    let commands = &log.commands;
    for (command, sent_at, answered) in commands {
        let Some(answered) = *answered else {
            continue;
        };
        let until = match command {
            Command::Pause => commands
                .iter()
                .filter(|(c, sent, _)| *c == Command::Resume && *sent > answered)
                .map(|(_, sent, _)| *sent)
                .min()
                .unwrap_or(i64::MAX),
            Command::End => i64::MAX,
            Command::Resume => continue,
        };
        for (sent, id) in &new_orders {
            if *sent > answered && *sent < until {
                // A failover to a replica that missed the command's own
                // Redis write undoes it there until prewarm follows the
                // table again: Redis keeps no promise it did not receive.
                let undone_by_failover = log.failovers.iter().any(|f| {
                    f > sent_at
                        && f < sent
                        && !log
                            .prewarms
                            .iter()
                            .any(|(started, ended)| started > f && ended < sent)
                });
                if undone_by_failover {
                    continue;
                }
                found.push(format!(
                    "DISOBEYED: {id} reserved at +{} ms, after a {command:?} answered at +{} ms",
                    sent - super::world::EPOCH_MS,
                    answered - super::world::EPOCH_MS
                ));
            }
        }
    }
    found
}

impl World {
    fn memory_catalog_record(
        &self,
    ) -> Option<(crate::domain::Sale, crate::domain::ledger::SaleCounters)> {
        use crate::ports::CatalogAdmin;
        match super::world::futures_lite_now(self.memory_catalog.get_record(&self.sale.sale_id)) {
            Some(Ok(record)) => record,
            _ => None,
        }
    }
}
