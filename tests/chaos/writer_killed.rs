//! writer-killed-before-delete: writers that die between writing a batch
//! and deleting it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writer_dying_between_write_and_delete_writes_nothing_twice() {
    let s = scale();
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap();
    let stores = Stores::open(&endpoint, &std::env::var("REDIS_URL").unwrap(), s.stock, 2).await;
    let buyers = Buyers::new(
        stores.sale_id(),
        Buyers::service(stores.purchase(&endpoint).await),
    );
    let load = {
        let buyers = buyers.clone();
        tokio::spawn(async move {
            buyers
                .until_sold_out(s.concurrency, s.stock as usize * 20)
                .await
        })
    };
    // Three "lives" of the writer that each take a batch, write it to
    // DynamoDB and die before deleting it (the message comes back after the
    // visibility timeout), while the buyers keep buying.
    let writer = stores.writer();
    let mut died_holding = 0;
    for _ in 0..3 {
        let deadline = Instant::now() + Duration::from_secs(30);
        let got = loop {
            let got = stores
                .sqs
                .receive_message()
                .queue_url(&stores.queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .unwrap()
                .messages
                .unwrap_or_default();
            if !got.is_empty() {
                break got;
            }
            assert!(Instant::now() < deadline, "no message to take");
        };
        let records: Vec<(String, String)> = got
            .iter()
            .map(|m| (m.message_id.clone().unwrap(), m.body.clone().unwrap()))
            .collect();
        let records: Vec<(&str, &str)> = records
            .iter()
            .map(|(i, b)| (i.as_str(), b.as_str()))
            .collect();
        let failures = invoke_writer(&writer, sqs_event(&records)).await.unwrap();
        assert!(failures.is_empty());
        died_holding += records.len();
        // ... and here the process is gone: no DeleteMessage.
    }
    load.await.unwrap();
    let source = stores.start_writer().await;
    stores.settle(&buyers.accepted()).await;
    let counts = source.stop().await;
    stores
        .assert_sound(
            "writer-killed-before-delete",
            &buyers,
            &format!("redelivered_after_crash={died_holding} source: {counts}"),
        )
        .await;
}
