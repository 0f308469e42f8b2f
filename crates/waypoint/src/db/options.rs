//! How to open a database: the engine's own options and the persistence
//! scheme with its options ([`Persistence`]), each with a documented
//! range that [`Options::validate`] checks before anything is opened.

use crate::buffer::page;
use crate::central::CentralOptions;
use crate::command::CommandOptions;
use crate::error::{Error, Result};
use crate::io::Storage;
use crate::persist::SchemeKind;
use crate::silor::SilorOptions;
use crate::wal::PerWorkerOptions;
use std::sync::Arc;

/// Which persistence scheme a database runs, with its options. The
/// superblock records the scheme; a database is reopened with the scheme
/// it was created with (a cleanly closed one may switch between schemes
/// whose clean state is the data file: `none`, `per-worker`, `aries`,
/// `aether`).
#[derive(Debug, Clone, PartialEq)]
pub enum Persistence {
    /// No log: durable only after a clean close (for measuring the cost of
    /// logging; a crash can lose or tear changes since the last close).
    None,
    /// Seed 000: one log partition per session, ordered by GSNs, with
    /// RFA, continuous checkpoints and steal with undo.
    PerWorker(PerWorkerOptions),
    /// Seed 000 §4's ARIES baseline: one log for every session, appended
    /// under one latch, full checkpoints by default.
    Aries(CentralOptions),
    /// The same central log with Aether's consolidation array, decoupled
    /// buffer fill and flush pipelining (Johnson et al., PVLDB 2010).
    Aether(CentralOptions),
    /// Seed 002's SiloR: memory-resident (no steal: writes fail with
    /// `MemoryFull` once the pool is full of changes), value logs written
    /// by logger threads, commits acknowledged per persistent epoch.
    Silor(SilorOptions),
    /// Seed 001's command logging (VoltDB): memory-resident like `Silor`;
    /// writes only inside stored procedures, run serially per partition;
    /// only the calls are logged, and recovery runs them again.
    Command(CommandOptions),
}

impl Default for Persistence {
    fn default() -> Self {
        Persistence::PerWorker(PerWorkerOptions::default())
    }
}

impl Persistence {
    /// The scheme `kind`, with `per_worker` as its log options where it
    /// has a log (ignored otherwise; a central log takes them through
    /// [`CentralOptions::from_log`]).
    pub fn of(kind: SchemeKind, per_worker: PerWorkerOptions) -> Self {
        match kind {
            SchemeKind::None => Persistence::None,
            SchemeKind::PerWorker => Persistence::PerWorker(per_worker),
            SchemeKind::Aries => Persistence::Aries(CentralOptions::from_log(per_worker)),
            SchemeKind::Aether => Persistence::Aether(CentralOptions::from_log(per_worker)),
            SchemeKind::Silor => Persistence::Silor(SilorOptions::default()),
            SchemeKind::Command => Persistence::Command(CommandOptions::default()),
        }
    }

    /// The scheme `kind` with its own defaults (for a central log, seed 000
    /// §4's: group commit and full checkpoints).
    pub fn default_of(kind: SchemeKind) -> Self {
        match kind {
            SchemeKind::Aries => Persistence::Aries(CentralOptions::default()),
            SchemeKind::Aether => Persistence::Aether(CentralOptions::default()),
            other => Persistence::of(other, PerWorkerOptions::default()),
        }
    }

    pub fn kind(&self) -> SchemeKind {
        match self {
            Persistence::None => SchemeKind::None,
            Persistence::PerWorker(_) => SchemeKind::PerWorker,
            Persistence::Aries(_) => SchemeKind::Aries,
            Persistence::Aether(_) => SchemeKind::Aether,
            Persistence::Silor(_) => SchemeKind::Silor,
            Persistence::Command(_) => SchemeKind::Command,
        }
    }

    /// The log's options of a scheme with a log (the per-worker scheme's,
    /// a central log's `log`).
    pub fn log_options(&self) -> Option<&PerWorkerOptions> {
        match self {
            Persistence::PerWorker(o) => Some(o),
            Persistence::Aries(c) | Persistence::Aether(c) => Some(&c.log),
            Persistence::None | Persistence::Silor(_) | Persistence::Command(_) => None,
        }
    }

    /// The per-worker scheme's options, if that is the scheme.
    pub fn per_worker(&self) -> Option<&PerWorkerOptions> {
        match self {
            Persistence::PerWorker(o) => Some(o),
            _ => None,
        }
    }

    pub fn per_worker_mut(&mut self) -> Option<&mut PerWorkerOptions> {
        match self {
            Persistence::PerWorker(o) => Some(o),
            _ => None,
        }
    }

    fn validate(&self) -> Result<()> {
        match self {
            Persistence::None => Ok(()),
            Persistence::PerWorker(o) => o.validate(),
            Persistence::Aries(c) | Persistence::Aether(c) => c.validate(),
            Persistence::Silor(o) => o.validate(),
            Persistence::Command(o) => o.validate(),
        }
    }
}

/// How to open a database.
///
/// Every field has a range, given in its documentation; [`Options::validate`]
/// checks them all (`Database::open` calls it before touching anything) and
/// names the first option out of range, its value and the range in
/// [`Error::InvalidOptions`]. [`Options::default`] is valid.
#[derive(Clone)]
pub struct Options {
    /// Page size for a new database (4 KiB to 64 KiB, a power of two).
    /// `None`: 16 KiB for a new database, the stored size for an existing
    /// one. A value that differs from an existing database's is an error.
    pub page_size: Option<usize>,
    /// Memory for page frames, in bytes. Data larger than this works; the
    /// page provider evicts pages to stay within it.
    ///
    /// Range: at least 16 pages (what one B-tree operation of a handful of
    /// sessions latches at once: 256 KiB at 16 KiB pages); at most the
    /// machine's memory and swap, and 2^32 − 1 pages. The frames are
    /// reserved when the database opens; if the system refuses them,
    /// `open` fails with [`Error::OutOfMemory`].
    pub buffer_pool_bytes: usize,
    /// Create the database if the directory holds none.
    pub create_if_missing: bool,
    /// Open the data file with `O_DIRECT` (the double-write file and the
    /// checkpoint metadata are written at unaligned offsets and stay
    /// buffered; the log has `log_direct_io`).
    pub direct_io: bool,
    /// The file system to use; `None` is the real one ([`RealStorage`]).
    /// Tests pass the simulated disk (`io::SimStorage`, with the
    /// `internals` feature).
    ///
    /// [`RealStorage`]: crate::io::RealStorage
    pub storage: Option<Arc<dyn Storage>>,
    /// Threads for recovery: analysis (segments of every partition
    /// shared out), redo (page shards, eight per thread, taken largest first) and undo each run on
    /// at most this many. Range: 1 to 1024. Default: the cores the process
    /// may use.
    pub recovery_threads: usize,
    /// The persistence scheme and its options (default: per-worker).
    pub persistence: Persistence,
    /// The stored procedures `Session::call` runs (default: none). Under
    /// the `command` scheme recovery runs the logged calls again, so a
    /// database must be reopened with every procedure its log names.
    pub procedures: crate::procedure::Procedures,
    /// How long one wait for a record's lock may last where
    /// `Transaction::get_for_update` is involved: a wait for a lock it took
    /// (by another `get_for_update`, or by any commit of the record), and
    /// any wait by a transaction that used it (for a lock held by anyone).
    /// Then the waiter gives up with [`Error::Conflict`]. Those locks come in the
    /// application's order and are held outside the commit, so such a
    /// wait can be part of a deadlock; one between two such transactions
    /// ends sooner (the younger gives way, and then waits up to this long
    /// for the older to end before it returns). Range: 0 (never wait) to
    /// 10 s. Default: 5 ms, long against a commit's hold of a lock (a few
    /// microseconds) and a scheduler's time slice.
    pub lock_wait: std::time::Duration,
}

/// One recovery thread per core the process may use, within the range.
fn default_recovery_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, Options::MAX_RECOVERY_THREADS)
}

impl Default for Options {
    fn default() -> Self {
        Options {
            page_size: None,
            buffer_pool_bytes: 256 << 20,
            create_if_missing: true,
            direct_io: false,
            storage: None,
            recovery_threads: default_recovery_threads(),
            persistence: Persistence::default(),
            procedures: crate::procedure::Procedures::default(),
            lock_wait: Options::DEFAULT_LOCK_WAIT,
        }
    }
}

/// An option out of its range, as [`Error::InvalidOptions`] says it.
pub(crate) fn out_of_range(option: &str, value: impl std::fmt::Display, range: String) -> Error {
    Error::InvalidOptions(format!("{option} = {value} is out of range: {range}"))
}

impl Options {
    pub const MAX_RECOVERY_THREADS: usize = 1024;
    pub const DEFAULT_LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(5);
    pub const MAX_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

    /// These options with the per-worker scheme's options changed by
    /// `change` (starting from the per-worker defaults if another scheme
    /// was chosen).
    pub fn with_per_worker(mut self, change: impl FnOnce(&mut PerWorkerOptions)) -> Self {
        if self.persistence.per_worker().is_none() {
            self.persistence = Persistence::default();
        }
        if let Some(o) = self.persistence.per_worker_mut() {
            change(o);
        }
        self
    }

    /// The default options with another persistence scheme.
    pub fn with_persistence(persistence: Persistence) -> Self {
        Options {
            persistence,
            ..Options::default()
        }
    }

    pub fn validate(&self) -> Result<()> {
        if let Some(ps) = self.page_size {
            if !page::is_valid_page_size(ps) {
                return Err(out_of_range(
                    "page_size",
                    ps,
                    format!(
                        "a power of two from {} to {}",
                        page::MIN_PAGE_SIZE,
                        page::MAX_PAGE_SIZE
                    ),
                ));
            }
        }
        let page_size = self.page_size.unwrap_or(page::MIN_PAGE_SIZE);
        let min_frames = crate::buffer::pool::MIN_FRAMES;
        let min_buffer = min_frames * page_size;
        let max_frames = u32::MAX as usize;
        let memory = crate::io::machine_memory_bytes()
            .map_or(usize::MAX, |m| usize::try_from(m).unwrap_or(usize::MAX));
        let buffer = self.buffer_pool_bytes;
        let buffer_text = format_bytes(buffer as u64);
        if buffer < min_buffer {
            return Err(out_of_range(
                "buffer_pool_bytes",
                &buffer_text,
                format!(
                    "at least {} ({min_frames} pages of {page_size} bytes)",
                    format_bytes(min_buffer as u64)
                ),
            ));
        }
        if buffer > memory {
            return Err(out_of_range(
                "buffer_pool_bytes",
                &buffer_text,
                format!(
                    "at most the machine's memory and swap, {}",
                    format_bytes(memory as u64)
                ),
            ));
        }
        if buffer / page_size > max_frames {
            return Err(out_of_range(
                "buffer_pool_bytes",
                &buffer_text,
                format!("at most {max_frames} pages of {page_size} bytes"),
            ));
        }
        if !(1..=Self::MAX_RECOVERY_THREADS).contains(&self.recovery_threads) {
            return Err(out_of_range(
                "recovery_threads",
                self.recovery_threads,
                format!("1 to {}", Self::MAX_RECOVERY_THREADS),
            ));
        }
        if self.lock_wait > Self::MAX_LOCK_WAIT {
            return Err(out_of_range(
                "lock_wait",
                format!("{:?}", self.lock_wait),
                format!("at most {:?}", Self::MAX_LOCK_WAIT),
            ));
        }
        self.persistence.validate()
    }
}

/// `n` bytes exactly in the largest binary unit that divides it ("64 KiB",
/// "99999 TiB"), or, where that takes more than six digits, as bytes with
/// a rounded figure.
pub(crate) fn format_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB"];
    match n {
        0 => return "0 bytes".into(),
        1 => return "1 byte".into(),
        _ => {}
    }
    let exact = (0..UNITS.len())
        .rev()
        .find(|&u| n.is_multiple_of(1 << (10 * u)))
        .unwrap_or(0);
    if n >> (10 * exact) < 1 << 20 {
        return format!("{} {}", n >> (10 * exact), UNITS[exact]);
    }
    let near = (0..UNITS.len())
        .rev()
        .find(|&u| n >= 1 << (10 * u))
        .unwrap_or(0);
    format!(
        "{n} bytes (about {:.1} {})",
        n as f64 / (1u64 << (10 * near)) as f64,
        UNITS[near]
    )
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("page_size", &self.page_size)
            .field("buffer_pool_bytes", &self.buffer_pool_bytes)
            .field("create_if_missing", &self.create_if_missing)
            .field("direct_io", &self.direct_io)
            .field("storage", &self.storage.as_ref().map(|_| "custom"))
            .field("recovery_threads", &self.recovery_threads)
            .field("persistence", &self.persistence)
            .field("procedures", &self.procedures)
            .finish()
    }
}
