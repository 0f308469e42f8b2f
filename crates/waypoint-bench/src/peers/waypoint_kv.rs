//! waypoint as a [`KvEngine`], through its public API only: a session per
//! client thread, one blocking `Transaction::commit` per transaction (as
//! the peers commit), the workload's tables by number ([`WaypointTx`]).
//!
//! Invariant: at [`Durability::Durable`] the per-worker scheme's commit
//! returns only once the commit's log records (and those it depends on)
//! are synced (DESIGN invariant 2); at [`Durability::Relaxed`] it is the
//! `async` protocol, acknowledged before the log writer writes the
//! records, which a process crash can lose.

use super::{Body, Durability, KvEngine, KvError, KvHandle};
use crate::driver::DriverConfig;
use crate::error::BenchResult;
use crate::kv::{KvTx, WaypointTx};
use crate::workload::is_abort;
use std::path::Path;
use waypoint::{CommitProtocol, Database, Error, Options, Session, Table};

pub struct WaypointKv {
    db: Database,
    tables: Vec<Table>,
    durability: Durability,
    commit: CommitProtocol,
}

impl WaypointKv {
    /// Open (creating) a database in `dir` with `config`'s options; the
    /// commit protocol is `config`'s at `Durable` (it must wait for the
    /// log) and `async` at `Relaxed`.
    pub fn open(
        dir: &Path,
        tables: &[&str],
        durability: Durability,
        config: &DriverConfig,
    ) -> BenchResult<Self> {
        let commit = match durability {
            Durability::Durable => config.commit,
            Durability::Relaxed => CommitProtocol::Async,
        };
        if durability == Durability::Durable && commit == CommitProtocol::Async {
            return Err(crate::BenchError::Config(
                "a durable waypoint run needs a commit protocol that waits for the log, not async"
                    .into(),
            ));
        }
        let config = DriverConfig {
            commit,
            ..config.clone()
        };
        let db = Database::open(
            dir,
            Options {
                create_if_missing: true,
                ..config.engine_options()
            },
        )?;
        let tables = tables
            .iter()
            .map(|t| db.open_or_create_table(t))
            .collect::<Result<_, _>>()?;
        Ok(WaypointKv {
            db,
            tables,
            durability,
            commit,
        })
    }
}

impl KvEngine for WaypointKv {
    fn handle(&self) -> BenchResult<Box<dyn KvHandle + '_>> {
        Ok(Box::new(Handle {
            session: self.db.session(),
            tables: &self.tables,
        }))
    }

    fn durability(&self) -> String {
        match self.durability {
            Durability::Durable => format!(
                "durable: per-worker log, `{}` commits return once the log is synced (fdatasync) up to the commit",
                self.commit.name()
            ),
            Durability::Relaxed => "relaxed: per-worker log, `async` commits return before the log is written; \
                 a process crash or a power loss loses the last ones"
                .into(),
        }
    }

    fn close(self: Box<Self>) -> BenchResult<()> {
        Ok(self.db.close()?)
    }
}

struct Handle<'a> {
    session: Session,
    tables: &'a [Table],
}

fn kv_error(e: Error) -> KvError {
    if is_abort(&e) {
        KvError::Abort(e.to_string())
    } else {
        KvError::Fatal(format!("waypoint: {e}"))
    }
}

/// [`WaypointTx`] with its errors as [`KvError`]s.
struct Tx<'a, 'b, 't>(&'a mut WaypointTx<'b, 't>);

impl KvTx for Tx<'_, '_, '_> {
    type Error = KvError;

    fn get(&mut self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        self.0.get(table, key).map_err(kv_error)
    }

    fn insert(&mut self, table: usize, key: &[u8], value: &[u8]) -> Result<(), KvError> {
        self.0.insert(table, key, value).map_err(kv_error)
    }

    fn update(&mut self, table: usize, key: &[u8], value: &[u8]) -> Result<(), KvError> {
        self.0.update(table, key, value).map_err(kv_error)
    }

    fn scan(
        &mut self,
        table: usize,
        from: &[u8],
        len: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, KvError> {
        self.0.scan(table, from, len).map_err(kv_error)
    }

    fn missing(&self) -> KvError {
        kv_error(self.0.missing())
    }
}

impl KvHandle for Handle<'_> {
    fn transact(&mut self, body: &mut Body<'_>) -> Result<(), KvError> {
        let mut tx = self.session.begin().map_err(kv_error)?;
        body(&mut Tx(&mut WaypointTx {
            tx: &mut tx,
            tables: self.tables,
        }))?;
        tx.commit().map(drop).map_err(kv_error)
    }
}
