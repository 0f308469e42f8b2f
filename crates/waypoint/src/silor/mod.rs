//! The `silor` scheme: SiloR (seed 002 §4), and seed 000 §4's
//! "SiloR-style" baseline. Memory-resident with no steal: no dirty page is
//! written to the data file while the database runs
//! (`PageWritePolicy::KeepDirtyInMemory`: once the pool is full of
//! changes, writes fail with `MemoryFull` and reads go on). What is
//! durable is the value log, written by logger threads (`loggers`, one
//! `logstore::stream` each, entries in `entry`), and the pepoch file
//! (`pepoch`): a commit is acknowledged once the persistent epoch covers
//! its epoch (`session`).
//!
//! The base the logs replay onto is the installed checkpoint
//! (`checkpoint`: fuzzy, parallel, never blocking workers; installed by
//! one write of the pepoch file once pepoch ≥ its eh, after which log
//! segments older than its el are pruned), or, before the first one, the
//! data file as the last clean close left it, which stays untouched until
//! the next clean close. A recovery loads the checkpoint, replays the
//! logs into memory (`recovery`) and leaves them as they are: the next
//! run writes a new *generation* of log files (`silor/gNNNNNNNN/lL/`),
//! and the pepoch file keeps each older generation's bound, so the
//! entries a crash left beyond one generation's pepoch never count,
//! whatever later epochs reach (the next installed checkpoint forgets the
//! older generations). The epoch clock restarts above every epoch in the
//! logs and the checkpoint, so new TIDs exceed every logged one (largest
//! TID wins at the next replay).
//!
//! Catalog changes are logged as entries of their own, with their ids
//! (replayed in log order before the values); a commit's secondary-index
//! entries are logged with its writes (recovery cannot run the
//! extractors). An index created since the last clean close is rebuilt
//! from its table when its extractor is bound (`Database::open_index`):
//! its first entries, from `create_index`'s backfill, are not logged. A clean close first records pepoch with a
//! closing flag, then writes every page, the superblock, and removes the
//! logs; its pages go to a journal first (`journal`), so a crash inside
//! its page writes finishes the close at the next open
//! (docs/decisions/026-silor.md, 029-silor-checkpoints.md).
//!
//! Invariant: after a crash, the recovered state holds exactly the
//! commits of epochs at or below their generation's pepoch, each whole,
//! and every acknowledged commit is among them.

pub mod checkpoint;
pub(crate) mod entry;
mod loggers;
mod options;
mod pepoch;
mod recovery;
mod session;
#[cfg(test)]
mod tests;

pub use checkpoint::{CheckpointStage, LOAD_PARTS};
pub use options::{SilorCheckpoint, SilorOptions};

use crate::buffer::{BufferPool, PageWritePolicy};
use crate::error::{Error, Result};
use crate::ids::{Gsn, LogPos};
use crate::logstore::stream::Stream;
use crate::persist::resident::{create_dir, journal, remove_synced};
use crate::persist::{
    OpenContext, Opening, PersistenceStats, Prepared, Scheme, SchemeKind, SessionLog, UncleanMark,
};
use crate::wal::recovery::RecoveryReport;
use checkpoint::Checkpointer;
use loggers::{Logger, Loggers};
use pepoch::PepochState;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The scheme's directory inside the database directory.
pub const SILOR_DIR: &str = "silor";

/// One logger's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoggerStats {
    pub appended_bytes: u64,
    pub durable_bytes: u64,
    pub entries: u64,
    pub syncs: u64,
    pub disk_bytes: u64,
}

/// What the `silor` scheme did, readable at any time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SilorStats {
    /// The global epoch now and the persistent epoch; their difference is
    /// how far acknowledgement lags behind.
    pub epoch: u64,
    pub pepoch: u64,
    pub pepoch_lag: u64,
    /// Times the pepoch file was written.
    pub pepoch_writes: u64,
    /// The log generation being written, and the older ones still on
    /// disk (one per recovery since the last clean close).
    pub generation: u64,
    pub sealed_generations: usize,
    pub loggers: Vec<LoggerStats>,
    /// Checkpoints begun, installed and failed (abandoned ones, by a
    /// close, count as begun only), the bytes of the installed ones'
    /// files, the last one's bytes, rows, epoch range [el, eh] and time
    /// from its start to its install, and the log bytes deleted after
    /// installs.
    pub checkpoints_started: u64,
    pub checkpoints_installed: u64,
    pub checkpoints_failed: u64,
    /// Given up before the install because a commit was rolled back
    /// after its install began during the walk (a value of it may have
    /// been walked); the trigger takes the next one.
    pub checkpoints_abandoned: u64,
    pub checkpoint_bytes: u64,
    pub last_checkpoint_bytes: u64,
    pub last_checkpoint_rows: u64,
    pub last_checkpoint_el: u64,
    pub last_checkpoint_eh: u64,
    pub last_checkpoint_duration: Duration,
    pub log_bytes_deleted: u64,
    /// Recovery at open: time loading the installed checkpoint, its bytes
    /// and rows; time scanning and replaying the logs, the log bytes read,
    /// entries kept, skipped (beyond their bound) and below the
    /// checkpoint's el.
    pub checkpoint_load: Duration,
    pub checkpoint_load_bytes: u64,
    pub checkpoint_load_rows: u64,
    pub log_replay: Duration,
    pub recovered_bytes: u64,
    pub recovered_entries: u64,
    pub skipped_entries: u64,
    pub below_checkpoint_entries: u64,
}

fn gb_per_sec(bytes: u64, time: Duration) -> f64 {
    let secs = time.as_secs_f64();
    if secs == 0.0 {
        return 0.0;
    }
    bytes as f64 / 1e9 / secs
}

impl SilorStats {
    /// Recovery speed: checkpoint and log bytes per second, in GB/s.
    pub fn recovery_gb_per_sec(&self) -> f64 {
        gb_per_sec(
            self.checkpoint_load_bytes + self.recovered_bytes,
            self.checkpoint_load + self.log_replay,
        )
    }

    /// Checkpoint loading's speed, in GB/s.
    pub fn checkpoint_load_gb_per_sec(&self) -> f64 {
        gb_per_sec(self.checkpoint_load_bytes, self.checkpoint_load)
    }

    /// Log replay's speed, in GB/s.
    pub fn log_replay_gb_per_sec(&self) -> f64 {
        gb_per_sec(self.recovered_bytes, self.log_replay)
    }
}

/// Check what the database left (reads only) and return the opening.
pub(crate) fn open(ctx: &OpenContext<'_>, options: &SilorOptions) -> Result<Box<dyn Opening>> {
    let dir = ctx.dir.join(SILOR_DIR);
    let recovering = !ctx.superblock.clean && ctx.superblock.scheme == Some(SchemeKind::Silor);
    let state = if recovering {
        let state = pepoch::read(ctx.storage.as_ref(), &dir)?.ok_or_else(|| Error::MissingFile {
            path: dir.join(pepoch::PEPOCH_FILE),
            detail: "the database was left open by the silor scheme, whose pepoch file says which logged commits count".into(),
        })?;
        Some(state)
    } else {
        None
    };
    // A clean close that had journaled its pages may have begun writing
    // them: the data file is no longer the base the logs replay onto, and
    // the journal completes it instead (the logs then add nothing).
    let (state, journal) = match state {
        Some(s) if s.closing => {
            let page_size = ctx.superblock.page_size as usize;
            (None, Some(journal::read(ctx.storage.as_ref(), &dir, page_size)?))
        }
        other => (other, None),
    };
    let found = match state.as_ref().and_then(|s| s.checkpoint) {
        Some(installed) => Some(checkpoint::load::find(
            ctx.storage.as_ref(),
            &dir,
            installed,
        )?),
        None => None,
    };
    let floor = found
        .as_ref()
        .map(|f| recovery::Floor {
            el: f.installed.el,
            catalog_from: f.catalog_from,
        })
        .unwrap_or_default();
    let scanned = match &state {
        Some(s) => recovery::scan_logs(ctx.storage, &dir, s, floor, ctx.recovery_threads)?,
        None => recovery::Scanned::default(),
    };
    Ok(Box::new(SilorOpening {
        options: options.clone(),
        dir,
        state,
        scanned: Some(scanned),
        found,
        journal,
        next: None,
    }))
}

struct SilorOpening {
    options: SilorOptions,
    dir: PathBuf,
    /// The pepoch file of the run being recovered (`None`: the last close
    /// was clean).
    state: Option<PepochState>,
    scanned: Option<recovery::Scanned>,
    /// The installed checkpoint, the base of the replay.
    found: Option<checkpoint::load::Found>,
    /// The pages of an interrupted clean close, to finish it with.
    journal: Option<Vec<(u64, Vec<u8>)>>,
    /// The pepoch file `prepare` wrote for this run.
    next: Option<PepochState>,
}

impl Opening for SilorOpening {
    fn prepare(&mut self, ctx: &OpenContext<'_>) -> Result<Prepared> {
        let storage = ctx.storage.as_ref();
        let mut sealed = Vec::new();
        let found = recovery::generations(storage, &self.dir)?;
        let newest = found
            .iter()
            .map(|(g, _)| *g)
            .chain(self.state.as_ref().map(|s| s.generation))
            .max()
            .unwrap_or(0);
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
        let mut obsolete: Vec<PathBuf> = Vec::new();
        match &self.state {
            // Left by a clean close (finished, or just completed from its
            // journal), or by another scheme: nothing here counts.
            None => {
                obsolete.extend(found.into_iter().map(|(_, p)| p));
                obsolete.push(journal::path(&self.dir));
                obsolete.push(self.dir.join(checkpoint::CHECKPOINTS_DIR));
            }
            Some(state) => {
                // A journal the closing flag never vouched for.
                obsolete.push(journal::path(&self.dir));
                for (g, path) in found {
                    match state.bound(g) {
                        Some(bound) => sealed.push((g, bound)),
                        // Begun after the pepoch file last named a
                        // generation: nothing in it was acknowledged.
                        None => obsolete.push(path),
                    }
                }
            }
        }
        // Checkpoints never installed (or replaced by a newer one whose
        // pruning a crash interrupted) are not needed by anything.
        for (id, path) in checkpoint::checkpoints(storage, &self.dir)? {
            if self.found.as_ref().map(|f| f.installed.id) != Some(id) {
                obsolete.push(path);
            }
        }
        create_dir(storage, &self.dir)?;
        // The new file first: until it replaces the old one, the old one
        // (and what it names) must stay, so a crash here reopens as before.
        let next = PepochState {
            generation: newest + 1,
            pepoch: 0,
            sealed,
            closing: false,
            checkpoint: self.state.as_ref().and_then(|s| s.checkpoint),
        };
        pepoch::write(storage, &self.dir, &next)?;
        for path in obsolete {
            if storage.exists(&path) {
                storage.remove(&path)?;
                storage.sync_dir(&self.dir)?;
            }
        }
        self.next = Some(next);
        // Above every epoch seen: the logs' and the checkpoint's (its rows
        // may be of epochs up to eh).
        let max_epoch = self
            .scanned
            .as_ref()
            .map_or(0, |s| s.max_epoch)
            .max(self.found.as_ref().map_or(0, |f| f.installed.eh));
        ctx.epoch.raise_to(max_epoch + 1);
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
        let next = self.next.take().ok_or_else(|| Error::Internal {
            what: "the silor scheme was recovered before it was prepared".into(),
        })?;
        let scanned = self.scanned.take().unwrap_or_default();
        if let Some(pages) = &self.journal {
            let end = pages.iter().map(|(pid, _)| pid + 1).max().unwrap_or(0);
            pool.ensure_allocated(end);
        }
        let recovered = self.state.is_some() || self.journal.is_some();
        let report_base = RecoveryReport {
            partitions: self.options.loggers,
            segments: scanned.segments,
            records: scanned.entries,
            log_bytes: scanned.bytes,
            torn_tails: scanned.torn_tails,
            repaired_torn_pages,
            analysis: scanned.scan_time,
            ..RecoveryReport::default()
        };
        let (entries, skipped, below, scan_time) = (
            scanned.entries,
            scanned.skipped,
            scanned.below_floor,
            scanned.scan_time,
        );
        let loaded = match &self.found {
            Some(found) => checkpoint::load::load(ctx.storage, pool, found, ctx.recovery_threads)?,
            None => checkpoint::load::Loaded::default(),
        };
        let mut replayed = recovery::replay(pool, scanned, ctx.recovery_threads)?;
        replayed.created_indexes.extend(loaded.stale.iter().cloned());
        let report = RecoveryReport {
            winners: (replayed.keys_written + replayed.keys_removed) as usize,
            records_redone: replayed.keys_written + replayed.keys_removed,
            redo: replayed.time,
            image_load: loaded.time,
            image_bytes: loaded.bytes,
            ..report_base
        };
        let storage = ctx.storage;
        let generation = recovery::generation_dir(&self.dir, next.generation);
        create_dir(storage.as_ref(), &generation)?;
        let mut loggers = Vec::with_capacity(self.options.loggers);
        for l in 0..self.options.loggers {
            let stream = Stream::open(
                Arc::clone(storage),
                recovery::logger_dir(&generation, l),
                SchemeKind::Silor,
                l as u32,
                LogPos::ZERO,
                0,
                Vec::new(),
            )?;
            // Under a log limit, segments small enough that pruning (whole
            // segments, never the newest) can keep the log near it.
            if let SilorCheckpoint::LogLimit(limit) = self.options.checkpoint {
                let per_logger = limit / self.options.loggers as u64;
                stream.set_segment_size((per_logger / 4).clamp(16 << 10, 16 << 20));
            }
            loggers.push(Logger {
                stream,
                mark: parking_lot::Mutex::new(0),
            });
        }
        let sealed_generations = next.sealed.len();
        let loggers = Loggers::start(
            Arc::clone(storage),
            self.dir.clone(),
            Arc::clone(ctx.epoch),
            loggers,
            next,
        )?;
        let last_id = checkpoint::load::last_id(storage.as_ref(), &self.dir)?;
        let checkpointer = Checkpointer::new(
            Arc::clone(&loggers),
            Arc::clone(storage),
            self.dir.clone(),
            self.options.clone(),
            last_id,
        );
        Ok(Arc::new(SilorScheme {
            pool: Arc::clone(pool),
            loggers,
            checkpointer,
            floor: ctx.floor,
            report: recovered.then_some(report),
            stale_indexes: replayed.created_indexes.clone(),
            recovery: SilorStats {
                checkpoint_load: loaded.time,
                checkpoint_load_bytes: loaded.bytes,
                checkpoint_load_rows: loaded.rows,
                below_checkpoint_entries: below,
                log_replay: scan_time + replayed.time,
                recovered_bytes: report_base_bytes(recovered, &report_base),
                recovered_entries: entries,
                skipped_entries: skipped,
                sealed_generations,
                ..SilorStats::default()
            },
        }))
    }
}

fn report_base_bytes(recovered: bool, report: &RecoveryReport) -> u64 {
    if recovered {
        report.log_bytes
    } else {
        0
    }
}

/// The open `silor` scheme.
pub struct SilorScheme {
    /// For the clean close's journal.
    pool: Arc<BufferPool>,
    loggers: Arc<Loggers>,
    checkpointer: Arc<Checkpointer>,
    /// The log floor the database was opened with: no page GSN moves
    /// under this scheme, which logs no pages.
    floor: Gsn,
    report: Option<RecoveryReport>,
    /// Indexes recovery created from the log, unfilled.
    stale_indexes: Vec<String>,
    /// Recovery's part of the stats.
    recovery: SilorStats,
}

impl SilorScheme {
    /// Acknowledge commits without waiting for pepoch to cover their
    /// epoch: a broken variant the crash tests must catch (`testing`
    /// feature only).
    #[cfg(feature = "testing")]
    pub fn set_broken_commit_ack_for_tests(&self, broken: bool) {
        self.loggers.broken_ack.store(broken, Ordering::Relaxed);
    }

    /// Make the next commit's log append fail after its writes are
    /// installed (so it is rolled back), calling `before` first, on the
    /// committing thread (`testing` feature only).
    #[cfg(feature = "testing")]
    pub fn fail_next_append_for_tests(&self, before: impl FnOnce() + Send + 'static) {
        *self.loggers.fail_next_append.lock() = Some(Box::new(before));
    }

    /// Prune the logs below eh + 1 instead of el after installing a
    /// checkpoint: a broken variant the checkpoint tests must catch
    /// (`testing` feature only).
    #[cfg(feature = "testing")]
    pub fn set_broken_checkpoint_install_for_tests(&self, broken: bool) {
        self.checkpointer
            .broken_prune
            .store(broken, Ordering::Relaxed);
    }

    /// Take, install and prune a checkpoint now, on the caller's thread
    /// (one at a time with the trigger's); the installed range, or `None`
    /// if a close stopped it. For tests and tools.
    #[cfg(feature = "internals")]
    pub fn checkpoint_now(&self) -> Result<Option<(u64, u64)>> {
        Ok(self.checkpointer.checkpoint_now()?.map(|c| (c.el, c.eh)))
    }

    /// Call `hook` at each stage of every checkpoint (on the
    /// checkpointing thread); `None` removes it. For tests that crash at
    /// each point.
    #[cfg(feature = "internals")]
    pub fn set_checkpoint_hook(&self, hook: Option<checkpoint::StageHook>) {
        *self.checkpointer.hook.lock() = hook;
    }

    /// Segment size of the loggers' files from now on (tests that need
    /// several segments without writing megabytes).
    #[cfg(feature = "internals")]
    pub fn set_log_segment_bytes_for_tests(&self, bytes: u64) {
        for l in &self.loggers.loggers {
            l.stream.set_segment_size(bytes);
        }
    }

    /// The persistent epoch.
    pub fn pepoch(&self) -> u64 {
        self.loggers.pepoch()
    }

    /// Wait up to `timeout` until pepoch covers the current epoch (every
    /// commit made so far is durable); whether it did. For tests.
    pub fn wait_all_durable(&self, timeout: Duration) -> bool {
        let epoch = self.loggers.clock.current();
        self.loggers.wait_epoch_for(epoch, timeout)
    }
}

impl std::fmt::Debug for SilorScheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SilorScheme")
            .field("pepoch", &self.loggers.pepoch())
            .field("loggers", &self.loggers.loggers.len())
            .finish()
    }
}

impl Scheme for SilorScheme {
    fn kind(&self) -> SchemeKind {
        SchemeKind::Silor
    }

    fn session_log(&self, slot: u16) -> Result<Box<dyn SessionLog>> {
        let logger = if slot == crate::txn::epoch::SYSTEM_SLOT {
            0
        } else {
            slot as usize % self.loggers.loggers.len()
        };
        Ok(Box::new(session::SilorSessionLog::new(
            Arc::clone(&self.loggers),
            logger,
        )))
    }

    fn check_writable(&self) -> Result<()> {
        self.loggers.check_healthy()
    }

    fn recovery_report(&self) -> Option<&RecoveryReport> {
        self.report.as_ref()
    }

    fn start_services(&self, db: &crate::db::Database) -> Result<()> {
        self.checkpointer.start(db.shared_weak())
    }

    fn stop_services(&self) {
        self.checkpointer.stop();
    }

    fn before_clean_close_writes(&self) -> Result<()> {
        self.loggers.seal_for_close(|| {
            journal::write(
                self.loggers.storage.as_ref(),
                &self.loggers.dir,
                &self.pool,
            )
            .map(|_| ())
        })
    }

    fn orders_writes_by_tid(&self) -> bool {
        true
    }

    fn indexes_to_rebuild(&self) -> &[String] {
        &self.stale_indexes
    }

    fn seal_for_clean_close(&self) -> Result<Gsn> {
        self.loggers.stop();
        for l in &self.loggers.loggers {
            l.stream.shutdown()?;
        }
        Ok(self.floor)
    }

    fn remove_log_after_clean_close(&self) -> Result<()> {
        remove_synced(self.loggers.storage.as_ref(), &self.loggers.dir)
    }

    fn shutdown(&self) {
        self.checkpointer.stop();
        self.loggers.stop();
        for l in &self.loggers.loggers {
            if let Err(e) = l.stream.shutdown() {
                tracing::warn!(error = %e, "stopping a silor logger failed");
            }
        }
    }

    fn stats(&self) -> PersistenceStats {
        let loggers: Vec<LoggerStats> = self
            .loggers
            .loggers
            .iter()
            .map(|l| {
                let s = l.stream.stats();
                LoggerStats {
                    appended_bytes: s.appended_bytes,
                    durable_bytes: s.durable_bytes,
                    entries: s.records,
                    syncs: s.syncs,
                    disk_bytes: l.stream.disk_bytes(),
                }
            })
            .collect();
        let epoch = self.loggers.clock.current();
        let pepoch = self.loggers.pepoch();
        let c = self.checkpointer.counters.lock().clone();
        let log = crate::wal::WalStats {
            partitions: loggers.len(),
            appended_bytes: loggers.iter().map(|l| l.appended_bytes).sum(),
            records: loggers.iter().map(|l| l.entries).sum(),
            syncs: loggers.iter().map(|l| l.syncs).sum(),
            disk_bytes: loggers.iter().map(|l| l.disk_bytes).sum(),
            ..crate::wal::WalStats::default()
        };
        PersistenceStats {
            scheme: SchemeKind::Silor,
            log,
            silor: SilorStats {
                epoch,
                pepoch,
                pepoch_lag: epoch.saturating_sub(pepoch),
                pepoch_writes: self.loggers.pepoch_writes.load(Ordering::Relaxed),
                generation: self.loggers.generation(),
                loggers,
                checkpoints_started: c.started,
                checkpoints_installed: c.installed,
                checkpoints_failed: c.failed,
                checkpoints_abandoned: c.abandoned,
                checkpoint_bytes: c.bytes,
                last_checkpoint_bytes: c.last_bytes,
                last_checkpoint_rows: c.last_rows,
                last_checkpoint_el: c.last_el,
                last_checkpoint_eh: c.last_eh,
                last_checkpoint_duration: c.last_duration,
                log_bytes_deleted: c.log_bytes_deleted,
                ..self.recovery.clone()
            },
            ..PersistenceStats::default()
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
