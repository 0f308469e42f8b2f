//! One log partition: the log of one session slot (seed 000 §3.1, Fig. 2).
//!
//! Stage 1 is a ring of in-memory chunks: the owning session appends
//! records to the *current* chunk; a full chunk (or the current one, when a
//! commit asks for durability) moves to the *full* queue; the partition's
//! writer thread writes full chunks to stage 2 and returns their buffers to
//! the *free* list. A blocking commit that finds no write in progress
//! writes and syncs the chunks itself instead ([`Partition::sync_to`]): an
//! isolated commit then waits for one `fdatasync`, not also for two thread
//! handoffs. Stage 2 is a sequence of segment files named by the
//! partition-stream position of their first byte; a record never spans two
//! chunks, so it never spans two segments. Stage 3 (pruning/archiving whole
//! segments) is [`Partition::prune_below`].
//!
//! Positions are byte offsets in the partition's logical stream.
//!
//! Invariants: `durable` only advances after `sync_data` of every segment
//! holding bytes below it returned Ok (and, for a new segment, after its
//! directory entry was synced); records are appended in GSN order; one
//! write is in progress at a time, by the writer or by a committer, and each
//! starts at `durable` (so chunks reach the segments in stream order); after a
//! failed write or sync the partition never reports durability again. A
//! write that failed with `ENOSPC` makes it *full* (its waiters and appends
//! get [`Error::LogFull`], and the log's [`FullFlag`] is raised so the
//! database refuses writes); any other failure *poisons* it
//! ([`Error::Poisoned`]). Neither is retried: a reopen recovers.

use crate::error::{Error, IoOp, Result};
use crate::io::{OpenMode, Storage, StorageFile};
use crate::logstore::blocks::BlockWriter;
use crate::logstore::segment;
pub use crate::logstore::segment::{parse_segment_name, segment_name};
use crate::logstore::spare::Spare;
use crate::persist::SchemeKind;
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Bit of `Partition::clock` set while a reserved GSN's record is not yet
/// appended.
const RESERVED: u64 = 1 << 63;
/// GSNs stay below the reservation bit; recovery refuses a log record at
/// or above it as corruption.
pub const MAX_GSN: u64 = RESERVED;
/// Size of one stage-1 chunk; records larger than this get a chunk of
/// their own.
pub const CHUNK_SIZE: usize = 256 << 10;
/// How long a partition's writer waits for more group commits before it
/// syncs for a lazy (group) request.
pub const GROUP_WINDOW: std::time::Duration = std::time::Duration::from_micros(500);
/// Default of `PerWorkerOptions::log_sync_interval`: under continuous load a
/// partition's writer starts a sync at most this often, unless a thread is
/// blocked waiting for durability (see [`Partition::wait_durable`]).
pub const SYNC_INTERVAL: std::time::Duration = std::time::Duration::from_millis(2);
/// Log bytes waiting for a sync that end a pacing pause early: a batch this
/// large is worth its sync already.
pub const SYNC_BATCH: usize = 128 << 10;
// A full chunk is sealed, and ends a pause anyway: a batch as large as a
// chunk would never end one by itself.
const _: () = assert!(SYNC_BATCH < CHUNK_SIZE);
/// By default a segment is closed and a new one started once it exceeds
/// this size (`PerWorkerOptions::wal_segment_bytes`).
pub const SEGMENT_SIZE: u64 = 16 << 20;

/// Raised by the first partition of a log whose write fails with `ENOSPC`:
/// from then on the database accepts no writes (they could not be logged),
/// while reads go on. Never lowered; a reopen starts a new log manager.
#[derive(Debug, Default)]
pub struct FullFlag {
    full: AtomicBool,
    error: Mutex<Option<(PathBuf, String)>>,
}

impl FullFlag {
    /// `Err(LogFull)` once a partition ran out of space.
    #[inline]
    pub fn check(&self) -> Result<()> {
        if self.full.load(Ordering::Acquire) {
            return Err(self.error());
        }
        Ok(())
    }

    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::Acquire)
    }

    fn error(&self) -> Error {
        let (path, cause) = self.error.lock().clone().unwrap_or_default();
        Error::LogFull { path, cause }
    }

    fn set(&self, path: PathBuf, cause: String) {
        let mut e = self.error.lock();
        if e.is_none() {
            *e = Some((path, cause));
        }
        self.full.store(true, Ordering::Release);
    }
}

/// Why a partition stopped.
#[derive(Debug, Clone)]
struct Failure {
    /// A write failed with `ENOSPC` (else: poisoned).
    full: bool,
    path: PathBuf,
    cause: String,
}

/// Directory of partition `id` below the log directory.
pub fn partition_dir(log_dir: &Path, id: u32) -> PathBuf {
    log_dir.join(format!("p{id:05}"))
}

struct Chunk {
    bytes: Vec<u8>,
    /// Stream position of `bytes[0]`.
    start: u64,
    /// Largest GSN of a record in the chunk.
    max_gsn: u64,
}

struct Segment {
    start: u64,
    file: Arc<dyn StorageFile>,
    /// Bytes of records (the file is `segment::HEADER_SIZE` longer).
    len: u64,
    max_gsn: u64,
    /// Made from a preallocated spare (else it grows as it fills).
    preallocated: bool,
    /// Its directory entry is durable: the directory was synced after the
    /// file got its name (false only after a failed write left a new
    /// segment behind).
    named: bool,
}

struct Stage1 {
    current: Chunk,
    full: VecDeque<Chunk>,
    free: Vec<Vec<u8>>,
    /// Position the writer has been asked to make durable.
    flush_requested: u64,
    /// Commit records appended and not yet durable: (end position, TID).
    commits: VecDeque<(u64, u64)>,
    shutdown: bool,
    /// Threads blocked in `wait_durable`: while there is one, the writer
    /// syncs at once instead of pacing.
    blocked: usize,
    /// Chunks taken from `full` are being written and synced, by the
    /// writer or by a blocking committer (`sync_to`): one write at a time.
    writing: bool,
    /// What the writer thread is waiting for, if anything: who must wake
    /// it, and who need not.
    writer: WriterWait,
}

/// A value alone on its cache line (two lines: adjacent-line prefetch).
#[repr(align(128))]
struct Padded<T>(T);

/// Why the writer thread sleeps. Every wake-up costs a context switch that,
/// on a machine with as many workers as cores, preempts a worker, so each
/// event wakes the writer only when the writer would not find it anyway
/// when its current wait ends.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum WriterWait {
    /// Running (or writing without the lock): it looks at every request
    /// when it next takes the lock.
    Busy,
    /// Nothing to do: any request wakes it.
    Idle,
    /// A waiter's write is in progress; its end wakes the writer.
    Write,
    /// Sleeping out the sync interval. A request waits for its end; a
    /// blocked waiter, a full batch and shutdown end it early.
    Pacing,
    /// Letting group commits gather (`GROUP_WINDOW`) before a lazy flush.
    /// Another lazy request joins the window without waking it.
    Window,
}

/// Counters of one partition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartitionStats {
    pub appended_bytes: u64,
    pub durable_bytes: u64,
    pub records: u64,
    pub syncs: u64,
    /// Writes and syncs done by a blocking committer itself (`sync_to`),
    /// not by the writer thread.
    pub committer_syncs: u64,
    /// Times the writer thread woke up (by a request or a timeout).
    pub writer_wakeups: u64,
    /// Segments started from a recycled segment file, and from a
    /// zero-filled spare (spare.rs).
    pub segments_recycled: u64,
    pub segments_zero_filled: u64,
}

pub struct Partition {
    id: u32,
    dir: PathBuf,
    storage: Arc<dyn Storage>,
    stage1: Mutex<Stage1>,
    /// Position group committers wait for; flushed within a group window.
    /// Outside `stage1`: other sessions' commits raise it (RFA's remote
    /// flushes, about every other TPC-C commit), and taking the lock the
    /// owner appends under parked a worker for 1.7 ms at a time when its
    /// holder was preempted (2.8% of worker time; BENCHMARKS.md, session
    /// 16). On its own cache line, away from the words the owner's appends
    /// write.
    lazy_requested: Padded<AtomicU64>,
    /// The writer waits as `WriterWait::Idle`: mirrors `Stage1::writer` for
    /// lock-free lazy requests, which must wake an idle writer and only it.
    /// Set under `stage1` before the writer re-reads `lazy_requested`, and
    /// a requester raises `lazy_requested` before reading this (both
    /// SeqCst): one of the two sees the other.
    writer_idle: AtomicBool,
    /// Wakes the writer.
    work: Condvar,
    /// Wakes waiters for durability.
    durable_cv: Condvar,
    appended: AtomicU64,
    durable: AtomicU64,
    /// GSN of the newest durable record.
    durable_gsn: AtomicU64,
    /// The session's GSN clock: no future record of this partition has a
    /// GSN below it, and none at it unless bit 63 ([`RESERVED`]) is set.
    /// That bit is set while GSNs handed out by `reserve_gsns` have no
    /// appended records yet; the clock then equals the first of them (so
    /// `Wal::checkpoint_gsn`, the smallest clock minus one, stays below
    /// every one) and `flushed_gsn` must not vouch for it. One word for both, so that
    /// other sessions' `flushed_gsn` (once per writing transaction, on
    /// every partition) takes no lock the owner and the writer contend for,
    /// and the owner's append pays one atomic operation for the flag.
    clock: AtomicU64,
    records: AtomicU64,
    syncs: AtomicU64,
    committer_syncs: AtomicU64,
    writer_wakeups: AtomicU64,
    /// TID of the newest commit record that is durable.
    durable_commit_tid: AtomicU64,
    segment_size: AtomicU64,
    /// Least time between the starts of two syncs while nobody is blocked
    /// waiting (`PerWorkerOptions::log_sync_interval`), in microseconds.
    sync_interval_us: AtomicU64,
    segments: Mutex<Vec<Segment>>,
    /// Some segment's name is durable (`Segment::named`): from then on the
    /// files on disk reach `durable` (pruning keeps a named segment), and
    /// `durable` may be recorded as synced ([`Partition::synced_position`]).
    named_segment: AtomicBool,
    failure: Mutex<Option<Failure>>,
    failed: AtomicBool,
    /// The log's flag raised when a partition runs out of space.
    full_flag: std::sync::OnceLock<Arc<FullFlag>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Log-wide count of bytes moved to stage 2 (the checkpointer's clock).
    stage2: std::sync::OnceLock<Arc<AtomicU64>>,
    /// Stage 3: where retired segments go (deleted if unset).
    archive: std::sync::OnceLock<PathBuf>,
    /// The files the next segment is renamed from: recycled segments, and
    /// a zero-filled spare.
    spare: Arc<Spare>,
    /// Use the spare (`PerWorkerOptions::wal_preallocate`).
    preallocate: AtomicBool,
    /// The current segment's partial last block, for `O_DIRECT` segment
    /// files; made at the first write to one.
    blocks: Mutex<Option<BlockWriter>>,
}

impl std::fmt::Debug for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Partition({} at {})", self.id, self.dir.display())
    }
}

impl Partition {
    /// Open partition `id` whose existing log ends at `end` (found by
    /// recovery; the next record goes there) with GSN clock `clock`, and
    /// start its writer thread. Existing segments are kept for pruning.
    pub fn open(
        storage: Arc<dyn Storage>,
        log_dir: &Path,
        id: u32,
        end: u64,
        clock: u64,
        existing: Vec<(u64, u64, u64)>,
    ) -> Result<Arc<Self>> {
        let dir = partition_dir(log_dir, id);
        if clock >= MAX_GSN {
            // Recovery refuses such records; only a damaged checkpoint
            // floor could still bring one here.
            return Err(Error::Corruption {
                path: dir,
                offset: 0,
                detail: format!("log clock {clock} is beyond the GSN range"),
            });
        }
        if !storage.exists(&dir) {
            storage.create_dir_all(&dir)?;
            storage.sync_dir(log_dir)?;
        }
        let mut segments = Vec::new();
        // Recovery synced the segments it kept and their directory.
        let named_segment = !existing.is_empty();
        for (start, len, max_gsn) in existing {
            let file = storage.open_log_file(&dir.join(segment_name(start)), OpenMode::Existing)?;
            segments.push(Segment {
                start,
                file,
                len,
                max_gsn,
                // Recovery cut any zeros off: the file grows from here.
                preallocated: false,
                named: true,
            });
        }
        crate::logstore::spare::remove_recycled_leftovers(storage.as_ref(), &dir)?;
        let spare = Spare::new(Arc::clone(&storage), &dir, id);
        let p = Arc::new(Partition {
            id,
            dir,
            storage,
            stage1: Mutex::new(Stage1 {
                current: Chunk {
                    bytes: Vec::with_capacity(CHUNK_SIZE),
                    start: end,
                    max_gsn: 0,
                },
                full: VecDeque::new(),
                free: Vec::new(),
                flush_requested: end,
                commits: VecDeque::new(),
                shutdown: false,
                blocked: 0,
                writing: false,
                writer: WriterWait::Busy,
            }),
            lazy_requested: Padded(AtomicU64::new(end)),
            writer_idle: AtomicBool::new(false),
            work: Condvar::new(),
            durable_cv: Condvar::new(),
            appended: AtomicU64::new(end),
            durable: AtomicU64::new(end),
            durable_gsn: AtomicU64::new(clock),
            clock: AtomicU64::new(clock),
            records: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            committer_syncs: AtomicU64::new(0),
            writer_wakeups: AtomicU64::new(0),
            durable_commit_tid: AtomicU64::new(0),
            segment_size: AtomicU64::new(SEGMENT_SIZE),
            sync_interval_us: AtomicU64::new(SYNC_INTERVAL.as_micros() as u64),
            segments: Mutex::new(segments),
            named_segment: AtomicBool::new(named_segment),
            failure: Mutex::new(None),
            failed: AtomicBool::new(false),
            full_flag: std::sync::OnceLock::new(),
            writer: Mutex::new(None),
            stage2: std::sync::OnceLock::new(),
            archive: std::sync::OnceLock::new(),
            spare,
            preallocate: AtomicBool::new(true),
            blocks: Mutex::new(None),
        });
        let writer = Arc::clone(&p);
        let handle = std::thread::Builder::new()
            .name(format!("waypoint-wal-{id}"))
            .spawn(move || writer.writer_loop())
            .map_err(|e| Error::io(IoOp::Open, "log writer thread", None, e))?;
        *p.writer.lock() = Some(handle);
        Ok(p)
    }

    pub fn id(&self) -> u32 {
        self.id
    }

    /// Move retired segments to `dir` instead of deleting them.
    pub fn set_archive(&self, dir: PathBuf) {
        let _ = self.archive.set(dir);
    }

    fn retire(&self, start: u64) -> Result<()> {
        segment::retire(
            self.storage.as_ref(),
            &self.dir.join(segment_name(start)),
            self.archive.get().map(|p| p.as_path()),
        )
    }

    /// Raise `flag` when a write of this partition fails with `ENOSPC`.
    pub fn set_full_flag(&self, flag: Arc<FullFlag>) {
        let _ = self.full_flag.set(flag);
    }

    /// Count the bytes this partition writes to stage 2 into `counter` too.
    pub fn set_stage2_counter(&self, counter: Arc<AtomicU64>) {
        let _ = self.stage2.set(counter);
    }

    /// Start a new segment once the current one exceeds `bytes`.
    pub fn set_segment_size(&self, bytes: u64) {
        self.segment_size.store(bytes.max(1), Ordering::Relaxed);
        if self.preallocate.load(Ordering::Relaxed) {
            self.spare.want(self.spare_bytes());
        }
    }

    /// Take new segments from a preallocated spare (the default), or
    /// create them empty. Set before `set_segment_size`, which starts the
    /// first preallocation.
    pub fn set_preallocate(&self, on: bool) {
        self.preallocate.store(on, Ordering::Relaxed);
    }

    /// With preallocation on: zero-fill a spare whenever no pruned segment
    /// is queued for reuse (the default), or let new segments grow until
    /// one is (`PerWorkerOptions::wal_zero_fill`). Set before `set_segment_size`.
    pub fn set_zero_fill(&self, on: bool) {
        self.spare.set_zero_fill(on);
    }

    /// Start syncs at most every `interval` while nobody is blocked waiting
    /// for durability (zero: sync whenever there is something to sync).
    pub fn set_sync_interval(&self, interval: std::time::Duration) {
        let us = u64::try_from(interval.as_micros()).unwrap_or(u64::MAX);
        self.sync_interval_us.store(us, Ordering::Relaxed);
    }

    pub fn appended(&self) -> u64 {
        self.appended.load(Ordering::Acquire)
    }

    pub fn durable(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    pub fn clock(&self) -> u64 {
        self.clock.load(Ordering::Acquire) & !RESERVED
    }

    /// The GSN for the owner's next record: above `floor` (the txn GSN and
    /// the page GSN) and above the clock.
    pub fn reserve_gsn(&self, floor: u64) -> u64 {
        self.reserve_gsns(floor, 1)
    }

    /// `count` consecutive GSNs for the records of one structure
    /// modification; returns the first. Until `append_group` appends their
    /// records the clock holds the first of them with `RESERVED` set.
    pub fn reserve_gsns(&self, floor: u64, count: u64) -> u64 {
        assert!(
            count > 0 && floor < MAX_GSN - count,
            "GSNs above {floor} out of range"
        );
        let mut first = 0;
        let _ = self
            .clock
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |word| {
                // Still set if the last reservation's append failed: the
                // partition is then stopped and vouches for nothing more.
                first = floor.max(word & !RESERVED) + 1;
                Some(first | RESERVED)
            });
        first
    }

    /// Every record of this partition with a GSN at or below the result is
    /// durable, and every later record will have a larger GSN. An idle,
    /// fully durable partition has its clock raised to `global` first (its
    /// future records then order above it), so idle partitions do not hold
    /// GSN_flushed back.
    ///
    /// Why no lock is needed: the value vouched for is a clock word read
    /// (or compare-and-swapped) without `RESERVED`. A reservation later
    /// in the word's modification order starts from that value or above,
    /// so its GSNs lie above it. One earlier was cleared by its append,
    /// which stored `appended` before releasing the word: having acquired
    /// the word, this call sees those bytes, and vouches only if they are
    /// durable. A compare-and-swap that fails because the owner moved the
    /// word starts over from the new word.
    ///
    /// This relies on the word's value never repeating (its GSN part only
    /// grows, and each reservation raises it), so a successful
    /// compare-and-swap means nothing touched the word since it was read.
    /// Every change is a read-modify-write with release semantics, except
    /// the append that clears a reservation: a plain release store, made
    /// while no other thread can change the word (this call does not swap
    /// a word with `RESERVED`, and a swap of an older word fails). A call
    /// that acquires its value, or the value of a later swap (acquire and
    /// release), so sees the appended bytes.
    pub fn flushed_gsn(&self, global: u64) -> u64 {
        let mut word = self.clock.load(Ordering::Acquire);
        loop {
            if word & RESERVED != 0 || !self.all_durable() {
                return self.durable_gsn.load(Ordering::Acquire);
            }
            let raised = word.max(global);
            if raised == word {
                return word;
            }
            match self.clock.compare_exchange_weak(
                word,
                raised,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return raised,
                Err(now) => word = now,
            }
        }
    }

    /// Every appended byte is durable. `durable` is read first: if it then
    /// equals `appended`, nothing was appended in between either.
    fn all_durable(&self) -> bool {
        self.durable.load(Ordering::Acquire) == self.appended.load(Ordering::Acquire)
    }

    /// `Err(LogFull)` after a write failed with `ENOSPC`, `Err(Poisoned)`
    /// after any other failed write or sync, else Ok.
    pub fn check_healthy(&self) -> Result<()> {
        if self.failed.load(Ordering::Acquire) {
            let failure = self.failure.lock().clone();
            return Err(match failure {
                Some(Failure {
                    full: true,
                    path,
                    cause,
                }) => Error::LogFull { path, cause },
                other => Error::Poisoned {
                    cause: other.map(|f| f.cause).unwrap_or_default(),
                },
            });
        }
        Ok(())
    }

    /// Did a write of this partition fail with `ENOSPC`?
    pub fn is_full(&self) -> bool {
        self.failed.load(Ordering::Acquire) && self.failure.lock().as_ref().is_some_and(|f| f.full)
    }

    /// Append one encoded record (8-byte aligned) with GSN `gsn`; returns
    /// the stream position after it. Only the owning session appends.
    pub fn append(&self, record: &[u8], gsn: u64) -> Result<u64> {
        self.append_group(record, 1, gsn)
    }

    /// Append `count` encoded records whose largest GSN is `max_gsn` as one
    /// unit: they land in one chunk, so the writer writes and syncs all of
    /// them or none, and the durable position never falls between them (a
    /// structure modification is durable whole or not at all).
    pub fn append_group(&self, records: &[u8], count: u64, max_gsn: u64) -> Result<u64> {
        self.check_healthy()?;
        debug_assert!(max_gsn > 0);
        let mut s = self.stage1.lock();
        if !s.current.bytes.is_empty() && s.current.bytes.len() + records.len() > CHUNK_SIZE {
            self.seal_current(&mut s);
        }
        debug_assert!(
            max_gsn >= s.current.max_gsn,
            "records of a partition are in GSN order"
        );
        let before = s.current.bytes.len();
        s.current.bytes.extend_from_slice(records);
        // Only here is the records' stream position known.
        let at = s.current.start + before as u64;
        crate::logstore::frame::place_at(&mut s.current.bytes[before..], at);
        if s.writer == WriterWait::Pacing
            && before < SYNC_BATCH
            && s.current.bytes.len() >= SYNC_BATCH
        {
            self.work.notify_one();
        }
        s.current.max_gsn = s.current.max_gsn.max(max_gsn);
        let end = s.current.start + s.current.bytes.len() as u64;
        debug_assert!(max_gsn < MAX_GSN);
        self.appended.store(end, Ordering::Release);
        // After `appended` moved: whoever acquires the word without the
        // reservation sees the bytes too (see `flushed_gsn`).
        let word = self.clock.load(Ordering::Relaxed);
        if word & RESERVED != 0 {
            debug_assert!(max_gsn >= word & !RESERVED, "appends the reserved GSNs");
            // Set by this thread's `reserve_gsns`, and while it is set no
            // other thread changes the word: a plain store, no locked
            // compare-and-swap (one per record, each waiting for the
            // record's stores to drain).
            self.clock
                .store((word & !RESERVED).max(max_gsn), Ordering::Release);
        } else {
            // An append without a reservation (tests): `flushed_gsn` may
            // raise the word meanwhile.
            let _ = self
                .clock
                .fetch_update(Ordering::Release, Ordering::Relaxed, |word| {
                    Some((word & !RESERVED).max(max_gsn))
                });
        }
        // Only appends change the count, under the stage-1 lock: no locked
        // add, which would wait for the record bytes' stores to drain.
        self.records.store(
            self.records.load(Ordering::Relaxed) + count,
            Ordering::Relaxed,
        );
        if s.current.bytes.len() >= CHUNK_SIZE {
            self.seal_current(&mut s);
            self.work.notify_one();
        }
        Ok(end)
    }

    /// Move the current chunk to the full queue.
    fn seal_current(&self, s: &mut Stage1) {
        let start = s.current.start + s.current.bytes.len() as u64;
        let buf = s
            .free
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(CHUNK_SIZE));
        let next = Chunk {
            bytes: buf,
            start,
            max_gsn: 0,
        };
        let full = std::mem::replace(&mut s.current, next);
        s.full.push_back(full);
    }

    /// Remember that the commit record of `tid` ends at `end`.
    pub fn note_commit(&self, tid: u64, end: u64) {
        let mut s = self.stage1.lock();
        if self.durable() >= end {
            self.durable_commit_tid.fetch_max(tid, Ordering::AcqRel);
        } else {
            s.commits.push_back((end, tid));
        }
    }

    /// A remote-dependent commit is durable only once its dependencies are:
    /// its session reports it after waiting for them.
    pub fn mark_commit_durable(&self, tid: u64) {
        self.durable_commit_tid.fetch_max(tid, Ordering::AcqRel);
    }

    /// TID of the newest durable commit of this partition: every commit of
    /// this session with a TID at or below it is durable.
    pub fn durable_commit_tid(&self) -> u64 {
        self.durable_commit_tid.load(Ordering::Acquire)
    }

    /// Passive group commit: have the writer flush up to `position` within
    /// a short group window rather than at once.
    pub fn request_flush_lazily(&self, position: u64) {
        if self.lazy_requested.0.fetch_max(position, Ordering::SeqCst) >= position {
            return;
        }
        // A writer that is busy, pacing or already in a group window finds
        // the request when that ends: under RFA's remote commits waking it
        // for every request cost a context switch per commit.
        if self.writer_idle.load(Ordering::SeqCst) {
            // The idle writer holds the lock until its wait releases it, so
            // this notification cannot fall between its check and its wait.
            // Checked again under the lock: another request may have woken
            // the writer since, into a group window this one must not cut
            // short (found by review).
            let s = self.stage1.lock();
            if s.writer == WriterWait::Idle {
                self.work.notify_one();
            }
        }
    }

    /// Ask the writer to make everything up to `position` durable, without
    /// waiting.
    pub fn request_flush(&self, position: u64) {
        let mut s = self.stage1.lock();
        if position > s.flush_requested {
            s.flush_requested = position;
            // A pacing writer syncs this when its interval ends: waking it
            // now would only cost the committer a system call.
            if s.writer != WriterWait::Pacing {
                self.work.notify_one();
            }
        }
    }

    /// Block until everything up to `position` is durable; the writer
    /// syncs it at once (a blocked waiter ends its pacing).
    pub fn wait_durable(&self, position: u64) -> Result<()> {
        if self.durable() >= position {
            return Ok(());
        }
        self.request_flush(position);
        let mut s = self.stage1.lock();
        // Someone is blocked on the log now: a pacing writer syncs at once.
        s.blocked += 1;
        self.work.notify_one();
        let result = loop {
            if self.durable() >= position {
                break Ok(());
            }
            if let Err(e) = self.check_healthy() {
                break Err(e);
            }
            if s.shutdown {
                break Err(Error::Closed);
            }
            self.durable_cv.wait(&mut s);
        };
        s.blocked -= 1;
        result
    }

    /// Like [`Partition::wait_durable`], but when no write is in progress
    /// the caller writes and syncs the pending chunks itself; while another
    /// thread writes, it waits for that write and then looks again. For a
    /// blocking commit (`Transaction::commit`): waking the writer and being
    /// woken by it cost an isolated commit two thread handoffs on top of its
    /// `fdatasync` (docs/BENCHMARKS.md, "Session 7"). Pipelined commits do
    /// not use it: syncing whenever a window fills, rather than paced by
    /// the writer, cost 2-worker TPC-C 5%.
    pub fn sync_to(&self, position: u64) -> Result<()> {
        if self.durable() >= position {
            return Ok(());
        }
        let mut s = self.stage1.lock();
        loop {
            if self.durable() >= position {
                return Ok(());
            }
            self.check_healthy()?;
            if s.shutdown {
                return Err(Error::Closed);
            }
            if !s.writing {
                // Else nothing could ever make it durable: no spinning on
                // empty writes.
                assert!(position <= self.appended(), "waits for appended bytes only");
                if !s.current.bytes.is_empty() {
                    self.seal_current(&mut s);
                }
                let chunks = self.begin_write(&mut s);
                self.committer_syncs.fetch_add(1, Ordering::Relaxed);
                let written = MutexGuard::unlocked(&mut s, || self.write_chunks(&chunks));
                self.finish_write(&mut s, chunks, written);
                continue;
            }
            self.durable_cv.wait(&mut s);
        }
    }

    /// Take every full chunk for one write. The caller writes them with
    /// `write_chunks` (without the stage-1 lock) and then calls
    /// `finish_write`; until then nobody else writes.
    fn begin_write(&self, s: &mut Stage1) -> VecDeque<Chunk> {
        assert!(
            !s.writing,
            "one write at a time keeps chunks in stream order"
        );
        s.writing = true;
        std::mem::take(&mut s.full)
    }

    /// After `write_chunks`: record a failure, publish the commits that
    /// became durable, recycle the buffers, end the write and wake whoever
    /// waits for durability or for the write to end.
    fn finish_write(&self, s: &mut Stage1, chunks: VecDeque<Chunk>, written: Result<()>) {
        debug_assert!(s.writing);
        if let Err(e) = written {
            // ENOSPC on a write: the disk is full, and nothing claims the
            // bytes reached it. Anything else (EIO, a failed sync whatever
            // its code) poisons. Neither is retried.
            let full = e.is_enospc_on_write();
            let path = match &e {
                Error::Io { path, .. } => path.clone(),
                _ => self.dir.clone(),
            };
            if full {
                tracing::error!(partition = self.id, error = %e, "log disk full; partition stopped, the database refuses writes");
            } else {
                tracing::error!(partition = self.id, error = %e, "log write failed; partition poisoned");
            }
            *self.failure.lock() = Some(Failure {
                full,
                path: path.clone(),
                cause: e.to_string(),
            });
            // The database-wide flag first: whoever sees this partition
            // fail must find writes refused already.
            if full {
                if let Some(flag) = self.full_flag.get() {
                    flag.set(path, e.to_string());
                }
            }
            self.failed.store(true, Ordering::Release);
            // Nothing more will become durable; waiters see the error.
            s.full.clear();
        }
        let durable = self.durable();
        while let Some(&(end, tid)) = s.commits.front() {
            if end > durable {
                break;
            }
            self.durable_commit_tid.fetch_max(tid, Ordering::AcqRel);
            s.commits.pop_front();
        }
        for mut c in chunks {
            c.bytes.clear();
            if s.free.len() < 4 {
                s.free.push(c.bytes);
            }
        }
        s.writing = false;
        if s.writer == WriterWait::Write {
            self.work.notify_one();
        }
        self.durable_cv.notify_all();
    }

    fn writer_loop(self: Arc<Self>) {
        let mut last_sync: Option<std::time::Instant> = None;
        loop {
            let chunks = {
                let mut s = self.stage1.lock();
                // Every wait below releases the lock and goes round again,
                // so a write begun meanwhile by a waiter is seen here.
                loop {
                    if self.failed.load(Ordering::Acquire) {
                        // A waiter's write failed; it woke everyone.
                        return;
                    }
                    if s.writing {
                        self.writer_waits(&mut s, WriterWait::Write, None);
                        continue;
                    }
                    if self.lazy_requested() > s.flush_requested && s.full.is_empty() {
                        // Group window: let more commits join before syncing.
                        self.writer_waits(&mut s, WriterWait::Window, Some(GROUP_WINDOW));
                        s.flush_requested = s.flush_requested.max(self.lazy_requested());
                        continue;
                    }
                    let batch_ready = !s.full.is_empty() || s.current.bytes.len() >= SYNC_BATCH;
                    if s.blocked == 0 && !s.shutdown && !batch_ready {
                        // Sync pacing: within the sync interval of the last
                        // sync, and while nobody is blocked on the log,
                        // requests gather silently (pipelined commits do
                        // not wait yet) and the writer syncs them when the
                        // interval ends. Fewer, larger syncs cost less than
                        // a sync per few commits (on a virtual disk they
                        // also cost the vCPUs steal time; BENCHMARKS.md,
                        // "Sync pacing"). A blocked waiter ends the pause,
                        // and so does a batch of SYNC_BATCH bytes.
                        if let Some(rest) = self.pace(last_sync) {
                            self.writer_waits(&mut s, WriterWait::Pacing, Some(rest));
                            continue;
                        }
                    }
                    let wanted = s.flush_requested > self.durable() && !s.current.bytes.is_empty();
                    if wanted {
                        self.seal_current(&mut s);
                    }
                    if !s.full.is_empty() {
                        break;
                    }
                    if s.shutdown {
                        self.durable_cv.notify_all();
                        return;
                    }
                    self.writer_idle.store(true, Ordering::SeqCst);
                    if self.lazy_requested() <= s.flush_requested {
                        self.writer_waits(&mut s, WriterWait::Idle, None);
                    }
                    self.writer_idle.store(false, Ordering::SeqCst);
                }
                self.begin_write(&mut s)
            };
            last_sync = Some(std::time::Instant::now());
            let written = self.write_chunks(&chunks);
            self.finish_write(&mut self.stage1.lock(), chunks, written);
        }
    }

    fn lazy_requested(&self) -> u64 {
        self.lazy_requested.0.load(Ordering::SeqCst)
    }

    /// The writer sleeps for `why` (at most `limit`), saying so to the
    /// threads that decide whether to wake it.
    fn writer_waits(
        &self,
        s: &mut MutexGuard<'_, Stage1>,
        why: WriterWait,
        limit: Option<std::time::Duration>,
    ) {
        debug_assert_eq!(s.writer, WriterWait::Busy);
        s.writer = why;
        match limit {
            Some(limit) => {
                self.work.wait_for(s, limit);
            }
            None => self.work.wait(s),
        }
        s.writer = WriterWait::Busy;
        self.writer_wakeups.fetch_add(1, Ordering::Relaxed);
    }

    /// How long the writer should still wait before starting a sync, when
    /// the last one started less than the sync interval ago.
    fn pace(&self, last_sync: Option<std::time::Instant>) -> Option<std::time::Duration> {
        let interval =
            std::time::Duration::from_micros(self.sync_interval_us.load(Ordering::Relaxed));
        let since = last_sync?.elapsed();
        (since < interval).then(|| interval - since)
    }

    /// Write chunks to the current segment (rolling over to new segments),
    /// sync, then publish durability.
    fn write_chunks(&self, chunks: &VecDeque<Chunk>) -> Result<()> {
        let _poison = PoisonOnPanic::new(self);
        let mut segments = self.segments.lock();
        let mut blocks = self.blocks.lock();
        let mut touched: Vec<Arc<dyn StorageFile>> = Vec::new();
        let mut new_segment = false;
        let mut end = self.durable();
        let mut max_gsn = 0;
        for chunk in chunks {
            if chunk.bytes.is_empty() {
                continue;
            }
            assert_eq!(chunk.start, end, "chunks are written in stream order");
            let preallocate = self.preallocate.load(Ordering::Relaxed);
            let roll = match segments.last() {
                None => true,
                Some(seg) => {
                    seg.len >= self.segment_size.load(Ordering::Relaxed)
                        || seg.start + seg.len != chunk.start
                        // A growing segment (the first after an open, or
                        // one made while no spare was ready) gives way to
                        // a spare as soon as one is: its syncs are slower.
                        // Not while it is empty: the spare would take its
                        // name (a crash can leave a segment whose header
                        // survived but no record, and recovery hands it
                        // over as this partition's end; `waypoint
                        // simulate` seed 2632 found one file listed twice).
                        || (preallocate
                            && !seg.preallocated
                            && seg.len > 0
                            && self.spare.is_ready())
                        // An `O_DIRECT` segment this process did not
                        // start: its partial last block is not known.
                        || (seg.file.is_direct()
                            && seg.len > 0
                            && !blocks.as_ref().is_some_and(|b| b.holds(seg.start)))
                }
            };
            if roll {
                if let Some(old) = segments.last() {
                    // Rolled before filling its preallocation (the stream
                    // jumped): cut the rest so the file holds just records.
                    // A full segment keeps whatever follows its records (a
                    // recycled file's old records): cutting would cost a
                    // size change per segment, and recovery knows a
                    // segment ends where the next one starts.
                    if old.start + old.len != chunk.start
                        && old.file.len()? > segment::HEADER_SIZE + old.len
                    {
                        old.file.set_len(segment::HEADER_SIZE + old.len)?;
                    }
                }
                // Before the spare is renamed over anything: a segment's
                // name is its start, so a start already listed would be
                // that segment's file.
                assert!(
                    segments.last().is_none_or(|s| s.start < chunk.start),
                    "one file per segment: segment starts increase"
                );
                let path = self.dir.join(segment_name(chunk.start));
                let from_spare = preallocate && self.spare.take(&path, self.spare_bytes())?;
                let file = if from_spare {
                    self.storage.open_log_file(&path, OpenMode::Existing)?
                } else {
                    self.storage.open_log_file(&path, OpenMode::CreateNew)?
                };
                // Synced with the segment's first records below (an
                // `O_DIRECT` file gets it with their first block).
                let header = segment::encode_header(SchemeKind::PerWorker, self.id, chunk.start);
                if file.is_direct() {
                    blocks
                        .get_or_insert_with(BlockWriter::new)
                        .begin_segment(chunk.start, &header);
                } else {
                    file.write_at(&header, 0)?;
                }
                segments.push(Segment {
                    start: chunk.start,
                    file,
                    len: 0,
                    max_gsn: 0,
                    preallocated: from_spare,
                    named: false,
                });
                new_segment = true;
            }
            let seg = segments.last_mut().expect("a segment exists");
            debug_assert_eq!(seg.start + seg.len, chunk.start, "chunks are contiguous");
            let at = segment::HEADER_SIZE + seg.len;
            if seg.file.is_direct() {
                let blocks = blocks.get_or_insert_with(BlockWriter::new);
                if !blocks.holds(seg.start) {
                    // A recovered segment without records (a non-empty
                    // one rolled above): its tail is its header.
                    assert_eq!(seg.len, 0, "appends only to a segment whose tail is known");
                    blocks.begin_segment(
                        seg.start,
                        &segment::encode_header(SchemeKind::PerWorker, self.id, seg.start),
                    );
                }
                blocks.write(seg.file.as_ref(), at, &chunk.bytes)?;
            } else {
                seg.file.write_at(&chunk.bytes, at)?;
            }
            seg.len += chunk.bytes.len() as u64;
            seg.max_gsn = seg.max_gsn.max(chunk.max_gsn);
            if !touched.iter().any(|f| Arc::ptr_eq(f, &seg.file)) {
                touched.push(Arc::clone(&seg.file));
            }
            end = chunk.start + chunk.bytes.len() as u64;
            max_gsn = max_gsn.max(chunk.max_gsn);
        }
        for f in &touched {
            f.sync_data()?;
        }
        if new_segment {
            // A new segment's directory entry must be durable too, or the
            // file could vanish with its synced contents.
            self.storage.sync_dir(&self.dir)?;
            for seg in segments.iter_mut() {
                seg.named = true;
            }
            self.named_segment.store(true, Ordering::Release);
        }
        self.syncs
            .fetch_add(touched.len() as u64, Ordering::Relaxed);
        drop(segments);
        // The position first: whoever sees the new GSN_flushed must also
        // see these bytes as durable (the pool's WAL-rule check compares
        // a page's last record position with `durable` after the gate
        // trusted `durable_gsn`; the other order made it fire on pages
        // that were synced, docs/RELIABILITY.md finding 9).
        let before = self.durable.fetch_max(end, Ordering::AcqRel);
        if max_gsn > 0 {
            self.durable_gsn.fetch_max(max_gsn, Ordering::AcqRel);
        }
        if let Some(counter) = self.stage2.get() {
            counter.fetch_add(end.saturating_sub(before), Ordering::Relaxed);
        }
        Ok(())
    }

    /// Delete whole segments whose records all have GSN below `gsn`, never
    /// the newest segment (it is still being written), and never one whose
    /// successor's name is not durable (a write that failed after starting
    /// a segment): the files on disk must still reach the durable position
    /// recorded as synced in the checkpoint metadata, or recovery would
    /// take the partition for a truncated log. Returns bytes removed.
    pub fn prune_below(&self, gsn: u64) -> Result<u64> {
        let mut segments = self.segments.lock();
        let mut removed = 0;
        while segments.len() > 1 && segments[0].max_gsn < gsn && segments[1].named {
            removed += self.retire_oldest(&mut segments)?;
        }
        Ok(removed)
    }

    /// The position up to which this partition's log is durable, if files
    /// with durable names hold it (`None` while no segment is named, e.g.
    /// a recovered partition without segments, whose `durable` is only
    /// where its stream resumes). What the checkpoint metadata records.
    pub fn synced_position(&self) -> Option<u64> {
        // Read the flag first: `durable` only grows, and every value it
        // takes after a segment was named is held by named segments.
        self.named_segment
            .load(Ordering::Acquire)
            .then(|| self.durable())
    }

    /// Delete every segment, the newest too. Only after `shutdown` and only
    /// when every page is durable (a clean close): no record is needed.
    pub fn remove_all_segments(&self) -> Result<()> {
        let mut segments = self.segments.lock();
        self.named_segment.store(false, Ordering::Release);
        while !segments.is_empty() {
            self.retire_oldest(&mut segments)?;
        }
        Ok(())
    }

    /// Delete (or archive) the oldest segment and make that durable before
    /// anything else happens to the directory. A crash may keep any subset
    /// of unsynced directory operations, so two unsynced deletions could
    /// leave an older segment behind a deleted newer one: a gap that
    /// recovery must (and does) call a lost segment. One at a time, the
    /// segments on disk stay contiguous. The segment leaves `segments` only
    /// after this succeeded, so a failed delete is still counted on disk.
    /// Without an archive, the segment is recycled instead when the spare
    /// can use it (spare.rs), which syncs the directory just the same.
    /// Returns the bytes of records it held.
    fn retire_oldest(&self, segments: &mut Vec<Segment>) -> Result<u64> {
        let oldest = &segments[0];
        let recycled = self.archive.get().is_none()
            && self.preallocate.load(Ordering::Relaxed)
            && self.spare.recycle(
                &self.dir.join(segment_name(oldest.start)),
                oldest.file.as_ref(),
            )?;
        if !recycled {
            self.retire(oldest.start)?;
            self.storage.sync_dir(&self.dir)?;
        }
        Ok(segments.remove(0).len)
    }

    /// Bytes of log on disk in this partition.
    pub fn disk_bytes(&self) -> u64 {
        self.segments.lock().iter().map(|s| s.len).sum()
    }

    pub fn stats(&self) -> PartitionStats {
        let (segments_recycled, segments_zero_filled) = self.spare.taken();
        PartitionStats {
            appended_bytes: self.appended(),
            durable_bytes: self.durable(),
            records: self.records.load(Ordering::Relaxed),
            syncs: self.syncs.load(Ordering::Relaxed),
            committer_syncs: self.committer_syncs.load(Ordering::Relaxed),
            writer_wakeups: self.writer_wakeups.load(Ordering::Relaxed),
            segments_recycled,
            segments_zero_filled,
        }
    }

    /// Flush everything appended and stop the writer.
    pub fn shutdown(&self) -> Result<()> {
        let end = self.appended();
        let flushed = self.wait_durable(end);
        self.stage1.lock().shutdown = true;
        self.work.notify_all();
        if let Some(h) = self.writer.lock().take() {
            let _ = h.join();
        }
        flushed.and(self.spare.shutdown())
    }

    /// Bytes a preallocated segment file gets: header and segment size.
    fn spare_bytes(&self) -> u64 {
        segment::HEADER_SIZE + self.segment_size.load(Ordering::Relaxed)
    }
}

/// Poisons the partition when the thread writing for it panics (a broken
/// assertion): `writing` would stay set and every waiter would wait forever;
/// this way they get an error.
/// A thread that was unwinding already when it began the write (a commit
/// in a `Drop` during a panic) is not taken for a panic of the write.
struct PoisonOnPanic<'a> {
    partition: &'a Partition,
    unwinding_before: bool,
}

impl<'a> PoisonOnPanic<'a> {
    fn new(partition: &'a Partition) -> Self {
        PoisonOnPanic {
            partition,
            unwinding_before: std::thread::panicking(),
        }
    }
}

impl Drop for PoisonOnPanic<'_> {
    fn drop(&mut self) {
        if self.unwinding_before || !std::thread::panicking() {
            return;
        }
        let p = self.partition;
        *p.failure.lock() = Some(Failure {
            full: false,
            path: p.dir.clone(),
            cause: "the thread writing the log panicked".into(),
        });
        p.failed.store(true, Ordering::Release);
        let mut s = p.stage1.lock();
        s.writing = false;
        p.work.notify_all();
        p.durable_cv.notify_all();
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        self.stage1.lock().shutdown = true;
        self.work.notify_all();
        self.spare.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{CrashPolicy, SimStorage};
    use crate::logstore::scan::ScanEnd;
    use crate::wal::record::{self, RecordBody, RecordHeader};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn rec(gsn: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        record::encode(
            &RecordHeader {
                gsn,
                txn: 1,
                page: 7,
                prev_gsn: gsn - 1,
                compensation: false,
                ..Default::default()
            },
            &RecordBody::Insert {
                key: b"k",
                value: payload,
            },
            &mut out,
        );
        out
    }

    /// A simulated disk with an empty log directory `/db/wal`, durable
    /// (as `Wal::new` leaves it).
    fn sim_log(seed: u64) -> (SimStorage, &'static Path) {
        sim_log_direct(seed, false)
    }

    /// Partition 0, empty, in `/db/wal` on a fresh `sim_log(seed)`.
    fn empty_partition(seed: u64) -> (SimStorage, Arc<Partition>) {
        let (sim, log_dir) = sim_log(seed);
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let p = Partition::open(storage, log_dir, 0, 0, 0, Vec::new()).unwrap();
        (sim, p)
    }

    /// Like `sim_log`, with log files that behave as `O_DIRECT` ones when
    /// `direct` (every write whole aligned blocks, or `EINVAL`).
    fn sim_log_direct(seed: u64, direct: bool) -> (SimStorage, &'static Path) {
        let sim = SimStorage::new(seed);
        sim.set_direct_log(direct);
        let log_dir = Path::new("/db/wal");
        sim.create_dir_all(log_dir).unwrap();
        sim.sync_dir(Path::new("/")).unwrap();
        sim.sync_dir(Path::new("/db")).unwrap();
        (sim, log_dir)
    }

    /// Wait (at most 30 s) until the partition's spare is ready.
    fn wait_for_spare(p: &Partition) {
        let t0 = std::time::Instant::now();
        while !p.spare.is_ready() {
            assert!(t0.elapsed().as_secs() < 30, "no spare was prepared");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    fn read_log(sim: &SimStorage, dir: &Path) -> Vec<u64> {
        let mut gsns = Vec::new();
        for (start, seg) in segment::list_segments(sim, dir).unwrap() {
            let bytes = sim.read_current(&seg).unwrap();
            let records = &bytes[segment::HEADER_SIZE as usize..];
            let scan = record::scan_segment(records, start);
            assert!(matches!(
                scan.end,
                ScanEnd::Clean | ScanEnd::TornTail { .. }
            ));
            gsns.extend(scan.records.iter().map(|(_, r)| r.header.gsn));
        }
        gsns
    }

    /// Poll until `p` is durable up to `end`, for at most `limit`.
    fn durable_within(p: &Partition, end: u64, limit: std::time::Duration) -> bool {
        let t0 = std::time::Instant::now();
        while t0.elapsed() < limit {
            if p.durable() >= end {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        p.durable() >= end
    }

    /// Sync pacing: within the interval after a sync, a flush request that
    /// nobody waits on is held back; a blocked waiter or a batch of
    /// `SYNC_BATCH` bytes has the writer sync at once, and a blocking
    /// committer (`sync_to`) syncs itself. The interval here is an hour, so
    /// a partition that ignored any rule fails the test instead of passing
    /// it by luck.
    #[test]
    fn sync_pacing_holds_unwaited_requests_until_a_waiter_or_a_batch() {
        let (_sim, p) = empty_partition(8);
        p.set_sync_interval(std::time::Duration::from_secs(3600));
        let mut gsn = 1;
        let mut append = |bytes: usize| {
            let end = p.append(&rec(gsn, &vec![7; bytes]), gsn).unwrap();
            gsn += 1;
            end
        };
        // The first sync has no predecessor to pace against.
        let first = append(100);
        p.request_flush(first);
        assert!(durable_within(
            &p,
            first,
            std::time::Duration::from_secs(60)
        ));
        let syncs = p.stats().syncs;
        // A small request nobody waits on stays pending.
        let small = append(100);
        p.request_flush(small);
        assert!(!durable_within(
            &p,
            small,
            std::time::Duration::from_millis(200)
        ));
        assert_eq!(p.stats().syncs, syncs, "no sync within the interval");
        // A waiter ends the pause.
        // (A detached thread: if the rule were broken it would block for the
        // hour, and the assertion below must fail rather than wait for it.)
        let waiter = {
            let p = Arc::clone(&p);
            std::thread::spawn(move || p.wait_durable(small))
        };
        assert!(durable_within(
            &p,
            small,
            std::time::Duration::from_secs(60)
        ));
        waiter.join().unwrap().unwrap();
        assert_eq!(p.stats().syncs, syncs + 1);
        assert_eq!(
            p.stats().committer_syncs,
            0,
            "the writer synced for the waiter"
        );
        // A blocking committer does not wait for the writer: it syncs itself.
        let own = append(100);
        p.sync_to(own).unwrap();
        assert!(p.durable() >= own);
        assert_eq!(p.stats().syncs, syncs + 2);
        assert_eq!(p.stats().committer_syncs, 1, "the committer's own sync");
        // A batch of SYNC_BATCH bytes ends it too, without a waiter.
        let mut end = append(100);
        p.request_flush(end);
        while (end - own) < SYNC_BATCH as u64 {
            end = append(4000);
            p.request_flush(end);
        }
        assert!(durable_within(&p, end, std::time::Duration::from_secs(60)));
    }

    #[test]
    fn lazy_requests_wake_an_idle_writer_but_not_a_pacing_one() {
        let (_sim, p) = empty_partition(9);
        let mut gsn = 1;
        let mut append = || {
            let end = p.append(&rec(gsn, &[7; 100]), gsn).unwrap();
            gsn += 1;
            end
        };
        // Without pacing an idle writer must be woken: nobody else would
        // make a lazy (group) request durable.
        p.set_sync_interval(std::time::Duration::ZERO);
        let first = append();
        p.request_flush_lazily(first);
        assert!(durable_within(
            &p,
            first,
            std::time::Duration::from_secs(60)
        ));
        // Pacing for an hour after the next sync: a stream of lazy requests
        // (RFA's remote commits) joins the pause instead of waking the
        // writer for each one.
        p.set_sync_interval(std::time::Duration::from_secs(3600));
        let second = append();
        p.wait_durable(second).unwrap();
        // The writer may have gone idle rather than pacing (if it looked
        // before the waiter left); then the first lazy request would wake
        // it, and its group window's end would count as a second wake-up.
        // An eager request puts an idle writer into the pause too.
        let third = append();
        p.request_flush(third);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let woken = p.stats().writer_wakeups;
        let mut last = second;
        // 100 records stay below SYNC_BATCH, which would end the pause.
        for _ in 0..100 {
            last = append();
            p.request_flush_lazily(last);
            std::thread::yield_now();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        let extra = p.stats().writer_wakeups - woken;
        assert!(
            extra <= 1,
            "the writer woke {extra} times for lazy requests"
        );
        assert!(p.durable() < last, "they wait for the pause to end");
        // A blocked waiter still ends the pause.
        let waiter = {
            let p = Arc::clone(&p);
            std::thread::spawn(move || p.wait_durable(last))
        };
        assert!(durable_within(&p, last, std::time::Duration::from_secs(60)));
        waiter.join().unwrap().unwrap();
    }

    /// Lazy requests take no lock unless the writer is idle: each must
    /// still reach a writer that is going idle just then. Requests come
    /// at varying delays after the previous sync, so that some land while
    /// the writer checks for work; a lost wake-up leaves one never durable
    /// (nothing else wakes an idle writer).
    #[test]
    fn every_lazy_request_reaches_a_writer_going_idle() {
        let (_sim, p) = empty_partition(11);
        p.set_sync_interval(std::time::Duration::ZERO);
        let mut rng = StdRng::seed_from_u64(11);
        for gsn in 1..=400u64 {
            let end = p.append(&rec(gsn, &[3; 40]), gsn).unwrap();
            for _ in 0..rng.gen_range(0..2000) {
                std::hint::spin_loop();
            }
            p.request_flush_lazily(end);
            let t0 = std::time::Instant::now();
            while p.durable() < end {
                assert!(
                    t0.elapsed() < std::time::Duration::from_secs(10),
                    "lazy request {gsn} never made durable"
                );
                std::thread::yield_now();
            }
        }
    }

    /// Blocking committers (`sync_to`) write and sync the log themselves
    /// while the writer serves the appender's flush requests and waiters.
    /// Whoever writes, one write runs at a time and starts at the durable
    /// position (`write_chunks` asserts it), so the segments hold every
    /// record once and in order. Small segments make writes roll over too.
    #[test]
    fn committers_and_the_writer_take_turns_and_keep_the_stream_in_order() {
        let (sim, p) = empty_partition(10);
        p.set_sync_interval(std::time::Duration::ZERO);
        p.set_segment_size(16 << 10);
        const RECORDS: u64 = 3000;
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| {
                    while !stop.load(Ordering::Acquire) {
                        p.sync_to(p.appended()).unwrap();
                        std::thread::yield_now();
                    }
                });
            }
            for gsn in 1..=RECORDS {
                let end = p.append(&rec(gsn, &[gsn as u8; 50]), gsn).unwrap();
                if gsn % 3 == 0 {
                    p.request_flush(end);
                }
                if gsn % 50 == 0 {
                    p.sync_to(end).unwrap();
                }
                if gsn % 70 == 0 {
                    p.wait_durable(end).unwrap();
                }
                if gsn % 100 == 10 {
                    // Room for the writer to serve the requests.
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            stop.store(true, Ordering::Release);
        });
        p.wait_durable(p.appended()).unwrap();
        let stats = p.stats();
        assert!(stats.committer_syncs > 0, "{stats:?}");
        assert!(
            stats.syncs > stats.committer_syncs,
            "the writer synced too: {stats:?}"
        );
        assert_eq!(read_log(&sim, &p.dir), (1..=RECORDS).collect::<Vec<_>>());
    }

    /// `Wal::checkpoint_gsn` takes the smallest clock minus one as the GSN
    /// below which every record is already logged. While a structure
    /// modification's GSNs are reserved and not yet appended, the clock
    /// must therefore stay at the first of them, not the last.
    #[test]
    fn a_reserved_group_holds_the_clock_at_its_first_gsn() {
        let (sim, log_dir) = sim_log(11);
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let p = Partition::open(storage, log_dir, 0, 0, 10, Vec::new()).unwrap();
        let first = p.reserve_gsns(20, 3);
        assert_eq!(first, 21);
        assert_eq!(p.clock(), first, "the group's records are not appended");
        assert_eq!(p.flushed_gsn(100), 10, "nothing vouched for while reserved");
        let mut group = Vec::new();
        for gsn in first..first + 3 {
            group.extend_from_slice(&rec(gsn, b"smo"));
        }
        p.append_group(&group, 3, first + 2).unwrap();
        assert_eq!(p.clock(), first + 2);
        assert_eq!(p.reserve_gsn(0), first + 3);
    }

    /// `flushed_gsn` (other sessions) and `reserve_gsns` (the owner) take
    /// no common lock: a GSN the owner reserves must still lie above every
    /// value `flushed_gsn` vouched for while the GSN's record was not yet
    /// appended.
    #[test]
    fn flushed_gsn_never_vouches_for_a_reserved_gsn() {
        let (_sim, p) = empty_partition(10);
        p.set_sync_interval(std::time::Duration::ZERO);
        let vouched = AtomicU64::new(0);
        let done = AtomicBool::new(false);
        // Stops the checker however the owner's loop ends (a failed
        // assertion must fail the test, not leave the scope waiting).
        struct Done<'a>(&'a AtomicBool);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        std::thread::scope(|scope| {
            let _done = Done(&done);
            scope.spawn(|| {
                let mut global = 0;
                while !done.load(Ordering::Relaxed) {
                    // Other sessions' clocks run ahead of this one.
                    global += 3;
                    vouched.fetch_max(p.flushed_gsn(global), Ordering::SeqCst);
                }
            });
            for i in 0..20_000u64 {
                let gsn = p.reserve_gsn(0);
                let end = p.append(&rec(gsn, b"v"), gsn).unwrap();
                // Until the record is durable nothing may vouch for its
                // GSN; the yield lets a racing checker publish what it got.
                std::thread::yield_now();
                let seen = vouched.load(Ordering::SeqCst);
                assert!(
                    seen < gsn || p.durable() >= end,
                    "GSN {gsn} not durable, yet {seen} was vouched for"
                );
                // Often durable (and idle) again, so the vouching path runs.
                if i % 2 == 0 {
                    p.sync_to(end).unwrap();
                }
            }
        });
    }

    #[test]
    fn durable_records_survive_power_loss_and_unsynced_ones_may_not() {
        for direct in [false, true] {
            durable_records_survive_power_loss(direct);
        }
    }

    fn durable_records_survive_power_loss(direct: bool) {
        let (sim, log_dir) = sim_log_direct(3, direct);
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let p = Partition::open(Arc::clone(&storage), log_dir, 0, 0, 0, Vec::new()).unwrap();
        let mut durable_end = 0;
        for gsn in 1..=100 {
            let end = p.append(&rec(gsn, &[gsn as u8; 300]), gsn).unwrap();
            if gsn % 10 == 0 {
                p.wait_durable(end).unwrap();
                durable_end = end;
                assert!(p.durable() >= end);
                assert!(p.flushed_gsn(0) >= gsn);
            }
        }
        assert_eq!(p.flushed_gsn(0), 100);
        assert_eq!(
            p.flushed_gsn(150),
            150,
            "an idle partition follows the global clock"
        );
        let gsn = p.reserve_gsn(0);
        assert_eq!(gsn, 151);
        assert_eq!(p.flushed_gsn(200), 100, "a reserved GSN caps flushed_gsn");
        p.append(&rec(gsn, b"unsynced"), gsn).unwrap();
        assert_eq!(p.flushed_gsn(200), 100, "a pending record caps flushed_gsn");
        drop(p);
        sim.crash(CrashPolicy::DropAll);
        let gsns = read_log(&sim, &partition_dir(log_dir, 0));
        assert!(
            gsns.len() as u64 >= 100,
            "every synced record survives: {}",
            gsns.len()
        );
        assert_eq!(gsns[..100], (1..=100).collect::<Vec<_>>()[..]);
        assert!(durable_end > 0);
    }

    #[test]
    fn segments_roll_over_and_prune_keeps_the_newest() {
        let (sim, log_dir) = sim_log(4);
        let p = Partition::open(Arc::new(sim.clone()), log_dir, 3, 0, 0, Vec::new()).unwrap();
        p.set_segment_size(4 << 20);
        let big = vec![1u8; 60_000];
        let mut end = 0;
        for gsn in 1..=400 {
            end = p.append(&rec(gsn, &big), gsn).unwrap();
            if gsn % 50 == 0 {
                p.wait_durable(end).unwrap();
            }
        }
        p.wait_durable(end).unwrap();
        let dir = partition_dir(log_dir, 3);
        let before = segment::list_segments(&sim, &dir).unwrap().len();
        assert!(before >= 3, "{before} segments for {end} bytes");
        assert_eq!(read_log(&sim, &dir), (1..=400).collect::<Vec<_>>());
        let syncs = sim.stats().dir_syncs;
        let removed = p.prune_below(u64::MAX).unwrap();
        assert!(removed > 0);
        let after = segment::list_segments(&sim, &dir).unwrap();
        assert_eq!(after.len(), 1, "the newest segment is kept");
        assert!(
            sim.stats().dir_syncs - syncs >= (before - 1) as u64,
            "each deletion is durable before the next: the segments on disk stay contiguous"
        );
        assert_eq!(p.disk_bytes(), end - after[0].0);
        p.shutdown().unwrap();
    }

    /// Pruned segments are recycled: renamed out of the log with their
    /// header zeroed, two kept (the rest deleted), and the next segments
    /// are made from them, reading back like any segment although the old
    /// records stay behind the new ones. The queue lives in memory: files a
    /// crash left queued are removed when the partition opens again.
    /// Without zero-filling, recycling works the same, and no spare is ever
    /// zero-filled: the segments before the first prune grow.
    #[test]
    fn pruned_segments_are_recycled_and_a_reopen_removes_leftovers() {
        for direct in [false, true] {
            for zero_fill in [true, false] {
                pruned_segments_are_recycled(direct, zero_fill);
            }
        }
    }

    fn pruned_segments_are_recycled(direct: bool, zero_fill: bool) {
        let (sim, log_dir) = sim_log_direct(13, direct);
        let p = Partition::open(Arc::new(sim.clone()), log_dir, 5, 0, 0, Vec::new()).unwrap();
        let size = 64 << 10;
        p.set_zero_fill(zero_fill);
        p.set_segment_size(size);
        let dir = partition_dir(log_dir, 5);
        let recycled = || -> Vec<PathBuf> {
            sim.list_dir(&dir)
                .unwrap()
                .into_iter()
                .filter(|f| crate::logstore::spare::is_recycled(f))
                .collect()
        };
        let big = vec![3u8; 20_000];
        let mut gsn = 0;
        let mut write = |n: u64| {
            for _ in 0..n {
                gsn += 1;
                let end = p.append(&rec(gsn, &big), gsn).unwrap();
                p.wait_durable(end).unwrap();
            }
        };
        write(40);
        assert!(segment::list_segments(&sim, &dir).unwrap().len() >= 5);
        let spare = dir.join(crate::logstore::spare::SPARE_NAME);
        if !zero_fill {
            assert_eq!(p.stats().segments_zero_filled, 0);
            assert!(!p.spare.was_started() && !sim.exists(&spare));
        }
        p.prune_below(u64::MAX).unwrap();
        let queued = recycled();
        assert_eq!(queued.len(), 2, "two kept, the rest deleted");
        for f in &queued {
            let bytes = sim.read_current(f).unwrap();
            assert_eq!(bytes[..segment::HEADER_SIZE as usize], [0; 32], "{f:?}");
            assert!(bytes.len() as u64 >= segment::HEADER_SIZE + size);
        }
        assert_eq!(p.stats().segments_recycled, 0);
        write(12);
        assert_eq!(p.stats().segments_recycled, 2, "{:?}", p.stats());
        assert!(recycled().is_empty());
        let gsns = read_log(&sim, &dir);
        assert_eq!(gsns.last(), Some(&52));
        assert!(gsns.windows(2).all(|w| w[1] == w[0] + 1), "{gsns:?}");
        assert_eq!(!zero_fill, !p.spare.was_started() && !sim.exists(&spare));
        // Queue two more and crash: the files stay, the queue is gone.
        write(12);
        p.prune_below(u64::MAX).unwrap();
        assert_eq!(recycled().len(), 2);
        drop(p);
        sim.crash(CrashPolicy::KeepAll);
        assert_eq!(recycled().len(), 2);
        let p = Partition::open(Arc::new(sim.clone()), log_dir, 5, 0, 0, Vec::new()).unwrap();
        assert!(recycled().is_empty(), "the reopen removed them");
        drop(p);
    }

    /// With zero-filling off no thread would ever replace a spare a crash
    /// left behind, so the first `want` (here from `set_segment_size`)
    /// removes it.
    #[test]
    fn without_zero_fill_a_spare_a_crash_left_is_removed() {
        let (sim, log_dir) = sim_log_direct(17, false);
        let spare = partition_dir(log_dir, 4).join(crate::logstore::spare::SPARE_NAME);
        let p = Partition::open(Arc::new(sim.clone()), log_dir, 4, 0, 0, Vec::new()).unwrap();
        p.set_segment_size(64 << 10);
        wait_for_spare(&p);
        drop(p);
        sim.crash(CrashPolicy::KeepAll);
        assert!(sim.exists(&spare), "the crash left the spare");
        let p = Partition::open(Arc::new(sim.clone()), log_dir, 4, 0, 0, Vec::new()).unwrap();
        p.set_zero_fill(false);
        p.set_segment_size(64 << 10);
        assert!(!sim.exists(&spare));
        assert!(!p.spare.was_started());
    }

    /// Segment preallocation: once the spare is ready, the next segment is
    /// that zero-filled file renamed (its file is longer than its records),
    /// its records read back like any segment's (zeros after them are a
    /// clean end, also after a crash), and shutdown removes the spare.
    #[test]
    fn a_new_segment_is_the_zero_filled_spare_renamed() {
        for direct in [false, true] {
            a_new_segment_is_the_spare_renamed(direct);
        }
    }

    fn a_new_segment_is_the_spare_renamed(direct: bool) {
        let (sim, log_dir) = sim_log_direct(6, direct);
        let p = Partition::open(Arc::new(sim.clone()), log_dir, 2, 0, 0, Vec::new()).unwrap();
        let size = 256 << 10;
        p.set_segment_size(size);
        let dir = partition_dir(log_dir, 2);
        let spare = dir.join(crate::logstore::spare::SPARE_NAME);
        // Six records fill a segment; the last segment holds three, within
        // its preallocation.
        let big = vec![7u8; 50_000];
        let mut end = 0;
        for gsn in 1..=9 {
            if gsn % 6 == 1 {
                wait_for_spare(&p);
            }
            end = p.append(&rec(gsn, &big), gsn).unwrap();
            p.wait_durable(end).unwrap();
        }
        let segments = segment::list_segments(&sim, &dir).unwrap();
        assert!(segments.len() >= 2, "{segments:?}");
        let mut preallocated = 0;
        for (start, path) in &segments {
            let file_len = sim.read_current(path).unwrap().len() as u64;
            let next = segments
                .iter()
                .find(|(s, _)| s > start)
                .map_or(end, |(s, _)| *s);
            let records = segment::HEADER_SIZE + next - start;
            assert!(file_len >= records, "{path:?}");
            if file_len >= segment::HEADER_SIZE + size && file_len > records {
                preallocated += 1;
            }
        }
        assert!(
            preallocated >= 1,
            "a segment taken from the spare is preallocated: {segments:?}"
        );
        assert_eq!(read_log(&sim, &dir), (1..=9).collect::<Vec<_>>());
        drop(p);
        sim.crash(CrashPolicy::DropAll);
        assert_eq!(
            read_log(&sim, &dir),
            (1..=9).collect::<Vec<_>>(),
            "synced records survive, the zeros after them scan as a clean end"
        );
        let p = Partition::open(Arc::new(sim.clone()), log_dir, 2, end, 9, Vec::new()).unwrap();
        p.set_segment_size(size);
        wait_for_spare(&p);
        assert!(sim.exists(&spare));
        p.shutdown().unwrap();
        assert!(!sim.exists(&spare), "shutdown removes the spare");
    }

    /// A segment created while no spare was ready grows as it fills, and
    /// gives way to the spare as soon as one is ready, however small it
    /// still is: its syncs cost more (they commit the file's size).
    #[test]
    fn a_growing_segment_gives_way_to_a_spare_once_one_is_ready() {
        for direct in [false, true] {
            a_growing_segment_gives_way(direct);
        }
    }

    fn a_growing_segment_gives_way(direct: bool) {
        let (sim, log_dir) = sim_log_direct(11, direct);
        let p = Partition::open(Arc::new(sim.clone()), log_dir, 3, 0, 0, Vec::new()).unwrap();
        // No `set_segment_size`: no spare is wanted before the first write.
        let dir = partition_dir(log_dir, 3);
        let first = p.append(&rec(1, b"first"), 1).unwrap();
        p.wait_durable(first).unwrap();
        wait_for_spare(&p);
        let second = p.append(&rec(2, b"second"), 2).unwrap();
        p.wait_durable(second).unwrap();
        let segments = segment::list_segments(&sim, &dir).unwrap();
        assert_eq!(segments.len(), 2, "{segments:?}");
        let len = |i: usize| sim.read_current(&segments[i].1).unwrap().len() as u64;
        // An `O_DIRECT` file grows by whole blocks, zeros after the records.
        let grown = segment::HEADER_SIZE + first;
        let grown = if direct {
            grown.next_multiple_of(crate::io::IO_ALIGN as u64)
        } else {
            grown
        };
        assert_eq!(len(0), grown, "the first segment grew");
        assert_eq!(segments[1].0, first);
        assert!(
            len(1) >= segment::HEADER_SIZE + SEGMENT_SIZE,
            "the second is the spare"
        );
        assert_eq!(read_log(&sim, &dir), vec![1, 2]);
        assert_eq!(p.stats().durable_bytes, second);
    }

    /// Regression test (`waypoint simulate` seed 2632): a crash can keep a
    /// new segment's header but none of its records, and recovery then
    /// hands the partition that empty segment as its end. The growing
    /// segment used to give way to a spare at the first write even while
    /// empty, and the spare took its name: the partition listed one file
    /// twice, so a clean close failed to remove it the second time (and a
    /// prune of the empty entry would have deleted the live segment).
    #[test]
    fn an_empty_recovered_segment_keeps_its_file_when_a_spare_is_ready() {
        for direct in [false, true] {
            an_empty_recovered_segment_keeps_its_file(direct);
        }
    }

    fn an_empty_recovered_segment_keeps_its_file(direct: bool) {
        let (sim, log_dir) = sim_log_direct(14, direct);
        let dir = partition_dir(log_dir, 6);
        sim.create_dir_all(&dir).unwrap();
        let empty = sim
            .open(&dir.join(segment_name(0)), OpenMode::CreateNew)
            .unwrap();
        empty
            .write_at(&segment::encode_header(SchemeKind::PerWorker, 6, 0), 0)
            .unwrap();
        empty.sync_data().unwrap();
        sim.sync_dir(&dir).unwrap();
        let p = Partition::open(Arc::new(sim.clone()), log_dir, 6, 0, 0, vec![(0, 0, 0)]).unwrap();
        p.set_segment_size(64 << 10);
        wait_for_spare(&p);
        let first = p.append(&rec(1, b"first"), 1).unwrap();
        p.wait_durable(first).unwrap();
        let second = p.append(&rec(2, b"second"), 2).unwrap();
        p.wait_durable(second).unwrap();
        assert_eq!(read_log(&sim, &dir), vec![1, 2]);
        let starts: Vec<u64> = p.segments.lock().iter().map(|s| s.start).collect();
        assert_eq!(
            starts,
            vec![0, first],
            "the empty segment grew, then gave way"
        );
        p.shutdown().unwrap();
        p.remove_all_segments().unwrap();
        assert!(segment::list_segments(&sim, &dir).unwrap().is_empty());
    }

    /// With `O_DIRECT` log files every write is whole blocks, so each one
    /// rewrites the block holding the log's end, durable records included.
    /// However a power loss tears such a rewrite (sector by sector, any
    /// subset kept), the records synced before it read back unchanged and
    /// the scan ends cleanly or at a torn tail, never as corruption.
    #[test]
    fn rewriting_the_last_block_never_loses_a_durable_record() {
        for seed in 0..40 {
            let (sim, log_dir) = sim_log_direct(100 + seed, true);
            sim.set_sector_size(Some(512));
            let p = Partition::open(Arc::new(sim.clone()), log_dir, 1, 0, 0, Vec::new()).unwrap();
            p.set_segment_size(16 << 10);
            let mut synced = 0;
            for gsn in 1..=60u64 {
                // Records of 64..~1 KiB: many end inside a block.
                let len = (gsn as usize * 37) % 1000;
                let end = p.append(&rec(gsn, &vec![gsn as u8; len]), gsn).unwrap();
                if gsn % 3 == 0 {
                    p.wait_durable(end).unwrap();
                    synced = gsn;
                }
            }
            drop(p);
            sim.crash(CrashPolicy::Random {
                keep: 0.5,
                tear: true,
            });
            let gsns = read_log(&sim, &partition_dir(log_dir, 1));
            assert!(gsns.len() as u64 >= synced, "seed {seed}: {gsns:?}");
            assert_eq!(
                gsns,
                (1..=gsns.len() as u64).collect::<Vec<_>>(),
                "seed {seed}: a prefix of the log"
            );
        }
    }

    /// An `O_DIRECT` segment left by an earlier run has an unknown partial
    /// last block, so the reopened partition starts a new segment rather
    /// than append to it (a non-empty one), and both read back in order.
    #[test]
    fn a_direct_log_starts_a_new_segment_after_a_reopen() {
        let (sim, log_dir) = sim_log_direct(16, true);
        let dir = partition_dir(log_dir, 4);
        let p = Partition::open(Arc::new(sim.clone()), log_dir, 4, 0, 0, Vec::new()).unwrap();
        p.set_preallocate(false);
        let end = p.append(&rec(1, b"first"), 1).unwrap();
        p.wait_durable(end).unwrap();
        drop(p);
        sim.crash(CrashPolicy::DropAll);
        let p =
            Partition::open(Arc::new(sim.clone()), log_dir, 4, end, 1, vec![(0, end, 1)]).unwrap();
        p.set_preallocate(false);
        let second = p.append(&rec(2, b"second"), 2).unwrap();
        p.wait_durable(second).unwrap();
        let starts: Vec<u64> = segment::list_segments(&sim, &dir)
            .unwrap()
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        assert_eq!(starts, vec![0, end]);
        assert_eq!(read_log(&sim, &dir), vec![1, 2]);
        p.shutdown().unwrap();
    }

    /// A clean close deletes the segments of a partition that recovery
    /// found but no session reopened (`Wal::remove_all_segments`) oldest
    /// first, one directory sync per deletion, like `prune_below`: with a
    /// single sync at the end, a crash could keep the deletion of a middle
    /// segment only, and recovery refuses the gap (found in review).
    #[test]
    fn a_clean_close_deletes_an_unopened_partitions_segments_one_at_a_time() {
        let (sim, log_dir) = sim_log(15);
        let p = Partition::open(Arc::new(sim.clone()), log_dir, 7, 0, 0, Vec::new()).unwrap();
        p.set_preallocate(false);
        p.set_segment_size(1000);
        for gsn in 1..=4 {
            let end = p.append(&rec(gsn, &[7; 1000]), gsn).unwrap();
            p.wait_durable(end).unwrap();
        }
        p.shutdown().unwrap();
        let dir = partition_dir(log_dir, 7);
        let segments = segment::list_segments(&sim, &dir).unwrap().len();
        assert!(segments >= 3, "{segments} segments");
        // A log that recovered partition 7 and never reopened it.
        let wal = crate::wal::Wal::new(
            Arc::new(sim.clone()),
            log_dir,
            crate::wal::CommitProtocol::Rfa,
            Vec::new(),
            0,
        )
        .unwrap();
        let syncs = sim.stats().dir_syncs;
        wal.remove_all_segments().unwrap();
        assert!(segment::list_segments(&sim, &dir).unwrap().is_empty());
        let synced = sim.stats().dir_syncs - syncs;
        assert!(
            synced >= segments as u64,
            "{synced} directory syncs for {segments} deleted segments"
        );
    }

    /// With preallocation off no spare is made and no thread is started
    /// for it: segments are created empty and grow.
    #[test]
    fn without_preallocation_no_spare_thread_runs() {
        let (sim, log_dir) = sim_log(12);
        let p = Partition::open(Arc::new(sim.clone()), log_dir, 4, 0, 0, Vec::new()).unwrap();
        p.set_preallocate(false);
        p.set_segment_size(64 << 10);
        let big = vec![7u8; 50_000];
        for gsn in 1..=4 {
            let end = p.append(&rec(gsn, &big), gsn).unwrap();
            p.wait_durable(end).unwrap();
        }
        let dir = partition_dir(log_dir, 4);
        assert!(segment::list_segments(&sim, &dir).unwrap().len() >= 2);
        assert!(!p.spare.was_started());
        assert!(!sim.exists(&dir.join(crate::logstore::spare::SPARE_NAME)));
        p.shutdown().unwrap();
    }

    /// A thread that is unwinding already may still commit (a `Drop` that
    /// commits during a panic): its write is not taken for a panic of the
    /// write, and the partition stays healthy.
    #[test]
    fn a_commit_during_unwinding_does_not_poison_the_log() {
        let (_sim, log_dir) = sim_log(13);
        let p = Partition::open(Arc::new(_sim.clone()), log_dir, 5, 0, 0, Vec::new()).unwrap();
        struct SyncOnDrop<'a>(&'a Partition, u64);
        impl Drop for SyncOnDrop<'_> {
            fn drop(&mut self) {
                self.0.sync_to(self.1).unwrap();
            }
        }
        let first = p.append(&rec(1, b"first"), 1).unwrap();
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _commit = SyncOnDrop(&p, first);
            panic!("a panic while a commit is pending (expected by this test)");
        }));
        assert!(unwound.is_err());
        p.check_healthy().unwrap();
        assert!(p.durable() >= first);
        assert_eq!(p.stats().committer_syncs, 1);
        let second = p.append(&rec(2, b"second"), 2).unwrap();
        p.wait_durable(second).unwrap();
    }

    /// A preallocation that fails (here: ENOSPC on the spare) only stops
    /// preallocating: segments are created empty and grow, the log goes
    /// on until it needs space itself, and no spare is left behind.
    #[test]
    fn a_failed_preallocation_falls_back_to_growing_segments() {
        let (sim, log_dir) = sim_log(7);
        // Room for eight spares of 64 KiB (so one is attempted) and a few
        // thousand records.
        sim.set_space_limit(Some(540 << 10));
        sim.inject(
            crate::io::Fault::at(sim.op_count(), crate::io::FaultKind::Enospc)
                .on_path(crate::logstore::spare::SPARE_NAME),
        );
        let p = Partition::open(Arc::new(sim.clone()), log_dir, 1, 0, 0, Vec::new()).unwrap();
        p.set_segment_size(64 << 10);
        let dir = partition_dir(log_dir, 1);
        let spare = dir.join(crate::logstore::spare::SPARE_NAME);
        let t0 = std::time::Instant::now();
        while sim.exists(&spare) || !p.spare.has_stopped() {
            assert!(
                t0.elapsed().as_secs() < 10,
                "the preallocation never failed"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let mut gsn = 0;
        let e = loop {
            gsn += 1;
            let end = p.append(&rec(gsn, &[5; 100]), gsn).unwrap();
            if let Err(e) = p.wait_durable(end) {
                break e;
            }
            assert!(gsn < 20_000, "the disk never filled up");
        };
        assert!(e.is_log_full(), "{e:?}");
        assert!(gsn > 1000, "the log used the space the spare could not");
        assert_eq!(
            read_log(&sim, &dir)[..gsn as usize - 1],
            (1..gsn).collect::<Vec<_>>()[..]
        );
    }

    /// On a disk with room for fewer than eight spares none is
    /// zero-filled: every byte of it stays for the log, which grows its
    /// segments as they fill.
    #[test]
    fn a_small_disk_gets_no_zero_filled_spare() {
        let (sim, log_dir) = sim_log(8);
        sim.set_space_limit(Some(256 << 10));
        let p = Partition::open(Arc::new(sim.clone()), log_dir, 1, 0, 0, Vec::new()).unwrap();
        p.set_segment_size(64 << 10);
        let dir = partition_dir(log_dir, 1);
        let spare = dir.join(crate::logstore::spare::SPARE_NAME);
        let mut gsn = 0;
        while gsn < 1500 {
            gsn += 1;
            let end = p.append(&rec(gsn, &[5; 100]), gsn).unwrap();
            p.wait_durable(end).unwrap();
            assert!(!sim.exists(&spare), "a spare on a disk too small for eight");
        }
        assert!(p.spare.was_started() && !p.spare.has_stopped());
        assert_eq!(p.spare.taken(), (0, 0));
    }

    #[test]
    fn failed_sync_poisons_and_never_reports_durability() {
        let (sim, log_dir) = sim_log(5);
        let p = Partition::open(Arc::new(sim.clone()), log_dir, 0, 0, 0, Vec::new()).unwrap();
        let end = p.append(&rec(1, b"a"), 1).unwrap();
        p.wait_durable(end).unwrap();
        sim.inject(crate::io::Fault::at(sim.op_count(), crate::io::FaultKind::Eio).on_path(".wal"));
        let end = p.append(&rec(2, b"b"), 2).unwrap();
        let r = p.wait_durable(end);
        assert!(matches!(r, Err(Error::Poisoned { .. })), "{r:?}");
        assert!(p.durable() < end);
        assert!(p.append(&rec(3, b"c"), 3).is_err());
    }
}
