//! The `aries` scheme (seed 000 §4's central-log baseline) from the
//! outside: one log for every session, its records in LSN order, commits
//! durable across power loss, blocking and pipelined; full checkpoints
//! that keep the log bounded; recovery by the per-worker scheme's
//! analysis/redo/undo on the one partition; torn and corrupted tails as
//! for the per-worker log; and the scheme tag that keeps the two logs
//! from being read as each other.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use waypoint::db::{Superblock, DATA_FILE};
use waypoint::io::{CrashPolicy, OpenMode, SimStorage, Storage};
use waypoint::{
    CentralOptions, CheckpointMode, Database, Error, Options, PerWorkerOptions, Persistence,
    SchemeKind,
};

const DIR: &str = "/db";

fn options(sim: &SimStorage, persistence: Persistence) -> Options {
    Options {
        page_size: Some(4096),
        buffer_pool_bytes: 64 * 4096,
        storage: Some(Arc::new(sim.clone())),
        persistence,
        ..Options::default()
    }
}

fn aries(sim: &SimStorage) -> Options {
    options(sim, Persistence::Aries(CentralOptions::default()))
}

fn aries_with(sim: &SimStorage, change: impl FnOnce(&mut PerWorkerOptions)) -> Options {
    let mut central = CentralOptions::default();
    change(&mut central.log);
    options(sim, Persistence::Aries(central))
}

/// `threads` sessions commit `per_thread` rows each (keys disjoint by
/// thread); every other session pipelines its commits and waits for them
/// at the end. Returns once every commit is acknowledged.
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
                    tx.insert(t, &key, &[th as u8; 60]).unwrap();
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

#[test]
fn aries_logs_every_session_into_one_log_under_its_latch() {
    let sim = SimStorage::new(1);
    let db = Database::open(DIR, aries(&sim)).unwrap();
    assert_eq!(db.scheme(), SchemeKind::Aries);
    commit_from_threads(&db, 4, 100);
    assert_eq!(partitions(&sim).len(), 1, "one log: {:?}", partitions(&sim));
    let stats = db.stats().persistence;
    assert_eq!(stats.scheme, SchemeKind::Aries);
    assert!(stats.log.commits >= 400, "{:?}", stats.log);
    // Every record, commit and end record took the latch once.
    assert!(stats.log_latch.acquisitions >= 800, "{:?}", stats.log_latch);
    assert!(stats.log_latch.contended <= stats.log_latch.acquisitions);
    db.close().unwrap();
    let file = sim
        .open(&Path::new(DIR).join(DATA_FILE), OpenMode::ReadOnly)
        .unwrap();
    assert_eq!(
        Superblock::read(file.as_ref()).unwrap().scheme,
        Some(SchemeKind::Aries)
    );
    let db = Database::open(DIR, aries(&sim)).unwrap();
    assert_eq!(rows(&db), 400);
}

/// Power loss after every commit was acknowledged (blocking and
/// pipelined, from four sessions, with full checkpoints pruning a small
/// log meanwhile): recovery from the one log keeps every one of them, and
/// a crash during recovery's reopen changes nothing.
#[test]
fn aries_keeps_every_acknowledged_commit_across_power_loss() {
    let sim = SimStorage::new(2);
    let small = || {
        aries_with(&sim, |o| {
            o.wal_limit_bytes = 256 << 10;
            o.checkpoint_shards = 4;
        })
    };
    let db = Database::open(DIR, small()).unwrap();
    commit_from_threads(&db, 4, 600);
    let checkpoints = db.stats().persistence.checkpoint;
    std::mem::forget(db);
    sim.crash(CrashPolicy::DropAll);
    let db = Database::open(DIR, small()).unwrap();
    let report = db.recovery_report().unwrap().clone();
    assert_eq!(report.partitions, 1, "{report:?}");
    assert_eq!(rows(&db), 2400, "{report:?}; checkpoints {checkpoints:?}");
    db.check_integrity().unwrap();
    std::mem::forget(db);
    sim.crash(CrashPolicy::DropAll);
    let db = Database::open(DIR, small()).unwrap();
    assert_eq!(rows(&db), 2400);
}

/// Full checkpoints are the central log's default (seed 000 §4), and
/// with them the log on disk stays near its limit however much is logged.
#[test]
fn aries_full_checkpoints_keep_the_log_near_its_limit() {
    assert_eq!(
        CentralOptions::default().log.checkpoint,
        CheckpointMode::Full
    );
    let sim = SimStorage::new(3);
    let db = Database::open(
        DIR,
        aries_with(&sim, |o| {
            o.wal_limit_bytes = 128 << 10;
            o.checkpoint_shards = 2;
        }),
    )
    .unwrap();
    commit_from_threads(&db, 2, 5000);
    let stats = db.stats().persistence;
    let limit = stats.checkpoint.wal_limit_bytes;
    assert!(stats.checkpoint.increments > 0, "{:?}", stats.checkpoint);
    assert!(stats.log.appended_bytes > 8 * limit, "{stats:?}");
    // Back-pressure lets a full checkpoint lag one limit behind the
    // limit itself (`set_max_lag(2 * limit)`), plus the open segment:
    // whatever was logged, the log on disk stays within four limits.
    // (A ratio of appended to disk bytes would hang on how far the
    // checkpointer got at the last instant; this bound does not.)
    assert!(stats.checkpoint.wal_disk_bytes <= 4 * limit, "{stats:?}");
    assert!(
        stats.checkpoint.pruned_bytes >= stats.log.appended_bytes - 4 * limit,
        "{stats:?}"
    );
}

/// Commit rows 0..n from one session and stop without a clean close,
/// keeping every write; return the segment of the one log that holds them
/// (without preallocation the log is one growing file).
fn committed_log(sim: &SimStorage, n: u32) -> PathBuf {
    let db = Database::open(DIR, aries_with(sim, |o| o.wal_preallocate = false)).unwrap();
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

/// A damaged last record of the central log is its end, as for the
/// per-worker log: the open reports the torn tail and keeps every commit
/// before it.
#[test]
fn a_torn_central_log_tail_is_the_end_of_the_log() {
    let sim = SimStorage::new(4);
    let segment = committed_log(&sim, 100);
    let len = sim.read_current(&segment).unwrap().len() as u64;
    sim.corrupt(&segment, len - 20, 0x5a).unwrap();
    let db = Database::open(DIR, aries(&sim)).unwrap();
    let report = db.recovery_report().unwrap().clone();
    assert_eq!(report.torn_tails, 1, "{report:?}");
    assert_eq!(rows(&db), 99);
    db.check_integrity().unwrap();
}

/// A damaged record in the middle of the central log is corruption
/// naming the segment, never a silent cut.
#[test]
fn a_damaged_record_in_the_middle_of_the_central_log_is_corruption() {
    let sim = SimStorage::new(5);
    let segment = committed_log(&sim, 100);
    let bytes = sim.read_current(&segment).unwrap();
    let middle = bytes.len() as u64 / 2;
    // The error names the start of the record holding the damaged byte.
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
    match Database::open(DIR, aries(&sim)) {
        Err(Error::Corruption { path, offset, .. }) => {
            assert_eq!((path, offset), (segment, damaged));
        }
        other => panic!("expected corruption, got {:?}", other.map(|_| ())),
    }
}

/// Make the superblock of a database left open say it was left by
/// `scheme`: as a database whose log was copied from another one, or a
/// superblock from before the tag, would.
fn forge_superblock_scheme(sim: &SimStorage, scheme: SchemeKind) {
    let file = sim
        .open(&Path::new(DIR).join(DATA_FILE), OpenMode::Existing)
        .unwrap();
    let sb = Superblock::read(file.as_ref()).unwrap();
    assert!(!sb.clean && sb.log_required);
    Superblock {
        scheme: Some(scheme),
        ..sb
    }
    .write(file.as_ref())
    .unwrap();
    file.sync_data().unwrap();
}

/// The segment headers' scheme tag keeps the two logs apart: a
/// per-worker open never reads the central log's records as its own, and
/// the central log never reads a per-worker log, even where the superblock
/// lets the open go as far as the log.
#[test]
fn a_central_log_and_a_per_worker_log_refuse_each_other() {
    let sim = SimStorage::new(6);
    committed_log(&sim, 10);
    forge_superblock_scheme(&sim, SchemeKind::PerWorker);
    match Database::open(DIR, options(&sim, Persistence::default())) {
        Err(Error::LogSchemeMismatch {
            found, expected, ..
        }) => {
            assert_eq!(found, 3, "the aries tag");
            assert_eq!(expected, SchemeKind::PerWorker);
        }
        other => panic!("expected LogSchemeMismatch, got {:?}", other.err()),
    }

    let sim = SimStorage::new(7);
    let db = Database::open(DIR, options(&sim, Persistence::default())).unwrap();
    commit_from_threads(&db, 1, 10);
    std::mem::forget(db);
    sim.crash(CrashPolicy::KeepAll);
    forge_superblock_scheme(&sim, SchemeKind::Aries);
    match Database::open(DIR, aries(&sim)) {
        Err(Error::LogSchemeMismatch {
            found, expected, ..
        }) => {
            assert_eq!(found, 2, "the per-worker tag");
            assert_eq!(expected, SchemeKind::Aries);
        }
        other => panic!("expected LogSchemeMismatch, got {:?}", other.err()),
    }
}

/// Left open by `aries`, the database needs its recovery: the per-worker
/// scheme is refused naming it; a clean close lets either open it.
#[test]
fn aries_and_per_worker_switch_only_after_a_clean_close() {
    let sim = SimStorage::new(8);
    let db = Database::open(DIR, aries(&sim)).unwrap();
    commit_from_threads(&db, 2, 50);
    std::mem::forget(db);
    sim.crash(CrashPolicy::KeepAll);
    match Database::open(DIR, options(&sim, Persistence::default())) {
        Err(Error::RecoveryNeeded { scheme, .. }) => assert_eq!(scheme, SchemeKind::Aries),
        r => panic!("expected RecoveryNeeded, got {:?}", r.err()),
    }
    let db = Database::open(DIR, aries(&sim)).unwrap();
    assert_eq!(rows(&db), 100);
    db.close().unwrap();
    let db = Database::open(DIR, options(&sim, Persistence::default())).unwrap();
    assert_eq!(rows(&db), 100);
    db.close().unwrap();
    let db = Database::open(DIR, aries(&sim)).unwrap();
    assert_eq!(rows(&db), 100);
}

/// RFA has nothing to avoid on one log: asking a central log for it is
/// refused, naming the option.
#[test]
fn a_central_log_refuses_rfa() {
    let sim = SimStorage::new(9);
    let e = Database::open(
        DIR,
        aries_with(&sim, |o| o.commit = waypoint::CommitProtocol::RfaGroup),
    )
    .err()
    .unwrap();
    assert!(
        matches!(&e, Error::InvalidOptions(m) if m.contains("commit = rfa-group")),
        "{e}"
    );
}

/// With threads to spare, analysis reads and decodes a partition's
/// segments several at a time (a central log has one partition); what it
/// decides is what reading them one by one decides, also across torn
/// tails and segments written past the end of the durable log.
#[test]
fn analysis_reading_segments_in_parallel_decides_as_reading_them_one_by_one() {
    use waypoint::ids::Gsn;
    use waypoint::wal::recovery::Analysis;
    let mut many_segments = 0;
    for seed in 0..6 {
        let sim = SimStorage::new(seed);
        let db = Database::open(
            DIR,
            aries_with(&sim, |l| {
                l.wal_segment_bytes = 16 << 10;
                l.checkpoint = CheckpointMode::None;
            }),
        )
        .unwrap();
        commit_from_threads(&db, 2, 600);
        std::mem::forget(db);
        sim.crash(CrashPolicy::Random {
            keep: 0.5,
            tear: true,
        });
        let log_dir = Path::new(DIR).join(waypoint::db::WAL_DIR);
        let read = |threads| {
            Analysis::read_for(SchemeKind::Aries, &sim, &log_dir, Gsn::ZERO, threads)
                .map(|a| {
                    let r = a.report().clone();
                    let ends: Vec<_> = a
                        .partitions()
                        .into_iter()
                        .map(|p| (p.id, p.end, p.clock, p.segments))
                        .collect();
                    (ends, r.segments, r.records, r.log_bytes, r.torn_tails)
                })
                .map_err(|e| e.to_string())
        };
        let one = read(1);
        if let Ok((ends, ..)) = &one {
            many_segments += usize::from(ends[0].3.len() > 8);
        }
        for threads in [2, 3, 8] {
            assert_eq!(read(threads), one, "seed {seed}, {threads} threads");
        }
    }
    assert!(
        many_segments >= 3,
        "logs of many segments: {many_segments} of 6"
    );
}
