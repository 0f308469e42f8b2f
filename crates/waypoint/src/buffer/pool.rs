//! The buffer pool: a fixed budget of page frames over one data file, a dense
//! page table, latched page guards, and the page provider thread.
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
//! - WAL rule (DESIGN.md invariant 1): before a batch is written, the
//!   [`FlushGate`] is asked to make the log durable up to the batch's
//!   largest page GSN;
//! - persisted-GSN rule (invariant 4): a frame's persisted GSN is raised
//!   only after the batch's `sync_data` returned Ok.
//!
//! When the log's disk is full ([`Error::LogFull`] from the gate) the pool
//! is not poisoned: nothing was written. Pages the gate cannot vouch for
//! stay dirty (so they are never evicted); the page provider learns the
//! gate's limit ([`FlushGate::write_limit`]) and writes and evicts only
//! the other pages, so reads go on. Flushes and checkpoint increments fail
//! with the error instead of skipping pages (they must not claim progress).

use super::latch::{Backoff, HybridLatch};
use super::page::{self, PageId, PageKind};
use crate::error::{Error, Result};
use crate::io::{AlignedBuf, StorageFile};
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

const NO_PAGE: u64 = u64::MAX;
const TABLE_CHUNK_BITS: u32 = 16;
const TABLE_CHUNKS: usize = 1 << 16;
/// Page ids are below 2^32 (64 TiB at 16 KiB pages).
pub const MAX_PAGES: u64 = 1 << 32;
/// Table entry meaning "a thread is reading this page from disk".
const LOADING: u64 = u64::MAX;
/// Fewer frames than this cannot hold the pages one B-tree operation
/// latches at once for a handful of sessions.
pub const MIN_FRAMES: usize = 16;
const WRITEBACK_BATCH_PAGES: usize = 64;
/// How long a worker waits for a free frame before reporting exhaustion.
const FRAME_WAIT_LIMIT: Duration = Duration::from_secs(10);
/// While the log is full, a dirty page it cannot vouch for is never written
/// and so never evicted. With fewer frames than this left besides such
/// pages, a wait for a frame fails at once: a read that descends the tree
/// (an optimistic guard on a parent while its child loads) gets its frame
/// by the eviction of the very parent it must validate, restarts, and
/// would do so for good, the wait never timing out since frames keep
/// coming free (found by `waypoint simulate --workload tpcc`, seed 2087).
const MIN_USABLE_FRAMES: usize = 8;

/// Asked before page images are written: the WAL rule's seam. The log layer
/// makes every record up to `gsn` durable (in every log partition) before it
/// returns Ok.
pub trait FlushGate: Send + Sync {
    fn ensure_durable(&self, gsn: u64) -> Result<()>;
    /// Whether partition `partition` is durable up to stream position
    /// `end`: the pool asserts it, after `ensure_durable`, for the last
    /// record of every page it writes (the WAL rule checked independently
    /// of how the gate enforced it).
    fn is_durable_at(&self, partition: u32, end: u64) -> bool;

    /// The largest page GSN `ensure_durable` can still succeed for:
    /// `u64::MAX` while the log is healthy; once it can no longer be made
    /// durable (its disk is full), the GSN up to which it is.
    fn write_limit(&self) -> u64 {
        u64::MAX
    }
}

/// `last_writer` of a frame nothing has logged on since its page was read
/// from the data file: every change in that image was durable before it was
/// written (WAL rule), so it is nobody's remote dependency.
pub const WRITER_READ_FROM_DISK: u32 = u32::MAX - 1;
/// `last_writer` of a frame with no known writer (a newly allocated page,
/// whose free record may not be durable yet).
pub const WRITER_UNKNOWN: u32 = u32::MAX;

struct Frame {
    latch: HybridLatch,
    page_id: AtomicU64,
    dirty: AtomicBool,
    writeback: AtomicBool,
    /// Second chance: set by the provider, cleared by any access.
    cool: AtomicBool,
    /// GSN of the newest copy of this page known to be durable in the data
    /// file (seed 000 §3.4: the checkpointer's and provider's progress).
    persisted_gsn: AtomicU64,
    /// Log partition of the last writer (Remote Flush Avoidance, seed 000 §3.2).
    last_writer: AtomicU32,
    /// Stream position in `last_writer`'s partition just after the last
    /// record on this page (for the WAL-rule assertion).
    last_write_end: AtomicU64,
}

impl Frame {
    fn new() -> Self {
        Frame {
            latch: HybridLatch::default(),
            page_id: AtomicU64::new(NO_PAGE),
            dirty: AtomicBool::new(false),
            writeback: AtomicBool::new(false),
            cool: AtomicBool::new(false),
            persisted_gsn: AtomicU64::new(0),
            last_writer: AtomicU32::new(WRITER_UNKNOWN),
            last_write_end: AtomicU64::new(0),
        }
    }

    #[inline]
    fn touch(&self) {
        if self.cool.load(Ordering::Relaxed) {
            self.cool.store(false, Ordering::Relaxed);
        }
    }
}

/// page id → frame index + 1 (0: not resident, LOADING: being read).
struct PageTable {
    chunks: Box<[OnceLock<Box<[AtomicU64]>>]>,
}

impl PageTable {
    fn new() -> Self {
        PageTable {
            chunks: (0..TABLE_CHUNKS).map(|_| OnceLock::new()).collect(),
        }
    }

    fn entry(&self, pid: PageId) -> &AtomicU64 {
        debug_assert!(pid < MAX_PAGES);
        let chunk = self.chunks[(pid >> TABLE_CHUNK_BITS) as usize].get_or_init(|| {
            (0..1usize << TABLE_CHUNK_BITS)
                .map(|_| AtomicU64::new(0))
                .collect()
        });
        &chunk[(pid & ((1 << TABLE_CHUNK_BITS) - 1)) as usize]
    }
}

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

/// Who writes a writeback batch (for the counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    Provider,
    Flush,
    Checkpoint,
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
    free_pages: Mutex<Vec<(PageId, u64)>>,
    /// The first I/O failure of a page write; the pool refuses further
    /// modifications once set (fjall/redb "poisoned" habit).
    failure: Mutex<Option<String>>,
    failed: AtomicBool,
    gate: parking_lot::RwLock<Option<Arc<dyn FlushGate>>>,
    /// The page provider stages only pages with a GSN at or below this
    /// (`u64::MAX` until the gate reports the log full).
    write_limit: AtomicU64,
    /// The double-write file: every batch is written and synced there before
    /// it is written in place, so a page torn by a crash during the in-place
    /// write is repaired from its copy at the next open. The mutex also
    /// serialises batches of the provider and of flushes.
    double_write: Mutex<Option<Arc<dyn StorageFile>>>,
    counters: Counters,
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
            free_pages: Mutex::new(free_pages.into_iter().map(|p| (p, 0)).collect()),
            failure: Mutex::new(None),
            failed: AtomicBool::new(false),
            gate: parking_lot::RwLock::new(None),
            write_limit: AtomicU64::new(u64::MAX),
            double_write: Mutex::new(None),
            counters: Counters::default(),
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

    /// Install the WAL rule's gate (the log layer calls this at open).
    pub fn set_flush_gate(&self, gate: Arc<dyn FlushGate>) {
        *self.gate.write() = Some(gate);
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

    /// Exclusive access to `pid` for redo: a page that was never written (or
    /// lies beyond the end of the file) is handed out as a fresh `Free` page
    /// with GSN 0 rather than as an error.
    pub fn exclusive_for_redo(&self, pid: PageId) -> Result<ExclusiveGuard<'_>> {
        self.ensure_allocated(pid + 1);
        match self.exclusive(pid) {
            Ok(g) => Ok(g),
            Err(Error::Corruption { detail, .. }) if detail.contains("never written") => {
                self.claim(pid, PageKind::Free, 0)
            }
            Err(Error::Io { cause, .. }) if cause.kind() == std::io::ErrorKind::UnexpectedEof => {
                self.claim(pid, PageKind::Free, 0)
            }
            Err(e) => Err(e),
        }
    }

    /// The high-water mark: every page id below it has been allocated.
    pub fn next_page_id(&self) -> PageId {
        self.next_page_id.load(Ordering::Acquire)
    }

    pub fn free_pages(&self) -> Vec<PageId> {
        self.free_pages.lock().iter().map(|&(p, _)| p).collect()
    }

    /// The free pages with the GSN of each one's last logged change.
    pub fn free_pages_with_gsn(&self) -> Vec<(PageId, u64)> {
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
            .gate
            .read()
            .as_ref()
            .map_or(u64::MAX, |g| g.write_limit());
        self.write_limit.store(limit, Ordering::Release);
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

    // ---------------------------------------------------------------
    // Page access
    // ---------------------------------------------------------------

    /// Frame index of `pid`, reading the page from disk if it is not resident.
    fn resolve(&self, pid: PageId) -> Result<u32> {
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
            .store(page::page_gsn(data), Ordering::Relaxed);
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

    /// Optimistic access: no latch is taken. Every byte read through the
    /// guard must be bounds-checked and discarded unless
    /// [`OptimisticGuard::validate`] succeeds afterwards.
    pub fn optimistic(&self, pid: PageId) -> Result<OptimisticGuard<'_>> {
        loop {
            let idx = self.resolve(pid)?;
            let frame = &self.frames[idx as usize];
            let version = frame.latch.optimistic_wait();
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
    /// page id if there is one.
    pub fn allocate(&self, kind: PageKind) -> Result<ExclusiveGuard<'_>> {
        self.check_healthy()?;
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
                (pid, 0)
            }
        };
        self.claim(pid, kind, gsn)
            .inspect_err(|_| self.free_pages.lock().push((pid, gsn)))
    }

    /// Give `pid` a fresh image of `kind`. The page table stays the single
    /// source of truth: a freed page may still be resident, or be read back
    /// by a reader that followed a pointer just before the page was freed
    /// (it will fail validation), so the id is claimed through its entry.
    fn claim(&self, pid: PageId, kind: PageKind, gsn: u64) -> Result<ExclusiveGuard<'_>> {
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

    // ---------------------------------------------------------------
    // Free frames and the page provider
    // ---------------------------------------------------------------

    fn release_frame(&self, idx: u32) {
        self.free_frames.lock().push(idx);
        self.frames_available.notify_one();
    }

    fn wake_provider(&self) {
        let mut wake = self.provider_wake.lock();
        *wake = true;
        self.provider_cv.notify_one();
    }

    fn take_free_frame(&self) -> Result<u32> {
        let deadline = Instant::now() + FRAME_WAIT_LIMIT;
        let mut free = self.free_frames.lock();
        loop {
            if let Some(idx) = free.pop() {
                if free.len() < self.free_target {
                    drop(free);
                    self.wake_provider();
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
            let limit = self.write_limit.load(Ordering::Acquire);
            if limit != u64::MAX
                && self.frames.len() - self.unwritable_frames(limit) < MIN_USABLE_FRAMES
            {
                return Err(Error::BufferPoolExhausted {
                    frames: self.frames.len(),
                });
            }
            self.wake_provider();
            free = self.free_frames.lock();
            self.frames_available
                .wait_for(&mut free, Duration::from_millis(5));
        }
    }

    /// Frames the page provider cannot free while the log vouches only up
    /// to GSN `limit`: dirty pages above it, and dirty pages latched
    /// exclusively (in use; counted as unwritable to be safe).
    fn unwritable_frames(&self, limit: u64) -> usize {
        (0..self.frames.len() as u32)
            .filter(|&idx| {
                let frame = &self.frames[idx as usize];
                if !frame.dirty.load(Ordering::Acquire) {
                    return false;
                }
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

    fn provider_loop(self: Arc<Self>) {
        let mut clock_hand = 0usize;
        let mut cooling: std::collections::VecDeque<(u32, PageId)> = Default::default();
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
    fn provider_round(
        &self,
        clock_hand: &mut usize,
        cooling: &mut std::collections::VecDeque<(u32, PageId)>,
        batch: &mut WritebackBatch,
    ) {
        let n = self.frames.len();
        if self.write_limit.load(Ordering::Acquire) != u64::MAX {
            self.learn_write_limit();
        }
        let limit = self.write_limit.load(Ordering::Acquire);
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
                if !batch.is_full() && !self.stage(batch, idx, false, limit) && limit != u64::MAX {
                    // Possibly above what the full log can vouch for: out
                    // of the queue (it would clog it), cooled again later.
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

    // ---------------------------------------------------------------
    // Writeback: shared by the page provider and flushes (seed 000 §3.8)
    // ---------------------------------------------------------------

    /// Copy frame `idx` into the batch if it is dirty, not already being
    /// written and its page GSN is at most `limit`. `wait` blocks for the
    /// shared latch instead of skipping.
    fn stage(&self, batch: &mut WritebackBatch, idx: u32, wait: bool, limit: u64) -> bool {
        let frame = &self.frames[idx as usize];
        if wait {
            frame.latch.shared();
        } else if !frame.latch.try_shared() {
            return false;
        }
        let pid = frame.page_id.load(Ordering::Acquire);
        // SAFETY: the shared latch excludes writers.
        let within_limit = limit == u64::MAX
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
    fn write_batch(&self, batch: &mut WritebackBatch, writer: Writer) -> Result<()> {
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
                    frame.persisted_gsn.fetch_max(item.gsn, Ordering::AcqRel);
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
        let max_gsn = batch.items.iter().map(|i| i.gsn).max().unwrap_or(0);
        let gate = self.gate.read().clone();
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
    pub fn flush_all(&self) -> Result<()> {
        self.check_healthy()?;
        let mut batch = WritebackBatch::new(self.page_size, WRITEBACK_BATCH_PAGES);
        let mut backoff = Backoff::new();
        loop {
            for idx in 0..self.frames.len() as u32 {
                if self.frames[idx as usize].dirty.load(Ordering::Acquire) {
                    self.stage(&mut batch, idx, true, u64::MAX);
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

    /// One checkpoint increment's writes (seed 000 §3.4): every page that
    /// is dirty in buffer shard `shard` of `shards` (the frames whose index
    /// is `shard` modulo `shards`) when the call starts reaches the data
    /// file before it returns. Each page is latched only to copy it into
    /// the writeback buffer, never during I/O. A page the page provider is
    /// writing meanwhile is waited for and, if it changed during that
    /// write, written again. Returns the number of pages this call wrote.
    pub fn checkpoint_shard(&self, shard: usize, shards: usize) -> Result<u64> {
        assert!(shard < shards, "shard {shard} of {shards}");
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
    /// docs/RELIABILITY.md findings 4-6).
    fn stage_or_revisit(&self, batch: &mut WritebackBatch, idx: u32) -> bool {
        let frame = &self.frames[idx as usize];
        if frame.dirty.load(Ordering::Acquire) {
            !self.stage(batch, idx, false, u64::MAX)
        } else {
            frame.writeback.load(Ordering::Acquire)
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

struct WritebackItem {
    idx: u32,
    pid: PageId,
    gsn: u64,
    /// The frame's last writer and the end of its last record at the copy.
    writer: u32,
    writer_end: u64,
}

/// Page copies staged for one write + `fdatasync` (seed 000 §3.8).
struct WritebackBatch {
    buf: AlignedBuf,
    page_size: usize,
    items: Vec<WritebackItem>,
}

impl WritebackBatch {
    fn new(page_size: usize, pages: usize) -> Self {
        WritebackBatch {
            buf: AlignedBuf::zeroed(page_size * pages),
            page_size,
            items: Vec::with_capacity(pages),
        }
    }

    fn is_full(&self) -> bool {
        self.items.len() * self.page_size >= self.buf.len()
    }

    fn is_empty(&self) -> bool {
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
            writer_end: frame.last_write_end.load(Ordering::Relaxed),
        });
    }

    fn slot(&self, slot: usize) -> &[u8] {
        &self.buf.as_slice()[slot * self.page_size..(slot + 1) * self.page_size]
    }

    fn clear(&mut self) {
        self.items.clear();
    }
}

// ---------------------------------------------------------------
// Guards
// ---------------------------------------------------------------

/// Where a page was found and the latch version it was validated at: lets
/// a later access to the same page skip the lookup that found it (for the
/// B-tree, the descent from the root; LeanStore's optimistic latching
/// makes the same shortcut). Only [`OptimisticGuard::hint`] makes one, and
/// [`BufferPool::optimistic_hinted`] honours it only while the frame is
/// unchanged, so a stale hint costs a failed check, never a wrong page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHint {
    frame: u32,
    pid: PageId,
    version: u64,
}

impl FrameHint {
    pub fn page_id(&self) -> PageId {
        self.pid
    }
}

/// A page read without a latch. See [`BufferPool::optimistic`].
pub struct OptimisticGuard<'a> {
    pool: &'a BufferPool,
    idx: u32,
    version: u64,
    pid: PageId,
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
    pool: &'a BufferPool,
    idx: u32,
    pid: PageId,
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
    pool: &'a BufferPool,
    idx: u32,
    pid: PageId,
    modified: bool,
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
    pub fn set_last_writer(&self, partition: u32, end: u64) {
        let frame = &self.pool.frames[self.idx as usize];
        frame.last_writer.store(partition, Ordering::Relaxed);
        frame.last_write_end.store(end, Ordering::Relaxed);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{OpenMode, SimStorage, Storage};
    use std::path::Path;

    /// A pool of `frames` 4 KiB frames over `/db/data` on a simulated disk.
    fn sim_pool(frames: usize) -> Arc<BufferPool> {
        sim_pool_from(frames, 1)
    }

    /// The same, with page ids handed out from `next_page_id`.
    fn sim_pool_from(frames: usize, next_page_id: PageId) -> Arc<BufferPool> {
        let sim = SimStorage::new(1);
        sim.create_dir_all(Path::new("/db")).unwrap();
        let file = sim
            .open(Path::new("/db/data"), OpenMode::CreateIfMissing)
            .unwrap();
        let config = PoolConfig {
            page_size: 4096,
            frames,
        };
        BufferPool::start(config, file, next_page_id, Vec::new()).unwrap()
    }

    /// A data file whose page ids are used up refuses new pages with its
    /// own error, naming the file, and takes no id beyond the last.
    #[test]
    fn allocating_past_the_last_page_id_is_data_file_full() {
        let pool = sim_pool_from(16, MAX_PAGES);
        match pool.allocate(PageKind::BtreeLeaf) {
            Err(Error::DataFileFull { path, pages }) => {
                assert_eq!(path, Path::new("/db/data"));
                assert_eq!(pages, MAX_PAGES);
            }
            r => panic!("expected DataFileFull, got {:?}", r.map(|g| g.page_id())),
        }
        assert_eq!(pool.next_page_id(), MAX_PAGES);
        pool.stop();
    }

    /// A budget the machine cannot map is an error, not an abort, and
    /// more frames than frame ids is refused before any memory is taken.
    #[test]
    fn an_impossible_budget_is_an_error() {
        let sim = SimStorage::new(1);
        sim.create_dir_all(Path::new("/db")).unwrap();
        let file = sim
            .open(Path::new("/db/data"), OpenMode::CreateIfMissing)
            .unwrap();
        let start = |page_size, frames| {
            let config = PoolConfig { page_size, frames };
            BufferPool::start(config, Arc::clone(&file), 1, Vec::new())
        };
        // 2^32 - 1 pages of 64 KiB: 256 TiB, more than a process can map
        // (47 bits of address space), whatever the overcommit policy.
        match start(65536, u32::MAX as usize) {
            Err(Error::OutOfMemory { bytes, .. }) => assert_eq!(bytes, u32::MAX as usize * 65536),
            r => panic!("{r:?}"),
        }
        match start(4096, 1 << 32) {
            Err(Error::InvalidOptions(msg)) => assert!(msg.contains("4294967296"), "{msg}"),
            r => panic!("{r:?}"),
        }
        start(4096, MIN_FRAMES).unwrap().stop();
    }

    /// A hint is honoured while its frame holds the same page at the same
    /// latch version, and refused after anything that could have changed
    /// what the frame holds: a write, an exclusive holder, the page freed
    /// and its id reallocated in the same frame (same page id, new bytes),
    /// eviction, and the frame's reuse by another page.
    #[test]
    fn a_frame_hint_is_honoured_only_while_its_frame_is_unchanged() {
        let pool = sim_pool(32);
        let hint_of = |pid| pool.optimistic(pid).unwrap().hint().unwrap();
        let pid = {
            let mut g = pool.allocate(PageKind::BtreeLeaf).unwrap();
            g.data_mut()[200] = 7;
            g.page_id()
        };
        let hint = hint_of(pid);
        assert_eq!(hint.page_id(), pid);
        let g = pool.optimistic_hinted(hint).expect("unchanged frame");
        assert_eq!((g.page_id(), g.data()[200]), (pid, 7));
        assert!(g.validate());
        // A holder that changed nothing, or shared holders, change no version.
        drop(pool.exclusive(pid).unwrap());
        let shared = pool.shared(pid).unwrap();
        assert!(pool.optimistic_hinted(hint).is_some());
        drop(shared);

        // A write.
        pool.exclusive(pid).unwrap().data_mut()[200] = 8;
        assert!(pool.optimistic_hinted(hint).is_none());
        let hint = hint_of(pid);
        // An exclusive holder (who may be changing the page).
        let held = pool.exclusive(pid).unwrap();
        assert!(pool.optimistic_hinted(hint).is_none());
        drop(held);
        assert!(pool.optimistic_hinted(hint).is_some());

        // The page freed and its id handed out again, in the same frame.
        pool.free_page(pool.exclusive(pid).unwrap());
        let again = pool.allocate(PageKind::BtreeInner).unwrap();
        assert_eq!(again.page_id(), pid);
        assert_eq!(again.idx, hint.frame, "reallocated in place");
        drop(again);
        assert!(pool.optimistic_hinted(hint).is_none());

        // Eviction, then the frame's reuse by another page.
        let hint = hint_of(pid);
        pool.flush_all().unwrap();
        let (mut hand, mut cooling) = (0, Default::default());
        let mut batch = WritebackBatch::new(pool.page_size, WRITEBACK_BATCH_PAGES);
        let frame = &pool.frames[hint.frame as usize];
        for _ in 0..100 {
            if frame.page_id.load(Ordering::Acquire) != pid {
                break;
            }
            pool.provider_round(&mut hand, &mut cooling, &mut batch);
        }
        assert_ne!(frame.page_id.load(Ordering::Acquire), pid, "evicted");
        assert!(pool.optimistic_hinted(hint).is_none());
        while frame.page_id.load(Ordering::Acquire) == NO_PAGE {
            drop(pool.allocate(PageKind::BtreeLeaf).unwrap());
        }
        assert!(pool.optimistic_hinted(hint).is_none());
        // The page reads back through the page table as usual.
        let g = pool.optimistic(pid).unwrap();
        assert_eq!(page::page_kind(g.data()), Some(PageKind::BtreeInner));
        assert!(g.validate());
        pool.stop();
    }

    /// A log that is full at GSN 0: the page provider may evict clean pages
    /// but writes none of GSN 1 and above, so only the checkpoint
    /// increment writes them (the test's interleaving, made certain).
    struct FullAtZero;

    impl FlushGate for FullAtZero {
        fn ensure_durable(&self, _gsn: u64) -> Result<()> {
            Ok(())
        }
        fn is_durable_at(&self, _partition: u32, _end: u64) -> bool {
            true
        }
        fn write_limit(&self) -> u64 {
            0
        }
    }

    /// Regression (found by `waypoint simulate --workload tpcc`, seed 2843,
    /// 2026-11-22, about one run in ten, in the TPC-C load): a checkpoint
    /// increment waited for a page's latch while the pages it had staged so
    /// far sat in its unwritten batch, in writeback, where the page provider
    /// cannot evict them; the latch's holder, a worker in the middle of a
    /// split, waited for a free frame; with a pool no larger than a batch
    /// (64 pages) nothing else was left to evict, and the worker failed
    /// after 10 s with `BufferPoolExhausted`. An increment now skips a
    /// latched page and comes back to it after writing its batch.
    #[test]
    fn a_checkpoint_increment_does_not_wait_for_a_latch_while_holding_staged_pages() {
        let pool = sim_pool(MIN_FRAMES);
        pool.set_flush_gate(Arc::new(FullAtZero));
        pool.write_limit.store(0, Ordering::Release);
        // A dirty page of GSN 1 in every frame (frames are handed out from
        // 0 up).
        let mut guards: Vec<_> = (0..MIN_FRAMES)
            .map(|_| {
                let mut g = pool.allocate(PageKind::BtreeLeaf).unwrap();
                page::set_page_gsn(g.data_mut(), 1);
                g
            })
            .collect();
        // The worker keeps the last frame's page latched.
        let held = guards.pop().unwrap();
        let last = MIN_FRAMES - 1;
        assert_eq!(
            pool.table.entry(held.page_id()).load(Ordering::Acquire),
            last as u64 + 1
        );
        drop(guards);
        std::thread::scope(|s| {
            let increment = s.spawn(|| pool.checkpoint_shard(0, 1));
            // Once the increment has taken every other page, the worker
            // asks for a frame, its latch still held.
            while pool.frames[..last]
                .iter()
                .any(|f| f.dirty.load(Ordering::Acquire))
            {
                std::thread::yield_now();
            }
            let fresh = pool.allocate(PageKind::BtreeLeaf);
            assert!(fresh.is_ok(), "{:?}", fresh.err());
            drop(fresh);
            drop(held);
            assert_eq!(increment.join().unwrap().unwrap(), MIN_FRAMES as u64);
        });
    }
}
