//! A sale's read kept in slices of its buyers: every order row, buyer count
//! and reservation goes to the slice of its buyer (a stable hash of the user
//! id), so each slice holds whole buyers and the orders of each, and the
//! checks and repairs that go buyer by buyer can be run a slice at a time.
//!
//! One slice is kept in memory. More are written to files under the
//! system's temporary directory (a function's `/tmp`), one file of JSON
//! lines a slice, read back one at a time: the reader holds one slice,
//! whatever the size of the sale. The files go when the [`SaleSlices`] is
//! dropped; those of a process that died first are removed by a later read
//! once they are older than [`STALE_AFTER`].

use crate::domain::money::{Currency, Money};
use crate::domain::orders::{Order, OrderStatus, RejectReason};
use crate::domain::stock_state::{SnapshotSink, StoredReservation};
use crate::domain::{OrderId, PaymentId, Quantity, SaleId, UserId};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::time::Duration;

/// The prefix of a read's folder under the temporary directory.
const FOLDER_PREFIX: &str = "seckill-slices-";

/// A read's folder left by a process that died is removed once this old
/// (no read takes this long: a function's timeout is far shorter).
pub const STALE_AFTER: Duration = Duration::from_secs(3_600);

/// What one order of a sale at most takes on disk in a read: its row, its
/// reservation and its buyer's count, at the longest ids (a refund or a
/// reservation read again adds a little): the function that reads a sale
/// in slices needs this much `/tmp` an order (`template.yaml`'s
/// `EphemeralStorage`).
pub const BYTES_PER_ORDER: u64 = 1_024;

/// The slice of a buyer among `slices`: a function of the user id alone,
/// so a buyer's rows, count and reservations meet in one slice.
pub fn slice_of(user_id: &str, slices: u32) -> u32 {
    let h = crate::domain::stable_hash(user_id);
    u32::try_from(h % u64::from(slices.max(1))).unwrap_or(0)
}

/// The read could not be kept or read back.
#[derive(Debug, thiserror::Error)]
#[error("the sale's read could not be kept on local disk: {0}")]
pub struct SpillError(String);

impl From<std::io::Error> for SpillError {
    fn from(err: std::io::Error) -> Self {
        Self(err.to_string())
    }
}

/// One slice as read back: its buyers' order rows, counts and
/// reservations, each by its key (a later entry of the same key stands).
#[derive(Debug, Default)]
pub struct Slice {
    pub rows: BTreeMap<String, Order>,
    pub buyers: BTreeMap<String, i64>,
    pub reservations: BTreeMap<String, StoredReservation>,
}

/// What is kept of one entry. A reservation carries the key group it was
/// read from and that group's read attempt: only the last attempt's stand.
#[derive(Debug)]
enum Entry {
    Row(Order),
    Buyer {
        group: u32,
        user: String,
        count: i64,
    },
    Reservation {
        group: u32,
        attempt: u32,
        order_id: String,
        reservation: StoredReservation,
    },
}

enum Store {
    Memory(Vec<Entry>),
    Files {
        folder: PathBuf,
        writers: Vec<BufWriter<std::fs::File>>,
    },
}

/// A sale's read in slices; see the module documentation.
pub struct SaleSlices {
    slices: u32,
    store: Store,
    /// Each key group's current read attempt.
    attempts: HashMap<u32, u32>,
    /// The first write that failed: the rest are dropped and
    /// [`Self::finish`] reports it.
    failed: Option<String>,
}

impl SaleSlices {
    /// A read of `slices` slices (at least one): one is kept in memory,
    /// more in files.
    pub fn new(sale_id: &SaleId, slices: u32) -> Result<Self, SpillError> {
        let slices = slices.max(1);
        let store = if slices == 1 {
            Store::Memory(Vec::new())
        } else {
            let base = std::env::temp_dir();
            remove_stale(&base);
            let folder = base.join(format!(
                "{FOLDER_PREFIX}{sale_id}-{}-{}",
                std::process::id(),
                unique()
            ));
            std::fs::create_dir_all(&folder)?;
            let mut writers = Vec::new();
            for k in 0..slices {
                let file = std::fs::File::create(folder.join(k.to_string()))?;
                writers.push(BufWriter::new(file));
            }
            Store::Files { folder, writers }
        };
        Ok(Self {
            slices,
            store,
            attempts: HashMap::new(),
            failed: None,
        })
    }

    pub fn slices(&self) -> u32 {
        self.slices
    }

    /// An order row, to its buyer's slice.
    pub fn row(&mut self, order: Order) {
        let slice = slice_of(order.user_id.as_str(), self.slices);
        self.keep(slice, Entry::Row(order));
    }

    /// Everything written is on disk; the first write that failed, if any.
    pub fn finish(&mut self) -> Result<(), SpillError> {
        if let Store::Files { writers, .. } = &mut self.store {
            for w in writers {
                if let Err(err) = w.flush() {
                    self.failed.get_or_insert(err.to_string());
                }
            }
        }
        match &self.failed {
            Some(err) => Err(SpillError(err.clone())),
            None => Ok(()),
        }
    }

    /// Slice `k` as read back (after [`Self::finish`]).
    pub fn load(&self, k: u32) -> Result<Slice, SpillError> {
        let mut slice = Slice::default();
        let mut counts: BTreeMap<String, BTreeMap<u32, i64>> = BTreeMap::new();
        let mut place = |entry: Entry| match entry {
            Entry::Row(order) => {
                slice.rows.insert(order.order_id.to_string(), order);
            }
            Entry::Buyer { group, user, count } => {
                counts.entry(user).or_default().insert(group, count);
            }
            Entry::Reservation {
                group,
                attempt,
                order_id,
                reservation,
            } => {
                if self.attempts.get(&group).copied().unwrap_or(0) == attempt {
                    slice.reservations.insert(order_id, reservation);
                }
            }
        };
        match &self.store {
            Store::Memory(entries) => {
                for entry in entries {
                    place(copy(entry));
                }
            }
            Store::Files { folder, .. } => {
                let file = std::fs::File::open(folder.join(k.to_string()))?;
                for line in BufReader::new(file).lines() {
                    let line: Line = serde_json::from_str(&line?)
                        .map_err(|e| SpillError(format!("slice {k}: {e}")))?;
                    place(
                        line.entry()
                            .map_err(|e| SpillError(format!("slice {k}: {e}")))?,
                    );
                }
            }
        }
        slice.buyers = counts
            .into_iter()
            .map(|(user, groups)| (user, groups.values().sum()))
            .collect();
        Ok(slice)
    }

    fn keep(&mut self, slice: u32, entry: Entry) {
        if self.failed.is_some() {
            return;
        }
        match &mut self.store {
            Store::Memory(entries) => entries.push(entry),
            Store::Files { writers, .. } => {
                let Some(w) = writers.get_mut(slice as usize) else {
                    return;
                };
                let written = serde_json::to_writer(&mut *w, &Line::of(&entry))
                    .map_err(|e| e.to_string())
                    .and_then(|()| w.write_all(b"\n").map_err(|e| e.to_string()));
                if let Err(err) = written {
                    self.failed = Some(err);
                }
            }
        }
    }
}

impl SnapshotSink for SaleSlices {
    fn restart_reservations(&mut self, group: u32) {
        *self.attempts.entry(group).or_default() += 1;
    }

    fn buyer(&mut self, group: u32, user: String, count: i64) {
        let slice = slice_of(&user, self.slices);
        self.keep(slice, Entry::Buyer { group, user, count });
    }

    fn reservation(&mut self, group: u32, order_id: String, reservation: StoredReservation) {
        let slice = slice_of(&reservation.user_id, self.slices);
        let attempt = self.attempts.get(&group).copied().unwrap_or(0);
        self.keep(
            slice,
            Entry::Reservation {
                group,
                attempt,
                order_id,
                reservation,
            },
        );
    }
}

impl Drop for SaleSlices {
    fn drop(&mut self) {
        if let Store::Files { folder, writers } = &mut self.store {
            writers.clear();
            if let Err(err) = std::fs::remove_dir_all(&*folder) {
                tracing::warn!(folder = %folder.display(), %err, "could not remove a sale's read");
            }
        }
    }
}

/// Removes the folders of reads older than [`STALE_AFTER`] (their process
/// died before dropping them); one that cannot be removed is left.
fn remove_stale(base: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let stale = entry
            .file_name()
            .to_string_lossy()
            .starts_with(FOLDER_PREFIX)
            && entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|at| at.elapsed().ok())
                .is_some_and(|age| age > STALE_AFTER);
        if stale {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A name no other read of this process takes.
fn unique() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn copy(entry: &Entry) -> Entry {
    match entry {
        Entry::Row(order) => Entry::Row(order.clone()),
        Entry::Buyer { group, user, count } => Entry::Buyer {
            group: *group,
            user: user.clone(),
            count: *count,
        },
        Entry::Reservation {
            group,
            attempt,
            order_id,
            reservation,
        } => Entry::Reservation {
            group: *group,
            attempt: *attempt,
            order_id: order_id.clone(),
            reservation: reservation.clone(),
        },
    }
}

/// An entry as a line of a slice's file.
#[derive(Serialize, Deserialize)]
#[serde(tag = "k")]
enum Line {
    #[serde(rename = "o")]
    Row(RowLine),
    #[serde(rename = "b")]
    Buyer { g: u32, u: String, n: i64 },
    #[serde(rename = "r")]
    Reservation {
        g: u32,
        a: u32,
        id: String,
        r: StoredReservation,
    },
}

/// Every field of an [`Order`], as text and numbers.
#[derive(Serialize, Deserialize)]
struct RowLine {
    id: String,
    sale: String,
    user: String,
    q: u32,
    status: String,
    created: i64,
    expires: Option<i64>,
    reason: Option<String>,
    seq: Option<u64>,
    amount: Option<(u64, String)>,
    paid: Option<i64>,
    payment: Option<String>,
    refunds: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    offer_of: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    offered: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Line {
    fn of(entry: &Entry) -> Self {
        match entry {
            Entry::Row(o) => Line::Row(RowLine {
                id: o.order_id.to_string(),
                sale: o.sale_id.to_string(),
                user: o.user_id.to_string(),
                q: o.quantity.get(),
                status: o.status.as_str().into(),
                created: o.created_at_ms,
                expires: o.expires_at_ms,
                reason: o.reject_reason.map(|r| r.as_str().into()),
                seq: o.return_seq,
                amount: o.amount.map(|m| (m.amount, m.currency.as_str().into())),
                paid: o.paid_at_ms,
                payment: o.payment_id.as_ref().map(|p| p.as_str().into()),
                refunds: o.refunds.iter().map(|p| p.as_str().into()).collect(),
                offer_of: o.offer_of.as_ref().map(|p| p.as_str().into()),
                offered: o.offered,
            }),
            Entry::Buyer { group, user, count } => Line::Buyer {
                g: *group,
                u: user.clone(),
                n: *count,
            },
            Entry::Reservation {
                group,
                attempt,
                order_id,
                reservation,
            } => Line::Reservation {
                g: *group,
                a: *attempt,
                id: order_id.clone(),
                r: reservation.clone(),
            },
        }
    }

    fn entry(self) -> Result<Entry, String> {
        Ok(match self {
            Line::Row(r) => {
                let bad = |what: &str| format!("order {}: bad {what}", r.id);
                Entry::Row(Order {
                    order_id: OrderId::parse(&r.id).map_err(|_| bad("id"))?,
                    sale_id: SaleId::parse(&r.sale).map_err(|_| bad("sale"))?,
                    user_id: UserId::parse(&r.user).map_err(|_| bad("user"))?,
                    quantity: Quantity::new(u64::from(r.q)).map_err(|_| bad("quantity"))?,
                    status: OrderStatus::parse(&r.status).ok_or_else(|| bad("status"))?,
                    created_at_ms: r.created,
                    expires_at_ms: r.expires,
                    reject_reason: match &r.reason {
                        Some(reason) => {
                            Some(RejectReason::parse(reason).ok_or_else(|| bad("reason"))?)
                        }
                        None => None,
                    },
                    return_seq: r.seq,
                    amount: match &r.amount {
                        Some((amount, currency)) => Some(Money {
                            amount: *amount,
                            currency: Currency::parse(currency).ok_or_else(|| bad("currency"))?,
                        }),
                        None => None,
                    },
                    paid_at_ms: r.paid,
                    payment_id: match &r.payment {
                        Some(p) => Some(PaymentId::parse(p).map_err(|_| bad("payment"))?),
                        None => None,
                    },
                    refunds: r
                        .refunds
                        .iter()
                        .map(|p| PaymentId::parse(p).map_err(|_| bad("refund")))
                        .collect::<Result<_, _>>()?,
                    offer_of: match &r.offer_of {
                        Some(o) => Some(OrderId::parse(o).map_err(|_| bad("offer"))?),
                        None => None,
                    },
                    offered: r.offered,
                })
            }
            Line::Buyer { g, u, n } => Entry::Buyer {
                group: g,
                user: u,
                count: n,
            },
            Line::Reservation { g, a, id, r } => Entry::Reservation {
                group: g,
                attempt: a,
                order_id: id,
                reservation: r,
            },
        })
    }
}

#[cfg(test)]
mod tests;
