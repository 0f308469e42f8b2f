//! The public API: [`Database`], [`Options`], sessions, tables, indexes,
//! statistics, and the open and close paths.
//!
//! Open: read the superblock (page 0) and free list, start the buffer pool
//! and its page provider, load the catalog. Clean close: quiesce commits,
//! write every dirty page, write the free list and the superblock, sync.
//!
//! Durability is the persistence scheme's (`Options::persistence`, the
//! seam in `persist`): with the per-worker scheme (the default) every page
//! change is logged to the session's log partition and a commit is
//! acknowledged per the [`crate::CommitProtocol`]; open recovers
//! (analysis, redo, undo) from the log. Page writes go through a
//! double-write file so a torn page is repaired before recovery reads it.
//! With the `none` scheme the data file is consistent after a clean close
//! only. Files: `open` (checks, creation, handing over to the scheme),
//! `close`, `options`, `superblock`.
//!
//! I/O errors: a failed write or `fdatasync` never lets a commit be
//! acknowledged and is never retried. A failed page write poisons the
//! database ([`Error::Poisoned`] on every later call). A failed log write or
//! log `fdatasync` poisons the session's log partition. `ENOSPC` on a log
//! write makes the database read-only: commits not yet durable fail with
//! [`Error::LogFull`], every later write and DDL is refused with it, reads
//! (`get`, `scan`, read-only transactions) go on, and `close` fails with it;
//! after space is freed, a reopen recovers every acknowledged commit (see
//! README "Durability" and docs/decisions/021-full-log-disk.md).

mod close;
mod open;
pub mod options;
mod superblock;
#[cfg(test)]
mod tests;

pub use options::{Options, Persistence};

pub use superblock::{Superblock, DB_FORMAT_VERSION};

use crate::btree::{BTree, PageLog};
use crate::buffer::{BufferPool, PoolStats, TreeContention};
use crate::catalog::{self, Catalog, Index, KeyExtractor, Table, CATALOG_ROOT};
use crate::error::{Error, Result};
use crate::io::{Storage, StorageFile};
use crate::persist::PersistenceStats;
use crate::txn::shared::DbShared;
use crate::txn::{Session, SessionLog};
use crate::wal::recovery::RecoveryReport;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
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

struct DbInner {
    shared: Arc<DbShared>,
    dir: PathBuf,
    storage: Arc<dyn Storage>,
    file: Arc<dyn StorageFile>,
    page_size: usize,
    /// Logs catalog changes (the system slot's partition).
    system: Mutex<Box<dyn SessionLog>>,
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
    /// What the persistence scheme did: its log, checkpoints and
    /// back-pressure.
    pub persistence: PersistenceStats,
    /// Optimistic accesses tried again and reads that waited for a page
    /// held exclusively, by table or index name (`(catalog)` for the
    /// catalog's tree), for every tree with any: which trees the threads
    /// contend for. The engine's page writes, evictions and loads hold
    /// pages too and count a few; a dropped tree's counts are gone.
    pub contention: BTreeMap<String, TreeContention>,
}

impl Database {
    /// The log manager of the per-worker scheme or a central log (None
    /// under another scheme). For tests and tools.
    #[cfg(feature = "internals")]
    pub fn wal(&self) -> Option<&Arc<crate::wal::Wal>> {
        self.per_worker().map(|p| p.wal())
    }

    /// The `none` scheme, if the database runs it. For tests.
    #[cfg(feature = "internals")]
    pub fn none_scheme(&self) -> Option<&crate::persist::NoneScheme> {
        self.inner.shared.scheme.as_any().downcast_ref()
    }

    /// The `silor` scheme, if the database runs it. For tests.
    #[cfg(feature = "internals")]
    pub fn silor(&self) -> Option<&crate::silor::SilorScheme> {
        self.inner.shared.scheme.as_any().downcast_ref()
    }

    /// The `command` scheme, if the database runs it. For tests.
    #[cfg(feature = "internals")]
    pub fn command(&self) -> Option<&crate::command::CommandScheme> {
        self.inner.shared.scheme.as_any().downcast_ref()
    }

    /// The per-worker scheme (or a central log, which is its log manager in
    /// central mode), if the database runs it. For tests and tools.
    #[cfg(feature = "internals")]
    pub fn per_worker(&self) -> Option<&crate::wal::PerWorkerScheme> {
        self.inner.shared.scheme.as_any().downcast_ref()
    }

    /// Record every log partition's synced position in the checkpoint
    /// metadata now, if any moved since it was last written, rather than
    /// at the checkpointer's next look (at most every
    /// [`crate::checkpoint::MARK_INTERVAL`]). For tests and tools.
    #[cfg(feature = "internals")]
    pub fn record_synced_log(&self) -> Result<()> {
        match self.per_worker() {
            Some(p) => p.record_synced(),
            None => Ok(()),
        }
    }

    /// What recovery did when this database was opened (None for a scheme
    /// without a log).
    pub fn recovery_report(&self) -> Option<&RecoveryReport> {
        self.inner.shared.scheme.recovery_report()
    }

    /// The persistence scheme the database runs.
    pub fn scheme(&self) -> crate::persist::SchemeKind {
        self.inner.shared.scheme.kind()
    }

    /// Run a catalog change in a logged system transaction.
    /// `describe` names the change for a scheme that logs it as such
    /// (`silor`); the paged schemes log its page changes.
    fn ddl<T>(
        &self,
        describe: impl FnOnce(&T) -> crate::persist::CatalogChange,
        change: impl FnOnce(&BufferPool, &dyn PageLog, &mut Catalog) -> Result<T>,
    ) -> Result<T> {
        let _quiesce = self.ddl_guard()?;
        let mut catalog = self.inner.shared.catalog.lock();
        let mut system = self.inner.system.lock();
        system.on_begin();
        match change(&self.inner.shared.pool, system.page_log(), &mut catalog) {
            Ok(v) => {
                if let Err(e) = system.on_catalog_change(&describe(&v)) {
                    self.inner
                        .shared
                        .poison(format!("logging a catalog change failed: {e}"));
                    return Err(e);
                }
                system.on_commit(&crate::persist::CommitView::without_writes(crate::ids::Tid::ZERO, &[]))?;
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
        match self.inner.shared.scheme.session_log(session.slot()) {
            Ok(log) => session.set_log(log),
            Err(e) => session.set_log(Box::new(crate::txn::FailedSessionLog::new(e))),
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

    /// What the database's sessions share, without keeping it alive (for
    /// a scheme's background thread).
    pub(crate) fn shared_weak(&self) -> std::sync::Weak<DbShared> {
        Arc::downgrade(&self.inner.shared)
    }

    fn ddl_guard(&self) -> Result<crate::txn::quiesce::Exclusive<'_>> {
        self.inner.shared.check_writable()?;
        Ok(self.inner.shared.quiesce.write())
    }

    pub fn create_table(&self, name: &str) -> Result<Table> {
        catalog::check_name(name)?;
        if self.inner.shared.catalog.lock().name_taken(name) {
            return Err(Error::TableExists { name: name.into() });
        }
        let info = self.ddl(
            |t: &Arc<catalog::TableInfo>| crate::persist::CatalogChange::CreateTable {
                name: t.name.clone(),
                id: t.id,
            },
            |pool, log, catalog| {
                if catalog.name_taken(name) {
                    return Err(Error::TableExists { name: name.into() });
                }
                catalog.add_table(pool, log, name, None)
            },
        )?;
        Ok(Table { info })
    }

    pub fn table(&self, name: &str) -> Result<Table> {
        self.inner.shared.check_open()?;
        let catalog = self.inner.shared.catalog.lock();
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
        self.inner.shared.catalog.lock().tables.keys().cloned().collect()
    }

    pub fn index_names(&self) -> Vec<String> {
        self.inner.shared.catalog.lock().indexes.keys().cloned().collect()
    }

    /// Drop a table, its indexes and all their pages. Handles to it fail
    /// with `TableDropped` afterwards.
    pub fn drop_table(&self, name: &str) -> Result<()> {
        if !self.inner.shared.catalog.lock().tables.contains_key(name) {
            return Err(Error::UnknownTable { name: name.into() });
        }
        self.ddl(
            |_| crate::persist::CatalogChange::DropTable { name: name.into() },
            |pool, log, catalog| catalog.remove_table(pool, log, name),
        )
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
        let extractor = if self.inner.shared.scheme.command_order().is_some() {
            // Replay runs the extractor before the open returns: only the
            // registered one is known then.
            match self.inner.shared.procedures.extractor(name) {
                Some(registered) => Arc::clone(registered),
                None => {
                    return Err(Error::Unsupported {
                        what: format!("index {name:?} under the command scheme without its extractor registered (Procedures::index)"),
                    })
                }
            }
        } else {
            extractor
        };
        if self.inner.shared.catalog.lock().name_taken(name) {
            return Err(Error::TableExists { name: name.into() });
        }
        let max = self.max_key_len();
        // Backfill inside the DDL: commits are quiesced, no row changes.
        let describe = |i: &Arc<catalog::IndexInfo>| crate::persist::CatalogChange::CreateIndex {
            name: i.name.clone(),
            id: i.id,
            table: i.table.name.clone(),
        };
        let info = self.ddl(describe, |pool, log, catalog| {
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
                    if !tid.is_placeholder() {
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
            let info = catalog.add_index(
                pool,
                log,
                name,
                &table.info,
                Some(Arc::clone(&extractor)),
                None,
            )?;
            for (k, tid) in rows {
                info.tree.insert(pool, log, &k, tid, &[], None)?;
            }
            Ok(info)
        })?;
        Ok(Index { info })
    }

    /// Refill a stale index (see `IndexInfo::stale`) from its table with
    /// `extractor`, commits quiesced. Only a scheme that does not log
    /// pages marks indexes stale, so the pages are changed unlogged.
    fn rebuild_index(
        &self,
        info: &Arc<catalog::IndexInfo>,
        extractor: &KeyExtractor,
    ) -> Result<()> {
        let _quiesce = self.ddl_guard()?;
        if !info.stale.load(Ordering::Acquire) {
            return Ok(());
        }
        let pool = &self.inner.shared.pool;
        let log = crate::btree::NoLog;
        let all = std::ops::Bound::Unbounded;
        let mut old = Vec::new();
        info.tree.scan(pool, all, all, false, &mut |k, _, _| {
            old.push(k.to_vec());
            true
        })?;
        for k in old {
            info.tree.remove(pool, &log, &k, None)?;
        }
        let mut rows = Vec::new();
        info.table.tree.scan(pool, all, all, false, &mut |k, tid, v| {
            if !tid.is_placeholder() {
                if let Some(s) = extractor(k, v) {
                    rows.push((catalog::index_key(&s, k), tid));
                }
            }
            true
        })?;
        for (k, tid) in rows {
            info.tree.insert(pool, &log, &k, tid, &[], None)?;
        }
        info.stale.store(false, Ordering::Release);
        Ok(())
    }

    /// Bind an existing index to its key extractor in this process. Until
    /// bound, writes to its table fail with `IndexNotBound`.
    pub fn open_index(&self, name: &str, extractor: KeyExtractor) -> Result<Index> {
        self.inner.shared.check_open()?;
        let catalog = self.inner.shared.catalog.lock();
        let info = catalog
            .indexes
            .get(name)
            .cloned()
            .ok_or_else(|| Error::UnknownTable { name: name.into() })?;
        drop(catalog);
        if info.stale.load(Ordering::Acquire) {
            self.rebuild_index(&info, &extractor)?;
        }
        *info.extractor.write() = Some(extractor);
        Ok(Index { info })
    }

    pub fn drop_index(&self, name: &str) -> Result<()> {
        if !self.inner.shared.catalog.lock().indexes.contains_key(name) {
            return Err(Error::UnknownTable { name: name.into() });
        }
        self.ddl(
            |_| crate::persist::CatalogChange::DropIndex { name: name.into() },
            |pool, log, catalog| catalog.remove_index(pool, log, name),
        )
    }

    pub fn stats(&self) -> Stats {
        let c = &self.inner.shared.counters;
        Stats {
            commits: c.commits.sum(),
            aborts: c.aborts.sum(),
            page_size: self.inner.page_size,
            pool: self.inner.shared.pool.stats(),
            persistence: self.inner.shared.scheme.stats(),
            contention: self.contention(),
        }
    }

    fn contention(&self) -> BTreeMap<String, TreeContention> {
        let by_root = self.inner.shared.pool.contention_by_root();
        if by_root.is_empty() {
            return BTreeMap::new();
        }
        let catalog = self.inner.shared.catalog.lock();
        let trees = catalog
            .tables
            .iter()
            .map(|(name, t)| (name, t.tree))
            .chain(catalog.indexes.iter().map(|(name, i)| (name, i.tree)));
        let named = trees.map(|(name, tree)| (name.clone(), tree.root()));
        std::iter::once(("(catalog)".to_string(), CATALOG_ROOT))
            .chain(named)
            .filter_map(|(name, root)| by_root.get(&root).map(|&c| (name, c)))
            .collect()
    }

    /// Check every tree's structure (fences, order, depth, checksums of the
    /// pages read). Returns the number of records per table and index.
    pub fn check_integrity(&self) -> Result<Vec<(String, usize)>> {
        self.inner.shared.check_open()?;
        let pool = &self.inner.shared.pool;
        let catalog = self.inner.shared.catalog.lock();
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
