//! waypoint-sim: deterministic crash simulation of the waypoint engine on
//! its simulated disk (`waypoint::io::SimStorage`), the harness behind
//! `waypoint simulate` (issue 6).
//!
//! Per seed, [`plan::Plan`] draws a workload, an option set and a fault
//! schedule; [`run_seed`] loads a database, runs the workload until the
//! disk fails, crashes it (sometimes again during recovery), recovers and
//! checks the result against what was acknowledged. This module owns the
//! run of one seed: its phases, the fault injection, the time limit and
//! the report. The workloads live in [`bank`], [`updates`] and [`tpcc`].

pub mod bank;
pub mod plan;
pub mod tpcc;
pub mod updates;

pub use plan::{Plan, SimOptions, Workload};

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use waypoint::io::{Fault, FaultKind, SimStorage};
use waypoint::{
    CentralOptions, Database, Error, Options, PerWorkerOptions, Persistence, SchemeKind,
};

/// A seed that has not finished after this long is reported as a failure
/// (a hang) and left running in the background.
pub const SEED_TIME_LIMIT: Duration = Duration::from_secs(180);

/// The result of one seed.
#[derive(Debug, Clone)]
pub struct SeedResult {
    pub seed: u64,
    /// The seed's choices on one line (`Plan::describe`).
    pub description: String,
    /// `Err` names the check that failed, the phase, or the panic.
    pub outcome: Result<Summary, String>,
    pub elapsed: Duration,
}

/// What a passing seed did.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Transactions acknowledged before the crash.
    pub acked: u64,
    /// Whether the freeze (or the early fault) fired during the workload.
    pub froze_in_workload: bool,
    /// `none` only: the reopen after the crash was refused
    /// (`NotRecoverable`: pages had been written since the clean close).
    pub refused: bool,
    /// `silor` only: where a checkpoint was when the disk froze, if one
    /// was under way.
    pub checkpoint_at_crash: Option<CheckpointAtCrash>,
    /// The disk froze during the first reopen (the planned second crash
    /// landed inside recovery).
    pub crashed_in_recovery: bool,
}

/// Where a `silor` checkpoint was when the disk froze.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointAtCrash {
    /// Its walk had written rows; its files were not yet whole.
    Walking,
    /// Its files were whole; the pepoch file did not name it yet (waiting
    /// for pepoch ≥ eh, or writing the pepoch file).
    Installing,
    /// Installed; the old logs, checkpoints and generations not yet all
    /// deleted.
    Pruning,
}

impl SeedResult {
    pub fn passed(&self) -> bool {
        self.outcome.is_ok()
    }
}

/// A memory-resident scheme's pool: it steals nothing, so the drawn
/// small pools (meant to force steals) would only fill with changes.
const SILOR_POOL_PAGES: usize = 4096;

/// The buffer pool of `plan`, in pages.
fn buffer_pages(plan: &Plan) -> usize {
    match plan.scheme {
        SchemeKind::Silor | SchemeKind::Command => plan.buffer_pages.max(SILOR_POOL_PAGES),
        _ => plan.buffer_pages,
    }
}

/// The engine's options for `plan` on `sim`.
pub fn options(plan: &Plan, sim: &SimStorage) -> Options {
    let log = PerWorkerOptions {
        commit: plan.protocol,
        checkpoint: plan.checkpoint,
        wal_limit_bytes: plan.wal_limit,
        checkpoint_shards: plan.shards,
        checkpoint_threads: plan.checkpoint_threads,
        log_sync_interval: std::time::Duration::from_micros(plan.sync_interval_us),
        // Small segments: runs roll over often, through the preallocated
        // spares, and a 16 MiB spare per partition would make the
        // simulated disk (plain vectors) slow and large.
        wal_segment_bytes: SEGMENT_BYTES,
        wal_zero_fill: plan.zero_fill,
        ..PerWorkerOptions::default()
    };
    let persistence = match plan.scheme {
        SchemeKind::PerWorker => Persistence::PerWorker(log),
        SchemeKind::Aries => Persistence::Aries(CentralOptions::from_log(log)),
        SchemeKind::Aether => Persistence::Aether(CentralOptions::from_log(log)),
        SchemeKind::None => Persistence::None,
        SchemeKind::Silor => Persistence::Silor(plan.silor.clone()),
        // Snapshots as often as allowed, so crashes land inside them;
        // digests on: a replay that goes another way is caught at the call.
        SchemeKind::Command => Persistence::Command(waypoint::CommandOptions {
            partitions: plan.command_partitions(),
            snapshot: waypoint::CommandSnapshot::Periodic {
                interval: waypoint::CommandOptions::MIN_INTERVAL,
            },
            digests: true,
            executors: plan.command_executors(),
            ..waypoint::CommandOptions::default()
        }),
    };
    Options {
        page_size: Some(plan::PAGE_SIZE),
        buffer_pool_bytes: buffer_pages(plan) * plan::PAGE_SIZE,
        storage: Some(Arc::new(sim.clone())),
        persistence,
        // The bank's transfers and TPC-C's transactions (loaded through
        // the bench's loader procedure) run as procedures under `command`.
        procedures: waypoint_bench::load::register(bank::procedures())
            .and_then(waypoint_bench::tpcc::procedures::register)
            .expect("the simulator's procedure names are distinct"),
        ..Options::default()
    }
}

/// Every table's name and rows (key, value), in name order.
type Contents = Vec<(String, Vec<(Vec<u8>, Vec<u8>)>)>;

/// Every table's rows, by table name: what a `none` database must read
/// back after a crash if it opens at all (the state of its last clean
/// close).
fn contents(db: &Database) -> Result<Contents, String> {
    let mut names = db.table_names();
    names.sort();
    let mut s = db.session();
    let mut tx = s.begin().map_err(|e| format!("begin: {e}"))?;
    let mut out = Vec::new();
    for name in names {
        let table = db.table(&name).map_err(|e| format!("table {name}: {e}"))?;
        let rows = tx
            .scan(&table, .., usize::MAX)
            .map_err(|e| format!("scan of {name}: {e}"))?;
        out.push((name, rows));
    }
    Ok(out)
}

const DIR: &str = "/db";

/// `PerWorkerOptions::wal_segment_bytes` of every simulated run.
pub const SEGMENT_BYTES: u64 = 64 << 10;

/// What the workload acknowledged, per workload kind.
enum Acked {
    Bank(HashSet<[u8; 8]>),
    Updates(updates::Outcome),
    Tpcc(tpcc::Outcome),
}

impl Acked {
    fn count(&self) -> u64 {
        match self {
            Acked::Bank(keys) => keys.len() as u64,
            Acked::Updates(o) => o.acked_txns(),
            Acked::Tpcc(o) => o.acked_txns(),
        }
    }
}

fn inject(sim: &SimStorage, f: &plan::PlannedFault) {
    let mut fault = Fault::at(sim.op_count() + f.after, f.kind);
    if let Some(p) = f.path {
        fault = fault.on_path(p);
    }
    sim.inject(fault);
}

/// The run itself; `Err` says which phase or check failed.
// `options_in` carries only the broken-RFA switch this far.
#[cfg_attr(not(feature = "testing"), allow(unused_variables))]
fn execute(plan: &Plan, options_in: &SimOptions) -> Result<Summary, String> {
    let sim = SimStorage::new(plan.seed);
    sim.set_direct_log(plan.direct_log);
    // 1. Load and close cleanly: the durable starting point.
    {
        let db = Database::open(DIR, options(plan, &sim)).map_err(|e| format!("create: {e}"))?;
        match plan.workload {
            plan::Workload::Updates => updates::load(&db).map_err(|e| e.to_string()),
            plan::Workload::Tpcc => tpcc::load(&db).map_err(|e| e.to_string()),
            plan::Workload::Bank | plan::Workload::Toggles => {
                bank::load(&db).map_err(|e| e.to_string())
            }
        }
        .map_err(|e| format!("load: {e}"))?;
        db.close()
            .map_err(|e| format!("clean close after load: {e}"))?;
    }
    // Without a log, a crash keeps the load's clean close or nothing.
    let loaded = match plan.scheme {
        SchemeKind::None => {
            let db = Database::open(DIR, options(plan, &sim))
                .map_err(|e| format!("reopen after load: {e}"))?;
            let rows = contents(&db)?;
            db.close()
                .map_err(|e| format!("clean close after reading the load: {e}"))?;
            Some(rows)
        }
        SchemeKind::PerWorker
        | SchemeKind::Aries
        | SchemeKind::Aether
        | SchemeKind::Silor
        | SchemeKind::Command => None,
    };
    // 2. The workload, until the disk freezes (or fails and then freezes).
    let db = Database::open(DIR, options(plan, &sim)).map_err(|e| format!("reopen: {e}"))?;
    #[cfg(feature = "testing")]
    if options_in.broken_rfa {
        if let Some(wal) = db.wal() {
            wal.set_broken_rfa_for_tests(true);
        }
    }
    #[cfg(feature = "testing")]
    if options_in.broken_commit_ack {
        if let Some(wal) = db.wal() {
            wal.set_broken_commit_ack_for_tests(true);
        }
        if let Some(silor) = db.silor() {
            silor.set_broken_commit_ack_for_tests(true);
        }
        if let Some(command) = db.command() {
            command.set_broken_commit_ack_for_tests(true);
        }
    }
    #[cfg(feature = "testing")]
    if options_in.broken_early_release {
        if let Some(wal) = db.wal() {
            wal.set_broken_early_release_for_tests(true);
        }
    }
    #[cfg(feature = "testing")]
    if options_in.broken_unclean_mark {
        if let Some(none) = db.none_scheme() {
            none.set_broken_unclean_mark_for_tests(true);
        }
    }
    // The stage of the last checkpoint reached before the disk froze
    // (hooks run on the checkpointing thread; a stage that fails after
    // the freeze never reports).
    let stage: Arc<Mutex<Option<waypoint::silor::CheckpointStage>>> = Arc::default();
    if let Some(silor) = db.silor() {
        let (stage, sim) = (Arc::clone(&stage), sim.clone());
        silor.set_checkpoint_hook(Some(Arc::new(move |s| {
            if !sim.is_frozen() {
                *stage.lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
            }
        })));
    }
    let (n, per, seed) = (plan.sessions, plan.txns_per_session, plan.workload_seed);
    // TPC-C binds its tables through reads: before the faults, which are
    // meant for the workload.
    let tpcc_workload = match plan.workload {
        plan::Workload::Tpcc => {
            Some(tpcc::prepare(&db, seed).map_err(|e| format!("workload setup: {e}"))?)
        }
        _ => None,
    };
    if let Some(f) = &plan.early_fault {
        inject(&sim, f);
    }
    inject(&sim, &plan.freeze);
    let acked = match plan.workload {
        plan::Workload::Bank => bank::run_transfers(&db, n, per, seed, false)
            .map(Acked::Bank)
            .map_err(|e| e.to_string()),
        plan::Workload::Toggles => bank::run_transfers(&db, n, per, seed, true)
            .map(Acked::Bank)
            .map_err(|e| e.to_string()),
        plan::Workload::Updates => updates::run(&db, n, per, seed)
            .map(Acked::Updates)
            .map_err(|e| e.to_string()),
        plan::Workload::Tpcc => match &tpcc_workload {
            Some(w) => tpcc::run(&db, w, n, per, seed)
                .map(Acked::Tpcc)
                .map_err(|e| e.to_string()),
            None => Err("TPC-C was not prepared".into()),
        },
    }
    .map_err(|e| format!("workload setup: {e}"))?;
    drop(tpcc_workload);
    let froze_in_workload = sim.is_frozen();
    if !froze_in_workload {
        // Finished first: the crash lands in the close instead.
        sim.inject(Fault::at(
            sim.op_count() + plan.close_freeze_after,
            FaultKind::Freeze,
        ));
    }
    // Fails once frozen: that is the crash.
    let closed_cleanly = db.close().is_ok();
    let checkpoint_at_crash = match *stage.lock().unwrap_or_else(|e| e.into_inner()) {
        _ if closed_cleanly => None,
        Some(waypoint::silor::CheckpointStage::Batch { .. }) => Some(CheckpointAtCrash::Walking),
        Some(waypoint::silor::CheckpointStage::Written) => Some(CheckpointAtCrash::Installing),
        Some(waypoint::silor::CheckpointStage::Installed) => Some(CheckpointAtCrash::Pruning),
        Some(waypoint::silor::CheckpointStage::Pruned) | None => None,
    };
    // 3. Power loss, sometimes again during recovery.
    sim.clear_faults();
    sim.crash(plan.crash);
    let mut crashed_in_recovery = false;
    if let Some((at, policy)) = plan.recovery_crash {
        sim.inject(Fault::at(sim.op_count() + at, FaultKind::Freeze));
        match Database::open(DIR, options(plan, &sim)) {
            // Recovery is over once open returns; a freeze in the close
            // that follows is not inside it.
            Ok(db) => {
                let _ = db.close();
            }
            Err(_) => crashed_in_recovery = sim.is_frozen(),
        }
        sim.clear_faults();
        sim.crash(policy);
    }
    // 4. Recover and check.
    let reopened = Database::open(DIR, options(plan, &sim));
    let mut refused = false;
    let db = match (&loaded, reopened) {
        // `none`: refused once it wrote pages since its clean close;
        // else at the load's clean close, or at the workload's (then
        // checked as the per-worker scheme's recovery is).
        (Some(_), Err(Error::NotRecoverable { .. })) if !closed_cleanly => {
            refused = true;
            None
        }
        (Some(loaded), Ok(db)) if !closed_cleanly && contents(&db)? == *loaded => {
            db.close()
                .map_err(|e| format!("clean close after the crash: {e}"))?;
            None
        }
        (Some(_), r) => Some(r.map_err(|e| format!("reopen after the crash: {e}"))?),
        (None, r) => Some(r.map_err(|e| format!("recovery failed: {e}"))?),
    };
    let Some(db) = db else {
        return Ok(Summary {
            acked: 0,
            froze_in_workload,
            refused,
            checkpoint_at_crash,
            crashed_in_recovery,
        });
    };
    match &acked {
        Acked::Bank(keys) => bank::verify(&db, keys),
        Acked::Updates(outcome) => updates::verify(&db, outcome),
        Acked::Tpcc(outcome) => tpcc::verify(&db, outcome),
    }?;
    db.close()
        .map_err(|e| format!("clean close after recovery: {e}"))?;
    Ok(Summary {
        acked: acked.count(),
        froze_in_workload,
        refused: false,
        checkpoint_at_crash,
        crashed_in_recovery,
    })
}

/// Panic messages (with their location) of the threads of the seed being
/// run, collected by the hook [`capture_panics`] installs.
static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Replace the panic hook by one that records each panic's message and
/// location for the seed's report instead of printing it (a panic in a
/// session thread reaches the seed only as "a scoped thread panicked").
/// Without it, panics print as usual and are still reported.
pub fn capture_panics() {
    std::panic::set_hook(Box::new(|info| {
        let msg = match info.payload().downcast_ref::<&str>() {
            Some(s) => s.to_string(),
            None => match info.payload().downcast_ref::<String>() {
                Some(s) => s.clone(),
                None => "(non-string payload)".into(),
            },
        };
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("unnamed");
        PANICS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("thread '{name}' panicked{at}: {msg}"));
    }));
}

/// Run one seed (on a thread of its own, within [`SEED_TIME_LIMIT`]).
pub fn run_seed(seed: u64, options: &SimOptions) -> SeedResult {
    let plan = Plan::new(seed, options);
    let description = plan.describe();
    let started = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    let options = options.clone();
    PANICS.lock().unwrap_or_else(|e| e.into_inner()).clear();
    let spawned = std::thread::Builder::new()
        .name(format!("sim-seed-{seed}"))
        .spawn(move || {
            let r =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| execute(&plan, &options)));
            let _ = tx.send(r);
        });
    let outcome = match spawned {
        Err(e) => Err(format!("cannot start the seed's thread: {e}")),
        Ok(_) => match rx.recv_timeout(SEED_TIME_LIMIT) {
            Ok(Ok(Ok(summary))) => {
                // A panic on an engine thread of its own (a log writer, the
                // checkpointer) does not reach the seed's thread.
                let recorded = PANICS.lock().unwrap_or_else(|e| e.into_inner()).join("; ");
                if recorded.is_empty() {
                    Ok(summary)
                } else {
                    Err(format!("a background thread panicked: {recorded}"))
                }
            }
            Ok(Ok(Err(e))) => Err(e),
            Ok(Err(payload)) => {
                let recorded = PANICS.lock().unwrap_or_else(|e| e.into_inner()).join("; ");
                let msg = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Err(if recorded.is_empty() {
                    format!("panic: {msg}")
                } else {
                    format!("panic: {recorded}")
                })
            }
            Err(_) => Err(format!(
                "no result after {} s (hang?); the seed's thread is left running",
                SEED_TIME_LIMIT.as_secs()
            )),
        },
    };
    SeedResult {
        seed,
        description,
        outcome,
        elapsed: started.elapsed(),
    }
}
