//! The ceiling rows' machinery: redis-benchmark on a script (the seed's
//! minimal deduction, the project's purchase script), its CSV read into a
//! row, and the check in Redis that a sale sold exactly its stock.

use crate::table::Row;
use crate::{BoxError, CEILING_CLIENTS, CEILING_REQUESTS, SEED_LUA};
use seckill_shared::adapters::redis::SaleKeys;
use seckill_shared::domain::Sale;
use std::collections::BTreeMap;

/// Runs redis-benchmark with the ceiling's settings (`-c`, `-n`, random
/// buyers through `__rand_int__`) on `command` and reads its CSV line.
pub(crate) async fn redis_benchmark(
    host: &str,
    port: u16,
    pipeline: Option<u32>,
    command: &[&str],
) -> Result<BTreeMap<String, String>, BoxError> {
    let mut cmd = tokio::process::Command::new("redis-benchmark");
    cmd.args(["-h", host, "-p", &port.to_string()])
        .args(["-c", &CEILING_CLIENTS.to_string()])
        .args(["-n", &CEILING_REQUESTS.to_string()])
        // -r makes redis-benchmark replace __rand_int__ per call, so each
        // call is a (nearly always) new buyer, as in a real sale.
        .args(["-r", "100000000", "--csv"]);
    if let Some(p) = pipeline {
        cmd.args(["-P", &p.to_string()]);
    }
    cmd.args(command);
    let out = cmd
        .output()
        .await
        .map_err(|e| format!("cannot run redis-benchmark: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "redis-benchmark failed ({}): {stdout} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(parse_csv(&stdout).ok_or_else(|| format!("no CSV in: {stdout}"))?)
}

/// A row from redis-benchmark's CSV fields.
pub(crate) fn benchmark_row(
    label: String,
    fields: &BTreeMap<String, String>,
) -> Result<Row, BoxError> {
    let get = |name: &str| fields.get(name).and_then(|v| v.parse::<f64>().ok());
    let per_sec = get("rps").ok_or_else(|| format!("no rps in: {fields:?}"))?;
    Ok(Row {
        label,
        requests: CEILING_REQUESTS as usize,
        per_sec,
        p50: get("p50_latency_ms").map(|v| v * 1000.0),
        p99: get("p99_latency_ms").map(|v| v * 1000.0),
        p999: None,
    })
}

/// The physical limit of one Redis for this job: the seed article's
/// minimal deduction script (`infra/lua/seed_deduct.lua`: a buyer set and
/// a stock counter) through redis-benchmark with the ceiling's settings,
/// on `stock` units. Checked like every row: exactly `stock` buyers won.
pub(crate) async fn seed_ceiling(
    host: &str,
    port: u16,
    conn: &mut redis::aio::MultiplexedConnection,
    tag: &str,
    stock: u32,
    failures: &mut Vec<String>,
) -> Result<Row, BoxError> {
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(SEED_LUA)
        .query_async(&mut *conn)
        .await?;
    let (stock_key, buyers_key) = (
        format!("bench:{tag}:seed:stock"),
        format!("bench:{tag}:seed:buyers"),
    );
    let _: () = redis::cmd("SET")
        .arg(&stock_key)
        .arg(stock)
        .query_async(&mut *conn)
        .await?;
    let fields = redis_benchmark(
        host,
        port,
        None,
        &[
            "EVALSHA",
            &sha,
            "2",
            &stock_key,
            &buyers_key,
            "1",
            "u__rand_int__",
        ],
    )
    .await?;
    let left: Option<i64> = redis::cmd("GET")
        .arg(&stock_key)
        .query_async(&mut *conn)
        .await?;
    let buyers: u64 = redis::cmd("SCARD")
        .arg(&buyers_key)
        .query_async(&mut *conn)
        .await?;
    if left != Some(0) || buyers != u64::from(stock) {
        failures.push(format!(
            "seed script: {buyers} buyers and {left:?} left, expected {stock} and 0"
        ));
    }
    let _: () = redis::cmd("DEL")
        .arg(&stock_key)
        .arg(&buyers_key)
        .query_async(&mut *conn)
        .await?;
    benchmark_row(
        format!("seed script (SISMEMBER..SADD), -c {CEILING_CLIENTS}"),
        &fields,
    )
}

/// Runs redis-benchmark against the loaded `sale` and reads its CSV line.
pub(crate) async fn ceiling(
    host: &str,
    port: u16,
    sha: &str,
    sale: &Sale,
    pipeline: Option<u32>,
) -> Result<Row, BoxError> {
    let keys = SaleKeys::new(&sale.sale_id);
    // The same keys and arguments as the handler sends: ARGV[4] is the
    // Idempotency-Key and ARGV[5] the gate pass nonce ("" is none; an empty
    // bulk string passes through redis-benchmark as is), then the source
    // address (none: the buyers are random), the limiter's limits
    // (unlimited, as in the handler rows), the id suffix and the request id.
    let command = [
        "EVALSHA",
        sha,
        "7",
        &keys.meta,
        &keys.stock,
        &keys.buyers,
        &keys.resv,
        &keys.user_orders,
        &keys.gate_used,
        &keys.rate_limit,
        sale.sale_id.as_str(),
        "u__rand_int__",
        "1",
        "",
        "",
        "",
        "1000000000",
        "1000000000",
        "1000000000",
        "1000000000",
        // ARGV[11], the shard's order id suffix (none), and ARGV[12], the
        // request id the store draws per purchase: 31 characters, 19 fixed
        // and redis-benchmark's 12 random digits.
        "",
        "0000000000000000000__rand_int__",
    ];
    let fields = redis_benchmark(host, port, pipeline, &command).await?;
    let label = match pipeline {
        None => format!("redis-benchmark EVALSHA, -c {CEILING_CLIENTS}"),
        Some(p) => format!("redis-benchmark EVALSHA, -c {CEILING_CLIENTS} -P {p}"),
    };
    benchmark_row(label, &fields)
}

/// redis-benchmark 7's `--csv`: a header line, then one line per test, every
/// field double-quoted. The test name holds no quote, so splitting is safe.
pub(crate) fn parse_csv(text: &str) -> Option<BTreeMap<String, String>> {
    let mut lines = text.lines().filter(|l| l.starts_with('"'));
    let split = |line: &str| -> Vec<String> {
        line.trim()
            .trim_matches('"')
            .split("\",\"")
            .map(str::to_owned)
            .collect()
    };
    let header = split(lines.next()?);
    let values = split(lines.next_back()?);
    (header.len() == values.len()).then(|| header.into_iter().zip(values).collect())
}

/// Checks in Redis itself that the sale sold exactly its stock: the figures
/// only mean something if the real decisions were made.
pub(crate) async fn check_redis(
    conn: &mut redis::aio::MultiplexedConnection,
    sale: &Sale,
    label: &str,
    failures: &mut Vec<String>,
) -> Result<(), BoxError> {
    let keys = SaleKeys::new(&sale.sale_id);
    let reservations: u64 = redis::cmd("HLEN")
        .arg(&keys.resv)
        .query_async(&mut *conn)
        .await?;
    let left: Option<i64> = redis::cmd("GET")
        .arg(&keys.stock)
        .query_async(&mut *conn)
        .await?;
    if reservations != u64::from(sale.total_stock) || left != Some(0) {
        failures.push(format!(
            "{label}: Redis holds {reservations} reservations and {} units left, expected {} and 0",
            left.map_or_else(|| "no stock key, so no".into(), |n| n.to_string()),
            sale.total_stock
        ));
    }
    Ok(())
}
