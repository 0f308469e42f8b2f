//! The interface between the driver and a workload (TPC-B, YCSB, ...): the
//! workload creates and loads its tables, hands each worker thread a
//! transaction generator, and checks its invariants on demand.

use crate::error::BenchResult;
use waypoint::{Database, Error, PendingCall, PendingCommit, Session, Transaction};

/// What `setup` found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loaded {
    /// The tables were created and loaded now.
    Fresh { records: u64 },
    /// The database already held this workload's tables at the same scale.
    Existing { records: u64 },
}

pub trait Workload: Sync {
    /// The name on the command line (`tpcb`, `ycsb`).
    fn name(&self) -> &'static str;
    /// Transaction types; [`Worker::next`] returns an index into this.
    fn txn_types(&self) -> Vec<&'static str>;
    /// The workload's parameters, echoed in `summary.json`.
    fn config_json(&self) -> serde_json::Value;
    /// Check the parameters against their ranges before a database is
    /// opened (values must fit pages of `page_size`); the error names the
    /// parameter, its value and the range.
    fn validate(&self, page_size: usize) -> BenchResult<()> {
        let _ = page_size;
        Ok(())
    }
    /// Create and load the tables with `workers` threads, or check that an
    /// existing database holds this workload at the same scale.
    fn setup(&mut self, db: &Database, workers: usize) -> BenchResult<Loaded>;
    /// The transaction generator of worker `worker`, seeded with `seed`.
    fn worker(&self, worker: usize, seed: u64) -> Box<dyn Worker + '_>;
    /// Check the workload's invariants on a quiescent database; returns
    /// what was checked (for the summary) or `BenchError::Verify`.
    fn verify(&self, db: &Database) -> BenchResult<serde_json::Value>;
}

/// A row a stored procedure inserts with its own writes: (table, key),
/// with an empty value.
pub type Ack = (String, Vec<u8>);

/// Runs one transaction's operations (not its commit).
pub trait Worker {
    /// Execute the next transaction's body in `tx`. Returns its type and
    /// the outcome; the driver commits on `Ok`.
    fn next(&mut self, tx: &mut Transaction<'_>) -> (usize, Result<(), Error>);

    /// A workload written as stored procedures (registered by
    /// [`crate::procedures`]) makes its next call here instead, returning
    /// its type and the commit's handle (`wait_now`: the caller waits on
    /// it at once). `ack`: a row (table, key) the call also inserts, in
    /// the same transaction (the crash test's acknowledgement). `None`:
    /// the caller runs [`Worker::next`] in a transaction.
    fn call(
        &mut self,
        session: &mut Session,
        wait_now: bool,
        ack: Option<Ack>,
    ) -> Option<(usize, Result<PendingCommit, Error>)> {
        let _ = (session, wait_now, ack);
        None
    }

    /// A workload written as stored procedures hands its next call over
    /// here when calls run on executor threads
    /// (`Session::runs_calls_on_executors`), without waiting for it to
    /// run: its type as drawn, and the call in flight. `None`: the driver
    /// uses [`Worker::call`].
    fn submit(&mut self, session: &mut Session) -> Submitted {
        let _ = session;
        None
    }
}

/// What [`Worker::submit`] gives: the call's type as drawn and the call
/// in flight, or `None` for a workload that does not hand calls over.
pub type Submitted = Option<(usize, Result<Box<dyn InFlightCall>, Error>)>;

/// A call in flight on an executor ([`Worker::submit`]).
pub trait InFlightCall {
    /// Has it run and become durable, or failed (never blocks)?
    fn is_done(&self) -> bool;
    /// Block until it has run (committed or failed), durable or not.
    fn wait_until_run(&self);
    /// Wait until durable: the transaction's type (which a procedure's
    /// result may name) and the outcome.
    fn wait(self: Box<Self>) -> (usize, Result<(), Error>);
}

/// A [`PendingCall`] of type `ty` as drawn; `ty_of` names the type from
/// the result (Voter's call returns it).
pub struct TypedCall<R> {
    pub ty: usize,
    pub call: PendingCall<R>,
    pub ty_of: fn(&R, usize) -> usize,
}

impl<R: 'static> InFlightCall for TypedCall<R> {
    fn is_done(&self) -> bool {
        self.call.is_done()
    }

    fn wait_until_run(&self) {
        self.call.wait_until_run()
    }

    fn wait(self: Box<Self>) -> (usize, Result<(), Error>) {
        let ty = self.ty;
        match self.call.wait() {
            Ok((result, _)) => ((self.ty_of)(&result, ty), Ok(())),
            Err(e) => (ty, Err(e)),
        }
    }
}

/// The error a worker returns from [`Worker::next`] to roll its
/// transaction back on purpose, as TPC-C's New-Order does for an unused
/// item number (1% of them): the driver drops the transaction and counts
/// an abort of its type, as for a conflict, and the run goes on. It is
/// `KeyNotFound`, what the engine reports for the missing row.
pub fn intended_rollback() -> Error {
    Error::KeyNotFound
}

/// Errors that end a transaction attempt but not the run: OCC conflicts and
/// the key races of inserts and deletes under concurrency, and
/// [`intended_rollback`].
pub fn is_abort(e: &Error) -> bool {
    matches!(e, Error::Conflict | Error::KeyExists | Error::KeyNotFound)
}
