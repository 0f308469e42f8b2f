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
//! every generation's calls (`replay`) and leaves the logs
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
//! Transaction-consistent copy-on-write snapshots (`snapshot`, seed 001
//! §II-C1) bound the log: once one is installed, the log before its point
//! is deleted, and a recovery loads it into empty trees, rebuilds the
//! indexes and re-executes only the log from its point on.
//!
//! Recovery re-executes each partition's calls on a thread of its own,
//! meeting at every barrier (seed 001 §III-B; `replay`): a call's record
//! says whether it must run alone (`record`), and each generation records
//! the partition count its calls ran under (`generation`). A
//! single-partition call's rows are checked against the tables'
//! registered partitioning keys (`procedure::partition`).
//!
//! With `CommandOptions::executors` each partition's calls run on an
//! executor thread of its own (`procedure::executor`), started with the
//! scheme's services and stopped first at the close.
//!
//! Invariant: after a crash, the recovered state is the state of the
//! installed snapshot (or the last clean close) plus the calls of a
//! prefix of each generation's log from its point on, run again in
//! order, and every acknowledged call is among them.

mod generation;
mod log;
mod options;
mod record;
mod replay;
pub mod snapshot;
#[cfg(test)]
mod tests;

pub use options::{CommandOptions, CommandSnapshot};
/// Broken variants of parallel replay, for the tests that must catch
/// them (`testing` feature only; set on the thread that opens).
#[cfg(feature = "testing")]
pub use replay::broken::{
    set_ignore_barriers as set_broken_replay_barriers_for_tests,
    set_partitions as set_broken_replay_partitions_for_tests,
};
pub use snapshot::{SnapshotStage, StageHook as SnapshotHook};

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
use crate::procedure::executor::Executors;
use crate::procedure::SerialOrder;
use crate::txn::Session;
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
    /// Threads the replay ran on (1: serially; up to the replayed
    /// generations' partition count and `Options::recovery_threads`), and
    /// the barriers they met (records run alone: multi-partition calls,
    /// catalog changes, calls that wrote a table without a partitioning
    /// key).
    pub replay_threads: usize,
    pub replay_barriers: u64,
    pub recovered_bytes: u64,
    /// Recovery at open from a snapshot: time loading it (and rebuilding
    /// the indexes from the loaded tables), its rows and bytes, the call
    /// its point follows, and the log records before the point left out
    /// of the replay.
    pub snapshot_load: Duration,
    pub snapshot_load_rows: u64,
    pub snapshot_load_bytes: u64,
    pub snapshot_base_sequence: u64,
    pub records_below_snapshot: u64,
    /// Snapshots since the open: started, installed, failed, abandoned (a
    /// table dropped while it was written); bytes written; the last one's
    /// bytes, rows, point (sequence number) and pre-images kept; log
    /// bytes deleted after installs.
    pub snapshots_started: u64,
    pub snapshots_installed: u64,
    pub snapshots_failed: u64,
    pub snapshots_abandoned: u64,
    pub snapshot_bytes: u64,
    pub last_snapshot_bytes: u64,
    pub last_snapshot_rows: u64,
    pub last_snapshot_sequence: u64,
    pub last_snapshot_pre_images: u64,
    pub log_bytes_deleted: u64,
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
    let found = if recovering && journal.is_none() {
        snapshot::load::find(storage, &dir)?
    } else {
        None
    };
    let scanned = if recovering && journal.is_none() {
        replay::scan(storage, &dir, ctx.procedures, found.as_ref().map(|f| &f.point))?
    } else {
        replay::Scanned::default()
    };
    Ok(Box::new(CommandOpening {
        options: options.clone(),
        dir,
        recovering,
        journal,
        found,
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
    /// The installed snapshot, the base of the replay.
    found: Option<snapshot::load::Found>,
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
            // Snapshots never installed, or replaced by one whose pruning
            // a crash interrupted.
            let keep = self.found.as_ref().map(|f| f.point.id);
            snapshot::remove_other_snapshots(storage, &self.dir, keep)?;
            if let Some(f) = &self.found {
                // Every TID in the snapshot is of an epoch up to this.
                ctx.epoch.raise_to(f.point.epoch + 1);
            }
        } else {
            // Closed cleanly (or just finished from the journal): nothing
            // logged counts. The logs go first: a crash before the journal
            // is gone applies it again, the same pages. The snapshot meta
            // file goes before the snapshots it names.
            for (_, path) in &found {
                resident::remove_synced(storage, path)?;
            }
            resident::remove_synced(storage, &self.dir.join(snapshot::META_FILE))?;
            resident::remove_synced(storage, &self.dir.join(snapshot::SNAPSHOTS_DIR))?;
            resident::remove_synced(storage, &journal::path(&self.dir))?;
        }
        resident::remove_synced(storage, &journal::temp_path(&self.dir))?;
        resident::remove_synced(storage, &self.dir.join(snapshot::META_TEMP))?;
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
        // Before the generation's first segment: its calls are routed by
        // this count when they are replayed.
        generation::write(
            storage.as_ref(),
            &generation_dir(&self.dir, self.generation),
            self.options.partitions,
        )?;
        let stream = Stream::open(
            Arc::clone(&storage),
            generation_dir(&self.dir, self.generation),
            SchemeKind::Command,
            0,
            LogPos::ZERO,
            scanned.last_sequence,
            Vec::new(),
        )?;
        // Under a log limit, segments small enough that pruning (whole
        // segments, never the newest) keeps the log near it.
        stream.set_sync_interval(self.options.sync_interval);
        if let CommandSnapshot::LogLimit(limit) = self.options.snapshot {
            stream.set_segment_size((limit / 4).clamp(16 << 10, 16 << 20));
        }
        let log = Arc::new(CommandLog::new(
            stream,
            scanned.last_sequence,
            self.options.digests,
        ));
        let loaded = match &self.found {
            Some(found) => snapshot::load::load(ctx.storage, pool, found, ctx.recovery_threads)?,
            None => snapshot::load::Loaded::default(),
        };
        let order = Arc::new(SerialOrder::new(self.options.partitions));
        let shadow = Arc::new(snapshot::Shadow::default());
        let last_id = snapshot::snapshots(storage.as_ref(), &self.dir)?
            .last()
            .map_or(0, |(id, _)| *id);
        let snapshotter = snapshot::Snapshotter::new(
            Arc::clone(&storage),
            self.dir.clone(),
            Arc::clone(&log),
            Arc::clone(&order),
            Arc::clone(&shadow),
            self.generation,
            self.options.snapshot,
            last_id,
        );
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
        let base = CommandStats {
            snapshot_load: loaded.time,
            snapshot_load_rows: loaded.rows,
            snapshot_load_bytes: loaded.bytes,
            snapshot_base_sequence: self.found.as_ref().map_or(0, |f| f.point.sequence),
            records_below_snapshot: scanned.skipped,
            ..CommandStats::default()
        };
        Ok(Arc::new(CommandScheme {
            pool: Arc::clone(pool),
            storage,
            dir: self.dir.clone(),
            log,
            order,
            executors: self.options.executors,
            shadow,
            snapshotter,
            stale_indexes: loaded.stale,
            generation: self.generation,
            floor: ctx.floor,
            replay_threads: ctx.recovery_threads,
            to_replay: Mutex::new(recovered.then_some((report, scanned, base))),
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
    order: Arc<SerialOrder>,
    /// Start executor threads for the order (`CommandOptions::executors`).
    executors: bool,
    shadow: Arc<snapshot::Shadow>,
    snapshotter: Arc<snapshot::Snapshotter>,
    /// Indexes the loaded snapshot left empty: rebuilt before the replay.
    stale_indexes: Vec<String>,
    generation: u64,
    /// The log floor the database was opened with: no page GSN moves
    /// under this scheme, which logs no pages.
    floor: Gsn,
    /// The most threads the replay runs on (`Options::recovery_threads`).
    replay_threads: usize,
    /// What the open found to re-execute, until `replay_after_open`.
    to_replay: Mutex<Option<(RecoveryReport, replay::Scanned, CommandStats)>>,
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

    /// Register no pre-images while a snapshot is written, so the writer
    /// sees values of calls after its point: a broken variant the
    /// snapshot tests must catch (`testing` feature only).
    #[cfg(feature = "testing")]
    pub fn set_broken_snapshot_shadow_for_tests(&self, broken: bool) {
        self.shadow.broken.store(broken, Ordering::Relaxed);
    }

    /// Close a table's snapshot file beyond `bytes` instead of
    /// `snapshot::PART_BYTES`, so a test writes several parts of a small
    /// table (`testing` feature only).
    #[cfg(feature = "testing")]
    pub fn set_snapshot_part_bytes_for_tests(&self, bytes: u64) {
        self.snapshotter.part_bytes.store(bytes.max(1), Ordering::Relaxed);
    }

    /// Take, install and prune a snapshot now, on the caller's thread
    /// (waiting for one in progress); the sequence number of the call its
    /// point follows, or `None` if it was given up (closing, or a table
    /// dropped while it was written).
    pub fn snapshot_now(&self) -> Result<Option<u64>> {
        Ok(self.snapshotter.snapshot_now()?.map(|p| p.sequence))
    }

    /// Call `hook` at each stage of every snapshot (on the snapshotting
    /// thread); `None` removes it. For tests that crash at each stage.
    pub fn set_snapshot_hook(&self, hook: Option<snapshot::StageHook>) {
        *self.snapshotter.hook.lock() = hook;
    }

    /// Roll the command log over to a new segment every `bytes` (tests
    /// that show pruning with small logs).
    pub fn set_log_segment_bytes_for_tests(&self, bytes: u64) {
        self.log.stream.set_segment_size(bytes);
    }

    /// Command-log bytes on disk (the current generation's files).
    pub fn log_disk_bytes(&self) -> u64 {
        self.log.stream.disk_bytes()
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
        Ok(Box::new(CommandSessionLog::new(
            Arc::clone(&self.log),
            Arc::clone(&self.shadow),
        )))
    }

    fn check_writable(&self) -> Result<()> {
        self.log.stream.check_healthy()
    }

    fn recovery_report(&self) -> Option<&RecoveryReport> {
        self.report.get()
    }

    fn start_services(&self, db: &Database) -> Result<()> {
        if self.executors {
            let sessions = (0..self.order.partitions()).map(|_| db.session()).collect();
            self.order
                .set_executors(Executors::start(sessions, Session::run_on_executor)?);
        }
        self.snapshotter.start(db.shared_weak())
    }

    fn stop_services(&self) {
        // Calls first: the snapshotter may be waiting for a partition.
        self.order.stop_executors();
        self.snapshotter.stop();
    }

    fn indexes_to_rebuild(&self) -> &[String] {
        &self.stale_indexes
    }

    fn command_order(&self) -> Option<&SerialOrder> {
        Some(&self.order)
    }

    fn replay_after_open(&self, db: &Database) -> Result<()> {
        let Some((report, scanned, mut base)) = self.to_replay.lock().take() else {
            return Ok(());
        };
        // The snapshot holds no index entries: rebuilt from the tables
        // before the calls that read them run again (counted as loading).
        let rebuild = std::time::Instant::now();
        let shared = db.shared_weak().upgrade().ok_or(Error::Closed)?;
        for name in &self.stale_indexes {
            let extractor = shared.procedures.extractor(name).cloned().ok_or_else(|| {
                Error::Unsupported {
                    what: format!(
                        "index {name:?} of the snapshot has no key extractor registered with the procedures; the command scheme rebuilds it from its table at recovery"
                    ),
                }
            })?;
            db.open_index(name, extractor)?;
        }
        drop(shared);
        base.snapshot_load += rebuild.elapsed();
        self.log.replaying.store(true, Ordering::Release);
        let replayed = replay::run(db, scanned.records, scanned.partitions, self.replay_threads);
        self.log.replaying.store(false, Ordering::Release);
        let replayed = replayed?;
        tracing::info!(
            calls = replayed.calls,
            catalog_changes = replayed.catalog_changes,
            threads = replayed.threads,
            barriers = replayed.barriers,
            ms = replayed.time.as_secs_f64() * 1e3,
            "command log replayed"
        );
        let _ = self.report.set(RecoveryReport {
            winners: replayed.calls as usize,
            records_redone: replayed.calls + replayed.catalog_changes,
            redo: replayed.time,
            image_load: base.snapshot_load,
            image_bytes: base.snapshot_load_bytes,
            ..report
        });
        let _ = self.recovery.set(CommandStats {
            log_read: scanned.scan_time,
            replay: replayed.time,
            replayed_calls: replayed.calls,
            replayed_catalog_changes: replayed.catalog_changes,
            replay_threads: replayed.threads,
            replay_barriers: replayed.barriers,
            recovered_bytes: scanned.bytes,
            ..base
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
        self.snapshotter.stop();
        self.log.stream.shutdown()?;
        Ok(self.floor)
    }

    fn remove_log_after_clean_close(&self) -> Result<()> {
        resident::remove_synced(self.storage.as_ref(), &self.dir)
    }

    fn shutdown(&self) {
        self.snapshotter.stop();
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
        let c = self.snapshotter.counters.lock().clone();
        PersistenceStats {
            scheme: SchemeKind::Command,
            log,
            command: CommandStats {
                partitions: self.order.partitions(),
                calls_logged: self.log.calls.load(Ordering::Relaxed),
                catalog_changes_logged: self.log.catalog_changes.load(Ordering::Relaxed),
                last_sequence: self.log.last_sequence(),
                generation: self.generation,
                snapshots_started: c.started,
                snapshots_installed: c.installed,
                snapshots_failed: c.failed,
                snapshots_abandoned: c.abandoned,
                snapshot_bytes: c.bytes,
                last_snapshot_bytes: c.last_bytes,
                last_snapshot_rows: c.last_rows,
                last_snapshot_sequence: c.last_sequence,
                last_snapshot_pre_images: c.last_pre_images,
                log_bytes_deleted: c.log_bytes_deleted,
                ..recovery
            },
            ..PersistenceStats::default()
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
