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
    /// Log a digest of each call's write set with its record (CRC32C of
    /// the rows it wrote, 4 bytes), and have recovery check that every
    /// re-executed call wrote the same rows: a procedure that is not
    /// deterministic given its parameters is then reported at the call
    /// where the replay went another way (`Error::Corruption` naming the
    /// record), instead of leaving a different database. Costs a checksum
    /// over each write set; off by default, on in the crash tests.
    pub digests: bool,
}

impl Default for CommandOptions {
    fn default() -> Self {
        CommandOptions {
            partitions: 1,
            digests: false,
        }
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
