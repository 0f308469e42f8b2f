//! `Options::direct_io` on a real file system: the data file is opened with
//! `O_DIRECT` (every read and write of it whole, aligned pages), while the
//! log, its spares and the double-write file stay buffered — `O_DIRECT`
//! refuses their unaligned writes with `EINVAL`, which once poisoned the
//! database at its first log write.
//!
//! The directory is below `CARGO_TARGET_TMPDIR` (the build's disk), not the
//! system temporary directory, which may be a tmpfs without `O_DIRECT`.

use waypoint::{Database, Options, PerWorkerOptions, Persistence};

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

/// Whether the file system under `dir` takes `O_DIRECT` at all (a tmpfs
/// before Linux 6.6 does not; the log then stays buffered, with a warning).
fn supports_o_direct(dir: &std::path::Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(dir.join("probe"))
        .is_ok()
}

/// The open file descriptors of this process for `.wal` files below `dir`
/// (tests run in parallel in one process), with their `O_DIRECT` flag.
fn open_segments(dir: &std::path::Path) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        if !target.starts_with(dir) {
            continue;
        }
        let target = target.to_string_lossy().into_owned();
        if !target.ends_with(".wal") {
            continue;
        }
        let info = format!("/proc/self/fdinfo/{}", entry.file_name().to_string_lossy());
        let Ok(info) = std::fs::read_to_string(info) else {
            continue;
        };
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .map(|f| i64::from_str_radix(f.trim(), 8).unwrap())
            .unwrap();
        out.push((target, flags & libc::O_DIRECT as i64 != 0));
    }
    out
}

/// `PerWorkerOptions::log_direct_io` on a real file system: the log's segments are
/// open with `O_DIRECT`, written in whole blocks, and what was committed
/// survives three crashes in a row, each reopen recovering the last and
/// starting a new segment after the recovered ones.
#[test]
fn a_direct_log_is_open_with_o_direct_and_recovers_across_crashes() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = tmp.path().join("db");
    let direct = supports_o_direct(tmp.path());
    let options = || Options {
        page_size: Some(4096),
        persistence: Persistence::PerWorker(PerWorkerOptions {
            log_direct_io: true,
            ..PerWorkerOptions::default()
        }),
        ..Options::default()
    };
    const ROWS: u32 = 500;
    for round in 0..3u32 {
        let db = Database::open(&dir, options()).unwrap();
        if round > 0 {
            assert!(db.recovery_report().is_some(), "round {round} recovered");
        }
        let t = match round {
            0 => db.create_table("t").unwrap(),
            _ => db.table("t").unwrap(),
        };
        let mut s = db.session();
        {
            let mut tx = s.begin().unwrap();
            let rows = tx.scan(&t, .., usize::MAX).unwrap();
            assert_eq!(rows.len(), (round * ROWS) as usize, "round {round}");
        }
        for i in round * ROWS..(round + 1) * ROWS {
            let mut tx = s.begin().unwrap();
            // Odd lengths: records end inside blocks.
            tx.insert(&t, &key(i), &vec![i as u8; 1 + (i as usize * 7) % 300])
                .unwrap();
            tx.commit().unwrap();
        }
        let segments = open_segments(&dir);
        assert!(!segments.is_empty(), "the log has open segments");
        if direct {
            assert!(
                segments.iter().all(|(_, d)| *d),
                "every segment is O_DIRECT: {segments:?}"
            );
        }
        drop((s, t));
        std::mem::forget(db);
    }
    let db = Database::open(&dir, options()).unwrap();
    db.check_integrity().unwrap();
    let t = db.table("t").unwrap();
    {
        let mut s = db.session();
        let mut tx = s.begin().unwrap();
        let rows = tx.scan(&t, .., usize::MAX).unwrap();
        assert_eq!(rows.len(), 3 * ROWS as usize);
        for (i, (k, v)) in rows.iter().enumerate() {
            assert_eq!(k.as_slice(), key(i as u32));
            assert_eq!(v.as_slice(), vec![i as u8; 1 + (i * 7) % 300]);
        }
    }
    drop(t);
    db.close().unwrap();
}

/// A ramfs mounted for one test, unmounted when dropped.
struct Ramfs(std::path::PathBuf);

impl Drop for Ramfs {
    fn drop(&mut self) {
        // Lazy: the crashed instance (forgotten, not closed) still holds
        // its files open.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Regression test: Linux refuses `O_DIRECT` only after `O_CREAT` made the
/// file, so the buffered retry of a new segment found it existing and the
/// database was poisoned at its first log write ("File exists") on any file
/// system without `O_DIRECT`. Needs a ramfs (one of those), which only root
/// can mount: elsewhere the test says so and passes.
#[test]
fn a_file_system_without_o_direct_gets_buffered_log_files() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "ramfs", "ramfs"])
        .arg(tmp.path())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a ramfs here (not root)");
        return;
    }
    let _mount = Ramfs(tmp.path().to_path_buf());
    assert!(!supports_o_direct(tmp.path()), "ramfs refuses O_DIRECT");
    let dir = tmp.path().join("db");
    let options = || Options {
        page_size: Some(4096),
        persistence: Persistence::PerWorker(PerWorkerOptions {
            log_direct_io: true,
            ..PerWorkerOptions::default()
        }),
        ..Options::default()
    };
    {
        let db = Database::open(&dir, options()).unwrap();
        let t = db.create_table("t").unwrap();
        let mut s = db.session();
        for i in 0..200u32 {
            let mut tx = s.begin().unwrap();
            tx.insert(&t, &key(i), &[i as u8; 50]).unwrap();
            tx.commit().unwrap();
        }
        let segments = open_segments(&dir);
        assert!(
            !segments.is_empty() && segments.iter().all(|(_, d)| !*d),
            "{segments:?}"
        );
        drop((s, t));
        std::mem::forget(db);
    }
    let db = Database::open(&dir, options()).unwrap();
    let t = db.table("t").unwrap();
    {
        let mut s = db.session();
        let mut tx = s.begin().unwrap();
        assert_eq!(tx.scan(&t, .., usize::MAX).unwrap().len(), 200);
    }
    drop(t);
    db.close().unwrap();
}
