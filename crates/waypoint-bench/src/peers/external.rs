//! The peers that run as servers of their own: PostgreSQL (its `pgbench`
//! TPC-B) and Redis (`redis-benchmark`). This module finds their
//! programs and says, in one line, why one cannot run here.
//!
//! Not built yet: starting the server on a private directory and a unix
//! socket and parsing the benchmark's output. Until then `waypoint
//! compare peers` names each of them with its line (not installed, or
//! installed but not run yet), and `--peers postgres` or `--peers redis`
//! is refused with that line.

use serde::Serialize;
use std::path::{Path, PathBuf};

/// A peer that runs as a server process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum External {
    Postgres,
    Redis,
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
            External::Redis => &["redis-server", "redis-benchmark"],
        }
    }

    /// Its programs, or the line that says why it cannot run here.
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
        if self == External::Postgres && running_as_root() {
            return Err(
                "postgres: installed, but PostgreSQL's server refuses to run as root".into(),
            );
        }
        Err(format!(
            "{}: installed ({}), but running it from `waypoint compare` is not built yet",
            self.name(),
            found
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
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
        // The newest version first.
        v.sort();
        v.reverse();
        dirs.extend(v);
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
fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}
