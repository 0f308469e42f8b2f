//! Access to a page: optimistic (no latch; read, then validate), shared
//! and exclusive guards, frame hints that skip the page table while a
//! frame is unchanged, and the allocation and freeing of pages.
//!
//! Invariant: every modification goes through [`ExclusiveGuard::data_mut`],
//! which marks the frame dirty, and an exclusive holder that changed the
//! page bumps the latch version on release, so optimistic readers (and
//! hints) taken before fail validation.

use super::{BufferPool, MAX_PAGES};
use crate::buffer::page::{self, PageId, PageKind};
use crate::error::{Error, Result};
use crate::ids::{Gsn, LogPos};
use std::sync::atomic::Ordering;

/// Where a page was found and the latch version it was validated at: lets
/// a later access to the same page skip the lookup that found it (for the
/// B-tree, the descent from the root; LeanStore's optimistic latching
/// makes the same shortcut). Only [`OptimisticGuard::hint`] makes one, and
/// [`BufferPool::optimistic_hinted`] honours it only while the frame is
/// unchanged, so a stale hint costs a failed check, never a wrong page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHint {
    pub(super) frame: u32,
    pub(super) pid: PageId,
    pub(super) version: u64,
}

impl FrameHint {
    pub fn page_id(&self) -> PageId {
        self.pid
    }
}

/// A page read without a latch. See [`BufferPool::optimistic`].
pub struct OptimisticGuard<'a> {
    pub(super) pool: &'a BufferPool,
    pub(super) idx: u32,
    pub(super) version: u64,
    pub(super) pid: PageId,
}

impl<'a> OptimisticGuard<'a> {
    pub fn page_id(&self) -> PageId {
        self.pid
    }

    /// The page bytes, possibly changing under the reader. As in LeanStore
    /// and vmcache, readers parse them with bounds-checked code only and
    /// trust nothing they read until `validate` succeeds.
    pub fn data(&self) -> &[u8] {
        // SAFETY: the frame memory lives as long as the pool; concurrent
        // writers may change the bytes, which validation detects.
        unsafe { std::slice::from_raw_parts(self.pool.frame_data(self.idx), self.pool.page_size) }
    }

    /// True if nothing modified or evicted the page since the guard was taken.
    pub fn validate(&self) -> bool {
        self.pool.frames[self.idx as usize]
            .latch
            .validate(self.version)
    }

    /// A hint to come back to this page at this version, if the page is
    /// still unchanged (a hint is only made from what validated).
    pub fn hint(&self) -> Option<FrameHint> {
        self.validate().then_some(FrameHint {
            frame: self.idx,
            pid: self.pid,
            version: self.version,
        })
    }

    /// Turn into a shared guard if the page is unchanged.
    pub fn try_share(self) -> Option<SharedGuard<'a>> {
        let frame = &self.pool.frames[self.idx as usize];
        frame
            .latch
            .try_shared_at(self.version)
            .then(|| SharedGuard {
                pool: self.pool,
                idx: self.idx,
                pid: self.pid,
            })
    }

    /// Turn into an exclusive guard if the page is unchanged.
    pub fn try_upgrade(self) -> Option<ExclusiveGuard<'a>> {
        if self.pool.failed.load(Ordering::Acquire) {
            return None;
        }
        let frame = &self.pool.frames[self.idx as usize];
        frame
            .latch
            .try_upgrade(self.version)
            .then(|| ExclusiveGuard {
                pool: self.pool,
                idx: self.idx,
                pid: self.pid,
                modified: false,
            })
    }
}

/// A page latched in shared mode: its bytes are stable while held.
pub struct SharedGuard<'a> {
    pub(super) pool: &'a BufferPool,
    pub(super) idx: u32,
    pub(super) pid: PageId,
}

impl SharedGuard<'_> {
    pub fn page_id(&self) -> PageId {
        self.pid
    }

    pub fn data(&self) -> &[u8] {
        // SAFETY: the shared latch excludes writers.
        unsafe { std::slice::from_raw_parts(self.pool.frame_data(self.idx), self.pool.page_size) }
    }
}

impl Drop for SharedGuard<'_> {
    fn drop(&mut self) {
        self.pool.frames[self.idx as usize].latch.unlock_shared();
    }
}

/// A page latched exclusively. Every modification goes through
/// [`ExclusiveGuard::data_mut`], which marks the frame dirty.
pub struct ExclusiveGuard<'a> {
    pub(super) pool: &'a BufferPool,
    pub(super) idx: u32,
    pub(super) pid: PageId,
    pub(super) modified: bool,
}

impl ExclusiveGuard<'_> {
    pub fn page_id(&self) -> PageId {
        self.pid
    }

    pub fn data(&self) -> &[u8] {
        // SAFETY: the exclusive latch gives unique access.
        unsafe { std::slice::from_raw_parts(self.pool.frame_data(self.idx), self.pool.page_size) }
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        self.modified = true;
        self.pool.frames[self.idx as usize]
            .dirty
            .store(true, Ordering::Release);
        // SAFETY: the exclusive latch gives unique access.
        unsafe {
            std::slice::from_raw_parts_mut(self.pool.frame_data(self.idx), self.pool.page_size)
        }
    }

    /// Record the log partition that last wrote this page (RFA, seed 000
    /// §3.2) and the stream position just after that record.
    pub fn set_last_writer(&self, partition: u32, end: LogPos) {
        let frame = &self.pool.frames[self.idx as usize];
        frame.last_writer.store(partition, Ordering::Relaxed);
        frame.last_write_end.store(end.get(), Ordering::Relaxed);
    }

    pub fn last_writer(&self) -> u32 {
        self.pool.frames[self.idx as usize]
            .last_writer
            .load(Ordering::Relaxed)
    }
}

impl Drop for ExclusiveGuard<'_> {
    fn drop(&mut self) {
        let latch = &self.pool.frames[self.idx as usize].latch;
        if self.modified {
            latch.unlock_exclusive();
        } else {
            latch.unlock_exclusive_unchanged();
        }
    }
}

impl BufferPool {
    /// Optimistic access: no latch is taken. Every byte read through the
    /// guard must be bounds-checked and discarded unless
    /// [`OptimisticGuard::validate`] succeeds afterwards.
    pub fn optimistic(&self, pid: PageId) -> Result<OptimisticGuard<'_>> {
        self.optimistic_in(pid, None)
    }

    /// [`BufferPool::optimistic`] for a page of the tree whose root is
    /// `tree`: a wait for a writer counts against that tree
    /// ([`BufferPool::contention_by_root`]).
    pub fn optimistic_in(&self, pid: PageId, tree: Option<PageId>) -> Result<OptimisticGuard<'_>> {
        loop {
            let idx = self.resolve(pid)?;
            let frame = &self.frames[idx as usize];
            let version = match (frame.latch.optimistic(), tree) {
                (Some(version), _) => version,
                (None, Some(root)) => {
                    self.contention.wait(root);
                    frame.latch.optimistic_wait()
                }
                (None, None) => frame.latch.optimistic_wait(),
            };
            if frame.page_id.load(Ordering::Acquire) != pid {
                continue; // evicted and reused between resolve and latch
            }
            frame.touch();
            return Ok(OptimisticGuard {
                pool: self,
                idx,
                version,
                pid,
            });
        }
    }

    /// Optimistic access to the page a [`FrameHint`] names, without the
    /// page table: `None` unless its frame is still at exactly the hinted
    /// latch version (then nothing modified, evicted or reused the frame
    /// since the hint's guard validated, so it still holds that page with
    /// the same bytes) and still names the hinted page (belt and braces:
    /// every change of a frame's page is made under an exclusive latch
    /// that bumps the version). The guard is used like one from
    /// [`BufferPool::optimistic`]: read, then validate.
    pub fn optimistic_hinted(&self, hint: FrameHint) -> Option<OptimisticGuard<'_>> {
        let frame = self.frames.get(hint.frame as usize)?;
        let version = frame.latch.optimistic()?;
        if version != hint.version || frame.page_id.load(Ordering::Acquire) != hint.pid {
            return None;
        }
        frame.touch();
        Some(OptimisticGuard {
            pool: self,
            idx: hint.frame,
            version,
            pid: hint.pid,
        })
    }

    pub fn shared(&self, pid: PageId) -> Result<SharedGuard<'_>> {
        loop {
            let idx = self.resolve(pid)?;
            let frame = &self.frames[idx as usize];
            frame.latch.shared();
            if frame.page_id.load(Ordering::Acquire) != pid {
                frame.latch.unlock_shared();
                continue;
            }
            frame.touch();
            return Ok(SharedGuard {
                pool: self,
                idx,
                pid,
            });
        }
    }

    pub fn exclusive(&self, pid: PageId) -> Result<ExclusiveGuard<'_>> {
        self.check_healthy()?;
        loop {
            let idx = self.resolve(pid)?;
            let frame = &self.frames[idx as usize];
            frame.latch.exclusive();
            if frame.page_id.load(Ordering::Acquire) != pid {
                frame.latch.unlock_exclusive();
                continue;
            }
            frame.touch();
            return Ok(ExclusiveGuard {
                pool: self,
                idx,
                pid,
                modified: false,
            });
        }
    }

    /// A new page of `kind`, exclusively latched and dirty. Reuses a freed
    /// page id if there is one. Refused with `MemoryFull` once dirty pages
    /// kept in memory fill the pool ([`BufferPool::check_writable`]).
    pub fn allocate(&self, kind: PageKind) -> Result<ExclusiveGuard<'_>> {
        self.check_healthy()?;
        self.check_writable()?;
        let reused = self.free_pages.lock().pop();
        let (pid, gsn) = match reused {
            Some(free) => free,
            None => {
                let pid = self.next_page_id.fetch_add(1, Ordering::AcqRel);
                if pid >= MAX_PAGES {
                    self.next_page_id.fetch_sub(1, Ordering::AcqRel);
                    return Err(Error::DataFileFull {
                        path: self.file().path().to_path_buf(),
                        pages: MAX_PAGES,
                    });
                }
                (pid, Gsn::ZERO)
            }
        };
        self.claim(pid, kind, gsn)
            .inspect_err(|_| self.free_pages.lock().push((pid, gsn)))
    }

    /// Release a page that no tree refers to any more. It stays resident as
    /// a dirty `Free` page until written and evicted, or reallocated; its id
    /// goes to the free list.
    pub fn free_page(&self, mut guard: ExclusiveGuard<'_>) {
        // The page stays dirty: its copy on disk must still reach the state
        // the log says it has (its last changes and the free), or a
        // checkpoint would count those changes as written and the log
        // floor would pass them (found by `waypoint simulate`, seeds 2893
        // and 16245: a page on disk older than the floor).
        page::set_page_kind(guard.data_mut(), PageKind::Free);
        let pid = guard.pid;
        let gsn = page::page_gsn(guard.data());
        drop(guard);
        self.free_pages.lock().push((pid, gsn));
    }

    /// Exclusive access to `pid` for redo: a page that was never written (or
    /// lies beyond the end of the file) is handed out as a fresh `Free` page
    /// with GSN 0 rather than as an error.
    pub fn exclusive_for_redo(&self, pid: PageId) -> Result<ExclusiveGuard<'_>> {
        self.ensure_allocated(pid + 1);
        match self.exclusive(pid) {
            Ok(g) => Ok(g),
            Err(Error::Corruption { detail, .. }) if detail.contains("never written") => {
                self.claim(pid, PageKind::Free, Gsn::ZERO)
            }
            Err(Error::Io { cause, .. }) if cause.kind() == std::io::ErrorKind::UnexpectedEof => {
                self.claim(pid, PageKind::Free, Gsn::ZERO)
            }
            Err(e) => Err(e),
        }
    }
}
