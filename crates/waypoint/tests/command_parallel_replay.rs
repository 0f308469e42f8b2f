//! Parallel replay of the `command` log (seed 001 §III-B): each
//! partition's calls re-executed on a thread of their own, meeting at
//! every barrier (multi-partition calls, catalog changes, calls that
//! wrote a table without a partitioning key), routed by the partition
//! count each log generation ran under. The recovered state is that of
//! the same calls run without a crash (a digest of every table), with 2
//! to 4 partitions and across reopens with another count; a failed call
//! stops it where serial replay stops; the broken variants (barriers
//! replayed as ordinary calls, calls routed by the count in force now)
//! are caught by the same checks.
//!
//! Every update is order-dependent (`v * 3 + x`), so two calls that
//! touch one row and replay in the other order leave another value.

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use waypoint::io::{CrashPolicy, SimStorage};
use waypoint::{
    CommandOptions, CommandSnapshot, Database, Error, Options, Persistence, Procedures, Transaction,
};

#[path = "command_support/digest.rs"]
mod digest;
use digest::{digest, Digest};

const DIR: &str = "/db";
const ACCOUNTS: u64 = 12;
/// Every this many calls, a multi-partition `spread`.
const SPREAD_EVERY: u64 = 10;

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
enum Kind {
    /// `accounts[account] = mix(accounts[account], x)`: its partition's
    /// row only, replayed beside the other partitions' calls.
    Mix,
    /// Mixes `x` into the journal row (a table without a partitioning
    /// key), then the result into its account: a barrier.
    Stamp,
    /// Mixes the journal row into its account: reads a table without a
    /// key, writes only its partition's row, so not a barrier; correct
    /// only if every stamp before it in the log ran before it.
    Peek,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Op {
    route: u64,
    account: u64,
    x: u64,
    kind: Kind,
}

fn mix(v: u64, x: u64) -> u64 {
    v.wrapping_mul(3).wrapping_add(x)
}

fn get(tx: &mut Transaction<'_>, table: &str, key: &[u8]) -> waypoint::Result<u64> {
    let t = tx.table(table)?;
    let v = tx.get(&t, key)?.ok_or(Error::KeyNotFound)?;
    Ok(u64::from_be_bytes(
        v.try_into().map_err(|_| Error::KeyNotFound)?,
    ))
}

fn put(tx: &mut Transaction<'_>, table: &str, key: &[u8], v: u64) -> waypoint::Result<()> {
    let t = tx.table(table)?;
    tx.update(&t, key, &v.to_be_bytes())
}

/// `accounts` is partitioned by account number, `journal` has no key.
/// `altered`: a `Mix` with this `x` writes something else (a procedure
/// that is not the one that was logged).
fn procedures(altered: Option<u64>) -> Procedures {
    Procedures::new()
        .partition_key("accounts", |k: &[u8]| {
            k.try_into().map_or(0, u64::from_be_bytes)
        })
        .unwrap()
        .multi("setup", |tx: &mut Transaction<'_>, n: &u64| {
            let accounts = tx.table("accounts")?;
            for a in 0..*n {
                tx.insert(&accounts, &a.to_be_bytes(), &a.to_be_bytes())?;
            }
            let journal = tx.table("journal")?;
            tx.insert(&journal, b"last", &0u64.to_be_bytes())
        })
        .unwrap()
        .multi("spread", |tx: &mut Transaction<'_>, x: &u64| {
            for a in 0..ACCOUNTS {
                let v = get(tx, "accounts", &a.to_be_bytes())?;
                put(tx, "accounts", &a.to_be_bytes(), mix(v, *x + a))?;
            }
            Ok(())
        })
        .unwrap()
        .single(
            "op",
            |o: &Op| o.route,
            move |tx: &mut Transaction<'_>, o: &Op| {
                let key = o.account.to_be_bytes();
                let v = get(tx, "accounts", &key)?;
                let with = match o.kind {
                    Kind::Mix if Some(o.x) == altered => o.x + 1,
                    Kind::Mix => o.x,
                    Kind::Stamp => {
                        let j = mix(get(tx, "journal", b"last")?, o.x);
                        put(tx, "journal", b"last", j)?;
                        j
                    }
                    Kind::Peek => get(tx, "journal", b"last")?,
                };
                put(tx, "accounts", &key, mix(v, with))
            },
        )
        .unwrap()
}

fn options(sim: &SimStorage, partitions: usize, altered: Option<u64>) -> Options {
    Options {
        page_size: Some(4096),
        buffer_pool_bytes: 1024 * 4096,
        storage: Some(Arc::new(sim.clone())),
        recovery_threads: 4,
        persistence: Persistence::Command(CommandOptions {
            partitions,
            digests: true,
            snapshot: CommandSnapshot::Off,
            ..CommandOptions::default()
        }),
        procedures: procedures(altered),
        ..Options::default()
    }
}

/// A call of the deterministic stream: call `i` of a run under
/// `partitions`, routed by a key of its account's partition under that
/// count only (`account + partitions * j`).
enum Call {
    Op(Op),
    Spread(u64),
}

fn nth(i: u64, partitions: usize) -> Call {
    let x = i.wrapping_mul(2_654_435_761) ^ (i >> 3);
    if i % SPREAD_EVERY == SPREAD_EVERY - 1 {
        return Call::Spread(x % 1000);
    }
    let account = (x >> 4) % ACCOUNTS;
    let kind = match (x >> 12) % 10 {
        0 | 1 => Kind::Stamp,
        2..=4 => Kind::Peek,
        _ => Kind::Mix,
    };
    Call::Op(Op {
        route: account + partitions as u64 * ((x >> 20) % 4),
        account,
        x: x % 1000,
        kind,
    })
}

fn run(db: &Database, i: u64, partitions: usize) {
    let mut s = db.session();
    match nth(i, partitions) {
        Call::Op(op) => s.call::<_, ()>("op", &op).unwrap(),
        Call::Spread(x) => s.call::<_, ()>("spread", &x).unwrap(),
    }
}

fn create(db: &Database) {
    db.create_table("accounts").unwrap();
    db.create_table("journal").unwrap();
    db.session().call::<_, ()>("setup", &ACCOUNTS).unwrap();
}

/// Generations of `calls` calls each, under the partition counts
/// given, each ended by a crash (every call acknowledged, so durable).
/// The first creates the tables.
fn crashed_generations(sim: &SimStorage, counts: &[usize], calls: u64) {
    for (g, &n) in counts.iter().enumerate() {
        let db = Database::open(DIR, options(sim, n, None)).unwrap();
        if g == 0 {
            create(&db);
        }
        for i in 0..calls {
            run(&db, g as u64 * calls + i, n);
        }
        std::mem::forget(db);
        sim.crash(CrashPolicy::KeepAll);
    }
}

/// The same calls run without a crash, without a log.
fn expected(counts: &[usize], calls: u64) -> Digest {
    let sim = SimStorage::new(99);
    let db = Database::open(
        DIR,
        Options {
            persistence: Persistence::None,
            ..options(&sim, 1, None)
        },
    )
    .unwrap();
    create(&db);
    for (g, &n) in counts.iter().enumerate() {
        for i in 0..calls {
            run(&db, g as u64 * calls + i, n);
        }
    }
    digest(&db)
}

#[test]
fn parallel_replay_with_2_to_4_partitions_equals_the_calls_run_without_a_crash() {
    const CALLS: u64 = 300;
    for n in 2..=4usize {
        let sim = SimStorage::new(n as u64);
        crashed_generations(&sim, &[n], CALLS);
        let db = Database::open(DIR, options(&sim, n, None)).unwrap();
        let stats = db.stats().persistence.command;
        assert_eq!(stats.replayed_calls, CALLS + 1, "{n} partitions");
        assert_eq!(stats.replayed_catalog_changes, 2, "{n} partitions");
        assert_eq!(stats.replay_threads, n, "{n} partitions");
        // Two catalog changes, the setup and every spread and stamp.
        assert!(
            stats.replay_barriers > 3 + CALLS / SPREAD_EVERY,
            "{stats:?}"
        );
        assert!(stats.replay_barriers < CALLS / 2, "{stats:?}");
        db.check_integrity().unwrap();
        assert!(digest(&db) == expected(&[n], CALLS), "{n} partitions");
    }
}

#[test]
fn logs_written_with_one_partition_count_replay_correctly_under_another() {
    const CALLS: u64 = 150;
    for (counts, now) in [(vec![2, 3], 4), (vec![4, 2], 3), (vec![3, 1], 2)] {
        let sim = SimStorage::new(7);
        crashed_generations(&sim, &counts, CALLS);
        let db = Database::open(DIR, options(&sim, now, None)).unwrap();
        let stats = db.stats().persistence.command;
        assert_eq!(stats.replayed_calls, 2 * CALLS + 1, "{counts:?}");
        assert_eq!(
            stats.replay_threads,
            *counts.iter().max().unwrap(),
            "{counts:?}"
        );
        assert!(
            digest(&db) == expected(&counts, CALLS),
            "{counts:?} → {now}"
        );
    }
}

/// Recover `counts`' generations with a broken variant switched on for
/// this thread; true if the checks caught it (the open refused the log,
/// or the state is not the one the calls made).
fn caught(counts: &[usize], now: usize, seed: u64, broken: impl Fn(bool)) -> bool {
    const CALLS: u64 = 200;
    let sim = SimStorage::new(seed);
    crashed_generations(&sim, counts, CALLS);
    broken(true);
    let opened = Database::open(DIR, options(&sim, now, None));
    broken(false);
    match opened {
        Err(Error::Corruption { .. }) => true,
        Err(e) => panic!("unexpected error {e}"),
        Ok(db) => digest(&db) != expected(counts, CALLS),
    }
}

#[test]
fn replaying_barrier_calls_beside_other_partitions_calls_is_caught() {
    let broken = waypoint::command::set_broken_replay_barriers_for_tests;
    // Timing decides which interleaving the broken replay runs; any of a
    // few tries showing it is enough (the correct replay passes every
    // one of these checks above).
    assert!((0..5).any(|seed| caught(&[4], 4, seed, broken)));
}

#[test]
fn routing_calls_by_the_partition_count_in_force_now_is_caught() {
    let broken =
        |on: bool| waypoint::command::set_broken_replay_partitions_for_tests(on.then_some(3));
    assert!((0..5).any(|seed| caught(&[2], 3, seed, broken)));
}

/// The error of recovering the generations with a procedure that
/// writes otherwise for `Mix` calls with `x == altered`, on `threads`.
fn replay_error(altered: u64, threads: usize) -> Error {
    let sim = SimStorage::new(3);
    crashed_generations(&sim, &[3], 200);
    match Database::open(
        DIR,
        Options {
            recovery_threads: threads,
            ..options(&sim, 3, Some(altered))
        },
    ) {
        Err(e) => e,
        Ok(_) => panic!("a call that writes otherwise was replayed"),
    }
}

#[test]
fn a_call_that_fails_stops_parallel_replay_where_serial_replay_stops() {
    // The first and the last Mix calls of the stream, so that other
    // partitions' calls run on after the failure and before it.
    let mixes: Vec<u64> = (0..200)
        .filter_map(|i| match nth(i, 3) {
            Call::Op(Op {
                kind: Kind::Mix, x, ..
            }) => Some(x),
            _ => None,
        })
        .collect();
    for altered in [mixes[2], mixes[mixes.len() - 2]] {
        // Each run writes its own log, whose segment files the writer's
        // timing cuts differently: the same call is named in either run,
        // at whatever file and offset it landed.
        let (serial, parallel) = (replay_error(altered, 1), replay_error(altered, 3));
        match (&serial, &parallel) {
            (Error::Corruption { detail: s, .. }, Error::Corruption { detail: p, .. }) => {
                assert_eq!(s, p)
            }
            _ => panic!("expected corruption from both: {serial} / {parallel}"),
        }
    }
}

/// The file of generation 1 that records its partition count.
fn partitions_file() -> std::path::PathBuf {
    std::path::Path::new(DIR).join("command/g00000001/partitions")
}

#[test]
fn a_generation_without_its_partition_count_replays_serially_and_a_damaged_one_is_refused() {
    use waypoint::io::{OpenMode, Storage};
    const CALLS: u64 = 100;
    // As a log from before parallel replay left it: no count.
    let sim = SimStorage::new(5);
    crashed_generations(&sim, &[3], CALLS);
    sim.remove(&partitions_file()).unwrap();
    let db = Database::open(DIR, options(&sim, 3, None)).unwrap();
    let stats = db.stats().persistence.command;
    assert_eq!(stats.replayed_calls, CALLS + 1);
    assert_eq!(stats.replay_threads, 1, "{stats:?}");
    assert!(digest(&db) == expected(&[3], CALLS));
    std::mem::forget(db);
    // A damaged count is corruption naming the file, not a guess.
    let sim = SimStorage::new(6);
    crashed_generations(&sim, &[3], CALLS);
    let file = sim.open(&partitions_file(), OpenMode::Existing).unwrap();
    file.write_at(&[9], 12).unwrap();
    file.sync_data().unwrap();
    drop(file);
    match Database::open(DIR, options(&sim, 3, None)) {
        Err(Error::Corruption { path, .. }) => assert_eq!(path, partitions_file()),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a damaged partition count was read"),
    }
}
