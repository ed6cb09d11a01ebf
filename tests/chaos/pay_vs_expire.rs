//! pay-vs-expire: payments racing the release near each deadline.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pay_and_expire_race_under_load_never_sell_a_unit_twice() {
    let s = scale();
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap();
    // A 4 s payment window: expiries happen while the sale still runs, and
    // the units they give back are bought again by later buyers. (Not 2 s:
    // a read of the pending orders queries all 32 buckets of the sale's
    // index, one emulator request each, and takes about a second on a busy
    // emulator.)
    let stores = Stores::open_with(
        &endpoint,
        &std::env::var("REDIS_URL").unwrap(),
        s.stock,
        5,
        |sale| sale.payment_window_seconds = 4,
    )
    .await;
    let buyers = Buyers::new(
        stores.sale_id(),
        Buyers::service(stores.purchase(&endpoint).await),
    );
    let jobs = Arc::new(
        seckill_shared::wire::jobs(&stores.config, seckill_shared::adapters::aws::Caller::Tool)
            .await
            .unwrap(),
    );
    let writer = stores.writer();
    let orders = stores.checker.orders().clone();
    let done = Arc::new(AtomicBool::new(false));
    // Writes and releases alternate in one task: moto applies concurrent
    // transactions on the sale item without isolation (see `source_settings`).
    // Payments (order rows only) race both freely.
    let worker = {
        let (sqs, url, jobs, done) = (
            stores.sqs.clone(),
            stores.queue_url.clone(),
            jobs.clone(),
            done.clone(),
        );
        tokio::spawn(async move {
            let mut expired = 0;
            loop {
                let got = sqs
                    .receive_message()
                    .queue_url(&url)
                    .max_number_of_messages(10)
                    .wait_time_seconds(0)
                    .send()
                    .await
                    .unwrap()
                    .messages
                    .unwrap_or_default();
                if !got.is_empty() {
                    let records: Vec<(String, String)> = got
                        .iter()
                        .map(|m| (m.message_id.clone().unwrap(), m.body.clone().unwrap()))
                        .collect();
                    let refs: Vec<(&str, &str)> = records
                        .iter()
                        .map(|(i, b)| (i.as_str(), b.as_str()))
                        .collect();
                    // A batch whose every record failed (the emulator too
                    // slow for the writer's budget under this load) is an
                    // error, and goes back to the queue whole, as Lambda's
                    // event source does: not a test failure.
                    let failures = match invoke_writer(&writer, sqs_event(&refs)).await {
                        Ok(failures) => failures,
                        Err(err) => {
                            eprintln!(
                                "chaos pay-vs-expire: a whole batch failed, back to the queue: {err}"
                            );
                            records.iter().map(|(id, _)| id.clone()).collect()
                        }
                    };
                    for m in got {
                        if !failures.contains(m.message_id.as_ref().unwrap()) {
                            sqs.delete_message()
                                .queue_url(&url)
                                .receipt_handle(m.receipt_handle.unwrap())
                                .send()
                                .await
                                .unwrap();
                        }
                    }
                }
                let report = jobs
                    .release_unpaid(clock::now_ms(), Instant::now() + Duration::from_secs(10))
                    .await
                    .unwrap();
                expired += report.expired;
                if done.load(Ordering::SeqCst) && got_nothing_left(&sqs, &url).await {
                    return expired;
                }
            }
        })
    };
    // Payers: every pending order of an even-numbered buyer is paid in the
    // last two seconds of its window (a read of the index takes part of
    // that), so some payments land before the deadline and some race the
    // release.
    let payers = {
        let (orders, done, sale_id) = (orders.clone(), done.clone(), stores.sale.sale_id.clone());
        tokio::spawn(async move {
            let mut paid = 0usize;
            let mut tried: HashSet<String> = HashSet::new();
            // A read every 200 ms, not back to back: each is 32 emulator
            // requests (one per bucket of the index), and a payer polling
            // without pause would keep the emulator busy for every other
            // scenario running beside this one.
            let mut every = tokio::time::interval(Duration::from_millis(200));
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            while !done.load(Ordering::SeqCst) {
                every.tick().await;
                for o in orders
                    .orders_of_sale(&sale_id, OrderStatus::PendingPayment)
                    .await
                    .unwrap()
                {
                    let even = o
                        .user_id
                        .as_str()
                        .trim_start_matches('b')
                        .parse::<u64>()
                        .unwrap_or(1)
                        % 2
                        == 0;
                    let due = o.expires_at_ms.unwrap_or(0) - 2_000 <= clock::now_ms();
                    if even
                        && due
                        && tried.insert(o.order_id.to_string())
                        && matches!(
                            orders
                                .pay(&o.order_id, &o.user_id, clock::now_ms())
                                .await
                                .unwrap(),
                            seckill_shared::ports::PayOutcome::Paid(_)
                        )
                    {
                        paid += 1;
                    }
                }
                tokio::task::yield_now().await;
            }
            paid
        })
    };
    // Buyers keep coming until half the stock again has been sold a second
    // time: units handed back by expiries were bought by later buyers.
    let target = s.stock as usize * 3 / 2;
    let resold = eventually(Duration::from_secs(240), || async {
        buyers.run(s.concurrency, s.concurrency).await;
        buyers.accepted().len() >= target
    })
    .await;
    done.store(true, Ordering::SeqCst);
    let paid = payers.await.unwrap();
    let mut expired = worker.await.unwrap();
    assert!(
        resold,
        "units came back and sold again: {:?}",
        buyers.tally()
    );
    // Then the sale settles: every order still pending expires or was paid.
    let deadline = Instant::now() + Duration::from_secs(120);
    let settled = loop {
        expired += jobs
            .release_unpaid(clock::now_ms(), Instant::now() + Duration::from_secs(10))
            .await
            .unwrap()
            .expired;
        let rows = stores.rows().await;
        if rows.iter().all(|o| o.status != OrderStatus::PendingPayment) {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
    };
    assert!(settled, "every pending order was paid or expired");
    let rows = stores.rows().await;
    let count = |status| rows.iter().filter(|o| o.status == status).count();
    let (paid_rows, expired_rows) = (count(OrderStatus::Paid), count(OrderStatus::Expired));
    let accepted = buyers.accepted();
    let violations = stores.violations(&accepted).await;
    let (available, sold) = {
        let (_, c) = stores
            .checker
            .catalog()
            .get_record(&stores.sale.sale_id)
            .await
            .unwrap()
            .unwrap();
        (c.available, c.sold)
    };
    println!(
        "chaos pay-vs-expire: tried={} accepted={} orders_written={} paid={paid} expired={expired} rows_paid={paid_rows} rows_expired={expired_rows} available={available} violations={}",
        buyers.tried.load(Ordering::SeqCst),
        accepted.len(),
        rows.len(),
        violations.len()
    );
    assert_eq!(violations, vec![]);
    assert_eq!(rows.len(), accepted.len(), "every 202 is a row");
    // Every payment that won is a PAID row; nothing is left pending. (The
    // release's own count can miss one whose transaction moto applied but
    // answered with a 500, so rows are counted, not reports.)
    assert_eq!(paid_rows, paid, "every winning payment stands");
    assert_eq!(paid_rows + expired_rows, rows.len(), "one winner per order");
    assert!(paid > 0 && expired > 0, "both sides won some");
    assert_eq!(
        (sold, available),
        (paid as i64, i64::from(s.stock) - paid as i64),
        "each paid unit sold once, every expired one back on sale"
    );
}

async fn got_nothing_left(sqs: &aws_sdk_sqs::Client, url: &str) -> bool {
    seckill_shared::adapters::sqs::depth(sqs, url)
        .await
        .map(|d| d.total() == 0)
        .unwrap_or(false)
}
