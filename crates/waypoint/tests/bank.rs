//! Concurrency: the bank workload under serializable OCC.
//!
//! Two tables, `checking` and `savings`, of N accounts each; a secondary
//! index `checking_by_branch` (the account's branch, stored in the value)
//! and a second, busier one `savings_by_bucket` (balance / 250, left out of
//! the index at balance 0, so most transfers move savings rows between index
//! keys and some in and out of the index).
//!
//! Four threads run random transfers between random accounts of random
//! tables (read both balances, update both; one transfer in five also moves
//! the debited checking account to another branch), retried by
//! `Session::run` on `Conflict`. Two threads run read-only transactions
//! that scan both tables and both indexes; when such a transaction commits
//! (validation succeeded), its snapshot must be consistent: the total is
//! unchanged and each index is exactly what its extractor derives from the
//! rows read in that same transaction. A reader whose commit fails with
//! `Conflict` retries; that is not a violation.
//!
//! The buffer pool is 20 frames of 4 KiB for about 30 pages of data, so
//! pages are evicted and written back during the run. At the end and again
//! after a clean close and reopen (`open_index` rebinds the extractors),
//! the total, the indexes and `check_integrity()` are checked.
//!
//! A second test runs the same workload with the minimum pool (16 frames),
//! six writers and two readers in cycles of run, check, close and reopen,
//! under a watchdog that fails the test if no transaction finishes for
//! 15 s (a livelock of the page provider or the latches would otherwise
//! hang the run).
//!
//! Knobs: `WAYPOINT_BANK_ACCOUNTS` (per table, default 200),
//! `WAYPOINT_BANK_TRANSFERS` (per writer thread, default 400),
//! `WAYPOINT_BANK_STRESS_SECS` (length of the second test, default 5).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use waypoint::io::SimStorage;
use waypoint::{Database, Error, Index, KeyExtractor, Options, Table, Transaction};

const PAGE_SIZE: usize = 4096;
const FRAMES: usize = 20;
const INITIAL: u64 = 1000;
const BRANCHES: u8 = 5;
const WRITERS: u64 = 4;
const READERS: u64 = 2;
const PADDING: usize = 200;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn key(i: usize) -> Vec<u8> {
    format!("acct{i:05}").into_bytes()
}

/// `[balance u64 LE][branch u8][padding]`.
fn encode(balance: u64, branch: u8) -> Vec<u8> {
    let mut v = Vec::with_capacity(9 + PADDING);
    v.extend_from_slice(&balance.to_le_bytes());
    v.push(branch);
    v.resize(9 + PADDING, b'.');
    v
}

fn decode(v: &[u8]) -> (u64, u8) {
    assert_eq!(v.len(), 9 + PADDING, "account record has the wrong length");
    (u64::from_le_bytes(v[..8].try_into().unwrap()), v[8])
}

fn by_branch(_key: &[u8], value: &[u8]) -> Option<Vec<u8>> {
    value.get(8).map(|b| vec![*b])
}

fn by_bucket(_key: &[u8], value: &[u8]) -> Option<Vec<u8>> {
    let balance = u64::from_le_bytes(value.get(..8)?.try_into().ok()?);
    (balance > 0).then(|| ((balance / 250) as u16).to_be_bytes().to_vec())
}

fn extractors() -> [(&'static str, usize, KeyExtractor); 2] {
    [
        ("checking_by_branch", 0, Arc::new(by_branch)),
        ("savings_by_bucket", 1, Arc::new(by_bucket)),
    ]
}

struct Bank {
    tables: [Table; 2],
    indexes: [Index; 2],
}

fn options(sim: &SimStorage, frames: usize) -> Options {
    Options {
        page_size: Some(PAGE_SIZE),
        buffer_pool_bytes: frames * PAGE_SIZE,
        storage: Some(Arc::new(sim.clone())),
        ..Options::default()
    }
}

fn create(db: &Database, n: usize) -> Bank {
    let tables = [
        db.create_table("checking").unwrap(),
        db.create_table("savings").unwrap(),
    ];
    // Fill before creating the indexes, so their backfill is exercised too.
    let mut s = db.session();
    for chunk in (0..n).collect::<Vec<_>>().chunks(50) {
        let mut tx = s.begin().unwrap();
        for &i in chunk {
            for t in &tables {
                tx.insert(t, &key(i), &encode(INITIAL, (i % BRANCHES as usize) as u8))
                    .unwrap();
            }
        }
        tx.commit().unwrap();
    }
    let [a, b] = extractors();
    let indexes = [
        db.create_index(&tables[a.1], a.0, a.2).unwrap(),
        db.create_index(&tables[b.1], b.0, b.2).unwrap(),
    ];
    Bank { tables, indexes }
}

fn reopen_handles(db: &Database) -> Bank {
    let tables = [db.table("checking").unwrap(), db.table("savings").unwrap()];
    let [a, b] = extractors();
    let indexes = [
        db.open_index(a.0, a.2).unwrap(),
        db.open_index(b.0, b.2).unwrap(),
    ];
    Bank { tables, indexes }
}

/// Everything a consistent snapshot must satisfy, read in one transaction:
/// `Ok(Some(total))` if the checks passed, `Ok(None)` if `rows` is
/// inconsistent (only allowed when the transaction then fails to commit).
struct Snapshot {
    total: u64,
    rows: [BTreeMap<Vec<u8>, Vec<u8>>; 2],
    index_entries: [Vec<(Vec<u8>, Vec<u8>)>; 2],
}

fn read_snapshot(tx: &mut Transaction<'_>, bank: &Bank) -> waypoint::Result<Snapshot> {
    let mut rows: [BTreeMap<Vec<u8>, Vec<u8>>; 2] = Default::default();
    let mut total = 0;
    for (t, table) in bank.tables.iter().enumerate() {
        for (k, v) in tx.scan(table, .., usize::MAX)? {
            total += decode(&v).0;
            rows[t].insert(k, v);
        }
    }
    let mut index_entries: [Vec<(Vec<u8>, Vec<u8>)>; 2] = Default::default();
    for (i, index) in bank.indexes.iter().enumerate() {
        index_entries[i] = tx
            .index_scan(index, .., usize::MAX, false)?
            .into_iter()
            .map(|e| (e.secondary, e.primary))
            .collect();
    }
    Ok(Snapshot {
        total,
        rows,
        index_entries,
    })
}

/// The index entries the extractors derive from `rows`.
fn derived(rows: &[BTreeMap<Vec<u8>, Vec<u8>>; 2]) -> [Vec<(Vec<u8>, Vec<u8>)>; 2] {
    extractors().map(|(_, t, f)| {
        let mut v: Vec<_> = rows[t]
            .iter()
            .filter_map(|(k, x)| f(k, x).map(|s| (s, k.clone())))
            .collect();
        v.sort();
        v
    })
}

fn check_snapshot(s: &Snapshot, n: usize, when: &str) {
    assert_eq!(
        s.rows[0].len(),
        n,
        "{when}: checking has {} rows",
        s.rows[0].len()
    );
    assert_eq!(
        s.rows[1].len(),
        n,
        "{when}: savings has {} rows",
        s.rows[1].len()
    );
    assert_eq!(s.total, 2 * n as u64 * INITIAL, "{when}: the total changed");
    let want = derived(&s.rows);
    for (i, (name, _, _)) in extractors().iter().enumerate() {
        if s.index_entries[i] != want[i] {
            let got: std::collections::BTreeSet<_> = s.index_entries[i].iter().collect();
            let exp: std::collections::BTreeSet<_> = want[i].iter().collect();
            let extra: Vec<_> = got.difference(&exp).take(5).collect();
            let missing: Vec<_> = exp.difference(&got).take(5).collect();
            panic!(
                "{when}: index {name} differs from its table ({} entries, {} expected); \
                 extra {extra:?}, missing {missing:?}",
                s.index_entries[i].len(),
                want[i].len()
            );
        }
    }
}

/// Per-secondary-key index scans agree with the rows too (bounded ranges,
/// both directions).
fn check_index_ranges(db: &Database, bank: &Bank, when: &str) {
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    let snap = read_snapshot(&mut tx, bank).unwrap();
    let want = derived(&snap.rows);
    for (i, index) in bank.indexes.iter().enumerate() {
        let mut secondaries: Vec<Vec<u8>> = want[i].iter().map(|(s, _)| s.clone()).collect();
        secondaries.dedup();
        for sk in &secondaries {
            let exp: Vec<_> = want[i].iter().filter(|(s, _)| s == sk).cloned().collect();
            let fwd: Vec<_> = tx
                .index_scan(index, sk.as_slice()..=sk.as_slice(), usize::MAX, false)
                .unwrap()
                .into_iter()
                .map(|e| (e.secondary, e.primary))
                .collect();
            assert_eq!(fwd, exp, "{when}: {} entries under {sk:?}", index.name());
            let rev: Vec<_> = tx
                .index_scan(index, sk.as_slice()..=sk.as_slice(), usize::MAX, true)
                .unwrap()
                .into_iter()
                .map(|e| (e.secondary, e.primary))
                .collect();
            assert!(
                rev.iter().rev().eq(exp.iter()),
                "{when}: reverse index scan"
            );
        }
    }
    tx.commit().unwrap();
}

fn check_all(db: &Database, bank: &Bank, n: usize, when: &str) {
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    let snap = read_snapshot(&mut tx, bank).unwrap();
    tx.commit().expect("nothing runs concurrently");
    check_snapshot(&snap, n, when);
    check_index_ranges(db, bank, when);
    let counts: BTreeMap<String, usize> = db
        .check_integrity()
        .unwrap_or_else(|e| panic!("{when}: check_integrity: {e}"))
        .into_iter()
        .collect();
    // A placeholder left behind by an aborted commit would be counted.
    assert_eq!(counts["checking"], n, "{when}: {counts:?}");
    assert_eq!(counts["savings"], n, "{when}: {counts:?}");
    assert_eq!(
        counts["checking_by_branch"],
        snap.index_entries[0].len(),
        "{when}"
    );
    assert_eq!(
        counts["savings_by_bucket"],
        snap.index_entries[1].len(),
        "{when}"
    );
}

#[derive(Debug, Default)]
struct Counters {
    transfers: AtomicU64,
    aborts: AtomicU64,
    branch_moves: AtomicU64,
    reads_ok: AtomicU64,
    /// Successful snapshots taken while writers were still running.
    reads_ok_concurrent: AtomicU64,
    reads_conflicted: AtomicU64,
}

impl Counters {
    /// Everything that counts as the workload moving on.
    fn progress(&self) -> u64 {
        self.transfers.load(Ordering::Relaxed)
            + self.aborts.load(Ordering::Relaxed)
            + self.reads_ok.load(Ordering::Relaxed)
            + self.reads_conflicted.load(Ordering::Relaxed)
    }
}

/// One transfer: `amount` (capped at the balance) from `from` to `to`;
/// optionally moves `from` (if a checking account) to branch `new_branch`.
fn transfer(
    tx: &mut Transaction<'_>,
    bank: &Bank,
    from: (usize, usize),
    to: (usize, usize),
    amount: u64,
    new_branch: Option<u8>,
) -> waypoint::Result<bool> {
    let (ft, fk) = (&bank.tables[from.0], key(from.1));
    let (tt, tk) = (&bank.tables[to.0], key(to.1));
    let fv = tx.get(ft, &fk)?.expect("account exists");
    let tv = tx.get(tt, &tk)?.expect("account exists");
    let (fb, fbranch) = decode(&fv);
    let (tb, tbranch) = decode(&tv);
    let amount = amount.min(fb);
    let moved = from.0 == 0 && new_branch.is_some_and(|b| b != fbranch);
    let fbranch = if moved { new_branch.unwrap() } else { fbranch };
    tx.update(ft, &fk, &encode(fb - amount, fbranch))?;
    tx.update(tt, &tk, &encode(tb + amount, tbranch))?;
    Ok(moved)
}

/// Random transfers until `transfers` are done or `stop` is set.
fn writer(w: &Workload, transfers: usize, seed: u64) {
    let (bank, n, c) = (&w.bank, w.n, &w.counters);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut s = w.db.session();
    for done in 0..transfers {
        if w.stop.load(Ordering::Acquire) {
            break;
        }
        // Short pauses now and then, so the long read-only snapshots (which
        // conflict with any transfer that commits under them) also succeed
        // while transfers are running, not only after.
        if done % 16 == 15 {
            std::thread::sleep(Duration::from_micros(300));
        }
        let from = (rng.gen_range(0..2), rng.gen_range(0..n));
        let to = loop {
            let to = (rng.gen_range(0..2), rng.gen_range(0..n));
            if to != from {
                break to;
            }
        };
        let amount = rng.gen_range(1..=400);
        let new_branch = rng.gen_bool(0.2).then(|| rng.gen_range(0..BRANCHES));
        let mut attempts = 0u64;
        let result = s.run(100_000, |tx| {
            attempts += 1;
            if attempts > 1 {
                c.aborts.fetch_add(1, Ordering::Relaxed);
            }
            transfer(tx, bank, from, to, amount, new_branch)
        });
        match result {
            Ok(moved) => {
                c.transfers.fetch_add(1, Ordering::Relaxed);
                c.branch_moves.fetch_add(moved as u64, Ordering::Relaxed);
            }
            Err(e) => panic!("transfer {from:?} -> {to:?} failed after {attempts} attempts: {e}"),
        }
    }
}

/// Read-only snapshots until `stop` (and at least a few successful ones).
fn reader(w: &Workload) {
    let c = &w.counters;
    let mut s = w.db.session();
    while !w.stop.load(Ordering::Acquire) || c.reads_ok.load(Ordering::Relaxed) < 4 {
        let concurrent = !w.stop.load(Ordering::Acquire);
        let mut tx = s.begin().unwrap();
        let snap = match read_snapshot(&mut tx, &w.bank) {
            Ok(s) => s,
            Err(e) => panic!("reader: {e}"),
        };
        match tx.commit() {
            Ok(info) => {
                assert_eq!(info.tid, waypoint::Tid::ZERO, "read-only commit");
                check_snapshot(&snap, w.n, "concurrent read-only transaction");
                c.reads_ok.fetch_add(1, Ordering::Relaxed);
                if concurrent && !w.stop.load(Ordering::Acquire) {
                    c.reads_ok_concurrent.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(e) if e.is_retryable() => {
                assert!(matches!(e, Error::Conflict));
                c.reads_conflicted.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => panic!("reader commit: {e}"),
        }
    }
}

/// What the worker threads share.
struct Workload {
    db: Database,
    bank: Bank,
    n: usize,
    counters: Counters,
    stop: AtomicBool,
}

/// Run `writers` writer threads (each `transfers` transfers, or until
/// `deadline`) and `readers` reader threads. A watchdog fails the test if
/// the counters stop moving for `STALL` (a livelock or deadlock would
/// otherwise hang the test run; stuck threads are left behind), and a
/// panicking thread fails it at once.
fn run_workload(
    w: &Arc<Workload>,
    writers: u64,
    readers: u64,
    transfers: usize,
    seed: u64,
    deadline: Option<Instant>,
) {
    const STALL: Duration = Duration::from_secs(15);
    let mut handles: Vec<(bool, std::thread::JoinHandle<()>)> = Vec::new();
    for r in 0..readers {
        let w = Arc::clone(w);
        let h = std::thread::Builder::new()
            .name(format!("reader-{r}"))
            .spawn(move || reader(&w))
            .unwrap();
        handles.push((false, h));
    }
    for i in 0..writers {
        let w = Arc::clone(w);
        let h = std::thread::Builder::new()
            .name(format!("writer-{i}"))
            .spawn(move || writer(&w, transfers, seed + i))
            .unwrap();
        handles.push((true, h));
    }
    let mut last = (w.counters.progress(), Instant::now());
    while !handles.is_empty() {
        std::thread::sleep(Duration::from_millis(20));
        let mut i = 0;
        while i < handles.len() {
            if handles[i].1.is_finished() {
                let (_, h) = handles.swap_remove(i);
                let name = h.thread().name().unwrap_or("?").to_string();
                if let Err(p) = h.join() {
                    std::panic::resume_unwind(Box::new(format!(
                        "{name} panicked: {}",
                        p.downcast_ref::<String>()
                            .map(String::as_str)
                            .or(p.downcast_ref::<&str>().copied())
                            .unwrap_or("?")
                    )));
                }
            } else {
                i += 1;
            }
        }
        if !handles.iter().any(|(is_writer, _)| *is_writer)
            || deadline.is_some_and(|d| Instant::now() >= d)
        {
            w.stop.store(true, Ordering::Release);
        }
        let now = w.counters.progress();
        if now != last.0 {
            last = (now, Instant::now());
        } else if last.1.elapsed() > STALL {
            panic!(
                "no transaction finished for {STALL:?}: the engine is stuck (livelock or \
                 deadlock); counters {:?}, engine stats {:?}",
                w.counters,
                w.db.stats()
            );
        }
    }
}

#[test]
fn transfers_preserve_total_and_indexes_under_concurrency() {
    let n = env_usize("WAYPOINT_BANK_ACCOUNTS", 200);
    let transfers = env_usize("WAYPOINT_BANK_TRANSFERS", 400);
    let sim = SimStorage::new(5);
    let dir = Path::new("/bank");
    let db = Database::open(dir, options(&sim, FRAMES)).unwrap();
    let bank = create(&db, n);
    check_all(&db, &bank, n, "after load");

    // Rounds of the workload until some reader snapshot has been checked
    // while transfers were running (readers conflict with most commits).
    let (mut db, mut bank) = (db, bank);
    let mut rounds = 0;
    let mut concurrent_reads = 0;
    let mut engine_aborts = 0;
    while concurrent_reads == 0 && rounds < 10 {
        let w = Arc::new(Workload {
            db,
            bank,
            n,
            counters: Counters::default(),
            stop: AtomicBool::new(false),
        });
        run_workload(&w, WRITERS, READERS, transfers, 1000 + 10 * rounds, None);
        let Ok(Workload {
            db: d,
            bank: b,
            counters,
            ..
        }) = Arc::try_unwrap(w)
        else {
            panic!("a worker thread still holds the workload");
        };
        (db, bank) = (d, b);
        let stats = db.stats();
        println!("round {rounds}: {counters:?}");
        println!("engine stats: {stats:?}");
        assert_eq!(
            counters.transfers.load(Ordering::Relaxed),
            WRITERS * transfers as u64
        );
        assert!(counters.branch_moves.load(Ordering::Relaxed) > 0);
        assert!(counters.reads_ok.load(Ordering::Relaxed) > 0);
        // Every attempt that did not commit is an abort in the engine's count.
        let aborted = counters.aborts.load(Ordering::Relaxed)
            + counters.reads_conflicted.load(Ordering::Relaxed);
        assert!(
            stats.aborts - engine_aborts >= aborted,
            "{} < {aborted}",
            stats.aborts - engine_aborts
        );
        engine_aborts = stats.aborts;
        assert!(
            stats.pool.evictions > 0,
            "the pool should be too small for the data: {stats:?}"
        );
        concurrent_reads += counters.reads_ok_concurrent.load(Ordering::Relaxed);
        rounds += 1;
    }
    assert!(
        concurrent_reads > 0,
        "no reader snapshot committed while transfers ran, in {rounds} rounds"
    );
    check_all(&db, &bank, n, "after the run");

    // Clean close, reopen, rebind the extractors: everything still holds,
    // and the indexes keep being maintained.
    drop(bank);
    db.close().unwrap();
    let db = Database::open(dir, options(&sim, FRAMES)).unwrap();
    let bank = reopen_handles(&db);
    check_all(&db, &bank, n, "after reopen");
    let w = Arc::new(Workload {
        db,
        bank,
        n,
        counters: Counters::default(),
        stop: AtomicBool::new(false),
    });
    run_workload(&w, 1, 0, 100, 7, None);
    assert!(w.counters.branch_moves.load(Ordering::Relaxed) > 0);
    let Ok(Workload { db, bank, .. }) = Arc::try_unwrap(w) else {
        panic!("a worker thread still holds the workload");
    };
    check_all(&db, &bank, n, "after transfers following the reopen");
    drop(bank);
    db.close().unwrap();
    let db = Database::open(dir, options(&sim, FRAMES)).unwrap();
    let bank = reopen_handles(&db);
    check_all(&db, &bank, n, "after the second reopen");
    drop(bank);
    db.close().unwrap();
}

/// The same workload with the minimum pool (16 frames) and more threads
/// than cores, for `WAYPOINT_BANK_STRESS_SECS` (default 5) in cycles of
/// run, check, close and reopen. Guards against livelocks in the page
/// provider and the latches (the watchdog fails the test if no
/// transaction finishes for 15 s) as well as against lost updates at
/// close.
#[test]
fn transfers_keep_making_progress_with_the_minimum_pool() {
    let n = env_usize("WAYPOINT_BANK_ACCOUNTS", 200);
    let secs = env_usize("WAYPOINT_BANK_STRESS_SECS", 5) as u64;
    let end = Instant::now() + Duration::from_secs(secs);
    let sim = SimStorage::new(6);
    let dir = Path::new("/stress");
    let db = Database::open(dir, options(&sim, 16)).unwrap();
    let mut bank = create(&db, n);
    let mut db = db;
    let mut cycle = 0u64;
    let mut totals = (0u64, 0u64, 0u64, 0u64);
    loop {
        let w = Arc::new(Workload {
            db,
            bank,
            n,
            counters: Counters::default(),
            stop: AtomicBool::new(false),
        });
        let cycle_end = (Instant::now() + Duration::from_millis(800)).min(end);
        run_workload(&w, 6, 2, usize::MAX, 100 * cycle, Some(cycle_end));
        let Ok(Workload {
            db: d,
            bank: b,
            counters,
            ..
        }) = Arc::try_unwrap(w)
        else {
            panic!("a worker thread still holds the workload");
        };
        totals.0 += counters.transfers.load(Ordering::Relaxed);
        totals.1 += counters.aborts.load(Ordering::Relaxed);
        totals.2 += d.stats().pool.evictions;
        totals.3 += counters.reads_ok_concurrent.load(Ordering::Relaxed);
        check_all(&d, &b, n, &format!("after stress cycle {cycle}"));
        drop(b);
        d.close().unwrap();
        db = Database::open(dir, options(&sim, 16)).unwrap();
        bank = reopen_handles(&db);
        check_all(&db, &bank, n, &format!("after reopen in cycle {cycle}"));
        cycle += 1;
        if Instant::now() >= end {
            break;
        }
    }
    println!(
        "stress: {cycle} cycles, {} transfers, {} aborts, {} evictions, {} snapshots checked \
         while transfers ran",
        totals.0, totals.1, totals.2, totals.3
    );
    assert!(totals.0 > 0 && totals.2 > 0);
    drop(bank);
    db.close().unwrap();
}
