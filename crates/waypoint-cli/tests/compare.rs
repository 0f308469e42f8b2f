//! `waypoint compare` as a process: every experiment `--list` names runs
//! with `--quick` and writes report.md, a results.json that parses and
//! its PNG figures; Ctrl-C leaves a valid report marked partial; bad
//! input is one line on stderr and a non-zero exit.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn waypoint(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_waypoint"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run waypoint")
}

/// The experiments `--list` says run now (the lines before "Not yet").
fn listed() -> Vec<String> {
    let o = waypoint(&["compare", "--list"]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    let (now, later) = text.split_once("Not yet").expect("a not-yet section");
    assert!(
        later.contains("decoupled") && later.contains("not yet: needs"),
        "{text}"
    );
    now.lines()
        .filter(|l| l.starts_with("  "))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect()
}

fn results(out: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(out.join("results.json")).expect("results.json");
    serde_json::from_str(&text).expect("results.json parses")
}

fn is_png(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| b.len() > 1000 && b.starts_with(b"\x89PNG\r\n\x1a\n"))
}

#[test]
fn every_listed_experiment_runs_quick_and_writes_report_results_and_figures() {
    let names = listed();
    assert_eq!(
        names,
        [
            "logging-cost",
            "scaling",
            "remote-flush",
            "recovery",
            "wal-bound",
            "out-of-memory",
            "peers",
            "checkpoint-dips",
            "command-logging",
            "multi-partition",
            "silor"
        ]
    );
    let tmp = tempfile::tempdir().unwrap();
    for name in &names {
        let out = tmp.path().join(name);
        let o = waypoint(&["compare", name, "--quick", "--out", out.to_str().unwrap()]);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        assert!(o.status.success(), "{name}: {stdout}{stderr}");
        let report = std::fs::read_to_string(out.join("report.md")).expect("report.md");
        assert!(
            report.starts_with(&format!("# `waypoint compare {name}`")),
            "{report}"
        );
        assert!(
            report.contains("| machine |") && report.contains("vs baseline"),
            "{report}"
        );
        assert!(
            report.contains(&format!("| binary | waypoint {} |", waypoint_bench::BUILD)),
            "{report}"
        );
        assert!(!report.contains("PARTIAL"), "{report}");
        let r = results(&out);
        assert_eq!(r["experiment"], name.as_str());
        assert_eq!(r["build"], waypoint_bench::BUILD);
        assert!(r["partial"].is_null());
        for run in r["runs"].as_array().unwrap() {
            let rounds = run["rounds"].as_array().unwrap();
            assert_eq!(rounds.len(), 1, "{name}: --quick is one round");
            let metrics = &rounds[0]["metrics"];
            assert!(
                metrics["txn_per_sec"].as_f64().is_some_and(|t| t > 0.0)
                    || metrics["recovery_ms"].as_f64().is_some_and(|t| t > 0.0),
                "{name}: {run}"
            );
            assert!(run["vs_baseline"].is_object());
        }
        let figures = r["figures"].as_array().unwrap();
        assert!(!figures.is_empty(), "{name}: no figures");
        for f in figures {
            let f = f.as_str().unwrap();
            assert!(is_png(&out.join(f)), "{name}: {f} is not a PNG");
            assert!(
                report.contains(&format!("]({f})")),
                "{name}: {f} not in the report"
            );
        }
        if name == "out-of-memory" {
            // The pool is 40% of the load's data file, not the default.
            for run in r["runs"].as_array().unwrap() {
                let config = &run["config"];
                assert_eq!(config["buffer_of_data"], 0.4, "{run}");
                let buffer = config["buffer_bytes"].as_u64().unwrap();
                assert!(buffer < 16 << 20, "{run}");
            }
        }
        if name == "peers" {
            peers_rows_state_their_durability(&r, &report);
        }
        if name == "command-logging" {
            command_logging_runs_both_workloads_and_recovers_both_ways(&r);
        }
        if name == "multi-partition" {
            multi_partition_runs_each_share_under_each_scheme(&r);
        }
        if name == "silor" {
            silor_runs_three_designs_and_recovers_from_a_checkpoint(&r, &report);
        }
        if name == "scaling" {
            // The memory-resident schemes are lines of Fig. 8 too, silor
            // with its epoch-sized window.
            for run in r["runs"].as_array().unwrap() {
                if run["series"] == "silor" {
                    assert_eq!(run["config"]["in_flight"], 65_536, "{run}");
                }
            }
            for series in ["silor", "command"] {
                assert!(
                    r["runs"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|run| run["series"] == series),
                    "scaling has no {series} line"
                );
            }
        }
        // The runs' data directories are gone.
        let left: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(left.is_empty(), "{name}: left {left:?}");
    }
}

/// Seed 001's runs: Voter and TPC-C under the four schemes on 1 and 2
/// workers, each against `none`; TPC-C's command log far smaller per
/// transaction than its after-image log; recovery under `command` and
/// `silor` after the same number of acknowledged transactions, against
/// `silor`.
/// Seed 001's Fig. 9: every share under every scheme, each run with the
/// share it is plotted at, executors only in their own series.
fn multi_partition_runs_each_share_under_each_scheme(r: &serde_json::Value) {
    let runs = r["runs"].as_array().unwrap();
    for series in ["none", "command", "command-executors", "silor"] {
        for pct in [0, 10, 50, 100] {
            let label = format!("{series}, {pct}% multi-partition");
            let run = runs
                .iter()
                .find(|run| run["label"] == label.as_str())
                .unwrap_or_else(|| panic!("no run {label:?}"));
            assert_eq!(run["x"], f64::from(pct), "{run}");
            let workload = &run["config"]["workload"];
            assert_eq!(workload["workload"], "tpcc-multi-partition", "{run}");
            assert_eq!(workload["pct"], pct, "{run}");
            assert_eq!(
                run["config"]["executors"],
                series == "command-executors",
                "{run}"
            );
        }
    }
}

fn command_logging_runs_both_workloads_and_recovers_both_ways(r: &serde_json::Value) {
    let runs = r["runs"].as_array().unwrap();
    let run = |label: &str| {
        runs.iter()
            .find(|run| run["label"] == label)
            .unwrap_or_else(|| panic!("no run {label:?}"))
    };
    for workload in ["voter", "tpcc"] {
        for series in [
            "none",
            "command",
            "command-executors",
            "silor",
            "per-worker",
        ] {
            let executors = series == "command-executors";
            let scheme = if executors { "command" } else { series };
            for w in [1, 2] {
                let run = run(&format!("{workload} {series}, {w} workers"));
                assert_eq!(run["config"]["scheme"], scheme, "{run}");
                assert_eq!(run["config"]["executors"], executors, "{run}");
                assert!(
                    run["vs_baseline"]["txn_per_sec"].as_f64().is_some(),
                    "{run}"
                );
            }
        }
        for scheme in ["command", "silor"] {
            let run = run(&format!("{workload} {scheme} recovery, 2 workers"));
            assert!(
                run["median"]["recovery_txn_per_sec"]
                    .as_f64()
                    .is_some_and(|t| t > 0.0),
                "{run}"
            );
            assert!(
                run["vs_baseline"]["recovery_ms"].as_f64().is_some(),
                "{run}"
            );
            // Against the rate of the run that was killed.
            let ratio = run["median"]["recovery_vs_run"].as_f64();
            let rate = run["median"]["run_txn_per_sec"].as_f64();
            assert!(ratio.is_some_and(|r| r > 0.0), "{run}");
            assert!(rate.is_some_and(|r| r > 0.0), "{run}");
        }
    }
    let per_txn = |label: &str| run(label)["median"]["wal_bytes_per_txn"].as_f64().unwrap();
    let (command, silor) = (
        per_txn("tpcc command, 2 workers"),
        per_txn("tpcc silor, 2 workers"),
    );
    assert!(
        command > 0.0 && command * 2.0 < silor,
        "command {command} bytes/txn, silor {silor}"
    );
}

/// Seed 002's runs: SiloR, LogSilo and MemSilo on both workloads, each
/// against `none`; the recovery after a kill loaded an installed
/// checkpoint (its load counted in the recovery time) and replayed log.
fn silor_runs_three_designs_and_recovers_from_a_checkpoint(r: &serde_json::Value, report: &str) {
    // A table has rows for the runs that measured its metric only.
    let throughput = report
        .split("### committed txn/s")
        .nth(1)
        .and_then(|t| t.split("###").next())
        .expect("a throughput table");
    assert!(
        throughput.contains("ycsb none") && !throughput.contains("recovery on"),
        "{throughput}"
    );
    let runs = r["runs"].as_array().unwrap();
    let run = |label: &str| {
        runs.iter()
            .find(|run| run["label"] == label)
            .unwrap_or_else(|| panic!("no run {label:?}"))
    };
    for workload in ["ycsb", "tpcc"] {
        for design in ["silor", "silor, no checkpoints", "none"] {
            // One worker count: every core, at least 2.
            let prefix = format!("{workload} {design}, ");
            let run = runs
                .iter()
                .find(|run| run["label"].as_str().unwrap().starts_with(&prefix))
                .unwrap_or_else(|| panic!("no run {prefix:?}"));
            assert!(
                run["vs_baseline"]["txn_per_sec"].as_f64().is_some(),
                "{run}"
            );
        }
        let run = run(&format!("{workload} silor recovery on 1 thread"));
        let m = &run["median"];
        let (load, total) = (
            m["load_ms"].as_f64().unwrap(),
            m["recovery_ms"].as_f64().unwrap(),
        );
        assert!(m["loaded_mib"].as_f64().unwrap() > 0.0, "{run}");
        assert!(load > 0.0 && total >= load, "{run}");
        assert!(m["recovered_log_mib"].as_f64().unwrap() > 0.0, "{run}");
    }
}

/// Every peer row says what durability it gave; the engines this binary
/// was built with (CI builds it with `--features sqlite,rocksdb`) each
/// have rows at both durabilities.
fn peers_rows_state_their_durability(r: &serde_json::Value, report: &str) {
    assert!(report.contains("## Durability"), "{report}");
    let runs = r["runs"].as_array().unwrap();
    let mut engines = vec!["waypoint"];
    if cfg!(feature = "sqlite") {
        engines.push("sqlite");
    } else {
        assert!(report.contains("Skipped sqlite: not built"), "{report}");
    }
    if cfg!(feature = "rocksdb") {
        engines.push("rocksdb");
    }
    // The servers this machine has (CI installs both): rows beside the
    // workload their own benchmark stands for.
    for server in ["postgres", "redis"] {
        if !report.contains(&format!("Skipped {server}:")) {
            engines.push(server);
        }
    }
    for engine in engines {
        for durability in ["durable", "relaxed"] {
            let rows: Vec<_> = runs
                .iter()
                .filter(|run| {
                    run["config"]["scheme"] == engine && run["config"]["durability"] == durability
                })
                .collect();
            assert!(!rows.is_empty(), "no {engine} {durability} rows");
            for run in rows {
                let said = run["durability"].as_str().unwrap_or("");
                assert!(said.starts_with(durability), "{run}");
            }
        }
    }
}

/// SIGINT after the first finished run: the run in progress is dropped,
/// the report is written and says it is partial, the exit is 130.
#[test]
fn ctrl_c_writes_a_partial_report() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut child = Command::new(env!("CARGO_BIN_EXE_waypoint"))
        .args([
            "compare",
            "scaling",
            "--quick",
            "--out",
            out.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let started = Instant::now();
    loop {
        let line = lines.next().expect("a run finishes").unwrap();
        if line.trim_start().starts_with("round 1") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no run finished"
        );
    }
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{rest:?} {stderr}");
    assert!(stderr.contains("partial report"), "{stderr}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("**PARTIAL REPORT:** stopped by Ctrl-C"),
        "{report}"
    );
    let r = results(&out);
    assert!(r["partial"].as_str().unwrap().contains("Ctrl-C"));
    let runs = r["runs"].as_array().unwrap();
    let done = runs
        .iter()
        .filter(|run| !run["rounds"][0].is_null())
        .count();
    assert!(
        done >= 1 && done < runs.len(),
        "{done} of {} runs",
        runs.len()
    );
    for f in r["figures"].as_array().unwrap() {
        assert!(is_png(&out.join(f.as_str().unwrap())));
    }
}

fn fails_with_one_line(args: &[&str], needle: &str) {
    let o = waypoint(args);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{args:?} succeeded");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    assert!(stderr.contains(needle), "{args:?}: {stderr}");
}

#[test]
fn bad_input_is_one_line_and_a_nonzero_exit() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let out = out.to_str().unwrap();
    fails_with_one_line(
        &["compare", "nosuch", "--out", out],
        "unknown experiment \"nosuch\"; available: logging-cost",
    );
    fails_with_one_line(&["compare", "decoupled", "--out", out], "not available yet");
    fails_with_one_line(
        &["compare", "scaling", "--rounds", "0", "--out", out],
        "--rounds 0",
    );
    fails_with_one_line(
        &["compare", "scaling", "--workers", "0", "--out", out],
        "--workers",
    );
    fails_with_one_line(
        &["compare", "recovery", "--workers", "1,2", "--out", out],
        "a list is for scaling",
    );
    fails_with_one_line(&["compare"], "EXPERIMENT");
    fails_with_one_line(
        &["compare", "peers", "--peers", "nosuch", "--out", out],
        "unknown peer \"nosuch\"",
    );
    // Not built into this binary, or not installed: the line says which.
    if !cfg!(feature = "rocksdb") {
        fails_with_one_line(
            &["compare", "peers", "--peers", "rocksdb", "--out", out],
            "rocksdb: not built into this binary (build with `--features rocksdb`",
        );
    }
    // A server that is not installed (none is, on an empty PATH): its
    // line names the programs missing.
    let o = Command::new(env!("CARGO_BIN_EXE_waypoint"))
        .args(["compare", "peers", "--peers", "redis", "--out", out])
        .env("PATH", tmp.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("redis: not installed (redis-server, redis-cli, redis-benchmark not found"),
        "{stderr}"
    );
    assert!(!Path::new(out).exists(), "bad input created --out");
    // A file where a directory should be: not writable, even as root.
    let file = tmp.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let below = file.join("out");
    fails_with_one_line(
        &[
            "compare",
            "scaling",
            "--quick",
            "--out",
            below.to_str().unwrap(),
        ],
        "cannot write to --out",
    );
}
