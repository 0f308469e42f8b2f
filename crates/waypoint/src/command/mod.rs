//! The `command` scheme: VoltDB's command logging (seed 001 §III).
//! Memory-resident with no steal, like `silor`
//! (`PageWritePolicy::KeepDirtyInMemory`, `MemoryFull` once the pool is
//! full of changes). Writes run only inside stored procedures
//! (`procedure`), serially per partition (`procedure::SerialOrder`), and
//! the log holds only the calls: sequence number, procedure name,
//! encoded parameters (`record`), one `logstore` stream written by its
//! writer thread with group commit (`log`). A call is acknowledged once
//! its record is durable.
//!
//! The base the log replays onto is the data file of the last clean
//! close, as under `silor` (`persist::resident`): a recovery re-executes
//! every generation's calls in log order (`replay`) and leaves the logs
//! and the data file as they are; the next run logs to a new generation.
//! A clean close journals its pages first (`persist::resident::journal`);
//! a whole journal at the next open finishes the close and the logs add
//! nothing.
//!
//! Secondary indexes are maintained by the replayed calls: their key
//! extractors are registered with the procedures (`Procedures::index`)
//! and bound at open, before the replay; `create_index` takes the
//! registered one (an index without one is refused).
//!
//! Not built yet (docs/decisions/030-command-logging.md): snapshots (the
//! log grows until a clean close), executor threads that own their
//! partitions, parallel replay. A single-partition call's rows are
//! checked against the tables' registered partitioning keys
//! (`procedure::partition`).
//!
//! Invariant: after a crash, the recovered state is the state of the
//! calls of a prefix of each generation's log, run again in order, and
//! every acknowledged call is among them.

mod log;
mod options;
mod record;
mod replay;
#[cfg(test)]
mod tests;

pub use options::CommandOptions;

use crate::buffer::{BufferPool, PageWritePolicy};
use crate::db::Database;
use crate::error::{Error, Result};
use crate::ids::{Gsn, LogPos};
use crate::io::Storage;
use crate::logstore::stream::Stream;
use crate::persist::resident::{self, generation_dir, generations, journal};
use crate::persist::{
    OpenContext, Opening, PersistenceStats, Prepared, Scheme, SchemeKind, SessionLog, UncleanMark,
};
use crate::procedure::SerialOrder;
use crate::wal::recovery::RecoveryReport;
use log::{CommandLog, CommandSessionLog};
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The scheme's directory inside the database directory.
pub const COMMAND_DIR: &str = "command";

/// What the `command` scheme did, readable at any time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandStats {
    pub partitions: usize,
    /// Calls and catalog changes logged since the open.
    pub calls_logged: u64,
    pub catalog_changes_logged: u64,
    /// The last sequence number given to a call.
    pub last_sequence: u64,
    /// The log generation being written.
    pub generation: u64,
    /// Recovery at open: time reading the logs, time re-executing them,
    /// the calls and catalog changes replayed, the log bytes read.
    pub log_read: Duration,
    pub replay: Duration,
    pub replayed_calls: u64,
    pub replayed_catalog_changes: u64,
    pub recovered_bytes: u64,
}

impl CommandStats {
    /// Calls re-executed per second of replay.
    pub fn replayed_calls_per_sec(&self) -> f64 {
        let secs = self.replay.as_secs_f64();
        if secs == 0.0 {
            return 0.0;
        }
        self.replayed_calls as f64 / secs
    }
}

/// Check what the database left (reads only) and return the opening.
pub(crate) fn open(ctx: &OpenContext<'_>, options: &CommandOptions) -> Result<Box<dyn Opening>> {
    let dir = ctx.dir.join(COMMAND_DIR);
    let storage = ctx.storage.as_ref();
    let recovering = !ctx.superblock.clean && ctx.superblock.scheme == Some(SchemeKind::Command);
    // A journal by its name is whole: the clean close may have begun
    // writing its pages, so the data file is no longer the base the logs
    // replay onto, and the journal completes it instead.
    let journal = if recovering && storage.exists(&journal::path(&dir)) {
        let page_size = ctx.superblock.page_size as usize;
        Some(journal::read(storage, &dir, page_size)?)
    } else {
        None
    };
    let scanned = if recovering && journal.is_none() {
        replay::scan(storage, &dir, ctx.procedures)?
    } else {
        replay::Scanned::default()
    };
    Ok(Box::new(CommandOpening {
        options: options.clone(),
        dir,
        recovering,
        journal,
        scanned: Some(scanned),
        generation: 0,
    }))
}

struct CommandOpening {
    options: CommandOptions,
    dir: PathBuf,
    /// The last run did not close cleanly.
    recovering: bool,
    /// The pages of an interrupted clean close, to finish it with.
    journal: Option<Vec<(u64, Vec<u8>)>>,
    scanned: Option<replay::Scanned>,
    /// The generation this run logs to (set by `prepare`).
    generation: u64,
}

impl Opening for CommandOpening {
    fn prepare(&mut self, ctx: &OpenContext<'_>) -> Result<Prepared> {
        let storage = ctx.storage.as_ref();
        let found = generations(storage, &self.dir)?;
        if let Some(pages) = &self.journal {
            tracing::info!(
                pages = pages.len(),
                "finishing an interrupted clean close from its journal"
            );
            journal::apply(
                ctx.data_file.as_ref(),
                pages,
                ctx.superblock.page_size as usize,
            )?;
        }
        if self.recovering && self.journal.is_none() {
            replay::sync_generations(storage, &self.dir)?;
        } else {
            // Closed cleanly (or just finished from the journal): nothing
            // logged counts. The logs go first: a crash before the journal
            // is gone applies it again, the same pages.
            for (_, path) in &found {
                resident::remove_synced(storage, path)?;
            }
            resident::remove_synced(storage, &journal::path(&self.dir))?;
        }
        resident::remove_synced(storage, &journal::temp_path(&self.dir))?;
        resident::create_dir(storage, &self.dir)?;
        let newest = found.last().map_or(0, |(g, _)| *g);
        self.generation = newest + 1;
        Ok(Prepared {
            log_required: true,
            page_writes: PageWritePolicy::KeepDirtyInMemory,
            unclean_mark: UncleanMark::AtOpen,
        })
    }

    fn recover(
        mut self: Box<Self>,
        ctx: &OpenContext<'_>,
        pool: &Arc<BufferPool>,
        repaired_torn_pages: usize,
    ) -> Result<Arc<dyn Scheme>> {
        if self.generation == 0 {
            return Err(Error::Internal {
                what: "the command scheme was recovered before it was prepared".into(),
            });
        }
        let scanned = self.scanned.take().unwrap_or_default();
        if let Some(pages) = &self.journal {
            let end = pages.iter().map(|(pid, _)| pid + 1).max().unwrap_or(0);
            pool.ensure_allocated(end);
        }
        let storage = Arc::clone(ctx.storage);
        let stream = Stream::open(
            Arc::clone(&storage),
            generation_dir(&self.dir, self.generation),
            SchemeKind::Command,
            0,
            LogPos::ZERO,
            scanned.last_sequence,
            Vec::new(),
        )?;
        let log = Arc::new(CommandLog::new(
            stream,
            scanned.last_sequence,
            self.options.digests,
        ));
        let report = RecoveryReport {
            partitions: 1,
            segments: scanned.segments,
            records: scanned.records.len() as u64,
            log_bytes: scanned.bytes,
            torn_tails: scanned.torn_tails,
            repaired_torn_pages,
            analysis: scanned.scan_time,
            ..RecoveryReport::default()
        };
        let recovered = self.recovering;
        Ok(Arc::new(CommandScheme {
            pool: Arc::clone(pool),
            storage,
            dir: self.dir.clone(),
            log,
            order: SerialOrder::new(self.options.partitions),
            generation: self.generation,
            floor: ctx.floor,
            to_replay: Mutex::new(recovered.then_some((report, scanned))),
            report: OnceLock::new(),
            recovery: OnceLock::new(),
        }))
    }
}

/// The open `command` scheme.
pub struct CommandScheme {
    /// For the clean close's journal.
    pool: Arc<BufferPool>,
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    log: Arc<CommandLog>,
    order: SerialOrder,
    generation: u64,
    /// The log floor the database was opened with: no page GSN moves
    /// under this scheme, which logs no pages.
    floor: Gsn,
    /// What the open found to re-execute, until `replay_after_open`.
    to_replay: Mutex<Option<(RecoveryReport, replay::Scanned)>>,
    report: OnceLock<RecoveryReport>,
    /// Recovery's part of the stats.
    recovery: OnceLock<CommandStats>,
}

impl CommandScheme {
    /// Acknowledge calls without waiting for their records to be durable:
    /// a broken variant the crash tests must catch (`testing` feature
    /// only).
    #[cfg(feature = "testing")]
    pub fn set_broken_commit_ack_for_tests(&self, broken: bool) {
        self.log.broken_ack.store(broken, Ordering::Relaxed);
    }

    /// Wait until every record appended so far is durable. For tests.
    pub fn wait_all_durable(&self) -> Result<()> {
        self.log.stream.wait_durable(self.log.stream.appended())
    }
}

impl std::fmt::Debug for CommandScheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandScheme")
            .field("partitions", &self.order.partitions())
            .field("generation", &self.generation)
            .finish()
    }
}

impl Scheme for CommandScheme {
    fn kind(&self) -> SchemeKind {
        SchemeKind::Command
    }

    fn session_log(&self, _slot: u16) -> Result<Box<dyn SessionLog>> {
        Ok(Box::new(CommandSessionLog::new(Arc::clone(&self.log))))
    }

    fn check_writable(&self) -> Result<()> {
        self.log.stream.check_healthy()
    }

    fn recovery_report(&self) -> Option<&RecoveryReport> {
        self.report.get()
    }

    fn stop_services(&self) {}

    fn command_order(&self) -> Option<&SerialOrder> {
        Some(&self.order)
    }

    fn replay_after_open(&self, db: &Database) -> Result<()> {
        let Some((report, scanned)) = self.to_replay.lock().take() else {
            return Ok(());
        };
        self.log.replaying.store(true, Ordering::Release);
        let replayed = replay::run(db, &self.log, scanned.records);
        self.log.replaying.store(false, Ordering::Release);
        let replayed = replayed?;
        let _ = self.report.set(RecoveryReport {
            winners: replayed.calls as usize,
            records_redone: replayed.calls + replayed.catalog_changes,
            redo: replayed.time,
            ..report
        });
        let _ = self.recovery.set(CommandStats {
            log_read: scanned.scan_time,
            replay: replayed.time,
            replayed_calls: replayed.calls,
            replayed_catalog_changes: replayed.catalog_changes,
            recovered_bytes: scanned.bytes,
            ..CommandStats::default()
        });
        Ok(())
    }

    fn before_clean_close_writes(&self) -> Result<()> {
        // Every call before the close durable first: the journal holds
        // their effects, and a crash before it is whole replays them.
        self.log.stream.wait_durable(self.log.stream.appended())?;
        journal::write(self.storage.as_ref(), &self.dir, &self.pool).map(|_| ())
    }

    fn seal_for_clean_close(&self) -> Result<Gsn> {
        self.log.stream.shutdown()?;
        Ok(self.floor)
    }

    fn remove_log_after_clean_close(&self) -> Result<()> {
        resident::remove_synced(self.storage.as_ref(), &self.dir)
    }

    fn shutdown(&self) {
        if let Err(e) = self.log.stream.shutdown() {
            tracing::warn!(error = %e, "stopping the command log failed");
        }
    }

    fn stats(&self) -> PersistenceStats {
        let s = self.log.stream.stats();
        let log = crate::wal::WalStats {
            partitions: 1,
            appended_bytes: s.appended_bytes,
            records: s.records,
            syncs: s.syncs,
            disk_bytes: self.log.stream.disk_bytes(),
            ..crate::wal::WalStats::default()
        };
        let recovery = self.recovery.get().cloned().unwrap_or_default();
        PersistenceStats {
            scheme: SchemeKind::Command,
            log,
            command: CommandStats {
                partitions: self.order.partitions(),
                calls_logged: self.log.calls.load(Ordering::Relaxed),
                catalog_changes_logged: self.log.catalog_changes.load(Ordering::Relaxed),
                last_sequence: self.log.last_sequence(),
                generation: self.generation,
                ..recovery
            },
            ..PersistenceStats::default()
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
