//! failover-loses-writes: a replica that lags by the last purchases is
//! promoted and the master killed, at each per-user limit.

use super::*;
use seckill_shared::ports::StockReading;

/// A Redis failover that loses writes, in a sale of each per-user limit:
/// the replica is promoted while it lags the master by the last purchases.
/// Redis forgets their deductions, buyer counts and reservations; their
/// messages exist. The ledger (DynamoDB) must refuse whatever that would
/// oversell or put a buyer past the limit, and reconcile must bring Redis
/// back to what the ledger leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failover_that_loses_writes_never_oversells_or_passes_a_limit() {
    if std::env::var("CHAOS").as_deref() == Ok("full") {
        // One at a time: each sale has the emulator's throughput to itself,
        // which its payment window is sized for.
        for limit in [1, 2] {
            failover_loses_writes(limit).await;
        }
    } else {
        // Side by side (each has its own servers, queues and tables): the
        // short form's time inside `make test`.
        tokio::join!(failover_loses_writes(1), failover_loses_writes(2));
    }
}

async fn failover_loses_writes(limit: u32) {
    let s = scale();
    let started = Instant::now();
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap();
    // The purchases the promoted replica will not have.
    let lag_target = s.stock as usize / 4;
    // Repeat buyers: the first half of the pool buys before the lag, the
    // second half during it (their purchase is lost), and all of them keep
    // coming back after the failover.
    let pool = s.stock as usize / 4;

    // The application reaches Redis through the pair's primary endpoint.
    let mut pair = Replicated::start().await;
    // Short, so unpaid orders expire while the sale runs; but about as long
    // as the emulator takes to write the sale's orders (some 5 a second
    // while releases compete for it: every read of the sale's pending orders
    // and every release queries all 32 buckets of its index, one emulator
    // request each, and the emulator answers one at a time): a window that
    // passed before its order was written leaves nothing to pay, and a lost
    // purchase expired before its buyer's next one is written puts nobody at
    // the limit.
    let window = (s.stock / 5).max(2);
    let stores = Stores::open_with(&endpoint, &pair.primary.redis_url(), s.stock, 5, |sale| {
        sale.per_user_limit = limit;
        sale.payment_window_seconds = window;
    })
    .await;
    let turn = Arc::new(tokio::sync::Mutex::new(()));
    let mut writer = stores.start_writer_in_turn(turn.clone()).await;
    let buyers = Buyers::with_pool(
        stores.sale_id(),
        Buyers::service(stores.purchase(&endpoint).await),
        pool,
    );
    let jobs = Arc::new(
        seckill_shared::wire::jobs(&stores.config, seckill_shared::adapters::aws::Caller::Tool)
            .await
            .unwrap(),
    );
    let done = Arc::new(AtomicBool::new(false));
    let expired = Arc::new(AtomicUsize::new(0));
    let upkeep = tokio::spawn(upkeep(
        jobs,
        stores.checker.orders().clone(),
        stores.sale.sale_id.clone(),
        turn.clone(),
        done.clone(),
        expired.clone(),
    ));

    // Before: the replica follows, and has caught up with every purchase
    // (its offset reached the master's, read after the buyers stopped).
    buyers.run(s.stock as usize / 4, s.concurrency).await;
    let caught_up = pair.caught_up().await;
    assert!(caught_up, "the replica did not catch up");

    // The writer falls behind (the lag's messages wait in the queue), and
    // the link is cut: the master's next writes never reach the replica.
    writer.stop().await;
    pair.link.blackhole().await;
    buyers.set_phase("lag");
    let in_lag = |b: &Buyers| -> Vec<Outcome> {
        b.outcomes()
            .into_iter()
            .filter(|o| o.phase == "lag" && o.status == 202)
            .collect()
    };
    for _ in 0..50 {
        let got = in_lag(&buyers).len();
        if got >= lag_target {
            break;
        }
        let more = lag_target - got;
        buyers.run(more, more.min(s.concurrency)).await;
    }
    let lost = in_lag(&buyers);
    assert!(lost.len() >= lag_target, "{:?}", buyers.tally());

    // Failover: the replica is promoted, the endpoint moves to it, the
    // master dies with the lag's purchases.
    pair.fail_over().await;

    // The promoted replica has every purchase before the lag and none of
    // the lag's.
    let snap = {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match stores.checker.stock().snapshot(&stores.sale.sale_id).await {
                Ok(Some(snap)) => break snap,
                other => assert!(Instant::now() < deadline, "promoted replica: {other:?}"),
            }
        }
    };
    let kept = buyers
        .outcomes()
        .iter()
        .filter(|o| o.phase == "before" && o.status == 202)
        .all(|o| {
            snap.reservations
                .contains_key(o.order_id.as_deref().unwrap())
        });
    assert!(kept, "the replica lost a purchase made before the lag");
    assert!(
        lost.iter().all(|o| !snap
            .reservations
            .contains_key(o.order_id.as_deref().unwrap())),
        "the replica has a purchase of the lag"
    );

    // A few of the queued messages (lost purchases among them) fail their
    // way into the DLQ, as SQS moves them after maxReceiveCount failures.
    let parked = stores
        .move_messages(&stores.queue_url, &stores.dlq_url, 3)
        .await;
    writer = stores.start_writer_in_turn(turn.clone()).await;

    // After: buyers until sold out, repeat buyers past their limit, the
    // lag's repeat buyers whose purchase Redis forgot among them.
    buyers.set_phase("after");
    buyers
        .until_sold_out(s.concurrency, s.stock as usize * 20)
        .await;
    // Resale: unpaid orders expire (lost purchases among them, whose
    // reservations the replica never had) and their units are bought again.
    let returned = eventually(Duration::from_secs(u64::from(window) + 120), || async {
        expired.load(Ordering::SeqCst) >= s.stock as usize / 10
    })
    .await;
    assert!(returned, "limit={limit}: no unpaid order expired");
    buyers.set_phase("resale");
    buyers.sold_out.store(false, Ordering::SeqCst);
    buyers
        .until_sold_out(s.concurrency, s.stock as usize * 20)
        .await;
    // The operator redrives the DLQ.
    let redriven = stores
        .move_messages(&stores.dlq_url, &stores.queue_url, parked.len())
        .await;
    assert_eq!(redriven.len(), parked.len());
    let accepted = buyers.accepted();
    stores.settle(&accepted).await;
    // Payments and releases stop (orders still pending stay so): the final
    // reads must see the ledger still.
    done.store(true, Ordering::SeqCst);
    let upkept = upkeep.await.unwrap();

    // Reconcile as the schedule would, a minute on (a purchase that timed
    // out but ran is relayed), until a run finds nothing to repair.
    let mut reports = Vec::new();
    for _ in 0..6 {
        let report = {
            let _turn = turn.lock().await;
            stores.reconcile_at(Duration::from_secs(61)).await
        };
        let quiet = report.repairs.is_empty();
        reports.push(report);
        if quiet {
            break;
        }
        // What reconcile relayed is written before the next run looks.
        assert!(eventually(Duration::from_secs(60), || stores.queue_empty()).await);
    }
    let counts = writer.stop().await;
    let settled = reports.last().is_some_and(|r| r.repairs.is_empty());
    assert!(
        settled,
        "limit={limit}: reconcile still repairing after {} runs: {:?}",
        reports.len(),
        reports.last().map(|r| &r.repairs)
    );

    // The verdict.
    let violations = stores.violations(&accepted).await;
    let state = stores
        .checker
        .observe(&stores.sale.sale_id)
        .await
        .unwrap()
        .unwrap();
    let rows = stores.rows().await;
    let by_id: std::collections::HashMap<&str, &seckill_shared::domain::orders::Order> =
        rows.iter().map(|o| (o.order_id.as_str(), o)).collect();
    let count = |status| rows.iter().filter(|o| o.status == status).count();
    let live: Vec<_> = rows
        .iter()
        .filter(|o| matches!(o.status, OrderStatus::PendingPayment | OrderStatus::Paid))
        .collect();
    let units: u32 = live.iter().map(|o| o.quantity.get()).sum();
    let mut held: BTreeMap<&str, u32> = BTreeMap::new();
    for o in &live {
        *held.entry(o.user_id.as_str()).or_default() += o.quantity.get();
    }
    let rejected: Vec<_> = accepted
        .iter()
        .filter_map(|id| by_id.get(id.as_str()))
        .filter(|o| o.status == OrderStatus::Rejected)
        .collect();
    let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
    for o in &rejected {
        *reasons
            .entry(o.reject_reason.map_or("?", |r| r.as_str()))
            .or_default() += 1;
    }
    let mut repairs: BTreeMap<&str, usize> = BTreeMap::new();
    for r in reports.iter().flat_map(|r| &r.repairs) {
        *repairs.entry(r.kind).or_default() += 1;
    }
    // What the first run found before repairing: the failover's damage.
    let mut first_found: BTreeMap<&str, usize> = BTreeMap::new();
    for v in &reports[0].violations {
        *first_found.entry(v.code).or_default() += 1;
    }
    let lost_users: HashSet<&str> = lost
        .iter()
        .filter(|o| o.user.starts_with('p'))
        .map(|o| o.user.as_str())
        .collect();
    let rebought = buyers
        .outcomes()
        .iter()
        .filter(|o| o.phase == "after" && o.status == 202 && lost_users.contains(o.user.as_str()))
        .count();
    let snap = state.redis.as_ref().unwrap();
    let queued: i64 = state
        .queued_without_row()
        .map(|(_, r)| i64::try_from(r.quantity).unwrap())
        .sum();
    let ledger_leaves = state.counters.available - queued - state.owed_to_redis();
    println!(
        "chaos failover-loses-writes limit={limit}: tried={} accepted={} rejected_after_202={} written={} expired={} violations={} paid={} lost_in_failover={} lost_buyers_rebought={rebought} parked_in_dlq={} units_held={units}/{} redis_stock={} ledger_available={} rejected_by={reasons:?} first_reconcile={first_found:?} repairs={repairs:?} reconcile_runs={} upkeep_paid={} upkeep_expired={} release_errors={} secs={:.1} source: {counts}\n  answers: {:?}",
        buyers.tried.load(Ordering::SeqCst),
        accepted.len(),
        rejected.len(),
        count(OrderStatus::PendingPayment) + count(OrderStatus::Paid) + count(OrderStatus::Expired),
        count(OrderStatus::Expired),
        violations.len(),
        count(OrderStatus::Paid),
        lost.len(),
        parked.len(),
        stores.sale.total_stock,
        snap.stock,
        state.counters.available,
        reports.len(),
        upkept.paid,
        expired.load(Ordering::SeqCst),
        upkept.release_errors,
        started.elapsed().as_secs_f64(),
        buyers.tally(),
    );
    assert_eq!(violations, vec![], "limit={limit}: invariants");
    let unpaid: Vec<_> = upkept
        .paid_ids
        .iter()
        .filter(|id| by_id.get(id.as_str()).map(|o| o.status) != Some(OrderStatus::Paid))
        .collect();
    assert!(
        unpaid.is_empty(),
        "limit={limit}: a payment that won was undone: {unpaid:?}"
    );
    assert!(
        units <= stores.sale.total_stock,
        "limit={limit}: {units} units held of {}",
        stores.sale.total_stock
    );
    let over: Vec<_> = held.iter().filter(|(_, u)| **u > limit).collect();
    assert!(over.is_empty(), "limit={limit}: over the limit: {over:?}");
    let unwritten: Vec<_> = accepted
        .iter()
        .filter(|id| !by_id.contains_key(id.as_str()))
        .collect();
    assert!(
        unwritten.is_empty(),
        "limit={limit}: 202 without a row: {unwritten:?}"
    );
    let ids: HashSet<&str> = rows.iter().map(|o| o.order_id.as_str()).collect();
    assert_eq!(ids.len(), rows.len(), "limit={limit}: no order twice");
    // Redis offers what the ledger leaves, read with nothing in flight.
    assert!(
        state.settled && state.queue_quiet() && state.dlq_visible == 0,
        "limit={limit}: the final read was not settled and quiet"
    );
    assert_eq!(
        snap.stock,
        ledger_leaves,
        "limit={limit}: Redis stock vs the ledger's available {} - queued {queued} - owed {}",
        state.counters.available,
        state.owed_to_redis()
    );
    // The lost writes were felt: the ledger refused a 202 that Redis should
    // not have given, or reconcile brought Redis back down.
    assert!(
        !rejected.is_empty() || repairs.contains_key("STOCK_RESET"),
        "limit={limit}: the failover lost nothing that mattered"
    );
}

/// What the payers and the unpaid release did during a scenario.
#[derive(Debug, Default)]
struct Upkept {
    paid: usize,
    /// The orders whose payment won.
    paid_ids: Vec<String>,
    release_errors: usize,
}

/// Pays every pending order of the paying buyers at once and, on the
/// release's schedule (every 200 ms here, a minute in production), expires
/// the unpaid ones past their window, counting them in `expired`. Ends
/// once `done` is set.
async fn upkeep(
    jobs: Arc<seckill_shared::wire::LiveJobs>,
    orders: DynamoOrders,
    sale_id: seckill_shared::domain::SaleId,
    turn: Arc<tokio::sync::Mutex<()>>,
    done: Arc<AtomicBool>,
    expired: Arc<AtomicUsize>,
) -> Upkept {
    let mut upkept = Upkept::default();
    let mut tried: HashSet<String> = HashSet::new();
    let mut every = tokio::time::interval(Duration::from_millis(200));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if done.load(Ordering::SeqCst) {
            return upkept;
        }
        let pending = orders
            .orders_of_sale(&sale_id, OrderStatus::PendingPayment)
            .await
            .unwrap();
        // Payments take the turn too: moto undoes a cancelled transaction
        // by restoring a copy of every table it touched, and with it any
        // payment made meanwhile (seen here: a payment that won, then its
        // row back to pending and expired).
        let report = {
            let _turn = turn.lock().await;
            for o in pending {
                if pays(o.user_id.as_str())
                    && tried.insert(o.order_id.to_string())
                    && matches!(
                        orders
                            .pay(&o.order_id, &o.user_id, clock::now_ms())
                            .await
                            .unwrap(),
                        seckill_shared::ports::PayOutcome::Paid(_)
                    )
                {
                    upkept.paid += 1;
                    upkept.paid_ids.push(o.order_id.to_string());
                }
            }
            // A short slice: the writer waits for the same turn, and the
            // next tick goes on where this one stopped.
            jobs.release_unpaid(clock::now_ms(), Instant::now() + Duration::from_millis(500))
                .await
                .unwrap()
        };
        expired.fetch_add(report.expired, Ordering::SeqCst);
        // A return that failed (Redis switching over) is owed: reconcile
        // gives it back.
        upkept.release_errors += report.errors.len();
    }
}

/// Half the new buyers and half the pool pay; the others let their orders
/// expire (and the pool's come back for more).
fn pays(user: &str) -> bool {
    let n = |prefix: char| {
        user.strip_prefix(prefix)
            .and_then(|n| n.parse::<u64>().ok())
    };
    n('b').is_some_and(|n| n % 4 == 0) || n('p').is_some_and(|n| n % 2 == 0)
}
