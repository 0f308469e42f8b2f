//! The persistence seam from the outside: a database runs the scheme its
//! options name (`Options::persistence`), reports it, records it in the
//! superblock, and refuses to be misread by another scheme.
//!
//! The `none` scheme (`persist/none.rs`) is the smallest scheme behind the
//! seam: its own file, one `Persistence` variant and one match arm in
//! `db::open`, no code in `txn`, `btree` or `buffer`.

use std::sync::Arc;
use waypoint::db::{Superblock, DATA_FILE, WAL_DIR};
use waypoint::io::{OpenMode, SimStorage, Storage};
use waypoint::{Database, Error, Options, Persistence, SchemeKind};

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

fn superblock(sim: &SimStorage) -> Superblock {
    let file = sim
        .open(
            &std::path::Path::new(DIR).join(DATA_FILE),
            OpenMode::ReadOnly,
        )
        .unwrap();
    Superblock::read(file.as_ref()).unwrap()
}

fn recorded_scheme(sim: &SimStorage) -> Option<SchemeKind> {
    superblock(sim).scheme
}

fn fill(db: &Database, rows: u32) {
    let t = db.open_or_create_table("t").unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    for i in 0..rows {
        tx.upsert(&t, &i.to_be_bytes(), &[i as u8; 100]).unwrap();
    }
    tx.commit().unwrap();
}

fn count(db: &Database) -> usize {
    let t = db.table("t").unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    tx.scan(&t, .., usize::MAX).unwrap().len()
}

#[test]
fn the_none_scheme_runs_through_the_seam_with_no_log() {
    let sim = SimStorage::new(1);
    let db = Database::open(DIR, options(&sim, Persistence::None)).unwrap();
    assert_eq!(db.scheme(), SchemeKind::None);
    fill(&db, 500);
    let stats = db.stats();
    assert_eq!(stats.persistence.scheme, SchemeKind::None);
    assert_eq!(stats.persistence.log.appended_bytes, 0);
    assert!(db.recovery_report().is_none());
    assert!(db.wal().is_none());
    assert!(!sim.exists(&std::path::Path::new(DIR).join(WAL_DIR)));
    db.close().unwrap();
    assert_eq!(recorded_scheme(&sim), Some(SchemeKind::None));
    let db = Database::open(DIR, options(&sim, Persistence::None)).unwrap();
    assert_eq!(count(&db), 500);
}

/// A cleanly closed database is its data file under both schemes, so it
/// may switch between them; the superblock follows.
#[test]
fn a_cleanly_closed_database_switches_between_none_and_per_worker() {
    let sim = SimStorage::new(2);
    let db = Database::open(DIR, options(&sim, Persistence::default())).unwrap();
    fill(&db, 300);
    db.close().unwrap();
    assert_eq!(recorded_scheme(&sim), Some(SchemeKind::PerWorker));
    let floor = superblock(&sim).log_floor;
    assert!(
        floor > waypoint::Gsn::ZERO,
        "the per-worker close records its floor"
    );

    let db = Database::open(DIR, options(&sim, Persistence::None)).unwrap();
    assert_eq!(count(&db), 300);
    fill(&db, 400);
    db.close().unwrap();
    assert_eq!(recorded_scheme(&sim), Some(SchemeKind::None));
    // Nothing was logged: the floor (above every page's GSN) is kept, so
    // the per-worker scheme's next GSNs and redo start above it.
    assert_eq!(superblock(&sim).log_floor, floor);

    let db = Database::open(DIR, options(&sim, Persistence::default())).unwrap();
    assert_eq!(db.scheme(), SchemeKind::PerWorker);
    assert_eq!(count(&db), 400);
}

/// Left open by the per-worker scheme, the database needs that scheme's
/// recovery: another scheme is refused, naming the one to use, and the
/// files stay as they were.
#[test]
fn a_database_left_open_by_the_per_worker_scheme_is_refused_by_another() {
    let sim = SimStorage::new(3);
    let db = Database::open(DIR, options(&sim, Persistence::default())).unwrap();
    fill(&db, 200);
    // Running: the superblock names the scheme that left it open.
    assert_eq!(recorded_scheme(&sim), Some(SchemeKind::PerWorker));
    std::mem::forget(db);
    sim.crash(waypoint::io::CrashPolicy::KeepAll);
    match Database::open(DIR, options(&sim, Persistence::None)) {
        Err(Error::RecoveryNeeded { scheme, .. }) => assert_eq!(scheme, SchemeKind::PerWorker),
        r => panic!("expected RecoveryNeeded, got {r:?}"),
    }
    let db = Database::open(DIR, options(&sim, Persistence::default())).unwrap();
    assert_eq!(count(&db), 200);
}

fn data_file_bytes(sim: &SimStorage) -> Vec<u8> {
    sim.read_current(&std::path::Path::new(DIR).join(DATA_FILE))
        .unwrap()
}

/// Under `none`, a crash before the first page write since the open
/// leaves the last clean close's data file, still marked clean: the
/// reopen reads it, without the changes made since (lost by design).
#[test]
fn a_none_crash_before_any_page_write_reopens_the_last_clean_state() {
    let sim = SimStorage::new(4);
    let db = Database::open(DIR, options(&sim, Persistence::None)).unwrap();
    fill(&db, 100);
    db.close().unwrap();
    let closed = data_file_bytes(&sim);
    let db = Database::open(DIR, options(&sim, Persistence::None)).unwrap();
    fill(&db, 150);
    // The changes fit the pool: nothing written, not even the superblock.
    assert!(superblock(&sim).clean);
    assert_eq!(data_file_bytes(&sim), closed);
    std::mem::forget(db);
    sim.crash(waypoint::io::CrashPolicy::KeepAll);
    let db = Database::open(DIR, options(&sim, Persistence::None)).unwrap();
    assert_eq!(count(&db), 100);
}

/// Once `none` has written a page, its data file may be a torn mix of
/// states: after a crash every scheme refuses it with `NotRecoverable`
/// (the per-worker scheme has no log to repair it from), and the refused
/// opens change nothing.
#[test]
fn a_none_crash_after_page_writes_is_refused_not_misread() {
    let sim = SimStorage::new(5);
    let small_pool = |persistence| Options {
        buffer_pool_bytes: 16 * 4096,
        ..options(&sim, persistence)
    };
    let db = Database::open(DIR, small_pool(Persistence::None)).unwrap();
    let t = db.create_table("t").unwrap();
    let mut s = db.session();
    for batch in 0..20u32 {
        let mut tx = s.begin().unwrap();
        for i in 0..100u32 {
            let key = (batch * 100 + i).to_be_bytes();
            tx.insert(&t, &key, &[7; 200]).unwrap();
        }
        tx.commit().unwrap();
    }
    // 2,000 rows of 200 bytes outgrow 16 frames: pages were evicted, and
    // the unclean mark went first.
    let sb = superblock(&sim);
    assert!(!sb.clean);
    assert_eq!(sb.scheme, Some(SchemeKind::None));
    drop(s);
    std::mem::forget(db);
    sim.crash(waypoint::io::CrashPolicy::KeepAll);
    let before = data_file_bytes(&sim);
    for persistence in [Persistence::None, Persistence::default()] {
        match Database::open(DIR, small_pool(persistence)) {
            Err(Error::NotRecoverable { scheme, .. }) => assert_eq!(scheme, SchemeKind::None),
            r => panic!("expected NotRecoverable, got {r:?}"),
        }
        assert_eq!(data_file_bytes(&sim), before);
    }
}

/// A `none` open that changes nothing writes nothing, not even at its
/// close: a crash inside that close cannot cost the clean state.
#[test]
fn a_none_open_and_close_without_changes_writes_nothing() {
    let sim = SimStorage::new(6);
    let db = Database::open(DIR, options(&sim, Persistence::None)).unwrap();
    fill(&db, 100);
    db.close().unwrap();
    let closed = data_file_bytes(&sim);
    let db = Database::open(DIR, options(&sim, Persistence::None)).unwrap();
    assert_eq!(count(&db), 100);
    sim.inject(waypoint::io::Fault::at(
        sim.op_count(),
        waypoint::io::FaultKind::Freeze,
    ));
    db.close().unwrap();
    sim.clear_faults();
    sim.crash(waypoint::io::CrashPolicy::DropAll);
    assert_eq!(data_file_bytes(&sim), closed);
    let db = Database::open(DIR, options(&sim, Persistence::None)).unwrap();
    assert_eq!(count(&db), 100);
}
