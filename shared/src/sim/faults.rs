//! The faults the driver injects between steps (Redis keeping a replica,
//! losing the sale's keys, failing over to the replica behind it or
//! becoming unreachable; SQS delivering a message twice), the accepted
//! orders a loss of Redis excuses, and the check between steps while
//! Redis has lost nothing ([`World::check_offer`]).

use super::clock::SKEW_MS;
use super::world::{EPOCH_MS, World, futures_lite_now, now};
use crate::domain::{OrderId, Sale};
use crate::ports::StockReading;
use std::collections::{BTreeMap, BTreeSet};

impl World {
    /// Keeps what Redis holds now: the replica a later failover promotes.
    pub(crate) fn replicate(&self) {
        let checkpoint = self.memory_stock.checkpoint();
        *self
            .checkpoint
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(checkpoint);
    }

    /// Redis loses every key of the sale (a restart without persistence).
    pub(crate) fn flush(&self) {
        let before = self.unsent_reservations();
        self.memory_stock.forget(&self.sale.sale_id);
        self.log().flushes.push(now());
        self.excuse(before);
        self.sched.count("redis lost the sale's keys");
        self.trace("FAULT redis lost the sale's keys");
    }

    /// Redis fails over to the replica kept at the last [`Self::replicate`]:
    /// every write since is lost.
    pub(crate) fn failover(&self) {
        let Some(checkpoint) = self
            .checkpoint
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
        else {
            return;
        };
        let before = self.unsent_reservations();
        self.memory_stock.restore(&checkpoint);
        self.log().failovers.push(now());
        self.excuse(before);
        self.sched.count("redis failed over to a replica behind it");
        self.trace("FAULT redis failed over to a replica behind it");
    }

    pub(crate) fn outage(&self, down: bool) {
        self.memory_stock
            .unavailable
            .store(down, std::sync::atomic::Ordering::SeqCst);
        if down {
            self.sched.count("redis unreachable");
        }
        self.trace(if down {
            "FAULT redis unreachable"
        } else {
            "redis reachable"
        });
    }

    pub(crate) fn duplicate(&self) {
        if self.queue.duplicate_one() {
            self.sched.count("sqs delivered a message twice");
        }
    }

    /// Reservations queued in Redis with no message on the queue and no
    /// row: if Redis loses them now, nothing anywhere remembers them. Only
    /// those whose send ends unknown (before the loss or after it) are
    /// excused ([`World::excused`]): the one loss the design leaves open
    /// (docs/design.md "Failure semantics").
    fn unsent_reservations(&self) -> BTreeSet<String> {
        // Read past an outage: it is what Redis holds, not what a client sees.
        let down = self
            .memory_stock
            .unavailable
            .swap(false, std::sync::atomic::Ordering::SeqCst);
        let snapshot = SKEW_MS.sync_scope(0, || {
            futures_lite_now(self.memory_stock.snapshot(&self.sale.sale_id))
        });
        self.memory_stock
            .unavailable
            .store(down, std::sync::atomic::Ordering::SeqCst);
        let Some(Ok(Some(snapshot))) = snapshot else {
            return BTreeSet::new();
        };
        let queued = self.queue.all_order_ids();
        let rows = self.rows();
        snapshot
            .reservations
            .iter()
            .filter(|(id, r)| {
                r.state == "QUEUED" && !queued.contains(*id) && !rows.contains_key(*id)
            })
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Whether an accepted order with no row is the documented loss: Redis
    /// lost its reservation before anything sent it, and a send of it
    /// ended unknown (the buyer's 202 came from that send). A 202 given
    /// any other way promises an order that a loss of Redis cannot take.
    pub(crate) fn excused(&self, order_id: &str) -> bool {
        let lost =
            OrderId::parse(order_id).is_ok_and(|id| self.log().lost_with_redis.contains(&id));
        lost && self.queue.was_ambiguous(order_id)
    }

    fn excuse(&self, before: BTreeSet<String>) {
        let after = self.unsent_reservations();
        let mut log = self.log();
        for id in before.difference(&after) {
            if let Ok(order_id) = OrderId::parse(id) {
                log.lost_with_redis.insert(order_id);
            }
        }
    }

    /// Between two steps, while Redis has lost nothing: it offers no unit
    /// the ledger does not have and counts no buyer below what they hold.
    /// Every unit is in DynamoDB's `available`, in a row holding it, or in
    /// a reservation queued and not yet written; Redis's stock plus its
    /// queued reservations can only be less (an expiry's return on its
    /// way), never more.
    pub(crate) fn check_offer(&self) {
        let log = self.log();
        if !log.failovers.is_empty() || !log.flushes.is_empty() || log.over_offers.len() >= 5 {
            return;
        }
        drop(log);
        let down = self
            .memory_stock
            .unavailable
            .swap(false, std::sync::atomic::Ordering::SeqCst);
        let snapshot = SKEW_MS.sync_scope(0, || {
            futures_lite_now(self.memory_stock.snapshot(&self.sale.sale_id))
        });
        self.memory_stock
            .unavailable
            .store(down, std::sync::atomic::Ordering::SeqCst);
        let Some(Ok(Some(snapshot))) = snapshot else {
            return;
        };
        let Some((_, counters)) = self.record() else {
            return;
        };
        let rows = self.rows();
        let mut in_flight = 0_i64;
        let mut held: BTreeMap<String, i64> = BTreeMap::new();
        // Units the waitlist handed a buyer that Redis has not counted for
        // them yet (no `hold_offer` marker): the ledger's transaction
        // comes first, Redis's count after.
        let mut uncounted: BTreeMap<String, i64> = BTreeMap::new();
        for row in rows.values() {
            if matches!(
                row.status,
                crate::domain::orders::OrderStatus::PendingPayment
                    | crate::domain::orders::OrderStatus::Paid
            ) {
                *held.entry(row.user_id.to_string()).or_default() += i64::from(row.quantity.get());
                if row.offer_of.is_some()
                    && !snapshot.reservations.contains_key(row.order_id.as_str())
                {
                    *uncounted.entry(row.user_id.to_string()).or_default() +=
                        i64::from(row.quantity.get());
                }
            }
        }
        for (id, r) in &snapshot.reservations {
            if r.state == "QUEUED" && !rows.contains_key(id) {
                let units = i64::try_from(r.quantity).unwrap_or(0);
                in_flight += units;
                *held.entry(r.user_id.clone()).or_default() += units;
            }
        }
        let mut found = Vec::new();
        if snapshot.stock + in_flight > counters.available {
            found.push(format!(
                "REDIS_OVER_OFFER at +{} ms: Redis offers {} with {in_flight} queued, the ledger has {} available",
                now() - EPOCH_MS,
                snapshot.stock,
                counters.available
            ));
        }
        for (user, units) in &held {
            let counted = snapshot.buyers.get(user).copied().unwrap_or(0);
            let offers = uncounted.get(user).copied().unwrap_or(0);
            if counted < *units {
                let code = if counted + offers >= *units {
                    "OFFER_UNCOUNTED"
                } else {
                    "REDIS_UNDERCOUNT"
                };
                found.push(format!(
                    "{code} at +{} ms: Redis counts {user} at {counted}, who holds {units} ({offers} by offers Redis has not counted)",
                    now() - EPOCH_MS
                ));
            }
        }
        self.log().over_offers.extend(found);
    }

    fn record(&self) -> Option<(Sale, crate::domain::ledger::SaleCounters)> {
        use crate::ports::CatalogAdmin;
        match futures_lite_now(self.memory_catalog.get_record(&self.sale.sale_id)) {
            Some(Ok(record)) => record,
            _ => None,
        }
    }
}
