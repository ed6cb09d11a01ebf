//! `seckill-local sign-payment`: what the payment provider would send for
//! an order, signed with the local stack's payment key, printed as a `curl`
//! command, so a developer can try `POST /payments/callback` by hand.
//!
//! The order's amount comes from the orders table (the local stack's, or
//! `ORDERS_TABLE`), the key from the emulator's secret `up` created
//! ([`crate::local::LocalSettings::payment_secret_name`]). The signature is
//! good for five minutes (`seckill_shared::domain::payment::TOLERANCE_SECS`).

use crate::local::{LocalSettings, ensure_payment_secret};
use seckill_shared::adapters::aws;
use seckill_shared::adapters::dynamo::orders::DynamoOrders;
use seckill_shared::clock;
use seckill_shared::domain::payment::{PaymentKey, SIGNATURE_HEADER};
use seckill_shared::domain::{OrderId, PaymentId};
use seckill_shared::ports::OrderStore;
use std::time::Duration;

/// What to sign.
#[derive(Debug, Clone)]
pub struct SignRequest {
    pub order_id: String,
    /// The provider's payment id (default `pay-<unix seconds>`).
    pub payment_id: Option<String>,
    /// Another amount than the order's (to see `AMOUNT_MISMATCH`).
    pub amount: Option<u64>,
    /// The API's base URL (default `http://<SECKILL_LISTEN>`).
    pub url: Option<String>,
}

/// The `curl` command of a signed callback for the order.
pub async fn sign_payment(
    request: &SignRequest,
    settings: &LocalSettings,
) -> Result<String, String> {
    let order_id = OrderId::parse(&request.order_id).map_err(|e| e.to_string())?;
    let now_ms = clock::now_ms();
    let payment_id = match &request.payment_id {
        Some(id) => PaymentId::parse(id).map_err(|e| e.to_string())?,
        None => PaymentId::parse(&format!("pay-{}", now_ms / 1000)).map_err(|e| e.to_string())?,
    };
    let sdk = aws::sdk_config(aws::Caller::Tool, Duration::from_secs(10)).await;
    let orders = DynamoOrders::new(
        aws::dynamodb(&sdk),
        &settings.orders_table,
        &settings.sales_table,
    );
    let order = orders
        .get(&order_id)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            format!(
                "no order {order_id} in {} (a QUEUED order is not written yet)",
                settings.orders_table
            )
        })?;
    let price = order.amount.ok_or_else(|| {
        format!("order {order_id} has no amount: its sale has no price, so nothing is paid through the provider")
    })?;
    let secrets = aws::secrets(&sdk);
    let arn = ensure_payment_secret(&secrets, &settings.payment_secret_name())
        .await
        .map_err(|e| e.to_string())?;
    let key = secrets
        .get_secret_value()
        .secret_id(&arn)
        .send()
        .await
        .map_err(|e| aws_sdk_secretsmanager_error(&e))?
        .secret_string
        .ok_or_else(|| format!("secret {arn} holds no string"))?;
    let body = serde_json::json!({
        "paymentId": payment_id,
        "orderId": order_id,
        "amount": request.amount.unwrap_or(price.amount),
        "currency": price.currency.as_str(),
        "status": "SUCCEEDED",
    })
    .to_string();
    let signature = PaymentKey::new(key.as_bytes()).sign(now_ms / 1000, body.as_bytes());
    let url = request
        .url
        .clone()
        .unwrap_or_else(|| format!("http://{}", settings.listen));
    // Ids are of [A-Za-z0-9_-] and the rest is JSON of numbers and fixed
    // words: nothing in the body needs escaping inside single quotes.
    Ok(format!(
        "curl -sS -X POST '{url}/payments/callback' \\\n  -H 'content-type: application/json' \\\n  -H '{SIGNATURE_HEADER}: {signature}' \\\n  --data-raw '{body}'"
    ))
}

fn aws_sdk_secretsmanager_error(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
