//! One test per typed error of the public API, plus bad input that must
//! not panic.
//!
//! Not tested: `Error::TransactionFinished`. `commit` and `abort` take the
//! transaction by value and dropping it ends it, so no public call can reach
//! a finished transaction (the check in `Transaction::check_active` is
//! defensive). `Error::BufferPoolExhausted` needs every frame pinned for 10 s,
//! which the API does not let a caller arrange.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use waypoint::buffer::page;
use waypoint::db::{DATA_FILE, DB_FORMAT_VERSION};
use waypoint::io::{Fault, FaultKind, SimStorage};
use waypoint::{Database, Error, IoOp, KeyExtractor, Options, Table};

const PAGE_SIZE: usize = 4096;

fn sim_options(sim: &SimStorage, frames: usize) -> Options {
    Options {
        page_size: Some(PAGE_SIZE),
        buffer_pool_bytes: frames * PAGE_SIZE,
        storage: Some(Arc::new(sim.clone())),
        ..Options::default()
    }
}

fn real_options() -> Options {
    Options {
        page_size: Some(PAGE_SIZE),
        buffer_pool_bytes: 64 * PAGE_SIZE,
        ..Options::default()
    }
}

fn sim_db() -> (SimStorage, Database) {
    let sim = SimStorage::new(1);
    let db = Database::open("/db", sim_options(&sim, 64)).unwrap();
    (sim, db)
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: usize, len: usize) -> Vec<u8> {
    let mut v = format!("value {i} ").into_bytes();
    v.resize(len, (i % 251) as u8);
    v
}

fn put(db: &Database, t: &Table, rows: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>) {
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    for (k, v) in rows {
        tx.upsert(t, &k, &v).unwrap();
    }
    tx.commit().unwrap();
}

fn read_all(db: &Database, t: &Table) -> waypoint::Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut s = db.session();
    let mut tx = s.begin()?;
    let rows = tx.scan(t, .., usize::MAX)?;
    tx.commit()?;
    Ok(rows)
}

fn get(db: &Database, t: &Table, k: &[u8]) -> Option<Vec<u8>> {
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    tx.get(t, k).unwrap()
}

// ---------------------------------------------------------------------
// Conflict
// ---------------------------------------------------------------------

/// Two interleaved read-modify-write transactions on one key: the first to
/// commit wins, the second gets a retryable `Conflict` and changes nothing.
#[test]
fn conflict_on_interleaved_writes_is_retryable_and_changes_nothing() {
    let (_sim, db) = sim_db();
    let t = db.create_table("t").unwrap();
    put(&db, &t, [(b"k".to_vec(), b"0".to_vec())]);
    let (mut s1, mut s2) = (db.session(), db.session());
    let mut t1 = s1.begin().unwrap();
    let mut t2 = s2.begin().unwrap();
    assert_eq!(t1.get(&t, b"k").unwrap(), Some(b"0".to_vec()));
    assert_eq!(t2.get(&t, b"k").unwrap(), Some(b"0".to_vec()));
    t1.update(&t, b"k", b"1").unwrap();
    t2.update(&t, b"k", b"2").unwrap();
    t2.upsert(&t, b"other", b"from t2").unwrap();
    t1.commit().unwrap();
    let e = t2.commit().unwrap_err();
    assert!(matches!(e, Error::Conflict), "{e:?}");
    assert!(e.is_retryable());
    assert!(!e.is_io());
    assert_eq!(get(&db, &t, b"k"), Some(b"1".to_vec()));
    assert_eq!(
        get(&db, &t, b"other"),
        None,
        "the conflicted commit left a trace"
    );

    // A read-only transaction whose read changed conflicts too.
    let mut t3 = s2.begin().unwrap();
    assert_eq!(t3.get(&t, b"k").unwrap(), Some(b"1".to_vec()));
    put(&db, &t, [(b"k".to_vec(), b"3".to_vec())]);
    assert!(matches!(t3.commit(), Err(Error::Conflict)));

    // A scan is protected against phantoms: an insert into the scanned
    // range by a concurrent commit makes the scanner conflict.
    let mut t4 = s1.begin().unwrap();
    let seen = t4
        .scan(&t, b"a".as_slice()..b"z".as_slice(), usize::MAX)
        .unwrap();
    t4.upsert(&t, b"summary", &(seen.len() as u32).to_le_bytes())
        .unwrap();
    put(&db, &t, [(b"m-phantom".to_vec(), b"!".to_vec())]);
    assert!(matches!(t4.commit(), Err(Error::Conflict)));
    assert_eq!(get(&db, &t, b"summary"), None);

    let counts = db.check_integrity().unwrap();
    assert!(counts.contains(&("t".to_string(), 2)), "{counts:?}");
    drop((s1, s2));
    db.close().unwrap();
}

/// `Session::run` retries a conflicted body and stops after `max_attempts`.
#[test]
fn session_run_retries_conflicts_up_to_max_attempts() {
    let (_sim, db) = sim_db();
    let t = db.create_table("t").unwrap();
    put(&db, &t, [(b"n".to_vec(), 0u64.to_le_bytes().to_vec())]);
    let mut s = db.session();
    let mut other = db.session();
    let mut attempts = 0;
    // Attempt 1 reads n, then another session changes n before the commit.
    let result = s.run(5, |tx| {
        attempts += 1;
        let n = u64::from_le_bytes(tx.get(&t, b"n")?.unwrap().try_into().unwrap());
        if attempts == 1 {
            let mut o = other.begin()?;
            o.update(&t, b"n", &100u64.to_le_bytes())?;
            o.commit()?;
        }
        tx.update(&t, b"n", &(n + 1).to_le_bytes())?;
        Ok(n + 1)
    });
    assert_eq!(result.unwrap(), 101);
    assert_eq!(attempts, 2);
    assert_eq!(get(&db, &t, b"n"), Some(101u64.to_le_bytes().to_vec()));

    // A body that always conflicts: Conflict after exactly max_attempts.
    let mut attempts = 0;
    let result = s.run(3, |tx| {
        attempts += 1;
        tx.get(&t, b"n")?;
        let mut o = other.begin()?;
        o.upsert(&t, b"n", &[attempts as u8])?;
        o.commit()?;
        tx.upsert(&t, b"x", b"x")
    });
    assert!(matches!(result, Err(Error::Conflict)), "{result:?}");
    assert_eq!(attempts, 3);
    assert_eq!(get(&db, &t, b"x"), None);

    // Errors other than Conflict are not retried.
    let mut attempts = 0;
    let result = s.run(10, |tx| {
        attempts += 1;
        tx.insert(&t, b"n", b"dup")
    });
    assert!(matches!(result, Err(Error::KeyExists)));
    assert_eq!(attempts, 1);
    drop((s, other));
    db.close().unwrap();
}

// ---------------------------------------------------------------------
// Sizes
// ---------------------------------------------------------------------

#[test]
fn key_too_large_is_refused_and_the_maximum_works() {
    let sim = SimStorage::new(2);
    let db = Database::open("/db", sim_options(&sim, 32)).unwrap();
    let t = db.create_table("t").unwrap();
    let max = db.max_key_len();
    assert_eq!(max, PAGE_SIZE / 16);
    let too_long = vec![b'k'; max + 1];
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    let check = |r: waypoint::Result<()>, what: &str| match r {
        Err(Error::KeyTooLarge { len, max: m }) => {
            assert_eq!((len, m), (max + 1, max), "{what}");
        }
        other => panic!("{what}: expected KeyTooLarge, got {other:?}"),
    };
    check(tx.insert(&t, &too_long, b"v"), "insert");
    check(tx.update(&t, &too_long, b"v"), "update");
    check(tx.upsert(&t, &too_long, b"v"), "upsert");
    check(tx.delete(&t, &too_long).map(|_| ()), "delete");
    // Reading with an oversized key is no error: there is no such key.
    assert_eq!(tx.get(&t, &too_long).unwrap(), None);
    tx.commit().unwrap();
    assert_eq!(read_all(&db, &t).unwrap(), vec![]);

    // Many records with maximum keys and values: splits of full nodes.
    let max_value = db.max_value_len();
    let rows: BTreeMap<Vec<u8>, Vec<u8>> = (0..60)
        .map(|i| {
            let mut k = format!("{i:03}").into_bytes();
            k.resize(max, b'k');
            (k, value(i, max_value))
        })
        .collect();
    put(&db, &t, rows.clone());
    drop(s);
    db.close().unwrap();
    let db = Database::open("/db", sim_options(&sim, 32)).unwrap();
    let t = db.table("t").unwrap();
    let got: BTreeMap<_, _> = read_all(&db, &t).unwrap().into_iter().collect();
    assert_eq!(got, rows);
    assert!(db
        .check_integrity()
        .unwrap()
        .contains(&("t".to_string(), 60)));
    db.close().unwrap();
}

#[test]
fn value_too_large_is_refused_and_the_maximum_works() {
    let (_sim, db) = sim_db();
    let t = db.create_table("t").unwrap();
    let max = db.max_value_len();
    assert!(max >= PAGE_SIZE / 8, "max value {max}");
    let too_long = vec![7u8; max + 1];
    put(&db, &t, [(b"exists".to_vec(), b"small".to_vec())]);
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    for (what, r) in [
        ("insert", tx.insert(&t, b"new", &too_long)),
        ("update", tx.update(&t, b"exists", &too_long)),
        ("upsert", tx.upsert(&t, b"exists", &too_long)),
    ] {
        match r {
            Err(Error::ValueTooLarge { len, max: m }) => assert_eq!((len, m), (max + 1, max)),
            other => panic!("{what}: expected ValueTooLarge, got {other:?}"),
        }
    }
    tx.insert(&t, b"new", &vec![1u8; max]).unwrap();
    tx.update(&t, b"exists", &vec![2u8; max]).unwrap();
    tx.commit().unwrap();
    assert_eq!(get(&db, &t, b"new"), Some(vec![1u8; max]));
    assert_eq!(get(&db, &t, b"exists"), Some(vec![2u8; max]));
    drop(s);
    db.close().unwrap();
}

// ---------------------------------------------------------------------
// Keys present and absent
// ---------------------------------------------------------------------

#[test]
fn key_exists_and_key_not_found() {
    let (_sim, db) = sim_db();
    let t = db.create_table("t").unwrap();
    put(&db, &t, [(b"a".to_vec(), b"1".to_vec())]);
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    assert!(matches!(tx.insert(&t, b"a", b"2"), Err(Error::KeyExists)));
    tx.insert(&t, b"b", b"1").unwrap();
    assert!(
        matches!(tx.insert(&t, b"b", b"2"), Err(Error::KeyExists)),
        "own insert"
    );
    assert!(matches!(tx.update(&t, b"c", b"1"), Err(Error::KeyNotFound)));
    assert!(tx.delete(&t, b"a").unwrap());
    assert!(
        matches!(tx.update(&t, b"a", b"1"), Err(Error::KeyNotFound)),
        "own delete"
    );
    assert!(!tx.delete(&t, b"a").unwrap());
    assert!(!tx.delete(&t, b"never").unwrap());
    // Failed calls do not end or poison the transaction.
    tx.commit().unwrap();
    assert_eq!(get(&db, &t, b"a"), None);
    assert_eq!(get(&db, &t, b"b"), Some(b"1".to_vec()));
    drop(s);
    db.close().unwrap();
}

// ---------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------

fn first_byte() -> KeyExtractor {
    Arc::new(|_k: &[u8], v: &[u8]| v.first().map(|b| vec![*b]))
}

#[test]
fn unknown_table() {
    let (_sim, db) = sim_db();
    let expect = |r: waypoint::Result<()>, what: &str| match r {
        Err(Error::UnknownTable { name }) => assert_eq!(name, "nope", "{what}"),
        other => panic!("{what}: expected UnknownTable, got {other:?}"),
    };
    expect(db.table("nope").map(|_| ()), "table");
    expect(db.drop_table("nope"), "drop_table");
    expect(
        db.open_index("nope", first_byte()).map(|_| ()),
        "open_index",
    );
    expect(db.drop_index("nope"), "drop_index");
    // A table is not an index and vice versa.
    let t = db.create_table("t").unwrap();
    db.create_index(&t, "i", first_byte()).unwrap();
    assert!(matches!(
        db.open_index("t", first_byte()),
        Err(Error::UnknownTable { .. })
    ));
    assert!(matches!(db.table("i"), Err(Error::UnknownTable { .. })));
    db.close().unwrap();
}

#[test]
fn table_exists() {
    let (_sim, db) = sim_db();
    let t = db.create_table("t").unwrap();
    db.create_index(&t, "i", first_byte()).unwrap();
    for (what, r) in [
        ("table twice", db.create_table("t").map(|_| ())),
        (
            "table named like an index",
            db.create_table("i").map(|_| ()),
        ),
        (
            "index named like a table",
            db.create_index(&t, "t", first_byte()).map(|_| ()),
        ),
        (
            "index twice",
            db.create_index(&t, "i", first_byte()).map(|_| ()),
        ),
    ] {
        match r {
            Err(Error::TableExists { name }) => assert!(name == "t" || name == "i"),
            other => panic!("{what}: expected TableExists, got {other:?}"),
        }
    }
    // open_or_create_table returns the existing table.
    put(&db, &t, [(b"k".to_vec(), b"v".to_vec())]);
    let again = db.open_or_create_table("t").unwrap();
    assert_eq!(again.id(), t.id());
    assert_eq!(get(&db, &again, b"k"), Some(b"v".to_vec()));
    assert_eq!(db.table_names(), vec!["t".to_string()]);
    assert_eq!(db.index_names(), vec!["i".to_string()]);
    db.close().unwrap();
}

#[test]
fn invalid_name() {
    let (_sim, db) = sim_db();
    let long = "x".repeat(256);
    for bad in ["", long.as_str(), "tab\nle", "nul\0"] {
        match db.create_table(bad) {
            Err(Error::InvalidName { reason, .. }) => assert!(!reason.is_empty()),
            other => panic!("create_table({bad:?}): expected InvalidName, got {other:?}"),
        }
    }
    let t = db
        .create_table(&"y".repeat(255))
        .expect("255 bytes is allowed");
    assert!(matches!(
        db.create_index(&t, "", first_byte()),
        Err(Error::InvalidName { .. })
    ));
    db.create_table("名前 with spaces")
        .expect("any UTF-8 without control characters");
    assert_eq!(db.table_names().len(), 2);
    db.close().unwrap();
}

// ---------------------------------------------------------------------
// Indexes not bound after reopen
// ---------------------------------------------------------------------

#[test]
fn index_not_bound_after_reopen_refuses_writes_until_open_index() {
    let sim = SimStorage::new(3);
    let db = Database::open("/db", sim_options(&sim, 64)).unwrap();
    let t = db.create_table("t").unwrap();
    db.create_table("other").unwrap();
    db.create_index(&t, "by_first", first_byte()).unwrap();
    put(
        &db,
        &t,
        [
            (b"a".to_vec(), b"x1".to_vec()),
            (b"b".to_vec(), b"y1".to_vec()),
        ],
    );
    db.close().unwrap();

    let db = Database::open("/db", sim_options(&sim, 64)).unwrap();
    let t = db.table("t").unwrap();
    let other = db.table("other").unwrap();
    // Reads are allowed.
    assert_eq!(get(&db, &t, b"a"), Some(b"x1".to_vec()));
    let mut s = db.session();
    // A write to the table fails at commit, with the names, and the whole
    // transaction (including its write to another table) is not applied.
    let mut tx = s.begin().unwrap();
    tx.update(&t, b"a", b"z2").unwrap();
    tx.insert(&t, b"c", b"z3").unwrap();
    tx.upsert(&other, b"o", b"1").unwrap();
    match tx.commit() {
        Err(Error::IndexNotBound { table, index }) => {
            assert_eq!((table.as_str(), index.as_str()), ("t", "by_first"));
        }
        r => panic!("expected IndexNotBound, got {r:?}"),
    }
    assert_eq!(get(&db, &t, b"a"), Some(b"x1".to_vec()));
    assert_eq!(get(&db, &t, b"c"), None);
    assert_eq!(get(&db, &other, b"o"), None);
    // Deletes too.
    let mut tx = s.begin().unwrap();
    assert!(tx.delete(&t, b"b").unwrap());
    assert!(matches!(tx.commit(), Err(Error::IndexNotBound { .. })));
    assert_eq!(get(&db, &t, b"b"), Some(b"y1".to_vec()));
    // Other tables are writable.
    put(&db, &other, [(b"o".to_vec(), b"2".to_vec())]);
    let counts = db.check_integrity().unwrap();
    assert!(counts.contains(&("t".to_string(), 2)), "{counts:?}");
    assert!(counts.contains(&("by_first".to_string(), 2)), "{counts:?}");

    // Bound: writes work and maintain the index.
    let idx = db.open_index("by_first", first_byte()).unwrap();
    assert_eq!(idx.table_name(), "t");
    let mut tx = s.begin().unwrap();
    tx.update(&t, b"a", b"z2").unwrap();
    tx.insert(&t, b"c", b"z3").unwrap();
    tx.commit().unwrap();
    let mut tx = s.begin().unwrap();
    let entries: Vec<(Vec<u8>, Vec<u8>)> = tx
        .index_scan(&idx, .., usize::MAX, false)
        .unwrap()
        .into_iter()
        .map(|e| (e.secondary, e.primary))
        .collect();
    assert_eq!(
        entries,
        vec![
            (b"y".to_vec(), b"b".to_vec()),
            (b"z".to_vec(), b"a".to_vec()),
            (b"z".to_vec(), b"c".to_vec()),
        ]
    );
    drop(tx);
    drop(s);
    db.close().unwrap();
}

// ---------------------------------------------------------------------
// Dropped tables
// ---------------------------------------------------------------------

#[test]
fn table_dropped_handles_fail_and_pending_writes_are_refused() {
    let (_sim, db) = sim_db();
    let t = db.create_table("t").unwrap();
    let keep = db.create_table("keep").unwrap();
    let idx = db.create_index(&t, "t_idx", first_byte()).unwrap();
    put(&db, &t, (0..100).map(|i| (key(i), value(i, 200))));
    let mut s = db.session();

    // A transaction with pending writes to t and keep, and a read of t.
    let mut s2 = db.session();
    let mut pending = s2.begin().unwrap();
    pending.get(&t, &key(1)).unwrap();
    pending.upsert(&keep, b"k", b"v").unwrap();
    pending.upsert(&t, &key(2), b"new").unwrap();

    db.drop_table("t").unwrap();
    assert_eq!(db.table_names(), vec!["keep".to_string()]);
    assert!(
        db.index_names().is_empty(),
        "the table's index is dropped with it"
    );

    match pending.commit() {
        Err(Error::TableDropped) => {}
        r => panic!("commit with writes to a dropped table: {r:?}"),
    }
    assert_eq!(
        get(&db, &keep, b"k"),
        None,
        "the failed commit was not atomic"
    );

    let mut tx = s.begin().unwrap();
    let k = key(1);
    let results: Vec<(&str, waypoint::Result<()>)> = vec![
        ("get", tx.get(&t, &k).map(|_| ())),
        ("insert", tx.insert(&t, b"x", b"v")),
        ("update", tx.update(&t, &k, b"v")),
        ("upsert", tx.upsert(&t, &k, b"v")),
        ("delete", tx.delete(&t, &k).map(|_| ())),
        ("scan", tx.scan(&t, .., 10).map(|_| ())),
        ("scan_rev", tx.scan_rev(&t, .., 10).map(|_| ())),
        ("scan_prefix", tx.scan_prefix(&t, b"key", 10).map(|_| ())),
        ("index_scan", tx.index_scan(&idx, .., 10, false).map(|_| ())),
    ];
    for (what, r) in results {
        assert!(matches!(r, Err(Error::TableDropped)), "{what}: {r:?}");
    }
    tx.commit().unwrap();

    // The name can be reused; the new table is empty and the old handle
    // stays dropped.
    let t2 = db.create_table("t").unwrap();
    assert_ne!(t2.id(), t.id());
    assert_eq!(read_all(&db, &t2).unwrap(), vec![]);
    assert!(matches!(read_all(&db, &t), Err(Error::TableDropped)));
    put(&db, &t2, [(b"fresh".to_vec(), b"1".to_vec())]);
    let counts = db.check_integrity().unwrap();
    assert!(counts.contains(&("t".to_string(), 1)), "{counts:?}");
    drop((s, s2));
    db.close().unwrap();
}

// ---------------------------------------------------------------------
// Closed
// ---------------------------------------------------------------------

#[test]
fn closed_database_refuses_every_call() {
    let sim = SimStorage::new(4);
    let db = Database::open("/db", sim_options(&sim, 64)).unwrap();
    let t = db.create_table("t").unwrap();
    put(&db, &t, [(b"a".to_vec(), b"1".to_vec())]);
    let clone = db.clone();
    let mut s = db.session();
    let mut s_open = db.session();
    let mut open_tx = s_open.begin().unwrap();
    open_tx.upsert(&t, b"b", b"2").unwrap();

    db.close().unwrap();

    assert!(
        matches!(s.begin(), Err(Error::Closed)),
        "session after close"
    );
    assert!(matches!(open_tx.get(&t, b"a"), Err(Error::Closed)));
    assert!(matches!(open_tx.upsert(&t, b"c", b"3"), Err(Error::Closed)));
    assert!(matches!(open_tx.scan(&t, .., 10), Err(Error::Closed)));
    assert!(matches!(open_tx.commit(), Err(Error::Closed)));
    assert!(matches!(clone.table("t"), Err(Error::Closed)));
    assert!(matches!(clone.create_table("u"), Err(Error::Closed)));
    assert!(matches!(clone.drop_table("t"), Err(Error::Closed)));
    assert!(matches!(
        clone.open_index("x", first_byte()),
        Err(Error::Closed)
    ));
    assert!(matches!(clone.check_integrity(), Err(Error::Closed)));
    assert!(matches!(clone.session().begin(), Err(Error::Closed)));
    clone.close().expect("closing again is a no-op");
    drop((s, s_open));

    let db = Database::open("/db", sim_options(&sim, 64)).unwrap();
    let t = db.table("t").unwrap();
    assert_eq!(
        read_all(&db, &t).unwrap(),
        vec![(b"a".to_vec(), b"1".to_vec())],
        "the transaction refused after close left no trace"
    );
    db.close().unwrap();
}

// ---------------------------------------------------------------------
// Opening: not a database, format version, page size, options
// ---------------------------------------------------------------------

#[test]
fn not_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(DATA_FILE);
    let expect = |what: &str| match Database::open(dir.path(), real_options()) {
        Err(Error::NotADatabase { path: p }) => assert_eq!(p, path, "{what}"),
        r => panic!("{what}: expected NotADatabase, got {r:?}"),
    };
    std::fs::write(&path, b"hello, I am not a database").unwrap();
    expect("short garbage");
    let garbage: Vec<u8> = (0..3 * PAGE_SIZE).map(|i| (i * 7 + 3) as u8).collect();
    std::fs::write(&path, &garbage).unwrap();
    expect("pages of garbage");
    let mut sqlite_like = b"SQLite format 3\0".to_vec();
    sqlite_like.resize(PAGE_SIZE, 0);
    std::fs::write(&path, &sqlite_like).unwrap();
    expect("another engine's file");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        sqlite_like,
        "the file was modified"
    );

    // A missing database without create_if_missing.
    let empty = tempfile::tempdir().unwrap();
    let r = Database::open(
        empty.path(),
        Options {
            create_if_missing: false,
            ..real_options()
        },
    );
    match r {
        Err(Error::NotADatabase { path }) => assert_eq!(path, empty.path().join(DATA_FILE)),
        r => panic!("expected NotADatabase, got {r:?}"),
    }
    assert!(!empty.path().join(DATA_FILE).exists());
}

fn make_db(dir: &Path) {
    let db = Database::open(dir, real_options()).unwrap();
    let t = db.create_table("t").unwrap();
    put(&db, &t, (0..50).map(|i| (key(i), value(i, 100))));
    db.close().unwrap();
}

fn check_db(dir: &Path) {
    let db = Database::open(dir, real_options()).unwrap();
    let t = db.table("t").unwrap();
    assert_eq!(read_all(&db, &t).unwrap().len(), 50);
    db.close().unwrap();
}

/// Page 0 with its version field (body offset 40, docs in superblock.rs)
/// set to `version`, checksum resealed.
fn set_format_version(path: &Path, version: u32) {
    let mut bytes = std::fs::read(path).unwrap();
    let page0 = &mut bytes[..PAGE_SIZE];
    page0[40..44].copy_from_slice(&version.to_le_bytes());
    page::seal(page0);
    assert_eq!(page::verify(page0, 0), Ok(()));
    std::fs::write(path, &bytes).unwrap();
}

#[test]
fn unsupported_format_version() {
    let dir = tempfile::tempdir().unwrap();
    make_db(dir.path());
    let path = dir.path().join(DATA_FILE);
    for version in [0, DB_FORMAT_VERSION + 1, u32::MAX] {
        set_format_version(&path, version);
        match Database::open(dir.path(), real_options()) {
            Err(Error::UnsupportedFormatVersion {
                path: p,
                found,
                supported,
            }) => {
                assert_eq!(p, path);
                assert_eq!(found, version);
                assert_eq!(supported, DB_FORMAT_VERSION);
            }
            r => panic!("version {version}: expected UnsupportedFormatVersion, got {r:?}"),
        }
    }
    // Only the version was wrong: put it back and the database opens.
    set_format_version(&path, DB_FORMAT_VERSION);
    check_db(dir.path());
}

#[test]
fn page_size_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    make_db(dir.path());
    for requested in [8192usize, 16384, 65536] {
        let r = Database::open(
            dir.path(),
            Options {
                page_size: Some(requested),
                buffer_pool_bytes: 64 * requested,
                ..real_options()
            },
        );
        match r {
            Err(Error::PageSizeMismatch {
                path,
                found,
                requested: req,
            }) => {
                assert_eq!(path, dir.path().join(DATA_FILE));
                assert_eq!((found, req), (PAGE_SIZE as u32, requested as u32));
            }
            r => panic!("expected PageSizeMismatch, got {r:?}"),
        }
    }
    // None means "whatever the database uses".
    let db = Database::open(
        dir.path(),
        Options {
            page_size: None,
            ..real_options()
        },
    )
    .unwrap();
    assert_eq!(db.page_size(), PAGE_SIZE);
    db.close().unwrap();
    check_db(dir.path());
}

#[test]
fn invalid_options() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    for bad in [
        0usize,
        1,
        512,
        1000,
        2048,
        4095,
        3 * 4096,
        131072,
        usize::MAX,
    ] {
        let r = Database::open(
            &path,
            Options {
                page_size: Some(bad),
                ..real_options()
            },
        );
        assert!(
            matches!(r, Err(Error::InvalidOptions(_))),
            "page size {bad}: {r:?}"
        );
    }
    assert!(!path.exists(), "a refused open created files");
    let frames = |n: usize| Options {
        page_size: Some(PAGE_SIZE),
        buffer_pool_bytes: n,
        ..real_options()
    };
    for bytes in [0, 1, 15 * PAGE_SIZE, 16 * PAGE_SIZE - 1] {
        let r = Database::open(&path, frames(bytes));
        match r {
            Err(Error::InvalidOptions(msg)) => assert!(msg.contains("16"), "{msg}"),
            r => panic!("buffer of {bytes} bytes: expected InvalidOptions, got {r:?}"),
        }
    }
    // Exactly the minimum works, also after the refused attempts.
    let db = Database::open(&path, frames(16 * PAGE_SIZE)).unwrap();
    let t = db.create_table("t").unwrap();
    put(&db, &t, (0..200).map(|i| (key(i), value(i, 300))));
    assert_eq!(read_all(&db, &t).unwrap().len(), 200);
    db.close().unwrap();
}

// ---------------------------------------------------------------------
// Corruption
// ---------------------------------------------------------------------

/// Page ids of B-tree leaves of the durable data file (page kind byte 6).
fn leaf_pages(image: &[u8]) -> Vec<u64> {
    image
        .chunks(PAGE_SIZE)
        .enumerate()
        .filter(|(_, p)| p[6] == page::PageKind::BtreeLeaf as u8)
        .map(|(i, _)| i as u64)
        .collect()
}

fn assert_corruption_at(e: &Error, file: &Path, offset: u64, what: &str) {
    match e {
        Error::Corruption {
            path, offset: o, ..
        } => {
            assert_eq!(path, file, "{what}: path");
            assert_eq!(*o, offset, "{what}: offset");
        }
        other => panic!("{what}: expected Corruption, got {other:?}"),
    }
}

/// A bit flipped on disk in a tree page between close and reopen: reading
/// the data gives `Corruption` naming the data file and that page's offset;
/// records on other pages still read correctly; nothing is silently wrong.
#[test]
fn corruption_of_a_tree_page_names_file_and_offset() {
    let sim = SimStorage::new(6);
    let dir = Path::new("/db");
    let file = dir.join(DATA_FILE);
    let db = Database::open(dir, sim_options(&sim, 32)).unwrap();
    let t = db.create_table("t").unwrap();
    let rows: BTreeMap<Vec<u8>, Vec<u8>> = (0..200).map(|i| (key(i), value(i, 300))).collect();
    put(&db, &t, rows.clone());
    db.close().unwrap();

    // Only inserts so far: every leaf in the file is live. Page 1 is the
    // catalog; pick a leaf of the table.
    let image = sim.read_current(&file).unwrap();
    let leaves: Vec<u64> = leaf_pages(&image).into_iter().filter(|&p| p > 1).collect();
    assert!(leaves.len() > 5, "leaves {leaves:?}");
    let victim = leaves[leaves.len() / 2];
    let offset = victim * PAGE_SIZE as u64;
    sim.corrupt(&file, offset + 1500, 0x10).unwrap();

    let db = Database::open(dir, sim_options(&sim, 32)).unwrap();
    let t = db.table("t").unwrap();
    let e = read_all(&db, &t).unwrap_err();
    assert_corruption_at(&e, &file, offset, "full scan");
    let e = db.check_integrity().unwrap_err();
    assert_corruption_at(&e, &file, offset, "check_integrity");
    let mut s = db.session();
    let mut bad = 0;
    for (k, v) in &rows {
        let mut tx = s.begin().unwrap();
        match tx.get(&t, k) {
            Ok(got) => assert_eq!(got.as_ref(), Some(v), "wrong data for {k:?}"),
            Err(e) => {
                assert_corruption_at(&e, &file, offset, "get");
                bad += 1;
            }
        }
    }
    assert!(bad > 0 && bad < rows.len(), "{bad} keys on the bad page");
    // Reverse scans and scans starting after the bad page.
    let mut tx = s.begin().unwrap();
    assert_corruption_at(
        &tx.scan_rev(&t, .., usize::MAX).unwrap_err(),
        &file,
        offset,
        "scan_rev",
    );
    drop(tx);
    drop(s);
    db.close().unwrap();
}

#[test]
fn corruption_of_the_superblock_or_the_catalog_is_reported_at_open() {
    let sim = SimStorage::new(7);
    let dir = Path::new("/db");
    let file = dir.join(DATA_FILE);
    let db = Database::open(dir, sim_options(&sim, 32)).unwrap();
    let t = db.create_table("t").unwrap();
    put(&db, &t, (0..20).map(|i| (key(i), value(i, 100))));
    db.close().unwrap();

    // Superblock (page 0), a byte after the fields the open reads first.
    sim.corrupt(&file, 200, 0x01).unwrap();
    let e = Database::open(dir, sim_options(&sim, 32)).unwrap_err();
    assert_corruption_at(&e, &file, 0, "superblock");
    sim.corrupt(&file, 200, 0x01).unwrap();

    // Catalog root (page 1).
    sim.corrupt(&file, PAGE_SIZE as u64 + 300, 0x80).unwrap();
    let e = Database::open(dir, sim_options(&sim, 32)).unwrap_err();
    assert_corruption_at(&e, &file, PAGE_SIZE as u64, "catalog");
    sim.corrupt(&file, PAGE_SIZE as u64 + 300, 0x80).unwrap();

    // Repaired: opens and reads.
    let db = Database::open(dir, sim_options(&sim, 32)).unwrap();
    let t = db.table("t").unwrap();
    assert_eq!(read_all(&db, &t).unwrap().len(), 20);
    db.close().unwrap();
}

// ---------------------------------------------------------------------
// ENOSPC during page writeback
// ---------------------------------------------------------------------

fn is_enospc(e: &Error) -> bool {
    match e {
        Error::Io {
            op, path, cause, ..
        } => {
            *op == IoOp::Write
                && path.ends_with(DATA_FILE)
                && cause.raw_os_error() == Some(libc::ENOSPC)
        }
        Error::Poisoned { cause } => cause.contains("os error 28"),
        // The log shares the disk: it may fill up first (tests/log_full.rs).
        Error::LogFull { cause, .. } => cause.contains("os error 28"),
        _ => false,
    }
}

/// Loads data, closes cleanly, reopens, then fails the next write to the
/// data file with ENOSPC and writes until the page provider's writeback
/// hits it. The engine must return a typed error naming ENOSPC, refuse
/// further work and refuse a clean close; after reopening (recovery from
/// the log) the table holds exactly the acknowledged commits: the failed
/// one neither whole nor in part.
#[test]

fn enospc_during_writeback_is_typed_and_every_acknowledged_commit_survives() {
    let sim = SimStorage::new(8);
    let dir = Path::new("/db");
    let opts = || sim_options(&sim, 16);
    let db = Database::open(dir, opts()).unwrap();
    let t = db.create_table("t").unwrap();
    let model: BTreeMap<Vec<u8>, Vec<u8>> = (0..300).map(|i| (key(i), value(i, 400))).collect();
    put(&db, &t, model.clone());
    db.close().unwrap();

    let db = Database::open(dir, opts()).unwrap();
    let t = db.table("t").unwrap();
    sim.inject(Fault::at(sim.op_count(), FaultKind::Enospc).on_path(DATA_FILE));
    let mut s = db.session();
    let mut first_error = None;
    let mut commits = 0;
    // With the WAL, every acknowledged commit survives the failed
    // writeback: the expected contents follow the acknowledged commits.
    let mut model = model;
    for round in 0..2000 {
        let attempt = (|| -> waypoint::Result<()> {
            let mut tx = s.begin()?;
            for j in 0..5 {
                let i = 1000 + round * 5 + j;
                tx.upsert(&t, &key(i), &value(i, 400))?;
            }
            // Also rewrite old rows so old pages get dirty.
            tx.update(&t, &key(round % 300), &value(round, 350))?;
            tx.commit()?;
            Ok(())
        })();
        match attempt {
            Ok(()) => {
                commits += 1;
                for j in 0..5 {
                    let i = 1000 + round * 5 + j;
                    model.insert(key(i), value(i, 400));
                }
                model.insert(key(round % 300), value(round, 350));
            }
            Err(e) => {
                first_error = Some(e);
                break;
            }
        }
    }
    let e = first_error.expect("ENOSPC never surfaced");
    assert!(is_enospc(&e), "expected an ENOSPC error, got {e:?}");
    assert!(commits > 0, "the first commits fit in the pool");
    // The engine is poisoned and says why.
    match s.begin() {
        Err(Error::Poisoned { cause }) => assert!(cause.contains("os error 28"), "{cause}"),
        r => panic!("after ENOSPC: expected Poisoned, got {:?}", r.map(|_| ())),
    }
    assert!(db.check_integrity().is_err());
    drop(s);
    let close = db.close();
    assert!(
        close.as_ref().is_err_and(is_enospc),
        "close after a failed writeback must fail, got {close:?}"
    );

    // Reopening recovers from the log: exactly the acknowledged commits.
    sim.clear_faults();
    let db = Database::open(dir, opts()).unwrap();
    let t = db.table("t").unwrap();
    let got: BTreeMap<_, _> = read_all(&db, &t).unwrap().into_iter().collect();
    assert!(
        got == model,
        "{} rows read, {} expected",
        got.len(),
        model.len()
    );
    let counts = db.check_integrity().unwrap();
    assert!(
        counts.contains(&("t".to_string(), model.len())),
        "{counts:?}"
    );
    // And the database is usable again.
    put(&db, &t, [(b"after".to_vec(), b"ok".to_vec())]);
    db.close().unwrap();
    let db = Database::open(dir, opts()).unwrap();
    let t = db.table("t").unwrap();
    assert_eq!(get(&db, &t, b"after"), Some(b"ok".to_vec()));
    assert_eq!(read_all(&db, &t).unwrap().len(), model.len() + 1);
    db.close().unwrap();
}

/// Runs `f` on another thread and fails the test if it does not return
/// within `secs` (an engine loop would otherwise hang the test run; the
/// looping thread is left behind).
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(secs)) {
        Ok(v) => v,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what} did not return within {secs} s: the engine loops")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{what} panicked"),
    }
}

/// A full disk (writes that grow the file fail) while the pool writes
/// back: every failure is a typed error and the clean close is refused.
/// The data file then holds a mix of pages from before and after the last
/// clean close (pages written in place before the disk filled up);
/// reopening and checking it must give typed results, never a panic or a
/// hang. (Reading a tree whose pages disagree is the subject of
/// `a_leaf_whose_fences_disagree_with_its_parent_is_an_error_not_a_loop`.)
#[test]
fn enospc_from_a_full_disk_is_typed_and_never_panics() {
    let sim = SimStorage::new(9);
    let dir = Path::new("/db");
    let opts = move |sim: &SimStorage| sim_options(sim, 16);
    let db = Database::open(dir, opts(&sim)).unwrap();
    let t = db.create_table("t").unwrap();
    put(&db, &t, (0..200).map(|i| (key(i), value(i, 400))));
    db.close().unwrap();
    let size = sim.read_current(&dir.join(DATA_FILE)).unwrap().len() as u64;
    // Room for the open's checkpoint metadata (written beside the old one
    // before it replaces it), not for the log.
    sim.set_space_limit(Some(size + 1024));

    let db = Database::open(dir, opts(&sim)).unwrap();
    let t = db.table("t").unwrap();
    let mut s = db.session();
    let mut error = None;
    for round in 0..2000 {
        let r = (|| -> waypoint::Result<()> {
            let mut tx = s.begin()?;
            for j in 0..5 {
                let i = 1000 + round * 5 + j;
                tx.insert(&t, &key(i), &value(i, 400))?;
            }
            tx.commit().map(|_| ())
        })();
        if let Err(e) = r {
            error = Some(e);
            break;
        }
    }
    let e = error.expect("the full disk never surfaced");
    assert!(is_enospc(&e), "{e:?}");
    drop(s);
    let close = db.close();
    assert!(
        close.as_ref().is_err_and(is_enospc),
        "close after ENOSPC must fail: {close:?}"
    );

    sim.set_space_limit(None);
    let sim2 = sim.clone();
    within(
        20,
        "open and check_integrity after a failed close",
        move || match Database::open(dir, opts(&sim2)) {
            Ok(db) => {
                match db.check_integrity() {
                    Ok(counts) => println!("integrity after a failed close: {counts:?}"),
                    Err(e) => {
                        println!("integrity after a failed close: {e}");
                        assert!(matches!(e, Error::Corruption { .. }), "{e:?}");
                    }
                }
                let _ = db.close();
            }
            Err(e) => println!("reopen after a failed close: {e}"),
        },
    );
}

/// A data file whose pages come from two different clean closes: one
/// leaf is the newer image (after it was split), the rest is older, so the
/// leaf's upper fence is below its parent's separator. Before the WAL this
/// is what the page provider's in-place writeback left behind when a close
/// failed or the process died; now it takes a lost or damaged log, a bug,
/// or a restored backup of one file. Until 9204588 (leaf fences checked
/// against the routed key) a forward scan looped forever here, a reverse
/// scan returned wrong rows and `get` returned `None` for existing keys.
///
/// Reading it must give the right data or `Corruption` naming the leaf,
/// never wrong data and never an endless loop.
#[test]

fn a_leaf_whose_fences_disagree_with_its_parent_is_an_error_not_a_loop() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(DATA_FILE);
    let rows: BTreeMap<Vec<u8>, Vec<u8>> = (0..100).map(|i| (key(i), value(i, 300))).collect();
    let db = Database::open(dir.path(), real_options()).unwrap();
    let t = db.create_table("t").unwrap();
    put(&db, &t, rows.clone());
    db.close().unwrap();
    let old = std::fs::read(&file).unwrap();
    // Split the leaf holding key 50 (the left half keeps its page id).
    let db = Database::open(dir.path(), real_options()).unwrap();
    let t = db.table("t").unwrap();
    put(
        &db,
        &t,
        (0..40).map(|j| (format!("key00050-{j:02}").into_bytes(), value(j, 300))),
    );
    db.close().unwrap();
    let new = std::fs::read(&file).unwrap();

    let is_leaf = |img: &[u8], p: usize| img[p * PAGE_SIZE + 6] == page::PageKind::BtreeLeaf as u8;
    let changed: Vec<usize> = (2..old.len() / PAGE_SIZE)
        .filter(|&p| is_leaf(&old, p) && is_leaf(&new, p))
        .filter(|&p| {
            old[p * PAGE_SIZE..(p + 1) * PAGE_SIZE] != new[p * PAGE_SIZE..(p + 1) * PAGE_SIZE]
        })
        .collect();
    assert_eq!(changed.len(), 1, "leaves changed by the split: {changed:?}");
    let victim = changed[0];
    let mut mixed = old.clone();
    mixed[victim * PAGE_SIZE..(victim + 1) * PAGE_SIZE]
        .copy_from_slice(&new[victim * PAGE_SIZE..(victim + 1) * PAGE_SIZE]);
    std::fs::write(&file, &mixed).unwrap();
    let offset = (victim * PAGE_SIZE) as u64;

    let db = Database::open(dir.path(), real_options()).unwrap();
    let t = db.table("t").unwrap();
    let e = db.check_integrity().unwrap_err();
    assert_corruption_at(&e, &file, offset, "check_integrity");
    for reverse in [false, true] {
        let (db2, t2) = (db.clone(), t.clone());
        let r = within(10, if reverse { "scan_rev" } else { "scan" }, move || {
            let mut s = db2.session();
            let mut tx = s.begin()?;
            if reverse {
                tx.scan_rev(&t2, .., usize::MAX)
            } else {
                tx.scan(&t2, .., usize::MAX)
            }
        });
        match r {
            Err(e) => assert_corruption_at(&e, &file, offset, "scan"),
            Ok(got) => panic!(
                "scan of a broken tree returned {} rows and no error",
                got.len()
            ),
        }
    }
    // Every key of the old state exists in both states: a point read gives
    // its value or the corruption, never "absent".
    let mut s = db.session();
    for (k, v) in &rows {
        let mut tx = s.begin().unwrap();
        match tx.get(&t, k) {
            Ok(got) => assert_eq!(
                got.as_ref(),
                Some(v),
                "silently wrong result for {:?}",
                String::from_utf8_lossy(k)
            ),
            Err(e) => assert_corruption_at(&e, &file, offset, "get"),
        }
    }
}

// ---------------------------------------------------------------------
// Bad input that must not panic
// ---------------------------------------------------------------------

#[test]
fn edge_inputs_do_not_panic_and_behave() {
    let (_sim, db) = sim_db();
    let t = db.create_table("t").unwrap();
    let idx = db
        .create_index(
            &t,
            "t_idx",
            Arc::new(|k: &[u8], v: &[u8]| {
                // Partial, with zero bytes and an empty secondary key.
                match v.first() {
                    None => None,
                    Some(0) => Some(Vec::new()),
                    Some(b) => Some(vec![0, *b, 0]),
                }
                .map(|mut s| {
                    s.extend_from_slice(&k[..k.len().min(1)]);
                    s
                })
            }),
        )
        .unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    // Empty key and empty value are ordinary.
    tx.insert(&t, b"", b"").unwrap();
    tx.insert(&t, b"\0", b"\0").unwrap();
    tx.insert(&t, b"\0\0", b"x").unwrap();
    tx.insert(&t, b"\xff", b"\xff\xff").unwrap();
    tx.insert(&t, b"\xff\xff", b"").unwrap();
    tx.insert(&t, b"m", b"mm").unwrap();
    assert_eq!(tx.get(&t, b"").unwrap(), Some(vec![]));
    tx.commit().unwrap();

    let all: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b"".to_vec(), b"".to_vec()),
        (b"\0".to_vec(), b"\0".to_vec()),
        (b"\0\0".to_vec(), b"x".to_vec()),
        (b"m".to_vec(), b"mm".to_vec()),
        (b"\xff".to_vec(), b"\xff\xff".to_vec()),
        (b"\xff\xff".to_vec(), b"".to_vec()),
    ];
    let mut tx = s.begin().unwrap();
    assert_eq!(tx.get(&t, b"").unwrap(), Some(vec![]));
    assert_eq!(tx.scan(&t, .., usize::MAX).unwrap(), all);
    assert_eq!(tx.scan(&t, .., 0).unwrap(), vec![]);
    assert_eq!(tx.scan_rev(&t, .., 0).unwrap(), vec![]);
    assert_eq!(tx.scan_prefix(&t, b"", 0).unwrap(), vec![]);
    assert_eq!(
        tx.scan_prefix(&t, b"", usize::MAX).unwrap(),
        all,
        "empty prefix"
    );
    assert_eq!(
        tx.scan_prefix(&t, b"\xff", 10).unwrap(),
        all[4..].to_vec(),
        "no successor"
    );
    assert_eq!(
        tx.scan_prefix(&t, b"\xff\xff", 10).unwrap(),
        all[5..].to_vec()
    );
    assert_eq!(tx.scan_prefix(&t, b"\0", 10).unwrap(), all[1..3].to_vec());
    // Reversed and empty ranges.
    let (z, a): (&[u8], &[u8]) = (b"z", b"a");
    assert_eq!(tx.scan(&t, z..a, 10).unwrap(), vec![]);
    assert_eq!(tx.scan_rev(&t, z..a, 10).unwrap(), vec![]);
    assert_eq!(tx.scan(&t, z..=a, usize::MAX).unwrap(), vec![]);
    let m: &[u8] = b"m";
    assert_eq!(tx.scan(&t, m..m, 10).unwrap(), vec![]);
    assert_eq!(
        tx.scan(&t, (Bound::Excluded(m), Bound::Excluded(m)), 10)
            .unwrap(),
        vec![]
    );
    assert_eq!(
        tx.scan(&t, (Bound::Excluded(m), Bound::Included(m)), 10)
            .unwrap(),
        vec![]
    );
    assert_eq!(tx.scan(&t, m..=m, 10).unwrap(), all[3..4].to_vec());
    assert_eq!(tx.scan_rev(&t, m..=m, 10).unwrap(), all[3..4].to_vec());
    // Unbounded on one side.
    assert_eq!(tx.scan(&t, m.., usize::MAX).unwrap(), all[3..].to_vec());
    assert_eq!(tx.scan(&t, ..m, usize::MAX).unwrap(), all[..3].to_vec());
    let rev: Vec<_> = all[..4].iter().rev().cloned().collect();
    assert_eq!(tx.scan_rev(&t, ..=m, usize::MAX).unwrap(), rev);
    let empty: &[u8] = b"";
    assert_eq!(
        tx.scan(&t, (Bound::Excluded(empty), Bound::Unbounded), 1)
            .unwrap(),
        all[1..2].to_vec()
    );
    // Index scans: zero limit, reversed range, everything.
    assert_eq!(tx.index_scan(&idx, .., 0, false).unwrap(), vec![]);
    assert_eq!(tx.index_scan(&idx, z..a, 10, false).unwrap(), vec![]);
    assert_eq!(tx.index_scan(&idx, z..a, 10, true).unwrap(), vec![]);
    let entries = tx.index_scan(&idx, .., usize::MAX, false).unwrap();
    // Rows with a non-empty value: "\0", "\0\0", "m", "\xff".
    assert_eq!(entries.len(), 4, "{entries:?}");
    let secondary_of_nul: Vec<u8> = vec![0];
    assert!(entries
        .iter()
        .any(|e| e.primary == b"\0" && e.secondary == secondary_of_nul));
    let rev = tx.index_scan(&idx, .., usize::MAX, true).unwrap();
    assert!(rev.iter().rev().eq(entries.iter()));
    tx.commit().unwrap();

    // An extracted index key too large for the index: the commit fails
    // with KeyTooLarge and nothing of it is applied.
    let big = db
        .create_index(
            &t,
            "big",
            Arc::new(|k: &[u8], v: &[u8]| {
                (v.first() == Some(&b'!')).then(|| {
                    let mut s = vec![b's'; 250];
                    s.extend_from_slice(k);
                    s
                })
            }),
        )
        .unwrap();
    let mut tx = s.begin().unwrap();
    tx.upsert(&t, b"ok", b"fine").unwrap();
    tx.upsert(&t, b"too-big", b"!").unwrap();
    assert!(matches!(tx.commit(), Err(Error::KeyTooLarge { .. })));
    assert_eq!(get(&db, &t, b"ok"), None);
    assert_eq!(get(&db, &t, b"too-big"), None);
    let mut tx = s.begin().unwrap();
    assert_eq!(tx.index_scan(&big, .., usize::MAX, false).unwrap(), vec![]);
    drop(tx);
    // Creating an index whose backfill would produce such a key fails, and
    // leaves no index behind.
    put(&db, &t, [(b"x".to_vec(), b"!".to_vec())]);
    db.drop_index("big").unwrap();
    put(&db, &t, [(b"y".to_vec(), vec![b'!'; 10])]);
    let r = db.create_index(
        &t,
        "big2",
        Arc::new(|k: &[u8], v: &[u8]| {
            (v.first() == Some(&b'!')).then(|| {
                let mut s = vec![b's'; 260];
                s.extend_from_slice(k);
                s
            })
        }),
    );
    assert!(matches!(r, Err(Error::KeyTooLarge { .. })), "{r:?}");
    assert_eq!(db.index_names(), vec!["t_idx".to_string()]);
    put(&db, &t, [(b"z".to_vec(), b"still writable".to_vec())]);
    let counts = db.check_integrity().unwrap();
    assert!(counts.contains(&("t".to_string(), 9)), "{counts:?}");
    drop(s);
    db.close().unwrap();
}
