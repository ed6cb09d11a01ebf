//! The layer's knobs, read from the environment (`STRICT_*`), and the
//! errors of setting it up.

use super::dynamo::DynamoLimits;
use super::sqs::SqsLimits;
use std::time::Duration;

/// The knobs. Each one is off at zero (or `None`).
#[derive(Debug, Clone, Default)]
pub struct StrictSettings {
    pub dynamo: DynamoLimits,
    pub sqs: SqsLimits,
    /// `STRICT_RECORD_FILE`: where the SQS calls served here are recorded
    /// (JSON lines, as the emulator records its own) from the start.
    pub record_file: Option<std::path::PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum StrictError {
    #[error("{name}={value:?} is not {what}")]
    Setting {
        name: &'static str,
        value: String,
        what: &'static str,
    },
    #[error("the strict layer cannot listen on {addr}: {source}")]
    Listen {
        addr: String,
        source: std::io::Error,
    },
    #[error("the emulator's URL {0:?} is not http://host:port")]
    Upstream(String),
}

fn setting<T: std::str::FromStr>(
    name: &'static str,
    what: &'static str,
) -> Result<Option<T>, StrictError> {
    match std::env::var(name) {
        Ok(value) if !value.trim().is_empty() => value
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| StrictError::Setting { name, value, what }),
        _ => Ok(None),
    }
}

impl StrictSettings {
    /// The defaults, each replaced by its variable when set:
    /// `STRICT_DYNAMO_TRANSACTION_HOLD_MS` (0: no conflicts),
    /// `STRICT_DYNAMO_TRANSACTION_LATENCY_MS`,
    /// `STRICT_DYNAMO_TRANSACTION_ANSWER_DELAY_MS`, `STRICT_DYNAMO_PARTITION_WCU`
    /// (0: no limit), `STRICT_DYNAMO_MAX_ITEM_BYTES`,
    /// `STRICT_SQS_COUNT_LAG_SECONDS`, `STRICT_SQS_DUPLICATE_RATE`.
    pub fn from_env() -> Result<Self, StrictError> {
        let mut s = Self::default();
        if let Some(ms) = setting::<u64>(
            "STRICT_DYNAMO_TRANSACTION_HOLD_MS",
            "a whole number of milliseconds",
        )? {
            s.dynamo.transaction_hold = Duration::from_millis(ms);
        }
        if let Some(ms) = setting::<u64>(
            "STRICT_DYNAMO_TRANSACTION_LATENCY_MS",
            "a whole number of milliseconds",
        )? {
            s.dynamo.transaction_latency = Duration::from_millis(ms);
        }
        if let Some(ms) = setting::<u64>(
            "STRICT_DYNAMO_TRANSACTION_ANSWER_DELAY_MS",
            "a whole number of milliseconds",
        )? {
            s.dynamo.transaction_answer_delay = Duration::from_millis(ms);
        }
        if let Some(units) = setting::<u32>("STRICT_DYNAMO_PARTITION_WCU", "a whole number")? {
            s.dynamo.partition_write_units = (units > 0).then_some(units);
        }
        if let Some(bytes) = setting::<usize>("STRICT_DYNAMO_MAX_ITEM_BYTES", "a whole number")? {
            s.dynamo.max_item_bytes = bytes;
        }
        if let Some(secs) = setting::<f64>("STRICT_SQS_COUNT_LAG_SECONDS", "a number of seconds")? {
            if !(0.0..=3600.0).contains(&secs) {
                return Err(StrictError::Setting {
                    name: "STRICT_SQS_COUNT_LAG_SECONDS",
                    value: secs.to_string(),
                    what: "between 0 and 3600",
                });
            }
            s.sqs.count_lag = Duration::from_secs_f64(secs);
        }
        if let Some(native) = setting::<u8>("STRICT_SQS_NATIVE", "0 or 1")? {
            s.sqs.native = native != 0;
        }
        if let Some(path) = std::env::var_os("STRICT_RECORD_FILE").filter(|p| !p.is_empty()) {
            s.record_file = Some(path.into());
        }
        if let Some(rate) = setting::<f64>("STRICT_SQS_DUPLICATE_RATE", "a number from 0 to 1")? {
            if !(0.0..=1.0).contains(&rate) {
                return Err(StrictError::Setting {
                    name: "STRICT_SQS_DUPLICATE_RATE",
                    value: rate.to_string(),
                    what: "a number from 0 to 1",
                });
            }
            s.sqs.duplicate_rate = rate;
        }
        Ok(s)
    }

    /// Every knob off: the emulator's own answers, applied one write at a
    /// time (the soundness fix is not a knob).
    pub fn lenient() -> Self {
        Self {
            dynamo: DynamoLimits {
                transaction_hold: Duration::ZERO,
                transaction_latency: Duration::ZERO,
                transaction_answer_delay: Duration::ZERO,
                partition_write_units: None,
                max_item_bytes: usize::MAX,
            },
            sqs: SqsLimits {
                count_lag: Duration::ZERO,
                duplicate_rate: 0.0,
                native: false,
            },
            record_file: None,
        }
    }
}
