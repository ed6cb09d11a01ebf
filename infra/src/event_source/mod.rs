//! The local stand-in for Lambda's SQS event source mapping: pollers that
//! receive from the queue, batch like the mapping does, invoke the same
//! handler code Lambda runs with a real-shaped `SqsEvent`, and delete what
//! the handler did not report as failed (`ReportBatchItemFailures`).
//!
//! What is deliberately left to the queue, as in AWS:
//! - Failed records are neither deleted nor touched: they reappear when the
//!   queue's visibility timeout runs out, exactly as Lambda leaves them.
//! - Dead-lettering: the emulator (moto) applies the queue's redrive policy
//!   itself (a message already received `maxReceiveCount` times moves to the
//!   DLQ on the next receive), just as SQS does in AWS. Moving messages here
//!   would double-count receives and diverge from what the function sees in
//!   production.
//!
//! # Layout
//!
//! - [`polling`]: the pollers: receive, gather a batch within the batching
//!   window, hand it over, settle, repeat.
//! - [`batching`]: the `SqsEvent` Lambda would build (a record per message)
//!   and the invocation of the handler with it, under the function's
//!   `Timeout` and concurrency ([`EventSourceSettings::limit`]): a timed-out
//!   or throttled invocation fails its whole batch, which comes back after
//!   the visibility timeout with its receive count one higher.
//! - [`deletion`]: what the handler's answer means for the queue (delete,
//!   keep, retry) and handing undelivered records back on a stop.
//! - here: the settings, the counters, [`run`] and [`EventSource`].

mod batching;
mod deletion;
mod polling;
#[cfg(test)]
mod tests;

pub use batching::to_record;
pub use deletion::{Settlement, settlement};

use crate::lambda_limits::{Function, FunctionLimit};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use aws_sdk_sqs::types::QueueAttributeName;
use polling::poll;
use seckill_shared::adapters::sqs::describe;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};

/// SQS caps a receive and a delete batch at ten messages.
const SQS_MAX_BATCH: usize = 10;
/// Lambda's upper bound for `BatchSize` on a standard queue.
const MAX_BATCH_SIZE: i32 = 10_000;
/// SQS caps a long poll at twenty seconds.
const SQS_MAX_WAIT_SECONDS: i32 = 20;
/// Pause after a failed receive, so an emulator that is down is not hammered;
/// short, so the pollers pick up again soon after it comes back.
const RECEIVE_BACKOFF: Duration = Duration::from_millis(200);
/// Headroom over the long poll for the receive's own timeout: the network
/// round trip and a slow emulator must not turn a normal long poll into an
/// error.
const RECEIVE_TIMEOUT_MARGIN: Duration = Duration::from_secs(5);

/// How the mapping polls and batches; the fields mirror `template.yaml`.
#[derive(Debug, Clone)]
pub struct EventSourceSettings {
    pub queue_url: String,
    /// Goes into every record's `eventSourceARN`.
    pub queue_arn: String,
    /// Goes into every record's `awsRegion`.
    pub region: String,
    /// `BatchSize`: records per invocation, clamped to 1..=10,000 as Lambda
    /// allows (above 10 it takes several receives, so give it a window).
    pub batch_size: i32,
    /// `MaximumBatchingWindowInSeconds`: how long to keep gathering after the
    /// first record of a batch arrived.
    pub batching_window: Duration,
    /// `ScalingConfig.MaximumConcurrency`: pollers, each invoking the
    /// handler sequentially (at least 1).
    pub maximum_concurrency: usize,
    /// Long-poll length, clamped to 1..=20. Lambda always long-polls; short
    /// here so a stop is noticed soon even by a receive that cannot be cut
    /// short on the emulator side.
    pub wait_time_seconds: i32,
    /// The function's `Timeout` and concurrency (`ReservedConcurrentExecutions`)
    /// each invocation runs under; `None`: neither.
    pub limit: Option<FunctionLimit>,
}

impl EventSourceSettings {
    /// The settings of the order-writer's mapping in `template.yaml`
    /// (batch of 10, 1 s window, 5 concurrent), with a 1 s long poll, under
    /// the order-writer's limits (10 s `Timeout`, 5 reserved).
    pub fn template(
        queue_url: impl Into<String>,
        queue_arn: impl Into<String>,
        region: impl Into<String>,
    ) -> Self {
        Self {
            queue_url: queue_url.into(),
            queue_arn: queue_arn.into(),
            region: region.into(),
            batch_size: 10,
            batching_window: Duration::from_secs(1),
            maximum_concurrency: 5,
            wait_time_seconds: 1,
            limit: Some(FunctionLimit::template(Function::OrderWriter)),
        }
    }

    fn batch_size(&self) -> usize {
        // Clamped to a positive range first, so the cast is lossless.
        self.batch_size.clamp(1, MAX_BATCH_SIZE) as usize
    }

    fn wait_time_seconds(&self) -> i32 {
        // Never 0: a short poll on an empty queue would spin the poller.
        self.wait_time_seconds.clamp(1, SQS_MAX_WAIT_SECONDS)
    }
}

/// The ARN of a queue, for [`EventSourceSettings::queue_arn`].
pub async fn queue_arn(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> Result<String, String> {
    sqs.get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| describe(&e))?
        .attributes
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .ok_or_else(|| format!("no ARN for {queue_url}"))
}

/// Live counters of a running event source; read them at any time.
#[derive(Debug, Default)]
pub struct EventSourceStats {
    /// Handler invocations (one per batch).
    pub invocations: AtomicU64,
    /// Records handed to the handler.
    pub records_delivered: AtomicU64,
    /// Records deleted from the queue after the handler.
    pub records_deleted: AtomicU64,
    /// Records the handler listed in `batchItemFailures` (left to reappear).
    pub records_failed: AtomicU64,
    /// Invocations that failed as a whole: `Err`, a panic, a response
    /// Lambda would reject (unknown or empty item identifier), a timeout or
    /// a throttle.
    pub batch_errors: AtomicU64,
    /// Of those, invocations stopped at the function's `Timeout`.
    pub timed_out: AtomicU64,
    /// Of those, invocations refused for the function's concurrency (the
    /// handler never ran).
    pub throttled: AtomicU64,
    /// Receives that failed (emulator down, timeout).
    pub receive_errors: AtomicU64,
    /// Deletes that failed; those records come back and are redelivered,
    /// which the idempotent handler absorbs.
    pub delete_errors: AtomicU64,
}

impl EventSourceStats {
    /// A consistent-enough copy for printing and assertions.
    pub fn snapshot(&self) -> EventSourceCounts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        EventSourceCounts {
            invocations: get(&self.invocations),
            records_delivered: get(&self.records_delivered),
            records_deleted: get(&self.records_deleted),
            records_failed: get(&self.records_failed),
            batch_errors: get(&self.batch_errors),
            timed_out: get(&self.timed_out),
            throttled: get(&self.throttled),
            receive_errors: get(&self.receive_errors),
            delete_errors: get(&self.delete_errors),
        }
    }
}

fn bump(counter: &AtomicU64, by: usize) {
    counter.fetch_add(by as u64, Ordering::Relaxed);
}

/// A copy of [`EventSourceStats`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventSourceCounts {
    pub invocations: u64,
    pub records_delivered: u64,
    pub records_deleted: u64,
    pub records_failed: u64,
    pub batch_errors: u64,
    pub timed_out: u64,
    pub throttled: u64,
    pub receive_errors: u64,
    pub delete_errors: u64,
}

impl fmt::Display for EventSourceCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invocations={} delivered={} deleted={} failed={} batch_errors={} timed_out={} throttled={} receive_errors={} delete_errors={}",
            self.invocations,
            self.records_delivered,
            self.records_deleted,
            self.records_failed,
            self.batch_errors,
            self.timed_out,
            self.throttled,
            self.receive_errors,
            self.delete_errors
        )
    }
}

/// Runs the mapping until `shutdown` resolves, then stops the pollers and
/// returns once they are done.
///
/// A stop cuts a receive short and hands back (visibility 0) records
/// gathered but not yet delivered, so the next run sees them at once. An
/// invocation in progress is let finish and settled: cutting it off would
/// only turn finished work into redeliveries. A receive cut mid-flight may
/// still have taken messages on the server side; like after a crashed
/// poller they reappear after the visibility timeout (at-least-once).
pub async fn run<H, Fut>(
    sqs: aws_sdk_sqs::Client,
    settings: EventSourceSettings,
    handler: H,
    stats: Arc<EventSourceStats>,
    shutdown: impl Future<Output = ()>,
) where
    H: Fn(SqsEvent) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<SqsBatchResponse, String>> + Send + 'static,
{
    let (stop_tx, stop_rx) = watch::channel(false);
    let settings = Arc::new(settings);
    let mut pollers = JoinSet::new();
    for _ in 0..settings.maximum_concurrency.max(1) {
        pollers.spawn(poll(
            sqs.clone(),
            Arc::clone(&settings),
            handler.clone(),
            Arc::clone(&stats),
            stop_rx.clone(),
        ));
    }
    shutdown.await;
    // Ignored: an error only means every poller is gone already.
    let _ = stop_tx.send(true);
    while let Some(done) = pollers.join_next().await {
        if let Err(err) = done {
            tracing::warn!(error = %err, "event source poller ended abnormally");
        }
    }
}

/// A mapping running in the background; dropping it stops it too.
pub struct EventSource {
    stats: Arc<EventSourceStats>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl EventSource {
    /// Starts [`run`] on the current runtime.
    pub fn spawn<H, Fut>(
        sqs: aws_sdk_sqs::Client,
        settings: EventSourceSettings,
        handler: H,
    ) -> Self
    where
        H: Fn(SqsEvent) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Result<SqsBatchResponse, String>> + Send + 'static,
    {
        let stats = Arc::new(EventSourceStats::default());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(run(sqs, settings, handler, Arc::clone(&stats), async {
            // Resolves on `stop()` and also when the sender is dropped, so a
            // forgotten handle cannot leave pollers running.
            let _ = stopped.await;
        }));
        Self {
            stats,
            stop: Some(stop),
            task,
        }
    }

    pub fn stats(&self) -> &Arc<EventSourceStats> {
        &self.stats
    }

    /// Stops the pollers and waits for them (see [`run`] for what a stop
    /// does to work in flight). Returns the final counts.
    pub async fn stop(mut self) -> EventSourceCounts {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Err(err) = (&mut self.task).await {
            tracing::warn!(error = %err, "event source ended abnormally");
        }
        self.stats.snapshot()
    }
}
