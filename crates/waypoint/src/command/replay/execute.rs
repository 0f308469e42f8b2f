//! Running one logged record again (seed 001 §III-B), the one way both
//! the serial and the parallel replay do it: a call through
//! `Session::replay_call` (not entering the serial order: the replay
//! orders the calls), retried on an OCC conflict, its write set checked
//! against the logged digest; a catalog change through the database.
//! And the serial replay itself: every record in log order on one
//! session.
//!
//! Invariant: a record's failure is reported as serial replay always
//! has: a full pool or a failing disk as itself, anything else as
//! corruption naming the record's file and offset, with the likely
//! cause.

use super::{At, Logged, Replayed};
use crate::db::Database;
use crate::error::{Error, Result};
use crate::persist::CatalogChange;
use crate::txn::Session;

/// Conflicts a call may meet before its replay is given up. Calls of
/// different partitions touch different rows, so a conflict at replay is
/// a false one (B-tree nodes shared by their rows) and another attempt
/// goes through; the bound keeps a body that returns `Conflict` itself
/// from looping forever.
const MAX_ATTEMPTS: u32 = 1000;

fn apply_catalog(db: &Database, change: &CatalogChange) -> Result<()> {
    match change {
        CatalogChange::CreateTable { name, id } => {
            let table = db.create_table(name)?;
            if table.id() != *id {
                return Err(Error::Internal {
                    what: format!(
                        "table {name:?} was created with id {id} and is created again with id {}",
                        table.id()
                    ),
                });
            }
            Ok(())
        }
        CatalogChange::DropTable { name } => db.drop_table(name),
        CatalogChange::DropIndex { name } => db.drop_index(name),
        CatalogChange::CreateIndex { name, id, table } => {
            // `create_index` takes the registered extractor under this
            // scheme; one that is not registered now is refused there.
            let table = db.table(table)?;
            let unused: crate::catalog::KeyExtractor = std::sync::Arc::new(|_: &[u8], _: &[u8]| None);
            let index = db.create_index(&table, name, unused)?;
            if index.info.id != *id {
                return Err(Error::Internal {
                    what: format!(
                        "index {name:?} was created with id {id} and is created again with id {}",
                        index.info.id
                    ),
                });
            }
            Ok(())
        }
    }
}

fn corrupt(at: &At, detail: String) -> Error {
    Error::Corruption {
        path: at.path.clone(),
        offset: at.offset,
        detail,
    }
}

/// Run call `at` again on `session` (retrying conflicts) and compare its
/// write set with the logged digest.
fn call(session: &mut Session, at: &At) -> Result<()> {
    let Logged::Call {
        sequence,
        name,
        params,
        digest,
        partitions,
        ..
    } = &at.logged
    else {
        return Ok(());
    };
    let mut attempts = 0;
    loop {
        attempts += 1;
        let _ = crate::command::log::take_replayed_digest();
        match session.replay_call(name, params, *partitions) {
            Err(e) if e.is_retryable() && attempts < MAX_ATTEMPTS => {
                std::thread::yield_now();
                continue;
            }
            Err(e) => return Err(e),
            Ok(()) => break,
        }
    }
    let again = crate::command::log::take_replayed_digest();
    match (digest, again) {
        (Some(logged), again) if again != Some(*logged) => Err(corrupt(
            at,
            format!(
                "replaying call {sequence} of procedure {name:?} wrote other rows than when it ran (write-set digest {} against {logged:#010x} logged): the procedure is not deterministic given its parameters, or is not the one that was logged",
                again.map_or("none".into(), |d| format!("{d:#010x}"))
            ),
        )),
        _ => Ok(()),
    }
}

/// Run record `at` again; its error as the replay reports it.
pub(super) fn record(db: &Database, session: &mut Session, at: &At) -> Result<()> {
    let result = match &at.logged {
        Logged::Call { .. } => call(session, at),
        Logged::Catalog(change) => apply_catalog(db, change),
    };
    result.map_err(|e| {
        // A digest mismatch is reported as it is; a full pool or a
        // failing disk is what it is; anything else means the record did
        // not do what it did when it ran.
        if matches!(
            e,
            Error::Corruption { .. } | Error::MemoryFull { .. } | Error::Io { .. } | Error::LogFull { .. }
        ) {
            return e;
        }
        let what = match &at.logged {
            Logged::Call { sequence, name, .. } => format!(
                "replaying call {sequence} of procedure {name:?} failed: {e} (a procedure must be deterministic given its parameters, and be the one that was logged)"
            ),
            Logged::Catalog(change) => format!("replaying catalog change {change:?} failed: {e}"),
        };
        corrupt(at, what)
    })
}

/// Count `at` as replayed.
pub(super) fn count(replayed: &mut Replayed, at: &At) {
    match at.logged {
        Logged::Call { .. } => replayed.calls += 1,
        Logged::Catalog(_) => replayed.catalog_changes += 1,
    }
}

/// Every record in log order on one session, stopping at the first
/// that fails.
pub(super) fn serial(db: &Database, records: &[At]) -> Result<Replayed> {
    let mut replayed = Replayed {
        threads: 1,
        ..Replayed::default()
    };
    let mut session = db.session();
    for at in records {
        count(&mut replayed, at);
        record(db, &mut session, at)?;
    }
    Ok(replayed)
}
