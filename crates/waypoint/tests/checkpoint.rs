//! Checkpointing keeps the log bounded (issue 4): an update-heavy run that
//! writes many times the WAL limit keeps the log on disk under the limit
//! plus the documented slack, with continuous and with full checkpoints;
//! after a power loss at the end, recovery reads no more than that and
//! every acknowledged update is there.
//!
//! And crashes aimed at checkpointing: the disk freezes at a random
//! operation on the data file (inside increments' writes), on the metadata
//! file (at the first step of a floor update after a random point: the
//! randomized suite in `tests/crash.rs` covers the later steps), or on log
//! segments (appends and pruning), then power is lost with a random subset
//! of unsynced writes kept. `WAYPOINT_CKPT_CRASH_SEEDS` (default 12) seeds
//! per target.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use waypoint::io::{CrashPolicy, SimStorage};
use waypoint::{CheckpointMode, CommitProtocol, Database, Options, PerWorkerOptions, Persistence};

const ROWS: u32 = 2000;
const LIMIT: u64 = 1 << 20;
const SHARDS: usize = 8;
const SESSIONS: u32 = 2;

fn options(sim: &SimStorage, mode: CheckpointMode) -> Options {
    options_with_threads(sim, mode, 1)
}

fn options_with_threads(sim: &SimStorage, mode: CheckpointMode, threads: usize) -> Options {
    Options {
        page_size: Some(4096),
        buffer_pool_bytes: 256 * 4096,
        storage: Some(Arc::new(sim.clone())),
        persistence: Persistence::PerWorker(PerWorkerOptions {
            commit: CommitProtocol::RfaGroup,
            checkpoint: mode,
            wal_limit_bytes: LIMIT,
            checkpoint_shards: SHARDS,
            checkpoint_threads: threads,
            ..PerWorkerOptions::default()
        }),
        ..Options::default()
    }
}

fn value(row: u32, version: u32) -> Vec<u8> {
    let mut v = vec![(version % 251) as u8; 200];
    v[..4].copy_from_slice(&row.to_be_bytes());
    v[4..8].copy_from_slice(&version.to_be_bytes());
    v
}

/// Run updates until `10 * LIMIT` of log was written; returns the largest
/// log on disk seen after the first `2 * LIMIT` and each row's last version.
fn run(sim: &SimStorage, mode: CheckpointMode, threads: usize) -> (u64, Vec<u32>) {
    let db = Database::open("/db", options_with_threads(sim, mode, threads)).unwrap();
    let t = db.create_table("t").unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    for r in 0..ROWS {
        tx.insert(&t, &r.to_be_bytes(), &value(r, 0)).unwrap();
    }
    tx.commit().unwrap();
    drop(s);
    let versions: Vec<std::sync::atomic::AtomicU32> = (0..ROWS)
        .map(|_| std::sync::atomic::AtomicU32::new(0))
        .collect();
    let max_disk = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|scope| {
        for w in 0..SESSIONS {
            let (db, t, versions, max_disk) = (&db, &t, &versions, &max_disk);
            scope.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(w as u64);
                let mut s = db.session();
                let mut n = 0u64;
                loop {
                    // Each session owns the rows of its parity: no conflicts.
                    let row = rng.gen_range(0..ROWS / SESSIONS) * SESSIONS + w;
                    let version =
                        versions[row as usize].load(std::sync::atomic::Ordering::Relaxed) + 1;
                    let mut tx = s.begin().unwrap();
                    tx.update(t, &row.to_be_bytes(), &value(row, version))
                        .unwrap();
                    tx.commit().unwrap();
                    versions[row as usize].store(version, std::sync::atomic::Ordering::Relaxed);
                    n += 1;
                    if n.is_multiple_of(20) {
                        let stats = db.stats();
                        if stats.persistence.log.appended_bytes > 2 * LIMIT {
                            max_disk.fetch_max(
                                stats.persistence.log.disk_bytes,
                                std::sync::atomic::Ordering::Relaxed,
                            );
                        }
                        if stats.persistence.log.appended_bytes > 10 * LIMIT {
                            return;
                        }
                    }
                }
            });
        }
    });
    let stats = db.stats();
    assert!(
        stats.persistence.checkpoint.increments > 0,
        "{:?}",
        stats.persistence.checkpoint
    );
    assert!(
        stats.persistence.checkpoint.log_floor > waypoint::Gsn::ZERO,
        "{:?}",
        stats.persistence.checkpoint
    );
    std::mem::forget(db);
    (
        max_disk.into_inner(),
        versions
            .iter()
            .map(|v| v.load(std::sync::atomic::Ordering::Relaxed))
            .collect(),
    )
}

/// The documented slack over the limit
/// (docs/decisions/020-checkpointing-and-the-prune-rule.md, "Bounds"):
/// one increment's worth of log, plus the newest segment each partition
/// keeps and one more per partition being written.
fn slack(partitions: u64) -> u64 {
    let segment = (LIMIT / 32).max(64 << 10);
    LIMIT / SHARDS as u64 + 2 * partitions * segment
}

fn check(mode: CheckpointMode, threads: usize) {
    let sim = SimStorage::new(7);
    let (max_disk, versions) = run(&sim, mode, threads);
    // Full checkpoints start at the limit and the log grows while they run,
    // until back-pressure holds it at twice the limit past the stage-2
    // count of the checkpointer's last look (docs/decisions/
    // 020-checkpointing-and-the-prune-rule.md, "Bounds").
    // One limit of burst was too tight: a checkpointer slowed by a loaded
    // machine let the log reach 2.6-2.9 MB against 2.5 MiB in 9 of 40
    // runs (2026-11-23, on 43eb41e, alongside a parallel build).
    let burst = if mode == CheckpointMode::Full {
        2 * LIMIT
    } else {
        0
    };
    let bound = LIMIT + burst + slack(SESSIONS as u64 + 1);
    assert!(
        max_disk <= bound,
        "{mode:?}: log on disk reached {max_disk} bytes, limit {LIMIT} + slack = {bound}"
    );
    sim.crash(CrashPolicy::DropAll);
    let db = Database::open("/db", options(&sim, mode)).unwrap();
    let report = db.recovery_report().cloned().unwrap();
    assert!(
        report.log_bytes <= bound,
        "{mode:?}: recovery read {} bytes of log",
        report.log_bytes
    );
    let t = db.table("t").unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    for r in 0..ROWS {
        let got = tx.get(&t, &r.to_be_bytes()).unwrap().expect("row present");
        assert_eq!(
            got,
            value(r, versions[r as usize]),
            "{mode:?}: row {r} lost its last acknowledged update"
        );
    }
    drop(tx);
    db.check_integrity().unwrap();
}

#[test]
fn continuous_checkpoints_keep_the_log_under_its_limit() {
    check(CheckpointMode::Continuous, 1);
}

/// Two increments at once on distinct shards when the checkpointer is
/// behind: the same bound and the same recovery.
#[test]
fn continuous_checkpoints_on_two_threads_keep_the_log_under_its_limit() {
    check(CheckpointMode::Continuous, 2);
}

#[test]
fn full_checkpoints_keep_the_log_under_its_limit() {
    check(CheckpointMode::Full, 1);
}

/// Run updates until the disk freezes at a random operation on a path
/// containing `target` (the data file: inside an increment's writes; the
/// metadata file: inside its write/sync/rename; log segments: inside
/// appends and pruning), then lose power; every acknowledged update must
/// survive recovery, and an unacknowledged one may or may not.
fn crash_inside(target: &str, seed: u64) {
    let sim = SimStorage::new(seed);
    let mode = if seed.is_multiple_of(3) {
        CheckpointMode::Full
    } else {
        CheckpointMode::Continuous
    };
    let small = |sim: &SimStorage| {
        options(sim, mode).with_per_worker(|o| {
            o.wal_limit_bytes = 128 << 10;
            o.checkpoint_shards = 4;
        })
    };
    let db = Database::open("/db", small(&sim)).unwrap();
    let t = db.create_table("t").unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    for r in 0..ROWS {
        tx.insert(&t, &r.to_be_bytes(), &value(r, 0)).unwrap();
    }
    tx.commit().unwrap();
    let mut rng = SmallRng::seed_from_u64(seed);
    // Far enough that several increments and prunes happened before.
    let at = sim.op_count() + rng.gen_range(200..3000);
    sim.inject(waypoint::io::Fault::at(at, waypoint::io::FaultKind::Freeze).on_path(target));
    let mut acked = vec![0u32; ROWS as usize];
    let mut frozen = false;
    for _ in 0..200_000 {
        let row = rng.gen_range(0..ROWS);
        let version = acked[row as usize] + 1;
        let done = s.begin().and_then(|mut tx| {
            tx.update(&t, &row.to_be_bytes(), &value(row, version))?;
            tx.commit()
        });
        match done {
            Ok(_) => acked[row as usize] = version,
            Err(_) => {
                frozen = true;
                break;
            }
        }
    }
    assert!(frozen, "{target} seed {seed}: the disk never froze");
    drop(s);
    std::mem::forget(db);
    sim.clear_faults();
    sim.crash(CrashPolicy::Random {
        keep: rng.gen_range(0.0..1.0),
        tear: true,
    });
    let db = Database::open("/db", small(&sim))
        .unwrap_or_else(|e| panic!("{target} seed {seed}: recovery failed: {e}"));
    let t = db.table("t").unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    for r in 0..ROWS {
        let got = tx.get(&t, &r.to_be_bytes()).unwrap().expect("row present");
        let v = u32::from_be_bytes(got[4..8].try_into().unwrap());
        let a = acked[r as usize];
        assert!(
            v == a || v == a + 1,
            "{target} seed {seed}: row {r} has version {v}, acknowledged {a}"
        );
        assert_eq!(got, value(r, v), "{target} seed {seed}: row {r} torn");
    }
    drop(tx);
    db.check_integrity()
        .unwrap_or_else(|e| panic!("{target} seed {seed}: {e}"));
}

fn seeds() -> u64 {
    std::env::var("WAYPOINT_CKPT_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12)
}

#[test]
fn crashes_inside_checkpoint_writes_lose_no_acknowledged_update() {
    for seed in 0..seeds() {
        crash_inside("data.waypoint", seed);
    }
}

#[test]
fn crashes_inside_the_metadata_rename_lose_no_acknowledged_update() {
    for seed in 0..seeds() {
        crash_inside("checkpoint.waypoint", seed);
    }
}

#[test]
fn crashes_inside_log_appends_and_pruning_lose_no_acknowledged_update() {
    for seed in 0..seeds() {
        crash_inside(".wal", seed);
    }
}

/// Stage 3 with an archive directory: pruned segments are moved there
/// (never deleted), the log directory stays bounded, and recovery neither
/// needs nor reads the archive.
#[test]
fn pruned_segments_go_to_the_archive_when_one_is_set() {
    let sim = SimStorage::new(9);
    let archived = |sim: &SimStorage| {
        options(sim, CheckpointMode::Continuous).with_per_worker(|o| {
            o.wal_archive_dir = Some("archive".into());
        })
    };
    let db = Database::open("/db", archived(&sim)).unwrap();
    let t = db.create_table("t").unwrap();
    let mut s = db.session();
    let mut i = 0u32;
    while db.stats().persistence.checkpoint.pruned_bytes == 0 {
        let mut tx = s.begin().unwrap();
        tx.upsert(&t, &(i % ROWS).to_be_bytes(), &value(i % ROWS, i))
            .unwrap();
        tx.commit().unwrap();
        i += 1;
        assert!(i < 1_000_000, "nothing was ever pruned");
    }
    // The checkpointer keeps running and counts a prune only after its
    // segments moved, so a listing may run ahead of the counter; compare
    // once both stand still (no commits now, so the floor stops rising).
    let archived_bytes = || {
        let archive = std::path::Path::new("/db/archive");
        let mut segments = Vec::new();
        for dir in waypoint::io::Storage::list_dir(&sim, archive).unwrap() {
            segments.extend(waypoint::io::Storage::list_dir(&sim, &dir).unwrap());
        }
        assert!(!segments.is_empty(), "pruned segments are in the archive");
        segments
            .iter()
            .map(|p| {
                sim.read_current(p).unwrap().len() as u64 - waypoint::logstore::segment::HEADER_SIZE
            })
            .sum::<u64>()
    };
    let (mut bytes, mut pruned) = (0, 0);
    for _ in 0..500 {
        let before = db.stats().persistence.checkpoint.pruned_bytes;
        bytes = archived_bytes();
        pruned = db.stats().persistence.checkpoint.pruned_bytes;
        if before == pruned && bytes == pruned {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(bytes, pruned, "every pruned byte is archived");
    drop((s, t));
    std::mem::forget(db);
    sim.crash(CrashPolicy::DropAll);
    let db = Database::open("/db", archived(&sim)).unwrap();
    let t = db.table("t").unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    let last = i - 1;
    let row = last % ROWS;
    assert_eq!(
        tx.get(&t, &row.to_be_bytes()).unwrap(),
        Some(value(row, last)),
        "the last acknowledged upsert survived"
    );
}

/// Issue 6, corruption detection: a bit flip anywhere in
/// `checkpoint.waypoint` (each of its bits in turn: the floor and the
/// synced positions of the partitions) makes
/// `Database::open` fail with `Corruption` naming that file and an offset
/// inside it, before it changes anything; with the flip undone the same
/// files open and hold every acknowledged row.
#[test]
fn every_bit_flip_in_the_checkpoint_metadata_is_reported_with_file_and_offset() {
    let sim = SimStorage::new(77);
    let opts = || {
        options(&sim, CheckpointMode::Continuous).with_per_worker(|o| {
            o.wal_limit_bytes = 64 << 10;
        })
    };
    let db = Database::open("/db", opts()).unwrap();
    let t = db.create_table("t").unwrap();
    let mut s = db.session();
    let meta = std::path::Path::new("/db/checkpoint.waypoint");
    let mut version = 0;
    // Written at open; until a checkpoint raises the floor (bytes 16..24).
    let floor = |b: Vec<u8>| u64::from_le_bytes(b[16..24].try_into().unwrap());
    while sim.read_durable(meta).map_or(0, floor) == 0 {
        version += 1;
        assert!(version < 200, "no checkpoint raised the floor");
        let mut tx = s.begin().unwrap();
        for r in 0..50u32 {
            tx.upsert(&t, &r.to_be_bytes(), &value(r, version)).unwrap();
        }
        tx.commit().unwrap();
    }
    drop((s, t));
    std::mem::forget(db);
    sim.crash(CrashPolicy::KeepAll);
    let len = sim.read_current(meta).unwrap().len() as u64;
    // The floor, and the synced positions of one partition or more.
    assert!(len >= 48 && (len - 32).is_multiple_of(16), "{len} bytes");
    for byte in 0..len {
        for bit in 0..8 {
            sim.corrupt(meta, byte, 1 << bit).unwrap();
            match Database::open("/db", opts()) {
                Err(waypoint::Error::Corruption { path, offset, .. }) => {
                    assert_eq!(path, meta, "byte {byte} bit {bit}");
                    assert!(offset < len, "byte {byte} bit {bit}: offset {offset}");
                }
                Err(e) => panic!("byte {byte} bit {bit}: {e:?}"),
                Ok(_) => panic!("byte {byte} bit {bit}: a damaged floor was accepted"),
            }
            sim.corrupt(meta, byte, 1 << bit).unwrap();
        }
    }
    let db = Database::open("/db", opts()).unwrap();
    let t = db.table("t").unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    for r in 0..50u32 {
        assert_eq!(
            tx.get(&t, &r.to_be_bytes()).unwrap(),
            Some(value(r, version))
        );
    }
    drop(tx);
    drop((s, t));
    db.close().unwrap();
}
