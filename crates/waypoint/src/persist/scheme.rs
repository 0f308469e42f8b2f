//! The scheme side of the seam: what the database asks of a persistence
//! scheme once it is open, and the names and counters schemes share.
//!
//! A scheme is opened by the function of its folder (`persist::none`,
//! `wal::scheme` for the per-worker WAL), which recovers and starts the
//! scheme's background services; from then on the database holds it as
//! an `Arc<dyn Scheme>` and knows nothing of its types. Adding a scheme is
//! a folder, a [`SchemeKind`] and a match arm in `db::open_scheme`.
//!
//! The scheme also says when the buffer pool may write a dirty page
//! ([`PageWritePolicy`], returned by [`Opening::prepare`]): steal behind
//! its log's flush gate (the paged schemes with a log), write freely (no
//! log), or never while running (memory-resident schemes). `db::open`
//! installs it before recovery touches a page.
//!
//! Invariant: between [`Scheme::seal_for_clean_close`] and
//! [`Scheme::remove_log_after_clean_close`] the database writes the
//! superblock that records the clean close; a scheme deletes nothing a
//! crash before that superblock could still need.

use super::SessionLog;
use crate::buffer::{BufferPool, PageWritePolicy};
use crate::checkpoint::{meta, CheckpointStats};
use crate::db::Superblock;
use crate::error::Result;
use crate::ids::Gsn;
use crate::io::{Storage, StorageFile};
use crate::wal::recovery::RecoveryReport;
use crate::wal::WalStats;
use std::path::Path;
use std::sync::Arc;

/// Which persistence scheme a database runs, as its files record it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SchemeKind {
    /// No log: durable only after a clean close (the cost of logging).
    None,
    /// Seed 000: a log partition per session, GSNs, RFA, continuous
    /// checkpoints, steal with undo.
    #[default]
    PerWorker,
    /// Seed 000 §4's ARIES baseline: one log for every session, each
    /// record appended under one log latch that assigns its LSN (the
    /// GSN's role), full checkpoints, steal with undo.
    Aries,
    /// The same central log with Aether's techniques (Johnson et al.,
    /// PVLDB 2010): a consolidation array (only a group's leader takes the
    /// latch), decoupled buffer fill, flush pipelining.
    Aether,
    /// Seed 002 (SiloR): memory-resident, no steal; value logs written by
    /// logger threads, commits acknowledged per persistent epoch,
    /// recovery by replaying the logs over the last clean close.
    Silor,
    /// Seed 001 (VoltDB): memory-resident, no steal; stored procedures
    /// run serially per partition and only their calls are logged (name
    /// and parameters); recovery re-executes them in log order over the
    /// last clean close.
    Command,
}

impl SchemeKind {
    /// Every scheme, in the order `waypoint --scheme` lists them.
    pub const ALL: [SchemeKind; 6] = [
        SchemeKind::PerWorker,
        SchemeKind::Aries,
        SchemeKind::Aether,
        SchemeKind::Silor,
        SchemeKind::Command,
        SchemeKind::None,
    ];

    /// The name options, files and reports use.
    pub fn name(self) -> &'static str {
        match self {
            SchemeKind::None => "none",
            SchemeKind::PerWorker => "per-worker",
            SchemeKind::Aries => "aries",
            SchemeKind::Aether => "aether",
            SchemeKind::Silor => "silor",
            SchemeKind::Command => "command",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }

    /// The tag the superblock and log segment headers store (0 is no
    /// scheme recorded in a superblock: a database written before the tag
    /// existed, which ran the per-worker scheme or none, both clean in the
    /// same data file).
    pub(crate) fn tag(self) -> u8 {
        match self {
            SchemeKind::None => 1,
            SchemeKind::PerWorker => 2,
            SchemeKind::Aries => 3,
            SchemeKind::Silor => 4,
            SchemeKind::Aether => 5,
            SchemeKind::Command => 6,
        }
    }

    pub(crate) fn from_tag(tag: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.tag() == tag)
    }

    /// After a crash, must this scheme recover from its log before the
    /// database can be read?
    pub fn recovers_from_log(self) -> bool {
        match self {
            SchemeKind::None => false,
            SchemeKind::PerWorker
            | SchemeKind::Aries
            | SchemeKind::Aether
            | SchemeKind::Silor
            | SchemeKind::Command => true,
        }
    }

    /// Is a clean close of this scheme a data file that every other
    /// paged scheme reads as its own clean state? Then a cleanly closed
    /// database may be reopened under another such scheme. (`silor`'s
    /// and `command`'s clean closes write every page too, and remove
    /// their logs.)
    pub fn clean_state_is_the_data_file(self) -> bool {
        match self {
            SchemeKind::None
            | SchemeKind::PerWorker
            | SchemeKind::Aries
            | SchemeKind::Aether
            | SchemeKind::Silor
            | SchemeKind::Command => true,
        }
    }
}

impl std::fmt::Display for SchemeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a scheme is opened with: the database's files as the open found
/// them, before anything was written.
pub(crate) struct OpenContext<'a> {
    pub storage: &'a Arc<dyn Storage>,
    /// The data file (opened, not yet written).
    pub data_file: &'a Arc<dyn StorageFile>,
    pub dir: &'a Path,
    pub superblock: &'a Superblock,
    /// `checkpoint.waypoint`, if present.
    pub checkpoint: Option<&'a meta::Meta>,
    /// The log floor: every record at or below it is in the data file.
    pub floor: Gsn,
    pub recovery_threads: usize,
    /// The epoch this process's TIDs start at; older TIDs were written
    /// before the open.
    pub first_epoch: u64,
    /// The database's epoch clock, started at `first_epoch`; a scheme whose
    /// log holds later epochs raises it in `prepare`.
    pub epoch: &'a Arc<crate::txn::epoch::EpochClock>,
    /// The stored procedures the database is opened with (a command log
    /// names them).
    pub procedures: &'a crate::procedure::Procedures,
}

/// What a scheme being opened asks of the database once it is prepared.
pub(crate) struct Prepared {
    /// Whether the scheme's log is required until the next clean close
    /// (the superblock's `log_required`).
    pub log_required: bool,
    /// When the buffer pool may write dirty pages, from recovery on.
    pub page_writes: PageWritePolicy,
    /// When the superblock is marked unclean.
    pub unclean_mark: UncleanMark,
}

/// When an open marks the superblock unclean (`Superblock::unclean_mark`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UncleanMark {
    /// At open, after `prepare`: the scheme recovers from its log and
    /// needs the next open to know it must.
    AtOpen,
    /// The scheme's page-write gate writes it (synced) before the first
    /// page write: until then the data file is still its last clean
    /// close's, and a crash leaves a clean database. For a scheme without
    /// a log, whose data file is unrecoverable once written.
    BeforeFirstPageWrite,
}

/// A scheme being opened, after its checks (which only read) passed.
/// The database then writes in this order: [`Opening::prepare`] (and
/// installs its page-write policy in the pool), the superblock's unclean
/// mark, the double-write repair is already done, [`Opening::recover`].
pub(crate) trait Opening {
    /// Make durable what the scheme needs after an unclean stop, before
    /// the superblock marks the database unclean, and say whether the log
    /// is required and how pages may be written.
    fn prepare(&mut self, ctx: &OpenContext<'_>) -> Result<Prepared>;

    /// Recover into `pool` and start the scheme's services.
    fn recover(
        self: Box<Self>,
        ctx: &OpenContext<'_>,
        pool: &Arc<BufferPool>,
        repaired_torn_pages: usize,
    ) -> Result<Arc<dyn Scheme>>;
}

/// What a persistence scheme did, readable at any time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PersistenceStats {
    pub scheme: SchemeKind,
    /// The log: bytes appended, records, syncs, bytes on disk, commits
    /// (and, for the per-worker scheme, RFA's remote flushes). Zero
    /// without a log.
    pub log: WalStats,
    /// A central log's latch: acquisitions, contention, time waited. Zero
    /// for a scheme without one.
    pub log_latch: crate::central::LatchStats,
    /// A consolidation array's groups (`aether`): how many, their inserts,
    /// the largest. Zero for a scheme without one.
    pub consolidation: crate::central::ConsolidationStats,
    /// Checkpoints: increments, pages written, the log floor, pruning.
    pub checkpoint: CheckpointStats,
    /// Time transactions waited at begin for the checkpointer to bring the
    /// log under its limit.
    pub backpressure: std::time::Duration,
    /// The `silor` scheme's epochs, loggers, and recovery; zero under the
    /// others.
    pub silor: crate::silor::SilorStats,
    /// The `command` scheme's command log and replay; zero under the
    /// others.
    pub command: crate::command::CommandStats,
}

/// An open persistence scheme, as the database and its sessions use it.
pub trait Scheme: Send + Sync {
    fn kind(&self) -> SchemeKind;

    /// The log of session slot `slot` (the system slots log catalog
    /// changes).
    fn session_log(&self, slot: u16) -> Result<Box<dyn SessionLog>>;

    /// `Err(LogFull)` once the log's disk is full: writes are refused,
    /// reads go on.
    fn check_writable(&self) -> Result<()>;

    /// What recovery did when the database was opened; `None` for a
    /// scheme without a log.
    fn recovery_report(&self) -> Option<&RecoveryReport>;

    /// The open is done (the log replayed): start background services
    /// that read the database (`silor`'s checkpointer).
    fn start_services(&self, _db: &crate::db::Database) -> Result<()> {
        Ok(())
    }

    /// A close begins: stop background services (the checkpointer) before
    /// commits are quiesced.
    fn stop_services(&self);

    /// Clean close, once every dirty page is in the data file: can the
    /// scheme vouch that the data file has not changed since the open and
    /// its superblock still says clean? Then the close writes nothing
    /// more (no free list, no superblock), so a crash in it cannot cost
    /// the clean state. Only a scheme that defers the unclean mark
    /// (`UncleanMark::BeforeFirstPageWrite`) can.
    fn data_file_untouched(&self) -> bool {
        false
    }

    /// Clean close, before the first page is written: a scheme whose
    /// recovery builds on the data file as its last clean close left it
    /// (`silor`) notes durably that the data file is about to change.
    fn before_clean_close_writes(&self) -> Result<()> {
        Ok(())
    }

    /// Does recovery order the writes of one key by their TIDs alone (a
    /// value log replayed in no common order)? Then a commit's TID also
    /// exceeds every TID committed before under its keys' lock stripes,
    /// deleted records' included (`LockTable::with_tids`).
    fn orders_writes_by_tid(&self) -> bool {
        false
    }

    /// After the open's recovery: the secondary indexes recovery could not
    /// fill (created since the last clean close by a scheme that logs
    /// values: their first entries came from the extractor), rebuilt from
    /// their tables when the extractor is bound (`Database::open_index`).
    fn indexes_to_rebuild(&self) -> &[String] {
        &[]
    }

    /// The serial order a scheme that logs stored-procedure calls
    /// (`command`) runs them in: a call holds its partitions while it
    /// runs and logs, and writes outside a call are refused
    /// (`Error::ProcedureRequired`). `None` for every other scheme.
    fn command_order(&self) -> Option<&crate::procedure::SerialOrder> {
        None
    }

    /// After the open built the database: re-execute what the log holds
    /// beyond the base (a command log's calls). Until it returns, nothing
    /// else uses the database.
    fn replay_after_open(&self, _db: &crate::db::Database) -> Result<()> {
        Ok(())
    }

    /// Clean close, once every dirty page is in the data file: make the
    /// log durable, stop its writers, and return the log floor the
    /// superblock records (every record at or below it is in the pages).
    fn seal_for_clean_close(&self) -> Result<Gsn>;

    /// Clean close, after the superblock recorded it: remove the log.
    fn remove_log_after_clean_close(&self) -> Result<()>;

    /// The end of a close, clean or not: stop every thread. Errors are
    /// logged, not returned (nothing is left to do about them).
    fn shutdown(&self);

    fn stats(&self) -> PersistenceStats;

    /// The concrete scheme, for tests and tools that need its internals.
    fn as_any(&self) -> &dyn std::any::Any;
}
