//! Local JWTs: HS256 tokens signed with a documented local secret, checked
//! the way API Gateway's JWT authorizer checks them (signature, expiry,
//! issuer, audience). In AWS the real authorizer does this; the functions
//! only ever see the claims.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Defaults of the local stack, documented in docs/local.md. Override with
/// `SECKILL_JWT_SECRET`, `SECKILL_JWT_ISSUER`, `SECKILL_JWT_AUDIENCE`.
pub const DEFAULT_SECRET: &str = "seckill-local-secret-not-for-production";
pub const DEFAULT_ISSUER: &str = "seckill-local";
pub const DEFAULT_AUDIENCE: &str = "seckill";

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("missing bearer token")]
    Missing,
    #[error("invalid token: {0}")]
    Invalid(#[from] jsonwebtoken::errors::Error),
}

#[derive(Debug, Clone)]
pub struct TokenSettings {
    pub secret: String,
    pub issuer: String,
    pub audience: String,
}

impl TokenSettings {
    pub fn from_env() -> Self {
        let var = crate::env_or;
        Self {
            secret: var("SECKILL_JWT_SECRET", DEFAULT_SECRET),
            issuer: var("SECKILL_JWT_ISSUER", DEFAULT_ISSUER),
            audience: var("SECKILL_JWT_AUDIENCE", DEFAULT_AUDIENCE),
        }
    }

    /// Mints a token for `user`, valid for `ttl_secs`.
    pub fn mint(&self, user: &str, admin: bool, ttl_secs: i64) -> Result<String, TokenError> {
        self.mint_until(user, admin, ttl_secs)
            .map(|(token, _)| token)
    }

    /// [`mint`](Self::mint), and the token's `exp` (seconds since the epoch),
    /// for a caller that tells the holder when it lapses.
    pub fn mint_until(
        &self,
        user: &str,
        admin: bool,
        ttl_secs: i64,
    ) -> Result<(String, i64), TokenError> {
        let now = seckill_shared::clock::now_ms() / 1000;
        let claims = Claims {
            sub: user.to_owned(),
            iss: self.issuer.clone(),
            aud: self.audience.clone(),
            iat: now,
            exp: now + ttl_secs,
            scope: if admin {
                "openid seckill/admin".into()
            } else {
                "openid".into()
            },
        };
        let exp = claims.exp;
        let token = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(self.secret.as_bytes()),
        )?;
        Ok((token, exp))
    }

    /// Checks a token and returns its claims the way API Gateway passes them
    /// to a function: every value a string.
    pub fn verify(&self, token: &str) -> Result<HashMap<String, String>, TokenError> {
        Verifier::new(self).verify(token)
    }
}

/// The checking half of [`TokenSettings`], built once: the decoding key and
/// the rules. The local gateway checks every request's token, and building
/// these per request was about a tenth of its CPU in a profile of `make
/// bench`'s HTTP row.
#[derive(Clone)]
pub struct Verifier {
    key: DecodingKey,
    validation: Validation,
}

impl Verifier {
    pub fn new(settings: &TokenSettings) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[&settings.issuer]);
        validation.set_audience(&[&settings.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = 0;
        Self {
            key: DecodingKey::from_secret(settings.secret.as_bytes()),
            validation,
        }
    }

    /// See [`TokenSettings::verify`].
    pub fn verify(&self, token: &str) -> Result<HashMap<String, String>, TokenError> {
        let data = jsonwebtoken::decode::<HashMap<String, serde_json::Value>>(
            token,
            &self.key,
            &self.validation,
        )?;
        Ok(data
            .claims
            .into_iter()
            .map(|(k, v)| (k, claim_text(v)))
            .collect())
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    sub: String,
    iss: String,
    aud: String,
    iat: i64,
    exp: i64,
    scope: String,
}

/// API Gateway flattens claims to strings; arrays become `[a b]`.
fn claim_text(value: serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s,
        serde_json::Value::Array(items) => {
            let parts: Vec<String> = items.into_iter().map(claim_text).collect();
            format!("[{}]", parts.join(" "))
        }
        other => other.to_string(),
    }
}

/// The token of an `Authorization: Bearer ...` header value.
pub fn bearer(header: Option<&str>) -> Result<&str, TokenError> {
    let value = header.ok_or(TokenError::Missing)?;
    let (scheme, token) = value.split_once(' ').ok_or(TokenError::Missing)?;
    if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() {
        Ok(token.trim())
    } else {
        Err(TokenError::Missing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> TokenSettings {
        TokenSettings {
            secret: "s3cret".into(),
            issuer: "iss".into(),
            audience: "aud".into(),
        }
    }

    #[test]
    fn minted_tokens_verify_with_string_claims() {
        let s = settings();
        let claims = s.verify(&s.mint("u1", true, 60).unwrap()).unwrap();
        assert_eq!(claims["sub"], "u1");
        assert_eq!(claims["scope"], "openid seckill/admin");
        assert!(claims["exp"].parse::<i64>().is_ok());
    }

    #[test]
    fn rejects_wrong_secret_audience_issuer_and_expiry() {
        let s = settings();
        let token = s.mint("u1", false, 60).unwrap();
        let other = TokenSettings {
            secret: "other".into(),
            ..settings()
        };
        assert!(other.verify(&token).is_err());
        let aud = TokenSettings {
            audience: "x".into(),
            ..settings()
        };
        assert!(aud.verify(&token).is_err());
        let iss = TokenSettings {
            issuer: "x".into(),
            ..settings()
        };
        assert!(iss.verify(&token).is_err());
        assert!(s.verify(&s.mint("u1", false, -10).unwrap()).is_err());
    }

    #[test]
    fn bearer_header_forms() {
        assert_eq!(bearer(Some("Bearer abc")).unwrap(), "abc");
        assert_eq!(bearer(Some("bearer abc")).unwrap(), "abc");
        assert!(bearer(Some("Basic abc")).is_err());
        assert!(bearer(Some("Bearer ")).is_err());
        assert!(bearer(None).is_err());
    }
}
