//! The sale catalog on DynamoDB: one item per sale in the `sales` table.
//!
//! Item shape: `saleId` (key), `name`, `totalStock`, `startAt`, `endAt`
//! (RFC 3339 UTC), `perUserLimit`, `paymentWindowSeconds`, `shards`, `gate`,
//! `price` (a map `{amount: N, currency: S}`, or NULL / absent for a sale
//! without a price), `admissionWindow` (seconds) and `drawSeed` (64 hex
//! digits) for a sale with a lottery window (NULL or absent without one),
//! and the counters `available` and `sold`, which only conditional updates
//! change (`available >= :q`). The item stays that size whatever happens
//! to the sale: its audit trail and last report are items of their own
//! beside it ([`history`]).

use super::contention::through_contention;
use crate::clock;
use crate::domain::draw::DrawSeed;
use crate::domain::money::{Currency, Money};
use crate::domain::sale_spec::{EditRefusal, edit_refusal, keep_seed};
use crate::domain::{Admission, Sale, SaleId};
use crate::ports::{AuditTrail, CatalogAdmin, CatalogError, SaleCatalog, SaleEditor};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use history::is_sale_key;
pub use history::{AUDIT_PAGE_MAX, AuditPage, AuditRange};
use std::collections::HashMap;

mod history;

type Item = HashMap<String, AttributeValue>;

#[derive(Clone)]
pub struct DynamoCatalog {
    client: Client,
    table: String,
    /// [`SaleCatalog::get_sale`] reads consistently.
    consistent: bool,
}

impl DynamoCatalog {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
            consistent: false,
        }
    }

    /// The same catalog, its `get_sale` reading consistently: for the
    /// order-writer, whose orders must be decided under the sale as it was
    /// when Redis took them (an edit just before the start reaches Redis at
    /// once; an eventually consistent read could miss it).
    pub fn consistent_reads(mut self) -> Self {
        self.consistent = true;
        self
    }

    /// Creates the sale item if it does not exist; returns false when it did
    /// (its counters are never reset by a second create).
    pub async fn create_sale(&self, sale: &Sale) -> Result<bool, CatalogError> {
        let request = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(sale_to_item(sale)))
            .condition_expression("attribute_not_exists(saleId)");
        let result = through_contention(|| request.clone().send()).await;
        match result {
            Ok(_) => Ok(true),
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Ok(false)
            }
            Err(err) => Err(CatalogError::Unavailable(
                aws_sdk_dynamodb::error::DisplayErrorContext(err).to_string(),
            )),
        }
    }
}

pub use crate::domain::ledger::SaleCounters;

pub use crate::ports::Upsert;

impl SaleEditor for DynamoCatalog {
    /// Every sale with its counters, for the operator's list. A scan: the
    /// table holds one small item per sale, so a few pages at most. A
    /// malformed item is logged and left out, as [`SaleCatalog::list_sales`]
    /// does.
    async fn list_records(&self) -> Result<Vec<(Sale, SaleCounters)>, CatalogError> {
        let items: Vec<Item> = self
            .client
            .scan()
            .table_name(&self.table)
            // What a listing shows; the history items beside the sales
            // (see `history`) are filtered out below.
            .projection_expression(LISTED.map(|(alias, _)| alias).join(", "))
            .set_expression_attribute_names(Some(
                LISTED
                    .iter()
                    .map(|(alias, name)| ((*alias).to_owned(), (*name).to_owned()))
                    .collect(),
            ))
            .into_paginator()
            .items()
            .send()
            .collect::<Result<_, _>>()
            .await
            .map_err(unavailable)?;
        let mut records = Vec::new();
        for item in items.iter().filter(|i| is_sale_key(i)) {
            match sale_from_item(item).and_then(|s| Ok((s, counters_from_item(item)?))) {
                Ok(record) => records.push(record),
                Err(err) => tracing::warn!(%err, "skipping a malformed sale item"),
            }
        }
        Ok(records)
    }

    /// Creates a sale, or updates its definition, and returns it as it was
    /// before (for the audit trail). What may change is the domain's rule
    /// ([`edit_refusal`]). Before the start a new total resets `available`
    /// to total minus sold.
    async fn upsert_sale(
        &self,
        sale: &Sale,
        now_ms: i64,
    ) -> Result<(Upsert, Option<Sale>), CatalogError> {
        if self.create_sale(sale).await? {
            return Ok((Upsert::Created, None));
        }
        let Some((current, counters)) = self.get_record(&sale.sale_id).await? else {
            return Ok((Upsert::Conflict, None));
        };
        let mut sale = sale.clone();
        keep_seed(&current, &mut sale);
        let sale = &sale;
        if let Some(refusal) = edit_refusal(&current, sale, now_ms, counters.loaded) {
            let refusal = match refusal {
                EditRefusal::Ended => Upsert::Ended,
                EditRefusal::Started => Upsert::StartedStockChange,
                EditRefusal::Loaded(why) => Upsert::Loaded(why),
            };
            return Ok((refusal, Some(current)));
        }
        let item = sale_to_item(sale);
        let get = |k: &str| item.get(k).cloned().unwrap_or(AttributeValue::Null(true));
        let request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("saleId", AttributeValue::S(sale.sale_id.to_string()))
            .update_expression(
                "SET #n = :name, totalStock = :total, startAt = :start, endAt = :end, \
                 perUserLimit = :limit, paymentWindowSeconds = :window, shards = :shards, \
                 gate = :gate, price = :price, powBits = :pow, admissionWindow = :admission, \
                 drawSeed = :seed, available = :total - sold, \
                 version = version + :one",
            )
            .condition_expression("version = :version AND sold <= :total")
            .expression_attribute_names("#n", "name")
            .expression_attribute_values(":name", get("name"))
            .expression_attribute_values(":total", get("totalStock"))
            .expression_attribute_values(":start", get("startAt"))
            .expression_attribute_values(":end", get("endAt"))
            .expression_attribute_values(":limit", get("perUserLimit"))
            .expression_attribute_values(":window", get("paymentWindowSeconds"))
            .expression_attribute_values(":shards", get("shards"))
            .expression_attribute_values(":gate", get("gate"))
            .expression_attribute_values(":price", get("price"))
            .expression_attribute_values(":pow", get("powBits"))
            .expression_attribute_values(":admission", get("admissionWindow"))
            .expression_attribute_values(":seed", get("drawSeed"))
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .expression_attribute_values(
                ":version",
                AttributeValue::N(counters.version.to_string()),
            );
        let result = through_contention(|| request.clone().send()).await;
        match result {
            Ok(_) => Ok((Upsert::Updated, Some(current))),
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Ok((Upsert::Conflict, Some(current)))
            }
            Err(err) => Err(unavailable(err)),
        }
    }

    async fn set_paused(
        &self,
        sale_id: &SaleId,
        paused: bool,
    ) -> Result<Option<Sale>, CatalogError> {
        let request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("saleId", AttributeValue::S(sale_id.to_string()))
            .update_expression("SET paused = :p")
            .condition_expression("attribute_exists(saleId)")
            .expression_attribute_values(":p", AttributeValue::Bool(paused))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld);
        let result = through_contention(|| request.clone().send()).await;
        match result {
            Ok(out) => out.attributes.as_ref().map(sale_from_item).transpose(),
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Ok(None)
            }
            Err(err) => Err(unavailable(err)),
        }
    }
}

impl CatalogAdmin for DynamoCatalog {
    /// A sale with its counters, read consistently.
    async fn get_record(
        &self,
        sale_id: &SaleId,
    ) -> Result<Option<(Sale, SaleCounters)>, CatalogError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("saleId", AttributeValue::S(sale_id.to_string()))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        let Some(item) = out.item else {
            return Ok(None);
        };
        Ok(Some((sale_from_item(&item)?, counters_from_item(&item)?)))
    }

    /// Records on the sale item that its keys are being loaded into Redis
    /// (`loadedAtMs`, the first time only) and says whether they had been
    /// before. Written before the keys exist: a purchase needs the keys, so
    /// a sale never marked can have no accepted purchase on its way.
    async fn mark_loaded(&self, sale_id: &SaleId, now_ms: i64) -> Result<bool, CatalogError> {
        let request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("saleId", AttributeValue::S(sale_id.to_string()))
            .update_expression("SET loadedAtMs = if_not_exists(loadedAtMs, :now)")
            .condition_expression("attribute_exists(saleId)")
            .expression_attribute_values(":now", AttributeValue::N(now_ms.to_string()))
            // The whole old item: UPDATED_OLD may leave out an attribute set
            // to the value it already had (the emulator does).
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld);
        let out = through_contention(|| request.clone().send())
            .await
            .map_err(unavailable)?;
        Ok(out
            .attributes
            .is_some_and(|old| old.contains_key("loadedAtMs")))
    }

    /// Keeps the last reconciliation report (JSON) beside the sale item
    /// ([`history`]).
    async fn store_report(&self, sale_id: &SaleId, json: &str) -> Result<(), CatalogError> {
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("saleId", AttributeValue::S(history::report_key(sale_id)))
            .item("report", AttributeValue::S(json.to_owned()));
        through_contention(|| put.clone().send())
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    /// A sale and its last reconciliation report (JSON, if any); `None`
    /// when the sale does not exist.
    async fn sale_with_report(
        &self,
        sale_id: &SaleId,
    ) -> Result<Option<(Sale, Option<String>)>, CatalogError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("saleId", AttributeValue::S(sale_id.to_string()))
            .send()
            .await
            .map_err(unavailable)?;
        let Some(item) = out.item else {
            return Ok(None);
        };
        let sale = sale_from_item(&item)?;
        Ok(Some((sale, self.last_report(sale_id).await?)))
    }
}

fn unavailable(err: impl std::error::Error + Send + Sync + 'static) -> CatalogError {
    CatalogError::Unavailable(aws_sdk_dynamodb::error::DisplayErrorContext(err).to_string())
}

impl SaleCatalog for DynamoCatalog {
    async fn get_sale(&self, sale_id: &SaleId) -> Result<Option<Sale>, CatalogError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("saleId", AttributeValue::S(sale_id.to_string()))
            .consistent_read(self.consistent)
            .send()
            .await
            .map_err(|e| {
                CatalogError::Unavailable(
                    aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string(),
                )
            })?;
        out.item.map(|item| sale_from_item(&item)).transpose()
    }

    async fn list_sales(&self) -> Result<Vec<Sale>, CatalogError> {
        let items: Vec<Item> = self
            .client
            .scan()
            .table_name(&self.table)
            .into_paginator()
            .items()
            .send()
            .collect::<Result<_, _>>()
            .await
            .map_err(unavailable)?;
        let mut sales = Vec::new();
        for item in items.iter().filter(|i| is_sale_key(i)) {
            match sale_from_item(item) {
                Ok(sale) => sales.push(sale),
                Err(err) => tracing::warn!(%err, "skipping a malformed sale item"),
            }
        }
        Ok(sales)
    }
}

/// The attributes the operator's list reads (each under an alias: some
/// are reserved words). `price` is read when the item has one.
const LISTED: [(&str, &str); 19] = [
    ("#k", "saleId"),
    ("#n", "name"),
    ("#t", "totalStock"),
    ("#s", "startAt"),
    ("#e", "endAt"),
    ("#l", "perUserLimit"),
    ("#w", "paymentWindowSeconds"),
    ("#h", "shards"),
    ("#g", "gate"),
    ("#p", "paused"),
    ("#a", "available"),
    ("#o", "sold"),
    ("#v", "version"),
    ("#r", "returnSeq"),
    ("#m", "loadedAtMs"),
    ("#c", "price"),
    ("#b", "powBits"),
    ("#x", "admissionWindow"),
    ("#d", "drawSeed"),
];

/// The counters of a sale item.
fn counters_from_item(item: &Item) -> Result<SaleCounters, CatalogError> {
    let n = |name: &str| match item.get(name) {
        Some(AttributeValue::N(v)) => v
            .parse::<i64>()
            .map_err(|_| CatalogError::Malformed(format!("{name} is not a number"))),
        _ => Err(CatalogError::Malformed(format!("{name} missing"))),
    };
    Ok(SaleCounters {
        available: n("available")?,
        sold: n("sold")?,
        version: n("version").unwrap_or(1),
        return_seq: n("returnSeq").map_or(0, |v| u64::try_from(v).unwrap_or(0)),
        loaded: item.contains_key("loadedAtMs"),
    })
}

pub fn sale_to_item(sale: &Sale) -> Item {
    let n = |v: u32| AttributeValue::N(v.to_string());
    let mut item = HashMap::from([
        ("saleId".into(), AttributeValue::S(sale.sale_id.to_string())),
        ("name".into(), AttributeValue::S(sale.name.clone())),
        ("totalStock".into(), n(sale.total_stock)),
        (
            "startAt".into(),
            AttributeValue::S(clock::rfc3339_ms(sale.start_ms)),
        ),
        (
            "endAt".into(),
            AttributeValue::S(clock::rfc3339_ms(sale.end_ms)),
        ),
        ("perUserLimit".into(), n(sale.per_user_limit)),
        (
            "paymentWindowSeconds".into(),
            n(sale.payment_window_seconds),
        ),
        ("shards".into(), n(sale.shards)),
        ("gate".into(), AttributeValue::Bool(sale.gate)),
        ("paused".into(), AttributeValue::Bool(sale.paused)),
        ("available".into(), n(sale.total_stock)),
        ("sold".into(), n(0)),
        ("version".into(), n(1)),
    ]);
    if let Some(price) = &sale.price {
        item.insert("price".into(), money_to_attr(price));
    }
    if let Some(bits) = sale.pow_bits {
        item.insert("powBits".into(), AttributeValue::N(bits.to_string()));
    }
    if let Some(admission) = &sale.admission {
        item.insert("admissionWindow".into(), n(admission.window_secs));
        item.insert(
            "drawSeed".into(),
            AttributeValue::S(admission.seed.to_hex()),
        );
    }
    item
}

/// The lottery window of a sale item: both attributes or neither.
fn admission_from_item(item: &Item) -> Result<Option<Admission>, CatalogError> {
    let window = match item.get("admissionWindow") {
        None | Some(AttributeValue::Null(_)) => return Ok(None),
        Some(AttributeValue::N(v)) => v
            .parse::<u32>()
            .map_err(|_| CatalogError::Malformed("admissionWindow is not a count".into()))?,
        Some(_) => {
            return Err(CatalogError::Malformed(
                "admissionWindow is not a number".into(),
            ));
        }
    };
    let seed = match item.get("drawSeed") {
        Some(AttributeValue::S(hex)) => {
            DrawSeed::parse_hex(hex).map_err(|e| CatalogError::Malformed(e.to_string()))?
        }
        _ => {
            return Err(CatalogError::Malformed(
                "drawSeed missing for a lottery window".into(),
            ));
        }
    };
    Ok(Some(Admission {
        window_secs: window,
        seed,
    }))
}

/// A price or an amount as a DynamoDB map `{amount: N, currency: S}`.
pub fn money_to_attr(money: &Money) -> AttributeValue {
    AttributeValue::M(HashMap::from([
        ("amount".into(), AttributeValue::N(money.amount.to_string())),
        (
            "currency".into(),
            AttributeValue::S(money.currency.as_str().into()),
        ),
    ]))
}

/// The map [`money_to_attr`] writes; `Ok(None)` for an absent or NULL
/// attribute, an error naming `what` for anything else.
pub fn money_from_attr(attr: Option<&AttributeValue>, what: &str) -> Result<Option<Money>, String> {
    let map = match attr {
        None | Some(AttributeValue::Null(_)) => return Ok(None),
        Some(AttributeValue::M(map)) => map,
        Some(_) => return Err(format!("{what} is not a map")),
    };
    let amount = match map.get("amount") {
        Some(AttributeValue::N(n)) => n.parse::<u64>().ok(),
        _ => None,
    };
    let currency = match map.get("currency") {
        Some(AttributeValue::S(c)) => Currency::parse(c),
        _ => None,
    };
    match (amount, currency) {
        (Some(amount), Some(currency)) => Ok(Some(Money { amount, currency })),
        _ => Err(format!("{what} has no valid amount and currency")),
    }
}

pub fn sale_from_item(item: &Item) -> Result<Sale, CatalogError> {
    let s = |name: &str| match item.get(name) {
        Some(AttributeValue::S(v)) => Ok(v.as_str()),
        _ => Err(CatalogError::Malformed(format!(
            "{name} missing or not a string"
        ))),
    };
    let n = |name: &str| match item.get(name) {
        Some(AttributeValue::N(v)) => v
            .parse::<u32>()
            .map_err(|_| CatalogError::Malformed(format!("{name} is not a count"))),
        _ => Err(CatalogError::Malformed(format!(
            "{name} missing or not a number"
        ))),
    };
    let time = |name: &str| {
        clock::parse_rfc3339_ms(s(name)?)
            .ok_or_else(|| CatalogError::Malformed(format!("{name} is not RFC 3339")))
    };
    Ok(Sale {
        sale_id: SaleId::parse(s("saleId")?).map_err(|e| CatalogError::Malformed(e.0))?,
        name: s("name")?.to_owned(),
        total_stock: n("totalStock")?,
        start_ms: time("startAt")?,
        end_ms: time("endAt")?,
        per_user_limit: n("perUserLimit")?,
        payment_window_seconds: n("paymentWindowSeconds")?,
        shards: n("shards")?,
        gate: matches!(item.get("gate"), Some(AttributeValue::Bool(true))),
        paused: matches!(item.get("paused"), Some(AttributeValue::Bool(true))),
        price: money_from_attr(item.get("price"), "price").map_err(CatalogError::Malformed)?,
        // Absent or NULL (every sale made before the setting): the
        // arithmetic question, as before.
        pow_bits: match item.get("powBits") {
            None | Some(AttributeValue::Null(_)) => None,
            Some(AttributeValue::N(v)) => Some(
                v.parse::<u8>()
                    .map_err(|_| CatalogError::Malformed("powBits is not a small count".into()))?,
            ),
            Some(_) => return Err(CatalogError::Malformed("powBits is not a number".into())),
        },
        admission: admission_from_item(item)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_round_trip() {
        let sale = Sale {
            sale_id: SaleId::parse("s-1").unwrap(),
            name: "Lamp".into(),
            total_stock: 1000,
            start_ms: 1_764_471_962_000,
            end_ms: 1_764_475_562_000,
            per_user_limit: 2,
            payment_window_seconds: 900,
            shards: 1,
            gate: false,
            paused: false,
            price: None,
            pow_bits: None,
            admission: None,
        };
        let item = sale_to_item(&sale);
        assert_eq!(sale_from_item(&item).unwrap(), sale);
        let drawn = Sale {
            admission: Some(Admission {
                window_secs: 3,
                seed: DrawSeed::from_bytes([7; 32]),
            }),
            ..sale.clone()
        };
        assert_eq!(sale_from_item(&sale_to_item(&drawn)).unwrap(), drawn);
        let priced = Sale {
            price: Some(Money {
                amount: 1999,
                currency: Currency::parse("EUR").unwrap(),
            }),
            ..sale.clone()
        };
        assert_eq!(sale_from_item(&sale_to_item(&priced)).unwrap(), priced);
        let pow = Sale {
            gate: true,
            pow_bits: Some(18),
            ..sale.clone()
        };
        assert_eq!(sale_from_item(&sale_to_item(&pow)).unwrap(), pow);
        let mut broken = item.clone();
        broken.insert("totalStock".into(), AttributeValue::S("ten".into()));
        assert!(sale_from_item(&broken).is_err());
    }
}
