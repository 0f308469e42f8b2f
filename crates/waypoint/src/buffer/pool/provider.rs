//! Free frames and the page provider thread (seed 000 §3.5): workers
//! take frames from a free list and never evict on their hot path; the
//! provider keeps the list filled by cooling resident pages (second
//! chance: an access to a cool page makes it hot again), staging cool
//! dirty pages for writeback and evicting cool clean ones.
//!
//! Under a policy that keeps dirty pages in memory the provider evicts
//! clean pages only, and whoever takes frames counts now and then what
//! the dirty pages leave: once fewer frames than the read reserve are
//! left, new pages and writes are refused ([`Error::MemoryFull`]), so the
//! reserve's frames keep reads going.
//!
//! Invariant: a frame is evicted only when clean, not in writeback and
//! exclusively latched, and its page-table entry is cleared under that
//! latch.

use super::frame::NO_PAGE;
use super::writeback::{WritebackBatch, Writer, WRITEBACK_BATCH_PAGES};
use super::BufferPool;
use crate::buffer::page::{self, PageId};
use crate::error::{Error, Result};
use crate::ids::Gsn;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a worker waits for a free frame before reporting exhaustion.
const FRAME_WAIT_LIMIT: Duration = Duration::from_secs(10);
/// While the log is full, a dirty page it cannot vouch for is never written
/// and so never evicted (nor is any dirty page while the policy keeps them
/// in memory). With fewer frames than this left besides such pages, a wait
/// for a frame fails at once: a read that descends the tree
/// (an optimistic guard on a parent while its child loads) gets its frame
/// by the eviction of the very parent it must validate, restarts, and
/// would do so for good, the wait never timing out since frames keep
/// coming free (found by `waypoint simulate --workload tpcc`, seed 2087).
const MIN_USABLE_FRAMES: usize = 8;

impl BufferPool {
    pub(super) fn release_frame(&self, idx: u32) {
        self.free_frames.lock().push(idx);
        self.frames_available.notify_one();
    }

    pub(super) fn wake_provider(&self) {
        let mut wake = self.provider_wake.lock();
        *wake = true;
        self.provider_cv.notify_one();
    }

    pub(super) fn take_free_frame(&self) -> Result<u32> {
        let deadline = Instant::now() + FRAME_WAIT_LIMIT;
        let mut free = self.free_frames.lock();
        loop {
            if let Some(idx) = free.pop() {
                let low = free.len() < self.free_target;
                drop(free);
                if low {
                    self.wake_provider();
                }
                if self.keeps_dirty.load(Ordering::Relaxed) {
                    self.count_frames_now_and_then();
                }
                return Ok(idx);
            }
            if self.failed.load(Ordering::Acquire) {
                drop(free);
                self.check_healthy()?;
                unreachable!("failed flag set without a cause");
            }
            if Instant::now() >= deadline {
                return Err(Error::BufferPoolExhausted {
                    frames: self.frames.len(),
                });
            }
            drop(free);
            self.check_frames_left()?;
            self.wake_provider();
            free = self.free_frames.lock();
            self.frames_available
                .wait_for(&mut free, Duration::from_millis(5));
        }
    }

    /// The largest page GSN the page provider may write now; `None` while
    /// the policy keeps dirty pages in memory.
    pub(super) fn provider_write_limit(&self) -> Option<Gsn> {
        if self.keeps_dirty.load(Ordering::Relaxed) {
            return None;
        }
        Some(Gsn::new(self.write_limit.load(Ordering::Acquire)))
    }

    /// For a wait for a frame, while dirty pages the provider may not write
    /// fill the pool: an error at once if fewer than [`MIN_USABLE_FRAMES`]
    /// are left besides them.
    fn check_frames_left(&self) -> Result<()> {
        let limit = self.provider_write_limit();
        if limit == Some(Gsn::MAX) {
            return Ok(());
        }
        let usable = self.frames.len() - self.unwritable_frames(limit);
        if limit.is_none() {
            self.note_frames_left(usable);
        }
        if usable >= MIN_USABLE_FRAMES {
            return Ok(());
        }
        Err(match limit {
            None => self.memory_full_error(),
            Some(_) => Error::BufferPoolExhausted {
                frames: self.frames.len(),
            },
        })
    }

    /// Frames kept for reads while dirty pages stay in memory: below this
    /// many frames besides them, new pages and writes are refused. Above
    /// [`MIN_USABLE_FRAMES`] by more than the frames taken between two
    /// counts (`count_frames_now_and_then`).
    fn read_reserve(&self) -> usize {
        MIN_USABLE_FRAMES + 2 * self.free_target
    }

    /// While dirty pages stay in memory: count the frames left besides
    /// them once every `free_target` frames taken. Frames are taken from
    /// the free list without looking, so the count bounds how far they
    /// can go below the read reserve unseen, at a cost per frame taken of
    /// `frames / free_target` loads.
    fn count_frames_now_and_then(&self) {
        if self.takes_since_count.fetch_add(1, Ordering::Relaxed) + 1 >= self.free_target {
            self.takes_since_count.store(0, Ordering::Relaxed);
            self.note_frames_left(self.frames.len() - self.unwritable_frames(None));
        }
    }

    /// While dirty pages stay in memory: `usable` frames are left besides
    /// them. Below the read reserve the pool is full for good (nothing
    /// cleans a page while running).
    fn note_frames_left(&self, usable: usize) {
        if usable < self.read_reserve() && !self.memory_full.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                frames = self.frames.len(),
                usable,
                "the buffer pool is full of pages kept in memory: new pages and writes are refused (buffer_pool_bytes)"
            );
        }
    }

    /// `Err(MemoryFull)` once dirty pages the policy keeps in memory leave
    /// too few frames for reads to go on besides new pages: the database
    /// then takes no more writes (reads go on) until it is reopened.
    pub fn check_writable(&self) -> Result<()> {
        if self.memory_full.load(Ordering::Acquire) {
            return Err(self.memory_full_error());
        }
        Ok(())
    }

    fn memory_full_error(&self) -> Error {
        Error::MemoryFull {
            buffer_pool_bytes: (self.frames.len() * self.page_size) as u64,
        }
    }

    /// Frames the page provider cannot free: dirty pages above GSN `limit`
    /// (all of them for `None`), and dirty pages latched exclusively (in
    /// use; counted as unwritable to be safe).
    fn unwritable_frames(&self, limit: Option<Gsn>) -> usize {
        (0..self.frames.len() as u32)
            .filter(|&idx| {
                let frame = &self.frames[idx as usize];
                if !frame.dirty.load(Ordering::Acquire) {
                    return false;
                }
                let Some(limit) = limit else {
                    return true;
                };
                if !frame.latch.try_shared() {
                    return true;
                }
                // SAFETY: the shared latch excludes writers.
                let gsn = page::page_gsn(unsafe {
                    std::slice::from_raw_parts(self.frame_data(idx), self.page_size)
                });
                frame.latch.unlock_shared();
                gsn > limit
            })
            .count()
    }

    pub(super) fn provider_loop(self: Arc<Self>) {
        let mut clock_hand = 0usize;
        let mut cooling: VecDeque<(u32, PageId)> = Default::default();
        let mut batch = WritebackBatch::new(self.page_size, WRITEBACK_BATCH_PAGES);
        loop {
            {
                let mut wake = self.provider_wake.lock();
                if !*wake && !self.shutdown.load(Ordering::Acquire) {
                    self.provider_cv
                        .wait_for(&mut wake, Duration::from_millis(20));
                }
                *wake = false;
            }
            if self.shutdown.load(Ordering::Acquire) {
                return;
            }
            let mut rounds = 0;
            while self.free_frames.lock().len() < self.free_target
                && !self.failed.load(Ordering::Acquire)
                && !self.shutdown.load(Ordering::Acquire)
                && rounds < 64
            {
                self.provider_round(&mut clock_hand, &mut cooling, &mut batch);
                rounds += 1;
            }
        }
    }

    /// One round of seed 000 §3.5: cool pages, then walk the cooling queue
    /// from its old end, staging dirty pages for writeback and evicting
    /// clean ones.
    pub(super) fn provider_round(
        &self,
        clock_hand: &mut usize,
        cooling: &mut VecDeque<(u32, PageId)>,
        batch: &mut WritebackBatch,
    ) {
        let n = self.frames.len();
        if self.write_limit.load(Ordering::Acquire) != Gsn::MAX.get() {
            self.learn_write_limit();
        }
        let limit = self.provider_write_limit();
        let mut scanned = 0;
        while cooling.len() < self.cool_target && scanned < n {
            let idx = *clock_hand;
            *clock_hand = (*clock_hand + 1) % n;
            scanned += 1;
            let frame = &self.frames[idx];
            let pid = frame.page_id.load(Ordering::Acquire);
            if pid == NO_PAGE || frame.cool.load(Ordering::Relaxed) {
                continue;
            }
            frame.cool.store(true, Ordering::Relaxed);
            cooling.push_back((idx as u32, pid));
        }
        let mut evicted = Vec::new();
        for _ in 0..cooling.len() {
            let Some((idx, pid)) = cooling.pop_front() else {
                break;
            };
            let frame = &self.frames[idx as usize];
            if frame.page_id.load(Ordering::Acquire) != pid || !frame.cool.load(Ordering::Relaxed) {
                continue; // re-heated or gone: it will be cooled again later
            }
            if frame.dirty.load(Ordering::Acquire) {
                let may_write = limit.is_some_and(|limit| {
                    batch.is_full() || self.stage(batch, idx, false, limit) || limit == Gsn::MAX
                });
                if !may_write {
                    // Kept in memory, or possibly above what the full log
                    // can vouch for: out of the queue (it would clog it),
                    // cooled again later.
                    frame.cool.store(false, Ordering::Relaxed);
                    continue;
                }
                cooling.push_back((idx, pid));
                continue;
            }
            if frame.writeback.load(Ordering::Acquire) || !frame.latch.try_exclusive() {
                cooling.push_back((idx, pid));
                continue;
            }
            if frame.page_id.load(Ordering::Acquire) == pid
                && !frame.dirty.load(Ordering::Acquire)
                && !frame.writeback.load(Ordering::Acquire)
                && frame.cool.load(Ordering::Relaxed)
            {
                let unmapped = self
                    .table
                    .entry(pid)
                    .compare_exchange(idx as u64 + 1, 0, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok();
                debug_assert!(
                    unmapped,
                    "page table entry of page {pid} does not point at its frame"
                );
                frame.page_id.store(NO_PAGE, Ordering::Release);
                frame.latch.unlock_exclusive();
                evicted.push(idx);
                self.counters.evictions.fetch_add(1, Ordering::Relaxed);
            } else {
                frame.latch.unlock_exclusive_unchanged();
                cooling.push_back((idx, pid));
            }
            if evicted.len() >= self.free_target * 2 {
                break;
            }
        }
        if !evicted.is_empty() {
            self.free_frames.lock().extend(evicted);
            self.frames_available.notify_all();
        }
        if !batch.is_empty() {
            if let Err(e) = self.write_batch(batch, Writer::Provider) {
                self.poison(&e);
            }
        }
    }
}
