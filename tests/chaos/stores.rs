//! A scenario's stores: its sale, queues and tables, and what it reads and
//! moves there.

use super::*;

/// The stores of one scenario: a sale, its queue and tables, the writer.
pub(crate) struct Stores {
    pub(crate) config: seckill_shared::config::Config,
    pub(crate) sale: Sale,
    pub(crate) sqs: aws_sdk_sqs::Client,
    pub(crate) db: aws_sdk_dynamodb::Client,
    pub(crate) queue_url: String,
    pub(crate) dlq_url: String,
    pub(crate) checker: seckill_shared::wire::LiveChecker,
}

impl Stores {
    /// Queue and tables on the emulator at `endpoint`, a sale of `stock`
    /// units (one per buyer) in DynamoDB and in the Redis at `redis_url`.
    pub(crate) async fn open(
        endpoint: &str,
        redis_url: &str,
        stock: u32,
        visibility: u32,
    ) -> Stores {
        Self::open_with(endpoint, redis_url, stock, visibility, |_| {}).await
    }

    pub(crate) async fn open_with(
        endpoint: &str,
        redis_url: &str,
        stock: u32,
        visibility: u32,
        tweak: impl FnOnce(&mut Sale),
    ) -> Stores {
        let sdk = aws::loader(aws::Caller::Tool, Duration::from_secs(20))
            .endpoint_url(endpoint)
            .load()
            .await;
        let (sqs, db) = (aws::sqs(&sdk), aws::dynamodb(&sdk));
        let name = unique("c");
        let queues = emulator::ensure_queues(&sqs, &name, &format!("{name}-dlq"), visibility)
            .await
            .unwrap();
        let (sales, orders) = (format!("{name}-sales"), format!("{name}-orders"));
        emulator::ensure_tables(&db, &sales, &orders).await.unwrap();
        let config = seckill_shared::config::Config {
            redis_url: redis_url.into(),
            orders_queue_url: Some(queues.orders_url.clone()),
            orders_dlq_url: Some(queues.dlq_url.clone()),
            sales_table: sales.clone(),
            orders_table: orders.clone(),
            // The production bound: a stuck Redis answers 503 this fast.
            redis_timeout: Duration::from_millis(250),
            sqs_timeout: Duration::from_millis(1_500),
            sale_cache_ttl: Duration::from_secs(60),
            prewarm_lead: Duration::from_secs(600),
            // The stack's strict layer's lag (make chaos: tens of seconds;
            // make test: none): the rebuild waits it out after a loss.
            queue_count_lag: Duration::from_secs(
                std::env::var("QUEUE_COUNT_LAG_SECONDS")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
            ),
            rate_limits: GENEROUS_LIMITS,
            gate_secret: None,
            payment_secret: None,
            edge_secret: None,
            secrets: Default::default(),
            metrics_namespace: seckill_shared::observe::metrics::DEFAULT_NAMESPACE.into(),
            max_receive_count: Some(emulator::MAX_RECEIVE_COUNT),
            // No payment provider here: the stand-in pays any order.
            stand_in_payments: seckill_shared::config::StandInPayments::Any,
        };
        let mut sale = live_sale(stock, 1);
        tweak(&mut sale);
        let catalog = DynamoCatalog::new(db.clone(), &sales);
        assert!(catalog.create_sale(&sale).await.unwrap());
        let stock_store = RedisStock::connect_lazy(redis_url, Duration::from_secs(2)).unwrap();
        // Marked loaded as prewarm marks it: the redis-killed scenario
        // rebuilds it as a sale that was loaded once.
        seckill_shared::app::jobs::mark_and_load(&catalog, &stock_store, &sale, clock::now_ms())
            .await
            .unwrap();
        let checker = InvariantChecker::new(
            stock_store,
            catalog,
            DynamoOrders::new(db.clone(), &orders, &sales),
            SqsInspector::new(
                sqs.clone(),
                queues.orders_url.clone(),
                Some(queues.dlq_url.clone()),
            ),
        );
        Stores {
            config,
            sale,
            sqs,
            db,
            queue_url: queues.orders_url,
            dlq_url: queues.dlq_url,
            checker,
        }
    }

    pub(crate) fn sale_id(&self) -> &str {
        self.sale.sale_id.as_str()
    }

    /// The purchase function's service, its AWS calls sent to `endpoint`.
    pub(crate) async fn purchase(&self, endpoint: &str) -> Arc<LivePurchase> {
        let sdk = aws::loader(aws::Caller::Tool, self.config.sqs_timeout)
            .endpoint_url(endpoint)
            .load()
            .await;
        let stock = RedisStock::connect_lazy(&self.config.redis_url, self.config.redis_timeout)
            .unwrap()
            .with_rate_limits(GENEROUS_LIMITS);
        let queue = SqsQueue::new(aws::sqs(&sdk), &self.queue_url);
        let catalog = CachedCatalog::new(
            DynamoCatalog::new(aws::dynamodb(&sdk), &self.config.sales_table),
            self.config.sale_cache_ttl,
        );
        Arc::new(PurchaseService::new(stock, queue, catalog))
    }

    /// The purchase service as the function wires it: a purchase that finds
    /// the live sale's keys missing starts its rebuild at once.
    pub(crate) async fn purchase_rebuilding(&self, endpoint: &str) -> Arc<LivePurchase> {
        let sdk = aws::loader(aws::Caller::Tool, self.config.sqs_timeout)
            .endpoint_url(endpoint)
            .load()
            .await;
        let stock = RedisStock::connect_lazy(&self.config.redis_url, self.config.redis_timeout)
            .unwrap()
            .with_rate_limits(GENEROUS_LIMITS);
        let db = aws::dynamodb(&sdk);
        let jobs = seckill_shared::app::jobs::Jobs::new(
            stock.clone(),
            DynamoCatalog::new(db.clone(), &self.config.sales_table),
            DynamoOrders::new(
                db.clone(),
                &self.config.orders_table,
                &self.config.sales_table,
            ),
            Some(SqsInspector::new(
                aws::sqs(&sdk),
                self.queue_url.clone(),
                Some(self.dlq_url.clone()),
            )),
            self.config.prewarm_lead,
        )
        .with_settle(self.config.rebuild_settle());
        let queue = SqsQueue::new(aws::sqs(&sdk), &self.queue_url);
        let catalog = CachedCatalog::new(
            DynamoCatalog::new(db, &self.config.sales_table),
            self.config.sale_cache_ttl,
        );
        Arc::new(PurchaseService::new(stock, queue, catalog).with_rebuild(Arc::new(jobs)))
    }

    /// The order-writer as the template wires it, on these tables.
    pub(crate) fn writer(&self) -> Arc<order_writer::LiveWriter> {
        let stock =
            RedisStock::connect_lazy(&self.config.redis_url, Duration::from_secs(2)).unwrap();
        let orders = DynamoOrders::new(
            self.db.clone(),
            &self.config.orders_table,
            &self.config.sales_table,
        );
        let catalog = CachedCatalog::new(
            DynamoCatalog::new(self.db.clone(), &self.config.sales_table),
            Duration::from_secs(30),
        );
        Arc::new(seckill_shared::app::order_writer::OrderWriter::new(
            orders, stock, catalog,
        ))
    }

    /// Event-source settings with one poller: moto applies concurrent
    /// transactions on one sale item without the isolation DynamoDB gives
    /// (an emulator limit, worked around here, not in the writer).
    pub(crate) async fn source_settings(&self) -> EventSourceSettings {
        let arn = queue_arn(&self.sqs, &self.queue_url).await.unwrap();
        let mut settings = EventSourceSettings::template(&self.queue_url, &arn, "us-east-1");
        settings.maximum_concurrency = 1;
        settings.wait_time_seconds = 1;
        settings
    }

    /// The writer polling the queue, as Lambda's event source mapping does.
    pub(crate) async fn start_writer(&self) -> EventSource {
        EventSource::spawn(
            self.sqs.clone(),
            self.source_settings().await,
            seckill_infra::local::writer_handler(self.writer()),
        )
    }

    /// The same, each batch written in its `turn`: whatever else writes the
    /// tables (the unpaid release, payments, reconcile) takes the same turn,
    /// since moto applies concurrent transactions without isolation, and
    /// undoes a cancelled one by restoring a copy of every table it touched
    /// (a write made meanwhile is lost with it).
    pub(crate) async fn start_writer_in_turn(
        &self,
        turn: Arc<tokio::sync::Mutex<()>>,
    ) -> EventSource {
        let inner = seckill_infra::local::writer_handler(self.writer());
        let handler = move |event: aws_lambda_events::event::sqs::SqsEvent| {
            let (inner, turn) = (inner.clone(), turn.clone());
            async move {
                let _turn = turn.lock_owned().await;
                inner(event).await
            }
        };
        EventSource::spawn(self.sqs.clone(), self.source_settings().await, handler)
    }

    pub(crate) async fn queue_empty(&self) -> bool {
        let d = seckill_shared::adapters::sqs::depth(&self.sqs, &self.queue_url)
            .await
            .unwrap();
        d.total() == 0
    }

    pub(crate) async fn rows(&self) -> Vec<seckill_shared::domain::orders::Order> {
        self.checker
            .orders()
            .all_orders_of_sale(&self.sale.sale_id)
            .await
            .unwrap()
    }

    /// Polls until the queue is empty and every accepted order has a row.
    pub(crate) async fn settle(&self, accepted: &[OrderId]) {
        let want: HashSet<&str> = accepted.iter().map(OrderId::as_str).collect();
        let settled = eventually(Duration::from_secs(120), || async {
            if !self.queue_empty().await {
                return false;
            }
            let rows = self.rows().await;
            let have: HashSet<&str> = rows.iter().map(|o| o.order_id.as_str()).collect();
            want.iter().all(|id| have.contains(id))
        })
        .await;
        if !settled {
            let rows = self.rows().await;
            let have: HashSet<&str> = rows.iter().map(|o| o.order_id.as_str()).collect();
            let missing = want.iter().filter(|id| !have.contains(*id)).count();
            let queue = seckill_shared::adapters::sqs::depth(&self.sqs, &self.queue_url).await;
            let dlq = seckill_shared::adapters::sqs::depth(&self.sqs, &self.dlq_url).await;
            panic!(
                "the writer did not write every accepted order: {missing} of {} missing, queue {queue:?}, DLQ {dlq:?}",
                want.len()
            );
        }
    }

    /// Reconcile as the schedule would run it `ahead` from now.
    pub(crate) async fn reconcile_at(
        &self,
        ahead: Duration,
    ) -> seckill_shared::app::reconcile::ReconcileReport {
        let reconciler = Reconciler::new(
            self.checker.stock().clone(),
            self.checker.catalog().clone(),
            self.checker.orders().clone(),
            SqsQueue::new(self.sqs.clone(), &self.queue_url),
            SqsInspector::new(
                self.sqs.clone(),
                &self.queue_url,
                Some(self.dlq_url.clone()),
            ),
            ReconcileSettings::default(),
        );
        let now = clock::now_ms() + i64::try_from(ahead.as_millis()).unwrap();
        reconciler
            .reconcile_sale(&self.sale.sale_id, now)
            .await
            .unwrap()
            .unwrap()
    }

    /// The checker's findings. Retried until the stores answer: after a
    /// Redis restart the first call on a connection made before it fails
    /// once while the connection manager reconnects.
    pub(crate) async fn violations(&self, accepted: &[OrderId]) -> Vec<Violation> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self.checker.check_sale(&self.sale.sale_id, accepted).await {
                Ok(found) => return found.unwrap(),
                Err(err) => assert!(Instant::now() < deadline, "checker: {err}"),
            }
        }
    }

    /// The checker's verdict plus the scenario-wide promises: every 202 is
    /// a row, the whole stock sold, none twice.
    pub(crate) async fn assert_sound(&self, scenario: &str, buyers: &Buyers, extra: &str) {
        let accepted = buyers.accepted();
        let violations = self.violations(&accepted).await;
        let rows = self.rows().await;
        let live: Vec<_> = rows
            .iter()
            .filter(|o| matches!(o.status, OrderStatus::PendingPayment | OrderStatus::Paid))
            .collect();
        let units: u32 = live.iter().map(|o| o.quantity.get()).sum();
        let tally = buyers.tally();
        let released = buyers.outcomes().iter().filter(|o| o.status == 503).count();
        println!(
            "chaos {scenario}: tried={} accepted={} orders_written={} units_sold={units}/{} released_or_refused_503={released} violations={} {extra}\n  answers: {tally:?}",
            buyers.tried.load(Ordering::SeqCst),
            accepted.len(),
            rows.len(),
            self.sale.total_stock,
            violations.len(),
        );
        assert_eq!(violations, vec![], "{scenario}: invariants");
        assert_eq!(
            units, self.sale.total_stock,
            "{scenario}: the whole stock sold, no more"
        );
        let ids: HashSet<&str> = rows.iter().map(|o| o.order_id.as_str()).collect();
        assert_eq!(ids.len(), rows.len(), "{scenario}: no order twice");
        let users: HashSet<&str> = live.iter().map(|o| o.user_id.as_str()).collect();
        assert_eq!(
            users.len(),
            live.len(),
            "{scenario}: nobody over the limit of 1"
        );
    }
}

impl Stores {
    /// Moves `count` messages from one queue to another (receive, send,
    /// delete), as SQS's redrive to the DLQ or an operator's redrive back
    /// does; returns their order ids. Polls until that many were taken.
    pub(crate) async fn move_messages(&self, from: &str, to: &str, count: usize) -> Vec<String> {
        let mut moved = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while moved.len() < count {
            assert!(
                Instant::now() < deadline,
                "only {} of {count} messages to move",
                moved.len()
            );
            let got = self
                .sqs
                .receive_message()
                .queue_url(from)
                .max_number_of_messages(i32::try_from(count - moved.len()).unwrap().min(10))
                .wait_time_seconds(1)
                .send()
                .await
                .unwrap()
                .messages
                .unwrap_or_default();
            for m in got {
                let body = m.body.unwrap();
                self.sqs
                    .send_message()
                    .queue_url(to)
                    .message_body(&body)
                    .send()
                    .await
                    .unwrap();
                self.sqs
                    .delete_message()
                    .queue_url(from)
                    .receipt_handle(m.receipt_handle.unwrap())
                    .send()
                    .await
                    .unwrap();
                let body: serde_json::Value = serde_json::from_str(&body).unwrap();
                moved.push(body["orderId"].as_str().unwrap().to_owned());
            }
        }
        moved
    }
}
