//! The `peers` experiment of `waypoint compare` (issue 31): YCSB A, B, C
//! and F (uniform and zipfian keys) and TPC-B on waypoint and on each
//! peer of [`crate::peers`] this binary has, at equal durability, with
//! as many client threads per engine as waypoint has workers; and
//! `checkpoint-dips`, throughput per second while waypoint's checkpoint
//! designs (seed 000 §3.4 against full checkpoints) and the peers' own
//! checkpoints run.
//!
//! Invariant: every run says what durability it gave (the engine's own
//! line in the report), and an engine is compared only with waypoint at
//! the same durability (the baseline is waypoint's run of the same
//! workload and durability). A peer that is not built or not installed
//! is a note of one line, or, when `--peers` names it, an error of that
//! line.

use super::{Baseline, Experiment, Figure, Metric, PeerSpec, RunSpec, Settings, WorkloadSpec};
use crate::driver::DriverConfig;
use crate::error::{BenchError, BenchResult};
use crate::peers::external::External;
use crate::peers::{Durability, Peer, PeerKind};
use crate::ycsb::KeyDistribution;

pub const REPRODUCES: &str =
    "issue 31's peers: YCSB A/B/C/F and TPC-B on waypoint, SQLite and RocksDB at equal durability, \
     with PostgreSQL (pgbench) and Redis (redis-benchmark) where installed";

/// The workloads, numbered as the runs' x (a relaxed run adds 10).
fn workloads(s: &Settings, workers: usize) -> Vec<WorkloadSpec> {
    let records = if s.quick { 10_000 } else { 1_000_000 };
    let ycsb = |preset, distribution| WorkloadSpec::Ycsb {
        preset,
        distribution,
        records,
    };
    let tpcb = WorkloadSpec::Tpcb {
        branches: workers as u64,
        accounts: workers as u64 * if s.quick { 1_000 } else { 100_000 },
    };
    if s.quick {
        return vec![ycsb('a', KeyDistribution::Zipfian), tpcb];
    }
    let mut w = Vec::new();
    for preset in ['a', 'b', 'c', 'f'] {
        for d in [KeyDistribution::Uniform, KeyDistribution::Zipfian] {
            w.push(ycsb(preset, d));
        }
    }
    w.push(tpcb);
    w
}

/// The peers that run: the engines in this process and the servers.
struct Chosen {
    engines: Vec<PeerKind>,
    servers: Vec<External>,
}

/// Which peers run: `--peers` (each must be there, or its line is the
/// error), or every one that is (the others' lines become notes).
fn choose(s: &Settings, notes: &mut Vec<String>) -> BenchResult<Chosen> {
    let all: Vec<&str> = PeerKind::ALL
        .iter()
        .map(|p| p.name())
        .chain(External::ALL.iter().map(|e| e.name()))
        .collect();
    let Some(asked) = &s.peers else {
        let mut chosen = Chosen {
            engines: Vec::new(),
            servers: Vec::new(),
        };
        for p in PeerKind::ALL {
            match p.built() {
                Ok(()) => chosen.engines.push(p),
                Err(line) => notes.push(format!("Skipped {line}.")),
            }
        }
        for e in External::ALL {
            match e.probe() {
                Ok(_) => chosen.servers.push(e),
                Err(line) => notes.push(format!("Skipped {line}.")),
            }
        }
        return Ok(chosen);
    };
    let mut chosen = Chosen {
        engines: vec![PeerKind::Waypoint],
        servers: Vec::new(),
    };
    for name in asked {
        if let Some(p) = PeerKind::ALL.iter().find(|p| p.name() == name) {
            p.built().map_err(BenchError::Peer)?;
            if !chosen.engines.contains(p) {
                chosen.engines.push(*p);
            }
        } else if let Some(e) = External::ALL.iter().find(|e| e.name() == name) {
            e.probe().map_err(BenchError::Peer)?;
            if !chosen.servers.contains(e) {
                chosen.servers.push(*e);
            }
        } else {
            return Err(BenchError::Config(format!(
                "unknown peer {name:?}; available: {}",
                all.join(", ")
            )));
        }
    }
    Ok(chosen)
}

/// The workload a server's own benchmark stands beside: pgbench's TPC-B
/// beside TPC-B, redis-benchmark's SET/GET beside the first YCSB-A
/// (uniform keys where there is one: redis-benchmark draws keys
/// uniformly).
fn server_workload(server: External, workloads: &[WorkloadSpec]) -> Option<usize> {
    let ycsb_a = |uniform: bool| {
        workloads.iter().position(|w| {
            matches!(w, WorkloadSpec::Ycsb { preset: 'a', distribution, .. }
                if !uniform || *distribution == KeyDistribution::Uniform)
        })
    };
    match server {
        External::Postgres => workloads
            .iter()
            .position(|w| matches!(w, WorkloadSpec::Tpcb { .. })),
        External::Redis => ycsb_a(true).or_else(|| ycsb_a(false)),
    }
}

pub fn build(s: &Settings, workers: usize, base: DriverConfig) -> BenchResult<Experiment> {
    let mut notes = Vec::new();
    let Chosen { engines, servers } = choose(s, &mut notes)?;
    let workloads = workloads(s, workers);
    let mut runs = Vec::new();
    for (i, w) in workloads.iter().enumerate() {
        for durability in [Durability::Durable, Durability::Relaxed] {
            let x = (i + 1) as f64
                + if durability == Durability::Relaxed {
                    10.0
                } else {
                    0.0
                };
            let here = servers
                .iter()
                .filter(|&&server| server_workload(server, &workloads) == Some(i))
                .map(|&server| Peer::Server(server));
            for engine in engines.iter().map(|&e| Peer::Engine(e)).chain(here) {
                runs.push(RunSpec {
                    label: format!("{} {}, {}", engine.name(), durability.name(), w.describe()),
                    series: engine.name().into(),
                    x,
                    workload: *w,
                    driver: base.clone(),
                    crash: None,
                    buffer_of_data: None,
                    peer: Some(PeerSpec { engine, durability }),
                });
            }
        }
        // waypoint as its own driver runs it: commits pipelined.
        runs.push(RunSpec {
            label: format!("waypoint pipelined durable, {}", w.describe()),
            series: "waypoint pipelined".into(),
            x: (i + 1) as f64,
            workload: *w,
            driver: base.clone(),
            crash: None,
            buffer_of_data: None,
            peer: None,
        });
    }
    notes.push(
        "Every engine runs the same workload code (the YCSB and TPC-B modules' transactions and invariant \
         checks, through the bench crate's `KvEngine` trait), each client thread committing one transaction \
         at a time; the `waypoint pipelined` rows are waypoint's own driver with its commits in flight \
         (`in_flight` in results.json), which the peers have no counterpart of."
            .into(),
    );
    if !servers.is_empty() {
        notes.push(
            "The servers run their own benchmark programs, not the shared workload code: PostgreSQL runs \
             pgbench's TPC-B (100,000 accounts per branch, its own schema and statements) beside the TPC-B rows, \
             on a private cluster with a unix socket; Redis runs redis-benchmark's SET for half the time and GET \
             for the other half, on random keys among the record count, beside the YCSB-A rows (a 50/50 mix in \
             aggregate; its latencies are SET's). Both are a process boundary and a protocol away from their \
             clients, which the in-process engines are not."
                .into(),
        );
    }
    notes.push(
        "Each row's durability is the engine's own line, below; `relaxed` means something different per \
         engine (SQLite and RocksDB keep a process crash's commits, waypoint's `async` does not)."
            .into(),
    );
    Ok(Experiment {
        name: "peers",
        reproduces: REPRODUCES,
        why: format!(
            "The workloads ({}) on waypoint and the peers this binary and machine have ({}), {workers} client \
             threads each, durable (commits synced to the log) and relaxed (the engine's unsynced mode): where \
             waypoint stands against the stores a user would otherwise pick. x: the workload's number, +10 for \
             the relaxed runs.",
            workloads
                .iter()
                .map(|w| w.describe())
                .collect::<Vec<_>>()
                .join("; "),
            engines
                .iter()
                .map(|e| e.name())
                .chain(servers.iter().map(|e| e.name()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        x_name: "workload",
        runs,
        baseline: Baseline::SeriesAtSameX("waypoint".into()),
        metrics: vec![
            Metric::TxnPerSec,
            Metric::LatencyP50Us,
            Metric::LatencyP99Us,
            Metric::AbortPct,
            Metric::CpuUsPerTxn,
        ],
        figures: vec![Figure::Bars {
            file: "peers_throughput.png",
            title: format!("YCSB and TPC-B, {workers} client threads: throughput per engine"),
            metric: Metric::TxnPerSec,
        }],
        notes,
        instructions: false,
        over_time: false,
    })
}

pub const DIPS_REPRODUCES: &str =
    "issue 31's checkpoint dips: per-second throughput while each design checkpoints, waypoint's schemes and the peers";

/// `checkpoint-dips`: YCSB A (uniform keys, so updates dirty pages all
/// over) over time, durable, on waypoint's per-worker log with continuous
/// and with full checkpoints, on the central (`aries`) log with full
/// checkpoints, on `silor` with its continuous fuzzy checkpoints, and on
/// each peer with its own checkpointing (SQLite's WAL
/// auto-checkpoint, RocksDB's memtable flushes and compactions).
pub fn checkpoint_dips(
    s: &Settings,
    workers: usize,
    base: DriverConfig,
) -> BenchResult<Experiment> {
    use waypoint::{CheckpointMode, CommitProtocol, SchemeKind};
    let mut notes = Vec::new();
    let Chosen { engines, servers } = choose(s, &mut notes)?;
    for server in servers {
        notes.push(format!(
            "{} is not in this experiment: its benchmark program reports no per-second throughput.",
            server.name()
        ));
    }
    let limit_mib: u64 = if s.quick { 1 } else { 64 };
    let workload = WorkloadSpec::Ycsb {
        preset: 'a',
        distribution: KeyDistribution::Uniform,
        records: if s.quick { 10_000 } else { 1_000_000 },
    };
    let timed = DriverConfig {
        duration_secs: if s.quick { 2.0 } else { 30.0 },
        warmup_secs: 0,
        wal_limit_bytes: limit_mib << 20,
        ..base
    };
    let mut runs = Vec::new();
    for (name, scheme, commit, checkpoint) in [
        (
            "per-worker continuous",
            SchemeKind::PerWorker,
            CommitProtocol::RfaGroup,
            CheckpointMode::Continuous,
        ),
        (
            "per-worker full",
            SchemeKind::PerWorker,
            CommitProtocol::RfaGroup,
            CheckpointMode::Full,
        ),
        (
            "aries full",
            SchemeKind::Aries,
            CommitProtocol::Group,
            CheckpointMode::Full,
        ),
        // SiloR's fuzzy checkpoints, continuous (its default), seed 002
        // Fig. 1's grey regions.
        (
            "silor continuous",
            SchemeKind::Silor,
            CommitProtocol::RfaGroup,
            CheckpointMode::None,
        ),
    ] {
        runs.push(RunSpec {
            label: format!("waypoint {name}"),
            series: format!("waypoint {name}"),
            x: 0.0,
            workload,
            driver: DriverConfig {
                scheme,
                commit,
                checkpoint,
                in_flight: DriverConfig::default_in_flight(scheme),
                ..timed.clone()
            },
            crash: None,
            buffer_of_data: None,
            peer: None,
        });
    }
    for engine in engines.into_iter().filter(|e| *e != PeerKind::Waypoint) {
        runs.push(RunSpec {
            label: engine.name().into(),
            series: engine.name().into(),
            x: 0.0,
            workload,
            driver: timed.clone(),
            crash: None,
            buffer_of_data: None,
            peer: Some(PeerSpec {
                engine: Peer::Engine(engine),
                durability: Durability::Durable,
            }),
        });
    }
    notes.push(
        "waypoint's rows are its own driver (commits pipelined); the peers' are client threads committing one \
         transaction at a time, so compare each line's dips against its own median, not the lines' heights."
            .into(),
    );
    notes.push(
        "`silor` runs with 65,536 commits in flight per worker (it acknowledges once per 40 ms epoch). \
         `command` has no line: YCSB runs as plain transactions here, and command logging logs stored-procedure \
         calls only."
            .into(),
    );
    Ok(Experiment {
        name: "checkpoint-dips",
        reproduces: DIPS_REPRODUCES,
        why: format!(
            "{} with {workers} workers (client threads for the peers), durable, from the first second, WAL limit \
             {limit_mib} MiB for waypoint's checkpointer: how far throughput drops in the seconds a design \
             checkpoints (the lowest second against the median second).",
            workload.describe()
        ),
        x_name: "design",
        runs,
        baseline: Baseline::Run("waypoint per-worker continuous".into()),
        metrics: vec![
            Metric::TxnPerSec,
            Metric::LowestSecondRatio,
            Metric::LatencyP99Us,
        ],
        figures: vec![Figure::OverTime {
            file: "checkpoint_dips.png",
            title: format!("YCSB A uniform, {workers} workers: throughput over time while checkpointing"),
            field: super::TimeField::TxnPerSec,
            limit: None,
            only: None,
        }],
        notes,
        instructions: false,
        over_time: true,
    })
}
