//! The `silor` scheme's options, each with its documented range.

use crate::error::{Error, Result};
use std::time::Duration;

/// When the `silor` scheme takes a fuzzy checkpoint (seed 002 §4.2,
/// `silor::checkpoint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SilorCheckpoint {
    /// None: the logs grow until a clean close.
    Off,
    /// SiloR's default: the next checkpoint begins as soon as the last one
    /// is installed, but not sooner than `min_interval` after the last
    /// one began (at most one day).
    Continuous { min_interval: Duration },
    /// Seed 000's "SiloR-style" baseline: a full checkpoint each time the
    /// value logs on disk exceed this many bytes (at least 64 KiB).
    LogLimit(u64),
}

impl SilorCheckpoint {
    /// `continuous` (no minimum interval), `continuous=MS` (at least MS
    /// milliseconds apart), `log-limit=SIZE` or `off`; `size` parses the
    /// text after `log-limit=`. Reads back what [`Self::name`] writes.
    pub fn parse(
        s: &str,
        size: impl Fn(&str) -> Option<u64>,
    ) -> std::result::Result<Self, String> {
        match s {
            "off" => Ok(SilorCheckpoint::Off),
            "continuous" => Ok(SilorCheckpoint::Continuous {
                min_interval: Duration::ZERO,
            }),
            _ => {
                if let Some(ms) = s.strip_prefix("continuous=") {
                    return ms
                        .parse::<u64>()
                        .map(|ms| SilorCheckpoint::Continuous {
                            min_interval: Duration::from_millis(ms),
                        })
                        .map_err(|_| format!("continuous={ms:?} is not a number of milliseconds"));
                }
                if let Some(limit) = s.strip_prefix("log-limit=") {
                    return size(limit)
                        .map(SilorCheckpoint::LogLimit)
                        .ok_or_else(|| format!("log-limit={limit:?} is not a size"));
                }
                Err(format!(
                    "unknown checkpoint trigger {s:?}; available: continuous, log-limit=SIZE, off"
                ))
            }
        }
    }
}

impl SilorCheckpoint {
    /// The trigger as [`Self::parse`] reads it.
    pub fn name(&self) -> String {
        match self {
            SilorCheckpoint::Off => "off".into(),
            SilorCheckpoint::Continuous { min_interval } if min_interval.is_zero() => {
                "continuous".into()
            }
            SilorCheckpoint::Continuous { min_interval } => {
                format!("continuous={}", min_interval.as_millis())
            }
            SilorCheckpoint::LogLimit(bytes) => format!("log-limit={bytes}"),
        }
    }
}

/// Options of the `silor` scheme (`Persistence::Silor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SilorOptions {
    /// Logger threads, each with its own log directory and files
    /// (1 to 64). Session slot `s` logs to logger `s % loggers`.
    pub loggers: usize,
    /// When to take a checkpoint (default: continuous, at least a second
    /// apart).
    pub checkpoint: SilorCheckpoint,
    /// Checkpointer threads, each walking its slice of every table into a
    /// file of its own (1 to 64; default 1).
    pub checkpointers: usize,
}

impl Default for SilorOptions {
    fn default() -> Self {
        SilorOptions {
            loggers: 1,
            checkpoint: SilorCheckpoint::Continuous {
                min_interval: Duration::from_secs(1),
            },
            checkpointers: 1,
        }
    }
}

impl SilorOptions {
    pub const MAX_LOGGERS: usize = 64;
    pub const MAX_CHECKPOINTERS: usize = 64;
    pub const MIN_LOG_LIMIT: u64 = 64 << 10;
    pub const MAX_MIN_INTERVAL: Duration = Duration::from_secs(24 * 3600);

    pub fn validate(&self) -> Result<()> {
        if !(1..=Self::MAX_LOGGERS).contains(&self.loggers) {
            return Err(Error::InvalidOptions(format!(
                "loggers = {} is out of range: 1 to {}",
                self.loggers,
                Self::MAX_LOGGERS
            )));
        }
        if !(1..=Self::MAX_CHECKPOINTERS).contains(&self.checkpointers) {
            return Err(Error::InvalidOptions(format!(
                "checkpointers = {} is out of range: 1 to {}",
                self.checkpointers,
                Self::MAX_CHECKPOINTERS
            )));
        }
        match self.checkpoint {
            SilorCheckpoint::LogLimit(bytes) if bytes < Self::MIN_LOG_LIMIT => {
                Err(Error::InvalidOptions(format!(
                    "checkpoint = LogLimit({bytes}) is below the smallest log limit, {} bytes",
                    Self::MIN_LOG_LIMIT
                )))
            }
            SilorCheckpoint::Continuous { min_interval }
                if min_interval > Self::MAX_MIN_INTERVAL =>
            {
                Err(Error::InvalidOptions(format!(
                    "checkpoint = Continuous {{ min_interval: {min_interval:?} }} is above one day"
                )))
            }
            _ => Ok(()),
        }
    }
}
