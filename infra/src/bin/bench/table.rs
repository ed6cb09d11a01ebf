//! The first table: every row measured above, in a fixed order, each
//! against the unpipelined script's ceiling and the seed's; then the lines
//! that say what the rows ran and what each one saw.

use crate::{Bench, CEILING_CLIENTS, CEILING_REQUESTS, Crowd};
use std::time::Duration;

/// One row of the table.
pub(crate) struct Row {
    pub(crate) label: String,
    pub(crate) requests: usize,
    pub(crate) per_sec: f64,
    /// p50, p99, p99.9 in microseconds, where measured.
    pub(crate) p50: Option<f64>,
    pub(crate) p99: Option<f64>,
    pub(crate) p999: Option<f64>,
}

/// The rows as the table shows them.
pub(crate) struct Table {
    /// The seed's script, then the purchase script unpipelined and pipelined.
    pub(crate) ceilings: Vec<Row>,
    /// The handler with SQS on the emulator and its wall time, unless
    /// `--skip-sqs`.
    pub(crate) with_sqs: Option<(Row, Duration)>,
    /// The handler with the queue step skipped, and its wall time.
    pub(crate) handler: Row,
    pub(crate) handler_wall: Duration,
    pub(crate) http: Row,
    pub(crate) after_sell_out: Vec<Row>,
    pub(crate) cluster: Vec<Row>,
}

/// Prints the table, the lines under it and the rows' notes.
pub(crate) fn print(bench: &Bench, crowd: &Crowd, table: Table) {
    let args = &bench.args;
    let mut rows = table.ceilings;
    let seed_rate = rows.first().map_or(0.0, |r| r.per_sec);
    let base = rows.get(1).map_or(0.0, |r| r.per_sec);
    let skipped = Row {
        label: "handler, with SQS (emulator)".into(),
        requests: 0,
        per_sec: f64::NAN,
        p50: None,
        p99: None,
        p999: None,
    };
    let caveat = match &table.with_sqs {
        Some((_, sqs_wall)) => {
            let extra = sqs_wall.saturating_sub(table.handler_wall).as_secs_f64();
            format!(
                "Emulator caveat: the {} winners' SendMessage calls to moto dominate the \"with SQS\" row: they added {extra:.1} s to the run (about {:.0} SendMessage/s), and the first winners hold all {} tasks while they wait. It measures the emulator, not SQS; \"queue step skipped\" is the handler and Redis alone.",
                args.stock,
                f64::from(args.stock) / extra.max(0.001),
                args.concurrency,
            )
        }
        None => "The \"with SQS\" row was skipped; \"queue step skipped\" is the handler and Redis alone.".into(),
    };
    rows.push(table.with_sqs.map_or(skipped, |(row, _)| row));
    rows.push(table.handler);
    rows.push(table.http);
    rows.extend(table.after_sell_out);
    rows.extend(table.cluster);
    println!();
    println!(
        "{:<36} {:>9} {:>12} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "run", "requests", "decisions/s", "p50 ms", "p99 ms", "p99.9 ms", "x script", "x seed"
    );
    for row in &rows {
        if row.requests == 0 {
            println!("{:<36} skipped (--skip-sqs)", row.label);
            continue;
        }
        println!(
            "{:<36} {:>9} {:>12.0} {:>9} {:>9} {:>9} {:>9} {:>7}",
            row.label,
            row.requests,
            row.per_sec,
            ms(row.p50),
            ms(row.p99),
            ms(row.p999),
            format!("{:.2}", row.per_sec / base),
            format!("{:.2}", row.per_sec / seed_rate),
        );
    }
    println!();
    println!(
        "Each row sells its own sale of {} units, 1 per buyer: after the first {} successful calls every call takes the sold-out path, in every row alike.",
        args.stock, args.stock
    );
    println!(
        "Ceiling rows: redis-benchmark, {CEILING_CLIENTS} connections, {CEILING_REQUESTS} EVALSHA from random distinct buyers, no Rust in the path; its p50/p99 are its own client-side figures (it reports no p99.9). \"seed script\" is the seed article's minimal deduction (infra/lua/seed_deduct.lua: SISMEMBER, GET, DECRBY, SADD), the physical limit of one Redis for this job; the other ceiling rows run shared/lua/purchase.lua. \"x script\" divides by the unpipelined purchase.lua row, \"x seed\" by the seed row."
    );
    println!(
        "Handler rows: purchase::handler::handle in-process on API Gateway v2 events built before timing, {} distinct buyers + {} retries with the same Idempotency-Key, {} concurrent tasks; latency is per handle() call.",
        args.requests, crowd.retries, args.concurrency
    );
    println!("{caveat}");
    for note in &bench.notes {
        println!("{note}");
    }
}

fn ms(us: Option<f64>) -> String {
    us.map_or_else(|| "-".into(), |us| format!("{:.2}", us / 1000.0))
}

/// Rows alone, without the tables' headers (`--only-ceiling`).
pub(crate) fn print_rows(rows: &[Row]) {
    for row in rows {
        println!(
            "{:<48} {:>10.0}/s  p50 {} ms  p99 {} ms",
            row.label,
            row.per_sec,
            ms(row.p50),
            ms(row.p99)
        );
    }
}
