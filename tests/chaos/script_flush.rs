//! script-flush+client-pause: `SCRIPT FLUSH` mid-batch, then `CLIENT PAUSE`.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn script_flush_and_client_pause_keep_the_latency_budget() {
    let s = scale();
    let redis = OwnRedis::start().await;
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap();
    let stores = Stores::open(&endpoint, &redis.url(), s.stock, 5).await;
    let writer = stores.start_writer().await;
    let buyers = Buyers::new(
        stores.sale_id(),
        Buyers::service(stores.purchase(&endpoint).await),
    );
    let mut admin = redis.conn().await;

    buyers.run(s.stock as usize / 4, s.concurrency).await;
    // The script cache emptied under the buyers: EVALSHA gets NOSCRIPT and
    // the client loads the script again.
    buyers.set_phase("flush");
    buyers.hold_after(s.concurrency / 2);
    let batch = {
        let buyers = buyers.clone();
        tokio::spawn(async move { buyers.run(s.stock as usize / 4, s.concurrency).await })
    };
    buyers.until_held().await;
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut admin)
        .await
        .unwrap();
    buyers.release();
    batch.await.unwrap();
    // Every client paused for 2 s as the next buyers arrive: a purchase
    // gives up at its Redis timeout.
    buyers.set_phase("pause");
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(2_000)
        .query_async(&mut admin)
        .await
        .unwrap();
    // Until Redis answers again (bounded: the pause is 2 s).
    for _ in 0..200 {
        let before = buyers.outcomes().len();
        buyers.run(s.concurrency, s.concurrency).await;
        if buyers.outcomes()[before..].iter().any(|o| o.status != 503) {
            break;
        }
    }
    buyers.set_phase("after");
    buyers
        .until_sold_out(s.concurrency, s.stock as usize * 20)
        .await;
    stores.settle(&buyers.accepted()).await;

    let flush_errors = buyers
        .outcomes()
        .iter()
        .filter(|o| o.phase == "flush" && o.status >= 500)
        .count();
    assert_eq!(flush_errors, 0, "SCRIPT FLUSH cost no purchase");
    let slowest_pause = buyers.slowest("pause");
    let pause_503 = buyers
        .outcomes()
        .iter()
        .filter(|o| o.phase == "pause" && o.status == 503)
        .count();
    assert!(pause_503 > 0, "the pause was felt: {:?}", buyers.tally());
    // 250 ms Redis timeout, one reconnect attempt: well under a second,
    // never the pause's 2 s.
    assert!(
        slowest_pause < 1_500,
        "a purchase waited {slowest_pause} ms on a paused Redis"
    );
    // A purchase that timed out may still have run once the pause ended:
    // its reservation has no message. Reconcile relays it after the grace.
    let report = stores.reconcile_at(Duration::from_secs(61)).await;
    let relayed = report
        .repairs
        .iter()
        .filter(|r| r.kind == "RELAYED")
        .count();
    stores.settle(&buyers.accepted()).await;
    writer.stop().await;
    stores
        .assert_sound(
            "script-flush+client-pause",
            &buyers,
            &format!("pause_503={pause_503} slowest_during_pause_ms={slowest_pause} relayed_after_timeout={relayed}"),
        )
        .await;
}
