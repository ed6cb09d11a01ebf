//! Adapters: the ports (and the operations path) on real services.
//!
//! - [`redis`]: the stock store on Redis (connection, keys, scripts,
//!   replies, shards, administration).
//! - [`dynamo`]: the `sales` table (catalog) and the `orders` table with its
//!   index.
//! - [`sqs`]: the order queue.
//! - [`dead_letters`]: the orders DLQ as operators handle it (look, redrive).
//! - [`memory`]: an in-memory adapter of every port, for unit tests.
//! - [`aws`]: SDK clients built once, with hot-path timeouts.
//! - [`secrets`]: the Redis token and gate key from Secrets Manager.

pub mod aws;
pub mod dead_letters;
pub mod dynamo;
pub mod memory;
pub mod redis;
pub mod secrets;
pub mod sqs;
