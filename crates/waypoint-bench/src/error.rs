//! The error type of the workloads and the driver: an engine error, a bad
//! configuration, a failed invariant check, or a failed report file write.

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
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl BenchError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BenchError::Io {
            path: path.into(),
            source,
        }
    }
}

pub type BenchResult<T> = Result<T, BenchError>;
