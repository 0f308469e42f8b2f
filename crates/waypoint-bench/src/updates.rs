//! The small-update benchmark: the commit path under each commit protocol.
//!
//! Each transaction updates `updates_per_txn` random records of a table of
//! `records` small records: any record, or with `disjoint` only records of
//! the worker's own share of the key range (so workers touch disjoint
//! leaves and Remote Flush Avoidance has no remote dependency to flush).
//! Workers keep up to `pipeline` commits in flight
//! (`Transaction::commit_pipelined`), or with one commit blocking
//! (`Transaction::commit`); latency is measured from the commit
//! call until the commit is durable (acknowledged). Before the run, the same
//! program measures raw `fdatasync` latency in the same directory (4 KiB
//! write + `fdatasync`), so commit latency can be compared with it in one
//! run.

use crate::report::{new_histogram, Latency, PhaseResult};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::collections::VecDeque;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use waypoint::{
    CommitProtocol, Database, Error, Options, PendingCommit, PerWorkerOptions, Persistence,
    SchemeKind,
};

#[derive(Debug, Clone, Serialize)]
pub struct UpdatesConfig {
    #[serde(skip)]
    pub dir: Option<PathBuf>,
    pub workers: usize,
    pub records: u64,
    pub value_size: usize,
    pub updates_per_txn: usize,
    /// Each worker updates only its own 1/`workers` of the records.
    pub disjoint: bool,
    /// Commits in flight per worker (1: wait for each commit).
    pub pipeline: usize,
    pub duration_secs: f64,
    #[serde(skip)]
    pub scheme: SchemeKind,
    /// The per-worker scheme's options (unused under another scheme):
    /// `commit`, `sync_interval_us`, `wal_preallocate`, `wal_zero_fill`.
    #[serde(skip)]
    pub commit: CommitProtocol,
    pub commit_name: String,
    /// `PerWorkerOptions::log_sync_interval`, in microseconds.
    pub sync_interval_us: u64,
    /// `PerWorkerOptions::wal_preallocate`.
    pub wal_preallocate: bool,
    /// `PerWorkerOptions::wal_zero_fill`.
    pub wal_zero_fill: bool,
    pub seed: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct UpdatesReport {
    /// The binary that ran: version and commit ([`crate::BUILD`]).
    pub build: String,
    pub config: UpdatesConfig,
    /// Raw 4 KiB write + `fdatasync`, appended (the file grows).
    pub fdatasync_us: Latency,
    /// The same into a zero-filled, synced file (as into a log segment
    /// made from a preallocated spare).
    pub fdatasync_preallocated_us: Latency,
    pub run: PhaseResult,
    pub log_bytes_per_txn: f64,
    pub log_syncs: u64,
    pub remote_flush_fraction: f64,
}

/// The buffer pool of the run: enough for every record at any size.
const BUFFER_BYTES: usize = 256 << 20;

impl UpdatesConfig {
    /// The engine's options of the run.
    pub fn engine_options(&self) -> Options {
        Options {
            buffer_pool_bytes: BUFFER_BYTES,
            persistence: Persistence::of(
                self.scheme,
                PerWorkerOptions {
                    commit: self.commit,
                    log_sync_interval: Duration::from_micros(self.sync_interval_us),
                    wal_preallocate: self.wal_preallocate,
                    wal_zero_fill: self.wal_zero_fill,
                    ..PerWorkerOptions::default()
                },
            ),
            ..Options::default()
        }
    }

    /// Workers and seconds as the driver takes them ([`crate::driver`]),
    /// every count at least 1, values of 1 byte to the largest a table
    /// takes, with `disjoint` a record per worker at least, and the
    /// engine's options.
    pub fn validate(&self) -> Result<(), Error> {
        use crate::driver::{check_seconds, check_workers, out_of_range};
        let checks = || -> crate::BenchResult<()> {
            check_workers("workers", self.workers)?;
            check_seconds("duration_secs", self.duration_secs)?;
            let options = self.engine_options();
            options.validate()?;
            for (name, n) in [
                ("records", self.records),
                ("updates_per_txn", self.updates_per_txn as u64),
                ("pipeline", self.pipeline as u64),
            ] {
                if n == 0 {
                    return Err(out_of_range(name, n, "at least 1"));
                }
            }
            let page_size = options.page_size.unwrap_or(waypoint::DEFAULT_PAGE_SIZE);
            let max = Database::max_value_len_for(page_size);
            if !(1..=max).contains(&self.value_size) {
                return Err(out_of_range(
                    "value_size",
                    self.value_size,
                    &format!("1 to {max} (the largest value in pages of {page_size} bytes)"),
                ));
            }
            if self.disjoint && self.records < self.workers as u64 {
                return Err(out_of_range(
                    "records",
                    self.records,
                    &format!("at least workers ({}) with disjoint shares", self.workers),
                ));
            }
            Ok(())
        };
        checks().map_err(crate::BenchError::into_engine)
    }
}

/// p50/p99 of `n` 4 KiB write + `fdatasync` rounds on a file in `dir`:
/// appended, so each sync also commits the file's new size, or with
/// `preallocated` over zeros written and synced first, so it flushes data
/// only (what log segments taken from a preallocated spare see).
pub fn fdatasync_latency(dir: &Path, n: usize, preallocated: bool) -> std::io::Result<Latency> {
    let path = dir.join("fdatasync-probe");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)?;
    let block = vec![7u8; 4096];
    if preallocated {
        file.write_all_at(&vec![0u8; n * 4096], 0)?;
        file.sync_data()?;
    }
    let mut h = new_histogram();
    for i in 0..n {
        let t0 = Instant::now();
        file.write_all_at(&block, (i * 4096) as u64)?;
        file.sync_data()?;
        h.saturating_record(t0.elapsed().as_micros() as u64);
    }
    drop(file);
    std::fs::remove_file(&path)?;
    Ok(Latency::of(&h))
}

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

pub fn run(config: &UpdatesConfig) -> Result<UpdatesReport, Error> {
    config.validate()?;
    let tmp;
    let dir = match &config.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir().map_err(|e| {
                Error::InvalidOptions(format!("cannot create a temporary directory: {e}"))
            })?;
            tmp.path().to_path_buf()
        }
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::InvalidOptions(format!("cannot create {}: {e}", dir.display())))?;
    let fdatasync_preallocated_us = fdatasync_latency(&dir, 200, true)
        .map_err(|e| Error::InvalidOptions(format!("fdatasync probe failed: {e}")))?;
    let fdatasync_us = fdatasync_latency(&dir, 200, false)
        .map_err(|e| Error::InvalidOptions(format!("fdatasync probe failed: {e}")))?;
    let db = Database::open(&dir, config.engine_options())?;
    let table = db.open_or_create_table("updates")?;
    {
        let mut s = db.session();
        for chunk in (0..config.records).collect::<Vec<_>>().chunks(1000) {
            s.run(10, |tx| {
                for &i in chunk {
                    tx.upsert(&table, &key(i), &vec![1u8; config.value_size])?;
                }
                Ok(())
            })?;
        }
    }
    let before = db.stats().persistence.log;
    let txns = AtomicU64::new(0);
    let aborts = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let mut hist = new_histogram();
    std::thread::scope(|s| -> Result<(), Error> {
        let mut handles = Vec::with_capacity(config.workers);
        for w in 0..config.workers {
            let (db, table, txns, aborts, stop) = (&db, &table, &txns, &aborts, &stop);
            let spawned = std::thread::Builder::new()
                .name(format!("bench-updates-{w}"))
                .spawn_scoped(s, move || -> Result<hdrhistogram::Histogram<u64>, Error> {
                    let mut h = new_histogram();
                    let mut rng = SmallRng::seed_from_u64(config.seed ^ (w as u64 + 1));
                    let mut session = db.session();
                    let mut in_flight: VecDeque<(Instant, PendingCommit)> = VecDeque::new();
                    let mut value = vec![0u8; config.value_size];
                    let keys = if config.disjoint {
                        let share = config.records / config.workers.max(1) as u64;
                        w as u64 * share..(w as u64 + 1) * share
                    } else {
                        0..config.records
                    };
                    while !stop.load(Ordering::Acquire) {
                        let mut tx = session.begin()?;
                        for _ in 0..config.updates_per_txn {
                            rng.fill(&mut value[..]);
                            tx.update(table, &key(rng.gen_range(keys.clone())), &value)?;
                        }
                        let t0 = Instant::now();
                        // One in flight: a blocking commit (it syncs the log
                        // itself instead of handing off to the log writer).
                        let committed = if config.pipeline <= 1 {
                            tx.commit().map(PendingCommit::durable)
                        } else {
                            tx.commit_pipelined()
                        };
                        match committed {
                            Ok(p) => in_flight.push_back((t0, p)),
                            Err(Error::Conflict) => {
                                aborts.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => return Err(e),
                        }
                        // Resolve what is durable; block only when full.
                        while let Some((_, p)) = in_flight.front() {
                            if in_flight.len() < config.pipeline.max(1) && !p.is_durable() {
                                break;
                            }
                            let (t0, p) = in_flight.pop_front().expect("front exists");
                            p.wait()?;
                            h.saturating_record(t0.elapsed().as_micros() as u64);
                            txns.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    for (t0, p) in in_flight {
                        p.wait()?;
                        h.saturating_record(t0.elapsed().as_micros() as u64);
                        txns.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(h)
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // Stop those started (the scope joins them).
                    stop.store(true, Ordering::Release);
                    return Err(crate::driver::spawn_failed(w, config.workers, &e).into_engine());
                }
            }
        }
        std::thread::sleep(Duration::from_secs_f64(config.duration_secs));
        stop.store(true, Ordering::Release);
        for h in handles {
            hist.add(&h.join().expect("worker panicked")?)
                .expect("same bounds");
        }
        Ok(())
    })?;
    let secs = start.elapsed().as_secs_f64();
    let after = db.stats().persistence.log;
    let n = txns.load(Ordering::Relaxed);
    let commits = (after.commits - before.commits).max(1);
    let report = UpdatesReport {
        build: crate::BUILD.to_string(),
        config: config.clone(),
        fdatasync_us,
        fdatasync_preallocated_us,
        run: PhaseResult::new(
            "updates",
            n,
            n * config.updates_per_txn as u64,
            secs,
            aborts.load(Ordering::Relaxed),
            &hist,
        ),
        log_bytes_per_txn: (after.appended_bytes - before.appended_bytes) as f64 / n.max(1) as f64,
        log_syncs: after.syncs - before.syncs,
        remote_flush_fraction: (after.remote_flush_commits - before.remote_flush_commits) as f64
            / commits as f64,
    };
    drop(table);
    db.close()?;
    let _ = std::io::stdout().flush();
    Ok(report)
}
