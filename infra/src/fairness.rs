//! The fairness figure of the opening second: who gets the units
//! when scripts fire within milliseconds of the start and people arrive
//! over the first seconds, first come first served against a lottery window.
//!
//! One [`run`] is one [`Scenario`] in one [`Mode`] against the Redis at
//! `REDIS_URL`, through the real purchase path in-process: a sale of
//! [`Scenario::units`] loaded into Redis as prewarm loads it, and every
//! buyer's purchase made by [`PurchaseService::admit_or_draw`] over a
//! [`RedisStock`] (the real scripts, the default rate limits, the sold-out
//! flag). No HTTP and no gate: the figure is the admission rule's, not the
//! edge's. The queue only counts ([`CountingQueue`]), so the emulator is
//! never the bottleneck.
//!
//! - Buyers: [`Scenario::scripts`] scripted buyers fire at the start plus
//!   uniform(0, [`Scenario::script_spread`]) and retry a `425` or `503
//!   DRAWING` after [`Scenario::script_retry`]; [`Scenario::people`] people
//!   arrive uniformly over [`Scenario::people_spread`] and retry those after
//!   the `Retry-After` the API gives (1 s for `DRAWING`). Each is a user of
//!   their own buying one unit; a ticket holder does not buy again (the
//!   ticket tells the result). Arrival times come from a seeded generator
//!   ([`XorShift`]), so a run is repeatable apart from timing.
//! - The draw: run by the purchases after the window, and by the ticket
//!   holders' polls of their ticket from the window's close
//!   ([`holders_poll`]: [`draw::drive`], as the orders route runs it).
//! - Figures ([`Figures`]): units won by people and by scripts from Redis's
//!   reservations; people's share of the ticket holders (first come first
//!   served: of every buyer, all of whom arrived in the window's span); the
//!   peak purchase calls per second Redis executed ([`sample_evalsha`]); the
//!   time from the start to the sell-out by Redis's clock.
//! - [`mod@check`] (`fairness/check.rs`): what Redis holds after every run and
//!   the invariants over it; a broken one fails the run
//!   ([`FairnessError::Invariants`]).

use seckill_shared::adapters::memory::MemoryCatalog;
use seckill_shared::adapters::redis::RedisStock;
use seckill_shared::app::draw;
use seckill_shared::app::purchase::{Admitted, PurchaseError, PurchaseRequest, PurchaseService};
use seckill_shared::clock;
use seckill_shared::domain::draw::{DrawSeed, SeedError};
use seckill_shared::domain::{
    Admission, InvalidValue, OrderId, OrderMessage, Quantity, Sale, SaleId, UserId,
};
use seckill_shared::ports::StockLoading;
use seckill_shared::ports::{OrderQueue, SendError, StoreError};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::time::sleep_until;

mod check;
pub use check::{Held, Seen, TicketSeen, check, read_sale};

/// Generous, as the bench's other rows: a timeout would be a refusal the
/// admission rule did not make.
const REDIS_TIMEOUT: Duration = Duration::from_secs(5);
/// How often Redis's script-call counter is read.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// A buyer still without a final answer this long after arriving is a
/// stuck run, not a slow one.
const GIVE_UP_AFTER: Duration = Duration::from_secs(60);
/// The most time between two ticket holders' polls after the window (see
/// [`holders_poll`]).
const POLL_GAP: Duration = Duration::from_millis(1);
/// The target: with the window, people's share of units within this
/// many points of their share of the tickets.
pub const TARGET_POINTS: f64 = 5.0;

/// Who arrives when, for how many units.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub units: u32,
    pub scripts: u32,
    pub people: u32,
    /// How long before the start the sale is loaded and the run begins.
    pub lead: Duration,
    /// Scripts fire at the start plus uniform(0, this).
    pub script_spread: Duration,
    /// A script's wait before it asks again after a `425` or a `DRAWING`.
    pub script_retry: Duration,
    /// People arrive at the start plus uniform(0, this).
    pub people_spread: Duration,
    /// The arrival times' generator seed.
    pub seed: u64,
}

impl Default for Scenario {
    /// The issue's: 1,000 units, 2,000 scripts within 5 ms, 20,000 people
    /// over 3 s.
    fn default() -> Self {
        Self {
            units: 1_000,
            scripts: 2_000,
            people: 20_000,
            lead: Duration::from_secs(2),
            script_spread: Duration::from_millis(5),
            script_retry: Duration::from_millis(50),
            people_spread: Duration::from_secs(3),
            seed: 19,
        }
    }
}

/// The admission rule of the run's sale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// First come, first served (no window).
    Fcfs,
    /// A lottery window of this many seconds.
    Window(u32),
}

impl Mode {
    pub fn label(self) -> String {
        match self {
            Mode::Fcfs => "FCFS".into(),
            Mode::Window(w) => format!("window {w} s"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FairnessError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("invalid value: {0}")]
    Invalid(#[from] InvalidValue),
    #[error("draw seed: {0}")]
    Seed(#[from] SeedError),
    #[error("a buyer task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error("{mode}: {} invariant(s) broken: {}", .broken.len(), .broken.join("; "))]
    Invariants { mode: String, broken: Vec<String> },
    #[error("{0}")]
    Run(String),
}

/// How the buyers were answered, finally and on the way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answers {
    pub orders: u64,
    pub tickets: u64,
    pub sold_out: u64,
    /// `425`, `DRAWING` and `429` answers that were retried.
    pub retried: u64,
    /// Anything else (a timeout, a pause): the run fails on any.
    pub other: Vec<String>,
}

/// What one run measured.
#[derive(Debug, Clone)]
pub struct Figures {
    pub mode: Mode,
    pub units: u32,
    pub people_units: u64,
    pub script_units: u64,
    /// Ticket holders (first come first served: every buyer, as all of
    /// them arrived within the people's span).
    pub people_in: u64,
    pub scripts_in: u64,
    /// The most purchase calls per second Redis executed, over any
    /// [`SAMPLE_EVERY`].
    pub peak_per_sec: f64,
    /// From the start to the last unit taken, by Redis's clock.
    pub sold_out_after_ms: i64,
    /// With a window: from its close to the draw's end.
    pub draw_ms: Option<u64>,
    pub answers: Answers,
}

impl Figures {
    /// People's share of the units, in percent.
    pub fn people_share_units(&self) -> f64 {
        percent(self.people_units, u64::from(self.units))
    }

    /// People's share of the buyers in the draw (first come first served:
    /// of every buyer), in percent.
    pub fn people_share_in(&self) -> f64 {
        percent(self.people_in, self.people_in + self.scripts_in)
    }

    /// Share of units minus share of the buyers in, in points.
    pub fn gap_points(&self) -> f64 {
        self.people_share_units() - self.people_share_in()
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// xorshift64*: arrival times that repeat from a seed, without a
/// dependency for it (statistical quality far beyond a uniform spread of
/// arrivals).
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> Self {
        // One splitmix64 step, so near seeds start far apart; zero is the
        // one state xorshift never leaves.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Self((z ^ (z >> 31)).max(1))
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A queue that keeps the order ids it was sent (the messages themselves
/// are not needed): every reservation must have had its message.
#[derive(Clone, Default)]
pub struct CountingQueue {
    sent: Arc<Mutex<Vec<String>>>,
}

impl CountingQueue {
    pub fn sent(&self) -> Vec<String> {
        self.sent.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl OrderQueue for CountingQueue {
    async fn send(&self, message: &OrderMessage) -> Result<(), SendError> {
        if let Ok(mut sent) = self.sent.lock() {
            sent.push(message.order_id.as_str().to_owned());
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Script,
    Person,
}

/// A buyer's user id says who they are: `s…` a script, `p…` a person.
fn kind_of(user: &str) -> Kind {
    if user.starts_with('s') {
        Kind::Script
    } else {
        Kind::Person
    }
}

/// A buyer's last answer.
enum Final {
    Order(OrderId),
    Ticket,
    SoldOut,
    Other(String),
}

type Service = PurchaseService<RedisStock, CountingQueue, MemoryCatalog>;

/// Runs `scenario` in `mode` on a sale of its own (`sale` names it) and
/// checks the invariants after it.
pub async fn run(
    redis_url: &str,
    sale: &str,
    scenario: &Scenario,
    mode: Mode,
) -> Result<Figures, FairnessError> {
    let start_ms = clock::now_ms() + i64::try_from(scenario.lead.as_millis()).unwrap_or(2_000);
    let sale = Sale {
        admission: match mode {
            Mode::Fcfs => None,
            Mode::Window(window_secs) => Some(Admission {
                window_secs,
                seed: DrawSeed::generate()?,
            }),
        },
        ..Sale::plain(
            SaleId::parse(sale)?,
            format!("fairness {}", mode.label()),
            scenario.units,
            1,
            start_ms,
            start_ms + 3_600_000,
        )
    };
    let stock = RedisStock::connect_lazy(redis_url, REDIS_TIMEOUT)?;
    let queue = CountingQueue::default();
    let catalog = MemoryCatalog::default();
    catalog.insert(sale.clone());
    let service = Arc::new(PurchaseService::new(stock.clone(), queue.clone(), catalog));
    // Loading also opens the connection, so the first buyer does not pay it.
    service.stock().load_sale(&sale, clock::now_ms()).await?;

    // The Instant of the start, by this process's clock (the same machine's
    // as Redis's).
    let lead_ms = u64::try_from(start_ms - clock::now_ms()).unwrap_or(0);
    let start = Instant::now() + Duration::from_millis(lead_ms);
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn(sample_evalsha(
        redis::Client::open(redis_url)?,
        start
            .checked_sub(Duration::from_millis(300))
            .unwrap_or(start),
        stop.clone(),
    ));
    let polls = match mode {
        Mode::Fcfs => None,
        Mode::Window(w) => Some(tokio::spawn(holders_poll(
            stock.clone(),
            queue.clone(),
            sale.sale_id.clone(),
            start + Duration::from_secs(u64::from(w)),
        ))),
    };

    let mut rng = XorShift::new(scenario.seed);
    let mut buyers = Vec::with_capacity((scenario.scripts + scenario.people) as usize);
    for n in 0..scenario.scripts {
        let at = start + scenario.script_spread.mul_f64(rng.unit());
        buyers.push(tokio::spawn(buy(
            service.clone(),
            sale.sale_id.clone(),
            UserId::parse(&format!("s{n}"))?,
            at,
            Some(scenario.script_retry),
        )));
    }
    for n in 0..scenario.people {
        let at = start + scenario.people_spread.mul_f64(rng.unit());
        buyers.push(tokio::spawn(buy(
            service.clone(),
            sale.sale_id.clone(),
            UserId::parse(&format!("p{n}"))?,
            at,
            None,
        )));
    }
    let mut answers = Answers::default();
    let mut accepted = HashSet::new();
    for buyer in buyers {
        let (last, retried) = buyer.await?;
        answers.retried += retried;
        match last {
            Final::Order(order_id) => {
                answers.orders += 1;
                accepted.insert(order_id.as_str().to_owned());
            }
            Final::Ticket => answers.tickets += 1,
            Final::SoldOut => answers.sold_out += 1,
            Final::Other(why) => answers.other.push(why),
        }
    }
    let draw_ms = match polls {
        Some(task) => Some(task.await??),
        None => None,
    };
    stop.store(true, Ordering::Relaxed);
    let peak_per_sec = sampler.await??;

    let seen = read_sale(redis_url, &sale.sale_id).await?;
    let broken = check(&sale, mode, &seen, &accepted, &queue.sent(), &answers);
    if !broken.is_empty() {
        return Err(FairnessError::Invariants {
            mode: mode.label(),
            broken,
        });
    }
    let count = |kind: Kind, users: &mut dyn Iterator<Item = &String>| {
        users.filter(|u| kind_of(u) == kind).count() as u64
    };
    let (people_in, scripts_in) = match mode {
        Mode::Fcfs => (u64::from(scenario.people), u64::from(scenario.scripts)),
        Mode::Window(_) => (
            count(Kind::Person, &mut seen.tickets.keys()),
            count(Kind::Script, &mut seen.tickets.keys()),
        ),
    };
    Ok(Figures {
        mode,
        units: scenario.units,
        people_units: count(Kind::Person, &mut seen.resv.values().map(|r| &r.user)),
        script_units: count(Kind::Script, &mut seen.resv.values().map(|r| &r.user)),
        people_in,
        scripts_in,
        peak_per_sec,
        sold_out_after_ms: seen.sold_out_at_ms.map_or(-1, |at| at - start_ms),
        draw_ms,
        answers,
    })
}

/// One buyer: waits for their moment, then asks until the answer is final.
/// `script_retry`: a script's fixed wait; a person waits the `Retry-After`
/// the API would send. Returns the last answer and how many were retried.
async fn buy(
    service: Arc<Service>,
    sale_id: SaleId,
    user_id: UserId,
    at: Instant,
    script_retry: Option<Duration>,
) -> (Final, u64) {
    sleep_until(at.into()).await;
    let req = PurchaseRequest {
        sale_id,
        user_id,
        quantity: Quantity::ONE,
        idempotency_key: None,
        source_ip: None,
        sale_token: None,
    };
    let mut retried = 0;
    loop {
        let wait = match service.admit_or_draw(&req).await {
            Ok(Admitted::Order(accepted)) => return (Final::Order(accepted.order_id), retried),
            Ok(Admitted::Ticket(_)) => return (Final::Ticket, retried),
            Err(PurchaseError::SoldOut { .. }) => return (Final::SoldOut, retried),
            Err(PurchaseError::Drawing) => Duration::from_secs(1),
            Err(PurchaseError::NotStarted { start_ms }) => {
                // The API's Retry-After: whole seconds, at least one.
                let ms = (start_ms - clock::now_ms()).max(0);
                Duration::from_secs(u64::try_from((ms + 999) / 1000).unwrap_or(1).max(1))
            }
            Err(PurchaseError::RateLimited { retry_after_ms }) => {
                Duration::from_millis(retry_after_ms.max(1))
            }
            Err(other) => return (Final::Other(format!("{}: {other}", req.user_id)), retried),
        };
        retried += 1;
        if at.elapsed() > GIVE_UP_AFTER {
            return (
                Final::Other(format!("{}: no final answer in 60 s", req.user_id)),
                retried,
            );
        }
        tokio::time::sleep(script_retry.unwrap_or(wait)).await;
    }
}

/// The ticket holders' polls from the window's close: each poll of
/// `GET /sales/{id}/orders` runs a bounded part of a due draw
/// ([`draw::drive`], as the orders route does), and with thousands of
/// holders polling about once a second the next poll is never more than
/// [`POLL_GAP`] away. With W = 3 every buyer arrives inside the window, so
/// no purchase comes after it to run the draw; with W = 1 the purchases
/// after it race these polls (the draw's lock and compare-and-set keep it
/// exact). Returns how long the draw took.
async fn holders_poll(
    stock: RedisStock,
    queue: CountingQueue,
    sale_id: SaleId,
    window_end: Instant,
) -> Result<u64, FairnessError> {
    sleep_until(window_end.into()).await;
    let began = Instant::now();
    while !draw::drive(&stock, &queue, &sale_id).await {
        if began.elapsed() > GIVE_UP_AFTER {
            return Err(FairnessError::Run("the draw did not end in 60 s".into()));
        }
        tokio::time::sleep(POLL_GAP).await;
    }
    Ok(u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX))
}

/// The most `EVALSHA` calls per second Redis executed over any
/// [`SAMPLE_EVERY`] from `from` until `stop`: `INFO commandstats` read on a
/// connection of its own. Redis's count, not the buyers': a client-side
/// count says when this one process sent or heard back, after its own
/// scheduling and the multiplexed connection's queue; Redis's says what the
/// server executed in each interval, the load a deployed Redis carries
/// whatever the number of environments (and a call answered from an
/// environment's sold-out flag never reaches it, rightly). Every purchase is
/// one `EVALSHA`; the draw's chunks are too (one per 100 tickets), a few.
pub async fn sample_evalsha(
    client: redis::Client,
    from: Instant,
    stop: Arc<AtomicBool>,
) -> Result<f64, FairnessError> {
    let mut conn = client.get_multiplexed_async_connection().await?;
    sleep_until(from.into()).await;
    let mut ticks = tokio::time::interval(SAMPLE_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last: Option<(Instant, u64)> = None;
    let mut peak = 0.0f64;
    while !stop.load(Ordering::Relaxed) {
        ticks.tick().await;
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut conn)
            .await?;
        let now = Instant::now();
        let calls = evalsha_calls(&info);
        if let Some((then, before)) = last {
            // Per the interval actually elapsed (a sample taken late
            // covers more than 100 ms).
            let secs = now.duration_since(then).as_secs_f64();
            if secs > 0.0 {
                peak = peak.max(calls.saturating_sub(before) as f64 / secs);
            }
        }
        last = Some((now, calls));
    }
    Ok(peak)
}

/// `cmdstat_evalsha:calls=N,...` of `INFO commandstats`; 0 before the first.
pub fn evalsha_calls(info: &str) -> u64 {
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xorshift_repeats_from_its_seed_and_spreads_over_the_unit_interval() {
        let (mut a, mut b) = (XorShift::new(7), XorShift::new(7));
        let draws: Vec<f64> = (0..10_000).map(|_| a.unit()).collect();
        assert!(draws.iter().all(|&x| x == b.unit()));
        assert!(draws.iter().all(|x| (0.0..1.0).contains(x)));
        // Ten equal bins of 10,000 draws: each within 10% of 1,000.
        let mut bins = [0u32; 10];
        for x in &draws {
            bins[(x * 10.0) as usize] += 1;
        }
        assert!(bins.iter().all(|&n| (900..=1_100).contains(&n)), "{bins:?}");
        assert_ne!(XorShift::new(0).unit(), XorShift::new(1).unit());
    }

    #[test]
    fn evalsha_calls_are_read_from_commandstats() {
        let info = "# Commandstats\r\ncmdstat_get:calls=3,usec=1\r\ncmdstat_evalsha:calls=1234,usec=99,usec_per_call=0.1\r\n";
        assert_eq!(evalsha_calls(info), 1234);
        assert_eq!(evalsha_calls("# Commandstats\r\n"), 0);
    }
}
