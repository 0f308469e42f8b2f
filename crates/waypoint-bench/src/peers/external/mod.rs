//! The peers that run as servers of their own: PostgreSQL (its `pgbench`
//! TPC-B, [`postgres`]) and Redis (`redis-benchmark` SET and GET,
//! [`redis`]). Each is started on a private directory of the run with a
//! unix socket (no TCP port), benchmarked by its own client program, and
//! stopped; this module finds the programs and says in one line why one
//! cannot run here.
//!
//! Invariant: a server is never left running. [`Server`] stops it on every
//! path out of a run (an error, a panic, Ctrl-C), and the run's durability
//! line names the settings the server ran with.
//!
//! What is compared: the servers run their own benchmark programs, not the
//! workload code of [`crate::kv`]: pgbench's TPC-B ("sort of": 100,000
//! accounts per branch, five statements per transaction) and Redis's
//! single-key SET/GET. Their rows are placed beside waypoint's run of the
//! nearest workload and the report says so.

pub mod postgres;
pub mod redis;

use crate::error::{BenchError, BenchResult};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A peer that runs as a server process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum External {
    Postgres,
    Redis,
}

/// What a server's benchmark measured.
#[derive(Debug, Clone)]
pub struct ExternalOutcome {
    /// Transactions (pgbench) or commands (Redis) per second.
    pub per_sec: f64,
    /// Failed transactions, % of all (pgbench; 0 for Redis).
    pub abort_pct: f64,
    /// Commit latency p50 and p99 in µs where the client reports them.
    pub latency_p50_us: Option<f64>,
    pub latency_p99_us: Option<f64>,
    /// What a returned commit survives, and under which settings.
    pub durability: String,
}

impl External {
    pub const ALL: [External; 2] = [External::Postgres, External::Redis];

    pub fn name(self) -> &'static str {
        match self {
            External::Postgres => "postgres",
            External::Redis => "redis",
        }
    }

    /// The programs it needs.
    fn programs(self) -> &'static [&'static str] {
        match self {
            External::Postgres => &["initdb", "pg_ctl", "pgbench"],
            External::Redis => &["redis-server", "redis-cli", "redis-benchmark"],
        }
    }

    /// Its programs (in the order of [`Self::programs`]), or the line that
    /// says why it cannot run here.
    pub fn probe(self) -> Result<Vec<PathBuf>, String> {
        let mut found = Vec::new();
        let mut missing = Vec::new();
        for p in self.programs() {
            match find_program(p) {
                Some(path) => found.push(path),
                None => missing.push(*p),
            }
        }
        if !missing.is_empty() {
            return Err(format!(
                "{}: not installed ({} not found on PATH{})",
                self.name(),
                missing.join(", "),
                if self == External::Postgres {
                    " or in /usr/lib/postgresql/*/bin"
                } else {
                    ""
                }
            ));
        }
        if self == External::Postgres && running_as_root() && postgres::server_user().is_none() {
            return Err(
                "postgres: installed, but PostgreSQL's server refuses to run as root and there is no \
                 `postgres` user (with `runuser`) to run it as"
                    .into(),
            );
        }
        Ok(found)
    }
}

/// `name` on `PATH`, or (for PostgreSQL's programs, which Debian keeps
/// off it) in `/usr/lib/postgresql/*/bin`.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    if let Ok(versions) = std::fs::read_dir("/usr/lib/postgresql") {
        let mut v: Vec<PathBuf> = versions
            .filter_map(Result::ok)
            .map(|e| e.path().join("bin"))
            .collect();
        // The newest version first, ahead of PATH: Debian's PATH holds
        // only wrappers for some of them.
        v.sort();
        v.reverse();
        v.extend(dirs);
        dirs = v;
    }
    dirs.into_iter()
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `/proc/self` belongs to the process's effective user.
pub(crate) fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Run a client program to its end; a non-zero exit is an error that
/// quotes the end of what it printed.
pub(crate) fn run_program(what: &str, cmd: &mut Command) -> BenchResult<Output> {
    let out = cmd.output().map_err(|e| {
        BenchError::Peer(format!(
            "{what}: could not start {:?}: {e}",
            cmd.get_program()
        ))
    })?;
    if !out.status.success() {
        let text = String::from_utf8_lossy(&out.stderr).to_string()
            + &String::from_utf8_lossy(&out.stdout);
        let tail: String = text
            .lines()
            .rev()
            .take(3)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join(" / ");
        return Err(BenchError::Peer(format!(
            "{what} failed ({}): {tail}",
            out.status
        )));
    }
    Ok(out)
}

/// A started server: stopped when dropped, whatever the run's outcome.
pub(crate) struct Server {
    stop: Option<Command>,
    what: &'static str,
}

impl Server {
    pub(crate) fn new(what: &'static str, stop: Command) -> Self {
        Server {
            stop: Some(stop),
            what,
        }
    }

    /// Stop it now and report a failure to stop.
    pub(crate) fn stop(mut self) -> BenchResult<()> {
        match self.stop.take() {
            Some(mut cmd) => run_program(self.what, &mut cmd).map(|_| ()),
            None => Ok(()),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut cmd) = self.stop.take() {
            // Already on an error path: the first error is the one to report.
            let _ = cmd.output();
        }
    }
}

/// A unix socket's path must fit `sun_path` (108 bytes); the run's
/// directory may be deeper than that, so sockets live in a short
/// private directory of their own.
pub(crate) fn socket_dir() -> BenchResult<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix("wp-sock")
        .tempdir_in("/tmp")
        .map_err(|e| BenchError::io(Path::new("/tmp"), e))
}

#[cfg(test)]
mod tests;
