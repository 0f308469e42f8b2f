//! Loading helpers shared by workloads: parallel batched inserts, chunked
//! full-table scans, and the `bench_meta` table that records which
//! workload and scale a database was loaded with (so a reused `--dir` is
//! checked, never silently mixed).

use crate::error::{BenchError, BenchResult};
use serde::{Deserialize, Serialize};
use waypoint::{Database, Error, Procedures, SchemeKind, Session, Table, Transaction};

/// The loaders' stored procedure, for a scheme that takes writes only
/// in procedures (`command`): rows put into a table.
pub const PUT_PROCEDURE: &str = "bench_put";

/// The parameters of a `bench_put` call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Put {
    pub table: String,
    pub rows: Vec<(Vec<u8>, Vec<u8>)>,
    /// Replace existing rows (else an existing key fails the call).
    pub upsert: bool,
}

/// Register `bench_put` (multi-partition: a load runs alone).
pub fn register(procedures: Procedures) -> waypoint::Result<Procedures> {
    procedures.multi(PUT_PROCEDURE, |tx: &mut Transaction<'_>, put: &Put| {
        let table = tx.table(&put.table)?;
        for (k, v) in &put.rows {
            if put.upsert {
                tx.upsert(&table, k, v)?;
            } else {
                tx.insert(&table, k, v)?;
            }
        }
        Ok(())
    })
}

/// Does `db` take writes only in stored procedures?
fn writes_by_calls(db: &Database) -> bool {
    db.scheme() == SchemeKind::Command
}

/// Put `rows` through `bench_put`, retrying conflicts.
pub(crate) fn put(
    session: &mut Session,
    table: &Table,
    rows: Vec<(Vec<u8>, Vec<u8>)>,
    upsert: bool,
) -> BenchResult<()> {
    let put = Put {
        table: table.name().to_string(),
        rows,
        upsert,
    };
    for _ in 0..100 {
        match session.call::<_, ()>(PUT_PROCEDURE, &put) {
            Err(Error::Conflict) => continue,
            other => return Ok(other?),
        }
    }
    Err(Error::Conflict.into())
}

/// Records per load transaction.
pub const LOAD_BATCH: u64 = 100;
const META_TABLE: &str = "bench_meta";

/// Insert rows `0..n` into `table` from `workers` threads, each loading a
/// contiguous slice in transactions of [`LOAD_BATCH`] rows. `row(i)` gives
/// row `i`'s key and value.
pub fn parallel_insert<F>(
    db: &Database,
    table: &Table,
    n: u64,
    workers: usize,
    row: F,
) -> BenchResult<()>
where
    F: Fn(u64) -> (Vec<u8>, Vec<u8>) + Sync,
{
    if writes_by_calls(db) {
        // One caller: each batch is a multi-partition call, run alone.
        let mut session = db.session();
        let mut i = 0;
        while i < n {
            let end = (i + LOAD_BATCH).min(n);
            put(&mut session, table, (i..end).map(&row).collect(), false)?;
            i = end;
        }
        return Ok(());
    }
    let workers = workers.max(1) as u64;
    let per_worker = n.div_ceil(workers);
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for w in 0..workers {
            let (row, stop) = (&row, &stop);
            let spawned = std::thread::Builder::new()
                .name(format!("bench-load-{w}"))
                .spawn_scoped(s, move || -> BenchResult<()> {
                    let mut session = db.session();
                    let (lo, hi) = (w * per_worker, ((w + 1) * per_worker).min(n));
                    let mut i = lo;
                    while i < hi && !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let end = (i + LOAD_BATCH).min(hi);
                        session.run(100, |tx| {
                            for j in i..end {
                                let (k, v) = row(j);
                                tx.insert(table, &k, &v)?;
                            }
                            Ok(())
                        })?;
                        i = end;
                    }
                    Ok(())
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    stop.store(true, std::sync::atomic::Ordering::Relaxed);
                    return Err(crate::driver::spawn_failed(
                        w as usize,
                        workers as usize,
                        &e,
                    ));
                }
            }
        }
        handles
            .into_iter()
            .try_for_each(|h| h.join().expect("load worker panicked"))
    })
}

/// Call `f` on every row of `table` in key order, reading chunks of
/// [`crate::kv::PAGE_ROWS`] rows in separate read-only transactions (for
/// a quiescent database).
pub fn for_each_row(
    session: &mut Session,
    table: &Table,
    f: impl FnMut(&[u8], &[u8]) -> BenchResult<()>,
) -> BenchResult<()> {
    crate::kv::each_row(
        |from| {
            let mut tx = session.begin()?;
            Ok(tx.scan(table, from.., crate::kv::PAGE_ROWS)?)
        },
        f,
    )
}

/// What a database was loaded with: `Some(params)` if `workload` was
/// loaded before, `None` for a database without it.
pub fn loaded_params(db: &Database, workload: &str) -> BenchResult<Option<serde_json::Value>> {
    if !db.table_names().iter().any(|t| t == META_TABLE) {
        return Ok(None);
    }
    let meta = db.table(META_TABLE)?;
    let mut session = db.session();
    let mut tx = session.begin()?;
    let v = tx.get(&meta, workload.as_bytes())?;
    drop(tx);
    v.map(|v| {
        serde_json::from_slice(&v)
            .map_err(|e| BenchError::Verify(format!("bench_meta entry of {workload}: {e}")))
    })
    .transpose()
}

/// Record that `workload` was loaded with `params` (after the load).
pub fn record_params(db: &Database, workload: &str, params: &serde_json::Value) -> BenchResult<()> {
    let meta = db.open_or_create_table(META_TABLE)?;
    let mut session = db.session();
    let bytes = serde_json::to_vec(params).expect("params serialize");
    if writes_by_calls(db) {
        return put(
            &mut session,
            &meta,
            vec![(workload.as_bytes().to_vec(), bytes)],
            true,
        );
    }
    session.run(10, |tx| tx.upsert(&meta, workload.as_bytes(), &bytes))?;
    Ok(())
}

/// Check a reused database: loaded by `workload` with the same `params`.
/// Returns true if it holds the workload, false if the database is empty
/// of it (and may be loaded).
pub fn check_reuse(db: &Database, workload: &str, params: &serde_json::Value) -> BenchResult<bool> {
    match loaded_params(db, workload)? {
        None => {
            let others = db
                .table_names()
                .into_iter()
                .filter(|t| t != META_TABLE)
                .collect::<Vec<_>>();
            if others.is_empty() {
                Ok(false)
            } else {
                Err(BenchError::Config(format!(
                    "{} holds other tables ({}), not a {workload} database",
                    db.path().display(),
                    others.join(", ")
                )))
            }
        }
        Some(p) if &p == params => Ok(true),
        Some(p) => Err(BenchError::Config(format!(
            "{} was loaded by {workload} with {p}, not {params}",
            db.path().display()
        ))),
    }
}
