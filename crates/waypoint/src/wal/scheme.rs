//! The per-worker WAL as a persistence scheme (seed 000), and, with one
//! partition for all sessions ([`Partitioning::Central`]), the central log
//! of the `aries` scheme (seed 000 §4; its own parts are `crate::central`'s):
//! opening it
//! checks the log against the superblock and the checkpoint metadata,
//! recovers (analysis, redo, undo: §3.7), and starts the log writers and
//! the checkpointer (§3.4); running, it gives each session its log
//! partition; a clean close seals the log and deletes it. Its pages are
//! written by steal behind the log manager's flush gate (the WAL rule),
//! from recovery on.
//!
//! Invariant: nothing is written before the checks pass (an open refused
//! for what it found changes no file), and the checkpoint metadata with
//! every partition's synced position is durable before the superblock
//! says the log is required.

use super::log::Partitioning;
use super::options::PerWorkerOptions;
use super::recovery::{Analysis, RecoveryReport};
use super::Wal;
use crate::buffer::{BufferPool, PageWritePolicy};
use crate::checkpoint::{self, meta, CheckpointConfig, CheckpointMode, Checkpointer};
use crate::db::{Superblock, DATA_FILE, WAL_DIR};
use crate::error::{Error, Result};
use crate::io::Storage;
use crate::persist::{
    OpenContext, Opening, PersistenceStats, Prepared, Scheme, SchemeKind, SessionLog, UncleanMark,
};
use crate::ids::{Gsn, LogPos};
use crate::txn::epoch::SYSTEM_SLOT;
use std::path::Path;
use std::sync::Arc;

/// The per-worker scheme between its checks and its recovery.
pub(crate) struct PerWorkerOpening {
    options: PerWorkerOptions,
    partitioning: Partitioning,
    analysis: Analysis,
    /// The WAL limit in force (`checkpoint::limit_for_disk`).
    wal_limit: u64,
    /// The synced positions the metadata records after `prepare`.
    synced: Vec<(u32, LogPos)>,
    /// The log manager, continuing the log where analysis found it ends:
    /// made by `prepare`, its gate the page-write policy's from then on.
    wal: Option<Arc<Wal>>,
}

/// Check the log of the database being opened; reads only. The log's
/// sessions share partitions as `partitioning` says (a partition each for
/// the per-worker scheme).
pub(crate) fn open(
    ctx: &OpenContext<'_>,
    options: &PerWorkerOptions,
    partitioning: Partitioning,
) -> Result<Box<dyn Opening>> {
    let analysis = check_log(
        scheme_of(&partitioning),
        ctx.storage.as_ref(),
        ctx.dir,
        ctx.superblock,
        ctx.checkpoint,
        ctx.floor,
        ctx.recovery_threads,
    )?;
    let wal_limit = checkpoint::limit_for_disk(
        options.wal_limit_bytes,
        ctx.storage.available_space(ctx.dir),
    );
    if wal_limit < options.wal_limit_bytes {
        tracing::warn!(dir = %ctx.dir.display(), configured = options.wal_limit_bytes, lowered_to = wal_limit,
            "the disk is small for the WAL limit: the log is kept near a quarter of the free space (wal_limit_bytes)");
    }
    Ok(Box::new(PerWorkerOpening {
        options: options.clone(),
        partitioning,
        analysis,
        wal_limit,
        synced: Vec::new(),
        wal: None,
    }))
}

impl Opening for PerWorkerOpening {
    fn prepare(&mut self, ctx: &OpenContext<'_>) -> Result<Prepared> {
        // Before the superblock says the log and the metadata are
        // required, both exist, durably: the log's directory, and the
        // metadata with every partition's recovered end as its synced
        // position (durable once analysis's changes are).
        let log_dir = ctx.dir.join(WAL_DIR);
        if !ctx.storage.exists(&log_dir) {
            ctx.storage.create_dir_all(&log_dir)?;
            ctx.storage.sync_dir(ctx.dir)?;
        }
        self.analysis.apply(ctx.storage.as_ref())?;
        self.synced = self.analysis.synced_ends();
        meta::write(ctx.storage.as_ref(), ctx.dir, ctx.floor, &self.synced)?;
        // The log manager exists before redo, so every page write from
        // then on passes its gate. Redo opens no partition: until undo
        // logs, the gate vouches for what analysis found durable.
        let w = Wal::with_partitioning(
            Arc::clone(ctx.storage),
            &log_dir,
            self.options.commit,
            self.analysis.partitions(),
            ctx.floor,
            self.partitioning.clone(),
        )?;
        w.set_preallocate(self.options.wal_preallocate);
        w.set_zero_fill(self.options.wal_zero_fill);
        w.set_segment_size(segment_bytes(&self.options, self.wal_limit));
        w.set_sync_interval(self.options.log_sync_interval);
        if let Some(archive) = &self.options.wal_archive_dir {
            w.set_archive_dir(ctx.dir.join(archive));
        }
        self.wal = Some(Arc::clone(&w));
        Ok(Prepared {
            log_required: true,
            page_writes: PageWritePolicy::StealBehindGate(w),
            unclean_mark: UncleanMark::AtOpen,
        })
    }

    fn recover(
        self: Box<Self>,
        ctx: &OpenContext<'_>,
        pool: &Arc<BufferPool>,
        repaired_torn_pages: usize,
    ) -> Result<Arc<dyn Scheme>> {
        let PerWorkerOpening {
            options,
            partitioning,
            analysis,
            wal_limit,
            synced,
            wal,
        } = *self;
        let w = wal.expect("recover follows prepare");
        let mut recovery = analysis.redo(pool, ctx.recovery_threads)?;
        // One log per undo thread, in slots no session holds yet.
        let mut undo_logs = (0..ctx.recovery_threads as u16)
            .map(|i| w.session_log(SYSTEM_SLOT - i))
            .collect::<Result<Vec<_>>>()?;
        let stop = |w: &Wal| {
            if let Err(e) = w.shutdown() {
                tracing::error!(error = %e, "stopping the log writers failed");
            }
        };
        if let Err(e) = recovery
            .undo(pool, &mut undo_logs)
            .and_then(|()| w.flush_all())
        {
            stop(&w);
            return Err(e);
        }
        drop(undo_logs);
        recovery.report.repaired_torn_pages = repaired_torn_pages;
        if recovery.report.records > 0 {
            tracing::info!(report = ?recovery.report, "recovery done");
        }
        let checkpointer = Checkpointer::start(
            Arc::clone(pool),
            Arc::clone(&w),
            Arc::clone(ctx.storage),
            ctx.dir.to_path_buf(),
            CheckpointConfig {
                mode: options.checkpoint,
                wal_limit,
                shards: options.checkpoint_shards,
                threads: options.checkpoint_threads,
            },
            ctx.floor,
            synced,
        )
        .inspect_err(|_| stop(&w))?;
        w.set_first_epoch(ctx.first_epoch);
        Ok(Arc::new(PerWorkerScheme {
            kind: scheme_of(&partitioning),
            wal: w,
            checkpointer,
            report: recovery.report,
        }))
    }
}

fn scheme_of(partitioning: &Partitioning) -> SchemeKind {
    match partitioning {
        Partitioning::PerSlot => SchemeKind::PerWorker,
        Partitioning::Central { scheme, .. } => *scheme,
    }
}

/// Segment size: pruning removes whole segments and each partition keeps
/// its newest, so with checkpoints on a segment is at most 1/32 of the
/// WAL limit, a cap that never drops below 64 KiB (the log on disk then
/// stays within a few percent of larger limits).
fn segment_bytes(options: &PerWorkerOptions, wal_limit: u64) -> u64 {
    match options.checkpoint {
        CheckpointMode::None => options.wal_segment_bytes,
        _ => options
            .wal_segment_bytes
            .min((wal_limit / 32).max(64 << 10)),
    }
}

/// Read the log and check it against the superblock and the checkpoint
/// metadata, changing nothing:
/// - a database not closed cleanly by a build that keeps synced positions
///   (`Superblock::log_required`) must have its checkpoint metadata
///   (`MissingFile`), in that format, with a floor not below the
///   superblock's (`Mismatch`), and its log directory (`MissingFile`),
///   and each partition's log must reach the position recorded as synced
///   (`LogTruncated`);
/// - a cleanly closed database's log (what a crash during the close left
///   of it) holds no record above the superblock's floor: one there means
///   the data file is older than the log (`Mismatch`).
fn check_log(
    scheme: SchemeKind,
    storage: &dyn Storage,
    dir: &Path,
    superblock: &Superblock,
    checkpoint: Option<&meta::Meta>,
    floor: Gsn,
    threads: usize,
) -> Result<Analysis> {
    let log_dir = dir.join(WAL_DIR);
    let required = !superblock.clean && superblock.log_required;
    if required {
        let meta_path = dir.join(meta::META_FILE);
        let Some(checkpoint) = checkpoint else {
            return Err(Error::MissingFile {
                path: meta_path,
                detail: "the database was not closed cleanly, and recovery needs the log floor and synced log positions recorded there".into(),
            });
        };
        if checkpoint.version < meta::META_FORMAT_VERSION {
            return Err(Error::Mismatch {
                path: meta_path,
                detail: format!(
                    "it is in format version {} and records no synced log positions, but the database was left open by a build that writes version {}",
                    checkpoint.version,
                    meta::META_FORMAT_VERSION
                ),
            });
        }
        if checkpoint.floor < superblock.log_floor {
            return Err(Error::Mismatch {
                path: meta_path,
                detail: format!(
                    "it records log floor {}, below the floor {} of {}: it is older than the data file",
                    checkpoint.floor, superblock.log_floor, DATA_FILE
                ),
            });
        }
        if !storage.exists(&log_dir) {
            return Err(Error::MissingFile {
                path: log_dir,
                detail: "the database was not closed cleanly, and recovery needs its log".into(),
            });
        }
    }
    let analysis = Analysis::read_for(scheme, storage, &log_dir, floor, threads)?;
    if required {
        analysis.check_synced(&checkpoint.map(|m| m.synced.clone()).unwrap_or_default())?;
    }
    if superblock.clean {
        if let Some((gsn, partition)) = analysis.max_gsn() {
            if gsn > superblock.log_floor {
                return Err(Error::Mismatch {
                    path: dir.join(DATA_FILE),
                    detail: format!(
                        "it was closed cleanly with every log record up to GSN {} in it, but {} holds records up to GSN {gsn}: the data file is older than the log",
                        superblock.log_floor,
                        partition.display()
                    ),
                });
            }
        }
    }
    Ok(analysis)
}

/// The per-worker WAL (or the central log of `aries`), open: its log
/// manager, checkpointer and what recovery did.
pub struct PerWorkerScheme {
    kind: SchemeKind,
    wal: Arc<Wal>,
    checkpointer: Checkpointer,
    report: RecoveryReport,
}

impl PerWorkerScheme {
    /// The log manager, for tests and tools.
    pub fn wal(&self) -> &Arc<Wal> {
        &self.wal
    }

    /// Record every partition's synced position in the checkpoint
    /// metadata now, if any moved since it was last written.
    pub fn record_synced(&self) -> Result<()> {
        self.checkpointer.record_synced()
    }
}

impl Scheme for PerWorkerScheme {
    fn kind(&self) -> SchemeKind {
        self.kind
    }

    fn session_log(&self, slot: u16) -> Result<Box<dyn SessionLog>> {
        Ok(Box::new(self.wal.session_log(slot)?))
    }

    fn check_writable(&self) -> Result<()> {
        self.wal.check_writable()
    }

    fn recovery_report(&self) -> Option<&RecoveryReport> {
        Some(&self.report)
    }

    fn stop_services(&self) {
        self.checkpointer.stop();
    }

    fn seal_for_clean_close(&self) -> Result<Gsn> {
        self.wal.flush_all()?;
        self.wal.shutdown()?;
        Ok(self.wal.max_clock())
    }

    fn remove_log_after_clean_close(&self) -> Result<()> {
        self.wal.remove_all_segments()
    }

    fn shutdown(&self) {
        self.checkpointer.stop();
        if let Err(e) = self.wal.shutdown() {
            tracing::error!(error = %e, "stopping the log writers failed");
        }
    }

    fn stats(&self) -> PersistenceStats {
        PersistenceStats {
            scheme: self.kind,
            log: self.wal.stats(),
            log_latch: self.wal.latch().map(|l| l.stats()).unwrap_or_default(),
            consolidation: self
                .wal
                .consolidation()
                .map(|c| c.stats())
                .unwrap_or_default(),
            checkpoint: self.checkpointer.stats(),
            backpressure: self.wal.backpressure_time(),
            silor: Default::default(),
            command: Default::default(),
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
