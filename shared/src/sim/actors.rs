//! The actors: each plays one invocation of a function as it runs in
//! Lambda (a buyer's purchase, a poll of the order-writer, release-unpaid,
//! reconcile, prewarm, a payment, an operator's command), started with a
//! clock of its own and run under the scheduler's gates, and records what
//! its client was told.

use super::sched::Actor;
use super::world::{Accept, Command, EPOCH_MS, VISIBILITY_MS, World, now};
use crate::app::purchase::PurchaseRequest;
use crate::domain::{IdempotencyKey, Quantity, Sale, UserId};
use std::sync::Arc;
use std::time::Duration;

impl World {
    fn user(&self, n: u64) -> String {
        format!("buyer-{n}")
    }

    /// A skew for a new invocation: most functions agree with the clock,
    /// some are a few seconds off either way.
    fn skew(&self) -> i64 {
        if self.settings.faults && self.sched.chance(150) {
            let off = i64::try_from(self.sched.draw(6_001)).unwrap_or(0) - 3_000;
            self.sched.count("clock skew of a function");
            off
        } else {
            0
        }
    }

    pub(super) fn start(
        self: &Arc<Self>,
        name: &'static str,
        run: impl FnOnce(Arc<Self>, Actor) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
    ) {
        let skew = self.skew();
        if skew != 0 {
            self.trace(&format!("{name} starts with its clock {skew:+} ms off"));
        }
        let me = Arc::clone(self);
        self.sched.spawn(name, skew, move |actor| run(me, actor));
    }

    /// A buyer's purchase: a new one, or a retry of an earlier one with its
    /// key (`key_of`), or without a key (a new purchase).
    pub(crate) fn buy(self: &Arc<Self>) {
        let user = self.user(self.sched.draw(u64::from(self.settings.buyers)));
        let units = 1 + u32::try_from(self.sched.draw(2)).unwrap_or(0);
        let key = {
            let log = self.log();
            let known = log.keys.get(&user).cloned().unwrap_or_default();
            drop(log);
            match self.sched.draw(3) {
                // A retry with a key sent before.
                0 if !known.is_empty() => {
                    let at = usize::try_from(self.sched.draw(known.len() as u64)).unwrap_or(0);
                    Some(known[at].clone())
                }
                // A new key.
                1 => {
                    let key = format!("key-{}", self.sched.draw(1_000_000));
                    self.log()
                        .keys
                        .entry(user.clone())
                        .or_default()
                        .push(key.clone());
                    Some(key)
                }
                _ => None,
            }
        };
        self.start("purchase", move |w, actor| {
            Box::pin(async move {
                if w.purchase_as(actor, user.clone(), units, key).await {
                    w.after_sold_out(user);
                }
            })
        });
    }

    /// One purchase; true when its buyer was told `SOLD_OUT`.
    async fn purchase_as(
        &self,
        actor: Actor,
        user: String,
        units: u32,
        key: Option<String>,
    ) -> bool {
        let (Ok(user_id), Ok(quantity)) = (UserId::parse(&user), Quantity::new(u64::from(units)))
        else {
            return false;
        };
        let idempotency_key = key.as_deref().and_then(|k| IdempotencyKey::parse(k).ok());
        let request = PurchaseRequest {
            sale_id: self.sale.sale_id.clone(),
            user_id,
            quantity,
            idempotency_key,
            source_ip: None,
            sale_token: None,
        };
        let sent_ms = now();
        let answer = self.purchase.purchase(&request).await;
        if actor.died() {
            self.trace(&format!("{user} key {key:?}: no answer"));
            self.answer("purchase: no answer (function killed)");
            return false;
        }
        match answer {
            Ok(accepted) => {
                self.trace(&format!(
                    "{user} key {key:?} sent at {} got {} for {units}",
                    sent_ms - EPOCH_MS,
                    accepted.order_id
                ));
                self.answer(if accepted.replayed {
                    "purchase: 202 (replay)"
                } else {
                    "purchase: 202"
                });
                let mut log = self.log();
                log.accepted
                    .entry(accepted.order_id.clone())
                    .or_insert(Accept {
                        user,
                        units,
                        sent_ms,
                    });
                false
            }
            Err(err) => {
                self.trace(&format!(
                    "{user} key {key:?} sent at {} refused",
                    sent_ms - EPOCH_MS
                ));
                self.answer(format!("purchase: {}", refusal(&err)));
                matches!(err, crate::app::purchase::PurchaseError::SoldOut { .. })
            }
        }
    }

    /// One poll of the order-writer: a batch received, written, and the
    /// records it did not report failed deleted (Lambda's event source).
    pub(crate) fn poll(self: &Arc<Self>) {
        self.start("order-writer", |w, actor| {
            Box::pin(async move {
                let records = w.queue.receive(now(), 10, VISIBILITY_MS);
                if records.is_empty() {
                    return;
                }
                let report = w.writer.write_batch(&records).await;
                if w.tracing {
                    let orders: Vec<String> = records
                        .iter()
                        .filter_map(|r| crate::app::order_writer::parse(&r.body).ok())
                        .map(|(m, _)| m.order_id.to_string())
                        .collect();
                    w.trace(&format!(
                        "order-writer batch {orders:?}: written {} duplicates {} rejected {} failed {:?}{}",
                        report.written,
                        report.duplicates,
                        report.rejected,
                        report.failed,
                        if actor.died() { " (killed)" } else { "" }
                    ));
                }
                if actor.died() {
                    w.answer("order-writer: killed mid-batch");
                    return;
                }
                for record in &records {
                    if !report.failed.contains(&record.message_id) {
                        w.queue.delete(&record.message_id);
                    }
                }
                w.answer(format!(
                    "order-writer: batch ({} failed)",
                    if report.failed.is_empty() { "none" } else { "some" }
                ));
            })
        });
    }

    pub(crate) fn release(self: &Arc<Self>) {
        self.start("release-unpaid", |w, actor| {
            Box::pin(async move {
                let deadline = std::time::Instant::now() + Duration::from_secs(3_600);
                let report = w
                    .jobs
                    .release_unpaid(crate::clock::now_ms(), deadline)
                    .await;
                if !actor.died() {
                    w.answer(format!("release-unpaid: {}", ok_or_err(&report)));
                }
            })
        });
    }

    pub(crate) fn reconcile(self: &Arc<Self>) {
        self.start("reconcile", |w, actor| {
            Box::pin(async move {
                let report = w
                    .reconciler
                    .reconcile_sale(&w.sale.sale_id, crate::clock::now_ms())
                    .await;
                if !actor.died() {
                    if let Ok(Some(r)) = &report {
                        for repair in &r.repairs {
                            *w.log()
                                .answers
                                .entry(format!("reconcile repair: {}", repair.kind))
                                .or_default() += 1;
                        }
                        if w.tracing && !r.repairs.is_empty() {
                            w.trace(&format!("reconcile repairs {:?}", r.repairs));
                        }
                    }
                    w.answer(format!("reconcile: {}", ok_or_err(&report)));
                }
            })
        });
    }

    pub(crate) fn prewarm(self: &Arc<Self>) {
        self.start("prewarm", |w, actor| {
            Box::pin(async move {
                let started = now();
                let outcome = w
                    .jobs
                    .prewarm_sale(&w.sale.sale_id, crate::clock::now_ms())
                    .await;
                if !actor.died() {
                    if outcome.is_ok() {
                        w.log().prewarms.push((started, now()));
                    }
                    let what = match outcome {
                        Ok(o) => {
                            serde_json::to_value(crate::http::bodies::admin::PrewarmBody::of(&o))
                                .unwrap_or_default()["outcome"]
                                .as_str()
                                .unwrap_or("answered")
                                .to_owned()
                        }
                        Err(_) => "error".to_owned(),
                    };
                    w.answer(format!("prewarm: {what}"));
                }
            })
        });
    }

    /// A buyer pays one of their orders (perhaps late, perhaps again).
    pub(crate) fn pay(self: &Arc<Self>) {
        let order = {
            let log = self.log();
            let n = log.accepted.len() as u64;
            if n == 0 {
                return;
            }
            let at = usize::try_from(self.sched.draw(n)).unwrap_or(0);
            log.accepted
                .iter()
                .nth(at)
                .map(|(id, a)| (id.clone(), a.user.clone()))
        };
        let Some((order_id, user)) = order else {
            return;
        };
        self.start("orders-api pay", move |w, actor| {
            Box::pin(async move {
                let Ok(user_id) = UserId::parse(&user) else {
                    return;
                };
                let answer = w.queries.pay(&order_id, &user_id).await;
                if actor.died() {
                    return;
                }
                match answer {
                    Ok(order) => {
                        w.answer("pay: 200 PAID");
                        if order.status == crate::domain::orders::OrderStatus::Paid {
                            w.log().paid.insert(order_id);
                        }
                    }
                    Err(err) => w.answer(format!("pay: {}", query_refusal(&err))),
                }
            })
        });
    }

    /// An operator pauses, resumes or ends the sale now, as the admin API
    /// does: the sale item first, then Redis at once.
    pub(crate) fn operate(self: &Arc<Self>) {
        use std::sync::atomic::Ordering;
        if self.operator_busy.swap(true, Ordering::SeqCst) {
            return;
        }
        let command = match self.sched.draw(10) {
            0..=4 => Command::Pause,
            5..=8 => Command::Resume,
            _ => Command::End,
        };
        self.start("admin-api", move |w, actor| {
            Box::pin(async move {
                let sent = now();
                w.trace(&format!("operator sends {command:?}"));
                let done = w.command(command).await && !actor.died();
                w.log().commands.push((command, sent, done.then(now)));
                if done {
                    w.answer(format!("operator: {command:?} done"));
                } else {
                    w.answer(format!("operator: {command:?} failed"));
                }
                w.operator_busy.store(false, Ordering::SeqCst);
            })
        });
    }

    async fn command(&self, command: Command) -> bool {
        use crate::ports::CatalogAdmin;
        let now_ms = crate::clock::now_ms();
        let Ok(Some((sale, _))) = self.catalog.get_record(&self.sale.sale_id).await else {
            return false;
        };
        if sale.phase_at(now_ms) == crate::domain::SalePhase::Ended {
            return false;
        }
        match command {
            Command::Pause | Command::Resume => {
                let after = Sale {
                    paused: command == Command::Pause,
                    ..sale
                };
                self.catalog.put_sale(after.clone()).await.is_ok()
                    && self.jobs.apply_status(&after).await.is_ok()
            }
            Command::End => {
                let Ok(ended) = crate::app::console::ended_at(&self.stock, sale, now_ms).await
                else {
                    return false;
                };
                self.catalog.put_sale(ended).await.is_ok()
                    && self
                        .jobs
                        .prewarm_sale(&self.sale.sale_id, now_ms)
                        .await
                        .is_ok()
            }
        }
    }
}

fn ok_or_err<T, E>(r: &Result<T, E>) -> &'static str {
    if r.is_ok() { "done" } else { "error" }
}

fn refusal(err: &crate::app::purchase::PurchaseError) -> String {
    use crate::app::purchase::PurchaseError as E;
    match err {
        E::Store(_) => "503 (Redis did not answer)".into(),
        E::Catalog(_) => "503 (catalog did not answer)".into(),
        E::LimitExceeded { .. } => "LIMIT_EXCEEDED".into(),
        E::SoldOut { .. } => "SOLD_OUT".into(),
        E::Paused => "SALE_PAUSED".into(),
        E::KeysMissing => "503 (sale not in Redis)".into(),
        E::Ended => "SALE_ENDED".into(),
        E::QueueRejected => "QUEUE_REJECTED".into(),
        E::OrderEnded { status, .. } => format!("ORDER_{}", status.as_str()),
        E::NotStarted { .. } => "NOT_STARTED".into(),
        other => other.to_string(),
    }
}

pub(super) fn query_refusal(err: &crate::app::order_queries::QueryError) -> String {
    use crate::app::order_queries::QueryError;
    match err {
        QueryError::Expired => "EXPIRED".into(),
        QueryError::NotFound => "NOT_FOUND".into(),
        QueryError::NotPayable(_) => "NOT_PAYABLE".into(),
        QueryError::Orders(_) | QueryError::Stock(_) | QueryError::Catalog(_) => {
            "store error".into()
        }
        other => format!("{other}"),
    }
}
