//! waypoint: an embeddable transactional storage engine built around
//! fast, bounded and correct logging, checkpointing and recovery.
//!
//! See `ARCHITECTURE.md` for the map of modules and the path of a write.

pub mod btree;
pub mod buffer;
pub mod catalog;
pub mod checkpoint;
pub mod db;
pub mod error;
pub mod inspect;
pub mod io;
pub mod logstore;
pub mod persist;
mod sync;
pub mod txn;
pub mod wal;

pub use catalog::{prefix_successor, Index, KeyExtractor, Table};
pub use checkpoint::CheckpointMode;
pub use db::{Database, Options, Persistence, Stats};
pub use error::{Error, IoOp, Result};
pub use persist::{PersistenceStats, SchemeKind};
pub use txn::{CommitInfo, IndexEntry, PendingCommit, Session, Transaction};
pub use wal::{CommitProtocol, PerWorkerOptions};

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctest;
