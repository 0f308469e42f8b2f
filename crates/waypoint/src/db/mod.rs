//! The public API: [`Database`], [`Options`], sessions, tables, indexes,
//! statistics, and the open and close paths.
//!
//! Open: read the superblock (page 0) and free list, start the buffer pool
//! and its page provider, load the catalog. Clean close: quiesce commits,
//! write every dirty page, write the free list and the superblock, sync.
//!
//! Durability: with `Logging::PerWorker` (the default) every page change is
//! logged to the session's log partition and a commit is acknowledged per
//! the [`CommitProtocol`]; open recovers (analysis, redo, undo) from the log.
//! Page writes go through a double-write file so a torn page is repaired
//! before recovery reads it. With `Logging::None` the data file is
//! consistent after a clean close only.
//!
//! I/O errors: a failed write or `fdatasync` never lets a commit be
//! acknowledged and is never retried. A failed page write poisons the
//! database ([`Error::Poisoned`] on every later call). A failed log write or
//! log `fdatasync` poisons the session's log partition. `ENOSPC` on a log
//! write makes the database read-only: commits not yet durable fail with
//! [`Error::LogFull`], every later write and DDL is refused with it, reads
//! (`get`, `scan`, read-only transactions) go on, and `close` fails with it;
//! after space is freed, a reopen recovers every acknowledged commit (see
//! README "Durability" and ARCHITECTURE.md "A full log disk").

mod superblock;

pub use superblock::{Superblock, DB_FORMAT_VERSION};

use crate::btree::node::{Fence, NodeMut};
use crate::btree::{BTree, PageLog};
use crate::buffer::double_write;
use crate::buffer::page::{self, PageKind, DEFAULT_PAGE_SIZE};
use crate::buffer::{BufferPool, PoolConfig, PoolStats};
use crate::catalog::{self, Catalog, Index, KeyExtractor, Table, CATALOG_ROOT};
use crate::checkpoint::{
    self, meta, CheckpointConfig, CheckpointMode, CheckpointStats, Checkpointer,
};
use crate::error::{Error, Result};
use crate::io::{AlignedBuf, OpenMode, RealStorage, Storage, StorageFile};
use crate::txn::epoch::EpochClock;
use crate::txn::epoch::SYSTEM_SLOT;
use crate::txn::locks::{LockTable, SlotPool};
use crate::txn::Session;
use crate::txn::SessionLog;
use crate::wal::recovery::{Analysis, RecoveryReport};
use crate::wal::{CommitProtocol, Wal};
use parking_lot::{Mutex, RwLock};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// Name of the data file inside the database directory.
pub const DATA_FILE: &str = "data.waypoint";
/// The double-write file (torn-page protection).
pub const DOUBLE_WRITE_FILE: &str = "doublewrite.waypoint";
/// Directory of the write-ahead log partitions.
pub const WAL_DIR: &str = "wal";
/// A new data file while it is being written; renamed to [`DATA_FILE`]
/// once whole.
pub const NEW_DATA_FILE: &str = "data.waypoint.new";

/// Which log the database keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Logging {
    /// No log: durable only after a clean close (for measuring the cost of
    /// logging; a crash can lose or tear changes since the last close).
    None,
    /// One log partition per session, ordered by GSNs (seed 000).
    #[default]
    PerWorker,
}

/// How to open a database.
///
/// Every field has a range, given in its documentation; [`Options::validate`]
/// checks them all (`Database::open` calls it before touching anything) and
/// names the first option out of range, its value and the range in
/// [`Error::InvalidOptions`]. [`Options::default`] is valid.
#[derive(Clone)]
pub struct Options {
    /// Page size for a new database (4 KiB to 64 KiB, a power of two).
    /// `None`: 16 KiB for a new database, the stored size for an existing
    /// one. A value that differs from an existing database's is an error.
    pub page_size: Option<usize>,
    /// Memory for page frames, in bytes. Data larger than this works; the
    /// page provider evicts pages to stay within it.
    ///
    /// Range: at least 16 pages (what one B-tree operation of a handful of
    /// sessions latches at once: 256 KiB at 16 KiB pages); at most the
    /// machine's memory and swap, and 2^32 − 1 pages. The frames are
    /// reserved when the database opens; if the system refuses them,
    /// `open` fails with [`Error::OutOfMemory`].
    pub buffer_pool_bytes: usize,
    /// Create the database if the directory holds none.
    pub create_if_missing: bool,
    /// Open the data file with `O_DIRECT` (the double-write file and the
    /// checkpoint metadata are written at unaligned offsets and stay
    /// buffered; the log has `log_direct_io`).
    pub direct_io: bool,
    /// Write the log's segment files with `O_DIRECT`, in whole 4 KiB
    /// blocks (the partial last block is rewritten with the next write),
    /// bypassing the page cache's copy and writeback; the zero-filling of
    /// spare segments too. A file system that refuses `O_DIRECT` gets
    /// buffered log files (with a warning). Only the real file system
    /// reads this; a [`crate::io::SimStorage`] has its own switch. On by
    /// default: 2-worker TPC-C ran 7.7% faster (docs/BENCHMARKS.md,
    /// "Session 13").
    pub log_direct_io: bool,
    /// The file system to use; `None` is the real one. Tests pass a
    /// [`crate::io::SimStorage`].
    pub storage: Option<Arc<dyn Storage>>,
    pub logging: Logging,
    /// How commits become durable (see [`CommitProtocol`]).
    pub commit: CommitProtocol,
    /// Threads for redo and undo (analysis runs a thread per log
    /// partition). Range: 1 to 1024.
    pub recovery_threads: usize,
    /// A log segment file is closed and a new one started beyond this size
    /// (with checkpoints on, at most the larger of 1/32 of `wal_limit_bytes`
    /// and 64 KiB, so pruning whole segments can follow the limit).
    ///
    /// Range: 4 KiB (one log block: a smaller segment is closed after
    /// almost every log write, a file per write) to 1 GiB (preallocation
    /// writes up to three segments ahead of each partition's log).
    pub wal_segment_bytes: u64,
    /// How dirty pages are written and the log pruned while running.
    pub checkpoint: CheckpointMode,
    /// The WAL limit: with checkpoints on, the log on disk stays near it
    /// (continuous) or below it plus one burst (full); see ARCHITECTURE.md.
    ///
    /// Range: at least `checkpoint_shards` × 4 KiB, at most 1 PiB. A
    /// checkpoint increment follows every `wal_limit_bytes /
    /// checkpoint_shards` bytes of log and costs synced page and metadata
    /// writes, and back-pressure holds new transactions while the log is
    /// more than two increments ahead. With at least one 4 KiB log block
    /// per increment the checkpointer needs no more increments than the
    /// log writes blocks, so commits slow down but go on; with 1 byte per
    /// increment (a 1-byte limit) every commit waited for thousands of
    /// increments and a TPC-B load stood still for over 90 s.
    pub wal_limit_bytes: u64,
    /// Buffer shards of continuous checkpointing (one per increment).
    /// Range: 1 to 4096.
    pub checkpoint_shards: usize,
    /// Checkpoint increments that may run at once on distinct shards, each
    /// on its own thread, when the checkpointer falls behind (never more
    /// at once than `checkpoint_shards`). Range: 1 to 256.
    pub checkpoint_threads: usize,
    /// Stage 3 of the log: move log segments that are no longer needed to
    /// this directory (relative paths are below the database directory)
    /// instead of deleting them. Nothing removes them from there.
    pub wal_archive_dir: Option<PathBuf>,
    /// Sync pacing: while commits stream in and no thread is blocked
    /// waiting for durability, a log partition starts a sync at most this
    /// often (or once 128 KiB are waiting), so pipelined commits share
    /// syncs. A commit that waits (`Transaction::commit`, or a pipelined
    /// handle's `wait`) ends the pause at once, so an isolated commit is
    /// not delayed. Zero syncs whenever anything is waiting to be synced.
    /// Range: 0 to 1 s (longer would leave pipelined commits unacknowledged
    /// for longer than any commit should wait).
    pub log_sync_interval: std::time::Duration,
    /// Segment preallocation: each log partition keeps its next segment
    /// ready, written and synced, so log syncs overwrite written blocks
    /// instead of growing a file (on ext4 about half the `fdatasync` time).
    /// A pruned segment is recycled into a later one (without
    /// `wal_archive_dir`); until pruning starts, and whenever no pruned
    /// segment is at hand, the next segment is zero-filled first, which
    /// writes its place twice. Reserves up to three segments of space per
    /// partition ahead of the log. Off: segments grow by appends and
    /// pruned ones are deleted.
    pub wal_preallocate: bool,
    /// With `wal_preallocate`: while no pruned segment is queued for reuse
    /// (until pruning starts: the first `wal_limit_bytes` of log after an
    /// open), zero-fill the next segment ahead of the log (on) or let new
    /// segments grow as they fill (off). Leave it on where growing a file
    /// costs a journal commit per sync (ext4 with a journal): there a
    /// sync into zero-filled blocks took half the time. Turn it off where
    /// it does not (ext4 without a journal, as on this project's VM): the
    /// zeros then only double the log's bytes and queue their syncs ahead
    /// of the log's (TPC-C commit p99 24 ms against 14 ms;
    /// docs/BENCHMARKS.md, "Session 17").
    pub wal_zero_fill: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            page_size: None,
            buffer_pool_bytes: 256 << 20,
            create_if_missing: true,
            direct_io: false,
            log_direct_io: true,
            storage: None,
            logging: Logging::PerWorker,
            commit: CommitProtocol::RfaGroup,
            recovery_threads: 2,
            wal_segment_bytes: crate::wal::partition::SEGMENT_SIZE,
            checkpoint: CheckpointMode::Continuous,
            wal_limit_bytes: 1 << 30,
            checkpoint_shards: 64,
            checkpoint_threads: 1,
            wal_archive_dir: None,
            log_sync_interval: crate::wal::partition::SYNC_INTERVAL,
            wal_preallocate: true,
            wal_zero_fill: true,
        }
    }
}

impl Options {
    /// Fewest log bytes per checkpoint increment (`wal_limit_bytes /
    /// checkpoint_shards`): one log block.
    pub const MIN_LOG_PER_INCREMENT: u64 = 4096;
    pub const MAX_WAL_LIMIT_BYTES: u64 = 1 << 50;
    pub const MIN_WAL_SEGMENT_BYTES: u64 = 4096;
    pub const MAX_WAL_SEGMENT_BYTES: u64 = 1 << 30;
    pub const MAX_CHECKPOINT_SHARDS: usize = 4096;
    pub const MAX_CHECKPOINT_THREADS: usize = 256;
    pub const MAX_RECOVERY_THREADS: usize = 1024;
    pub const MAX_LOG_SYNC_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

    /// Check every option against its documented range, and the options
    /// that constrain each other together. `Database::open` calls it
    /// first; the error names the option, its value and the range.
    ///
    /// The buffer's lower bound is checked here against `page_size` (4 KiB
    /// when it is `None`); `open` checks it again against the page size of
    /// an existing database.
    pub fn validate(&self) -> Result<()> {
        fn out_of_range(option: &str, value: impl std::fmt::Display, range: String) -> Error {
            Error::InvalidOptions(format!("{option} = {value} is out of range: {range}"))
        }
        if let Some(ps) = self.page_size {
            if !page::is_valid_page_size(ps) {
                return Err(out_of_range(
                    "page_size",
                    ps,
                    format!(
                        "a power of two from {} to {}",
                        page::MIN_PAGE_SIZE,
                        page::MAX_PAGE_SIZE
                    ),
                ));
            }
        }
        let page_size = self.page_size.unwrap_or(page::MIN_PAGE_SIZE);
        let min_frames = crate::buffer::pool::MIN_FRAMES;
        let min_buffer = min_frames * page_size;
        let max_frames = u32::MAX as usize;
        let memory = crate::io::machine_memory_bytes()
            .map_or(usize::MAX, |m| usize::try_from(m).unwrap_or(usize::MAX));
        let buffer = self.buffer_pool_bytes;
        let buffer_text = format_bytes(buffer as u64);
        if buffer < min_buffer {
            return Err(out_of_range(
                "buffer_pool_bytes",
                &buffer_text,
                format!(
                    "at least {} ({min_frames} pages of {page_size} bytes)",
                    format_bytes(min_buffer as u64)
                ),
            ));
        }
        if buffer > memory {
            return Err(out_of_range(
                "buffer_pool_bytes",
                &buffer_text,
                format!(
                    "at most the machine's memory and swap, {}",
                    format_bytes(memory as u64)
                ),
            ));
        }
        if buffer / page_size > max_frames {
            return Err(out_of_range(
                "buffer_pool_bytes",
                &buffer_text,
                format!("at most {max_frames} pages of {page_size} bytes"),
            ));
        }
        if !(1..=Self::MAX_RECOVERY_THREADS).contains(&self.recovery_threads) {
            return Err(out_of_range(
                "recovery_threads",
                self.recovery_threads,
                format!("1 to {}", Self::MAX_RECOVERY_THREADS),
            ));
        }
        let segment = Self::MIN_WAL_SEGMENT_BYTES..=Self::MAX_WAL_SEGMENT_BYTES;
        if !segment.contains(&self.wal_segment_bytes) {
            return Err(out_of_range(
                "wal_segment_bytes",
                format_bytes(self.wal_segment_bytes),
                format!(
                    "{} to {}",
                    format_bytes(*segment.start()),
                    format_bytes(*segment.end())
                ),
            ));
        }
        if !(1..=Self::MAX_CHECKPOINT_SHARDS).contains(&self.checkpoint_shards) {
            return Err(out_of_range(
                "checkpoint_shards",
                self.checkpoint_shards,
                format!("1 to {}", Self::MAX_CHECKPOINT_SHARDS),
            ));
        }
        if !(1..=Self::MAX_CHECKPOINT_THREADS).contains(&self.checkpoint_threads) {
            return Err(out_of_range(
                "checkpoint_threads",
                self.checkpoint_threads,
                format!("1 to {}", Self::MAX_CHECKPOINT_THREADS),
            ));
        }
        let min_limit = self.checkpoint_shards as u64 * Self::MIN_LOG_PER_INCREMENT;
        if !(min_limit..=Self::MAX_WAL_LIMIT_BYTES).contains(&self.wal_limit_bytes) {
            return Err(out_of_range(
                "wal_limit_bytes",
                format_bytes(self.wal_limit_bytes),
                format!(
                    "{} (checkpoint_shards {} x {} of log per checkpoint increment) to {}",
                    format_bytes(min_limit),
                    self.checkpoint_shards,
                    format_bytes(Self::MIN_LOG_PER_INCREMENT),
                    format_bytes(Self::MAX_WAL_LIMIT_BYTES)
                ),
            ));
        }
        if self.log_sync_interval > Self::MAX_LOG_SYNC_INTERVAL {
            return Err(out_of_range(
                "log_sync_interval",
                format!("{:?}", self.log_sync_interval),
                format!("at most {:?}", Self::MAX_LOG_SYNC_INTERVAL),
            ));
        }
        Ok(())
    }
}

/// `n` bytes exactly in the largest binary unit that divides it ("64 KiB",
/// "99999 TiB"), or, where that takes more than six digits, as bytes with
/// a rounded figure.
fn format_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB"];
    match n {
        0 => return "0 bytes".into(),
        1 => return "1 byte".into(),
        _ => {}
    }
    let exact = (0..UNITS.len())
        .rev()
        .find(|&u| n.is_multiple_of(1 << (10 * u)))
        .unwrap_or(0);
    if n >> (10 * exact) < 1 << 20 {
        return format!("{} {}", n >> (10 * exact), UNITS[exact]);
    }
    let near = (0..UNITS.len())
        .rev()
        .find(|&u| n >= 1 << (10 * u))
        .unwrap_or(0);
    format!(
        "{n} bytes (about {:.1} {})",
        n as f64 / (1u64 << (10 * near)) as f64,
        UNITS[near]
    )
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("page_size", &self.page_size)
            .field("buffer_pool_bytes", &self.buffer_pool_bytes)
            .field("create_if_missing", &self.create_if_missing)
            .field("direct_io", &self.direct_io)
            .field("log_direct_io", &self.log_direct_io)
            .field("storage", &self.storage.as_ref().map(|_| "custom"))
            .field("logging", &self.logging)
            .field("commit", &self.commit)
            .field("checkpoint", &self.checkpoint)
            .field("wal_limit_bytes", &self.wal_limit_bytes)
            .field("checkpoint_shards", &self.checkpoint_shards)
            .field("checkpoint_threads", &self.checkpoint_threads)
            .field("wal_archive_dir", &self.wal_archive_dir)
            .field("log_sync_interval", &self.log_sync_interval)
            .field("wal_preallocate", &self.wal_preallocate)
            .field("wal_zero_fill", &self.wal_zero_fill)
            .finish()
    }
}

#[derive(Default)]
pub(crate) struct Counters {
    pub commits: AtomicU64,
    pub aborts: AtomicU64,
}

/// State shared by the database handle and its sessions.
pub(crate) struct DbShared {
    pub pool: Arc<BufferPool>,
    pub wal: Option<Arc<Wal>>,
    pub locks: LockTable,
    pub slots: SlotPool,
    pub epoch: Arc<EpochClock>,
    pub counters: Counters,
    /// Commits hold it shared; close and DDL that must see no commit in
    /// flight hold it exclusively.
    pub quiesce: RwLock<()>,
    closed: AtomicBool,
    poisoned: Mutex<Option<String>>,
    is_poisoned: AtomicBool,
}

impl DbShared {
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if self.is_poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned {
                cause: self.poisoned.lock().clone().unwrap_or_default(),
            });
        }
        self.pool.check_healthy()
    }

    /// `check_open`, and `Err(LogFull)` once the log's disk is full: the
    /// database then takes no more writes (reads go on).
    pub(crate) fn check_writable(&self) -> Result<()> {
        self.check_open()?;
        match &self.wal {
            Some(wal) => wal.check_writable(),
            None => Ok(()),
        }
    }

    pub(crate) fn poison(&self, cause: String) {
        tracing::error!(%cause, "database poisoned");
        let mut p = self.poisoned.lock();
        if p.is_none() {
            *p = Some(cause);
        }
        self.is_poisoned.store(true, Ordering::Release);
    }
}

struct DbInner {
    shared: Arc<DbShared>,
    dir: PathBuf,
    storage: Arc<dyn Storage>,
    file: Arc<dyn StorageFile>,
    page_size: usize,
    catalog: Mutex<Catalog>,
    /// Logs catalog changes (the system slot's partition).
    system: Mutex<Box<dyn SessionLog>>,
    recovery: Option<RecoveryReport>,
    checkpointer: Option<Checkpointer>,
    next_session: AtomicU32,
    epoch_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    closed: Mutex<bool>,
}

/// An open database. Cheap to clone; closed by [`Database::close`] or when
/// the last clone (and every session) is dropped.
#[derive(Clone)]
pub struct Database {
    inner: Arc<DbInner>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Database({})", self.inner.dir.display())
    }
}

/// Counters of a database, readable at any time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub commits: u64,
    pub aborts: u64,
    pub page_size: usize,
    pub pool: PoolStats,
    pub wal: crate::wal::WalStats,
    pub checkpoint: CheckpointStats,
    /// Time transactions waited at begin for the checkpointer to bring the
    /// log under its limit.
    pub backpressure: std::time::Duration,
}

impl Database {
    /// Open the database in `dir`, creating it if allowed and missing.
    ///
    /// ```
    /// use waypoint::{Database, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Database::open(dir.path(), Options::default()).unwrap();
    /// let accounts = db.create_table("accounts").unwrap();
    /// let mut session = db.session();
    /// let mut tx = session.begin().unwrap();
    /// tx.insert(&accounts, b"alice", b"100").unwrap();
    /// tx.commit().unwrap();
    /// let mut tx = session.begin().unwrap();
    /// assert_eq!(tx.get(&accounts, b"alice").unwrap(), Some(b"100".to_vec()));
    /// drop(tx);
    /// drop(session);
    /// db.close().unwrap();
    /// ```
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<Database> {
        options.validate()?;
        let dir = dir.as_ref().to_path_buf();
        let storage: Arc<dyn Storage> = match &options.storage {
            Some(s) => Arc::clone(s),
            None => Arc::new(
                RealStorage::with_direct_io(options.direct_io)
                    .with_direct_log(options.log_direct_io),
            ),
        };
        let path = dir.join(DATA_FILE);
        if !storage.exists(&path) {
            Self::create(storage.as_ref(), &dir, &options)?;
        }
        let file = storage.open_data_file(&path, OpenMode::Existing)?;
        // Until the files are checked against each other, only reads: an
        // open refused for what it found changes no file.
        let sb = Superblock::read(file.as_ref())?;
        if let Some(ps) = options.page_size {
            if ps as u32 != sb.page_size {
                return Err(Error::PageSizeMismatch {
                    path,
                    found: sb.page_size,
                    requested: ps as u32,
                });
            }
        }
        let free_pages = superblock::read_free_list(
            file.as_ref(),
            sb.page_size as usize,
            sb.free_list_head,
            sb.next_page_id,
        )?;
        // Pages written after the superblock (before an unclean stop) are
        // still allocated.
        let in_file = file.len()? / sb.page_size as u64;
        let superblock = Superblock {
            next_page_id: sb.next_page_id.max(in_file),
            ..sb
        };
        let page_size = superblock.page_size as usize;
        let frames = options.buffer_pool_bytes / page_size;
        if frames < crate::buffer::pool::MIN_FRAMES {
            return Err(Error::InvalidOptions(format!(
                "buffer_pool_bytes = {} is out of range: at least {} ({} pages of this database's {page_size} bytes)",
                format_bytes(options.buffer_pool_bytes as u64),
                format_bytes((crate::buffer::pool::MIN_FRAMES * page_size) as u64),
                crate::buffer::pool::MIN_FRAMES
            )));
        }
        let checkpoint = meta::read(storage.as_ref(), &dir)?;
        // The log floor: the clean close's (superblock) or the last
        // checkpoint's (metadata file), whichever is newer.
        let floor = superblock
            .log_floor
            .max(checkpoint.as_ref().map_or(0, |m| m.floor));
        let analysis = match options.logging {
            Logging::PerWorker => Some(Self::check_log(
                storage.as_ref(),
                &dir,
                &superblock,
                checkpoint.as_ref(),
                floor,
            )?),
            Logging::None if !superblock.clean && superblock.log_required => {
                return Err(Error::RecoveryNeeded {
                    path: dir.join(DATA_FILE),
                });
            }
            Logging::None => None,
        };
        // Checked: from here on the open writes.
        let dw_file = storage.open(&dir.join(DOUBLE_WRITE_FILE), OpenMode::CreateIfMissing)?;
        let repaired = double_write::repair(file.as_ref(), dw_file.as_ref(), page_size)?;
        let pool = BufferPool::start(
            PoolConfig { page_size, frames },
            Arc::clone(&file),
            superblock.next_page_id,
            free_pages,
        )?;
        pool.set_double_write(dw_file);
        let wal_limit =
            checkpoint::limit_for_disk(options.wal_limit_bytes, storage.available_space(&dir));
        if options.logging == Logging::PerWorker && wal_limit < options.wal_limit_bytes {
            tracing::warn!(dir = %dir.display(), configured = options.wal_limit_bytes, lowered_to = wal_limit,
                "the disk is small for the WAL limit: the log is kept near a quarter of the free space (Options::wal_limit_bytes)");
        }
        let opened = Self::recover_and_load(
            &storage,
            &dir,
            &pool,
            file.as_ref(),
            &superblock,
            floor,
            analysis,
            &options,
            wal_limit,
            repaired,
        );
        let (catalog, wal, recovery, synced) = match opened {
            Ok(v) => v,
            Err(e) => {
                pool.stop();
                return Err(e);
            }
        };
        let checkpointer = match &wal {
            Some(w) => Some(
                Checkpointer::start(
                    Arc::clone(&pool),
                    Arc::clone(w),
                    Arc::clone(&storage),
                    dir.clone(),
                    CheckpointConfig {
                        mode: options.checkpoint,
                        wal_limit,
                        shards: options.checkpoint_shards,
                        threads: options.checkpoint_threads,
                    },
                    floor,
                    synced,
                )
                .inspect_err(|_| pool.stop())?,
            ),
            None => None,
        };
        let system: Box<dyn SessionLog> = match &wal {
            Some(w) => Box::new(w.session_log(SYSTEM_SLOT)?),
            None => Box::new(crate::txn::NoSessionLog::default()),
        };
        let (epoch, epoch_thread) = EpochClock::start(superblock.epoch + 1);
        if let Some(w) = &wal {
            w.set_first_epoch(epoch.current());
        }
        let shared = Arc::new(DbShared {
            pool,
            wal,
            locks: LockTable::new(),
            slots: SlotPool::new(),
            epoch,
            counters: Counters::default(),
            quiesce: RwLock::new(()),
            closed: AtomicBool::new(false),
            poisoned: Mutex::new(None),
            is_poisoned: AtomicBool::new(false),
        });
        tracing::info!(dir = %dir.display(), page_size, frames, "database open");
        Ok(Database {
            inner: Arc::new(DbInner {
                shared,
                dir,
                storage,
                file,
                page_size,
                catalog: Mutex::new(catalog),
                system: Mutex::new(system),
                recovery,
                checkpointer,
                next_session: AtomicU32::new(0),
                epoch_thread: Mutex::new(Some(epoch_thread)),
                closed: Mutex::new(false),
            }),
        })
    }

    /// Segment size: pruning removes whole segments and each partition
    /// keeps its newest, so with checkpoints on a segment is at most 1/32 of
    /// the WAL limit, a cap that never drops below 64 KiB (the log on disk
    /// then stays within a few percent of larger limits).
    fn segment_bytes(options: &Options, wal_limit: u64) -> u64 {
        match options.checkpoint {
            CheckpointMode::None => options.wal_segment_bytes,
            _ => options
                .wal_segment_bytes
                .min((wal_limit / 32).max(64 << 10)),
        }
    }

    /// Create an empty database in `dir`, which holds no data file; or
    /// refuse: with `NotADatabase` without `create_if_missing`, and with
    /// `MissingFile` naming the data file if the directory holds any other
    /// file of a database (its log, checkpoint metadata or double-write
    /// file): that is a database that lost its data file, not a place for
    /// a new one.
    ///
    /// The new data file is written whole under a temporary name (page 1,
    /// the empty catalog root, and a clean superblock), synced, and renamed
    /// into place, so a data file always holds a superblock: a crash
    /// leaves either no data file (and maybe the temporary one, replaced
    /// at the next try) or an empty database closed cleanly.
    fn create(storage: &dyn Storage, dir: &Path, options: &Options) -> Result<()> {
        let path = dir.join(DATA_FILE);
        for name in [WAL_DIR, meta::META_FILE, DOUBLE_WRITE_FILE] {
            let other = dir.join(name);
            if storage.exists(&other) {
                return Err(Error::MissingFile {
                    path,
                    detail: format!(
                        "the directory holds {} of a database without its data file (a new database is only created in a directory without one)",
                        other.display()
                    ),
                });
            }
        }
        if !options.create_if_missing {
            return Err(Error::NotADatabase { path });
        }
        if !storage.exists(dir) {
            storage.create_dir_all(dir)?;
            // The new directory's entry must survive power loss too: sync
            // its ancestors (only on creation, so the cost does not matter).
            let mut child = dir;
            while let Some(parent) = child.parent() {
                let parent = if parent.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    parent
                };
                storage.sync_dir(parent)?;
                if parent == Path::new(".") || parent.parent().is_none() {
                    break;
                }
                child = parent;
            }
        }
        let page_size = options.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
        let temp = dir.join(NEW_DATA_FILE);
        if storage.exists(&temp) {
            storage.remove(&temp)?;
        }
        let file = storage.open(&temp, OpenMode::CreateNew)?;
        let mut root = AlignedBuf::zeroed(page_size);
        let data = root.as_mut_slice();
        page::init_page(data, CATALOG_ROOT, PageKind::BtreeLeaf);
        NodeMut::new(data).init_leaf(Fence::Infinite, Fence::Infinite);
        page::seal(data);
        file.write_at(data, CATALOG_ROOT * page_size as u64)?;
        Superblock {
            page_size: page_size as u32,
            next_page_id: CATALOG_ROOT + 1,
            catalog_root: CATALOG_ROOT,
            free_list_head: 0,
            clean: true,
            log_required: false,
            epoch: 0,
            log_floor: 0,
        }
        .write(file.as_ref())?;
        drop(file);
        storage.rename(&temp, &path)?;
        storage.sync_dir(dir)?;
        tracing::info!(dir = %dir.display(), page_size, "database created");
        Ok(())
    }

    /// Read the log and check it against the superblock and the checkpoint
    /// metadata, changing nothing:
    /// - a database not closed cleanly by a build that keeps synced
    ///   positions (`Superblock::log_required`) must have its checkpoint
    ///   metadata (`MissingFile`), in that format, with a floor not below
    ///   the superblock's (`Mismatch`), and its log directory
    ///   (`MissingFile`), and each partition's log must reach the position
    ///   recorded as synced (`LogTruncated`);
    /// - a cleanly closed database's log (what a crash during the close
    ///   left of it) holds no record above the superblock's floor: one
    ///   there means the data file is older than the log (`Mismatch`).
    fn check_log(
        storage: &dyn Storage,
        dir: &Path,
        superblock: &Superblock,
        checkpoint: Option<&meta::Meta>,
        floor: u64,
    ) -> Result<Analysis> {
        let log_dir = dir.join(WAL_DIR);
        let required = !superblock.clean && superblock.log_required;
        if required {
            let meta_path = dir.join(meta::META_FILE);
            let Some(checkpoint) = checkpoint else {
                return Err(Error::MissingFile {
                    path: meta_path,
                    detail: "the database was not closed cleanly, and recovery needs the log floor and synced log positions recorded there".into(),
                });
            };
            if checkpoint.version < meta::META_FORMAT_VERSION {
                return Err(Error::Mismatch {
                    path: meta_path,
                    detail: format!(
                        "it is in format version {} and records no synced log positions, but the database was left open by a build that writes version {}",
                        checkpoint.version,
                        meta::META_FORMAT_VERSION
                    ),
                });
            }
            if checkpoint.floor < superblock.log_floor {
                return Err(Error::Mismatch {
                    path: meta_path,
                    detail: format!(
                        "it records log floor {}, below the floor {} of {}: it is older than the data file",
                        checkpoint.floor,
                        superblock.log_floor,
                        DATA_FILE
                    ),
                });
            }
            if !storage.exists(&log_dir) {
                return Err(Error::MissingFile {
                    path: log_dir,
                    detail: "the database was not closed cleanly, and recovery needs its log"
                        .into(),
                });
            }
        }
        let analysis = Analysis::read(storage, &log_dir, floor)?;
        if required {
            analysis.check_synced(&checkpoint.map(|m| m.synced.clone()).unwrap_or_default())?;
        }
        if superblock.clean {
            if let Some((gsn, partition)) = analysis.max_gsn() {
                if gsn > superblock.log_floor {
                    return Err(Error::Mismatch {
                        path: dir.join(DATA_FILE),
                        detail: format!(
                            "it was closed cleanly with every log record up to GSN {} in it, but {} holds records up to GSN {gsn}: the data file is older than the log",
                            superblock.log_floor,
                            partition.display()
                        ),
                    });
                }
            }
        }
        Ok(analysis)
    }

    /// Recover from the log (`analysis`, if logging), then load the
    /// catalog. Returns the synced positions the checkpoint metadata now
    /// records.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn recover_and_load(
        storage: &Arc<dyn Storage>,
        dir: &Path,
        pool: &Arc<BufferPool>,
        file: &dyn StorageFile,
        superblock: &Superblock,
        floor: u64,
        analysis: Option<Analysis>,
        options: &Options,
        wal_limit: u64,
        repaired: usize,
    ) -> Result<(
        Catalog,
        Option<Arc<Wal>>,
        Option<RecoveryReport>,
        Vec<(u32, u64)>,
    )> {
        let log_dir = dir.join(WAL_DIR);
        let mut synced = Vec::new();
        if let Some(analysis) = &analysis {
            // Before the superblock says the log and the metadata are
            // required, both exist, durably: the log's directory, and the
            // metadata with every partition's recovered end as its synced
            // position (durable once analysis's changes are).
            if !storage.exists(&log_dir) {
                storage.create_dir_all(&log_dir)?;
                storage.sync_dir(dir)?;
            }
            analysis.apply(storage.as_ref())?;
            synced = analysis.synced_ends();
            meta::write(storage.as_ref(), dir, floor, &synced)?;
        }
        // The free list now lives in memory only. Mark the superblock so an
        // unclean stop leaks those pages instead of handing them out twice
        // after the next open.
        Superblock {
            free_list_head: 0,
            clean: false,
            log_required: analysis.is_some(),
            ..superblock.clone()
        }
        .write(file)?;
        let mut wal = None;
        let mut report = None;
        if let Some(analysis) = analysis {
            let mut recovery = analysis.redo(pool, options.recovery_threads)?;
            let partitions = recovery.partitions();
            let w = Wal::new(
                Arc::clone(storage),
                &log_dir,
                options.commit,
                partitions,
                floor,
            )?;
            w.set_preallocate(options.wal_preallocate);
            w.set_zero_fill(options.wal_zero_fill);
            w.set_segment_size(Self::segment_bytes(options, wal_limit));
            w.set_sync_interval(options.log_sync_interval);
            if let Some(archive) = &options.wal_archive_dir {
                w.set_archive_dir(dir.join(archive));
            }
            pool.set_flush_gate(Arc::clone(&w) as Arc<dyn crate::buffer::FlushGate>);
            // One log per undo thread, in slots no session holds yet.
            let mut undo_logs = (0..options.recovery_threads as u16)
                .map(|i| w.session_log(SYSTEM_SLOT - i))
                .collect::<Result<Vec<_>>>()?;
            recovery.undo(pool, &mut undo_logs)?;
            w.flush_all()?;
            recovery.report.repaired_torn_pages = repaired;
            if recovery.report.records > 0 {
                tracing::info!(report = ?recovery.report, "recovery done");
            }
            report = Some(recovery.report.clone());
            wal = Some(w);
        }
        Ok((Catalog::load(pool)?, wal, report, synced))
    }

    /// The log manager (None with `Logging::None`). For tests and tools.
    #[doc(hidden)]
    pub fn wal(&self) -> Option<&Arc<Wal>> {
        self.inner.shared.wal.as_ref()
    }

    /// Record every log partition's synced position in the checkpoint
    /// metadata now, if any moved since it was last written, rather than
    /// at the checkpointer's next look (at most every
    /// [`crate::checkpoint::MARK_INTERVAL`]). For tests and tools.
    #[doc(hidden)]
    pub fn record_synced_log(&self) -> Result<()> {
        match &self.inner.checkpointer {
            Some(c) => c.record_synced(),
            None => Ok(()),
        }
    }

    /// What recovery did when this database was opened (None without a log).
    pub fn recovery_report(&self) -> Option<&RecoveryReport> {
        self.inner.recovery.as_ref()
    }

    /// Run a catalog change in a logged system transaction.
    fn ddl<T>(
        &self,
        change: impl FnOnce(&BufferPool, &dyn PageLog, &mut Catalog) -> Result<T>,
    ) -> Result<T> {
        let _quiesce = self.ddl_guard()?;
        let mut catalog = self.inner.catalog.lock();
        let mut system = self.inner.system.lock();
        system.on_begin();
        match change(&self.inner.shared.pool, system.page_log(), &mut catalog) {
            Ok(v) => {
                system.on_commit(&crate::persist::CommitView::without_writes(0, &[]))?;
                system.wait_durable()?;
                Ok(v)
            }
            Err(e) => {
                // Logical errors (name taken, key too long) are found before
                // anything changes. A disk error may strike half-way: the
                // in-memory catalog and the trees may then disagree until
                // recovery undoes the change, so stop here.
                // (A full log disk is among them: a catalog change cannot
                // be rolled back in memory. DDL is refused up front once
                // the disk is known full, so only one racing the first
                // failed log write gets here.)
                if matches!(
                    e,
                    Error::Io { .. }
                        | Error::Corruption { .. }
                        | Error::Poisoned { .. }
                        | Error::LogFull { .. }
                ) {
                    self.inner
                        .shared
                        .poison(format!("a catalog change failed: {e}"));
                }
                Err(e)
            }
        }
    }

    /// A session for one thread.
    pub fn session(&self) -> Session {
        let id = self.inner.next_session.fetch_add(1, Ordering::Relaxed);
        let mut session = Session::new(Arc::clone(&self.inner.shared), id);
        if let Some(wal) = &self.inner.shared.wal {
            match wal.session_log(session.slot()) {
                Ok(log) => session.set_log(Box::new(log)),
                Err(e) => session.set_log(Box::new(crate::txn::FailedSessionLog::new(e))),
            }
        }
        session
    }

    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    pub fn page_size(&self) -> usize {
        self.inner.page_size
    }

    /// Largest key and value a table accepts at this page size.
    pub fn max_key_len(&self) -> usize {
        BTree::max_key_len(&self.inner.shared.pool)
    }

    pub fn max_value_len(&self) -> usize {
        BTree::max_value_len(&self.inner.shared.pool)
    }

    /// Largest value a table accepts at `page_size` (a valid page size),
    /// for checking a value size before a database is opened.
    pub fn max_value_len_for(page_size: usize) -> usize {
        crate::btree::node::max_value_len(page_size) - crate::btree::tree::TID_SIZE
    }

    fn ddl_guard(&self) -> Result<parking_lot::RwLockWriteGuard<'_, ()>> {
        self.inner.shared.check_writable()?;
        Ok(self.inner.shared.quiesce.write())
    }

    pub fn create_table(&self, name: &str) -> Result<Table> {
        catalog::check_name(name)?;
        if self.inner.catalog.lock().name_taken(name) {
            return Err(Error::TableExists { name: name.into() });
        }
        let info = self.ddl(|pool, log, catalog| {
            if catalog.name_taken(name) {
                return Err(Error::TableExists { name: name.into() });
            }
            catalog.add_table(pool, log, name)
        })?;
        Ok(Table { info })
    }

    pub fn table(&self, name: &str) -> Result<Table> {
        self.inner.shared.check_open()?;
        let catalog = self.inner.catalog.lock();
        catalog
            .tables
            .get(name)
            .map(|info| Table {
                info: Arc::clone(info),
            })
            .ok_or_else(|| Error::UnknownTable { name: name.into() })
    }

    /// The table named `name`, created if it does not exist.
    pub fn open_or_create_table(&self, name: &str) -> Result<Table> {
        match self.table(name) {
            Err(Error::UnknownTable { .. }) => self.create_table(name),
            other => other,
        }
    }

    pub fn table_names(&self) -> Vec<String> {
        self.inner.catalog.lock().tables.keys().cloned().collect()
    }

    pub fn index_names(&self) -> Vec<String> {
        self.inner.catalog.lock().indexes.keys().cloned().collect()
    }

    /// Drop a table, its indexes and all their pages. Handles to it fail
    /// with `TableDropped` afterwards.
    pub fn drop_table(&self, name: &str) -> Result<()> {
        if !self.inner.catalog.lock().tables.contains_key(name) {
            return Err(Error::UnknownTable { name: name.into() });
        }
        self.ddl(|pool, log, catalog| catalog.remove_table(pool, log, name))
    }

    /// Create a secondary index on `table` keyed by `extractor(key, value)`
    /// and fill it from the table's rows. Commits wait while it is filled.
    pub fn create_index(
        &self,
        table: &Table,
        name: &str,
        extractor: KeyExtractor,
    ) -> Result<Index> {
        catalog::check_name(name)?;
        table.info.check_live()?;
        if self.inner.catalog.lock().name_taken(name) {
            return Err(Error::TableExists { name: name.into() });
        }
        let max = self.max_key_len();
        // Backfill inside the DDL: commits are quiesced, no row changes.
        let info = self.ddl(|pool, log, catalog| {
            if catalog.name_taken(name) {
                return Err(Error::TableExists { name: name.into() });
            }
            let mut rows = Vec::new();
            let mut too_long = None;
            let all = std::ops::Bound::Unbounded;
            table
                .info
                .tree
                .scan(pool, all, all, false, &mut |k, tid, v| {
                    if tid & crate::txn::epoch::ABSENT_BIT == 0 {
                        if let Some(s) = extractor(k, v) {
                            let key = catalog::index_key(&s, k);
                            if key.len() > max {
                                too_long = Some(key.len());
                                return false;
                            }
                            rows.push((key, tid));
                        }
                    }
                    true
                })?;
            if let Some(len) = too_long {
                return Err(Error::KeyTooLarge { len, max });
            }
            let info = catalog.add_index(pool, log, name, &table.info, Arc::clone(&extractor))?;
            for (k, tid) in rows {
                info.tree.insert(pool, log, &k, tid, &[], None)?;
            }
            Ok(info)
        })?;
        Ok(Index { info })
    }

    /// Bind an existing index to its key extractor in this process. Until
    /// bound, writes to its table fail with `IndexNotBound`.
    pub fn open_index(&self, name: &str, extractor: KeyExtractor) -> Result<Index> {
        self.inner.shared.check_open()?;
        let catalog = self.inner.catalog.lock();
        let info = catalog
            .indexes
            .get(name)
            .cloned()
            .ok_or_else(|| Error::UnknownTable { name: name.into() })?;
        *info.extractor.write() = Some(extractor);
        Ok(Index { info })
    }

    pub fn drop_index(&self, name: &str) -> Result<()> {
        if !self.inner.catalog.lock().indexes.contains_key(name) {
            return Err(Error::UnknownTable { name: name.into() });
        }
        self.ddl(|pool, log, catalog| catalog.remove_index(pool, log, name))
    }

    pub fn stats(&self) -> Stats {
        let c = &self.inner.shared.counters;
        Stats {
            commits: c.commits.load(Ordering::Relaxed),
            aborts: c.aborts.load(Ordering::Relaxed),
            page_size: self.inner.page_size,
            pool: self.inner.shared.pool.stats(),
            wal: self
                .inner
                .shared
                .wal
                .as_ref()
                .map(|w| w.stats())
                .unwrap_or_default(),
            checkpoint: self
                .inner
                .checkpointer
                .as_ref()
                .map(|c| c.stats())
                .unwrap_or_default(),
            backpressure: self
                .inner
                .shared
                .wal
                .as_ref()
                .map(|w| w.backpressure_time())
                .unwrap_or_default(),
        }
    }

    /// Check every tree's structure (fences, order, depth, checksums of the
    /// pages read). Returns the number of records per table and index.
    pub fn check_integrity(&self) -> Result<Vec<(String, usize)>> {
        self.inner.shared.check_open()?;
        let pool = &self.inner.shared.pool;
        let catalog = self.inner.catalog.lock();
        let mut out = vec![(
            "(catalog)".to_string(),
            BTree::open(CATALOG_ROOT).check(pool)?,
        )];
        for (name, t) in &catalog.tables {
            out.push((name.clone(), t.tree.check(pool)?));
        }
        for (name, i) in &catalog.indexes {
            out.push((name.clone(), i.tree.check(pool)?));
        }
        Ok(out)
    }

    /// Close cleanly: wait for in-flight commits, write every dirty page,
    /// the free list and the superblock, and sync. Sessions fail with
    /// `Closed` afterwards.
    pub fn close(self) -> Result<()> {
        self.inner.close()
    }
}

impl DbInner {
    fn close(&self) -> Result<()> {
        let mut closed = self.closed.lock();
        if *closed {
            return Ok(());
        }
        *closed = true;
        if let Some(c) = &self.checkpointer {
            c.stop();
        }
        let shared = &self.shared;
        let result = {
            let _quiesce = shared.quiesce.write();
            shared.closed.store(true, Ordering::Release);
            self.write_clean_state()
        };
        shared.pool.stop();
        if let Some(wal) = &shared.wal {
            if let Err(e) = wal.shutdown() {
                tracing::error!(error = %e, "stopping the log writers failed");
            }
        }
        shared.epoch.stop();
        if let Some(h) = self.epoch_thread.lock().take() {
            let _ = h.join();
        }
        match &result {
            Ok(()) => tracing::info!(dir = %self.dir.display(), "database closed cleanly"),
            Err(e) => {
                tracing::error!(dir = %self.dir.display(), error = %e, "close failed; changes since the last clean close may be lost")
            }
        }
        result
    }

    fn write_clean_state(&self) -> Result<()> {
        let shared = &self.shared;
        if shared.is_poisoned.load(Ordering::Acquire) {
            shared.pool.check_healthy()?;
            return Err(Error::Poisoned {
                cause: shared.poisoned.lock().clone().unwrap_or_default(),
            });
        }
        let pool = &shared.pool;
        pool.flush_all()?;
        // Every page is durable: the log is no longer needed. Stop the
        // writers and note the floor; segments are deleted only after the
        // superblock records it.
        let log_floor = match &shared.wal {
            Some(wal) => {
                wal.flush_all()?;
                wal.shutdown()?;
                wal.max_clock()
            }
            None => 0,
        };
        // Every page is written whole: old double-write copies must not be
        // taken for repairs of pages that change after the next open.
        pool.clear_double_write()?;
        let free = pool.free_pages_with_gsn();
        let head = superblock::write_free_list(self.file.as_ref(), self.page_size, &free)?;
        self.file.sync_data()?;
        Superblock {
            page_size: self.page_size as u32,
            next_page_id: pool.next_page_id(),
            catalog_root: CATALOG_ROOT,
            free_list_head: head,
            clean: true,
            log_required: false,
            epoch: shared.epoch.current(),
            log_floor,
        }
        .write(self.file.as_ref())?;
        if let Some(wal) = &shared.wal {
            wal.remove_all_segments()?;
        }
        self.storage.sync_dir(&self.dir)
    }
}

impl Drop for DbInner {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::error!(error = %e, "closing the database on drop failed");
        }
    }
}
