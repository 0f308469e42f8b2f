//! The buffer pool: a fixed budget of page frames over one data file, a dense
//! page table, latched page guards, and the page provider thread.
//!
//! - `frame`: a frame's state beside its bytes;
//! - `page_table`: page id → frame, and filling a frame on a miss;
//! - `guards`: optimistic, shared and exclusive access, frame hints,
//!   allocation and freeing of pages;
//! - `provider`: free frames and the page provider thread (cooling,
//!   eviction);
//! - `writeback`: batches of page copies written and synced, shared by
//!   the provider, flushes and checkpoint increments;
//! - `policy`: the [`PageWritePolicy`] a persistence scheme chooses, and
//!   the [`FlushGate`] (the WAL rule's seam) of the one that steals.
//!
//! Translation is arithmetic, as in vmcache: page ids are dense, so the page
//! table is a two-level array of atomics indexed by page id (no hash table,
//! no swizzled pointers). Each frame has a [`HybridLatch`]. A [`FrameHint`]
//! names a frame as an earlier validated read saw it, so an access can
//! skip the translation (and the B-tree its descent) while that frame is
//! unchanged.
//!
//! Page provisioning follows seed 000 §3.5: workers take frames from a free
//! list and never evict on their hot path; the page provider thread keeps
//! the free list filled by cooling resident pages (second chance: an access
//! to a cool page makes it hot again), writing cool dirty pages through the
//! writeback buffer (copied under a short shared latch, no latch held during
//! I/O, one `fdatasync` per batch) and evicting cool clean pages.
//!
//! Invariants:
//! - a frame is evicted only when clean, not in writeback and exclusively
//!   latched; a page is never in two writeback batches at once;
//! - WAL rule (DESIGN.md invariant 1): under a policy that steals behind a
//!   gate, before a batch is written the [`FlushGate`] is asked to make
//!   the log durable up to the batch's largest page GSN;
//! - under [`PageWritePolicy::KeepDirtyInMemory`] no dirty page is written
//!   before the clean close's [`BufferPool::flush_all`];
//! - persisted-GSN rule (invariant 4): a frame's persisted GSN is raised
//!   only after the batch's `sync_data` returned Ok.
//!
//! When the log's disk is full ([`Error::LogFull`] from the gate) the pool
//! is not poisoned: nothing was written. Pages the gate cannot vouch for
//! stay dirty (so they are never evicted); the page provider learns the
//! gate's limit ([`FlushGate::write_limit`]) and writes and evicts only
//! the other pages, so reads go on. Flushes and checkpoint increments fail
//! with the error instead of skipping pages (they must not claim progress).
//! A pool that keeps dirty pages in memory meets the same situation for
//! good once they fill it: it refuses new pages and writes with
//! [`Error::MemoryFull`] while frames are still left for reads.
//!
//! [`HybridLatch`]: super::latch::HybridLatch

mod contention;
mod frame;
mod guards;
mod page_table;
mod policy;
mod provider;
#[cfg(test)]
mod tests;
mod writeback;

pub use contention::TreeContention;
pub use frame::{WRITER_READ_FROM_DISK, WRITER_UNKNOWN};
pub use guards::{ExclusiveGuard, FrameHint, OptimisticGuard, SharedGuard};
pub use policy::{FlushGate, PageWritePolicy};
pub use writeback::Writer;

use super::page::{self, PageId};
use crate::error::{Error, Result};
use crate::ids::Gsn;
use crate::io::{AlignedBuf, StorageFile};
use frame::{Frame, NO_PAGE};
use page_table::PageTable;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Page ids are below 2^32 (64 TiB at 16 KiB pages).
pub const MAX_PAGES: u64 = 1 << 32;
/// Fewer frames than this cannot hold the pages one B-tree operation
/// latches at once for a handful of sessions.
pub const MIN_FRAMES: usize = 16;

/// Counters of the pool, readable at any time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    pub frames: usize,
    pub free_frames: usize,
    pub resident_pages: usize,
    pub dirty_pages: usize,
    pub pages_read: u64,
    pub pages_written_by_provider: u64,
    pub pages_written_by_flush: u64,
    pub pages_written_by_checkpoint: u64,
    pub evictions: u64,
    pub page_syncs: u64,
    /// Batches the independent WAL-rule check refused (a page whose last
    /// record was not durable); any is a bug, and poisons the pool.
    pub wal_rule_violations: u64,
}

#[derive(Default)]
struct Counters {
    pages_read: AtomicU64,
    written_provider: AtomicU64,
    written_flush: AtomicU64,
    written_checkpoint: AtomicU64,
    evictions: AtomicU64,
    syncs: AtomicU64,
    wal_rule_violations: AtomicU64,
}

/// Configuration of a pool.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    pub page_size: usize,
    pub frames: usize,
}

pub struct BufferPool {
    page_size: usize,
    file: Arc<dyn StorageFile>,
    memory: AlignedBuf,
    frames: Box<[Frame]>,
    table: PageTable,
    free_frames: Mutex<Vec<u32>>,
    frames_available: Condvar,
    free_target: usize,
    cool_target: usize,
    next_page_id: AtomicU64,
    /// Freed page ids with the GSN of their last logged change: a reused
    /// page starts from that GSN, so its next record's `prev_gsn` continues
    /// the page's chain in the log and recovery does not see a gap.
    free_pages: Mutex<Vec<(PageId, Gsn)>>,
    /// The first I/O failure of a page write; the pool refuses further
    /// modifications once set (fjall/redb "poisoned" habit).
    failure: Mutex<Option<String>>,
    failed: AtomicBool,
    /// When dirty pages may be written: the persistence scheme's choice.
    policy: parking_lot::RwLock<PageWritePolicy>,
    /// Whether `policy` keeps dirty pages in memory, for the paths that
    /// take a frame (no lock there).
    keeps_dirty: AtomicBool,
    /// Frames taken since the last count of what dirty pages kept in
    /// memory leave (`provider::count_frames_now_and_then`).
    takes_since_count: std::sync::atomic::AtomicUsize,
    /// The page provider stages only pages with a GSN at or below this
    /// ([`Gsn::MAX`] until the policy's gate reports the log full).
    write_limit: AtomicU64,
    /// Under [`PageWritePolicy::KeepDirtyInMemory`]: dirty pages left
    /// fewer frames than the read reserve (`provider::read_reserve`). They
    /// are never written while running, so this is never cleared; new
    /// pages and writes are refused from then on.
    memory_full: AtomicBool,
    /// The double-write file: every batch is written and synced there before
    /// it is written in place, so a page torn by a crash during the in-place
    /// write is repaired from its copy at the next open. The mutex also
    /// serialises batches of the provider and of flushes.
    double_write: Mutex<Option<Arc<dyn StorageFile>>>,
    counters: Counters,
    /// Optimistic retries and waits by tree (`btree` counts them).
    contention: contention::Contention,
    provider_wake: Mutex<bool>,
    provider_cv: Condvar,
    shutdown: AtomicBool,
    provider: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferPool")
            .field("page_size", &self.page_size)
            .field("frames", &self.frames.len())
            .field("file", &self.file.path())
            .finish()
    }
}

impl BufferPool {
    /// A pool over `file` whose pages `0..next_page_id` exist (some of them
    /// listed in `free_pages`), and start its page provider thread.
    pub fn start(
        config: PoolConfig,
        file: Arc<dyn StorageFile>,
        next_page_id: PageId,
        free_pages: Vec<PageId>,
    ) -> Result<Arc<Self>> {
        if !page::is_valid_page_size(config.page_size) {
            return Err(Error::InvalidOptions(format!(
                "page size {} is not a power of two between {} and {}",
                config.page_size,
                page::MIN_PAGE_SIZE,
                page::MAX_PAGE_SIZE
            )));
        }
        if config.frames < MIN_FRAMES {
            return Err(Error::InvalidOptions(format!(
                "the buffer budget holds {} pages; at least {MIN_FRAMES} are needed",
                config.frames
            )));
        }
        let frames = config.frames;
        let frame_ids = u32::try_from(frames).map_err(|_| {
            Error::InvalidOptions(format!(
                "the buffer budget holds {frames} pages; at most {} are possible",
                u32::MAX
            ))
        })?;
        let out_of_memory = |bytes| Error::OutOfMemory {
            what: "the buffer pool (buffer_pool_bytes)",
            bytes,
        };
        // The frames are a caller's choice: reserve them fallibly, so a
        // budget the machine cannot map is an error instead of an abort.
        let bytes = frames
            .checked_mul(config.page_size)
            .ok_or(out_of_memory(usize::MAX))?;
        let memory = AlignedBuf::try_zeroed(bytes).ok_or(out_of_memory(bytes))?;
        let mut frame_states = Vec::new();
        frame_states
            .try_reserve_exact(frames)
            .map_err(|_| out_of_memory(frames.saturating_mul(std::mem::size_of::<Frame>())))?;
        frame_states.extend((0..frames).map(|_| Frame::new()));
        let pool = Arc::new(BufferPool {
            page_size: config.page_size,
            file,
            memory,
            frames: frame_states.into_boxed_slice(),
            table: PageTable::new(),
            free_frames: Mutex::new((0..frame_ids).rev().collect()),
            frames_available: Condvar::new(),
            free_target: (frames / 64).clamp(4, 1024),
            cool_target: (frames / 8).max(8),
            next_page_id: AtomicU64::new(next_page_id),
            // Pages freed before the last clean close: their changes are all
            // below the log floor, which recovery treats as one state.
            free_pages: Mutex::new(free_pages.into_iter().map(|p| (p, Gsn::ZERO)).collect()),
            failure: Mutex::new(None),
            failed: AtomicBool::new(false),
            policy: parking_lot::RwLock::new(PageWritePolicy::default()),
            keeps_dirty: AtomicBool::new(false),
            takes_since_count: Default::default(),
            write_limit: AtomicU64::new(u64::MAX),
            memory_full: AtomicBool::new(false),
            double_write: Mutex::new(None),
            counters: Counters::default(),
            contention: contention::Contention::new(),
            provider_wake: Mutex::new(false),
            provider_cv: Condvar::new(),
            shutdown: AtomicBool::new(false),
            provider: Mutex::new(None),
        });
        let for_thread = Arc::clone(&pool);
        let handle = std::thread::Builder::new()
            .name("waypoint-page-provider".into())
            .spawn(move || for_thread.provider_loop())
            .map_err(|e| Error::io(crate::IoOp::Open, "page provider thread", None, e))?;
        *pool.provider.lock() = Some(handle);
        Ok(pool)
    }

    pub fn page_size(&self) -> usize {
        self.page_size
    }

    pub fn file(&self) -> &Arc<dyn StorageFile> {
        &self.file
    }

    /// Install the persistence scheme's page-write policy (`db::open`
    /// does, before recovery touches a page).
    pub fn set_page_write_policy(&self, policy: PageWritePolicy) {
        let mut current = self.policy.write();
        self.keeps_dirty
            .store(policy.keeps_dirty_pages(), Ordering::Relaxed);
        *current = policy;
    }

    /// Write every batch through `file` first (see `double_write`).
    pub fn set_double_write(&self, file: Arc<dyn StorageFile>) {
        *self.double_write.lock() = Some(file);
    }

    /// Empty the double-write file (at clean close, after `flush_all`).
    pub fn clear_double_write(&self) -> Result<()> {
        if let Some(dw) = self.double_write.lock().as_ref() {
            dw.set_len(0)?;
            dw.sync_data()?;
        }
        Ok(())
    }

    /// Raise the high-water mark to at least `next` (recovery: the log names
    /// pages allocated after the superblock was last written).
    pub fn ensure_allocated(&self, next: PageId) {
        self.next_page_id
            .fetch_max(next.min(MAX_PAGES), Ordering::AcqRel);
        self.free_pages.lock().retain(|&(p, _)| p >= next);
    }

    /// The high-water mark: every page id below it has been allocated.
    pub fn next_page_id(&self) -> PageId {
        self.next_page_id.load(Ordering::Acquire)
    }

    pub fn free_pages(&self) -> Vec<PageId> {
        self.free_pages.lock().iter().map(|&(p, _)| p).collect()
    }

    /// The free pages with the GSN of each one's last logged change.
    pub fn free_pages_with_gsn(&self) -> Vec<(PageId, Gsn)> {
        self.free_pages.lock().clone()
    }

    /// Error if an earlier page write failed (the pool is poisoned).
    pub fn check_healthy(&self) -> Result<()> {
        if self.failed.load(Ordering::Acquire) {
            let cause = self.failure.lock().clone().unwrap_or_default();
            return Err(Error::Poisoned { cause });
        }
        Ok(())
    }

    fn poison(&self, err: &Error) {
        if err.is_log_full() {
            // Nothing was written: the gate refused the batch. The pages
            // stay dirty; the pool stays usable for reads.
            self.learn_write_limit();
            return;
        }
        let mut failure = self.failure.lock();
        if failure.is_none() {
            *failure = Some(err.to_string());
            tracing::error!(error = %err, "page write failed; buffer pool poisoned");
        }
        self.failed.store(true, Ordering::Release);
        self.frames_available.notify_all();
    }

    /// After the gate reported the log full: stage only what it can still
    /// make durable.
    fn learn_write_limit(&self) {
        let limit = self
            .policy
            .read()
            .gate()
            .map_or(Gsn::MAX, |g| g.write_limit());
        self.write_limit.store(limit.get(), Ordering::Release);
    }

    fn frame_data(&self, idx: u32) -> *mut u8 {
        debug_assert!((idx as usize) < self.frames.len());
        // SAFETY: idx < frames, so the offset stays inside `memory`.
        unsafe { self.memory.as_ptr().add(idx as usize * self.page_size) }
    }

    fn page_offset(&self, pid: PageId) -> u64 {
        pid * self.page_size as u64
    }

    fn corruption(&self, pid: PageId, detail: String) -> Error {
        Error::Corruption {
            path: self.file.path().to_path_buf(),
            offset: self.page_offset(pid),
            detail,
        }
    }

    /// Stop the page provider. Pages stay resident; call after `flush_all`.
    pub fn stop(&self) {
        self.shutdown.store(true, Ordering::Release);
        self.wake_provider();
        if let Some(handle) = self.provider.lock().take() {
            let _ = handle.join();
        }
    }

    /// An optimistic access in the tree whose root is `root` is tried
    /// again after a failed version check.
    pub(crate) fn note_retry(&self, root: PageId) {
        self.contention.retry(root);
    }

    /// Forget the counts of the tree whose root is `root` (it was freed).
    pub(crate) fn forget_contention(&self, root: PageId) {
        self.contention.forget(root);
    }

    /// Optimistic retries and waits for writers so far, by tree root.
    pub fn contention_by_root(&self) -> rustc_hash::FxHashMap<PageId, TreeContention> {
        self.contention.by_root()
    }

    pub fn stats(&self) -> PoolStats {
        let resident = self
            .frames
            .iter()
            .filter(|f| f.page_id.load(Ordering::Relaxed) != NO_PAGE)
            .count();
        let dirty = self
            .frames
            .iter()
            .filter(|f| f.dirty.load(Ordering::Relaxed))
            .count();
        PoolStats {
            frames: self.frames.len(),
            free_frames: self.free_frames.lock().len(),
            resident_pages: resident,
            dirty_pages: dirty,
            pages_read: self.counters.pages_read.load(Ordering::Relaxed),
            pages_written_by_provider: self.counters.written_provider.load(Ordering::Relaxed),
            pages_written_by_flush: self.counters.written_flush.load(Ordering::Relaxed),
            pages_written_by_checkpoint: self.counters.written_checkpoint.load(Ordering::Relaxed),
            evictions: self.counters.evictions.load(Ordering::Relaxed),
            page_syncs: self.counters.syncs.load(Ordering::Relaxed),
            wal_rule_violations: self.counters.wal_rule_violations.load(Ordering::Relaxed),
        }
    }
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        self.shutdown.store(true, Ordering::Release);
    }
}
