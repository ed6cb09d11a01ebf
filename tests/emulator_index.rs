//! `infra/moto/server.py` answers a query of a global secondary index from
//! the items it keeps under each index key, filed again by every write; it
//! must answer exactly what moto's own server answers. The same seeded
//! writes go to both, each kind of write there is (put, update that moves
//! or drops an item's index key, delete, batch, transaction written or
//! cancelled), and after each round every key of the index is paged
//! through on both, a few items a page, both ways, with a condition on
//! the sort key and without.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, GlobalSecondaryIndex, KeySchemaElement,
    KeyType, Projection, ProjectionType, Put, PutRequest, ScalarAttributeType, TransactWriteItem,
    Update, WriteRequest,
};
use std::collections::HashMap;
use std::time::Duration;

const TABLE: &str = "index-twin";
const INDEX: &str = "byBucket";
const BUCKETS: u64 = 4;
const IDS: u64 = 40;

async fn client(url: &str) -> aws_sdk_dynamodb::Client {
    seckill_tests::clients_without_retries(url, Duration::from_secs(60))
        .await
        .0
}

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

fn key(name: &str, kind: KeyType) -> KeySchemaElement {
    KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()
        .unwrap()
}

fn string_attribute(name: &str) -> AttributeDefinition {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(ScalarAttributeType::S)
        .build()
        .unwrap()
}

async fn create(db: &aws_sdk_dynamodb::Client) {
    db.create_table()
        .table_name(TABLE)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(string_attribute("id"))
        .attribute_definitions(string_attribute("bucket"))
        .attribute_definitions(string_attribute("at"))
        .key_schema(key("id", KeyType::Hash))
        .global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(INDEX)
                .key_schema(key("bucket", KeyType::Hash))
                .key_schema(key("at", KeyType::Range))
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::All)
                        .build(),
                )
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
}

/// A small seeded generator: the same writes on both emulators.
struct Seeded(u64);

impl Seeded {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// One write, as both emulators are sent it.
#[derive(Debug, Clone)]
enum Write {
    Put {
        id: u64,
        bucket: u64,
        at: u64,
    },
    /// Moves the item to another key of the index.
    Move {
        id: u64,
        bucket: u64,
        at: u64,
    },
    /// Drops the item from the index (the sparse index's expiry).
    Drop {
        id: u64,
    },
    Delete {
        id: u64,
    },
    Batch(Vec<(u64, u64, u64)>),
    /// Two puts, cancelled when `cancel` (a condition that fails): moto
    /// then puts back what they changed.
    Transaction {
        puts: [(u64, u64, u64); 2],
        cancel: bool,
    },
}

fn item(id: u64, bucket: u64, at: u64) -> HashMap<String, AttributeValue> {
    HashMap::from([
        ("id".to_owned(), s(&format!("i{id:02}"))),
        ("bucket".to_owned(), s(&format!("b{bucket}"))),
        ("at".to_owned(), s(&format!("t{at:03}"))),
        ("pad".to_owned(), s(&format!("{id}-{bucket}-{at}"))),
    ])
}

fn writes(seed: u64, n: usize) -> Vec<Write> {
    let mut r = Seeded(seed);
    let row = |r: &mut Seeded| (r.below(IDS), r.below(BUCKETS), r.below(50));
    (0..n)
        .map(|_| match r.below(6) {
            0 => {
                let (id, bucket, at) = row(&mut r);
                Write::Put { id, bucket, at }
            }
            1 => {
                let (id, bucket, at) = row(&mut r);
                Write::Move { id, bucket, at }
            }
            2 => Write::Drop { id: r.below(IDS) },
            3 => Write::Delete { id: r.below(IDS) },
            4 => {
                // Distinct ids: a batch may not name one twice.
                let first = r.below(IDS);
                let rows = (0..3)
                    .map(|k| ((first + k * 7) % IDS, r.below(BUCKETS), r.below(50)))
                    .collect();
                Write::Batch(rows)
            }
            _ => {
                let a = row(&mut r);
                let mut b = row(&mut r);
                if b.0 == a.0 {
                    b.0 = (a.0 + 1) % IDS;
                }
                Write::Transaction {
                    puts: [a, b],
                    cancel: r.below(2) == 0,
                }
            }
        })
        .collect()
}

async fn apply(db: &aws_sdk_dynamodb::Client, write: &Write) {
    let id_of = |id: u64| s(&format!("i{id:02}"));
    match write {
        Write::Put { id, bucket, at } => {
            db.put_item()
                .table_name(TABLE)
                .set_item(Some(item(*id, *bucket, *at)))
                .send()
                .await
                .unwrap();
        }
        Write::Move { id, bucket, at } => {
            db.update_item()
                .table_name(TABLE)
                .key("id", id_of(*id))
                .update_expression("SET #b = :b, #a = :a")
                .expression_attribute_names("#b", "bucket")
                .expression_attribute_names("#a", "at")
                .expression_attribute_values(":b", s(&format!("b{bucket}")))
                .expression_attribute_values(":a", s(&format!("t{at:03}")))
                .send()
                .await
                .unwrap();
        }
        Write::Drop { id } => {
            db.update_item()
                .table_name(TABLE)
                .key("id", id_of(*id))
                .update_expression("REMOVE #b")
                .expression_attribute_names("#b", "bucket")
                .send()
                .await
                .unwrap();
        }
        Write::Delete { id } => {
            db.delete_item()
                .table_name(TABLE)
                .key("id", id_of(*id))
                .send()
                .await
                .unwrap();
        }
        Write::Batch(rows) => {
            let requests = rows
                .iter()
                .map(|(id, bucket, at)| {
                    WriteRequest::builder()
                        .put_request(
                            PutRequest::builder()
                                .set_item(Some(item(*id, *bucket, *at)))
                                .build()
                                .unwrap(),
                        )
                        .build()
                })
                .collect();
            db.batch_write_item()
                .request_items(TABLE, requests)
                .send()
                .await
                .unwrap();
        }
        Write::Transaction { puts, cancel } => {
            let mut request = db.transact_write_items();
            for (id, bucket, at) in puts {
                request = request.transact_items(
                    TransactWriteItem::builder()
                        .put(
                            Put::builder()
                                .table_name(TABLE)
                                .set_item(Some(item(*id, *bucket, *at)))
                                .build()
                                .unwrap(),
                        )
                        .build(),
                );
            }
            if *cancel {
                request = request.transact_items(
                    TransactWriteItem::builder()
                        .update(
                            Update::builder()
                                .table_name(TABLE)
                                .key("id", s("never"))
                                .update_expression("SET n = :one")
                                .condition_expression("attribute_exists(id)")
                                .expression_attribute_values(":one", AttributeValue::N("1".into()))
                                .build()
                                .unwrap(),
                        )
                        .build(),
                );
            }
            let sent = request.send().await;
            assert_eq!(sent.is_err(), *cancel, "{write:?}: {sent:?}");
        }
    }
}

/// Every key of the index paged through, two items a page, forward and
/// backward, with a condition on the sort key and without: each page as
/// the emulator answered it.
async fn pages(db: &aws_sdk_dynamodb::Client) -> Vec<Vec<HashMap<String, AttributeValue>>> {
    let mut all = Vec::new();
    for bucket in 0..BUCKETS {
        for forward in [true, false] {
            for from in [Some("t010"), None] {
                let mut start = None;
                loop {
                    let mut query = db
                        .query()
                        .table_name(TABLE)
                        .index_name(INDEX)
                        .expression_attribute_names("#b", "bucket")
                        .expression_attribute_values(":b", s(&format!("b{bucket}")))
                        .scan_index_forward(forward)
                        .limit(2)
                        .set_exclusive_start_key(start);
                    query = match from {
                        Some(from) => query
                            .key_condition_expression("#b = :b AND #a >= :from")
                            .expression_attribute_names("#a", "at")
                            .expression_attribute_values(":from", s(from)),
                        None => query.key_condition_expression("#b = :b"),
                    };
                    let page = query.send().await.unwrap();
                    all.push(page.items().to_vec());
                    start = page.last_evaluated_key().cloned();
                    if start.is_none() {
                        break;
                    }
                }
            }
        }
    }
    all
}

#[tokio::test]
async fn the_item_undo_emulator_answers_index_queries_as_moto_does() {
    let (mut plain, plain_url) = seckill_tests::spawn_moto(false).await;
    let (mut patched, patched_url) = seckill_tests::spawn_moto(true).await;
    let (plain_db, patched_db) = (client(&plain_url).await, client(&patched_url).await);
    create(&plain_db).await;
    create(&patched_db).await;
    for round in 0..12u64 {
        for write in writes(round, 15) {
            apply(&plain_db, &write).await;
            apply(&patched_db, &write).await;
        }
        let (expected, answered) = (pages(&plain_db).await, pages(&patched_db).await);
        assert!(
            expected.iter().any(|page| !page.is_empty()),
            "round {round}: the index is empty, nothing was compared"
        );
        assert_eq!(answered, expected, "round {round}");
    }
    let _ = plain.kill().await;
    let _ = patched.kill().await;
}
