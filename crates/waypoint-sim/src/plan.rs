//! A seed's plan: everything a simulation run chooses, derived from the
//! seed alone through one `SmallRng`: the workload, the engine's option set
//! and the fault schedule. Same seed, same plan (the threads' interleaving,
//! and so the exact operations the faults hit, may still differ).
//!
//! It owns the ranges each choice is drawn from and the one-line
//! description of a plan.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::fmt::Write;
use waypoint::io::{CrashPolicy, FaultKind};
use waypoint::{
    CentralOptions, CheckpointMode, CommitProtocol, PerWorkerOptions, SchemeKind, SilorCheckpoint,
    SilorOptions,
};

/// The workloads a seed can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Bank transfers with a history row each (`bank`).
    Bank,
    /// Transfers that also flip contended toggle rows (`bank`).
    Toggles,
    /// YCSB-like updates, inserts and deletes on a small key space
    /// (`updates`).
    Updates,
    /// TPC-C's five transactions on one tiny warehouse (`tpcc`).
    Tpcc,
}

impl Workload {
    pub const ALL: [Workload; 4] = [
        Workload::Bank,
        Workload::Toggles,
        Workload::Updates,
        Workload::Tpcc,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Bank => "bank",
            Workload::Toggles => "toggles",
            Workload::Updates => "updates",
            Workload::Tpcc => "tpcc",
        }
    }

    /// Is the workload written as stored procedures too (so it can run
    /// under the `command` scheme, which `--scheme command` forces)? The
    /// bank's transfers and TPC-C's five transactions are.
    pub fn runs_as_procedures(self) -> bool {
        matches!(self, Workload::Bank | Workload::Toggles | Workload::Tpcc)
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|w| w.name() == s)
    }
}

/// What the caller forces on every seed. The defaults are what
/// `waypoint simulate` runs.
#[derive(Debug, Clone, Default)]
pub struct SimOptions {
    /// Run this workload on every seed (the other choices stay as the seed
    /// draws them).
    pub workload: Option<Workload>,
    /// UNSAFE, for showing that the simulator catches lost commits:
    /// acknowledge commits at once (`CommitProtocol::Async`), which loses the
    /// last ones on power loss by design.
    pub unsafe_async: bool,
    /// UNSAFE, same purpose: switch off the RFA dependency check
    /// (`Wal::set_broken_rfa_for_tests`; `testing` feature only).
    #[cfg(feature = "testing")]
    pub broken_rfa: bool,
    /// UNSAFE, same purpose: the `none` scheme writes pages without first
    /// marking the data file unclean
    /// (`NoneScheme::set_broken_unclean_mark_for_tests`; `testing` only).
    #[cfg(feature = "testing")]
    pub broken_unclean_mark: bool,
    /// UNSAFE, same purpose: a commit is acknowledged without waiting for
    /// the flush of its commit record
    /// (`Wal::set_broken_commit_ack_for_tests`; `testing` only).
    #[cfg(feature = "testing")]
    pub broken_commit_ack: bool,
    /// UNSAFE, same purpose: a central log's reservations are released
    /// for writing before they are filled
    /// (`Wal::set_broken_early_release_for_tests`; `testing` only).
    #[cfg(feature = "testing")]
    pub broken_early_release: bool,
    /// Multiplies the transactions per session (default 1.0).
    pub scale: Option<f64>,
    /// Run this persistence scheme on every seed instead of the one each
    /// seed draws.
    pub scheme: Option<SchemeKind>,
    /// `silor` only: this checkpoint trigger, checkpointer and logger
    /// count on every seed instead of the ones each seed draws.
    pub silor_checkpoint: Option<SilorCheckpoint>,
    pub silor_checkpointers: Option<usize>,
    pub silor_loggers: Option<usize>,
}

/// A fault injected after the workload's database is open, `after`
/// operations later, on a path containing `path` if set.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedFault {
    pub kind: FaultKind,
    pub after: u64,
    pub path: Option<&'static str>,
}

/// Everything one seed chooses.
#[derive(Debug, Clone)]
pub struct Plan {
    pub seed: u64,
    pub workload: Workload,
    pub protocol: CommitProtocol,
    pub checkpoint: CheckpointMode,
    pub shards: usize,
    pub wal_limit: u64,
    pub checkpoint_threads: usize,
    pub buffer_pages: usize,
    pub sessions: u32,
    pub txns_per_session: u32,
    /// Seeds the sessions' own generators.
    pub workload_seed: u64,
    /// An EIO or ENOSPC before the freeze.
    pub early_fault: Option<PlannedFault>,
    /// The crash point (kind `Freeze`).
    pub freeze: PlannedFault,
    /// If the workload ends before the freeze fired, the disk freezes this
    /// many operations into the (then unclean) close.
    pub close_freeze_after: u64,
    pub crash: CrashPolicy,
    /// Sync pacing (`PerWorkerOptions::log_sync_interval`), in microseconds: 0 syncs
    /// whenever a commit is waiting, the default paces. Drawn last, so a
    /// seed's other choices are what they were before this draw existed.
    pub sync_interval_us: u64,
    /// A second crash during recovery: freeze after this many operations of
    /// the reopen, then this crash policy.
    pub recovery_crash: Option<(u64, CrashPolicy)>,
    /// Log files behave as `O_DIRECT` ones (`SimStorage::set_direct_log`):
    /// the log writes whole aligned blocks and rewrites its partial last
    /// block. Drawn after the sync interval, for the same reason.
    pub direct_log: bool,
    /// `PerWorkerOptions::wal_zero_fill`: off in one seed in four (new segments grow
    /// until pruned ones are recycled). Drawn after the direct log, for the
    /// same reason.
    pub zero_fill: bool,
    /// The persistence scheme: `none` in one seed in eight, of the others
    /// `aries` in one in four, of the rest `aether` in one in three, of
    /// what remains `silor` in one in four, else per-worker (the log
    /// options above are drawn either way; the central logs take them
    /// through `CentralOptions::from_log`, `silor` ignores them). Drawn
    /// last, for the same reason.
    pub scheme: SchemeKind,
    /// The `silor` scheme's options (`silor_options`), unused under
    /// another scheme.
    pub silor: SilorOptions,
}

pub const PAGE_SIZE: usize = 4096;

/// A TPC-C transaction issues about 15 times the storage operations of a
/// transfer (30 to 65 against 2 to 7, measured: its data is a few times
/// the buffer, so it reads and evicts), so its fault points are drawn as
/// for the others and then placed this many times further in, where they
/// land inside the workload as often.
pub const TPCC_FAULT_SCALE: u64 = 16;

// The `silor` choices come from bits of the workload's seed, not from
// further draws, so the seeds of the other schemes keep their plans.

/// The `silor` scheme's logger threads: one or two, by the seed.
fn silor_loggers(workload_seed: u64) -> usize {
    1 + (workload_seed % 2) as usize
}

/// The `silor` scheme's checkpoint threads: one or two, by the seed.
fn silor_checkpointers(workload_seed: u64) -> usize {
    1 + (workload_seed / 8 % 2) as usize
}

/// The `silor` scheme's checkpoint trigger, by the seed: continuous with
/// no pause in five seeds of eight (so crashes land inside checkpoints
/// and their installs), the log limit at its minimum in two (seed 000's
/// baseline; the simulated runs log little, so few of them reach it), off
/// in one (026's logs-only recovery).
fn silor_checkpoint(workload_seed: u64) -> SilorCheckpoint {
    match workload_seed / 16 % 8 {
        0 => SilorCheckpoint::Off,
        1 | 2 => SilorCheckpoint::LogLimit(SilorOptions::MIN_LOG_LIMIT),
        _ => SilorCheckpoint::Continuous {
            min_interval: std::time::Duration::ZERO,
        },
    }
}

/// Paths a freeze or an early fault may be aimed at.
const PATHS: [&str; 3] = ["data.waypoint", ".wal", "checkpoint.waypoint"];

fn policy(rng: &mut SmallRng) -> CrashPolicy {
    match rng.gen_range(0..4) {
        0 => CrashPolicy::DropAll,
        1 => CrashPolicy::KeepAll,
        _ => CrashPolicy::Random {
            keep: rng.gen_range(0.0..1.0),
            tear: rng.gen_bool(0.7),
        },
    }
}

impl Plan {
    /// The plan of `seed`. Every draw happens whatever `options` force, so
    /// forcing one choice leaves the others as the seed drew them.
    ///
    /// TPC-C came last: a quarter of the seeds run it, decided by a draw
    /// after all the others, so every other seed makes exactly the choices
    /// it made before TPC-C existed (the seeds recorded in
    /// `docs/RELIABILITY.md` and the regression tests still name the same
    /// runs; a seed that now draws TPC-C reruns its old plan with its old
    /// workload forced). TPC-C's fault points are scaled by
    /// [`TPCC_FAULT_SCALE`], its only difference from the other workloads'
    /// plans of the same seed.
    pub fn new(seed: u64, options: &SimOptions) -> Self {
        let mut rng = SmallRng::seed_from_u64(seed);
        let drawn = Workload::ALL[rng.gen_range(0..3)];
        let protocols = [
            CommitProtocol::RfaGroup,
            CommitProtocol::Rfa,
            CommitProtocol::Group,
            CommitProtocol::FlushAll,
        ];
        let mut protocol = protocols[rng.gen_range(0..4)];
        if options.unsafe_async {
            protocol = CommitProtocol::Async;
        }
        let checkpoint = match rng.gen_range(0..4) {
            0 => CheckpointMode::Full,
            1 => CheckpointMode::None,
            _ => CheckpointMode::Continuous,
        };
        let shards = rng.gen_range(1..=8);
        // 32 KiB .. 1 MiB, log-uniform: small limits prune often.
        let wal_limit = (32u64 << 10) << rng.gen_range(0..=5);
        let wal_limit = wal_limit + rng.gen_range(0..wal_limit);
        let wal_limit = wal_limit.min(1 << 20);
        let checkpoint_threads = rng.gen_range(1..=2);
        let buffer_pages = rng.gen_range(16..=64);
        let sessions = rng.gen_range(1..=3);
        // The same for every workload, so that forcing one changes nothing
        // else (a TPC-C transaction writes more, but each commits once).
        let base = 150;
        let scale = options.scale.unwrap_or(1.0);
        let txns_per_session = ((rng.gen_range(base / 2..=base) as f64) * scale).max(1.0) as u32;
        let workload_seed = rng.gen();
        // Roughly the operations the workload issues, so most freezes land
        // inside it and some in the close.
        let span = 3 * txns_per_session as u64 * sessions as u64;
        let mut freeze = PlannedFault {
            kind: FaultKind::Freeze,
            after: rng.gen_range(20..span.max(40)),
            path: rng.gen_bool(0.4).then(|| PATHS[rng.gen_range(0..3)]),
        };
        let mut early_fault = match rng.gen_range(0..10) {
            0 | 1 => Some(FaultKind::Eio),
            2 => Some(FaultKind::Enospc),
            _ => None,
        }
        .map(|kind| PlannedFault {
            kind,
            after: rng.gen_range(5..freeze.after),
            path: rng.gen_bool(0.5).then(|| PATHS[rng.gen_range(0..2)]),
        });
        let close_freeze_after = rng.gen_range(1..400);
        let crash = policy(&mut rng);
        let recovery_crash = rng.gen_bool(0.3).then(|| {
            let at = rng.gen_range(1..300);
            let keep = rng.gen_range(0.0..1.0);
            (at, CrashPolicy::Random { keep, tear: true })
        });
        let drawn = if rng.gen_ratio(1, 4) {
            Workload::Tpcc
        } else {
            drawn
        };
        // Under `command` only the workloads written as procedures run.
        let drawn = if options.scheme == Some(SchemeKind::Command) && !drawn.runs_as_procedures() {
            Workload::Bank
        } else {
            drawn
        };
        let workload = options.workload.unwrap_or(drawn);
        let sync_interval_us = [0, 500, 2000][rng.gen_range(0..3)];
        let direct_log = rng.gen_bool(0.5);
        let zero_fill = !rng.gen_ratio(1, 4);
        let drawn_scheme = if rng.gen_ratio(1, 8) {
            SchemeKind::None
        } else if rng.gen_ratio(1, 4) {
            // Drawn after none, so the none seeds stay what they were.
            SchemeKind::Aries
        } else if rng.gen_ratio(1, 3) {
            // Drawn after aries, so the none and aries seeds stay.
            SchemeKind::Aether
        } else if rng.gen_ratio(1, 4) {
            // Drawn after aether, so the none, aries and aether seeds stay.
            SchemeKind::Silor
        } else {
            // `command` is not drawn: it runs only the workloads written as
            // stored procedures (bank, toggles, tpcc), and a seed's choices must
            // not depend on its workload. `--scheme command` forces it.
            SchemeKind::PerWorker
        };
        let scheme = options.scheme.unwrap_or(drawn_scheme);
        if scheme == SchemeKind::Command {
            // Nor has `command`: aim at its snapshot files (a crash while
            // one is written) or its snapshot meta file (a crash in an
            // install), by the seed.
            let aim = if workload_seed % 4 < 2 {
                ".snap"
            } else {
                "snapshot.meta"
            };
            for f in std::iter::once(&mut freeze).chain(early_fault.as_mut()) {
                if f.path == Some("checkpoint.waypoint") {
                    f.path = Some(aim);
                }
            }
        }
        if scheme == SchemeKind::Silor {
            // `silor` has no checkpoint.waypoint: aim at its checkpoint
            // files (a crash while one is written) or its pepoch file (a
            // crash in an install, or a pepoch write), by the seed.
            let aim = if workload_seed % 4 < 2 {
                ".snap"
            } else {
                "pepoch"
            };
            for f in std::iter::once(&mut freeze).chain(early_fault.as_mut()) {
                if f.path == Some("checkpoint.waypoint") {
                    f.path = Some(aim);
                }
            }
        }
        // Under `command` a TPC-C transaction writes one small record and
        // no page: unscaled, the faults land in the workload as the bank's do.
        if workload == Workload::Tpcc && scheme != SchemeKind::Command {
            freeze.after *= TPCC_FAULT_SCALE;
            if let Some(f) = &mut early_fault {
                f.after *= TPCC_FAULT_SCALE;
            }
        }
        let silor = SilorOptions {
            loggers: options
                .silor_loggers
                .unwrap_or_else(|| silor_loggers(workload_seed)),
            checkpoint: options
                .silor_checkpoint
                .unwrap_or_else(|| silor_checkpoint(workload_seed)),
            checkpointers: options
                .silor_checkpointers
                .unwrap_or_else(|| silor_checkpointers(workload_seed)),
        };
        Plan {
            seed,
            workload,
            protocol,
            checkpoint,
            shards,
            wal_limit,
            checkpoint_threads,
            buffer_pages,
            sessions,
            txns_per_session,
            workload_seed,
            early_fault,
            freeze,
            close_freeze_after,
            crash,
            recovery_crash,
            sync_interval_us,
            direct_log,
            zero_fill,
            scheme,
            silor,
        }
    }

    /// The `command` scheme's partitions: one or two, by the seed.
    pub fn command_partitions(&self) -> usize {
        1 + (self.workload_seed / 2 % 2) as usize
    }

    /// Whether the `command` scheme's calls run on executor threads: on
    /// half the seeds (independent of the partition count).
    pub fn command_executors(&self) -> bool {
        self.workload_seed / 4 % 2 == 1
    }

    /// One line: the workload, the options and the fault schedule.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{} x{} sessions x{} txns, ",
            self.workload.name(),
            self.sessions,
            self.txns_per_session
        );
        match self.scheme {
            // No log, so none of the log's options.
            SchemeKind::None => s.push_str("scheme none, "),
            SchemeKind::Silor => {
                let _ = write!(
                    s,
                    "scheme silor, {} loggers, checkpoint {} by {} threads, ",
                    self.silor.loggers,
                    self.silor.checkpoint.name(),
                    self.silor.checkpointers
                );
            }
            SchemeKind::Command => {
                let _ = write!(
                    s,
                    "scheme command, {} partitions{}, snapshots every 10 ms, ",
                    self.command_partitions(),
                    if self.command_executors() {
                        " on executors"
                    } else {
                        ""
                    }
                );
            }
            SchemeKind::PerWorker | SchemeKind::Aries | SchemeKind::Aether => {
                let protocol = match self.scheme {
                    SchemeKind::Aries | SchemeKind::Aether => {
                        let _ = write!(s, "scheme {}, ", self.scheme);
                        CentralOptions::from_log(PerWorkerOptions {
                            commit: self.protocol,
                            ..PerWorkerOptions::default()
                        })
                        .log
                        .commit
                    }
                    _ => self.protocol,
                };
                let _ = write!(
                    s,
                    "commit {}, checkpoint {}, {} shards, {} ckpt threads, wal limit {} KiB, ",
                    protocol_name(protocol),
                    checkpoint_name(self.checkpoint),
                    self.shards,
                    self.checkpoint_threads,
                    self.wal_limit >> 10
                );
            }
        }
        let _ = write!(s, "buffer {} pages", self.buffer_pages);
        if let Some(f) = &self.early_fault {
            let _ = write!(s, "; {}", f.describe());
        }
        let _ = write!(
            s,
            "; {} (else at +{} of close); crash {}",
            self.freeze.describe(),
            self.close_freeze_after,
            policy_name(self.crash)
        );
        if let Some((at, p)) = self.recovery_crash {
            let _ = write!(s, "; crash again at +{at} of recovery, {}", policy_name(p));
        }
        if self.scheme != SchemeKind::None {
            let _ = write!(s, "; sync interval {} µs", self.sync_interval_us);
            if self.direct_log {
                s.push_str("; direct log");
            }
            if !self.zero_fill {
                s.push_str("; no zero-fill");
            }
        }
        s
    }
}

impl PlannedFault {
    fn describe(&self) -> String {
        format!(
            "{:?} at +{}{}",
            self.kind,
            self.after,
            self.path.map(|p| format!(" on {p}")).unwrap_or_default()
        )
    }
}

pub fn protocol_name(p: CommitProtocol) -> &'static str {
    match p {
        CommitProtocol::RfaGroup => "rfa-group",
        CommitProtocol::Rfa => "rfa",
        CommitProtocol::Group => "group",
        CommitProtocol::FlushAll => "flush-all",
        CommitProtocol::Async => "async (UNSAFE)",
    }
}

pub fn checkpoint_name(c: CheckpointMode) -> &'static str {
    match c {
        CheckpointMode::Continuous => "continuous",
        CheckpointMode::Full => "full",
        CheckpointMode::None => "none",
    }
}

fn policy_name(p: CrashPolicy) -> String {
    match p {
        CrashPolicy::DropAll => "drop-all".into(),
        CrashPolicy::KeepAll => "keep-all".into(),
        CrashPolicy::Random { keep, tear } => {
            format!("random keep {keep:.2}{}", if tear { " torn" } else { "" })
        }
    }
}
