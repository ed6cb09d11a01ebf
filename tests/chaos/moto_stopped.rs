//! moto-stopped: the emulator frozen, partitioned, then unreachable.

use super::*;
use seckill_shared::ports::StockReading;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn moto_stopped_during_purchases_loses_no_accepted_order() {
    let s = scale();
    let moto = OwnMoto::start().await;
    let mut proxy = Proxy::start(moto.port).await;
    let stores = Stores::open(
        &moto.url(),
        &std::env::var("REDIS_URL").unwrap(),
        s.stock,
        5,
    )
    .await;
    // The purchase function reaches the emulator through the proxy; the
    // writer and the checker directly.
    let service = stores.purchase(&proxy.url()).await;
    let buyers = Buyers::new(stores.sale_id(), Buyers::service(service));
    buyers.run(s.stock as usize / 4, s.concurrency).await;
    let writer = stores.start_writer().await;

    // Frozen (SIGSTOP): sends hang until their timeout. Ambiguous: the
    // reservation is kept and the buyer told 202. (The requests wait in the
    // kernel's buffers and land when the process resumes.)
    buyers.set_phase("frozen");
    moto.signal("-STOP");
    buyers.run(s.concurrency / 2, s.concurrency / 2).await;
    moto.signal("-CONT");
    // Partitioned: requests are swallowed and never arrive. Also ambiguous,
    // and here reconcile must relay them.
    buyers.set_phase("partition");
    proxy.blackhole().await;
    buyers.run(s.concurrency / 2, s.concurrency / 2).await;
    // Unreachable (connection refused): definite. The units go back at once.
    proxy.down().await;
    buyers.set_phase("refused");
    let stock_before = stores
        .checker
        .stock()
        .snapshot(&stores.sale.sale_id)
        .await
        .unwrap()
        .unwrap()
        .stock;
    buyers.run(s.concurrency / 2, s.concurrency / 2).await;
    let stock_after = stores
        .checker
        .stock()
        .snapshot(&stores.sale.sale_id)
        .await
        .unwrap()
        .unwrap()
        .stock;
    let refused: Vec<_> = buyers
        .outcomes()
        .into_iter()
        .filter(|o| o.phase == "refused")
        .collect();
    // 503 for a refused send; a buyer may also see SOLD_OUT for a moment
    // while the others' units are on their way back.
    assert!(
        refused.iter().all(|o| o.status != 202) && refused.iter().any(|o| o.status == 503),
        "a refused send is a definite failure: {:?}",
        buyers.tally()
    );
    assert_eq!(
        stock_before, stock_after,
        "every refused purchase gave its unit back"
    );
    proxy.up().await;
    buyers.set_phase("after");
    buyers
        .until_sold_out(s.concurrency, s.stock as usize * 20)
        .await;

    // The frozen phase's sends may or may not have landed; reconcile relays
    // whatever has no row once the queue is drained.
    let accepted = buyers.accepted();
    let drained = eventually(Duration::from_secs(120), || stores.queue_empty()).await;
    assert!(drained);
    let report = stores.reconcile_at(Duration::from_secs(61)).await;
    let relayed = report
        .repairs
        .iter()
        .filter(|r| r.kind == "RELAYED")
        .count();
    stores.settle(&accepted).await;
    writer.stop().await;
    let ambiguous = buyers
        .outcomes()
        .iter()
        .filter(|o| (o.phase == "frozen" || o.phase == "partition") && o.status == 202)
        .count();
    assert!(
        ambiguous > 0,
        "a frozen or partitioned emulator's sends are ambiguous: 202"
    );
    assert!(relayed > 0, "the partition's swallowed sends were relayed");
    stores
        .assert_sound(
            "moto-stopped",
            &buyers,
            &format!(
                "ambiguous_202={ambiguous} definite_503={} relayed={relayed} slowest_frozen_ms={}",
                refused.len(),
                buyers.slowest("frozen")
            ),
        )
        .await;
}
