//! Transaction-consistent copy-on-write snapshots of the `command` scheme
//! (seed 001 §II-C1; docs/decisions/030-command-logging.md, "Snapshots").
//! A snapshot is the state at one point of the serial order, marked by
//! holding every partition lock for an instant (`write::mark`); calls go
//! on at once, each keeping the pre-image of what it changes in the shadow
//! (`shadow`) while a background writer serialises every table, merging
//! the tree's rows with the shadow's pre-images (`write`); it is installed
//! by one atomic write of `command/snapshot.meta`, after which the command
//! log before the point, older generations and older snapshots are
//! deleted (`install`). A recovery loads the installed snapshot, rebuilds
//! the indexes and re-executes the log from the point on (`load`,
//! `command::replay`). Triggers: a period or a log size
//! (`CommandSnapshot`), and `CommandScheme::snapshot_now`.
//!
//! Files: `command/snapshots/sNNNNNNNN/catalog.snap` (tables, indexes,
//! the point as the meta record) and `tNNNNNNNNNN.snap` per table, in
//! `persist::resident::snapshot_file`'s format.
//!
//! Invariant: the installed snapshot plus the command log from its point
//! on re-execute to the state the log alone would give: the files hold
//! exactly the state at the point, and every record the point does not
//! cover is kept.

mod install;
pub(crate) mod load;
mod shadow;
mod write;

pub(crate) use install::remove_other_snapshots;
pub(crate) use shadow::Shadow;
pub(crate) use write::Point;

use super::log::CommandLog;
use super::options::CommandSnapshot;
use crate::error::{Error, IoOp, Result};
use crate::io::Storage;
use crate::procedure::SerialOrder;
use crate::txn::shared::DbShared;
use parking_lot::{Condvar, Mutex};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// The snapshots' directory inside `command/`.
pub const SNAPSHOTS_DIR: &str = "snapshots";
/// The file naming the installed snapshot, inside `command/`.
pub const META_FILE: &str = "snapshot.meta";
pub(crate) const META_TEMP: &str = "snapshot.meta.tmp";
/// A snapshot's catalog file.
pub const CATALOG_FILE: &str = "catalog.snap";

/// Snapshot `id`'s directory.
pub fn snapshot_dir(command: &Path, id: u64) -> PathBuf {
    command.join(SNAPSHOTS_DIR).join(format!("s{id:08}"))
}

/// Part `part` of table `id`'s rows in a snapshot directory: part 0 is
/// the table's first (and, for a small table, only) file; a table larger
/// than [`PART_BYTES`] goes on in parts 1, 2, ... of later key ranges, so
/// that recovery loads it on several threads.
pub fn table_file(dir: &Path, id: u32, part: u32) -> PathBuf {
    if part == 0 {
        dir.join(format!("t{id:010}.snap"))
    } else {
        dir.join(format!("t{id:010}-{part:06}.snap"))
    }
}

/// A table's file is closed, and its next key range goes to a new part,
/// once it holds about this many bytes.
pub const PART_BYTES: u64 = 16 << 20;

/// The snapshot directories below `command/`, by id, ascending.
pub fn snapshots(storage: &dyn Storage, command: &Path) -> Result<Vec<(u64, PathBuf)>> {
    crate::persist::resident::numbered_dirs(storage, &command.join(SNAPSHOTS_DIR), 's')
}

/// Where a snapshot is, for tests that crash at each point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotStage {
    /// The point is marked, the shadow active; nothing written yet.
    Marked,
    /// A batch of a table's rows is written (its id, rows so far).
    Batch { table: u32, rows: u64 },
    /// A table's file is written and synced (its id, its rows).
    Table { table: u32, rows: u64 },
    /// Every file is written and synced, not yet installed.
    Written,
    /// The meta file names it; nothing pruned yet.
    Installed,
    /// The log before it, older generations and snapshots are deleted.
    Pruned,
}

/// A test's look at each stage (called on the snapshotting thread).
pub type StageHook = Arc<dyn Fn(SnapshotStage) + Send + Sync>;

/// The counters `CommandStats` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Counters {
    pub started: u64,
    pub installed: u64,
    pub failed: u64,
    /// Given up because a table was dropped while it was written.
    pub abandoned: u64,
    pub bytes: u64,
    pub last_bytes: u64,
    pub last_rows: u64,
    pub last_sequence: u64,
    /// Pre-images the last snapshot kept.
    pub last_pre_images: u64,
    pub log_bytes_deleted: u64,
}

/// What the snapshot thread and the scheme share.
pub(super) struct Snapshotter {
    storage: Arc<dyn Storage>,
    /// `command/`.
    dir: PathBuf,
    log: Arc<CommandLog>,
    order: Arc<SerialOrder>,
    pub shadow: Arc<Shadow>,
    /// The generation this run logs to.
    generation: u64,
    trigger: CommandSnapshot,
    db: Mutex<Option<Weak<DbShared>>>,
    next_id: AtomicU64,
    /// One snapshot at a time (the thread's and a test's).
    running: Mutex<()>,
    stop: Mutex<bool>,
    wake: Condvar,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    pub counters: Mutex<Counters>,
    pub hook: Mutex<Option<StageHook>>,
    /// Bytes of the older generations' logs (left by crashes since the
    /// last clean close), counted towards `CommandSnapshot::LogLimit`
    /// until an install deletes them: replay reads them too.
    sealed_log_bytes: AtomicU64,
    /// A table's file is closed beyond this (`PART_BYTES`; tests lower
    /// it to write many parts of little data).
    pub part_bytes: AtomicU64,
}

impl Snapshotter {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        storage: Arc<dyn Storage>,
        dir: PathBuf,
        log: Arc<CommandLog>,
        order: Arc<SerialOrder>,
        shadow: Arc<Shadow>,
        generation: u64,
        trigger: CommandSnapshot,
        last_id: u64,
    ) -> Arc<Self> {
        let sealed = crate::persist::resident::older_generations_bytes(storage.as_ref(), &dir, generation)
            .unwrap_or_else(|e| {
                // Only the trigger comes later for it.
                tracing::warn!(error = %e, "command log generations not measured");
                0
            });
        Arc::new(Snapshotter {
            storage,
            dir,
            log,
            order,
            shadow,
            generation,
            trigger,
            db: Mutex::new(None),
            next_id: AtomicU64::new(last_id + 1),
            running: Mutex::new(()),
            stop: Mutex::new(false),
            wake: Condvar::new(),
            thread: Mutex::new(None),
            counters: Mutex::new(Counters::default()),
            hook: Mutex::new(None),
            sealed_log_bytes: AtomicU64::new(sealed),
            part_bytes: AtomicU64::new(PART_BYTES),
        })
    }

    fn stage(&self, stage: SnapshotStage) {
        let hook = self.hook.lock().clone();
        if let Some(h) = hook {
            h(stage);
        }
    }

    fn stopped(&self) -> bool {
        *self.stop.lock()
    }

    /// The database is built: start the trigger thread (none with
    /// `CommandSnapshot::Off`).
    pub fn start(self: &Arc<Self>, db: Weak<DbShared>) -> Result<()> {
        *self.db.lock() = Some(db);
        if self.trigger == CommandSnapshot::Off {
            return Ok(());
        }
        let me = Arc::clone(self);
        let handle = std::thread::Builder::new()
            .name("waypoint-command-snapshot".into())
            .spawn(move || me.run())
            .map_err(|e| Error::io(IoOp::Open, "snapshot thread", None, e))?;
        *self.thread.lock() = Some(handle);
        Ok(())
    }

    /// Stop the trigger thread (a snapshot in progress is abandoned: its
    /// files are removed by the next snapshot or open).
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

    /// Log bytes on disk: this generation's segments and the older
    /// generations' until an install deletes them.
    pub fn log_bytes(&self) -> u64 {
        self.log.stream.disk_bytes() + self.sealed_log_bytes.load(Ordering::Relaxed)
    }

    fn due(&self, last_start: Instant) -> bool {
        match self.trigger {
            CommandSnapshot::Off => false,
            CommandSnapshot::Periodic { interval } => last_start.elapsed() >= interval,
            CommandSnapshot::LogLimit(limit) => self.log_bytes() > limit,
        }
    }

    fn run(&self) {
        // The first period counts from the open.
        let mut last_start = Instant::now();
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
            last_start = Instant::now();
            match self.snapshot(&db) {
                Ok(_) => failures = 0,
                Err(e) => {
                    failures += 1;
                    self.counters.lock().failed += 1;
                    if !self.stopped() {
                        tracing::warn!(error = %e, "a command snapshot failed; the log is kept");
                    }
                }
            }
        }
    }

    /// Take, install and prune one snapshot; its point, or `None` if
    /// stopped or abandoned first.
    pub fn snapshot(&self, db: &DbShared) -> Result<Option<Point>> {
        let _one = self.running.lock();
        db.check_open()?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.counters.lock().started += 1;
        let taken = write::take(self, db, id);
        self.counters.lock().last_pre_images = self.shadow.registered.load(Ordering::Relaxed);
        let Some(written) = taken? else {
            if !self.stopped() {
                self.counters.lock().abandoned += 1;
            }
            return Ok(None);
        };
        self.stage(SnapshotStage::Written);
        install::install(self, &written)?;
        self.stage(SnapshotStage::Installed);
        install::prune(self, &written.point)?;
        self.stage(SnapshotStage::Pruned);
        Ok(Some(written.point))
    }

    /// A snapshot now, on the caller's thread (for tests and tools).
    pub fn snapshot_now(&self) -> Result<Option<Point>> {
        let db = self
            .db
            .lock()
            .as_ref()
            .and_then(Weak::upgrade)
            .ok_or(Error::Closed)?;
        self.snapshot(&db)
    }
}

/// What `waypoint inspect` shows of the `command` scheme's snapshots.
#[derive(Debug, Clone, Default)]
pub struct CommandFiles {
    /// The installed snapshot's (id, generation, position, sequence), or
    /// why the meta file is unreadable; `None` if there is none.
    pub installed: Option<std::result::Result<(u64, u64, u64, u64), String>>,
    /// Every snapshot directory, by id.
    pub snapshots: Vec<SnapshotFiles>,
}

/// One snapshot directory.
#[derive(Debug, Clone, Default)]
pub struct SnapshotFiles {
    pub id: u64,
    /// Named by the meta file.
    pub installed: bool,
    /// (path, bytes, rows, or why the file does not read whole).
    pub files: Vec<crate::persist::resident::snapshot_file::ListedFile>,
}

/// Read `command/` below `dir` (reads only).
pub fn inspect(storage: &dyn Storage, dir: &Path) -> Result<CommandFiles> {
    let command = dir.join(super::COMMAND_DIR);
    let installed = if storage.exists(&command.join(META_FILE)) {
        Some(
            install::read_meta(storage, &command)
                .map(|p| {
                    let p = p.expect("the meta file exists");
                    (p.id, p.generation, p.position, p.sequence)
                })
                .map_err(|e| e.to_string()),
        )
    } else {
        None
    };
    let installed_id = installed.as_ref().and_then(|i| i.as_ref().ok()).map(|i| i.0);
    let mut out = Vec::new();
    for (id, path) in snapshots(storage, &command)? {
        let files = crate::persist::resident::snapshot_file::list_dir(
            storage,
            &path,
            crate::persist::SchemeKind::Command,
        )?;
        out.push(SnapshotFiles {
            id,
            installed: installed_id == Some(id),
            files,
        });
    }
    Ok(CommandFiles {
        installed,
        snapshots: out,
    })
}
