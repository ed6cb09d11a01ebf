//! The purchase decision.
//!
//! 1. One atomic call to the stock store decides: window, status, the
//!    caller's limit, the stock; on success it deducts, counts the buyer and
//!    records the reservation (the outbox).
//! 2. The order message goes to the queue.
//! 3. Only a *definite* queue rejection gives the stock back. A timeout keeps
//!    the reservation and still answers 202: reconciliation relays it, because
//!    "timeout is not failure" and underselling briefly beats overselling.
//! 4. A retry with the same `Idempotency-Key` is answered with its order;
//!    while that order is not written, the retry sends it again first (the
//!    first request may have lost its answer before it sent): no 202 rests
//!    on a reservation nothing tried to send.
//!
//! When the stock store has no keys for the sale, the catalog (cached per
//! execution environment) tells an unknown sale (404) from a live one whose
//! keys were lost (503, fail closed) without a database read per request.
//!
//! Sold-out fast path: once Redis says a sale has nothing left, this
//! execution environment answers `410 SOLD_OUT` from memory for
//! [`SOLD_OUT_FLAG`] without calling Redis; then it asks Redis again, so
//! units that come back (an unpaid order released, a failed send) are sold
//! within that bound. A request with an `Idempotency-Key` always goes to
//! Redis: it may be a winner's retry, whose answer is its order, not 410.
//!
//! Its unit tests are in `purchase/tests.rs`.

use crate::clock;
use crate::domain::{IdempotencyKey, OrderId, OrderMessage, Quantity, SaleId, SalePhase, UserId};
use crate::error::ApiError;
use crate::ports::{
    DrawStore, OrderQueue, ReleaseOutcome, Reservation, ReserveOutcome, ReserveRequest,
    SaleCatalog, SendError, StockStore,
};

/// A purchase attempt, parsed at the edge.
#[derive(Debug, Clone)]
pub struct PurchaseRequest {
    pub sale_id: SaleId,
    pub user_id: UserId,
    pub quantity: Quantity,
    pub idempotency_key: Option<IdempotencyKey>,
    /// The caller's address as API Gateway saw it, for the per-IP bucket.
    pub source_ip: Option<String>,
    /// The `X-Sale-Token` header, for gated sales.
    pub sale_token: Option<String>,
}

/// What the buyer is told on 202.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub order_id: OrderId,
    pub sale_id: SaleId,
    pub quantity: Quantity,
    /// True when this answer replays an earlier one (same Idempotency-Key).
    pub replayed: bool,
}

/// A lottery window's ticket: what the buyer is told on 202 while the
/// window is open (no order yet: the draw decides).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    pub sale_id: SaleId,
    pub quantity: Quantity,
    /// When the window closes and the draw decides the ticket (epoch ms).
    pub draw_at_ms: i64,
}

/// What a purchase that is not refused gets: an order, or during a lottery
/// window a ticket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admitted {
    Order(Accepted),
    Ticket(Ticket),
}

/// Every way a purchase can be refused.
#[derive(Debug, thiserror::Error)]
pub enum PurchaseError {
    #[error("sale not found")]
    NotFound,
    #[error("sale not started")]
    NotStarted { start_ms: i64 },
    #[error("sale ended")]
    Ended,
    #[error("sold out ({remaining} left)")]
    SoldOut { remaining: u32 },
    #[error("limit exceeded")]
    LimitExceeded { order_ids: Vec<OrderId> },
    #[error("sale paused by an operator")]
    Paused,
    #[error("live sale has no keys in the stock store")]
    KeysMissing,
    #[error(transparent)]
    Store(#[from] crate::ports::StoreError),
    #[error(transparent)]
    Catalog(#[from] crate::ports::CatalogError),
    #[error("queue rejected the order; stock returned")]
    QueueRejected,
    /// A keyed retry's send of its order was refused: the order may still
    /// come (its reservation is kept), but nothing vouches for it yet.
    #[error("queue refused the retry's send; reservation kept")]
    ResendRefused,
    #[error("rate limited")]
    RateLimited { retry_after_ms: u64 },
    #[error("gate pass missing, invalid or used")]
    GateRequired,
    /// [`PurchaseService::purchase`] only, which promises an order: the
    /// sale's lottery window gave a ticket instead ([`PurchaseService::admit`]
    /// answers it).
    #[error("a lottery ticket, not an order")]
    TicketInstead,
    #[error("the lottery draw is running")]
    Drawing,
    /// A retry with the same `Idempotency-Key` as a purchase whose order
    /// has since expired unpaid or been rejected.
    #[error("order {order_id} ended {}", status.as_str())]
    OrderEnded {
        order_id: OrderId,
        status: crate::domain::orders::OrderStatus,
    },
}

impl From<PurchaseError> for ApiError {
    fn from(err: PurchaseError) -> Self {
        match err {
            PurchaseError::NotFound => ApiError::SaleNotFound,
            PurchaseError::NotStarted { start_ms } => {
                let wait_ms = start_ms.saturating_sub(clock::now_ms()).max(0);
                let secs = u64::try_from((wait_ms + 999) / 1000).unwrap_or(0).max(1);
                ApiError::SaleNotStarted {
                    retry_after_secs: Some(secs),
                }
            }
            PurchaseError::Ended => ApiError::SaleEnded,
            PurchaseError::SoldOut { remaining: 0 } => ApiError::SoldOut {
                message: "sold out".into(),
            },
            PurchaseError::SoldOut { remaining } => ApiError::SoldOut {
                message: format!("not enough stock left: {remaining} remaining"),
            },
            PurchaseError::LimitExceeded { order_ids } => ApiError::LimitExceeded { order_ids },
            PurchaseError::Paused => ApiError::paused("the sale is paused"),
            PurchaseError::KeysMissing => {
                ApiError::paused("the sale is being restored; retry shortly")
            }
            PurchaseError::Store(_) | PurchaseError::Catalog(_) => {
                ApiError::paused("the sale is temporarily unavailable; retry shortly")
            }
            PurchaseError::GateRequired => ApiError::GateRequired,
            PurchaseError::RateLimited { retry_after_ms } => ApiError::RateLimited {
                retry_after_secs: retry_after_ms.div_ceil(1000).max(1),
            },
            // Never reaches a buyer: the handler calls `admit`.
            PurchaseError::TicketInstead => ApiError::Internal,
            PurchaseError::Drawing => ApiError::Drawing,
            PurchaseError::OrderEnded { order_id, status } => {
                ApiError::OrderEnded { order_id, status }
            }
            PurchaseError::QueueRejected => ApiError::paused(
                "your purchase could not be queued and was not taken; retry shortly",
            ),
            PurchaseError::ResendRefused => ApiError::paused(
                "your order could not be confirmed yet; retry shortly with the same Idempotency-Key",
            ),
        }
    }
}

/// How long an execution environment answers `SOLD_OUT` from memory after
/// Redis said so: the longest a buyer can be refused while stock that came
/// back exists.
pub const SOLD_OUT_FLAG: std::time::Duration = std::time::Duration::from_millis(500);

type SoldOutFlags = std::collections::HashMap<String, (tokio::time::Instant, tokio::time::Instant)>;

/// The purchase use case over its three ports.
pub struct PurchaseService<S, Q, C> {
    stock: S,
    queue: Q,
    catalog: C,
    /// The sale gate's key; without one, gated sales sell to nobody.
    gate: Option<crate::domain::gate::Gate>,
    /// How long a sold-out answer is remembered ([`SOLD_OUT_FLAG`]; zero
    /// turns the fast path off, for the benchmark's reference row).
    sold_out_flag: std::time::Duration,
    /// Sale id -> until when this environment answers `SOLD_OUT` itself,
    /// and when Redis said so (a keyed request's filter must be read after).
    sold_out: std::sync::RwLock<SoldOutFlags>,
    fast_path_hits: std::sync::atomic::AtomicU64,
    metrics: crate::observe::metrics::Metrics,
    /// This environment's answers per sale and outcome, on their way to
    /// Redis for the operator dashboard ([`crate::observe::outcomes`]).
    outcomes: std::sync::Arc<crate::observe::outcomes::OutcomeTally>,
    /// Rebuilds a live sale whose keys are missing, at once (not at the
    /// next schedule); `None`: the schedule alone does.
    rebuild: Option<std::sync::Arc<dyn RebuildTrigger>>,
    /// Sale id -> when this environment last asked for its rebuild.
    rebuild_asked: std::sync::Mutex<std::collections::HashMap<String, tokio::time::Instant>>,
    /// What the API's edge sends with each request it forwards
    /// ([`crate::http::source_ip`]); `None`: no edge in front.
    edge_secret: Option<String>,
}

/// Starts the rebuild of a live sale whose keys are missing: prewarm's
/// rebuild, under the sale's lock, waiting for what is in flight exactly as
/// the schedule's does (safe to ask any number of times).
pub trait RebuildTrigger: Send + Sync {
    fn rebuild<'a>(
        &'a self,
        sale_id: &'a SaleId,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>;
}

/// How often one environment asks for the rebuild of one sale: a purchase
/// that finds the keys missing asks, the others in that second do not.
pub const REBUILD_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

impl<S: StockStore, Q: OrderQueue, C: SaleCatalog> PurchaseService<S, Q, C> {
    pub fn new(stock: S, queue: Q, catalog: C) -> Self {
        Self {
            stock,
            queue,
            catalog,
            gate: None,
            sold_out_flag: SOLD_OUT_FLAG,
            sold_out: std::sync::RwLock::default(),
            fast_path_hits: std::sync::atomic::AtomicU64::new(0),
            metrics: crate::observe::metrics::Metrics::off(),
            outcomes: std::sync::Arc::default(),
            rebuild: None,
            rebuild_asked: std::sync::Mutex::default(),
            edge_secret: None,
        }
    }

    /// The same service behind the API's edge: a request carrying `secret`
    /// is counted by its viewer's address.
    pub fn with_edge_secret(mut self, secret: String) -> Self {
        self.edge_secret = Some(secret);
        self
    }

    /// What the API's edge sends with each request, if one is in front.
    pub fn edge_secret(&self) -> Option<&str> {
        self.edge_secret.as_deref()
    }

    /// The same service rebuilding a lost live sale at once.
    pub fn with_rebuild(mut self, rebuild: std::sync::Arc<dyn RebuildTrigger>) -> Self {
        self.rebuild = Some(rebuild);
        self
    }

    /// Asks for the sale's rebuild unless this environment asked within
    /// [`REBUILD_EVERY`], in a task of its own: the buyer gets their `503`
    /// at once (invariant 7), and the next purchase after the rebuild
    /// sells. (In Lambda the task may be frozen with its environment
    /// between invocations; it goes on at the next one, and every other
    /// environment asks too.)
    fn ask_rebuild(&self, sale_id: &SaleId) {
        let Some(rebuild) = &self.rebuild else { return };
        let now = tokio::time::Instant::now();
        {
            let Ok(mut asked) = self.rebuild_asked.lock() else {
                return;
            };
            if asked
                .get(sale_id.as_str())
                .is_some_and(|at| now.duration_since(*at) < REBUILD_EVERY)
            {
                return;
            }
            if asked.len() > 1_024 {
                asked.clear();
            }
            asked.insert(sale_id.to_string(), now);
        }
        let (rebuild, sale_id) = (rebuild.clone(), sale_id.clone());
        // Not cut short: every call it makes has its own timeout, and a big
        // sale's ledger may take longer to read than any budget chosen
        // here. A rebuild dropped midway kept its lock until the lock's TTL,
        // and the next ask, cut again, never finished it.
        tokio::spawn(async move { rebuild.rebuild(&sale_id).await });
    }

    /// This environment's tally of answers by sale and outcome. The handler
    /// records each answer it gives, by the `Purchases` metric's outcome.
    pub fn outcomes(&self) -> &crate::observe::outcomes::OutcomeTally {
        &self.outcomes
    }

    /// At the end of an invocation (Lambda): writes the tally to Redis when
    /// a second has passed since the last time. Never fails the purchase.
    pub async fn flush_outcomes_if_due(&self) {
        self.outcomes.flush_if_due(&self.stock).await;
    }

    /// Writes the tally to Redis now (the local stack, at shutdown).
    pub async fn flush_outcomes(&self) {
        self.outcomes.flush(&self.stock).await;
    }

    /// Writes the tally every second from a task (the local stack, where
    /// one process serves every invocation), instead of at the end of
    /// invocations.
    pub fn spawn_outcome_flusher(&self) -> tokio::task::JoinHandle<()>
    where
        S: Clone + 'static,
    {
        crate::observe::outcomes::spawn_flusher(
            self.outcomes.clone(),
            self.stock.clone(),
            crate::observe::outcomes::FLUSH_EVERY,
        )
    }

    /// The same service counting into `metrics` (`SoldOutFastPath`,
    /// `LuaLatency`; the handler counts `Purchases` by the answer it gives).
    pub fn with_metrics(mut self, metrics: crate::observe::metrics::Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    pub fn metrics(&self) -> &crate::observe::metrics::Metrics {
        &self.metrics
    }

    /// The same service with the sale gate's key.
    pub fn with_gate(mut self, gate: crate::domain::gate::Gate) -> Self {
        self.gate = Some(gate);
        self
    }

    pub fn stock(&self) -> &S {
        &self.stock
    }

    /// How often the rate limiter failed open in this environment.
    pub fn limiter_failures(&self) -> u64 {
        self.stock.limiter_failures()
    }

    /// The same service remembering a sell-out for `flag` (zero: never).
    pub fn with_sold_out_flag(mut self, flag: std::time::Duration) -> Self {
        self.sold_out_flag = flag;
        self
    }

    /// Purchases answered `SOLD_OUT` from memory in this environment.
    pub fn sold_out_fast_path_hits(&self) -> u64 {
        self.fast_path_hits
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// When Redis said the sale is sold out, if this environment answers
    /// `SOLD_OUT` for it right now.
    fn flagged_sold_out(
        &self,
        sale_id: &SaleId,
        now: tokio::time::Instant,
    ) -> Option<tokio::time::Instant> {
        self.sold_out
            .read()
            .ok()
            .and_then(|map| map.get(sale_id.as_str()).copied())
            .and_then(|(until, armed)| (now < until).then_some(armed))
    }

    /// Whether a flagged sale's `SOLD_OUT` may be answered from memory: a
    /// keyed request only when no reservation under its key can exist (a
    /// retry of a winner must get its order again), as known from a read of
    /// the filter made after the flag was armed ([`crate::domain::keyed_filter`]).
    async fn answer_from_memory(&self, req: &PurchaseRequest, armed: tokio::time::Instant) -> bool {
        let Some(key) = &req.idempotency_key else {
            return true;
        };
        match self
            .stock
            .keyed_may_exist(&req.sale_id, &req.user_id, key, armed)
            .await
        {
            Ok(may_exist) => !may_exist,
            // Redis decides, and answers whatever it can.
            Err(err) => {
                tracing::debug!(%err, "keyed filter unreadable; asking Redis");
                false
            }
        }
    }

    fn mark_sold_out(&self, sale_id: &SaleId, until: Option<tokio::time::Instant>) {
        if let Ok(mut map) = self.sold_out.write() {
            match until {
                Some(until) => {
                    map.insert(sale_id.to_string(), (until, tokio::time::Instant::now()));
                }
                None => {
                    map.remove(sale_id.as_str());
                }
            }
        }
    }

    /// A purchase that must end in an order (callers that know the sale
    /// has no lottery window): a ticket is [`PurchaseError::TicketInstead`].
    pub async fn purchase(&self, req: &PurchaseRequest) -> Result<Accepted, PurchaseError> {
        match self.admit(req).await? {
            Admitted::Order(accepted) => Ok(accepted),
            Admitted::Ticket(_) => Err(PurchaseError::TicketInstead),
        }
    }

    /// The purchase route's use case: an order, a lottery ticket, or the
    /// refusal.
    pub async fn admit(&self, req: &PurchaseRequest) -> Result<Admitted, PurchaseError> {
        let now = tokio::time::Instant::now();
        let armed = self.flagged_sold_out(&req.sale_id, now);
        let flagged = armed.is_some();
        if let Some(armed) = armed
            && self.answer_from_memory(req, armed).await
        {
            self.fast_path_hits
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.metrics
                .count(crate::observe::metrics::Counter::SoldOutFastPath, 1);
            return Err(PurchaseError::SoldOut { remaining: 0 });
        }
        // A pass that fails verification counts as no pass: the script
        // refuses only when the sale is gated, so ungated sales ignore it.
        let pass = match (&self.gate, &req.sale_token) {
            (Some(gate), Some(token)) => gate
                .verify(&req.sale_id, &req.user_id, token, clock::now_ms())
                .map_err(|why| tracing::debug!(%why, "gate pass refused"))
                .ok(),
            _ => None,
        };
        let reserving = tokio::time::Instant::now();
        let outcome = self
            .stock
            .reserve(ReserveRequest {
                sale_id: &req.sale_id,
                user_id: &req.user_id,
                quantity: req.quantity,
                idempotency_key: req.idempotency_key.as_ref(),
                gate_nonce: pass.as_ref().map(|p| p.nonce.as_str()),
                gate_issued_ms: pass.as_ref().map(|p| p.issued_at_ms),
                source_ip: req.source_ip.as_deref(),
            })
            .await?;
        // Answered round trips only: a timeout is a `SALE_PAUSED` outcome,
        // not a latency of the script.
        self.metrics.lua_latency(reserving.elapsed());
        match (&outcome, flagged) {
            // Armed on a sold-out answer when not armed already (keyed
            // requests whose key may hold a reservation reach Redis while it
            // is: they must not take the lock and re-arm it on every call).
            (ReserveOutcome::SoldOut { remaining: 0 }, false) if !self.sold_out_flag.is_zero() => {
                self.mark_sold_out(&req.sale_id, Some(now + self.sold_out_flag));
            }
            // Redis sold a unit: stock is back, stop refusing from memory. (A
            // replay or a limit answer says nothing about the stock.)
            (ReserveOutcome::Reserved(_), true) => self.mark_sold_out(&req.sale_id, None),
            _ => {}
        }
        let accepted = match outcome {
            ReserveOutcome::Reserved(resv) => self.hand_off(req, resv, false).await,
            // Without an Idempotency-Key a replay is this very call, run a
            // second time by the Redis client after a dropped connection:
            // the first run's answer never came back, so nothing was sent
            // for it yet, and it is handed off as if reserved now.
            ReserveOutcome::Replayed { reservation, .. } if req.idempotency_key.is_none() => {
                self.hand_off(req, reservation, false).await
            }
            ReserveOutcome::Replayed {
                reservation,
                resend: true,
            } => self.hand_off(req, reservation, true).await,
            ReserveOutcome::Replayed {
                reservation,
                resend: false,
            } => Ok(Accepted {
                order_id: reservation.order_id,
                sale_id: req.sale_id.clone(),
                quantity: reservation.quantity,
                replayed: true,
            }),
            // The first answer was a 202; what became of its order is the
            // honest answer now (no order is coming for it).
            ReserveOutcome::ReplayedEnded { order_id, status } => {
                Err(PurchaseError::OrderEnded { order_id, status })
            }
            ReserveOutcome::SaleMissing => Err(self.explain_missing(&req.sale_id).await),
            ReserveOutcome::Paused => Err(PurchaseError::Paused),
            ReserveOutcome::NotStarted { start_ms } => Err(PurchaseError::NotStarted { start_ms }),
            ReserveOutcome::Ended => Err(PurchaseError::Ended),
            ReserveOutcome::GateRequired => Err(PurchaseError::GateRequired),
            ReserveOutcome::RateLimited { retry_after_ms } => {
                Err(PurchaseError::RateLimited { retry_after_ms })
            }
            ReserveOutcome::LimitExceeded { order_ids } => {
                Err(PurchaseError::LimitExceeded { order_ids })
            }
            ReserveOutcome::SoldOut { remaining } => Err(PurchaseError::SoldOut { remaining }),
            ReserveOutcome::Drawing => Err(PurchaseError::Drawing),
            ReserveOutcome::Ticket {
                quantity,
                draw_at_ms,
                ..
            } => {
                return Ok(Admitted::Ticket(Ticket {
                    sale_id: req.sale_id.clone(),
                    quantity,
                    draw_at_ms,
                }));
            }
        };
        accepted.map(Admitted::Order)
    }

    /// Sends a reservation's order and answers from what the send did. A
    /// keyed retry of an order not written yet comes here too (`replayed`):
    /// the first request may have lost its answer before it sent anything
    /// (its buyer was told 503 and retried), so a 202 must not rest on
    /// Redis alone. Its refused send finds the reservation held by the
    /// retry (`purchase.lua` marked it) and promises nothing.
    async fn hand_off(
        &self,
        req: &PurchaseRequest,
        resv: Reservation,
        replayed: bool,
    ) -> Result<Accepted, PurchaseError> {
        let message = order_message(req, &resv);
        let accepted = Accepted {
            order_id: resv.order_id.clone(),
            sale_id: req.sale_id.clone(),
            quantity: resv.quantity,
            replayed,
        };
        match self.queue.send(&message).await {
            Ok(()) => Ok(accepted),
            Err(SendError::Ambiguous(why)) => {
                // The message may be on the queue. Giving the stock back now
                // could sell it twice; the reservation stays and reconcile
                // relays it if no order appears. The buyer's 202 is honest.
                tracing::warn!(order_id = %resv.order_id, %why, "send outcome unknown; reservation kept for relay");
                Ok(accepted)
            }
            Err(SendError::Rejected(why)) => {
                match self.stock.release(&req.sale_id, &resv.order_id).await {
                    Ok(ReleaseOutcome::Released { .. }) | Ok(ReleaseOutcome::NotFound) => {
                        tracing::warn!(order_id = %resv.order_id, %why, "queue rejected the order; reservation released");
                        Err(PurchaseError::QueueRejected)
                    }
                    Ok(ReleaseOutcome::NotReleasable) => {
                        // The reservation moved on: a retry or reconcile
                        // relayed it and its order was written.
                        Ok(accepted)
                    }
                    Ok(ReleaseOutcome::HeldByRetry) => {
                        // A keyed retry holds it: its own send (or the
                        // next retry's, or reconcile's relay) is what may
                        // make the order; this send made nothing, so no
                        // 202 rests on it.
                        tracing::warn!(order_id = %resv.order_id, %why, "queue rejected the order; a keyed retry holds its reservation");
                        Err(PurchaseError::ResendRefused)
                    }
                    Ok(ReleaseOutcome::SaleMissing) => {
                        // The keys, and the reservation with them, are gone:
                        // nothing will make this order, so no 202.
                        tracing::error!(order_id = %resv.order_id, %why, "queue rejected and the sale's keys are gone");
                        Err(PurchaseError::KeysMissing)
                    }
                    Err(err) => {
                        // The release may have gone through (a timeout after
                        // it was sent): then no order is coming, and a 202
                        // would promise one. The reservation, if it is still
                        // there, is reconcile's to relay; a keyed retry
                        // finds it.
                        tracing::error!(order_id = %resv.order_id, %err, %why, "queue rejected and the release's outcome is unknown");
                        Err(PurchaseError::Store(err))
                    }
                }
            }
        }
    }

    async fn explain_missing(&self, sale_id: &SaleId) -> PurchaseError {
        match self.catalog.get_sale(sale_id).await {
            Ok(None) => PurchaseError::NotFound,
            Ok(Some(sale)) => match sale.phase_at(clock::now_ms()) {
                SalePhase::NotStarted => PurchaseError::NotStarted {
                    start_ms: sale.start_ms,
                },
                SalePhase::Ended => PurchaseError::Ended,
                SalePhase::Live => {
                    tracing::error!(%sale_id, "live sale missing from the stock store; paused until rebuilt");
                    self.ask_rebuild(sale_id);
                    PurchaseError::KeysMissing
                }
            },
            Err(err) => PurchaseError::Catalog(err),
        }
    }
}

impl<S, Q, C> PurchaseService<S, Q, C>
where
    S: StockStore + DrawStore,
    Q: OrderQueue,
    C: SaleCatalog,
{
    /// The purchase route: [`Self::admit`]; when the sale's lottery window
    /// has closed and its draw is not done (`DRAWING`), this purchase runs
    /// part of the draw ([`crate::app::draw::drive`]) and asks again, once:
    /// the first buyers after the window run the draw.
    pub async fn admit_or_draw(&self, req: &PurchaseRequest) -> Result<Admitted, PurchaseError> {
        match self.admit(req).await {
            Err(PurchaseError::Drawing) => {}
            other => return other,
        }
        if crate::app::draw::drive(&self.stock, &self.queue, &req.sale_id).await {
            self.admit(req).await
        } else {
            Err(PurchaseError::Drawing)
        }
    }
}

/// The queue message of a reservation.
fn order_message(req: &PurchaseRequest, resv: &Reservation) -> OrderMessage {
    OrderMessage {
        v: OrderMessage::VERSION,
        order_id: resv.order_id.clone(),
        sale_id: req.sale_id.clone(),
        user_id: req.user_id.clone(),
        quantity: resv.quantity,
        shard: resv.shard,
        reserved_at: clock::rfc3339_ms(resv.reserved_at_ms),
    }
}

#[cfg(test)]
mod tests;
