//! The error type of the workloads and the driver: an engine error, a bad
//! configuration, a failed invariant check, a peer engine's failure, or a
//! failed report file write.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Engine(#[from] waypoint::Error),
    /// A configuration that cannot run (zero workers, unknown preset, a
    /// database loaded by another workload or scale, ...).
    #[error("{0}")]
    Config(String),
    /// A workload invariant does not hold.
    #[error("verification failed: {0}")]
    Verify(String),
    /// A peer engine of `waypoint compare peers` (SQLite, RocksDB, an
    /// external server) failed, or is not there: the message names it.
    #[error("{0}")]
    Peer(String),
    /// A report file could not be written. The message ends with the OS
    /// error, which `source()` does not repeat.
    #[error("{path}: {cause}")]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
}

impl BenchError {
    /// As the engine's error type, for the benchmarks that report theirs
    /// (`engine`, `updates`): an engine error as it is, a configuration
    /// error as `InvalidOptions`.
    pub fn into_engine(self) -> waypoint::Error {
        match self {
            BenchError::Engine(e) => e,
            BenchError::Config(m) => waypoint::Error::InvalidOptions(m),
            other => waypoint::Error::InvalidOptions(other.to_string()),
        }
    }

    pub fn io(path: impl Into<PathBuf>, cause: std::io::Error) -> Self {
        BenchError::Io {
            path: path.into(),
            cause,
        }
    }
}

pub type BenchResult<T> = Result<T, BenchError>;
