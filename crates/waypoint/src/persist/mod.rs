//! The persistence seam: what a scheme (a log, its checkpoints and its
//! recovery) plugs into the engine core, and what the core shows it.
//!
//! A session talks to its scheme through a [`SessionLog`]: every page
//! change passes its [`PageLog`] with the page still latched (the paged
//! schemes log it there), and every commit hands it a [`CommitView`]
//! (TID, write set, the TIDs read, the stored procedure if any), which
//! is all a value log, a command log or a per-worker WAL needs. No scheme
//! reaches into the transaction's internals.
//!
//! Invariant (DESIGN.md, invariant 2): a commit is acknowledged only after
//! `on_commit` returned and the [`DurableWait`] it left (if any) reports
//! durable.

mod none;
pub mod resident;
mod scheme;

pub(crate) use none::NoneOpening;
pub use none::NoneScheme;
pub(crate) use scheme::{OpenContext, Opening, Prepared, UncleanMark};
pub use scheme::{PersistenceStats, Scheme, SchemeKind};


use crate::btree::PageLog;
use crate::error::{Error, Result};
use crate::ids::Tid;

/// What a log scheme plugs into a session: its page logger for the
/// session's modifications and the commit hooks. The default logs nothing.
pub trait SessionLog: Send {
    fn page_log(&self) -> &dyn PageLog;
    /// A transaction starts.
    fn on_begin(&mut self) {}
    /// A committing transaction is about to read the global epoch for its
    /// TID (its serialization point): a scheme that tracks which epochs
    /// can still receive commits (`silor`) notes it here.
    fn before_epoch(&self) {}
    /// The transaction ended without `on_commit` (aborted or dropped).
    fn on_abort(&mut self) {}
    /// Whether `on_commit` should see the secondary-index entries a
    /// commit adds and removes (`CommitView::index_writes`): a scheme that
    /// logs values and cannot run the extractors at recovery logs them.
    fn wants_index_writes(&self) -> bool {
        false
    }
    /// A committing transaction is about to change `key` of table `table`,
    /// whose committed image (TID, value) is `current` (`None`: absent).
    /// Called for each written key once the images are read under the
    /// write locks, before any placeholder or install: a scheme that
    /// snapshots copy-on-write (`command`) keeps the pre-image here, so a
    /// snapshot writer never reads a newer value without its shadow.
    fn before_install(&self, _table: u32, _key: &[u8], _current: Option<(Tid, &[u8])>) {}
    /// After `on_commit` of a commit that deleted records, still under its
    /// locks: a value the deleted keys' stripes keep (`LockTable::
    /// raise_delete_mark`, the largest wins) and a later commit that read
    /// or inserted an absent key of those stripes passes back through
    /// [`CommitView::absent_mark`]. A delete leaves no record, so no TID
    /// says whose commit made the key absent. Zero (the default): no mark.
    fn delete_mark(&self) -> u64 {
        0
    }
    /// A catalog change is about to be committed through this (system)
    /// log: a scheme that does not log pages logs it here.
    fn on_catalog_change(&mut self, _change: &CatalogChange) -> Result<()> {
        Ok(())
    }
    /// After the writes are installed, before locks are released (or, for a
    /// read-only transaction, after validation): make the commit durable,
    /// or start to (its record appended, the wait left for
    /// [`SessionLog::wait_durable`] or [`SessionLog::take_pending`]).
    fn on_commit(&mut self, _commit: &CommitView<'_>) -> Result<()> {
        Ok(())
    }
    /// A failed commit starts undoing what it changed: records from now on
    /// are compensation records.
    fn begin_rollback(&mut self) {}
    /// The rollback is complete (log an end record).
    fn end_rollback(&mut self) -> Result<()> {
        Ok(())
    }
    /// A commit that had begun installing its writes under its TID was
    /// rolled back (a failure half-way through the install, or in
    /// `on_commit`), before `on_abort`: readers may have seen values that
    /// never committed (`silor`'s checkpoint walk must not keep them).
    fn after_install_rolled_back(&mut self) {}
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

/// One record of a commit's write set: the new value, or `None` for a
/// delete. Secondary-index entries are not in it: they follow from the
/// table rows through the indexes' extractors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteView<'a> {
    /// The table's id in the catalog.
    pub table: u32,
    pub key: &'a [u8],
    pub value: Option<&'a [u8]>,
}

/// A secondary-index entry a commit added (`present`) or removed; `index`
/// is the index's id in the catalog (ids of tables and indexes are one
/// space).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexWrite {
    pub index: u32,
    pub key: Vec<u8>,
    pub present: bool,
}

/// A transaction's write set as a commit shows it, in (table, key) order.
pub trait WriteSet {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn for_each(&self, f: &mut dyn FnMut(WriteView<'_>));
}

/// The write set of a commit that wrote no table record.
struct NoWrites;

impl WriteSet for NoWrites {
    fn len(&self) -> usize {
        0
    }
    fn for_each(&self, _f: &mut dyn FnMut(WriteView<'_>)) {}
}

/// A stored procedure's invocation: its name and encoded parameters, which
/// a command log records instead of the writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcedureCall<'a> {
    pub name: &'a str,
    pub params: &'a [u8],
    /// The call must be replayed alone, not beside other partitions'
    /// calls: it is a multi-partition call, or a single-partition call
    /// that wrote a row of a table without a partitioning key
    /// (`procedure::partition::is_barrier`).
    pub barrier: bool,
}

/// Everything a scheme may know of a commit.
pub struct CommitView<'a> {
    tid: Tid,
    writes: &'a dyn WriteSet,
    depends_on: &'a [Tid],
    procedure: Option<ProcedureCall<'a>>,
    index_writes: &'a [IndexWrite],
    absent_mark: u64,
}

impl<'a> CommitView<'a> {
    pub(crate) fn new(
        tid: Tid,
        writes: &'a dyn WriteSet,
        depends_on: &'a [Tid],
        procedure: Option<ProcedureCall<'a>>,
    ) -> Self {
        debug_assert!(
            depends_on.windows(2).all(|w| w[0] < w[1]),
            "dependencies sorted and unique"
        );
        CommitView {
            tid,
            writes,
            depends_on,
            procedure,
            index_writes: &[],
            absent_mark: 0,
        }
    }

    /// The largest delete mark (`SessionLog::delete_mark`) of the stripes
    /// of the keys the transaction read as absent or inserted.
    pub(crate) fn with_absent_mark(self, absent_mark: u64) -> Self {
        CommitView {
            absent_mark,
            ..self
        }
    }

    /// The largest delete mark of the stripes of the keys the transaction
    /// found absent (read, or inserted): the deleters it may depend on
    /// left it there. Zero: none.
    pub fn absent_mark(&self) -> u64 {
        self.absent_mark
    }

    /// The index entries the commit changed, if the scheme asked for them
    /// (`SessionLog::wants_index_writes`).
    pub(crate) fn with_index_writes(self, index_writes: &'a [IndexWrite]) -> Self {
        CommitView {
            index_writes,
            ..self
        }
    }

    /// The secondary-index entries added and removed, when the session's
    /// log asked for them (else empty).
    pub fn index_writes(&self) -> &[IndexWrite] {
        self.index_writes
    }

    /// A commit with no table writes (a read-only transaction, a catalog
    /// change, a test's commit record).
    pub fn without_writes(tid: Tid, depends_on: &'a [Tid]) -> Self {
        CommitView::new(tid, &NoWrites, depends_on, None)
    }

    /// The transaction's TID; [`Tid::ZERO`] for a read-only transaction or
    /// a catalog change.
    pub fn tid(&self) -> Tid {
        self.tid
    }

    /// The table records written, in (table, key) order.
    pub fn writes(&self) -> &dyn WriteSet {
        self.writes
    }

    /// TIDs of the committed records the transaction read or overwrote
    /// (the commits it depends on), sorted and unique.
    pub fn depends_on(&self) -> &[Tid] {
        self.depends_on
    }

    /// The stored procedure the transaction ran, if any.
    pub fn procedure(&self) -> Option<ProcedureCall<'a>> {
        self.procedure
    }
}

/// A catalog change, as a scheme that logs values rather than pages
/// records it (the ids are the catalog's, so a replay gives the same).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogChange {
    CreateTable { name: String, id: u32 },
    CreateIndex { name: String, id: u32, table: String },
    DropTable { name: String },
    DropIndex { name: String },
}

/// Logs nothing (the `none` scheme).
#[derive(Debug, Default)]
pub struct NoSessionLog(crate::btree::NoLog);

impl SessionLog for NoSessionLog {
    fn page_log(&self) -> &dyn PageLog {
        &self.0
    }
}

/// The session's log could not be opened: every commit that would log
/// fails with that error rather than losing durability.
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
    fn on_commit(&mut self, _commit: &CommitView<'_>) -> Result<()> {
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
