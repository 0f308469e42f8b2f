//! The key-value operations a workload's transaction body needs, as a
//! trait ([`KvTx`]), so that one body (YCSB's operations, TPC-B's
//! transfer) runs on waypoint's [`Transaction`] in the driver and on any
//! engine of [`crate::peers`] in `waypoint compare peers`.
//!
//! Tables are numbered: a workload names its tables in a list, and each
//! engine opens them in that order. [`WaypointTx`] maps the numbers onto
//! waypoint [`Table`]s. Invariant: a body sees the same operations and
//! the same outcomes (a missing row is `None`, an insert over an existing
//! row and an update of a missing one fail) on every engine, so the
//! workload's invariant check means the same thing on each.

use crate::error::BenchResult;
use waypoint::{Error, Table, Transaction};

/// One transaction's operations on numbered tables.
pub trait KvTx {
    /// The engine's error: waypoint's, or [`crate::peers::KvError`].
    type Error;
    fn get(&mut self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>, Self::Error>;
    /// A read the transaction will write back: the engine locks the row
    /// here (waypoint's `Transaction::get_for_update`, RocksDB's
    /// `TransactionDB`), so that two read-modify-writes of one row cannot
    /// both commit and the second waits for the first (waypoint: up to
    /// `Options::lock_wait`) instead of failing.
    fn get_for_update(&mut self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>, Self::Error> {
        self.get(table, key)
    }
    /// Fails if the row exists (the engine's key-exists error).
    fn insert(&mut self, table: usize, key: &[u8], value: &[u8]) -> Result<(), Self::Error>;
    /// Fails if the row does not exist ([`KvTx::missing`]).
    fn update(&mut self, table: usize, key: &[u8], value: &[u8]) -> Result<(), Self::Error>;
    /// Up to `len` rows from `from` on, in key order.
    #[allow(clippy::type_complexity)]
    fn scan(
        &mut self,
        table: usize,
        from: &[u8],
        len: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, Self::Error>;
    /// The error for a row a transaction needs and did not find: it rolls
    /// the transaction back and counts as an abort
    /// ([`crate::workload::intended_rollback`] for waypoint).
    fn missing(&self) -> Self::Error;
}

/// A waypoint transaction with the workload's tables by number.
pub struct WaypointTx<'a, 't> {
    pub tx: &'a mut Transaction<'t>,
    pub tables: &'a [Table],
}

impl KvTx for WaypointTx<'_, '_> {
    type Error = Error;

    fn get(&mut self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.tx.get(&self.tables[table], key)
    }

    fn get_for_update(&mut self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.tx.get_for_update(&self.tables[table], key)
    }

    fn insert(&mut self, table: usize, key: &[u8], value: &[u8]) -> Result<(), Error> {
        self.tx.insert(&self.tables[table], key, value)
    }

    fn update(&mut self, table: usize, key: &[u8], value: &[u8]) -> Result<(), Error> {
        self.tx.update(&self.tables[table], key, value)
    }

    fn scan(
        &mut self,
        table: usize,
        from: &[u8],
        len: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, Error> {
        self.tx.scan(&self.tables[table], from.., len)
    }

    fn missing(&self) -> Error {
        crate::workload::intended_rollback()
    }
}

/// A check's callback on one row (key, value), as the invariant checks
/// of the workloads take it.
pub type RowFn<'a> = dyn FnMut(&[u8], &[u8]) -> BenchResult<()> + 'a;

/// Rows per page of [`each_row`].
pub const PAGE_ROWS: usize = 10_000;

/// Call `f` on every row that `scan_page` returns, page after page:
/// `scan_page(from)` gives up to [`PAGE_ROWS`] rows from `from` on (each
/// page in a transaction of its own, so a long check holds no snapshot).
#[allow(clippy::type_complexity)]
pub fn each_row(
    mut scan_page: impl FnMut(&[u8]) -> BenchResult<Vec<(Vec<u8>, Vec<u8>)>>,
    mut f: impl FnMut(&[u8], &[u8]) -> BenchResult<()>,
) -> BenchResult<()> {
    let mut next: Vec<u8> = Vec::new();
    loop {
        let rows = scan_page(&next)?;
        let Some((last, _)) = rows.last() else {
            return Ok(());
        };
        next = last.clone();
        next.push(0);
        for (k, v) in &rows {
            f(k, v)?;
        }
    }
}
