//! The stock store on Redis: every decision is one Lua script, run by
//! EVALSHA with a fallback to loading the script on `NOSCRIPT` (so a
//! `SCRIPT FLUSH` or a restarted server costs one extra round trip, once).
//!
//! Keys (one hash tag per sale, so a script touches one slot):
//! `sale:{S}:meta`, `sale:{S}:stock`, `sale:{S}:buyers`, `sale:{S}:resv` as the
//! design fixes them, plus `sale:{S}:userorders` (userId -> the caller's order
//! ids) so a `409 LIMIT_EXCEEDED` can name them without a scan.

use crate::domain::{OrderId, Quantity, Sale, SaleId};
use crate::ports::{
    ReleaseOutcome, Reservation, ReserveOutcome, ReserveRequest, StockStore, StoreError,
};
use crate::ports::{ReservationRecord, Resolution, StockView};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, Script};
use serde::Deserialize;
use std::sync::LazyLock;
use std::time::Duration;

/// The purchase script as it runs: the rate limiter's function, then the
/// decision. One EVALSHA, one round trip.
pub const PURCHASE_SOURCE: &str = concat!(
    include_str!("../lua/ratelimit.lua"),
    include_str!("../lua/purchase.lua")
);
static PURCHASE: LazyLock<Script> = LazyLock::new(|| Script::new(PURCHASE_SOURCE));
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../lua/holdings.lua"),
        include_str!("../lua/release.lua")
    ))
});
static RESOLVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../lua/holdings.lua"),
        include_str!("../lua/resolve.lua")
    ))
});
static PEEK: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../lua/peek.lua")));
static REBUILD: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/rebuild.lua")));
static RETURN_UNITS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../lua/holdings.lua"),
        include_str!("../lua/return_units.lua")
    ))
});
static SNAPSHOT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/snapshot.lua")));
static SET_BUYER: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/set_buyer.lua")));
static UNLOCK: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../lua/unlock.lua")));
static LOAD_SALE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/load_sale.lua")));

/// Keys outlive the sale's end by this much, so late reconciliation and
/// order-status reads still find reservations.
pub const KEY_TTL_AFTER_END_MS: i64 = 60 * 60 * 1000;

/// The Redis key names of one sale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaleKeys {
    pub meta: String,
    pub stock: String,
    pub buyers: String,
    pub resv: String,
    pub user_orders: String,
    /// Nonces of gate passes already used (gated sales only).
    pub gate_used: String,
    /// The rate limiter's token buckets.
    pub rate_limit: String,
}

impl SaleKeys {
    pub fn new(sale_id: &SaleId) -> Self {
        let key = |suffix: &str| format!("sale:{{{sale_id}}}:{suffix}");
        Self {
            meta: key("meta"),
            stock: key("stock"),
            buyers: key("buyers"),
            resv: key("resv"),
            user_orders: key("userorders"),
            gate_used: key("gateused"),
            rate_limit: key("ratelimit"),
        }
    }

    /// The keys of the purchase script (and of a refresh, which moves
    /// every key's expiry).
    fn with_gate(&self) -> [&str; 6] {
        [
            &self.meta,
            &self.stock,
            &self.buyers,
            &self.resv,
            &self.user_orders,
            &self.gate_used,
        ]
    }

    fn all(&self) -> [&str; 5] {
        [
            &self.meta,
            &self.stock,
            &self.buyers,
            &self.resv,
            &self.user_orders,
        ]
    }
}

/// A reservation as the purchase script stores it (the value in `resv`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredReservation {
    pub user_id: String,
    pub quantity: u64,
    pub at_ms: String,
    pub state: String,
}

/// What `load_sale` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadOutcome {
    Loaded,
    /// Already there: stock untouched, window and expiry refreshed.
    Refreshed {
        stock: u32,
    },
}

pub use crate::config::RateLimits;

#[derive(Clone)]
pub struct RedisStock {
    conn: ConnectionManager,
    timeout: Duration,
    /// The limits as script arguments, formatted once, not per purchase.
    limit_args: std::sync::Arc<[String; 4]>,
    limiter_failures: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl RedisStock {
    /// Builds a lazily connecting, auto-reconnecting multiplexed connection:
    /// one per execution environment, shared by all requests. Lazy so a
    /// function starts (and answers 503) even while Redis is down.
    ///
    /// `url` is `redis://[[user]:password@]host:port` or, for TLS (ElastiCache
    /// in-transit encryption), `rediss://...`; see [`client`].
    pub fn connect_lazy(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        let client = client(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(100));
        let conn = ConnectionManager::new_lazy_with_config(client, config).map_err(unavailable)?;
        Ok(Self {
            conn,
            timeout,
            limit_args: limit_args(RateLimits::default()),
            limiter_failures: std::sync::Arc::default(),
        })
    }

    /// The same store with other rate-limit defaults.
    pub fn with_rate_limits(mut self, limits: RateLimits) -> Self {
        self.limit_args = limit_args(limits);
        self
    }

    async fn run<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        keys: &[&str],
        args: &[&str],
    ) -> Result<T, StoreError> {
        let mut invocation = script.prepare_invoke();
        for key in keys {
            invocation.key(*key);
        }
        for arg in args {
            invocation.arg(*arg);
        }
        let mut conn = self.conn.clone();
        // The connection has its own response timeout; this outer bound also
        // covers reconnect attempts, so a purchase never waits past it twice.
        match tokio::time::timeout(self.timeout * 2, invocation.invoke_async(&mut conn)).await {
            Ok(reply) => reply.map_err(unavailable),
            Err(_) => Err(StoreError::Unavailable("timed out".into())),
        }
    }

    /// Loads a sale (meta and stock) unless it is loaded; never overwrites
    /// live stock. The keys expire [`KEY_TTL_AFTER_END_MS`] after the end.
    pub async fn load_sale(
        &self,
        sale: &Sale,
        version: i64,
        paused: bool,
    ) -> Result<LoadOutcome, StoreError> {
        let keys = SaleKeys::new(&sale.sale_id);
        let expire_at = sale.end_ms.saturating_add(KEY_TTL_AFTER_END_MS);
        let args = [
            sale.total_stock.to_string(),
            sale.start_ms.to_string(),
            sale.end_ms.to_string(),
            sale.per_user_limit.to_string(),
            sale.shards.to_string(),
            String::from(if paused { "PAUSED" } else { "LIVE" }),
            version.to_string(),
            expire_at.to_string(),
            String::from(if sale.gate { "1" } else { "0" }),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let reply: Vec<String> = self.run(&LOAD_SALE, &keys.with_gate(), &args).await?;
        match reply.as_slice() {
            [tag] if tag == "LOADED" => Ok(LoadOutcome::Loaded),
            [tag, stock] if tag == "REFRESHED" => Ok(LoadOutcome::Refreshed {
                stock: parse_u32(stock)?,
            }),
            other => Err(protocol(other)),
        }
    }
}

/// The client for `REDIS_URL`, refused at cold start rather than at the first
/// purchase when it cannot be right.
///
/// `rediss://` verifies the server's certificate chain and name with rustls
/// against the system's roots (rustls-native-certs: the OS store, or only
/// `SSL_CERT_FILE` / `SSL_CERT_DIR` when set). ElastiCache certificates chain
/// to Amazon's public roots, so no CA setting is needed in AWS. `#insecure`
/// (no verification) is refused: it would let anyone on the path read the
/// AUTH password. The errors never carry the URL, which may hold that password.
fn client(url: &str) -> Result<redis::Client, StoreError> {
    let client = redis::Client::open(url).map_err(|err| {
        // redis-rs describes what is wrong ("Redis URL did not parse",
        // "Missing hostname"), never the URL itself.
        StoreError::Unavailable(format!("REDIS_URL is not a usable Redis URL: {err}"))
    })?;
    if let redis::ConnectionAddr::TcpTls { insecure: true, .. } =
        client.get_connection_info().addr()
    {
        return Err(StoreError::Unavailable(
            "REDIS_URL asks for TLS without certificate verification (#insecure); refused".into(),
        ));
    }
    Ok(client)
}

/// A buyer as the source of truth knows them, for a rebuild.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldUnits {
    pub user_id: String,
    pub units: u64,
    pub order_ids: Vec<String>,
}

/// A sale's Redis state at one instant (`snapshot.lua`).
#[derive(Debug, Clone, Default)]
pub struct RedisSnapshot {
    pub stock: i64,
    pub total: i64,
    pub buyers: std::collections::HashMap<String, i64>,
    pub reservations: std::collections::HashMap<String, StoredReservation>,
}

/// What `return_units` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returned {
    Returned {
        stock: i64,
    },
    /// Returned before: nothing changed.
    Already,
    /// The sale has no keys; a rebuild reads the units from DynamoDB.
    SaleMissing,
}

impl RedisStock {
    /// Loads a sale with its stock and buyers from DynamoDB unless it is
    /// there (`rebuild.lua`). Returns true if this call loaded it.
    pub async fn rebuild_sale(
        &self,
        sale: &Sale,
        version: i64,
        stock: i64,
        buyers: &[HeldUnits],
    ) -> Result<bool, StoreError> {
        let keys = SaleKeys::new(&sale.sale_id);
        let expire_at = sale.end_ms.saturating_add(KEY_TTL_AFTER_END_MS);
        let mut args = vec![
            sale.total_stock.to_string(),
            sale.start_ms.to_string(),
            sale.end_ms.to_string(),
            sale.per_user_limit.to_string(),
            sale.shards.to_string(),
            "LIVE".to_owned(),
            version.to_string(),
            expire_at.to_string(),
            stock.max(0).to_string(),
            String::from(if sale.gate { "1" } else { "0" }),
        ];
        for b in buyers {
            args.push(b.user_id.clone());
            args.push(b.units.to_string());
            args.push(b.order_ids.join(","));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let reply: Vec<String> = self
            .run(
                &REBUILD,
                &[&keys.meta, &keys.stock, &keys.buyers, &keys.user_orders],
                &args,
            )
            .await?;
        match reply.first().map(String::as_str) {
            Some("LOADED") => Ok(true),
            Some("EXISTS") => Ok(false),
            _ => Err(protocol(&reply)),
        }
    }

    /// Gives an expired order's units back (`return_units.lua`).
    pub async fn return_units(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        user_id: &str,
        quantity: u32,
    ) -> Result<Returned, StoreError> {
        let keys = SaleKeys::new(sale_id);
        let (quantity, now) = (quantity.to_string(), crate::clock::now_ms().to_string());
        let reply: Vec<String> = self
            .run(
                &RETURN_UNITS,
                &keys.all(),
                &[order_id.as_str(), user_id, &quantity, &now],
            )
            .await?;
        match reply
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            ["RETURNED", stock] => Ok(Returned::Returned {
                stock: parse_i64(stock)?,
            }),
            ["SAME"] => Ok(Returned::Already),
            ["MISSING"] => Ok(Returned::SaleMissing),
            _ => Err(protocol(&reply)),
        }
    }

    /// Everything Redis holds for a sale, or `None` when it has no keys.
    pub async fn snapshot(&self, sale_id: &SaleId) -> Result<Option<RedisSnapshot>, StoreError> {
        let keys = SaleKeys::new(sale_id);
        let reply: redis::Value = self
            .run(
                &SNAPSHOT,
                &[&keys.meta, &keys.stock, &keys.buyers, &keys.resv],
                &[],
            )
            .await?;
        let redis::Value::Array(parts) = reply else {
            return Err(StoreError::Protocol("snapshot is not a list".into()));
        };
        let text = |v: &redis::Value| -> Result<String, StoreError> {
            redis::from_redis_value::<String>(v.clone())
                .map_err(|e| StoreError::Protocol(e.to_string()))
        };
        let flat = |v: &redis::Value| -> Result<Vec<String>, StoreError> {
            redis::from_redis_value::<Vec<String>>(v.clone())
                .map_err(|e| StoreError::Protocol(e.to_string()))
        };
        match parts.as_slice() {
            [tag] if text(tag)? == "MISSING" => Ok(None),
            [_, stock, total, buyers, resv] => {
                let mut snap = RedisSnapshot {
                    stock: parse_i64(&text(stock)?)?,
                    total: parse_i64(&text(total)?)?,
                    ..RedisSnapshot::default()
                };
                for pair in flat(buyers)?.chunks(2) {
                    if let [user, units] = pair {
                        snap.buyers.insert(user.clone(), parse_i64(units)?);
                    }
                }
                for pair in flat(resv)?.chunks(2) {
                    if let [id, raw] = pair {
                        let stored: StoredReservation = serde_json::from_str(raw)
                            .map_err(|e| StoreError::Protocol(e.to_string()))?;
                        snap.reservations.insert(id.clone(), stored);
                    }
                }
                Ok(Some(snap))
            }
            _ => Err(StoreError::Protocol("unexpected snapshot".into())),
        }
    }

    /// Lowers a buyer's count to `units` (never raises it).
    pub async fn lower_buyer(
        &self,
        sale_id: &SaleId,
        user_id: &str,
        units: i64,
    ) -> Result<i64, StoreError> {
        let keys = SaleKeys::new(sale_id);
        let units = units.to_string();
        self.run(&SET_BUYER, &[&keys.buyers], &[user_id, &units])
            .await
    }

    /// A lock with an owner token and an expiry (`SET NX PX`), on the sale's
    /// hash tag. Returns false when someone else holds it.
    pub async fn try_lock(
        &self,
        sale_id: &SaleId,
        name: &str,
        token: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let key = format!("sale:{{{sale_id}}}:lock:{name}");
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let mut conn = self.conn.clone();
        let reply: Option<String> = tokio::time::timeout(
            self.timeout * 2,
            redis::cmd("SET")
                .arg(&key)
                .arg(token)
                .arg("NX")
                .arg("PX")
                .arg(ttl_ms)
                .query_async(&mut conn),
        )
        .await
        .map_err(|_| StoreError::Unavailable("timed out".into()))?
        .map_err(unavailable)?;
        Ok(reply.is_some())
    }

    /// Releases a lock taken with `token`; someone else's is left alone.
    pub async fn unlock(
        &self,
        sale_id: &SaleId,
        name: &str,
        token: &str,
    ) -> Result<(), StoreError> {
        let key = format!("sale:{{{sale_id}}}:lock:{name}");
        let _: i64 = self.run(&UNLOCK, &[&key], &[token]).await?;
        Ok(())
    }
}

impl StockStore for RedisStock {
    async fn reserve(&self, req: ReserveRequest<'_>) -> Result<ReserveOutcome, StoreError> {
        let keys = SaleKeys::new(req.sale_id);
        let quantity = req.quantity.get().to_string();
        let idem = req.idempotency_key.map_or("", |k| k.as_str());
        let args = [
            req.sale_id.as_str(),
            req.user_id.as_str(),
            quantity.as_str(),
            idem,
            req.gate_nonce.unwrap_or(""),
            req.source_ip.unwrap_or(""),
            &self.limit_args[0],
            &self.limit_args[1],
            &self.limit_args[2],
            &self.limit_args[3],
        ];
        let [meta, stock, buyers, resv, uorders, gate] = keys.with_gate();
        let keys = [meta, stock, buyers, resv, uorders, gate, &keys.rate_limit];
        let reply: Vec<String> = self.run(&PURCHASE, &keys, &args).await?;
        let reply = match reply.split_first() {
            Some((flag, rest)) if flag == "LF" => {
                let n = self
                    .limiter_failures
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                    + 1;
                tracing::warn!(sale_id = %req.sale_id, failures = n, "rate limiter failed open (its key is broken); purchase decided without it");
                rest
            }
            _ => reply.as_slice(),
        };
        parse_reserve_reply(reply, req.quantity)
    }

    async fn release(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
    ) -> Result<ReleaseOutcome, StoreError> {
        let keys = SaleKeys::new(sale_id);
        let reply: Vec<String> = self
            .run(&RELEASE, &keys.all(), &[order_id.as_str()])
            .await?;
        match reply.first().map(String::as_str) {
            Some("RELEASED") => Ok(ReleaseOutcome::Released {
                stock: parse_u32(reply.get(1).map_or("", String::as_str))?,
            }),
            Some("NOT_FOUND") => Ok(ReleaseOutcome::NotFound),
            Some("NOT_RELEASABLE") => Ok(ReleaseOutcome::NotReleasable),
            Some("MISSING") => Ok(ReleaseOutcome::SaleMissing),
            _ => Err(protocol(&reply)),
        }
    }

    async fn resolve(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        resolution: Resolution,
    ) -> Result<bool, StoreError> {
        let keys = SaleKeys::new(sale_id);
        let reply: Vec<String> = self
            .run(
                &RESOLVE,
                &keys.all(),
                &[order_id.as_str(), resolution.as_str()],
            )
            .await?;
        match reply.first().map(String::as_str) {
            Some("OK" | "SAME") => Ok(true),
            Some("NOT_FOUND") => Ok(false),
            _ => Err(protocol(&reply)),
        }
    }

    async fn view(
        &self,
        sale_id: &SaleId,
        order_id: Option<&OrderId>,
    ) -> Result<Option<StockView>, StoreError> {
        let keys = SaleKeys::new(sale_id);
        let order = order_id.map_or("", OrderId::as_str);
        let reply: Vec<String> = self
            .run(&PEEK, &[&keys.meta, &keys.stock, &keys.resv], &[order])
            .await?;
        match reply
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            ["MISSING"] => Ok(None),
            ["OK", stock, status, resv] => Ok(Some(StockView {
                remaining: parse_i64(stock)?,
                paused: *status == "PAUSED",
                reservation: if resv.is_empty() {
                    None
                } else {
                    let stored: StoredReservation = serde_json::from_str(resv)
                        .map_err(|e| StoreError::Protocol(e.to_string()))?;
                    Some(ReservationRecord {
                        user_id: stored.user_id,
                        quantity: stored.quantity,
                        at_ms: parse_i64(&stored.at_ms)?,
                        state: stored.state,
                    })
                },
            })),
            _ => Err(protocol(&reply)),
        }
    }

    fn limiter_failures(&self) -> u64 {
        self.limiter_failures
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

fn limit_args(l: RateLimits) -> std::sync::Arc<[String; 4]> {
    std::sync::Arc::new([
        l.user_per_sec.to_string(),
        l.user_burst.to_string(),
        l.ip_per_sec.to_string(),
        l.ip_burst.to_string(),
    ])
}

fn parse_reserve_reply(
    reply: &[String],
    requested: Quantity,
) -> Result<ReserveOutcome, StoreError> {
    let strs: Vec<&str> = reply.iter().map(String::as_str).collect();
    match strs.as_slice() {
        ["OK", order_id, at_ms, _left] => Ok(ReserveOutcome::Reserved(Reservation {
            order_id: parse_order_id(order_id)?,
            quantity: requested,
            reserved_at_ms: parse_i64(at_ms)?,
            shard: 0,
        })),
        ["REPLAY", order_id, stored] => {
            let stored: StoredReservation =
                serde_json::from_str(stored).map_err(|e| StoreError::Protocol(e.to_string()))?;
            Ok(ReserveOutcome::Replayed(Reservation {
                order_id: parse_order_id(order_id)?,
                quantity: Quantity::new(stored.quantity)
                    .map_err(|e| StoreError::Protocol(e.to_string()))?,
                reserved_at_ms: parse_i64(&stored.at_ms)?,
                shard: 0,
            }))
        }
        ["MISSING"] => Ok(ReserveOutcome::SaleMissing),
        ["PAUSED"] => Ok(ReserveOutcome::Paused),
        ["NOT_STARTED", start_ms] => Ok(ReserveOutcome::NotStarted {
            start_ms: parse_i64(start_ms)?,
        }),
        ["ENDED"] => Ok(ReserveOutcome::Ended),
        ["GATE"] => Ok(ReserveOutcome::GateRequired),
        ["RATE_LIMITED", wait] => Ok(ReserveOutcome::RateLimited {
            retry_after_ms: u64::try_from(parse_i64(wait)?).unwrap_or(1_000),
        }),
        ["LIMIT", listed] => Ok(ReserveOutcome::LimitExceeded {
            order_ids: listed
                .split(',')
                .filter(|s| !s.is_empty())
                .map(parse_order_id)
                .collect::<Result<_, _>>()?,
        }),
        ["SOLD_OUT", left] => Ok(ReserveOutcome::SoldOut {
            // A negative stock would be a bug elsewhere; report it as none left.
            remaining: parse_i64(left).map(|n| u32::try_from(n).unwrap_or(0))?,
        }),
        _ => Err(protocol(reply)),
    }
}

/// Redis out of reach (refused, dropped, timed out, TLS handshake refused,
/// credentials refused) is `Unavailable`; Redis answering with an error (a
/// wrong type, a script error) is `Protocol`. The difference decides whether
/// the rate limiter may fail open. A refused AUTH is "out of reach": no
/// command ran, and the fix is the deployment's, not the sale's. Its message
/// is redis-rs's ("Password authentication failed") or the server's
/// (`WRONGPASS ...`, `NOAUTH ...`), neither of which repeats the password.
fn unavailable(err: RedisError) -> StoreError {
    if err.is_io_error()
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(err.code(), Some("NOAUTH" | "WRONGPASS"))
    {
        StoreError::Unavailable(err.to_string())
    } else {
        StoreError::Protocol(err.to_string())
    }
}

fn protocol(reply: &[impl std::fmt::Debug]) -> StoreError {
    StoreError::Protocol(format!("{reply:?}"))
}

fn parse_i64(raw: &str) -> Result<i64, StoreError> {
    raw.parse()
        .map_err(|_| StoreError::Protocol(format!("not a number: {raw:?}")))
}

fn parse_u32(raw: &str) -> Result<u32, StoreError> {
    raw.parse()
        .map_err(|_| StoreError::Protocol(format!("not a count: {raw:?}")))
}

fn parse_order_id(raw: &str) -> Result<OrderId, StoreError> {
    OrderId::parse(raw).map_err(|e| StoreError::Protocol(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::ConnectionAddr;

    #[test]
    fn auth_and_tls_urls_parse_with_their_credentials() {
        let tls = client("rediss://default:p%40ss%3Aw0rd@cache.example:6380").unwrap();
        let info = tls.get_connection_info();
        assert!(matches!(
            info.addr(),
            ConnectionAddr::TcpTls { host, port: 6380, insecure: false, .. } if host == "cache.example"
        ));
        assert_eq!(info.redis_settings().username(), Some("default"));
        assert_eq!(info.redis_settings().password(), Some("p@ss:w0rd"));

        let plain = client("redis://:hunter2@127.0.0.1:6379").unwrap();
        let info = plain.get_connection_info();
        assert!(matches!(info.addr(), ConnectionAddr::Tcp(host, 6379) if host == "127.0.0.1"));
        assert_eq!(info.redis_settings().username(), None);
        assert_eq!(info.redis_settings().password(), Some("hunter2"));
    }

    #[test]
    fn refuses_unverified_tls_and_never_echoes_the_url() {
        for url in [
            "rediss://default:hunter2@cache.example:6379/#insecure",
            "https://default:hunter2@cache.example:6379",
            "rediss://default:hunter2@:6379",
            "rediss://default:hunter2@cache.example:6379/notadb",
        ] {
            let err = client(url).err().unwrap();
            assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
            let shown = format!("{err} {err:?}");
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(shown.contains("REDIS_URL"), "{shown}");
        }
    }
}
