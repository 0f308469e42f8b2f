use super::postgres::parse_pgbench;
use super::redis::{parse_csv, CsvRow};
use super::External;
use crate::driver::DriverConfig;
use crate::peers::Durability;

fn config() -> DriverConfig {
    DriverConfig {
        workers: 2,
        duration_secs: 1.0,
        warmup_secs: 0,
        buffer_bytes: 16 << 20,
        ..DriverConfig::default()
    }
}

#[test]
fn pgbench_reports_parse_and_a_report_without_tps_is_an_error() {
    let report = "transaction type: <builtin: TPC-B (sort of)>\nnumber of failed transactions: 3 (0.018%)\n\
                  latency average = 0.591 ms\ntps = 3384.261304 (without initial connection time)\n";
    assert_eq!(parse_pgbench(report).unwrap(), (3384.261304, 0.018));
    let old = "tps = 12.5 (excluding connections establishing)\n";
    assert_eq!(parse_pgbench(old).unwrap(), (12.5, 0.0));
    assert!(parse_pgbench("pgbench: error: connection refused\n").is_err());
}

#[test]
fn redis_benchmark_csv_parses_by_column_name_and_bad_output_is_an_error() {
    let csv = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\
               \"p99_latency_ms\",\"max_latency_ms\"\n\"SET\",\"9220.84\",\"0.210\",\"0.080\",\"0.191\",\"0.319\",\
               \"0.527\",\"7.751\"\n";
    assert_eq!(
        parse_csv(csv).unwrap(),
        CsvRow {
            rps: 9220.84,
            p50_ms: 0.191,
            p99_ms: 0.527
        }
    );
    assert!(parse_csv("").is_err());
    assert!(parse_csv("\"test\",\"rps\"\n\"SET\",\"fast\"\n").is_err());
    assert!(parse_csv("\"test\",\"qps\"\n\"SET\",\"1\"\n").is_err());
}

/// Where the servers are installed, a short run of each starts it,
/// measures and stops it: nothing is left listening on the socket.
#[test]
fn an_installed_server_runs_its_benchmark_and_is_stopped() {
    for server in External::ALL {
        let Ok(programs) = server.probe() else {
            eprintln!("{}: not installed here; skipped", server.name());
            continue;
        };
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let out = match server {
            External::Postgres => {
                super::postgres::run(&programs, Durability::Durable, &run, 1, &config())
            }
            External::Redis => {
                super::redis::run(&programs, Durability::Relaxed, &run, 1_000, 100, &config())
            }
        }
        .unwrap_or_else(|e| panic!("{}: {e}", server.name()));
        assert!(out.per_sec > 0.0, "{}: {out:?}", server.name());
        assert!(out.durability.starts_with(match server {
            External::Postgres => "durable",
            External::Redis => "relaxed",
        }));
        // The server is gone: its pid file or postmaster.pid says so.
        let pid_file = match server {
            External::Postgres => run.join("pgdata/postmaster.pid"),
            External::Redis => run.join("redis.pid"),
        };
        if let Ok(text) = std::fs::read_to_string(&pid_file) {
            let pid = text.lines().next().unwrap_or("").trim().to_string();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while std::path::Path::new(&format!("/proc/{pid}")).exists() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "{} (pid {pid}) still runs",
                    server.name()
                );
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    }
}
