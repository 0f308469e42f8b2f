//! The central-log schemes' options: the log's (the per-worker WAL's
//! option set, which the central log reuses) with the defaults seed 000
//! §4 gave its ARIES baseline, and the refusal of what a single log
//! cannot mean.

use crate::checkpoint::CheckpointMode;
use crate::error::{Error, Result};
use crate::wal::{CommitProtocol, PerWorkerOptions};

/// Options of a central log (`Persistence::Aries`). `log` holds the
/// log's options with their documented ranges; of its commit protocols,
/// only those that mean something for one log are accepted:
/// [`CommitProtocol::Group`] (the default: a commit flushes the log up to
/// its commit record, the writer batching whatever waits),
/// [`CommitProtocol::FlushAll`] (the same, the committer pushing the
/// flush) and [`CommitProtocol::Async`]. RFA avoids flushing other
/// sessions' logs, and there are none: `rfa` and `rfa-group` are refused.
#[derive(Debug, Clone, PartialEq)]
pub struct CentralOptions {
    pub log: PerWorkerOptions,
}

impl Default for CentralOptions {
    /// Seed 000 §4's configuration of its competitors: full checkpoints
    /// once the log exceeds its limit, group commit.
    fn default() -> Self {
        CentralOptions {
            log: PerWorkerOptions {
                commit: CommitProtocol::Group,
                checkpoint: CheckpointMode::Full,
                ..PerWorkerOptions::default()
            },
        }
    }
}

impl CentralOptions {
    /// The central log with the log options of `log` (say, the per-worker
    /// scheme's from a command line); an RFA commit protocol, which has no
    /// meaning here, becomes [`CommitProtocol::Group`], what RFA does on a
    /// single log.
    pub fn from_log(log: PerWorkerOptions) -> Self {
        let commit = match log.commit {
            CommitProtocol::Rfa | CommitProtocol::RfaGroup => CommitProtocol::Group,
            other => other,
        };
        CentralOptions {
            log: PerWorkerOptions { commit, ..log },
        }
    }

    pub fn validate(&self) -> Result<()> {
        self.log.validate()?;
        match self.log.commit {
            CommitProtocol::Group | CommitProtocol::FlushAll | CommitProtocol::Async => Ok(()),
            rfa @ (CommitProtocol::Rfa | CommitProtocol::RfaGroup) => Err(Error::InvalidOptions(
                format!(
                    "commit = {} is not an option of a central log: RFA avoids flushing other sessions' logs, and a central log has none (use group, flush-all or async)",
                    rfa.name()
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfa_is_refused_by_name_and_the_defaults_are_valid() {
        CentralOptions::default().validate().unwrap();
        let mut o = CentralOptions::default();
        o.log.commit = CommitProtocol::Rfa;
        let e = o.validate().unwrap_err().to_string();
        assert!(e.contains("commit = rfa"), "{e}");
        assert_eq!(
            CentralOptions::from_log(PerWorkerOptions::default()).log.commit,
            CommitProtocol::Group
        );
    }
}
