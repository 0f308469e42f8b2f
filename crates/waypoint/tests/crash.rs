//! Simulated power loss: every acknowledged commit survives, nothing
//! partial is visible, invariants hold (DESIGN.md invariant 5).
//!
//! Each seed: several sessions run bank transfers on a buffer pool much
//! smaller than the data (so pages with uncommitted changes are stolen and
//! written), each transfer also inserting a history row; the simulated disk
//! freezes at a random operation; the crash image keeps a random subset of
//! the unsynced writes, torn at sector granularity; sometimes the disk
//! freezes again during recovery. After the final recovery:
//! - every acknowledged transfer's history row is present;
//! - every account's balance equals its initial balance plus the history
//!   rows that credit it minus those that debit it (no partial transfer);
//! - the total balance is unchanged and every tree checks out.
//!
//! `WAYPOINT_CRASH_SEEDS` sets the number of seeds (default 200); a failing
//! seed prints itself, and `WAYPOINT_CRASH_SEED=N` reruns just that one.
//!
//! The workload, its driver loop and its checks are `waypoint_sim::bank`
//! (shared with `waypoint simulate`, which also varies the options and
//! aims faults); this file keeps the fixed option set and the regression
//! and detection tests.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use waypoint::io::{CrashPolicy, Fault, FaultKind, SimStorage};
use waypoint::wal::CommitProtocol;
use waypoint::{Database, Options, PerWorkerOptions, Persistence};

fn options(sim: &SimStorage, protocol: CommitProtocol) -> Options {
    Options {
        page_size: Some(4096),
        buffer_pool_bytes: 24 * 4096,
        storage: Some(Arc::new(sim.clone())),
        persistence: Persistence::PerWorker(PerWorkerOptions {
            // Small enough that checkpoint increments, pruning and metadata
            // renames happen in most runs, so crashes land inside them too.
            wal_limit_bytes: 64 << 10,
            commit: protocol,
            checkpoint_shards: 4,
            checkpoint_threads: 2,
            ..PerWorkerOptions::default()
        }),
        ..Options::default()
    }
}

/// Load the accounts and close cleanly: the durable starting point.
fn load(sim: &SimStorage, protocol: CommitProtocol) {
    let db = Database::open("/db", options(sim, protocol)).expect("open for load");
    waypoint_sim::bank::load(&db).expect("load");
    db.close().expect("clean close after load");
}

/// Run transfers until the disk freezes; returns acknowledged history keys.
fn run_until_frozen(
    sim: &SimStorage,
    protocol: CommitProtocol,
    seed: u64,
    freeze_after: u64,
    broken_rfa: bool,
) -> HashSet<[u8; 8]> {
    let db = Database::open("/db", options(sim, protocol)).expect("open for the workload");
    db.wal()
        .expect("logging is on")
        .set_broken_rfa_for_tests(broken_rfa);
    sim.inject(Fault::at(sim.op_count() + freeze_after, FaultKind::Freeze));
    let acked = waypoint_sim::bank::run_transfers(
        &db,
        SESSIONS.load(Ordering::Relaxed),
        400,
        seed,
        TOGGLING.load(Ordering::Relaxed),
    )
    .expect("tables exist");
    let _ = db.close(); // fails once frozen: that is the crash
    acked
}

fn verify(db: &Database, acked: &HashSet<[u8; 8]>, seed: u64) {
    waypoint_sim::bank::verify(db, acked).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
}

fn run_seed(seed: u64) {
    let protocols = [
        CommitProtocol::RfaGroup,
        CommitProtocol::Rfa,
        CommitProtocol::Group,
        CommitProtocol::FlushAll,
    ];
    run_seed_with(
        seed,
        protocols[(seed % protocols.len() as u64) as usize],
        false,
    );
}

fn run_seed_with(seed: u64, protocol: CommitProtocol, broken_rfa: bool) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let sim = SimStorage::new(seed);
    load(&sim, protocol);
    let acked = run_until_frozen(&sim, protocol, seed, rng.gen_range(50..4000), broken_rfa);
    // The workload may have finished before its freeze point was reached.
    sim.clear_faults();
    let policy = match rng.gen_range(0..4) {
        0 => CrashPolicy::DropAll,
        1 => CrashPolicy::KeepAll,
        _ => CrashPolicy::Random {
            keep: rng.gen_range(0.0..1.0),
            tear: rng.gen_bool(0.7),
        },
    };
    sim.crash(policy);
    // Sometimes crash again in the middle of recovery.
    if rng.gen_bool(0.3) {
        sim.inject(Fault::at(
            sim.op_count() + rng.gen_range(1..300),
            FaultKind::Freeze,
        ));
        if let Ok(db) = Database::open("/db", options(&sim, protocol)) {
            let _ = db.close();
        }
        sim.clear_faults();
        sim.crash(CrashPolicy::Random {
            keep: rng.gen_range(0.0..1.0),
            tear: true,
        });
    }
    let db = Database::open("/db", options(&sim, protocol))
        .unwrap_or_else(|e| panic!("seed {seed} ({protocol:?}, {policy:?}): recovery failed: {e}"));
    verify(&db, &acked, seed);
    db.close().unwrap();
}

#[test]
fn every_acknowledged_commit_survives_power_loss() {
    let _serial = serial();
    run_seeds();
}

/// Sessions running transfers: one by default; the multi-session tests and
/// the tests that expect failures use three.
static SESSIONS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

/// Whether the workload also flips contended toggle rows (see
/// `rollbacks_after_placeholders_survive_power_loss`).
static TOGGLING: AtomicBool = AtomicBool::new(false);

/// Sets the workload for one test and restores the defaults when dropped,
/// also when the test panics.
struct Workload;

impl Workload {
    fn set(sessions: u32, toggling: bool) -> Self {
        SESSIONS.store(sessions, Ordering::Relaxed);
        TOGGLING.store(toggling, Ordering::Relaxed);
        Workload
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        SESSIONS.store(1, Ordering::Relaxed);
        TOGGLING.store(false, Ordering::Relaxed);
    }
}

/// Run `WAYPOINT_CRASH_SEEDS` seeds (default 200), or only seed
/// `WAYPOINT_CRASH_SEED` (with `RUST_LOG` tracing); a failure names its seed.
fn run_seeds() {
    if let Ok(seed) = std::env::var("WAYPOINT_CRASH_SEED") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        run_seed(seed.parse().expect("WAYPOINT_CRASH_SEED is a number"));
        return;
    }
    let seeds: u64 = std::env::var("WAYPOINT_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    for seed in 0..seeds {
        if let Err(panic) = std::panic::catch_unwind(|| run_seed(seed)) {
            eprintln!(
                "crash test failed for seed {seed} ({} sessions{}); reproduce with WAYPOINT_CRASH_SEED={seed}",
                SESSIONS.load(Ordering::Relaxed),
                if TOGGLING.load(Ordering::Relaxed) { ", toggling" } else { "" }
            );
            std::panic::resume_unwind(panic);
        }
    }
}

/// The tests of this file run one at a time: they are CPU-bound thread
/// interleavings, and the detection tests swap the process-wide panic hook.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The first seed below `max_seeds` whose checks fail, if any.
fn first_failing_seed(max_seeds: u64, protocol: CommitProtocol, broken_rfa: bool) -> Option<u64> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let failed = (0..max_seeds).find(|&seed| {
        std::panic::catch_unwind(|| run_seed_with(seed, protocol, broken_rfa)).is_err()
    });
    std::panic::set_hook(hook);
    failed
}

/// The crash test can catch a broken commit protocol: with the RFA
/// dependency check switched off, a commit that read or overwrote another
/// session's not-yet-durable commit is acknowledged after flushing only its
/// own log, and some crash then loses what it depended on.
#[test]
fn a_broken_rfa_check_is_caught() {
    let _serial = serial();
    let _workload = Workload::set(3, false);
    let failed = first_failing_seed(400, CommitProtocol::Rfa, true);
    assert!(
        failed.is_some(),
        "400 seeds with RFA's dependency check disabled all passed: the crash test cannot see it"
    );
}

/// And `async` commits, acknowledged before they are durable, are lost on
/// power loss, as documented: the test sees that too.
#[test]
fn async_commits_are_lost_on_power_loss_and_the_test_sees_it() {
    let _serial = serial();
    let _workload = Workload::set(3, false);
    let failed = first_failing_seed(400, CommitProtocol::Async, false);
    assert!(
        failed.is_some(),
        "async commits never lost in 400 power failures: the crash test cannot see lost commits"
    );
}

/// Regression (found by this harness, 2026-11-22): a clean close deleted
/// the log segments one file at a time. A crash in the middle could keep a
/// loser's records while deleting the partition that held its
/// end-of-rollback record, and the next recovery undid the loser a second
/// time over the already-undone pages ("undo of an update does not match
/// the current value"). The clean close now records a log floor in the
/// superblock before deleting anything, and recovery ignores records at or
/// below it. This test recovers from a crash that leaves losers, then
/// crashes the clean close after every one of its first operations.
#[test]
fn crash_during_clean_close_after_recovery_recovers() {
    let _serial = serial();
    for seed in 0..6u64 {
        for k in [1u64, 2, 3, 5, 8, 13, 21, 34, 55] {
            let sim = SimStorage::new(seed * 100 + k);
            let protocol = CommitProtocol::RfaGroup;
            load(&sim, protocol);
            let acked = run_until_frozen(&sim, protocol, seed, 300 + seed * 97, false);
            sim.clear_faults();
            sim.crash(CrashPolicy::Random {
                keep: 0.5,
                tear: true,
            });
            let db = Database::open("/db", options(&sim, protocol)).expect("first recovery");
            verify(&db, &acked, seed);
            sim.inject(Fault::at(sim.op_count() + k, FaultKind::Freeze));
            let _ = db.close();
            sim.clear_faults();
            sim.crash(CrashPolicy::Random {
                keep: 0.5,
                tear: true,
            });
            let db = Database::open("/db", options(&sim, protocol)).unwrap_or_else(|e| {
                panic!("seed {seed}, close crashed after {k} ops: recovery failed: {e}")
            });
            verify(&db, &acked, seed);
            db.close().unwrap();
        }
    }
}

/// The same power-loss test with a workload that also flips contended
/// toggle rows: concurrent inserts of one absent key conflict at validation
/// after their placeholders are in, so rollbacks (and the inserts, deletes,
/// splits and merges of the toggle table) run under crashes.
///
/// It found three bugs (2026-11-22): half-redone structure modifications
/// ("leaf fences do not cover the key"), losers undone in the wrong order
/// ("undo of an update does not match the current value"), and a commit
/// building on the placeholders a failed rollback left behind ("placeholder
/// under a held lock").
#[test]
fn rollbacks_after_placeholders_survive_power_loss() {
    let _serial = serial();
    let _workload = Workload::set(3, true);
    run_seeds();
}

/// The power-loss test with three sessions: log records of one transaction
/// can depend on records of another partition, and power loss can cut one
/// partition's log short of the other's (gaps).
///
/// It found (2026-11-22) that structure modifications were not atomic
/// under the gap rule: a split logged its pages separately, so a gap on one
/// of them left the tree half redone ("fences differ from the parent's
/// separators"); splits are now redone all or nothing (`wal/redo/`).
#[test]
fn several_sessions_survive_power_loss() {
    let _serial = serial();
    let _workload = Workload::set(3, false);
    run_seeds();
}
