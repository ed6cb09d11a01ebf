//! every-message-twice: every message delivered again after the writer
//! handled it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_message_delivered_twice_makes_no_duplicate() {
    let s = scale();
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap();
    let stores = Stores::open(&endpoint, &std::env::var("REDIS_URL").unwrap(), s.stock, 5).await;
    let buyers = Buyers::new(
        stores.sale_id(),
        Buyers::service(stores.purchase(&endpoint).await),
    );
    // The wrapper: after the real writer handled a batch, every record seen
    // for the first time is sent to the queue again.
    let resent: Arc<Mutex<HashSet<String>>> = Arc::default();
    let handler = {
        let inner = seckill_infra::local::writer_handler(stores.writer());
        let (sqs, url, resent) = (stores.sqs.clone(), stores.queue_url.clone(), resent.clone());
        move |event: aws_lambda_events::event::sqs::SqsEvent| {
            let (inner, sqs, url, resent) =
                (inner.clone(), sqs.clone(), url.clone(), resent.clone());
            Box::pin(async move {
                let bodies: Vec<String> = event
                    .records
                    .iter()
                    .filter_map(|r| r.body.clone())
                    .collect();
                let out = inner(event).await;
                for body in bodies {
                    if resent.lock().unwrap().insert(body.clone()) {
                        sqs.send_message()
                            .queue_url(&url)
                            .message_body(body)
                            .send()
                            .await
                            .map_err(|e| e.to_string())?;
                    }
                }
                out
            })
                as Pin<
                    Box<
                        dyn Future<
                                Output = Result<
                                    aws_lambda_events::event::sqs::SqsBatchResponse,
                                    String,
                                >,
                            > + Send,
                    >,
                >
        }
    };
    let source = EventSource::spawn(stores.sqs.clone(), stores.source_settings().await, handler);
    buyers
        .until_sold_out(s.concurrency, s.stock as usize * 20)
        .await;
    let accepted = buyers.accepted();
    stores.settle(&accepted).await;
    let all_resent = eventually(Duration::from_secs(60), || async {
        resent.lock().unwrap().len() >= accepted.len() && stores.queue_empty().await
    })
    .await;
    assert!(all_resent);
    let counts = source.stop().await;
    assert!(
        counts.records_delivered >= 2 * accepted.len() as u64,
        "every message delivered twice: {counts}"
    );
    stores
        .assert_sound(
            "every-message-twice",
            &buyers,
            &format!("deliveries={} source: {counts}", counts.records_delivered),
        )
        .await;
}
