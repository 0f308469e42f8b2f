//! Who writes a stream's chunks, and when: its writer thread with sync
//! pacing and group windows, and blocking committers that write and sync
//! themselves; the waits on the durable position (seed 000 §3.1, §3.2's
//! group commit).
//!
//! Invariants: one write is in progress at a time, by the writer or by a
//! committer, and each starts at `durable` (so chunks reach the segments
//! in stream order); `durable` advances only after the write's syncs
//! returned Ok, and before the marks it vouches for; a request or waiter
//! that needs the writer awake wakes it, and one the writer would find
//! anyway when its current wait ends does not.

use super::failure::PoisonOnPanic;
use super::ring::{Chunk, Stage1, WriterWait, CHUNK_SIZE};
use super::Stream;
use crate::error::{Error, Result};
use crate::ids::LogPos;
use parking_lot::MutexGuard;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a stream's writer waits for more group commits before it
/// syncs for a lazy (group) request.
pub const GROUP_WINDOW: Duration = Duration::from_micros(500);
/// Default of `PerWorkerOptions::log_sync_interval`: under continuous load a
/// stream's writer starts a sync at most this often, unless a thread is
/// blocked waiting for durability (see [`Stream::wait_durable`]).
pub const SYNC_INTERVAL: Duration = Duration::from_millis(2);
/// Log bytes waiting for a sync that end a pacing pause early: a batch this
/// large is worth its sync already.
pub const SYNC_BATCH: usize = 128 << 10;
/// Flush requests (commits) waiting for a sync that end a pacing pause
/// early: at hundreds of thousands of small commits a second they gather
/// far faster than `SYNC_BATCH` bytes, and a pipelined session's window
/// would fill and block before the interval ended.
pub const SYNC_REQUESTS: usize = 32;
/// A pacing pause also ends once the oldest waiting flush request has
/// waited this many times what recent syncs took, while the process
/// leaves cores idle: a commit is then acknowledged within a few syncs of
/// its record, not half an interval later (decision 034).
pub const SYNC_PATIENCE: u64 = 2;
/// The share of the cores' time at or above which the process counts as
/// busy and pauses last their interval again: the CPU that more syncs
/// cost is then the workers' (durable TPC-C on 2 vCPUs used about 75%
/// and lost 15% of its throughput to patient syncs; decision 034).
pub const BUSY_CPU_SHARE: f64 = 0.5;
// A full chunk is sealed, and ends a pause anyway: a batch as large as a
// chunk would never end one by itself.
const _: () = assert!(SYNC_BATCH < CHUNK_SIZE);

impl Stream {
    /// Passive group commit: have the writer flush up to `position` within
    /// a short group window rather than at once.
    pub fn request_flush_lazily(&self, position: LogPos) {
        if self.lazy_requested.0.fetch_max(position.get(), Ordering::SeqCst) >= position.get() {
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
    pub fn request_flush(&self, position: LogPos) {
        if self.durable() >= position {
            return;
        }
        let mut s = self.stage1.lock();
        self.request_locked(&mut s, position);
    }

    /// `request_flush` with the stage-1 lock held.
    pub(super) fn request_locked(&self, s: &mut Stage1, position: LogPos) {
        if position > s.flush_requested {
            s.flush_requested = position;
            s.requests += 1;
            if s.requests == 1 {
                s.oldest_request = Some(Instant::now());
            }
            // A pacing writer syncs this when its pause ends, or once a
            // batch of requests waits: waking it sooner would only cost
            // the committer a system call. The first request wakes it to
            // shorten the pause to its patience (once per sync).
            if s.writer != WriterWait::Pacing
                || s.requests == SYNC_REQUESTS
                || (s.requests == 1 && self.sync_patience.load(Ordering::Relaxed) > 0)
            {
                self.work.notify_one();
            }
        }
    }

    /// Block until everything up to `position` is durable; the writer
    /// syncs it at once (a blocked waiter ends its pacing).
    pub fn wait_durable(&self, position: LogPos) -> Result<()> {
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

    /// Like [`Stream::wait_durable`], but when no write is in progress the
    /// caller writes and syncs the pending chunks itself; while another
    /// thread writes, it waits for that write and then looks again. For a
    /// blocking commit (`Transaction::commit`): waking the writer and being
    /// woken by it cost an isolated commit two thread handoffs on top of its
    /// `fdatasync` (docs/decisions/measurements.md, "2026-11-22: a blocking commit
    /// syncs the log itself"). Pipelined commits do
    /// not use it: syncing whenever a window fills, rather than paced by
    /// the writer, cost 2-worker TPC-C 5%.
    pub fn sync_to(&self, position: LogPos) -> Result<()> {
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
                    s.seal_current();
                }
                if !s.writable() {
                    // A reservation below `position` is still being
                    // filled: its release wakes this waiter.
                    s.fill_waiters += 1;
                    self.durable_cv.wait(&mut s);
                    s.fill_waiters -= 1;
                    continue;
                }
                let chunks = begin_write(&mut s);
                self.committer_syncs.fetch_add(1, Ordering::Relaxed);
                let written = MutexGuard::unlocked(&mut s, || self.write_chunks(&chunks));
                self.finish_write(&mut s, chunks, written);
                continue;
            }
            self.durable_cv.wait(&mut s);
        }
    }

    /// Write chunks to the segment files, then publish durability: the
    /// position first, the marks it covers after.
    fn write_chunks(&self, chunks: &VecDeque<Chunk>) -> Result<()> {
        let _poison = PoisonOnPanic::new(self);
        let written = self.files.write(chunks, self.durable())?;
        self.syncs.fetch_add(written.syncs, Ordering::Relaxed);
        // The position first: whoever sees the new durable mark must also
        // see these bytes as durable (the per-worker WAL's pool compares a
        // page's last record position with `durable` after its gate
        // trusted the durable GSN; the other order made that check fire on
        // pages that were synced, docs/RELIABILITY.md, "the WAL-rule check fired on
        // synced pages").
        let before = self.durable.fetch_max(written.end.get(), Ordering::AcqRel);
        if written.max_mark > 0 {
            self.durable_mark
                .fetch_max(written.max_mark, Ordering::AcqRel);
        }
        if let Some(counter) = self.stage2.get() {
            counter.fetch_add(written.end.get().saturating_sub(before), Ordering::Relaxed);
        }
        Ok(())
    }

    /// After `write_chunks`: record a failure, publish the notes that
    /// became durable, recycle the buffers, end the write and wake whoever
    /// waits for durability or for the write to end.
    fn finish_write(&self, s: &mut Stage1, chunks: VecDeque<Chunk>, written: Result<()>) {
        debug_assert!(s.writing);
        if let Err(e) = written {
            self.fail(&e);
            // Nothing more will become durable; waiters see the error. A
            // chunk a reservation points into stays until the stream goes:
            // its filler may still be copying into it.
            if s.reservations.is_empty() {
                s.full.clear();
            }
        }
        let durable = self.durable();
        while let Some(&(end, value)) = s.notes.front() {
            if end > durable {
                break;
            }
            self.durable_note.fetch_max(value, Ordering::AcqRel);
            s.notes.pop_front();
        }
        if self.broken_early_release() {
            // The broken variant wrote reservations before their fill; a
            // late fill must not land in a reused buffer.
            chunks.into_iter().for_each(|c| std::mem::forget(c.bytes));
        } else {
            s.recycle(chunks);
        }
        s.writing = false;
        if s.writer == WriterWait::Write {
            self.work.notify_one();
        }
        self.durable_cv.notify_all();
    }

    pub(super) fn writer_loop(self: Arc<Self>) {
        let mut last_sync: Option<Instant> = None;
        // What the writer's recent writes and syncs took (a moving
        // average; none yet: the interval alone paces).
        let mut sync_cost: Option<Duration> = None;
        let mut cpu = super::cpu::CpuShare::new();
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
                    let batch_ready = !s.full.is_empty()
                        || s.current.bytes.len() >= SYNC_BATCH
                        || s.requests >= SYNC_REQUESTS;
                    if s.blocked == 0 && !s.shutdown && !batch_ready {
                        // Sync pacing: within the sync interval of the last
                        // sync, and while nobody is blocked on the log,
                        // requests gather silently (pipelined commits do
                        // not wait yet) and the writer syncs them when the
                        // interval ends. Fewer, larger syncs cost less than
                        // a sync per few commits (on a virtual disk they
                        // also cost the vCPUs steal time; docs/decisions/
                        // 012-sync-pacing.md). A blocked waiter ends the pause,
                        // and so does a batch of SYNC_BATCH bytes or of
                        // SYNC_REQUESTS requests (decision 032).
                        let busy = f64::from_bits(self.busy_cpu_share.load(Ordering::Relaxed));
                        let patient = s.oldest_request.filter(|_| cpu.now() < busy);
                        if let Some(rest) = self.pace(last_sync, patient, sync_cost) {
                            self.writer_waits(&mut s, WriterWait::Pacing, Some(rest));
                            continue;
                        }
                    }
                    let wanted = s.flush_requested > self.durable() && !s.current.bytes.is_empty();
                    if wanted {
                        s.seal_current();
                    }
                    if s.writable() {
                        break;
                    }
                    if !s.full.is_empty() && !s.shutdown {
                        // The first full chunk holds a reservation not yet
                        // filled: never write past it. Its release wakes
                        // the writer.
                        self.writer_waits(&mut s, WriterWait::Fill, None);
                        continue;
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
                begin_write(&mut s)
            };
            let started = Instant::now();
            last_sync = Some(started);
            let written = self.write_chunks(&chunks);
            let took = started.elapsed();
            sync_cost = Some(sync_cost.map_or(took, |c| (c * 3 + took) / 4));
            self.finish_write(&mut self.stage1.lock(), chunks, written);
        }
    }

    fn lazy_requested(&self) -> LogPos {
        LogPos::new(self.lazy_requested.0.load(Ordering::SeqCst))
    }

    /// The writer sleeps for `why` (at most `limit`), saying so to the
    /// threads that decide whether to wake it.
    fn writer_waits(
        &self,
        s: &mut MutexGuard<'_, Stage1>,
        why: WriterWait,
        limit: Option<Duration>,
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

    /// How long the writer should still wait before starting a sync: the
    /// rest of the interval since the last one started, cut to what is
    /// left of the oldest waiting request's patience.
    fn pace(
        &self,
        last_sync: Option<Instant>,
        oldest_request: Option<Instant>,
        sync_cost: Option<Duration>,
    ) -> Option<Duration> {
        let interval = Duration::from_micros(self.sync_interval_us.load(Ordering::Relaxed));
        let since = last_sync?.elapsed();
        let mut rest = interval.checked_sub(since).filter(|r| !r.is_zero())?;
        let patience = self.sync_patience.load(Ordering::Relaxed);
        if let (Some(oldest), Some(cost), true) = (oldest_request, sync_cost, patience > 0) {
            let limit = cost.saturating_mul(patience.min(u32::MAX as u64) as u32);
            rest = rest.min(limit.checked_sub(oldest.elapsed())?);
            if rest.is_zero() {
                return None;
            }
        }
        Some(rest)
    }
}

/// Take every full chunk that may be written (all of them unless a
/// reservation is still being filled) for one write. The caller writes them
/// with `write_chunks` (without the stage-1 lock) and then calls
/// `finish_write`; until then nobody else writes.
fn begin_write(s: &mut Stage1) -> VecDeque<Chunk> {
    assert!(
        !s.writing,
        "one write at a time keeps chunks in stream order"
    );
    s.writing = true;
    s.requests = 0;
    s.oldest_request = None;
    s.take_writable()
}
