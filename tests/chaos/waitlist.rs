//! waitlist-redis-lost: a sold-out sale whose winners never pay, buyers
//! waiting on its line, the release job delivered twice at once, and Redis
//! SIGKILLed and restarted empty while the offers are being made. Every
//! unit that came back is offered once, in line order, and the rebuilt sale
//! offers none of them for sale again.

use super::*;
use seckill_shared::app::order_queries::{JoinAnswer, JoinRequest};
use seckill_shared::domain::UserId;
use seckill_shared::ports::{StockReading, StockStore, WaitlistStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn units_offered_while_redis_is_lost_and_the_job_runs_twice_are_offered_once() {
    // On an emulator of its own: with a line waiting, each expiry is a
    // transaction of its own, and moto copies every table in each.
    if !seckill_tests::in_own_strict_emulator(
        "chaos::waitlist::units_offered_while_redis_is_lost_and_the_job_runs_twice_are_offered_once",
    )
    .await
    {
        return;
    }
    let s = scale();
    let mut redis = OwnRedis::start().await;
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap();
    let stores = Stores::open(&endpoint, &redis.url(), s.stock, 5).await;
    let writer = stores.start_writer().await;
    let buyers = Buyers::new(
        stores.sale_id(),
        Buyers::service(stores.purchase(&endpoint).await),
    );
    buyers
        .until_sold_out(s.concurrency, s.stock as usize * 20)
        .await;
    let accepted = buyers.accepted();
    stores.settle(&accepted).await;

    // Twice the stock joins the line, one after another (the line's order
    // is the join order).
    let queries = orders_api::wire(&stores.config).await.unwrap();
    let waiting: Vec<String> = (0..s.stock as usize * 2)
        .map(|i| format!("waiter-{i:04}"))
        .collect();
    for user in &waiting {
        let request = JoinRequest {
            sale_id: stores.sale.sale_id.clone(),
            user_id: UserId::parse(user).unwrap(),
            sale_token: None,
            source_ip: None,
        };
        let joined = queries.join_waitlist(&request).await.unwrap();
        assert!(matches!(joined, JoinAnswer::New(_)), "{joined:?}");
    }
    let orders = stores.checker.orders().clone();
    let line = orders
        .heads(&stores.sale.sale_id, waiting.len())
        .await
        .unwrap();
    assert_eq!(line.len(), waiting.len());

    // Nobody paid: past every window, the job runs twice at once (a
    // redelivered schedule), and Redis dies once the first offer is in the
    // ledger.
    let jobs = Arc::new(
        seckill_shared::wire::jobs(&stores.config, seckill_shared::adapters::aws::Caller::Tool)
            .await
            .unwrap(),
    );
    let later = clock::now_ms() + 1_000_000;
    let run = |jobs: Arc<seckill_shared::wire::LiveJobs>| {
        tokio::spawn(async move {
            jobs.release_unpaid(later, Instant::now() + Duration::from_secs(300))
                .await
                .unwrap()
        })
    };
    let (first, second) = (run(jobs.clone()), run(jobs.clone()));
    let offered = eventually(Duration::from_secs(300), || async {
        stores.rows().await.iter().any(|o| o.offer_of.is_some())
    })
    .await;
    assert!(offered, "no offer was ever made");
    redis.kill();
    let reports = [first.await.unwrap(), second.await.unwrap()];
    redis.restart().await;
    // Rebuilt from the ledger (nothing is in flight), then the job again
    // for what the runs could not finish without Redis.
    let rebuilt = eventually(Duration::from_secs(120), || async {
        matches!(
            jobs.prewarm_sale(&stores.sale.sale_id, clock::now_ms())
                .await,
            Ok(seckill_shared::app::jobs::PrewarmOutcome::Loaded { .. })
                | Ok(seckill_shared::app::jobs::PrewarmOutcome::Refreshed)
        )
    })
    .await;
    assert!(rebuilt, "the sale was never rebuilt");
    let finished = eventually(Duration::from_secs(300), || async {
        let report = jobs
            .release_unpaid(later, Instant::now() + Duration::from_secs(300))
            .await
            .unwrap();
        report.errors.is_empty() && report.expired == 0
    })
    .await;
    assert!(finished, "the job never finished the sale's expiries");
    writer.stop().await;

    let rows = stores.rows().await;
    let offers: Vec<_> = rows.iter().filter(|o| o.offer_of.is_some()).collect();
    let sources: HashSet<&str> = offers
        .iter()
        .map(|o| o.offer_of.as_ref().unwrap().as_str())
        .collect();
    assert_eq!(
        (offers.len(), sources.len()),
        (s.stock as usize, s.stock as usize),
        "every returned unit offered, none twice"
    );
    let offered_to: HashSet<String> = offers.iter().map(|o| o.user_id.to_string()).collect();
    let head: HashSet<String> = line[..s.stock as usize]
        .iter()
        .map(|e| e.user_id.to_string())
        .collect();
    assert_eq!(
        offered_to, head,
        "offered to the head of the line, in order"
    );
    for source in &sources {
        let expired = rows
            .iter()
            .find(|o| o.order_id.as_str() == *source)
            .unwrap();
        assert_eq!((expired.status, expired.offered), (OrderStatus::Expired, 1));
    }
    // Nothing went back on sale: the rebuilt Redis holds no unit.
    let snapshot = eventually(Duration::from_secs(30), || async {
        stores
            .checker
            .stock()
            .view(&stores.sale.sale_id, None)
            .await
            .is_ok_and(|v| v.is_some_and(|v| v.remaining == 0))
    })
    .await;
    assert!(snapshot, "a returned unit went back on sale");
    let violations = stores.violations(&accepted).await;
    let live: Vec<_> = rows
        .iter()
        .filter(|o| matches!(o.status, OrderStatus::PendingPayment | OrderStatus::Paid))
        .collect();
    println!(
        "chaos waitlist-redis-lost: stock={} waiting={} offers={} runs_offered={:?} violations={}",
        s.stock,
        waiting.len(),
        offers.len(),
        reports.iter().map(|r| r.units_offered).collect::<Vec<_>>(),
        violations.len()
    );
    assert_eq!(violations, vec![], "waitlist-redis-lost: invariants");
    assert_eq!(
        live.len(),
        s.stock as usize,
        "the whole stock held, no more"
    );
    let users: HashSet<&str> = live.iter().map(|o| o.user_id.as_str()).collect();
    assert_eq!(users.len(), live.len(), "nobody over the limit of 1");
}

/// waitlist-failover: the returned units are offered to the line while the
/// replica Redis will fail over to lags the master, so the offers' Redis
/// steps (each expired reservation marked, each offer counted for its
/// buyer, no unit back in stock) die with the master. The promoted replica
/// still counts the expired orders' buyers and not the offers'; reconcile
/// restores it from the ledger: no unit goes back on sale, and each offer
/// is counted for its buyer once, so none can buy past the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn offers_whose_redis_steps_a_failover_lost_are_restored_from_the_ledger() {
    if !seckill_tests::in_own_strict_emulator(
        "chaos::waitlist::offers_whose_redis_steps_a_failover_lost_are_restored_from_the_ledger",
    )
    .await
    {
        return;
    }
    let stock: u32 = 10;
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap();
    let mut pair = Replicated::start().await;
    let stores = Stores::open(&endpoint, &pair.primary.redis_url(), stock, 5).await;
    let writer = stores.start_writer().await;
    let buyers = Buyers::new(
        stores.sale_id(),
        Buyers::service(stores.purchase(&endpoint).await),
    );
    buyers.until_sold_out(8, stock as usize * 20).await;
    let accepted = buyers.accepted();
    stores.settle(&accepted).await;
    let queries = orders_api::wire(&stores.config).await.unwrap();
    let waiting: Vec<String> = (0..stock).map(|i| format!("waiter-{i:02}")).collect();
    for user in &waiting {
        let request = JoinRequest {
            sale_id: stores.sale.sale_id.clone(),
            user_id: UserId::parse(user).unwrap(),
            sale_token: None,
            source_ip: None,
        };
        let joined = queries.join_waitlist(&request).await.unwrap();
        assert!(matches!(joined, JoinAnswer::New(_)), "{joined:?}");
    }

    // The replica has caught up with the sale, then the link is cut.
    assert!(pair.caught_up().await, "the replica did not catch up");
    pair.link.blackhole().await;

    // Nobody paid: every unit is offered down the line, on the master.
    let jobs =
        seckill_shared::wire::jobs(&stores.config, seckill_shared::adapters::aws::Caller::Tool)
            .await
            .unwrap();
    let later = clock::now_ms() + 1_000_000;
    let report = jobs
        .release_unpaid(later, Instant::now() + Duration::from_secs(300))
        .await
        .unwrap();
    assert_eq!(
        (report.expired, report.units_offered),
        (stock as usize, u64::from(stock)),
        "{report:?}"
    );

    // Failover: the promoted replica never heard of the offers.
    pair.fail_over().await;
    let snap = {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match stores.checker.stock().snapshot(&stores.sale.sale_id).await {
                Ok(Some(snap)) => break snap,
                other => assert!(Instant::now() < deadline, "promoted replica: {other:?}"),
            }
        }
    };
    assert!(
        waiting.iter().all(|u| !snap.buyers.contains_key(u)),
        "the promoted replica counts an offer: {:?}",
        snap.buyers
    );
    assert_eq!(snap.stock, 0);

    // Reconcile as the schedule would, until a run finds nothing to repair.
    let mut reports = Vec::new();
    for _ in 0..6 {
        let report = stores.reconcile_at(Duration::from_secs(61)).await;
        let quiet = report.repairs.is_empty();
        reports.push(report);
        if quiet {
            break;
        }
    }
    writer.stop().await;
    assert!(
        reports.last().is_some_and(|r| r.repairs.is_empty()),
        "reconcile still repairing after {} runs: {:?}",
        reports.len(),
        reports.last().map(|r| &r.repairs)
    );
    let violations = stores.violations(&accepted).await;
    let mut repairs: BTreeMap<&str, usize> = BTreeMap::new();
    for r in reports.iter().flat_map(|r| &r.repairs) {
        *repairs.entry(r.kind).or_default() += 1;
    }
    println!(
        "chaos waitlist-failover: stock={stock} offered={} repairs={repairs:?} violations={}",
        report.units_offered,
        violations.len()
    );
    assert_eq!(violations, vec![], "waitlist-failover: invariants");
    let snap = stores
        .checker
        .stock()
        .snapshot(&stores.sale.sale_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        snap.stock, 0,
        "a unit offered to the line went back on sale"
    );
    for user in &waiting {
        assert_eq!(
            snap.buyers.get(user).copied(),
            Some(1),
            "{user}'s offer is counted once"
        );
    }
    let rows = stores.rows().await;
    let offers: Vec<_> = rows.iter().filter(|o| o.offer_of.is_some()).collect();
    let offered_to: HashSet<&str> = offers.iter().map(|o| o.user_id.as_str()).collect();
    assert_eq!(
        (offers.len(), offered_to.len()),
        (stock as usize, stock as usize),
        "every returned unit offered once, one per buyer"
    );
}
