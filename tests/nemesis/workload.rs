//! The mixed workload, over the local stack's HTTP API as buyers and an
//! operator use it: buyers buy (with and without an `Idempotency-Key`),
//! retry with the same key, buy again without one, then pay on time, pay
//! late, or abandon; the operator creates sales, pauses and resumes them,
//! ends one now, edits them (and tries an edit the API must refuse), and
//! redrives the DLQ. Every answer is kept: for the figures, and for the
//! promises checked against the ledger at the end ([`Workload::promises`]).

use super::rng::Rng;
use seckill_infra::token::TokenSettings;
use seckill_shared::clock;
use seckill_shared::domain::orders::{Order, OrderStatus};
use seckill_tests::{http_request, unique};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// Buyers sending at once.
const BUYERS: u64 = 6;
/// Distinct buyers (each sale's per-user limit bites among them).
const USERS: u64 = 240;
/// No request waits longer than this: a request the stack never answers
/// counts as unanswered (status 0) instead of holding the run.
const REQUEST_BOUND: Duration = Duration::from_secs(30);

/// Waits `d` for the run to stop; whether it goes on.
pub async fn nap(stop: &mut watch::Receiver<bool>, d: Duration) -> bool {
    if *stop.borrow() {
        return false;
    }
    // Waits for the stop, at most `d` (a buyer's pause between steps).
    match tokio::time::timeout(d, stop.changed()).await {
        Err(_paused_enough) => !*stop.borrow(),
        Ok(_) => false,
    }
}

/// The API as the pages call it, with local tokens.
#[derive(Clone)]
pub struct Api {
    addr: SocketAddr,
    tokens: TokenSettings,
}

/// One answer, with when it was asked and answered (the stack's clock).
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub sent_ms: i64,
    pub answered_ms: i64,
}

impl Answer {
    /// The API's error code; `OK` for a `2xx`, `NO_ANSWER` for none, the
    /// status for an error without a code (a gateway's own).
    pub fn code(&self) -> String {
        match (self.status, self.body["code"].as_str()) {
            (0, _) => "NO_ANSWER".into(),
            (200..=299, _) => "OK".into(),
            (_, Some(code)) => code.into(),
            (status, None) => format!("HTTP_{status}"),
        }
    }
}

impl Api {
    pub fn new(addr: SocketAddr) -> Api {
        Api {
            addr,
            tokens: TokenSettings::from_env(),
        }
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        caller: &str,
        admin: bool,
        extra: &[(&str, &str)],
        body: &str,
    ) -> Answer {
        // A token per request: the run outlives any one token.
        let bearer = format!("Bearer {}", self.tokens.mint(caller, admin, 600).unwrap());
        let mut headers = vec![
            ("authorization", bearer.as_str()),
            ("content-type", "application/json"),
        ];
        headers.extend_from_slice(extra);
        let sent_ms = clock::now_ms();
        let (status, body) = match tokio::time::timeout(
            REQUEST_BOUND,
            http_request(self.addr, method, path, &headers, body),
        )
        .await
        {
            Ok((status, _, body)) => (status, body),
            Err(_) => (0, Value::Null),
        };
        Answer {
            status,
            body,
            sent_ms,
            answered_ms: clock::now_ms(),
        }
    }

    pub async fn admin(&self, method: &str, path: &str, body: &str) -> Answer {
        self.send(method, path, "ops-nemesis", true, &[], body)
            .await
    }

    async fn buyer(
        &self,
        method: &str,
        path: &str,
        user: &str,
        extra: &[(&str, &str)],
        body: &str,
    ) -> Answer {
        self.send(method, path, user, false, extra, body).await
    }
}

/// A sale as the operator defined it, and what the operator was told.
#[derive(Debug, Clone)]
pub struct SaleModel {
    pub id: String,
    pub name: String,
    pub total: u32,
    pub limit: u32,
    pub start_ms: i64,
    pub end_ms: i64,
    pub window_secs: u32,
    /// `Some(paused)` as last acknowledged; `None` after a command that
    /// never got its `200` (the table may say either).
    pub paused: Option<bool>,
    /// Since an acknowledged end.
    pub ended_at_ms: Option<i64>,
    /// From a pause's `200` to the first send of its resume: nothing may
    /// be sold in between.
    pub paused_windows: Vec<(i64, i64)>,
}

impl SaleModel {
    fn definition(&self) -> Value {
        json!({
            "name": self.name,
            "totalStock": self.total,
            "startAt": clock::rfc3339_ms(self.start_ms),
            "endAt": clock::rfc3339_ms(self.end_ms),
            "perUserLimit": self.limit,
            "paymentWindowSeconds": self.window_secs,
        })
    }

    pub fn open_at(&self, now_ms: i64) -> bool {
        self.ended_at_ms.is_none() && now_ms < self.end_ms
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BuyKind {
    /// A purchase without a key.
    New,
    /// A purchase with a fresh `Idempotency-Key`.
    Keyed,
    /// The same request again, same key (a retry after a lost answer).
    KeyedRetry,
    /// The same buyer and sale again, without a key (a second click).
    Again,
}

#[derive(Debug, Clone)]
pub struct Purchase {
    pub sale: String,
    pub user: String,
    pub kind: BuyKind,
    pub key: Option<String>,
    pub quantity: u32,
    pub answer: Answer,
    pub order_id: Option<String>,
    /// For a keyed retry: the order the first request was given, if any.
    pub first_order: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fate {
    OnTime,
    Late,
    Abandoned,
}

#[derive(Debug, Clone)]
pub struct Payment {
    pub order: String,
    pub fate: Fate,
    pub expires_ms: i64,
    pub answer: Answer,
}

/// Everything the workload saw.
#[derive(Debug, Default)]
pub struct Log {
    pub sales: Vec<SaleModel>,
    pub purchases: Vec<Purchase>,
    /// Keyed purchases that may be retried: index into `purchases`.
    keyed: Vec<usize>,
    /// (sale, user) of each `202`, for a second click.
    bought: Vec<(String, String)>,
    /// Orders with a buyer following them (two keyed requests answered
    /// with one order are one buyer).
    following: std::collections::HashSet<String>,
    pub payments: Vec<Payment>,
    /// Orders followed after their `202`, by fate and by what the buyer
    /// saw last (`PENDING_PAYMENT`, `REJECTED`, ..., or `CUT` when the run
    /// stopped first).
    pub followed: BTreeMap<(Fate, String), u32>,
    /// Operator commands: (command, answer code) → count.
    pub commands: BTreeMap<(String, String), u32>,
    pub dlq_redriven: u64,
}

/// When Redis went back in time (a failover to a replica that had not
/// got the last writes, a restart from an older snapshot) and when
/// prewarm ran: an operator's command whose Redis step was in the writes
/// lost is not in Redis until the next prewarm writes the table's
/// definition back (docs/design.md "Failure semantics").
#[derive(Debug, Default)]
pub struct BackInTime {
    /// The writes lost: from the first to the last moment (epoch ms).
    pub lost: Vec<(i64, i64)>,
    /// Prewarm runs that succeeded: start and end (epoch ms).
    pub prewarms: Vec<(i64, i64)>,
}

impl BackInTime {
    /// A command acknowledged at `command_ms` inside a loss, and a purchase
    /// sent at `sent_ms` before the first prewarm run that started after
    /// that loss had ended.
    pub fn excuses(&self, command_ms: i64, sent_ms: i64) -> bool {
        self.lost.iter().any(|&(from, until)| {
            let healed = self
                .prewarms
                .iter()
                .filter(|(start, _)| *start >= until)
                .map(|(_, end)| *end)
                .min();
            from <= command_ms && command_ms <= until && healed.is_none_or(|h| sent_ms < h)
        })
    }
}

pub struct Workload {
    api: Api,
    seed: u64,
    max_sales: usize,
    pub log: Mutex<Log>,
    followers: Mutex<tokio::task::JoinSet<()>>,
    /// When the run started: the operator's commands are printed on the
    /// faults' time line, so a broken promise can be read against both.
    started: std::time::Instant,
}

fn user(rng: &mut Rng) -> String {
    // Real `sub`s of several identity providers: opaque, not key-safe.
    let n = rng.range(0, USERS - 1);
    match n % 3 {
        0 => format!("auth0|nemesis{n}"),
        1 => format!("buyer{n}@example.com"),
        _ => format!("0b5e{n:04}-7a1c-4d2e-9f00-00000000{n:04}"),
    }
}

impl Workload {
    pub fn new(api: Api, seed: u64, run: Duration) -> Arc<Workload> {
        Arc::new(Workload {
            api,
            seed,
            max_sales: 2 + usize::try_from(run.as_secs() / 40).unwrap_or(0),
            log: Mutex::default(),
            followers: Mutex::default(),
            started: std::time::Instant::now(),
        })
    }

    pub fn api(&self) -> &Api {
        &self.api
    }

    /// The operator and the buyers, until `stop` says so.
    pub fn start(self: &Arc<Self>, stop: &watch::Receiver<bool>) -> tokio::task::JoinSet<()> {
        let mut actors = tokio::task::JoinSet::new();
        actors.spawn(self.clone().operator(stop.clone()));
        for n in 0..BUYERS {
            actors.spawn(self.clone().buyer(n, stop.clone()));
        }
        actors
    }

    /// Stops following orders (the payments not made by now are not).
    pub async fn stop_followers(&self) {
        let mut followers = std::mem::take(&mut *self.followers.lock().unwrap());
        while let Some(done) = followers.join_next().await {
            done.unwrap();
        }
    }

    // ------------------------------------------------------------ buyers

    fn pick_sale(&self, rng: &mut Rng) -> Option<SaleModel> {
        let log = self.log.lock().unwrap();
        let now = clock::now_ms();
        let open: Vec<&SaleModel> = log.sales.iter().filter(|s| s.open_at(now)).collect();
        // Now and then a sale that is over: it must refuse.
        if open.is_empty() || rng.chance(0.1) {
            return rng.pick(&log.sales).cloned();
        }
        rng.pick(&open).map(|s| (*s).clone())
    }

    async fn buyer(self: Arc<Self>, n: u64, mut stop: watch::Receiver<bool>) {
        let mut rng = Rng::stream(self.seed, 100 + n);
        while nap(&mut stop, rng.millis(30, 300)).await {
            let Some(sale) = self.pick_sale(&mut rng) else {
                continue;
            };
            let kind = rng.weighted(&[
                (BuyKind::New, 45),
                (BuyKind::Keyed, 20),
                (BuyKind::KeyedRetry, 15),
                (BuyKind::Again, 10),
            ]);
            let quantity = if sale.limit > 1 && rng.chance(0.25) {
                2
            } else {
                1
            };
            let mut request = (sale.id.clone(), user(&mut rng), quantity, None, None);
            let kind = match kind {
                BuyKind::Keyed => {
                    request.3 = Some(format!("k-{:016x}", rng.next()));
                    kind
                }
                BuyKind::KeyedRetry => {
                    let log = self.log.lock().unwrap();
                    match rng.pick(&log.keyed).map(|&i| &log.purchases[i]) {
                        Some(first) => {
                            request = (
                                first.sale.clone(),
                                first.user.clone(),
                                first.quantity,
                                first.key.clone(),
                                first.order_id.clone(),
                            );
                            kind
                        }
                        None => BuyKind::New,
                    }
                }
                BuyKind::Again => {
                    let log = self.log.lock().unwrap();
                    match rng.pick(&log.bought) {
                        Some((sale, user)) => {
                            request.0.clone_from(sale);
                            request.1.clone_from(user);
                            kind
                        }
                        None => BuyKind::New,
                    }
                }
                BuyKind::New => kind,
            };
            let (sale_id, user, quantity, key, first_order) = request;
            let mut headers = Vec::new();
            if let Some(key) = &key {
                headers.push(("idempotency-key", key.as_str()));
            }
            let answer = self
                .api
                .buyer(
                    "POST",
                    &format!("/sales/{sale_id}/purchase"),
                    &user,
                    &headers,
                    &json!({ "quantity": quantity }).to_string(),
                )
                .await;
            let order_id = (answer.status == 202)
                .then(|| answer.body["orderId"].as_str().map(str::to_owned))
                .flatten();
            let fresh = {
                let mut log = self.log.lock().unwrap();
                // A keyed retry answered with an order already followed is
                // that order: it is followed once.
                let fresh = order_id
                    .as_ref()
                    .is_some_and(|order| log.following.insert(order.clone()));
                if kind == BuyKind::Keyed {
                    let at = log.purchases.len();
                    log.keyed.push(at);
                }
                if order_id.is_some() {
                    log.bought.push((sale_id.clone(), user.clone()));
                }
                log.purchases.push(Purchase {
                    sale: sale_id,
                    user: user.clone(),
                    kind,
                    key,
                    quantity,
                    answer,
                    order_id: order_id.clone(),
                    first_order,
                });
                fresh
            };
            if let (true, Some(order)) = (fresh, order_id) {
                let fate =
                    rng.weighted(&[(Fate::OnTime, 50), (Fate::Late, 10), (Fate::Abandoned, 40)]);
                let follower = Rng::stream(self.seed, rng.next());
                let me = self.clone();
                let stop = stop.clone();
                self.followers.lock().unwrap().spawn(async move {
                    me.follow(order, user, fate, follower, stop).await;
                });
            }
        }
    }

    /// The buyer after a `202`: polls the order until it is written, then
    /// pays within the window, pays after it, or walks away.
    async fn follow(
        self: Arc<Self>,
        order: String,
        user: String,
        fate: Fate,
        mut rng: Rng,
        mut stop: watch::Receiver<bool>,
    ) {
        let seen = |log: &mut Log, what: &str| {
            *log.followed.entry((fate, what.to_owned())).or_default() += 1;
        };
        let expires_ms = loop {
            if !nap(&mut stop, rng.millis(1_500, 3_500)).await {
                seen(&mut self.log.lock().unwrap(), "CUT");
                return;
            }
            let answer = self
                .api
                .buyer("GET", &format!("/orders/{order}"), &user, &[], "")
                .await;
            match (answer.status, answer.body["status"].as_str()) {
                (200, Some("PENDING_PAYMENT")) => {
                    if let Some(at) = answer.body["expiresAt"]
                        .as_str()
                        .and_then(clock::parse_rfc3339_ms)
                    {
                        break at;
                    }
                }
                (200, Some(status)) if status != "QUEUED" => {
                    seen(&mut self.log.lock().unwrap(), status);
                    return;
                }
                // QUEUED, not found yet (Redis lost it, the row is not
                // written), or a fault: look again.
                _ => {}
            }
        };
        seen(&mut self.log.lock().unwrap(), "PENDING_PAYMENT");
        let wait_ms = match fate {
            Fate::Abandoned => return,
            // Somewhere in the first 60% of what is left of the window.
            Fate::OnTime => {
                let left = (expires_ms - clock::now_ms()).max(0) as f64;
                (left * 0.6 * rng.fraction()) as u64
            }
            Fate::Late => {
                u64::try_from(expires_ms - clock::now_ms()).unwrap_or(0) + rng.range(1_000, 6_000)
            }
        };
        if !nap(&mut stop, Duration::from_millis(wait_ms)).await {
            return;
        }
        // Now and then a double click; a click the stack could not answer
        // (503, nothing) is clicked again a little later.
        let mut clicks = if rng.chance(0.15) { 2 } else { 1 };
        for _ in 0..8 {
            let answer = self
                .api
                .buyer("POST", &format!("/orders/{order}/pay"), &user, &[], "")
                .await;
            let again = answer.status == 0 || answer.status >= 500;
            self.log.lock().unwrap().payments.push(Payment {
                order: order.clone(),
                fate,
                expires_ms,
                answer,
            });
            let pause = if again {
                rng.millis(1_000, 3_000)
            } else {
                clicks -= 1;
                rng.millis(50, 300)
            };
            if clicks == 0 || !nap(&mut stop, pause).await {
                break;
            }
        }
    }

    // ------------------------------------------------------------ operator

    fn command(&self, what: &str, answer: &Answer) {
        *self
            .log
            .lock()
            .unwrap()
            .commands
            .entry((what.to_owned(), answer.code()))
            .or_default() += 1;
    }

    /// A command sent once, its answer counted as `what`'s.
    async fn command_once(&self, what: &str, method: &str, path: &str, body: &str) -> Answer {
        let at = self.started.elapsed();
        let answer = self.api.admin(method, path, body).await;
        self.command(what, &answer);
        println!(
            "nemesis [{:>6.1} s] operator {what} {method} {path}: {} {} after {} ms",
            at.as_secs_f64(),
            answer.status,
            answer.code(),
            answer.answered_ms - answer.sent_ms
        );
        answer
    }

    /// A command sent again while it is answered `5xx` or not at all (at
    /// most `tries` times, a second apart): what an operator does at a
    /// console that answered `503`. Every answer is counted.
    async fn insist(
        &self,
        what: &str,
        method: &str,
        path: &str,
        body: &str,
        tries: u32,
        stop: &mut watch::Receiver<bool>,
    ) -> Vec<Answer> {
        let mut answers = Vec::new();
        for _ in 0..tries {
            let answer = self.command_once(what, method, path, body).await;
            let done = (200..500).contains(&answer.status);
            answers.push(answer);
            if done || !nap(stop, Duration::from_secs(1)).await {
                break;
            }
        }
        answers
    }

    async fn operator(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let mut rng = Rng::stream(self.seed, 1);
        for _ in 0..2 {
            self.create_sale(&mut rng, true, &mut stop).await;
        }
        while nap(&mut stop, rng.millis(6_000, 18_000)).await {
            let (open, count) = {
                let log = self.log.lock().unwrap();
                let now = clock::now_ms();
                let open: Vec<String> = log
                    .sales
                    .iter()
                    .filter(|s| s.open_at(now))
                    .map(|s| s.id.clone())
                    .collect();
                (open, log.sales.len())
            };
            // A new sale when fewer than two are open, or when none has
            // units left (a flash sale sells out in seconds; the returned
            // units alone would leave the writer idle for minutes).
            let selling = self.selling(&open).await;
            if open.len() < 2 || (count < self.max_sales && (selling == 0 || rng.chance(0.1))) {
                let live = rng.chance(0.75);
                self.create_sale(&mut rng, live, &mut stop).await;
            }
            #[derive(Clone, Copy)]
            enum Op {
                PauseResume,
                End,
                Edit,
                RefusedEdit,
                EditBeforeStart,
                Dlq,
            }
            match rng.weighted(&[
                (Op::PauseResume, 4),
                (Op::End, 1),
                (Op::Edit, 2),
                (Op::RefusedEdit, 1),
                (Op::EditBeforeStart, 1),
                (Op::Dlq, 3),
            ]) {
                Op::PauseResume => self.pause_resume(&mut rng, &mut stop).await,
                Op::End => self.end_now(&mut rng, &mut stop).await,
                Op::Edit => self.edit(&mut rng, &mut stop).await,
                Op::RefusedEdit => self.refused_edit(&mut rng).await,
                Op::EditBeforeStart => self.edit_before_start(&mut rng).await,
                Op::Dlq => self.redrive(&mut stop).await,
            }
        }
    }

    /// How many of `sales` have units left, as their public view says.
    async fn selling(&self, sales: &[String]) -> usize {
        let mut selling = 0;
        for sale in sales {
            let view = self.api.admin("GET", &format!("/sales/{sale}"), "").await;
            if view.body["remaining"].as_u64().is_some_and(|n| n > 0) {
                selling += 1;
            }
        }
        selling
    }

    async fn create_sale(&self, rng: &mut Rng, live: bool, stop: &mut watch::Receiver<bool>) {
        let now = clock::now_ms();
        let n = self.log.lock().unwrap().sales.len();
        let sale = SaleModel {
            id: unique("nz"),
            name: format!("Nemesis sale {n}"),
            total: u32::try_from(rng.range(30, 120)).unwrap_or(30),
            limit: rng.weighted(&[(1, 5), (2, 3), (3, 2)]),
            start_ms: if live {
                now - 1_000
            } else {
                now + i64::try_from(rng.range(8_000, 25_000)).unwrap_or(8_000)
            },
            end_ms: now + i64::try_from(rng.range(360_000, 720_000)).unwrap_or(360_000),
            window_secs: u32::try_from(rng.range(60, 150)).unwrap_or(60),
            paused: Some(false),
            ended_at_ms: None,
            paused_windows: Vec::new(),
        };
        // Known before the answer: buyers may try it while it is created,
        // and the final check looks at it whatever the answers were.
        self.log.lock().unwrap().sales.push(sale.clone());
        self.insist(
            "create",
            "PUT",
            &format!("/admin/sales/{}", sale.id),
            &sale.definition().to_string(),
            10,
            stop,
        )
        .await;
    }

    fn with_sale(&self, id: &str, change: impl FnOnce(&mut SaleModel)) {
        if let Some(sale) = self
            .log
            .lock()
            .unwrap()
            .sales
            .iter_mut()
            .find(|s| s.id == id)
        {
            change(sale);
        }
    }

    /// A sale that has started, is open and (if `unpaused`) not paused.
    fn live_sale(&self, rng: &mut Rng, unpaused: bool) -> Option<SaleModel> {
        let log = self.log.lock().unwrap();
        let now = clock::now_ms();
        let live: Vec<&SaleModel> = log
            .sales
            .iter()
            .filter(|s| s.open_at(now) && s.start_ms <= now && s.end_ms > now + 30_000)
            .filter(|s| !unpaused || s.paused == Some(false))
            .collect();
        rng.pick(&live).map(|s| (*s).clone())
    }

    async fn pause_resume(&self, rng: &mut Rng, stop: &mut watch::Receiver<bool>) {
        let Some(sale) = self.live_sale(rng, true) else {
            return;
        };
        let path = |action: &str| format!("/admin/sales/{}/{action}", sale.id);
        let paused = self
            .insist("pause", "POST", &path("pause"), "", 8, stop)
            .await;
        match paused.last() {
            Some(ok) if ok.status == 200 => {
                let at = ok.answered_ms;
                self.with_sale(&sale.id, |s| {
                    s.paused = Some(true);
                    s.paused_windows.push((at, i64::MAX));
                });
            }
            _ => self.with_sale(&sale.id, |s| s.paused = None),
        }
        // Paused for a few seconds (the run may stop meanwhile: it stays so).
        if !nap(stop, rng.millis(2_000, 12_000)).await {
            return;
        }
        let resumed = self
            .insist("resume", "POST", &path("resume"), "", 20, stop)
            .await;
        let Some(first) = resumed.first() else {
            return;
        };
        let until = first.sent_ms;
        let ok = resumed.last().is_some_and(|a| a.status == 200);
        self.with_sale(&sale.id, |s| {
            if let Some(window) = s.paused_windows.last_mut()
                && window.1 == i64::MAX
            {
                window.1 = until;
            }
            s.paused = ok.then_some(false);
        });
    }

    async fn end_now(&self, rng: &mut Rng, stop: &mut watch::Receiver<bool>) {
        let Some(sale) = self.live_sale(rng, false) else {
            return;
        };
        let ended = self
            .insist(
                "end",
                "POST",
                &format!("/admin/sales/{}/end", sale.id),
                "",
                10,
                stop,
            )
            .await;
        if let Some(ok) = ended.last().filter(|a| a.status == 200) {
            let at = ok.answered_ms;
            self.with_sale(&sale.id, |s| {
                s.ended_at_ms = Some(at);
                s.end_ms = s.end_ms.min(at);
            });
        }
    }

    /// Name, end (later) and payment window: what may change once a sale
    /// has started.
    async fn edit(&self, rng: &mut Rng, stop: &mut watch::Receiver<bool>) {
        let Some(mut sale) = self.live_sale(rng, false) else {
            return;
        };
        sale.name = format!("{} (edited)", sale.name.trim_end_matches(" (edited)"));
        sale.end_ms += i64::try_from(rng.range(30_000, 180_000)).unwrap_or(30_000);
        sale.window_secs = u32::try_from(rng.range(60, 180)).unwrap_or(60);
        let answers = self
            .insist(
                "edit",
                "PUT",
                &format!("/admin/sales/{}", sale.id),
                &sale.definition().to_string(),
                10,
                stop,
            )
            .await;
        if answers.last().is_some_and(|a| a.status == 200) {
            self.with_sale(&sale.id, |s| {
                s.name = sale.name;
                s.end_ms = sale.end_ms;
                s.window_secs = sale.window_secs;
            });
        }
    }

    /// More stock for a sale that has started: the API must refuse it.
    async fn refused_edit(&self, rng: &mut Rng) {
        let Some(mut sale) = self.live_sale(rng, false) else {
            return;
        };
        sale.total += u32::try_from(rng.range(1, 10)).unwrap_or(1);
        self.command_once(
            "edit-stock-after-start",
            "PUT",
            &format!("/admin/sales/{}", sale.id),
            &sale.definition().to_string(),
        )
        .await;
    }

    /// A sale that has not started yet may change its stock.
    async fn edit_before_start(&self, rng: &mut Rng) {
        let sale = {
            let log = self.log.lock().unwrap();
            let soon = clock::now_ms() + 3_000;
            let waiting: Vec<&SaleModel> = log.sales.iter().filter(|s| s.start_ms > soon).collect();
            rng.pick(&waiting).map(|s| (*s).clone())
        };
        let Some(mut sale) = sale else {
            return;
        };
        sale.total = u32::try_from(rng.range(20, 140)).unwrap_or(20);
        let answer = self
            .command_once(
                "edit-stock-before-start",
                "PUT",
                &format!("/admin/sales/{}", sale.id),
                &sale.definition().to_string(),
            )
            .await;
        if answer.status == 200 {
            self.with_sale(&sale.id, |s| s.total = sale.total);
        }
    }

    /// The operator looks at the DLQ and, if anything is parked there,
    /// sends it back.
    pub async fn redrive(&self, stop: &mut watch::Receiver<bool>) {
        let look = self.command_once("dlq-look", "GET", "/admin/dlq", "").await;
        let parked = look.body["messages"].as_array().map_or(0, Vec::len);
        if look.status != 200 || parked == 0 {
            return;
        }
        let answers = self
            .insist("dlq-redrive", "POST", "/admin/dlq/redrive", "{}", 5, stop)
            .await;
        let moved: u64 = answers
            .iter()
            .filter_map(|a| a.body["redriven"].as_u64())
            .sum();
        self.log.lock().unwrap().dlq_redriven += moved;
    }

    // ------------------------------------------------------------ verdict

    /// Every order id a buyer was answered `202` for, by sale.
    pub fn accepted(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for p in &self.log.lock().unwrap().purchases {
            if let Some(order) = &p.order_id {
                let ids = out.entry(p.sale.clone()).or_default();
                if !ids.contains(order) {
                    ids.push(order.clone());
                }
            }
        }
        out
    }

    pub fn sale_ids(&self) -> Vec<String> {
        self.log
            .lock()
            .unwrap()
            .sales
            .iter()
            .map(|s| s.id.clone())
            .collect()
    }

    /// What the workload was promised and the ledger must show, given
    /// every order row at the end: (code, detail) for each broken promise.
    /// The promises broken, and how many purchases broke an operator's
    /// pause or end only because Redis went back in time to before it
    /// (`back`: docs/design.md "Failure semantics" names that window).
    pub fn promises(
        &self,
        rows: &HashMap<String, Order>,
        back: &BackInTime,
    ) -> (Vec<(&'static str, String)>, u32) {
        let log = self.log.lock().unwrap();
        let mut broken = Vec::new();
        let mut excused = 0;
        let sales: HashMap<&str, &SaleModel> =
            log.sales.iter().map(|s| (s.id.as_str(), s)).collect();
        // A keyed request answered `202` may be the replay of a reservation
        // an earlier request with its key made (answered or not): it sold
        // nothing new. So a keyed `202` counts as a sale from the first
        // send of its key on.
        let mut first_sent: HashMap<&str, i64> = HashMap::new();
        for p in &log.purchases {
            if let Some(key) = &p.key {
                let at = first_sent.entry(key.as_str()).or_insert(p.answer.sent_ms);
                *at = (*at).min(p.answer.sent_ms);
            }
        }
        for p in &log.purchases {
            let Some(order) = &p.order_id else { continue };
            let answered = p.answer.answered_ms;
            let sent = p
                .key
                .as_deref()
                .and_then(|k| first_sent.get(k).copied())
                .unwrap_or(p.answer.sent_ms);
            if !rows.contains_key(order) {
                broken.push((
                    "ACCEPTED_WITHOUT_ROW",
                    format!("{order} ({} for {}) has no row", p.sale, p.user),
                ));
            }
            if let (BuyKind::KeyedRetry, Some(first)) = (p.kind, &p.first_order)
                && first != order
            {
                broken.push((
                    "IDEMPOTENCY",
                    format!("a keyed retry was given {order}, the first request {first}"),
                ));
            }
            let Some(sale) = sales.get(p.sale.as_str()) else {
                continue;
            };
            if answered < sale.start_ms {
                broken.push((
                    "SOLD_BEFORE_START",
                    format!("{order} accepted before {} started", sale.id),
                ));
            }
            if let Some(&(from, until)) = sale
                .paused_windows
                .iter()
                .find(|(from, until)| sent >= *from && answered <= *until)
            {
                if back.excuses(from, sent) {
                    excused += 1;
                } else {
                    broken.push((
                    "PAUSE_NOT_OBEYED",
                    format!(
                        "{order} ({:?}) accepted {} ms after {} was paused (resumed {} ms after the purchase)",
                        p.kind,
                        sent - from,
                        sale.id,
                        until.saturating_sub(answered)
                    ),
                ));
                }
            }
            if let Some(ended) = sale.ended_at_ms
                && sent >= ended
            {
                if back.excuses(ended, sent) {
                    excused += 1;
                } else {
                    broken.push((
                        "END_NOT_OBEYED",
                        format!(
                            "{order} ({:?}) accepted {} ms after {} was ended",
                            p.kind,
                            sent - ended,
                            sale.id
                        ),
                    ));
                }
            }
        }
        // A payment answered after the window may be the second answer to
        // one sent before it (a double click, a click again after a 503):
        // only an order first paid for after its window must be refused.
        let mut first_payment: HashMap<&str, i64> = HashMap::new();
        for pay in &log.payments {
            let at = first_payment
                .entry(pay.order.as_str())
                .or_insert(pay.answer.sent_ms);
            *at = (*at).min(pay.answer.sent_ms);
        }
        for pay in &log.payments {
            let a = &pay.answer;
            let first = first_payment
                .get(pay.order.as_str())
                .copied()
                .unwrap_or(a.sent_ms);
            if a.status == 200 && rows.get(&pay.order).map(|o| o.status) != Some(OrderStatus::Paid)
            {
                broken.push((
                    "PAYMENT_UNDONE",
                    format!(
                        "{} was paid (200) but is {:?} in the ledger",
                        pay.order,
                        rows.get(&pay.order).map(|o| o.status)
                    ),
                ));
            }
            if a.status == 200 && first > pay.expires_ms {
                broken.push((
                    "PAID_AFTER_WINDOW",
                    format!(
                        "{} paid {} ms after its window closed",
                        pay.order,
                        first - pay.expires_ms
                    ),
                ));
            }
            if a.code() == "ORDER_EXPIRED" && a.answered_ms < pay.expires_ms {
                broken.push((
                    "WINDOW_CUT_SHORT",
                    format!(
                        "{} refused as expired {} ms before its window closed",
                        pay.order,
                        pay.expires_ms - a.answered_ms
                    ),
                ));
            }
        }
        for ((what, code), n) in &log.commands {
            if what == "edit-stock-after-start" && code == "OK" {
                broken.push((
                    "EDIT_NOT_REFUSED",
                    format!("{n} stock changes of a started sale were accepted"),
                ));
            }
        }
        (broken, excused)
    }

    /// The workload's figures, one line each.
    pub fn figures(&self) -> Vec<String> {
        let log = self.log.lock().unwrap();
        let mut lines = Vec::new();
        let mut by_answer: BTreeMap<String, u32> = BTreeMap::new();
        let mut by_kind: BTreeMap<(BuyKind, &str), u32> = BTreeMap::new();
        for p in &log.purchases {
            let answer = match p.answer.status {
                202 => "202".to_owned(),
                status => format!("{status} {}", p.answer.code()),
            };
            *by_answer.entry(answer).or_default() += 1;
            let outcome = match (p.kind, &p.order_id, &p.first_order) {
                (BuyKind::KeyedRetry, Some(order), Some(first)) if order == first => "same order",
                (_, Some(_), _) => "202",
                _ => "refused",
            };
            *by_kind.entry((p.kind, outcome)).or_default() += 1;
        }
        lines.push(format!(
            "purchases: {} sent; by answer: {}",
            log.purchases.len(),
            join(&by_answer)
        ));
        let kinds: BTreeMap<String, u32> = by_kind
            .iter()
            .map(|((k, o), n)| (format!("{k:?} {o}"), *n))
            .collect();
        lines.push(format!("  by kind: {}", join(&kinds)));
        let mut pays: BTreeMap<String, u32> = BTreeMap::new();
        for pay in &log.payments {
            *pays
                .entry(format!("{:?} {}", pay.fate, pay.answer.code()))
                .or_default() += 1;
        }
        lines.push(format!(
            "payments: {} sent; {}",
            log.payments.len(),
            join(&pays)
        ));
        let followed: BTreeMap<String, u32> = log
            .followed
            .iter()
            .map(|((fate, seen), n)| (format!("{fate:?} {seen}"), *n))
            .collect();
        lines.push(format!(
            "  orders followed (fate, last seen): {}",
            join(&followed)
        ));
        let commands: BTreeMap<String, u32> = log
            .commands
            .iter()
            .map(|((what, code), n)| (format!("{what} {code}"), *n))
            .collect();
        lines.push(format!("operator: {}", join(&commands)));
        lines.push(format!(
            "  sales: {}; DLQ messages redriven during the run: {}",
            log.sales.len(),
            log.dlq_redriven
        ));
        lines
    }
}

pub fn join<K: std::fmt::Display, V: std::fmt::Display>(map: &BTreeMap<K, V>) -> String {
    if map.is_empty() {
        return "none".into();
    }
    map.iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn only_a_command_redis_lost_is_excused_and_only_until_the_next_prewarm() {
    let back = BackInTime {
        lost: vec![(1_000, 4_000)],
        // One run started inside the loss (it cannot have written back
        // what was lost after it read), one after it.
        prewarms: vec![(3_000, 3_500), (10_000, 10_400)],
    };
    assert!(back.excuses(2_000, 5_000), "lost, no prewarm since");
    assert!(
        back.excuses(4_000, 10_399),
        "lost, the healing run not over"
    );
    assert!(
        !back.excuses(2_000, 10_400),
        "the run after the loss wrote it back"
    );
    assert!(!back.excuses(900, 5_000), "acknowledged before the loss");
    assert!(!back.excuses(4_001, 5_000), "acknowledged after the loss");
    let never_healed = BackInTime {
        lost: vec![(1_000, 4_000)],
        prewarms: vec![],
    };
    assert!(never_healed.excuses(2_000, 60_000));
    assert!(
        !BackInTime::default().excuses(2_000, 5_000),
        "no loss, no excuse"
    );
}
