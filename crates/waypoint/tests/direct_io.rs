//! `Options::direct_io` on a real file system: the data file is opened with
//! `O_DIRECT` (every read and write of it whole, aligned pages), while the
//! log, its spares and the double-write file stay buffered — `O_DIRECT`
//! refuses their unaligned writes with `EINVAL`, which once poisoned the
//! database at its first log write.
//!
//! The directory is below `CARGO_TARGET_TMPDIR` (the build's disk), not the
//! system temporary directory, which may be a tmpfs without `O_DIRECT`.

use waypoint::{Database, Options};

fn options() -> Options {
    Options {
        direct_io: true,
        page_size: Some(4096),
        // Fewer frames than the table has pages: eviction writes and
        // re-reads pages through O_DIRECT.
        buffer_pool_bytes: 32 * 4096,
        ..Options::default()
    }
}

fn key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

#[test]
fn a_direct_io_database_loads_evicts_crashes_and_recovers() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = tmp.path().join("db");
    const ROWS: u32 = 3000;
    {
        let db = Database::open(&dir, options()).unwrap();
        let t = db.create_table("t").unwrap();
        let mut s = db.session();
        for chunk in (0..ROWS).collect::<Vec<_>>().chunks(100) {
            let mut tx = s.begin().unwrap();
            for &i in chunk {
                tx.insert(&t, &key(i), &[i as u8; 100]).unwrap();
            }
            tx.commit().unwrap();
        }
        let stats = db.stats();
        assert!(
            stats.pool.evictions > 0,
            "the table outgrew the pool: {stats:?}"
        );
        // No clean close: the reopen recovers from the log.
        drop((s, t));
        std::mem::forget(db);
    }
    let db = Database::open(&dir, options()).unwrap();
    let report = db.recovery_report().expect("the reopen recovered").clone();
    assert!(report.records > 0, "{report:?}");
    db.check_integrity().unwrap();
    {
        let t = db.table("t").unwrap();
        let mut s = db.session();
        let mut tx = s.begin().unwrap();
        let rows = tx.scan(&t, .., usize::MAX).unwrap();
        assert_eq!(rows.len(), ROWS as usize);
        for (i, (k, v)) in rows.iter().enumerate() {
            assert_eq!(k.as_slice(), key(i as u32));
            assert_eq!(v.as_slice(), [i as u8; 100]);
        }
    }
    db.close().unwrap();
    let db = Database::open(&dir, options()).unwrap();
    let report = db.recovery_report().unwrap();
    assert_eq!(report.records, 0, "a clean close leaves no log: {report:?}");
    db.close().unwrap();
}
