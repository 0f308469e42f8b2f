//! Translation of a page id to its frame: a two-level array of atomics
//! indexed by page id (vmcache's arithmetic translation; page ids are
//! dense), and filling it: a miss reads the page into a free frame, a new
//! page claims its entry.
//!
//! Invariant: an entry names a frame only while that frame holds the page;
//! it is published before the frame's latch is released and cleared (by
//! eviction) only under the frame's exclusive latch, so every access
//! re-checks the frame's page id after latching it.

use super::frame::{WRITER_READ_FROM_DISK, WRITER_UNKNOWN};
use super::guards::ExclusiveGuard;
use super::{BufferPool, MAX_PAGES};
use crate::buffer::latch::Backoff;
use crate::buffer::page::{self, PageId, PageKind};
use crate::error::Result;
use crate::ids::Gsn;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

const TABLE_CHUNK_BITS: u32 = 16;
const TABLE_CHUNKS: usize = 1 << 16;
/// Table entry meaning "a thread is reading this page from disk".
const LOADING: u64 = u64::MAX;

/// page id → frame index + 1 (0: not resident, LOADING: being read).
pub(super) struct PageTable {
    chunks: Box<[OnceLock<Box<[AtomicU64]>>]>,
}

impl PageTable {
    pub(super) fn new() -> Self {
        PageTable {
            chunks: (0..TABLE_CHUNKS).map(|_| OnceLock::new()).collect(),
        }
    }

    pub(super) fn entry(&self, pid: PageId) -> &AtomicU64 {
        debug_assert!(pid < MAX_PAGES);
        let chunk = self.chunks[(pid >> TABLE_CHUNK_BITS) as usize].get_or_init(|| {
            (0..1usize << TABLE_CHUNK_BITS)
                .map(|_| AtomicU64::new(0))
                .collect()
        });
        &chunk[(pid & ((1 << TABLE_CHUNK_BITS) - 1)) as usize]
    }
}

impl BufferPool {
    /// Frame index of `pid`, reading the page from disk if it is not resident.
    pub(super) fn resolve(&self, pid: PageId) -> Result<u32> {
        if pid >= self.next_page_id() || pid >= MAX_PAGES {
            return Err(self.corruption(
                pid,
                format!(
                    "reference to page {pid}, beyond the {} allocated pages",
                    self.next_page_id()
                ),
            ));
        }
        let entry = self.table.entry(pid);
        let mut backoff = Backoff::new();
        loop {
            match entry.load(Ordering::Acquire) {
                0 => {
                    if entry
                        .compare_exchange(0, LOADING, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
                    {
                        return self.load(pid, entry).inspect_err(|_| {
                            entry.store(0, Ordering::Release);
                        });
                    }
                }
                LOADING => backoff.wait(),
                e => return Ok((e - 1) as u32),
            }
        }
    }

    /// Read `pid` into a free frame, verify it and publish it in `entry`
    /// (which the caller set to LOADING). The entry is published before the
    /// frame's latch is released, so the provider cannot evict the frame
    /// before the table points at it.
    fn load(&self, pid: PageId, entry: &AtomicU64) -> Result<u32> {
        let idx = self.take_free_frame()?;
        let frame = &self.frames[idx as usize];
        frame.latch.exclusive();
        // SAFETY: the frame is free and exclusively latched; stale optimistic
        // readers validate against the version bumped below.
        let data = unsafe { std::slice::from_raw_parts_mut(self.frame_data(idx), self.page_size) };
        let result = self
            .file
            .read_at(data, self.page_offset(pid))
            .and_then(|()| {
                page::verify(data, pid).map_err(|e| self.corruption(pid, e.to_string()))
            });
        if let Err(e) = result {
            frame.latch.unlock_exclusive();
            self.release_frame(idx);
            return Err(e);
        }
        self.counters.pages_read.fetch_add(1, Ordering::Relaxed);
        frame
            .persisted_gsn
            .store(page::page_gsn(data).get(), Ordering::Relaxed);
        frame.dirty.store(false, Ordering::Relaxed);
        frame.cool.store(false, Ordering::Relaxed);
        frame
            .last_writer
            .store(WRITER_READ_FROM_DISK, Ordering::Relaxed);
        frame.last_write_end.store(0, Ordering::Relaxed);
        frame.page_id.store(pid, Ordering::Release);
        entry.store(idx as u64 + 1, Ordering::Release);
        frame.latch.unlock_exclusive();
        Ok(idx)
    }

    /// Give `pid` a fresh image of `kind`. The page table stays the single
    /// source of truth: a freed page may still be resident, or be read back
    /// by a reader that followed a pointer just before the page was freed
    /// (it will fail validation), so the id is claimed through its entry.
    pub(super) fn claim(
        &self,
        pid: PageId,
        kind: PageKind,
        gsn: Gsn,
    ) -> Result<ExclusiveGuard<'_>> {
        let entry = self.table.entry(pid);
        let mut backoff = Backoff::new();
        loop {
            let (idx, fresh_frame) = match entry.load(Ordering::Acquire) {
                0 => {
                    if entry
                        .compare_exchange(0, LOADING, Ordering::AcqRel, Ordering::Relaxed)
                        .is_err()
                    {
                        continue;
                    }
                    match self.take_free_frame() {
                        Ok(idx) => (idx, true),
                        Err(e) => {
                            entry.store(0, Ordering::Release);
                            return Err(e);
                        }
                    }
                }
                LOADING => {
                    backoff.wait();
                    continue;
                }
                e => ((e - 1) as u32, false),
            };
            let frame = &self.frames[idx as usize];
            frame.latch.exclusive();
            if !fresh_frame && frame.page_id.load(Ordering::Acquire) != pid {
                frame.latch.unlock_exclusive();
                continue; // evicted meanwhile
            }
            // SAFETY: exclusive latch on the frame.
            let data =
                unsafe { std::slice::from_raw_parts_mut(self.frame_data(idx), self.page_size) };
            page::init_page(data, pid, kind);
            page::set_page_gsn(data, gsn);
            if fresh_frame {
                frame.persisted_gsn.store(0, Ordering::Relaxed);
                frame.last_writer.store(WRITER_UNKNOWN, Ordering::Relaxed);
                frame.last_write_end.store(0, Ordering::Relaxed);
                frame.page_id.store(pid, Ordering::Release);
                entry.store(idx as u64 + 1, Ordering::Release);
            }
            frame.dirty.store(true, Ordering::Release);
            frame.cool.store(false, Ordering::Relaxed);
            return Ok(ExclusiveGuard {
                pool: self,
                idx,
                pid,
                modified: true,
            });
        }
    }
}
