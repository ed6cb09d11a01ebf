//! Every integration and end-to-end test, in one test binary (one link on a
//! two-core machine instead of one per file). Each module is a capability;
//! a test's full name is `module::test` (`cargo test -p seckill-tests --test
//! suite -- ledger::` runs one module). They run against the real
//! `redis-server` and AWS emulator `make test` starts (`support/`, the
//! `seckill_tests` library, holds the shared set-up); each test makes its own
//! sale ids, tables and queues, so they run in parallel.
//!
//! Buying:
//! - `purchase`: the purchase contract through the real handler: every
//!   outcome, numeric edges, concurrency, bad input.
//! - `sold_out`: the sold-out flag for page traffic.
//! - `ratelimit`: the token buckets per buyer and per source address.
//! - `gate`: the question before the purchase, and `gate` in the sale view.
//! - `lottery`: the lottery window: its setting, tickets, the draw.
//! - `fairness`: the measured fairness figure at full size: with a lottery
//!   window people win their share of the tickets, without it scripts win.
//! - `subs`: any real `sub` as a user id.
//! - `fuzz`: generated input for every parser of untrusted data.
//!
//! Orders and the ledger:
//! - `orders`: queue to order rows, payment, expiry, the DLQ.
//! - `payments`: prices, amounts, expiry seen at once, the payment
//!   provider's callback (signature, replay, duplicate, late, concurrent).
//! - `order_index`: the orders' write shape and the sale-keyed indexes.
//! - `ledger`: one test per defect of the ledger against Redis.
//! - `reconcile`, `reconcile_scale`: reconciliation, and that it never
//!   stalls a big sale.
//! - `waitlist`, `waitlist_give_up`: the line sold-out buyers join, and
//!   the returned units (expired orders, given-up reservations) offered
//!   down it once each.
//!
//! Operating a sale:
//! - `lifecycle`: the admin API, prewarm, release, the sale's states.
//! - `operators`: pause, resume, end now, lookups.
//! - `live`: the dashboard's poll.
//! - `console_api`: the operator console's API: the list of sales, one
//!   sale, end now, order lookups, the DLQ and its redrive.
//! - `metrics`: the metrics contract end to end.
//! - `browser`: the pages in headless Chromium (`browser/`: harness and
//!   scenarios).
//! - `chaos`: a real sale under faults, a file a scenario in `chaos/`
//!   (`make chaos` runs them at full size).
//! - `nemesis`: a seeded schedule of real faults under a mixed workload,
//!   then the checker (`make nemesis`; ignored by `cargo test`).
//!
//! Edges and deployment:
//! - `architecture`: which layer may name which (`docs/architecture.md`),
//!   read off the code's paths.
//! - `gateway`, `authz`: the local gateway's JWT checks; every route's
//!   authorization.
//! - `harness`: the suite's own HTTP client against the server shapes
//!   it meets (`sam local start-api`'s werkzeug), and the time limit on
//!   `make test`'s phases.
//! - `redis_tls`, `cluster_tls`: AUTH and TLS, single node and cluster.
//! - `shards`: stock shards on one node and on a 3-master cluster.
//! - `secrets`: secrets out of the environment and out of every log line.
//! - `sam_local`: the bootstraps in Lambda containers through `sam local
//!   invoke` (every event file) and `sam local start-api` (`make
//!   sam-local`, make test's `sam-local` phase; skipped elsewhere).
//! - `consistency`, `template`: `template.yaml` against the code, and the
//!   template's traps that only show on AWS (`cfn` reads it as JSON).
//! - `iam`: every AWS call of the suite against its function's role.
//! - `emulator_index`: `infra/moto/server.py`'s index queries answer what
//!   moto's own do.
//! - `strict`: the strict layer in front of the emulator: each AWS limit
//!   it shows bites, and the emulator alone does not show it.
//! - `lambda_limits`: the local stack's Lambda limits (each function's
//!   `Timeout`, its concurrency) and API Gateway's account throttle bite,
//!   and pass everything with their knobs off.

mod architecture;
mod authz;
mod browser;
mod cfn;
mod chaos;
mod cluster_tls;
mod consistency;
mod console_api;
mod emulator_index;
mod fairness;
mod fuzz;
mod gate;
mod gateway;
mod harness;
mod iam;
mod lambda_limits;
mod ledger;
mod lifecycle;
mod live;
mod lottery;
mod metrics;
mod nemesis;
mod openapi;
mod operators;
mod order_index;
mod orders;
mod payments;
mod purchase;
mod ratelimit;
mod reconcile;
mod reconcile_scale;
mod redis_tls;
mod sam_local;
mod secrets;
mod shards;
mod sold_out;
mod strict;
mod subs;
mod template;
mod waitlist;
mod waitlist_give_up;
