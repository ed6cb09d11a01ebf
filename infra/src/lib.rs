//! The local stack: what AWS wires around the functions, on loopback.
//!
//! # Layout
//!
//! - [`gateway`]: the HTTP API stand-in (routes, JWT authorizer, v2 events).
//! - [`pages`]: the buyer page and the operator dashboard (`web/`, compiled
//!   in), `config.js` and the local sign-in, served by the gateway.
//! - [`token`]: local HS256 tokens (mint and verify).
//! - [`emulator`]: creates the queue, DLQ, tables and secrets on the emulator.
//! - [`backfill`]: `seckill-local backfill-order-buckets`, the order rows'
//!   sale buckets for a table written before they existed.
//! - [`event_source`]: the SQS event source mapping (poll, batch, invoke, delete).
//! - [`lambda_limits`]: each function's `Timeout` and concurrency, and API
//!   Gateway's account throttle, enforced on the in-process functions.
//! - [`local`]: settings of the local stack and `up` (set-up, the gate key's
//!   secret, demo sale, serve).
//! - [`runtime_api`]: a loopback Lambda Runtime API and the cold-start
//!   measurement of a real function binary against it.
//! - [`loadgen`]: the HTTP load generator and the purchase benchmark over HTTP.
//! - [`bench_ledger`]: `make bench`'s ledger row: prewarm, reconcile and
//!   release-unpaid on a sale of many orders, each job's peak memory and
//!   time next to its function's.
//! - [`bench_reconcile`]: `make bench`'s row of purchase latency while
//!   reconcile reads a sale of a million buyers.
//! - [`fairness`]: `make bench`'s fairness table: scripts at
//!   the opening millisecond against people over the first seconds, first
//!   come first served and with a lottery window, on the real purchase path.
//! - [`strict`]: the strict layer in front of the emulator (conflicts,
//!   throttles, lagging counts, duplicates; writes applied one at a time).
//! - [`sign_payment`]: `seckill-local sign-payment`, a signed payment
//!   callback for an order as a `curl` command.
//! - [`plan`]: `seckill-local plan` (`make plan`), a sale's capacity plan
//!   on AWS: quotas, parameters, Redis shards, the drain and its cost.
//! - [`invoke`]: one event through one function's own loader, wiring and
//!   handler (`seckill-local invoke`).
//! - [`iam`]: the AWS calls each function made (the emulator's recording)
//!   against the role the template gives it (the IAM test).
//! - [`consistency`]: `template.yaml` against the code: binaries, the
//!   environment each function reads, routes, events (the consistency test).
//! - [`peak`]: what a piece of work adds to the peak resident memory
//!   (`make bench`'s memory figures).
//! - `main.rs`: the `seckill-local` command line.
//! - `bin/bench/`: `seckill-bench`, the purchase benchmark of `make bench`,
//!   a function per row.
//! - `bin/coldstart.rs`: `seckill-coldstart`, the cold start of the release
//!   `purchase` binary, its secrets fetched from the emulator.
//! - `bin/httpbench.rs`: `seckill-httpbench`, purchase decisions over HTTP.

pub mod backfill;
pub mod bench_ledger;
pub mod bench_reconcile;
pub mod consistency;
pub mod emulator;
pub mod event_source;
pub mod fairness;
pub mod forward;
pub mod gateway;
pub mod iam;
pub mod invoke;
pub mod jwt_authorizer;
pub mod lambda_limits;
pub mod loadgen;
pub mod local;
pub mod openapi;
pub mod pages;
pub mod peak;
pub mod plan;
pub mod runtime_api;
pub mod sign_payment;
pub mod strict;
pub mod token;

/// A local-stack setting: the variable if set and not empty, else the default.
pub fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_owned())
}
