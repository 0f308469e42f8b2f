//! PostgreSQL as a peer: a private cluster (`initdb`) in the run's
//! directory, started by `pg_ctl` on a unix socket only, loaded and
//! driven by `pgbench`'s built-in TPC-B, stopped at the end.
//!
//! Durability: `durable` runs with `fsync=on` and
//! `synchronous_commit=on` (a commit returns after its WAL record is
//! flushed), `relaxed` with `synchronous_commit=off` (a crash may lose
//! the last commits, about three times `wal_writer_delay`, never
//! consistency). PostgreSQL refuses to run as root, so as root every
//! program runs as the `postgres` user through `runuser`.

use super::{run_program, socket_dir, ExternalOutcome, Server};
use crate::driver::DriverConfig;
use crate::error::{BenchError, BenchResult};
use crate::peers::Durability;
use std::path::{Path, PathBuf};
use std::process::Command;

/// As root: the uid and gid of the `postgres` user and `runuser`'s path.
pub(crate) fn server_user() -> Option<(u32, u32, PathBuf)> {
    let runuser = super::find_program("runuser")?;
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    let line = passwd.lines().find(|l| l.starts_with("postgres:"))?;
    let mut fields = line.split(':').skip(2);
    let uid = fields.next()?.parse().ok()?;
    let gid = fields.next()?.parse().ok()?;
    Some((uid, gid, runuser))
}

/// A command for `program`, as the `postgres` user when running as root.
fn command(program: &Path) -> Command {
    match super::running_as_root().then(server_user).flatten() {
        Some((_, _, runuser)) => {
            let mut c = Command::new(runuser);
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        }
        None => Command::new(program),
    }
}

/// Let the server's user write `dir`.
fn hand_over(dir: &Path) -> BenchResult<()> {
    if let Some((uid, gid, _)) = super::running_as_root().then(server_user).flatten() {
        std::os::unix::fs::chown(dir, Some(uid), Some(gid)).map_err(|e| BenchError::io(dir, e))?;
    }
    Ok(())
}

/// pgbench's TPC-B at `branches` (its scale: 100,000 accounts per
/// branch), `config.workers` clients on as many threads, a warm-up of
/// `config.warmup_secs`, then `config.duration_secs` measured.
pub fn run(
    programs: &[PathBuf],
    durability: Durability,
    dir: &Path,
    branches: u64,
    config: &DriverConfig,
) -> BenchResult<ExternalOutcome> {
    let [initdb, pg_ctl, pgbench] = programs else {
        return Err(BenchError::Peer(
            "postgres: probe gave the wrong programs".into(),
        ));
    };
    std::fs::create_dir_all(dir).map_err(|e| BenchError::io(dir, e))?;
    hand_over(dir)?;
    let sockets = socket_dir()?;
    hand_over(sockets.path())?;
    let data = dir.join("pgdata");
    run_program(
        "postgres initdb",
        command(initdb)
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "postgres", "--no-sync"]),
    )?;
    let synchronous = match durability {
        Durability::Durable => "on",
        Durability::Relaxed => "off",
    };
    let shared_kib = (config.buffer_bytes / 1024).max(128);
    let server_options = format!(
        "-k {} -c listen_addresses='' -c fsync=on -c synchronous_commit={synchronous} -c shared_buffers={shared_kib}kB",
        sockets.path().display()
    );
    run_program(
        "postgres pg_ctl start",
        command(pg_ctl)
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(dir.join("server.log"))
            .args(["-w", "-o", &server_options, "start"]),
    )?;
    let mut stop = command(pg_ctl);
    stop.arg("-D").arg(&data).args(["-m", "fast", "-w", "stop"]);
    let server = Server::new("postgres pg_ctl stop", stop);
    let bench = |args: &[String]| {
        let mut c = command(pgbench);
        c.arg("-h")
            .arg(sockets.path())
            .args(["-U", "postgres"])
            .args(args)
            .arg("postgres");
        run_program("postgres pgbench", &mut c)
    };
    bench(&[
        "-i".into(),
        "-q".into(),
        "-s".into(),
        branches.max(1).to_string(),
    ])?;
    let clients = config.workers.max(1).to_string();
    let timed = |secs: u64| {
        bench(&[
            "-c".into(),
            clients.clone(),
            "-j".into(),
            clients.clone(),
            "-T".into(),
            secs.to_string(),
        ])
    };
    if config.warmup_secs > 0 {
        timed(config.warmup_secs)?;
    }
    let out = timed(config.duration_secs.ceil().max(1.0) as u64)?;
    server.stop()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let (per_sec, abort_pct) = parse_pgbench(&text)?;
    Ok(ExternalOutcome {
        per_sec,
        abort_pct,
        latency_p50_us: None,
        latency_p99_us: None,
        durability: match durability {
            Durability::Durable => {
                "durable: PostgreSQL's WAL with fsync=on and synchronous_commit=on (a commit \
                                    returns after its WAL flush); pgbench's own TPC-B"
                    .into()
            }
            Durability::Relaxed => {
                "relaxed: synchronous_commit=off (a crash may lose the last commits, not \
                                    consistency); pgbench's own TPC-B"
                    .into()
            }
        },
    })
}

/// `tps = N (without initial connection time)` and, when present,
/// `number of failed transactions: N (P%)` from pgbench's report.
pub(crate) fn parse_pgbench(text: &str) -> BenchResult<(f64, f64)> {
    let tps = text
        .lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<f64>().ok())
        .ok_or_else(|| {
            BenchError::Peer(format!(
                "postgres: no `tps = ` line in pgbench's report: {text:?}"
            ))
        })?;
    let failed = text
        .lines()
        .find_map(|l| l.strip_prefix("number of failed transactions: "))
        .and_then(|rest| rest.split('(').nth(1))
        .and_then(|p| p.trim_end_matches([')', '%']).parse::<f64>().ok())
        .unwrap_or(0.0);
    Ok((tps, failed))
}
