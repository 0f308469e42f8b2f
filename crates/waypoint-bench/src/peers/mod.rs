//! The stores a user would otherwise pick, run on the same workload code
//! as waypoint for `waypoint compare peers` (issue 31): a small
//! storage-engine trait ([`KvEngine`], a per-thread [`KvHandle`] whose
//! transactions run the workloads' [`KvTx`] bodies), implemented for
//! waypoint through its public API ([`waypoint_kv`]), SQLite (feature
//! `sqlite`, [`sqlite`]) and RocksDB (feature `rocksdb`, [`rocks`]);
//! [`drive`] runs YCSB and TPC-B through it with the driver's counters
//! and per-second sampling; [`external`] starts PostgreSQL and Redis
//! servers where they are installed and runs `pgbench` and
//! `redis-benchmark` against them.
//!
//! Invariant: every engine states the durability it gave
//! ([`KvEngine::durability`]), and a run counts a transaction only once
//! its commit returned, which at [`Durability::Durable`] means after the
//! engine synced it to its log (`fdatasync`/`fsync`); each run ends with
//! the workload's own invariant check on the engine's rows.

pub mod drive;
pub mod external;
#[cfg(feature = "rocksdb")]
pub mod rocks;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod waypoint_kv;

use crate::driver::DriverConfig;
use crate::error::{BenchError, BenchResult};
use crate::kv::KvTx;
use serde::Serialize;
use std::path::Path;

/// How a peer's transaction failed.
#[derive(Debug, Clone)]
pub enum KvError {
    /// A conflict, a lock wait that gave up, a busy database, a missing
    /// row the transaction needed: rolled back and counted as an abort;
    /// the run goes on.
    Abort(String),
    /// Anything else: the run stops with this error.
    Fatal(String),
}

impl From<KvError> for BenchError {
    fn from(e: KvError) -> Self {
        match e {
            KvError::Abort(m) | KvError::Fatal(m) => BenchError::Peer(m),
        }
    }
}

/// A transaction on a peer, as the workloads' bodies see it.
pub type PeerTx<'a> = dyn KvTx<Error = KvError> + 'a;

/// A transaction body: the workload's operations, not the commit.
pub type Body<'b> = dyn FnMut(&mut PeerTx<'_>) -> Result<(), KvError> + 'b;

/// One client thread's connection to an engine.
pub trait KvHandle {
    /// Begin a transaction, run `body` in it, and commit it (at the
    /// engine's durability); roll it back if `body` or the commit fails.
    fn transact(&mut self, body: &mut Body<'_>) -> Result<(), KvError>;
}

/// An engine open on a private directory with a workload's tables.
pub trait KvEngine: Send + Sync {
    /// A connection for one client thread.
    fn handle(&self) -> BenchResult<Box<dyn KvHandle + '_>>;
    /// What a commit that returned survives, in one line
    /// ("durable: ... synced at every commit").
    fn durability(&self) -> String;
    /// Close cleanly.
    fn close(self: Box<Self>) -> BenchResult<()>;
}

/// The in-process engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PeerKind {
    Waypoint,
    Sqlite,
    Rocksdb,
}

impl PeerKind {
    pub const ALL: [PeerKind; 3] = [PeerKind::Waypoint, PeerKind::Sqlite, PeerKind::Rocksdb];

    pub fn name(self) -> &'static str {
        match self {
            PeerKind::Waypoint => "waypoint",
            PeerKind::Sqlite => "sqlite",
            PeerKind::Rocksdb => "rocksdb",
        }
    }

    /// Whether this binary was built with the engine; the error says
    /// which cargo feature brings it.
    pub fn built(self) -> Result<(), String> {
        let (built, feature) = match self {
            PeerKind::Waypoint => (true, ""),
            PeerKind::Sqlite => (cfg!(feature = "sqlite"), "sqlite"),
            PeerKind::Rocksdb => (cfg!(feature = "rocksdb"), "rocksdb"),
        };
        if built {
            Ok(())
        } else {
            Err(format!(
                "{}: not built into this binary (build with `--features {feature}`: see the README)",
                self.name()
            ))
        }
    }
}

/// A peer of a `compare` run: an engine in this process, or a server
/// run by its own benchmark program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Peer {
    Engine(PeerKind),
    Server(external::External),
}

impl Peer {
    pub fn name(self) -> &'static str {
        match self {
            Peer::Engine(kind) => kind.name(),
            Peer::Server(server) => server.name(),
        }
    }
}

/// What a run's commits survive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// A returned commit survives power loss: synced to the log.
    Durable,
    /// A returned commit may be lost in a power loss (and, for some
    /// engines, a process crash): the engine's unsynced mode.
    Relaxed,
}

impl Durability {
    pub fn name(self) -> &'static str {
        match self {
            Durability::Durable => "durable",
            Durability::Relaxed => "relaxed",
        }
    }
}

/// Open `kind` on the directory `dir` (created; empty) with `tables`.
/// `config` gives waypoint its options (scheme, commit protocol, buffer)
/// and every engine its worker count and buffer size.
pub fn open(
    kind: PeerKind,
    durability: Durability,
    dir: &Path,
    tables: &[&str],
    config: &DriverConfig,
) -> BenchResult<Box<dyn KvEngine>> {
    kind.built().map_err(BenchError::Peer)?;
    std::fs::create_dir_all(dir).map_err(|e| BenchError::io(dir, e))?;
    match kind {
        PeerKind::Waypoint => Ok(Box::new(waypoint_kv::WaypointKv::open(
            dir, tables, durability, config,
        )?)),
        #[cfg(feature = "sqlite")]
        PeerKind::Sqlite => Ok(Box::new(sqlite::SqliteKv::open(
            dir, tables, durability, config,
        )?)),
        #[cfg(feature = "rocksdb")]
        PeerKind::Rocksdb => Ok(Box::new(rocks::RocksKv::open(
            dir, tables, durability, config,
        )?)),
        #[allow(unreachable_patterns)]
        _ => unreachable!("built() refused the engines this binary lacks"),
    }
}

#[cfg(test)]
mod tests;
