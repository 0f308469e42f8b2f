//! The `command` scheme's options, each with its documented range.

use crate::error::{Error, Result};

/// Options of the `command` scheme (`Persistence::Command`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOptions {
    /// Partitions of the serial order (1 to 1024): calls of one partition
    /// run one after another; a multi-partition call runs alone. A
    /// single-partition procedure must touch only rows of its partition,
    /// or the log order may not be the order that ran: checked for the
    /// tables whose partitioning key is registered
    /// (`Procedures::partition_key`).
    pub partitions: usize,
}

impl Default for CommandOptions {
    fn default() -> Self {
        CommandOptions { partitions: 1 }
    }
}

impl CommandOptions {
    pub const MAX_PARTITIONS: usize = 1024;

    pub fn validate(&self) -> Result<()> {
        if !(1..=Self::MAX_PARTITIONS).contains(&self.partitions) {
            return Err(Error::InvalidOptions(format!(
                "partitions = {} is out of range: 1 to {}",
                self.partitions,
                Self::MAX_PARTITIONS
            )));
        }
        Ok(())
    }
}
