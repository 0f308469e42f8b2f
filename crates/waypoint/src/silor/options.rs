//! The `silor` scheme's options, each with its documented range.

use crate::error::{Error, Result};

/// Options of the `silor` scheme (`Persistence::Silor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SilorOptions {
    /// Logger threads, each with its own log directory and files
    /// (1 to 64). Session slot `s` logs to logger `s % loggers`.
    pub loggers: usize,
}

impl Default for SilorOptions {
    fn default() -> Self {
        SilorOptions { loggers: 1 }
    }
}

impl SilorOptions {
    pub const MAX_LOGGERS: usize = 64;

    pub fn validate(&self) -> Result<()> {
        if !(1..=Self::MAX_LOGGERS).contains(&self.loggers) {
            return Err(Error::InvalidOptions(format!(
                "loggers = {} is out of range: 1 to {}",
                self.loggers,
                Self::MAX_LOGGERS
            )));
        }
        Ok(())
    }
}
