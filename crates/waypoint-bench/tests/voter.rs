//! Voter: its invariants hold after a short two-worker run and after a
//! simulated power loss with commits in flight and pages stolen; a
//! corrupted count is caught.

use std::path::Path;
use std::sync::Arc;
use waypoint::io::{CrashPolicy, SimStorage, Storage};
use waypoint::{Database, Options};
use waypoint_bench::driver::{self, DriverConfig};
use waypoint_bench::voter::{self, Voter, VoterConfig, BAD_CONTESTANT, OVER_LIMIT, VOTE};
use waypoint_bench::workload::{is_abort, Workload};
use waypoint_bench::BenchError;

/// Few phones, so the vote limit is reached within a short run.
fn small() -> VoterConfig {
    VoterConfig {
        phones: 300,
        ..VoterConfig::default()
    }
}

#[test]
fn a_short_two_worker_run_keeps_the_invariants() {
    let dir = tempfile::tempdir().unwrap();
    let c = DriverConfig {
        dir: Some(dir.path().join("db")),
        workers: 2,
        duration_secs: 10.0,
        warmup_secs: 0,
        max_txns: Some(1500),
        in_flight: 8,
        buffer_bytes: 32 << 20,
        ..DriverConfig::default()
    };
    let mut w = Voter::new(small());
    let out = driver::run(&c, &mut w, &|_| {}).expect("Voter run");
    let s = &out.summary;
    assert!(s.committed >= 1500, "committed {}", s.committed);
    let by_type = |name: &str| s.types.iter().find(|t| t.name == name).unwrap().committed;
    let (votes, over, bad) = (
        by_type("vote"),
        by_type("over_limit"),
        by_type("bad_contestant"),
    );
    assert!(votes > 0 && over > 0 && bad > 0, "{:?}", s.types);
    let checked = s.verify.as_ref().expect("verified");
    // At most two votes from each of 300 phones.
    assert!(checked["votes"].as_u64().unwrap() <= 600, "{checked}");
    assert!(
        checked["phones_at_limit"].as_u64().unwrap() > 0,
        "{checked}"
    );
    assert_eq!(checked["contestants"], 6);

    // Again after a clean close and reopen, and the database is reused.
    let again = driver::run(&c, &mut Voter::new(small()), &|_| {}).expect("reuse");
    assert!(!again.summary.loaded_now);
    let db = Database::open(dir.path().join("db"), Options::default()).unwrap();
    let after = voter::verify(&db, &small()).unwrap();
    assert_eq!(
        serde_json::to_value(&after).unwrap(),
        *again.summary.verify.as_ref().unwrap()
    );
    db.close().unwrap();

    // Another configuration on the same directory is refused.
    let other = VoterConfig {
        contestants: 7,
        ..small()
    };
    let e = driver::run(&c, &mut Voter::new(other), &|_| {})
        .err()
        .unwrap();
    assert!(matches!(e, BenchError::Config(_)), "{e}");
}

fn sim_options(sim: &SimStorage) -> Options {
    Options {
        storage: Some(Arc::new(sim.clone()) as Arc<dyn Storage>),
        page_size: Some(4096),
        // 20 frames: pages with uncommitted votes are stolen.
        buffer_pool_bytes: 20 * 4096,
        ..Options::default()
    }
}

/// Two sessions vote with pipelined commits; the last commits of each are
/// left in flight, then the power fails (a random subset of unsynced writes
/// kept, torn). Recovery keeps every acknowledged vote and the invariants.
#[test]
fn a_power_loss_keeps_acknowledged_votes_and_the_invariants() {
    for seed in 0..4u64 {
        let sim = SimStorage::new(seed);
        let dir = Path::new("/voter");
        let config = small();
        let db = Database::open(dir, sim_options(&sim)).unwrap();
        let mut w = Voter::new(config.clone());
        w.setup(&db, 1).unwrap();
        db.close().unwrap();

        let db = Database::open(dir, sim_options(&sim)).unwrap();
        let mut w = Voter::new(config.clone());
        w.setup(&db, 2).unwrap();
        let acked_votes: u64 = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|worker| {
                    let (db, w) = (&db, &w);
                    s.spawn(move || {
                        let mut session = db.session();
                        let mut gen = w.worker(worker, seed * 10 + worker as u64);
                        let mut pending = std::collections::VecDeque::new();
                        let mut acked = 0u64;
                        for _ in 0..400 {
                            let mut tx = session.begin().unwrap();
                            let (ty, body) = gen.next(&mut tx);
                            match body.and_then(|()| tx.commit_pipelined()) {
                                Ok(p) => pending.push_back((ty, p)),
                                Err(e) if is_abort(&e) => {}
                                Err(e) => panic!("{e}"),
                            }
                            while pending.len() > 4 {
                                let (ty, p) = pending.pop_front().unwrap();
                                match p.wait() {
                                    Ok(_) => acked += u64::from(ty == VOTE),
                                    Err(e) if is_abort(&e) => {}
                                    Err(e) => panic!("{e}"),
                                }
                            }
                        }
                        // Up to four commits stay in flight: the crash
                        // may or may not keep them.
                        std::mem::forget(pending);
                        acked
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert!(acked_votes > 0);
        std::mem::forget(db);
        sim.crash(CrashPolicy::Random {
            keep: 0.5,
            tear: true,
        });

        let db = Database::open(dir, sim_options(&sim)).expect("recovery");
        let report = db.recovery_report().unwrap().clone();
        assert!(report.records > 0, "{report:?}");
        let check = voter::verify(&db, &config).expect("Voter invariants after recovery");
        assert!(
            check.votes >= acked_votes,
            "seed {seed}: {} votes after recovery, {acked_votes} acknowledged",
            check.votes
        );
        db.close().unwrap();
    }
}

/// The same under the `command` scheme: the votes are calls of Voter's
/// stored procedure, on two partitions, and recovery runs the logged
/// calls again over the load's clean close, the two partitions' votes
/// side by side.
#[test]
fn a_power_loss_under_the_command_log_keeps_acknowledged_votes_and_the_invariants() {
    for seed in 0..4u64 {
        let sim = SimStorage::new(seed);
        let dir = Path::new("/voter");
        let config = small();
        let options = || Options {
            buffer_pool_bytes: 4096 * 4096,
            persistence: waypoint::Persistence::Command(waypoint::CommandOptions {
                partitions: 2,
                digests: true,
                ..Default::default()
            }),
            procedures: waypoint_bench::procedures(),
            recovery_threads: 2,
            ..sim_options(&sim)
        };
        let db = Database::open(dir, options()).unwrap();
        let mut w = Voter::new(config.clone());
        w.setup(&db, 1).unwrap();
        db.close().unwrap();

        let db = Database::open(dir, options()).unwrap();
        let mut w = Voter::new(config.clone());
        w.setup(&db, 2).unwrap();
        let acked_votes: u64 = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|worker| {
                    let (db, w) = (&db, &w);
                    s.spawn(move || {
                        let mut session = db.session();
                        let mut gen = w.worker(worker, seed * 10 + worker as u64);
                        let mut pending = std::collections::VecDeque::new();
                        let mut acked = 0u64;
                        for _ in 0..400 {
                            let (ty, called) = gen.call(&mut session, false, None).unwrap();
                            match called {
                                Ok(p) => pending.push_back((ty, p)),
                                Err(e) if is_abort(&e) => {}
                                Err(e) => panic!("{e}"),
                            }
                            while pending.len() > 4 {
                                let (ty, p) = pending.pop_front().unwrap();
                                match p.wait() {
                                    Ok(_) => acked += u64::from(ty == VOTE),
                                    Err(e) if is_abort(&e) => {}
                                    Err(e) => panic!("{e}"),
                                }
                            }
                        }
                        std::mem::forget(pending);
                        acked
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert!(acked_votes > 0);
        std::mem::forget(db);
        sim.crash(CrashPolicy::Random {
            keep: 0.5,
            tear: true,
        });

        let db = Database::open(dir, options()).expect("recovery");
        let stats = db.stats().persistence.command;
        assert!(stats.replayed_calls > 0, "{stats:?}");
        // A vote's rows are its phone's partition's: it replays beside the
        // other partition's votes, not alone as a barrier.
        assert!(
            stats.replay_threads == 2 && stats.replay_barriers * 10 < stats.replayed_calls,
            "seed {seed}: {} barriers among {} calls replayed on {} threads",
            stats.replay_barriers,
            stats.replayed_calls,
            stats.replay_threads
        );
        let check = voter::verify(&db, &config).expect("Voter invariants after recovery");
        assert!(
            check.votes >= acked_votes,
            "seed {seed}: {} votes after recovery, {acked_votes} acknowledged",
            check.votes
        );
        db.close().unwrap();
    }
}

#[test]
fn verify_catches_a_corrupted_count() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Options::default()).unwrap();
    let mut w = Voter::new(small());
    w.setup(&db, 1).unwrap();
    let mut session = db.session();
    let mut gen = w.worker(0, 7);
    let mut types = [0u64; 3];
    for _ in 0..300 {
        let mut tx = session.begin().unwrap();
        let (ty, body) = gen.next(&mut tx);
        body.unwrap();
        tx.commit().unwrap();
        types[ty] += 1;
    }
    assert!(types[VOTE] > 0 && types[OVER_LIMIT] + types[BAD_CONTESTANT] > 0);
    drop(gen);
    let ok = w.verify(&db).unwrap();
    assert_eq!(ok["votes"], types[VOTE]);

    // One more vote in contestant 3's count (stripe 0) than votes cast.
    let counts = db.table("voter_contestant_votes").unwrap();
    let key = [3u32.to_be_bytes(), 0u32.to_be_bytes()].concat();
    session
        .run(10, |tx| {
            let v = tx.get(&counts, &key)?.unwrap();
            let n = u64::from_le_bytes(v[..8].try_into().unwrap());
            tx.update(&counts, &key, &(n + 1).to_le_bytes())
        })
        .unwrap();
    let e = w.verify(&db).unwrap_err();
    assert!(
        e.to_string().contains("counts add up to"),
        "unexpected error: {e}"
    );
    drop(session);
    db.close().unwrap();
}

/// The count stripe a vote bumps is in its phone's partition for every
/// partition count up to the stripes (`partition_of(key) = key % n`).
#[test]
fn a_votes_count_stripe_is_in_its_phones_partition() {
    for partitions in 1..=64usize {
        for phone in [0u64, 1, 7, 2_015_550_123, 9_899_999_999] {
            let stripe = voter::stripe_of(phone, 1024, partitions);
            assert!(stripe < 1024);
            let n = partitions as u64;
            assert_eq!(u64::from(stripe) % n, phone % n, "{phone} in {partitions}");
        }
    }
    // More partitions than stripes: still a stripe that exists.
    assert!(voter::stripe_of(12_345, 16, 32) < 16);
}

/// Each worker casts the votes of its share of the phones (the phone's
/// number modulo the workers is the worker's): under `command`, with a
/// partition per worker, each worker runs one partition's calls, as
/// VoltDB's executor of that partition would. With 64 phones every
/// number is an area code's first (a multiple of 10^7, so even): worker
/// 1 of 2 has no phone of its own and votes from worker 0's share.
#[test]
fn each_worker_votes_from_its_share_of_the_phones() {
    for (phones, workers) in [(3000u64, 3usize), (64, 2)] {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), Options::default()).unwrap();
        let config = VoterConfig {
            phones,
            ..VoterConfig::default()
        };
        let mut w = Voter::new(config);
        w.setup(&db, workers).unwrap();
        let mut session = db.session();
        for worker in 0..workers {
            let mut gen = w.worker(worker, 7 + worker as u64);
            for _ in 0..40 {
                let mut tx = session.begin().unwrap();
                let (_, body) = gen.next(&mut tx);
                body.unwrap();
                tx.commit().unwrap();
            }
        }
        let votes = db.table("voter_votes").unwrap();
        let mut by_worker = vec![0u64; workers];
        waypoint_bench::load::for_each_row(&mut session, &votes, |k, _| {
            // phone, run nonce, worker, sequence
            let phone = u64::from_be_bytes(k[..8].try_into().unwrap());
            let worker = u32::from_be_bytes(k[16..20].try_into().unwrap()) as usize;
            by_worker[worker] += 1;
            if phones > 64 {
                assert_eq!(phone % workers as u64, worker as u64, "phone {phone}");
            } else {
                assert_eq!(phone % 2, 0, "phone {phone}");
            }
            Ok(())
        })
        .unwrap();
        assert!(by_worker.iter().all(|&n| n > 0), "{by_worker:?}");
        drop(session);
        db.close().unwrap();
    }
}
