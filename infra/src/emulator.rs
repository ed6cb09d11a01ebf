//! Creates what `template.yaml` creates in AWS (the orders queue with its
//! DLQ and redrive, the two tables with their indexes, the secrets the
//! functions fetch at cold start) on any AWS-compatible endpoint, if
//! missing. Tests use it too, with their own names.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType,
};
use aws_sdk_sqs::types::QueueAttributeName;
use seckill_shared::adapters::dynamo::order_index::{
    BY_SALE_BUCKET_STATUS, PENDING_BUCKET_BY_EXPIRY,
};

/// Matches `template.yaml`: after this many receives a message goes to the DLQ.
pub const MAX_RECEIVE_COUNT: u32 = 5;
/// Matches `template.yaml`: the order-writer's visibility timeout.
pub const VISIBILITY_TIMEOUT_SECS: u32 = 61;

#[derive(Debug, thiserror::Error)]
#[error("emulator set-up failed: {0}")]
pub struct SetupError(String);

fn fail(err: impl std::error::Error + 'static) -> SetupError {
    SetupError(seckill_shared::adapters::sqs::describe(&err))
}

/// The URLs of the orders queue and its DLQ.
#[derive(Debug, Clone)]
pub struct Queues {
    pub orders_url: String,
    pub dlq_url: String,
}

/// Creates the orders queue and its DLQ. `visibility_timeout_secs` is the
/// template's 61 s in the stack; tests pass less so a retry comes quickly.
pub async fn ensure_queues(
    sqs: &aws_sdk_sqs::Client,
    orders: &str,
    dlq: &str,
    visibility_timeout_secs: u32,
) -> Result<Queues, SetupError> {
    let dlq_url = sqs
        .create_queue()
        .queue_name(dlq)
        .attributes(QueueAttributeName::MessageRetentionPeriod, "1209600")
        .send()
        .await
        .map_err(fail)?
        .queue_url
        .ok_or_else(|| SetupError("no DLQ url".into()))?;
    let dlq_arn = sqs
        .get_queue_attributes()
        .queue_url(&dlq_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(fail)?
        .attributes
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .ok_or_else(|| SetupError("no DLQ arn".into()))?;
    let redrive = serde_json::json!({
        "deadLetterTargetArn": dlq_arn,
        "maxReceiveCount": MAX_RECEIVE_COUNT,
    });
    let orders_url = sqs
        .create_queue()
        .queue_name(orders)
        .attributes(
            QueueAttributeName::VisibilityTimeout,
            visibility_timeout_secs.to_string(),
        )
        .attributes(QueueAttributeName::RedrivePolicy, redrive.to_string())
        .send()
        .await
        .map_err(fail)?
        .queue_url
        .ok_or_else(|| SetupError("no queue url".into()))?;
    Ok(Queues {
        orders_url,
        dlq_url,
    })
}

fn key(name: &str, kind: KeyType) -> Result<KeySchemaElement, SetupError> {
    KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()
        .map_err(fail)
}

fn attr(name: &str) -> Result<AttributeDefinition, SetupError> {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(ScalarAttributeType::S)
        .build()
        .map_err(fail)
}

fn index(name: &str, hash: &str, range: &str) -> Result<GlobalSecondaryIndex, SetupError> {
    GlobalSecondaryIndex::builder()
        .index_name(name)
        .key_schema(key(hash, KeyType::Hash)?)
        .key_schema(key(range, KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::All)
                .build(),
        )
        .build()
        .map_err(fail)
}

async fn table_exists(db: &aws_sdk_dynamodb::Client, name: &str) -> Result<bool, SetupError> {
    match db.describe_table().table_name(name).send().await {
        Ok(_) => Ok(true),
        Err(err)
            if err
                .as_service_error()
                .is_some_and(|e| e.is_resource_not_found_exception()) =>
        {
            Ok(false)
        }
        Err(err) => Err(fail(err)),
    }
}

/// Creates the `sales` and `orders` tables (keys and indexes as in
/// `template.yaml`) unless they exist.
pub async fn ensure_tables(
    db: &aws_sdk_dynamodb::Client,
    sales: &str,
    orders: &str,
) -> Result<(), SetupError> {
    if !table_exists(db, sales).await? {
        db.create_table()
            .table_name(sales)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(attr("saleId")?)
            .key_schema(key("saleId", KeyType::Hash)?)
            .send()
            .await
            .map_err(fail)?;
    }
    if !table_exists(db, orders).await? {
        db.create_table()
            .table_name(orders)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(attr("orderId")?)
            .attribute_definitions(attr("saleId")?)
            .attribute_definitions(attr("status")?)
            .attribute_definitions(attr("saleBucket")?)
            .attribute_definitions(attr("pendingBucket")?)
            .attribute_definitions(attr("expiresAt")?)
            .attribute_definitions(attr("userId")?)
            .attribute_definitions(attr("waitSale")?)
            .attribute_definitions(attr("waitKey")?)
            .key_schema(key("orderId", KeyType::Hash)?)
            .global_secondary_indexes(index(BY_SALE_BUCKET_STATUS, "saleBucket", "status")?)
            .global_secondary_indexes(index(
                PENDING_BUCKET_BY_EXPIRY,
                "pendingBucket",
                "expiresAt",
            )?)
            .global_secondary_indexes(index("byBuyer", "userId", "saleId")?)
            .global_secondary_indexes(index(
                seckill_shared::adapters::dynamo::waitlist::BY_WAITLIST,
                "waitSale",
                "waitKey",
            )?)
            .send()
            .await
            .map_err(fail)?;
    }
    Ok(())
}

/// The ARN of the Secrets Manager secret `name`, created with `value` if
/// missing (an existing secret keeps its value: someone may have put another
/// key there on purpose).
pub async fn ensure_secret(
    secrets: &seckill_shared::adapters::aws::SecretsClient,
    name: &str,
    value: &str,
) -> Result<String, SetupError> {
    match secrets
        .create_secret()
        .name(name)
        .secret_string(value)
        .send()
        .await
    {
        Ok(created) => created
            .arn
            .ok_or_else(|| SetupError(format!("secret {name}: no ARN"))),
        Err(err)
            if err
                .as_service_error()
                .is_some_and(|e| e.is_resource_exists_exception()) =>
        {
            secrets
                .describe_secret()
                .secret_id(name)
                .send()
                .await
                .map_err(fail)?
                .arn
                .ok_or_else(|| SetupError(format!("secret {name}: no ARN")))
        }
        Err(err) => Err(fail(err)),
    }
}
