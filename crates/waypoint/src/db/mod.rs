//! The public API: [`Database`], [`Options`], sessions, tables, indexes,
//! statistics, and the open and close paths.
//!
//! Open: read the superblock (page 0) and free list, start the buffer pool
//! and its page provider, load the catalog. Clean close: quiesce commits,
//! write every dirty page, write the free list and the superblock, sync.
//!
//! Durability today: the data file is consistent after a clean close only.
//! Until a log scheme is attached (per-worker WAL, issue 3), a crash between
//! clean closes can lose or tear recent changes; recovery is not attempted.

mod superblock;

pub use superblock::{Superblock, DB_FORMAT_VERSION};

use crate::btree::BTree;
use crate::buffer::page::{self, DEFAULT_PAGE_SIZE};
use crate::buffer::{BufferPool, PoolConfig, PoolStats};
use crate::catalog::{self, Catalog, Index, KeyExtractor, Table, CATALOG_ROOT};
use crate::error::{Error, Result};
use crate::io::{OpenMode, RealStorage, Storage, StorageFile};
use crate::txn::epoch::EpochClock;
use crate::txn::locks::{LockTable, SlotPool};
use crate::txn::Session;
use parking_lot::{Mutex, RwLock};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// Name of the data file inside the database directory.
pub const DATA_FILE: &str = "data.waypoint";

/// How to open a database.
#[derive(Clone)]
pub struct Options {
    /// Page size for a new database (4 KiB to 64 KiB, a power of two).
    /// `None`: 16 KiB for a new database, the stored size for an existing
    /// one. A value that differs from an existing database's is an error.
    pub page_size: Option<usize>,
    /// Memory for page frames, in bytes. Data larger than this works; the
    /// page provider evicts pages to stay within it.
    pub buffer_pool_bytes: usize,
    /// Create the database if the directory holds none.
    pub create_if_missing: bool,
    /// Open data files with `O_DIRECT`.
    pub direct_io: bool,
    /// The file system to use; `None` is the real one. Tests pass a
    /// [`crate::io::SimStorage`].
    pub storage: Option<Arc<dyn Storage>>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            page_size: None,
            buffer_pool_bytes: 256 << 20,
            create_if_missing: true,
            direct_io: false,
            storage: None,
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("page_size", &self.page_size)
            .field("buffer_pool_bytes", &self.buffer_pool_bytes)
            .field("create_if_missing", &self.create_if_missing)
            .field("direct_io", &self.direct_io)
            .field("storage", &self.storage.as_ref().map(|_| "custom"))
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub commits: u64,
    pub aborts: u64,
    pub page_size: usize,
    pub pool: PoolStats,
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
        let dir = dir.as_ref().to_path_buf();
        let storage: Arc<dyn Storage> = match &options.storage {
            Some(s) => Arc::clone(s),
            None => Arc::new(RealStorage::with_direct_io(options.direct_io)),
        };
        if let Some(ps) = options.page_size {
            if !page::is_valid_page_size(ps) {
                return Err(Error::InvalidOptions(format!(
                    "page size {ps} is not a power of two between {} and {}",
                    page::MIN_PAGE_SIZE,
                    page::MAX_PAGE_SIZE
                )));
            }
        }
        let path = dir.join(DATA_FILE);
        let exists = storage.exists(&path);
        if !exists && !options.create_if_missing {
            return Err(Error::NotADatabase { path });
        }
        if !exists {
            storage.create_dir_all(&dir)?;
        }
        let file = storage.open(&path, OpenMode::CreateIfMissing)?;
        let fresh = file.is_empty()?;
        let (superblock, free_pages) = if fresh {
            let page_size = options.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
            (
                Superblock {
                    page_size: page_size as u32,
                    next_page_id: 1,
                    catalog_root: CATALOG_ROOT,
                    free_list_head: 0,
                    clean: false,
                    epoch: 0,
                },
                Vec::new(),
            )
        } else {
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
            let free = superblock::read_free_list(
                file.as_ref(),
                sb.page_size as usize,
                sb.free_list_head,
                sb.next_page_id,
            )?;
            // Pages written after the superblock (before an unclean stop)
            // are still allocated.
            let in_file = file.len()? / sb.page_size as u64;
            let sb = Superblock {
                next_page_id: sb.next_page_id.max(in_file),
                ..sb
            };
            (sb, free)
        };
        let page_size = superblock.page_size as usize;
        let frames = options.buffer_pool_bytes / page_size;
        if frames < crate::buffer::pool::MIN_FRAMES {
            return Err(Error::InvalidOptions(format!(
                "buffer_pool_bytes {} holds {frames} pages of {page_size} bytes; at least {} are needed",
                options.buffer_pool_bytes,
                crate::buffer::pool::MIN_FRAMES
            )));
        }
        let pool = BufferPool::start(
            PoolConfig { page_size, frames },
            Arc::clone(&file),
            superblock.next_page_id,
            free_pages,
        )?;
        let opened = Self::finish_open(&pool, file.as_ref(), &superblock, fresh);
        let catalog = match opened {
            Ok(c) => c,
            Err(e) => {
                pool.stop();
                return Err(e);
            }
        };
        let (epoch, epoch_thread) = EpochClock::start(superblock.epoch + 1);
        let shared = Arc::new(DbShared {
            pool,
            locks: LockTable::new(),
            slots: SlotPool::new(),
            epoch,
            counters: Counters::default(),
            quiesce: RwLock::new(()),
            closed: AtomicBool::new(false),
            poisoned: Mutex::new(None),
            is_poisoned: AtomicBool::new(false),
        });
        tracing::info!(dir = %dir.display(), page_size, frames, fresh, "database open");
        Ok(Database {
            inner: Arc::new(DbInner {
                shared,
                dir,
                storage,
                file,
                page_size,
                catalog: Mutex::new(catalog),
                next_session: AtomicU32::new(0),
                epoch_thread: Mutex::new(Some(epoch_thread)),
                closed: Mutex::new(false),
            }),
        })
    }

    /// A new database gets its catalog tree and a superblock before the
    /// first use; an existing one has its catalog read.
    fn finish_open(
        pool: &BufferPool,
        file: &dyn StorageFile,
        superblock: &Superblock,
        fresh: bool,
    ) -> Result<Catalog> {
        if fresh {
            let catalog_tree = BTree::create(pool, &crate::btree::NoLog)?;
            debug_assert_eq!(catalog_tree.root(), CATALOG_ROOT);
            pool.flush_all()?;
            Superblock {
                next_page_id: pool.next_page_id(),
                ..superblock.clone()
            }
            .write(file)?;
        } else {
            // The free list now lives in memory only. Mark the superblock so
            // an unclean stop leaks those pages instead of handing them out
            // twice after the next open.
            Superblock {
                free_list_head: 0,
                clean: false,
                ..superblock.clone()
            }
            .write(file)?;
        }
        Catalog::load(pool)
    }

    /// A session for one thread.
    pub fn session(&self) -> Session {
        let id = self.inner.next_session.fetch_add(1, Ordering::Relaxed);
        Session::new(Arc::clone(&self.inner.shared), id)
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

    fn ddl_guard(&self) -> Result<parking_lot::RwLockWriteGuard<'_, ()>> {
        self.inner.shared.check_open()?;
        Ok(self.inner.shared.quiesce.write())
    }

    pub fn create_table(&self, name: &str) -> Result<Table> {
        catalog::check_name(name)?;
        let _quiesce = self.ddl_guard()?;
        let mut catalog = self.inner.catalog.lock();
        if catalog.name_taken(name) {
            return Err(Error::TableExists { name: name.into() });
        }
        let info = catalog.add_table(&self.inner.shared.pool, name)?;
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
        let _quiesce = self.ddl_guard()?;
        self.inner
            .catalog
            .lock()
            .remove_table(&self.inner.shared.pool, name)
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
        let _quiesce = self.ddl_guard()?;
        let pool = &self.inner.shared.pool;
        let mut catalog = self.inner.catalog.lock();
        if catalog.name_taken(name) {
            return Err(Error::TableExists { name: name.into() });
        }
        let info = catalog.add_index(pool, name, &table.info, Arc::clone(&extractor))?;
        // Backfill with commits quiesced: no row changes underneath.
        let mut rows = Vec::new();
        table.info.tree.scan(
            pool,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            false,
            &mut |k, tid, v| {
                if tid & crate::txn::epoch::ABSENT_BIT == 0 {
                    if let Some(s) = extractor(k, v) {
                        rows.push((catalog::index_key(&s, k), tid));
                    }
                }
                true
            },
        )?;
        let max = self.max_key_len();
        for (k, tid) in rows {
            if k.len() > max {
                let _ = catalog.remove_index(pool, name);
                return Err(Error::KeyTooLarge { len: k.len(), max });
            }
            info.tree.insert(pool, &crate::btree::NoLog, &k, tid, &[])?;
        }
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
        let _quiesce = self.ddl_guard()?;
        self.inner
            .catalog
            .lock()
            .remove_index(&self.inner.shared.pool, name)
    }

    pub fn stats(&self) -> Stats {
        let c = &self.inner.shared.counters;
        Stats {
            commits: c.commits.load(Ordering::Relaxed),
            aborts: c.aborts.load(Ordering::Relaxed),
            page_size: self.inner.page_size,
            pool: self.inner.shared.pool.stats(),
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
        let shared = &self.shared;
        let result = {
            let _quiesce = shared.quiesce.write();
            shared.closed.store(true, Ordering::Release);
            self.write_clean_state()
        };
        shared.pool.stop();
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
        let free = pool.free_pages();
        let head = superblock::write_free_list(self.file.as_ref(), self.page_size, &free)?;
        self.file.sync_data()?;
        Superblock {
            page_size: self.page_size as u32,
            next_page_id: pool.next_page_id(),
            catalog_root: CATALOG_ROOT,
            free_list_head: head,
            clean: true,
            epoch: shared.epoch.current(),
        }
        .write(self.file.as_ref())?;
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
