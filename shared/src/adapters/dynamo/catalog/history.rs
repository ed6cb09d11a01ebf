//! A sale's history, in items of its own beside the sale item.
//!
//! Every order transaction updates the sale item, and DynamoDB charges a
//! write unit per KB of the item and refuses items over 400 KB: a sale
//! item that carried its audit trail and its last report would cost more
//! with every admin action and one day refuse every order. So the sale
//! item holds only the sale, and the history lives in the same table under
//! keys no sale id can take (a sale id never holds `#`):
//!
//! - `{saleId}#audit`: the audit head, `seq` (the number of entries so far).
//! - `{saleId}#audit#{seq}` (`seq` zero-padded to 10 digits, from 1): one
//!   entry, `entry` (the JSON text).
//! - `{saleId}#report`: the last reconciliation report, `report` (JSON).
//!
//! An append takes the next number from the head, then writes its entry;
//! an append that fails between the two leaves a number with no entry,
//! which a read skips (the structured log line holds every entry anyway).

use super::{DynamoCatalog, Item, unavailable};
use crate::adapters::dynamo::contention::through_contention;
use crate::domain::SaleId;
use crate::ports::{AuditTrail, CatalogError};
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use std::collections::HashMap;

pub use crate::ports::{AUDIT_PAGE_MAX, AuditPage, AuditRange};

/// BatchGetItem's own limit of keys per request.
const BATCH_KEYS: usize = 100;

/// Whether a `sales` item is a sale (not a history item).
pub(super) fn is_sale_key(item: &Item) -> bool {
    matches!(item.get("saleId"), Some(AttributeValue::S(key)) if !key.contains('#'))
}

fn key(raw: String) -> HashMap<String, AttributeValue> {
    HashMap::from([("saleId".to_owned(), AttributeValue::S(raw))])
}

fn head_key(sale_id: &SaleId) -> String {
    format!("{sale_id}#audit")
}

fn entry_key(sale_id: &SaleId, seq: u64) -> String {
    format!("{sale_id}#audit#{seq:010}")
}

pub(super) fn report_key(sale_id: &SaleId) -> String {
    format!("{sale_id}#report")
}

impl AuditTrail for DynamoCatalog {
    async fn append_audit(
        &self,
        sale_id: &SaleId,
        entry: &serde_json::Value,
    ) -> Result<(), CatalogError> {
        let head = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(head_key(sale_id))))
            .update_expression("ADD seq :one")
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::UpdatedNew);
        let out = through_contention(|| head.clone().send())
            .await
            .map_err(unavailable)?;
        let seq = match out.attributes.as_ref().and_then(|a| a.get("seq")) {
            Some(AttributeValue::N(n)) => n
                .parse::<u64>()
                .map_err(|_| CatalogError::Malformed(format!("{sale_id}: audit seq {n}")))?,
            _ => return Err(CatalogError::Malformed(format!("{sale_id}: no audit seq"))),
        };
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("saleId", AttributeValue::S(entry_key(sale_id, seq)))
            .item("entry", AttributeValue::S(entry.to_string()));
        through_contention(|| put.clone().send())
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    async fn audit(
        &self,
        sale_id: &SaleId,
        range: AuditRange,
    ) -> Result<Option<AuditPage>, CatalogError> {
        if self
            .get_item(sale_id.to_string(), "saleId")
            .await?
            .is_none()
        {
            return Ok(None);
        }
        let total = match self.get_item(head_key(sale_id), "seq").await? {
            Some(head) => match head.get("seq") {
                Some(AttributeValue::N(n)) => n.parse::<u64>().unwrap_or(0),
                _ => 0,
            },
            None => 0,
        };
        let (first, last) = match range {
            AuditRange::After { after, limit } => {
                let limit = u64::from(limit.clamp(1, AUDIT_PAGE_MAX));
                (
                    after.saturating_add(1),
                    after.saturating_add(limit).min(total),
                )
            }
            AuditRange::Last(n) => {
                let n = u64::from(n.clamp(1, AUDIT_PAGE_MAX));
                (total.saturating_sub(n).saturating_add(1), total)
            }
        };
        let mut found: Vec<(u64, serde_json::Value)> = Vec::new();
        let seqs: Vec<u64> = (first..=last).collect();
        for chunk in seqs.chunks(BATCH_KEYS) {
            let keys = chunk.iter().map(|&s| key(entry_key(sale_id, s))).collect();
            for item in self.batch_get(keys).await? {
                let seq = match item.get("saleId") {
                    Some(AttributeValue::S(k)) => {
                        k.rsplit('#').next().and_then(|s| s.parse::<u64>().ok())
                    }
                    _ => None,
                };
                let entry = match item.get("entry") {
                    Some(AttributeValue::S(raw)) => serde_json::from_str(raw).ok(),
                    _ => None,
                };
                if let (Some(seq), Some(serde_json::Value::Object(mut entry))) = (seq, entry) {
                    entry.insert("seq".into(), seq.into());
                    found.push((seq, serde_json::Value::Object(entry)));
                }
            }
        }
        found.sort_by_key(|(seq, _)| *seq);
        Ok(Some(AuditPage {
            entries: found.into_iter().map(|(_, e)| e).collect(),
            total,
            next: (last < total).then_some(last),
        }))
    }

    async fn last_report(&self, sale_id: &SaleId) -> Result<Option<String>, CatalogError> {
        Ok(self
            .get_item(report_key(sale_id), "report")
            .await?
            .and_then(|item| match item.get("report") {
                Some(AttributeValue::S(json)) => Some(json.clone()),
                _ => None,
            }))
    }
}

impl DynamoCatalog {
    /// One item read consistently, only the attributes `projection` names.
    async fn get_item(
        &self,
        raw_key: String,
        projection: &str,
    ) -> Result<Option<Item>, CatalogError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(raw_key)))
            .projection_expression(projection)
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        Ok(out.item)
    }

    /// The items of `keys` (at most [`BATCH_KEYS`]) that exist, read
    /// consistently; keys the service leaves unprocessed are asked again.
    async fn batch_get(
        &self,
        keys: Vec<HashMap<String, AttributeValue>>,
    ) -> Result<Vec<Item>, CatalogError> {
        let mut items = Vec::new();
        let mut pending = Some(
            KeysAndAttributes::builder()
                .set_keys(Some(keys))
                .consistent_read(true)
                .build()
                .map_err(unavailable)?,
        );
        let mut attempt = 0;
        while let Some(request) = pending.take() {
            if attempt > 0 {
                tokio::time::sleep(crate::adapters::dynamo::contention::jittered(
                    attempt,
                    std::time::Duration::from_millis(20),
                    std::time::Duration::from_millis(500),
                ))
                .await;
            }
            attempt += 1;
            let out = self
                .client
                .batch_get_item()
                .request_items(&self.table, request)
                .send()
                .await
                .map_err(unavailable)?;
            if let Some(mut got) = out.responses
                && let Some(found) = got.remove(&self.table)
            {
                items.extend(found);
            }
            pending = out
                .unprocessed_keys
                .and_then(|mut left| left.remove(&self.table))
                .filter(|left| !left.keys().is_empty());
            if attempt > 8 && pending.is_some() {
                return Err(CatalogError::Unavailable(
                    "audit read: keys left unprocessed after 8 attempts".into(),
                ));
            }
        }
        Ok(items)
    }
}
