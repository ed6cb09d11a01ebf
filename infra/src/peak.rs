//! How much a piece of work raises the process's peak resident memory:
//! `make bench`'s memory figures of the jobs' reads.

use std::future::Future;

/// The process's resident memory now and its peak since the last reset,
/// in bytes (`/proc/self/status`), or `None` off Linux.
pub fn resident() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1_024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// What `work` adds to the process's peak resident memory: the peak is
/// reset (`/proc/self/clear_refs`, 5) before it runs. `None` where Linux
/// does not allow it, or when `work` fails. A floor: memory the process
/// freed before is reused first.
pub async fn peak_added<T, E, F: Future<Output = Result<T, E>>>(work: F) -> Option<(u64, T)> {
    std::fs::write("/proc/self/clear_refs", "5").ok()?;
    let (before, _) = resident()?;
    let done = work.await.ok()?;
    let (_, peak) = resident()?;
    Some((peak.saturating_sub(before), done))
}
