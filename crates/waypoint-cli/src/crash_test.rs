//! `waypoint crash-test WORKLOAD --cycles N`: run a workload in a child
//! process, `SIGKILL` it at a random moment, recover, verify, repeat on the
//! same database (so it ages across cycles).
//!
//! The child is this binary again (`waypoint crash-child`, hidden). It opens
//! the database, rebuilds the workload from what the database was loaded
//! with ([`registry::reopen`]), and runs it on `--workers` threads with
//! pipelined commits. Each transaction also inserts a row keyed by its id
//! (run, cycle, worker, sequence number) into the `crash_test_acks` table,
//! in the same transaction; once its commit is durable (acknowledged), the
//! child prints `ACK <cycle> <worker> <seq>` on stdout (one `write` per
//! line, flushed before the next commit resolves). The idea is
//! `crates/waypoint/tests/kill.rs`'s, with any driver workload.
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

use crate::tools::require_database;
use anyhow::{bail, Context, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{HashSet, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use waypoint::{Database, Error, Options, PerWorkerOptions, Persistence, SchemeKind};
use waypoint_bench::load::for_each_row;
use waypoint_bench::registry;
use waypoint_bench::summary::RecoverySummary;
use waypoint_bench::tpcb::{Tpcb, TpcbConfig};
use waypoint_bench::tpcc::{Tpcc, TpccConfig};
use waypoint_bench::voter::{Voter, VoterConfig};
use waypoint_bench::workload::{is_abort, Workload};
use waypoint_bench::ycsb::{Ycsb, YcsbConfig};

/// The table of acknowledged transaction ids.
pub const ACK_TABLE: &str = "crash_test_acks";
const READY: &str = "WAYPOINT-READY";
const ACK: &str = "ACK ";
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
    /// With `--scheme aries`, rfa and rfa-group mean group (a central log
    /// has no other log to avoid flushing).
    #[arg(long, default_value = "rfa-group")]
    pub commit: String,
    /// Persistence scheme of the child and of recovery: per-worker or
    /// aries (none keeps no log: a kill loses what it changed, by design).
    #[arg(long, default_value = "per-worker")]
    pub scheme: String,
    /// Buffer pool of the child on odd cycles (even cycles: at most 2 MiB,
    /// so pages with uncommitted changes are stolen).
    #[arg(long, default_value = "64MiB")]
    pub buffer: String,
    /// WAL limit of the child and of recovery. Small by default, so that
    /// every cycle checkpoints, prunes and recycles log segments (segments
    /// are 1/32 of it) before the kill.
    #[arg(long, default_value = "16MiB")]
    pub wal_limit: String,
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

/// The hidden child command.
#[derive(clap::Args)]
pub struct CrashChildArgs {
    pub workload: String,
    #[arg(long)]
    pub dir: PathBuf,
    #[arg(long)]
    pub run: u64,
    #[arg(long)]
    pub cycle: u32,
    #[arg(long)]
    pub seed: u64,
    #[arg(long)]
    pub workers: usize,
    #[arg(long)]
    pub in_flight: usize,
    #[arg(long)]
    pub commit: String,
    #[arg(long)]
    pub scheme: String,
    #[arg(long)]
    pub buffer: usize,
    #[arg(long)]
    pub wal_limit: u64,
    /// Exit by itself after this long (a safety net if the parent vanished).
    #[arg(long)]
    pub max_run_ms: u64,
    /// Report one acknowledgement of a transaction that never ran.
    #[arg(long)]
    pub phantom_ack: bool,
}

/// The key of acknowledged transaction (run, cycle, worker, seq).
fn ack_key(run: u64, cycle: u32, worker: u32, seq: u64) -> [u8; 24] {
    let mut k = [0u8; 24];
    k[..8].copy_from_slice(&run.to_be_bytes());
    k[8..12].copy_from_slice(&cycle.to_be_bytes());
    k[12..16].copy_from_slice(&worker.to_be_bytes());
    k[16..].copy_from_slice(&seq.to_be_bytes());
    k
}

fn commit_protocol(name: &str) -> Result<waypoint::CommitProtocol> {
    waypoint::CommitProtocol::parse(name).with_context(|| {
        format!("unknown --commit {name:?}; available: rfa-group, group, rfa, flush-all, async")
    })
}

// ---------------------------------------------------------------------------
// The child.

static STDOUT: Mutex<()> = Mutex::new(());

/// One line, one `write`, flushed; exits if the parent is gone.
fn report(line: &str) {
    let _guard = STDOUT.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = std::io::stdout().lock();
    if out
        .write_all(format!("{line}\n").as_bytes())
        .and_then(|()| out.flush())
        .is_err()
    {
        std::process::exit(3);
    }
}

fn child_fail(why: String) -> ! {
    eprintln!("crash-child: {why}");
    std::process::exit(2);
}

pub fn child(args: CrashChildArgs) -> Result<()> {
    let options = open_options(
        scheme_kind(&args.scheme)?,
        commit_protocol(&args.commit)?,
        args.buffer,
        args.wal_limit,
    );
    let db = Database::open(&args.dir, options).context("open")?;
    let workload = registry::reopen(&db, &args.workload)?;
    let acks = db.table(ACK_TABLE)?;
    report(READY);
    if args.phantom_ack {
        report(&format!("{ACK}{} 0 {}", args.cycle, u64::MAX));
    }
    let started = Instant::now();
    let max_run = Duration::from_millis(args.max_run_ms);
    std::thread::scope(|s| {
        for w in 0..args.workers {
            let (db, workload, acks, args) = (&db, &workload, &acks, &args);
            let spawned = std::thread::Builder::new().spawn_scoped(s, move || {
                let mut session = db.session();
                let mut gen = workload.worker(w, args.seed ^ ((w as u64 + 1) << 32));
                let mut pending: VecDeque<(u64, waypoint::PendingCommit)> = VecDeque::new();
                let fail = |seq: u64, e: Error| -> ! {
                    child_fail(format!("worker {w}, transaction {seq}: {e}"))
                };
                for seq in 0u64.. {
                    if started.elapsed() > max_run {
                        child_fail(format!("ran for {max_run:?} without being killed"));
                    }
                    let mut tx = session.begin().unwrap_or_else(|e| fail(seq, e));
                    let (_, body) = gen.next(&mut tx);
                    let key = ack_key(args.run, args.cycle, w as u32, seq);
                    let outcome = body
                        .and_then(|()| tx.insert(acks, &key, &[]))
                        .and_then(|()| tx.commit_pipelined());
                    match outcome {
                        Ok(p) => pending.push_back((seq, p)),
                        Err(e) if is_abort(&e) => {}
                        Err(e) => fail(seq, e),
                    }
                    // Resolve the oldest: durable ones at once, and block
                    // while too many are in flight.
                    while let Some((_, p)) = pending.front() {
                        if pending.len() < args.in_flight && !p.is_durable() {
                            break;
                        }
                        let (seq, p) = pending.pop_front().expect("front exists");
                        match p.wait() {
                            // Acknowledged: only now may the parent count on it.
                            Ok(_) => report(&format!("{ACK}{} {w} {seq}", args.cycle)),
                            Err(e) if is_abort(&e) => {}
                            Err(e) => fail(seq, e),
                        }
                    }
                }
            });
            if let Err(e) = spawned {
                child_fail(format!("cannot start worker thread {w}: {e}"));
            }
        }
    });
    unreachable!("the workers run until the process is killed")
}

// ---------------------------------------------------------------------------
// The parent.

/// Kills and reaps the child on every path out of a cycle.
struct ChildGuard(Option<Child>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Reads the child's stdout until EOF: signals `ready`, collects the ids
/// of complete ack lines (a line cut off by the kill does not count).
fn read_acks(stdout: ChildStdout, ready: mpsc::Sender<()>) -> Result<Vec<(u32, u32, u64)>, String> {
    let mut reader = BufReader::new(stdout);
    let mut acks = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("reading the child's stdout: {e}"))?;
        if n == 0 || line.last() != Some(&b'\n') {
            return Ok(acks);
        }
        let text = String::from_utf8_lossy(&line);
        if text.trim_end() == READY {
            let _ = ready.send(());
            continue;
        }
        let parsed = text.strip_prefix(ACK).and_then(|rest| {
            let mut f = rest.split_whitespace().map(|x| x.parse::<u64>().ok());
            let (c, w, s) = (f.next()??, f.next()??, f.next()??);
            Some((u32::try_from(c).ok()?, u32::try_from(w).ok()?, s))
        });
        acks.push(parsed.ok_or_else(|| format!("malformed line from the child: {text:?}"))?);
    }
}

/// The last lines of the child's stderr, on one line.
fn stderr_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
    if tail.is_empty() {
        "(no stderr)".into()
    } else {
        tail
    }
}

/// `--scheme`: a scheme with a log.
fn scheme_kind(name: &str) -> Result<SchemeKind> {
    match SchemeKind::parse(name) {
        Some(k) if k.recovers_from_log() => Ok(k),
        Some(k) => bail!("--scheme {k} keeps no log: a kill loses its changes by design; use per-worker or aries"),
        None => bail!("unknown --scheme {name:?}; available: per-worker, aries"),
    }
}

fn open_options(
    scheme: SchemeKind,
    commit: waypoint::CommitProtocol,
    buffer: usize,
    wal_limit: u64,
) -> Options {
    Options {
        create_if_missing: false,
        buffer_pool_bytes: buffer,
        persistence: Persistence::of(
            scheme,
            PerWorkerOptions {
                commit,
                wal_limit_bytes: wal_limit,
                ..PerWorkerOptions::default()
            },
        ),
        ..Options::default()
    }
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

/// A failed cycle: why, and whether the database can take another cycle.
struct Failure {
    why: String,
    fatal: bool,
}

fn fail(why: impl Into<String>, fatal: bool) -> Failure {
    Failure {
        why: why.into(),
        fatal,
    }
}

struct Run<'a> {
    args: &'a CrashTestArgs,
    exe: PathBuf,
    dir: PathBuf,
    stderr_path: PathBuf,
    run_id: u64,
    buffer: usize,
    wal_limit: u64,
    /// Every acknowledged id of every cycle.
    acked: HashSet<[u8; 24]>,
    /// Acknowledged ids found missing (reported once).
    lost: HashSet<[u8; 24]>,
}

impl Run<'_> {
    fn cycle(&mut self, cycle: u32, child_seed: u64, delay: Duration) -> Result<Cycle, Failure> {
        let a = self.args;
        let buffer = if cycle % 2 == 1 {
            self.buffer
        } else {
            self.buffer.min(SMALL_POOL)
        };
        let stderr = std::fs::File::create(&self.stderr_path)
            .map_err(|e| fail(format!("{}: {e}", self.stderr_path.display()), true))?;
        let (lo, hi) = a.kill_after_ms;
        let mut command = Command::new(&self.exe);
        command
            .arg("crash-child")
            .arg(&a.workload)
            .arg("--dir")
            .arg(&self.dir)
            .args(["--run", &self.run_id.to_string()])
            .args(["--cycle", &cycle.to_string()])
            .args(["--seed", &child_seed.to_string()])
            .args(["--workers", &a.workers.to_string()])
            .args(["--in-flight", &a.in_flight.to_string()])
            .args(["--commit", &a.commit])
            .args(["--scheme", &a.scheme])
            .args(["--buffer", &buffer.to_string()])
            .args(["--wal-limit", &self.wal_limit.to_string()])
            .args(["--max-run-ms", &(hi.max(lo) + 120_000).to_string()])
            .args(a.unsafe_phantom_ack.then_some("--phantom-ack"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr));
        let mut guard = ChildGuard(Some(
            command
                .spawn()
                .map_err(|e| fail(format!("cannot start the child: {e}"), true))?,
        ));
        let child = guard.0.as_mut().expect("child");
        let stdout = child.stdout.take().expect("piped stdout");
        let (ready_tx, ready_rx) = mpsc::channel();
        let reader = std::thread::spawn(move || read_acks(stdout, ready_tx));
        let early = |child: &mut Child, what: &str| {
            let status = child
                .try_wait()
                .ok()
                .flatten()
                .map_or("running".to_string(), |s| s.to_string());
            fail(
                format!(
                    "the child {what} ({status}): {}",
                    stderr_tail(&self.stderr_path)
                ),
                false,
            )
        };
        if ready_rx.recv_timeout(Duration::from_secs(60)).is_err() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(early(child, "never reported ready"));
        }
        std::thread::sleep(delay);
        if let Ok(Some(_)) = child.try_wait() {
            return Err(early(child, "exited before the kill"));
        }
        let mut child = guard.0.take().expect("child");
        // SIGKILL; fails only if the child already exited, which `wait`
        // then reports (and the check below judges what it left).
        let _ = child.kill();
        let _ = child.wait();
        let acks = reader
            .join()
            .map_err(|_| fail("the ack reader panicked", true))?
            .map_err(|e| fail(e, true))?;
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
    let commit = commit_protocol(&args.commit)?;
    let scheme = scheme_kind(&args.scheme)?;
    let buffer = crate::args::parse_size("buffer", &args.buffer)?;
    let wal_limit = crate::args::parse_size("wal-limit", &args.wal_limit)? as u64;
    // The children's options (an even cycle's smaller buffer is valid
    // when this one is: at least 16 pages, at most 2 MiB).
    open_options(scheme, commit, buffer, wal_limit)
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
