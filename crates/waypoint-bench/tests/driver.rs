//! The driver end to end on tiny data: TPC-B keeps its balance invariant
//! (also after a clean close and reopen, and when the database is reused),
//! every YCSB preset commits, the report files carry the documented
//! fields, the PNG plots are written next to them, and an interrupt ends
//! a run early.

use std::path::Path;
use waypoint::{Database, Options};
use waypoint_bench::driver::{self, DriverConfig};
use waypoint_bench::tpcb::{self, Tpcb, TpcbConfig};
use waypoint_bench::ycsb::{Ycsb, YcsbConfig};
use waypoint_bench::BenchError;

fn config(dir: &Path) -> DriverConfig {
    DriverConfig {
        dir: Some(dir.join("db")),
        workers: 2,
        duration_secs: 5.0,
        warmup_secs: 0,
        in_flight: 8,
        buffer_bytes: 32 << 20,
        ..DriverConfig::default()
    }
}

fn tpcb_run(dir: &Path, txns: u64) -> waypoint_bench::driver::RunOutput {
    let c = DriverConfig {
        max_txns: Some(txns),
        ..config(dir)
    };
    let mut w = Tpcb::new(TpcbConfig::with_accounts(2, 1000));
    driver::run(&c, &mut w, &|_| {}).expect("TPC-B run")
}

#[test]
fn tpcb_invariant_holds_after_run_and_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let out = tpcb_run(dir.path(), 300);
    let s = &out.summary;
    assert!(s.committed >= 300, "committed {}", s.committed);
    let checked = s.verify.as_ref().expect("the driver verified");
    assert!(checked["history_rows"].as_u64().unwrap() >= 300);

    let db = Database::open(dir.path().join("db"), Options::default()).unwrap();
    let after = tpcb::verify(&db).expect("invariant after reopen");
    assert_eq!(after.accounts, 1000);
    assert_eq!(after.tellers, 20);
    assert_eq!(after.branches, 2);
    assert_eq!(serde_json::to_value(&after).unwrap(), *checked);
    db.close().unwrap();
}

/// An offered rate caps what the workers start: never more than the
/// schedule allows (a slow machine may start fewer).
#[test]
fn an_offered_rate_caps_the_transactions_started() {
    let dir = tempfile::tempdir().unwrap();
    let c = DriverConfig {
        rate: Some(200.0),
        duration_secs: 1.0,
        ..config(dir.path())
    };
    let mut w = Tpcb::new(TpcbConfig::with_accounts(2, 1000));
    let out = driver::run(&c, &mut w, &|_| {}).expect("TPC-B run");
    let s = &out.summary;
    let started = s.committed + s.aborts;
    // 200 a second for about a second, plus each worker's first start.
    assert!(started <= 200 + 2 + 20, "{started} started in about 1 s");
    assert!(s.committed > 0);
}

/// The interrupt flag (Ctrl-C in `waypoint compare`) ends a 60-second
/// run at its next check; the run still verifies and closes cleanly.
#[test]
fn an_interrupt_ends_the_run_early_and_it_still_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let c = DriverConfig {
        duration_secs: 60.0,
        interrupt: Some(flag.clone()),
        ..config(dir.path())
    };
    let mut w = Tpcb::new(TpcbConfig::with_accounts(2, 1000));
    let interrupt_after_second_one = |_: &waypoint_bench::metrics::Sample| {
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
    };
    let out = driver::run(&c, &mut w, &interrupt_after_second_one).expect("TPC-B run");
    // Second 1, then the short interval the interrupt ended.
    assert!(out.series.len() <= 2, "{} samples", out.series.len());
    assert!(out.summary.seconds < 3.0, "{} s", out.summary.seconds);
    assert!(out.summary.verify.is_some());
}

/// A progress callback that panics ends the run with its panic: the
/// workers are told to stop, so the driver does not wait for them for
/// ever (it did, until the run's 60 seconds were long past).
#[test]
fn a_panicking_progress_callback_stops_the_workers() {
    let dir = tempfile::tempdir().unwrap();
    let c = DriverConfig {
        duration_secs: 600.0,
        ..config(dir.path())
    };
    let (done, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut w = Tpcb::new(TpcbConfig::with_accounts(2, 1000));
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            driver::run(&c, &mut w, &|_| panic!("progress callback fails"))
        }));
        let _ = done.send(result.is_err());
    });
    let panicked = ended
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the run ended after its progress callback panicked");
    assert!(panicked, "the callback's panic reached the caller");
}

#[test]
fn tpcb_reuses_a_loaded_database_and_keeps_the_invariant() {
    let dir = tempfile::tempdir().unwrap();
    let first = tpcb_run(dir.path(), 100).summary;
    assert!(first.loaded_now);
    let second = tpcb_run(dir.path(), 100).summary;
    assert!(!second.loaded_now);
    let rows = |s: &waypoint_bench::summary::Summary| {
        s.verify.as_ref().unwrap()["history_rows"].as_u64().unwrap()
    };
    assert!(rows(&second) >= rows(&first) + 100);
    // Another scale on the same directory is refused.
    let mut other = Tpcb::new(TpcbConfig::with_accounts(3, 1000));
    let e = driver::run(&config(dir.path()), &mut other, &|_| {})
        .err()
        .unwrap();
    assert!(matches!(e, BenchError::Config(_)), "{e}");
}

#[test]
fn a_directory_that_is_not_a_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("db")).unwrap();
    std::fs::write(dir.path().join("db/notes.txt"), "mine").unwrap();
    let mut w = Tpcb::new(TpcbConfig::with_accounts(1, 100));
    let e = driver::run(&config(dir.path()), &mut w, &|_| {})
        .err()
        .unwrap();
    assert!(e.to_string().contains("not a waypoint database"), "{e}");
    assert!(dir.path().join("db/notes.txt").exists());
}

#[test]
fn every_ycsb_preset_commits() {
    for preset in ['a', 'b', 'c', 'd', 'e', 'f'] {
        let dir = tempfile::tempdir().unwrap();
        let c = DriverConfig {
            duration_secs: 0.3,
            ..config(dir.path())
        };
        let mut w = Ycsb::new(YcsbConfig::preset(preset, 2000).unwrap());
        let s = driver::run(&c, &mut w, &|_| {}).expect("YCSB run").summary;
        assert!(s.committed > 0, "preset {preset}: nothing committed");
        assert_eq!(
            s.types.iter().map(|t| t.committed).sum::<u64>(),
            s.committed
        );
        assert!(s.verify.is_some());
    }
    assert!(YcsbConfig::preset('g', 10).is_err());
}

#[test]
fn summary_json_and_series_csv_have_the_documented_fields() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let c = DriverConfig {
        duration_secs: 1.0,
        warmup_secs: 1,
        in_flight: 1,
        out: Some(out.clone()),
        ..config(dir.path())
    };
    let mut w = Ycsb::new(YcsbConfig::preset('a', 2000).unwrap());
    let run = driver::run(&c, &mut w, &|_| {}).expect("YCSB run");

    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    for field in [
        "committed",
        "txn_per_sec",
        "aborts",
        "wal_bytes",
        "wal_bytes_per_txn",
        "remote_flush_fraction",
        "peak_rss_bytes",
        "wal_disk_max_bytes",
        "wal_syncs_per_sec",
        "cpu_seconds",
        "cpu_us_per_txn",
    ] {
        assert!(v[field].is_number(), "summary.json lacks {field}: {v}");
    }
    assert_eq!(v["config"]["workers"], 2);
    assert_eq!(v["config"]["commit"], "rfa-group");
    assert_eq!(v["config"]["workload"]["preset"], "a");
    // Two workers are pinned when the process may use two cores or more.
    assert_eq!(v["config"]["pin"], "auto");
    let cores = core_affinity::get_core_ids().map_or(0, |c| c.len());
    assert_eq!(v["config"]["pinned"], cores >= 2);
    for ty in ["overall", "read", "update"] {
        for q in ["p50", "p99", "p999", "max"] {
            assert!(v["latency_us"][ty][q].is_u64(), "latency_us.{ty}.{q}");
        }
    }
    assert!(v["committed"].as_u64().unwrap() > 0);
    assert!(v["wal_bytes"].as_u64().unwrap() > 0);
    // One commit at a time: every commit is a sync of its own.
    assert!(v["wal_syncs_per_sec"].as_f64().unwrap() > 0.0);
    assert!(v["peak_rss_bytes"].as_u64().unwrap() > 0);
    // The workers ran for a second after the warm-up: the process used CPU.
    assert!(v["cpu_seconds"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["cpu_us_per_txn"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["latency_us"]["overall"]["p50"].as_u64().unwrap() > 0);

    let csv = std::fs::read_to_string(out.join("series.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    for col in [
        "second",
        "txn",
        "aborts",
        "wal_bytes",
        "wal_disk_bytes",
        "checkpoint_bytes",
        "evict_bytes",
        "read_bytes",
        "rss_bytes",
    ] {
        assert!(header.contains(&col), "series.csv lacks {col}");
    }
    let rows: Vec<Vec<f64>> = lines
        .map(|l| l.split(',').map(|x| x.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), run.series.len());
    assert!(rows.len() >= 2, "a warm-up second and a measured one");
    let warmup = header.iter().position(|c| *c == "warmup").unwrap();
    assert_eq!(rows[0][warmup], 1.0);
    assert_eq!(rows.last().unwrap()[warmup], 0.0);
    let txn = header.iter().position(|c| *c == "txn").unwrap();
    let measured: f64 = rows
        .iter()
        .filter(|r| r[warmup] == 0.0)
        .map(|r| r[txn])
        .sum();
    assert_eq!(measured as u64, run.summary.committed);
    let ckpt = header
        .iter()
        .position(|c| *c == "checkpoint_bytes")
        .unwrap();
    let measured: f64 = rows
        .iter()
        .filter(|r| r[warmup] == 0.0)
        .map(|r| r[ckpt])
        .sum();
    assert_eq!(v["checkpoint_bytes"].as_u64(), Some(measured as u64));
}

const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];

fn assert_png(path: &Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        bytes.len() > 1000,
        "{}: {} bytes",
        path.display(),
        bytes.len()
    );
    assert_eq!(bytes[..8], PNG_SIGNATURE, "{} is not a PNG", path.display());
}

#[test]
fn a_run_with_out_writes_the_three_plots() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let c = DriverConfig {
        duration_secs: 1.0,
        warmup_secs: 1,
        out: Some(out.clone()),
        wal_limit_bytes: 8 << 20,
        ..config(dir.path())
    };
    let mut w = Ycsb::new(YcsbConfig::preset('a', 2000).unwrap());
    let run = driver::run(&c, &mut w, &|_| {}).expect("YCSB run");
    assert!(run.warnings.is_empty(), "{:?}", run.warnings);
    let names: Vec<_> = run.plots.iter().map(|p| p.file_name().unwrap()).collect();
    assert_eq!(names, ["throughput.png", "wal.png", "latency_cdf.png"]);
    for name in waypoint_bench::plots::FILES {
        assert_png(&out.join(name));
    }
    assert!(out.join("summary.json").exists() && out.join("series.csv").exists());

    // TPC-B has one transaction type and a run without a warm-up.
    let out = dir.path().join("out-tpcb");
    let c = DriverConfig {
        max_txns: Some(50),
        out: Some(out.clone()),
        ..config(&dir.path().join("tpcb"))
    };
    let mut w = Tpcb::new(TpcbConfig::with_accounts(1, 100));
    let run = driver::run(&c, &mut w, &|_| {}).expect("TPC-B run");
    assert!(run.warnings.is_empty(), "{:?}", run.warnings);
    for name in waypoint_bench::plots::FILES {
        assert_png(&out.join(name));
    }
}

#[test]
fn a_plot_that_cannot_be_written_is_a_warning_and_the_run_survives() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // A directory where the first plot file should go: it cannot be written.
    std::fs::create_dir_all(out.join("throughput.png")).unwrap();
    let c = DriverConfig {
        duration_secs: 0.5,
        out: Some(out.clone()),
        ..config(dir.path())
    };
    let mut w = Ycsb::new(YcsbConfig::preset('a', 2000).unwrap());
    let run = driver::run(&c, &mut w, &|_| {}).expect("the run itself succeeds");
    assert!(run.summary.committed > 0);
    assert_eq!(run.warnings.len(), 1, "{:?}", run.warnings);
    assert!(
        run.warnings[0].starts_with("warning: cannot write plot")
            && run.warnings[0].contains("throughput.png"),
        "{}",
        run.warnings[0]
    );
    assert!(run.plots.is_empty());
    assert!(out.join("summary.json").exists() && out.join("series.csv").exists());
}

/// `summary.json` and the table report recovery when the run opened a
/// database that needed it, and not after a clean close.
#[test]
fn a_run_that_recovers_the_database_reports_the_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let first = tpcb_run(dir.path(), 50).summary;
    assert!(first.recovery.is_none(), "a fresh load recovered nothing");

    // Commit without a clean close, then forget the database as a killed
    // process would leave it. It is quiescent (every commit durable, a
    // large pool, a far WAL limit), so its idle threads write nothing more.
    let db = Database::open(
        dir.path().join("db"),
        Options {
            buffer_pool_bytes: 32 << 20,
            ..Options::default()
        },
    )
    .unwrap();
    let mut w = Tpcb::new(TpcbConfig::with_accounts(2, 1000));
    waypoint_bench::workload::Workload::setup(&mut w, &db, 1).unwrap();
    {
        let mut session = db.session();
        let mut gen = waypoint_bench::workload::Workload::worker(&w, 0, 1);
        for _ in 0..100 {
            let mut tx = session.begin().unwrap();
            gen.next(&mut tx).1.unwrap();
            tx.commit().unwrap();
        }
    }
    std::mem::forget(db);

    let out = dir.path().join("out");
    let c = DriverConfig {
        max_txns: Some(20),
        out: Some(out.clone()),
        ..config(dir.path())
    };
    let run = driver::run(
        &c,
        &mut Tpcb::new(TpcbConfig::with_accounts(2, 1000)),
        &|_| {},
    )
    .expect("run after recovery");
    let r = run.summary.recovery.as_ref().expect("recovery reported");
    assert!(r.records > 0 && r.winners >= 100 && r.bytes > 0, "{r:?}");
    assert!(r.total_ms > 0.0 && r.open_ms >= r.total_ms, "{r:?}");
    assert!(run.summary.table().contains("recovery: analysis"));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    for field in [
        "records",
        "bytes",
        "analysis_ms",
        "redo_ms",
        "undo_ms",
        "total_ms",
        "mb_per_sec",
    ] {
        assert!(v["recovery"][field].is_number(), "recovery.{field}: {v}");
    }
    assert_eq!(v["verify"]["accounts"], 1000);

    // The run closed cleanly: the next one has nothing to recover.
    let next = tpcb_run(dir.path(), 20).summary;
    assert!(next.recovery.is_none(), "{:?}", next.recovery);
}

/// `silor` acknowledges once per 40 ms epoch, so its default window is one
/// no worker fills within an epoch; the other schemes keep 128.
#[test]
fn the_default_window_in_flight_depends_on_the_scheme() {
    use waypoint::SchemeKind;
    assert_eq!(
        DriverConfig::default_in_flight(SchemeKind::Silor),
        driver::SILOR_IN_FLIGHT
    );
    const { assert!(driver::SILOR_IN_FLIGHT >= 65_536) };
    for scheme in [SchemeKind::PerWorker, SchemeKind::Aries, SchemeKind::Aether] {
        assert_eq!(DriverConfig::default_in_flight(scheme), 128);
    }
}
