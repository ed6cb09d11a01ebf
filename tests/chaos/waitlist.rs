//! waitlist-redis-lost: a sold-out sale whose winners never pay, buyers
//! waiting on its line, the release job delivered twice at once, and Redis
//! SIGKILLed and restarted empty while the offers are being made. Every
//! unit that came back is offered once, in line order, and the rebuilt sale
//! offers none of them for sale again.

use super::*;
use seckill_shared::app::order_queries::{JoinAnswer, JoinRequest};
use seckill_shared::domain::UserId;
use seckill_shared::ports::{StockStore, WaitlistStore};

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
