//! The child process of `waypoint crash-test` and of `waypoint compare
//! recovery` (`waypoint crash-child`, hidden), and the parent's side of
//! it: start it, wait for its `READY`, kill it (`SIGKILL`) when the
//! caller says, and collect the commits it acknowledged.
//!
//! The child opens the database, rebuilds the workload from what the
//! database was loaded with ([`registry::reopen`]), and runs it on
//! `--workers` threads with pipelined commits. Each transaction also
//! inserts a row keyed by its id (run, cycle, worker, sequence number)
//! into the [`ACK_TABLE`] table, in the same transaction; once its commit
//! is durable (acknowledged), the child prints `ACK <cycle> <worker>
//! <seq>` on stdout (one `write` per line, flushed before the next commit
//! resolves). Invariant: a line is printed only after its commit is
//! durable, so every complete line names a commit recovery must keep.

use anyhow::{bail, Context, Result};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use waypoint::{Database, Error, Options, PerWorkerOptions, Persistence, SchemeKind};
use waypoint_bench::registry;
use waypoint_bench::workload::is_abort;

/// The table of acknowledged transaction ids.
pub const ACK_TABLE: &str = "crash_test_acks";
const READY: &str = "WAYPOINT-READY";
const ACK: &str = "ACK ";

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
    /// `silor`: the checkpoint trigger, as `SilorCheckpoint::name` writes it.
    #[arg(long)]
    pub silor_checkpoint: String,
    #[arg(long)]
    pub checkpointers: usize,
    #[arg(long)]
    pub loggers: usize,
    /// `command`: the snapshot trigger, as `CommandSnapshot::name` writes it.
    #[arg(long)]
    pub command_snapshot: String,
    /// `command`: run the calls on executor threads.
    #[arg(long)]
    pub executors: bool,
    /// Exit by itself after this long (a safety net if the parent vanished).
    #[arg(long)]
    pub max_run_ms: u64,
    /// Report one acknowledgement of a transaction that never ran.
    #[arg(long)]
    pub phantom_ack: bool,
}

/// The workloads' procedures, with the acknowledgement table insert-only
/// (each call inserts its own row, and no call reads one): acknowledging a
/// call does not make it a barrier of `command`'s parallel replay.
pub(crate) fn procedures() -> waypoint::Procedures {
    waypoint_bench::procedures()
        .insert_only(ACK_TABLE)
        .expect("the ack table is registered once")
}

/// The key of acknowledged transaction (run, cycle, worker, seq).
pub(crate) fn ack_key(run: u64, cycle: u32, worker: u32, seq: u64) -> [u8; 24] {
    let mut k = [0u8; 24];
    k[..8].copy_from_slice(&run.to_be_bytes());
    k[8..12].copy_from_slice(&cycle.to_be_bytes());
    k[12..16].copy_from_slice(&worker.to_be_bytes());
    k[16..].copy_from_slice(&seq.to_be_bytes());
    k
}

pub(crate) fn commit_protocol(name: &str) -> Result<waypoint::CommitProtocol> {
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

/// `--scheme` of a crash test: a scheme with a log.
pub(crate) fn scheme_kind(name: &str) -> Result<SchemeKind> {
    match SchemeKind::parse(name) {
        Some(k) if k.recovers_from_log() => Ok(k),
        Some(k) => bail!("--scheme {k} keeps no log: a kill loses its changes by design; use per-worker, aries, aether, silor or command"),
        None => bail!("unknown --scheme {name:?}; available: per-worker, aries, aether, silor, command"),
    }
}

/// The options of the child and of the recovery after it: `scheme` with
/// `commit` (a central log takes RFA's as group commit:
/// `CentralOptions::from_log`); under `command` a partition per worker,
/// as the benchmark driver runs it, on executor threads with `executors`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn open_options(
    scheme: SchemeKind,
    commit: waypoint::CommitProtocol,
    buffer: usize,
    wal_limit: u64,
    silor: &waypoint::SilorOptions,
    command_snapshot: waypoint::CommandSnapshot,
    workers: usize,
    executors: bool,
) -> Options {
    if scheme == SchemeKind::Command {
        return Options {
            create_if_missing: false,
            buffer_pool_bytes: buffer,
            // Write-set digests: every replayed call is checked to write
            // what it wrote before the kill.
            persistence: Persistence::Command(waypoint::CommandOptions {
                partitions: workers.clamp(1, waypoint::CommandOptions::MAX_PARTITIONS),
                snapshot: command_snapshot,
                digests: true,
                executors,
                ..waypoint::CommandOptions::default()
            }),
            // A command log is replayed by running its calls again.
            procedures: procedures(),
            ..Options::default()
        };
    }
    if scheme == SchemeKind::Silor {
        return Options {
            create_if_missing: false,
            buffer_pool_bytes: buffer,
            persistence: Persistence::Silor(silor.clone()),
            procedures: procedures(),
            ..Options::default()
        };
    }
    Options {
        create_if_missing: false,
        buffer_pool_bytes: buffer,
        // The scheme's own defaults (a central log's full checkpoints)
        // but the commit protocol and WAL limit given.
        persistence: Persistence::of(
            scheme,
            PerWorkerOptions {
                commit,
                wal_limit_bytes: wal_limit,
                ..Persistence::default_of(scheme)
                    .log_options()
                    .cloned()
                    .unwrap_or_default()
            },
        ),
        // A command log is replayed by running its calls again.
        procedures: procedures(),
        ..Options::default()
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
        &waypoint::SilorOptions {
            checkpoint: waypoint::SilorCheckpoint::parse(&args.silor_checkpoint, |s| {
                s.parse().ok()
            })
            .map_err(|e| anyhow::anyhow!(e))?,
            checkpointers: args.checkpointers,
            loggers: args.loggers,
        },
        waypoint::CommandSnapshot::parse(&args.command_snapshot, |s| s.parse().ok())
            .map_err(|e| anyhow::anyhow!(e))?,
        args.workers,
        args.executors,
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
                    let key = ack_key(args.run, args.cycle, w as u32, seq);
                    // A workload of stored procedures writes the ack row
                    // in its call (the only writes `command` takes).
                    let ack = (ACK_TABLE.to_string(), key.to_vec());
                    let outcome = match gen.call(&mut session, false, Some(ack)) {
                        Some((_, called)) => called,
                        None => {
                            let mut tx = session.begin().unwrap_or_else(|e| fail(seq, e));
                            let (_, body) = gen.next(&mut tx);
                            body.and_then(|()| tx.insert(acks, &key, &[]))
                                .and_then(|()| tx.commit_pipelined())
                        }
                    };
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
// The parent's side.

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
fn read_acks(
    stdout: ChildStdout,
    ready: mpsc::Sender<()>,
    count: &AtomicU64,
) -> Result<Vec<(u32, u32, u64)>, String> {
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
        count.fetch_add(1, Ordering::Relaxed);
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

/// A failed cycle: why, and whether the database can take another cycle.
pub(crate) struct Failure {
    pub why: String,
    pub fatal: bool,
}

pub(crate) fn fail(why: impl Into<String>, fatal: bool) -> Failure {
    Failure {
        why: why.into(),
        fatal,
    }
}

/// What a crash child runs: the arguments of `waypoint crash-child`.
pub(crate) struct ChildSpec<'a> {
    pub workload: &'a str,
    pub dir: &'a Path,
    pub run: u64,
    pub cycle: u32,
    pub seed: u64,
    pub workers: usize,
    pub in_flight: usize,
    pub commit: &'a str,
    pub scheme: SchemeKind,
    pub buffer: usize,
    pub wal_limit: u64,
    /// The child exits by itself after this long.
    pub max_run_ms: u64,
    pub phantom_ack: bool,
    pub silor: waypoint::SilorOptions,
    pub command_snapshot: waypoint::CommandSnapshot,
    /// `command`: the child's calls run on executor threads.
    pub executors: bool,
}

/// Start `waypoint crash-child` (`exe`) with `spec`, wait for it to be
/// ready, `SIGKILL` it once `kill_now(acknowledged so far)` says so
/// (asked every 5 ms from then on), and return the ids of the commits it
/// acknowledged. Its
/// stderr goes to `stderr_path`, whose last lines explain a child that
/// never got ready or exited before the kill. `crash-test` kills after a
/// random delay; `compare recovery` once the log holds the WAL limit.
pub(crate) fn run_child_until_killed(
    exe: &Path,
    spec: &ChildSpec<'_>,
    stderr_path: &Path,
    kill_now: &mut dyn FnMut(u64) -> bool,
) -> Result<Vec<(u32, u32, u64)>, Failure> {
    let stderr = std::fs::File::create(stderr_path)
        .map_err(|e| fail(format!("{}: {e}", stderr_path.display()), true))?;
    let mut command = Command::new(exe);
    command
        .arg("crash-child")
        .arg(spec.workload)
        .arg("--dir")
        .arg(spec.dir)
        .args(["--run", &spec.run.to_string()])
        .args(["--cycle", &spec.cycle.to_string()])
        .args(["--seed", &spec.seed.to_string()])
        .args(["--workers", &spec.workers.to_string()])
        .args(["--in-flight", &spec.in_flight.to_string()])
        .args(["--commit", spec.commit])
        .args(["--scheme", spec.scheme.name()])
        .args(["--buffer", &spec.buffer.to_string()])
        .args(["--wal-limit", &spec.wal_limit.to_string()])
        .args(["--silor-checkpoint", &spec.silor.checkpoint.name()])
        .args(["--checkpointers", &spec.silor.checkpointers.to_string()])
        .args(["--loggers", &spec.silor.loggers.to_string()])
        .args(["--command-snapshot", &spec.command_snapshot.name()])
        .args(spec.executors.then_some("--executors"))
        .args(["--max-run-ms", &spec.max_run_ms.to_string()])
        .args(spec.phantom_ack.then_some("--phantom-ack"))
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
    let acked = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&acked);
    let reader = std::thread::spawn(move || read_acks(stdout, ready_tx, &counted));
    let early = |child: &mut Child, what: &str| {
        let status = child
            .try_wait()
            .ok()
            .flatten()
            .map_or("running".to_string(), |s| s.to_string());
        fail(
            format!("the child {what} ({status}): {}", stderr_tail(stderr_path)),
            false,
        )
    };
    if ready_rx.recv_timeout(Duration::from_secs(60)).is_err() {
        let _ = child.kill();
        let _ = child.wait();
        return Err(early(child, "never reported ready"));
    }
    while !kill_now(acked.load(Ordering::Relaxed)) {
        if let Ok(Some(_)) = child.try_wait() {
            return Err(early(child, "exited before the kill"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut child = guard.0.take().expect("child");
    // SIGKILL; fails only if the child already exited, which `wait`
    // then reports (and the check after recovery judges what it left).
    let _ = child.kill();
    let _ = child.wait();
    reader
        .join()
        .map_err(|_| fail("the ack reader panicked", true))?
        .map_err(|e| fail(e, true))
}
