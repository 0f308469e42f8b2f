//! Runs an experiment: every run once per round, the order reversed each
//! round (A B C, then C B A, ...) so that drift on a noisy machine favours
//! no side; each run on a fresh directory holding a copy of one load of
//! its workload (loaded once under the scheme without a log and closed
//! cleanly, which every paged scheme opens as its own clean state), so
//! runs neither interfere nor pay for loading.
//!
//! A throughput run is the benchmark driver ([`crate::driver::run`]); a
//! recovery run has a [`Crasher`] (the `waypoint` binary) run the
//! workload in a child process and kill it, then opens the database here
//! and keeps the engine's recovery report.
//!
//! Invariant: a run interrupted (Ctrl-C) or failed leaves its round
//! `None` and marks the results partial; nothing it measured is kept.

use super::perf;
use super::results::{Measurement, Results, RunResult, Second};
use super::{Experiment, Metric, PeerSpec, RunSpec, Settings, WorkloadSpec};
use crate::driver::{self, DriverConfig};
use crate::error::{BenchError, BenchResult};
use crate::metrics::{dir_bytes, Sample};
use crate::peers::external::{self, External};
use crate::peers::{self, Peer, PeerKind};
use crate::summary::{RecoverySummary, Steadiness, Summary};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use waypoint::{Database, Options, PerWorkerOptions, Persistence, SchemeKind};

/// The log directory of a database (`waypoint::db::WAL_DIR`, which the
/// engine exports only with its `internals` feature; a test checks they
/// agree).
pub const WAL_DIR: &str = "wal";

const MIB: f64 = (1u64 << 20) as f64;

/// Runs a workload in another process and kills it: what the recovery
/// experiment needs and the library cannot do itself (the child is the
/// `waypoint` binary).
pub trait Crasher: Sync {
    /// Run `workload`, loaded in `dir`, in a child process with
    /// `config`'s workers, commits in flight, commit protocol, buffer and
    /// WAL limit; `SIGKILL` it once `stop(acknowledged so far)` says so
    /// (polled every few milliseconds after the child is ready). Returns
    /// the transactions the child acknowledged.
    fn run_then_kill(
        &self,
        dir: &Path,
        workload: &str,
        config: &DriverConfig,
        stop: &dyn Fn(u64) -> bool,
    ) -> BenchResult<u64>;
}

/// What the runner tells the command line as it goes.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// A workload is being loaded once for the runs that use it.
    Loading { workload: &'a str },
    Started {
        round: usize,
        run: &'a str,
        done: usize,
        total: usize,
    },
    /// `headline`: the first table's value, for the progress line.
    Finished {
        round: usize,
        run: &'a str,
        done: usize,
        total: usize,
        headline: &'a str,
    },
}

pub struct Hooks<'a> {
    /// Set by Ctrl-C: the current run ends early and is not counted, no
    /// further run starts.
    pub interrupt: Arc<AtomicBool>,
    pub progress: &'a (dyn Fn(Event<'_>) + Sync),
    /// Needed by experiments with crash runs (`recovery`).
    pub crasher: Option<&'a dyn Crasher>,
}

/// The order of the runs in round `round` (0-based): forward in even
/// rounds, backward in odd ones.
pub fn order(runs: usize, round: usize) -> Vec<usize> {
    if round.is_multiple_of(2) {
        (0..runs).collect()
    } else {
        (0..runs).rev().collect()
    }
}

/// Run `experiment` with its data directories below `out` (removed at the
/// end). Returns the results, partial where Ctrl-C or an error stopped
/// it, and the error if one did; fails before any run only if `out`
/// cannot be written.
pub fn run(
    experiment: &Experiment,
    settings: &Settings,
    command: &str,
    out: &Path,
    hooks: &Hooks<'_>,
) -> BenchResult<(Results, Option<BenchError>)> {
    let started = Instant::now();
    std::fs::create_dir_all(out).map_err(|e| BenchError::io(out, e))?;
    let work = tempfile::Builder::new()
        .prefix(".compare-data-")
        .tempdir_in(out)
        .map_err(|e| BenchError::io(out, e))?;
    let mut notes = experiment.notes.clone();
    let perf_event = if experiment.instructions {
        match perf::probe() {
            Ok(event) => {
                notes.push(format!(
                    "Instructions per transaction: `perf stat -e {event}` on this process over the measured \
                     window (all threads)."
                ));
                Some(event)
            }
            Err(why) => {
                notes.push(format!(
                    "Instructions per transaction were not measured: {why}."
                ));
                None
            }
        }
    } else {
        None
    };
    let mut results = Results {
        experiment: experiment.name.into(),
        reproduces: experiment.reproduces.into(),
        why: experiment.why.clone(),
        command: command.into(),
        date: super::machine::now_utc(),
        machine: super::machine::Machine::this(work.path()),
        build: crate::BUILD.to_string(),
        settings: serde_json::to_value(settings).expect("settings serialize"),
        partial: None,
        baseline: experiment.baseline.describe(),
        x_name: experiment.x_name.into(),
        metrics: experiment.metrics.clone(),
        runs: experiment
            .runs
            .iter()
            .map(|r| RunResult {
                label: r.label.clone(),
                series: r.series.clone(),
                x: r.x,
                config: run_config(r),
                rounds: vec![None; settings.rounds],
                median: Default::default(),
                vs_baseline: Default::default(),
                baseline: None,
                durability: None,
            })
            .collect(),
        notes,
        figures: Vec::new(),
        seconds_taken: 0.0,
    };
    let mut templates = Templates {
        root: work.path().join("loads"),
        made: Vec::new(),
    };
    let total = experiment.runs.len() * settings.rounds;
    let mut done = 0;
    let mut error = None;
    'rounds: for round in 0..settings.rounds {
        for i in order(experiment.runs.len(), round) {
            let spec = &experiment.runs[i];
            if hooks.interrupt.load(Ordering::Relaxed) {
                results.partial = Some(format!(
                    "stopped by Ctrl-C after {done} of {total} runs; the run in progress then is not counted"
                ));
                break 'rounds;
            }
            (hooks.progress)(Event::Started {
                round,
                run: &spec.label,
                done,
                total,
            });
            let dir = work.path().join("run");
            let measured = match spec.peer {
                // A peer loads its own copy: its files are not waypoint's.
                Some(peer) => {
                    let m = measure_peer(experiment, spec, peer, &dir, hooks);
                    let removed = std::fs::remove_dir_all(&dir);
                    m.and_then(|m| {
                        removed.map_err(|e| BenchError::io(&dir, e))?;
                        Ok(m)
                    })
                }
                None => templates.get(spec, settings, hooks).and_then(|template| {
                    let sized;
                    let spec = match spec.buffer_of_data {
                        None => spec,
                        Some(fraction) => {
                            sized = with_buffer_of_data(spec, &template, fraction)?;
                            results.runs[i].config["buffer_bytes"] =
                                sized.driver.buffer_bytes.into();
                            &sized
                        }
                    };
                    copy_dir(&template, &dir)?;
                    let m = match spec.crash {
                        None => measure(experiment, spec, &dir, hooks, perf_event),
                        Some(_) => crash_and_recover(spec, &dir, hooks),
                    };
                    std::fs::remove_dir_all(&dir).map_err(|e| BenchError::io(&dir, e))?;
                    m
                }),
            };
            match measured {
                Ok(Some(m)) if !hooks.interrupt.load(Ordering::Relaxed) => {
                    done += 1;
                    let headline = experiment
                        .metrics
                        .iter()
                        .find_map(|&k| m.get(k).map(|v| (k, v)))
                        .map_or(String::new(), |(k, v)| {
                            format!("{v:.prec$} {}", k.title(), prec = k.decimals())
                        });
                    (hooks.progress)(Event::Finished {
                        round,
                        run: &spec.label,
                        done,
                        total,
                        headline: &headline,
                    });
                    if results.runs[i].durability.is_none() {
                        results.runs[i].durability = m.durability.clone();
                    }
                    results.runs[i].rounds[round] = Some(m);
                }
                Ok(_) => {
                    results.partial = Some(format!(
                        "stopped by Ctrl-C during round {} at `{}` after {done} of {total} runs; that run is not counted",
                        round + 1,
                        spec.label
                    ));
                    break 'rounds;
                }
                Err(e) => {
                    results.partial = Some(format!(
                        "stopped by an error in round {} at `{}` after {done} of {total} runs: {e}",
                        round + 1,
                        spec.label
                    ));
                    error = Some(e);
                    break 'rounds;
                }
            }
        }
    }
    results.summarize(experiment);
    results.seconds_taken = started.elapsed().as_secs_f64();
    drop(work);
    Ok((results, error))
}

/// The driver's and the workload's configuration of a run, as
/// `results.json` shows it.
fn run_config(r: &RunSpec) -> serde_json::Value {
    let mut c = serde_json::to_value(&r.driver).expect("config serializes");
    c["scheme"] = r.driver.scheme.name().into();
    c["commit"] = r.driver.commit.name().into();
    c["checkpoint"] = r.driver.checkpoint.name().into();
    c["pin"] = driver::pin_name(r.driver.pin).into();
    c["workload"] = serde_json::to_value(r.workload).expect("workload serializes");
    if let Some(crash) = &r.crash {
        c["crash"] = serde_json::to_value(crash).expect("crash serializes");
    }
    if let Some(fraction) = r.buffer_of_data {
        c["buffer_of_data"] = fraction.into();
    }
    if let Some(peer) = &r.peer {
        // The engine takes the scheme's place; only waypoint has a
        // commit protocol and checkpoints.
        c["scheme"] = peer.engine.name().into();
        c["durability"] = peer.durability.name().into();
        c["in_flight"] = 1.into();
        if peer.engine != Peer::Engine(PeerKind::Waypoint) {
            c["commit"] = "–".into();
            c["checkpoint"] = "–".into();
        }
    }
    c
}

/// One load per workload and page size, kept below `root` while the
/// experiment runs.
struct Templates {
    root: PathBuf,
    made: Vec<(String, PathBuf)>,
}

impl Templates {
    fn get(&mut self, spec: &RunSpec, s: &Settings, hooks: &Hooks<'_>) -> BenchResult<PathBuf> {
        let key = format!(
            "{} {}",
            serde_json::to_string(&spec.workload.load()).expect("workload serializes"),
            spec.driver.page_size
        );
        if let Some((_, path)) = self.made.iter().find(|(k, _)| *k == key) {
            return Ok(path.clone());
        }
        (hooks.progress)(Event::Loading {
            workload: &spec.workload.describe(),
        });
        let path = self.root.join(self.made.len().to_string());
        let mut workload = spec.workload.build(spec.driver.seed)?;
        workload.validate(spec.driver.page_size)?;
        let db = Database::open(
            &path,
            Options {
                create_if_missing: true,
                page_size: Some(spec.driver.page_size),
                buffer_pool_bytes: spec.driver.buffer_bytes,
                persistence: Persistence::of(SchemeKind::None, PerWorkerOptions::default()),
                ..Options::default()
            },
        )?;
        workload.setup(&db, s.cores.max(1))?;
        db.close()?;
        self.made.push((key, path.clone()));
        Ok(path)
    }
}

/// `spec` with a buffer pool of `fraction` of the loaded data file in
/// `template` (at least 64 pages: the engine refuses pools of fewer than
/// 16, and workers each hold a few pages latched).
fn with_buffer_of_data(spec: &RunSpec, template: &Path, fraction: f64) -> BenchResult<RunSpec> {
    assert!(fraction > 0.0 && fraction <= 1.0, "{fraction}");
    let data = template.join(waypoint::DATA_FILE);
    let bytes = std::fs::metadata(&data)
        .map_err(|e| BenchError::io(&data, e))?
        .len();
    let mut sized = spec.clone();
    sized.driver.buffer_bytes =
        ((bytes as f64 * fraction) as usize).max(64 * spec.driver.page_size);
    Ok(sized)
}

/// Copy the files below `from` into `to` (created; must not exist).
fn copy_dir(from: &Path, to: &Path) -> BenchResult<()> {
    std::fs::create_dir(to).map_err(|e| BenchError::io(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| BenchError::io(from, e))? {
        let entry = entry.map_err(|e| BenchError::io(from, e))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry
            .file_type()
            .map_err(|e| BenchError::io(&src, e))?
            .is_dir()
        {
            copy_dir(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst).map_err(|e| BenchError::io(&dst, e))?;
        }
    }
    Ok(())
}

/// A driver run on `dir`; None if it was interrupted.
fn measure(
    experiment: &Experiment,
    spec: &RunSpec,
    dir: &Path,
    hooks: &Hooks<'_>,
    perf_event: Option<&'static str>,
) -> BenchResult<Option<Measurement>> {
    let config = DriverConfig {
        dir: Some(dir.to_path_buf()),
        out: None,
        interrupt: Some(hooks.interrupt.clone()),
        ..spec.driver.clone()
    };
    let mut workload = spec.workload.build(config.seed)?;
    // perf counts from the end of the warm-up (or of the first second) to
    // the end of the measured window, and the transactions of the same
    // seconds divide it.
    let counter: Mutex<Option<perf::Counter>> = Mutex::new(None);
    let from_second = AtomicU64::new(u64::MAX);
    let window_end = config.warmup_secs as f64 + config.duration_secs;
    let progress = |s: &Sample| {
        let start_at = config.warmup_secs.max(1);
        let left = window_end - s.second as f64;
        if let (Some(event), true) = (perf_event, s.second == start_at && left >= 1.0) {
            let mut c = counter.lock().unwrap_or_else(|e| e.into_inner());
            *c = perf::Counter::start(event, left);
            from_second.store(s.second, Ordering::Relaxed);
        }
    };
    let out = driver::run(&config, workload.as_mut(), &progress)?;
    let counted = counter
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .and_then(perf::Counter::finish);
    if hooks.interrupt.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let mut m = of_summary(&out.summary);
    let from = from_second.load(Ordering::Relaxed);
    let txns: u64 = out
        .series
        .iter()
        .filter(|s| s.second > from)
        .map(|s| s.txn)
        .sum();
    if let (Some(instructions), true) = (counted, txns > 0) {
        m.set(
            Metric::InstructionsPerTxn,
            instructions as f64 / txns as f64,
        );
    }
    if experiment.over_time {
        m.seconds = seconds_of(&out.series);
    }
    Ok(Some(m))
}

/// The per-second values of a run, for the figures over time.
fn seconds_of(series: &[Sample]) -> Vec<Second> {
    let mut at = 0.0;
    series
        .iter()
        .map(|s| {
            at += s.interval_secs;
            Second {
                at,
                txn_per_sec: s.txn_per_sec(),
                wal_disk_mib: s.wal_disk_bytes as f64 / MIB,
            }
        })
        .collect()
}

/// The metrics of a driver run.
fn of_summary(s: &Summary) -> Measurement {
    let mut m = Measurement::default();
    let overall = s.latency_us["overall"];
    m.set(Metric::TxnPerSec, s.txn_per_sec);
    m.set(Metric::CpuUsPerTxn, s.cpu_us_per_txn);
    m.set(Metric::WalBytesPerTxn, s.wal_bytes_per_txn);
    m.set(Metric::RemoteFlushPct, s.remote_flush_fraction * 100.0);
    m.set(
        Metric::ContentionPer1000Txns,
        s.contention
            .iter()
            .map(|t| t.retries_per_1000_txns + t.waits_per_1000_txns)
            .sum(),
    );
    m.set(Metric::WalDiskMaxMib, s.wal_disk_max_bytes as f64 / MIB);
    m.set(
        Metric::CheckpointMibPerSec,
        s.checkpoint_bytes as f64 / MIB / s.seconds.max(1e-9),
    );
    m.set(Metric::LowestSecondRatio, s.steadiness.lowest_ratio);
    m.set(Metric::LatencyP50Us, overall.p50 as f64);
    m.set(Metric::LatencyP99Us, overall.p99 as f64);
    m
}

/// A run on a peer engine (waypoint included) through its client
/// threads; None if it was interrupted.
fn measure_peer(
    experiment: &Experiment,
    spec: &RunSpec,
    peer: PeerSpec,
    dir: &Path,
    hooks: &Hooks<'_>,
) -> BenchResult<Option<Measurement>> {
    let config = DriverConfig {
        dir: Some(dir.to_path_buf()),
        out: None,
        interrupt: Some(hooks.interrupt.clone()),
        ..spec.driver.clone()
    };
    let kind = match peer.engine {
        Peer::Engine(kind) => kind,
        Peer::Server(server) => return measure_server(spec, server, peer, &config, hooks),
    };
    let workload = spec.workload.peer_workload()?;
    let engine = peers::open(kind, peer.durability, dir, workload.tables(), &config)?;
    let out = peers::drive::run(engine, &workload, &config, &|_| {})?;
    if hooks.interrupt.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let mut m = Measurement::default();
    let secs = out.measured_secs.max(1e-9);
    m.set(Metric::TxnPerSec, out.committed as f64 / secs);
    if out.committed > 0 {
        m.set(
            Metric::CpuUsPerTxn,
            out.cpu_ms as f64 * 1000.0 / out.committed as f64,
        );
        m.set(
            Metric::LatencyP50Us,
            out.latency_us.value_at_quantile(0.5) as f64,
        );
        m.set(
            Metric::LatencyP99Us,
            out.latency_us.value_at_quantile(0.99) as f64,
        );
    }
    m.set(
        Metric::AbortPct,
        100.0 * out.aborts as f64 / (out.aborts + out.committed).max(1) as f64,
    );
    m.durability = Some(out.durability);
    m.set(
        Metric::LowestSecondRatio,
        Steadiness::of(&out.series).lowest_ratio,
    );
    if experiment.over_time {
        m.seconds = seconds_of(&out.series);
    }
    Ok(Some(m))
}

/// A run on a server peer through its own benchmark program; None if
/// interrupted while it ran.
fn measure_server(
    spec: &RunSpec,
    server: External,
    peer: PeerSpec,
    config: &DriverConfig,
    hooks: &Hooks<'_>,
) -> BenchResult<Option<Measurement>> {
    let programs = server.probe().map_err(BenchError::Peer)?;
    let dir = config.dir.as_deref().expect("a peer run has its directory");
    let out = match (server, spec.workload) {
        (External::Postgres, WorkloadSpec::Tpcb { branches, .. }) => {
            external::postgres::run(&programs, peer.durability, dir, branches, config)?
        }
        (External::Redis, WorkloadSpec::Ycsb { records, .. }) => {
            let value_size = spec.workload.ycsb_config()?.map_or(100, |c| c.value_size);
            external::redis::run(&programs, peer.durability, dir, records, value_size, config)?
        }
        (server, workload) => {
            return Err(BenchError::Config(format!(
                "{}: runs no {} workload",
                server.name(),
                workload.name()
            )))
        }
    };
    if hooks.interrupt.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let mut m = Measurement::default();
    m.set(Metric::TxnPerSec, out.per_sec);
    m.set(Metric::AbortPct, out.abort_pct);
    if let Some(p50) = out.latency_p50_us {
        m.set(Metric::LatencyP50Us, p50);
    }
    if let Some(p99) = out.latency_p99_us {
        m.set(Metric::LatencyP99Us, p99);
    }
    m.durability = Some(out.durability);
    Ok(Some(m))
}

/// Kill the workload in a child process once the log holds the limit,
/// then open the database here and keep what recovery did; None if
/// interrupted.
fn crash_and_recover(
    spec: &RunSpec,
    dir: &Path,
    hooks: &Hooks<'_>,
) -> BenchResult<Option<Measurement>> {
    let crash = spec.crash.expect("a crash run");
    let crasher = hooks.crasher.ok_or_else(|| {
        BenchError::Config("this experiment kills a child process; no way to start one".into())
    })?;
    let wal = dir.join(WAL_DIR);
    let t0 = Instant::now();
    let max = Duration::from_secs_f64(crash.max_secs);
    // The child is ready when it is first asked; the run it makes is
    // timed from there to the kill.
    let ready = std::cell::Cell::new(None::<Instant>);
    let stop = |acked: u64| {
        if ready.get().is_none() {
            ready.set(Some(Instant::now()));
        }
        hooks.interrupt.load(Ordering::Relaxed)
            || t0.elapsed() >= max
            || match crash.until_acked {
                Some(n) => acked >= n,
                None => dir_bytes(&wal) >= crash.until_log_bytes,
            }
    };
    let acked = crasher.run_then_kill(dir, spec.workload.name(), &spec.driver, &stop)?;
    let ran = ready.get().map(|at| at.elapsed().as_secs_f64());
    if hooks.interrupt.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let options = Options {
        create_if_missing: false,
        ..spec.driver.engine_options()
    };
    let t0 = Instant::now();
    let db = Database::open(dir, options)?;
    let open = t0.elapsed();
    let report = db.recovery_report().cloned();
    db.close()?;
    let Some(r) = report.filter(RecoverySummary::needed) else {
        return Err(BenchError::Config(format!(
            "{}: opening after the kill found no log to recover",
            spec.label
        )));
    };
    let r = RecoverySummary::of(&r, open);
    let mut m = Measurement::default();
    m.set(Metric::RecoveredLogMib, r.bytes as f64 / MIB);
    m.set(Metric::LoadedMib, r.load_bytes as f64 / MIB);
    m.set(Metric::LoadMs, r.load_ms);
    m.set(Metric::AnalysisMs, r.analysis_ms);
    m.set(Metric::RedoMs, r.redo_ms);
    m.set(Metric::UndoMs, r.undo_ms);
    m.set(Metric::RecoveryMs, r.total_ms);
    m.set(Metric::RecoveryMbPerSec, r.mb_per_sec);
    if r.total_ms > 0.0 {
        let recovered = acked as f64 / (r.total_ms / 1000.0);
        m.set(Metric::RecoveryTxnPerSec, recovered);
        if let Some(ran) = ran.filter(|&s| s > 0.0 && acked > 0) {
            let run = acked as f64 / ran;
            m.set(Metric::RunTxnPerSec, run);
            m.set(Metric::RecoveryVsRun, recovered / run);
        }
    }
    m.set(Metric::OpenMs, r.open_ms);
    Ok(Some(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_alternate_forward_and_backward() {
        assert_eq!(order(3, 0), [0, 1, 2]);
        assert_eq!(order(3, 1), [2, 1, 0]);
        assert_eq!(order(3, 2), [0, 1, 2]);
    }

    #[test]
    fn the_log_directory_is_the_engines() {
        assert_eq!(WAL_DIR, waypoint::db::WAL_DIR);
    }
}
