//! The secrets the functions need, from AWS Secrets Manager: the Redis AUTH
//! token (`REDIS_AUTH_SECRET_ARN`), the sale gate's HMAC key
//! (`GATE_SECRET_ARN`), the payment provider's signing key
//! (`PAYMENT_SECRET_ARN`, orders-api only) and the API edge's secret
//! (`EDGE_SECRET_ARN`, purchase only). The environment names them; it never holds them, so
//! `lambda:GetFunctionConfiguration` shows no secret.
//!
//! [`resolve`] runs at the top of each function's `wire`, once per execution
//! environment (the cold start, before the first event). It fetches what the
//! config names, all at once, and returns the config with the token as the
//! password of `redis_url` and the keys in `gate_secret`, `payment_secret`
//! and `edge_secret`. The clients built
//! from that config keep them for the environment's life: no invocation
//! fetches again. A failed fetch is a [`SecretError`] that fails the init;
//! it names the variable and the secret, never a value.
//!
//! Shapes: the Redis secret is a JSON object `{"token": "..."}` (what
//! `infra/redis-stack.yaml` generates); the gate, payment and edge secrets
//! are the keys themselves, [`MIN_GATE_KEY_LEN`] characters or more.

use crate::config::{Config, SecretArns};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// Bound of one secret's fetch, retries included. Init has 10 s in Lambda;
/// Secrets Manager answers in tens of milliseconds through the endpoint.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// The shortest gate key accepted: an HMAC-SHA256 key under 32 bytes is
/// weaker than the hash (and the template generates 64).
pub const MIN_GATE_KEY_LEN: usize = 32;

/// The Redis secret's JSON key holding the token.
pub const REDIS_TOKEN_KEY: &str = "token";

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("{variable}: cannot read secret {secret_id} from Secrets Manager: {why}")]
    Fetch {
        variable: &'static str,
        secret_id: String,
        why: String,
    },
    #[error("{variable}: secret {secret_id} {why}")]
    Shape {
        variable: &'static str,
        secret_id: String,
        why: &'static str,
    },
    #[error("REDIS_URL cannot take the AUTH token: {0}")]
    Url(&'static str),
}

/// `GetSecretValue` requests made per secret id by this process, for the
/// tests that prove one fetch per execution environment.
static FETCHES: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

/// How many times this process asked Secrets Manager for `secret_id`.
pub fn fetch_count(secret_id: &str) -> u64 {
    FETCHES
        .lock()
        .map_or(0, |fetches| fetches.get(secret_id).copied().unwrap_or(0))
}

/// Which secrets a function's wiring uses: every function talks to Redis;
/// only purchase and orders-api check the gate, only orders-api takes
/// the payment provider's callbacks, and only purchase counts its callers'
/// addresses (behind the edge, the viewer's). What a function does not use
/// is never fetched, even when its config names it (the local stack hands
/// every function one config): on AWS it could not read it anyway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uses {
    Redis,
    RedisGateAndEdge,
    RedisGateAndPayment,
}

/// `config` with the secrets `uses` names fetched: `redis_url` carries the
/// AUTH token, `gate_secret` the key, and `secrets` is empty (so a second
/// call, as the admin function's two wirings make, fetches nothing). A
/// config naming no such secret comes back without a client being built.
pub async fn resolve(
    config: &Config,
    caller: crate::adapters::aws::Caller,
    uses: Uses,
) -> Result<Config, SecretError> {
    let redis_auth = &config.secrets.redis_auth;
    let gate = match uses {
        Uses::Redis => &None,
        Uses::RedisGateAndEdge | Uses::RedisGateAndPayment => &config.secrets.gate,
    };
    let payment = match uses {
        Uses::RedisGateAndPayment => &config.secrets.payment,
        Uses::Redis | Uses::RedisGateAndEdge => &None,
    };
    let edge = match uses {
        Uses::RedisGateAndEdge => &config.secrets.edge,
        Uses::Redis | Uses::RedisGateAndPayment => &None,
    };
    if redis_auth.is_none() && gate.is_none() && payment.is_none() && edge.is_none() {
        return Ok(Config {
            secrets: SecretArns::default(),
            ..config.clone()
        });
    }
    // The function's own name in the user agent, as on its other clients.
    let client = crate::adapters::aws::secrets(
        &crate::adapters::aws::sdk_config(caller, FETCH_TIMEOUT).await,
    );
    let (token, key, payment_key, edge_key) = tokio::try_join!(
        async {
            match redis_auth {
                Some(id) => redis_token(&client, id).await.map(Some),
                None => Ok(None),
            }
        },
        async {
            match gate {
                Some(id) => key_secret(&client, GATE_VARIABLE, id).await.map(Some),
                None => Ok(None),
            }
        },
        async {
            match payment {
                Some(id) => key_secret(&client, PAYMENT_VARIABLE, id).await.map(Some),
                None => Ok(None),
            }
        },
        async {
            match edge {
                Some(id) => key_secret(&client, EDGE_VARIABLE, id).await.map(Some),
                None => Ok(None),
            }
        },
    )?;
    let mut resolved = config.clone();
    if let Some(token) = token {
        resolved.redis_url = with_password(&config.redis_url, &token)?;
    }
    if key.is_some() {
        resolved.gate_secret = key;
    }
    if payment_key.is_some() {
        resolved.payment_secret = payment_key;
    }
    if edge_key.is_some() {
        resolved.edge_secret = edge_key;
    }
    resolved.secrets = SecretArns::default();
    Ok(resolved)
}

const REDIS_VARIABLE: &str = "REDIS_AUTH_SECRET_ARN";
const GATE_VARIABLE: &str = "GATE_SECRET_ARN";
const PAYMENT_VARIABLE: &str = "PAYMENT_SECRET_ARN";
const EDGE_VARIABLE: &str = "EDGE_SECRET_ARN";

async fn redis_token(
    client: &crate::adapters::aws::SecretsClient,
    id: &str,
) -> Result<String, SecretError> {
    let shape = |why| SecretError::Shape {
        variable: REDIS_VARIABLE,
        secret_id: id.to_owned(),
        why,
    };
    let text = fetch(client, REDIS_VARIABLE, id).await?;
    // serde_json's messages name a position, never the text; they are
    // dropped anyway.
    let parsed: serde_json::Value = serde_json::from_str(&text)
        .map_err(|_| shape("is not a JSON object {\"token\": \"...\"}"))?;
    let token = parsed
        .as_object()
        .ok_or_else(|| shape("is not a JSON object {\"token\": \"...\"}"))?
        .get(REDIS_TOKEN_KEY)
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| shape("has no string \"token\" key"))?;
    if token.is_empty() {
        return Err(shape("holds an empty token"));
    }
    Ok(token.to_owned())
}

/// A key held as the secret string itself (the gate's, the payment
/// provider's, the edge's).
async fn key_secret(
    client: &crate::adapters::aws::SecretsClient,
    variable: &'static str,
    id: &str,
) -> Result<String, SecretError> {
    let key = fetch(client, variable, id).await?;
    if key.len() < MIN_GATE_KEY_LEN {
        return Err(SecretError::Shape {
            variable,
            secret_id: id.to_owned(),
            why: "is shorter than 32 characters",
        });
    }
    Ok(key)
}

/// The secret string of `id`. Counted in [`fetch_count`] before the call.
async fn fetch(
    client: &crate::adapters::aws::SecretsClient,
    variable: &'static str,
    id: &str,
) -> Result<String, SecretError> {
    if let Ok(mut fetches) = FETCHES.lock() {
        *fetches.entry(id.to_owned()).or_default() += 1;
    }
    let output = client
        .get_secret_value()
        .secret_id(id)
        .send()
        .await
        .map_err(|err| SecretError::Fetch {
            variable,
            secret_id: id.to_owned(),
            // The SDK's message chain: the error code and Secrets Manager's
            // sentence, no response body and no secret.
            why: crate::adapters::sqs::describe(&err),
        })?;
    output.secret_string.ok_or_else(|| SecretError::Shape {
        variable,
        secret_id: id.to_owned(),
        why: "holds no SecretString (a binary secret is not read)",
    })
}

/// `url` with `token` as its password, percent-encoded:
/// `rediss://host:6379` becomes `rediss://:<token>@host:6379`,
/// `rediss://user@host` becomes `rediss://user:<token>@host`, and a cluster
/// seed list (`rediss://h1:6379,h2:6379?cluster=true`) shares the one
/// password as it shares the scheme. A URL that already names a password is
/// refused: two sources of one password.
pub fn with_password(url: &str, token: &str) -> Result<String, SecretError> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(SecretError::Url("it has no scheme://"));
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let (user, hosts) = match authority.rsplit_once('@') {
        Some((userinfo, _)) if userinfo.contains(':') => {
            return Err(SecretError::Url(
                "it already carries a password (REDIS_AUTH_SECRET_ARN is the only source)",
            ));
        }
        Some((user, hosts)) => (user, hosts),
        None => ("", authority),
    };
    Ok(format!(
        "{scheme}://{user}:{}@{hosts}{tail}",
        percent_encode(token)
    ))
}

/// Every byte outside RFC 3986's unreserved set as `%XX` (redis-rs decodes
/// the password).
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_becomes_every_nodes_password() {
        for (url, expected) in [
            (
                "rediss://cache.example:6379?cluster=true",
                "rediss://:tok@cache.example:6379?cluster=true",
            ),
            (
                "rediss://default@cache.example:6379/0",
                "rediss://default:tok@cache.example:6379/0",
            ),
            (
                "rediss://a:1,b:2?cluster=true",
                "rediss://:tok@a:1,b:2?cluster=true",
            ),
        ] {
            assert_eq!(with_password(url, "tok").unwrap(), expected);
        }
        // Reserved characters are encoded, and redis-rs reads them back.
        let url = with_password("redis://h:6379", "p@ss:w/rd#%?").unwrap();
        assert_eq!(url, "redis://:p%40ss%3Aw%2Frd%23%25%3F@h:6379");
        let info = redis::Client::open(url.as_str()).unwrap();
        assert_eq!(
            info.get_connection_info().redis_settings().password(),
            Some("p@ss:w/rd#%?")
        );
    }

    #[test]
    fn a_url_with_a_password_is_refused_without_showing_it() {
        for url in [
            "redis://:hunter2@h:1",
            "rediss://u:hunter2@a:1,b:2?cluster=true",
        ] {
            let err = with_password(url, "tok").unwrap_err();
            let shown = format!("{err} {err:?}");
            assert!(shown.contains("already carries a password"), "{shown}");
            assert!(
                !shown.contains("hunter2") && !shown.contains("tok@"),
                "{shown}"
            );
        }
        assert!(matches!(
            with_password("h:6379", "tok"),
            Err(SecretError::Url(_))
        ));
    }

    #[tokio::test]
    async fn a_config_naming_no_secret_is_returned_as_it_is() {
        let map = |name: &str| match name {
            "REDIS_URL" => Some("redis://:local@h:1".to_owned()),
            "SALES_TABLE" | "ORDERS_TABLE" => Some("t".to_owned()),
            _ => None,
        };
        let config = Config::from_lookup(&map).unwrap();
        let resolved = resolve(
            &config,
            crate::adapters::aws::Caller::Tool,
            Uses::RedisGateAndEdge,
        )
        .await
        .unwrap();
        assert_eq!(resolved.redis_url, config.redis_url);
        assert_eq!(resolved.gate_secret, None);
    }
}
