//! What a database and its sessions share: the buffer pool, the
//! persistence scheme, the commit locks and session slots, the epoch
//! clock, the catalog and the stored procedures, the counters, and whether the database is closed or poisoned.
//! It lives here, below `db`, so that `db` uses `txn` and not the other
//! way round.
//!
//! Invariant: once poisoned, the database stays poisoned, and every call
//! that reaches `check_open` fails with the first cause.

use super::epoch::EpochClock;
use super::locks::{LockTable, SlotPool};
use crate::buffer::BufferPool;
use crate::error::{Error, Result};
use crate::persist::Scheme;
use super::quiesce::Quiesce;
use crate::sync::StripedCounter;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Striped by session slot: every commit adds to them.
#[derive(Default)]
pub(crate) struct Counters {
    pub commits: StripedCounter,
    pub aborts: StripedCounter,
}

/// State shared by the database handle and its sessions.
pub(crate) struct DbShared {
    pub pool: Arc<BufferPool>,
    /// The persistence scheme: sessions' logs, the log's full-disk state.
    pub scheme: Arc<dyn Scheme>,
    pub locks: LockTable,
    pub slots: SlotPool,
    pub epoch: Arc<EpochClock>,
    pub counters: Counters,
    /// Commits hold it shared; close and DDL that must see no commit in
    /// flight hold it exclusively.
    pub quiesce: Quiesce,
    /// Tables and indexes by name (DDL changes it under `quiesce`).
    pub catalog: Mutex<crate::catalog::Catalog>,
    /// The stored procedures the database was opened with.
    pub procedures: crate::procedure::Procedures,
    pub(crate) closed: AtomicBool,
    pub(crate) poisoned: Mutex<Option<String>>,
    pub(crate) is_poisoned: AtomicBool,
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

    /// `check_open`, and `Err(LogFull)` once the log's disk is full or
    /// `Err(MemoryFull)` once the pages a scheme keeps in memory fill the
    /// pool: the database then takes no more writes (reads go on).
    pub(crate) fn check_writable(&self) -> Result<()> {
        self.check_open()?;
        self.pool.check_writable()?;
        self.scheme.check_writable()
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
