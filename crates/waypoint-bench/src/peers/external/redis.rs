//! Redis as a peer: `redis-server` on the run's directory with a unix
//! socket only and its append-only file on, loaded and driven by
//! `redis-benchmark` (SET then GET of random keys among the workload's
//! record count), shut down at the end.
//!
//! Durability: `durable` runs with `appendfsync always` (a SET is
//! answered after the AOF write and its fsync; Redis groups the commands
//! of one event-loop pass into one fsync), `relaxed` with `appendfsync
//! everysec` (a crash may lose about the last second).
//!
//! The mix: redis-benchmark runs one command type at a time, so the run
//! is SET for half the measured time, then GET for the other half; the
//! row gives all commands over all that time (a 50/50 read/update mix in
//! aggregate, as YCSB-A), and the latencies are SET's, the durable write.

use super::{run_program, socket_dir, ExternalOutcome, Server};
use crate::driver::DriverConfig;
use crate::error::{BenchError, BenchResult};
use crate::peers::Durability;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// One line of `redis-benchmark --csv`: requests per second, p50 and
/// p99 in ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct CsvRow {
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

pub fn run(
    programs: &[PathBuf],
    durability: Durability,
    dir: &Path,
    records: u64,
    value_size: usize,
    config: &DriverConfig,
) -> BenchResult<ExternalOutcome> {
    let [server, cli, benchmark] = programs else {
        return Err(BenchError::Peer(
            "redis: probe gave the wrong programs".into(),
        ));
    };
    std::fs::create_dir_all(dir).map_err(|e| BenchError::io(dir, e))?;
    let sockets = socket_dir()?;
    let socket = sockets.path().join("redis.sock");
    let fsync = match durability {
        Durability::Durable => "always",
        Durability::Relaxed => "everysec",
    };
    run_program(
        "redis-server",
        Command::new(server)
            .args(["--port", "0", "--unixsocket"])
            .arg(&socket)
            .arg("--dir")
            .arg(dir)
            .args(["--appendonly", "yes", "--appendfsync", fsync, "--save", ""])
            .args(["--daemonize", "yes", "--pidfile"])
            .arg(dir.join("redis.pid"))
            .arg("--logfile")
            .arg(dir.join("redis.log")),
    )?;
    let mut stop = Command::new(cli);
    stop.arg("-s").arg(&socket).args(["shutdown", "nosave"]);
    let running = Server::new("redis-cli shutdown", stop);
    wait_for(cli, &socket)?;
    let clients = config.workers.max(1).to_string();
    let keys = records.max(1).to_string();
    let bench = |test: &str, n: u64, pipeline: u32| {
        let mut c = Command::new(benchmark);
        c.arg("-s")
            .arg(&socket)
            .args(["-t", test, "-n", &n.max(1).to_string(), "-r", &keys])
            .args(["-c", &clients, "-d", &value_size.to_string()])
            .args(["-P", &pipeline.to_string(), "--csv"]);
        let out = run_program("redis-benchmark", &mut c)?;
        parse_csv(&String::from_utf8_lossy(&out.stdout))
    };
    // Load: a pipelined pass of SETs over the key range.
    bench("set", records, 64)?;
    // Calibrate on a second's worth, then size each half of the run.
    let half = config.duration_secs.max(1.0) / 2.0;
    let warm = config.warmup_secs.max(1) as f64;
    let probe_set = bench("set", 1_000, 1)?;
    let probe_get = bench("get", 1_000, 1)?;
    let n_set = (probe_set.rps * warm).max(1_000.0) as u64;
    bench("set", n_set, 1)?;
    let set = bench("set", (probe_set.rps * half) as u64, 1)?;
    let get = bench("get", (probe_get.rps * half) as u64, 1)?;
    running.stop()?;
    let n_set = set.rps * half;
    let n_get = get.rps * half;
    let per_sec = (n_set + n_get) / (n_set / set.rps + n_get / get.rps);
    Ok(ExternalOutcome {
        per_sec,
        abort_pct: 0.0,
        latency_p50_us: Some(set.p50_ms * 1000.0),
        latency_p99_us: Some(set.p99_ms * 1000.0),
        durability: match durability {
            Durability::Durable => {
                "durable: Redis AOF with appendfsync always (a SET is answered after its \
                                    fsync); redis-benchmark SET then GET, latencies of SET"
                    .into()
            }
            Durability::Relaxed => {
                "relaxed: Redis AOF with appendfsync everysec (a crash may lose about a \
                                    second); redis-benchmark SET then GET, latencies of SET"
                    .into()
            }
        },
    })
}

/// Until the server answers PING (it daemonizes before it listens).
fn wait_for(cli: &Path, socket: &Path) -> BenchResult<()> {
    let t0 = Instant::now();
    loop {
        let out = Command::new(cli).arg("-s").arg(socket).arg("ping").output();
        if out.is_ok_and(|o| o.status.success() && o.stdout.starts_with(b"PONG")) {
            return Ok(());
        }
        if t0.elapsed() > Duration::from_secs(10) {
            return Err(BenchError::Peer(format!(
                "redis: the server did not answer on {} within 10 s",
                socket.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The first data row of `redis-benchmark --csv`:
/// `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"`.
pub(crate) fn parse_csv(text: &str) -> BenchResult<CsvRow> {
    let bad = || {
        BenchError::Peer(format!(
            "redis: unexpected redis-benchmark output: {text:?}"
        ))
    };
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<String> = lines
        .next()
        .ok_or_else(bad)?
        .split(',')
        .map(|f| f.trim_matches('"').to_string())
        .collect();
    let row: Vec<f64> = lines
        .next()
        .ok_or_else(bad)?
        .split(',')
        .skip(1)
        .map(|f| f.trim_matches('"').parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    let at = |name: &str| {
        header
            .iter()
            .skip(1)
            .position(|h| h == name)
            .and_then(|i| row.get(i).copied())
            .ok_or_else(bad)
    };
    Ok(CsvRow {
        rps: at("rps")?,
        p50_ms: at("p50_latency_ms")?,
        p99_ms: at("p99_latency_ms")?,
    })
}
