//! Unit tests of the EMF lines: what each counter, invocation and flush writes.

use super::*;
use serde_json::Value;

/// A sink the test can read back.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buffer {
    fn lines(&self) -> Vec<Value> {
        let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }
}

fn metrics(function: Function, flush: Flush) -> (Metrics, Buffer) {
    let buffer = Buffer::default();
    let emitter = Emitter::new(Sink::new(buffer.clone()), flush);
    (
        Metrics::with_emitter(function, "Seckill/test", emitter),
        buffer,
    )
}

/// The EMF rules every line must follow.
fn assert_emf(line: &Value, namespace: &str, function: &str) {
    let aws = &line["_aws"];
    assert!(
        aws["Timestamp"].as_i64().unwrap() > 1_700_000_000_000,
        "{line}"
    );
    let directives = aws["CloudWatchMetrics"].as_array().unwrap();
    assert!(!directives.is_empty());
    for d in directives {
        assert_eq!(d["Namespace"], namespace);
        let sets = d["Dimensions"].as_array().unwrap();
        assert!(sets.contains(&serde_json::json!(["Function"])), "{d}");
        for set in sets {
            for key in set.as_array().unwrap() {
                assert!(
                    line[key.as_str().unwrap()].is_string(),
                    "{key} missing: {line}"
                );
            }
        }
        for m in d["Metrics"].as_array().unwrap() {
            let name = m["Name"].as_str().unwrap();
            let unit = m["Unit"].as_str().unwrap();
            assert!(matches!(unit, "Count" | "Milliseconds" | "Percent"), "{m}");
            let value = &line[name];
            let ok = value.is_number()
                || value
                    .as_array()
                    .is_some_and(|a| a.len() <= MAX_VALUES && a.iter().all(Value::is_number));
            assert!(ok, "{name} has no numeric value: {line}");
        }
    }
    assert_eq!(line["Function"], function);
}

#[test]
fn a_sales_stock_left_is_a_line_per_sale_and_across_sales() {
    let (m, out) = metrics(Function::Prewarm, Flush::EachInvocation);
    m.stock_left("s-1", 7, 70);
    m.stock_left("s-2", 1, 3);
    let lines = out.lines();
    assert_eq!(lines.len(), 2);
    for line in &lines {
        assert_emf(line, "Seckill/test", "prewarm");
    }
    assert_eq!(lines[0]["SaleId"], "s-1");
    assert_eq!(lines[0][STOCK_LEFT], 7);
    assert_eq!(lines[0][STOCK_LEFT_PERCENT], 10.0);
    assert_eq!(lines[1][STOCK_LEFT_PERCENT], 33.3);
    assert_eq!(
        lines[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
        serde_json::json!([["Function"], ["Function", "SaleId"]])
    );
}

/// The low-stock alarm is information about a sale still selling: a sold
/// out one says how much it has left (nothing) but no percentage, so the
/// alarm (the minimum percentage across sales) goes back to OK at the
/// sell-out instead of staying on until the sale ends.
#[test]
fn a_sold_out_sale_writes_no_stock_left_percentage() {
    let (m, out) = metrics(Function::Prewarm, Flush::EachInvocation);
    m.stock_left("sold", 0, 50);
    m.stock_left("oversold-in-redis", -2, 50);
    let lines = out.lines();
    assert_eq!(lines.len(), 2);
    for (line, left) in lines.iter().zip([0, -2]) {
        assert_emf(line, "Seckill/test", "prewarm");
        assert_eq!(line[STOCK_LEFT], left, "{line}");
        assert!(line.get(STOCK_LEFT_PERCENT).is_none(), "{line}");
        assert_eq!(
            line["_aws"]["CloudWatchMetrics"][0]["Metrics"],
            serde_json::json!([{"Name": STOCK_LEFT, "Unit": "Count"}]),
            "{line}"
        );
    }
}

#[test]
fn a_purchase_invocation_is_one_line_with_its_ids() {
    let (m, out) = metrics(Function::Purchase, Flush::EachInvocation);
    m.cold_start();
    m.lua_latency(Duration::from_micros(412));
    m.purchase(Outcome::Accepted.as_str());
    m.invocation_done(&Invocation {
        request_id: Some("r-1"),
        sale_id: Some("s1"),
        order_id: Some("o1"),
    });
    let lines = out.lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert_emf(line, "Seckill/test", "purchase");
    let directives = line["_aws"]["CloudWatchMetrics"].as_array().unwrap();
    assert_eq!(
        directives[0]["Dimensions"],
        serde_json::json!([["Function"]])
    );
    assert_eq!(
        directives[0]["Metrics"],
        serde_json::json!([
            {"Name": "ColdStarts", "Unit": "Count"},
            {"Name": "LuaLatency", "Unit": "Milliseconds"},
        ])
    );
    assert_eq!(
        directives[1]["Dimensions"],
        serde_json::json!([["Function"], ["Function", "Outcome"]])
    );
    assert_eq!(
        directives[1]["Metrics"],
        serde_json::json!([{"Name": "Purchases", "Unit": "Count"}])
    );
    assert_eq!(line["ColdStarts"], 1);
    assert_eq!(line["LuaLatency"], serde_json::json!([0.412]));
    assert_eq!(
        (&line["Outcome"], &line["Purchases"]),
        (&"ACCEPTED".into(), &1.into())
    );
    assert_eq!(
        (&line["requestId"], &line["saleId"], &line["orderId"]),
        (&"r-1".into(), &"s1".into(), &"o1".into())
    );

    // The next invocation starts from zero and is not a cold start.
    m.purchase("SOLD_OUT");
    m.count(Counter::SoldOutFastPath, 1);
    m.invocation_done(&Invocation::default());
    let line = &out.lines()[1];
    assert_emf(line, "Seckill/test", "purchase");
    assert_eq!(
        (&line["Outcome"], &line["Purchases"]),
        (&"SOLD_OUT".into(), &1.into())
    );
    assert_eq!(line["SoldOutFastPath"], 1);
    assert!(
        line.get("ColdStarts").is_none() && line.get("requestId").is_none(),
        "{line}"
    );
    // Nothing pending: nothing written.
    m.invocation_done(&Invocation::default());
    assert_eq!(out.lines().len(), 2);
}

#[test]
fn periodic_flush_aggregates_one_line_per_outcome() {
    let (m, out) = metrics(Function::Purchase, Flush::Periodic);
    for _ in 0..7 {
        m.purchase(Outcome::Accepted.as_str());
    }
    for _ in 0..3 {
        m.purchase("SOLD_OUT");
    }
    m.purchase("SOMETHING_NEW");
    m.invocation_done(&Invocation {
        request_id: Some("r"),
        ..Invocation::default()
    });
    assert!(out.lines().is_empty(), "periodic: nothing per invocation");
    m.flush();
    let lines = out.lines();
    assert_eq!(lines.len(), 3, "{lines:?}");
    let mut by_outcome = BTreeMap::new();
    for line in &lines {
        assert_emf(line, "Seckill/test", "purchase");
        assert!(
            line.get("requestId").is_none(),
            "aggregated lines carry no ids"
        );
        by_outcome.insert(
            line["Outcome"].as_str().unwrap().to_owned(),
            line["Purchases"].as_u64().unwrap(),
        );
    }
    assert_eq!(
        by_outcome,
        BTreeMap::from([
            ("ACCEPTED".to_owned(), 7),
            ("SOLD_OUT".to_owned(), 3),
            ("SOMETHING_NEW".to_owned(), 1)
        ])
    );
}

#[test]
fn latencies_are_written_in_arrays_of_at_most_a_hundred() {
    let (m, out) = metrics(Function::Purchase, Flush::Periodic);
    for i in 0..250u64 {
        m.lua_latency(Duration::from_micros(100 + i));
    }
    // Two full arrays went out by themselves; the rest waits for a flush.
    assert_eq!(out.lines().len(), 2);
    m.flush();
    let lines = out.lines();
    assert_eq!(lines.len(), 3);
    let mut all = Vec::new();
    for line in &lines {
        assert_emf(line, "Seckill/test", "purchase");
        all.extend(
            line["LuaLatency"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap()),
        );
    }
    assert_eq!(all.len(), 250, "every sample kept");
    assert_eq!((all[0], all[249]), (0.1, 0.349));
}

#[test]
fn counters_recorded_as_zero_are_written_and_others_are_not() {
    let (m, out) = metrics(Function::Reconcile, Flush::EachInvocation);
    m.count(Counter::ReconcileViolations, 0);
    m.count(Counter::OversellRisk, 0);
    m.count(Counter::ReconcileRepairs, 2);
    m.invocation_done(&Invocation::default());
    let line = &out.lines()[0];
    assert_emf(line, "Seckill/test", "reconcile");
    let names: Vec<&str> = line["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["Name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["ReconcileViolations", "OversellRisk", "ReconcileRepairs"]
    );
    assert_eq!(
        (&line["ReconcileViolations"], &line["ReconcileRepairs"]),
        (&0.into(), &2.into())
    );
    assert!(line.get("Outcome").is_none() && line.get("Purchases").is_none());
}

#[test]
fn off_records_nothing_and_an_empty_namespace_is_the_default() {
    let m = Metrics::off();
    m.purchase(Outcome::Accepted.as_str());
    m.count(Counter::ColdStarts, 1);
    m.flush();
    assert!(!m.is_on());
    let buffer = Buffer::default();
    let m = Metrics::with_emitter(
        Function::OrderWriter,
        " ",
        Emitter::new(Sink::new(buffer.clone()), Flush::EachInvocation),
    );
    m.count(Counter::OrdersWritten, 3);
    m.flush();
    assert_emf(&buffer.lines()[0], DEFAULT_NAMESPACE, "order-writer");
}

#[test]
fn strings_are_escaped() {
    let buffer = Buffer::default();
    let odd = "Seckill/\"quoted\"\\back\nline";
    let m = Metrics::with_emitter(
        Function::Purchase,
        odd,
        Emitter::new(Sink::new(buffer.clone()), Flush::EachInvocation),
    );
    m.purchase(Outcome::Accepted.as_str());
    m.lua_latency(Duration::from_secs(2));
    m.invocation_done(&Invocation {
        request_id: Some("a\"b"),
        ..Invocation::default()
    });
    let line = &buffer.lines()[0];
    assert_emf(line, odd, "purchase");
    assert_eq!(line["requestId"], "a\"b");
    assert_eq!(line["LuaLatency"][0].as_f64(), Some(2000.0));
}

/// The `Outcome` dimension's values are exactly [`Outcome::ALL`]'s codes,
/// in its order, each counted in its own slot.
#[test]
fn the_outcome_dimension_is_outcome_all() {
    let (m, out) = metrics(Function::Purchase, Flush::Periodic);
    for (i, outcome) in Outcome::ALL.into_iter().enumerate() {
        for _ in 0..=i {
            m.purchase(outcome.as_str());
        }
    }
    m.flush();
    let written: Vec<(String, u64)> = out
        .lines()
        .iter()
        .map(|line| {
            (
                line["Outcome"].as_str().unwrap().to_owned(),
                line["Purchases"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, u64)> = Outcome::ALL
        .into_iter()
        .zip(1..)
        .map(|(o, n)| (o.as_str().to_owned(), n))
        .collect();
    assert_eq!(written, want);
}

#[test]
fn every_purchase_error_code_is_counted_without_a_lock() {
    use crate::app::purchase::PurchaseError;
    use crate::error::ApiError;
    let refusals = [
        PurchaseError::NotFound,
        PurchaseError::NotStarted { start_ms: 0 },
        PurchaseError::Ended,
        PurchaseError::SoldOut { remaining: 0 },
        PurchaseError::LimitExceeded { order_ids: vec![] },
        PurchaseError::Paused,
        PurchaseError::KeysMissing,
        PurchaseError::QueueRejected,
        PurchaseError::RateLimited { retry_after_ms: 1 },
        PurchaseError::GateRequired,
    ];
    let edge = [
        ApiError::InvalidRequest(String::new()),
        ApiError::Unauthenticated,
        ApiError::Internal,
    ];
    for err in refusals.into_iter().map(ApiError::from).chain(edge) {
        assert!(Outcome::from_code(err.code()).is_some(), "{}", err.code());
    }
    assert_eq!(Function::ALL.len(), 7);
    assert_eq!(Counter::ALL.iter().map(|c| c.index()).max(), Some(15));
}

/// The cost of one purchase invocation's metrics in Lambda (record, then
/// build and write its line) and of recording alone in periodic mode:
/// `cargo test --release -p seckill-shared make_line_cost -- --ignored
/// --nocapture`.
#[test]
#[ignore = "a measurement, not a check"]
fn make_line_cost() {
    let (m, out) = metrics(Function::Purchase, Flush::EachInvocation);
    let runs = 200_000u32;
    let started = std::time::Instant::now();
    for _ in 0..runs {
        m.lua_latency(Duration::from_micros(400));
        m.purchase(Outcome::Accepted.as_str());
        m.invocation_done(&Invocation {
            request_id: Some("UxVq3cD4IAMEd7y="),
            sale_id: Some("demo"),
            order_id: Some("n0f3a9c41b7d2e5f8a06"),
        });
        out.0.lock().unwrap().clear();
    }
    println!("per invocation: {:?}", started.elapsed() / runs);
    let (m, _) = metrics(Function::Purchase, Flush::Periodic);
    let started = std::time::Instant::now();
    for _ in 0..runs {
        m.lua_latency(Duration::from_micros(400));
        m.purchase(Outcome::Accepted.as_str());
        m.invocation_done(&Invocation::default());
    }
    println!("per decision, periodic: {:?}", started.elapsed() / runs);
}
