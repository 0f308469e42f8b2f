//! Issue 26, part 2: an open that finds evidence of lost data refuses with
//! a typed error naming the file that is wrong, changes no file (every
//! file's bytes and the directory listing are compared before and after),
//! and closes nothing cleanly. The evidence:
//! - the log directory of a database that was not closed cleanly is gone;
//! - the checkpoint metadata of such a database is gone;
//! - a log partition ends before the position the checkpoint metadata
//!   records as synced (its last segment was cut);
//! - the data file is empty, or gone while the rest of the database is
//!   there: never a reason to create a new database;
//! - the data file was closed cleanly before the log's records were
//!   written (a data file older than its log);
//! - a crashed database with a log opened without one.
//!
//! And what must still recover: a cut past the recorded synced position
//! (within the log synced since the metadata was last written) is taken
//! for a torn tail, as a crash's lost unsynced bytes are.
//!
//! The databases live on a simulated disk (`SimStorage`): a crash there
//! is a process kill (`CrashPolicy::KeepAll`) that also kills the old
//! instance's handles, so nothing writes behind the test's back.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use waypoint::checkpoint::meta;
use waypoint::db::{DATA_FILE, DOUBLE_WRITE_FILE, NEW_DATA_FILE, WAL_DIR};
use waypoint::io::{CrashPolicy, OpenMode, SimStorage, Storage};
use waypoint::logstore::segment::parse_segment_name;
use waypoint::logstore::segment::HEADER_SIZE;
use waypoint::wal::partition::partition_dir;
use waypoint::LogPos;
use waypoint::{Database, Error, Options, PerWorkerOptions, Persistence, SchemeKind};

const DIR: &str = "/db";
const ROWS: u32 = 300;

fn options(sim: &SimStorage) -> Options {
    Options {
        page_size: Some(4096),
        buffer_pool_bytes: 256 * 4096,
        storage: Some(Arc::new(sim.clone())),
        create_if_missing: false,
        // No spare segments: the first segment after an open gives way to
        // a spare whenever one is ready, and a switch after the synced
        // position is recorded would move the records these tests cut
        // into a segment of their own (a loaded CI machine did it).
        persistence: Persistence::PerWorker(PerWorkerOptions {
            wal_preallocate: false,
            ..PerWorkerOptions::default()
        }),
        ..Options::default()
    }
}

fn dir() -> &'static Path {
    Path::new(DIR)
}

fn key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

fn value(i: u32) -> Vec<u8> {
    let mut v = format!("row {i} ").into_bytes();
    v.resize(200, i as u8);
    v
}

/// Commit rows `from..to` of table `t`, one durable commit each.
fn commit_rows(db: &Database, from: u32, to: u32) {
    let t = db.open_or_create_table("t").unwrap();
    let mut s = db.session();
    for i in from..to {
        let mut tx = s.begin().unwrap();
        tx.upsert(&t, &key(i), &value(i)).unwrap();
        tx.commit().unwrap();
    }
}

/// A database closed cleanly with rows `0..ROWS`.
fn clean_db(seed: u64) -> SimStorage {
    let sim = SimStorage::new(seed);
    let db = Database::open(
        DIR,
        Options {
            create_if_missing: true,
            ..options(&sim)
        },
    )
    .unwrap();
    commit_rows(&db, 0, ROWS);
    db.close().unwrap();
    sim
}

/// A database whose process was killed after rows `0..ROWS` were
/// committed (durably, and recorded as synced in the checkpoint
/// metadata) and rows `ROWS..ROWS + after` after that record.
fn crashed_db(seed: u64, after: u32) -> SimStorage {
    let sim = clean_db(seed);
    let db = Database::open(DIR, options(&sim)).unwrap();
    commit_rows(&db, 0, ROWS);
    db.record_synced_log().unwrap();
    commit_rows(&db, ROWS, ROWS + after);
    // Killed: no clean close, and this instance's threads touch nothing
    // after the crash.
    std::mem::forget(db);
    sim.crash(CrashPolicy::KeepAll);
    sim
}

/// Every file and directory below `path` with its bytes (directories
/// with none), in path order.
fn snapshot(sim: &SimStorage, path: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    match sim.read_current(path) {
        Some(bytes) => out.push((path.to_path_buf(), Some(bytes))),
        None => {
            out.push((path.to_path_buf(), None));
            for child in sim.list_dir(path).unwrap() {
                out.extend(snapshot(sim, &child));
            }
        }
    }
    out
}

/// Open with `options`, expect it refused, and check that nothing changed
/// and the database still says it was not closed cleanly (if it has a
/// data file); returns the error.
fn refused(sim: &SimStorage, options: Options) -> Error {
    let before = snapshot(sim, dir());
    let e = match Database::open(DIR, options) {
        Ok(_) => panic!("the open was not refused"),
        Err(e) => e,
    };
    assert_eq!(
        snapshot(sim, dir()),
        before,
        "the refused open changed files: {e}"
    );
    e
}

/// The superblock's clean flag (page 0, body byte 72).
fn closed_cleanly(sim: &SimStorage) -> bool {
    sim.read_current(&dir().join(DATA_FILE)).unwrap()[72] == 1
}

/// Every row `0..rows` has its value.
fn assert_rows(db: &Database, rows: u32) {
    let t = db.table("t").unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    for i in 0..rows {
        assert_eq!(tx.get(&t, &key(i)).unwrap(), Some(value(i)), "row {i}");
    }
}

#[test]
fn a_crashed_database_without_its_log_directory_is_refused_naming_it() {
    let sim = crashed_db(1, 0);
    sim.remove(&dir().join(WAL_DIR)).unwrap();
    sim.sync_dir(dir()).unwrap();
    for create_if_missing in [false, true] {
        let e = refused(
            &sim,
            Options {
                create_if_missing,
                ..options(&sim)
            },
        );
        match &e {
            Error::MissingFile { path, .. } => assert_eq!(path, &dir().join(WAL_DIR)),
            e => panic!("expected MissingFile naming the log, got {e:?}"),
        }
        assert!(e.to_string().contains("/db/wal is missing"), "{e}");
    }
    assert!(!closed_cleanly(&sim));
}

#[test]
fn a_crashed_database_without_its_checkpoint_metadata_is_refused_naming_it() {
    let sim = crashed_db(2, 0);
    let path = dir().join(meta::META_FILE);
    sim.remove(&path).unwrap();
    sim.sync_dir(dir()).unwrap();
    match refused(&sim, options(&sim)) {
        Error::MissingFile { path: p, .. } => assert_eq!(p, path),
        e => panic!("expected MissingFile naming the checkpoint metadata, got {e:?}"),
    }
    assert!(!closed_cleanly(&sim));
}

/// The last segment of the partition with the largest recorded synced
/// position, with that position and the segment's start.
fn last_synced_segment(sim: &SimStorage) -> (u32, PathBuf, LogPos, LogPos) {
    let m = meta::read(sim, dir()).unwrap().expect("metadata exists");
    let &(partition, synced) = m.synced.iter().max_by_key(|(_, pos)| *pos).unwrap();
    let pdir = partition_dir(&dir().join(WAL_DIR), partition);
    let (start, path) = sim
        .list_dir(&pdir)
        .unwrap()
        .into_iter()
        .filter_map(|p| Some((parse_segment_name(&p)?, p)))
        .max()
        .unwrap();
    assert!(start < synced, "the last segment holds synced records");
    (partition, path, start, synced)
}

/// Cut `path` to `len` bytes, durably.
fn cut(sim: &SimStorage, path: &Path, len: u64) {
    let f = sim.open(path, OpenMode::Existing).unwrap();
    f.set_len(len).unwrap();
    f.sync_data().unwrap();
}

#[test]
fn a_log_cut_before_its_recorded_synced_position_is_refused_naming_segment_and_range() {
    let sim = crashed_db(3, 0);
    let (partition, segment, start, synced) = last_synced_segment(&sim);
    // In the middle of the synced records: a record is cut in two.
    let kept = synced.bytes_since(start) / 2 + 3;
    cut(&sim, &segment, HEADER_SIZE + kept);
    let e = refused(&sim, options(&sim));
    match &e {
        Error::LogTruncated {
            partition: p,
            path,
            expected_end,
            found_end,
        } => {
            assert_eq!((*p, path), (partition, &segment));
            assert_eq!(*expected_end, synced);
            assert!(*found_end <= start.advance(kept), "{e}");
        }
        e => panic!("expected LogTruncated, got {e:?}"),
    }
    assert!(e.to_string().contains(&format!("..{synced}")), "{e}");
    assert!(!closed_cleanly(&sim));
    // The CLI's `recover` and `check` open the same way: without
    // create_if_missing, and with it nothing changes either.
    let e = refused(
        &sim,
        Options {
            create_if_missing: true,
            ..options(&sim)
        },
    );
    assert!(matches!(e, Error::LogTruncated { .. }), "{e:?}");
}

#[test]
fn a_partition_whose_segments_are_all_gone_is_refused_naming_its_directory() {
    let sim = crashed_db(4, 0);
    let (partition, _, _, synced) = last_synced_segment(&sim);
    let pdir = partition_dir(&dir().join(WAL_DIR), partition);
    for file in sim.list_dir(&pdir).unwrap() {
        sim.remove(&file).unwrap();
    }
    sim.sync_dir(&pdir).unwrap();
    match refused(&sim, options(&sim)) {
        Error::LogTruncated {
            path,
            expected_end,
            found_end,
            ..
        } => assert_eq!(
            (path, expected_end, found_end),
            (pdir, synced, LogPos::ZERO)
        ),
        e => panic!("expected LogTruncated, got {e:?}"),
    }
}

/// A file named like a segment for a stream position near 2^64 (no
/// stream gets there) is corruption naming it, not an overflow of the
/// positions recovery computes from its name.
#[test]
fn a_segment_named_beyond_any_stream_is_refused_naming_it() {
    let sim = crashed_db(5, 0);
    let (partition, _, _, _) = last_synced_segment(&sim);
    let pdir = partition_dir(&dir().join(WAL_DIR), partition);
    let far = pdir.join(waypoint::logstore::segment::segment_name(LogPos::new(
        u64::MAX - 100,
    )));
    let f = sim.open(&far, OpenMode::CreateNew).unwrap();
    f.write_at(&[0x5a; 64], 0).unwrap();
    f.sync_data().unwrap();
    sim.sync_dir(&pdir).unwrap();
    match refused(&sim, options(&sim)) {
        Error::Corruption { path, .. } => assert_eq!(path, far),
        e => panic!("expected Corruption, got {e:?}"),
    }
}

/// A segment before the last one cut short: a later record proves the
/// cut bytes were synced (its watermark), so the log is corrupt; the error
/// names that record's segment and where the log ends, in the cut one.
#[test]
fn a_cut_segment_before_the_last_is_reported_with_where_the_log_ends() {
    let sim = SimStorage::new(13);
    let opts = || {
        options(&sim).with_per_worker(|o| {
            o.wal_segment_bytes = 64 << 10;
        })
    };
    let db = Database::open(
        DIR,
        Options {
            create_if_missing: true,
            ..opts()
        },
    )
    .unwrap();
    commit_rows(&db, 0, 3 * ROWS);
    db.record_synced_log().unwrap();
    std::mem::forget(db);
    sim.crash(CrashPolicy::KeepAll);
    let m = meta::read(&sim, dir()).unwrap().unwrap();
    let (partition, _) = *m.synced.iter().max_by_key(|(_, pos)| *pos).unwrap();
    let pdir = partition_dir(&dir().join(WAL_DIR), partition);
    let mut segments: Vec<(LogPos, PathBuf)> = sim
        .list_dir(&pdir)
        .unwrap()
        .into_iter()
        .filter_map(|p| Some((parse_segment_name(&p)?, p)))
        .collect();
    segments.sort();
    assert!(segments.len() >= 2, "{segments:?}");
    let (first_start, first) = segments[0].clone();
    let (second_start, _) = segments[1].clone();
    cut(
        &sim,
        &first,
        HEADER_SIZE + second_start.bytes_since(first_start) / 2,
    );
    match refused(&sim, opts()) {
        Error::Corruption { path, detail, .. } => {
            assert_eq!(path.parent(), Some(pdir.as_path()), "{detail}");
            assert_ne!(path, first, "the proof is in a later segment");
            assert!(
                detail.contains(&format!("in {}", first.display())),
                "{detail}"
            );
        }
        e => panic!("expected Corruption, got {e:?}"),
    }
}

/// The bytes synced after the metadata was last written are the window a
/// cut can hide in: cut there, mid-record, the log reads as a torn tail
/// (as a crash's lost unsynced bytes do) and recovers every row up to the
/// recorded position.
#[test]
fn a_cut_past_the_recorded_synced_position_recovers_as_a_torn_tail() {
    let sim = crashed_db(5, 40);
    let (_, segment, start, synced) = last_synced_segment(&sim);
    let len = sim.read_current(&segment).unwrap().len() as u64;
    assert!(
        len > HEADER_SIZE + synced.bytes_since(start) + 64,
        "rows were logged after the record"
    );
    cut(&sim, &segment, HEADER_SIZE + synced.bytes_since(start) + 20);
    let db = Database::open(DIR, options(&sim)).unwrap();
    let report = db.recovery_report().unwrap().clone();
    assert_eq!(report.torn_tails, 1, "{report:?}");
    assert_rows(&db, ROWS);
    db.close().unwrap();
    assert!(closed_cleanly(&sim));
}

/// The uncut log of the same crash recovers every row, the ones committed
/// after the record too: the refusals above are the cuts', not the
/// crash's.
#[test]
fn the_uncut_log_recovers_every_row() {
    let sim = crashed_db(5, 40);
    let db = Database::open(DIR, options(&sim)).unwrap();
    assert_rows(&db, ROWS + 40);
    db.close().unwrap();
}

#[test]
fn an_empty_data_file_is_never_taken_for_a_new_database() {
    let sim = clean_db(6);
    let path = dir().join(DATA_FILE);
    sim.open(&path, OpenMode::Existing)
        .unwrap()
        .set_len(0)
        .unwrap();
    for create_if_missing in [false, true] {
        match refused(
            &sim,
            Options {
                create_if_missing,
                ..options(&sim)
            },
        ) {
            Error::NotADatabase { path: p } => assert_eq!(p, path),
            e => panic!("expected NotADatabase, got {e:?}"),
        }
    }
    // A short one neither.
    let f = sim.open(&path, OpenMode::Existing).unwrap();
    f.write_at(&[0; 100], 0).unwrap();
    assert!(matches!(
        refused(&sim, options(&sim)),
        Error::NotADatabase { .. }
    ));
}

#[test]
fn the_rest_of_a_database_without_its_data_file_is_refused_naming_the_data_file() {
    // Closed cleanly (the double-write file and the metadata stay), and
    // crashed (the log too).
    for sim in [clean_db(7), crashed_db(8, 0)] {
        let path = dir().join(DATA_FILE);
        sim.remove(&path).unwrap();
        sim.sync_dir(dir()).unwrap();
        for create_if_missing in [false, true] {
            match refused(
                &sim,
                Options {
                    create_if_missing,
                    ..options(&sim)
                },
            ) {
                Error::MissingFile { path: p, .. } => assert_eq!(p, path),
                e => panic!("expected MissingFile naming the data file, got {e:?}"),
            }
        }
        assert!(!sim.exists(&dir().join(NEW_DATA_FILE)));
    }
    // Any one of the other files is enough.
    let sim = SimStorage::new(9);
    sim.create_dir_all(dir()).unwrap();
    sim.open(&dir().join(DOUBLE_WRITE_FILE), OpenMode::CreateNew)
        .unwrap();
    assert!(matches!(
        refused(
            &sim,
            Options {
                create_if_missing: true,
                ..options(&sim)
            }
        ),
        Error::MissingFile { .. }
    ));
}

/// A copy of a cleanly closed data file put back after the database was
/// opened and written again: its log holds records the data file's floor
/// says it has, but it does not.
#[test]
fn a_data_file_older_than_its_log_is_refused_naming_it() {
    let sim = clean_db(10);
    let path = dir().join(DATA_FILE);
    let old = sim.read_current(&path).unwrap();
    let db = Database::open(DIR, options(&sim)).unwrap();
    commit_rows(&db, 0, 50);
    std::mem::forget(db);
    sim.crash(CrashPolicy::KeepAll);
    let f = sim.open(&path, OpenMode::Existing).unwrap();
    f.set_len(0).unwrap();
    f.write_at(&old, 0).unwrap();
    f.sync_data().unwrap();
    match refused(&sim, options(&sim)) {
        Error::Mismatch { path: p, detail } => {
            assert_eq!(p, path);
            assert!(detail.contains("older than the log"), "{detail}");
        }
        e => panic!("expected Mismatch naming the data file, got {e:?}"),
    }
}

#[test]
fn a_crashed_database_with_a_log_is_not_opened_without_one() {
    let sim = crashed_db(11, 0);
    match refused(
        &sim,
        Options {
            persistence: Persistence::None,
            ..options(&sim)
        },
    ) {
        Error::RecoveryNeeded { path, scheme } => {
            assert_eq!(path, dir().join(DATA_FILE));
            assert_eq!(scheme, SchemeKind::PerWorker);
        }
        e => panic!("expected RecoveryNeeded, got {e:?}"),
    }
    // With the log it recovers.
    let db = Database::open(DIR, options(&sim)).unwrap();
    assert_rows(&db, ROWS);
    db.close().unwrap();
}

/// A crash while a new database is created leaves no data file (or an
/// empty database): the next open creates it again.
#[test]
fn a_crash_while_creating_leaves_nothing_a_new_open_refuses() {
    for at in 1..40 {
        let sim = SimStorage::new(12);
        sim.inject(waypoint::io::Fault::at(at, waypoint::io::FaultKind::Freeze));
        let first = Database::open(
            DIR,
            Options {
                create_if_missing: true,
                ..options(&sim)
            },
        );
        if let Ok(db) = first {
            std::mem::forget(db);
        }
        sim.clear_faults();
        sim.crash(CrashPolicy::Random {
            keep: 0.5,
            tear: true,
        });
        let db = Database::open(
            DIR,
            Options {
                create_if_missing: true,
                ..options(&sim)
            },
        )
        .unwrap_or_else(|e| panic!("crash at op {at}: {e}"));
        commit_rows(&db, 0, 3);
        db.close().unwrap();
    }
}
