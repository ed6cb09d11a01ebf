//! The order-writer drain: order messages sent straight to a fresh queue,
//! drained by the local SQS event source calling the real handler, and the
//! DynamoDB writes it spent per order.

use crate::handler::queue_depth;
use crate::{BoxError, REDIS_TIMEOUT, bench_config};
use seckill_infra::emulator;
use seckill_infra::event_source::{self, EventSource, EventSourceCounts, EventSourceSettings};
use seckill_infra::local::writer_handler;
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::memory::test_sale;
use seckill_shared::adapters::redis::RedisStock;
use seckill_shared::clock;
use seckill_shared::domain::{OrderId, OrderMessage, Quantity, Sale, UserId};
use seckill_shared::ports::StockLoading;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// One run of the order-writer drain: its own sale of `orders` units, its
/// own tables and queue, `orders` messages drained at `batch_size`.
pub(crate) struct DrainPlan {
    label: &'static str,
    /// Part of every name the run creates.
    key: &'static str,
    batch_size: i32,
    orders: u32,
}

/// The template's mapping: batches of 10.
pub(crate) static DRAIN_BATCHED: DrainPlan = DrainPlan {
    label: "batch 10 (template)",
    key: "d10",
    batch_size: 10,
    orders: 1_000,
};

/// The reference: one order per invocation, so one transaction per order.
pub(crate) static DRAIN_SINGLE: DrainPlan = DrainPlan {
    label: "batch 1 (one order per call)",
    key: "d1",
    batch_size: 1,
    orders: 1_000,
};

/// How long one drain may take before it counts as failed.
pub(crate) const DRAIN_DEADLINE: Duration = Duration::from_secs(180);
pub(crate) const DRAIN_POLL: Duration = Duration::from_millis(50);
/// Shorter than the template's 60 s: moto copies a table once per item of
/// a transaction, so near the end of a drain (2,000 items: orders and their
/// buyers' records) a 21-item transaction can outlast the writer's attempt
/// timeout; that batch is retried (as Lambda would), and at 60 s its retry
/// would land after the drain's deadline. An emulator limit, worked around
/// here: DynamoDB takes tens of milliseconds for such a transaction.
pub(crate) const DRAIN_VISIBILITY_SECS: u32 = 20;

/// What every drain run shares.
pub(crate) struct DrainEnv<'a> {
    pub(crate) tag: &'a str,
    pub(crate) redis_url: &'a str,
    pub(crate) sqs: &'a aws_sdk_sqs::Client,
    pub(crate) db: &'a aws_sdk_dynamodb::Client,
    pub(crate) region: String,
}

/// The figures of one drain run.
pub(crate) struct DrainRow {
    plan: &'static DrainPlan,
    /// Orders in the orders table after the run (a Scan count).
    written: u64,
    write_requests: u64,
    sale_item_updates: u64,
    /// Items written by those requests (orders, buyer records, sale items).
    items_written: u64,
    /// From the source's start to the sale item's `sold` reaching the
    /// stock; `None` if it did not within the deadline.
    wall: Option<Duration>,
    enqueue: Duration,
    counts: EventSourceCounts,
}

impl DrainRow {
    fn per_order(&self, n: u64) -> f64 {
        n as f64 / f64::from(self.plan.orders)
    }
}

/// Sends `plan.orders` order messages straight to a fresh queue, drains them
/// through the real order-writer handler behind the local SQS event source
/// and counts what reached DynamoDB.
pub(crate) async fn drain(
    env: &DrainEnv<'_>,
    plan: &'static DrainPlan,
    failures: &mut Vec<String>,
) -> Result<DrainRow, BoxError> {
    let name = format!("{}-{}", env.tag, plan.key);
    let (sales_table, orders_table) = (format!("{name}-sales"), format!("{name}-orders"));
    emulator::ensure_tables(env.db, &sales_table, &orders_table).await?;
    let queues = emulator::ensure_queues(
        env.sqs,
        &format!("{name}-q"),
        &format!("{name}-dlq"),
        DRAIN_VISIBILITY_SECS,
    )
    .await?;
    let queue_arn = event_source::queue_arn(env.sqs, &queues.orders_url).await?;
    let sale = test_sale(&name, plan.orders, 1)?;
    DynamoCatalog::new(env.db.clone(), &sales_table)
        .create_sale(&sale)
        .await?;
    // The sale is live in Redis as in a real sale; the messages below skip
    // the purchase, so it holds no reservations for the writer to mark.
    RedisStock::connect_lazy(env.redis_url, REDIS_TIMEOUT)?
        .load_sale(&sale, clock::now_ms())
        .await?;
    let started = Instant::now();
    enqueue(env.sqs, &queues.orders_url, &sale, plan.orders).await?;
    let enqueue_wall = started.elapsed();

    let config = bench_config(
        env.redis_url,
        &queues.orders_url,
        &sales_table,
        &orders_table,
        Some(emulator::MAX_RECEIVE_COUNT),
    );
    let writer = Arc::new(order_writer::wire(&config).await?);
    let mut settings =
        EventSourceSettings::template(&queues.orders_url, queue_arn, env.region.clone());
    settings.batch_size = plan.batch_size;
    // One poller, not the template's five: moto answers concurrent
    // TransactWriteItems on one table with sporadic 500s (a thread-safety
    // limit of the emulator, not of DynamoDB). The writer would handle them
    // (the batch is retried after the visibility timeout), but each retry
    // adds writes the real service would not see and a minute of waiting.
    settings.maximum_concurrency = 1;

    let target = i64::from(plan.orders);
    let started = Instant::now();
    let source = EventSource::spawn(env.sqs.clone(), settings, writer_handler(writer.clone()));
    let deadline = started + DRAIN_DEADLINE;
    let mut sold = 0;
    let mut last_error = None;
    let mut wall = None;
    while Instant::now() < deadline {
        // A failed poll (the emulator is busy) only delays the next one.
        match sale_counters(env.db, &sales_table, &sale).await {
            Ok((_, now_sold)) => sold = now_sold,
            Err(err) => last_error = Some(err.to_string()),
        }
        if sold >= target {
            wall = Some(started.elapsed());
            break;
        }
        tokio::time::sleep(DRAIN_POLL).await;
    }
    // The last batch's delete follows its write: wait for it too.
    let mut left = u64::MAX;
    while Instant::now() < deadline {
        match queue_depth(env.sqs, &queues.orders_url).await {
            Ok(0) => {
                left = 0;
                break;
            }
            Ok(n) => left = n,
            Err(err) => last_error = Some(err.to_string()),
        }
        tokio::time::sleep(DRAIN_POLL).await;
    }
    let counts = source.stop().await;

    let label = plan.label;
    let (available, sold) = sale_counters(env.db, &sales_table, &sale).await?;
    let written = count_items(env.db, &orders_table).await?;
    let last_error = last_error.map_or_else(String::new, |e| format!("; last poll error: {e}"));
    if wall.is_none() {
        failures.push(format!(
            "{label}: the sale item's sold reached {sold} of {target} within {} s ({counts}){last_error}",
            DRAIN_DEADLINE.as_secs()
        ));
    }
    if (available, sold) != (0, target) {
        failures.push(format!(
            "{label}: the sale item holds available={available} sold={sold}, expected 0 and {target}"
        ));
    }
    if written != u64::from(plan.orders) {
        failures.push(format!(
            "{label}: the orders table holds {written} orders, expected {target}"
        ));
    }
    if left != 0 {
        failures.push(format!(
            "{label}: the queue still holds {} messages after the drain{last_error}",
            if left == u64::MAX {
                "an unknown number of".into()
            } else {
                left.to_string()
            }
        ));
    }
    let counters = &writer.orders().counters;
    Ok(DrainRow {
        plan,
        written,
        write_requests: counters.write_requests.load(Ordering::Relaxed),
        sale_item_updates: counters.sale_item_updates.load(Ordering::Relaxed),
        items_written: counters.items_written.load(Ordering::Relaxed),
        wall,
        enqueue: enqueue_wall,
        counts,
    })
}

/// `count` valid order messages for `sale`, one unit each for distinct
/// users, as the purchase function would send them; ten per
/// SendMessageBatch.
pub(crate) async fn enqueue(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    sale: &Sale,
    count: u32,
) -> Result<(), BoxError> {
    use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
    let reserved_at = clock::rfc3339_ms(clock::now_ms());
    let messages = (0..count)
        .map(|n| {
            let message = OrderMessage {
                v: OrderMessage::VERSION,
                order_id: OrderId::parse(&format!("{}-o{n}", sale.sale_id))?,
                sale_id: sale.sale_id.clone(),
                user_id: UserId::parse(&format!("u{n}"))?,
                quantity: Quantity::ONE,
                shard: 0,
                reserved_at: reserved_at.clone(),
            };
            Ok(serde_json::to_string(&message)?)
        })
        .collect::<Result<Vec<String>, BoxError>>()?;
    for chunk in messages.chunks(10) {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(i, body)| {
                SendMessageBatchRequestEntry::builder()
                    .id(format!("m{i}"))
                    .message_body(body)
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let out = sqs
            .send_message_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| aws_sdk_sqs::error::DisplayErrorContext(e).to_string())?;
        if !out.failed.is_empty() {
            return Err(format!("SendMessageBatch refused {:?}", out.failed).into());
        }
    }
    Ok(())
}

/// The sale item's `available` and `sold`, read consistently.
pub(crate) async fn sale_counters(
    db: &aws_sdk_dynamodb::Client,
    table: &str,
    sale: &Sale,
) -> Result<(i64, i64), BoxError> {
    use aws_sdk_dynamodb::types::AttributeValue;
    let item = db
        .get_item()
        .table_name(table)
        .key("saleId", AttributeValue::S(sale.sale_id.to_string()))
        .projection_expression("available, sold")
        .consistent_read(true)
        .send()
        .await
        .map_err(|e| aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string())?
        .item
        .ok_or_else(|| format!("sale {} is missing from {table}", sale.sale_id))?;
    let number = |name: &str| -> Result<i64, BoxError> {
        match item.get(name) {
            Some(AttributeValue::N(n)) => Ok(n.parse()?),
            other => Err(format!("{table}: {name} is {other:?}").into()),
        }
    };
    Ok((number("available")?, number("sold")?))
}

/// Orders in the orders table (a consistent Scan with `Select: COUNT`).
pub(crate) async fn count_items(
    db: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<u64, BoxError> {
    let mut total = 0;
    // Orders only: the table also holds a ledger record per buyer, which
    // has no `saleId`.
    let mut pages = db
        .scan()
        .table_name(table)
        .filter_expression("attribute_exists(saleId)")
        .select(aws_sdk_dynamodb::types::Select::Count)
        .consistent_read(true)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string())?;
        total += u64::try_from(page.count).unwrap_or(0);
    }
    Ok(total)
}

pub(crate) fn print_drain(rows: &[DrainRow]) {
    println!();
    println!(
        "{:<30} {:>7} {:>8} {:>13} {:>18} {:>12} {:>9} {:>12} {:>7} {:>13}",
        "order-writer drain",
        "orders",
        "written",
        "writes/order",
        "sale-item upd/ord",
        "items/order",
        "orders/s",
        "invocations",
        "failed",
        "batch errors"
    );
    for row in rows {
        println!(
            "{:<30} {:>7} {:>8} {:>13.2} {:>18.2} {:>12.2} {:>9} {:>12} {:>7} {:>13}",
            row.plan.label,
            row.plan.orders,
            row.written,
            row.per_order(row.write_requests),
            row.per_order(row.sale_item_updates),
            row.per_order(row.items_written),
            row.wall.map_or_else(
                || "-".into(),
                |w| format!("{:.1}", f64::from(row.plan.orders) / w.as_secs_f64())
            ),
            row.counts.invocations,
            row.counts.records_failed,
            row.counts.batch_errors,
        );
    }
    println!();
    println!(
        "Each row: that many order messages (v1, distinct users, 1 unit each) sent straight to a fresh queue for a fresh sale of as many units (fresh sales and orders tables, sale loaded in Redis without reservations, so the writer's reservation marks find none and only log it), drained by the local SQS event source calling order_writer::handler in-process, the code Lambda runs."
    );
    println!(
        "writes/order: DynamoDB write requests (TransactWriteItems, PutItem, UpdateItem) per order; sale-item upd/ord: writes of the hot sale item per order (DynamoDB takes at most 1,000 write units a second on one partition); items/order: items those requests write per order (the order, its buyer's ledger record, the sale item's share; before the per-buyer record it was 1.10 at batch 10 and 2.00 one by one). orders/s: from the source's start until the sale item's sold reached the stock."
    );
    if let [batched, single, ..] = rows {
        let (b, s) = (
            batched.per_order(batched.sale_item_updates),
            single.per_order(single.sale_item_updates),
        );
        if b > 0.0 {
            println!(
                "Batch 10 writes the sale item {:.1}x less often per order than one order per call ({b:.2} vs {s:.2}; the target is 0.10).",
                s / b
            );
        }
    }
    println!(
        "Event source: the template's settings (1 s batching window) but maximum_concurrency = 1, not 5: moto answers concurrent TransactWriteItems on one table with sporadic 500s, which would add emulator-made retries."
    );
    println!(
        "Emulator caveat: orders/s measures the emulator (make bench runs moto through infra/moto/server.py; moto's own server deep-copies each table a transaction touches, once per item, and gets slower as a table grows); the per-order write counts are the figures that carry over to DynamoDB."
    );
    for row in rows {
        let per_call = row.wall.filter(|_| row.counts.invocations > 0).map_or_else(
            || "-".into(),
            |w| {
                format!(
                    "{:.1}",
                    w.as_secs_f64() * 1000.0 / row.counts.invocations as f64
                )
            },
        );
        println!(
            "  {}: {} messages sent in {:.2} s (not timed); drained in {}; {per_call} ms per invocation; event source: {}",
            row.plan.label,
            row.plan.orders,
            row.enqueue.as_secs_f64(),
            row.wall
                .map_or_else(|| "-".into(), |w| format!("{:.1} s", w.as_secs_f64())),
            row.counts,
        );
    }
}
