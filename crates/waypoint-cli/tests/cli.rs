//! The `waypoint` binary as a process: bad input gives one line on stderr
//! and a non-zero exit without touching anything; a tiny `bench ycsb` and
//! `bench tpcb` run end to end and write their report files.

use std::path::Path;
use std::process::{Command, Output};

fn waypoint(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_waypoint"))
        .args(args)
        .output()
        .expect("run waypoint")
}

fn fails_with_one_line(args: &[&str], needle: &str) {
    let out = waypoint(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    assert!(stderr.contains(needle), "{args:?}: {stderr}");
}

#[test]
fn bad_input_is_one_line_and_a_nonzero_exit() {
    fails_with_one_line(&["bench", "nosuch"], "unknown workload");
    fails_with_one_line(&["bench", "tpcc"], "not implemented yet");
    fails_with_one_line(&["bench", "ycsb", "--frobnicate"], "--frobnicate");
    fails_with_one_line(&["bench", "ycsb", "--buffer", "lots"], "is not a size");
    fails_with_one_line(&["bench", "ycsb", "--preset", "q"], "preset");
    fails_with_one_line(&["bench", "ycsb", "--logging", "central"], "--logging");

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("mine.txt"), "keep").unwrap();
    let d = dir.path().to_str().unwrap();
    fails_with_one_line(&["bench", "tpcb", "--dir", d], "not a waypoint database");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

    let toml = dir.path().join("bad.toml");
    std::fs::write(&toml, "workers = 1\nwarp = 9\n").unwrap();
    fails_with_one_line(
        &["bench", "ycsb", "--config", toml.to_str().unwrap()],
        "line 2",
    );
}

fn tiny_run(workload: &str, extra: &[&str], out: &Path) -> String {
    let mut args = vec![
        "bench",
        workload,
        "--records",
        "1000",
        "--duration",
        "0.5",
        "--warmup",
        "0",
        "--buffer",
        "16MiB",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = waypoint(&args);
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{args:?}: {stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout
}

#[test]
fn tiny_runs_end_to_end_with_a_config_file() {
    let dir = tempfile::tempdir().unwrap();
    // The file sets the preset and the workers; the flag overrides workers.
    let toml = dir.path().join("bench.toml");
    std::fs::write(&toml, "preset = \"f\"\nworkers = 3\nin-flight = 4\n").unwrap();
    let out = dir.path().join("ycsb");
    let stdout = tiny_run(
        "ycsb",
        &["--config", toml.to_str().unwrap(), "--workers", "1"],
        &out,
    );
    assert!(stdout.contains("rmw"), "{stdout}");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(v["config"]["workers"], 1);
    assert_eq!(v["config"]["in_flight"], 4);
    assert_eq!(v["config"]["workload"]["preset"], "f");
    assert!(v["committed"].as_u64().unwrap() > 0);
    assert!(out.join("series.csv").exists());

    let out = dir.path().join("tpcb");
    let stdout = tiny_run("tpcb", &["--scale", "2", "--no-pin"], &out);
    assert!(stdout.contains("verified"), "{stdout}");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(v["verify"]["accounts"], 1000);
    assert_eq!(v["config"]["pin"], "off");
    assert_eq!(v["config"]["pinned"], false);
}

/// `waypoint simulate --seeds 200`, the crash simulation CI runs (through
/// this test: `.ci/run` is `cargo test --workspace`): every seed passes.
#[test]
fn simulate_200_seeds_passes() {
    let o = waypoint(&["simulate", "--seeds", "200"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && stdout.contains("200 seeds, 0 failures"),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A failing seed is reported with its choices, the error and a
/// reproduction command, and the exit code is non-zero (here with commits
/// acknowledged before they are durable, the hidden `--unsafe-async`).
#[test]
fn simulate_reports_failures_with_a_reproduction_command() {
    let o = waypoint(&[
        "simulate",
        "--seeds",
        "20",
        "--workload",
        "bank",
        "--unsafe-async",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success(), "{stdout}");
    assert!(stdout.contains("20 seeds, "), "{stdout}");
    assert!(!stdout.contains(" 0 failures ("), "{stdout}");
    assert!(stdout.contains("acknowledged transfers lost"), "{stdout}");
    assert!(
        stdout.contains("reproduce: waypoint simulate --seed ")
            && stdout.contains("--workload bank --unsafe-async"),
        "{stdout}"
    );
    fails_with_one_line(&["simulate", "--workload", "tpcc"], "unknown --workload");
    fails_with_one_line(&["simulate", "--scheme", "aries"], "unknown --scheme");
}
