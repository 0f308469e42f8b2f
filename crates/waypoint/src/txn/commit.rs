//! The commit path (seed 002 §2): lock the write set's stripes, insert
//! placeholders for new keys, validate (`validate.rs`), install under a
//! TID, hand the commit to the session's log, release; on any error after
//! the first change, undo everything from the undo list.
//!
//! Invariant: an aborted commit leaves no trace: every change is preceded
//! by its undo entry, and undo is idempotent, so a change that fails half
//! way is undone too.

use super::epoch::next_tid;
use super::locks::{LockTable, StripeGuard};
use super::shared::DbShared;
use super::transaction::{LockedRecord, Transaction};
use crate::btree::BTree;
use crate::catalog;
use crate::error::{Error, Result};
use crate::ids::Tid;
use crate::persist::{CommitView, DurableWait, IndexWrite, ProcedureCall, WriteSet, WriteView};
use std::sync::Arc;

/// The write set as the session's log sees it.
struct Writes<'a>(&'a std::collections::BTreeMap<(u32, Vec<u8>), super::transaction::PendingWrite>);

impl WriteSet for Writes<'_> {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn for_each(&self, f: &mut dyn FnMut(WriteView<'_>)) {
        for ((table, key), w) in self.0 {
            f(WriteView {
                table: *table,
                key,
                value: w.value.as_deref(),
            });
        }
    }
}

/// Result of a successful commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitInfo {
    /// The transaction's TID; [`Tid::ZERO`] for a read-only transaction.
    pub tid: Tid,
}

/// A commit that is installed and visible but may not be durable yet: it
/// is acknowledged (durable, per the commit protocol) when `wait` returns.
pub struct PendingCommit {
    info: CommitInfo,
    wait: Option<Box<dyn DurableWait>>,
}

impl PendingCommit {
    /// A commit that is durable already (the result of
    /// [`Transaction::commit`]), for callers that keep blocking and
    /// pipelined commits in one queue.
    pub fn durable(info: CommitInfo) -> Self {
        PendingCommit { info, wait: None }
    }

    pub fn tid(&self) -> Tid {
        self.info.tid
    }

    /// True once the commit is durable (never blocks).
    pub fn is_durable(&self) -> bool {
        self.wait.as_ref().is_none_or(|w| w.is_durable())
    }

    /// Block until the commit is durable.
    pub fn wait(self) -> Result<CommitInfo> {
        if let Some(w) = &self.wait {
            w.wait()?;
        }
        Ok(self.info)
    }
}

impl std::fmt::Debug for PendingCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PendingCommit(tid {}, durable: {})",
            self.info.tid,
            self.is_durable()
        )
    }
}

impl Transaction<'_> {
    /// Validate, install, and return once the commit is durable. On
    /// `Conflict` nothing was changed and the transaction may be retried.
    pub fn commit(self) -> Result<CommitInfo> {
        self.commit_then(true)?.wait()
    }

    /// Validate and install, and return without waiting for durability:
    /// the commit is visible to other transactions at once and acknowledged
    /// when the returned handle's `wait` returns. One session can keep many
    /// commits in flight this way while the log writer syncs.
    pub fn commit_pipelined(self) -> Result<PendingCommit> {
        self.commit_then(false)
    }

    /// Commit; `wait_now`: the caller waits for durability right away.
    pub(crate) fn commit_then(mut self, wait_now: bool) -> Result<PendingCommit> {
        self.check_active()?;
        self.session.log.set_commit_waits(wait_now);
        // The commit takes the age over (`StripeGuard::lock_after`).
        let age = self.early_age;
        let result = self.commit_inner().map(|info| PendingCommit {
            info,
            wait: self.session.log.take_pending(),
        });
        match &result {
            Ok(_) => {
                debug_assert!(
                    self.early_locks.is_empty() && self.early_age == 0,
                    "early locks released by the commit"
                );
                self.session.seniority = 0;
                self.finished = true;
                self.session
                    .db
                    .counters
                    .commits
                    .add(self.session.slot, 1);
            }
            Err(e) => {
                let conflict = matches!(e, Error::Conflict);
                self.finish_abort();
                if age != 0 && conflict {
                    // Its retry keeps the age (`LockTable::begin_early`).
                    self.session.seniority = age;
                }
            }
        }
        result
    }

    fn commit_inner(&mut self) -> Result<CommitInfo> {
        // The session's own handle: cloning the database's `Arc` itself
        // wrote to a line every session writes (decision 032).
        let db = Arc::clone(&self.session.own_db);
        let _quiesce = db.quiesce.read_as(self.session.slot);
        db.check_open()?;
        let owner = self.session.lock_owner();
        if self.writes.is_empty() {
            // Stripes `get_for_update` took stay held until after the
            // commit hook, as a writer's do.
            let _early = (self.early_age != 0)
                .then(|| {
                    let held = std::mem::take(&mut self.early_locks);
                    let age = std::mem::take(&mut self.early_age);
                    StripeGuard::lock_after(&db.locks, held, age, [], owner)
                })
                .transpose()?;
            let me = self.session.next_owner();
            self.validate(&db, me, &[])?;
            let observed = self.observed_tids(&[]);
            let absent_mark = self.absent_mark(&db, std::iter::empty());
            self.session.log.on_commit(
                &CommitView::without_writes(Tid::ZERO, &observed).with_absent_mark(absent_mark),
            )?;
            return Ok(CommitInfo { tid: Tid::ZERO });
        }
        // A full log disk refuses writes before anything is locked.
        db.check_writable()?;
        let me = self.session.next_owner();
        // The write set's stripes in its order, hashed once for the locks,
        // the TID clock, the delete marks read and those raised.
        let stripes: Vec<u32> = self
            .writes
            .keys()
            .map(|(t, k)| LockTable::stripe(*t, k))
            .collect();
        // Stripes held since a `get_for_update` break the ascending order:
        // the rest are then waited for only so long (`locks` header).
        let locks = if self.early_age == 0 {
            StripeGuard::lock(&db.locks, stripes.clone(), owner)?
        } else {
            let held = std::mem::take(&mut self.early_locks);
            let age = std::mem::take(&mut self.early_age);
            StripeGuard::lock_after(&db.locks, held, age, stripes.iter().copied(), owner)?
        };
        // A rollback that failed left its placeholders behind and poisoned
        // the database before releasing these locks: seen from here, so no
        // commit builds on what it left.
        db.check_open()?;
        let mut undo = Vec::new();
        let mut installing = false;
        let mut result = self.install(&db, me, &stripes, &mut undo, &mut installing);
        if result.is_err() {
            if let Err(full) = self.rollback(&db, &mut undo) {
                // The rollback is complete in memory, but the log filled up
                // meanwhile: say so rather than "conflict, retry".
                result = Err(full);
            }
            if installing {
                self.session.log.after_install_rolled_back();
            }
        }
        drop(locks);
        Ok(CommitInfo { tid: result? })
    }

    /// Steps 2-5 of the protocol, under the write-set locks.
    /// `stripes`: the write set's, in its order. `installing` is set once
    /// writes under the new TID begin.
    fn install(
        &mut self,
        db: &DbShared,
        me: u64,
        stripes: &[u32],
        undo: &mut Vec<Undo>,
        installing: &mut bool,
    ) -> Result<Tid> {
        let placeholder = Tid::placeholder(me);
        let log = self.session.log.page_log();
        let pool = &db.pool;
        let mut max_seen = Tid::ZERO;
        // Current images of written records (stable: we hold their locks),
        // and the index changes they imply. Each read starts at the leaf
        // where the transaction read the key, if it is unchanged, and
        // leaves a hint for the write below.
        let mut plans = Vec::with_capacity(self.writes.len());
        for ((_, key), w) in &self.writes {
            w.table.check_live()?;
            let (current, hint) = w.table.tree.get(pool, key, w.hint)?;
            if let Some((tid, _)) = &current {
                debug_assert!(!tid.is_placeholder(), "placeholder under a held lock");
                max_seen = max_seen.max(*tid);
            }
            let indexes = w.table.indexes.read().clone();
            let mut index_changes = Vec::new();
            for index in &indexes {
                let extractor =
                    index
                        .extractor
                        .read()
                        .clone()
                        .ok_or_else(|| Error::IndexNotBound {
                            table: w.table.name.clone(),
                            index: index.name.clone(),
                        })?;
                let old = current.as_ref().and_then(|(_, v)| extractor(key, v));
                let new = w.value.as_ref().and_then(|v| extractor(key, v));
                if old != new {
                    let old_key = old.map(|s| catalog::index_key(&s, key));
                    let new_key = new.map(|s| catalog::index_key(&s, key));
                    if let Some(k) = &new_key {
                        let max = BTree::max_key_len(pool);
                        if k.len() > max {
                            return Err(Error::KeyTooLarge { len: k.len(), max });
                        }
                    }
                    index_changes.push((Arc::clone(index), old_key, new_key));
                }
            }
            plans.push((key, w, current, index_changes, hint));
        }
        // Pre-images for a copy-on-write snapshot: before anything below
        // changes a tree (`SessionLog::before_install`).
        for (key, w, current, _, _) in &plans {
            let current = current.as_ref().map(|(tid, v)| (*tid, v.as_slice()));
            self.session.log.before_install(w.table.id, key, current);
        }
        // Placeholders for records and index entries this commit creates.
        for (key, w, current, index_changes, hint) in &plans {
            // Each undo entry is pushed before its change, and undo is
            // idempotent, so a change that fails half-way is undone too.
            if let (Some(v), None) = (&w.value, current) {
                undo.push(Undo::remove(w.table.tree, key));
                // The placeholder carries the value already (readers skip it
                // by its TID), so installing only changes the TID and the
                // record's room, and any split for it, is taken here, in key
                // order. An empty placeholder grew at install instead, where
                // a split cannot tell in-order inserts from random growth
                // and leaves half-empty pages (docs/decisions/
                // 006-page-splits-at-the-insertion-point.md).
                w.table.tree.insert(pool, log, key, placeholder, v, *hint)?;
            }
            for (index, _, new_key) in index_changes {
                if let Some(k) = new_key {
                    undo.push(Undo::remove(index.tree, k));
                    index.tree.insert(pool, log, k, placeholder, &[], None)?;
                }
            }
        }
        // Serialization point. Records we hold locked cannot change under
        // us, so validation takes their TIDs from the images read above
        // instead of descending the tree again (keys sorted like `writes`).
        let locked: Vec<LockedRecord<'_>> = self
            .writes
            .keys()
            .zip(&plans)
            .map(|((t, k), (_, _, c, _, _))| ((*t, k.as_slice()), c.as_ref().map(|(tid, _)| *tid)))
            .collect();
        self.session.log.before_epoch();
        let epoch = db.epoch.current();
        max_seen = max_seen.max(self.validate(db, me, &locked)?);
        if db.locks.keeps_tids() {
            max_seen = max_seen.max(db.locks.last_tid(stripes.iter().copied()));
        }
        let tid = next_tid(epoch, max_seen, self.session.last_tid, self.session.slot);
        if db.locks.keeps_tids() {
            db.locks.set_last_tid(stripes.iter().copied(), tid);
        }
        let log_index_writes = self.session.log.wants_index_writes();
        let mut index_writes = Vec::new();
        // Install.
        *installing = true;
        for (key, w, current, index_changes, hint) in &plans {
            let tree = w.table.tree;
            match (&w.value, current) {
                (Some(v), None) => {
                    // No hint: the placeholder's insert changed the leaf.
                    tree.update(pool, log, key, tid, v, None)?;
                }
                (Some(v), Some((old_tid, old))) => {
                    undo.push(Undo::restore(tree, key, *old_tid, old));
                    tree.update(pool, log, key, tid, v, *hint)?;
                }
                (None, Some((old_tid, old))) => {
                    undo.push(Undo::restore(tree, key, *old_tid, old));
                    tree.remove(pool, log, key, *hint)?;
                }
                (None, None) => {}
            }
            for (index, old_key, new_key) in index_changes {
                if let Some(k) = old_key {
                    if let (Some((old_tid, _)), hint) = index.tree.get(pool, k, None)? {
                        undo.push(Undo::restore(index.tree, k, old_tid, &[]));
                        index.tree.remove(pool, log, k, hint)?;
                        if log_index_writes {
                            index_writes.push(IndexWrite {
                                index: index.id,
                                key: k.clone(),
                                present: false,
                            });
                        }
                    }
                }
                if let Some(k) = new_key {
                    index.tree.update(pool, log, k, tid, &[], None)?;
                    if log_index_writes {
                        index_writes.push(IndexWrite {
                            index: index.id,
                            key: k.clone(),
                            present: true,
                        });
                    }
                }
            }
        }
        let overwritten: Vec<Tid> = plans
            .iter()
            .filter_map(|(_, _, c, _, _)| c.as_ref().map(|(t, _)| *t))
            .collect();
        let observed = self.observed_tids(&overwritten);
        let inserted = stripes
            .iter()
            .zip(&plans)
            .filter(|(_, (_, _, c, _, _))| c.is_none())
            .map(|(s, _)| *s);
        let absent_mark = self.absent_mark(db, inserted);
        let writes = Writes(&self.writes);
        let procedure = self.call.as_ref().map(|(name, params)| ProcedureCall {
            name,
            params,
            barrier: self.call_barrier,
        });
        self.session.log.on_commit(
            &CommitView::new(tid, &writes, &observed, procedure)
                .with_index_writes(&index_writes)
                .with_absent_mark(absent_mark),
        )?;
        // A delete leaves no record whose TID a later reader of the absent
        // key could depend on: its stripe keeps the log's mark instead,
        // raised before the locks are released (`SessionLog::delete_mark`).
        if plans.iter().any(|(_, w, c, _, _)| w.value.is_none() && c.is_some()) {
            let mark = self.session.log.delete_mark();
            if mark > 0 {
                for (s, (_, w, c, _, _)) in stripes.iter().zip(&plans) {
                    if w.value.is_none() && c.is_some() {
                        db.locks.raise_delete_mark(*s, mark);
                    }
                }
            }
        }
        self.session.last_tid = tid;
        Ok(tid)
    }

    /// The largest delete mark of the stripes of the keys this transaction
    /// read as absent (or as another committer's placeholder) and of
    /// `inserted` (stripes of keys it inserts). Read after validation: a
    /// deleter raised its mark before releasing the stripe, and validation
    /// found the stripe free (or this transaction holds it).
    fn absent_mark(&self, db: &DbShared, inserted: impl Iterator<Item = u32>) -> u64 {
        self.reads
            .iter()
            .filter(|r| r.observed.is_none_or(|t| t.is_placeholder()))
            .map(|r| LockTable::stripe(r.table.id, &r.key))
            .chain(inserted)
            .map(|s| db.locks.delete_mark(s))
            .max()
            .unwrap_or(0)
    }

    /// TIDs of committed records this transaction read or overwrote.
    fn observed_tids(&self, overwritten: &[Tid]) -> Vec<Tid> {
        let mut tids: Vec<Tid> = self
            .reads
            .iter()
            .filter_map(|r| r.observed)
            .chain(
                self.scans
                    .iter()
                    .flat_map(|s| s.observed.iter().map(|(_, t)| *t)),
            )
            .chain(overwritten.iter().copied())
            .filter(|t| t.is_committed())
            .collect();
        tids.sort_unstable();
        tids.dedup();
        tids
    }

    /// Undo placeholders and partial installs, newest first. If undo itself
    /// fails the in-memory state can no longer be trusted: poison.
    ///
    /// On a full log disk the undo still completes in memory (its
    /// compensation records may not be logged, see `WalSessionLog`), so
    /// readers see the transaction undone and the database is not
    /// poisoned; the end record is not durable, so the transaction stays a
    /// loser that recovery undoes after the reopen. Returns `Err(LogFull)`
    /// in that case.
    fn rollback(&mut self, db: &DbShared, undo: &mut Vec<Undo>) -> Result<()> {
        self.session.log.begin_rollback();
        // Only a complete rollback may be closed with an end record: a
        // partial one must stay a loser so recovery finishes the undo
        // (found by errors.rs: an end record after a failed undo kept half
        // a transaction).
        if self.rollback_changes(db, undo) {
            match self.session.log.end_rollback() {
                Ok(()) => {}
                Err(e) if e.is_log_full() => return Err(e),
                Err(e) => db.poison(format!("logging the end of a rollback failed: {e}")),
            }
        }
        Ok(())
    }

    /// Returns whether every change was undone.
    fn rollback_changes(&mut self, db: &DbShared, undo: &mut Vec<Undo>) -> bool {
        let log = self.session.log.page_log();
        while let Some(u) = undo.pop() {
            let result = match &u.before {
                None => u.tree.remove(&db.pool, log, &u.key, None).map(|_| ()),
                Some((tid, v)) => match u.tree.update(&db.pool, log, &u.key, *tid, v, None) {
                    Ok(true) => Ok(()),
                    Ok(false) => u.tree.insert(&db.pool, log, &u.key, *tid, v, None),
                    Err(e) => Err(e),
                },
            };
            if let Err(e) = result {
                db.poison(format!("undo of an aborted commit failed: {e}"));
                return false;
            }
        }
        true
    }
}

/// How to reverse one tree change of a failed commit.
struct Undo {
    tree: BTree,
    key: Vec<u8>,
    /// None: the key did not exist; remove it.
    before: Option<(Tid, Vec<u8>)>,
}

impl Undo {
    fn remove(tree: BTree, key: &[u8]) -> Self {
        Undo {
            tree,
            key: key.to_vec(),
            before: None,
        }
    }
    fn restore(tree: BTree, key: &[u8], tid: Tid, value: &[u8]) -> Self {
        Undo {
            tree,
            key: key.to_vec(),
            before: Some((tid, value.to_vec())),
        }
    }
}
