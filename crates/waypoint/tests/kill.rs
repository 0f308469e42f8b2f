//! Real process crash: `kill -9` at a random moment loses no acknowledged
//! commit and leaves no partial transfer (DESIGN.md invariant 5, process
//! crash half).
//!
//! `tests/crash.rs` proves the invariants under a *simulated* power loss.
//! This file proves them against the real file system and a real
//! `SIGKILL`: no simulator, no cooperative shutdown, the kernel tears the
//! process down wherever it happens to be (mid-append, mid-fdatasync,
//! mid-eviction, between a commit becoming durable and its acknowledgement
//! being reported).
//!
//! Shape (self-re-exec): the test binary runs itself again as the child,
//! `<this test binary> --exact child_entry --nocapture --test-threads=1`
//! with `WAYPOINT_KILL_CHILD_DIR` set. The child opens the database with
//! the real file system, runs bank transfers (the workload of
//! `tests/crash.rs`: an `accounts` table and a `history` row per transfer
//! keyed by (session, seq)) on three worker threads forever, and after
//! every acknowledged commit (`run` returned `Ok`) writes
//! `WAYPOINT-ACK <session> <seq> <from> <to> <amount>` to stdout and
//! flushes. The parent loads the accounts once, then per cycle spawns the
//! child, sleeps a random 200..1500 ms after the child reports ready,
//! `SIGKILL`s it, drains the pipe (every complete line read is an
//! acknowledged commit), reopens the database in-process (recovery) and
//! checks:
//! - every transfer acknowledged in this or any earlier cycle is present,
//!   with the amounts the child reported;
//! - every account's balance equals its initial balance plus the history
//!   rows that credit it minus those that debit it (no partial transfer);
//! - the total is unchanged and `check_integrity()` passes.
//!
//! It then prints the recovery report and closes cleanly; the next cycle
//! runs on the same directory, so recovering a database that was itself
//! recovered before is covered. The commit protocol cycles through
//! RfaGroup, Rfa, Group and FlushAll (all promise to survive a process
//! crash), and every other cycle the child runs with a tiny buffer pool so
//! pages with uncommitted changes are stolen and written before the kill
//! (recovery must then undo losers on disk, not just redo winners).
//!
//! The test also refuses to pass vacuously: at least one kill must have
//! happened after acknowledged commits, and at least one recovery must
//! have processed log records.
//!
//! A second test, `clean_close_after_kill_recovery_leaves_no_log`, runs one
//! such cycle and checks that the clean close after recovery deleted the
//! whole log: a regression test for a bug the first test found (recovered
//! partitions that no session reopened kept their segments forever; see
//! its doc comment).
//!
//! Knobs: `WAYPOINT_KILL_CYCLES` (default 5), `WAYPOINT_KILL_SEED` (default:
//! from the clock; a failure prints it). The seed fixes the kill delays, the
//! protocols' order and the workload's random choices; where the kill lands
//! in the child's execution is up to the scheduler, so a failure may need a
//! few reruns to reproduce.
//!
//! Child-only variables (set by the parent): `WAYPOINT_KILL_CHILD_DIR`,
//! `WAYPOINT_KILL_CHILD_SEED`, `WAYPOINT_KILL_CHILD_PROTOCOL`,
//! `WAYPOINT_KILL_CHILD_CYCLE`, `WAYPOINT_KILL_CHILD_POOL`.

mod common;
use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use waypoint::wal::CommitProtocol;
use waypoint::SchemeKind;
use waypoint::{Database, Error, Options, PerWorkerOptions, Persistence};

const WORKERS: u32 = 3;
/// Page size chosen at creation: small, so the tiny-pool cycles hold only
/// a fraction of the data and must steal dirty pages.
const PAGE_SIZE: usize = 4096;
/// The tiny pool of every other cycle, in frames (the engine's minimum
/// is 16).
const TINY_POOL_FRAMES: usize = 20;

const ACK: &str = "WAYPOINT-ACK ";
const READY: &str = "WAYPOINT-READY";

const PROTOCOLS: [CommitProtocol; 4] = [
    CommitProtocol::RfaGroup,
    CommitProtocol::Rfa,
    CommitProtocol::Group,
    CommitProtocol::FlushAll,
];

// ---------------------------------------------------------------------------
// The workload's encoding (a private copy of tests/crash.rs's).

fn env_parse<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().map(|s| {
        s.parse()
            .unwrap_or_else(|_| panic!("{name}={s:?} is not a valid value"))
    })
}

// ---------------------------------------------------------------------------
// The child.

/// Runs only when re-executed by the parent test (the variable is unset in
/// a normal `cargo test` run, where it returns at once). Never returns
/// then: it runs transfers until it is killed.
#[test]
fn child_entry() {
    let Some(dir) = std::env::var_os("WAYPOINT_KILL_CHILD_DIR") else {
        return;
    };
    let seed: u64 = env_parse("WAYPOINT_KILL_CHILD_SEED").expect("child seed");
    let cycle: u32 = env_parse("WAYPOINT_KILL_CHILD_CYCLE").expect("child cycle");
    let protocol = std::env::var("WAYPOINT_KILL_CHILD_PROTOCOL")
        .ok()
        .and_then(|s| CommitProtocol::parse(&s))
        .expect("child protocol");
    let scheme = std::env::var("WAYPOINT_KILL_CHILD_SCHEME")
        .ok()
        .and_then(|s| SchemeKind::parse(&s))
        .unwrap_or_default();
    let mut options = Options {
        persistence: persistence(scheme, protocol),
        // Under `command` the transfers run as the bank's procedure.
        procedures: waypoint_sim::bank::procedures(),
        ..Options::default()
    };
    if let Some(pool) = env_parse("WAYPOINT_KILL_CHILD_POOL") {
        options.buffer_pool_bytes = pool;
    }
    let db = Database::open(&dir, options).unwrap_or_else(|e| child_fail(&format!("open: {e}")));
    let accounts = db.table("accounts").expect("accounts table");
    let history = db.table("history").expect("history table");
    // The harness prints "test child_entry ... " without a newline before
    // running a test: start on a line of our own (the parent matches the
    // markers anywhere in a line anyway).
    report_line(&format!("\n{READY}"));

    // A safety net, not part of the protocol: if the parent vanished
    // without killing us (its pipe end stays open in a grandchild, say),
    // do not run forever. The parent kills long before this.
    let started = Instant::now();
    let max_run = Duration::from_secs(120);

    std::thread::scope(|scope| {
        for w in 0..WORKERS {
            let (db, accounts, history) = (&db, &accounts, &history);
            scope.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed.wrapping_mul(31).wrapping_add(w as u64));
                // Sessions are numbered per cycle so history keys of earlier
                // (killed) children never collide with ours.
                let session = cycle * WORKERS + w;
                let mut s = db.session();
                for seq in 0u32.. {
                    if started.elapsed() > max_run {
                        child_fail("ran for 120 s without being killed");
                    }
                    let from = rng.gen_range(0..ACCOUNTS);
                    let to = (from + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
                    let amount = rng.gen_range(1..50i64);
                    let result = transfer(
                        &mut s,
                        accounts,
                        history,
                        None,
                        from,
                        to,
                        amount,
                        history_key(session, seq),
                    );
                    match result {
                        // Acknowledged: only now may the parent hold us to it.
                        Ok(()) => {
                            report_line(&format!("{ACK}{session} {seq} {from} {to} {amount}"))
                        }
                        // Retries exhausted: nothing committed, not acked.
                        Err(Error::Conflict) => {}
                        // Nothing else may fail on a healthy disk. Exit the
                        // whole process (a panic would only end this thread
                        // while the others run on): the parent reports an
                        // early exit with our stderr.
                        Err(e) => child_fail(&format!("session {session} seq {seq}: {e}")),
                    }
                }
            });
        }
    });
    unreachable!("the workers run until the process is killed");
}

/// Serialises the children's report lines so two workers never interleave
/// within a line.
static STDOUT: Mutex<()> = Mutex::new(());

fn report_line(line: &str) {
    let _guard = STDOUT.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = std::io::stdout().lock();
    // One write of one short line (far below PIPE_BUF): the parent sees
    // the whole line or none of it. Flushed before the next transfer starts,
    // so an ack is never stuck in our buffer when the kill comes.
    let ok = out
        .write_all(format!("{line}\n").as_bytes())
        .and_then(|()| out.flush());
    if ok.is_err() {
        // The parent closed the pipe: it is gone, so are we.
        std::process::exit(3);
    }
}

fn child_fail(why: &str) -> ! {
    eprintln!("waypoint kill-test child failed: {why}");
    std::process::exit(2);
}

// ---------------------------------------------------------------------------
// The parent.

/// What a killed child reported: acknowledged transfers, keyed by history
/// key, with the (from, to, amount) the child committed.
type Acks = HashMap<[u8; 8], (u32, u32, i64)>;

/// Kills and reaps the child on every path out of a cycle, panics included:
/// a leaked child would run transfers until its 120 s safety net.
struct ChildGuard {
    child: Option<Child>,
}

impl ChildGuard {
    fn child(&mut self) -> &mut Child {
        self.child.as_mut().expect("child still owned")
    }

    /// SIGKILL (what `Child::kill` sends on Unix) and reap.
    fn kill_and_wait(&mut self) -> std::io::Result<ExitStatus> {
        let mut child = self.child.take().expect("child still owned");
        // Fails only if it already exited: wait() then reports that.
        let _ = child.kill();
        child.wait()
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Reads the child's stdout until EOF (the kill closes it). Signals `ready`
/// at the ready line; returns every acknowledgement. Only complete lines
/// count: the child writes each line with one `write`, so a line without
/// its newline cannot occur, and if it did we could not trust its numbers.
fn read_acks(stdout: ChildStdout, ready: mpsc::Sender<()>) -> Result<Acks, String> {
    let mut reader = BufReader::new(stdout);
    let mut acks = Acks::new();
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
        if text.contains(READY) {
            let _ = ready.send(());
        }
        // Anything else is the test harness talking: ignore it.
        let Some(at) = text.find(ACK) else { continue };
        let fields: Vec<&str> = text[at + ACK.len()..].split_whitespace().collect();
        let parsed = (|| {
            let [session, seq, from, to, amount] = fields[..] else {
                return None;
            };
            Some((
                history_key(session.parse().ok()?, seq.parse().ok()?),
                (from.parse().ok()?, to.parse().ok()?, amount.parse().ok()?),
            ))
        })();
        let (key, transfer) = parsed.ok_or_else(|| format!("malformed ack line {text:?}"))?;
        if acks.insert(key, transfer).is_some() {
            return Err(format!("history key acked twice: {text:?}"));
        }
    }
}

fn stderr_of(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| format!("(cannot read {path:?}: {e})"))
}

/// Create the database and the accounts in-process and close cleanly: the
/// durable starting point of every cycle.
fn load(dir: &Path) {
    let db = Database::open(
        dir,
        Options {
            page_size: Some(PAGE_SIZE),
            ..Options::default()
        },
    )
    .expect("create the database");
    let accounts = db.create_table("accounts").unwrap();
    db.create_table("history").unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    for a in 0..ACCOUNTS {
        tx.insert(&accounts, &account_key(a), &with_balance(INITIAL))
            .unwrap();
    }
    tx.commit().unwrap();
    drop(s);
    db.close().expect("clean close after load");
}

/// What one cycle observed, for the summary and the vacuity check.
struct CycleOutcome {
    acked: usize,
    records: u64,
    /// Log files still on disk after the cycle's clean close.
    log_left: Vec<(String, u64)>,
}

#[allow(clippy::too_many_arguments)]
fn kill_one_child(
    exe: &Path,
    db_dir: &Path,
    stderr_path: &Path,
    cycle: u32,
    protocol: CommitProtocol,
    scheme: SchemeKind,
    tiny_pool: bool,
    child_seed: u64,
    delay: Duration,
    ctx: &str,
) -> Acks {
    let stderr = std::fs::File::create(stderr_path).expect("child stderr file");
    let mut command = Command::new(exe);
    command
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env("WAYPOINT_KILL_CHILD_DIR", db_dir)
        .env("WAYPOINT_KILL_CHILD_SEED", child_seed.to_string())
        .env("WAYPOINT_KILL_CHILD_CYCLE", cycle.to_string())
        .env("WAYPOINT_KILL_CHILD_PROTOCOL", protocol.name())
        .env("WAYPOINT_KILL_CHILD_SCHEME", scheme.name())
        .env_remove("WAYPOINT_KILL_CHILD_POOL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        // To a file, not a pipe: nobody would drain a pipe while the child
        // runs, and a full one would block it.
        .stderr(Stdio::from(stderr));
    if tiny_pool {
        command.env(
            "WAYPOINT_KILL_CHILD_POOL",
            (TINY_POOL_FRAMES * PAGE_SIZE).to_string(),
        );
    }
    let mut guard = ChildGuard {
        child: Some(command.spawn().expect("spawn the child")),
    };
    let stdout = guard.child().stdout.take().expect("piped stdout");
    let (ready_tx, ready_rx) = mpsc::channel();
    let reader = std::thread::spawn(move || read_acks(stdout, ready_tx));

    // The random delay counts from the moment the workload starts, so the
    // kill lands among transfers rather than in process start-up.
    if let Err(e) = ready_rx.recv_timeout(Duration::from_secs(60)) {
        let status = guard.kill_and_wait();
        panic!(
            "{ctx}: the child never reported ready ({e}; status {status:?}); stderr:\n{}",
            stderr_of(stderr_path)
        );
    }
    std::thread::sleep(delay);
    // It must still be running: it never stops by itself.
    if let Ok(Some(status)) = guard.child().try_wait() {
        panic!(
            "{ctx}: the child exited on its own ({status}); stderr:\n{}",
            stderr_of(stderr_path)
        );
    }
    let status = guard.kill_and_wait().expect("reap the child");
    // The kill closed the pipe's write end: the reader drains everything
    // written before it and stops.
    let acks = reader
        .join()
        .expect("reader thread")
        .unwrap_or_else(|e| panic!("{ctx}: {e}"));
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "{ctx}: the child was not ended by our SIGKILL ({status}); stderr:\n{}",
            stderr_of(stderr_path)
        );
    }
    acks
}

/// `scheme` with `protocol` as its commit protocol where it has a log (a
/// central log takes RFA's as group commit: `CentralOptions::from_log`).
fn persistence(scheme: SchemeKind, protocol: CommitProtocol) -> Persistence {
    Persistence::of(
        scheme,
        PerWorkerOptions {
            commit: protocol,
            ..PerWorkerOptions::default()
        },
    )
}

/// Reopen (recover), check everything acknowledged so far, close.
/// Returns the number of log records recovery processed and the log files
/// left after the clean close.
fn recover_and_verify(
    db_dir: &Path,
    scheme: SchemeKind,
    protocol: CommitProtocol,
    acked: &Acks,
    ctx: &str,
) -> (u64, Vec<(String, u64)>) {
    let started = Instant::now();
    let db = Database::open(
        db_dir,
        Options {
            persistence: persistence(scheme, protocol),
            procedures: waypoint_sim::bank::procedures(),
            ..Options::default()
        },
    )
    .unwrap_or_else(|e| panic!("{ctx}: recovery failed: {e}"));
    let open_time = started.elapsed();
    let report = db
        .recovery_report()
        .unwrap_or_else(|| panic!("{ctx}: logging is on, so open must report its recovery"))
        .clone();
    println!(
        "{ctx}: recovery: {} records, {} log bytes in {} partitions / {} segments; \
         winners {}, losers {}, redone {} records on {} pages, undone {}, torn tails {}, \
         gaps {}, committed beyond gap {}, torn pages repaired {}; \
         analysis {:?}, redo {:?}, undo {:?} (open {:?})",
        report.records,
        report.log_bytes,
        report.partitions,
        report.segments,
        report.winners,
        report.losers,
        report.records_redone,
        report.pages_redone,
        report.records_undone,
        report.torn_tails,
        report.gaps,
        report.committed_beyond_gap,
        report.repaired_torn_pages,
        report.analysis,
        report.redo,
        report.undo,
        open_time,
    );

    let accounts = db.table("accounts").unwrap();
    let history = db.table("history").unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    let rows = tx
        .scan(&history, .., usize::MAX)
        .unwrap_or_else(|e| panic!("{ctx}: scanning history: {e}"));
    let present: HashMap<&[u8], (u32, u32, i64)> = rows
        .iter()
        .map(|(k, v)| (k.as_slice(), decode_history(v)))
        .collect();
    let mut lost: Vec<(u64, (u32, u32, i64))> = acked
        .iter()
        .filter(|(k, _)| !present.contains_key(&k[..]))
        .map(|(k, t)| (u64::from_be_bytes(*k), *t))
        .collect();
    lost.sort();
    assert!(
        lost.is_empty(),
        "{ctx}: {} of {} acknowledged transfers lost (key = session << 32 | seq, \
         (from, to, amount)); first: {:?}",
        lost.len(),
        acked.len(),
        &lost[..lost.len().min(10)]
    );
    for (k, t) in acked {
        assert_eq!(
            present[&k[..]],
            *t,
            "{ctx}: history row {:#x} differs from what was acknowledged",
            u64::from_be_bytes(*k)
        );
    }
    let mut expected = vec![INITIAL; ACCOUNTS as usize];
    for (from, to, amount) in present.values() {
        expected[*from as usize] -= amount;
        expected[*to as usize] += amount;
    }
    let mut total = 0;
    for a in 0..ACCOUNTS {
        let b = balance(
            &tx.get(&accounts, &account_key(a))
                .unwrap_or_else(|e| panic!("{ctx}: reading account {a}: {e}"))
                .unwrap_or_else(|| panic!("{ctx}: account {a} missing")),
        );
        assert_eq!(
            b, expected[a as usize],
            "{ctx}: account {a} disagrees with the history rows present (partial transfer)"
        );
        total += b;
    }
    assert_eq!(
        total,
        INITIAL * ACCOUNTS as i64,
        "{ctx}: money created or destroyed"
    );
    drop(tx);
    drop(s);
    let counts = db
        .check_integrity()
        .unwrap_or_else(|e| panic!("{ctx}: integrity check failed: {e}"));
    println!(
        "{ctx}: verified {} acked transfers ({} history rows present), trees {counts:?}",
        acked.len(),
        rows.len()
    );
    drop((accounts, history));
    db.close()
        .unwrap_or_else(|e| panic!("{ctx}: clean close after recovery failed: {e}"));
    let left = log_files(db_dir);
    println!(
        "{ctx}: log left after the clean close: {} files, {} bytes",
        left.len(),
        left.iter().map(|f| f.1).sum::<u64>()
    );
    (report.records, left)
}

/// Every file under the database's log directory, with its size.
fn log_files(db_dir: &Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![db_dir.join("wal")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                out.push((p.strip_prefix(db_dir).unwrap().display().to_string(), len));
            }
        }
    }
    out.sort();
    out
}

/// One cycle: run a child, kill it after `delay`, add its acks to `acked`
/// (every cycle's acks so far: a later recovery must not lose an earlier
/// cycle's commits either), recover and verify, close.
#[allow(clippy::too_many_arguments)]
fn kill_and_recover(
    work: &Path,
    db_dir: &Path,
    cycle: u32,
    scheme: SchemeKind,
    protocol: CommitProtocol,
    tiny_pool: bool,
    child_seed: u64,
    delay: Duration,
    acked: &mut Acks,
    ctx: &str,
) -> CycleOutcome {
    let exe: PathBuf = std::env::current_exe().expect("path of the test binary");
    let stderr_path = work.join(format!("child-{cycle}.stderr"));
    let acks = kill_one_child(
        &exe,
        db_dir,
        &stderr_path,
        cycle,
        protocol,
        scheme,
        tiny_pool,
        child_seed,
        delay,
        ctx,
    );
    let n = acks.len();
    println!("{ctx}: child killed after {n} acknowledged transfers");
    for (k, t) in acks {
        assert!(
            acked.insert(k, t).is_none(),
            "{ctx}: history key {:#x} acked in two cycles",
            u64::from_be_bytes(k)
        );
    }
    let (records, log_left) = recover_and_verify(db_dir, scheme, protocol, acked, ctx);
    CycleOutcome {
        acked: n,
        records,
        log_left,
    }
}

/// The tests of this file run one at a time: each keeps a child busy on
/// the (two) cores, and timing matters to where kills land.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn sigkill_at_random_moments_loses_no_acknowledged_commit() {
    let _serial = serial();
    let seed: u64 = env_parse("WAYPOINT_KILL_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    let cycles: u32 = env_parse("WAYPOINT_KILL_CYCLES").unwrap_or(5);
    println!("kill test: seed {seed} (WAYPOINT_KILL_SEED), {cycles} cycles");
    let tmp = tempfile::tempdir().expect("tempdir");
    let db_dir = tmp.path().join("db");
    load(&db_dir);

    let mut rng = SmallRng::seed_from_u64(seed);
    let mut acked = Acks::new();
    let mut outcomes = Vec::new();
    let started = Instant::now();
    for cycle in 0..cycles {
        let protocol = PROTOCOLS[((seed + cycle as u64) % PROTOCOLS.len() as u64) as usize];
        let tiny_pool = cycle % 2 == 1;
        let child_seed: u64 = rng.gen();
        let delay = Duration::from_millis(rng.gen_range(200..1500));
        let ctx = format!(
            "cycle {cycle} (seed {seed}, {}, {} pool, kill after {delay:?})",
            protocol.name(),
            if tiny_pool { "tiny" } else { "default" }
        );
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            kill_and_recover(
                tmp.path(),
                &db_dir,
                cycle,
                SchemeKind::PerWorker,
                protocol,
                tiny_pool,
                child_seed,
                delay,
                &mut acked,
                &ctx,
            )
        }));
        match result {
            Ok(outcome) => outcomes.push(outcome),
            Err(panic) => {
                eprintln!(
                    "kill test failed in cycle {cycle}; rerun with WAYPOINT_KILL_SEED={seed} \
                     (the kill moment is up to the scheduler: may need a few tries)"
                );
                std::panic::resume_unwind(panic);
            }
        }
    }
    println!(
        "kill test: {cycles} cycles, {} acked transfers in all, {:?}",
        acked.len(),
        started.elapsed()
    );

    // Not vacuous: a kill before any commit, or one whose log was empty,
    // would pass every check above while proving nothing.
    if cycles > 0 {
        assert!(
            outcomes.iter().any(|o| o.acked > 0),
            "seed {seed}: no cycle acknowledged a commit before its kill: the test proved nothing"
        );
        assert!(
            outcomes.iter().any(|o| o.records > 0),
            "seed {seed}: no recovery processed a log record: the test proved nothing"
        );
    }
}

/// A clean close after a kill and its recovery leaves no log behind.
///
/// Regression (found by the kill test above, fixed in 59d1ee2,
/// 2026-11-22): a clean close must delete the whole log
/// (`DbInner::write_clean_state`: "Every page is durable: the log is no
/// longer needed"), but `Wal::remove_all_segments` deleted only the
/// segments of partitions *opened in this process*: it walked `Wal::all()`,
/// i.e. the partitions `Wal::partition` opens lazily when a session first
/// logs. A partition that recovery found on disk but that no session of
/// this process used kept its segments. Here the killed child logs in
/// slots 0, 1 and 2 and the recovering process uses one session (slot 0),
/// so partitions 1 and 2 survived every clean close; the next run appended
/// to them and every later recovery read all of it again (the kill test's
/// reports showed `log bytes` growing cycle after cycle while `records`,
/// which skips what is at or below the log floor, stayed per cycle). Not a
/// durability bug (the floor makes recovery ignore the stale records), but
/// the log grew without bound across restarts, and recovery time with it.
#[test]
fn clean_close_after_kill_recovery_leaves_no_log() {
    let _serial = serial();
    let tmp = tempfile::tempdir().expect("tempdir");
    let db_dir = tmp.path().join("db");
    load(&db_dir);
    let ctx = "log-pruning check (rfa-group, default pool, kill after 500ms)";
    let mut acked = Acks::new();
    let outcome = kill_and_recover(
        tmp.path(),
        &db_dir,
        0,
        SchemeKind::PerWorker,
        CommitProtocol::RfaGroup,
        false,
        42,
        Duration::from_millis(500),
        &mut acked,
        ctx,
    );
    // Precondition: the child logged (in all its workers' partitions), so
    // recovery found partitions this process never opens.
    assert!(
        outcome.acked > 0 && outcome.records > 0,
        "{ctx}: nothing was logged before the kill: the check proves nothing"
    );
    // The assertion that exposed the bug described above.
    assert!(
        outcome.log_left.is_empty(),
        "{ctx}: the clean close after recovery left log segments behind \
         (recovered partitions that were never opened are not pruned): {:?}",
        outcome.log_left
    );
}

/// Every row of both tables.
fn bank_contents(db: &Database) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    let mut rows = Vec::new();
    for name in ["accounts", "history"] {
        let table = db.table(name).unwrap();
        rows.extend(tx.scan(&table, .., usize::MAX).unwrap());
    }
    rows
}

/// `kill -9` under the `none` scheme: with a pool large enough that no
/// page is written before the kill, the reopen reads the load's clean
/// close (the transfers since are lost, by design); with a tiny pool,
/// pages were written (after the unclean mark), and every reopen is
/// refused with `NotRecoverable` instead of reading a torn data file.
#[test]
fn sigkill_under_the_none_scheme_reopens_the_clean_state_or_refuses() {
    let _serial = serial();
    let exe: PathBuf = std::env::current_exe().expect("path of the test binary");
    for tiny_pool in [false, true] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let db_dir = tmp.path().join("db");
        load(&db_dir);
        let open = || {
            Database::open(
                &db_dir,
                Options {
                    persistence: Persistence::None,
                    ..Options::default()
                },
            )
        };
        let loaded = {
            let db = open().expect("reopen after load");
            let rows = bank_contents(&db);
            db.close().unwrap();
            rows
        };
        let ctx = format!(
            "none scheme, {} pool, kill after 700ms",
            if tiny_pool { "tiny" } else { "default" }
        );
        let acks = kill_one_child(
            &exe,
            &db_dir,
            &tmp.path().join("child.stderr"),
            0,
            CommitProtocol::RfaGroup,
            SchemeKind::None,
            tiny_pool,
            7,
            Duration::from_millis(700),
            &ctx,
        );
        assert!(!acks.is_empty(), "{ctx}: nothing committed before the kill");
        match open() {
            Err(Error::NotRecoverable { scheme, .. }) if tiny_pool => {
                assert_eq!(scheme, SchemeKind::None)
            }
            Ok(db) if !tiny_pool => assert!(
                bank_contents(&db) == loaded,
                "{ctx}: reopened, but not at the load's clean close"
            ),
            Ok(_) => panic!("{ctx}: pages were written, yet the reopen was not refused"),
            Err(e) => panic!("{ctx}: {e}"),
        }
    }
}

/// `kill -9` under the `aries` scheme (one central log, group and
/// flush-all commits, every other cycle with a tiny pool so pages with
/// uncommitted changes are stolen): every acknowledged transfer survives
/// each kill, no transfer is partial, and the clean close after recovery
/// leaves no log.
#[test]
fn sigkill_under_the_aries_scheme_loses_no_acknowledged_commit() {
    sigkill_under_a_central_log(SchemeKind::Aries, 28);
}

/// The same under the `aether` scheme: the consolidation array's groups,
/// filled outside the latch, and commits acknowledged by the flush daemon
/// survive every kill.
#[test]
fn sigkill_under_the_aether_scheme_loses_no_acknowledged_commit() {
    sigkill_under_a_central_log(SchemeKind::Aether, 29);
}

fn sigkill_under_a_central_log(scheme: SchemeKind, seed: u64) {
    let _serial = serial();
    let tmp = tempfile::tempdir().expect("tempdir");
    let db_dir = tmp.path().join("db");
    load(&db_dir);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut acked = Acks::new();
    let mut outcomes = Vec::new();
    for (cycle, protocol) in [
        CommitProtocol::Group,
        CommitProtocol::FlushAll,
        CommitProtocol::Group,
        CommitProtocol::FlushAll,
    ]
    .into_iter()
    .enumerate()
    {
        let cycle = cycle as u32;
        let tiny_pool = cycle % 2 == 1;
        let delay = Duration::from_millis(rng.gen_range(300..1200));
        let ctx = format!(
            "{scheme} cycle {cycle} ({}, {} pool, kill after {delay:?})",
            protocol.name(),
            if tiny_pool { "tiny" } else { "default" }
        );
        outcomes.push(kill_and_recover(
            tmp.path(),
            &db_dir,
            cycle,
            scheme,
            protocol,
            tiny_pool,
            rng.gen(),
            delay,
            &mut acked,
            &ctx,
        ));
    }
    assert!(
        outcomes.iter().all(|o| o.acked > 0 && o.records > 0),
        "a kill before any commit proves nothing"
    );
    assert!(
        outcomes.iter().all(|o| o.log_left.is_empty()),
        "the clean close after recovery left log: {:?}",
        outcomes.iter().map(|o| &o.log_left).collect::<Vec<_>>()
    );
}

/// `kill -9` under the `silor` scheme (value logs, commits acknowledged
/// per persistent epoch; the default pool, since it steals nothing):
/// every acknowledged transfer survives each kill, no transfer is
/// partial, and the clean close after recovery leaves no log.
#[test]
fn sigkill_under_the_silor_scheme_loses_no_acknowledged_commit() {
    let _serial = serial();
    let tmp = tempfile::tempdir().expect("tempdir");
    let db_dir = tmp.path().join("db");
    load(&db_dir);
    let mut rng = SmallRng::seed_from_u64(29);
    let mut acked = Acks::new();
    let mut outcomes = Vec::new();
    for cycle in 0..4u32 {
        let delay = Duration::from_millis(rng.gen_range(300..1200));
        let ctx = format!("silor cycle {cycle} (kill after {delay:?})");
        outcomes.push(kill_and_recover(
            tmp.path(),
            &db_dir,
            cycle,
            SchemeKind::Silor,
            CommitProtocol::Group,
            false,
            rng.gen(),
            delay,
            &mut acked,
            &ctx,
        ));
    }
    assert!(
        outcomes.iter().all(|o| o.acked > 0 && o.records > 0),
        "a kill before any commit proves nothing"
    );
    assert!(
        !db_dir.join("silor").exists(),
        "the clean close after recovery left the value logs"
    );
}

/// The same kills under the `command` scheme (seed 001's command log):
/// the transfers run as a stored procedure, recovery runs the logged
/// calls again; every acknowledged transfer survives each kill, no
/// transfer is partial, and the clean close after recovery leaves no log.
#[test]
fn sigkill_under_the_command_scheme_loses_no_acknowledged_commit() {
    let _serial = serial();
    let tmp = tempfile::tempdir().expect("tempdir");
    let db_dir = tmp.path().join("db");
    load(&db_dir);
    let mut rng = SmallRng::seed_from_u64(30);
    let mut acked = Acks::new();
    let mut outcomes = Vec::new();
    for cycle in 0..4u32 {
        let delay = Duration::from_millis(rng.gen_range(300..1200));
        let ctx = format!("command cycle {cycle} (kill after {delay:?})");
        outcomes.push(kill_and_recover(
            tmp.path(),
            &db_dir,
            cycle,
            SchemeKind::Command,
            CommitProtocol::Group,
            false,
            rng.gen(),
            delay,
            &mut acked,
            &ctx,
        ));
    }
    assert!(
        outcomes.iter().all(|o| o.acked > 0 && o.records > 0),
        "a kill before any commit proves nothing"
    );
    assert!(
        !db_dir.join("command").exists(),
        "the clean close after recovery left the command log"
    );
}
