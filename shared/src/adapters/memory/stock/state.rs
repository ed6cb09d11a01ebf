//! A reservation's state in the in-memory stock store.

use crate::ports::StoreError;

/// A reservation's state, as the scripts write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    Queued,
    Written,
    Rejected,
    Expired,
    /// A waitlist offer claimed before the ledger writes it
    /// (`hold_offer.lua`'s CLAIM), by this many runs.
    Offering(u32),
}

impl State {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "QUEUED",
            Self::Written => "WRITTEN",
            Self::Rejected => "REJECTED",
            Self::Expired => "EXPIRED",
            Self::Offering(_) => "OFFERING",
        }
    }

    pub(super) fn parse(raw: &str) -> Result<Self, StoreError> {
        Ok(match raw {
            "QUEUED" => Self::Queued,
            "WRITTEN" => Self::Written,
            "REJECTED" => Self::Rejected,
            "EXPIRED" => Self::Expired,
            "OFFERING" => Self::Offering(1),
            other => return Err(StoreError::Protocol(format!("reservation state {other:?}"))),
        })
    }

    /// On the buyer's list: what `holding.lua` reads.
    pub(super) fn live(self) -> bool {
        matches!(self, Self::Queued | Self::Written | Self::Offering(_))
    }
}
