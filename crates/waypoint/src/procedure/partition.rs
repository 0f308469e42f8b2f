//! Tables' partitioning keys and the check that a single-partition call
//! keeps to its partition (seed 001 §II-B: VoltDB partitions every table
//! by a column and refuses a single-partition procedure that reaches
//! another partition's rows).
//!
//! The serial order (`order`) makes the log order the execution order
//! only if calls of different partitions never touch the same rows: a
//! single-partition call that read another partition's row could see a
//! value that a concurrent call of that partition was changing, and its
//! replay, run in another interleaving, would compute something else. A
//! table whose partitioning key is registered (`Procedures::
//! partition_key`) has each row's partition checked at the end of every
//! single-partition call, before its commit: every row it read, scanned
//! (an index scan's rows by their primary keys) or wrote. A call that
//! strayed is rolled back and logged nowhere (`Error::ProcedurePartition`).
//!
//! Not checked: tables without a registered key (for example TPC-C's
//! item table, which is only read), and a scan's range where it found no
//! row.
//!
//! Parallel replay (`command::replay`) runs different partitions' calls
//! side by side; a call that wrote a row of a table without a key is a
//! barrier there (`is_barrier`), decided when it runs and logged with it,
//! unless the table is insert-only (`Procedures::insert_only`: rows only
//! inserted, under unique keys, never read by calls; such inserts commute,
//! and a call that reads such a row is refused here).
//!
//! Invariant: a single-partition call that commits under a serial order
//! touched only rows of its own partition in every table with a key, and
//! is logged as a barrier if it wrote a row of a table without one.

use super::{order::partition_of, Procedures};
use crate::error::{Error, Result};
use crate::txn::Transaction;
use std::sync::Arc;

/// The routing key of a table's row, computed from its primary key: the
/// row is in partition `routing key % partitions`, the partition a
/// single-partition procedure routed by the same number runs in.
pub type PartitionKey = Arc<dyn Fn(&[u8]) -> u64 + Send + Sync>;

/// Refuse `tx`, run by procedure `name` in the partition of routing key
/// `routed` among `partitions`, if it touched a row of another partition.
pub(crate) fn check(
    partitions: usize,
    name: &str,
    routed: u64,
    tx: &Transaction<'_>,
) -> Result<()> {
    let procedures: &Procedures = tx.procedures();
    if !procedures.insert_only.is_empty() {
        for (table, key) in tx.touched_rows() {
            let name_ = table.name.as_str();
            if procedures.insert_only.contains(name_)
                && !tx
                    .written_rows()
                    .any(|(t, k)| t.name.as_str() == name_ && k == key)
            {
                return Err(Error::Unsupported {
                    what: format!(
                        "procedure {name:?} read a row of table {name_:?}, which calls may only insert into (`Procedures::insert_only`)"
                    ),
                });
            }
        }
    }
    if procedures.partition_keys.is_empty() {
        return Ok(());
    }
    let home = partition_of(routed, partitions);
    for (table, key) in tx.touched_rows() {
        let Some(of) = procedures.partition_keys.get(table.name.as_str()) else {
            continue;
        };
        let row = partition_of(of(key), partitions);
        if row != home {
            return Err(Error::ProcedurePartition {
                name: name.into(),
                table: table.name.clone(),
                home,
                row,
            });
        }
    }
    Ok(())
}

/// Must the single-partition call `tx` be replayed alone? Yes if it wrote
/// a row of a table without a partitioning key: another partition's call
/// may read or write that row, and only the log order says which came
/// first. Rows of tables with a key are its partition's alone (`check`),
/// and reads of tables without one are ordered around their writers,
/// which are all barriers. Rows of insert-only tables are never read by
/// calls and commute. Decided from what the call did, not from the
/// procedure: a call that wrote nothing there replays in parallel.
pub(crate) fn is_barrier(tx: &Transaction<'_>) -> bool {
    let procedures = tx.procedures();
    tx.written_rows().any(|(table, _)| {
        let name = table.name.as_str();
        !procedures.partition_keys.contains_key(name) && !procedures.insert_only.contains(name)
    })
}
