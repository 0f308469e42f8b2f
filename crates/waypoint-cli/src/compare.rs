//! `waypoint compare EXPERIMENT [--quick] [--rounds N] [--out DIR]` and
//! `waypoint compare --list`: the command line of
//! [`waypoint_bench::compare`] (issue 31): the settings, a progress bar
//! of the runs done and left, Ctrl-C that ends the current run and still
//! writes the report (marked partial), and the child process the
//! `recovery` experiment kills (`crash-child`, as `crash-test` uses it).

use crate::crash_child::{run_child_until_killed, ChildSpec, ACK_TABLE};
use anyhow::{anyhow, bail, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use waypoint_bench::compare::{self, experiments, machine, Crasher, Event, Hooks, Settings};
use waypoint_bench::driver::DriverConfig;
use waypoint_bench::{BenchError, BenchResult};

#[derive(clap::Args)]
pub struct CompareArgs {
    /// The experiment to run (`--list` shows them).
    #[arg(required_unless_present = "list")]
    pub experiment: Option<String>,
    /// List the experiments: those that run now, and those that wait for
    /// schemes or peers not built yet.
    #[arg(long, conflicts_with_all = ["quick", "rounds", "out", "workers", "peers"])]
    pub list: bool,
    /// Seconds-long runs on tiny data (TPC-C at 1/100 of the spec's
    /// items and customers), one round: checks that everything runs.
    #[arg(long)]
    pub quick: bool,
    /// Rounds: every run once per round, in reverse order every other
    /// round (1 to 100) [default: 3; 1 with --quick].
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Where report.md, results.json and the figures go; the runs' data
    /// directories are made below it and removed afterwards
    /// [default: compare-EXPERIMENT].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Worker counts of `scaling` (e.g. 1,2,4,8,16), or the one worker
    /// count of the other experiments [default: 1, 2, 4, ... up to the
    /// cores; the others: every core, at least 2].
    #[arg(long, value_delimiter = ',')]
    pub workers: Option<Vec<usize>>,
    /// The peers `peers` must run (sqlite, rocksdb, postgres, redis); one
    /// not built into this binary or not installed is an error
    /// [default: every one there, the others named in the report].
    #[arg(long, value_delimiter = ',')]
    pub peers: Option<Vec<String>>,
}

const MAX_ROUNDS: usize = 100;

pub fn run(args: CompareArgs) -> Result<()> {
    if args.list {
        print!("{}", list());
        return Ok(());
    }
    let name = args
        .experiment
        .as_deref()
        .expect("clap requires it without --list");
    let rounds = args.rounds.unwrap_or(if args.quick { 1 } else { 3 });
    if !(1..=MAX_ROUNDS).contains(&rounds) {
        bail!("--rounds {rounds} is out of range: 1 to {MAX_ROUNDS}");
    }
    for &w in args.workers.iter().flatten() {
        waypoint_bench::driver::check_workers("--workers", w).map_err(|e| anyhow!("{e}"))?;
    }
    let settings = Settings {
        quick: args.quick,
        rounds,
        workers: args.workers.clone(),
        cores: machine::cores(),
        memory_bytes: machine::memory_bytes(),
        peers: args.peers.clone(),
    };
    let experiment = compare::build(name, &settings)?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("compare-{name}")));
    std::fs::create_dir_all(&out)
        .and_then(|()| tempfile::tempfile_in(&out).map(drop))
        .map_err(|e| anyhow!("cannot write to --out {}: {e}", out.display()))?;

    let interrupt = Arc::new(AtomicBool::new(false));
    let flag = interrupt.clone();
    // A second Ctrl-C quits at once, without a report.
    ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("\nstopping: the current run ends now and is not counted; the report will say it is partial (Ctrl-C again to quit without one)");
    })?;

    let total = experiment.runs.len() * rounds;
    println!(
        "waypoint compare {name}: {} runs x {rounds} rounds; reproduces {}",
        experiment.runs.len(),
        experiment.reproduces
    );
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} runs  {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let progress = |e: Event<'_>| match e {
        Event::Loading { workload } => bar.set_message(format!("loading {workload}")),
        Event::Started { round, run, .. } => {
            bar.set_message(format!("round {}: {run}", round + 1));
        }
        Event::Finished {
            round,
            run,
            done,
            headline,
            ..
        } => {
            bar.set_position(done as u64);
            bar.suspend(|| println!("  round {} {run}: {headline}", round + 1));
        }
    };
    let crasher = ChildCrasher {
        exe: std::env::current_exe()?,
    };
    let hooks = Hooks {
        interrupt: interrupt.clone(),
        progress: &progress,
        crasher: Some(&crasher),
    };
    let (mut results, error) = compare::run(&experiment, &settings, &command_line(), &out, &hooks)?;
    bar.finish_and_clear();
    let written = compare::write(&out, &experiment, &mut results)?;
    let files: Vec<String> = written
        .files
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    println!("wrote {}", files.join(", "));
    for w in &written.warnings {
        eprintln!("{w}");
    }
    if let Some(e) = error {
        return Err(anyhow!(e).context(format!(
            "{name} stopped; partial report in {}",
            out.join("report.md").display()
        )));
    }
    if let Some(why) = &results.partial {
        eprintln!(
            "partial report ({why}): {}",
            out.join("report.md").display()
        );
        std::process::exit(130);
    }
    Ok(())
}

/// `--list`: the experiments that run now, and those that wait.
fn list() -> String {
    let mut text =
        String::from("Experiments (waypoint compare NAME [--quick] [--rounds N] [--out DIR]):\n");
    for name in experiments::NAMES {
        text += &format!("  {name:<16} {}\n", experiments::reproduces(name));
    }
    text += "\nNot yet (each needs what is named after it):\n";
    for (name, result, waits) in experiments::NOT_YET {
        text += &format!("  {name:<16} {result}; not yet: needs {waits}\n");
    }
    text
}

/// This process's command line, quoted where a word needs it.
fn command_line() -> String {
    let mut words = vec!["waypoint".to_string()];
    words.extend(std::env::args().skip(1).map(|a| {
        if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$`\\".contains(c)) {
            format!("'{}'", a.replace('\'', r"'\''"))
        } else {
            a
        }
    }));
    words.join(" ")
}

/// The recovery experiment's child: `waypoint crash-child`, which runs
/// the workload with pipelined commits until it is killed.
struct ChildCrasher {
    exe: PathBuf,
}

impl Crasher for ChildCrasher {
    fn run_then_kill(
        &self,
        dir: &Path,
        workload: &str,
        config: &DriverConfig,
        stop: &dyn Fn(u64) -> bool,
    ) -> BenchResult<u64> {
        // The child records what it acknowledged in this table.
        let db = waypoint::Database::open(
            dir,
            waypoint::Options {
                create_if_missing: false,
                ..config.engine_options()
            },
        )?;
        db.open_or_create_table(ACK_TABLE)?;
        db.close()?;
        let stderr_path = dir.with_extension("child-stderr");
        let spec = ChildSpec {
            workload,
            dir,
            run: 1,
            cycle: 1,
            seed: config.seed,
            workers: config.workers,
            in_flight: config.in_flight,
            commit: config.commit.name(),
            scheme: config.scheme,
            buffer: config.buffer_bytes,
            wal_limit: config.wal_limit_bytes,
            max_run_ms: 3_600_000,
            phantom_ack: false,
            silor: config.silor.clone(),
            command_snapshot: config.command_snapshot,
            executors: config.executors,
        };
        let killed = run_child_until_killed(&self.exe, &spec, &stderr_path, &mut |n| stop(n));
        let _ = std::fs::remove_file(&stderr_path);
        match killed {
            Ok(acks) => Ok(acks.len() as u64),
            // Ctrl-C reaches the child too; the runner sees the interrupt.
            Err(_) if stop(0) => Ok(0),
            Err(f) => Err(BenchError::Config(format!(
                "the recovery run's child: {}",
                f.why
            ))),
        }
    }
}
