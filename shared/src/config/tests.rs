use super::*;
use std::collections::HashMap;

fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn reads_required_and_defaults() {
    let map = env(&[
        ("REDIS_URL", "redis://127.0.0.1:6379"),
        ("ORDERS_QUEUE_URL", "http://q"),
        ("SALES_TABLE", "sales"),
        ("ORDERS_TABLE", "orders"),
    ]);
    let cfg = Config::from_lookup(&|k| map.get(k).cloned()).unwrap();
    assert_eq!(cfg.redis_timeout, Duration::from_millis(250));
    assert_eq!(cfg.sale_cache_ttl, Duration::from_secs(5));
    assert_eq!(cfg.metrics_namespace, "Seckill");
    assert_eq!(cfg.max_receive_count, None);
}

#[test]
fn reads_the_metrics_settings() {
    let base = [
        ("REDIS_URL", "redis://127.0.0.1:6379"),
        ("SALES_TABLE", "sales"),
        ("ORDERS_TABLE", "orders"),
    ];
    let with = |extra: &[(&str, &str)]| {
        let map = env(&[&base[..], extra].concat());
        Config::from_lookup(&|k| map.get(k).cloned())
    };
    let cfg = with(&[
        ("METRICS_NAMESPACE", "Seckill/prod"),
        ("MAX_RECEIVE_COUNT", "5"),
    ])
    .unwrap();
    assert_eq!(
        (cfg.metrics_namespace.as_str(), cfg.max_receive_count),
        ("Seckill/prod", Some(5))
    );
    for bad in ["0", "-1", "five", "99999999999"] {
        let err = with(&[("MAX_RECEIVE_COUNT", bad)]).unwrap_err();
        assert!(
            err.to_string().contains("MAX_RECEIVE_COUNT"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn reads_only_what_the_function_reads() {
    let asked = std::cell::RefCell::new(Vec::new());
    let record = |name: &str| {
        asked.borrow_mut().push(name.to_owned());
        // A number for every setting but the one that is a yes or no.
        Some(
            if name == "STAND_IN_PAYS_PRICED" {
                "true"
            } else {
                "7"
            }
            .to_owned(),
        )
    };
    let cfg = Config::reading(&record, Reads::COMMON).unwrap();
    asked.borrow_mut().sort();
    assert_eq!(
        *asked.borrow(),
        [
            "METRICS_NAMESPACE",
            "REDIS_AUTH_SECRET_ARN",
            "REDIS_TIMEOUT_MS",
            "REDIS_URL",
            "SALES_TABLE"
        ]
    );
    // What was not read keeps its default, not the environment's value.
    assert_eq!(cfg.orders_queue_url, None);
    assert_eq!(cfg.orders_table, "");
    assert_eq!(cfg.sale_cache_ttl, Duration::from_secs(5));
    assert_eq!(cfg.rate_limits, RateLimits::default());
    assert_eq!(cfg.redis_timeout, Duration::from_millis(7));

    asked.borrow_mut().clear();
    let cfg = Config::reading(
        &record,
        Reads {
            sale_cache: true,
            ..Reads::COMMON
        },
    )
    .unwrap();
    assert!(asked.borrow().contains(&"SALE_CACHE_SECONDS".to_owned()));
    assert_eq!(cfg.sale_cache_ttl, Duration::from_secs(7));

    asked.borrow_mut().clear();
    Config::from_lookup(&record).unwrap();
    assert_eq!(asked.borrow().len(), 21, "{:?}", asked.borrow());
    // No loader reads a secret value, only where to fetch it.
    assert!(
        !asked
            .borrow()
            .iter()
            .any(|name| name == "GATE_SECRET" || name == "EDGE_SECRET"),
        "{:?}",
        asked.borrow()
    );
}

#[test]
fn debug_hides_secrets() {
    let map = env(&[
        ("REDIS_URL", "rediss://default:hunter2@cache.example:6379"),
        ("SALES_TABLE", "s"),
        ("ORDERS_TABLE", "o"),
        (
            "GATE_SECRET_ARN",
            "arn:aws:secretsmanager:us-east-1:1:secret:gate",
        ),
    ]);
    let mut cfg = Config::from_lookup(&|k| map.get(k).cloned()).unwrap();
    // What `secrets::resolve` fills in at cold start.
    cfg.gate_secret = Some("correct-horse-battery-staple".into());
    cfg.payment_secret = Some("tr0ub4dor-payment-key".into());
    let shown = format!("{cfg:?}");
    assert!(
        !shown.contains("hunter2")
            && !shown.contains("correct-horse")
            && !shown.contains("tr0ub4dor"),
        "{shown}"
    );
    assert!(shown.contains("cache.example"));
    // Where the secrets come from is not secret.
    assert!(shown.contains("secret:gate"), "{shown}");
    assert_eq!(
        redact_url("redis://127.0.0.1:6379"),
        "redis://127.0.0.1:6379"
    );
}

#[test]
fn the_stand_in_pays_unpriced_orders_unless_told_any_and_refuses_other_values() {
    let base = [
        ("REDIS_URL", "redis://h:6379"),
        ("SALES_TABLE", "s"),
        ("ORDERS_TABLE", "o"),
    ];
    let with = |value: Option<&str>| {
        let mut pairs = base.to_vec();
        pairs.extend(value.map(|v| ("STAND_IN_PAYS_PRICED", v)));
        let map = env(&pairs);
        Config::from_lookup(&|k| map.get(k).cloned()).map(|c| c.stand_in_payments)
    };
    assert_eq!(with(None).unwrap(), StandInPayments::Unpriced);
    assert_eq!(with(Some("false")).unwrap(), StandInPayments::Unpriced);
    assert_eq!(with(Some("true")).unwrap(), StandInPayments::Any);
    assert!(matches!(
        with(Some("yes")),
        Err(ConfigError::Invalid {
            name: "STAND_IN_PAYS_PRICED",
            ..
        })
    ));
    // Only the function that has the route reads it.
    let map = env(&[
        ("STAND_IN_PAYS_PRICED", "true"),
        ("REDIS_URL", "redis://h"),
        ("SALES_TABLE", "s"),
    ]);
    let common = Config::reading(&|k| map.get(k).cloned(), Reads::COMMON).unwrap();
    assert_eq!(common.stand_in_payments, StandInPayments::Unpriced);
}

#[test]
fn redacts_every_auth_url_form() {
    for (url, shown) in [
        // Password only (requirepass), the user and an AUTH token (ElastiCache).
        ("redis://:hunter2@h:6379", "redis://:<secret>@h:6379"),
        (
            "rediss://default:hunter2@h:6379",
            "rediss://default:<secret>@h:6379",
        ),
        // Percent-encoded, and an `@` or `:` left raw in the password.
        (
            "rediss://u:hun%40ter2@h:6379/0",
            "rediss://u:<secret>@h:6379/0",
        ),
        ("rediss://u:hun@ter:2@h:6379", "rediss://u:<secret>@h:6379"),
    ] {
        assert_eq!(redact_url(url), shown);
    }
}

#[test]
fn reads_where_the_secrets_are_and_refuses_two_sources_of_the_password() {
    let base = [
        ("SALES_TABLE", "s"),
        ("ORDERS_TABLE", "o"),
        (
            "REDIS_AUTH_SECRET_ARN",
            "arn:aws:secretsmanager:r:1:secret:redis",
        ),
        ("GATE_SECRET_ARN", "arn:aws:secretsmanager:r:1:secret:gate"),
        ("EDGE_SECRET_ARN", "arn:aws:secretsmanager:r:1:secret:edge"),
    ];
    let with_url = |url: &str| {
        let map = env(&[&base[..], &[("REDIS_URL", url)]].concat());
        Config::from_lookup(&|k| map.get(k).cloned())
    };
    let cfg = with_url("rediss://cache.example:6379?cluster=true").unwrap();
    assert_eq!(
        cfg.secrets,
        SecretArns {
            redis_auth: Some("arn:aws:secretsmanager:r:1:secret:redis".into()),
            gate: Some("arn:aws:secretsmanager:r:1:secret:gate".into()),
            payment: None,
            edge: Some("arn:aws:secretsmanager:r:1:secret:edge".into()),
        }
    );
    assert_eq!(cfg.gate_secret, None);
    assert_eq!(cfg.edge_secret, None);
    // A user without a password is fine (the token becomes its password).
    with_url("rediss://default@cache.example:6379").unwrap();
    for url in [
        "rediss://:hunter2@cache.example:6379",
        "rediss://default:hunter2@cache.example:6379",
        "rediss://u:hunter2@a:1,b:2?cluster=true",
    ] {
        let err = with_url(url).unwrap_err();
        let shown = format!("{err} {err:?}");
        assert!(shown.contains("REDIS_AUTH_SECRET_ARN"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }
    // Only the functions that read the gate look its secret up.
    let map = env(&[&base[..], &[("REDIS_URL", "redis://h:1")]].concat());
    let cfg = Config::reading(&|k| map.get(k).cloned(), Reads::COMMON).unwrap();
    assert_eq!(cfg.secrets.gate, None);
    assert_eq!(cfg.secrets.edge, None);
    assert!(cfg.secrets.redis_auth.is_some());
}

#[test]
fn names_what_is_missing_or_wrong() {
    let map = env(&[("REDIS_URL", "redis://x"), ("SALES_TABLE", "s")]);
    let err = Config::from_lookup(&|k| map.get(k).cloned()).unwrap_err();
    assert!(err.to_string().contains("ORDERS_TABLE"));
    let map = env(&[
        ("REDIS_URL", "redis://x"),
        ("ORDERS_QUEUE_URL", "q"),
        ("SALES_TABLE", "s"),
        ("ORDERS_TABLE", "o"),
        ("REDIS_TIMEOUT_MS", "fast"),
    ]);
    let err = Config::from_lookup(&|k| map.get(k).cloned()).unwrap_err();
    assert!(err.to_string().contains("REDIS_TIMEOUT_MS"));
}
