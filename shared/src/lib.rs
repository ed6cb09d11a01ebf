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
//! - [`http`]: JSON responses and the API Gateway claims helpers.
//! - [`config`]: typed configuration, read once from the environment.
//! - [`redis_store`]: the stock store on Redis; the Lua scripts live in
//!   `shared/lua/` and are compiled in with `include_str!`.
//! - [`sqs_queue`]: the order queue on SQS, with definite/ambiguous failures.
//! - [`dynamo`]: the sale catalog on DynamoDB (`sales` table items).
//! - [`catalog_cache`]: a per-environment cache in front of the catalog, so an
//!   unknown sale id costs at most one database read per TTL.
//! - [`memory`]: in-memory adapters of every port, for unit tests.
//! - [`aws`]: building SDK clients once, with timeouts fit for a hot path.
//! - [`telemetry`]: tracing set-up (JSON in Lambda, readable locally).
//! - [`clock`]: wall-clock milliseconds and RFC 3339 formatting.

pub mod aws;
pub mod catalog_cache;
pub mod clock;
pub mod config;
pub mod domain;
pub mod dynamo;
pub mod error;
pub mod http;
pub mod memory;
pub mod ports;
pub mod purchase;
pub mod redis_store;
pub mod sqs_queue;
pub mod telemetry;
