//! The log manager of the per-worker WAL (seed 000 §2.4, §3.1, §3.2): a
//! log partition per session slot, opened on first use and continuing
//! where recovery found it ends, the partitions' GSN clocks, and the WAL
//! rule's gate for page writes.
//!
//! - `session`: a session's log ([`WalSessionLog`]): page records under
//!   the GSN protocol, rollbacks, recovery's undo;
//! - `commit`: the commit protocols ([`CommitProtocol`]), Remote Flush
//!   Avoidance, and the [`CommitTicket`] a commit waits on;
//! - `unresolved`: per session, the transactions recovery may still have
//!   to undo (the prune rule's oldest active transaction);
//! - `backpressure`: new transactions wait while the checkpointer lags
//!   behind the log;
//! - `files`: the partitions' segment files: pruning, synced positions,
//!   removal after a clean close;
//! - `stats`: the log's counters.
//!
//! The same manager runs a central log (seed 000 §4's ARIES baseline,
//! [`Partitioning::Central`]): every session slot maps to partition 0,
//! and a session reserves a GSN and appends its record under the log's
//! latch, so GSNs are the log's LSNs, in log order, and everything above
//! (the GSN protocol, the WAL rule, page-GSN redo, the checkpointer)
//! works unchanged. The per-slot mode pays one predictable branch for it.
//! The `aether` scheme adds a consolidation array to the central mode
//! (`crate::central::Consolidation`, docs/decisions/027).
//!
//! Invariants: no record gets a GSN at or below the log floor the manager
//! was opened with (recovery would ignore it); WAL rule (DESIGN.md
//! invariant 1): the gate returns from `ensure_durable(gsn)` only once
//! every partition is durable up to `gsn`; in central mode, records are
//! appended in GSN order (reserve and append under one latch).

mod backpressure;
mod commit;
mod files;
#[cfg(test)]
mod rollback_tests;
mod session;
mod stats;
#[cfg(test)]
mod tests;
mod unresolved;
mod view;

pub use commit::{CommitProtocol, CommitTicket};
pub use session::WalSessionLog;
pub use stats::{PartitionLogStats, WalStats};

use super::partition::Partition;
use crate::ids::{Gsn, LogPos};
use crate::logstore::stream::FullFlag;
use super::recovery::RecoveredPartition;
use crate::buffer::FlushGate;
use crate::central::{Consolidation, LogLatch};
use crate::persist::SchemeKind;
use crate::error::Result;
use crate::sync::StripedCounter;
use crate::io::Storage;
use parking_lot::RwLock;
use session::TxnState;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use unresolved::Unresolved;

/// How session slots map to log partitions.
#[derive(Debug, Clone, Default)]
pub enum Partitioning {
    /// A partition per session slot, its id the slot (seed 000).
    #[default]
    PerSlot,
    /// One partition, 0, for every slot; appends take the latch. Its
    /// segments carry `scheme`'s tag. With a consolidation array
    /// (`aether`), inserts combine into groups whose leader alone takes
    /// the latch, and records are filled in outside it.
    Central {
        scheme: SchemeKind,
        latch: Arc<LogLatch>,
        consolidation: Option<Arc<Consolidation>>,
    },
}

pub struct Wal {
    dir: PathBuf,
    storage: Arc<dyn Storage>,
    protocol: CommitProtocol,
    /// The scheme tag of the partitions' segments.
    scheme: SchemeKind,
    /// Set in central mode ([`Partitioning::Central`]).
    latch: Option<Arc<LogLatch>>,
    /// Set for a central log with a consolidation array (`aether`).
    consolidation: Option<Arc<Consolidation>>,
    /// Indexed by session slot.
    partitions: RwLock<Vec<Option<Arc<Partition>>>>,
    /// The open partitions, compactly: the slot-indexed table reaches slot
    /// 65535 (the system and recovery slots), far too long to scan on every
    /// commit (found by profiling: it took half the commit path's CPU).
    open: RwLock<Arc<Vec<Arc<Partition>>>>,
    /// Bumped (under `open`'s write lock) whenever `open` changes: a
    /// session's `view::PartitionsView` is stale once it differs.
    open_version: AtomicU64,
    /// No new record may get a GSN at or below this (the superblock's log
    /// floor): recovery would ignore it.
    min_clock: Gsn,
    segment_size: AtomicU64,
    /// `PerWorkerOptions::wal_preallocate`, for every partition.
    preallocate: AtomicBool,
    /// `PerWorkerOptions::wal_zero_fill`, for every partition.
    zero_fill: AtomicBool,
    /// `PerWorkerOptions::log_sync_interval` in microseconds, for every partition.
    sync_interval_us: AtomicU64,
    /// Where recovery found each partition's end and GSN clock.
    recovered: RwLock<Vec<RecoveredPartition>>,
    // Counted per session slot's stripe: every commit adds to them.
    commits: StripedCounter,
    remote_commits: StripedCounter,
    chained_commits: StripedCounter,
    /// Test-only: ignore remote dependencies (proves the crash tests catch
    /// a broken RFA check).
    #[cfg(feature = "testing")]
    broken_rfa: std::sync::atomic::AtomicBool,
    /// Test-only: a commit is acknowledged without waiting for its flush
    /// (proves the simulator catches an acknowledgement before the commit
    /// record is durable).
    #[cfg(feature = "testing")]
    broken_commit_ack: std::sync::atomic::AtomicBool,
    /// Test-only: reservations are released for writing before their fill
    /// (`Stream::set_broken_early_release_for_tests`), on every partition.
    #[cfg(feature = "testing")]
    broken_early_release: std::sync::atomic::AtomicBool,
    /// Per session slot, its transactions whose records recovery may still
    /// need to undo (the prune rule's "oldest active transaction").
    unresolved: parking_lot::Mutex<HashMap<u16, Arc<parking_lot::Mutex<VecDeque<Unresolved>>>>>,
    /// Bytes every partition moved to stage 2 since open.
    stage2: Arc<AtomicU64>,
    /// Stage 3: retired segments are moved here (deleted if unset).
    archive: RwLock<Option<PathBuf>>,
    /// Raised when a partition's write fails with `ENOSPC`: no more writes.
    full: Arc<FullFlag>,
    /// Back-pressure (set by the checkpointer): new transactions wait while
    /// more than `max_lag` bytes reached stage 2 after `checkpointed_through`,
    /// the stage-2 count the checkpointer has caught up with.
    checkpointed_through: AtomicU64,
    max_lag: AtomicU64,
    relief: (parking_lot::Mutex<()>, parking_lot::Condvar),
    backpressure_nanos: AtomicU64,
    /// The epoch this process's TIDs start at (every TID below it is from
    /// an earlier run, durable).
    first_epoch: AtomicU64,
}

impl std::fmt::Debug for Wal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Wal({})", self.dir.display())
    }
}

impl Wal {
    /// A log manager over `dir`. `recovered` lists, per partition found on
    /// disk: (id, end position, GSN clock, segments as (start, len, max GSN)).
    pub fn new(
        storage: Arc<dyn Storage>,
        dir: &Path,
        protocol: CommitProtocol,
        recovered: Vec<RecoveredPartition>,
        min_clock: Gsn,
    ) -> Result<Arc<Self>> {
        Self::with_partitioning(
            storage,
            dir,
            protocol,
            recovered,
            min_clock,
            Partitioning::PerSlot,
        )
    }

    /// [`Wal::new`] with the sessions' partitions mapped as `partitioning`
    /// says.
    pub fn with_partitioning(
        storage: Arc<dyn Storage>,
        dir: &Path,
        protocol: CommitProtocol,
        recovered: Vec<RecoveredPartition>,
        min_clock: Gsn,
        partitioning: Partitioning,
    ) -> Result<Arc<Self>> {
        let (scheme, latch, consolidation) = match partitioning {
            Partitioning::PerSlot => (SchemeKind::PerWorker, None, None),
            Partitioning::Central {
                scheme,
                latch,
                consolidation,
            } => (scheme, Some(latch), consolidation),
        };
        if !storage.exists(dir) {
            storage.create_dir_all(dir)?;
            if let Some(parent) = dir.parent() {
                storage.sync_dir(parent)?;
            }
        }
        Ok(Arc::new(Wal {
            dir: dir.to_path_buf(),
            storage,
            protocol,
            scheme,
            latch,
            consolidation,
            partitions: RwLock::new(Vec::new()),
            open: RwLock::new(Arc::new(Vec::new())),
            open_version: AtomicU64::new(0),
            min_clock,
            segment_size: AtomicU64::new(crate::logstore::stream::SEGMENT_SIZE),
            preallocate: AtomicBool::new(true),
            zero_fill: AtomicBool::new(true),
            sync_interval_us: AtomicU64::new(crate::logstore::stream::SYNC_INTERVAL.as_micros() as u64),
            recovered: RwLock::new(recovered),
            commits: StripedCounter::default(),
            remote_commits: StripedCounter::default(),
            chained_commits: StripedCounter::default(),
            #[cfg(feature = "testing")]
            broken_rfa: std::sync::atomic::AtomicBool::new(false),
            #[cfg(feature = "testing")]
            broken_commit_ack: std::sync::atomic::AtomicBool::new(false),
            #[cfg(feature = "testing")]
            broken_early_release: std::sync::atomic::AtomicBool::new(false),
            unresolved: parking_lot::Mutex::new(HashMap::new()),
            stage2: Arc::new(AtomicU64::new(0)),
            archive: RwLock::new(None),
            full: Arc::new(FullFlag::default()),
            checkpointed_through: AtomicU64::new(0),
            max_lag: AtomicU64::new(u64::MAX),
            relief: (parking_lot::Mutex::new(()), parking_lot::Condvar::new()),
            backpressure_nanos: AtomicU64::new(0),
            first_epoch: AtomicU64::new(0),
        }))
    }

    /// Keep retired segments in `dir` (stage 3's archive) instead of
    /// deleting them. Set before sessions open partitions.
    pub fn set_archive_dir(&self, dir: PathBuf) {
        for p in self.all().iter() {
            p.set_archive(dir.clone());
        }
        *self.archive.write() = Some(dir);
    }

    pub fn segment_size(&self) -> u64 {
        self.segment_size.load(Ordering::Relaxed)
    }

    /// Segment size for every partition (`PerWorkerOptions::wal_segment_bytes`).
    pub fn set_segment_size(&self, bytes: u64) {
        self.segment_size.store(bytes, Ordering::Relaxed);
        for p in self.all().iter() {
            p.set_segment_size(bytes);
        }
    }

    /// Segment preallocation for every partition (`PerWorkerOptions::wal_preallocate`).
    pub fn set_preallocate(&self, on: bool) {
        self.preallocate.store(on, Ordering::Relaxed);
        for p in self.all().iter() {
            p.set_preallocate(on);
        }
    }

    /// Zero-filled spares for every partition (`PerWorkerOptions::wal_zero_fill`).
    pub fn set_zero_fill(&self, on: bool) {
        self.zero_fill.store(on, Ordering::Relaxed);
        for p in self.all().iter() {
            p.set_zero_fill(on);
        }
    }

    /// Sync pacing for every partition (`PerWorkerOptions::log_sync_interval`).
    pub fn set_sync_interval(&self, interval: std::time::Duration) {
        let us = u64::try_from(interval.as_micros()).unwrap_or(u64::MAX);
        self.sync_interval_us.store(us, Ordering::Relaxed);
        for p in self.all().iter() {
            p.set_sync_interval(interval);
        }
    }

    pub fn protocol(&self) -> CommitProtocol {
        self.protocol
    }

    /// `Err(LogFull)` once a partition's write failed with `ENOSPC`: from
    /// then on nothing new may be logged (the database is read-only until
    /// it is reopened).
    #[inline]
    pub fn check_writable(&self) -> Result<()> {
        self.full.check()
    }

    /// Did a partition run out of disk space?
    pub fn is_full(&self) -> bool {
        self.full.is_full()
    }

    /// Ignore remote dependencies at commit: a broken RFA check, which the
    /// crash tests and the simulator must catch (`testing` feature only).
    #[cfg(feature = "testing")]
    pub fn set_broken_rfa_for_tests(&self, broken: bool) {
        self.broken_rfa.store(broken, Ordering::Relaxed);
    }

    /// Acknowledge a commit without waiting for the flush of its commit
    /// record: a broken commit rule, which the simulator must catch
    /// (`testing` feature only).
    #[cfg(feature = "testing")]
    pub fn set_broken_commit_ack_for_tests(&self, broken: bool) {
        self.broken_commit_ack.store(broken, Ordering::Relaxed);
    }

    /// Release a central log's reservations for writing before they are
    /// filled: a broken decoupled buffer fill, which the simulator must
    /// catch (`testing` feature only).
    #[cfg(feature = "testing")]
    pub fn set_broken_early_release_for_tests(&self, broken: bool) {
        self.broken_early_release.store(broken, Ordering::Relaxed);
        for p in self.all().iter() {
            p.set_broken_early_release_for_tests(broken);
        }
    }

    /// Whether the broken-commit-flush switch is on: a constant `false`
    /// without the `testing` feature.
    #[inline(always)]
    pub(super) fn broken_commit_ack(&self) -> bool {
        #[cfg(feature = "testing")]
        return self.broken_commit_ack.load(Ordering::Relaxed);
        #[cfg(not(feature = "testing"))]
        false
    }

    /// Whether the broken-RFA switch is on: a constant `false` without the
    /// `testing` feature, so the production commit path checks nothing.
    #[inline(always)]
    pub(super) fn broken_rfa(&self) -> bool {
        #[cfg(feature = "testing")]
        return self.broken_rfa.load(Ordering::Relaxed);
        #[cfg(not(feature = "testing"))]
        false
    }

    /// The scheme whose log this is (its segments' tag).
    pub fn scheme(&self) -> SchemeKind {
        self.scheme
    }

    /// The central log's latch; `None` for a partition per slot.
    pub fn latch(&self) -> Option<&Arc<LogLatch>> {
        self.latch.as_ref()
    }

    /// The central log's consolidation array (`aether`), if it has one.
    pub fn consolidation(&self) -> Option<&Arc<Consolidation>> {
        self.consolidation.as_ref()
    }

    /// The partition of session slot `slot`, opened on first use (in
    /// central mode, partition 0 for every slot).
    pub fn partition(&self, slot: u16) -> Result<Arc<Partition>> {
        let slot = if self.latch.is_some() { 0 } else { slot };
        if let Some(Some(p)) = self.partitions.read().get(slot as usize) {
            return Ok(Arc::clone(p));
        }
        let mut parts = self.partitions.write();
        if parts.len() <= slot as usize {
            parts.resize(slot as usize + 1, None);
        }
        if let Some(p) = &parts[slot as usize] {
            return Ok(Arc::clone(p));
        }
        let (end, clock, segments) = self
            .recovered
            .read()
            .iter()
            .find(|r| r.id == slot as u32)
            .map(|r| (r.end, r.clock, r.segments.clone()))
            .unwrap_or((LogPos::ZERO, self.max_clock_locked(&parts), Vec::new()));
        // A new partition's clock starts at the largest clock: its first
        // records then order after everything already logged.
        let clock = clock.max(self.max_clock_locked(&parts));
        let p = Partition::open_for(
            self.scheme,
            Arc::clone(&self.storage),
            &self.dir,
            slot as u32,
            end,
            clock,
            segments,
        )?;
        p.set_preallocate(self.preallocate.load(Ordering::Relaxed));
        p.set_zero_fill(self.zero_fill.load(Ordering::Relaxed));
        p.set_segment_size(self.segment_size.load(Ordering::Relaxed));
        p.set_sync_interval(std::time::Duration::from_micros(
            self.sync_interval_us.load(Ordering::Relaxed),
        ));
        p.set_stage2_counter(Arc::clone(&self.stage2));
        p.set_full_flag(Arc::clone(&self.full));
        #[cfg(feature = "testing")]
        p.set_broken_early_release_for_tests(self.broken_early_release.load(Ordering::Relaxed));
        if let Some(dir) = self.archive.read().as_ref() {
            p.set_archive(dir.clone());
        }
        parts[slot as usize] = Some(Arc::clone(&p));
        {
            // Copy on write: readers take a snapshot without copying it.
            let mut open = self.open.write();
            // Sorted by id: sessions' views look partitions up by it.
            let mut next = Vec::clone(&open);
            let at = next.partition_point(|q| q.id() < p.id());
            next.insert(at, Arc::clone(&p));
            *open = Arc::new(next);
            self.open_version.fetch_add(1, Ordering::Release);
        }
        Ok(p)
    }

    fn max_clock_locked(&self, parts: &[Option<Arc<Partition>>]) -> Gsn {
        let open = parts
            .iter()
            .flatten()
            .map(|p| p.clock())
            .max()
            .unwrap_or(Gsn::ZERO);
        let recovered = self
            .recovered
            .read()
            .iter()
            .map(|r| r.clock)
            .max()
            .unwrap_or(Gsn::ZERO);
        open.max(recovered).max(self.min_clock)
    }

    /// Set at open to the epoch the clock starts from.
    pub fn set_first_epoch(&self, epoch: u64) {
        self.first_epoch.store(epoch, Ordering::Release);
    }

    pub fn first_epoch(&self) -> u64 {
        self.first_epoch.load(Ordering::Acquire)
    }

    /// A snapshot of the open partitions (an `Arc` clone: no allocation on
    /// the commit path).
    fn all(&self) -> Arc<Vec<Arc<Partition>>> {
        Arc::clone(&self.open.read())
    }

    /// GSN_flushed of seed 000 §3.2: every record of every partition with a GSN at
    /// or below it is durable.
    pub fn flushed_gsn(&self) -> Gsn {
        Self::flushed_gsn_of(&self.all())
    }

    /// [`Wal::flushed_gsn`] over `parts`, every open partition (a
    /// session's view of them).
    pub(super) fn flushed_gsn_of(parts: &[Arc<Partition>]) -> Gsn {
        let global = parts.iter().map(|p| p.clock()).max().unwrap_or(Gsn::ZERO);
        parts
            .iter()
            .map(|p| p.flushed_gsn(global))
            .min()
            .unwrap_or(Gsn::MAX)
    }

    /// The checkpointer's GSN_min (seed 000 §3.4, Fig. 4): every record
    /// logged after this call has a larger GSN.
    pub fn checkpoint_gsn(&self) -> Gsn {
        // Raises the clocks of idle, fully durable partitions first.
        let _ = self.flushed_gsn();
        let min = self.all().iter().map(|p| p.clock()).min().unwrap_or(Gsn::ZERO);
        // While GSNs are reserved for records not yet appended, the clock
        // equals the first of them (`Partition::clock`).
        min.prev_or_zero().max(self.min_clock)
    }

    /// Make every partition durable up to its current end.
    pub fn flush_all(&self) -> Result<()> {
        let targets: Vec<_> = self
            .all()
            .iter()
            .map(|p| (p.appended(), Arc::clone(p)))
            .collect();
        for (pos, p) in &targets {
            p.request_flush(*pos);
        }
        for (pos, p) in &targets {
            p.wait_durable(*pos)?;
        }
        Ok(())
    }

    /// The largest GSN any partition has handed out: after a clean close
    /// made every page durable, the log floor.
    pub fn max_clock(&self) -> Gsn {
        self.max_clock_locked(&self.partitions.read())
    }

    pub fn shutdown(&self) -> Result<()> {
        let mut result = Ok(());
        for p in self.all().iter() {
            if let Err(e) = p.shutdown() {
                result = Err(e);
            }
        }
        result
    }

    /// The session logger for slot `slot`.
    pub fn session_log(self: &Arc<Self>, slot: u16) -> Result<WalSessionLog> {
        let partition = self.partition(slot)?;
        Ok(WalSessionLog {
            wal: Arc::clone(self),
            latch: self.latch.clone(),
            consolidation: self.consolidation.clone(),
            unresolved: self.unresolved_queue(slot),
            partition,
            slot,
            state: RefCell::new(TxnState::default()),
            txn_seq: 0,
            pending: None,
            previous: None,
            commit_waits: false,
            unresolved_remote: None,
            view: RefCell::new(view::PartitionsView::of(self)),
        })
    }
}

/// WAL rule (invariant 1): before a page copy with GSN `gsn` is written,
/// every partition is made durable up to that GSN.
impl FlushGate for Wal {
    fn ensure_durable(&self, gsn: Gsn) -> Result<()> {
        for p in self.all().iter() {
            if p.flushed_gsn(Gsn::ZERO) < gsn {
                let end = p.appended();
                p.wait_durable(end)?;
            }
        }
        Ok(())
    }

    fn is_durable_at(&self, partition: u32, end: LogPos) -> bool {
        self.all()
            .iter()
            .find(|p| p.id() == partition)
            .is_some_and(|p| p.durable() >= end)
    }

    /// Once a partition is full, its durable GSN caps what can ever be
    /// vouched for in this process (nothing is retried): every page whose
    /// GSN is above stays in memory, dirty.
    fn write_limit(&self) -> Gsn {
        if self.is_full() {
            self.flushed_gsn()
        } else {
            Gsn::MAX
        }
    }
}
