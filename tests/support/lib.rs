//! Test support: a `spawn_app`-style helper over the real services.
//!
//! `make test` starts a real `redis-server` and `moto_server` on free ports
//! and exports `REDIS_URL` and `AWS_ENDPOINT_URL`. Every test gets its own
//! queue, tables and sale ids, so tests run in parallel without sharing state.
//!
//! One concern a file; every public name is re-exported here, so a test
//! names it `seckill_tests::name` whichever file holds it:
//!
//! - `app`: [`App`], one test's slice of the stack (its queue, tables and
//!   the live purchase service), the settings every test stack shares
//!   ([`GENEROUS_LIMITS`], the test secrets), [`unique`] names, and the
//!   helpers that act on a sale ([`live_sale`], [`prewarm_now`],
//!   [`lose_key_group`]).
//! - `reads`: what a test reads back from an [`App`]'s stores (Redis
//!   keys, the sale's counters, [`order_items`], [`assert_clean`]).
//! - `queue`: an [`App`]'s orders queue (taken, drained through the
//!   writer, its depth).
//! - `events`: the handlers' input and output: [`purchase_event`],
//!   [`sqs_event`], [`order_body`], [`invoke_writer`], [`Reply`],
//!   [`Captured`].
//! - `stack`: the local stack in-process ([`LocalStack`]) and its HTTP
//!   clients ([`http_request`], [`StackClient`]).
//! - `wait`: [`eventually`], [`until_reached`], [`StallWatch`].
//! - `processes`: the test run alone in a child process
//!   ([`in_own_process`], [`in_own_emulator`]), [`spawn_moto`], free ports,
//!   [`Scratch`] directories.
//! - `redis_server`: [`RedisServer`], the one `redis-server` starter of
//!   the tests (plain, with a password, TLS, a cluster node; killed,
//!   restarted).
//! - [`own_redis`]: a plain `redis-server` of a test's own and its slow log.
//! - [`tls`]: the `rediss://` fixtures (a throwaway CA made with `rcgen`, a
//!   TLS `redis-server`, a TLS Redis Cluster) and the child process that
//!   trusts the CA.

mod app;
mod events;
pub mod own_redis;
mod processes;
mod queue;
mod reads;
mod redis_server;
mod stack;
pub mod tls;
mod wait;

pub use app::{
    App, GENEROUS_LIMITS, TEST_GATE_SECRET, TEST_PAYMENT_SECRET, TEST_VISIBILITY_SECS,
    clients_without_retries, live_sale, lose_key_group, prewarm_now, unique,
};
pub use events::{
    Captured, Reply, invoke_writer, order_body, purchase_event, purchase_event_from, sqs_event,
};
pub use processes::{
    Scratch, free_port, free_port_to_keep, in_own_emulator, in_own_process, in_own_strict_emulator,
    run_alone_streaming, spawn_moto,
};
pub use reads::{assert_clean, order_items};
pub use redis_server::{RedisServer, RedisServerBuilder, TlsFiles};
pub use seckill_infra::event_source::{EventSource, EventSourceSettings};
pub use stack::{HTTP_ANSWER_DEADLINE, LocalStack, StackClient, forged_admin_bearer, http_request};
pub use wait::{StallWatch, eventually, until_reached};
