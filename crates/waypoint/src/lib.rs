//! waypoint: an embeddable transactional storage engine built around
//! fast, bounded and correct logging, checkpointing and recovery.
//!
//! See `ARCHITECTURE.md` for the map of modules and the path of a write.
//!
//! # The public API
//!
//! Everything an embedder uses is re-exported here, at the crate root:
//! [`Database`] and its [`Options`] (with the [`Persistence`] scheme and
//! its [`PerWorkerOptions`], and the stored [`Procedures`] that
//! `Session::call` runs), [`Session`], [`Transaction`] and
//! [`PendingCommit`], [`Table`] and [`Index`], [`Error`], [`Stats`] with
//! the counters it carries, the [`RecoveryReport`], the engine's numbers
//! as types ([`Tid`], a commit's, in [`CommitInfo`]; [`Gsn`] and
//! [`LogPos`], in the statistics and errors), and the [`Storage`] trait
//! with [`RealStorage`] for an embedder that brings its own file system.
//! The modules themselves are private: their layout is the engine's to
//! change.
//!
//! # Features
//!
//! - `internals`: makes the engine's modules public (`waypoint::wal`,
//!   `waypoint::buffer`, ...) and adds `waypoint::inspect` and the
//!   simulated disk `waypoint::io::SimStorage`. For the project's own
//!   tools: the fuzz targets, `waypoint inspect`, the crash simulator
//!   (`waypoint-sim`) and white-box tests. Nothing behind it is a stable
//!   API.
//! - `testing` (implies `internals`): switches that break the engine on
//!   purpose, so that the crash tests and the simulator can show they
//!   catch the bug (`Wal::set_broken_rfa_for_tests`). Without it the
//!   commit path has no such check at all; never enable it in a build
//!   that is measured or shipped.

// Without `internals` the items only the project's tools use (decoders,
// white-box accessors, the re-exports of the module files) are unused in
// the crate. The build with the feature, which clippy checks, still
// reports whatever is unused there too.
#![cfg_attr(not(feature = "internals"), allow(dead_code, unused_imports))]
// A type the public API hands out must be nameable by the embedder, so a
// public signature that leaks an internal type fails this build.
#![cfg_attr(not(feature = "internals"), deny(unnameable_types))]

/// Declares the engine's modules: public with the `internals` feature,
/// private without it.
macro_rules! engine_modules {
    ($($name:ident;)*) => {$(
        #[cfg(feature = "internals")]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        mod $name;
    )*};
}

engine_modules! {
    btree;
    buffer;
    catalog;
    central;
    checkpoint;
    command;
    db;
    error;
    ids;
    io;
    logstore;
    persist;
    procedure;
    silor;
    txn;
    wal;
}
#[cfg(feature = "internals")]
pub mod inspect;
mod parallel;
mod sync;

pub use buffer::page::DEFAULT_PAGE_SIZE;
pub use buffer::{PoolStats, TreeContention};
pub use catalog::{prefix_successor, Index, KeyExtractor, Table};
pub use central::{CentralOptions, ConsolidationStats, LatchStats};
pub use checkpoint::{CheckpointMode, CheckpointStats};
pub use command::{CommandOptions, CommandSnapshot, CommandStats, SnapshotHook, SnapshotStage};
pub use db::{Database, Options, Persistence, Stats, DATA_FILE};
pub use error::{Error, IoOp, Result};
pub use ids::{Gsn, LogPos, Tid};
pub use io::{OpenMode, RealStorage, Storage, StorageFile, IO_ALIGN};
pub use persist::{PersistenceStats, SchemeKind};
pub use procedure::{
    encode_params, Partition, PartitionKey, PendingCall, Procedures, EXECUTOR_QUEUE_LIMIT,
};
pub use silor::{LoggerStats, SilorCheckpoint, SilorOptions, SilorStats};
pub use txn::{CommitInfo, IndexEntry, PendingCommit, Session, Transaction};
pub use wal::recovery::RecoveryReport;
pub use wal::{CommitProtocol, PartitionLogStats, PerWorkerOptions, WalStats};

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctest;
