//! Sessions and transactions: serializable optimistic concurrency control
//! in the style of Silo (seed 002 §2), over the paged B+-trees.
//!
//! A transaction reads records and their TIDs into a read set, buffers its
//! writes, and at commit:
//! 1. locks the stripes of its write set in ascending order (deadlock-free);
//! 2. inserts *absent placeholders* for keys it will create, in tables and
//!    secondary indexes, so concurrent scanners see them (Silo inserts
//!    absent records before validating for the same reason: phantoms);
//! 3. reads the global epoch: the serialization point;
//! 4. validates: every point read and every scan, re-executed, observes
//!    the same TIDs, and no observed record is locked by another committer;
//! 5. computes its TID (greater than all it saw, in the current epoch),
//!    installs its writes and index changes through the trees' one
//!    modification path, and releases the locks.
//!
//! Invariant: an aborted transaction leaves no trace. Nothing reaches a
//! page before step 2; placeholders and any partial install are undone
//! from the undo list before an error is returned.

pub mod epoch;
pub(crate) mod locks;
mod validate;

use crate::btree::{BTree, PageLog};
use crate::buffer::FrameHint;
use crate::catalog::{self, Index, Table, TableInfo};
use crate::db::DbShared;
use crate::error::{Error, Result};
use epoch::{next_tid, ABSENT_BIT};
use locks::{LockOwner, LockTable, StripeGuard};
use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What a log scheme plugs into a session: its page logger for the
/// session's modifications and the commit hooks. The default logs nothing.
pub trait SessionLog: Send {
    fn page_log(&self) -> &dyn PageLog;
    /// A transaction starts.
    fn on_begin(&mut self) {}
    /// After the writes are installed, before locks are released (or, for a
    /// read-only transaction, after validation): write the commit record.
    /// `observed` yields the TIDs of every record the transaction read or
    /// overwrote: the commits it depends on.
    fn on_commit(&mut self, _tid: u64, _observed: &mut dyn Iterator<Item = u64>) -> Result<()> {
        Ok(())
    }
    /// A failed commit starts undoing what it changed: records from now on
    /// are compensation records.
    fn begin_rollback(&mut self) {}
    /// The rollback is complete (log an end record).
    fn end_rollback(&mut self) -> Result<()> {
        Ok(())
    }
    /// Whether the next `on_commit` is followed at once by a wait for its
    /// durability (a blocking commit, `Transaction::commit`): the log then
    /// need not wake its writer thread for the session's own partition,
    /// since the committing thread syncs it itself.
    fn set_commit_waits(&mut self, _waits: bool) {}
    /// Instead of `wait_durable`: hand out what the last commit still waits
    /// for, so the caller can wait later (pipelined commits).
    fn take_pending(&mut self) -> Option<Box<dyn DurableWait>> {
        None
    }
    /// After locks are released: return once the commit is durable as the
    /// configured durability promises.
    fn wait_durable(&mut self) -> Result<()> {
        Ok(())
    }
}

/// What a pipelined commit still waits for.
pub trait DurableWait: Send {
    fn is_durable(&self) -> bool;
    fn wait(&self) -> Result<()>;
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

    pub fn tid(&self) -> u64 {
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

/// Logs nothing (`Logging::None`).
#[derive(Debug, Default)]
pub struct NoSessionLog(crate::btree::NoLog);

impl SessionLog for NoSessionLog {
    fn page_log(&self) -> &dyn PageLog {
        &self.0
    }
}

/// The session's log partition could not be opened: every commit that
/// would log fails with that error rather than losing durability.
pub struct FailedSessionLog {
    error: Error,
    page_log: FailedPageLog,
}

struct FailedPageLog(String);

impl PageLog for FailedPageLog {
    fn logged(
        &self,
        _tree: crate::btree::RootId,
        _page: &mut crate::buffer::ExclusiveGuard<'_>,
        _op: crate::btree::PageOp<'_>,
    ) -> Result<()> {
        Err(Error::Poisoned {
            cause: self.0.clone(),
        })
    }

    fn logged_smo(
        &self,
        _tree: crate::btree::RootId,
        _pages: &mut [&mut crate::buffer::ExclusiveGuard<'_>],
        _ops: &[crate::btree::PageOp<'_>],
    ) -> Result<()> {
        Err(Error::Poisoned {
            cause: self.0.clone(),
        })
    }
}

impl FailedSessionLog {
    pub fn new(error: Error) -> Self {
        let text = format!("the session's log partition could not be opened: {error}");
        FailedSessionLog {
            error,
            page_log: FailedPageLog(text),
        }
    }
}

impl SessionLog for FailedSessionLog {
    fn page_log(&self) -> &dyn PageLog {
        &self.page_log
    }
    fn on_commit(&mut self, _tid: u64, _observed: &mut dyn Iterator<Item = u64>) -> Result<()> {
        Err(Error::Poisoned {
            cause: self.page_log.0.clone(),
        })
    }
}

impl std::fmt::Debug for FailedSessionLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FailedSessionLog({})", self.error)
    }
}

/// A connection used by one thread at a time. Create one per worker thread
/// with [`crate::Database::session`]; it is `Send`, not `Sync`.
pub struct Session {
    pub(crate) db: Arc<DbShared>,
    id: u32,
    /// Low bits of this session's TIDs; unique among live sessions.
    slot: u16,
    last_tid: u64,
    attempts: u32,
    log: Box<dyn SessionLog>,
}

impl Session {
    pub(crate) fn new(db: Arc<DbShared>, id: u32) -> Self {
        let slot = db.slots.acquire();
        Session {
            db,
            id,
            slot,
            last_tid: 0,
            attempts: 0,
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

    /// Replace the session's log hooks (used by log schemes).
    pub fn set_log(&mut self, log: Box<dyn SessionLog>) {
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
            finished: false,
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
    fn lock_owner(&self) -> LockOwner {
        LockOwner::of_slot(self.slot)
    }

    /// An id unique to this commit attempt: its placeholders' TID.
    fn next_owner(&mut self) -> u64 {
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

struct PointRead {
    table: Arc<TableInfo>,
    key: Vec<u8>,
    /// TID seen, including another committer's placeholder; None: absent.
    observed: Option<u64>,
}

/// A scan as executed, for re-execution at validation.
struct ScanRead {
    tree: BTree,
    /// Table whose lock stripes cover the scanned records (for an index:
    /// its base table; index keys end with the primary key).
    lock_table: u32,
    is_index: bool,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    reverse: bool,
    /// Live (non-placeholder) records fetched before stopping.
    fetch: usize,
    observed: Vec<(Vec<u8>, u64)>,
}

struct PendingWrite {
    table: Arc<TableInfo>,
    /// New value, or None for a delete.
    value: Option<Vec<u8>>,
    /// The leaf where the transaction last read the key, so the commit's
    /// read of the current image can skip the descent if it is unchanged.
    hint: Option<FrameHint>,
}

/// One entry of a secondary index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    pub secondary: Vec<u8>,
    pub primary: Vec<u8>,
}

/// A record of the write set, (table id, key), with the TID it had when the
/// committer locked it (None: absent).
type LockedRecord<'k> = ((u32, &'k [u8]), Option<u64>);

/// A serializable transaction. Dropping it without `commit` aborts it.
pub struct Transaction<'s> {
    session: &'s mut Session,
    reads: Vec<PointRead>,
    scans: Vec<ScanRead>,
    writes: BTreeMap<(u32, Vec<u8>), PendingWrite>,
    finished: bool,
}

/// Result of a successful commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitInfo {
    /// The transaction's TID; 0 for a read-only transaction.
    pub tid: u64,
}

fn to_owned_bound(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn as_ref_bound(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
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
fn scan_tree(
    db: &DbShared,
    tree: &BTree,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
    reverse: bool,
    fetch: usize,
    own: Option<u64>,
    mut live: impl FnMut(&[u8], &[u8]),
) -> Result<Vec<(Vec<u8>, u64)>> {
    let mut observed = Vec::new();
    let mut count = 0;
    if fetch == 0 {
        return Ok(observed);
    }
    tree.scan(&db.pool, lower, upper, reverse, &mut |k, tid, v| {
        if tid & ABSENT_BIT != 0 {
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
    fn db(&self) -> &DbShared {
        &self.session.db
    }

    fn check_active(&self) -> Result<()> {
        if self.finished {
            return Err(Error::TransactionFinished);
        }
        self.db().check_open()
    }

    /// Writes are refused up front once the log's disk is full.
    fn check_writable(&self) -> Result<()> {
        self.check_active()?;
        self.db().check_writable()
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
        let (current, hint) = table.tree.get_hinted(&self.db().pool, key, None)?;
        table.check_live()?;
        let (observed, value) = match current {
            Some((tid, _)) if tid & ABSENT_BIT != 0 => (Some(tid), None),
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
            lock_table: id,
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
            lock_table: index.info.table.id,
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

    fn finish_abort(&mut self) {
        if !self.finished {
            self.finished = true;
            self.session
                .db
                .counters
                .aborts
                .fetch_add(1, Ordering::Relaxed);
        }
    }

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
    fn commit_then(mut self, wait_now: bool) -> Result<PendingCommit> {
        self.check_active()?;
        self.session.log.set_commit_waits(wait_now);
        let result = self.commit_inner().map(|info| PendingCommit {
            info,
            wait: self.session.log.take_pending(),
        });
        match &result {
            Ok(_) => {
                self.finished = true;
                self.session
                    .db
                    .counters
                    .commits
                    .fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => self.finish_abort(),
        }
        result
    }

    fn commit_inner(&mut self) -> Result<CommitInfo> {
        let db = Arc::clone(&self.session.db);
        let _quiesce = db.quiesce.read();
        db.check_open()?;
        if self.writes.is_empty() {
            let me = self.session.next_owner();
            self.validate(&db, me, &[])?;
            let mut observed = self.observed_tids(&[]);
            self.session.log.on_commit(0, &mut observed)?;
            return Ok(CommitInfo { tid: 0 });
        }
        // A full log disk refuses writes before anything is locked.
        db.check_writable()?;
        let me = self.session.next_owner();
        let stripes = self
            .writes
            .keys()
            .map(|(t, k)| LockTable::stripe(*t, k))
            .collect();
        let locks = StripeGuard::lock(&db.locks, stripes, self.session.lock_owner());
        // A rollback that failed left its placeholders behind and poisoned
        // the database before releasing these locks: seen from here, so no
        // commit builds on what it left.
        db.check_open()?;
        let mut undo = Vec::new();
        let mut result = self.install(&db, me, &mut undo);
        if result.is_err() {
            if let Err(full) = self.rollback(&db, &mut undo) {
                // The rollback is complete in memory, but the log filled up
                // meanwhile: say so rather than "conflict, retry".
                result = Err(full);
            }
        }
        drop(locks);
        Ok(CommitInfo { tid: result? })
    }

    /// Steps 2-5 of the protocol, under the write-set locks.
    fn install(&mut self, db: &DbShared, me: u64, undo: &mut Vec<Undo>) -> Result<u64> {
        let placeholder = ABSENT_BIT | me;
        let log = self.session.log.page_log();
        let pool = &db.pool;
        let mut max_seen = 0u64;
        // Current images of written records (stable: we hold their locks),
        // and the index changes they imply. Each read starts at the leaf
        // where the transaction read the key, if it is unchanged, and
        // leaves a hint for the write below.
        let mut plans = Vec::with_capacity(self.writes.len());
        for ((_, key), w) in &self.writes {
            w.table.check_live()?;
            let (current, hint) = w.table.tree.get_hinted(pool, key, w.hint)?;
            if let Some((tid, _)) = &current {
                debug_assert_eq!(tid & ABSENT_BIT, 0, "placeholder under a held lock");
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
                // and leaves half-empty pages (ARCHITECTURE.md, "Page
                // splits").
                w.table
                    .tree
                    .insert_hinted(pool, log, key, placeholder, v, *hint)?;
            }
            for (index, _, new_key) in index_changes {
                if let Some(k) = new_key {
                    undo.push(Undo::remove(index.tree, k));
                    index.tree.insert(pool, log, k, placeholder, &[])?;
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
        let epoch = db.epoch.current();
        max_seen = max_seen.max(self.validate(db, me, &locked)?);
        let tid = next_tid(epoch, max_seen, self.session.last_tid, self.session.slot);
        // Install.
        for (key, w, current, index_changes, hint) in &plans {
            let tree = w.table.tree;
            match (&w.value, current) {
                (Some(v), None) => {
                    // No hint: the placeholder's insert changed the leaf.
                    tree.update(pool, log, key, tid, v)?;
                }
                (Some(v), Some((old_tid, old))) => {
                    undo.push(Undo::restore(tree, key, *old_tid, old));
                    tree.update_hinted(pool, log, key, tid, v, *hint)?;
                }
                (None, Some((old_tid, old))) => {
                    undo.push(Undo::restore(tree, key, *old_tid, old));
                    tree.remove_hinted(pool, log, key, *hint)?;
                }
                (None, None) => {}
            }
            for (index, old_key, new_key) in index_changes {
                if let Some(k) = old_key {
                    if let (Some((old_tid, _)), hint) = index.tree.get_hinted(pool, k, None)? {
                        undo.push(Undo::restore(index.tree, k, old_tid, &[]));
                        index.tree.remove_hinted(pool, log, k, hint)?;
                    }
                }
                if let Some(k) = new_key {
                    index.tree.update(pool, log, k, tid, &[])?;
                }
            }
        }
        let overwritten: Vec<u64> = plans
            .iter()
            .filter_map(|(_, _, c, _, _)| c.as_ref().map(|(t, _)| *t))
            .collect();
        let mut observed = self.observed_tids(&overwritten);
        self.session.log.on_commit(tid, &mut observed)?;
        self.session.last_tid = tid;
        Ok(tid)
    }

    /// TIDs of committed records this transaction read or overwrote.
    fn observed_tids(&self, overwritten: &[u64]) -> std::vec::IntoIter<u64> {
        let mut tids: Vec<u64> = self
            .reads
            .iter()
            .filter_map(|r| r.observed)
            .chain(
                self.scans
                    .iter()
                    .flat_map(|s| s.observed.iter().map(|(_, t)| *t)),
            )
            .chain(overwritten.iter().copied())
            .filter(|t| t & ABSENT_BIT == 0 && *t != 0)
            .collect();
        tids.sort_unstable();
        tids.dedup();
        tids.into_iter()
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
                None => u.tree.remove(&db.pool, log, &u.key).map(|_| ()),
                Some((tid, v)) => match u.tree.update(&db.pool, log, &u.key, *tid, v) {
                    Ok(true) => Ok(()),
                    Ok(false) => u.tree.insert(&db.pool, log, &u.key, *tid, v),
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
    before: Option<(u64, Vec<u8>)>,
}

impl Undo {
    fn remove(tree: BTree, key: &[u8]) -> Self {
        Undo {
            tree,
            key: key.to_vec(),
            before: None,
        }
    }
    fn restore(tree: BTree, key: &[u8], tid: u64, value: &[u8]) -> Self {
        Undo {
            tree,
            key: key.to_vec(),
            before: Some((tid, value.to_vec())),
        }
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        self.finish_abort();
    }
}
