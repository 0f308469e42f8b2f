//! The write-ahead log of the paged family: per-session partitions ordered
//! by global sequence numbers, Remote Flush Avoidance and the commit
//! protocols (seed 000 §2.4, §3.1, §3.2, §3.8).
//!
//! - [`record`]: the records: kinds, header and bodies, update diffs, page
//!   images, their encoding and decoding (and so the segment scan's reading
//!   of them).
//! - [`partition`]: one partition: a log stream with the session's GSN
//!   clock (GSN reservation, GSN_flushed).
//! - [`log`]: the log manager, the GSN protocol, RFA, commit protocols, the
//!   WAL-rule gate for page writes.
//!
//! - [`recovery`]: analysis, redo and undo on open; `redo` decides which
//!   records redo applies (page chains, gaps, structure modifications all
//!   or nothing) and applies them.
//!
//! The log storage under the partitions (segment files, record frames and
//! the torn-tail scan, the chunk ring and writer thread with sync pacing,
//! spares, `O_DIRECT` writes, failure handling) is the scheme-neutral
//! [`crate::logstore`]'s.
//!
//! `Database` logs every page change through a session's
//! [`WalSessionLog`] and recovers on open (see ARCHITECTURE.md).

pub mod log;
mod options;
pub mod partition;
pub mod record;
pub mod recovery;
mod redo;
pub(crate) mod scheme;
#[cfg(test)]
mod test_support;

pub use log::{CommitProtocol, CommitTicket, PartitionLogStats, Wal, WalSessionLog, WalStats};
pub use options::PerWorkerOptions;
pub use scheme::PerWorkerScheme;
