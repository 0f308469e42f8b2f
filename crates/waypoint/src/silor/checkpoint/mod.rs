//! SiloR's fuzzy parallel checkpoints (seed 002 §4.2-4.3,
//! docs/decisions/029-silor-checkpoints.md): `checkpointers` threads walk
//! key ranges of every table and index with ordinary reads that never
//! stop a writer (`walk`), a snapshot file per range, `LOAD_PARTS` ranges
//! at least (`persist::resident::snapshot_file`); the checkpoint records its epoch
//! range [el, eh] and is installed by one write of the pepoch file once
//! pepoch ≥ eh; then log segments whose newest epoch is below el, older
//! checkpoints and older log generations are deleted (`install`). A
//! recovery loads the installed checkpoint, its files on the recovery
//! threads, into
//! empty trees, and replays the logs' entries of epochs ≥ el on top
//! (`load`, `silor::recovery`). Triggers: continuous or a log limit
//! (`SilorCheckpoint`).
//!
//! Files: `silor/checkpoints/cNNNNNNNN/catalog.snap` (tables, indexes and
//! the meta record: generation, the catalog's log position, el) and
//! `pNNN.snap`, one per key range.
//!
//! Invariant: the installed checkpoint plus the logs' entries of epochs
//! in [el, their generation's pepoch] recover exactly what the logs alone
//! would: every commit the walk may have missed has an epoch ≥ el (el is
//! taken like pepoch, below every commit not yet appended), and every row
//! carries the TID that wrote it, so a log entry wins over it exactly when
//! it is newer.

mod install;
pub(super) mod load;
mod walk;

use super::loggers::Loggers;
use super::options::{SilorCheckpoint, SilorOptions};
use crate::error::Result;
use crate::io::Storage;
use crate::txn::shared::DbShared;
use parking_lot::{Condvar, Mutex};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// The checkpoints' directory inside `silor/`.
pub const CHECKPOINTS_DIR: &str = "checkpoints";
/// The catalog file of a checkpoint.
pub const CATALOG_FILE: &str = "catalog.snap";

/// Checkpoint `id`'s directory.
pub fn checkpoint_dir(silor: &Path, id: u64) -> PathBuf {
    silor.join(CHECKPOINTS_DIR).join(format!("c{id:08}"))
}

/// Part files a checkpoint is cut into (key ranges of every tree), at
/// least: recovery loads the parts on up to `Options::recovery_threads`
/// threads (`persist::resident::load`), so a checkpoint written by one
/// checkpointer still loads on several; the files are many more than the
/// threads so that uneven ranges even out.
pub const LOAD_PARTS: usize = 16;

/// Key range `part`'s file in a checkpoint directory.
pub fn part_file(dir: &Path, part: usize) -> PathBuf {
    dir.join(format!("p{part:03}.snap"))
}

/// The checkpoint directories below `silor/`, by id, ascending.
pub fn checkpoints(storage: &dyn Storage, silor: &Path) -> Result<Vec<(u64, PathBuf)>> {
    crate::persist::resident::numbered_dirs(storage, &silor.join(CHECKPOINTS_DIR), 'c')
}

/// Where a checkpoint is, for tests that crash at each point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointStage {
    /// A checkpointer wrote one batch of rows (`part`, rows so far).
    Batch { part: usize, rows: u64 },
    /// Every file is written and synced, not yet installed.
    Written,
    /// The pepoch file names it; nothing pruned yet.
    Installed,
    /// Logs, older checkpoints and generations are pruned.
    Pruned,
}

/// A test's look at each stage (called on the checkpointing thread).
pub type StageHook = Arc<dyn Fn(CheckpointStage) + Send + Sync>;

/// The counters `SilorStats` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Counters {
    pub started: u64,
    pub installed: u64,
    pub failed: u64,
    /// Given up before the install: a commit rolled back after its
    /// install began while the walk ran.
    pub abandoned: u64,
    /// Bytes of every checkpoint file written.
    pub bytes: u64,
    pub last_bytes: u64,
    pub last_rows: u64,
    pub last_el: u64,
    pub last_eh: u64,
    /// The last installed one's time from its start to its install.
    pub last_duration: Duration,
    pub log_bytes_deleted: u64,
}

/// What the checkpointer thread and the scheme share.
pub(super) struct Checkpointer {
    pub loggers: Arc<Loggers>,
    pub storage: Arc<dyn Storage>,
    /// `silor/`.
    pub dir: PathBuf,
    pub options: SilorOptions,
    db: Mutex<Option<Weak<DbShared>>>,
    next_id: AtomicU64,
    /// One checkpoint at a time (the thread's and a test's).
    running: Mutex<()>,
    stop: Mutex<bool>,
    wake: Condvar,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    pub counters: Mutex<Counters>,
    /// Bytes of the older generations' log files (left by crashes since
    /// the last clean close), counted towards `SilorCheckpoint::LogLimit`
    /// until the first install deletes them.
    sealed_log_bytes: AtomicU64,
    /// Test-only: prune the logs below eh + 1 instead of el.
    pub broken_prune: AtomicBool,
    pub hook: Mutex<Option<StageHook>>,
}

impl Checkpointer {
    /// A checkpointer whose first checkpoint gets an id above `last_id`.
    pub fn new(
        loggers: Arc<Loggers>,
        storage: Arc<dyn Storage>,
        dir: PathBuf,
        options: SilorOptions,
        last_id: u64,
    ) -> Arc<Self> {
        Arc::new(Checkpointer {
            loggers,
            storage,
            dir,
            options,
            db: Mutex::new(None),
            next_id: AtomicU64::new(last_id + 1),
            running: Mutex::new(()),
            stop: Mutex::new(false),
            wake: Condvar::new(),
            thread: Mutex::new(None),
            counters: Mutex::new(Counters::default()),
            sealed_log_bytes: AtomicU64::new(0),
            broken_prune: AtomicBool::new(false),
            hook: Mutex::new(None),
        })
    }

    fn stage(&self, stage: CheckpointStage) {
        let hook = self.hook.lock().clone();
        if let Some(h) = hook {
            h(stage);
        }
    }

    fn stopped(&self) -> bool {
        *self.stop.lock()
    }

    /// The database is built: start the trigger thread (none with
    /// `SilorCheckpoint::Off`).
    pub fn start(self: &Arc<Self>, db: Weak<DbShared>) -> Result<()> {
        *self.db.lock() = Some(db);
        match self.options.checkpoint {
            SilorCheckpoint::Off => return Ok(()),
            SilorCheckpoint::LogLimit(_) => {
                let bytes = install::sealed_generation_bytes(self)?;
                self.sealed_log_bytes.store(bytes, Ordering::Relaxed);
            }
            SilorCheckpoint::Continuous { .. } => {}
        }
        let me = Arc::clone(self);
        let handle = std::thread::Builder::new()
            .name("waypoint-silor-checkpoint".into())
            .spawn(move || me.run())
            .map_err(|e| crate::error::Error::io(crate::error::IoOp::Open, "checkpoint thread", None, e))?;
        *self.thread.lock() = Some(handle);
        Ok(())
    }

    /// Stop the trigger thread (a checkpoint in progress is abandoned:
    /// its files are removed at the next checkpoint or open).
    pub fn stop(&self) {
        *self.stop.lock() = true;
        self.wake.notify_all();
        let handle = self.thread.lock().take();
        if let Some(h) = handle {
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }

    /// Log bytes on disk: the loggers' current files and (under the log
    /// limit) the older generations' until an install deletes them.
    pub fn log_bytes(&self) -> u64 {
        let current: u64 = self
            .loggers
            .loggers
            .iter()
            .map(|l| l.stream.disk_bytes())
            .sum();
        current + self.sealed_log_bytes.load(Ordering::Relaxed)
    }

    fn due(&self, last_start: Option<Instant>) -> bool {
        match self.options.checkpoint {
            SilorCheckpoint::Off => false,
            SilorCheckpoint::Continuous { min_interval } => {
                last_start.is_none_or(|t| t.elapsed() >= min_interval)
            }
            SilorCheckpoint::LogLimit(limit) => self.log_bytes() > limit,
        }
    }

    fn run(&self) {
        let mut last_start: Option<Instant> = None;
        let mut failures = 0u32;
        loop {
            {
                let mut stop = self.stop.lock();
                if *stop {
                    return;
                }
                // Back off after failures (a full or failing disk).
                let pause = Duration::from_millis(10 << failures.min(8));
                self.wake.wait_for(&mut stop, pause);
                if *stop {
                    return;
                }
            }
            if !self.due(last_start) {
                continue;
            }
            let Some(db) = self.db.lock().as_ref().and_then(Weak::upgrade) else {
                return;
            };
            last_start = Some(Instant::now());
            match self.checkpoint(&db) {
                Ok(_) => failures = 0,
                Err(e) => {
                    failures += 1;
                    self.counters.lock().failed += 1;
                    if !self.stopped() {
                        tracing::warn!(error = %e, "a silor checkpoint failed; the logs are kept");
                    }
                }
            }
        }
    }

    /// Take, install and prune one checkpoint; `None` if stopped first.
    pub fn checkpoint(&self, db: &DbShared) -> Result<Option<super::pepoch::Installed>> {
        let _one = self.running.lock();
        let started = Instant::now();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.counters.lock().started += 1;
        let Some(taken) = walk::take(self, db, id)? else {
            return Ok(None);
        };
        self.stage(CheckpointStage::Written);
        let Some(installed) = install::install(self, &taken)? else {
            return Ok(None);
        };
        self.counters.lock().last_duration = started.elapsed();
        self.stage(CheckpointStage::Installed);
        install::prune(self, &installed)?;
        self.stage(CheckpointStage::Pruned);
        Ok(Some(installed))
    }

    /// A checkpoint now, on the caller's thread (for tests and tools).
    pub fn checkpoint_now(&self) -> Result<Option<super::pepoch::Installed>> {
        let db = self
            .db
            .lock()
            .as_ref()
            .and_then(Weak::upgrade)
            .ok_or(crate::error::Error::Closed)?;
        self.checkpoint(&db)
    }
}

/// What `waypoint inspect` shows of the `silor` scheme's files.
#[derive(Debug, Clone, Default)]
pub struct SilorFiles {
    /// The pepoch file: (generation, pepoch, sealed generations, closing,
    /// installed checkpoint as (id, el, eh)), or why it is unreadable;
    /// `None` if absent.
    pub pepoch: Option<std::result::Result<PepochSummary, String>>,
    /// Every checkpoint directory, by id.
    pub checkpoints: Vec<CheckpointFiles>,
}

/// The pepoch file's fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PepochSummary {
    pub generation: u64,
    pub pepoch: u64,
    pub sealed: Vec<(u64, u64)>,
    pub closing: bool,
    pub checkpoint: Option<(u64, u64, u64)>,
}

/// One checkpoint directory.
#[derive(Debug, Clone, Default)]
pub struct CheckpointFiles {
    pub id: u64,
    /// Named by the pepoch file.
    pub installed: bool,
    /// (path, bytes, rows, or why the file does not read whole).
    pub files: Vec<crate::persist::resident::snapshot_file::ListedFile>,
}

/// Read `silor/` below `dir` (reads only).
pub fn inspect(storage: &dyn Storage, dir: &Path) -> Result<SilorFiles> {
    let silor = dir.join(super::SILOR_DIR);
    let pepoch = if storage.exists(&silor.join(super::pepoch::PEPOCH_FILE)) {
        Some(
            super::pepoch::read(storage, &silor)
                .map(|s| {
                    let s = s.unwrap_or_default();
                    PepochSummary {
                        generation: s.generation,
                        pepoch: s.pepoch,
                        sealed: s.sealed,
                        closing: s.closing,
                        checkpoint: s.checkpoint.map(|c| (c.id, c.el, c.eh)),
                    }
                })
                .map_err(|e| e.to_string()),
        )
    } else {
        None
    };
    let installed = pepoch
        .as_ref()
        .and_then(|p| p.as_ref().ok())
        .and_then(|p| p.checkpoint)
        .map(|c| c.0);
    let mut out = Vec::new();
    for (id, path) in checkpoints(storage, &silor)? {
        let files = crate::persist::resident::snapshot_file::list_dir(
            storage,
            &path,
            crate::persist::SchemeKind::Silor,
        )?;
        out.push(CheckpointFiles {
            id,
            installed: installed == Some(id),
            files,
        });
    }
    Ok(SilorFiles {
        pepoch,
        checkpoints: out,
    })
}
