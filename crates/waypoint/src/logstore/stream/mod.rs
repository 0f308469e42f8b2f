//! A durable stream of frames: the log one writer appends to, written by a
//! writer thread to segment files, with a durable watermark and waits on
//! it (seed 000 §3.1, Fig. 2: a log partition's three stages).
//!
//! - `ring`: stage 1, the in-memory chunk ring the owner appends to.
//! - `writer`: the writer thread, sync pacing and group windows, blocking
//!   committers that sync themselves, the waits on durability.
//! - `files`: stages 2 and 3, the segment files and their retirement.
//! - `failure`: a failed write makes the stream full or poisoned.
//! - `reserve`: space reserved under the lock, filled outside it by any
//!   number of threads, released for writing in order (a central log's
//!   decoupled buffer fill).
//!
//! Positions are byte offsets in the stream. Each append carries a *mark*,
//! a number the scheme gives what it appends (non-decreasing; the
//! per-worker WAL's GSN): the stream keeps the largest per segment, so the
//! scheme can retire segments below a mark ([`Stream::prune_below`]), and
//! the largest durable one ([`Stream::durable_mark`]). A *note* is a value
//! the scheme attaches to a position, published once that position is
//! durable ([`Stream::note_at`]; the WAL's commit TIDs).
//!
//! Invariants: `durable` only advances after `sync_data` of every segment
//! holding bytes below it returned Ok (and, for a new segment, after its
//! directory entry was synced); marks are appended in order; after a
//! failed write or sync the stream never reports durability again.
//! Nothing here knows what the frames mean.

mod failure;
mod files;
mod reserve;
mod cpu;
mod ring;
mod writer;

pub use failure::FullFlag;
pub use files::SEGMENT_SIZE;
pub use reserve::Reserved;
pub use ring::CHUNK_SIZE;
pub use writer::{BUSY_CPU_SHARE, GROUP_WINDOW, SYNC_BATCH, SYNC_INTERVAL, SYNC_PATIENCE, SYNC_REQUESTS};

use super::frame;
use crate::error::{Error, IoOp, Result};
use crate::ids::LogPos;
use crate::io::Storage;
use crate::persist::SchemeKind;
use failure::Failure;
use files::Files;
use parking_lot::{Condvar, Mutex};
use ring::{Padded, Stage1, WriterWait};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Counters of one stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamStats {
    pub appended_bytes: u64,
    pub durable_bytes: u64,
    /// Frames appended.
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

/// One durable stream of frames (see the module documentation).
pub struct Stream {
    id: u32,
    dir: PathBuf,
    stage1: Mutex<Stage1>,
    /// Position group committers wait for; flushed within a group window.
    /// Outside `stage1`: other sessions' commits raise it (RFA's remote
    /// flushes, about every other TPC-C commit), and taking the lock the
    /// owner appends under parked a worker for 1.7 ms at a time when its
    /// holder was preempted (2.8% of worker time; docs/decisions/measurements.md, session
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
    /// Largest mark of a durable frame.
    durable_mark: AtomicU64,
    records: AtomicU64,
    syncs: AtomicU64,
    committer_syncs: AtomicU64,
    writer_wakeups: AtomicU64,
    /// Largest note whose position is durable.
    durable_note: AtomicU64,
    /// Least time between the starts of two syncs while nobody is blocked
    /// waiting (`PerWorkerOptions::log_sync_interval`), in microseconds.
    sync_interval_us: AtomicU64,
    /// A pause also ends once the oldest waiting request has waited this
    /// many times what the last syncs took (`SYNC_PATIENCE`; 0: never),
    /// while the process uses less than `busy_cpu_share` of the cores
    /// (an `f64`'s bits).
    sync_patience: AtomicU64,
    busy_cpu_share: AtomicU64,
    files: Files,
    failure: Mutex<Option<Failure>>,
    failed: AtomicBool,
    /// The log's flag raised when a stream runs out of space.
    full_flag: std::sync::OnceLock<Arc<FullFlag>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Log-wide count of bytes moved to stage 2 (the checkpointer's clock).
    stage2: std::sync::OnceLock<Arc<AtomicU64>>,
    /// Test-only: reservations count as released at once (`reserve`).
    #[cfg(feature = "testing")]
    broken_early_release: AtomicBool,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stream({} at {})", self.id, self.dir.display())
    }
}

impl Stream {
    /// Open stream `id` of `scheme` in directory `dir` (created, and its
    /// parent synced, if missing), whose log ends at `end` (found by
    /// recovery; the next frame goes there) with the largest durable mark
    /// `mark`, and start its writer thread `waypoint-log-{id}`. The
    /// `existing` segments recovery kept, as (start, length, max mark), are
    /// kept for pruning.
    pub fn open(
        storage: Arc<dyn Storage>,
        dir: PathBuf,
        scheme: SchemeKind,
        id: u32,
        end: LogPos,
        mark: u64,
        existing: Vec<(LogPos, u64, u64)>,
    ) -> Result<Arc<Self>> {
        if !storage.exists(&dir) {
            storage.create_dir_all(&dir)?;
            if let Some(parent) = dir.parent() {
                storage.sync_dir(parent)?;
            }
        }
        let files = Files::open(Arc::clone(&storage), dir.clone(), scheme, id, existing)?;
        let stream = Arc::new(Stream {
            id,
            dir,
            stage1: Mutex::new(Stage1::new(end)),
            lazy_requested: Padded(AtomicU64::new(end.get())),
            writer_idle: AtomicBool::new(false),
            work: Condvar::new(),
            durable_cv: Condvar::new(),
            appended: AtomicU64::new(end.get()),
            durable: AtomicU64::new(end.get()),
            durable_mark: AtomicU64::new(mark),
            records: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            committer_syncs: AtomicU64::new(0),
            writer_wakeups: AtomicU64::new(0),
            durable_note: AtomicU64::new(0),
            sync_interval_us: AtomicU64::new(SYNC_INTERVAL.as_micros() as u64),
            sync_patience: AtomicU64::new(SYNC_PATIENCE),
            busy_cpu_share: AtomicU64::new(BUSY_CPU_SHARE.to_bits()),
            files,
            failure: Mutex::new(None),
            failed: AtomicBool::new(false),
            full_flag: std::sync::OnceLock::new(),
            writer: Mutex::new(None),
            stage2: std::sync::OnceLock::new(),
            #[cfg(feature = "testing")]
            broken_early_release: AtomicBool::new(false),
        });
        let writer = Arc::clone(&stream);
        let handle = std::thread::Builder::new()
            .name(format!("waypoint-log-{id}"))
            .spawn(move || writer.writer_loop())
            .map_err(|e| Error::io(IoOp::Open, "log writer thread", None, e))?;
        *stream.writer.lock() = Some(handle);
        Ok(stream)
    }

    #[inline]
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The stream's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Move retired segments to `dir` instead of deleting them.
    pub fn set_archive(&self, dir: PathBuf) {
        self.files.set_archive(dir);
    }

    /// Count the bytes this stream writes to stage 2 into `counter` too.
    pub fn set_stage2_counter(&self, counter: Arc<AtomicU64>) {
        let _ = self.stage2.set(counter);
    }

    /// Start a new segment once the current one exceeds `bytes`.
    pub fn set_segment_size(&self, bytes: u64) {
        self.files.set_segment_size(bytes);
    }

    /// Take new segments from a preallocated spare (the default), or
    /// create them empty. Set before `set_segment_size`, which starts the
    /// first preallocation.
    pub fn set_preallocate(&self, on: bool) {
        self.files.set_preallocate(on);
    }

    /// With preallocation on: zero-fill a spare whenever no pruned segment
    /// is queued for reuse (the default), or let new segments grow until
    /// one is (`PerWorkerOptions::wal_zero_fill`). Set before
    /// `set_segment_size`.
    pub fn set_zero_fill(&self, on: bool) {
        self.files.spare.set_zero_fill(on);
    }

    /// Start syncs at most every `interval` while nobody is blocked waiting
    /// for durability (zero: sync whenever there is something to sync).
    pub fn set_sync_interval(&self, interval: std::time::Duration) {
        let us = u64::try_from(interval.as_micros()).unwrap_or(u64::MAX);
        self.sync_interval_us.store(us, Ordering::Relaxed);
    }

    /// End a pacing pause once the oldest waiting flush request has
    /// waited `syncs` times what a sync takes (0: only the interval, a
    /// waiter or a batch end it).
    pub fn set_sync_patience(&self, syncs: u64) {
        self.sync_patience.store(syncs, Ordering::Relaxed);
    }

    /// Patience applies only while the process uses less than `share` of
    /// the cores' time (`BUSY_CPU_SHARE`; above 1: always, 0: never).
    pub fn set_busy_cpu_share(&self, share: f64) {
        self.busy_cpu_share.store(share.to_bits(), Ordering::Relaxed);
    }

    #[inline]
    pub fn appended(&self) -> LogPos {
        LogPos::new(self.appended.load(Ordering::Acquire))
    }

    #[inline]
    pub fn durable(&self) -> LogPos {
        LogPos::new(self.durable.load(Ordering::Acquire))
    }

    /// The largest mark of a durable frame (at least the mark the stream
    /// was opened with). Raised only after `durable` covers the frame.
    #[inline]
    pub fn durable_mark(&self) -> u64 {
        self.durable_mark.load(Ordering::Acquire)
    }

    /// Every appended byte is durable. `durable` is read first: if it then
    /// equals `appended`, nothing was appended in between either.
    #[inline]
    pub fn all_durable(&self) -> bool {
        self.durable.load(Ordering::Acquire) == self.appended.load(Ordering::Acquire)
    }

    /// Append `count` sealed frames (back to back in `frames`) whose
    /// largest mark is `max_mark`, as one unit: they land in one chunk, so
    /// they are written and synced all or none, and the durable position
    /// never falls between them. Returns the stream position after them,
    /// which `appended` shows before this returns. Only the stream's owner
    /// appends.
    pub fn append_frames(&self, frames: &[u8], count: u64, max_mark: u64) -> Result<LogPos> {
        self.check_healthy()?;
        let mut s = self.stage1.lock();
        Ok(self.append_locked(&mut s, frames, count, max_mark))
    }

    /// [`Stream::append_frames`] and [`Stream::request_flush`] of the
    /// frames' end under one acquisition of the stage-1 lock: a committer
    /// that appends while holding other locks (a call holds its
    /// partitions: `procedure::order`) does not queue on the stage-1 lock
    /// a second time with them held.
    pub fn append_frames_and_request(
        &self,
        frames: &[u8],
        count: u64,
        max_mark: u64,
    ) -> Result<LogPos> {
        self.check_healthy()?;
        let mut s = self.stage1.lock();
        let end = self.append_locked(&mut s, frames, count, max_mark);
        self.request_locked(&mut s, end);
        Ok(end)
    }

    fn append_locked(&self, s: &mut Stage1, frames: &[u8], count: u64, max_mark: u64) -> LogPos {
        if !s.current.bytes.is_empty() && s.current.bytes.len() + frames.len() > CHUNK_SIZE {
            s.seal_current();
        }
        debug_assert!(
            max_mark >= s.current.max_mark,
            "frames of a stream are appended in mark order"
        );
        let before = s.current.bytes.len();
        s.current.bytes.extend_from_slice(frames);
        // Only here is the frames' stream position known.
        let at = s.current.start.advance(before as u64);
        frame::place_at(&mut s.current.bytes[before..], at);
        if s.writer == WriterWait::Pacing
            && before < SYNC_BATCH
            && s.current.bytes.len() >= SYNC_BATCH
        {
            self.work.notify_one();
        }
        s.current.max_mark = s.current.max_mark.max(max_mark);
        let end = s.end();
        self.appended.store(end.get(), Ordering::Release);
        // Only appends change the count, under the stage-1 lock: no locked
        // add, which would wait for the frames' stores to drain.
        self.records.store(
            self.records.load(Ordering::Relaxed) + count,
            Ordering::Relaxed,
        );
        if s.current.bytes.len() >= CHUNK_SIZE {
            s.seal_current();
            self.work.notify_one();
        }
        end
    }

    /// Publish `value` in [`Stream::durable_note`] once the stream is
    /// durable up to `end` (at once if it is).
    pub fn note_at(&self, end: LogPos, value: u64) {
        let mut s = self.stage1.lock();
        if self.durable() >= end {
            self.durable_note.fetch_max(value, Ordering::AcqRel);
        } else {
            s.notes.push_back((end, value));
        }
    }

    /// [`Stream::note_at`] and, if `request`, [`Stream::request_flush`] of
    /// `end`, under one acquisition of the stage-1 lock (a commit did
    /// three a record: append, note, request; each one the writer held
    /// could park the committer).
    pub fn note_at_and_request(&self, end: LogPos, value: u64, request: bool) {
        let mut s = self.stage1.lock();
        if self.durable() >= end {
            self.durable_note.fetch_max(value, Ordering::AcqRel);
            return;
        }
        s.notes.push_back((end, value));
        if request {
            self.request_locked(&mut s, end);
        }
    }

    /// Publish `value` now: the caller knows what it stands for is durable.
    #[inline]
    pub fn raise_note(&self, value: u64) {
        self.durable_note.fetch_max(value, Ordering::AcqRel);
    }

    /// The largest note published. Notes that grow with their positions
    /// (the WAL's commit TIDs do) are all durable up to it.
    #[inline]
    pub fn durable_note(&self) -> u64 {
        self.durable_note.load(Ordering::Acquire)
    }

    /// Retire whole segments whose frames all have marks below `mark`
    /// (never the newest, nor one that recovery could still need); returns
    /// the bytes removed.
    pub fn prune_below(&self, mark: u64) -> Result<u64> {
        self.files.prune_below(mark)
    }

    /// The position up to which this stream is durable, if files with
    /// durable names hold it (`None` while no segment is named, e.g. a
    /// recovered stream without segments, whose `durable` is only where
    /// its stream resumes). What a checkpoint records as synced.
    pub fn synced_position(&self) -> Option<LogPos> {
        // Read the flag first: `durable` only grows, and every value it
        // takes after a segment was named is held by named segments.
        self.files
            .named_segment
            .load(Ordering::Acquire)
            .then(|| self.durable())
    }

    /// Retire every segment, the newest too, one at a time (each synced
    /// before the next, as pruning does). Only after `shutdown` and only
    /// when no frame is needed (a clean close).
    pub fn remove_all_segments(&self) -> Result<()> {
        self.files.remove_all()
    }

    /// Bytes of frames on disk.
    pub fn disk_bytes(&self) -> u64 {
        self.files.disk_bytes()
    }

    pub fn stats(&self) -> StreamStats {
        let (segments_recycled, segments_zero_filled) = self.files.spare.taken();
        StreamStats {
            appended_bytes: self.appended().get(),
            durable_bytes: self.durable().get(),
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
        flushed.and(self.files.spare.shutdown())
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.stage1.lock().shutdown = true;
        self.work.notify_all();
        self.files.spare.stop();
    }
}

#[cfg(test)]
mod tests;
