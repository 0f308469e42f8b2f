//! Runs YCSB or TPC-B on a [`KvEngine`]: load through the engine, then
//! `workers` client threads, each committing one transaction at a time
//! (none of the peers pipelines commits), sampled once per second by the
//! driver's own [`sample_loop`], then the workload's invariant check on
//! the engine's rows.
//!
//! Invariant: as in [`crate::driver`], a transaction counts as committed
//! once its commit returned, its latency runs from its begin until then,
//! and the warm-up is sampled but not counted.

use super::{KvEngine, KvError, PeerTx};
use crate::driver::{pin_cores, sample_loop, spawn_failed, Counters, DriverConfig};
use crate::error::{BenchError, BenchResult};
use crate::kv::{each_row, RowFn, PAGE_ROWS};
use crate::metrics::{Sample, Snapshot};
use crate::report::new_histogram;
use crate::tpcb::{self, Tpcb, TpcbTxns};
use crate::workload::Workload;
use crate::ycsb::{self, Ycsb, YcsbTxns};
use hdrhistogram::Histogram;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// A workload the peers run.
pub enum PeerWorkload {
    Ycsb(Ycsb),
    Tpcb(Tpcb),
}

/// One thread's transactions.
enum Txns<'a> {
    Ycsb(YcsbTxns<'a>),
    Tpcb(TpcbTxns<'a>),
}

impl Txns<'_> {
    fn run(&mut self, tx: &mut PeerTx<'_>) -> (usize, Result<(), KvError>) {
        match self {
            Txns::Ycsb(t) => t.run(tx),
            Txns::Tpcb(t) => (0, t.run(tx)),
        }
    }
}

/// Rows per loading transaction.
const LOAD_BATCH: u64 = 1000;

impl PeerWorkload {
    pub fn tables(&self) -> &'static [&'static str] {
        match self {
            PeerWorkload::Ycsb(_) => ycsb::TABLES,
            PeerWorkload::Tpcb(_) => tpcb::TABLES,
        }
    }

    fn txn_types(&self) -> Vec<&'static str> {
        match self {
            PeerWorkload::Ycsb(w) => w.txn_types(),
            PeerWorkload::Tpcb(w) => w.txn_types(),
        }
    }

    fn txns(&self, worker: usize, seed: u64) -> Txns<'_> {
        match self {
            PeerWorkload::Ycsb(w) => Txns::Ycsb(w.txns(seed)),
            PeerWorkload::Tpcb(w) => Txns::Tpcb(w.txns(worker, seed)),
        }
    }

    /// The workload's parameters in their ranges (as its waypoint
    /// `validate` checks them for pages of `page_size`).
    fn check(&self, page_size: usize) -> BenchResult<()> {
        match self {
            PeerWorkload::Ycsb(w) => w.config.check(page_size),
            PeerWorkload::Tpcb(w) => w.config.check(),
        }
    }

    /// The rows the workload starts from, by table number: the same rows
    /// its waypoint `setup` loads.
    pub(crate) fn load(&self, engine: &dyn KvEngine) -> BenchResult<u64> {
        let (table, rows): (Vec<usize>, Vec<u64>) = match self {
            PeerWorkload::Ycsb(w) => (vec![0], vec![w.config.records]),
            PeerWorkload::Tpcb(w) => (
                vec![0, 1, 2],
                vec![w.config.branches, w.config.tellers(), w.config.accounts()],
            ),
        };
        let mut handle = engine.handle()?;
        for (&t, &n) in table.iter().zip(&rows) {
            let mut from = 0;
            while from < n {
                let to = (from + LOAD_BATCH).min(n);
                handle.transact(&mut |tx| {
                    for i in from..to {
                        let (k, v) = match self {
                            PeerWorkload::Ycsb(w) => (
                                ycsb::key(i).to_vec(),
                                ycsb::load_value(i, w.config.value_size),
                            ),
                            PeerWorkload::Tpcb(_) => (tpcb::id(i).to_vec(), tpcb::initial_row(t)),
                        };
                        tx.insert(t, &k, &v)?;
                    }
                    Ok(())
                })?;
                from = to;
            }
        }
        Ok(rows.iter().sum())
    }

    /// The workload's invariant check on the engine's rows.
    pub(crate) fn verify(&self, engine: &dyn KvEngine) -> BenchResult<serde_json::Value> {
        let mut handle = engine.handle()?;
        let mut each = |table: usize, f: &mut RowFn<'_>| {
            each_row(
                |from| {
                    let mut rows = Vec::new();
                    handle.transact(&mut |tx| {
                        rows = tx.scan(table, from, PAGE_ROWS)?;
                        Ok(())
                    })?;
                    Ok(rows)
                },
                f,
            )
        };
        match self {
            PeerWorkload::Ycsb(w) => ycsb::check_rows(&w.config, |f| each(0, f)),
            PeerWorkload::Tpcb(w) => {
                let v = tpcb::check_sums(&mut each)?;
                w.check_counts(&v)?;
                Ok(serde_json::to_value(v).expect("serializes"))
            }
        }
    }
}

/// What a run on a peer measured.
pub struct PeerOutput {
    /// [`KvEngine::durability`].
    pub durability: String,
    pub series: Vec<Sample>,
    pub measured_secs: f64,
    pub committed: u64,
    pub aborts: u64,
    /// Process CPU time over the measured window.
    pub cpu_ms: u64,
    /// Commit latencies of the measured window, in µs.
    pub latency_us: Histogram<u64>,
    pub loaded_rows: u64,
    pub verify: serde_json::Value,
}

/// Load `workload` into `engine`, run it with `config`'s workers,
/// duration, warm-up, seed and interrupt, check its invariant, close the
/// engine. `progress` sees each per-second sample.
pub fn run(
    engine: Box<dyn KvEngine>,
    workload: &PeerWorkload,
    config: &DriverConfig,
    progress: &(dyn Fn(&Sample) + Sync),
) -> BenchResult<PeerOutput> {
    config.validate()?;
    workload.check(config.page_size)?;
    let loaded_rows = workload.load(engine.as_ref())?;
    let types = workload.txn_types();
    let counters = Counters::new(types.len(), config.workers, config);
    let cores = pin_cores(config.pin, config.workers);
    let snapshot = || {
        Snapshot::of_process(
            Counters::load(&counters.committed),
            Counters::load(&counters.aborts),
        )
    };
    let engine_ref: &dyn KvEngine = engine.as_ref();
    let (series, base, end, measured_secs, hist) = std::thread::scope(|s| -> BenchResult<_> {
        let mut threads = Vec::with_capacity(config.workers);
        for w in 0..config.workers {
            let counters = &counters;
            let core = cores.as_ref().map(|c| c[w % c.len()]);
            let spawned = std::thread::Builder::new()
                .name(format!("peer-client-{w}"))
                .spawn_scoped(s, move || {
                    if let Some(core) = core {
                        core_affinity::set_for_current(core);
                    }
                    let r = client(engine_ref, workload, config, w, counters);
                    if r.is_err() {
                        counters.stop.store(true, Ordering::Release);
                    }
                    counters.running.fetch_sub(1, Ordering::Release);
                    r
                });
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    counters.stop.store(true, Ordering::Release);
                    return Err(spawn_failed(w, config.workers, &e));
                }
            }
        }
        let (series, base, end, secs) = sample_loop(config, &counters, &snapshot, progress);
        counters.stop.store(true, Ordering::Release);
        let mut hist = new_histogram();
        for t in threads {
            let one = t.join().expect("peer client panicked")?;
            hist.add(&one).expect("same histogram bounds");
        }
        Ok((series, base, end, secs, hist))
    })?;
    let verify = workload.verify(engine.as_ref())?;
    let durability = engine.durability();
    engine.close()?;
    Ok(PeerOutput {
        durability,
        series,
        measured_secs,
        committed: end.total_committed() - base.total_committed(),
        aborts: end.total_aborts() - base.total_aborts(),
        cpu_ms: end.cpu_ms.saturating_sub(base.cpu_ms),
        latency_us: hist,
        loaded_rows,
        verify,
    })
}

/// One client thread: a transaction at a time until told to stop.
fn client(
    engine: &dyn KvEngine,
    workload: &PeerWorkload,
    config: &DriverConfig,
    w: usize,
    counters: &Counters,
) -> BenchResult<Histogram<u64>> {
    let mut handle = engine.handle()?;
    let mut txns = workload.txns(w, config.seed ^ ((w as u64 + 1) << 32));
    let mut hist = new_histogram();
    while !counters.stop.load(Ordering::Acquire) {
        let t0 = Instant::now();
        let mut ty = 0;
        let outcome = handle.transact(&mut |tx| {
            let (t, r) = txns.run(tx);
            ty = t;
            r
        });
        match outcome {
            Ok(()) => {
                if counters.measuring.load(Ordering::Relaxed) {
                    hist.saturating_record(t0.elapsed().as_micros() as u64);
                }
                counters.committed[ty].fetch_add(1, Ordering::Relaxed);
            }
            Err(KvError::Abort(_)) => {
                counters.aborts[ty].fetch_add(1, Ordering::Relaxed);
            }
            Err(e @ KvError::Fatal(_)) => return Err(BenchError::from(e)),
        }
    }
    Ok(hist)
}
