//! `waypoint simulate`: runs seeds of the crash simulation (`waypoint-sim`)
//! and reports `N seeds, F failures`, with each failure's seed, choices,
//! error and reproduction command. Owns the command's arguments, progress
//! and report; the simulation itself is `waypoint_sim::run_seed`.

use anyhow::{bail, Result};
use std::time::Instant;
use waypoint::SchemeKind;
use waypoint_sim::{run_seed, CheckpointAtCrash, SeedResult, SimOptions, Workload};

#[derive(clap::Args)]
pub struct SimulateArgs {
    /// Run seeds 0..N [default: 200].
    #[arg(long, conflicts_with = "seed")]
    pub seeds: Option<u64>,
    /// Run only this seed, with tracing from `RUST_LOG` (e.g.
    /// `RUST_LOG=waypoint=debug`).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Run this workload on every seed (bank, toggles, updates or tpcc)
    /// instead of the one each seed draws; the seed's other choices stay the
    /// same.
    #[arg(long)]
    pub workload: Option<String>,
    /// Run this persistence scheme (per-worker, aries, aether, silor,
    /// command or none) on every seed instead of the one each seed draws
    /// (none in one seed in eight, aries in one in four of the others,
    /// aether in one in three of the rest, silor in one in four of what
    /// remains; command is never drawn: only bank, toggles and tpcc run
    /// as stored procedures, and with `--scheme command` the seeds that
    /// drew updates run bank).
    #[arg(long)]
    pub scheme: Option<String>,
    /// `silor`'s checkpoint trigger on every seed: continuous,
    /// continuous=MS, log-limit=SIZE or off [default: drawn per seed:
    /// continuous with no pause in five of eight, log-limit=64KiB in two,
    /// off in one].
    #[arg(long)]
    pub checkpoint: Option<String>,
    /// `silor`'s checkpointer threads on every seed [default: one or two,
    /// drawn per seed].
    #[arg(long)]
    pub checkpointers: Option<usize>,
    /// `silor`'s logger threads on every seed [default: one or two, drawn
    /// per seed].
    #[arg(long)]
    pub loggers: Option<usize>,
    /// UNSAFE, to show that the simulator catches a scheme acknowledging
    /// commits before they are durable (per-worker, aries, aether: before
    /// the commit record's flush; silor: before pepoch covers the epoch;
    /// command: before the record's sync). Failures are expected. Builds
    /// with the `testing` feature only.
    #[cfg(feature = "testing")]
    #[arg(long, hide = true)]
    pub broken_commit_ack: bool,
    /// UNSAFE, to show that the simulator catches lost commits: acknowledge
    /// commits before they are durable (`async`). Failures are expected.
    #[arg(long, hide = true)]
    pub unsafe_async: bool,
}

pub fn run(args: SimulateArgs) -> Result<()> {
    if args.seeds == Some(0) {
        bail!("--seeds 0 is out of range: at least 1");
    }
    let scheme = match args.scheme.as_deref() {
        None => None,
        Some(s) => match SchemeKind::parse(s) {
            Some(k) => Some(k),
            None => {
                let names: Vec<&str> = SchemeKind::ALL.iter().map(|k| k.name()).collect();
                bail!("unknown --scheme {s:?}; available: {}", names.join(", "))
            }
        },
    };
    let workload = match args.workload.as_deref() {
        None => None,
        Some(w) => match Workload::parse(w) {
            Some(w) => Some(w),
            None => {
                let names: Vec<&str> = Workload::ALL.iter().map(|w| w.name()).collect();
                bail!("unknown --workload {w:?}; available: {}", names.join(", "))
            }
        },
    };
    if let (Some(SchemeKind::Command), Some(w)) = (scheme, workload) {
        if !w.runs_as_procedures() {
            bail!(
                "--scheme command runs the workloads written as stored procedures: bank and toggles (not {})",
                w.name()
            );
        }
    }
    let silor_given =
        args.checkpoint.is_some() || args.checkpointers.is_some() || args.loggers.is_some();
    if silor_given && scheme != Some(SchemeKind::Silor) {
        bail!("--checkpoint, --checkpointers and --loggers need --scheme silor");
    }
    let silor_checkpoint = args
        .checkpoint
        .as_deref()
        .map(crate::args::silor_checkpoint)
        .transpose()?;
    let options = SimOptions {
        workload,
        scheme,
        unsafe_async: args.unsafe_async,
        silor_checkpoint,
        silor_checkpointers: args.checkpointers,
        silor_loggers: args.loggers,
        #[cfg(feature = "testing")]
        broken_commit_ack: args.broken_commit_ack,
        ..SimOptions::default()
    };
    // Out-of-range counts fail here, once, not as every seed's error.
    if scheme == Some(SchemeKind::Silor) {
        waypoint_sim::Plan::new(0, &options)
            .silor
            .validate()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    let mut extra = String::new();
    if let Some(w) = workload {
        extra.push_str(&format!(" --workload {}", w.name()));
    }
    if let Some(k) = scheme {
        extra.push_str(&format!(" --scheme {}", k.name()));
    }
    if let Some(c) = &args.checkpoint {
        extra.push_str(&format!(" --checkpoint {c}"));
    }
    if let Some(n) = args.checkpointers {
        extra.push_str(&format!(" --checkpointers {n}"));
    }
    if let Some(n) = args.loggers {
        extra.push_str(&format!(" --loggers {n}"));
    }
    if args.unsafe_async {
        extra.push_str(" --unsafe-async");
    }
    #[cfg(feature = "testing")]
    if args.broken_commit_ack {
        extra.push_str(" --broken-commit-ack");
    }
    let seeds: Vec<u64> = match args.seed {
        Some(s) => {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
                .with_writer(std::io::stderr)
                .try_init();
            vec![s]
        }
        None => (0..args.seeds.unwrap_or(200)).collect(),
    };
    if args.seed.is_none() {
        // Panics are reported with their seed, not printed in the middle
        // of the progress lines.
        waypoint_sim::capture_panics();
    }
    let started = Instant::now();
    let total = seeds.len() as u64;
    let mut failures: Vec<SeedResult> = Vec::new();
    let mut acked = 0u64;
    let mut refused = 0u64;
    // Where the crashes landed: inside a silor checkpoint (by stage), and
    // inside recovery.
    let mut in_checkpoint = [0u64; 3];
    let mut in_recovery = 0u64;
    let mut in_workload = 0u64;
    let mut next_report = 1;
    for (i, &seed) in seeds.iter().enumerate() {
        let r = run_seed(seed, &options);
        if args.seed.is_some() {
            println!("seed {seed}: {}", r.description);
        }
        match &r.outcome {
            Ok(s) => {
                acked += s.acked;
                refused += s.refused as u64;
                if let Some(at) = s.checkpoint_at_crash {
                    in_checkpoint[match at {
                        CheckpointAtCrash::Walking => 0,
                        CheckpointAtCrash::Installing => 1,
                        CheckpointAtCrash::Pruning => 2,
                    }] += 1;
                }
                in_recovery += s.crashed_in_recovery as u64;
                in_workload += s.froze_in_workload as u64;
            }
            Err(_) => failures.push(r),
        }
        let done = i as u64 + 1;
        if total >= 10 && done * 10 >= next_report * total {
            println!(
                "{done:>7}/{total} seeds  {:>3}%  {} failures  {:.1} s",
                done * 100 / total,
                failures.len(),
                started.elapsed().as_secs_f64()
            );
            while done * 10 >= next_report * total {
                next_report += 1;
            }
        }
    }
    println!(
        "{total} seeds, {} failures ({:.1} s, {acked} transactions acknowledged before the crashes; \
         {refused} none-scheme reopens refused as not recoverable)",
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    // The rest crashed in the close: a scheme whose crashes mostly land
    // there is hardly tested while it runs.
    println!("passing seeds whose crash landed inside the workload: {in_workload}");
    println!("passing seeds that crashed again inside recovery: {in_recovery}");
    if scheme == Some(SchemeKind::Silor) || in_checkpoint.iter().any(|&n| n > 0) {
        println!(
            "passing silor seeds whose crash landed inside a checkpoint: {} while walking, {} between its files and its install, {} between its install and the end of pruning",
            in_checkpoint[0], in_checkpoint[1], in_checkpoint[2]
        );
    }
    for f in &failures {
        println!("seed {}: {}", f.seed, f.description);
        println!("  error: {}", f.outcome.as_ref().unwrap_err());
        println!("  reproduce: waypoint simulate --seed {}{extra}", f.seed);
    }
    if !failures.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}
