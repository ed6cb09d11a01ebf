//! The buyers: concurrent purchases through the real service, each
//! answer kept with its phase.

use super::*;

/// What one purchase got.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    pub(crate) phase: &'static str,
    pub(crate) user: String,
    pub(crate) status: u16,
    pub(crate) code: String,
    pub(crate) order_id: Option<String>,
    pub(crate) millis: u128,
}

pub(crate) type Call =
    Arc<dyn Fn(Request) -> Pin<Box<dyn Future<Output = Reply> + Send>> + Send + Sync>;

/// Concurrent buyers, each a new user buying once, with every answer kept;
/// or, with a pool, every other buyer one of a few repeat buyers.
pub(crate) struct Buyers {
    pub(crate) sale: String,
    pub(crate) call: Call,
    /// `Some(n)`: odd-numbered buyers are `p0`..`p{n-1}` in turn (each comes
    /// back and tries again, past their limit); even-numbered ones new.
    pub(crate) pool: Option<usize>,
    pub(crate) next: AtomicUsize,
    pub(crate) tried: AtomicUsize,
    pub(crate) phase: Mutex<&'static str>,
    pub(crate) outcomes: Mutex<Vec<Outcome>>,
    pub(crate) sold_out: AtomicBool,
    /// From this many answered on, no buyer starts until [`Self::release`]
    /// (`usize::MAX`: never): a fault lands after exactly so many, however
    /// fast the stack answers (a polling wait, when SQS answered in
    /// microseconds, saw the whole batch sell out before the fault).
    pub(crate) hold_at: AtomicUsize,
    pub(crate) released: tokio::sync::Notify,
}

impl Buyers {
    pub(crate) fn new(sale: &str, call: Call) -> Arc<Buyers> {
        Self::build(sale, call, None)
    }

    /// Half new buyers, half a pool of `pool` repeat buyers.
    pub(crate) fn with_pool(sale: &str, call: Call, pool: usize) -> Arc<Buyers> {
        Self::build(sale, call, Some(pool))
    }

    pub(crate) fn build(sale: &str, call: Call, pool: Option<usize>) -> Arc<Buyers> {
        Arc::new(Buyers {
            sale: sale.into(),
            call,
            pool,
            next: AtomicUsize::new(0),
            tried: AtomicUsize::new(0),
            phase: Mutex::new("before"),
            outcomes: Mutex::new(Vec::new()),
            sold_out: AtomicBool::new(false),
            hold_at: AtomicUsize::new(usize::MAX),
            released: tokio::sync::Notify::new(),
        })
    }

    /// Buyers stop starting once `n` more than now have been answered.
    pub(crate) fn hold_after(&self, n: usize) {
        self.hold_at
            .store(self.tried.load(Ordering::SeqCst) + n, Ordering::SeqCst);
    }

    /// Waits until the hold is reached (those started before it may still
    /// be in flight).
    pub(crate) async fn until_held(&self) {
        let reached = eventually(Duration::from_secs(60), || async {
            self.tried.load(Ordering::SeqCst) >= self.hold_at.load(Ordering::SeqCst)
        })
        .await;
        assert!(reached, "buyers stalled");
    }

    pub(crate) fn release(&self) {
        self.hold_at.store(usize::MAX, Ordering::SeqCst);
        self.released.notify_waiters();
    }

    pub(crate) fn service(service: Arc<LivePurchase>) -> Call {
        Arc::new(move |req| {
            let service = service.clone();
            Box::pin(
                async move { Reply::from(purchase::handler::handle(&service, req).await.unwrap()) },
            )
        })
    }

    pub(crate) fn set_phase(&self, phase: &'static str) {
        *self.phase.lock().unwrap() = phase;
    }

    /// `count` more buyers, `concurrency` at a time.
    pub(crate) async fn run(self: &Arc<Self>, count: usize, concurrency: usize) {
        let end = self.next.load(Ordering::SeqCst) + count;
        let workers: Vec<_> = (0..concurrency)
            .map(|_| {
                let me = self.clone();
                tokio::spawn(async move {
                    loop {
                        loop {
                            let released = me.released.notified();
                            if me.tried.load(Ordering::SeqCst) < me.hold_at.load(Ordering::SeqCst) {
                                break;
                            }
                            released.await;
                        }
                        let n = me.next.fetch_add(1, Ordering::SeqCst);
                        if n >= end {
                            return;
                        }
                        me.buy_once(n).await;
                    }
                })
            })
            .collect();
        for w in workers {
            w.await.unwrap();
        }
        // Workers overshoot `next` by one each when they stop.
        self.next.store(end, Ordering::SeqCst);
    }

    pub(crate) async fn buy_once(&self, n: usize) {
        let phase = *self.phase.lock().unwrap();
        let user = match self.pool {
            Some(pool) if n % 2 == 1 => format!("p{}", (n / 2) % pool),
            _ => format!("b{n}"),
        };
        let ip = format!("10.9.{}.{}", (n / 250) % 250, n % 250 + 1);
        let started = Instant::now();
        let reply = (self.call)(purchase_event_from(&self.sale, &user, &ip)).await;
        let millis = started.elapsed().as_millis();
        self.tried.fetch_add(1, Ordering::SeqCst);
        if reply.code() == "SOLD_OUT" {
            self.sold_out.store(true, Ordering::SeqCst);
        }
        self.outcomes.lock().unwrap().push(Outcome {
            phase,
            user,
            status: reply.status,
            code: reply.code().to_owned(),
            order_id: reply.body["orderId"].as_str().map(str::to_owned),
            millis,
        });
    }

    /// Batches of buyers until one is told `SOLD_OUT` (bounded).
    pub(crate) async fn until_sold_out(self: &Arc<Self>, concurrency: usize, most: usize) {
        let start = self.tried.load(Ordering::SeqCst);
        while !self.sold_out.load(Ordering::SeqCst) {
            assert!(
                self.tried.load(Ordering::SeqCst) - start < most,
                "not sold out after {most} more buyers: {:?}",
                self.tally()
            );
            self.run(concurrency * 2, concurrency).await;
        }
    }

    pub(crate) fn outcomes(&self) -> Vec<Outcome> {
        self.outcomes.lock().unwrap().clone()
    }

    pub(crate) fn accepted(&self) -> Vec<OrderId> {
        self.outcomes()
            .iter()
            .filter(|o| o.status == 202)
            .map(|o| OrderId::parse(o.order_id.as_deref().unwrap()).unwrap())
            .collect()
    }

    /// Answers by phase and code.
    pub(crate) fn tally(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for o in self.outcomes() {
            let code = if o.status == 202 { "ACCEPTED" } else { &o.code };
            *out.entry(format!("{}:{code}", o.phase)).or_default() += 1;
        }
        out
    }

    pub(crate) fn slowest(&self, phase: &str) -> u128 {
        self.outcomes()
            .iter()
            .filter(|o| o.phase == phase)
            .map(|o| o.millis)
            .max()
            .unwrap_or(0)
    }
}
