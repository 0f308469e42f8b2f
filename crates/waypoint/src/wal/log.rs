//! The log manager: one partition per session slot, the GSN protocol,
//! Remote Flush Avoidance and the commit protocols (seed 000 §2.4, §3.1,
//! §3.2).
//!
//! GSN protocol: on every page modification the transaction's GSN becomes
//! max(txn GSN, page GSN) + 1; that is the record's GSN and the page's new
//! GSN. Records within a partition are therefore in GSN order.
//!
//! Dependencies a commit must see durable before it is acknowledged:
//! - *physical*: earlier records of other partitions on pages it modified.
//!   RFA (seed 000 §3.2): if a page's GSN is above GSN_flushed (taken at transaction
//!   start) and its last writer is another partition, set needsRemoteFlush;
//! - *read*: records it read or overwrote that another session installed
//!   but whose commit record may not be durable yet (locks are released
//!   before durability). A record's TID names its writer's slot, so the
//!   check is exact: a TID above that partition's durable commit TID sets
//!   needsRemoteFlush. (The paper's page GSN check alone misses this: a
//!   page record can be durable while its transaction's commit is not.)
//!
//! A remote-dependent commit captures every partition's appended position
//! after its own commit record and waits for all of them; its commit record
//! carries that vector, so recovery can refuse it if a dependency did not
//! survive a crash (ARCHITECTURE.md, "the gap rule").
//!
//! Invariant 2 (commit rule): `wait_durable` returns only when the commit
//! record and every record it depends on are durable, per the chosen
//! [`CommitProtocol`] (for `Async` it returns at once and says so).

use super::partition::Partition;
use super::record::{self, RecordBody, RecordHeader, RecordKind};
use super::recovery::RecoveredPartition;
use crate::btree::{PageLog, PageOp, RootId};
use crate::buffer::page;
use crate::buffer::{ExclusiveGuard, FlushGate};
use crate::error::Result;
use crate::io::Storage;
use crate::logstore::stream::FullFlag;
use crate::persist::{CommitView, SessionLog};
use crate::txn::epoch::{epoch_of, SLOT_BITS};
use parking_lot::RwLock;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// How a commit becomes durable before it is acknowledged.
///
/// What survives: a *process crash* (kill -9) loses nothing the kernel
/// accepted, a *power loss* loses everything not `fdatasync`ed.
///
/// Under every protocol but `Async`, a commit whose log write or sync fails
/// is not acknowledged: it fails with [`crate::Error::Poisoned`] (EIO, a
/// failed `fdatasync`: never retried) or, if the log's disk is full
/// (`ENOSPC` on a write), with [`crate::Error::LogFull`], after which the
/// database refuses writes but keeps serving reads until it is reopened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CommitProtocol {
    /// Flush every partition up to this commit before acknowledging it.
    /// Survives process crash and power loss.
    FlushAll,
    /// Remote Flush Avoidance: flush only the own partition unless the
    /// transaction depends on another partition's unflushed records.
    /// Survives process crash and power loss.
    Rfa,
    /// Passive group commit: flush the own partition, then wait until every
    /// partition is durable up to this commit (their writers flush for their
    /// own commits). Survives process crash and power loss.
    Group,
    /// Group commit with RFA: wait for the own partition only when no
    /// remote dependency exists. Survives process crash and power loss. The
    /// default: these machines have no persistent memory.
    #[default]
    RfaGroup,
    /// Acknowledge at once; the writer flushes in the background. A process
    /// crash loses nothing the kernel accepted; a power loss loses the last
    /// commits (never partially).
    Async,
}

impl CommitProtocol {
    pub fn name(self) -> &'static str {
        match self {
            CommitProtocol::FlushAll => "flush-all",
            CommitProtocol::Rfa => "rfa",
            CommitProtocol::Group => "group",
            CommitProtocol::RfaGroup => "rfa-group",
            CommitProtocol::Async => "async",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            CommitProtocol::FlushAll,
            CommitProtocol::Rfa,
            CommitProtocol::Group,
            CommitProtocol::RfaGroup,
            CommitProtocol::Async,
        ]
        .into_iter()
        .find(|p| p.name() == s)
    }
}

/// Counters of the log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WalStats {
    pub partitions: usize,
    pub appended_bytes: u64,
    pub records: u64,
    pub syncs: u64,
    pub disk_bytes: u64,
    /// Segments started from a recycled segment file (no zeros written),
    /// and from a zero-filled spare.
    pub segments_recycled: u64,
    pub segments_zero_filled: u64,
    pub commits: u64,
    /// Commits that needed other partitions flushed: they touched a page or
    /// read a commit another partition had not made durable.
    pub remote_flush_commits: u64,
    /// Commits that needed nothing remote themselves but waited for an
    /// earlier pipelined commit of their session's remote flush (to the
    /// positions that commit recorded, not further).
    pub chained_commits: u64,
    /// The commit protocol the counts were taken under.
    pub protocol: CommitProtocol,
    /// Per log partition (= session slot): its own counters.
    pub per_partition: Vec<PartitionLogStats>,
}

/// The counters of one log partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionLogStats {
    pub partition: u32,
    pub appended_bytes: u64,
    pub durable_bytes: u64,
    pub disk_bytes: u64,
    pub records: u64,
    pub syncs: u64,
    /// Writes and syncs a blocking committer did itself
    /// (`Partition::sync_to`), not the partition's writer thread.
    pub committer_syncs: u64,
}

impl WalStats {
    /// Share of commits that had to wait for other partitions (RFA).
    pub fn remote_flush_fraction(&self) -> f64 {
        if self.commits == 0 {
            0.0
        } else {
            self.remote_flush_commits as f64 / self.commits as f64
        }
    }
}

pub struct Wal {
    dir: PathBuf,
    storage: Arc<dyn Storage>,
    protocol: CommitProtocol,
    /// Indexed by session slot.
    partitions: RwLock<Vec<Option<Arc<Partition>>>>,
    /// The open partitions, compactly: the slot-indexed table reaches slot
    /// 65535 (the system and recovery slots), far too long to scan on every
    /// commit (found by profiling: it took half the commit path's CPU).
    open: RwLock<Arc<Vec<Arc<Partition>>>>,
    /// No new record may get a GSN at or below this (the superblock's log
    /// floor): recovery would ignore it.
    min_clock: u64,
    segment_size: AtomicU64,
    /// `PerWorkerOptions::wal_preallocate`, for every partition.
    preallocate: AtomicBool,
    /// `PerWorkerOptions::wal_zero_fill`, for every partition.
    zero_fill: AtomicBool,
    /// `PerWorkerOptions::log_sync_interval` in microseconds, for every partition.
    sync_interval_us: AtomicU64,
    /// Where recovery found each partition's end and GSN clock.
    recovered: RwLock<Vec<RecoveredPartition>>,
    commits: AtomicU64,
    remote_commits: AtomicU64,
    chained_commits: AtomicU64,
    /// Test-only: ignore remote dependencies (proves the crash tests catch
    /// a broken RFA check).
    broken_rfa: std::sync::atomic::AtomicBool,
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

/// A transaction that logged changes and may still become a loser: until
/// its commit is durable with everything it depends on (its ticket), or its
/// rollback has ended, recovery may need its records to undo it.
struct Unresolved {
    first_gsn: u64,
    ticket: Option<CommitTicket>,
}

/// A session trims its own queue of unresolved transactions once it is this
/// long (see `WalSessionLog::log_pages`).
const UNRESOLVED_TRIM_AT: usize = 1024;

/// Drop the entries at the front of a session's queue whose commits are
/// durable: recovery can no longer need their records to undo them. The
/// queue is in begin order, so the front is the oldest.
fn drop_resolved(queue: &mut VecDeque<Unresolved>) {
    while queue
        .front()
        .is_some_and(|u| u.ticket.as_ref().is_some_and(|t| t.is_durable()))
    {
        queue.pop_front();
    }
}

/// The longest a commit waits for the checkpointer to bring the log under
/// its limit before it goes on regardless (a limit the dirty data cannot
/// follow must slow commits, not stop them).
const BACKPRESSURE_WAIT_LIMIT: std::time::Duration = std::time::Duration::from_secs(1);

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
        min_clock: u64,
    ) -> Result<Arc<Self>> {
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
            partitions: RwLock::new(Vec::new()),
            open: RwLock::new(Arc::new(Vec::new())),
            min_clock,
            segment_size: AtomicU64::new(crate::logstore::stream::SEGMENT_SIZE),
            preallocate: AtomicBool::new(true),
            zero_fill: AtomicBool::new(true),
            sync_interval_us: AtomicU64::new(
                crate::logstore::stream::SYNC_INTERVAL.as_micros() as u64
            ),
            recovered: RwLock::new(recovered),
            commits: AtomicU64::new(0),
            remote_commits: AtomicU64::new(0),
            chained_commits: AtomicU64::new(0),
            broken_rfa: std::sync::atomic::AtomicBool::new(false),
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

    #[doc(hidden)]
    pub fn set_broken_rfa_for_tests(&self, broken: bool) {
        self.broken_rfa.store(broken, Ordering::Relaxed);
    }

    /// The partition of session slot `slot`, opened on first use.
    pub fn partition(&self, slot: u16) -> Result<Arc<Partition>> {
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
            .unwrap_or((0, self.max_clock_locked(&parts), Vec::new()));
        // A new partition's clock starts at the largest clock: its first
        // records then order after everything already logged.
        let clock = clock.max(self.max_clock_locked(&parts));
        let p = Partition::open(
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
        if let Some(dir) = self.archive.read().as_ref() {
            p.set_archive(dir.clone());
        }
        parts[slot as usize] = Some(Arc::clone(&p));
        {
            // Copy on write: readers take a snapshot without copying it.
            let mut open = self.open.write();
            let mut next = Vec::clone(&open);
            next.push(Arc::clone(&p));
            *open = Arc::new(next);
        }
        Ok(p)
    }

    fn max_clock_locked(&self, parts: &[Option<Arc<Partition>>]) -> u64 {
        let open = parts.iter().flatten().map(|p| p.clock()).max().unwrap_or(0);
        let recovered = self
            .recovered
            .read()
            .iter()
            .map(|r| r.clock)
            .max()
            .unwrap_or(0);
        open.max(recovered).max(self.min_clock)
    }

    /// A snapshot of the open partitions (an `Arc` clone: no allocation on
    /// the commit path).
    /// Set at open to the epoch the clock starts from.
    pub fn set_first_epoch(&self, epoch: u64) {
        self.first_epoch.store(epoch, Ordering::Release);
    }

    pub fn first_epoch(&self) -> u64 {
        self.first_epoch.load(Ordering::Acquire)
    }

    fn all(&self) -> Arc<Vec<Arc<Partition>>> {
        Arc::clone(&self.open.read())
    }

    /// GSN_flushed of seed 000 §3.2: every record of every partition with a GSN at
    /// or below it is durable.
    pub fn flushed_gsn(&self) -> u64 {
        let parts = self.all();
        let global = parts.iter().map(|p| p.clock()).max().unwrap_or(0);
        parts
            .iter()
            .map(|p| p.flushed_gsn(global))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Open every partition recovery found (a session may not have reopened
    /// it yet), so pruning and the disk-size figures cover all of them.
    pub fn open_recovered(&self) -> Result<()> {
        let ids: Vec<u32> = self.recovered.read().iter().map(|r| r.id).collect();
        for id in ids {
            self.partition(u16::try_from(id).expect("partition ids are session slots"))?;
        }
        Ok(())
    }

    /// The checkpointer's GSN_min (seed 000 §3.4, Fig. 4): every record
    /// logged after this call has a larger GSN.
    pub fn checkpoint_gsn(&self) -> u64 {
        // Raises the clocks of idle, fully durable partitions first.
        let _ = self.flushed_gsn();
        let min = self.all().iter().map(|p| p.clock()).min().unwrap_or(0);
        // While GSNs are reserved for records not yet appended, the clock
        // equals the first of them (`Partition::clock`).
        min.saturating_sub(1).max(self.min_clock)
    }

    /// The smallest first GSN of a transaction recovery might still have to
    /// undo, or `u64::MAX` if there is none.
    pub fn oldest_unresolved_gsn(&self) -> u64 {
        let sessions: Vec<_> = self.unresolved.lock().values().cloned().collect();
        let mut oldest = u64::MAX;
        for queue in sessions {
            let mut q = queue.lock();
            drop_resolved(&mut q);
            if let Some(u) = q.front() {
                oldest = oldest.min(u.first_gsn);
            }
        }
        oldest
    }

    fn unresolved_queue(&self, slot: u16) -> Arc<parking_lot::Mutex<VecDeque<Unresolved>>> {
        Arc::clone(self.unresolved.lock().entry(slot).or_default())
    }

    /// Delete, in every partition, the segments whose records all have a
    /// GSN below `gsn` (never a partition's newest). Returns bytes removed.
    pub fn prune_below(&self, gsn: u64) -> Result<u64> {
        let mut removed = 0;
        for p in self.all().iter() {
            removed += p.prune_below(gsn)?;
        }
        Ok(removed)
    }

    /// Per partition, the stream position up to which its log is durable
    /// in files whose names are durable too
    /// ([`crate::logstore::stream::Stream::synced_position`]; partitions
    /// without such files are left out), in partition order: what the
    /// checkpoint metadata records as synced.
    pub fn synced_positions(&self) -> Vec<(u32, u64)> {
        let mut synced: Vec<(u32, u64)> = self
            .all()
            .iter()
            .filter_map(|p| Some((p.id(), p.synced_position()?)))
            .collect();
        synced.sort_unstable();
        synced
    }

    /// Bytes of log in segment files now.
    pub fn disk_bytes(&self) -> u64 {
        self.all().iter().map(|p| p.disk_bytes()).sum()
    }

    /// Log bytes moved to stage 2 since open (all partitions).
    pub fn stage2_bytes(&self) -> u64 {
        self.stage2.load(Ordering::Acquire)
    }

    /// Back-pressure: from now on new transactions wait while more than
    /// `max_lag` bytes reached stage 2 past what the checkpointer reported
    /// through [`Wal::checkpointed_through`]. `u64::MAX` switches it off.
    pub fn set_max_lag(&self, max_lag: u64) {
        self.max_lag.store(max_lag, Ordering::Release);
        self.checkpointed_through(self.stage2_bytes());
    }

    /// The checkpointer has caught up with `stage2` bytes of log.
    pub fn checkpointed_through(&self, stage2: u64) {
        self.checkpointed_through
            .fetch_max(stage2, Ordering::AcqRel);
        let _g = self.relief.0.lock();
        self.relief.1.notify_all();
    }

    fn over_limit(&self) -> bool {
        let lag = self
            .stage2_bytes()
            .saturating_sub(self.checkpointed_through.load(Ordering::Acquire));
        lag > self.max_lag.load(Ordering::Acquire)
    }

    /// Total time commits spent waiting for the log to fall under its limit.
    pub fn backpressure_time(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.backpressure_nanos.load(Ordering::Relaxed))
    }

    /// Wait while the checkpointer reports the log over its limit (bounded).
    fn wait_under_limit(&self) {
        if !self.over_limit() {
            return;
        }
        let start = std::time::Instant::now();
        let deadline = start + BACKPRESSURE_WAIT_LIMIT;
        let mut g = self.relief.0.lock();
        while self.over_limit() {
            if self.relief.1.wait_until(&mut g, deadline).timed_out() {
                break;
            }
        }
        self.backpressure_nanos
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
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

    /// Remove every segment but each partition's newest (after a clean
    /// close made every page durable, no record is needed for recovery).
    pub fn prune_all(&self) -> Result<u64> {
        let mut removed = 0;
        for p in self.all().iter() {
            removed += p.prune_below(u64::MAX)?;
        }
        Ok(removed)
    }

    /// The largest GSN any partition has handed out: after a clean close
    /// made every page durable, the log floor.
    pub fn max_clock(&self) -> u64 {
        self.max_clock_locked(&self.partitions.read())
    }

    /// Delete every segment (after `shutdown`, once the superblock records
    /// a log floor covering them: a crash half-way through the deletions
    /// leaves segments recovery ignores).
    pub fn remove_all_segments(&self) -> Result<()> {
        for p in self.all().iter() {
            p.remove_all_segments()?;
        }
        // Partitions recovered but not reopened by any session in this
        // process still have their segments on disk. Oldest first, each
        // deletion synced before the next, as a stream's retirement
        // (`logstore::stream`) does: a crash keeps any subset of unsynced
        // directory operations, and a deleted middle segment would leave a
        // gap that recovery refuses as a lost segment.
        let archive = self.archive.read().clone();
        for dir in self.storage.list_dir(&self.dir)? {
            let mut segments: Vec<(u64, PathBuf)> = Vec::new();
            let mut spares = Vec::new();
            for file in self.storage.list_dir(&dir)? {
                if let Some(start) = crate::logstore::segment::parse_segment_name(&file) {
                    segments.push((start, file));
                } else if crate::logstore::spare::is_spare(&file) {
                    spares.push(file);
                }
            }
            segments.sort_unstable_by_key(|(start, _)| *start);
            for (_, file) in segments {
                crate::logstore::segment::retire(self.storage.as_ref(), &file, archive.as_deref())?;
                self.storage.sync_dir(&dir)?;
            }
            for file in &spares {
                self.storage.remove(file)?;
            }
            if !spares.is_empty() {
                self.storage.sync_dir(&dir)?;
            }
        }
        Ok(())
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

    pub fn stats(&self) -> WalStats {
        let parts = self.all();
        let mut s = WalStats {
            partitions: parts.len(),
            commits: self.commits.load(Ordering::Relaxed),
            remote_flush_commits: self.remote_commits.load(Ordering::Relaxed),
            chained_commits: self.chained_commits.load(Ordering::Relaxed),
            protocol: self.protocol,
            ..Default::default()
        };
        for p in parts.iter() {
            let ps = p.stats();
            let disk = p.disk_bytes();
            s.appended_bytes += ps.appended_bytes;
            s.records += ps.records;
            s.syncs += ps.syncs;
            s.disk_bytes += disk;
            s.segments_recycled += ps.segments_recycled;
            s.segments_zero_filled += ps.segments_zero_filled;
            s.per_partition.push(PartitionLogStats {
                partition: p.id(),
                appended_bytes: ps.appended_bytes,
                durable_bytes: ps.durable_bytes,
                disk_bytes: disk,
                records: ps.records,
                syncs: ps.syncs,
                committer_syncs: ps.committer_syncs,
            });
        }
        s
    }

    /// The session logger for slot `slot`.
    pub fn session_log(self: &Arc<Self>, slot: u16) -> Result<WalSessionLog> {
        let partition = self.partition(slot)?;
        Ok(WalSessionLog {
            wal: Arc::clone(self),
            unresolved: self.unresolved_queue(slot),
            partition,
            slot,
            state: RefCell::new(TxnState::default()),
            txn_seq: 0,
            pending: None,
            commit_waits: false,
            unresolved_remote: None,
        })
    }
}

/// WAL rule (invariant 1): before a page copy with GSN `gsn` is written,
/// every partition is made durable up to that GSN.
impl FlushGate for Wal {
    fn ensure_durable(&self, gsn: u64) -> Result<()> {
        for p in self.all().iter() {
            if p.flushed_gsn(0) < gsn {
                let end = p.appended();
                p.wait_durable(end)?;
            }
        }
        Ok(())
    }

    fn is_durable_at(&self, partition: u32, end: u64) -> bool {
        self.all()
            .iter()
            .find(|p| p.id() == partition)
            .is_some_and(|p| p.durable() >= end)
    }

    /// Once a partition is full, its durable GSN caps what can ever be
    /// vouched for in this process (nothing is retried): every page whose
    /// GSN is above stays in memory, dirty.
    fn write_limit(&self) -> u64 {
        if self.is_full() {
            self.flushed_gsn()
        } else {
            u64::MAX
        }
    }
}

#[derive(Default)]
struct TxnState {
    txn: u64,
    /// Records are compensation records (a rollback in progress).
    compensating: bool,
    gsn: u64,
    flushed_at_start: u64,
    needs_remote: bool,
    wrote: bool,
    buf: Vec<u8>,
}

/// What a commit still has to wait for before it is acknowledged.
#[derive(Debug, Clone)]
pub struct CommitTicket {
    targets: Vec<(Arc<Partition>, u64)>,
    /// A remote-dependent commit's TID, published as durable after the
    /// wait (its own partition alone does not make it durable).
    remote_tid: Option<u64>,
    /// A blocking commit: the waiter syncs its own partition (the first
    /// target) itself (`Partition::sync_to`) rather than through the writer.
    sync_own: bool,
}

impl crate::persist::DurableWait for CommitTicket {
    fn is_durable(&self) -> bool {
        CommitTicket::is_durable(self)
    }
    fn wait(&self) -> Result<()> {
        CommitTicket::wait(self)
    }
}

impl CommitTicket {
    pub fn is_durable(&self) -> bool {
        self.targets.iter().all(|(p, pos)| p.durable() >= *pos)
    }

    pub fn wait(&self) -> Result<()> {
        for (i, (p, pos)) in self.targets.iter().enumerate() {
            if i == 0 && self.sync_own {
                p.sync_to(*pos)?;
            } else {
                p.wait_durable(*pos)?;
            }
        }
        if let (Some(tid), Some((own, _))) = (self.remote_tid, self.targets.first()) {
            own.mark_commit_durable(tid);
        }
        Ok(())
    }
}

/// The log hooks of one session: a [`PageLog`] that appends records to the
/// session's partition, and the commit protocol.
pub struct WalSessionLog {
    wal: Arc<Wal>,
    /// This session's entries in `Wal::unresolved`.
    unresolved: Arc<parking_lot::Mutex<VecDeque<Unresolved>>>,
    partition: Arc<Partition>,
    slot: u16,
    state: RefCell<TxnState>,
    txn_seq: u64,
    pending: Option<CommitTicket>,
    /// The coming commit's caller waits for it at once
    /// (`SessionLog::set_commit_waits`).
    commit_waits: bool,
    /// The session's last remote-dependent commit, while it may not be
    /// durable: a pipelined successor depends on it (same partition, but its
    /// remote dependencies are not covered by the own flush).
    unresolved_remote: Option<CommitTicket>,
}

impl WalSessionLog {
    fn append(
        &self,
        st: &mut TxnState,
        header: &RecordHeader,
        body: &RecordBody<'_>,
    ) -> Result<u64> {
        st.buf.clear();
        record::encode(header, body, &mut st.buf);
        self.partition.append(&st.buf, header.gsn)
    }

    /// Did this transaction read or overwrite a record whose commit (by
    /// another session) may not be durable yet?
    fn any_remote_unflushed(&self, observed: &[u64]) -> bool {
        let parts = self.wal.partitions.read();
        for &tid in observed {
            let writer = (tid & ((1 << SLOT_BITS) - 1)) as u16;
            // A TID of an epoch before this process started was made
            // durable (and recovered) before it; its slot may belong to
            // another session now.
            if writer == self.slot || tid == 0 || epoch_of(tid) < self.wal.first_epoch() {
                continue;
            }
            // No partition: written before this process started, durable.
            if let Some(Some(p)) = parts.get(writer as usize) {
                if p.durable_commit_tid() < tid {
                    return true;
                }
            }
        }
        false
    }

    /// Header of a record without a page (commit, end).
    fn pageless_header(&self, gsn: u64, txn: u64) -> RecordHeader {
        RecordHeader {
            gsn,
            txn,
            watermark: self.partition.durable(),
            ..RecordHeader::default()
        }
    }

    /// Append the end record of `txn`: its rollback is complete.
    fn append_end(&self, txn: u64) -> Result<u64> {
        let mut st = self.state.borrow_mut();
        let gsn = self.partition.reserve_gsn(st.gsn);
        st.gsn = gsn;
        let header = self.pageless_header(gsn, txn);
        self.append(&mut st, &header, &RecordBody::End)
    }

    /// The ticket of the last commit (for pipelined commits).
    pub fn take_ticket(&mut self) -> Option<CommitTicket> {
        self.pending.take()
    }
}

impl PageLog for WalSessionLog {
    fn logged(&self, tree: RootId, page: &mut ExclusiveGuard<'_>, op: PageOp<'_>) -> Result<()> {
        debug_assert!(
            !matches!(
                op,
                PageOp::Image | PageOp::Split { .. } | PageOp::Separator { .. }
            ),
            "structural ops are logged as structure modifications"
        );
        self.log_pages(tree, &mut [page], &[op])
    }

    fn logged_smo(
        &self,
        tree: RootId,
        pages: &mut [&mut ExclusiveGuard<'_>],
        ops: &[PageOp<'_>],
    ) -> Result<()> {
        self.log_pages(tree, pages, ops)
    }
}

impl WalSessionLog {
    #[cfg(test)]
    fn take_pending_ticket(&mut self) -> Option<CommitTicket> {
        self.pending.take()
    }

    /// Log `ops[i]` on `pages[i]` (one page, or the pages of one structure
    /// modification) and stamp the GSNs into the pages.
    fn log_pages(
        &self,
        tree: RootId,
        pages: &mut [&mut ExclusiveGuard<'_>],
        ops: &[PageOp<'_>],
    ) -> Result<()> {
        assert!(!pages.is_empty(), "a log record needs a page");
        assert_eq!(pages.len(), ops.len(), "one op per page");
        let mut st = self.state.borrow_mut();
        if !st.wrote {
            // GSN_flushed is needed only by transactions that write; any
            // snapshot of it is valid, so take it at the first write rather
            // than making every (read-only) transaction pay for it.
            st.flushed_at_start = self.wal.flushed_gsn();
        }
        let mut floor = st.gsn;
        for page in pages.iter() {
            let prev = page::page_gsn(page.data());
            let writer = page.last_writer();
            if prev > st.flushed_at_start
                && writer != self.slot as u32
                && writer != crate::buffer::WRITER_READ_FROM_DISK
            {
                st.needs_remote = true;
            }
            floor = floor.max(prev);
        }
        // Every record of a group gets a GSN above every page's previous
        // GSN: a copy of any page of the group reaching disk then implies
        // (WAL rule) that every predecessor on every page of the group was
        // durable, so recovery never finds a group half on disk and half
        // beyond a gap.
        let count = pages.len() as u64;
        let first = self.partition.reserve_gsns(floor, count);
        if !st.wrote {
            let mut queue = self.unresolved.lock();
            // The checkpointer's scan drops resolved entries; without
            // checkpoints nothing did, and the queue kept a ticket per
            // transaction for good (a leak of ~20 MB/s in YCSB-A). A long
            // queue is trimmed here; the bound keeps the common path free
            // of the scan.
            if queue.len() >= UNRESOLVED_TRIM_AT {
                drop_resolved(&mut queue);
            }
            queue.push_back(Unresolved {
                first_gsn: first,
                ticket: None,
            });
        }
        let last = first + count - 1;
        st.gsn = last;
        st.wrote = true;
        let tree = u32::try_from(tree).expect("page ids are below 2^32");
        let watermark = self.partition.durable();
        let mut buf = std::mem::take(&mut st.buf);
        buf.clear();
        for (i, (page, op)) in pages.iter().zip(ops).enumerate() {
            let data = page.data();
            let body = RecordBody::from_page_op(*op, data);
            let header = RecordHeader {
                gsn: first + i as u64,
                txn: st.txn,
                page: page.page_id(),
                prev_gsn: page::page_gsn(data),
                compensation: st.compensating,
                smo_more: body.kind().is_structural() && i + 1 < pages.len(),
                page_kind: if body.kind() == RecordKind::Image {
                    data[6]
                } else {
                    0
                },
                tree,
                watermark,
            };
            record::encode(&header, &body, &mut buf);
        }
        let appended = self.partition.append_group(&buf, count, last);
        st.buf = buf;
        // Stamped even when the append failed: the partition is then poisoned
        // or full and never durable up to these GSNs, so the WAL rule keeps
        // the unlogged change from ever reaching the data file.
        let end = *appended.as_ref().unwrap_or(&u64::MAX);
        for (i, page) in pages.iter_mut().enumerate() {
            page::set_page_gsn(page.data_mut(), first + i as u64);
            page.set_last_writer(self.slot as u32, end);
        }
        match appended {
            Ok(_) => Ok(()),
            // The log's disk is full: a rollback still completes in memory,
            // so readers see the transaction undone. Its compensation
            // records are not logged, and need not be: the transaction has
            // no commit record that could become durable (or one that can
            // no longer), so recovery undoes it from its durable records,
            // and the pages changed here carry GSNs above everything the
            // full partition made durable, so the WAL rule keeps them out
            // of the data file until the reopen (ARCHITECTURE.md, "A full
            // log disk").
            Err(e) if e.is_log_full() && st.compensating => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl SessionLog for WalSessionLog {
    fn page_log(&self) -> &dyn PageLog {
        self
    }

    fn on_begin(&mut self) {
        self.wal.wait_under_limit();
        self.txn_seq += 1;
        let mut st = self.state.borrow_mut();
        // Unique across restarts too: the partition's end position grows
        // with every transaction that logs anything, and one that logged
        // nothing leaves no record to confuse.
        st.txn = ((self.slot as u64) << 48) | (self.partition.appended() & ((1 << 48) - 1));
        st.compensating = false;
        st.gsn = st.gsn.max(self.partition.clock());
        st.needs_remote = false;
        st.wrote = false;
    }

    fn on_commit(&mut self, commit: &CommitView<'_>) -> Result<()> {
        let tid = commit.tid();
        let observed = commit.depends_on();
        let mut st = self.state.borrow_mut();
        if let Err(e) = self.partition.check_healthy() {
            // Read-only on a stopped partition: this session's own
            // commits that are not durable now never will be, and a
            // read of one must not be acknowledged.
            let own = self.partition.durable_commit_tid();
            if !st.wrote
                && observed
                    .iter()
                    .any(|&t| t != 0 && (t & ((1 << SLOT_BITS) - 1)) as u16 == self.slot && t > own)
            {
                return Err(e);
            }
        }
        // A pipelined predecessor that waits for other partitions makes this
        // commit wait for them too (found in review: otherwise an own-only
        // flush acknowledged a successor whose predecessor was then undone).
        // It waits for the positions the predecessor recorded, no further:
        // taking the other partitions' current ends instead made every
        // successor remote in turn, so one remote commit with commits in
        // flight kept the whole session remote for good.
        let mut chained: Option<CommitTicket> = None;
        if let Some(prev) = &self.unresolved_remote {
            if prev.is_durable() {
                if let (Some(t), Some((own, _))) = (prev.remote_tid, prev.targets.first()) {
                    own.mark_commit_durable(t);
                }
                self.unresolved_remote = None;
            } else {
                chained = Some(prev.clone());
            }
        }
        if !self.wal.broken_rfa.load(Ordering::Relaxed)
            && !st.needs_remote
            && self.any_remote_unflushed(observed)
        {
            st.needs_remote = true;
        }
        if self.wal.broken_rfa.load(Ordering::Relaxed) {
            st.needs_remote = false;
            chained = None;
        }
        let protocol = self.wal.protocol;
        if !st.wrote {
            // Waiting for everything appended is conservative for a chained
            // read-only commit; it writes no record to keep small.
            st.needs_remote |= chained.is_some();
            // Read-only: no commit record. It may still have read another
            // session's commit that is not durable yet, and must not be
            // acknowledged before it is.
            self.pending = st.needs_remote.then(|| CommitTicket {
                targets: self
                    .wal
                    .all()
                    .iter()
                    .map(|p| (Arc::clone(p), p.appended()))
                    .collect(),
                remote_tid: None,
                sync_own: false,
            });
            if let Some(t) = &self.pending {
                for (p, pos) in &t.targets {
                    p.request_flush(*pos);
                }
            }
            return Ok(());
        }
        let flush_others =
            st.needs_remote || matches!(protocol, CommitProtocol::FlushAll | CommitProtocol::Group);
        let (others, deps): (Vec<Arc<Partition>>, Vec<(u32, u64)>) = if flush_others {
            let others: Vec<Arc<Partition>> = self
                .wal
                .all()
                .iter()
                .filter(|p| p.id() != self.slot as u32)
                .cloned()
                .collect();
            let deps = others.iter().map(|p| (p.id(), p.appended())).collect();
            (others, deps)
        } else if let Some(prev) = &chained {
            // The predecessor's targets after its own partition: positions
            // that never exceed the current ends, so the commit record's
            // dependencies stay what recovery can check.
            prev.targets[1..]
                .iter()
                .map(|(p, pos)| (Arc::clone(p), (p.id(), *pos)))
                .unzip()
        } else {
            (Vec::new(), Vec::new())
        };
        // Remote in RFA's sense: its own partition does not make it durable,
        // so the waiter publishes it once the targets are (flush-all and
        // group also flush the others, but for a commit that needs nothing
        // remote its own partition still decides what it read).
        let remote = st.needs_remote || chained.is_some();
        let gsn = self.partition.reserve_gsn(st.gsn);
        st.gsn = gsn;
        let header = self.pageless_header(gsn, st.txn);
        let body = RecordBody::Commit {
            tid,
            deps: record::Deps::new(&deps),
        };
        let end = self.append(&mut st, &header, &body)?;
        if !remote {
            self.partition.note_commit(tid, end);
        }
        self.wal.commits.fetch_add(1, Ordering::Relaxed);
        if st.needs_remote {
            self.wal.remote_commits.fetch_add(1, Ordering::Relaxed);
        } else if chained.is_some() {
            self.wal.chained_commits.fetch_add(1, Ordering::Relaxed);
        }
        let mut targets = vec![(Arc::clone(&self.partition), end)];
        for (p, (_, pos)) in others.into_iter().zip(deps) {
            targets.push((p, pos));
        }
        // Flush-all and RFA push every flush themselves; the group variants
        // push only their own and let other partitions' writers catch up.
        // A caller that waits at once syncs its own partition itself
        // (`Partition::sync_to`): waking the writer for it would only add a
        // thread handoff (and a race for the same bytes).
        let own = usize::from(self.commit_waits);
        match protocol {
            CommitProtocol::FlushAll | CommitProtocol::Rfa => {
                for (p, pos) in &targets[own..] {
                    p.request_flush(*pos);
                }
            }
            CommitProtocol::Group | CommitProtocol::RfaGroup => {
                if !self.commit_waits {
                    self.partition.request_flush(end);
                }
                for (p, pos) in &targets[1..] {
                    p.request_flush_lazily(*pos);
                }
            }
            CommitProtocol::Async => self.partition.request_flush(end),
        }
        let ticket = CommitTicket {
            targets,
            remote_tid: remote.then_some(tid),
            sync_own: self.commit_waits,
        };
        if let Some(u) = self.unresolved.lock().back_mut() {
            debug_assert!(u.ticket.is_none(), "one commit per logged transaction");
            u.ticket = Some(ticket.clone());
        }
        if remote {
            self.unresolved_remote = Some(ticket.clone());
        }
        self.pending = Some(ticket);
        Ok(())
    }

    fn begin_rollback(&mut self) {
        self.state.borrow_mut().compensating = true;
    }

    /// Close a rollback that changed pages, and wait (still under the
    /// transaction's locks) until it and everything its compensation records
    /// depend on are durable. Otherwise a crash could keep a later
    /// transaction's reuse of the keys but lose the end record (recovery
    /// would undo the rolled-back transaction again, over the later work),
    /// or keep the end record but lose a page predecessor of a compensation
    /// record (leaving the transaction half undone). Rollbacks after
    /// placeholders are rare (a conflict at validation), so the sync is.
    ///
    /// The end record is appended only after the compensation records'
    /// dependencies on other partitions are durable: this partition's
    /// writer makes its own records durable regardless of the others, so an
    /// end record appended first could survive a crash (or a full disk)
    /// that lost a predecessor of a compensation record on another
    /// partition. Redo then stops at that gap, the compensation is not
    /// applied, and the end record keeps recovery from undoing the
    /// transaction: a placeholder or an overwritten value would stay
    /// (recovery's own undo orders its end records the same way). If that
    /// wait fails, no end record is written and the transaction stays a
    /// loser that recovery undoes.
    fn end_rollback(&mut self) -> Result<()> {
        let (txn, wrote, remote) = {
            let mut st = self.state.borrow_mut();
            st.compensating = false;
            (st.txn, st.wrote, st.needs_remote)
        };
        if !wrote {
            return Ok(());
        }
        if remote || self.unresolved_remote.is_some() {
            let deps = CommitTicket {
                targets: self
                    .wal
                    .all()
                    .iter()
                    .filter(|p| p.id() != self.slot as u32)
                    .map(|p| (Arc::clone(p), p.appended()))
                    .collect(),
                remote_tid: None,
                sync_own: false,
            };
            for (p, pos) in &deps.targets {
                p.request_flush(*pos);
            }
            deps.wait()?;
        }
        let end = self.append_end(txn)?;
        self.partition.request_flush(end);
        self.partition.wait_durable(end)?;
        // Rolled back for good: recovery will not need its records.
        let done = self.unresolved.lock().pop_back();
        debug_assert!(done.is_some_and(|u| u.ticket.is_none()));
        Ok(())
    }

    fn set_commit_waits(&mut self, waits: bool) {
        self.commit_waits = waits;
    }

    fn take_pending(&mut self) -> Option<Box<dyn crate::persist::DurableWait>> {
        if self.wal.protocol == CommitProtocol::Async {
            self.pending = None;
            return None;
        }
        self.pending
            .take()
            .map(|t| Box::new(t) as Box<dyn crate::persist::DurableWait>)
    }

    fn wait_durable(&mut self) -> Result<()> {
        if self.wal.protocol == CommitProtocol::Async {
            return Ok(());
        }
        match &self.pending {
            Some(t) => t.wait(),
            None => Ok(()),
        }
    }
}

/// Recovery undoes losers through a session log of its own: records it
/// writes carry the loser's transaction id and the compensation flag.
impl super::recovery::UndoLog for WalSessionLog {
    fn begin_undo(&mut self, txn: u64) {
        let mut st = self.state.borrow_mut();
        st.txn = txn;
        st.compensating = true;
        st.gsn = st.gsn.max(self.partition.clock());
        st.flushed_at_start = 0;
        st.wrote = true;
    }

    fn page_log(&self) -> &dyn PageLog {
        self
    }

    fn end_undo(&mut self, txn: u64) -> Result<()> {
        self.state.borrow_mut().compensating = false;
        self.append_end(txn).map(|_| ())
    }

    fn flush(&mut self) -> Result<()> {
        self.partition.wait_durable(self.partition.appended())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree::BTree;
    use crate::buffer::{BufferPool, PoolConfig};
    use crate::io::{OpenMode, SimStorage};

    fn setup(protocol: CommitProtocol) -> (Arc<BufferPool>, Arc<Wal>, BTree, BTree) {
        setup_on(&SimStorage::new(9), protocol)
    }

    fn setup_on(
        sim: &SimStorage,
        protocol: CommitProtocol,
    ) -> (Arc<BufferPool>, Arc<Wal>, BTree, BTree) {
        let sim = sim.clone();
        sim.create_dir_all(Path::new("/db")).unwrap();
        let file = sim
            .open(Path::new("/db/data"), OpenMode::CreateIfMissing)
            .unwrap();
        let pool = BufferPool::start(
            PoolConfig {
                page_size: 4096,
                frames: 64,
            },
            file,
            1,
            Vec::new(),
        )
        .unwrap();
        let wal = Wal::new(Arc::new(sim), Path::new("/db/wal"), protocol, Vec::new(), 0).unwrap();
        pool.set_flush_gate(Arc::clone(&wal) as Arc<dyn FlushGate>);
        let mut sys = wal.session_log(100).unwrap();
        sys.on_begin();
        let a = BTree::create(&pool, &sys).unwrap();
        let b = BTree::create(&pool, &sys).unwrap();
        sys.on_commit(&CommitView::without_writes(1, &[])).unwrap();
        sys.wait_durable().unwrap();
        (pool, wal, a, b)
    }

    struct PanickingGate;

    impl FlushGate for PanickingGate {
        fn ensure_durable(&self, _gsn: u64) -> Result<()> {
            panic!("gate bug");
        }
        fn is_durable_at(&self, _partition: u32, _end: u64) -> bool {
            true
        }
    }

    /// A panic while writing a batch (here in the gate) once left the
    /// frames in writeback, and every later checkpoint increment waited for
    /// them for good (a hang of `close` seen once in the crash tests had
    /// exactly that shape). The pool is poisoned instead and the pages
    /// stay dirty.
    #[test]
    fn a_panic_while_writing_pages_poisons_the_pool_instead_of_leaving_them_in_writeback() {
        let (pool, wal, a, _) = setup(CommitProtocol::Rfa);
        let mut s1 = wal.session_log(1).unwrap();
        s1.on_begin();
        a.insert(&pool, &s1, b"k", 1 << 16 | 1, b"v", None).unwrap();
        commit(&mut s1, 1 << 16 | 1, &[]);
        pool.set_flush_gate(Arc::new(PanickingGate));
        let flush = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.flush_all()));
        assert!(flush.is_err(), "the gate's panic goes on");
        assert!(pool.check_healthy().is_err(), "poisoned");
        pool.set_flush_gate(Arc::clone(&wal) as Arc<dyn FlushGate>);
        assert!(pool.checkpoint_shard(0, 1).is_err(), "refused, not waiting");
        assert!(pool.stats().dirty_pages > 0, "the pages are dirty again");
    }

    /// A gate that lets every write through and vouches for nothing: the
    /// pool's own WAL-rule assertion must stop the write.
    struct BrokenGate;

    impl FlushGate for BrokenGate {
        fn ensure_durable(&self, _gsn: u64) -> Result<()> {
            Ok(())
        }
        fn is_durable_at(&self, _partition: u32, _end: u64) -> bool {
            false
        }
    }

    #[test]
    fn writing_a_page_whose_last_record_is_not_durable_trips_the_wal_rule_check() {
        let (pool, wal, a, _) = setup(CommitProtocol::Rfa);
        let s1 = wal.session_log(1).unwrap();
        s1.state.borrow_mut().txn = 5;
        a.insert(&pool, &s1, b"k", 5, b"v", None).unwrap();
        // The real gate flushes first: nothing to report.
        pool.flush_all().unwrap();
        assert_eq!(pool.stats().wal_rule_violations, 0);
        a.insert(&pool, &s1, b"k2", 5, b"v", None).unwrap();
        pool.set_flush_gate(Arc::new(BrokenGate));
        let err = pool.flush_all().unwrap_err();
        assert!(err.to_string().contains("WAL rule violated"), "{err}");
        assert_eq!(pool.stats().wal_rule_violations, 1);
        // Refused and poisoned, not stuck: nothing more is written.
        let written = pool.stats().pages_written_by_flush;
        assert!(pool.flush_all().is_err());
        assert_eq!(pool.stats().pages_written_by_flush, written);
    }

    #[test]
    fn the_wal_reports_durability_per_partition_position() {
        let (pool, wal, a, _) = setup(CommitProtocol::Rfa);
        let mut s1 = wal.session_log(1).unwrap();
        s1.on_begin();
        a.insert(&pool, &s1, b"k", 5, b"v", None).unwrap();
        let end = wal.partition(1).unwrap().appended();
        commit(&mut s1, 5, &[]);
        assert!(wal.is_durable_at(1, end));
        let written = wal.partition(1).unwrap().appended();
        assert!(
            !wal.is_durable_at(1, written + 8),
            "beyond what was written"
        );
        assert!(!wal.is_durable_at(77, 0), "a partition that does not exist");
        // The real gate makes the page's record durable before the write.
        pool.flush_all().unwrap();
    }

    /// Nothing here runs the checkpointer's scan (as under `--checkpoint
    /// none`): the session's queue of transactions recovery might undo
    /// must stay bounded. It used to keep one entry, with its ticket, per
    /// transaction ever logged.
    #[test]
    fn a_session_drops_its_resolved_transactions_without_the_checkpointer() {
        let (pool, wal, a, _) = setup(CommitProtocol::RfaGroup);
        let mut s1 = wal.session_log(1).unwrap();
        let txns = 3 * UNRESOLVED_TRIM_AT as u64;
        for i in 1..=txns {
            s1.on_begin();
            a.insert(&pool, &s1, &i.to_be_bytes(), i << 16 | 1, b"v", None)
                .unwrap();
            commit(&mut s1, i << 16 | 1, &[]);
            let queued = s1.unresolved.lock().len();
            assert!(queued <= UNRESOLVED_TRIM_AT, "{queued} transactions queued");
        }
        assert_eq!(wal.oldest_unresolved_gsn(), u64::MAX, "all resolved");
    }

    fn commit(log: &mut WalSessionLog, tid: u64, observed: &[u64]) {
        log.on_commit(&CommitView::without_writes(tid, observed))
            .unwrap();
        log.wait_durable().unwrap();
    }

    #[test]
    fn rfa_skips_remote_flushes_on_disjoint_pages_and_not_on_shared_ones() {
        for protocol in [CommitProtocol::Rfa, CommitProtocol::RfaGroup] {
            let (pool, wal, a, b) = setup(protocol);
            let mut s1 = wal.session_log(1).unwrap();
            let mut s2 = wal.session_log(2).unwrap();
            // Disjoint pages: each session writes its own tree (own leaf).
            for i in 0..20u64 {
                s1.on_begin();
                a.insert(&pool, &s1, &i.to_be_bytes(), (i << 16) | 1, b"x", None)
                    .unwrap();
                commit(&mut s1, (i << 16) | 1, &[]);
                s2.on_begin();
                b.insert(&pool, &s2, &i.to_be_bytes(), (i << 16) | 2, b"y", None)
                    .unwrap();
                commit(&mut s2, (i << 16) | 2, &[]);
            }
            let disjoint = wal.stats().remote_flush_commits;
            assert_eq!(
                disjoint, 0,
                "{protocol:?}: disjoint pages need no remote flush"
            );
            // Shared page, unflushed: s1 writes without waiting for
            // durability, s2 writes the same leaf at once.
            s1.on_begin();
            a.insert(&pool, &s1, b"shared-1", 999 << 16 | 1, b"x", None)
                .unwrap();
            s1.on_commit(&CommitView::without_writes(999 << 16 | 1, &[]))
                .unwrap();
            s2.on_begin();
            a.insert(&pool, &s2, b"shared-2", 1000 << 16 | 2, b"y", None)
                .unwrap();
            commit(&mut s2, 1000 << 16 | 2, &[]);
            s1.wait_durable().unwrap();
            // Either s1's record was already durable when s2 started (no
            // remote flush needed) or s2 flushed remotely; with the
            // partition writer idle between them the latter is expected
            // only if s1 was not yet durable. Force the case: read
            // dependency on a commit that is not durable.
            // A read of a commit its partition has not made durable: a TID
            // of s1 above anything s1 committed durably (deterministic,
            // unlike racing s1's writer).
            let before = wal.stats().remote_flush_commits;
            let unflushed = 1u64 << 40 | 1;
            assert!(wal.partition(1).unwrap().durable_commit_tid() < unflushed);
            s2.on_begin();
            a.insert(&pool, &s2, b"shared-4", 1002 << 16 | 2, b"y", None)
                .unwrap();
            s2.on_commit(&CommitView::without_writes(1002 << 16 | 2, &[unflushed]))
                .unwrap();
            assert_eq!(
                wal.stats().remote_flush_commits,
                before + 1,
                "{protocol:?}: a read of an unflushed commit is a remote dependency"
            );
            s2.wait_durable().unwrap();
            pool.stop();
            wal.shutdown().unwrap();
        }
    }

    /// A page read from the data file carries only durable changes (the
    /// WAL rule held when it was written), so writing it is no remote
    /// dependency, whatever its GSN; before, its unknown writer counted as
    /// remote and every page evicted and read back made a commit remote.
    #[test]
    fn a_page_read_from_disk_is_no_remote_dependency() {
        let (pool, wal, a, b) = setup(CommitProtocol::RfaGroup);
        let s1 = wal.session_log(1).unwrap();
        // s1 logs without committing: GSN_flushed stays low.
        s1.state.borrow_mut().txn = 7;
        b.insert(&pool, &s1, b"pending", 7, b"x", None).unwrap();
        let mut s2 = wal.session_log(2).unwrap();
        let mut write_as = |last_writer: u32, key: &[u8], tid: u64| {
            pool.exclusive(a.root())
                .unwrap()
                .set_last_writer(last_writer, 0);
            s2.on_begin();
            a.insert(&pool, &s2, key, tid, b"y", None).unwrap();
            commit(&mut s2, tid, &[]);
            wal.stats().remote_flush_commits
        };
        assert_eq!(
            write_as(crate::buffer::WRITER_READ_FROM_DISK, b"k1", 1 << 16 | 2),
            0
        );
        // The same page last written by another partition is remote.
        assert_eq!(write_as(100, b"k2", 2 << 16 | 2), 1);
    }

    fn positions(t: &CommitTicket) -> Vec<(u32, u64)> {
        t.targets.iter().map(|(p, pos)| (p.id(), *pos)).collect()
    }

    /// Found by the TPC-C run (remote-flush fraction 0.93 with a warehouse
    /// per worker): a pipelined commit behind an unresolved remote one took
    /// the other partitions' current ends as its own dependencies, so with
    /// commits in flight a session stayed remote for good.
    #[test]
    fn a_commit_chained_behind_a_remote_one_waits_for_its_positions_only() {
        let (pool, wal, a, b) = setup(CommitProtocol::RfaGroup);
        let mut s1 = wal.session_log(1).unwrap();
        let mut s2 = wal.session_log(2).unwrap();
        let mut chained_seen = 0;
        for r in 0..40u64 {
            // s1 changes a leaf of `a` and keeps logging, uncommitted (so
            // nothing asks its writer to flush).
            s1.on_begin();
            a.insert(&pool, &s1, &[1, r as u8], (r << 16) | 1, b"x", None)
                .unwrap();
            // T1 on s2 writes the same leaf: a remote dependency.
            s2.on_begin();
            a.insert(&pool, &s2, &[2, r as u8], (r << 16) | 2, b"y", None)
                .unwrap();
            s2.on_commit(&CommitView::without_writes((r << 16) | 2, &[]))
                .unwrap();
            let t1 = s2.take_pending_ticket().unwrap();
            a.insert(&pool, &s1, &[3, r as u8], (r << 16) | 1, b"x", None)
                .unwrap();
            // T2 on s2 touches only its own tree.
            let chained_before = wal.stats().chained_commits;
            s2.on_begin();
            b.insert(&pool, &s2, &[4, r as u8], (r << 17) | 2, b"z", None)
                .unwrap();
            s2.on_commit(&CommitView::without_writes((r << 17) | 2, &[]))
                .unwrap();
            let t2 = s2.take_pending_ticket().unwrap();
            if wal.stats().chained_commits > chained_before {
                chained_seen += 1;
                assert!(t2.remote_tid.is_some(), "published by its waiter");
                assert_eq!(
                    positions(&t2)[1..],
                    positions(&t1)[1..],
                    "a chained commit waits for its predecessor's positions, not the current ends"
                );
                let on_s1 = positions(&t2).into_iter().find(|(id, _)| *id == 1).unwrap();
                assert!(on_s1.1 < wal.partition(1).unwrap().appended());
            }
            s1.on_commit(&CommitView::without_writes((r << 16) | 1, &[]))
                .unwrap();
            s1.wait_durable().unwrap();
            t1.wait().unwrap();
            t2.wait().unwrap();
        }
        assert!(
            chained_seen > 0,
            "the writer flushed s1 first in every round"
        );
        // Once the remote predecessor is durable the chain ends: a commit
        // that needs nothing remote is local again.
        let (remote, chained) = (
            wal.stats().remote_flush_commits,
            wal.stats().chained_commits,
        );
        s2.on_begin();
        b.insert(&pool, &s2, b"local", 1 << 40 | 2, b"z", None)
            .unwrap();
        commit(&mut s2, 1 << 40 | 2, &[]);
        assert_eq!(wal.stats().remote_flush_commits, remote);
        assert_eq!(wal.stats().chained_commits, chained);
        pool.stop();
        wal.shutdown().unwrap();
    }

    #[test]
    fn page_gsns_follow_the_gsn_protocol() {
        let (pool, wal, a, _) = setup(CommitProtocol::FlushAll);
        let mut s1 = wal.session_log(1).unwrap();
        let mut s2 = wal.session_log(2).unwrap();
        let mut last = 0;
        for i in 0..50u64 {
            let (s, slot) = if i % 2 == 0 {
                (&mut s1, 1)
            } else {
                (&mut s2, 2)
            };
            s.on_begin();
            a.insert(&pool, s, &i.to_be_bytes(), (i << 16) | slot, b"v", None)
                .unwrap();
            let gsn = page::page_gsn(pool.shared(a.root()).unwrap().data());
            assert!(
                gsn > last,
                "page GSN rises with every record ({gsn} after {last})"
            );
            last = gsn;
            commit(s, (i << 16) | slot, &[]);
        }
        assert_eq!(wal.stats().commits, 51);
        assert!(wal.flushed_gsn() >= last);
        pool.stop();
        wal.shutdown().unwrap();
    }
}

#[cfg(test)]
mod rollback_tests {
    use super::*;
    use crate::buffer::BufferPool;
    use crate::io::{CrashPolicy, Fault, FaultKind, SimStorage};
    use crate::wal::test_support::{durable, key, recover, small_tree, VALUE};

    fn leaf_gsn(pool: &BufferPool, tree: crate::btree::BTree, k: &[u8]) -> u64 {
        // The two-level setup tree: the root's child for `k`.
        let root = pool.shared(tree.root()).unwrap();
        let (_, leaf) = crate::btree::node::Node::new(root.data())
            .child_for(k)
            .unwrap();
        drop(root);
        page::page_gsn(pool.shared(leaf).unwrap().data())
    }

    /// Regression test (found while building the full-log policy): a
    /// rollback's end record used to be appended before its compensation
    /// records' dependencies on other partitions were durable. Here session
    /// B's compensation lands on a leaf right after session A's record,
    /// A's partition fails before that record is durable, and B's own
    /// writer makes B's end record durable anyway: after a power loss redo
    /// stops at the gap on the leaf, B's compensation is not applied, and
    /// the end record kept recovery from undoing B: its placeholder
    /// stayed. Now the end record waits for those dependencies, so B stays
    /// a loser and recovery removes the placeholder.
    #[test]
    fn a_rollback_whose_compensation_follows_a_lost_record_of_another_partition_stays_a_loser() {
        let sim = SimStorage::new(21);
        let (pool_before, wal, tree) = small_tree(&sim);
        let mut b = wal.session_log(1).unwrap();
        let mut a = wal.session_log(2).unwrap();
        b.on_begin();
        tree.insert(&pool_before, &b, &key(1), 2, &[], None)
            .unwrap();
        durable(&wal, 1);
        a.on_begin();
        tree.insert(&pool_before, &a, &key(2), 3, &VALUE, None)
            .unwrap();
        // B's commit failed (a conflict, say): it rolls back on top of A's
        // record, then A's log fails before that record is durable.
        b.begin_rollback();
        assert!(tree
            .remove(&pool_before, &b, &key(1), None)
            .unwrap()
            .is_some());
        // A segment of partition 2 (segment names start with a digit; the
        // partition's spare file does not).
        sim.inject(Fault::at(sim.op_count(), FaultKind::Eio).on_path("p00002/0"));
        let ended = b.end_rollback();
        assert!(ended.is_err(), "A's record never became durable");
        durable(&wal, 1);
        pool_before.stop();
        drop((a, b));
        sim.crash(CrashPolicy::DropAll);

        let (pool, recovery) = recover(&sim, 1, 1);
        assert!(
            tree.get(&pool, &key(1), None).unwrap().0.is_none(),
            "the rolled-back placeholder survived recovery: {:?}",
            recovery.report
        );
        assert!(tree.get(&pool, &key(2), None).unwrap().0.is_none());
        assert_eq!(tree.check(&pool).unwrap(), 60);
    }

    /// Recovery pairs a compensating remove with the placeholder's insert
    /// it undoes, not with the install's update that followed it. A
    /// rollback after a partial install (the placeholder's insert, its
    /// install's update, then a failure on another key) has one undo entry
    /// for the key, so one compensation; paired with the update, the insert
    /// stayed open and recovery's undo deleted the key, over whatever a
    /// later transaction had put there. The engine does not let a later
    /// transaction take the key before the end record is durable (the
    /// rollback waits under its locks and poisons the database if it
    /// cannot), so the tree is driven directly here: a rollback that does
    /// not wait relies on this pairing (docs/experiments/README.md).
    #[test]
    fn a_compensating_remove_closes_the_placeholder_insert_and_its_install() {
        let sim = SimStorage::new(23);
        let (pool_before, wal, tree) = small_tree(&sim);
        let mut b = wal.session_log(1).unwrap();
        let mut a = wal.session_log(2).unwrap();
        b.on_begin();
        tree.insert(&pool_before, &b, &key(1), 2, &VALUE, None)
            .unwrap();
        assert!(tree
            .update(&pool_before, &b, &key(1), 3, &VALUE, None)
            .unwrap());
        b.begin_rollback();
        assert!(tree
            .remove(&pool_before, &b, &key(1), None)
            .unwrap()
            .is_some());
        durable(&wal, 1);
        // B's end record never becomes durable.
        sim.inject(Fault::at(sim.op_count(), FaultKind::Eio).on_path("p00001/0"));
        assert!(b.end_rollback().is_err());
        a.on_begin();
        tree.insert(&pool_before, &a, &key(1), 5 << 16 | 2, &VALUE, None)
            .unwrap();
        a.on_commit(&CommitView::without_writes(5 << 16 | 2, &[]))
            .unwrap();
        a.wait_durable()
            .expect("A depends only on B's durable compensation");
        pool_before.stop();
        drop((a, b));
        sim.crash(CrashPolicy::DropAll);

        let (pool, recovery) = recover(&sim, 1, 1);
        assert_eq!(recovery.report.losers, 1, "{:?}", recovery.report);
        assert_eq!(recovery.report.records_undone, 0, "{:?}", recovery.report);
        assert_eq!(
            tree.get(&pool, &key(1), None)
                .unwrap()
                .0
                .map(|(tid, _)| tid),
            Some(5 << 16 | 2),
            "recovery undid B's insert over A's: {:?}",
            recovery.report
        );
    }

    /// On a full log disk a rollback completes in memory although its
    /// compensation records cannot be logged: readers see it undone, the
    /// pool is not poisoned, and the pages it changed carry GSNs the WAL
    /// gate refuses, so they never reach the data file before recovery
    /// undoes the transaction from its durable records.
    #[test]
    fn a_rollback_on_a_full_log_completes_in_memory_and_its_pages_stay_out_of_the_data_file() {
        let sim = SimStorage::new(22);
        let (pool, wal, tree) = small_tree(&sim);
        let mut s = wal.session_log(1).unwrap();
        s.on_begin();
        tree.insert(&pool, &s, &key(1), 2, &VALUE, None).unwrap();
        durable(&wal, 1);
        tree.insert(&pool, &s, &key(2), 2, &VALUE, None).unwrap();
        // The disk fills up: flushing the second record fails.
        sim.inject(Fault::at(sim.op_count(), FaultKind::Enospc).on_path(".wal"));
        let p = wal.partition(1).unwrap();
        let e = p.wait_durable(p.appended()).unwrap_err();
        assert!(e.is_log_full(), "{e:?}");
        assert!(wal.check_writable().unwrap_err().is_log_full());
        assert!(p.is_full());
        // The commit failed: roll back both inserts. Nothing can be logged.
        s.begin_rollback();
        assert!(tree.remove(&pool, &s, &key(2), None).unwrap().is_some());
        assert!(tree.remove(&pool, &s, &key(1), None).unwrap().is_some());
        let e = s.end_rollback().unwrap_err();
        assert!(e.is_log_full(), "{e:?}");
        assert!(tree.get(&pool, &key(1), None).unwrap().0.is_none());
        assert!(tree.get(&pool, &key(2), None).unwrap().0.is_none());
        assert_eq!(tree.check(&pool).unwrap(), 60);
        // The leaf is above what the log can vouch for: refused, not written,
        // and nothing is poisoned.
        let limit = wal.write_limit();
        let gsn = leaf_gsn(&pool, tree, &key(1));
        assert!(gsn > limit, "leaf GSN {gsn}, limit {limit}");
        assert!(wal.ensure_durable(gsn).unwrap_err().is_log_full());
        let e = pool.flush_all().unwrap_err();
        assert!(e.is_log_full(), "{e:?}");
        pool.check_healthy().unwrap();
        assert!(
            pool.exclusive(tree.root()).is_ok(),
            "the pool is not poisoned"
        );
        let data = sim.read_current(Path::new("/db/data")).unwrap_or_default();
        for page in data.chunks(4096) {
            assert!(
                page::page_gsn(page) <= limit,
                "a page above the log's durable GSN reached the data file"
            );
        }
        pool.stop();
    }
}
