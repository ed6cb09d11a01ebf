//! A sale read from the stores in slices of its buyers, and each slice
//! judged in turn ([`InvariantChecker::read`], [`InvariantChecker::judge`]).

use super::spill::SaleSlices;
use super::{
    BUYERS_READ_AGAIN, InvariantChecker, OBSERVE_ATTEMPTS, SaleState, SaleTotals, Violation, Whole,
    buyers_to_read_again, check_buyers, check_whole, queue_error, spill_error,
};
use crate::app::jobs::JobError;
use crate::domain::ledger::SaleCounters;
use crate::domain::stock_state::RedisSnapshot;
use crate::domain::{OrderId, Sale, SaleId};
use crate::ports::{CatalogAdmin, OrderLedger, QueueInspector, StockAdmin};
use std::collections::BTreeSet;

/// Orders one slice of a read holds, about, at most: a sale expected to
/// have more is read in as many slices of its buyers, kept on local disk
/// and judged and repaired one at a time ([`InvariantChecker::read`]), so
/// a run holds one slice, whatever the size of the sale.
pub const SLICE_ORDERS: u64 = 20_000;

/// The most slices a read is cut into (each is a file open while the sale
/// is read).
pub const MAX_SLICES: u32 = 256;

/// A sale read from the stores, its buyers (their rows, counts and
/// reservations) kept in slices ([`SaleSlices`]): what the sale item, the
/// queues and Redis's stock say of the whole sale is here, each slice is
/// [`InvariantChecker::slice`].
pub struct SaleRead {
    pub whole: Whole,
    slices: SaleSlices,
    /// Buyers this read may still read again ([`BUYERS_READ_AGAIN`]).
    read_again_left: usize,
}

impl SaleRead {
    pub fn slices(&self) -> u32 {
        self.slices.slices()
    }

    /// A new pass over the slices: it may read [`BUYERS_READ_AGAIN`]
    /// buyers again, whatever the last pass read.
    pub fn rewind(&mut self) {
        self.read_again_left = BUYERS_READ_AGAIN;
    }
}

/// What a pass over every slice of a read found.
#[derive(Debug, Clone, Default)]
pub struct Judgement {
    pub violations: Vec<Violation>,
    pub totals: SaleTotals,
    /// The given accepted order ids no slice holds a row or a reservation
    /// of.
    pub unplaced: Vec<OrderId>,
}

impl<Q: QueueInspector, S: StockAdmin, C: CatalogAdmin, O: OrderLedger>
    InvariantChecker<Q, S, C, O>
{
    /// The sale read from the stores in slices of about the checker's
    /// slice size, as many as the sale's stock and expiries promise rows;
    /// `None` when the sale does not exist.
    ///
    /// The stores cannot be read at one instant: an order written or
    /// released between reading the sale item and reading the rows would
    /// look like counts that disagree. So the counters are read again at
    /// the end, and the whole read is taken again (a few times) while they
    /// moved; a read that never settled says so and is not compared.
    pub async fn read(&self, sale_id: &SaleId) -> Result<Option<SaleRead>, JobError> {
        self.read_in(sale_id, None).await
    }

    pub(super) async fn read_in(
        &self,
        sale_id: &SaleId,
        slices: Option<u32>,
    ) -> Result<Option<SaleRead>, JobError> {
        let mut attempt = 1;
        loop {
            let Some(read) = self.read_once(sale_id, slices).await? else {
                return Ok(None);
            };
            if read.whole.settled || attempt == OBSERVE_ATTEMPTS {
                return Ok(Some(read));
            }
            attempt += 1;
        }
    }

    /// Slices for a sale: its rows are the orders holding units (at most
    /// the stock), the expired ones (one per return) and the few rejected.
    fn slices_for(&self, sale: &Sale, counters: &SaleCounters) -> u32 {
        let rows = u64::from(sale.total_stock) + counters.return_seq;
        u32::try_from(rows.div_ceil(self.slice_orders))
            .unwrap_or(MAX_SLICES)
            .clamp(1, MAX_SLICES)
    }

    async fn read_once(
        &self,
        sale_id: &SaleId,
        slices: Option<u32>,
    ) -> Result<Option<SaleRead>, JobError> {
        let Some((sale, counters)) = self.catalog.get_record(sale_id).await? else {
            return Ok(None);
        };
        let queue = self.queue.depth().await.map_err(queue_error)?;
        let (queue_visible, queue_in_flight) = (queue.visible + queue.delayed, queue.in_flight);
        let dlq_visible = self
            .queue
            .dlq_depth()
            .await
            .map_err(queue_error)?
            .map_or(0, |dlq| dlq.visible + dlq.delayed);
        let slices = slices.unwrap_or_else(|| self.slices_for(&sale, &counters));
        let mut kept = SaleSlices::new(sale_id, slices).map_err(spill_error)?;
        let (pages, mut arriving) =
            tokio::sync::mpsc::channel(crate::app::jobs::LEDGER_PAGES_AHEAD);
        let send = self.orders.send_orders_of_sale(sale_id, pages);
        let keep = async {
            while let Some(page) = arriving.recv().await {
                for order in page {
                    kept.row(order);
                }
            }
        };
        let (sent, ()) = tokio::join!(send, keep);
        sent?;
        let redis = self.stock.stream_snapshot(sale_id, &mut kept).await?;
        kept.finish().map_err(spill_error)?;
        let after = self.catalog.get_record(sale_id).await?;
        let settled = after.is_some_and(|(_, again)| again == counters);
        Ok(Some(SaleRead {
            whole: Whole {
                sale,
                counters,
                redis,
                queue_visible,
                queue_in_flight,
                dlq_visible,
                settled,
            },
            slices: kept,
            read_again_left: BUYERS_READ_AGAIN,
        }))
    }

    /// Slice `k` of a read: its buyers' rows, counts and reservations, and
    /// each of its buyers whose count the rows and queued reservations do
    /// not explain read again with their reservations in one step. The
    /// slice is settled when the read was and the sale item's counters did
    /// not move by the time those buyers were read.
    pub async fn slice(&self, read: &mut SaleRead, k: u32) -> Result<SaleState, JobError> {
        let slice = read.slices.load(k).map_err(spill_error)?;
        let whole = &read.whole;
        let mut redis = whole
            .redis
            .clone()
            .map(|head| RedisSnapshot::of_head(head, slice.buyers, slice.reservations));
        let mut settled = whole.settled;
        if let Some(snap) = redis.as_mut() {
            let mut again = buyers_to_read_again(&slice.rows, snap);
            again.truncate(read.read_again_left);
            if !again.is_empty() {
                read.read_again_left -= again.len();
                snap.holdings = self
                    .stock
                    .holdings(&whole.sale.sale_id, &again)
                    .await?
                    .into_iter()
                    .collect();
                let after = self.catalog.get_record(&whole.sale.sale_id).await?;
                settled &= after.is_some_and(|(_, again)| again == whole.counters);
            }
        }
        Ok(SaleState {
            sale: whole.sale.clone(),
            counters: whole.counters,
            rows: slice.rows,
            redis,
            queue_visible: whole.queue_visible,
            queue_in_flight: whole.queue_in_flight,
            dlq_visible: whole.dlq_visible,
            settled,
        })
    }

    /// Every slice of a read judged in turn: the violations of the whole
    /// sale and of each buyer (with `LEDGER_DISAGREES` of each settled
    /// slice when `ledger`), the sums, and which of `accepted` no slice
    /// holds.
    pub async fn judge(
        &self,
        read: &mut SaleRead,
        ledger: bool,
        accepted: &[OrderId],
    ) -> Result<Judgement, JobError> {
        read.rewind();
        let mut buyers = Vec::new();
        let mut totals = SaleTotals::default();
        let mut unplaced: BTreeSet<&OrderId> = accepted.iter().collect();
        for k in 0..read.slices() {
            let state = self.slice(read, k).await?;
            buyers.extend(check_buyers(&state));
            if ledger && state.settled {
                buyers.extend(self.ledger_records(&state).await?);
            }
            unplaced.retain(|id| {
                !state.rows.contains_key(id.as_str())
                    && !state
                        .redis
                        .as_ref()
                        .is_some_and(|s| s.reservations.contains_key(id.as_str()))
            });
            totals.add(state.totals());
        }
        let violations = check_whole(&read.whole, &totals, buyers);
        Ok(Judgement {
            violations,
            totals,
            unplaced: unplaced.into_iter().cloned().collect(),
        })
    }
}
