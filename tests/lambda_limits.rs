//! The Lambda and API Gateway limits of the local stack
//! (`seckill_infra::lambda_limits`): each bites through the gateway or the
//! event source, with small limits injected so the tests are quick, and
//! each test also shows the lenient behaviour with the knob off.
//!
//! - The table of `Timeout` and `ReservedConcurrentExecutions` is the
//!   template's.
//! - A purchase slower than its timeout is cut and answered `500
//!   {"message":"Internal Server Error"}`; without the timeout it finishes.
//! - A purchase over the function's concurrency is refused the same way and
//!   never reaches the handler; without the cap both run at once.
//! - Past the account throttle's burst the API answers `429
//!   {"message":"Too Many Requests"}`; without the throttle every request
//!   passes.
//! - An order-writer batch past its timeout fails whole and comes back with
//!   a higher receive count; without the timeout it is written and deleted.

use crate::cfn::template_json;
use seckill_infra::consistency::Template;
use seckill_infra::emulator;
use seckill_infra::event_source::{EventSource, EventSourceSettings, queue_arn};
use seckill_infra::gateway::{self, Gateway};
use seckill_infra::lambda_limits::{
    ApiThrottle, Function, FunctionLimit, LambdaLimits, LimitSettings,
};
use seckill_infra::local::{self, LocalSettings, PreparedStack};
use seckill_infra::token::TokenSettings;
use seckill_shared::adapters::aws;
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::redis::RedisStock;
use seckill_shared::app::purchase::PurchaseService;
use seckill_shared::domain::OrderMessage;
use seckill_shared::ports::{DrawStore, OrderQueue, SaleCatalog, SendError, StockStore};
use seckill_tests::{GENEROUS_LIMITS, TEST_VISIBILITY_SECS, eventually, http_request, unique};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Semaphore, oneshot};

#[test]
fn each_functions_timeout_and_reserved_concurrency_are_the_templates() {
    let template = Template::from_json(&template_json()).unwrap();
    for function in Function::ALL {
        let declared = &template.functions[function.logical_id()];
        assert_eq!(declared.binary.as_deref(), Some(function.name()));
        assert_eq!(
            declared.timeout_secs,
            Some(function.timeout_secs()),
            "{function}'s Timeout"
        );
        assert_eq!(
            declared.reserved_concurrency,
            function.reserved_concurrency().map(u64::from),
            "{function}'s ReservedConcurrentExecutions"
        );
    }
    assert_eq!(template.functions.len(), Function::ALL.len());
}

/// The local stack's set-up (queues, tables, secrets, the demo sale) on a
/// free port; the tests serve gateways of their own over it.
async fn prepared() -> (PreparedStack, String) {
    let name = unique("lim");
    let settings = LocalSettings {
        listen: "127.0.0.1:0".into(),
        redis_url: std::env::var("REDIS_URL").expect("REDIS_URL"),
        queue_name: name.clone(),
        dlq_name: format!("{name}-dlq"),
        sales_table: format!("{name}-sales"),
        orders_table: format!("{name}-orders"),
        demo_sale: format!("{name}-demo"),
        visibility_timeout_secs: TEST_VISIBILITY_SECS,
        rate_limits: Some(GENEROUS_LIMITS),
        login_url: None,
    };
    let stack = local::prepare(&settings).await.unwrap();
    (stack, settings.demo_sale)
}

/// A gateway over `stack` whose purchase route sends to `queue`.
async fn gateway_with<Q: OrderQueue>(
    stack: &PreparedStack,
    queue: Q,
) -> Gateway<RedisStock, Q, DynamoCatalog> {
    let stock = RedisStock::connect_lazy(&stack.config.redis_url, Duration::from_secs(2))
        .unwrap()
        .with_rate_limits(GENEROUS_LIMITS);
    let sdk = aws::sdk_config(aws::Caller::Tool, Duration::from_secs(10)).await;
    let catalog = DynamoCatalog::new(aws::dynamodb(&sdk), &stack.config.sales_table);
    Gateway::new(
        TokenSettings::from_env(),
        PurchaseService::new(stock, queue, catalog),
        orders_api::wire(&stack.config).await.unwrap(),
        stack.admin.clone(),
    )
}

/// A gateway being served; dropping it stops the server.
struct Served {
    addr: SocketAddr,
    tokens: TokenSettings,
    _stop: oneshot::Sender<()>,
}

async fn serve<S, Q, C>(gateway: Gateway<S, Q, C>) -> Served
where
    S: StockStore + DrawStore + 'static,
    Q: OrderQueue + 'static,
    C: SaleCatalog + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let tokens = gateway.tokens().clone();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(gateway::serve(listener, Arc::new(gateway), async {
        let _ = stopped.await;
    }));
    Served {
        addr,
        tokens,
        _stop: stop,
    }
}

impl Served {
    async fn buy(&self, sale: &str, user: &str) -> (u16, serde_json::Value) {
        let auth = format!("Bearer {}", self.tokens.mint(user, false, 300).unwrap());
        let headers = [
            ("authorization", auth.as_str()),
            ("content-type", "application/json"),
        ];
        let path = format!("/sales/{sale}/purchase");
        let (status, _, body) =
            http_request(self.addr, "POST", &path, &headers, r#"{"quantity": 1}"#).await;
        (status, body)
    }

    async fn get(&self, path: &str) -> (u16, serde_json::Value) {
        let (status, _, body) = http_request(self.addr, "GET", path, &[], "").await;
        (status, body)
    }
}

/// An orders queue that holds each send until the test opens it.
#[derive(Clone)]
struct SlowQueue {
    open: Arc<Semaphore>,
    entered: Arc<AtomicUsize>,
    sent: Arc<AtomicUsize>,
    /// Sends whose future was dropped before they finished.
    cut: Arc<AtomicUsize>,
}

/// Counts a send dropped midway (an invocation killed at its timeout).
struct CutGuard(Arc<AtomicUsize>, bool);

impl Drop for CutGuard {
    fn drop(&mut self) {
        if !self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl SlowQueue {
    fn held() -> Self {
        Self {
            open: Arc::new(Semaphore::new(0)),
            entered: Arc::default(),
            sent: Arc::default(),
            cut: Arc::default(),
        }
    }

    fn open(&self) {
        self.open.add_permits(1);
    }

    fn entered(&self) -> usize {
        self.entered.load(Ordering::SeqCst)
    }

    fn sent(&self) -> usize {
        self.sent.load(Ordering::SeqCst)
    }

    fn cut(&self) -> usize {
        self.cut.load(Ordering::SeqCst)
    }
}

impl OrderQueue for SlowQueue {
    async fn send(&self, _message: &OrderMessage) -> Result<(), SendError> {
        self.entered.fetch_add(1, Ordering::SeqCst);
        let mut guard = CutGuard(self.cut.clone(), false);
        // The permit goes back on drop: once open, open for every send.
        drop(self.open.acquire().await);
        self.sent.fetch_add(1, Ordering::SeqCst);
        guard.1 = true;
        Ok(())
    }
}

const INTERNAL_ERROR: &str = "Internal Server Error";

#[tokio::test]
async fn a_purchase_slower_than_its_timeout_is_cut_and_answered_as_api_gateway_does() {
    let (stack, sale) = prepared().await;
    // The send is held: the invocation outlives its timeout whatever the
    // machine's pace, and is cut there. The template's 5 s, which a loaded
    // machine's handler reaches its send well within.
    let queue = SlowQueue::held();
    let limits = LambdaLimits::default().with(FunctionLimit::template(Function::Purchase));
    let strict = serve(
        gateway_with(&stack, queue.clone())
            .await
            .with_limits(limits),
    )
    .await;
    let (status, body) = strict.buy(&sale, "slow-1").await;
    assert_eq!(
        (status, &body),
        (500, &json!({"message": INTERNAL_ERROR})),
        "{body}"
    );
    assert_eq!(queue.entered(), 1, "the handler ran as far as the send");
    // Dropped, not left running: the send was cut, never completed.
    let cut = seckill_tests::eventually(Duration::from_secs(30), || {
        let queue = queue.clone();
        async move { queue.cut() == 1 }
    })
    .await;
    assert!(cut, "the timed-out invocation's send was left running");
    assert_eq!(queue.sent(), 0);

    // The knob off: the same slow handler finishes and is answered.
    let lenient_limits = LambdaLimits::new(&LimitSettings {
        timeouts: false,
        ..LimitSettings::default()
    });
    let lenient = serve(
        gateway_with(&stack, queue.clone())
            .await
            .with_limits(lenient_limits),
    )
    .await;
    let buying = tokio::spawn(async move { lenient.buy(&sale, "slow-2").await });
    assert!(eventually(Duration::from_secs(20), || async { queue.entered() == 2 }).await);
    queue.open();
    let (status, body) = buying.await.unwrap();
    assert_eq!(status, 202, "{body}");
    assert_eq!(queue.sent(), 1);
}

#[tokio::test]
async fn a_purchase_over_the_functions_concurrency_is_refused() {
    let (stack, sale) = prepared().await;
    let queue = SlowQueue::held();
    // One slot, no timeout: the first purchase holds it as long as the
    // test keeps the queue closed.
    let limits = LambdaLimits::default().with(
        FunctionLimit::template(Function::Purchase)
            .with_timeout(None)
            .with_concurrency(Some(1)),
    );
    let strict = Arc::new(
        serve(
            gateway_with(&stack, queue.clone())
                .await
                .with_limits(limits),
        )
        .await,
    );
    let first = tokio::spawn({
        let (strict, sale) = (strict.clone(), sale.clone());
        async move { strict.buy(&sale, "held-1").await }
    });
    assert!(eventually(Duration::from_secs(20), || async { queue.entered() == 1 }).await);
    let (status, body) = strict.buy(&sale, "held-2").await;
    assert_eq!(
        (status, &body),
        (500, &json!({"message": INTERNAL_ERROR})),
        "{body}"
    );
    assert_eq!(queue.entered(), 1, "the refused purchase never ran");
    queue.open();
    let (status, body) = first.await.unwrap();
    assert_eq!(status, 202, "{body}");
    // The slot is back.
    assert_eq!(strict.buy(&sale, "held-3").await.0, 202);

    // The knob off: two purchases run at once.
    let queue = SlowQueue::held();
    let lenient_limits = LambdaLimits::new(&LimitSettings {
        account_concurrency: 0,
        ..LimitSettings::default()
    });
    let lenient = Arc::new(
        serve(
            gateway_with(&stack, queue.clone())
                .await
                .with_limits(lenient_limits),
        )
        .await,
    );
    let both: Vec<_> = ["open-1", "open-2"]
        .into_iter()
        .map(|user| {
            let (lenient, sale) = (lenient.clone(), sale.clone());
            tokio::spawn(async move { lenient.buy(&sale, user).await })
        })
        .collect();
    assert!(eventually(Duration::from_secs(20), || async { queue.entered() == 2 }).await);
    queue.open();
    for buy in both {
        let (status, body) = buy.await.unwrap();
        assert_eq!(status, 202, "{body}");
    }
}

#[tokio::test]
async fn the_api_answers_429_past_the_account_throttles_burst() {
    let (stack, _) = prepared().await;
    // A burst of 3 and a rate so low no token comes back during the test.
    let strict = serve(
        gateway_with(&stack, SlowQueue::held())
            .await
            .with_api_throttle(ApiThrottle::with_rate(0.001, 3)),
    )
    .await;
    for _ in 0..3 {
        assert_eq!(strict.get("/health").await.0, 200);
    }
    let (status, body) = strict.get("/health").await;
    assert_eq!(
        (status, &body),
        (429, &json!({"message": "Too Many Requests"})),
        "{body}"
    );
    assert_eq!(strict.get("/sales/any").await.0, 429);
    // The pages are not API Gateway's (files in the pages bucket on AWS).
    assert_eq!(strict.get("/config.js").await.0, 200);

    // The knob off: every request passes.
    let lenient = serve(
        gateway_with(&stack, SlowQueue::held())
            .await
            .with_api_throttle(ApiThrottle::new(&LimitSettings {
                api_rate_per_sec: 0.0,
                ..LimitSettings::default()
            })),
    )
    .await;
    for _ in 0..10 {
        assert_eq!(lenient.get("/health").await.0, 200);
    }
}

/// A handler that notes each record's `ApproximateReceiveCount` and, once
/// `gate` is open (a permit, given back on drop), answers that the whole
/// batch succeeded.
fn noting_handler(
    gate: Arc<Semaphore>,
    seen: Arc<Mutex<Vec<String>>>,
) -> impl Fn(
    aws_lambda_events::event::sqs::SqsEvent,
) -> std::pin::Pin<
    Box<
        dyn std::future::Future<
                Output = Result<aws_lambda_events::event::sqs::SqsBatchResponse, String>,
            > + Send,
    >,
> + Clone
+ Send
+ Sync
+ 'static {
    move |event| {
        let (seen, gate) = (seen.clone(), gate.clone());
        Box::pin(async move {
            for record in &event.records {
                let count = record.attributes.get("ApproximateReceiveCount").cloned();
                seen.lock().unwrap().push(count.unwrap_or_default());
            }
            drop(gate.acquire().await);
            Ok(Default::default())
        })
    }
}

/// A fresh queue with this visibility timeout holding one message, and its
/// ARN.
async fn queue_with_one_message(
    sqs: &aws_sdk_sqs::Client,
    visibility_secs: u32,
) -> (String, String) {
    let name = unique("lim-es");
    let queues = emulator::ensure_queues(sqs, &name, &format!("{name}-dlq"), visibility_secs)
        .await
        .unwrap();
    sqs.send_message()
        .queue_url(&queues.orders_url)
        .message_body("order")
        .send()
        .await
        .unwrap();
    let arn = queue_arn(sqs, &queues.orders_url).await.unwrap();
    (queues.orders_url, arn)
}

#[tokio::test]
async fn a_writer_batch_past_its_timeout_fails_whole_and_comes_back() {
    let sdk = aws::sdk_config(aws::Caller::Tool, Duration::from_secs(20)).await;
    let sqs = aws::sqs(&sdk);

    // A short visibility timeout, so the failed batch is back soon.
    let (url, arn) = queue_with_one_message(&sqs, 1).await;
    let mut settings = EventSourceSettings::template(&url, &arn, "us-east-1");
    settings.maximum_concurrency = 1;
    settings.batching_window = Duration::ZERO;
    settings.limit = Some(
        FunctionLimit::template(Function::OrderWriter)
            .with_timeout(Some(Duration::from_millis(200))),
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    // Never opened: the handler outlives its 200 ms whatever the pace.
    let held = Arc::new(Semaphore::new(0));
    let source = EventSource::spawn(sqs.clone(), settings, noting_handler(held, seen.clone()));
    // Redelivered after the visibility timeout, its receive count risen.
    let came_back = eventually(Duration::from_secs(30), || async {
        seen.lock().unwrap().iter().any(|count| count == "2")
    })
    .await;
    let counts = source.stop().await;
    assert!(came_back, "{:?} {counts}", seen.lock().unwrap());
    assert!(counts.timed_out >= 1, "{counts}");
    assert_eq!(counts.records_deleted, 0, "{counts}");

    // The knob off: the same slow handler's batch is deleted, received once
    // (a visibility timeout longer than the handler, so nothing else could
    // bring it back).
    let (url, arn) = queue_with_one_message(&sqs, 30).await;
    let mut settings = EventSourceSettings::template(&url, &arn, "us-east-1");
    settings.maximum_concurrency = 1;
    settings.batching_window = Duration::ZERO;
    settings.limit = Some(FunctionLimit::template(Function::OrderWriter).with_timeout(None));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let gate = Arc::new(Semaphore::new(0));
    let source = EventSource::spawn(
        sqs.clone(),
        settings,
        noting_handler(gate.clone(), seen.clone()),
    );
    // Held while running, then let go: nothing cuts it.
    assert!(
        eventually(Duration::from_secs(20), || async {
            !seen.lock().unwrap().is_empty()
        })
        .await
    );
    gate.add_permits(1);
    let stats = source.stats().clone();
    let deleted = eventually(Duration::from_secs(30), || async {
        stats.snapshot().records_deleted == 1
    })
    .await;
    let counts = source.stop().await;
    assert!(deleted, "{counts}");
    assert_eq!(counts.timed_out, 0, "{counts}");
    assert_eq!(*seen.lock().unwrap(), ["1"]);
}
