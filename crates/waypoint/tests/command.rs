//! The `command` scheme (seed 001's command logging) from the outside:
//! only stored-procedure calls are logged, acknowledged once durable, and
//! recovery runs them again over the last clean close. Checked across
//! power loss (any subset of unsynced writes kept, torn), repeated
//! crashes (log generations) and crashes inside the clean close; replay
//! gives the state of the same calls run without a crash (a digest of
//! every table); the broken variant (acknowledging before the record is
//! durable) is caught by the same checks; bad input is a typed error.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use waypoint::io::{CrashPolicy, SimStorage, Storage};
use waypoint::{
    CommandOptions, Database, Error, Options, Partition, Persistence, Procedures, SchemeKind,
    Transaction,
};

const DIR: &str = "/db";
const ACCOUNTS: u32 = 20;
const START: u64 = 1000;
const PARTITIONS: u32 = 2;

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Transfer {
    from: u32,
    to: u32,
    amount: u64,
    /// The history row's key: who asked, and their sequence number.
    by: u32,
    seq: u32,
}

fn get(tx: &mut Transaction<'_>, t: &waypoint::Table, a: u32) -> waypoint::Result<u64> {
    let v = tx.get(t, &a.to_be_bytes())?.ok_or(Error::KeyNotFound)?;
    Ok(u64::from_be_bytes(
        v.try_into().map_err(|_| Error::KeyNotFound)?,
    ))
}

fn transfer(tx: &mut Transaction<'_>, p: &Transfer) -> waypoint::Result<u64> {
    let accounts = tx.table("accounts")?;
    let history = tx.table("history")?;
    let f = get(tx, &accounts, p.from)?;
    let amount = f.min(p.amount);
    tx.update(
        &accounts,
        &p.from.to_be_bytes(),
        &(f - amount).to_be_bytes(),
    )?;
    let t = get(tx, &accounts, p.to)?;
    tx.update(&accounts, &p.to.to_be_bytes(), &(t + amount).to_be_bytes())?;
    let mut key = p.by.to_be_bytes().to_vec();
    key.extend_from_slice(&p.seq.to_be_bytes());
    tx.insert(&history, &key, &amount.to_be_bytes())?;
    Ok(amount)
}

/// Accounts are partitioned by number; a transfer between partitions is
/// a multi-partition call. The history row's key is unique, so it never
/// conflicts across partitions.
fn procedures() -> Procedures {
    Procedures::new()
        .multi("setup", |tx: &mut Transaction<'_>, n: &u32| {
            let accounts = tx.table("accounts")?;
            for a in 0..*n {
                tx.insert(&accounts, &a.to_be_bytes(), &START.to_be_bytes())?;
            }
            Ok(())
        })
        .unwrap()
        .add(
            "transfer",
            |p: &Transfer| {
                if p.from % PARTITIONS == p.to % PARTITIONS {
                    Partition::Key(u64::from(p.from))
                } else {
                    Partition::All
                }
            },
            transfer,
        )
        .unwrap()
        .index(
            "history_by_amount",
            Arc::new(|_k: &[u8], v: &[u8]| Some(v.to_vec())),
        )
        .unwrap()
}

fn command(sim: &SimStorage, pool_pages: usize) -> Options {
    command_on(sim, pool_pages, false)
}

/// With `executors`: calls run on an executor thread per partition.
fn command_on(sim: &SimStorage, pool_pages: usize, executors: bool) -> Options {
    Options {
        page_size: Some(4096),
        buffer_pool_bytes: pool_pages * 4096,
        storage: Some(Arc::new(sim.clone())),
        persistence: Persistence::Command(CommandOptions {
            partitions: PARTITIONS as usize,
            digests: true,
            executors,
            ..CommandOptions::default()
        }),
        procedures: procedures(),
        ..Options::default()
    }
}

#[path = "command_support/digest.rs"]
mod digest;
use digest::digest;

fn create(db: &Database) {
    db.create_table("accounts").unwrap();
    db.create_table("history").unwrap();
    db.session().call::<_, ()>("setup", &ACCOUNTS).unwrap();
}

/// The `i`th transfer of a deterministic stream.
fn nth_transfer(i: u32, by: u32) -> Transfer {
    let x = i.wrapping_mul(2_654_435_761).wrapping_add(by * 40503);
    Transfer {
        from: (x >> 3) % ACCOUNTS,
        to: (x >> 11) % ACCOUNTS,
        amount: u64::from(x >> 20) % 50,
        by,
        seq: i,
    }
}

fn call_retrying(
    s: &mut waypoint::Session,
    p: &Transfer,
) -> waypoint::Result<waypoint::PendingCommit> {
    loop {
        match s.call_pipelined::<_, u64>("transfer", p) {
            Err(Error::Conflict) => continue,
            other => return other.map(|(_, pending)| pending),
        }
    }
}

#[test]
fn a_clean_close_writes_the_data_file_and_removes_the_log() {
    let sim = SimStorage::new(1);
    let db = Database::open(DIR, command(&sim, 256)).unwrap();
    assert_eq!(db.scheme(), SchemeKind::Command);
    create(&db);
    let mut s = db.session();
    for i in 0..100 {
        s.call::<_, u64>("transfer", &nth_transfer(i, 0)).unwrap();
    }
    let stats = db.stats().persistence;
    assert_eq!(stats.command.calls_logged, 101);
    assert_eq!(stats.command.catalog_changes_logged, 2);
    assert_eq!(stats.command.partitions, 2);
    assert!(stats.log.appended_bytes > 0, "{stats:?}");
    // Creating an index whose extractor is not registered would leave
    // replay without it.
    let t = db.table("accounts").unwrap();
    let refused = db.create_index(&t, "i", Arc::new(|_k: &[u8], v: &[u8]| Some(v.to_vec())));
    assert!(matches!(refused, Err(Error::Unsupported { .. })));
    let before = digest(&db);
    drop((s, t));
    db.close().unwrap();
    assert!(!sim.exists(&Path::new(DIR).join("command")));
    let db = Database::open(DIR, command(&sim, 256)).unwrap();
    assert!(db.recovery_report().is_none());
    assert_eq!(digest(&db), before);
    db.close().unwrap();
    // The clean state is the data file: the per-worker scheme reads it.
    let db = Database::open(
        DIR,
        Options {
            persistence: Persistence::default(),
            ..command(&sim, 256)
        },
    )
    .unwrap();
    assert_eq!(digest(&db), before);
}

/// An index whose extractor is registered with the procedures: created
/// under `command` (a logged catalog change, after the clean close),
/// maintained by calls; after power loss the replay creates it again
/// with the registered extractor (whatever `create_index` was given) and
/// the replayed calls maintain it, so it scans as before the crash; and
/// once the index is in the clean close's data file, the open binds the
/// registered extractor before replaying calls that write its table.
#[test]
fn an_index_with_a_registered_extractor_is_created_and_maintained_by_replay() {
    let sim = SimStorage::new(7);
    let db = Database::open(DIR, command(&sim, 1024)).unwrap();
    create(&db);
    db.close().unwrap();
    let db = Database::open(DIR, command(&sim, 1024)).unwrap();
    let history = db.table("history").unwrap();
    let unused: waypoint::KeyExtractor = Arc::new(|_k: &[u8], _v: &[u8]| None);
    let index = db
        .create_index(&history, "history_by_amount", unused)
        .unwrap();
    let mut s = db.session();
    for i in 0..60 {
        s.call::<_, u64>("transfer", &nth_transfer(i, 0)).unwrap();
    }
    let scan = |db: &Database, index: &waypoint::Index| {
        let mut s = db.session();
        let mut tx = s.begin().unwrap();
        let all = tx.index_scan(index, .., usize::MAX, false).unwrap();
        all.into_iter()
            .map(|e| (e.secondary, e.primary))
            .collect::<Vec<_>>()
    };
    let before = scan(&db, &index);
    assert_eq!(
        before.len(),
        60,
        "the registered extractor indexes every row"
    );
    drop((s, history, index));
    std::mem::forget(db);
    sim.crash(CrashPolicy::Random {
        keep: 0.5,
        tear: true,
    });
    let db = Database::open(DIR, command(&sim, 1024)).unwrap();
    let stats = db.stats().persistence.command;
    assert_eq!(
        (stats.replayed_calls, stats.replayed_catalog_changes),
        (60, 1)
    );
    let index = db
        .open_index(
            "history_by_amount",
            Arc::new(|_k: &[u8], v: &[u8]| Some(v.to_vec())),
        )
        .unwrap();
    assert_eq!(scan(&db, &index), before);
    db.check_integrity().unwrap();
    drop(index);
    db.close().unwrap();

    // Now the index is in the clean close's data file: the replay's calls
    // maintain it only because the open bound the registered extractor.
    let db = Database::open(DIR, command(&sim, 1024)).unwrap();
    // Bound here as an embedder would: the run itself needs no help.
    db.open_index(
        "history_by_amount",
        Arc::new(|_k: &[u8], v: &[u8]| Some(v.to_vec())),
    )
    .unwrap();
    let mut s = db.session();
    for i in 60..100 {
        s.call::<_, u64>("transfer", &nth_transfer(i, 0)).unwrap();
    }
    drop(s);
    std::mem::forget(db);
    sim.crash(CrashPolicy::Random {
        keep: 0.5,
        tear: true,
    });
    let db = Database::open(DIR, command(&sim, 1024)).expect("the replay maintains the index");
    assert_eq!(db.stats().persistence.command.replayed_calls, 40);
    let index = db
        .open_index(
            "history_by_amount",
            Arc::new(|_k: &[u8], v: &[u8]| Some(v.to_vec())),
        )
        .unwrap();
    assert_eq!(scan(&db, &index).len(), 100);
    db.check_integrity().unwrap();
}

/// One session issues a fixed stream of calls, pipelined, and power is
/// lost while some are in flight. After recovery (twice: the second
/// recovery replays two generations) the state equals, table by table,
/// the first `n` calls run on a fresh database without a crash, where
/// `n` is what the log held, and every acknowledged call is among them.
#[test]
fn replay_after_power_loss_equals_the_same_calls_run_without_a_crash() {
    for seed in 0..4u64 {
        let sim = SimStorage::new(seed);
        let options = || command(&sim, 1024);
        let db = Database::open(DIR, options()).unwrap();
        create(&db);
        db.close().unwrap();
        let mut acked = 0u32;
        for round in 0..2 {
            let db = Database::open(DIR, options()).unwrap();
            let replayed = db.stats().persistence.command.replayed_calls;
            assert!(
                replayed >= u64::from(acked),
                "seed {seed}: {replayed} < {acked}"
            );
            // What the log kept is the prefix the run continues from.
            let mut issued = replayed as u32;
            acked = issued;
            let mut s = db.session();
            let mut pending = Vec::new();
            for _ in 0..(150 + 50 * seed as u32) {
                pending.push(call_retrying(&mut s, &nth_transfer(issued, 0)).unwrap());
                issued += 1;
                if pending.len() >= 16 {
                    pending.remove(0).wait().unwrap();
                    acked = issued - 16;
                }
            }
            drop(s);
            std::mem::forget((db, pending, round));
            sim.crash(CrashPolicy::Random {
                keep: 0.5,
                tear: true,
            });
        }
        let db = Database::open(DIR, options()).unwrap();
        let stats = db.stats().persistence.command;
        let report = db.recovery_report().unwrap().clone();
        assert!(report.records >= stats.replayed_calls, "{report:?}");
        let n = stats.replayed_calls as u32;
        assert!(
            n >= acked,
            "seed {seed}: {n} calls replayed, {acked} acknowledged"
        );
        let recovered = digest(&db);
        db.check_integrity().unwrap();
        std::mem::forget(db);

        let fresh = SimStorage::new(seed + 100);
        let db = Database::open(
            DIR,
            Options {
                persistence: Persistence::None,
                ..command(&fresh, 1024)
            },
        )
        .unwrap();
        create(&db);
        let mut s = db.session();
        for i in 0..n {
            call_retrying(&mut s, &nth_transfer(i, 0))
                .unwrap()
                .wait()
                .unwrap();
        }
        drop(s);
        assert_eq!(recovered, digest(&db), "seed {seed}: {n} calls");
    }
}

/// Transfers from four sessions (two pipelined), across partitions and
/// within them; power is lost at a random moment. Returns the violations
/// found after the reopen: a lost acknowledged call, money created or
/// destroyed. With `executors`, the calls run on executor threads, and
/// the last session hands its calls over without waiting for them to
/// run (`Session::submit`).
fn transfers_then_power_loss(seed: u64, broken: bool, executors: bool) -> Vec<String> {
    let sim = SimStorage::new(seed);
    let options = || command_on(&sim, 1024, executors);
    {
        let db = Database::open(DIR, options()).unwrap();
        create(&db);
        db.close().unwrap();
    }
    let db = Database::open(DIR, options()).unwrap();
    #[cfg(feature = "testing")]
    db.command()
        .unwrap()
        .set_broken_commit_ack_for_tests(broken);
    #[cfg(not(feature = "testing"))]
    let _ = broken;
    let acked: Mutex<BTreeSet<(u32, u32)>> = Mutex::new(BTreeSet::new());
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for th in 0u32..4 {
            let (db, acked, stop) = (&db, &acked, &stop);
            scope.spawn(move || {
                let mut s = db.session();
                let mut pending = Vec::new();
                let mut submitted = std::collections::VecDeque::new();
                for seq in 0u32.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let p = nth_transfer(seq, th);
                    if executors && th == 3 {
                        match s.submit::<_, u64>("transfer", &p) {
                            Ok(call) => submitted.push_back((seq, call)),
                            Err(_) => break,
                        }
                        if submitted.len() >= 8 {
                            let (seq, call) = submitted.pop_front().unwrap();
                            match call.wait() {
                                Ok(_) => {
                                    acked.lock().unwrap().insert((th, seq));
                                }
                                Err(Error::Conflict) => {}
                                Err(_) => break,
                            }
                        }
                    } else if th % 2 == 0 {
                        match s.call::<_, u64>("transfer", &p) {
                            Ok(_) => {
                                acked.lock().unwrap().insert((th, seq));
                            }
                            Err(Error::Conflict) => continue,
                            Err(_) => break,
                        }
                    } else {
                        match s.call_pipelined::<_, u64>("transfer", &p) {
                            Ok((_, pending_commit)) => pending.push((seq, pending_commit)),
                            Err(Error::Conflict) => continue,
                            Err(_) => break,
                        }
                        if pending.len() >= 8 {
                            let (seq, p) = pending.remove(0);
                            if p.wait().is_err() {
                                break;
                            }
                            acked.lock().unwrap().insert((th, seq));
                        }
                    }
                }
            });
        }
        std::thread::sleep(std::time::Duration::from_millis(100 + seed % 150));
        sim.crash(CrashPolicy::Random {
            keep: 0.5,
            tear: true,
        });
        stop.store(true, Ordering::Relaxed);
    });
    std::mem::forget(db);
    let acked = acked.into_inner().unwrap();
    let mut violations = Vec::new();
    if acked.is_empty() {
        violations.push("nothing was acknowledged before the crash".into());
    }
    let db = Database::open(DIR, options()).unwrap();
    let accounts = db.table("accounts").unwrap();
    let history = db.table("history").unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    let total: u64 = tx
        .scan(&accounts, .., usize::MAX)
        .unwrap()
        .iter()
        .map(|(_, v)| u64::from_be_bytes(v.as_slice().try_into().unwrap()))
        .sum();
    if total != START * u64::from(ACCOUNTS) {
        violations.push(format!(
            "the accounts hold {total}, not {}",
            START * u64::from(ACCOUNTS)
        ));
    }
    let present: BTreeSet<(u32, u32)> = tx
        .scan(&history, .., usize::MAX)
        .unwrap()
        .iter()
        .map(|(k, _)| {
            let th = u32::from_be_bytes(k[0..4].try_into().unwrap());
            let seq = u32::from_be_bytes(k[4..8].try_into().unwrap());
            (th, seq)
        })
        .collect();
    if let Some(a) = acked.iter().find(|a| !present.contains(a)) {
        violations.push(format!("acknowledged call {a:?} is lost"));
    }
    drop(tx);
    db.check_integrity().unwrap();
    violations
}

#[test]
fn power_loss_during_transfers_keeps_every_acknowledged_call_and_no_partial_one() {
    for seed in 10..16 {
        let v = transfers_then_power_loss(seed, false, false);
        assert!(v.is_empty(), "seed {seed}: {v:?}");
    }
}

#[test]
fn power_loss_during_transfers_on_executors_keeps_every_acknowledged_call_and_no_partial_one() {
    for seed in 40..46 {
        let v = transfers_then_power_loss(seed, false, true);
        assert!(v.is_empty(), "seed {seed}: {v:?}");
    }
}

/// The broken variant acknowledges before the record is durable: the
/// same check finds acknowledged calls lost.
#[test]
fn acknowledging_before_the_record_is_durable_is_caught() {
    for executors in [false, true] {
        let caught = (20..30).any(|seed| {
            transfers_then_power_loss(seed, true, executors)
                .iter()
                .any(|v| v.contains("is lost"))
        });
        assert!(
            caught,
            "no seed lost an acknowledged call under the broken variant (executors: {executors})"
        );
    }
}

/// Power loss at every point of a clean close (after a crash, so an older
/// generation is on disk too): the reopen finds the closed state or the
/// state before the close, never a mix.
#[test]
fn power_loss_inside_the_clean_close_loses_nothing() {
    use waypoint::io::{Fault, FaultKind};
    for (i, step) in (1..40).step_by(3).enumerate() {
        let sim = SimStorage::new(200 + i as u64);
        let options = || command(&sim, 512);
        let db = Database::open(DIR, options()).unwrap();
        create(&db);
        let mut s = db.session();
        for seq in 0..60 {
            s.call::<_, u64>("transfer", &nth_transfer(seq, 0)).unwrap();
        }
        drop(s);
        std::mem::forget(db);
        sim.crash(CrashPolicy::DropAll);
        let db = Database::open(DIR, options()).unwrap();
        let mut s = db.session();
        for seq in 60..120 {
            s.call::<_, u64>("transfer", &nth_transfer(seq, 0)).unwrap();
        }
        drop(s);
        let expected = digest(&db);
        sim.inject(Fault::at(sim.op_count() + step, FaultKind::Freeze));
        let closed = db.close().is_ok();
        sim.clear_faults();
        sim.crash(CrashPolicy::Random {
            keep: 0.5,
            tear: true,
        });
        // Sometimes a second crash during the reopen.
        sim.inject(Fault::at(sim.op_count() + step / 3 + 1, FaultKind::Freeze));
        if let Ok(db) = Database::open(DIR, options()) {
            std::mem::forget(db);
        }
        sim.clear_faults();
        sim.crash(CrashPolicy::Random {
            keep: 0.5,
            tear: true,
        });
        let db = Database::open(DIR, options())
            .unwrap_or_else(|e| panic!("step {step} (closed: {closed}): {e}"));
        assert!(digest(&db) == expected, "step {step}, closed: {closed}");
        db.check_integrity().unwrap();
        db.close().unwrap();
    }
}

/// The generation directory's segment files, oldest first: one or two
/// (the first segment after an open grows until the preallocated spare
/// is ready, then the stream moves to the spare, whenever that is).
fn segments(sim: &SimStorage) -> Vec<PathBuf> {
    let dir = Path::new(DIR).join("command");
    let generation = sim
        .list_dir(&dir)
        .unwrap()
        .into_iter()
        .find(|p| p.file_name().unwrap().to_str().unwrap().starts_with('g'))
        .unwrap();
    let segments = waypoint::logstore::segment::list_segments(sim, &generation).unwrap();
    assert!((1..=2).contains(&segments.len()), "{segments:?}");
    segments.into_iter().map(|(_, path)| path).collect()
}

/// Bytes up to the last non-zero byte of a segment file.
fn used(sim: &SimStorage, segment: &Path) -> u64 {
    let bytes = sim.read_durable(segment).unwrap();
    bytes.iter().rposition(|b| *b != 0).unwrap() as u64
}

/// A database left open with `calls` durable calls (each call synced
/// before the next is made) and nothing else in its log.
fn left_open(sim: &SimStorage, calls: u32) {
    let db = Database::open(DIR, command(sim, 256)).unwrap();
    create(&db);
    db.close().unwrap();
    let db = Database::open(DIR, command(sim, 256)).unwrap();
    let mut s = db.session();
    for seq in 0..calls {
        s.call::<_, u64>("transfer", &nth_transfer(seq, 0)).unwrap();
    }
    drop(s);
    std::mem::forget(db);
    sim.crash(CrashPolicy::DropAll);
}

#[test]
fn a_damaged_record_in_the_middle_is_corruption_naming_file_and_offset() {
    let sim = SimStorage::new(5);
    left_open(&sim, 40);
    // A byte well inside the log, before its last records: in the
    // segment with the most of them.
    let segment = segments(&sim)
        .into_iter()
        .max_by_key(|p| used(&sim, p))
        .unwrap();
    let at = used(&sim, &segment) / 2;
    sim.corrupt(&segment, at, 0x5a).unwrap();
    let err = Database::open(DIR, command(&sim, 256)).unwrap_err();
    match err {
        Error::Corruption { path, offset, .. } => {
            assert_eq!(path, segment);
            assert!(
                offset <= at && offset + 512 > at,
                "offset {offset}, damage at {at}"
            );
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn a_torn_tail_is_the_end_of_the_log() {
    let sim = SimStorage::new(6);
    left_open(&sim, 40);
    let segment = segments(&sim).pop().unwrap();
    sim.corrupt(&segment, used(&sim, &segment) - 2, 0x5a)
        .unwrap();
    let db = Database::open(DIR, command(&sim, 256)).unwrap();
    let report = db.recovery_report().unwrap();
    assert_eq!(report.torn_tails, 1, "{report:?}");
    assert_eq!(db.stats().persistence.command.replayed_calls, 39);
}

#[test]
fn a_log_naming_an_unknown_procedure_or_other_parameters_is_refused_before_any_write() {
    let sim = SimStorage::new(7);
    left_open(&sim, 10);
    let files = |sim: &SimStorage| {
        let mut out = Vec::new();
        let mut dirs = vec![PathBuf::from(DIR)];
        while let Some(d) = dirs.pop() {
            for p in sim.list_dir(&d).unwrap() {
                match sim.read_current(&p) {
                    Some(bytes) => out.push((p, bytes)),
                    None => dirs.push(p),
                }
            }
        }
        out.sort();
        out
    };
    let before = files(&sim);
    let without = Options {
        procedures: Procedures::new()
            .multi("setup", |_: &mut Transaction<'_>, _: &u32| Ok(()))
            .unwrap(),
        ..command(&sim, 256)
    };
    let err = Database::open(DIR, without).unwrap_err();
    assert!(
        matches!(&err, Error::UnknownProcedure { name } if name == "transfer"),
        "{err:?}"
    );
    let other_params = Options {
        procedures: Procedures::new()
            .multi("setup", |_: &mut Transaction<'_>, _: &u32| Ok(()))
            .unwrap()
            .multi("transfer", |_: &mut Transaction<'_>, _: &(u8, u8)| Ok(()))
            .unwrap(),
        ..command(&sim, 256)
    };
    let err = Database::open(DIR, other_params).unwrap_err();
    assert!(
        matches!(&err, Error::ProcedureParams { name, .. } if name == "transfer"),
        "{err:?}"
    );
    assert!(files(&sim) == before, "a refused open changed files");
    let db = Database::open(DIR, command(&sim, 256)).unwrap();
    assert_eq!(db.stats().persistence.command.replayed_calls, 10);
}

/// Pipelined calls are synced once a batch of them waits, as a WAL
/// partition's pipelined commits are, not held for the whole pacing
/// interval: with the longest interval (1 s), a batch of calls made right
/// after a sync is durable long before the interval ends. Asking the
/// writer lazily (a group window, then the interval) kept every call
/// about one interval, which capped a worker's 128 calls in flight by
/// Little's law.
#[test]
fn pipelined_calls_are_synced_by_a_batch_not_held_for_the_pacing_interval() {
    let sim = SimStorage::new(11);
    let interval = std::time::Duration::from_secs(1);
    let mut options = command(&sim, 256);
    if let Persistence::Command(c) = &mut options.persistence {
        c.sync_interval = interval;
    }
    let db = Database::open(Path::new(DIR), options).unwrap();
    create(&db);
    let mut s = db.session();
    // Same-partition transfers, so no call waits for the others' locks.
    let batch = |s: &mut waypoint::Session, from: u32| -> Vec<waypoint::PendingCommit> {
        (0..64)
            .map(|i| {
                let p = Transfer {
                    from: 0,
                    to: PARTITIONS,
                    amount: 1,
                    by: 1,
                    seq: from + i,
                };
                call_retrying(s, &p).unwrap()
            })
            .collect()
    };
    // The first batch's wait has the writer sync (its pacing starts).
    batch(&mut s, 0).pop().unwrap().wait().unwrap();
    let started = std::time::Instant::now();
    // Four batches' worth: a write the writer begins among them restarts
    // its count, and a full batch of requests still follows.
    let mut pending = batch(&mut s, 64);
    for i in 1..4 {
        // Kept, not dropped, until the check below.
        pending.extend(batch(&mut s, 64 * (i + 1)));
    }
    let first = pending.swap_remove(0);
    while !first.is_durable() && started.elapsed() < interval * 3 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let took = started.elapsed();
    assert!(
        took < interval / 2,
        "pipelined calls became durable after {took:?}, with a sync interval of {interval:?}"
    );
    first.wait().unwrap();
    drop(pending);
    db.close().unwrap();
}
