//! A session: one thread's connection to the database, with its slot
//! (the low bits of its TIDs, and its log partition under the per-worker
//! scheme) and its [`SessionLog`].
//!
//! Invariant: a slot belongs to one live session; it returns to the pool
//! only when the session is dropped, so two live sessions never produce
//! the same TID.

use super::locks::LockOwner;
use super::shared::DbShared;
use super::transaction::Transaction;
use crate::error::{Error, Result};
use crate::ids::Tid;
use crate::persist::{NoSessionLog, SessionLog};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A connection used by one thread at a time. Create one per worker thread
/// with [`crate::Database::session`]; it is `Send`, not `Sync`.
pub struct Session {
    pub(crate) db: Arc<DbShared>,
    /// The same database through an `Arc` of this session's own, for what
    /// must hold it across `&mut self` calls (the commit): its reference
    /// count is written by this session only, where cloning `db` wrote to
    /// a line every session writes
    /// (docs/decisions/032-no-shared-writes-on-the-commit-path.md).
    pub(super) own_db: Arc<OwnDb>,
    pub(super) id: u32,
    /// Low bits of this session's TIDs; unique among live sessions.
    pub(super) slot: u16,
    pub(super) last_tid: Tid,
    pub(super) attempts: u32,
    pub(super) log: Box<dyn SessionLog>,
    /// The age of this session's last transaction that took locks with
    /// `get_for_update` and ended in `Conflict` (0: none, or a commit
    /// since), for its retry (`LockTable::begin_early`).
    pub(super) seniority: u64,
}

/// The database behind an `Arc` of one session's own ([`Session`]'s
/// `own_db`).
pub(super) struct OwnDb(Arc<DbShared>);

impl std::ops::Deref for OwnDb {
    type Target = Arc<DbShared>;

    fn deref(&self) -> &Arc<DbShared> {
        &self.0
    }
}

impl Session {
    pub(crate) fn new(db: Arc<DbShared>, id: u32) -> Self {
        let slot = db.slots.acquire();
        Session {
            own_db: Arc::new(OwnDb(Arc::clone(&db))),
            db,
            id,
            slot,
            last_tid: Tid::ZERO,
            attempts: 0,
            seniority: 0,
            log: Box::new(NoSessionLog::default()),
        }
    }

    pub fn id(&self) -> u32 {
        self.id
    }

    /// The session's slot: the low bits of its TIDs and its log partition.
    pub fn slot(&self) -> u16 {
        self.slot
    }

    /// Replace the session's log hooks (the scheme's; public with the
    /// `internals` feature, for tests that plug in a log of their own).
    #[cfg(feature = "internals")]
    pub fn set_log(&mut self, log: Box<dyn SessionLog>) {
        self.log = log;
    }

    #[cfg(not(feature = "internals"))]
    pub(crate) fn set_log(&mut self, log: Box<dyn SessionLog>) {
        self.log = log;
    }

    /// Start a transaction. It aborts when dropped without `commit`.
    pub fn begin(&mut self) -> Result<Transaction<'_>> {
        self.db.check_open()?;
        self.log.on_begin();
        Ok(Transaction {
            session: self,
            reads: Vec::new(),
            scans: Vec::new(),
            writes: BTreeMap::new(),
            early_locks: Vec::new(),
            early_age: 0,
            finished: false,
            call: None,
            call_barrier: false,
        })
    }

    /// Run `body` in a transaction and commit, retrying on conflicts up to
    /// `max_attempts` times. Returns the body's result.
    pub fn run<T>(
        &mut self,
        max_attempts: usize,
        mut body: impl FnMut(&mut Transaction<'_>) -> Result<T>,
    ) -> Result<T> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut tx = self.begin()?;
            let outcome = body(&mut tx).and_then(|v| tx.commit().map(|_| v));
            match outcome {
                Err(Error::Conflict) if attempt < max_attempts => continue,
                other => return other,
            }
        }
    }

    /// The session's identity in the commit lock table.
    pub(super) fn lock_owner(&self) -> LockOwner {
        LockOwner::of_slot(self.slot)
    }

    /// An id unique to this commit attempt: its placeholders' TID.
    pub(super) fn next_owner(&mut self) -> u64 {
        self.attempts = self.attempts.wrapping_add(1);
        ((self.id as u64 + 1) << 32) | self.attempts as u64
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.db.slots.release(self.slot);
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Session({})", self.id)
    }
}
