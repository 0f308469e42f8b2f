//! The simulator over a few seeds of each workload, and proof that it can
//! fail: with commits acknowledged before they are durable (`async`) or
//! with RFA's dependency check switched off, it must report lost commits;
//! the TPC-C checks must also see a forged acknowledged transaction and a
//! New-Order applied in part.

use std::sync::Arc;
use waypoint::io::SimStorage;
use waypoint::{Database, Options, SchemeKind};
use waypoint_bench::tpcc::schema::{history_key, stock_key, Stock};
use waypoint_bench::tpcc::Effect;
use waypoint_sim::plan::TPCC_FAULT_SCALE;
use waypoint_sim::{run_seed, tpcc, Plan, SimOptions, Workload};

fn run(workload: Workload, seeds: u64) {
    waypoint_sim::capture_panics();
    let options = SimOptions {
        workload: Some(workload),
        ..SimOptions::default()
    };
    let failures: Vec<String> = (0..seeds)
        .map(|seed| run_seed(seed, &options))
        .filter_map(|r| {
            r.outcome.as_ref().err().map(|e| {
                format!(
                    "seed {} ({}): {e}; reproduce: waypoint simulate --seed {} --workload {}",
                    r.seed,
                    r.description,
                    r.seed,
                    workload.name()
                )
            })
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {seeds} seeds failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn twenty_seeds_of_bank_transfers() {
    run(Workload::Bank, 20);
}

#[test]
fn twenty_seeds_of_transfers_with_toggles() {
    run(Workload::Toggles, 20);
}

#[test]
fn twenty_seeds_of_updates_inserts_and_deletes() {
    run(Workload::Updates, 20);
}

/// Twice the others' seeds: the newest workload, and the one that writes
/// the most per transaction.
#[test]
fn forty_seeds_of_tpcc() {
    run(Workload::Tpcc, 40);
}

/// Same seed, same plan: the choices and the fault schedule depend on the
/// seed alone, and forcing the workload leaves the other choices alone
/// (for TPC-C, the fault points are [`TPCC_FAULT_SCALE`] times further
/// in, and nothing else changes).
#[test]
fn a_seed_always_makes_the_same_choices() {
    let plain = SimOptions::default();
    let forced = |seed, w| {
        Plan::new(
            seed,
            &SimOptions {
                workload: Some(w),
                ..SimOptions::default()
            },
        )
    };
    let rest = |p: &Plan| p.describe().split_once(" x").unwrap().1.to_string();
    let mut tpcc = 0;
    for seed in 0..200 {
        let a = Plan::new(seed, &plain);
        assert_eq!(a.describe(), Plan::new(seed, &plain).describe());
        assert_eq!(a.describe(), forced(seed, a.workload).describe());
        tpcc += (a.workload == Workload::Tpcc) as u32;
        let updates = forced(seed, Workload::Updates);
        for w in [Workload::Bank, Workload::Toggles] {
            assert_eq!(rest(&forced(seed, w)), rest(&updates));
        }
        let mut t = forced(seed, Workload::Tpcc);
        t.freeze.after /= TPCC_FAULT_SCALE;
        if let Some(f) = &mut t.early_fault {
            f.after /= TPCC_FAULT_SCALE;
        }
        assert_eq!(rest(&t), rest(&updates));
    }
    assert!((30..70).contains(&tpcc), "{tpcc} of 200 seeds draw TPC-C");
}

/// The seeds' plans from before TPC-C was added are unchanged: a seed that
/// does not draw TPC-C makes the choices it made then (three recorded in
/// `docs/RELIABILITY.md`, one per old workload and fault kind). The sync
/// interval and the direct log, drawn after everything else (added on
/// 2026-11-22 and 2026-11-23), only add their suffixes.
#[test]
fn seeds_that_do_not_draw_tpcc_keep_their_plans() {
    for (seed, then) in [
        (
            12712,
            "updates x1 sessions x142 txns, commit rfa, checkpoint full, 7 shards, \
             2 ckpt threads, wal limit 726 KiB, buffer 49 pages; Freeze at +341 \
             (else at +226 of close); crash keep-all; sync interval 2000 µs",
        ),
        (
            140,
            "updates x3 sessions x100 txns, commit group, checkpoint continuous, 8 shards, \
             1 ckpt threads, wal limit 473 KiB, buffer 32 pages; Eio at +490 on data.waypoint; \
             Freeze at +730 on .wal (else at +189 of close); crash drop-all; crash again at \
             +223 of recovery, random keep 0.08 torn; sync interval 0 µs",
        ),
        (
            6712,
            "updates x3 sessions x130 txns, commit rfa, checkpoint continuous, 3 shards, \
             1 ckpt threads, wal limit 183 KiB, buffer 37 pages; Enospc at +583; Freeze at \
             +971 (else at +295 of close); crash random keep 0.93 torn; sync interval 2000 µs",
        ),
    ] {
        let now = Plan::new(seed, &per_worker()).describe();
        // Draws added later (direct log, zero-fill) append to the end.
        let now = now.trim_end_matches("; no zero-fill");
        assert_eq!(now.trim_end_matches("; direct log"), then);
    }
}

/// The options of the regression seeds below: they were found under the
/// per-worker scheme, before `aries` joined the seed draw (which may now
/// give them the central log); the scheme is drawn last, so pinning it
/// keeps every other choice.
fn per_worker() -> SimOptions {
    SimOptions {
        scheme: Some(SchemeKind::PerWorker),
        ..SimOptions::default()
    }
}

fn failures_within(options: &SimOptions, seeds: u64) -> usize {
    waypoint_sim::capture_panics();
    (0..seeds)
        .filter(|&seed| !run_seed(seed, options).passed())
        .count()
}

/// The same with TPC-C: the lost commits are acknowledged transactions
/// whose rows are missing, not a broken condition (`async` loses a suffix
/// of the commits, which leaves a consistent database). The seeds are the
/// first 20 whose freeze hits the log: about half of those lose an
/// acknowledged TPC-C commit (of all seeds, about one in nine).
#[test]
fn the_simulator_reports_lost_async_tpcc_commits() {
    waypoint_sim::capture_panics();
    let options = SimOptions {
        workload: Some(Workload::Tpcc),
        // Pinned: the seeds drawn for other schemes cannot show it.
        scheme: Some(SchemeKind::PerWorker),
        unsafe_async: true,
        ..SimOptions::default()
    };
    let errors: Vec<String> = (0..)
        .filter(|&seed| Plan::new(seed, &options).freeze.path == Some(".wal"))
        .take(20)
        .filter_map(|seed| run_seed(seed, &options).outcome.err())
        .collect();
    assert!(
        errors.iter().any(|e| e.contains("acknowledged")),
        "20 TPC-C seeds with async commits and the log frozen: no lost acknowledged \
         transaction reported (errors: {errors:?})"
    );
}

/// `async` acknowledges commits before they are durable; power loss then
/// loses some, and the simulator must say so.
#[test]
fn the_simulator_reports_lost_async_commits() {
    let options = SimOptions {
        workload: Some(Workload::Bank),
        scheme: Some(SchemeKind::PerWorker),
        unsafe_async: true,
        ..SimOptions::default()
    };
    let failed = failures_within(&options, 30);
    assert!(
        failed > 0,
        "30 seeds with async commits all passed: the simulator cannot see lost commits"
    );
}

/// With RFA's dependency check off, a commit that depends on another
/// session's not-yet-durable commit is acknowledged after flushing only its
/// own log; some crash then loses what it depended on.
#[test]
#[cfg(feature = "testing")]
fn the_simulator_reports_a_broken_rfa_check() {
    let options = SimOptions {
        workload: Some(Workload::Bank),
        // RFA exists only in the per-worker scheme.
        scheme: Some(SchemeKind::PerWorker),
        broken_rfa: true,
        ..SimOptions::default()
    };
    let failed = failures_within(&options, 200);
    assert!(
        failed > 0,
        "200 seeds with RFA's dependency check off all passed: the simulator cannot see it"
    );
}

/// The `aries` scheme through the same crashes: its one log recovers
/// every acknowledged commit.
#[test]
fn aries_scheme_seeds_pass() {
    let options = SimOptions {
        scheme: Some(SchemeKind::Aries),
        ..SimOptions::default()
    };
    assert_eq!(failures_within(&options, 150), 0);
}

/// With the central log's commits acknowledged before the flush of their
/// commit records, a power loss loses acknowledged commits; the simulator
/// must see it. The broken variant waits for a session's previous commit
/// instead of its own, so a crash inside the workload finds the last
/// acknowledged commit not durable (about 40% of the bank seeds).
#[test]
#[cfg(feature = "testing")]
fn the_simulator_reports_aries_commits_acknowledged_before_their_flush() {
    let options = SimOptions {
        scheme: Some(SchemeKind::Aries),
        workload: Some(Workload::Bank),
        broken_commit_ack: true,
        ..SimOptions::default()
    };
    let failed = failures_within(&options, 40);
    assert!(
        failed > 0,
        "40 aries seeds acknowledging commits before their flush all passed: the simulator cannot see it"
    );
}

/// The `silor` scheme through the same crashes (power loss during the
/// workload, the clean close and recovery): every acknowledged commit is
/// recovered and the workload's invariants hold.
#[test]
fn silor_scheme_seeds_pass() {
    let options = SimOptions {
        scheme: Some(SchemeKind::Silor),
        ..SimOptions::default()
    };
    assert_eq!(failures_within(&options, 40), 0);
}

/// With silor's commits acknowledged before pepoch covers their epoch, a
/// power loss loses acknowledged commits; the simulator must see it. The
/// broken variant waits for the epoch of a session's previous commit, so
/// the run keeps its pace and a crash inside it finds the last
/// acknowledged commit not durable whenever that one opened an epoch
/// (about four in five bank seeds).
#[test]
#[cfg(feature = "testing")]
fn the_simulator_reports_silor_commits_acknowledged_before_pepoch() {
    let options = SimOptions {
        scheme: Some(SchemeKind::Silor),
        workload: Some(Workload::Bank),
        broken_commit_ack: true,
        ..SimOptions::default()
    };
    let failed = failures_within(&options, 20);
    assert!(
        failed > 0,
        "20 silor seeds acknowledging commits before pepoch all passed: the simulator cannot see it"
    );
}

/// The `command` scheme (seed 001's command log) through the same
/// crashes, with the bank's transfers and TPC-C's transactions as stored
/// procedures: every acknowledged call is recovered by running the log
/// again (each write set checked against its logged digest), the
/// balances match the history and TPC-C's conditions hold.
#[test]
fn command_scheme_seeds_pass() {
    for workload in [Workload::Bank, Workload::Toggles, Workload::Tpcc] {
        let options = SimOptions {
            scheme: Some(SchemeKind::Command),
            workload: Some(workload),
            ..SimOptions::default()
        };
        assert_eq!(failures_within(&options, 30), 0, "{}", workload.name());
    }
}

/// With calls acknowledged before their records are durable, a power loss
/// loses acknowledged calls; the simulator must see it. The broken variant
/// leaves the last acknowledged call in memory until the next call, so
/// every seed whose crash lands inside the workload loses one (about two
/// thirds of the bank seeds; the others crash in the close, which writes
/// it).
#[test]
#[cfg(feature = "testing")]
fn the_simulator_reports_command_calls_acknowledged_before_their_record_is_durable() {
    let options = SimOptions {
        scheme: Some(SchemeKind::Command),
        workload: Some(Workload::Bank),
        broken_commit_ack: true,
        ..SimOptions::default()
    };
    let failed = failures_within(&options, 30);
    assert!(
        failed > 0,
        "30 command seeds acknowledging calls before their record is durable all passed: the simulator cannot see it"
    );
    // TPC-C as procedures: the first 20 seeds whose freeze hits the log
    // (the others freeze the data file or the close, after the log).
    waypoint_sim::capture_panics();
    let options = SimOptions {
        workload: Some(Workload::Tpcc),
        ..options
    };
    let lost = (0..)
        .filter(|&seed| Plan::new(seed, &options).freeze.path == Some(".wal"))
        .take(20)
        .filter(|&seed| !run_seed(seed, &options).passed())
        .count();
    assert!(
        lost > 0,
        "20 TPC-C command seeds acknowledging calls before their record is durable all passed: the simulator cannot see it"
    );
}

/// The `none` scheme through the same crashes: every reopen is refused as
/// not recoverable or reads a clean close's state (the load's, or the
/// workload's when the close got through).
#[test]
fn none_scheme_seeds_pass() {
    let options = SimOptions {
        scheme: Some(SchemeKind::None),
        ..SimOptions::default()
    };
    assert_eq!(failures_within(&options, 150), 0);
}

/// With the `none` scheme's unclean mark switched off, a crash after page
/// writes leaves a data file that says clean but holds a torn mix of
/// states; the simulator must see it.
#[test]
#[cfg(feature = "testing")]
fn the_simulator_reports_a_none_scheme_without_its_unclean_mark() {
    let options = SimOptions {
        scheme: Some(SchemeKind::None),
        broken_unclean_mark: true,
        ..SimOptions::default()
    };
    let failed = failures_within(&options, 150);
    assert!(
        failed > 0,
        "150 none-scheme seeds without the unclean mark all passed: the simulator cannot see it"
    );
}

/// Regression (found by `waypoint simulate --seeds 20000`, 2026-11-22, seed
/// 12712): a clean close wrote the free list into free pages with GSN 0,
/// then failed before the superblock retired the log; redo treated those
/// pages as on-disk states at or below the log floor and replayed a leaf's
/// later records onto a free-list page ("a tuple record names a page that
/// is not a leaf"). Free-list pages now keep the GSN of the page's free.
/// The seed's plan (updates, full checkpoints, a freeze inside the close)
/// reproduced it on every run.
#[test]
fn a_close_that_fails_after_writing_the_free_list_recovers() {
    waypoint_sim::capture_panics();
    for _ in 0..5 {
        let r = run_seed(12712, &per_worker());
        assert!(
            r.passed(),
            "seed 12712 ({}): {:?}",
            r.description,
            r.outcome
        );
    }
}

/// Regression (found by `waypoint simulate --seeds 20000`, 2026-11-22, seed
/// 658, about one run in ten): recovery's undo threads log compensation
/// into different partitions and may change the same page; a loser's end
/// record survived a crash during recovery while another thread's earlier
/// compensation on that page did not, so the next recovery saw a gap, did
/// not redo the later compensation, and no longer undid the loser: a
/// partial transfer. End records are now written only after every
/// compensation record is durable. Thread timing decides whether the seed
/// reaches the bug, hence the repetitions.
#[test]
fn end_records_of_recovery_wait_for_every_compensation() {
    waypoint_sim::capture_panics();
    // Seed 658 draws TPC-C since it exists; its plan of then is bank's.
    let then = SimOptions {
        workload: Some(Workload::Bank),
        ..per_worker()
    };
    for _ in 0..30 {
        let r = run_seed(658, &then);
        assert!(r.passed(), "seed 658 ({}): {:?}", r.description, r.outcome);
    }
}

/// Regression (found by `waypoint simulate --seeds 20000`, 2026-11-22,
/// seeds 2893 and 16245, each failing about one run in three): freeing a
/// page marked it clean although its last changes had not reached disk, so
/// a checkpoint increment skipped it and the log floor passed changes the
/// data file did not have; recovery then built on the stale copy ("redo of
/// an update finds no key", "a tuple record names a page that is not a
/// leaf"). Freed pages now stay dirty.
#[test]
fn freed_pages_are_written_before_the_floor_passes_their_changes() {
    waypoint_sim::capture_panics();
    for seed in [2893, 16245] {
        for _ in 0..15 {
            let r = run_seed(seed, &per_worker());
            assert!(
                r.passed(),
                "seed {seed} ({}): {:?}",
                r.description,
                r.outcome
            );
        }
    }
}

/// A TPC-C run on the simulated disk without faults, closed and reopened:
/// the database and what the sessions acknowledged.
fn clean_tpcc_run(seed: u64) -> (SimStorage, tpcc::Outcome) {
    let sim = SimStorage::new(seed);
    let options = || Options {
        page_size: Some(4096),
        buffer_pool_bytes: 32 * 4096,
        storage: Some(Arc::new(sim.clone())),
        ..Options::default()
    };
    let db = Database::open("/db", options()).unwrap();
    tpcc::load(&db).unwrap();
    let workload = tpcc::prepare(&db, seed).unwrap();
    let outcome = tpcc::run(&db, &workload, 2, 100, seed).unwrap();
    drop(workload);
    db.close().unwrap();
    (sim, outcome)
}

fn reopen(sim: &SimStorage) -> Database {
    let options = Options {
        page_size: Some(4096),
        buffer_pool_bytes: 32 * 4096,
        storage: Some(Arc::new(sim.clone())),
        ..Options::default()
    };
    Database::open("/db", options).unwrap()
}

/// The acknowledged-transaction checks can fail: a run's own outcome
/// passes, and each forged acknowledged transaction that never happened (a
/// new-order, a payment, a delivery with another carrier) is reported as
/// lost.
#[test]
fn tpcc_checks_report_an_acknowledged_transaction_that_is_missing() {
    let (sim, outcome) = clean_tpcc_run(3);
    let db = reopen(&sim);
    tpcc::verify(&db, &outcome).expect("the run's own outcome");
    let acked: Vec<&Effect> = outcome.sessions.iter().flat_map(|s| &s.acked).collect();
    let kinds = |f: fn(&Effect) -> bool| acked.iter().filter(|e| f(e)).count();
    assert!(kinds(|e| matches!(e, Effect::NewOrder { .. })) > 20);
    assert!(kinds(|e| matches!(e, Effect::Payment { .. })) > 20);
    let (w, carrier, orders) = acked
        .iter()
        .find_map(|e| match e {
            Effect::Delivery { w, carrier, orders } if orders.iter().any(|&o| o != 0) => {
                Some((*w, *carrier, *orders))
            }
            _ => None,
        })
        .expect("a delivery in 200 transactions");

    let forged = |effect: Effect| {
        let mut o = outcome.clone();
        o.sessions[1].acked.push(effect);
        tpcc::verify(&db, &o).expect_err("a forged transaction passed")
    };
    let e = forged(Effect::NewOrder {
        w: 1,
        d: 4,
        o_id: 10_000,
        c: 1,
        lines: 5,
    });
    assert!(
        e.contains("new-order 10000 of district 4: the order is lost"),
        "{e}"
    );
    let e = forged(Effect::Payment {
        w: 1,
        d: 2,
        amount: 100,
        history_key: history_key(1, 7, 7),
    });
    assert!(e.contains("its history row is lost"), "{e}");
    let e = forged(Effect::Delivery {
        w,
        carrier: carrier % 10 + 1,
        orders,
    });
    assert!(e.contains("(delivery lost)"), "{e}");
    db.close().unwrap();
}

/// The stock check sees a New-Order applied in part: one stock row's
/// S_ORDER_CNT one higher than the order lines say (as if an order's stock
/// update survived without its line).
#[test]
fn tpcc_checks_report_stock_out_of_step_with_the_order_lines() {
    let (sim, outcome) = clean_tpcc_run(4);
    let db = reopen(&sim);
    let stock = db.table("tpcc_stock").unwrap();
    let mut s = db.session();
    s.run(1, |tx| {
        let key = stock_key(1, 17);
        let mut row = Stock::decode(&tx.get(&stock, &key)?.unwrap()).unwrap();
        row.order_cnt += 1;
        tx.update(&stock, &key, &row.encode())
    })
    .unwrap();
    drop(s);
    let e = tpcc::verify(&db, &outcome).expect_err("a partial new-order passed");
    assert!(
        e.contains("stock of item 17 of warehouse 1") && e.contains("in part"),
        "{e}"
    );
    db.close().unwrap();
}

/// Regression (found by `waypoint simulate --seeds 3000 --workload tpcc`,
/// 2026-11-22, seed 2843, about one run in ten): the TPC-C load (54-page
/// pool, full checkpoints) failed with `BufferPoolExhausted` after 10 s:
/// a checkpoint increment waited for the latch of a page a splitting
/// worker held while that worker waited for a frame, and every frame it
/// could have had sat unwritten in the increment's batch. Increments now
/// skip latched pages and come back to them (RELIABILITY.md, "a checkpoint
/// increment starved a splitting worker of frames";
/// `buffer::pool::tests::a_checkpoint_increment_does_not_wait_for_a_latch_while_holding_staged_pages`).
#[test]
fn checkpoint_increments_do_not_starve_a_splitting_worker_of_frames() {
    waypoint_sim::capture_panics();
    let tpcc = SimOptions {
        workload: Some(Workload::Tpcc),
        ..per_worker()
    };
    for _ in 0..10 {
        let r = run_seed(2843, &tpcc);
        assert!(r.passed(), "seed 2843 ({}): {:?}", r.description, r.outcome);
    }
}

/// Regression (found by `waypoint simulate --seeds 3000 --workload tpcc`,
/// 2026-11-22, seed 2087, about one run in four): after an ENOSPC on the
/// log, the pages of the failed commits held 21 of 22 frames and two
/// sessions spun in their commits past the seed's 180 s limit, each read
/// evicting the page it needed next. They now fail with a typed error
/// (RELIABILITY.md, "with the log full, a read could spin for good in a
/// tiny pool"; `tests/log_full.rs`,
/// `reads_fail_instead_of_spinning_when_unwritable_pages_hold_the_pool`).
#[test]
fn sessions_do_not_spin_when_a_full_log_leaves_a_tiny_pool_no_frames() {
    waypoint_sim::capture_panics();
    let tpcc = SimOptions {
        workload: Some(Workload::Tpcc),
        ..per_worker()
    };
    for _ in 0..8 {
        let r = run_seed(2087, &tpcc);
        assert!(r.passed(), "seed 2087 ({}): {:?}", r.description, r.outcome);
        assert!(r.elapsed.as_secs() < 60, "seed 2087 took {:?}", r.elapsed);
    }
}

/// The `aether` scheme through the same crashes: the consolidation
/// array's groups, filled outside the latch and released in order, and its
/// pipelined flushes recover every acknowledged commit.
#[test]
fn aether_scheme_seeds_pass() {
    let options = SimOptions {
        scheme: Some(SchemeKind::Aether),
        ..SimOptions::default()
    };
    assert_eq!(failures_within(&options, 150), 0);
}

/// With the log's reservations released for writing before they are
/// filled, the writer writes zeros where records belong, and makes them
/// durable; a crash then loses acknowledged commits or finds the log
/// corrupt. The simulator must see it.
#[test]
#[cfg(feature = "testing")]
fn the_simulator_reports_aether_reservations_released_before_their_fill() {
    let options = SimOptions {
        scheme: Some(SchemeKind::Aether),
        workload: Some(Workload::Bank),
        broken_early_release: true,
        ..SimOptions::default()
    };
    let failed = failures_within(&options, 200);
    assert!(
        failed > 0,
        "200 aether seeds releasing reservations before their fill all passed: the simulator cannot see it"
    );
}
