//! `waypoint crash-test WORKLOAD --cycles N`: run a workload in a child
//! process, `SIGKILL` it at a random moment, recover, verify, repeat on the
//! same database (so it ages across cycles).
//!
//! The child is this binary again (`waypoint crash-child`, hidden,
//! [`crate::crash_child`]): it runs the workload with pipelined commits
//! and prints the id of every commit once it is durable (acknowledged).
//! The idea is `crates/waypoint/tests/kill.rs`'s, with any driver
//! workload.
//!
//! The parent loads the workload first (in-process, clean close), then per
//! cycle spawns the child, waits for its `READY`, sleeps a random time
//! from `--kill-after-ms` (drawn from `--seed`), kills it, reads every
//! complete ack line, reopens the database (recovery, timed), and checks:
//! the workload's invariants (`Workload::verify`), every acknowledged
//! transaction of this and earlier cycles present in `crash_test_acks`,
//! and every tree's structure (`check_integrity`). Then it closes cleanly.
//! Even cycles give the child a small buffer pool, so pages with
//! uncommitted changes are stolen before the kill and recovery must undo.
//!
//! The seed fixes the kill delays and the workload's random choices;
//! where the kill lands in the child's execution is up to the scheduler,
//! so a failure may need a few reruns to reproduce.

use crate::crash_child::{
    ack_key, commit_protocol, fail, open_options, run_child_until_killed, scheme_kind, ChildSpec,
    Failure, ACK_TABLE,
};
use crate::tools::require_database;
use anyhow::{bail, Context, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use waypoint::{Database, Options, PerWorkerOptions, Persistence};
use waypoint_bench::load::for_each_row;
use waypoint_bench::registry;
use waypoint_bench::summary::RecoverySummary;
use waypoint_bench::tpcb::{Tpcb, TpcbConfig};
use waypoint_bench::tpcc::{Tpcc, TpccConfig};
use waypoint_bench::voter::{Voter, VoterConfig};
use waypoint_bench::workload::Workload;
use waypoint_bench::ycsb::{Ycsb, YcsbConfig};

/// The buffer pool of even cycles' children (at most `--buffer`).
const SMALL_POOL: usize = 2 << 20;
/// The latest a kill may come (`--kill-after-ms`): a day.
const MAX_KILL_AFTER_MS: u64 = 24 * 3600 * 1000;

#[derive(clap::Args)]
pub struct CrashTestArgs {
    /// Workload: tpcc, tpcb, ycsb or voter.
    pub workload: String,
    /// Kill-and-recover cycles, at least 1 [default: 5].
    #[arg(long, default_value_t = 5)]
    pub cycles: u32,
    /// Database directory: empty or missing (created and loaded) or one
    /// this workload loaded before (reused; it keeps aging). Default: a
    /// temporary directory, removed unless a cycle failed.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Seed of the kill delays and the workload [default: from the clock,
    /// printed].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Kill the child a random time in this range after it is ready, in
    /// milliseconds (at most a day).
    #[arg(long, default_value = "200..1500", value_parser = parse_range)]
    pub kill_after_ms: (u64, u64),
    /// Worker threads in the child, a session each (1 to 4096).
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Commits in flight per worker, at least 1; 1 waits for each commit.
    #[arg(long, default_value_t = 8)]
    pub in_flight: usize,
    /// Commit protocol of the child: rfa-group, group, rfa or flush-all
    /// (each promises that a killed process loses no acknowledged commit),
    /// or async (acknowledges before the log reaches the kernel: a kill
    /// loses the last acknowledged commits, so failures are expected).
    /// With `--scheme aries` or `aether`, rfa and rfa-group mean group (a central log
    /// has no other log to avoid flushing).
    #[arg(long, default_value = "rfa-group")]
    pub commit: String,
    /// Persistence scheme of the child and of recovery: per-worker, aries
    /// aether, silor (its children keep the whole --buffer: it steals
    /// nothing) or command (voter and tpcc; odd cycles run the calls on
    /// executor threads, even ones on the workers). none keeps no log: a
    /// kill loses what it changed, by design.
    #[arg(long, default_value = "per-worker")]
    pub scheme: String,
    /// Buffer pool of the child on odd cycles (even cycles: at most 2 MiB,
    /// so pages with uncommitted changes are stolen; not under silor).
    #[arg(long, default_value = "64MiB")]
    pub buffer: String,
    /// WAL limit of the child and of recovery. Small by default, so that
    /// every cycle checkpoints, prunes and recycles log segments (segments
    /// are 1/32 of it) before the kill.
    #[arg(long, default_value = "16MiB")]
    pub wal_limit: String,
    /// `silor`'s checkpoint trigger: continuous, log-limit=SIZE or off
    /// [default: continuous, at least a second apart].
    #[arg(long)]
    pub checkpoint: Option<String>,
    /// `silor`'s checkpointer threads [default: 1].
    #[arg(long)]
    pub checkpointers: Option<usize>,
    /// `silor`'s logger threads [default: 1].
    #[arg(long)]
    pub loggers: Option<usize>,
    /// `command`'s snapshot trigger: periodic=DUR (500ms, 10s, 5m),
    /// log-limit=SIZE or off [default: log-limit=256MiB].
    #[arg(long)]
    pub snapshot: Option<String>,
    /// Rows at load: TPC-B accounts, YCSB records, Voter phone numbers
    /// [default: 10000].
    #[arg(long)]
    pub records: Option<u64>,
    /// TPC-B branches [default: 2]; TPC-C warehouses (at a tenth of the
    /// spec's items and customers) [default: 1].
    #[arg(long)]
    pub scale: Option<u64>,
    /// UNSAFE, to show that the check catches lost commits: the child
    /// reports a transaction it never committed. Failures are expected.
    #[arg(long, hide = true)]
    pub unsafe_phantom_ack: bool,
}

/// `MIN..MAX` (or `N`) milliseconds.
fn parse_range(s: &str) -> Result<(u64, u64), String> {
    let bad = || format!("{s:?} is not a range of milliseconds MIN..MAX (e.g. 200..1500)");
    let (lo, hi) = match s.split_once("..") {
        Some((lo, hi)) => (lo.trim(), hi.trim()),
        None => (s.trim(), s.trim()),
    };
    let lo: u64 = lo.parse().map_err(|_| bad())?;
    let hi: u64 = hi.parse().map_err(|_| bad())?;
    if lo > hi {
        return Err(bad());
    }
    if hi > MAX_KILL_AFTER_MS {
        return Err(format!(
            "{s:?} is out of range: at most {MAX_KILL_AFTER_MS} milliseconds (a day)"
        ));
    }
    Ok((lo, hi))
}

/// The workload with the scale given on the command line (defaults for a
/// crash test: small).
fn new_workload(args: &CrashTestArgs) -> Result<Box<dyn Workload>> {
    let records = args.records.unwrap_or(10_000);
    if records == 0 || args.scale == Some(0) {
        bail!("--records and --scale must be positive");
    }
    Ok(match args.workload.as_str() {
        // One warehouse per `--scale` (default 1), a tenth of the spec's
        // items and customers: a crash test is about recovery, not size.
        "tpcc" => {
            let config = TpccConfig {
                scale_down: 10,
                ..TpccConfig::new(u32::try_from(args.scale.unwrap_or(1)).unwrap_or(u32::MAX))
            };
            Box::new(Tpcc::new(config, args.seed.unwrap_or(0)))
        }
        "tpcb" => Box::new(Tpcb::new(TpcbConfig::with_accounts(
            args.scale.unwrap_or(2),
            records,
        ))),
        "ycsb" => Box::new(Ycsb::new(YcsbConfig::preset('a', records)?)),
        "voter" => {
            let c = VoterConfig {
                phones: records,
                ..VoterConfig::default()
            };
            c.check()?;
            Box::new(Voter::new(c))
        }
        other => unreachable!("checked name {other}"),
    })
}

/// Load the workload (or check the loaded one) and create the ack table;
/// close cleanly.
fn prepare(dir: &Path, args: &CrashTestArgs, buffer: usize) -> Result<String> {
    waypoint_bench::driver::check_dir(dir)?;
    let exists = dir.join(waypoint::DATA_FILE).exists();
    let db = Database::open(
        dir,
        Options {
            create_if_missing: !exists,
            buffer_pool_bytes: buffer,
            persistence: Persistence::of(scheme_kind(&args.scheme)?, PerWorkerOptions::default()),
            procedures: crate::crash_child::procedures(),
            ..Options::default()
        },
    )
    .with_context(|| format!("cannot open {}", dir.display()))?;
    let result = (|| -> Result<String> {
        // A reused database keeps the scale it was loaded with unless the
        // command line names one (then it must match).
        let scale_given = args.records.is_some() || args.scale.is_some();
        let loaded = waypoint_bench::load::loaded_params(&db, &args.workload)?.is_some();
        let workload = if exists && loaded && !scale_given {
            registry::reopen(&db, &args.workload)?
        } else {
            let mut w = new_workload(args)?;
            w.setup(&db, args.workers)?;
            w
        };
        db.open_or_create_table(ACK_TABLE)?;
        Ok(workload.config_json().to_string())
    })();
    let closed = db.close();
    let config = result?;
    closed.context("clean close after the load")?;
    Ok(config)
}

/// What one cycle saw.
struct Cycle {
    delay: Duration,
    acked: usize,
    recovery: Option<RecoverySummary>,
    open: Duration,
}

struct Run<'a> {
    args: &'a CrashTestArgs,
    exe: PathBuf,
    dir: PathBuf,
    stderr_path: PathBuf,
    run_id: u64,
    buffer: usize,
    wal_limit: u64,
    silor: waypoint::SilorOptions,
    command_snapshot: waypoint::CommandSnapshot,
    /// Every acknowledged id of every cycle.
    acked: HashSet<[u8; 24]>,
    /// Acknowledged ids found missing (reported once).
    lost: HashSet<[u8; 24]>,
}

impl Run<'_> {
    fn cycle(&mut self, cycle: u32, child_seed: u64, delay: Duration) -> Result<Cycle, Failure> {
        let a = self.args;
        // A memory-resident scheme steals nothing: a small pool would only
        // fill with changes (MemoryFull).
        let memory_resident = a.scheme == waypoint::SchemeKind::Silor.name()
            || a.scheme == waypoint::SchemeKind::Command.name();
        let buffer = if cycle % 2 == 1 || memory_resident {
            self.buffer
        } else {
            self.buffer.min(SMALL_POOL)
        };
        let (lo, hi) = a.kill_after_ms;
        let spec = ChildSpec {
            workload: &a.workload,
            dir: &self.dir,
            run: self.run_id,
            cycle,
            seed: child_seed,
            workers: a.workers,
            in_flight: a.in_flight,
            commit: &a.commit,
            scheme: scheme_kind(&a.scheme).map_err(|e| fail(e.to_string(), true))?,
            buffer,
            wal_limit: self.wal_limit,
            max_run_ms: hi.max(lo) + 120_000,
            phantom_ack: a.unsafe_phantom_ack,
            silor: self.silor.clone(),
            command_snapshot: self.command_snapshot,
            // Under `command`, odd cycles run the calls on executor
            // threads, even ones on the workers under the partition locks.
            executors: cycle % 2 == 1,
        };
        let mut ready_at = None;
        let acks = run_child_until_killed(&self.exe, &spec, &self.stderr_path, &mut |_| {
            ready_at.get_or_insert_with(Instant::now).elapsed() >= delay
        })?;
        for &(c, w, s) in &acks {
            if c != cycle || !self.acked.insert(ack_key(self.run_id, c, w, s)) {
                return Err(fail(
                    format!("the child acknowledged ({c}, {w}, {s}) twice or in another cycle"),
                    false,
                ));
            }
        }

        // Recover and check.
        let t0 = Instant::now();
        let db = Database::open(
            &self.dir,
            open_options(
                scheme_kind(&self.args.scheme).map_err(|e| fail(e.to_string(), true))?,
                waypoint::CommitProtocol::default(),
                self.buffer,
                self.wal_limit,
                &self.silor,
                self.command_snapshot,
                self.args.workers,
                false,
            ),
        )
        .map_err(|e| fail(format!("recovery failed: {e}"), true))?;
        let open = t0.elapsed();
        let recovery = db
            .recovery_report()
            .filter(|r| RecoverySummary::needed(r))
            .map(|r| RecoverySummary::of(r, open));
        let checked = self.check(&db);
        let closed = db.close();
        checked?;
        closed.map_err(|e| fail(format!("clean close after recovery: {e}"), true))?;
        Ok(Cycle {
            delay,
            acked: acks.len(),
            recovery,
            open,
        })
    }

    fn check(&mut self, db: &Database) -> Result<(), Failure> {
        let workload = registry::reopen(db, &self.args.workload)
            .map_err(|e| fail(format!("after recovery: {e}"), true))?;
        workload
            .verify(db)
            .map_err(|e| fail(format!("after recovery: {e}"), true))?;
        let table = db
            .table(ACK_TABLE)
            .map_err(|e| fail(format!("after recovery: {e}"), true))?;
        let mut present: HashSet<[u8; 24]> = HashSet::new();
        let mut session = db.session();
        for_each_row(&mut session, &table, |k, _| {
            if let Ok(k) = <[u8; 24]>::try_from(k) {
                present.insert(k);
            }
            Ok(())
        })
        .map_err(|e| fail(format!("reading {ACK_TABLE}: {e}"), true))?;
        drop(session);
        db.check_integrity()
            .map_err(|e| fail(format!("integrity check after recovery: {e}"), true))?;
        // Losses already reported in an earlier cycle are not counted again.
        let mut lost: Vec<[u8; 24]> = self
            .acked
            .iter()
            .filter(|k| !present.contains(*k) && !self.lost.contains(*k))
            .copied()
            .collect();
        lost.sort_unstable();
        if let Some(k) = lost.first() {
            let cycle = u32::from_be_bytes(k[8..12].try_into().expect("4 bytes"));
            let worker = u32::from_be_bytes(k[12..16].try_into().expect("4 bytes"));
            let seq = u64::from_be_bytes(k[16..24].try_into().expect("8 bytes"));
            let n = lost.len();
            self.lost.extend(lost);
            return Err(fail(
                format!(
                    "{n} of {} acknowledged transactions lost, e.g. cycle {cycle} worker {worker} transaction {seq}",
                    self.acked.len()
                ),
                false,
            ));
        }
        Ok(())
    }
}

pub fn run(args: CrashTestArgs) -> Result<()> {
    registry::check_name(&args.workload)?;
    let flags = &[
        ("workers", "--workers"),
        ("buffer_pool_bytes", "--buffer"),
        ("wal_limit_bytes", "--wal-limit"),
        ("records", "--records"),
        ("branches", "--scale"),
    ];
    waypoint_bench::driver::check_workers("workers", args.workers)
        .map_err(|e| crate::args::name_flag(e, flags))?;
    if args.in_flight == 0 {
        bail!("--in-flight 0 is out of range: at least 1");
    }
    if args.cycles == 0 {
        bail!("--cycles 0 is out of range: at least 1");
    }
    if scheme_kind(&args.scheme)? == waypoint::SchemeKind::Command
        && !matches!(args.workload.as_str(), "voter" | "tpcc")
    {
        bail!(
            "--scheme command runs workloads written as stored procedures: voter, tpcc (not {})",
            args.workload
        );
    }
    let commit = commit_protocol(&args.commit)?;
    let scheme = scheme_kind(&args.scheme)?;
    let buffer = crate::args::parse_size("buffer", &args.buffer)?;
    let wal_limit = crate::args::parse_size("wal-limit", &args.wal_limit)? as u64;
    let silor = silor_options(&args, scheme)?;
    let snapshot = crate::args::parse_command_snapshot(args.snapshot.as_deref(), scheme.name())?;
    // The children's options (an even cycle's smaller buffer is valid
    // when this one is: at least 16 pages, at most 2 MiB).
    open_options(
        scheme,
        commit,
        buffer,
        wal_limit,
        &silor,
        snapshot,
        args.workers,
        false,
    )
    .validate()
    .map_err(|e| crate::args::name_flag(e, flags))?;
    if args.records == Some(0) || args.scale == Some(0) {
        bail!("--records and --scale must be positive");
    }
    if args.workload == "tpcc" && args.scale.is_some_and(|s| s > u64::from(u16::MAX)) {
        bail!(
            "--scale {} is out of range: 1 to {} warehouses",
            args.scale.unwrap_or(0),
            u16::MAX
        );
    }
    new_workload(&args)?
        .validate(waypoint::DEFAULT_PAGE_SIZE)
        .map_err(|e| crate::args::name_flag(e, flags))?;
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    });
    let (tmp, dir) = match &args.dir {
        Some(d) => (None, d.clone()),
        None => {
            let t = tempfile::Builder::new()
                .prefix("waypoint-crash-test-")
                .tempdir()
                .context("cannot create a temporary directory")?;
            let d = t.path().join("db");
            (Some(t), d)
        }
    };
    if args.dir.is_some() && dir.join(waypoint::DATA_FILE).exists() {
        require_database(&dir)?;
    }
    let exe = std::env::current_exe().context("cannot find the waypoint binary")?;
    let (lo, hi) = args.kill_after_ms;
    println!(
        "crash-test {}: seed {seed}, {} cycles, kill after {lo}..{hi} ms, {} workers, {} in flight, commit {}, dir {}",
        args.workload,
        args.cycles,
        args.workers,
        args.in_flight,
        args.commit,
        dir.display()
    );
    if args.commit == "async" {
        println!("note: async acknowledges commits before the log reaches the kernel; a kill loses the last of them, so lost commits are expected");
    }
    let config = prepare(&dir, &args, buffer)?;
    println!("loaded: {config}");

    let stderr_dir = match &tmp {
        Some(t) => t.path().to_path_buf(),
        None => std::env::temp_dir(),
    };
    let mut run = Run {
        args: &args,
        exe,
        dir: dir.clone(),
        stderr_path: stderr_dir.join(format!(
            "waypoint-crash-child-{}.stderr",
            std::process::id()
        )),
        run_id: seed
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0),
        buffer,
        wal_limit,
        silor: silor_options(&args, scheme_kind(&args.scheme)?)?,
        command_snapshot: crate::args::parse_command_snapshot(
            args.snapshot.as_deref(),
            scheme_kind(&args.scheme)?.name(),
        )?,
        acked: HashSet::new(),
        lost: HashSet::new(),
    };
    let mut rng = SmallRng::seed_from_u64(seed);
    let started = Instant::now();
    let mut failures = Vec::new();
    let mut ran = 0;
    for cycle in 1..=args.cycles {
        let child_seed: u64 = rng.gen();
        let delay = Duration::from_millis(rng.gen_range(lo..=hi));
        ran += 1;
        match run.cycle(cycle, child_seed, delay) {
            Ok(c) => {
                let rec = match &c.recovery {
                    Some(r) => format!(
                        "recovery {:.1} ms ({} records, {:.1} MiB, {:.0} MB/s; {} winners, {} losers)",
                        r.total_ms,
                        r.records,
                        r.bytes as f64 / (1 << 20) as f64,
                        r.mb_per_sec,
                        r.winners,
                        r.losers
                    ),
                    None => "nothing to recover".to_string(),
                };
                println!(
                    "cycle {cycle:>3}: killed after {:>5} ms, {:>6} acknowledged ({} in all); {rec}; open {:.1} ms; verified",
                    c.delay.as_millis(),
                    c.acked,
                    run.acked.len(),
                    c.open.as_secs_f64() * 1e3
                );
            }
            Err(f) => {
                println!("cycle {cycle:>3}: FAILED: {}", f.why);
                let fatal = f.fatal;
                failures.push(f.why);
                if fatal {
                    println!("stopping: the database cannot be trusted for another cycle");
                    break;
                }
            }
        }
    }
    let _ = std::fs::remove_file(&run.stderr_path);
    println!(
        "{ran} cycles, {} failures ({} acknowledged transactions checked, {:.1} s)",
        failures.len(),
        run.acked.len(),
        started.elapsed().as_secs_f64()
    );
    if failures.is_empty() {
        return Ok(());
    }

    // Keep the database for a look.
    if let Some(t) = tmp {
        let kept = t.keep();
        println!("database kept in {}", kept.join("db").display());
    }
    let mut repro = format!(
        "waypoint crash-test {} --cycles {} --seed {seed} --kill-after-ms {lo}..{hi} --workers {} --in-flight {} --commit {} --buffer {} --wal-limit {}",
        args.workload, args.cycles, args.workers, args.in_flight, args.commit, args.buffer, args.wal_limit
    );
    if let Some(r) = args.records {
        repro += &format!(" --records {r}");
    }
    if let Some(s) = args.scale {
        repro += &format!(" --scale {s}");
    }
    if args.unsafe_phantom_ack {
        repro += " --unsafe-phantom-ack";
    }
    println!("seed {seed}; reproduce (from a fresh directory; where the kill lands is up to the scheduler, so it may take a few runs): {repro}");
    std::process::exit(1);
}

/// `--checkpoint`, `--checkpointers`, `--loggers`: `silor`'s options,
/// refused with another scheme.
fn silor_options(
    args: &CrashTestArgs,
    scheme: waypoint::SchemeKind,
) -> Result<waypoint::SilorOptions> {
    let d = waypoint::SilorOptions::default();
    if scheme != waypoint::SchemeKind::Silor {
        if args.checkpoint.is_some() || args.checkpointers.is_some() || args.loggers.is_some() {
            bail!("--checkpoint, --checkpointers and --loggers are options of --scheme silor");
        }
        return Ok(d);
    }
    let checkpoint = match args.checkpoint.as_deref() {
        None => d.checkpoint,
        Some(c) => crate::args::silor_checkpoint(c)?,
    };
    Ok(waypoint::SilorOptions {
        loggers: args.loggers.unwrap_or(d.loggers),
        checkpoint,
        checkpointers: args.checkpointers.unwrap_or(d.checkpointers),
    })
}
