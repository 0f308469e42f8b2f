//! The engine benchmark: load a table, then point reads and range scans
//! from several workers, then a clean close and a verified reopen.
//!
//! Keys are 8-byte big-endian integers `0..records`; each worker loads its
//! own contiguous slice in transactions of `batch` inserts. Reads pick keys
//! uniformly. With `buffer_bytes` below the data size the read phases show
//! the page provider at work (evictions and page reads in the report).

use crate::report::{format_table, new_histogram, PhaseResult};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use waypoint::{
    CommitProtocol, Database, Error, Options, PerWorkerOptions, Persistence, SchemeKind, Table,
};

#[derive(Debug, Clone, Serialize)]
pub struct EngineConfig {
    /// Database directory; a fresh temporary one if None.
    #[serde(skip)]
    pub dir: Option<PathBuf>,
    pub workers: usize,
    pub records: u64,
    pub value_size: usize,
    pub batch: usize,
    pub buffer_bytes: usize,
    pub page_size: usize,
    /// Seconds for each timed phase (point reads, scans).
    pub duration_secs: f64,
    pub reads_per_txn: usize,
    pub scan_length: usize,
    pub seed: u64,
    #[serde(skip)]
    pub scheme: SchemeKind,
    /// The per-worker scheme's commit protocol (unused under another).
    #[serde(skip)]
    pub commit: CommitProtocol,
    /// Names of `scheme` and `commit`, for the report.
    pub scheme_name: String,
    pub commit_name: String,
}

impl EngineConfig {
    /// The engine's options of the run.
    pub fn engine_options(&self) -> Options {
        Options {
            page_size: Some(self.page_size),
            buffer_pool_bytes: self.buffer_bytes,
            persistence: Persistence::of(
                self.scheme,
                PerWorkerOptions {
                    commit: self.commit,
                    ..PerWorkerOptions::default()
                },
            ),
            ..Options::default()
        }
    }

    /// Workers and seconds as the driver takes them ([`crate::driver`]),
    /// every count at least 1, values of 1 byte to the largest a table
    /// takes at `page_size`, and the engine's options.
    pub fn validate(&self) -> Result<(), Error> {
        use crate::driver::{check_seconds, check_workers, out_of_range};
        let checks = || -> crate::BenchResult<()> {
            check_workers("workers", self.workers)?;
            check_seconds("duration_secs", self.duration_secs)?;
            self.engine_options().validate()?;
            for (name, n) in [
                ("records", self.records),
                ("batch", self.batch as u64),
                ("reads_per_txn", self.reads_per_txn as u64),
                ("scan_length", self.scan_length as u64),
            ] {
                if n == 0 {
                    return Err(out_of_range(name, n, "at least 1"));
                }
            }
            let max = Database::max_value_len_for(self.page_size);
            if !(1..=max).contains(&self.value_size) {
                return Err(out_of_range(
                    "value_size",
                    self.value_size,
                    &format!(
                        "1 to {max} (the largest value in pages of {} bytes)",
                        self.page_size
                    ),
                ));
            }
            Ok(())
        };
        checks().map_err(crate::BenchError::into_engine)
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            dir: None,
            workers: 2,
            records: 1_000_000,
            value_size: 100,
            batch: 100,
            buffer_bytes: 1 << 30,
            page_size: 16384,
            duration_secs: 10.0,
            reads_per_txn: 10,
            scan_length: 100,
            seed: 42,
            scheme: SchemeKind::PerWorker,
            commit: CommitProtocol::RfaGroup,
            scheme_name: "per-worker".into(),
            commit_name: "rfa-group".into(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct EngineReport {
    /// The binary that ran: version and commit ([`crate::BUILD`]).
    pub build: String,
    pub config: EngineConfig,
    pub data_bytes: u64,
    pub phases: Vec<PhaseResult>,
    pub evictions: u64,
    pub pages_read: u64,
    pub pages_written: u64,
    pub close_seconds: f64,
    pub reopen_seconds: f64,
    pub verified_records: u64,
    pub wal_bytes: u64,
    pub wal_syncs: u64,
    pub wal_bytes_per_load_txn: f64,
}

impl EngineReport {
    pub fn table(&self) -> String {
        format_table(&self.phases)
    }
}

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn value(i: u64, size: usize) -> Vec<u8> {
    let mut v = vec![0u8; size];
    for (j, b) in v.iter_mut().enumerate() {
        *b = (i as usize).wrapping_add(j) as u8;
    }
    v
}

/// Called once per second of a timed phase with (phase, second, txns so far).
pub type Progress<'a> = &'a (dyn Fn(&str, u64, u64) + Sync);

struct PhaseCounters {
    txns: AtomicU64,
    records: AtomicU64,
    aborts: AtomicU64,
}

/// Run `worker` on every worker thread for the phase; workers stop when
/// `stop` is set (timed phases) or when they return (fixed-size phases).
fn run_phase<F>(
    name: &str,
    workers: usize,
    duration: Option<Duration>,
    progress: Progress<'_>,
    worker: F,
) -> Result<PhaseResult, Error>
where
    F: Fn(
            usize,
            &AtomicBool,
            &PhaseCounters,
            &mut hdrhistogram::Histogram<u64>,
        ) -> Result<(), Error>
        + Sync,
{
    let counters = PhaseCounters {
        txns: AtomicU64::new(0),
        records: AtomicU64::new(0),
        aborts: AtomicU64::new(0),
    };
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let start = Instant::now();
    let mut hist = new_histogram();
    std::thread::scope(|s| -> Result<(), Error> {
        let mut handles = Vec::with_capacity(workers);
        for w in 0..workers {
            let (stop, counters, worker, done) = (&stop, &counters, &worker, &done);
            let spawned = std::thread::Builder::new()
                .name(format!("bench-{name}-{w}"))
                .spawn_scoped(s, move || {
                    let mut h = new_histogram();
                    let r = worker(w, stop, counters, &mut h);
                    done.fetch_add(1, Ordering::Release);
                    r.map(|()| h)
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // Stop those started (the scope joins them).
                    stop.store(true, Ordering::Release);
                    return Err(crate::driver::spawn_failed(w, workers, &e).into_engine());
                }
            }
        }
        let mut second = 0;
        while done.load(Ordering::Acquire) < workers as u64 {
            std::thread::sleep(Duration::from_millis(50));
            let elapsed = start.elapsed();
            if elapsed.as_secs() > second {
                second = elapsed.as_secs();
                progress(name, second, counters.txns.load(Ordering::Relaxed));
            }
            if duration.is_some_and(|d| elapsed >= d) {
                stop.store(true, Ordering::Release);
            }
        }
        for h in handles {
            let worker_hist = h.join().expect("benchmark worker panicked")?;
            hist.add(&worker_hist).expect("same histogram bounds");
        }
        Ok(())
    })?;
    Ok(PhaseResult::new(
        name,
        counters.txns.load(Ordering::Relaxed),
        counters.records.load(Ordering::Relaxed),
        start.elapsed().as_secs_f64(),
        counters.aborts.load(Ordering::Relaxed),
        &hist,
    ))
}

pub fn run(config: &EngineConfig, progress: Progress<'_>) -> Result<EngineReport, Error> {
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
    let options = config.engine_options();
    let db = Database::open(&dir, options.clone())?;
    let table = db.open_or_create_table("bench")?;
    let workers = config.workers;
    let mut phases = Vec::new();

    // Load: each worker inserts its slice in batches.
    let per_worker = config.records.div_ceil(workers as u64);
    phases.push(run_phase("load", workers, None, progress, |w, _, c, h| {
        let mut session = db.session();
        let lo = w as u64 * per_worker;
        let hi = (lo + per_worker).min(config.records);
        let mut i = lo;
        while i < hi {
            let end = (i + config.batch as u64).min(hi);
            let t0 = Instant::now();
            let attempts = insert_batch(&mut session, &table, i, end, config.value_size)?;
            h.saturating_record(t0.elapsed().as_micros() as u64);
            c.txns.fetch_add(1, Ordering::Relaxed);
            c.records.fetch_add(end - i, Ordering::Relaxed);
            c.aborts.fetch_add(attempts - 1, Ordering::Relaxed);
            i = end;
        }
        Ok(())
    })?);

    let duration = Some(Duration::from_secs_f64(config.duration_secs));
    phases.push(run_phase(
        "point-read",
        workers,
        duration,
        progress,
        |w, stop, c, h| {
            let mut session = db.session();
            let mut rng = SmallRng::seed_from_u64(config.seed ^ (w as u64 + 1));
            while !stop.load(Ordering::Acquire) {
                let t0 = Instant::now();
                let mut tx = session.begin()?;
                for _ in 0..config.reads_per_txn {
                    let k = rng.gen_range(0..config.records);
                    let v = tx.get(&table, &key(k))?;
                    assert!(v.is_some(), "loaded key {k} is missing");
                }
                match tx.commit() {
                    Ok(_) => {
                        h.saturating_record(t0.elapsed().as_micros() as u64);
                        c.txns.fetch_add(1, Ordering::Relaxed);
                        c.records
                            .fetch_add(config.reads_per_txn as u64, Ordering::Relaxed);
                    }
                    Err(Error::Conflict) => {
                        c.aborts.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        },
    )?);

    phases.push(run_phase(
        "range-scan",
        workers,
        duration,
        progress,
        |w, stop, c, h| {
            let mut session = db.session();
            let mut rng = SmallRng::seed_from_u64(config.seed ^ (w as u64 + 101));
            while !stop.load(Ordering::Acquire) {
                let t0 = Instant::now();
                let start = rng.gen_range(0..config.records);
                let mut tx = session.begin()?;
                let from = key(start);
                let rows = tx.scan(&table, from.as_slice().., config.scan_length)?;
                let n = rows.len() as u64;
                assert_eq!(
                    n,
                    config.scan_length.min((config.records - start) as usize) as u64,
                    "scan returned a wrong count"
                );
                match tx.commit() {
                    Ok(_) => {
                        h.saturating_record(t0.elapsed().as_micros() as u64);
                        c.txns.fetch_add(1, Ordering::Relaxed);
                        c.records.fetch_add(n, Ordering::Relaxed);
                    }
                    Err(Error::Conflict) => {
                        c.aborts.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        },
    )?);

    let stats = db.stats();
    let load_txns = phases[0].txns;
    let t0 = Instant::now();
    drop(table);
    db.close()?;
    let close_seconds = t0.elapsed().as_secs_f64();

    // Reopen and verify every record is there.
    let t0 = Instant::now();
    let db = Database::open(&dir, options)?;
    let table = db.table("bench")?;
    let reopen_seconds = t0.elapsed().as_secs_f64();
    let mut session = db.session();
    let mut verified = 0u64;
    let mut next = Vec::new();
    loop {
        let mut tx = session.begin()?;
        let rows = tx.scan(&table, next.as_slice().., 10_000)?;
        drop(tx);
        if rows.is_empty() {
            break;
        }
        for (k, v) in &rows {
            let i = u64::from_be_bytes(k.as_slice().try_into().expect("8-byte keys"));
            if i != verified || *v != value(i, config.value_size) {
                return Err(Error::InvalidOptions(format!(
                    "verification failed at record {verified}: found key {i}"
                )));
            }
            verified += 1;
        }
        next = rows.last().expect("non-empty").0.clone();
        next.push(0);
    }
    if verified != config.records {
        return Err(Error::InvalidOptions(format!(
            "verification found {verified} of {} records",
            config.records
        )));
    }
    drop(session);
    drop(table);
    db.close()?;

    Ok(EngineReport {
        build: crate::BUILD.to_string(),
        config: config.clone(),
        data_bytes: config.records * (8 + config.value_size as u64),
        phases,
        evictions: stats.pool.evictions,
        pages_read: stats.pool.pages_read,
        pages_written: stats.pool.pages_written_by_provider + stats.pool.pages_written_by_flush,
        close_seconds,
        reopen_seconds,
        verified_records: verified,
        wal_bytes: stats.persistence.log.appended_bytes,
        wal_syncs: stats.persistence.log.syncs,
        wal_bytes_per_load_txn: stats.persistence.log.appended_bytes as f64
            / load_txns.max(1) as f64,
    })
}

/// Insert records `lo..hi` in one transaction, retrying conflicts.
/// Returns the number of attempts.
fn insert_batch(
    session: &mut waypoint::Session,
    table: &Table,
    lo: u64,
    hi: u64,
    value_size: usize,
) -> Result<u64, Error> {
    let mut attempts = 0;
    session.run(100, |tx| {
        attempts += 1;
        for i in lo..hi {
            tx.insert(table, &key(i), &value(i, value_size))?;
        }
        Ok(())
    })?;
    Ok(attempts)
}
