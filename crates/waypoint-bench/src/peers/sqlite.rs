//! SQLite as a [`KvEngine`] (feature `sqlite`: `rusqlite` with its
//! bundled SQLite): one database file in WAL mode, a table
//! `(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID` per workload table, a
//! connection per client thread, `BEGIN` ... `COMMIT` per transaction.
//!
//! Invariant: at [`Durability::Durable`] `synchronous=FULL`, so `COMMIT`
//! returns after the WAL is synced; at [`Durability::Relaxed`]
//! `synchronous=NORMAL`, so the WAL is synced only at checkpoints and a
//! power loss can lose the last commits (a process crash cannot).
//! SQLite allows one writer at a time: a transaction that cannot take
//! the write lock in time (`SQLITE_BUSY`) is rolled back as an abort.

use super::{Body, Durability, KvEngine, KvError, KvHandle};
use crate::driver::DriverConfig;
use crate::error::{BenchError, BenchResult};
use crate::kv::KvTx;
use rusqlite::{params, Connection, ErrorCode, OptionalExtension};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct SqliteKv {
    file: PathBuf,
    tables: Vec<String>,
    durability: Durability,
    /// SQLite's page cache per connection, in KiB.
    cache_kib: usize,
}

/// How long a connection waits for the write lock before `SQLITE_BUSY`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

fn fatal(what: &str, e: rusqlite::Error) -> KvError {
    KvError::Fatal(format!("sqlite: {what}: {e}"))
}

/// Busy and locked databases are aborts; a constraint failure is the
/// insert of a row that exists (an abort, as waypoint's `KeyExists`).
fn kv_error(what: &str, e: rusqlite::Error) -> KvError {
    match e.sqlite_error_code() {
        Some(
            ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked | ErrorCode::ConstraintViolation,
        ) => KvError::Abort(format!("sqlite: {what}: {e}")),
        _ => fatal(what, e),
    }
}

impl SqliteKv {
    pub fn open(
        dir: &Path,
        tables: &[&str],
        durability: Durability,
        config: &DriverConfig,
    ) -> BenchResult<Self> {
        let kv = SqliteKv {
            file: dir.join("peer.sqlite"),
            tables: tables.iter().map(|t| t.to_string()).collect(),
            durability,
            // The same memory as waypoint's buffer pool, shared out over
            // the connections.
            cache_kib: (config.buffer_bytes / 1024 / config.workers.max(1)).max(2048),
        };
        let c = kv.connect()?;
        for t in &kv.tables {
            c.execute_batch(&format!(
                "CREATE TABLE IF NOT EXISTS \"{t}\" (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID"
            ))
            .map_err(|e| BenchError::Peer(format!("sqlite: creating table {t}: {e}")))?;
        }
        Ok(kv)
    }

    fn connect(&self) -> BenchResult<Connection> {
        let err = |e: rusqlite::Error| {
            BenchError::Peer(format!("sqlite: opening {}: {e}", self.file.display()))
        };
        let c = Connection::open(&self.file).map_err(err)?;
        c.busy_timeout(BUSY_TIMEOUT).map_err(err)?;
        let mode: String = c
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(BenchError::Peer(format!(
                "sqlite: {} refused WAL mode (journal mode {mode})",
                self.file.display()
            )));
        }
        let sync = match self.durability {
            Durability::Durable => "FULL",
            Durability::Relaxed => "NORMAL",
        };
        c.execute_batch(&format!(
            "PRAGMA synchronous={sync}; PRAGMA cache_size=-{}",
            self.cache_kib
        ))
        .map_err(err)?;
        Ok(c)
    }
}

impl KvEngine for SqliteKv {
    fn handle(&self) -> BenchResult<Box<dyn KvHandle + '_>> {
        Ok(Box::new(Handle {
            conn: self.connect()?,
            tables: &self.tables,
        }))
    }

    fn durability(&self) -> String {
        match self.durability {
            Durability::Durable => format!(
                "durable: SQLite {} in WAL mode, synchronous=FULL (the WAL is synced at every COMMIT)",
                rusqlite::version()
            ),
            Durability::Relaxed => format!(
                "relaxed: SQLite {} in WAL mode, synchronous=NORMAL (the WAL is synced at checkpoints; \
                 a power loss loses the last commits, a process crash does not)",
                rusqlite::version()
            ),
        }
    }

    fn close(self: Box<Self>) -> BenchResult<()> {
        // Every connection is closed with its handle; a last one folds the
        // WAL back into the database file.
        let c = self.connect()?;
        c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .map_err(|e| BenchError::Peer(format!("sqlite: closing: {e}")))?;
        c.close()
            .map_err(|(_, e)| BenchError::Peer(format!("sqlite: closing: {e}")))
    }
}

struct Handle<'a> {
    conn: Connection,
    tables: &'a [String],
}

struct Tx<'a> {
    conn: &'a Connection,
    tables: &'a [String],
}

impl KvTx for Tx<'_> {
    type Error = KvError;

    fn get(&mut self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        let sql = format!("SELECT v FROM \"{}\" WHERE k = ?1", self.tables[table]);
        let mut s = self
            .conn
            .prepare_cached(&sql)
            .map_err(|e| fatal("prepare", e))?;
        s.query_row(params![key], |r| r.get(0))
            .optional()
            .map_err(|e| kv_error("get", e))
    }

    fn insert(&mut self, table: usize, key: &[u8], value: &[u8]) -> Result<(), KvError> {
        let sql = format!(
            "INSERT INTO \"{}\" (k, v) VALUES (?1, ?2)",
            self.tables[table]
        );
        let mut s = self
            .conn
            .prepare_cached(&sql)
            .map_err(|e| fatal("prepare", e))?;
        s.execute(params![key, value])
            .map(drop)
            .map_err(|e| kv_error("insert", e))
    }

    fn update(&mut self, table: usize, key: &[u8], value: &[u8]) -> Result<(), KvError> {
        let sql = format!("UPDATE \"{}\" SET v = ?2 WHERE k = ?1", self.tables[table]);
        let mut s = self
            .conn
            .prepare_cached(&sql)
            .map_err(|e| fatal("prepare", e))?;
        match s.execute(params![key, value]) {
            Ok(0) => Err(self.missing()),
            Ok(_) => Ok(()),
            Err(e) => Err(kv_error("update", e)),
        }
    }

    fn scan(
        &mut self,
        table: usize,
        from: &[u8],
        len: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, KvError> {
        let sql = format!(
            "SELECT k, v FROM \"{}\" WHERE k >= ?1 ORDER BY k LIMIT ?2",
            self.tables[table]
        );
        let mut s = self
            .conn
            .prepare_cached(&sql)
            .map_err(|e| fatal("prepare", e))?;
        let limit = i64::try_from(len).unwrap_or(i64::MAX);
        let rows = s
            .query_map(params![from, limit], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| kv_error("scan", e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| kv_error("scan", e))
    }

    fn missing(&self) -> KvError {
        KvError::Abort("sqlite: a row the transaction needs is missing".into())
    }
}

impl KvHandle for Handle<'_> {
    fn transact(&mut self, body: &mut Body<'_>) -> Result<(), KvError> {
        // A deferred BEGIN: readers never wait for the writer (WAL mode);
        // a reader that then writes while another transaction writes gets
        // SQLITE_BUSY at once (SQLite's deadlock rule), an abort.
        self.conn
            .execute_batch("BEGIN")
            .map_err(|e| kv_error("begin", e))?;
        let r = body(&mut Tx {
            conn: &self.conn,
            tables: self.tables,
        })
        .and_then(|()| {
            self.conn
                .execute_batch("COMMIT")
                .map_err(|e| kv_error("commit", e))
        });
        if r.is_err() && !self.conn.is_autocommit() {
            self.conn
                .execute_batch("ROLLBACK")
                .map_err(|e| fatal("rollback", e))?;
        }
        r
    }
}
