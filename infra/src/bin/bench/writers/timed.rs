//! The order-writer's handler, timed: when each order was first written,
//! and each invocation's records and duration.

use super::*;

/// When each order was first written: per order id, `reservedAt` and the
/// end of the invocation that wrote it.
#[derive(Clone, Default)]
pub(super) struct Written(Arc<Mutex<HashMap<String, (i64, i64)>>>, Invocations);

/// Each writer invocation: its records and how long it took, in ms.
#[derive(Clone, Default)]
pub(super) struct Invocations(Arc<Mutex<Vec<(usize, f64)>>>);

impl Invocations {
    /// Mean records per invocation and mean milliseconds per invocation.
    pub(super) fn means(&self) -> Option<(f64, f64)> {
        let seen = self.0.lock().ok()?;
        let n = seen.len() as f64;
        (n > 0.0).then(|| {
            (
                seen.iter().map(|(r, _)| *r as f64).sum::<f64>() / n,
                seen.iter().map(|(_, ms)| *ms).sum::<f64>() / n,
            )
        })
    }
}

impl Written {
    /// Mean records and milliseconds per invocation.
    pub(super) fn batches(&self) -> Option<(f64, f64)> {
        self.1.means()
    }

    /// When each order was first written, earliest first.
    pub(super) fn done_in_order(&self) -> Vec<i64> {
        let Ok(seen) = self.0.lock() else {
            return Vec::new();
        };
        let mut done: Vec<i64> = seen.values().map(|(_, done)| *done).collect();
        done.sort_unstable();
        done
    }

    /// The latencies, sorted, and the last write's time.
    pub(super) fn latencies(&self) -> (Vec<i64>, Option<i64>) {
        let Ok(seen) = self.0.lock() else {
            return (Vec::new(), None);
        };
        let mut latencies: Vec<i64> = seen.values().map(|(at, done)| done - at).collect();
        latencies.sort_unstable();
        (latencies, seen.values().map(|(_, done)| *done).max())
    }
}

pub(super) type Invoked = Pin<Box<dyn Future<Output = Result<SqsBatchResponse, String>> + Send>>;

/// The handler, noting when each record it did not report failed was
/// written. The writer's answer comes after the order's write was
/// acknowledged (and after its reservation mark in Redis, which finds none
/// here), so this is the moment the order is `PENDING_PAYMENT` in DynamoDB,
/// late by at most that mark; the end of the run checks the status itself.
pub(super) fn timed(
    handler: impl Fn(SqsEvent) -> Invoked + Clone + Send + Sync + 'static,
    written: Written,
) -> impl Fn(SqsEvent) -> Invoked + Clone + Send + Sync + 'static {
    move |event: SqsEvent| {
        let (handler, written) = (handler.clone(), written.clone());
        Box::pin(async move {
            let records: Vec<(String, String)> = event
                .records
                .iter()
                .filter_map(|r| Some((r.message_id.clone()?, r.body.clone()?)))
                .collect();
            let began = Instant::now();
            let answer = handler(event).await;
            if let Ok(mut invocations) = written.1.0.lock() {
                invocations.push((records.len(), began.elapsed().as_secs_f64() * 1_000.0));
            }
            if let Ok(response) = &answer {
                let done = clock::now_ms();
                let failed: HashSet<&str> = response
                    .batch_item_failures
                    .iter()
                    .map(|f| f.item_identifier.as_str())
                    .collect();
                if let Ok(mut seen) = written.0.lock() {
                    let done_records = records
                        .iter()
                        .filter(|(id, _)| !failed.contains(id.as_str()));
                    for (_, body) in done_records {
                        let Ok(message) = serde_json::from_str::<OrderMessage>(body) else {
                            continue;
                        };
                        let Some(at) = clock::parse_rfc3339_ms(&message.reserved_at) else {
                            continue;
                        };
                        // A redelivery of an order written before keeps
                        // the first write's time.
                        seen.entry(message.order_id.to_string())
                            .or_insert((at, done));
                    }
                }
            }
            answer
        }) as Invoked
    }
}
