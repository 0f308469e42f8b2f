//! The open path: refuse what is not a database or lost data (reading
//! only), create a new database, check the scheme the files were written
//! by, then hand over to the scheme (`persist::Opening`): prepare (and
//! install the scheme's page-write policy in the pool), mark the
//! superblock unclean, recover, load the catalog.
//!
//! Invariant: nothing is written before every check passed, and a new
//! data file appears only whole (written under a temporary name, then
//! renamed), so an existing database is never re-initialised.

use super::options::format_bytes;
use super::superblock::{self, Superblock};
use super::{
    Database, DbInner, Options, Persistence, DATA_FILE, DOUBLE_WRITE_FILE, NEW_DATA_FILE, WAL_DIR,
};
use crate::btree::node::{Fence, NodeMut};
use crate::buffer::double_write;
use crate::buffer::page::{self, PageKind, DEFAULT_PAGE_SIZE};
use crate::buffer::{BufferPool, PoolConfig};
use crate::catalog::{Catalog, CATALOG_ROOT};
use crate::checkpoint::meta;
use crate::error::{Error, Result};
use crate::ids::{Gsn, Tid};
use crate::io::{AlignedBuf, OpenMode, RealStorage, Storage};
use crate::persist::{UncleanMark, NoneOpening, OpenContext, Opening, SchemeKind};
use crate::txn::epoch::{EpochClock, SYSTEM_SLOT};
use crate::txn::locks::{LockTable, SlotPool};
use crate::txn::shared::{Counters, DbShared};
use parking_lot::Mutex;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32};
use std::sync::Arc;

/// The scheme's own open, by the options: one arm per scheme.
fn open_scheme(persistence: &Persistence, ctx: &OpenContext<'_>) -> Result<Box<dyn Opening>> {
    match persistence {
        Persistence::None => Ok(Box::<NoneOpening>::default()),
        Persistence::PerWorker(o) => {
            crate::wal::scheme::open(ctx, o, crate::wal::log::Partitioning::PerSlot)
        }
        Persistence::Aries(o) => crate::central::open(ctx, SchemeKind::Aries, o),
        Persistence::Aether(o) => crate::central::open(ctx, SchemeKind::Aether, o),
        Persistence::Silor(o) => crate::silor::open(ctx, o),
        Persistence::Command(o) => crate::command::open(ctx, o),
    }
}

/// Refuse to open a database with another scheme than the one that left
/// it, where that would misread it: one left open (not closed cleanly)
/// by a scheme with a log must be recovered by that scheme first; one
/// left open by a scheme without a log after it wrote pages cannot be
/// recovered at all (such a scheme marks the data file unclean only
/// before its first page write); a cleanly closed one may switch only
/// between schemes whose clean state is the data file.
fn check_scheme(dir: &Path, superblock: &Superblock, requested: SchemeKind) -> Result<()> {
    // Before the tag, a database left open with `log_required` ran the
    // per-worker scheme.
    let recorded = superblock
        .scheme
        .or(superblock.log_required.then_some(SchemeKind::PerWorker));
    if !superblock.clean {
        // Untagged and without a required log, it may have run a scheme
        // without a log; only a scheme with one can look for more.
        let left_by = recorded.unwrap_or(requested);
        if !left_by.recovers_from_log() {
            return Err(Error::NotRecoverable {
                path: dir.join(DATA_FILE),
                scheme: left_by,
            });
        }
    }
    let Some(recorded) = recorded.filter(|r| *r != requested) else {
        return Ok(());
    };
    if !superblock.clean && recorded.recovers_from_log() {
        return Err(Error::RecoveryNeeded {
            path: dir.join(DATA_FILE),
            scheme: recorded,
        });
    }
    if superblock.clean
        && !(recorded.clean_state_is_the_data_file() && requested.clean_state_is_the_data_file())
    {
        return Err(Error::Mismatch {
            path: dir.join(DATA_FILE),
            detail: format!(
                "it was written by the {recorded} scheme, which the {requested} scheme cannot read: open it with --scheme {recorded}"
            ),
        });
    }
    Ok(())
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
                RealStorage::with_direct_io(options.direct_io).with_direct_log(
                    options
                        .persistence
                        .log_options()
                        .is_none_or(|o| o.log_direct_io),
                ),
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
            .max(checkpoint.as_ref().map_or(Gsn::ZERO, |m| m.floor));
        let requested = options.persistence.kind();
        check_scheme(&dir, &superblock, requested)?;
        let (epoch, epoch_thread) = EpochClock::start(superblock.epoch + 1);
        let stop_clock = |thread: std::thread::JoinHandle<()>| {
            epoch.stop();
            let _ = thread.join();
        };
        let ctx = OpenContext {
            storage: &storage,
            data_file: &file,
            dir: &dir,
            superblock: &superblock,
            checkpoint: checkpoint.as_ref(),
            floor,
            recovery_threads: options.recovery_threads,
            first_epoch: (superblock.epoch + 1).clamp(1, Tid::MAX_EPOCH),
            epoch: &epoch,
            procedures: &options.procedures,
        };
        let started = (|| {
            let opening = open_scheme(&options.persistence, &ctx)?;
            // Checked: from here on the open writes.
            let dw_file = storage.open(&dir.join(DOUBLE_WRITE_FILE), OpenMode::CreateIfMissing)?;
            let repaired = double_write::repair(file.as_ref(), dw_file.as_ref(), page_size)?;
            let pool = BufferPool::start(
                PoolConfig { page_size, frames },
                Arc::clone(&file),
                superblock.next_page_id,
                free_pages,
            )?;
            Ok((opening, dw_file, repaired, pool))
        })();
        let (mut opening, dw_file, repaired, pool) = match started {
            Ok(v) => v,
            Err(e) => {
                stop_clock(epoch_thread);
                return Err(e);
            }
        };
        pool.set_double_write(dw_file);
        let opened = (|| {
            let prepared = opening.prepare(&ctx)?;
            pool.set_page_write_policy(prepared.page_writes);
            match prepared.unclean_mark {
                // The free list now lives in memory only. Mark the
                // superblock so an unclean stop leaks those pages instead
                // of handing them out twice after the next open.
                UncleanMark::AtOpen => Superblock {
                    log_required: prepared.log_required,
                    ..superblock.unclean_mark(requested)
                }
                .write(file.as_ref())?,
                UncleanMark::BeforeFirstPageWrite => {}
            }
            let scheme = opening.recover(&ctx, &pool, repaired)?;
            let loaded = Catalog::load(&pool).and_then(|catalog| {
                for name in scheme.indexes_to_rebuild() {
                    if let Some(index) = catalog.indexes.get(name) {
                        index.stale.store(true, std::sync::atomic::Ordering::Release);
                    }
                }
                // A scheme that re-executes calls maintains indexes in
                // its replay: bound now, before `replay_after_open`.
                if scheme.command_order().is_some() {
                    for (name, index) in &catalog.indexes {
                        if let Some(extractor) = options.procedures.extractor(name) {
                            *index.extractor.write() = Some(Arc::clone(extractor));
                        }
                    }
                }
                Ok((catalog, scheme.session_log(SYSTEM_SLOT)?))
            });
            match loaded {
                Ok((catalog, system)) => Ok((scheme, catalog, system)),
                Err(e) => {
                    scheme.shutdown();
                    Err(e)
                }
            }
        })();
        let (scheme, catalog, system) = match opened {
            Ok(v) => v,
            Err(e) => {
                pool.stop();
                stop_clock(epoch_thread);
                return Err(e);
            }
        };
        let locks = LockTable::new(scheme.orders_writes_by_tid(), options.lock_wait);
        let shared = Arc::new(DbShared {
            pool,
            scheme,
            locks,
            slots: SlotPool::new(),
            epoch,
            counters: Counters::default(),
            quiesce: Default::default(),
            catalog: Mutex::new(catalog),
            procedures: options.procedures.clone(),
            closed: AtomicBool::new(false),
            poisoned: Mutex::new(None),
            is_poisoned: AtomicBool::new(false),
        });
        tracing::info!(dir = %dir.display(), page_size, frames, scheme = %requested, "database open");
        let db = Database {
            inner: Arc::new(DbInner {
                shared,
                dir,
                storage,
                file,
                page_size,
                system: Mutex::new(system),
                next_session: AtomicU32::new(0),
                epoch_thread: Mutex::new(Some(epoch_thread)),
                closed: Mutex::new(false),
            }),
        };
        // A scheme that re-executes its log (`command`) does it through the
        // database itself. If that fails, the state in memory is a part of
        // the log's: poisoned, the close that follows writes nothing.
        if let Err(e) = db.inner.shared.scheme.replay_after_open(&db) {
            db.inner
                .shared
                .poison(format!("replaying the log at open failed: {e}"));
            drop(db);
            return Err(e);
        }
        if let Err(e) = db.inner.shared.scheme.start_services(&db) {
            drop(db);
            return Err(e);
        }
        Ok(db)
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
            scheme: Some(options.persistence.kind()),
            epoch: 0,
            log_floor: Gsn::ZERO,
        }
        .write(file.as_ref())?;
        drop(file);
        storage.rename(&temp, &path)?;
        storage.sync_dir(dir)?;
        tracing::info!(dir = %dir.display(), page_size, "database created");
        Ok(())
    }
}
