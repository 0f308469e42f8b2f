//! A transaction's reads and buffered writes: point reads and scans record
//! what they observed (TIDs, with other committers' placeholders) for
//! validation; writes wait in the write set until commit. Nothing touches
//! a page before commit.
//!
//! Invariant: a read sees committed records and this transaction's own
//! writes, never another transaction's placeholder as a value.

use super::locks::LockTable;
use super::session::Session;
use super::shared::DbShared;
use crate::btree::BTree;
use crate::buffer::FrameHint;
use crate::catalog::{self, Index, Table, TableInfo};
use crate::error::{Error, Result};
use crate::ids::Tid;
use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

pub(super) struct PointRead {
    pub(super) table: Arc<TableInfo>,
    pub(super) key: Vec<u8>,
    /// TID seen, including another committer's placeholder; None: absent.
    pub(super) observed: Option<Tid>,
}

/// A scan as executed, for re-execution at validation.
pub(super) struct ScanRead {
    pub(super) tree: BTree,
    /// Table whose lock stripes cover the scanned records (for an index:
    /// its base table; index keys end with the primary key).
    pub(super) table: Arc<TableInfo>,
    pub(super) is_index: bool,
    pub(super) lower: Bound<Vec<u8>>,
    pub(super) upper: Bound<Vec<u8>>,
    pub(super) reverse: bool,
    /// Live (non-placeholder) records fetched before stopping.
    pub(super) fetch: usize,
    pub(super) observed: Vec<(Vec<u8>, Tid)>,
}

pub(super) struct PendingWrite {
    pub(super) table: Arc<TableInfo>,
    /// New value, or None for a delete.
    pub(super) value: Option<Vec<u8>>,
    /// The leaf where the transaction last read the key, so the commit's
    /// read of the current image can skip the descent if it is unchanged.
    pub(super) hint: Option<FrameHint>,
}

/// One entry of a secondary index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    pub secondary: Vec<u8>,
    pub primary: Vec<u8>,
}

/// A record of the write set, (table id, key), with the TID it had when the
/// committer locked it (None: absent).
pub(super) type LockedRecord<'k> = ((u32, &'k [u8]), Option<Tid>);

/// A serializable transaction. Dropping it without `commit` aborts it.
pub struct Transaction<'s> {
    pub(super) session: &'s mut Session,
    pub(super) reads: Vec<PointRead>,
    pub(super) scans: Vec<ScanRead>,
    pub(super) writes: BTreeMap<(u32, Vec<u8>), PendingWrite>,
    /// Commit-lock stripes taken by `get_for_update`, held until the
    /// transaction ends: handed to the commit's lock guard, or released
    /// by an abort.
    pub(super) early_locks: Vec<u32>,
    /// The transaction's age in the lock table once it took an early
    /// stripe (`txn::locks` header); 0 before.
    pub(super) early_age: u64,
    pub(super) finished: bool,
    /// The stored procedure this transaction runs (`Session::call`): its
    /// name and encoded parameters, shown to the commit hook.
    pub(crate) call: Option<(Arc<str>, Vec<u8>)>,
    /// The call must replay alone (`ProcedureCall::barrier`), set before
    /// its commit.
    pub(crate) call_barrier: bool,
}

pub(super) fn to_owned_bound(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

pub(super) fn as_ref_bound(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Run a scan on `tree`, stopping after `fetch` live records; placeholders
/// of `own` (this committer) are invisible, others' are recorded but not
/// counted.
#[allow(clippy::too_many_arguments)]
pub(super) fn scan_tree(
    db: &DbShared,
    tree: &BTree,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
    reverse: bool,
    fetch: usize,
    own: Option<Tid>,
    mut live: impl FnMut(&[u8], &[u8]),
) -> Result<Vec<(Vec<u8>, Tid)>> {
    let mut observed = Vec::new();
    let mut count = 0;
    if fetch == 0 {
        return Ok(observed);
    }
    tree.scan(&db.pool, lower, upper, reverse, &mut |k, tid, v| {
        if tid.is_placeholder() {
            if Some(tid) != own {
                observed.push((k.to_vec(), tid));
            }
            return true;
        }
        observed.push((k.to_vec(), tid));
        live(k, v);
        count += 1;
        count < fetch
    })?;
    Ok(observed)
}

impl Transaction<'_> {
    pub(super) fn db(&self) -> &DbShared {
        &self.session.db
    }

    pub(super) fn check_active(&self) -> Result<()> {
        if self.finished {
            return Err(Error::TransactionFinished);
        }
        self.db().check_open()
    }

    /// Writes are refused up front once the log's disk is full, and
    /// outside a stored procedure under a scheme that logs only calls.
    fn check_writable(&self) -> Result<()> {
        self.check_active()?;
        if self.call.is_none() && self.db().scheme.command_order().is_some() {
            return Err(Error::ProcedureRequired {
                scheme: self.db().scheme.kind(),
            });
        }
        self.db().check_writable()
    }

    /// The table named `name` (for a stored procedure, which is
    /// registered before the tables exist).
    pub fn table(&self, name: &str) -> Result<Table> {
        self.check_active()?;
        self.db()
            .catalog
            .lock()
            .tables
            .get(name)
            .map(|info| Table {
                info: Arc::clone(info),
            })
            .ok_or_else(|| Error::UnknownTable { name: name.into() })
    }

    /// The secondary index named `name` (for a stored procedure, as
    /// [`Transaction::table`]).
    pub fn index(&self, name: &str) -> Result<Index> {
        self.check_active()?;
        self.db()
            .catalog
            .lock()
            .indexes
            .get(name)
            .map(|info| Index {
                info: Arc::clone(info),
            })
            .ok_or_else(|| Error::UnknownTable { name: name.into() })
    }

    fn check_sizes(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let max_key = BTree::max_key_len(&self.db().pool);
        if key.len() > max_key {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max: max_key,
            });
        }
        if let Some(v) = value {
            let max_value = BTree::max_value_len(&self.db().pool);
            if v.len() > max_value {
                return Err(Error::ValueTooLarge {
                    len: v.len(),
                    max: max_value,
                });
            }
        }
        Ok(())
    }

    /// Read `key` from the tree (not the write set) and record the read;
    /// also returns a hint to the key's leaf, for a write of the key.
    fn read_through(
        &mut self,
        table: &Arc<TableInfo>,
        key: &[u8],
    ) -> Result<(Option<Vec<u8>>, Option<FrameHint>)> {
        let (current, hint) = table.tree.get(&self.db().pool, key, None)?;
        table.check_live()?;
        let (observed, value) = match current {
            Some((tid, _)) if tid.is_placeholder() => (Some(tid), None),
            Some((tid, v)) => (Some(tid), Some(v)),
            None => (None, None),
        };
        self.reads.push(PointRead {
            table: Arc::clone(table),
            key: key.to_vec(),
            observed,
        });
        Ok((value, hint))
    }

    /// The value of `key`, seeing this transaction's own writes.
    pub fn get(&mut self, table: &Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.get_with_hint(table, key)?.0)
    }

    /// `get`, holding the key's commit lock from before the read until the
    /// transaction ends (SQL's `SELECT ... FOR UPDATE`): no other
    /// transaction commits a change of the key in between, and another
    /// `get_for_update` of it waits for this transaction to end, then
    /// reads what it committed. A read-modify-write of a hot record so
    /// waits its turn where a plain `get` would fail validation
    /// (`Conflict`) once another commit changed the record. Meanwhile a
    /// plain read of the key by another transaction fails its validation,
    /// as it would against a committer.
    ///
    /// Locks taken here come in the application's order, not the commit's,
    /// so they can deadlock: an older transaction (by its first such lock)
    /// waiting for a younger one makes the younger give way at its next
    /// wait. Each wait for such a lock also ends after `Options::lock_wait`
    /// (5 ms by default), and so does a plain commit's wait for a key held
    /// here. Giving way aborts the transaction with `Conflict`; retry it
    /// then, in the same session: the session's next transaction that
    /// locks here keeps the age of the one that gave way, so no
    /// transaction begun since makes the retry give way. A thread that holds such a transaction open while it commits
    /// another that writes the key sees that commit wait `lock_wait` and
    /// fail.
    pub fn get_for_update(&mut self, table: &Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_active()?;
        table.info.check_live()?;
        let stripe = LockTable::stripe(table.info.id, key);
        if !self.early_locks.contains(&stripe) {
            let owner = self.session.lock_owner();
            if self.early_age == 0 {
                let kept = std::mem::take(&mut self.session.seniority);
                self.early_age = self.db().locks.begin_early(owner, kept);
            }
            if let Err(refusal) = self.db().locks.lock_by(stripe, owner, self.early_age) {
                // A deadlock's victim releases what it holds; its retry
                // keeps its age (`LockTable::begin_early`).
                let age = self.early_age;
                self.finish_abort();
                self.session.seniority = age;
                self.db().locks.step_aside(refusal);
                return Err(Error::Conflict);
            }
            self.early_locks.push(stripe);
        }
        self.get(table, key)
    }

    /// Release the stripes `get_for_update` took and the age (an abort).
    fn release_early_locks(&mut self) {
        if self.early_age != 0 {
            let stripes = std::mem::take(&mut self.early_locks);
            self.db()
                .locks
                .release_early(&stripes, self.session.lock_owner());
            self.early_age = 0;
        }
    }

    /// `get`, with a hint to the key's leaf if one is known.
    fn get_with_hint(
        &mut self,
        table: &Table,
        key: &[u8],
    ) -> Result<(Option<Vec<u8>>, Option<FrameHint>)> {
        self.check_active()?;
        table.info.check_live()?;
        if let Some(w) = self.writes.get(&(table.info.id, key.to_vec())) {
            return Ok((w.value.clone(), w.hint));
        }
        self.read_through(&table.info, key)
    }

    fn exists(&mut self, table: &Table, key: &[u8]) -> Result<(bool, Option<FrameHint>)> {
        let (value, hint) = self.get_with_hint(table, key)?;
        Ok((value.is_some(), hint))
    }

    fn put(&mut self, table: &Table, key: &[u8], value: Option<&[u8]>, hint: Option<FrameHint>) {
        let k = (table.info.id, key.to_vec());
        // A blind write keeps the hint an earlier write of the key had.
        let hint = hint.or_else(|| self.writes.get(&k).and_then(|w| w.hint));
        self.writes.insert(
            k,
            PendingWrite {
                table: Arc::clone(&table.info),
                value: value.map(<[u8]>::to_vec),
                hint,
            },
        );
    }

    /// Insert a new record; `KeyExists` if `key` is present.
    pub fn insert(&mut self, table: &Table, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_writable()?;
        self.check_sizes(key, Some(value))?;
        let (exists, hint) = self.exists(table, key)?;
        if exists {
            return Err(Error::KeyExists);
        }
        self.put(table, key, Some(value), hint);
        Ok(())
    }

    /// Replace an existing record; `KeyNotFound` if `key` is absent.
    pub fn update(&mut self, table: &Table, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_writable()?;
        self.check_sizes(key, Some(value))?;
        let (exists, hint) = self.exists(table, key)?;
        if !exists {
            return Err(Error::KeyNotFound);
        }
        self.put(table, key, Some(value), hint);
        Ok(())
    }

    /// Insert or replace, without reading the old value (a blind write).
    pub fn upsert(&mut self, table: &Table, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_writable()?;
        table.info.check_live()?;
        self.check_sizes(key, Some(value))?;
        self.put(table, key, Some(value), None);
        Ok(())
    }

    /// Delete `key`; returns whether it was present.
    pub fn delete(&mut self, table: &Table, key: &[u8]) -> Result<bool> {
        self.check_writable()?;
        self.check_sizes(key, None)?;
        let (existed, hint) = self.exists(table, key)?;
        if existed {
            self.put(table, key, None, hint);
        }
        Ok(existed)
    }

    /// Up to `limit` records with keys in `range`, ascending.
    pub fn scan<'k, R: RangeBounds<&'k [u8]>>(
        &mut self,
        table: &Table,
        range: R,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.scan_table(
            table,
            range.start_bound().map(|b| *b),
            range.end_bound().map(|b| *b),
            false,
            limit,
        )
    }

    /// Up to `limit` records with keys in `range`, descending.
    pub fn scan_rev<'k, R: RangeBounds<&'k [u8]>>(
        &mut self,
        table: &Table,
        range: R,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.scan_table(
            table,
            range.start_bound().map(|b| *b),
            range.end_bound().map(|b| *b),
            true,
            limit,
        )
    }

    /// Up to `limit` records whose key starts with `prefix`, ascending.
    pub fn scan_prefix(
        &mut self,
        table: &Table,
        prefix: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let end = catalog::prefix_successor(prefix);
        let upper = match &end {
            Some(e) => Bound::Excluded(e.as_slice()),
            None => Bound::Unbounded,
        };
        self.scan_table(table, Bound::Included(prefix), upper, false, limit)
    }

    fn scan_table(
        &mut self,
        table: &Table,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.check_active()?;
        table.info.check_live()?;
        let id = table.info.id;
        // Own writes in range, in scan order.
        let in_range = |k: &[u8]| (lower, upper).contains(&k);
        let mut own: Vec<(&Vec<u8>, &Option<Vec<u8>>)> = self
            .writes
            .range((id, Vec::new())..)
            .take_while(|((t, _), _)| *t == id)
            .filter(|((_, k), _)| in_range(k))
            .map(|((_, k), w)| (k, &w.value))
            .collect();
        if reverse {
            own.reverse();
        }
        // Each own delete can hide one fetched record: fetch that many more.
        let deletes = own.iter().filter(|(_, v)| v.is_none()).count();
        let fetch = limit.saturating_add(deletes);
        let mut fetched: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let observed = scan_tree(
            self.db(),
            &table.info.tree,
            lower,
            upper,
            reverse,
            fetch,
            None,
            |k, v| fetched.push((k.to_vec(), v.to_vec())),
        )?;
        self.scans.push(ScanRead {
            tree: table.info.tree,
            table: Arc::clone(&table.info),
            is_index: false,
            lower: to_owned_bound(lower),
            upper: to_owned_bound(upper),
            reverse,
            fetch,
            observed,
        });
        // Merge the tree's records with own writes.
        let mut merged: BTreeMap<Vec<u8>, Vec<u8>> = fetched.into_iter().collect();
        for (k, v) in &own {
            match v {
                Some(v) => {
                    merged.insert((*k).clone(), v.clone());
                }
                None => {
                    merged.remove(*k);
                }
            }
        }
        let out: Vec<_> = if reverse {
            merged.into_iter().rev().take(limit).collect()
        } else {
            merged.into_iter().take(limit).collect()
        };
        Ok(out)
    }

    /// Up to `limit` entries of `index` whose secondary key lies in `range`,
    /// ordered by (secondary, primary); descending with `reverse`. Entries
    /// reflect committed data, not this transaction's own pending writes.
    pub fn index_scan<'k, R: RangeBounds<&'k [u8]>>(
        &mut self,
        index: &Index,
        range: R,
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<IndexEntry>> {
        self.check_active()?;
        index.info.check_live()?;
        let (lower, upper) = catalog::index_bounds(
            range.start_bound().map(|b| *b),
            range.end_bound().map(|b| *b),
        );
        let mut entries = Vec::new();
        let mut corrupt = false;
        let observed = scan_tree(
            self.db(),
            &index.info.tree,
            as_ref_bound(&lower),
            as_ref_bound(&upper),
            reverse,
            limit,
            None,
            |k, _| match catalog::split_index_key(k) {
                Some((secondary, primary)) => entries.push(IndexEntry {
                    secondary,
                    primary: primary.to_vec(),
                }),
                None => corrupt = true,
            },
        )?;
        if corrupt {
            return Err(Error::Corruption {
                path: self.db().pool.file().path().to_path_buf(),
                offset: index.info.tree.root() * self.db().pool.page_size() as u64,
                detail: format!("index {:?} holds a malformed key", index.info.name),
            });
        }
        self.scans.push(ScanRead {
            tree: index.info.tree,
            table: Arc::clone(&index.info.table),
            is_index: true,
            lower,
            upper,
            reverse,
            fetch: limit,
            observed,
        });
        Ok(entries)
    }

    /// Abort: discard everything. Also what dropping the transaction does.
    pub fn abort(mut self) {
        self.finish_abort();
    }

    /// The stored procedures the database was opened with.
    pub(crate) fn procedures(&self) -> &crate::procedure::Procedures {
        &self.db().procedures
    }

    /// Every row this transaction read, scanned or wrote, as (table,
    /// primary key): what a scheme with a serial order checks against the
    /// call's partition (`procedure::partition`). An index scan's rows
    /// are named by the primary key their index key ends with; a scan's
    /// range itself is not a row (an empty range names nothing).
    pub(crate) fn touched_rows(&self) -> impl Iterator<Item = (&TableInfo, &[u8])> {
        let reads = self.reads.iter().map(|r| (&*r.table, r.key.as_slice()));
        let writes = self.written_rows();
        let scans = self.scans.iter().flat_map(|s| {
            s.observed.iter().filter_map(move |(k, _)| {
                if s.is_index {
                    catalog::split_index_key(k).map(|(_, primary)| (&*s.table, primary))
                } else {
                    Some((&*s.table, k.as_slice()))
                }
            })
        });
        reads.chain(writes).chain(scans)
    }

    /// Every row this transaction wrote (inserted, updated or deleted),
    /// as (table, primary key): what decides whether a single-partition
    /// call is a barrier of parallel replay (`procedure::partition`).
    pub(crate) fn written_rows(&self) -> impl Iterator<Item = (&TableInfo, &[u8])> {
        self.writes
            .iter()
            .map(|((_, k), w)| (&*w.table, k.as_slice()))
    }

    pub(super) fn finish_abort(&mut self) {
        self.release_early_locks();
        if !self.finished {
            self.finished = true;
            self.session.log.on_abort();
            self.session
                .db
                .counters
                .aborts
                .add(self.session.slot, 1);
        }
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        self.finish_abort();
    }
}
