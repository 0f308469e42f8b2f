//! The benchmark driver: opens the database, lets the workload load it,
//! runs N worker threads (a session each) for a fixed time or transaction
//! count, samples the engine once per second, and builds the summary.
//!
//! Each worker keeps up to `in_flight` commits pipelined
//! (`Transaction::commit_pipelined`) and resolves them oldest first; with
//! `in_flight = 1` it commits one at a time (`Transaction::commit`). A
//! transaction counts as committed when its commit is durable, and its
//! latency runs from `begin` until then. The warm-up (whole seconds) is sampled into the series but
//! excluded from the summary's counts and latencies.
//!
//! Worker threads are pinned to cores ([`DriverConfig::pin`]): worker `w`
//! to the `w % n`-th of the `n` cores the process may run on; by default
//! only when there are at least as many cores as workers. The summary's
//! config records whether pinning was applied (`pinned`).

use crate::error::{BenchError, BenchResult};
use crate::metrics::{Sample, Snapshot};
use crate::plots::{self, Cdf};
use crate::report::new_histogram;
use crate::summary::{self, RecoverySummary, Summary};
use crate::workload::{is_abort, InFlightCall, Workload};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use waypoint::{
    CommitProtocol, Database, Options, PendingCommit, PerWorkerOptions, Persistence, SchemeKind,
};

/// What a run is given. [`DriverConfig::validate`] checks the ranges
/// documented on the fields (and the engine's options with
/// [`Options::validate`]); [`run`] calls it before anything is opened.
#[derive(Debug, Clone, Serialize)]
pub struct DriverConfig {
    /// Database directory; a fresh temporary one if None.
    pub dir: Option<PathBuf>,
    /// Where `summary.json` and `series.csv` go; nothing is written if None.
    pub out: Option<PathBuf>,
    /// Worker threads, a session each: 1 to [`MAX_WORKERS`].
    pub workers: usize,
    /// Measured seconds (after the warm-up): finite, above 0, at most
    /// [`MAX_SECONDS`].
    pub duration_secs: f64,
    /// Whole seconds of warm-up before measuring: at most [`MAX_SECONDS`].
    pub warmup_secs: u64,
    /// Stop once this many transactions committed after the warm-up (at
    /// least 1).
    pub max_txns: Option<u64>,
    /// Offered load: at most this many transactions started a second,
    /// across the workers (each starts its share on a schedule and does
    /// not make up for time lost behind it); `None`: as fast as they go.
    pub rate: Option<f64>,
    /// Commits in flight per worker (1: wait for each); at least 1.
    pub in_flight: usize,
    pub buffer_bytes: usize,
    pub page_size: usize,
    /// The persistence scheme; the fields from `commit` to `log_direct_io`
    /// (but `recovery_threads` and `direct_io`) are the per-worker
    /// scheme's options, and unused under another scheme.
    #[serde(skip)]
    pub scheme: SchemeKind,
    #[serde(skip)]
    pub commit: CommitProtocol,
    #[serde(skip)]
    pub checkpoint: waypoint::CheckpointMode,
    pub wal_limit_bytes: u64,
    /// `PerWorkerOptions::log_sync_interval`, in microseconds.
    pub sync_interval_us: u64,
    /// `PerWorkerOptions::wal_segment_bytes`.
    pub segment_bytes: u64,
    /// `PerWorkerOptions::wal_preallocate`.
    pub wal_preallocate: bool,
    /// `PerWorkerOptions::wal_zero_fill`.
    pub wal_zero_fill: bool,
    pub checkpoint_shards: usize,
    pub checkpoint_threads: usize,
    /// The `silor` scheme's options: loggers, checkpoint trigger and
    /// checkpointer threads.
    #[serde(skip)]
    pub silor: waypoint::SilorOptions,
    /// The `command` scheme's snapshot trigger.
    #[serde(skip)]
    pub command_snapshot: waypoint::CommandSnapshot,
    /// `CommandOptions::executors`: calls run on an executor thread per
    /// partition, and workers hand them over (`Worker::submit`).
    pub executors: bool,
    pub recovery_threads: usize,
    /// `PerWorkerOptions::wal_archive_dir`.
    pub wal_archive: Option<PathBuf>,
    pub direct_io: bool,
    /// `PerWorkerOptions::log_direct_io`.
    pub log_direct_io: bool,
    pub seed: u64,
    /// Run the workload's invariant check after the workers stop.
    pub verify: bool,
    /// Pin worker threads to cores: `Some(true)` always, `Some(false)`
    /// never, `None` when there are at least as many cores as workers.
    #[serde(skip)]
    pub pin: Option<bool>,
    /// Set from outside (Ctrl-C in `waypoint compare`) to end the run at
    /// the next check, within about 10 ms: the run then ends as if its
    /// time were up, and its summary covers the shorter window.
    #[serde(skip)]
    pub interrupt: Option<Arc<AtomicBool>>,
}

/// The default window of commits in flight per worker under `silor`.
/// Its commits are acknowledged once per epoch (40 ms, when pepoch covers
/// it), so a worker with `in_flight` commits pending completes at most
/// `in_flight` per epoch (Little's law): the general default of 128 caps
/// it near 3,200 txn/s. This window is far above what a worker commits in
/// an epoch, so the epoch, not the window, sets the latency and the
/// workers run at the engine's pace (`scripts/silor-matrix.sh`).
pub const SILOR_IN_FLIGHT: usize = 65_536;

impl DriverConfig {
    /// The window of commits in flight per worker for `scheme` when none
    /// is given: [`SILOR_IN_FLIGHT`] for `silor`, else the default's.
    pub fn default_in_flight(scheme: SchemeKind) -> usize {
        match scheme {
            SchemeKind::Silor => SILOR_IN_FLIGHT,
            _ => DriverConfig::default().in_flight,
        }
    }
}

impl Default for DriverConfig {
    fn default() -> Self {
        let engine = Options::default();
        let log = PerWorkerOptions::default();
        DriverConfig {
            dir: None,
            out: None,
            workers: 2,
            duration_secs: 10.0,
            warmup_secs: 2,
            max_txns: None,
            rate: None,
            // A window this deep rides out the log's slow syncs: with 32,
            // 1-worker TPC-C blocked on a full window and ran about 10%
            // slower (docs/decisions/measurements.md, "2026-11-22: fewer writer
            // wake-ups, GSN_flushed without locks").
            in_flight: 128,
            buffer_bytes: 1 << 30,
            page_size: 16384,
            scheme: SchemeKind::PerWorker,
            commit: CommitProtocol::RfaGroup,
            checkpoint: waypoint::CheckpointMode::Continuous,
            wal_limit_bytes: 1 << 30,
            sync_interval_us: log.log_sync_interval.as_micros() as u64,
            segment_bytes: log.wal_segment_bytes,
            wal_preallocate: log.wal_preallocate,
            wal_zero_fill: log.wal_zero_fill,
            checkpoint_shards: log.checkpoint_shards,
            checkpoint_threads: log.checkpoint_threads,
            silor: waypoint::SilorOptions::default(),
            command_snapshot: waypoint::CommandSnapshot::default(),
            executors: waypoint::CommandOptions::default().executors,
            recovery_threads: engine.recovery_threads,
            wal_archive: None,
            direct_io: engine.direct_io,
            log_direct_io: log.log_direct_io,
            seed: 42,
            verify: true,
            pin: None,
            interrupt: None,
        }
    }
}

/// Most worker threads of a run: far more than cores on any machine the
/// benchmarks run on, and within the engine's 65,535 sessions (the load
/// uses as many threads as the run).
pub const MAX_WORKERS: usize = 4096;

/// Longest run or warm-up: a year, in seconds.
pub const MAX_SECONDS: u64 = 365 * 24 * 3600;

/// The error for an option out of its range, worded as the engine's
/// `Error::InvalidOptions`: the option, its value, the range.
pub fn out_of_range(option: &str, value: impl std::fmt::Display, range: &str) -> BenchError {
    BenchError::Config(format!("{option} = {value} is out of range: {range}"))
}

/// `seconds` is a finite number above 0 and at most [`MAX_SECONDS`].
pub fn check_seconds(option: &str, seconds: f64) -> BenchResult<()> {
    if seconds.is_finite() && seconds > 0.0 && seconds <= MAX_SECONDS as f64 {
        return Ok(());
    }
    Err(out_of_range(
        option,
        format!("{seconds:?}"),
        &format!("a number of seconds above 0 and at most {MAX_SECONDS} (a year)"),
    ))
}

/// `workers` is 1 to [`MAX_WORKERS`].
pub fn check_workers(option: &str, workers: usize) -> BenchResult<()> {
    if (1..=MAX_WORKERS).contains(&workers) {
        return Ok(());
    }
    Err(out_of_range(
        option,
        workers,
        &format!("1 to {MAX_WORKERS}"),
    ))
}

impl DriverConfig {
    /// The engine's options for this run (`create_if_missing` as for a new
    /// database: [`run`] clears it for an existing one).
    pub fn engine_options(&self) -> Options {
        Options {
            page_size: Some(self.page_size),
            buffer_pool_bytes: self.buffer_bytes,
            recovery_threads: self.recovery_threads,
            direct_io: self.direct_io,
            persistence: self.persistence(),
            procedures: crate::procedures(),
            ..Options::default()
        }
    }

    /// The scheme and, for the per-worker one, its options (`command`:
    /// a partition per worker, as VoltDB runs a site per core).
    pub fn persistence(&self) -> Persistence {
        if self.scheme == waypoint::SchemeKind::Silor {
            return Persistence::Silor(self.silor.clone());
        }
        if self.scheme == waypoint::SchemeKind::Command {
            return Persistence::Command(waypoint::CommandOptions {
                partitions: self
                    .workers
                    .clamp(1, waypoint::CommandOptions::MAX_PARTITIONS),
                snapshot: self.command_snapshot,
                digests: false,
                sync_interval: Duration::from_micros(self.sync_interval_us),
                executors: self.executors,
            });
        }
        Persistence::of(
            self.scheme,
            PerWorkerOptions {
                commit: self.commit,
                checkpoint: self.checkpoint,
                wal_limit_bytes: self.wal_limit_bytes,
                log_sync_interval: Duration::from_micros(self.sync_interval_us),
                wal_segment_bytes: self.segment_bytes,
                wal_preallocate: self.wal_preallocate,
                wal_zero_fill: self.wal_zero_fill,
                checkpoint_shards: self.checkpoint_shards,
                checkpoint_threads: self.checkpoint_threads,
                wal_archive_dir: self.wal_archive.clone(),
                log_direct_io: self.log_direct_io,
            },
        )
    }

    /// Check every field against its documented range, and the engine's
    /// options against theirs; the error names the field (or the
    /// option), its value and the range.
    pub fn validate(&self) -> BenchResult<()> {
        check_workers("workers", self.workers)?;
        check_seconds("duration_secs", self.duration_secs)?;
        if self.warmup_secs > MAX_SECONDS {
            return Err(out_of_range(
                "warmup_secs",
                self.warmup_secs,
                &format!("0 to {MAX_SECONDS} (a year)"),
            ));
        }
        if self.max_txns == Some(0) {
            return Err(out_of_range("max_txns", 0, "at least 1"));
        }
        if self.in_flight == 0 {
            return Err(out_of_range("in_flight", 0, "at least 1"));
        }
        if let Some(rate) = self.rate {
            if !(rate.is_finite() && (1.0..=1e9).contains(&rate)) {
                return Err(out_of_range("rate", rate, "1 to 1e9 transactions a second"));
            }
        }
        self.engine_options().validate()?;
        Ok(())
    }
}

/// `auto`, `on` or `off`, as the summary's config shows `pin`.
pub fn pin_name(pin: Option<bool>) -> &'static str {
    match pin {
        None => "auto",
        Some(true) => "on",
        Some(false) => "off",
    }
}

/// The cores to pin `workers` worker threads to (worker `w` to
/// `cores[w % cores.len()]`), or None if they are not pinned.
pub fn pin_cores(pin: Option<bool>, workers: usize) -> Option<Vec<core_affinity::CoreId>> {
    if pin == Some(false) {
        return None;
    }
    let cores = core_affinity::get_core_ids().filter(|c| !c.is_empty())?;
    (pin == Some(true) || cores.len() >= workers).then_some(cores)
}

/// Everything a run produced.
pub struct RunOutput {
    pub summary: Summary,
    pub series: Vec<Sample>,
    /// The PNG plots written next to `summary.json` (none without `out`,
    /// or if plotting failed).
    pub plots: Vec<PathBuf>,
    /// Problems that did not lose the run (a plot that could not be
    /// written), one line each.
    pub warnings: Vec<String>,
}

/// Shared by the workers and the sampling thread (here and in
/// [`crate::peers::drive`]).
pub(crate) struct Counters {
    pub(crate) committed: Vec<AtomicU64>,
    pub(crate) aborts: Vec<AtomicU64>,
    pub(crate) stop: AtomicBool,
    pub(crate) measuring: AtomicBool,
    pub(crate) running: AtomicUsize,
}

impl Counters {
    /// For `types` transaction types and `workers` running workers.
    pub(crate) fn new(types: usize, workers: usize, config: &DriverConfig) -> Self {
        Counters {
            committed: (0..types).map(|_| AtomicU64::new(0)).collect(),
            aborts: (0..types).map(|_| AtomicU64::new(0)).collect(),
            stop: AtomicBool::new(false),
            measuring: AtomicBool::new(config.warmup_secs == 0),
            running: AtomicUsize::new(workers),
        }
    }

    pub(crate) fn load(v: &[AtomicU64]) -> Vec<u64> {
        v.iter().map(|c| c.load(Ordering::Relaxed)).collect()
    }
}

/// A database directory must be missing, empty, or hold a database.
pub fn check_dir(dir: &std::path::Path) -> BenchResult<()> {
    let exists = dir.join(waypoint::DATA_FILE).exists();
    if !exists && std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(BenchError::Config(format!(
            "{} is not a waypoint database (no {}) and not empty",
            dir.display(),
            waypoint::DATA_FILE
        )));
    }
    Ok(())
}

/// Open the database `dir` (or a temporary one). An existing directory
/// must be empty or hold a waypoint database. Also returns what recovery
/// did if an existing database needed it.
fn open(
    config: &DriverConfig,
) -> BenchResult<(Option<tempfile::TempDir>, Database, Option<RecoverySummary>)> {
    let (dir, tmp) = match &config.dir {
        Some(d) => (d.clone(), None),
        None => {
            let t = tempfile::tempdir().map_err(|e| BenchError::io(std::env::temp_dir(), e))?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    check_dir(&dir)?;
    let exists = dir.join(waypoint::DATA_FILE).exists();
    let options = Options {
        create_if_missing: !exists,
        ..config.engine_options()
    };
    let t0 = Instant::now();
    let db = Database::open(&dir, options)?;
    let recovery = db
        .recovery_report()
        .filter(|r| exists && RecoverySummary::needed(r))
        .map(|r| RecoverySummary::of(r, t0.elapsed()));
    Ok((tmp, db, recovery))
}

/// Load (or check) the workload's data, run it, verify, close cleanly, and
/// write `summary.json`, `series.csv` and the PNG plots ([`crate::plots`])
/// to `config.out`; a plot that fails becomes a warning. `progress` is
/// called with every per-second sample. The configuration and the
/// workload's parameters are validated before anything is opened.
pub fn run(
    config: &DriverConfig,
    workload: &mut dyn Workload,
    progress: &(dyn Fn(&Sample) + Sync),
) -> BenchResult<RunOutput> {
    config.validate()?;
    workload.validate(config.page_size)?;
    // `_tmp` first: bindings drop in reverse, so a database left open by
    // an error closes before its temporary directory is removed.
    let (_tmp, db, recovery) = open(config)?;
    let t0 = Instant::now();
    let loaded = workload.setup(&db, config.workers)?;
    let load_seconds = t0.elapsed().as_secs_f64();
    let workload: &dyn Workload = workload;
    let types = workload.txn_types();
    let counters = Counters::new(types.len(), config.workers, config);
    let cores = pin_cores(config.pin, config.workers);
    // Cleared by a worker whose pinning failed.
    let pinned = AtomicBool::new(cores.is_some());
    let snapshot = || {
        Snapshot::take(
            &db,
            Counters::load(&counters.committed),
            Counters::load(&counters.aborts),
        )
    };

    let (series, base, end, measured_secs, hists) = std::thread::scope(|s| -> BenchResult<_> {
        let mut handles = Vec::with_capacity(config.workers);
        for w in 0..config.workers {
            let (db, counters, pinned) = (&db, &counters, &pinned);
            let core = cores.as_ref().map(|c| c[w % c.len()]);
            let spawned = std::thread::Builder::new()
                .name(format!("bench-worker-{w}"))
                .spawn_scoped(s, move || {
                    if let Some(core) = core {
                        if !core_affinity::set_for_current(core) {
                            pinned.store(false, Ordering::Relaxed);
                        }
                    }
                    let r = worker_loop(db, workload, config, w, counters);
                    if r.is_err() {
                        counters.stop.store(true, Ordering::Release);
                    }
                    counters.running.fetch_sub(1, Ordering::Release);
                    r
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // The system refused a thread: stop those started (the
                    // scope joins them) and report it.
                    counters.stop.store(true, Ordering::Release);
                    return Err(spawn_failed(w, config.workers, &e));
                }
            }
        }
        // The workers stop when sampling ends, also when it ends by a
        // panic (of `progress`, say): the scope joins them before the
        // panic goes on, and would wait for ever for workers never told.
        let stop_workers = StopOnDrop(&counters.stop);
        let sampled = sample_loop(config, &counters, &snapshot, progress);
        drop(stop_workers);
        let mut hists: Vec<Histogram<u64>> = types.iter().map(|_| new_histogram()).collect();
        for h in handles {
            let worker_hists = h.join().expect("benchmark worker panicked")?;
            for (all, one) in hists.iter_mut().zip(&worker_hists) {
                all.add(one).expect("same histogram bounds");
            }
        }
        let (series, base, end, secs) = sampled;
        Ok((series, base, end, secs, hists))
    })?;

    let verify = if config.verify {
        Some(workload.verify(&db)?)
    } else {
        None
    };
    let t0 = Instant::now();
    let dir = db.path().to_path_buf();
    db.close()?;
    let close_seconds = t0.elapsed().as_secs_f64();
    let summary = Summary::build(summary::Inputs {
        workload: workload.name(),
        driver: config,
        workload_config: workload.config_json(),
        types: &types,
        loaded,
        load_seconds,
        measured_secs,
        base: &base,
        end: &end,
        series: &series,
        hists: &hists,
        verify,
        close_seconds,
        data_dir_bytes: crate::metrics::dir_bytes(&dir),
        pinned: pinned.load(Ordering::Relaxed),
        recovery,
    });
    let (mut plots, mut warnings) = (Vec::new(), Vec::new());
    if let Some(out) = &config.out {
        summary::write_outputs(out, &summary, &types, &series)?;
        let cdfs: Vec<Cdf> = std::iter::once(("overall", summary::overall_histogram(&hists)))
            .chain(types.iter().copied().zip(hists.iter().cloned()))
            .filter_map(|(name, h)| Cdf::of(name, &h))
            .collect();
        // Only one type: its curve would repeat the overall one.
        let cdfs = if types.len() == 1 {
            &cdfs[..cdfs.len().min(1)]
        } else {
            &cdfs[..]
        };
        match plots::write_plots(out, &summary, &series, cdfs) {
            Ok(paths) => plots = paths,
            Err(e) => warnings.push(format!("warning: {e}")),
        }
    }
    Ok(RunOutput {
        summary,
        series,
        plots,
        warnings,
    })
}

/// The error for worker thread `w` of `workers` that the system refused.
pub fn spawn_failed(w: usize, workers: usize, e: &std::io::Error) -> BenchError {
    BenchError::Config(format!(
        "cannot start worker thread {} of {workers}: {e}; use fewer workers",
        w + 1
    ))
}

/// Sets the workers' stop flag when dropped, on unwinding too.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Sample once per second until the run ends; returns the series, the
/// snapshots at the start and end of the measured window, and its length.
pub(crate) fn sample_loop(
    config: &DriverConfig,
    counters: &Counters,
    snapshot: &dyn Fn() -> Snapshot,
    progress: &dyn Fn(&Sample),
) -> (Vec<Sample>, Snapshot, Snapshot, f64) {
    let start = Instant::now();
    let warmup = Duration::from_secs(config.warmup_secs);
    let end_at = warmup + Duration::from_secs_f64(config.duration_secs.max(0.0));
    let mut series = Vec::new();
    let mut prev = snapshot();
    let mut base = prev.clone();
    let mut measure_start = start;
    let mut second = 0u64;
    let mut last_tick = start;
    loop {
        second += 1;
        let tick = Duration::from_secs(second).min(end_at);
        let ended = loop {
            let elapsed = start.elapsed();
            let over = counters.running.load(Ordering::Acquire) == 0
                || counters.stop.load(Ordering::Acquire)
                || config
                    .interrupt
                    .as_ref()
                    .is_some_and(|i| i.load(Ordering::Relaxed))
                || config.max_txns.is_some_and(|m| {
                    counters.measuring.load(Ordering::Relaxed)
                        && Counters::load(&counters.committed).iter().sum::<u64>()
                            - base.total_committed()
                            >= m
                });
            if over || elapsed >= end_at {
                break true;
            }
            if elapsed >= tick {
                break false;
            }
            std::thread::sleep((tick - elapsed).min(Duration::from_millis(10)));
        };
        let warm = !counters.measuring.load(Ordering::Relaxed);
        if ended {
            counters.measuring.store(false, Ordering::Release);
        }
        let now_snap = snapshot();
        let now = Instant::now();
        let sample = Sample::between(
            second,
            warm,
            (now - last_tick).as_secs_f64(),
            &prev,
            &now_snap,
        );
        progress(&sample);
        series.push(sample);
        last_tick = now;
        prev = now_snap;
        if ended {
            let secs = (now - measure_start).as_secs_f64();
            return (series, base, prev, secs);
        }
        if warm && now - start >= warmup {
            base = prev.clone();
            measure_start = now;
            counters.measuring.store(true, Ordering::Release);
        }
    }
}

/// A transaction in flight: a commit, or a call on an executor.
enum InFlight {
    Commit(PendingCommit),
    Call(Box<dyn InFlightCall>),
}

impl InFlight {
    fn is_done(&self) -> bool {
        match self {
            InFlight::Commit(p) => p.is_durable(),
            InFlight::Call(c) => c.is_done(),
        }
    }

    /// Wait until durable: the type (a call's result may name it) and the
    /// outcome.
    fn wait(self, ty: usize) -> (usize, Result<(), waypoint::Error>) {
        match self {
            InFlight::Commit(p) => (ty, p.wait().map(|_| ())),
            InFlight::Call(c) => c.wait(),
        }
    }
}

type Pending = VecDeque<(Instant, usize, InFlight)>;

/// One worker: generate, commit pipelined, resolve; returns its latency
/// histograms per transaction type (measured window only).
fn worker_loop(
    db: &Database,
    workload: &dyn Workload,
    config: &DriverConfig,
    w: usize,
    counters: &Counters,
) -> BenchResult<Vec<Histogram<u64>>> {
    let mut session = db.session();
    let mut gen = workload.worker(w, config.seed ^ ((w as u64 + 1) << 32));
    let mut hists: Vec<Histogram<u64>> =
        counters.committed.iter().map(|_| new_histogram()).collect();
    let mut pending: Pending = VecDeque::new();
    let executors = session.runs_calls_on_executors();
    let mut pace = config
        .rate
        .map(|rate| Pace::new(rate / config.workers as f64));
    while !counters.stop.load(Ordering::Acquire) {
        if let Some(pace) = &mut pace {
            // Commits that become durable while the worker waits for its
            // next start are acknowledged (and timed) as they do, not at
            // the next start.
            pace.wait(|| resolve(&mut pending, config.in_flight, counters, &mut hists))?;
        }
        let t0 = Instant::now();
        // Under executors a worker keeps its calls in flight from before
        // they run (VoltDB's clients), unless it runs one at a time.
        let submitted = if executors && config.in_flight > 1 {
            gen.submit(&mut session)
        } else {
            None
        };
        let (ty, outcome) = match submitted {
            Some((ty, outcome)) => (ty, outcome.map(InFlight::Call)),
            None => match gen.call(&mut session, config.in_flight <= 1, None) {
                Some((ty, outcome)) => (ty, outcome.map(InFlight::Commit)),
                None => {
                    let mut tx = session.begin()?;
                    let (ty, body) = gen.next(&mut tx);
                    let outcome = match body {
                        // One at a time: a blocking commit, which syncs the
                        // log itself rather than waking the log writer and
                        // waiting to be woken.
                        Ok(()) if config.in_flight <= 1 => tx.commit().map(PendingCommit::durable),
                        Ok(()) => tx.commit_pipelined(),
                        Err(e) => {
                            drop(tx);
                            Err(e)
                        }
                    };
                    (ty, outcome.map(InFlight::Commit))
                }
            },
        };
        match outcome {
            Ok(p) => pending.push_back((t0, ty, p)),
            Err(e) if is_abort(&e) => {
                counters.aborts[ty].fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => return Err(e.into()),
        }
        resolve(&mut pending, config.in_flight, counters, &mut hists)?;
    }
    // Commits still in flight at the end: wait, but they fall outside the
    // measured window.
    resolve(&mut pending, 0, counters, &mut hists)?;
    Ok(hists)
}

/// A worker's share of `DriverConfig::rate`: a schedule of start times,
/// slept to when the worker is ahead of it by more than a sleep's
/// granularity (shorter gaps run on, and the next sleep evens them out),
/// in steps of [`Pace::MIN_SLEEP`] with `between` run after each.
/// A worker more than [`Pace::MAX_LAG`] behind drops the lag rather than
/// bursting to make it up.
struct Pace {
    interval: Duration,
    next: Instant,
}

impl Pace {
    const MIN_SLEEP: Duration = Duration::from_micros(100);
    const MAX_LAG: Duration = Duration::from_millis(10);

    fn new(per_second: f64) -> Self {
        Pace {
            interval: Duration::from_secs_f64(1.0 / per_second),
            next: Instant::now(),
        }
    }

    fn wait(&mut self, mut between: impl FnMut() -> BenchResult<()>) -> BenchResult<()> {
        let mut now = Instant::now();
        if now > self.next + Self::MAX_LAG {
            self.next = now;
        }
        while self.next > now + Self::MIN_SLEEP {
            std::thread::sleep((self.next - now).min(Self::MIN_SLEEP));
            between()?;
            now = Instant::now();
        }
        self.next += self.interval;
        Ok(())
    }
}

/// Resolve durable commits oldest first; block while more than
/// `keep - 1` are in flight.
fn resolve(
    pending: &mut Pending,
    keep: usize,
    counters: &Counters,
    hists: &mut [Histogram<u64>],
) -> BenchResult<()> {
    // What is done already is acknowledged (and timed) first.
    retire(pending, |_, p| p.is_done(), counters, hists)?;
    // Calls on executors, window still full: wait for the oldest quarter
    // of the window to have run and retire it at once, so the worker is
    // woken about once for those calls rather than once per call (a
    // context switch per call where workers and executors share cores).
    if keep > 1 && pending.len() >= keep {
        let quarter = (pending.len() - keep + keep / 4).clamp(1, pending.len());
        if let Some((_, _, InFlight::Call(call))) = pending.get(quarter - 1) {
            call.wait_until_run();
            let floor = pending.len() - quarter;
            retire(pending, |pending, _| pending.len() > floor, counters, hists)?;
        }
    }
    retire(
        pending,
        |pending, p| pending.len() >= keep || p.is_done(),
        counters,
        hists,
    )
}

/// Acknowledge the oldest transactions in flight while `take` says so
/// (waiting for each to be durable), counting and timing each.
fn retire(
    pending: &mut Pending,
    take: impl Fn(&Pending, &InFlight) -> bool,
    counters: &Counters,
    hists: &mut [Histogram<u64>],
) -> BenchResult<()> {
    while let Some((_, _, p)) = pending.front() {
        if !take(pending, p) {
            break;
        }
        let (t0, ty, p) = pending.pop_front().expect("front exists");
        let (ty, outcome) = p.wait(ty);
        match outcome {
            Ok(()) => {
                if counters.measuring.load(Ordering::Relaxed) {
                    hists[ty].saturating_record(t0.elapsed().as_micros() as u64);
                }
                counters.committed[ty].fetch_add(1, Ordering::Relaxed);
            }
            Err(e) if is_abort(&e) => {
                counters.aborts[ty].fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
