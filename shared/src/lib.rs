//! The Seckill domain and everything the functions share.
//!
//! # Layout
//!
//! - [`domain`]: newtypes that can only hold valid values (`SaleId`, `UserId`,
//!   `OrderId`, `Quantity`, `IdempotencyKey`), the `Sale` and the order message.
//! - [`ports`]: the traits where the domain meets the outside (stock store,
//!   order queue, sale catalog), so domain logic is tested without I/O.
//! - [`purchase`]: the purchase decision: reserve in the stock store, hand
//!   the order to the queue, release only what is proven unsent.
//! - [`error`]: the API error codes and their one mapping to HTTP.
//! - [`gate`]: the sale gate's questions and passes (HMAC, stateless).
//! - [`http`]: JSON responses and the API Gateway claims helpers.
//! - [`config`]: typed configuration, read once from the environment.
//! - [`secrets`]: the Redis AUTH token and the gate key from Secrets
//!   Manager, fetched once per execution environment by each `wire`.
//! - [`invariants`]: the design's invariants over one sale's Redis, queue
//!   and DynamoDB state; reconcile, the chaos scenarios and the bench use it.
//! - [`reconcile`]: compare Redis, the queue and DynamoDB; repair what is
//!   provably safe; report the rest (`OVERSELL_RISK` is never auto-fixed).
//! - [`keyed_filter`]: which keyed requests a sold-out environment may
//!   answer itself (no reservation under their key can exist).
//! - [`redis_store`]: the stock store on Redis; the Lua scripts live in
//!   `shared/lua/` and are compiled in with `include_str!`.
//! - [`shard_layout`]: which shard is each buyer's home (a stable hash, or on
//!   a cluster a table that loads every master evenly) and each shard's stock.
//! - [`sale_spec`]: the admin's sale definition, validated field by field.
//! - [`sqs_queue`]: the order queue on SQS, with definite/ambiguous failures.
//! - [`dynamo`]: the sale catalog on DynamoDB (`sales` table items).
//! - [`orders`]: order states, the order row, and the `OrderStore` port.
//! - [`dynamo_orders`]: the `orders` table and the sale counters it moves.
//! - [`order_index`]: the order item, the sale buckets that spread a sale's
//!   index entries, the reads that fan out over them, and their backfill.
//! - [`order_queries`]: what the orders API answers: sale info, order
//!   status (`QUEUED` from the reservation until the row exists), payment.
//! - [`order_writer`]: a batch of queue messages in, orders out: grouped
//!   per sale, one transaction per group, per-message fallback.
//! - [`catalog_cache`]: a per-environment cache in front of the catalog, so an
//!   unknown sale id costs at most one database read per TTL.
//! - [`jobs`]: the scheduled jobs: prewarm (load, refresh, rebuild a lost
//!   sale) and the unpaid release.
//! - [`memory`]: in-memory adapters of every port, for unit tests.
//! - [`aws`]: building SDK clients once, with timeouts fit for a hot path.
//! - [`telemetry`]: tracing set-up (JSON in Lambda, readable locally).
//! - [`metrics`]: the CloudWatch metrics as embedded-metric-format lines
//!   (per-environment counters, one line per invocation in Lambda).
//! - [`outcomes`]: purchase answers per sale and outcome, counted in memory
//!   and added to `sale:{S}:outcomes` in Redis at most once a second.
//! - [`live`]: what the operator dashboard polls
//!   (`GET /admin/sales/{saleId}/live`): stock, orders by status, the
//!   queue, the outcome tally and the last reconcile report of one sale.
//! - [`clock`]: wall-clock milliseconds and RFC 3339 formatting.

pub mod aws;
pub mod catalog_cache;
pub mod clock;
pub mod config;
pub mod domain;
pub mod dynamo;
pub mod dynamo_orders;
pub mod error;
pub mod gate;
pub mod http;
pub mod invariants;
pub mod jobs;
pub mod keyed_filter;
pub mod live;
pub mod memory;
pub mod metrics;
pub mod order_index;
pub mod order_queries;
pub mod order_writer;
pub mod orders;
pub mod outcomes;
pub mod ports;
pub mod purchase;
pub mod reconcile;
pub mod redis_store;
pub mod sale_spec;
pub mod secrets;
pub mod shard_layout;
pub mod sqs_queue;
pub mod telemetry;
