//! The `command` scheme's options, each with its documented range.

use crate::error::{Error, Result};
use std::time::Duration;

/// When the `command` scheme takes a transaction-consistent snapshot
/// (seed 001 §II-C1, `command::snapshot`). Each installed snapshot lets
/// the command log before it go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandSnapshot {
    /// None: the log grows until a clean close.
    Off,
    /// One snapshot every `interval` (from one start to the next; 10 ms
    /// to one day).
    Periodic { interval: Duration },
    /// One snapshot each time the command log on disk exceeds this many
    /// bytes (at least 64 KiB).
    LogLimit(u64),
}

impl Default for CommandSnapshot {
    /// A log limit of 256 MiB: the log stays bounded, and a database that
    /// logs less than that between clean closes never snapshots.
    fn default() -> Self {
        CommandSnapshot::LogLimit(256 << 20)
    }
}

/// `500ms`, `10s`, `5m`, or a bare number of milliseconds.
fn parse_duration(s: &str) -> Option<Duration> {
    let (digits, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => s.split_at(i),
        None => (s, "ms"),
    };
    let n: u64 = digits.parse().ok()?;
    match unit {
        "ms" => Some(Duration::from_millis(n)),
        "s" => Some(Duration::from_secs(n)),
        "m" => n.checked_mul(60).map(Duration::from_secs),
        _ => None,
    }
}

impl CommandSnapshot {
    /// `periodic=DUR` (`500ms`, `10s`, `5m`), `log-limit=SIZE` or `off`;
    /// `size` parses the text after `log-limit=`. Reads back what
    /// [`Self::name`] writes.
    pub fn parse(
        s: &str,
        size: impl Fn(&str) -> Option<u64>,
    ) -> std::result::Result<Self, String> {
        if s == "off" {
            return Ok(CommandSnapshot::Off);
        }
        if let Some(d) = s.strip_prefix("periodic=") {
            return parse_duration(d)
                .map(|interval| CommandSnapshot::Periodic { interval })
                .ok_or_else(|| format!("periodic={d:?} is not a duration (500ms, 10s, 5m)"));
        }
        if let Some(limit) = s.strip_prefix("log-limit=") {
            return size(limit)
                .map(CommandSnapshot::LogLimit)
                .ok_or_else(|| format!("log-limit={limit:?} is not a size"));
        }
        Err(format!(
            "unknown snapshot trigger {s:?}; available: periodic=DUR, log-limit=SIZE, off"
        ))
    }

    /// The trigger as [`Self::parse`] reads it.
    pub fn name(&self) -> String {
        match self {
            CommandSnapshot::Off => "off".into(),
            CommandSnapshot::Periodic { interval } => format!("periodic={}ms", interval.as_millis()),
            CommandSnapshot::LogLimit(bytes) => format!("log-limit={bytes}"),
        }
    }
}

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
    /// When to take a snapshot (default: a 256 MiB log limit).
    pub snapshot: CommandSnapshot,
    /// Log a digest of each call's write set with its record (CRC32C of
    /// the rows it wrote, 4 bytes), and have recovery check that every
    /// re-executed call wrote the same rows: a procedure that is not
    /// deterministic given its parameters is then reported at the call
    /// where the replay went another way (`Error::Corruption` naming the
    /// record), instead of leaving a different database. Costs a checksum
    /// over each write set; off by default, on in the crash tests.
    pub digests: bool,
    /// Sync pacing of the command log, as `PerWorkerOptions::
    /// log_sync_interval` paces a WAL partition: while pipelined calls
    /// stream in and none waits, the log syncs at most this often, or once
    /// a batch of calls waits, or (with half the cores idle) once the
    /// oldest has waited two syncs. Range: 0 to 1 s.
    pub sync_interval: Duration,
    /// Run each partition's calls on an executor thread of its own,
    /// which takes them from a queue one after another (seed
    /// 001 §II-B, VoltDB's sites; `procedure::executor`), rather than on
    /// the calling thread under the partition's lock. `Session::submit`
    /// then hands a call over without waiting for it to run. A
    /// multi-partition call is queued on every executor and run once all
    /// have reached it. Off by default: on a machine with fewer cores
    /// than workers plus executors, handing calls over costs more than
    /// it saves (decision 030, "Executor threads").
    pub executors: bool,
}

impl Default for CommandOptions {
    fn default() -> Self {
        CommandOptions {
            partitions: 1,
            snapshot: CommandSnapshot::default(),
            digests: false,
            sync_interval: crate::logstore::stream::SYNC_INTERVAL,
            executors: false,
        }
    }
}

impl CommandOptions {
    pub const MAX_PARTITIONS: usize = 1024;
    pub const MIN_LOG_LIMIT: u64 = 64 << 10;
    pub const MIN_INTERVAL: Duration = Duration::from_millis(10);
    pub const MAX_INTERVAL: Duration = Duration::from_secs(24 * 3600);

    pub fn validate(&self) -> Result<()> {
        if !(1..=Self::MAX_PARTITIONS).contains(&self.partitions) {
            return Err(Error::InvalidOptions(format!(
                "partitions = {} is out of range: 1 to {}",
                self.partitions,
                Self::MAX_PARTITIONS
            )));
        }
        match self.snapshot {
            CommandSnapshot::LogLimit(bytes) if bytes < Self::MIN_LOG_LIMIT => {
                Err(Error::InvalidOptions(format!(
                    "snapshot = LogLimit({bytes}) is below the smallest log limit, {} bytes",
                    Self::MIN_LOG_LIMIT
                )))
            }
            CommandSnapshot::Periodic { interval }
                if !(Self::MIN_INTERVAL..=Self::MAX_INTERVAL).contains(&interval) =>
            {
                Err(Error::InvalidOptions(format!(
                    "snapshot = Periodic {{ interval: {interval:?} }} is out of range: 10 ms to one day"
                )))
            }
            _ => Ok(()),
        }?;
        let max = crate::PerWorkerOptions::MAX_LOG_SYNC_INTERVAL;
        if self.sync_interval > max {
            return Err(Error::InvalidOptions(format!(
                "sync_interval = {:?} is out of range: 0 to {max:?}",
                self.sync_interval
            )));
        }
        Ok(())
    }
}
