//! `waypoint simulate`: runs seeds of the crash simulation (`waypoint-sim`)
//! and reports `N seeds, F failures`, with each failure's seed, choices,
//! error and reproduction command. Owns the command's arguments, progress
//! and report; the simulation itself is `waypoint_sim::run_seed`.
//!
//! `--jobs J` runs the seeds in J child processes of this binary, each
//! taking every J-th seed and reporting each seed as a JSON line: a seed's
//! panics are collected process-wide (`waypoint_sim::capture_panics`), so
//! seeds that share a process must run one at a time.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::io::BufRead;
use std::time::Instant;
use waypoint::SchemeKind;
use waypoint_sim::{run_seed, CheckpointAtCrash, SeedResult, SimOptions, Workload};

/// Most child processes `--jobs` starts.
const MAX_JOBS: usize = 256;

#[derive(clap::Args)]
pub struct SimulateArgs {
    /// Run N seeds, from `--first-seed` on [default: 200].
    #[arg(long, conflicts_with = "seed")]
    pub seeds: Option<u64>,
    /// The first seed of `--seeds` [default: 0].
    #[arg(long, conflicts_with = "seed")]
    pub first_seed: Option<u64>,
    /// Run the seeds in this many child processes at once, 1 to 256
    /// [default: 1].
    #[arg(long, conflicts_with = "seed")]
    pub jobs: Option<usize>,
    /// A child of `--jobs`: run every this-many-th seed from
    /// `--first-seed`.
    #[arg(long, hide = true, default_value_t = 1)]
    pub stride: u64,
    /// A child of `--jobs`: print each seed's result as a JSON line and
    /// nothing else.
    #[arg(long, hide = true)]
    pub report_lines: bool,
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
    // The flags that fix a seed's choices, as a reproduction command and
    // `--jobs`' children take them (values in their parsed form: no
    // spaces).
    let mut flags: Vec<String> = Vec::new();
    let mut flag = |name: &str, value: Option<String>| {
        flags.push(name.to_string());
        flags.extend(value);
    };
    if let Some(w) = workload {
        flag("--workload", Some(w.name().into()));
    }
    if let Some(k) = scheme {
        flag("--scheme", Some(k.name().into()));
    }
    if let Some(c) = &silor_checkpoint {
        flag("--checkpoint", Some(c.name()));
    }
    if let Some(n) = args.checkpointers {
        flag("--checkpointers", Some(n.to_string()));
    }
    if let Some(n) = args.loggers {
        flag("--loggers", Some(n.to_string()));
    }
    if args.unsafe_async {
        flag("--unsafe-async", None);
    }
    #[cfg(feature = "testing")]
    if args.broken_commit_ack {
        flag("--broken-commit-ack", None);
    }
    if let Some(s) = args.seed {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
        let mut tally = Tally::new(1);
        let r = run_seed(s, &options);
        println!("seed {s}: {}", r.description);
        tally.add(SeedLine::of(&r));
        return tally.finish(scheme, &flags);
    }
    let jobs = args.jobs.unwrap_or(1);
    if !(1..=MAX_JOBS).contains(&jobs) {
        bail!("--jobs {jobs} is out of range: 1 to {MAX_JOBS}");
    }
    if args.stride == 0 {
        bail!("--stride 0 is out of range: at least 1");
    }
    let first = args.first_seed.unwrap_or(0);
    let count = args.seeds.unwrap_or(200);
    let seeds: Vec<u64> = (0..count)
        .map(|i| {
            i.checked_mul(args.stride)
                .and_then(|d| first.checked_add(d))
        })
        .collect::<Option<_>>()
        .context("--first-seed and --seeds run past the largest seed")?;
    // Panics are reported with their seed, not printed in the middle of
    // the progress lines.
    waypoint_sim::capture_panics();
    if args.report_lines {
        for &seed in &seeds {
            let line = serde_json::to_string(&SeedLine::of(&run_seed(seed, &options)))?;
            println!("{line}");
        }
        return Ok(());
    }
    let mut tally = Tally::new(seeds.len() as u64);
    if jobs == 1 {
        for &seed in &seeds {
            tally.add(SeedLine::of(&run_seed(seed, &options)));
        }
    } else {
        run_children(jobs, first, count, &flags, &mut tally)?;
    }
    tally.finish(scheme, &flags)
}

/// Run `count` seeds from `first` in `jobs` children (child k takes
/// seeds `first + k`, `first + k + jobs`, ...), adding each seed's line to
/// `tally` as it arrives. A child runs its seeds in order, so when one
/// ends early the first seed it did not report was running: that seed
/// fails, and the ones after it count as not run.
fn run_children(
    jobs: usize,
    first: u64,
    count: u64,
    flags: &[String],
    tally: &mut Tally,
) -> Result<()> {
    let exe =
        std::env::current_exe().context("cannot find this binary to start --jobs' children")?;
    let (tx, rx) = std::sync::mpsc::channel::<(u64, std::io::Result<String>)>();
    let mut children = Children(Vec::new());
    for k in 0..(jobs as u64).min(count) {
        let mine = (count - k).div_ceil(jobs as u64);
        let mut child = std::process::Command::new(&exe)
            .args(["simulate", "--report-lines"])
            .args(["--first-seed", &(first + k).to_string()])
            .args(["--seeds", &mine.to_string()])
            .args(["--stride", &jobs.to_string()])
            .args(flags)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .context("cannot start a --jobs child")?;
        let stdout = child.stdout.take().expect("piped");
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                if tx.send((k, line)).is_err() {
                    break;
                }
            }
        });
        children.0.push(child);
    }
    drop(tx);
    // Seeds reported, per child (each reports in its own order).
    let mut reported = vec![0u64; children.0.len()];
    for (k, line) in rx {
        match line
            .map_err(|e| e.to_string())
            .and_then(|l| serde_json::from_str::<SeedLine>(&l).map_err(|e| format!("{e}: {l:?}")))
        {
            Ok(line) => {
                reported[k as usize] += 1;
                tally.add(line);
            }
            Err(e) => tally
                .problems
                .push(format!("child {k}'s report does not read: {e}")),
        }
    }
    for (k, child) in children.0.iter_mut().enumerate() {
        let status = child.wait()?;
        let theirs: Vec<u64> = (k as u64..count).step_by(jobs).map(|i| first + i).collect();
        let done = reported[k] as usize;
        if let Some(&running) = theirs.get(done) {
            tally.add(SeedLine::lost(
                running,
                &format!("its child process ended ({status}) while it ran"),
            ));
            tally.not_run += (theirs.len() - done - 1) as u64;
        } else if !status.success() {
            tally.problems.push(format!(
                "child {k} ended ({status}) after reporting its seeds"
            ));
        }
    }
    Ok(())
}

/// `--jobs`' children, killed if the parent leaves before waiting for
/// them (an error starting the next one).
struct Children(Vec<std::process::Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// One seed's result, as the tally counts it and as a `--jobs` child
/// reports it to its parent.
#[derive(Serialize, Deserialize)]
struct SeedLine {
    seed: u64,
    description: String,
    /// Why the seed failed; `None`: it passed.
    error: Option<String>,
    acked: u64,
    refused: bool,
    /// Where a silor checkpoint was at the crash: 0 walking, 1 between its
    /// files and its install, 2 pruning.
    checkpoint_at_crash: Option<u8>,
    crashed_in_recovery: bool,
    froze_in_workload: bool,
}

impl SeedLine {
    fn of(r: &SeedResult) -> Self {
        let s = r.outcome.as_ref().ok().cloned().unwrap_or_default();
        SeedLine {
            seed: r.seed,
            description: r.description.clone(),
            error: r.outcome.as_ref().err().cloned(),
            acked: s.acked,
            refused: s.refused,
            checkpoint_at_crash: s.checkpoint_at_crash.map(|at| match at {
                CheckpointAtCrash::Walking => 0,
                CheckpointAtCrash::Installing => 1,
                CheckpointAtCrash::Pruning => 2,
            }),
            crashed_in_recovery: s.crashed_in_recovery,
            froze_in_workload: s.froze_in_workload,
        }
    }

    fn lost(seed: u64, why: &str) -> Self {
        SeedLine {
            seed,
            description: "(not reported)".into(),
            error: Some(why.into()),
            acked: 0,
            refused: false,
            checkpoint_at_crash: None,
            crashed_in_recovery: false,
            froze_in_workload: false,
        }
    }
}

/// The seeds' results as they come in: counts, progress lines every tenth
/// of the seeds, and the failures for the report.
struct Tally {
    total: u64,
    done: u64,
    failures: Vec<SeedLine>,
    acked: u64,
    refused: u64,
    /// Crashes inside a silor checkpoint, by stage.
    in_checkpoint: [u64; 3],
    in_recovery: u64,
    in_workload: u64,
    next_report: u64,
    started: Instant,
    /// Seeds `--jobs`' children did not get to (their child ended early).
    not_run: u64,
    /// What went wrong outside the seeds (a child's unreadable report or
    /// failed exit).
    problems: Vec<String>,
}

impl Tally {
    fn new(total: u64) -> Self {
        Tally {
            total,
            done: 0,
            failures: Vec::new(),
            acked: 0,
            refused: 0,
            in_checkpoint: [0; 3],
            in_recovery: 0,
            in_workload: 0,
            next_report: 1,
            started: Instant::now(),
            not_run: 0,
            problems: Vec::new(),
        }
    }

    fn add(&mut self, line: SeedLine) {
        if line.error.is_some() {
            self.failures.push(line);
        } else {
            self.acked += line.acked;
            self.refused += line.refused as u64;
            if let Some(at) = line.checkpoint_at_crash {
                self.in_checkpoint[usize::from(at.min(2))] += 1;
            }
            self.in_recovery += line.crashed_in_recovery as u64;
            self.in_workload += line.froze_in_workload as u64;
        }
        self.done += 1;
        let (done, total) = (self.done, self.total);
        if total >= 10 && done * 10 >= self.next_report * total {
            println!(
                "{done:>7}/{total} seeds  {:>3}%  {} failures  {:.1} s",
                done * 100 / total,
                self.failures.len(),
                self.started.elapsed().as_secs_f64()
            );
            while done * 10 >= self.next_report * total {
                self.next_report += 1;
            }
        }
    }

    /// Print the report; exit 1 if a seed failed or did not run.
    fn finish(mut self, scheme: Option<SchemeKind>, flags: &[String]) -> Result<()> {
        let extra: String = flags.iter().map(|f| format!(" {f}")).collect();
        println!(
            "{} seeds, {} failures ({:.1} s, {} transactions acknowledged before the crashes; \
             {} none-scheme reopens refused as not recoverable)",
            self.done,
            self.failures.len(),
            self.started.elapsed().as_secs_f64(),
            self.acked,
            self.refused
        );
        // The rest crashed in the close: a scheme whose crashes mostly land
        // there is hardly tested while it runs.
        println!(
            "passing seeds whose crash landed inside the workload: {}",
            self.in_workload
        );
        println!(
            "passing seeds that crashed again inside recovery: {}",
            self.in_recovery
        );
        let c = self.in_checkpoint;
        if scheme == Some(SchemeKind::Silor) || c.iter().any(|&n| n > 0) {
            println!(
                "passing silor seeds whose crash landed inside a checkpoint: {} while walking, {} between its files and its install, {} between its install and the end of pruning",
                c[0], c[1], c[2]
            );
        }
        self.failures.sort_by_key(|f| f.seed);
        for f in &self.failures {
            println!("seed {}: {}", f.seed, f.description);
            println!("  error: {}", f.error.as_deref().unwrap_or_default());
            println!("  reproduce: waypoint simulate --seed {}{extra}", f.seed);
        }
        if self.not_run > 0 {
            println!(
                "{} seeds not run: their child process ended early",
                self.not_run
            );
        }
        for p in &self.problems {
            println!("{p}");
        }
        if !self.failures.is_empty() || self.not_run > 0 || !self.problems.is_empty() {
            std::process::exit(1);
        }
        Ok(())
    }
}
