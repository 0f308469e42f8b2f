//! The options of `waypoint bench`: the command-line flags, the same
//! options from a TOML file (`--config`), and their merge (a flag wins over
//! the file, the file over the workload's default).

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct BenchArgs {
    /// Workload: `tpcc` (TPC-C), `tpcb` (TPC-B, pgbench-like), `ycsb`
    /// (presets A-F), `voter` (phone-in election with a vote limit per
    /// phone), `engine` (load, point reads, range scans, verified reopen) or
    /// `updates` (small update transactions: the commit path).
    pub workload: String,
    /// A TOML file with any of these options (kebab-case keys, e.g.
    /// `value-size = 200`); command-line flags win.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Database directory: empty or missing (created and loaded) or a
    /// database this workload loaded before (reused). Default: a fresh
    /// temporary directory.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Worker threads, a session each [default: 2].
    #[arg(long)]
    pub workers: Option<usize>,
    /// Seconds measured (after the warm-up); for `engine`, per timed phase
    /// [default: 10].
    #[arg(long)]
    pub duration: Option<f64>,
    /// Whole seconds of warm-up, excluded from the summary (tpcc, tpcb, ycsb, voter)
    /// [default: 2].
    #[arg(long)]
    pub warmup: Option<u64>,
    /// Stop after this many transactions committed after the warm-up
    /// (tpcc, tpcb, ycsb, voter; --duration still bounds the run).
    #[arg(long)]
    pub txns: Option<u64>,
    /// Offered load: start at most this many transactions a second across
    /// the workers (tpcc, tpcb, ycsb, voter), to measure commit latency
    /// below the maximum [default: as fast as they go].
    #[arg(long)]
    pub rate: Option<f64>,
    /// Records: YCSB rows, TPC-B accounts, Voter phone numbers,
    /// engine/updates rows [default: 1000000; tpcb: 100000 per branch].
    #[arg(long)]
    pub records: Option<u64>,
    /// TPC-B branches (pgbench's scale) [default: 10].
    #[arg(long)]
    pub scale: Option<u64>,
    /// TPC-C warehouses [default: one per worker].
    #[arg(long)]
    pub warehouses: Option<u32>,
    /// TPC-C for tests: items, stock, customers and orders divided by this
    /// factor [default: 1, the spec's sizes].
    #[arg(long, hide = true)]
    pub tpcc_scale_down: Option<u32>,
    /// TPC-C without remote accesses: every order line supplied and every
    /// payment made by the home warehouse (LeanStore's `affinity` mode; a
    /// deviation from the spec's 1% remote lines and 15% remote payments,
    /// named in the report).
    #[arg(long)]
    pub no_remote: bool,
    /// TPC-C: PCT% of New-Orders (one remote line) and Payments (a remote
    /// customer) remote, and so multi-partition calls, the rest local,
    /// instead of the spec's remote draws (seed 001's multi-partition
    /// fraction; a deviation named in the report). Needs 2+ warehouses.
    #[arg(long, value_name = "PCT")]
    pub multi_partition: Option<u8>,
    /// Run TPC-C's transactions as stored procedures (`Session::call`)
    /// under every scheme, as `--scheme command` always does: a
    /// like-for-like comparison (recorded in the report's config).
    #[arg(long)]
    pub procedures: bool,
    /// Value size in bytes (ycsb, engine, updates) [default: 100].
    #[arg(long)]
    pub value_size: Option<usize>,
    /// Buffer pool memory, e.g. 64MiB or 1GiB [default: 1GiB].
    #[arg(long)]
    pub buffer: Option<String>,
    /// Page size, e.g. 16KiB [default: 16KiB].
    #[arg(long)]
    pub page_size: Option<String>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Directory for summary.json (and series.csv and the plots for tpcc,
    /// tpcb, ycsb and voter).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Persistence scheme: per-worker (a log partition per session, seed
    /// 000), aries (one central log under a latch, seed 000's baseline),
    /// aether (that log with Aether's consolidation array, decoupled
    /// buffer fill and flush pipelining), silor (memory-resident value
    /// logging with epoch group commit, seed 002) or none (no log: the
    /// cost of logging). The flags from --commit to --log-direct-io are
    /// the per-worker and central logs' options [default: per-worker].
    #[arg(long)]
    pub scheme: Option<String>,
    /// The former name of --scheme.
    #[arg(long, hide = true)]
    pub logging: Option<String>,
    /// Commit protocol: rfa-group, group, rfa, flush-all or async.
    #[arg(long)]
    pub commit: Option<String>,
    /// Checkpointing: continuous, full or none [default: continuous; full
    /// for aries and aether]; for silor: continuous, log-limit=SIZE or off
    /// [default: continuous, at least a second apart].
    #[arg(long)]
    pub checkpoint: Option<String>,
    /// WAL limit the checkpointer keeps the log near [default: 1GiB].
    #[arg(long)]
    pub wal_limit: Option<String>,
    /// Sync pacing, in microseconds: while pipelined commits stream in and
    /// none waits, a log partition syncs at most this often (or once 128 KiB
    /// or 32 commits wait, or, with half the cores idle, once a commit has
    /// waited two syncs); 0 syncs as soon as anything waits [default: 2000].
    /// Also paces the command log (--scheme command).
    #[arg(long)]
    pub sync_interval: Option<u64>,
    /// Log segment size: a segment file is closed beyond it [default: 16MiB;
    /// with checkpoints at most the larger of 1/32 of the WAL limit and 64 KiB].
    #[arg(long)]
    pub segment_size: Option<String>,
    /// Segment preallocation: keep each partition's next log segment
    /// written and synced ahead (a recycled pruned segment, else a
    /// zero-filled one), so log syncs do not grow files [default: true].
    #[arg(long, value_name = "BOOL")]
    pub wal_preallocate: Option<bool>,
    /// With preallocation: zero-fill the next segment while no pruned one
    /// is queued for reuse (until pruning starts), or let it grow as it
    /// fills; off suits file systems without a metadata journal
    /// [default: true].
    #[arg(long, value_name = "BOOL")]
    pub wal_zero_fill: Option<bool>,
    /// Buffer shards of continuous checkpointing [default: 64].
    #[arg(long)]
    pub checkpoint_shards: Option<usize>,
    /// Checkpoint increments that may run at once, when more than one is
    /// due [default: a quarter of the cores, 1 to 8].
    #[arg(long)]
    pub checkpoint_threads: Option<usize>,
    /// `silor`: checkpointer threads, each walking a slice of every table
    /// [default: 1].
    #[arg(long)]
    pub checkpointers: Option<usize>,
    /// `silor`: logger threads, each with its own log files [default: 1].
    #[arg(long)]
    pub loggers: Option<usize>,
    /// `command`: when to take a snapshot: periodic=DUR (500ms, 10s, 5m),
    /// log-limit=SIZE or off [default: log-limit=256MiB].
    #[arg(long)]
    pub snapshot: Option<String>,
    /// `command`: run each partition's calls on an executor thread of its
    /// own, to which workers hand their calls over (VoltDB's sites),
    /// rather than on the workers under the partition's lock [default: false].
    #[arg(long, value_name = "BOOL")]
    pub executors: Option<bool>,
    /// Threads for analysis, redo and undo when the database needs
    /// recovery [default: the cores the process may use].
    #[arg(long)]
    pub recovery_threads: Option<usize>,
    /// Move pruned log segments to this directory (relative paths are below
    /// the database directory) instead of deleting them.
    #[arg(long)]
    pub wal_archive: Option<PathBuf>,
    /// Open the data file with O_DIRECT.
    #[arg(long)]
    pub direct_io: bool,
    /// Write the log's segment files with O_DIRECT, in whole 4 KiB blocks
    /// (buffered where the file system refuses it) [default: true].
    #[arg(long, value_name = "BOOL")]
    pub log_direct_io: Option<bool>,
    /// Commits in flight per worker; 1 waits for each commit [default:
    /// 128; silor: 65536, as it acknowledges once per 40 ms epoch and 128
    /// would cap a worker near 3,200 txn/s; updates: 1].
    #[arg(long, alias = "pipeline")]
    pub in_flight: Option<usize>,
    /// `updates`: records updated per transaction [default: 4].
    #[arg(long)]
    pub updates_per_txn: Option<usize>,
    /// `updates`: each worker updates only its own share of the records
    /// (disjoint pages: no remote flushes under RFA).
    #[arg(long)]
    pub disjoint: bool,
    /// YCSB preset a-f [default: a].
    #[arg(long)]
    pub preset: Option<String>,
    /// YCSB key choice: uniform, zipfian or latest [default: the preset's].
    #[arg(long)]
    pub distribution: Option<String>,
    /// YCSB zipfian constant [default: 0.99].
    #[arg(long)]
    pub theta: Option<f64>,
    /// YCSB operations per transaction [default: 1].
    #[arg(long)]
    pub ops_per_txn: Option<usize>,
    /// Voter contestants [default: 6].
    #[arg(long)]
    pub contestants: Option<u32>,
    /// Voter votes allowed per phone number [default: 2].
    #[arg(long)]
    pub max_votes: Option<u32>,
    /// Pin worker threads to cores (tpcc, tpcb, ycsb, voter) [default: when
    /// there are at least as many cores as workers].
    #[arg(long, overrides_with = "no_pin")]
    pub pin: bool,
    /// Do not pin worker threads to cores.
    #[arg(long, overrides_with = "pin")]
    pub no_pin: bool,
}

/// The same options in a TOML file; an unknown key is an error.
#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct FileOptions {
    dir: Option<PathBuf>,
    workers: Option<usize>,
    duration: Option<f64>,
    warmup: Option<u64>,
    txns: Option<u64>,
    rate: Option<f64>,
    records: Option<u64>,
    scale: Option<u64>,
    warehouses: Option<u32>,
    value_size: Option<usize>,
    buffer: Option<String>,
    page_size: Option<String>,
    seed: Option<u64>,
    out: Option<PathBuf>,
    scheme: Option<String>,
    logging: Option<String>,
    commit: Option<String>,
    checkpoint: Option<String>,
    wal_limit: Option<String>,
    sync_interval: Option<u64>,
    segment_size: Option<String>,
    wal_preallocate: Option<bool>,
    wal_zero_fill: Option<bool>,
    checkpoint_shards: Option<usize>,
    checkpoint_threads: Option<usize>,
    checkpointers: Option<usize>,
    loggers: Option<usize>,
    snapshot: Option<String>,
    executors: Option<bool>,
    recovery_threads: Option<usize>,
    wal_archive: Option<PathBuf>,
    direct_io: Option<bool>,
    log_direct_io: Option<bool>,
    #[serde(alias = "pipeline")]
    in_flight: Option<usize>,
    updates_per_txn: Option<usize>,
    disjoint: Option<bool>,
    no_remote: Option<bool>,
    multi_partition: Option<u8>,
    procedures: Option<bool>,
    preset: Option<String>,
    distribution: Option<String>,
    theta: Option<f64>,
    ops_per_txn: Option<usize>,
    contestants: Option<u32>,
    max_votes: Option<u32>,
    /// true: `--pin`, false: `--no-pin`.
    pin: Option<bool>,
}

fn read_file(path: &Path) -> Result<FileOptions> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read --config {}", path.display()))?;
    toml::from_str(&text).map_err(|e| {
        let line = e
            .span()
            .map(|s| format!(" (line {})", text[..s.start].matches('\n').count() + 1))
            .unwrap_or_default();
        anyhow::anyhow!("{}{line}: {}", path.display(), e.message().trim())
    })
}

/// `--checkpoint` under `--scheme silor` (`bench`, `crash-test`,
/// `simulate`): `continuous`, `continuous=MS`, `log-limit=SIZE` or `off`.
pub fn silor_checkpoint(text: &str) -> Result<waypoint::SilorCheckpoint> {
    waypoint::SilorCheckpoint::parse(text, |s| parse_size("checkpoint", s).ok().map(|b| b as u64))
        .map_err(|e| anyhow::anyhow!("--checkpoint: {e}"))
}

impl BenchArgs {
    /// Fill every option not given on the command line from `--config`.
    pub fn merge_config_file(mut self) -> Result<Self> {
        let Some(path) = &self.config else {
            return Ok(self);
        };
        let f = read_file(path)?;
        macro_rules! fill {
            ($($field:ident),*) => { $( if self.$field.is_none() { self.$field = f.$field; } )* };
        }
        fill!(
            dir,
            workers,
            duration,
            warmup,
            txns,
            rate,
            records,
            scale,
            warehouses,
            value_size,
            buffer,
            page_size,
            seed,
            out,
            scheme,
            logging,
            commit,
            checkpoint,
            wal_limit,
            sync_interval,
            segment_size,
            wal_preallocate,
            wal_zero_fill,
            checkpoint_shards,
            checkpoint_threads,
            checkpointers,
            loggers,
            snapshot,
            executors,
            recovery_threads,
            wal_archive,
            log_direct_io,
            in_flight,
            updates_per_txn,
            preset,
            distribution,
            theta,
            ops_per_txn,
            contestants,
            max_votes,
            multi_partition
        );
        if !self.procedures && f.procedures == Some(true) {
            self.procedures = true;
        }
        if !self.disjoint && f.disjoint == Some(true) {
            self.disjoint = true;
        }
        if !self.no_remote && f.no_remote == Some(true) {
            self.no_remote = true;
        }
        if !self.direct_io && f.direct_io == Some(true) {
            self.direct_io = true;
        }
        if !self.pin && !self.no_pin {
            match f.pin {
                Some(true) => self.pin = true,
                Some(false) => self.no_pin = true,
                None => {}
            }
        }
        Ok(self)
    }

    /// `--pin`/`--no-pin`: Some(choice), or None to pin when there are
    /// enough cores.
    pub fn pin(&self) -> Option<bool> {
        match (self.pin, self.no_pin) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        }
    }

    pub fn workers(&self) -> usize {
        self.workers.unwrap_or(2)
    }

    pub fn duration(&self) -> f64 {
        self.duration.unwrap_or(10.0)
    }

    pub fn buffer_name(&self) -> &str {
        self.buffer.as_deref().unwrap_or("1GiB")
    }

    pub fn page_size_name(&self) -> &str {
        self.page_size.as_deref().unwrap_or("16KiB")
    }

    /// `--scheme` (or its former name `--logging`), or the default.
    pub fn scheme_name(&self) -> &str {
        self.scheme
            .as_deref()
            .or(self.logging.as_deref())
            .unwrap_or(waypoint::SchemeKind::default().name())
    }

    /// `--commit`, or the scheme's default (group for a central log, which
    /// has no other log for RFA to avoid).
    pub fn commit_name(&self) -> &str {
        match self.commit.as_deref() {
            Some(c) => c,
            None if is_central(self.scheme_name()) => "group",
            None => "rfa-group",
        }
    }

    /// `--checkpoint`, or the scheme's default (full checkpoints for a
    /// central log, as seed 000 §4 configured its baselines:
    /// `CentralOptions::default`).
    pub fn checkpoint(&self) -> Result<waypoint::CheckpointMode> {
        if self.scheme_name() == waypoint::SchemeKind::Silor.name() {
            // `--checkpoint` is `silor`'s trigger (`silor_options`).
            return Ok(waypoint::CheckpointMode::default());
        }
        let name = match self.checkpoint.as_deref() {
            Some(c) => c,
            None if is_central(self.scheme_name()) => "full",
            None => "continuous",
        };
        match waypoint::CheckpointMode::parse(name) {
            Some(m) => Ok(m),
            None => bail!("unknown --checkpoint {name:?}; available: continuous, full, none"),
        }
    }

    /// The `silor` scheme's options: `--checkpoint continuous|log-limit=SIZE|off`
    /// (default continuous, at least a second apart), `--checkpointers`,
    /// `--loggers`; refused with another scheme.
    pub fn silor_options(&self) -> Result<waypoint::SilorOptions> {
        let d = waypoint::SilorOptions::default();
        if self.scheme_name() != waypoint::SchemeKind::Silor.name() {
            if self.checkpointers.is_some() || self.loggers.is_some() {
                bail!("--checkpointers and --loggers are options of --scheme silor");
            }
            return Ok(d);
        }
        let checkpoint = match self.checkpoint.as_deref() {
            None => d.checkpoint,
            Some(c) => silor_checkpoint(c)?,
        };
        Ok(waypoint::SilorOptions {
            loggers: self.loggers.unwrap_or(d.loggers),
            checkpoint,
            checkpointers: self.checkpointers.unwrap_or(d.checkpointers),
        })
    }

    /// The `command` scheme's snapshot trigger: `--snapshot
    /// periodic=DUR|log-limit=SIZE|off`; refused with another scheme.
    pub fn command_snapshot(&self) -> Result<waypoint::CommandSnapshot> {
        parse_command_snapshot(self.snapshot.as_deref(), self.scheme_name())
    }

    /// `--executors`, refused with another scheme than `command`.
    pub fn command_executors(&self) -> Result<bool> {
        match self.executors {
            Some(_) if self.scheme_name() != "command" => bail!(
                "--executors is an option of --scheme command, not of --scheme {}",
                self.scheme_name()
            ),
            given => Ok(given.unwrap_or(waypoint::CommandOptions::default().executors)),
        }
    }

    /// `--sync-interval`, or the engine's default.
    pub fn sync_interval_us(&self) -> u64 {
        self.sync_interval.unwrap_or_else(|| {
            waypoint::PerWorkerOptions::default()
                .log_sync_interval
                .as_micros() as u64
        })
    }

    /// `--wal-preallocate`, or the engine's default.
    pub fn wal_preallocate(&self) -> bool {
        self.wal_preallocate
            .unwrap_or(waypoint::PerWorkerOptions::default().wal_preallocate)
    }

    /// `--wal-zero-fill`, or the engine's default.
    pub fn wal_zero_fill(&self) -> bool {
        self.wal_zero_fill
            .unwrap_or(waypoint::PerWorkerOptions::default().wal_zero_fill)
    }

    /// `--log-direct-io`, or the engine's default.
    pub fn log_direct_io(&self) -> bool {
        self.log_direct_io
            .unwrap_or(waypoint::PerWorkerOptions::default().log_direct_io)
    }

    /// `--segment-size` in bytes, or the engine's default.
    pub fn segment_bytes(&self) -> Result<u64> {
        match self.segment_size.as_deref() {
            Some(s) => Ok(parse_size("segment-size", s)? as u64),
            None => Ok(waypoint::PerWorkerOptions::default().wal_segment_bytes),
        }
    }

    pub fn wal_limit_bytes(&self) -> Result<usize> {
        parse_size("wal-limit", self.wal_limit.as_deref().unwrap_or("1GiB"))
    }

    pub fn buffer_bytes(&self) -> Result<usize> {
        parse_size("buffer", self.buffer_name())
    }

    pub fn page_size_bytes(&self) -> Result<usize> {
        parse_size("page-size", self.page_size_name())
    }

    /// The scheme, refusing an unknown name, `--scheme` and `--logging`
    /// that disagree, a log option given with a scheme without a log, and
    /// an RFA commit protocol for a central log.
    pub fn scheme(&self) -> Result<waypoint::SchemeKind> {
        if let (Some(a), Some(b)) = (&self.scheme, &self.logging) {
            if a != b {
                bail!("--scheme {a:?} and --logging {b:?} disagree (--logging is the former name of --scheme)");
            }
        }
        let name = self.scheme_name();
        let Some(kind) = waypoint::SchemeKind::parse(name) else {
            let names: Vec<_> = waypoint::SchemeKind::ALL.iter().map(|k| k.name()).collect();
            bail!("unknown --scheme {name:?}; available: {}", names.join(", "));
        };
        if is_central(name) {
            if let Some(c @ ("rfa" | "rfa-group")) = self.commit.as_deref() {
                bail!("--commit {c} is not an option of --scheme {name}: RFA avoids flushing other sessions' logs, and a central log has none (use group, flush-all or async)");
            }
        }
        // silor's value log and the command log have none of the page
        // logs' options but sync pacing (the command log's).
        if !kind.recovers_from_log()
            || matches!(
                kind,
                waypoint::SchemeKind::Silor | waypoint::SchemeKind::Command
            )
        {
            let given = [
                ("--commit", self.commit.is_some()),
                (
                    "--checkpoint",
                    self.checkpoint.is_some() && kind != waypoint::SchemeKind::Silor,
                ),
                ("--wal-limit", self.wal_limit.is_some()),
                (
                    "--sync-interval",
                    self.sync_interval.is_some() && kind != waypoint::SchemeKind::Command,
                ),
                ("--segment-size", self.segment_size.is_some()),
                ("--wal-preallocate", self.wal_preallocate.is_some()),
                ("--wal-zero-fill", self.wal_zero_fill.is_some()),
                ("--checkpoint-shards", self.checkpoint_shards.is_some()),
                ("--checkpoint-threads", self.checkpoint_threads.is_some()),
                ("--wal-archive", self.wal_archive.is_some()),
                ("--log-direct-io", self.log_direct_io.is_some()),
            ];
            if let Some((flag, _)) = given.iter().find(|(_, given)| *given) {
                bail!(
                    "{flag} is an option of the per-worker and aries logs, not of --scheme {name}"
                );
            }
        }
        Ok(kind)
    }

    pub fn commit(&self) -> Result<waypoint::CommitProtocol> {
        match waypoint::CommitProtocol::parse(self.commit_name()) {
            Some(c) => Ok(c),
            None => bail!(
                "unknown --commit {:?}; available: rfa-group, group, rfa, flush-all, async",
                self.commit_name()
            ),
        }
    }

    /// The checks common to every workload: names and sizes parse, and
    /// the driver's and the engine's options are in their ranges
    /// (`DriverConfig::validate`, which checks the engine's with
    /// `Options::validate`), before anything is opened.
    pub fn check(&self) -> Result<()> {
        if self.records == Some(0) {
            bail!("--records 0 is out of range: at least 1");
        }
        if self.value_size.is_some()
            && !matches!(self.workload.as_str(), "ycsb" | "engine" | "updates")
        {
            bail!("--value-size applies to the ycsb, engine and updates workloads only");
        }
        if self.scheme()? == waypoint::SchemeKind::Command
            && !matches!(self.workload.as_str(), "voter" | "tpcc")
        {
            bail!(
                "--scheme command runs workloads written as stored procedures: voter, tpcc (not {})",
                self.workload
            );
        }
        if (self.procedures || self.multi_partition.is_some()) && self.workload != "tpcc" {
            bail!("--procedures and --multi-partition apply to the tpcc workload only");
        }
        if let Some(pct) = self.multi_partition {
            if pct > 100 {
                bail!("--multi-partition {pct} is out of range: 0 to 100");
            }
            if self.no_remote {
                bail!("--multi-partition and --no-remote both set the remote accesses: give one");
            }
        }
        crate::bench_driver::driver_config(self)?
            .validate()
            .map_err(|e| name_flag(e, BENCH_FLAGS))
    }
}

/// The flags of `bench` that set the options a range error may name
/// (the engine's as `Options` spells them, the driver's and the
/// workloads' as their configurations do).
pub const BENCH_FLAGS: &[(&str, &str)] = &[
    ("page_size", "--page-size"),
    ("buffer_pool_bytes", "--buffer"),
    ("recovery_threads", "--recovery-threads"),
    ("wal_segment_bytes", "--segment-size"),
    ("checkpoint_shards", "--checkpoint-shards"),
    ("checkpoint_threads", "--checkpoint-threads"),
    ("wal_limit_bytes", "--wal-limit"),
    ("log_sync_interval", "--sync-interval"),
    ("sync_interval", "--sync-interval"),
    ("workers", "--workers"),
    ("duration_secs", "--duration"),
    ("warmup_secs", "--warmup"),
    ("max_txns", "--txns"),
    ("rate", "--rate"),
    ("in_flight", "--in-flight"),
    ("pipeline", "--in-flight"),
    ("records", "--records"),
    ("value_size", "--value-size"),
    ("ops_per_txn", "--ops-per-txn"),
    ("updates_per_txn", "--updates-per-txn"),
    ("branches", "--scale"),
];

/// A range error (`OPTION = VALUE is out of range: RANGE`, from
/// `Options::validate` or a benchmark configuration) worded for the
/// command line: the flag that set the option in its place. An error that
/// names no option of `flags` is kept as it is.
pub fn name_flag(e: impl std::fmt::Display, flags: &[(&str, &str)]) -> anyhow::Error {
    let text = e.to_string();
    let bare = text.strip_prefix("invalid options: ").unwrap_or(&text);
    let flag = bare.split_once(" = ").and_then(|(option, rest)| {
        let (_, flag) = flags.iter().find(|(o, _)| *o == option)?;
        Some(format!("{flag} {rest}"))
    });
    anyhow::anyhow!(flag.unwrap_or(text))
}

pub fn parse_size(what: &str, s: &str) -> Result<usize> {
    let n = match parse_size::parse_size(s) {
        Ok(n) => n,
        Err(parse_size::Error::PosOverflow) => {
            bail!("--{what} {s:?} is too large (more than 2^64 bytes)")
        }
        Err(e) => {
            bail!("--{what} {s:?} is not a size (examples: 64MiB, 1GiB, 16KiB): {e}")
        }
    };
    usize::try_from(n).with_context(|| format!("--{what} {s:?} is too large"))
}

/// Is `name` a central-log scheme (`aries`, `aether`), whose commit
/// protocols exclude RFA?
fn is_central(name: &str) -> bool {
    matches!(
        waypoint::SchemeKind::parse(name),
        Some(waypoint::SchemeKind::Aries | waypoint::SchemeKind::Aether)
    )
}

/// `--snapshot`, which only `--scheme command` takes.
pub fn parse_command_snapshot(
    given: Option<&str>,
    scheme: &str,
) -> Result<waypoint::CommandSnapshot> {
    let Some(s) = given else {
        return Ok(waypoint::CommandSnapshot::default());
    };
    if scheme != waypoint::SchemeKind::Command.name() {
        bail!("--snapshot is an option of --scheme command, not of --scheme {scheme}");
    }
    waypoint::CommandSnapshot::parse(s, |v| parse_size("snapshot", v).ok().map(|b| b as u64))
        .map_err(|e| anyhow::anyhow!("--snapshot: {e}"))
}
