//! The `aether` scheme from the outside: the central log with a
//! consolidation array, decoupled buffer fill and flush pipelining. Many
//! sessions insert concurrently into one log in LSN order, fewer latch
//! acquisitions than inserts once groups form; every acknowledged commit
//! (blocking and pipelined) survives power loss, also with full
//! checkpoints pruning meanwhile; torn and damaged tails behave as for
//! the other logs; and its segments' tag keeps it apart from `aries`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use waypoint::db::{Superblock, DATA_FILE};
use waypoint::io::{CrashPolicy, OpenMode, SimStorage, Storage};
use waypoint::{
    CentralOptions, Database, Error, Options, PerWorkerOptions, Persistence, SchemeKind,
};

const DIR: &str = "/db";

fn aether_with(sim: &SimStorage, change: impl FnOnce(&mut PerWorkerOptions)) -> Options {
    let mut central = CentralOptions::default();
    change(&mut central.log);
    Options {
        page_size: Some(4096),
        buffer_pool_bytes: 64 * 4096,
        storage: Some(Arc::new(sim.clone())),
        persistence: Persistence::Aether(central),
        ..Options::default()
    }
}

fn aether(sim: &SimStorage) -> Options {
    aether_with(sim, |_| {})
}

/// `threads` sessions commit `per_thread` rows each (disjoint keys, some
/// values large enough to split pages: structure modifications); odd
/// sessions pipeline their commits and wait at the end.
fn commit_from_threads(db: &Database, threads: u32, per_thread: u32) {
    let t = db.open_or_create_table("t").unwrap();
    std::thread::scope(|s| {
        for th in 0..threads {
            let t = &t;
            s.spawn(move || {
                let mut session = db.session();
                let mut pending = Vec::new();
                for i in 0..per_thread {
                    let mut tx = session.begin().unwrap();
                    let key = (th * 1_000_000 + i).to_be_bytes();
                    let len = if i % 7 == 0 { 400 } else { 60 };
                    tx.insert(t, &key, &vec![th as u8; len]).unwrap();
                    if th % 2 == 0 {
                        tx.commit().unwrap();
                    } else {
                        pending.push(tx.commit_pipelined().unwrap());
                    }
                }
                for p in pending {
                    p.wait().unwrap();
                }
            });
        }
    });
}

fn rows(db: &Database) -> usize {
    let t = db.table("t").unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    tx.scan(&t, .., usize::MAX).unwrap().len()
}

fn partitions(sim: &SimStorage) -> Vec<PathBuf> {
    sim.list_dir(&Path::new(DIR).join(waypoint::db::WAL_DIR))
        .unwrap()
}

/// Eight sessions insert at once into one log: every insert went through
/// the consolidation array, only group leaders took the latch, the log
/// reads back in LSN order (recovery's analysis checks the order), and the
/// superblock records the scheme.
#[test]
fn many_sessions_insert_concurrently_into_one_log_in_lsn_order() {
    let sim = SimStorage::new(31);
    let db = Database::open(DIR, aether(&sim)).unwrap();
    assert_eq!(db.scheme(), SchemeKind::Aether);
    commit_from_threads(&db, 8, 150);
    assert_eq!(partitions(&sim).len(), 1, "one log: {:?}", partitions(&sim));
    let stats = db.stats().persistence;
    assert_eq!(stats.scheme, SchemeKind::Aether);
    let c = stats.consolidation;
    assert!(c.inserts >= 2 * 1200, "{c:?}");
    assert_eq!(
        stats.log_latch.acquisitions, c.groups,
        "only leaders take the latch: {c:?} {:?}",
        stats.log_latch
    );
    assert!(c.max_group >= 1 && c.groups <= c.inserts, "{c:?}");
    db.check_integrity().unwrap();
    std::mem::forget(db);
    sim.crash(CrashPolicy::KeepAll);
    let db = Database::open(DIR, aether(&sim)).unwrap();
    assert_eq!(rows(&db), 1200);
    db.check_integrity().unwrap();
    db.close().unwrap();
    let file = sim
        .open(&Path::new(DIR).join(DATA_FILE), OpenMode::ReadOnly)
        .unwrap();
    assert_eq!(
        Superblock::read(file.as_ref()).unwrap().scheme,
        Some(SchemeKind::Aether)
    );
}

/// Power loss after every commit was acknowledged (blocking ones waiting
/// for the flush daemon, pipelined ones handed to it), with full
/// checkpoints pruning a small log meanwhile: recovery keeps every one,
/// and a crash during the reopen changes nothing.
#[test]
fn aether_keeps_every_acknowledged_commit_across_power_loss() {
    for seed in [32, 33, 34] {
        let sim = SimStorage::new(seed);
        let small = || {
            aether_with(&sim, |o| {
                o.wal_limit_bytes = 256 << 10;
                o.checkpoint_shards = 4;
            })
        };
        let db = Database::open(DIR, small()).unwrap();
        commit_from_threads(&db, 4, 500);
        std::mem::forget(db);
        sim.crash(CrashPolicy::DropAll);
        let db = Database::open(DIR, small()).unwrap();
        let report = db.recovery_report().unwrap().clone();
        assert_eq!(report.partitions, 1, "{report:?}");
        assert_eq!(rows(&db), 2000, "seed {seed}: {report:?}");
        db.check_integrity().unwrap();
        std::mem::forget(db);
        sim.crash(CrashPolicy::DropAll);
        let db = Database::open(DIR, small()).unwrap();
        assert_eq!(rows(&db), 2000);
    }
}

/// Commit rows 0..n from one session and stop without a clean close;
/// return the one segment of the log.
fn committed_log(sim: &SimStorage, n: u32) -> PathBuf {
    let db = Database::open(DIR, aether_with(sim, |o| o.wal_preallocate = false)).unwrap();
    let t = db.create_table("t").unwrap();
    let mut s = db.session();
    for i in 0..n {
        let mut tx = s.begin().unwrap();
        tx.insert(&t, &i.to_be_bytes(), &[i as u8; 50]).unwrap();
        tx.commit().unwrap();
    }
    drop((s, t));
    std::mem::forget(db);
    sim.crash(CrashPolicy::KeepAll);
    let parts = partitions(sim);
    assert_eq!(parts.len(), 1, "{parts:?}");
    let mut segments = waypoint::logstore::segment::list_segments(sim, &parts[0]).unwrap();
    assert_eq!(segments.len(), 1, "{segments:?}");
    segments.pop().unwrap().1
}

/// A torn last record is the log's end; a damaged one in the middle is
/// corruption naming the segment and the record's offset.
#[test]
fn torn_and_damaged_aether_log_tails_are_typed() {
    let sim = SimStorage::new(35);
    let segment = committed_log(&sim, 100);
    let len = sim.read_current(&segment).unwrap().len() as u64;
    sim.corrupt(&segment, len - 20, 0x5a).unwrap();
    let db = Database::open(DIR, aether(&sim)).unwrap();
    let report = db.recovery_report().unwrap().clone();
    assert_eq!(report.torn_tails, 1, "{report:?}");
    assert_eq!(rows(&db), 99);
    db.check_integrity().unwrap();
    drop(db);

    let sim = SimStorage::new(36);
    let segment = committed_log(&sim, 100);
    let bytes = sim.read_current(&segment).unwrap();
    let middle = bytes.len() as u64 / 2;
    let header = waypoint::logstore::segment::HEADER_SIZE;
    let base = waypoint::logstore::segment::parse_segment_name(&segment).unwrap();
    let scan = waypoint::wal::record::scan_segment(&bytes[header as usize..], base);
    let damaged = scan
        .records
        .iter()
        .map(|(at, _)| header + at)
        .filter(|&at| at <= middle)
        .max()
        .unwrap();
    sim.corrupt(&segment, middle, 0x01).unwrap();
    match Database::open(DIR, aether(&sim)) {
        Err(Error::Corruption { path, offset, .. }) => {
            assert_eq!((path, offset), (segment, damaged));
        }
        other => panic!("expected corruption, got {:?}", other.map(|_| ())),
    }
}

/// Its segments carry their own tag: an `aries` open of an `aether` log
/// left open is refused (the superblock first, the segments if the
/// superblock is forged), and a clean close lets either scheme open it.
#[test]
fn aether_and_aries_logs_refuse_each_other_until_a_clean_close() {
    let sim = SimStorage::new(37);
    committed_log(&sim, 10);
    let aries = |sim: &SimStorage| Options {
        persistence: Persistence::Aries(CentralOptions::default()),
        ..aether(sim)
    };
    match Database::open(DIR, aries(&sim)) {
        Err(Error::RecoveryNeeded { scheme, .. }) => assert_eq!(scheme, SchemeKind::Aether),
        r => panic!("expected RecoveryNeeded, got {:?}", r.err()),
    }
    let file = sim
        .open(&Path::new(DIR).join(DATA_FILE), OpenMode::Existing)
        .unwrap();
    let sb = Superblock::read(file.as_ref()).unwrap();
    Superblock {
        scheme: Some(SchemeKind::Aries),
        ..sb
    }
    .write(file.as_ref())
    .unwrap();
    file.sync_data().unwrap();
    match Database::open(DIR, aries(&sim)) {
        Err(Error::LogSchemeMismatch {
            found, expected, ..
        }) => {
            assert_eq!(found, 5, "the aether tag");
            assert_eq!(expected, SchemeKind::Aries);
        }
        other => panic!("expected LogSchemeMismatch, got {:?}", other.err()),
    }
    Superblock {
        scheme: Some(SchemeKind::Aether),
        ..sb
    }
    .write(file.as_ref())
    .unwrap();
    file.sync_data().unwrap();
    let db = Database::open(DIR, aether(&sim)).unwrap();
    assert_eq!(rows(&db), 10);
    db.close().unwrap();
    let db = Database::open(DIR, aries(&sim)).unwrap();
    assert_eq!(rows(&db), 10);
}
