//! The chaos suite: a real sale with concurrent buyers while something
//! breaks, each scenario ending with the invariant checker.
//!
//! Short form by default (inside `make test`); `make chaos` sets
//! `CHAOS=full` for larger sales and prints every scenario's figures. Faults
//! that would disturb other tests (killing or pausing a server) are made on
//! servers the scenario starts for itself on free loopback ports.

use lambda_http::Request;
use purchase::LivePurchase;
use seckill_infra::emulator;
use seckill_infra::event_source::{EventSource, EventSourceSettings, queue_arn};
use seckill_shared::adapters::aws;
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::dynamo::orders::DynamoOrders;
use seckill_shared::adapters::redis::RedisStock;
use seckill_shared::adapters::sqs::{SqsInspector, SqsQueue};
use seckill_shared::app::catalog_cache::CachedCatalog;
use seckill_shared::app::invariants::{InvariantChecker, Violation};
use seckill_shared::app::purchase::PurchaseService;
use seckill_shared::app::reconcile::{ReconcileSettings, Reconciler};
use seckill_shared::clock;
use seckill_shared::domain::orders::OrderStatus;
use seckill_shared::domain::{OrderId, Sale};
use seckill_shared::ports::{CatalogAdmin, OrderLedger, OrderStore};
use seckill_tests::*;
use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Stock and concurrency of a scenario's sale.
#[derive(Clone, Copy)]
struct Scale {
    stock: u32,
    concurrency: usize,
}

fn scale() -> Scale {
    if std::env::var("CHAOS").as_deref() == Ok("full") {
        Scale {
            stock: 300,
            concurrency: 64,
        }
    } else {
        Scale {
            stock: 40,
            concurrency: 16,
        }
    }
}

mod buyers;
mod every_message_twice;
mod failover;
mod moto_stopped;
mod pay_vs_expire;
mod processes;
mod redis_killed;
mod script_flush;
mod stores;
mod waitlist;
mod writer_killed;

use buyers::*;
pub(crate) use processes::{OwnMoto, OwnRedis, Proxy, Replicated, field, replication};
use stores::*;
