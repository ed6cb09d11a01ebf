//! The writers table and what is printed under it.

use super::*;
use seckill_infra::peak::Peak;

pub(super) fn print(rows: &[WritersRow]) {
    let ms = |v: Option<i64>| v.map_or_else(|| "-".into(), |v| v.to_string());
    println!();
    println!(
        "{:<32} {:>7} {:>9} {:>8} {:>8} {:>10} {:>22} {:>13} {:>5} {:>9} {:>16}",
        "order-writer, 5 writers, 1 sale",
        "orders",
        "orders/s",
        "p50 ms",
        "p99 ms",
        "conflicts",
        "layer cnfl/thr/dup",
        "writes/order",
        "DLQ",
        "REJECTED",
        "sale bytes"
    );
    for row in rows {
        let layer = row.layer.map_or_else(
            || "-".into(),
            |l| format!("{}/{}/{}", l.conflicts, l.throttles, l.duplicates),
        );
        println!(
            "{:<32} {:>7} {:>9} {:>8} {:>8} {:>10} {:>22} {:>13.2} {:>5} {:>9} {:>16}",
            row.target.label(),
            row.orders,
            row.wall.map_or_else(
                || "-".into(),
                |w| format!("{:.1}", f64::from(row.orders) / w.as_secs_f64())
            ),
            ms(row.percentile(0.50)),
            ms(row.percentile(0.99)),
            row.conflicts_retried,
            layer,
            row.write_requests as f64 / f64::from(row.orders),
            row.dlq,
            row.status("REJECTED"),
            format!("{} -> {}", row.sale_item_bytes_created, row.sale_item_bytes),
        );
    }
    println!();
    println!(
        "Each row: that many order messages of one sale (one unit each, distinct users, reservedAt the moment its SendMessageBatch left) sent by one sender to a fresh queue while the template's order-writer mapping drains it: 5 pollers (ScalingConfig.MaximumConcurrency and ReservedConcurrentExecutions), batches of 10, 1 s window; fresh tables, a sale of exactly that many units."
    );
    println!(
        "orders/s: orders from the first send to the last order written; p50/p99: reservedAt (the purchase's 202) to the end of the writer's invocation that wrote the order, queueing included; conflicts: the writer's TransactionConflictsRetried (writes sent again after a conflict or throttle); layer: what the strict layer cancelled for a conflict / throttled / delivered twice; writes/order: the writer's DynamoDB write requests per order (0.10 would be one transaction per batch of 10); sale bytes: the sale item's size at its creation -> after {ADMIN_HISTORY} audit entries, {REPORTS} reconcile reports and the drain (attribute names plus values, as DynamoDB counts it against 400 KB and per KB of every write); only the counters' digits may move."
    );
    println!(
        "Through the strict layer every order is written, none in the DLQ and none REJECTED (the run fails otherwise): contention must cost time, never an order. The emulator alone may lose writes (its concurrent transactions are not isolated); what it lost is printed below the table."
    );
    println!(
        "make plan's models (docs/operations.md \"Capacity plan\"), fed what each run measured, next to what it did:"
    );
    for row in rows {
        if let (Some(model), Some(wall), Some((batch, batch_ms)), Some((bulk, retried))) =
            (row.drain_model_secs(), row.wall, row.batches, row.bulk)
        {
            let bulk = bulk.as_secs_f64();
            let late = if retried > 0 {
                format!(
                    " (the at most {retried} records that came back after a failure were written {:.1} s from the first send, after the {VISIBILITY_SECS} s visibility timeout the model leaves out)",
                    wall.as_secs_f64()
                )
            } else {
                String::new()
            };
            println!(
                "  {}: drain {model:.1} s predicted ({TEMPLATE_WRITERS} writers x {batch:.1} orders per {batch_ms:.0} ms invocation, sends over {:.1} s, +1 s window), {bulk:.1} s measured: {:.2}x{late}",
                row.target.label(),
                row.push.as_secs_f64(),
                bulk / model,
            );
        }
        if let Some(e) = &row.expiry.as_ref().filter(|e| !e.ran_its_time) {
            println!(
                "  {}: release-unpaid expired all {} due orders before its {} s were up: no comparison (the model's {:.0} is what a full run would take; raise --drain-orders)",
                row.target.label(),
                e.expired,
                e.run.as_secs(),
                e.predicted
            );
        } else if let Some(e) = &row.expiry {
            println!(
                "  {}: release-unpaid in {} s: {:.0} expired predicted (chunks of {EXPIRY_CHUNK}: one query of every bucket {:.0} ms, then {:.0} ms the chunk), {} measured: {:.2}x",
                row.target.label(),
                e.run.as_secs(),
                e.predicted,
                e.query_ms,
                e.chunk_ms,
                e.expired,
                e.expired as f64 / e.predicted
            );
        }
    }
    for row in rows {
        if let Some(m) = &row.memory {
            let mib = |bytes: u64| bytes as f64 / (1_024.0 * 1_024.0);
            let shown = |p: &Peak| {
                format!(
                    "{:.1} MiB (+{:.1} MiB over the process before the read)",
                    mib(p.peak),
                    mib(p.added()),
                )
            };
            println!(
                "  {}: the jobs' reads of the {} orders, each in a process of its own, its peak resident memory: every order of the sale {}; the checker's whole read {}; a rebuild staged a page at a time {}; reconcile's read in {} slices of its buyers (on local disk, judged one at a time) {}",
                row.target.label(),
                m.orders,
                shown(&m.all_orders),
                shown(&m.observe),
                shown(&m.rebuild),
                m.slices,
                shown(&m.sliced),
            );
        }
    }
    for row in rows {
        println!(
            "  {}: sent in {:.1} s; drained in {}; statuses {:?}; sale item available={} sold={}; event source: {}",
            row.target.label(),
            row.push.as_secs_f64(),
            row.wall
                .map_or_else(|| "-".into(), |w| format!("{:.1} s", w.as_secs_f64())),
            row.statuses,
            row.available,
            row.sold,
            row.counts,
        );
    }
}
