//! `seckill-local jwt-authorizer`: API Gateway's JWT authorizer as a Lambda
//! authorizer, for `sam local start-api` only.
//!
//! SAM's local gateway runs Lambda authorizers and skips JWT authorizers: a
//! function behind one gets no claims and answers `401`.
//! `infra/sam_local/template.py --authorizer` puts this function in the JWT
//! authorizer's place, under the same name, with payload format 1.0: SAM
//! then sets the event's `requestContext.authorizer` to the `context` given
//! here, which holds the claims where API Gateway's JWT authorizer puts them
//! (`jwt.claims`). The token is checked as that authorizer checks it (the
//! local stack's [`Verifier`]); a missing or bad one gets `Deny`.

use crate::token::{TokenSettings, Verifier, bearer};
use lambda_runtime::{LambdaEvent, service_fn};
use serde_json::{Value, json};

/// Serves authorizer events until the runtime stops.
pub async fn serve() -> Result<(), String> {
    let verifier = Verifier::new(&TokenSettings::from_env());
    let verifier = &verifier;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        Ok::<Value, std::convert::Infallible>(decide(verifier, &event.payload))
    }))
    .await
    .map_err(|e| e.to_string())
}

/// The authorizer's answer to one request event (payload format 1.0).
pub fn decide(verifier: &Verifier, event: &Value) -> Value {
    let method_arn = event
        .get("methodArn")
        .and_then(Value::as_str)
        .unwrap_or("*");
    let header = event
        .get("headers")
        .and_then(Value::as_object)
        .and_then(|headers| {
            headers
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case("authorization"))
        })
        .and_then(|(_, value)| value.as_str());
    let claims = bearer(header).and_then(|token| verifier.verify(token));
    match claims {
        Ok(claims) => {
            let sub = claims.get("sub").cloned().unwrap_or_default();
            json!({
                "principalId": sub,
                "policyDocument": policy("Allow", method_arn),
                "context": {"jwt": {"claims": claims, "scopes": null}},
            })
        }
        Err(e) => {
            tracing::info!(error = %e, "token refused");
            json!({"principalId": "anonymous", "policyDocument": policy("Deny", method_arn)})
        }
    }
}

fn policy(effect: &str, resource: &str) -> Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [{"Action": "execute-api:Invoke", "Effect": effect, "Resource": resource}],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> TokenSettings {
        TokenSettings {
            secret: "s".into(),
            issuer: "iss".into(),
            audience: "aud".into(),
        }
    }

    fn event(authorization: Option<&str>) -> Value {
        let mut headers = serde_json::Map::new();
        if let Some(value) = authorization {
            headers.insert("Authorization".into(), value.into());
        }
        json!({"type": "REQUEST", "methodArn": "arn:m", "headers": headers})
    }

    #[test]
    fn a_valid_token_is_allowed_with_its_claims_where_the_jwt_authorizer_puts_them() {
        let settings = settings();
        let token = settings.mint("user-7", true, 60).unwrap();
        let answer = decide(
            &Verifier::new(&settings),
            &event(Some(&format!("Bearer {token}"))),
        );
        assert_eq!(answer["policyDocument"]["Statement"][0]["Effect"], "Allow");
        assert_eq!(
            answer["policyDocument"]["Statement"][0]["Resource"],
            "arn:m"
        );
        assert_eq!(answer["principalId"], "user-7");
        let claims = &answer["context"]["jwt"]["claims"];
        assert_eq!(claims["sub"], "user-7");
        assert_eq!(claims["iss"], "iss");
        assert!(claims["scope"].as_str().unwrap().contains("seckill/admin"));
    }

    #[test]
    fn a_missing_expired_or_foreign_token_is_denied_without_claims() {
        let settings = settings();
        let verifier = Verifier::new(&settings);
        let expired = settings.mint("user-7", false, -60).unwrap();
        let foreign = TokenSettings {
            secret: "other".into(),
            ..settings.clone()
        }
        .mint("user-7", false, 60)
        .unwrap();
        for authorization in [
            None,
            Some("Basic abc".to_owned()),
            Some(format!("Bearer {expired}")),
            Some(format!("Bearer {foreign}")),
        ] {
            let answer = decide(&verifier, &event(authorization.as_deref()));
            assert_eq!(
                answer["policyDocument"]["Statement"][0]["Effect"], "Deny",
                "{authorization:?}"
            );
            assert!(answer.get("context").is_none(), "{authorization:?}");
        }
    }
}
