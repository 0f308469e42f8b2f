//! Writeback (seed 000 §3.8): dirty pages are copied under a short shared
//! latch into a batch, and the batch is written (through the double-write
//! file) and synced once, no latch held during I/O. The page provider,
//! flushes and checkpoint increments share this one path.
//!
//! Invariants: a page is never in two batches at once (staging claims the
//! frame's `writeback` flag); under a policy with a [`FlushGate`], before
//! a batch is written the gate makes the log durable up to its largest
//! page GSN, and the pool checks each page's last record independently
//! (the WAL rule); a frame's persisted GSN rises only after the batch's
//! `fdatasync` returned Ok.
//!
//! [`FlushGate`]: super::FlushGate

use super::frame::{Frame, NO_PAGE};
use super::BufferPool;
use crate::buffer::latch::Backoff;
use crate::buffer::page::{self, PageId};
use crate::error::{Error, Result};
use crate::ids::{Gsn, LogPos};
use crate::io::AlignedBuf;
use std::sync::atomic::Ordering;

/// Pages per writeback batch (one write and one `fdatasync`).
pub(super) const WRITEBACK_BATCH_PAGES: usize = 64;

/// Who writes a writeback batch (for the counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    Provider,
    Flush,
    Checkpoint,
}

impl BufferPool {
    /// Copy frame `idx` into the batch if it is dirty, not already being
    /// written and its page GSN is at most `limit`. `wait` blocks for the
    /// shared latch instead of skipping.
    pub(super) fn stage(
        &self,
        batch: &mut WritebackBatch,
        idx: u32,
        wait: bool,
        limit: Gsn,
    ) -> bool {
        let frame = &self.frames[idx as usize];
        if wait {
            frame.latch.shared();
        } else if !frame.latch.try_shared() {
            return false;
        }
        let pid = frame.page_id.load(Ordering::Acquire);
        // SAFETY: the shared latch excludes writers.
        let within_limit = limit == Gsn::MAX
            || page::page_gsn(unsafe {
                std::slice::from_raw_parts(self.frame_data(idx), self.page_size)
            }) <= limit;
        // The CAS makes the provider and a flush unable to stage one frame
        // into two batches at once.
        let staged = pid != NO_PAGE
            && within_limit
            && frame.dirty.load(Ordering::Acquire)
            && frame
                .writeback
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
        if staged {
            // SAFETY: the shared latch excludes writers for the copy.
            let src = unsafe { std::slice::from_raw_parts(self.frame_data(idx), self.page_size) };
            frame.dirty.store(false, Ordering::Release);
            batch.push(idx, pid, src, frame);
        }
        frame.latch.unlock_shared();
        staged
    }

    /// Write a staged batch, `fdatasync` once, then publish the persisted
    /// GSNs. On failure the pages are dirty again and the error returned.
    pub(super) fn write_batch(&self, batch: &mut WritebackBatch, writer: Writer) -> Result<()> {
        // A panic below (an I/O layer's bug, a violated assertion) must not
        // leave the frames in writeback: every later flush, checkpoint and
        // close would wait for them for good. The pages become dirty again,
        // the pool is poisoned, and the panic goes on.
        let result = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.write_batch_inner(batch)
        })) {
            Ok(result) => result,
            Err(panic) => {
                for item in &batch.items {
                    let frame = &self.frames[item.idx as usize];
                    frame.dirty.store(true, Ordering::Release);
                    frame.writeback.store(false, Ordering::Release);
                }
                batch.clear();
                self.poison(&Error::Poisoned {
                    cause: "a page write panicked".into(),
                });
                std::panic::resume_unwind(panic);
            }
        };
        for item in &batch.items {
            let frame = &self.frames[item.idx as usize];
            if result.is_ok() {
                if frame.page_id.load(Ordering::Acquire) == item.pid {
                    // Invariant 4: only after sync_data returned Ok.
                    frame.persisted_gsn.fetch_max(item.gsn.get(), Ordering::AcqRel);
                }
            } else {
                frame.dirty.store(true, Ordering::Release);
            }
            frame.writeback.store(false, Ordering::Release);
        }
        if result.is_ok() {
            let counter = match writer {
                Writer::Provider => &self.counters.written_provider,
                Writer::Flush => &self.counters.written_flush,
                Writer::Checkpoint => &self.counters.written_checkpoint,
            };
            counter.fetch_add(batch.items.len() as u64, Ordering::Relaxed);
        }
        batch.clear();
        result
    }

    fn write_batch_inner(&self, batch: &mut WritebackBatch) -> Result<()> {
        let max_gsn = batch.items.iter().map(|i| i.gsn).max().unwrap_or(Gsn::ZERO);
        let gate = self.policy.read().gate().cloned();
        if let Some(gate) = gate {
            gate.ensure_durable(max_gsn)?;
            // The invariant, checked apart from how the gate enforced it.
            // A violation refuses the batch (the pages stay dirty) and
            // poisons the pool; it is counted and logged too.
            if let Some(item) = batch.items.iter().find(|item| {
                item.writer <= u32::from(u16::MAX)
                    && !gate.is_durable_at(item.writer, item.writer_end)
            }) {
                self.counters
                    .wal_rule_violations
                    .fetch_add(1, Ordering::Relaxed);
                let cause = format!(
                    "WAL rule violated: page {} (GSN {}) would be written before log partition {} is durable to {}",
                    item.pid, item.gsn, item.writer, item.writer_end
                );
                tracing::error!("{cause}");
                return Err(Error::Poisoned { cause });
            }
        }
        let double_write = self.double_write.lock();
        if let Some(dw) = double_write.as_ref() {
            // Copies are sealed, so the repair at open can tell a complete
            // copy from a torn one by its checksum.
            dw.write_at(
                &batch.buf.as_slice()[..batch.items.len() * self.page_size],
                0,
            )?;
            dw.sync_data()?;
        }
        let mut order: Vec<usize> = (0..batch.items.len()).collect();
        order.sort_by_key(|&slot| batch.items[slot].pid);
        for slot in order {
            let pid = batch.items[slot].pid;
            self.file
                .write_at(batch.slot(slot), self.page_offset(pid))?;
        }
        self.file.sync_data()?;
        self.counters.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Write every dirty page and wait for in-flight writebacks: on return,
    /// the data file holds every page as it was when the call started. A
    /// page that is dirty while its older copy is in writeback (by the
    /// provider) cannot be staged yet, so the pass repeats until no frame is
    /// dirty or in writeback.
    ///
    /// The clean close's write: it writes under every page-write policy,
    /// also one that keeps dirty pages in memory while the database runs.
    pub fn flush_all(&self) -> Result<()> {
        self.check_healthy()?;
        let mut batch = WritebackBatch::new(self.page_size, WRITEBACK_BATCH_PAGES);
        let mut backoff = Backoff::new();
        loop {
            for idx in 0..self.frames.len() as u32 {
                if self.frames[idx as usize].dirty.load(Ordering::Acquire) {
                    self.stage(&mut batch, idx, true, Gsn::MAX);
                    if batch.is_full() {
                        self.write_batch(&mut batch, Writer::Flush)
                            .inspect_err(|e| self.poison(e))?;
                    }
                }
            }
            if !batch.is_empty() {
                self.write_batch(&mut batch, Writer::Flush)
                    .inspect_err(|e| self.poison(e))?;
            }
            self.check_healthy()?;
            let busy = self
                .frames
                .iter()
                .any(|f| f.writeback.load(Ordering::Acquire) || f.dirty.load(Ordering::Acquire));
            if !busy {
                return Ok(());
            }
            backoff.wait();
        }
    }

    /// Hand `sink` a sealed copy of every dirty page, without writing or
    /// cleaning any: a scheme that must make the clean close's writes
    /// atomic journals them first (`silor`). Commits must be quiesced.
    pub fn for_each_dirty_page(
        &self,
        sink: &mut dyn FnMut(PageId, &[u8]) -> Result<()>,
    ) -> Result<()> {
        self.check_healthy()?;
        let mut copy = AlignedBuf::zeroed(self.page_size);
        for (idx, frame) in self.frames.iter().enumerate() {
            if !frame.dirty.load(Ordering::Acquire) {
                continue;
            }
            frame.latch.shared();
            let pid = frame.page_id.load(Ordering::Acquire);
            let dirty = pid != NO_PAGE && frame.dirty.load(Ordering::Acquire);
            if dirty {
                // SAFETY: the shared latch excludes writers for the copy.
                let src = unsafe {
                    std::slice::from_raw_parts(self.frame_data(idx as u32), self.page_size)
                };
                copy.as_mut_slice().copy_from_slice(src);
            }
            frame.latch.unlock_shared();
            if dirty {
                page::seal(copy.as_mut_slice());
                sink(pid, copy.as_slice())?;
            }
        }
        Ok(())
    }

    /// One checkpoint increment's writes (seed 000 §3.4): every page that
    /// is dirty in buffer shard `shard` of `shards` (the frames whose index
    /// is `shard` modulo `shards`) when the call starts reaches the data
    /// file before it returns. Each page is latched only to copy it into
    /// the writeback buffer, never during I/O. A page the page provider is
    /// writing meanwhile is waited for and, if it changed during that
    /// write, written again. Returns the number of pages this call wrote.
    ///
    /// Not for a policy that keeps dirty pages in memory: its scheme
    /// checkpoints from its own state, never from pages.
    pub fn checkpoint_shard(&self, shard: usize, shards: usize) -> Result<u64> {
        assert!(shard < shards, "shard {shard} of {shards}");
        assert!(
            !self.keeps_dirty.load(Ordering::Relaxed),
            "a page checkpoint under a policy that keeps dirty pages in memory"
        );
        self.check_healthy()?;
        let mut batch = WritebackBatch::new(self.page_size, WRITEBACK_BATCH_PAGES);
        let mut written = 0u64;
        let flush = |batch: &mut WritebackBatch, written: &mut u64| -> Result<()> {
            if !batch.is_empty() {
                *written += batch.items.len() as u64;
                self.write_batch(batch, Writer::Checkpoint)
                    .inspect_err(|e| self.poison(e))?;
            }
            Ok(())
        };
        // Frames whose dirty page is latched or another writeback holds:
        // revisit, after writing the batch (see `stage_or_revisit`).
        let mut pending: Vec<u32> = Vec::new();
        for idx in (shard..self.frames.len()).step_by(shards) {
            if self.stage_or_revisit(&mut batch, idx as u32) {
                pending.push(idx as u32);
            }
            if batch.is_full() {
                flush(&mut batch, &mut written)?;
            }
        }
        flush(&mut batch, &mut written)?;
        let mut backoff = Backoff::new();
        while !pending.is_empty() {
            self.check_healthy()?;
            let mut still = Vec::new();
            for idx in pending {
                // Still latched or being written by someone else, or
                // written by them and changed during that write (then it
                // is ours to write).
                if self.stage_or_revisit(&mut batch, idx) {
                    still.push(idx);
                }
                if batch.is_full() {
                    flush(&mut batch, &mut written)?;
                }
            }
            flush(&mut batch, &mut written)?;
            pending = still;
            if !pending.is_empty() {
                backoff.wait();
            }
        }
        Ok(written)
    }

    /// For a checkpoint increment: stage frame `idx` if it is dirty; true
    /// if it must be looked at again (dirty but latched exclusively or held
    /// by another writeback, or clean with another writeback of it in
    /// flight).
    ///
    /// It never waits for the latch: the pages already in `batch` are in
    /// writeback, which the page provider cannot evict, and the latch's
    /// holder may be a worker waiting for a free frame (a split allocates
    /// under its latches). With a pool not much larger than a batch that
    /// was a deadlock the worker left after 10 s with
    /// `BufferPoolExhausted` (found by `waypoint simulate --workload tpcc`,
    /// seed 2843). A latched page is revisited once the batch is written.
    ///
    /// `dirty` is read before `writeback`. Staging sets `writeback` before
    /// it clears `dirty`, and a writeback clears `writeback` only after its
    /// `fdatasync`, so a page seen clean and then not in writeback has its
    /// earlier changes on disk. The other order (as this code had it) let a
    /// page the page provider staged between the two loads pass as written
    /// while its copy was still in flight, and the increment then claimed
    /// the shard checkpointed: the log floor could pass changes the data
    /// file did not have (found by the shuttle model,
    /// `tests/model_check.rs`, `writeback`; the symptom of
    /// docs/RELIABILITY.md, "redo of an insert finds the key
    /// present" and "a page's changes at or below the log floor missing
    /// from disk").
    fn stage_or_revisit(&self, batch: &mut WritebackBatch, idx: u32) -> bool {
        let frame = &self.frames[idx as usize];
        if frame.dirty.load(Ordering::Acquire) {
            !self.stage(batch, idx, false, Gsn::MAX)
        } else {
            frame.writeback.load(Ordering::Acquire)
        }
    }
}

pub(super) struct WritebackItem {
    idx: u32,
    pid: PageId,
    gsn: Gsn,
    /// The frame's last writer and the end of its last record at the copy.
    writer: u32,
    writer_end: LogPos,
}

/// Page copies staged for one write + `fdatasync` (seed 000 §3.8).
pub(super) struct WritebackBatch {
    buf: AlignedBuf,
    page_size: usize,
    items: Vec<WritebackItem>,
}

impl WritebackBatch {
    pub(super) fn new(page_size: usize, pages: usize) -> Self {
        WritebackBatch {
            buf: AlignedBuf::zeroed(page_size * pages),
            page_size,
            items: Vec::with_capacity(pages),
        }
    }

    pub(super) fn is_full(&self) -> bool {
        self.items.len() * self.page_size >= self.buf.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    fn push(&mut self, idx: u32, pid: PageId, src: &[u8], frame: &Frame) {
        debug_assert!(!self.is_full());
        let slot = self.items.len();
        let dst = &mut self.buf.as_mut_slice()[slot * self.page_size..(slot + 1) * self.page_size];
        dst.copy_from_slice(src);
        debug_assert_eq!(page::page_id(dst), pid, "frame holds another page's image");
        page::seal(dst);
        self.items.push(WritebackItem {
            idx,
            pid,
            gsn: page::page_gsn(dst),
            writer: frame.last_writer.load(Ordering::Relaxed),
            writer_end: LogPos::new(frame.last_write_end.load(Ordering::Relaxed)),
        });
    }

    fn slot(&self, slot: usize) -> &[u8] {
        &self.buf.as_slice()[slot * self.page_size..(slot + 1) * self.page_size]
    }

    fn clear(&mut self) {
        self.items.clear();
    }
}
