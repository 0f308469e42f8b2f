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
pub mod persist;
mod sync;
pub mod txn;
pub mod wal;

pub use buffer::page::DEFAULT_PAGE_SIZE;
pub use buffer::PoolStats;
pub use catalog::{prefix_successor, Index, KeyExtractor, Table};
pub use checkpoint::{CheckpointMode, CheckpointStats};
pub use db::{Database, Options, Persistence, Stats, DATA_FILE};
pub use error::{Error, IoOp, Result};
pub use io::{OpenMode, RealStorage, Storage, StorageFile, IO_ALIGN};
pub use persist::{PersistenceStats, SchemeKind};
pub use txn::{CommitInfo, IndexEntry, PendingCommit, Session, Transaction};
pub use wal::recovery::RecoveryReport;
pub use wal::{CommitProtocol, PartitionLogStats, PerWorkerOptions, WalStats};

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctest;
