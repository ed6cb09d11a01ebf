//! DynamoDB as AWS documents it, in front of an emulator that is kinder.
//!
//! - **No acknowledged write is undone.** moto copies every table a
//!   `TransactWriteItems` touches when it starts and puts the copies back
//!   when it is cancelled, undoing what other requests wrote meanwhile (and
//!   it checks a single write's condition and applies it in two steps, so
//!   two concurrent conditional writes can both pass). Every write here is
//!   applied alone on its tables (writes exclusive, reads shared, each
//!   table apart: moto copies only the tables a transaction touches), which
//!   is what makes the emulator's answers true.
//! - **Transaction conflicts.** An item is *held* from the moment a
//!   transaction that names it arrives until it is answered, for at most
//!   [`DynamoLimits::transaction_hold`] (about as long as a transaction
//!   takes on AWS: two transactions that arrive that close together are
//!   concurrent there; a wait behind the emulator's slowness here is not).
//!   A transaction that names a held item is cancelled with
//!   `TransactionConflict` at that item's position of
//!   `CancellationReasons`; a single write to a held item fails with
//!   `TransactionConflictException` ("Transaction conflict handling" in the
//!   DynamoDB developer guide). [`DynamoLimits::transaction_latency`] adds
//!   AWS's own latency to every transaction (tests use it to hold one open).
//! - **Partition throughput.** Each partition key has a bucket of write
//!   units (one per KB written, two for a transactional write), refilled at
//!   [`DynamoLimits::partition_write_units`] a second; a write that finds it
//!   empty is throttled (`ProvisionedThroughputExceededException`, or
//!   `ThrottlingError` in a cancelled transaction).
//! - **Item size.** An item over 400 KB is refused (`ValidationException`).

use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// DynamoDB's largest item, names and values together.
pub const MAX_ITEM_BYTES: usize = 400 * 1024;

#[derive(Debug, Clone)]
pub struct DynamoLimits {
    /// The longest a transaction holds its items (from its arrival, and
    /// never past its answer). Zero: transactions never conflict.
    pub transaction_hold: Duration,
    /// Added to every transaction before it is applied, its items held.
    pub transaction_latency: Duration,
    /// How long a transaction's answer is held after it was applied: a
    /// client whose attempt timeout is shorter sees a timeout on a write
    /// that took effect (its outcome is then unknown to it, as on AWS).
    pub transaction_answer_delay: Duration,
    /// Write units a second one partition key takes; `None`: no limit.
    pub partition_write_units: Option<u32>,
    /// Items larger than this are refused.
    pub max_item_bytes: usize,
}

impl Default for DynamoLimits {
    fn default() -> Self {
        Self {
            transaction_hold: Duration::from_millis(DEFAULT_TRANSACTION_HOLD_MS),
            transaction_latency: Duration::ZERO,
            transaction_answer_delay: Duration::ZERO,
            partition_write_units: Some(DEFAULT_PARTITION_WRITE_UNITS),
            max_item_bytes: MAX_ITEM_BYTES,
        }
    }
}

/// About as long as a transaction on AWS takes from its first phase to
/// its last: long enough that concurrent writers of one hot item meet.
pub const DEFAULT_TRANSACTION_HOLD_MS: u64 = 20;

/// A partition takes 1,000 write units a second on AWS. The emulator
/// commits about a hundred transactions a second, so a limit at AWS's
/// figure would never bite locally; this one is reached by a single hot
/// sale item under `make bench`'s drain (two units per transactional write),
/// the way a real hot partition is reached at AWS's pace.
pub const DEFAULT_PARTITION_WRITE_UNITS: u32 = 150;

/// What a DynamoDB operation is to the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Read,
    Write,
    /// A write that may be undone, or that changes a table whole (a
    /// transaction, a control-plane call): never beside a read either.
    Transaction,
}

/// Operations that only read: they run beside each other, never beside a
/// write. Everything else (an unknown operation too) is a write.
pub fn kind(operation: &str) -> Kind {
    match operation {
        "GetItem"
        | "BatchGetItem"
        | "Query"
        | "Scan"
        | "TransactGetItems"
        | "DescribeTable"
        | "ListTables"
        | "DescribeTimeToLive"
        | "DescribeContinuousBackups"
        | "ListTagsOfResource"
        | "DescribeLimits"
        | "DescribeEndpoints" => Kind::Read,
        _ => Kind::Write,
    }
}

/// One item a request writes: its table and key, as canonical JSON.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ItemKey {
    pub table: String,
    pub key: String,
    /// The partition key's value alone (the throughput bucket).
    pub partition: String,
}

/// A write a request makes, for the checks before it is applied.
#[derive(Debug, Clone)]
pub struct Touch {
    pub item: ItemKey,
    /// Write units it costs.
    pub units: u32,
    /// The whole item's size when the request carries it (a put).
    pub item_bytes: Option<usize>,
}

/// Key attribute names of a table, hash key first.
pub type KeySchema = Vec<String>;

/// Where a request's item keys come from: tables' key schemas (asked of
/// the emulator once per table by the caller).
pub trait Schemas {
    fn schema(&self, table: &str) -> Option<&KeySchema>;
}

impl Schemas for HashMap<String, KeySchema> {
    fn schema(&self, table: &str) -> Option<&KeySchema> {
        self.get(table)
    }
}

/// The tables a read names (its gates).
pub fn read_tables(body: &Value) -> Vec<String> {
    let mut out: Vec<String> = body["TableName"]
        .as_str()
        .map(str::to_owned)
        .into_iter()
        .collect();
    if let Some(items) = body["RequestItems"].as_object() {
        out.extend(items.keys().cloned());
    }
    for entry in body["TransactItems"].as_array().into_iter().flatten() {
        if let Some(t) = entry["Get"]["TableName"].as_str() {
            out.push(t.to_owned());
        }
    }
    out
}

/// The tables a write names (its gates): those of [`tables`], or the
/// table a control-plane call names.
pub fn write_tables(operation: &str, body: &Value) -> Vec<String> {
    let mut out = tables(operation, body);
    if out.is_empty()
        && let Some(t) = body["TableName"].as_str()
    {
        out.push(t.to_owned());
    }
    out
}

/// The tables a write request names (to fetch their schemas first).
pub fn tables(operation: &str, body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    match operation {
        "TransactWriteItems" => {
            for entry in body["TransactItems"].as_array().into_iter().flatten() {
                if let Some((_, op)) = entry.as_object().and_then(|o| o.iter().next())
                    && let Some(t) = op["TableName"].as_str()
                {
                    out.push(t.to_owned());
                }
            }
        }
        "BatchWriteItem" => {
            if let Some(items) = body["RequestItems"].as_object() {
                out.extend(items.keys().cloned());
            }
        }
        "PutItem" | "UpdateItem" | "DeleteItem" => {
            if let Some(t) = body["TableName"].as_str() {
                out.push(t.to_owned());
            }
        }
        _ => {}
    }
    out.sort();
    out.dedup();
    out
}

/// The items a write request touches, in request order (a transaction's
/// order is its `CancellationReasons` order). `None` for a request whose
/// items cannot be told (a table not known, a malformed body): the
/// emulator answers it as it would.
pub fn touches(operation: &str, body: &Value, schemas: &impl Schemas) -> Option<Vec<Touch>> {
    let one = |table: &str, key_or_item: &Value, put: bool, transactional: bool| {
        let schema = schemas.schema(table)?;
        let item = item_key(table, schema, key_or_item)?;
        let item_bytes = put.then(|| item_size(key_or_item));
        let kb = item_bytes.map_or(1, |b| b.div_ceil(1024).max(1));
        let units = u32::try_from(kb).unwrap_or(u32::MAX) * if transactional { 2 } else { 1 };
        Some(Touch {
            item,
            units,
            item_bytes,
        })
    };
    match operation {
        "TransactWriteItems" => body["TransactItems"]
            .as_array()?
            .iter()
            .map(|entry| {
                let (name, op) = entry.as_object()?.iter().next()?;
                let table = op["TableName"].as_str()?;
                match name.as_str() {
                    "Put" => one(table, &op["Item"], true, true),
                    "Update" | "Delete" | "ConditionCheck" => one(table, &op["Key"], false, true),
                    _ => None,
                }
            })
            .collect(),
        "PutItem" => Some(vec![one(
            body["TableName"].as_str()?,
            &body["Item"],
            true,
            false,
        )?]),
        "UpdateItem" | "DeleteItem" => Some(vec![one(
            body["TableName"].as_str()?,
            &body["Key"],
            false,
            false,
        )?]),
        "BatchWriteItem" => {
            let mut out = Vec::new();
            for (table, requests) in body["RequestItems"].as_object()? {
                for request in requests.as_array()? {
                    if let Some(put) = request.get("PutRequest") {
                        out.push(one(table, &put["Item"], true, false)?);
                    } else if let Some(delete) = request.get("DeleteRequest") {
                        out.push(one(table, &delete["Key"], false, false)?);
                    } else {
                        return None;
                    }
                }
            }
            Some(out)
        }
        _ => Some(Vec::new()),
    }
}

fn item_key(table: &str, schema: &KeySchema, item: &Value) -> Option<ItemKey> {
    let attrs = item.as_object()?;
    let mut key = Map::new();
    for name in schema {
        key.insert(name.clone(), attrs.get(name)?.clone());
    }
    let partition = schema.first().and_then(|h| attrs.get(h))?.to_string();
    Some(ItemKey {
        table: table.to_owned(),
        key: Value::Object(key).to_string(),
        partition,
    })
}

/// An item's size as DynamoDB counts it: each attribute's name and value
/// in bytes ("Item sizes and formats" in the developer guide).
pub fn item_size(item: &Value) -> usize {
    item.as_object().map_or(0, |attrs| {
        attrs.iter().map(|(k, v)| k.len() + value_size(v)).sum()
    })
}

fn value_size(typed: &Value) -> usize {
    let Some((tag, v)) = typed.as_object().and_then(|o| o.iter().next()) else {
        return 0;
    };
    let number = |n: &Value| n.as_str().map_or(1, |s| s.len().div_ceil(2) + 1);
    let binary = |b: &Value| b.as_str().map_or(0, |s| s.len() / 4 * 3);
    let text = |s: &Value| s.as_str().map_or(0, str::len);
    match tag.as_str() {
        "S" => text(v),
        "N" => number(v),
        "B" => binary(v),
        "BOOL" | "NULL" => 1,
        "SS" => v.as_array().map_or(0, |a| a.iter().map(text).sum()),
        "NS" => v.as_array().map_or(0, |a| a.iter().map(number).sum()),
        "BS" => v.as_array().map_or(0, |a| a.iter().map(binary).sum()),
        "L" => {
            3 + v
                .as_array()
                .map_or(0, |a| a.iter().map(|e| 1 + value_size(e)).sum())
        }
        "M" => {
            3 + v.as_object().map_or(0, |m| {
                m.iter().map(|(k, e)| 1 + k.len() + value_size(e)).sum()
            })
        }
        _ => 0,
    }
}

/// What the checks decided before a write is applied.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Apply it; the items named are held (by the token) until
    /// [`Conflicts::release`] or the hold's end.
    Go(Vec<ItemKey>, u64),
    /// Answer this instead (status, body); nothing was applied.
    Refuse(u16, Value),
}

/// Items held by transactions in flight, and each partition's bucket.
#[derive(Debug, Default)]
pub struct Conflicts {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Item -> the holding transaction's token and the hold's end.
    held: HashMap<ItemKey, (u64, Instant)>,
    tokens: u64,
    buckets: HashMap<(String, String), Bucket>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    units: f64,
    at: Instant,
}

impl Conflicts {
    /// Decides a write before it is applied, at `now`.
    pub fn check(
        &self,
        operation: &str,
        touches: &[Touch],
        limits: &DynamoLimits,
        now: Instant,
    ) -> Verdict {
        let transaction = operation == "TransactWriteItems";
        if let Some(t) = touches
            .iter()
            .find(|t| t.item_bytes.is_some_and(|b| b > limits.max_item_bytes))
        {
            tracing::info!(table = %t.item.table, bytes = ?t.item_bytes, "strict: item over the size limit refused");
            return Verdict::Refuse(
                400,
                error(
                    "com.amazon.coral.validate#ValidationException",
                    "Item size has exceeded the maximum allowed size",
                ),
            );
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let held: Vec<bool> = touches
            .iter()
            .map(|t| {
                state
                    .held
                    .get(&t.item)
                    .is_some_and(|(_, until)| *until > now)
            })
            .collect();
        if held.iter().any(|h| *h) {
            tracing::info!(operation, "strict: transaction conflict");
            return Verdict::Refuse(
                400,
                if transaction {
                    cancelled(
                        &held,
                        "TransactionConflict",
                        "Transaction is ongoing for the item",
                    )
                } else {
                    error(
                        "com.amazonaws.dynamodb.v20120810#TransactionConflictException",
                        "Transaction is ongoing for the item",
                    )
                },
            );
        }
        if let Some(rate) = limits.partition_write_units {
            let rate = f64::from(rate.max(1));
            let mut need: HashMap<(String, String), f64> = HashMap::new();
            for t in touches {
                *need
                    .entry((t.item.table.clone(), t.item.partition.clone()))
                    .or_default() += f64::from(t.units);
            }
            let short: Vec<(String, String)> = need
                .iter()
                .filter(|(p, units)| {
                    let bucket = state.buckets.entry((*p).clone()).or_insert(Bucket {
                        units: rate,
                        at: now,
                    });
                    let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
                    bucket.units = (bucket.units + elapsed * rate).min(rate);
                    bucket.at = now;
                    // A write larger than a second's units needs a full
                    // bucket, not more than it can ever hold.
                    bucket.units < units.min(rate)
                })
                .map(|(p, _)| p.clone())
                .collect();
            if !short.is_empty() {
                tracing::info!(operation, "strict: partition throttled");
                return Verdict::Refuse(
                    400,
                    if transaction {
                        let throttled: Vec<bool> = touches
                            .iter()
                            .map(|t| {
                                short.contains(&(t.item.table.clone(), t.item.partition.clone()))
                            })
                            .collect();
                        cancelled(
                            &throttled,
                            "ThrottlingError",
                            "Throughput exceeds the current capacity of your table or index.",
                        )
                    } else {
                        error(
                            "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
                            "Throughput exceeds the current capacity of your table or index.",
                        )
                    },
                );
            }
            for (p, units) in need {
                if let Some(bucket) = state.buckets.get_mut(&p) {
                    bucket.units -= units;
                }
            }
        }
        if !transaction || limits.transaction_hold.is_zero() {
            return Verdict::Go(Vec::new(), 0);
        }
        state.tokens += 1;
        let token = state.tokens;
        let until = now + limits.transaction_hold;
        state.held.retain(|_, (_, end)| *end > now);
        let items: Vec<ItemKey> = touches.iter().map(|t| t.item.clone()).collect();
        for item in &items {
            state.held.insert(item.clone(), (token, until));
        }
        Verdict::Go(items, token)
    }

    /// The transaction `token` holding `items` was answered.
    pub fn release(&self, items: &[ItemKey], token: u64) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        for item in items {
            if state.held.get(item).is_some_and(|(t, _)| *t == token) {
                state.held.remove(item);
            }
        }
    }
}

fn error(kind: &str, message: &str) -> Value {
    json!({"__type": kind, "message": message})
}

/// A `TransactionCanceledException` whose reason is `code` where `hit`.
fn cancelled(hit: &[bool], code: &str, message: &str) -> Value {
    let reasons: Vec<Value> = hit
        .iter()
        .map(|h| {
            if *h {
                json!({"Code": code, "Message": message})
            } else {
                json!({"Code": "None"})
            }
        })
        .collect();
    let codes: Vec<&str> = hit.iter().map(|h| if *h { code } else { "None" }).collect();
    json!({
        "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
        "Message": format!(
            "Transaction cancelled, please refer cancellation reasons for specific reasons [{}]",
            codes.join(", ")
        ),
        "CancellationReasons": reasons,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schemas() -> HashMap<String, KeySchema> {
        HashMap::from([
            ("sales".to_owned(), vec!["saleId".to_owned()]),
            ("orders".to_owned(), vec!["orderId".to_owned()]),
        ])
    }

    fn transaction(sale: &str, order: &str) -> Value {
        json!({"TransactItems": [
            {"Put": {"TableName": "orders", "Item": {"orderId": {"S": order}, "status": {"S": "PENDING_PAYMENT"}}}},
            {"Update": {"TableName": "sales", "Key": {"saleId": {"S": sale}}, "UpdateExpression": "SET a = :a"}},
        ]})
    }

    fn unlimited() -> DynamoLimits {
        DynamoLimits {
            partition_write_units: None,
            ..DynamoLimits::default()
        }
    }

    #[test]
    fn a_transaction_naming_a_held_item_is_cancelled_at_that_position() {
        let conflicts = Conflicts::default();
        let now = Instant::now();
        let first = touches("TransactWriteItems", &transaction("s1", "o1"), &schemas()).unwrap();
        let Verdict::Go(held, token) =
            conflicts.check("TransactWriteItems", &first, &unlimited(), now)
        else {
            panic!("the first transaction is refused");
        };
        let second = touches("TransactWriteItems", &transaction("s1", "o2"), &schemas()).unwrap();
        let Verdict::Refuse(400, body) =
            conflicts.check("TransactWriteItems", &second, &unlimited(), now)
        else {
            panic!("the overlapping transaction went through");
        };
        let codes: Vec<&str> = body["CancellationReasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["Code"].as_str().unwrap())
            .collect();
        assert_eq!(codes, ["None", "TransactionConflict"]);
        // A single write to the held sale item conflicts too.
        let single = touches(
            "UpdateItem",
            &json!({"TableName": "sales", "Key": {"saleId": {"S": "s1"}}}),
            &schemas(),
        )
        .unwrap();
        let Verdict::Refuse(_, body) = conflicts.check("UpdateItem", &single, &unlimited(), now)
        else {
            panic!("a single write to a held item went through");
        };
        assert!(
            body["__type"]
                .as_str()
                .unwrap()
                .ends_with("TransactionConflictException")
        );
        // Another sale's transaction does not.
        let other = touches("TransactWriteItems", &transaction("s2", "o3"), &schemas()).unwrap();
        assert!(matches!(
            conflicts.check("TransactWriteItems", &other, &unlimited(), now),
            Verdict::Go(..)
        ));
        conflicts.release(&held, token);
        assert!(matches!(
            conflicts.check("TransactWriteItems", &second, &unlimited(), now),
            Verdict::Go(..)
        ));
        // A hold ends by itself after its time, answered or not.
        let later = now + unlimited().transaction_hold;
        let third = touches("TransactWriteItems", &transaction("s1", "o4"), &schemas()).unwrap();
        assert!(matches!(
            conflicts.check("TransactWriteItems", &third, &unlimited(), later),
            Verdict::Go(..)
        ));
    }

    #[test]
    fn a_partition_takes_its_write_units_a_second_and_no_more() {
        let conflicts = Conflicts::default();
        let limits = DynamoLimits {
            partition_write_units: Some(10),
            ..DynamoLimits::default()
        };
        let put = |order: &str| {
            touches(
                "PutItem",
                &json!({"TableName": "sales", "Item": {"saleId": {"S": "hot"}, "o": {"S": order}}}),
                &schemas(),
            )
            .unwrap()
        };
        let start = Instant::now();
        let passed = (0..15)
            .filter(|i| {
                matches!(
                    conflicts.check("PutItem", &put(&i.to_string()), &limits, start),
                    Verdict::Go(..)
                )
            })
            .count();
        assert_eq!(passed, 10, "one second's units, at once");
        let Verdict::Refuse(_, body) = conflicts.check("PutItem", &put("x"), &limits, start) else {
            panic!("not throttled");
        };
        assert!(
            body["__type"]
                .as_str()
                .unwrap()
                .ends_with("ProvisionedThroughputExceededException")
        );
        // Half a second later, half the units are back.
        let later = start + Duration::from_millis(500);
        let passed = (0..15)
            .filter(|i| {
                matches!(
                    conflicts.check("PutItem", &put(&i.to_string()), &limits, later),
                    Verdict::Go(..)
                )
            })
            .count();
        assert_eq!(passed, 5);
        // A transaction on the hot partition is cancelled with ThrottlingError
        // at the sale item's position only.
        let tx = touches("TransactWriteItems", &transaction("hot", "o9"), &schemas()).unwrap();
        let Verdict::Refuse(_, body) = conflicts.check("TransactWriteItems", &tx, &limits, later)
        else {
            panic!("the transaction was not throttled");
        };
        assert_eq!(body["CancellationReasons"][0]["Code"], "None");
        assert_eq!(body["CancellationReasons"][1]["Code"], "ThrottlingError");
    }

    #[test]
    fn an_item_over_400_kb_is_refused() {
        let conflicts = Conflicts::default();
        let big = "x".repeat(MAX_ITEM_BYTES);
        let put = touches(
            "PutItem",
            &json!({"TableName": "sales", "Item": {"saleId": {"S": "s"}, "audit": {"S": big}}}),
            &schemas(),
        )
        .unwrap();
        let Verdict::Refuse(400, body) =
            conflicts.check("PutItem", &put, &unlimited(), Instant::now())
        else {
            panic!("a 400 KB item was accepted");
        };
        assert_eq!(
            body["message"],
            "Item size has exceeded the maximum allowed size"
        );
        assert_eq!(
            item_size(
                &json!({"ab": {"S": "xyz"}, "n": {"N": "123"}, "m": {"M": {"k": {"BOOL": true}}}})
            ),
            2 + 3 + 1 + 3 + 1 + 3 + 1 + 1 + 1
        );
    }

    #[test]
    fn reads_run_together_and_everything_else_alone() {
        assert_eq!(kind("Query"), Kind::Read);
        assert_eq!(kind("GetItem"), Kind::Read);
        for op in [
            "PutItem",
            "TransactWriteItems",
            "CreateTable",
            "SomethingNew",
        ] {
            assert_eq!(kind(op), Kind::Write, "{op}");
        }
    }
}
