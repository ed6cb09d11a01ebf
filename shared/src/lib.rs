//! The Seckill domain and everything the functions share.
//!
//! # Layout
//!
//! Dependencies point inwards: `domain` depends on nothing here but `clock`,
//! `ports` on `domain`, `app` on both and never on an adapter, `adapters`
//! implement `ports` with Redis, SQS and DynamoDB, and [`wire`] alone
//! builds `app` over them. `observe` is how every layer reports. The rules
//! and the tests that hold them: `docs/architecture.md`.
//!
//! - [`domain`]: values that can only be valid, and the rules on them.
//!   - [`domain::values`]: `SaleId`, `UserId`, `OrderId`, `Quantity`,
//!     `IdempotencyKey`, the `Sale` and the order message (re-exported
//!     from [`domain`], the path everything uses).
//!   - [`domain::sale_spec`]: the admin's sale definition, validated field
//!     by field, and the frozen-after-start rule for changing it.
//!   - [`domain::shard_layout`]: which shard is each buyer's home (a stable
//!     hash, or on a cluster a table that loads every master evenly), each
//!     shard's stock, and which shards a dry home may borrow from.
//!   - [`domain::borrowing`]: when a short home shard borrows from the
//!     others, and for how long empty shards are not looked at again.
//!   - [`domain::gate`]: the sale gate's questions and passes (HMAC,
//!     stateless).
//!   - [`domain::keyed_filter`]: which keyed requests a sold-out environment
//!     may answer itself (no reservation under their key can exist).
//!   - [`domain::orders`]: order states and the order row.
//!   - [`domain::ledger`], [`domain::stock_state`]: what the ledger and
//!     the stock store hold for a sale, as the operations path reads them.
//!   - [`domain::outcome`]: `Outcome`, the one list of purchase outcome
//!     codes that the metrics, the tally, the live view and the API error
//!     codes derive from.
//! - [`ports`]: the traits where the domain meets the outside (stock store,
//!   order queue, sale catalog, order store, payment store; in
//!   `ports/operations.rs`, for the operations path, stock administration,
//!   catalog administration, the order ledger, queue inspection and the DLQ)
//!   and the outcomes they return.
//! - [`app`]: the use cases, each written against ports or adapters.
//!   - [`app::purchase`]: reserve in the stock store, hand the order to the
//!     queue, release only what is proven unsent.
//!   - [`app::order_writer`]: a batch of queue messages in, orders out:
//!     grouped per sale, one transaction per group, per-message fallback.
//!   - [`app::order_queries`]: what the orders API answers: sale info,
//!     order status (`QUEUED` until the row exists), payment.
//!   - [`app::catalog_cache`]: a per-environment cache in front of the
//!     catalog, so an unknown sale id costs at most one read per TTL.
//!   - [`app::jobs`]: the scheduled jobs: prewarm (load, refresh, rebuild a
//!     lost sale) and the unpaid release.
//!   - [`app::reconcile`]: compare Redis, the queue and DynamoDB; repair what
//!     is provably safe; report the rest (`OVERSELL_RISK` is never fixed).
//!   - [`app::invariants`]: the invariants of `docs/design.md` over one sale's Redis,
//!     queue and DynamoDB state; reconcile, chaos and the bench use it
//!     (a big sale's read kept in slices on local disk:
//!     [`app::invariants::spill`]).
//!   - [`app::live`]: what the operator dashboard polls
//!     (`GET /admin/sales/{saleId}/live`).
//!   - [`app::console`]: the operator console: every sale, ending one
//!     now, the DLQ's messages with the writer's last failure, redrive.
//! - [`adapters`]: the ports and the operations path on real services.
//!   - [`adapters::redis`]: the stock store on Redis; the Lua scripts live
//!     in `shared/lua/` and are compiled in with `include_str!`.
//!   - [`adapters::dynamo`]: the sale catalog (`sales` table), the `orders`
//!     table and the order index's sale buckets.
//!   - [`adapters::sqs`]: the order queue on SQS, with definite/ambiguous
//!     failures, and the operations path's read of the queue and its DLQ.
//!   - [`adapters::dead_letters`]: the orders DLQ as operators handle it:
//!     a look that leaves messages there, and the redrive.
//!   - [`adapters::memory`]: in-memory adapters of every port (the stock
//!     store and its administration, the order queue and its inspection,
//!     the catalog, the order store and ledger), for unit tests.
//!   - [`adapters::aws`]: building SDK clients once, with timeouts fit for a
//!     hot path. Here because only adapters (and the wiring) use them.
//!   - [`adapters::secrets`]: the Redis AUTH token and the gate key from
//!     Secrets Manager, fetched once per execution environment by each
//!     `wire`. Here because it is one more AWS SDK client.
//! - [`wire`]: each function's use cases over the live adapters, their
//!   live types, and why a cold start failed ([`wire::WireError`]).
//! - [`observe`]: the CloudWatch metrics (embedded metric format), the
//!   purchase outcome tally behind the dashboard, and tracing set-up.
//!
//! At the root, what every layer uses and none owns:
//!
//! - [`config`]: typed configuration, read once from the environment (the
//!   settings of every layer: limits, tables, timeouts).
//! - [`error`]: the API error codes and their one mapping to HTTP; use
//!   cases and adapters' errors both map into it.
//! - [`http`]: JSON responses and the API Gateway claims helpers, used by
//!   every function and by the local gateway.
//! - [`clock`]: wall-clock milliseconds and RFC 3339 formatting, used by the
//!   domain rows as much as by the adapters.

pub mod adapters;
pub mod app;
pub mod clock;
pub mod config;
pub mod domain;
pub mod error;
pub mod http;
pub mod observe;
pub mod ports;
#[cfg(test)]
mod sim;
pub mod wire;
