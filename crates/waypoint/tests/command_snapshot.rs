//! The `command` scheme's transaction-consistent copy-on-write snapshots
//! (seed 001 §II-C1, docs/decisions/030-command-logging.md, "Snapshots")
//! from the outside: a snapshot taken while calls change rows the writer
//! has passed and rows it has not reached holds exactly the state at its
//! point (rows changed, deleted and created after it included); replay
//! after crashes during and after snapshots equals the same calls run
//! without a crash; concurrent transfers across partitions with periodic
//! snapshots and power loss keep every acknowledged call, and the
//! installed snapshot alone conserves the total; crashes at each stage of
//! a snapshot lose nothing; the log stays bounded under both triggers;
//! and the broken variant (no pre-images kept) is caught.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use waypoint::command::snapshot::{table_file, PART_BYTES};
use waypoint::io::{CrashPolicy, Fault, FaultKind, SimStorage, Storage};
use waypoint::persist::resident::snapshot_file::{self, Record};
use waypoint::{
    CommandOptions, CommandSnapshot, Database, Error, Options, Partition, Persistence, Procedures,
    SchemeKind, SnapshotStage, Transaction,
};

const DIR: &str = "/db";
/// More accounts than one batch of the writer (256 rows), so calls can
/// change rows on both sides of it.
const ACCOUNTS: u32 = 600;
const START: u64 = 1000;
const PARTITIONS: u32 = 2;

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Transfer {
    from: u32,
    to: u32,
    amount: u64,
    /// The history row's key: who asked, and their sequence number.
    by: u32,
    seq: u32,
}

/// Delete a history row (if present).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Forget {
    by: u32,
    seq: u32,
}

fn get(tx: &mut Transaction<'_>, t: &waypoint::Table, a: u32) -> waypoint::Result<u64> {
    let v = tx.get(t, &a.to_be_bytes())?.ok_or(Error::KeyNotFound)?;
    Ok(u64::from_be_bytes(
        v.try_into().map_err(|_| Error::KeyNotFound)?,
    ))
}

fn history_key(by: u32, seq: u32) -> Vec<u8> {
    let mut key = by.to_be_bytes().to_vec();
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

fn transfer(tx: &mut Transaction<'_>, p: &Transfer) -> waypoint::Result<u64> {
    let accounts = tx.table("accounts")?;
    let history = tx.table("history")?;
    let f = get(tx, &accounts, p.from)?;
    let amount = f.min(p.amount);
    tx.update(
        &accounts,
        &p.from.to_be_bytes(),
        &(f - amount).to_be_bytes(),
    )?;
    let t = get(tx, &accounts, p.to)?;
    tx.update(&accounts, &p.to.to_be_bytes(), &(t + amount).to_be_bytes())?;
    // A key already there (a call run twice) is an error.
    tx.insert(&history, &history_key(p.by, p.seq), &amount.to_be_bytes())?;
    Ok(amount)
}

fn procedures() -> Procedures {
    Procedures::new()
        .multi("setup", |tx: &mut Transaction<'_>, n: &u32| {
            let accounts = tx.table("accounts")?;
            for a in 0..*n {
                tx.insert(&accounts, &a.to_be_bytes(), &START.to_be_bytes())?;
            }
            Ok(())
        })
        .unwrap()
        .add(
            "transfer",
            |p: &Transfer| {
                if p.from % PARTITIONS == p.to % PARTITIONS {
                    Partition::Key(u64::from(p.from))
                } else {
                    Partition::All
                }
            },
            transfer,
        )
        .unwrap()
        .multi("forget", |tx: &mut Transaction<'_>, p: &Forget| {
            let history = tx.table("history")?;
            tx.delete(&history, &history_key(p.by, p.seq))
        })
        .unwrap()
        .index(
            "history_by_amount",
            Arc::new(|_k: &[u8], v: &[u8]| Some(v.to_vec())),
        )
        .unwrap()
}

fn options(sim: &SimStorage, snapshot: CommandSnapshot) -> Options {
    Options {
        page_size: Some(4096),
        buffer_pool_bytes: 2048 * 4096,
        storage: Some(Arc::new(sim.clone())),
        persistence: Persistence::Command(CommandOptions {
            partitions: PARTITIONS as usize,
            snapshot,
            digests: true,
            ..CommandOptions::default()
        }),
        procedures: procedures(),
        ..Options::default()
    }
}

type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// Every table's rows by name, and the index's entries.
fn digest(db: &Database) -> BTreeMap<String, Rows> {
    let mut out = BTreeMap::new();
    let mut s = db.session();
    for name in db.table_names() {
        let t = db.table(&name).unwrap();
        let mut tx = s.begin().unwrap();
        out.insert(name, tx.scan(&t, .., usize::MAX).unwrap());
    }
    let index = db
        .open_index(
            "history_by_amount",
            Arc::new(|_k: &[u8], v: &[u8]| Some(v.to_vec())),
        )
        .unwrap();
    let mut tx = s.begin().unwrap();
    let entries = tx.index_scan(&index, .., usize::MAX, false).unwrap();
    out.insert(
        "index history_by_amount".into(),
        entries
            .into_iter()
            .map(|e| (e.secondary, e.primary))
            .collect(),
    );
    out
}

fn sum(rows: &Rows) -> u64 {
    rows.iter()
        .map(|(_, v)| u64::from_be_bytes(v.as_slice().try_into().unwrap()))
        .sum()
}

fn create(db: &Database) {
    db.create_table("accounts").unwrap();
    db.create_table("history").unwrap();
    let history = db.table("history").unwrap();
    db.create_index(
        &history,
        "history_by_amount",
        Arc::new(|_k: &[u8], v: &[u8]| Some(v.to_vec())),
    )
    .unwrap();
    db.session().call::<_, ()>("setup", &ACCOUNTS).unwrap();
}

/// The `i`th transfer of a deterministic stream.
fn nth_transfer(i: u32, by: u32) -> Transfer {
    let x = i.wrapping_mul(2_654_435_761).wrapping_add(by * 40503);
    Transfer {
        from: (x >> 3) % ACCOUNTS,
        to: (x >> 11) % ACCOUNTS,
        amount: u64::from(x >> 20) % 50,
        by,
        seq: i,
    }
}

/// Call `i` of the deterministic stream: mostly transfers, every seventh
/// deletes the history row of call `i - 3`.
fn nth_call(
    s: &mut waypoint::Session,
    i: u32,
    wait_now: bool,
) -> waypoint::Result<waypoint::PendingCommit> {
    if i % 7 == 6 {
        let f = Forget { by: 0, seq: i - 3 };
        s.call_then::<_, bool>("forget", &f, wait_now)
            .map(|(_, p)| p)
    } else {
        s.call_then::<_, u64>("transfer", &nth_transfer(i, 0), wait_now)
            .map(|(_, p)| p)
    }
}

/// The state of the first `n` calls of the stream, run without a crash.
fn reference(n: u32) -> BTreeMap<String, Rows> {
    let sim = SimStorage::new(9999);
    let db = Database::open(
        DIR,
        Options {
            persistence: Persistence::None,
            ..options(&sim, CommandSnapshot::Off)
        },
    )
    .unwrap();
    create(&db);
    let mut s = db.session();
    for i in 0..n {
        nth_call(&mut s, i, true).unwrap().wait().unwrap();
    }
    drop(s);
    digest(&db)
}

/// The installed snapshot's tables, read from its files alone.
fn installed_snapshot(sim: &SimStorage) -> Option<BTreeMap<String, Rows>> {
    let files = waypoint::command::snapshot::inspect(sim, Path::new(DIR)).unwrap();
    let snap = files.snapshots.iter().find(|s| s.installed)?;
    let dir = snap.files[0].0.parent().unwrap().to_path_buf();
    let mut names = BTreeMap::new();
    snapshot_file::read(
        sim,
        &dir.join("catalog.snap"),
        SchemeKind::Command,
        &mut |r| {
            if let Record::Table { id, name } = r {
                names.insert(id, name);
            }
            Ok(())
        },
    )
    .unwrap();
    let mut out = BTreeMap::new();
    for (id, name) in names {
        let mut rows = Vec::new();
        let mut part = 0;
        while sim.exists(&table_file(&dir, id, part)) {
            let path = table_file(&dir, id, part);
            snapshot_file::read(sim, &path, SchemeKind::Command, &mut |r| {
                if let Record::Row { key, value, .. } = r {
                    rows.push((key.to_vec(), value.to_vec()));
                }
                Ok(())
            })
            .unwrap();
            part += 1;
        }
        assert!(part > 0, "table {name:?} has no file");
        out.insert(name, rows);
    }
    Some(out)
}

fn tables_only(mut d: BTreeMap<String, Rows>) -> BTreeMap<String, Rows> {
    d.retain(|k, _| !k.starts_with("index "));
    d
}

/// What a snapshot taken while calls change rows around the writer
/// holds, and what recovering from it gives.
struct Outcome {
    /// The snapshot's tables equal the state at its point.
    snapshot_is_the_point: bool,
    snapshot_sum: u64,
    /// The reopen after power loss: the state before it, or why not.
    recovered: Result<bool, String>,
}

/// Take a snapshot of `db`, running `calls` on a session of their own
/// once, when the writer has written its first batch of accounts
/// (accounts 0 to 255).
fn snapshot_with_calls_after_the_first_accounts_batch(
    db: &Arc<Database>,
    calls: impl Fn(&mut waypoint::Session) + Send + Sync + 'static,
) {
    let command = db.command().unwrap();
    let accounts_id = db.table("accounts").unwrap().id();
    let (db2, fired) = (Arc::clone(db), Arc::new(AtomicBool::new(false)));
    let f = Arc::clone(&fired);
    command.set_snapshot_hook(Some(Arc::new(move |stage| {
        if !matches!(stage, SnapshotStage::Batch { table, .. } if table == accounts_id)
            || f.swap(true, Ordering::SeqCst)
        {
            return;
        }
        calls(&mut db2.session());
    })));
    command.snapshot_now().unwrap().unwrap();
    assert!(fired.load(Ordering::SeqCst));
    command.set_snapshot_hook(None);
}

/// 40 calls, then a snapshot; when the writer has written its first batch
/// of accounts (accounts 0 to 255), calls move money from account 0
/// (written) to the last account (not reached yet), add history rows and
/// delete one that existed at the point. Then power loss.
fn snapshot_while_calls_move_rows_around_the_writer(broken: bool) -> Outcome {
    let sim = SimStorage::new(1);
    let db = Arc::new(Database::open(DIR, options(&sim, CommandSnapshot::Off)).unwrap());
    create(&db);
    let mut s = db.session();
    for i in 0..40 {
        nth_call(&mut s, i, true).unwrap().wait().unwrap();
    }
    let at_point = tables_only(digest(&db));
    let command = db.command().unwrap();
    command.set_broken_snapshot_shadow_for_tests(broken);
    snapshot_with_calls_after_the_first_accounts_batch(&db, |s| {
        for k in 0..5u32 {
            let p = Transfer {
                from: 0,
                to: ACCOUNTS - 1,
                amount: 100,
                by: 7,
                seq: k,
            };
            s.call::<_, u64>("transfer", &p).unwrap();
        }
        assert!(s
            .call::<_, bool>("forget", &Forget { by: 0, seq: 2 })
            .unwrap());
    });
    let snapshot = installed_snapshot(&sim).unwrap();
    let snapshot_sum = sum(&snapshot["accounts"]);
    let snapshot_is_the_point = snapshot == at_point;
    // More calls after the snapshot, then power loss.
    for i in 40..60 {
        nth_call(&mut s, i, true).unwrap().wait().unwrap();
    }
    drop(s);
    let expected = digest(&db);
    command.wait_all_durable().unwrap();
    std::mem::forget(db);
    sim.crash(CrashPolicy::DropAll);
    let recovered = match Database::open(DIR, options(&sim, CommandSnapshot::Off)) {
        Ok(db) => {
            let same = digest(&db) == expected;
            db.check_integrity().unwrap();
            let stats = db.stats().persistence.command;
            assert!(stats.snapshot_load_rows > 0, "{stats:?}");
            Ok(same)
        }
        Err(e) => Err(e.to_string()),
    };
    Outcome {
        snapshot_is_the_point,
        snapshot_sum,
        recovered,
    }
}

#[test]
fn a_snapshot_holds_the_state_at_its_point_while_calls_change_rows_on_both_sides_of_the_writer() {
    let o = snapshot_while_calls_move_rows_around_the_writer(false);
    assert!(o.snapshot_is_the_point);
    assert_eq!(o.snapshot_sum, START * u64::from(ACCOUNTS));
    assert_eq!(o.recovered, Ok(true));
}

/// Without pre-images the writer reads the last account after the calls
/// moved money to it: the snapshot is not the point's state, its total
/// is not conserved, and replaying the calls after the point on top of
/// it runs them twice.
#[test]
fn a_snapshot_without_pre_images_is_caught() {
    let o = snapshot_while_calls_move_rows_around_the_writer(true);
    assert!(!o.snapshot_is_the_point);
    assert_ne!(o.snapshot_sum, START * u64::from(ACCOUNTS));
    assert_ne!(
        o.recovered,
        Ok(true),
        "the broken snapshot recovered the right state"
    );
}

/// Calls pipelined from one session, snapshots periodically and on
/// demand, power loss at a random moment (inside a snapshot or not), in
/// two rounds: the reopened state is that of the calls the log kept, run
/// without a crash.
#[test]
fn replay_after_crashes_during_and_after_snapshots_equals_the_same_calls_without_a_crash() {
    for seed in 0..4u64 {
        let sim = SimStorage::new(seed);
        let opts = || {
            options(
                &sim,
                CommandSnapshot::Periodic {
                    interval: Duration::from_millis(15),
                },
            )
        };
        let db = Database::open(DIR, opts()).unwrap();
        create(&db);
        db.close().unwrap();
        let mut acked = 0u32;
        let mut snapshots = 0;
        for round in 0..2 {
            let db = Database::open(DIR, opts()).unwrap();
            let stats = db.stats().persistence.command;
            let mut issued = stats.last_sequence as u32;
            assert!(issued >= acked, "seed {seed}: {issued} < {acked}");
            acked = issued;
            let mut s = db.session();
            let mut pending = Vec::new();
            for k in 0..(300 + 60 * seed as u32) {
                pending.push(nth_call(&mut s, issued, false).unwrap());
                issued += 1;
                if pending.len() >= 16 {
                    pending.remove(0).wait().unwrap();
                    acked = issued - 16;
                }
                if k == 100 {
                    db.command().unwrap().snapshot_now().unwrap();
                }
            }
            snapshots += db.stats().persistence.command.snapshots_installed;
            drop(s);
            std::mem::forget((db, pending, round));
            sim.crash(CrashPolicy::Random {
                keep: 0.5,
                tear: true,
            });
        }
        assert!(snapshots >= 2, "seed {seed}: {snapshots} snapshots");
        let db = Database::open(DIR, opts()).unwrap();
        let stats = db.stats().persistence.command;
        assert!(stats.snapshot_load_rows > 0, "seed {seed}: {stats:?}");
        let n = stats.last_sequence as u32;
        assert!(
            n >= acked,
            "seed {seed}: {n} calls kept, {acked} acknowledged"
        );
        assert_eq!(
            stats.snapshot_base_sequence + stats.replayed_calls,
            u64::from(n),
            "seed {seed}"
        );
        let recovered = digest(&db);
        db.check_integrity().unwrap();
        db.close().unwrap();
        assert!(recovered == reference(n), "seed {seed}: {n} calls");
    }
}

/// Transfers from four sessions (two pipelined), within and across
/// partitions, snapshots every 10 ms; power is lost at a random moment.
/// Returns the violations found.
fn concurrent_transfers_then_power_loss(seed: u64) -> Vec<String> {
    let sim = SimStorage::new(seed);
    let opts = || {
        options(
            &sim,
            CommandSnapshot::Periodic {
                interval: Duration::from_millis(10),
            },
        )
    };
    {
        let db = Database::open(DIR, opts()).unwrap();
        create(&db);
        db.close().unwrap();
    }
    let db = Database::open(DIR, opts()).unwrap();
    let acked: Mutex<BTreeSet<(u32, u32)>> = Mutex::new(BTreeSet::new());
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for th in 1u32..5 {
            let (db, acked, stop) = (&db, &acked, &stop);
            scope.spawn(move || {
                let mut s = db.session();
                let mut pending = Vec::new();
                for seq in 0u32.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let p = nth_transfer(seq, th);
                    let wait_now = th % 2 == 0;
                    match s.call_then::<_, u64>("transfer", &p, wait_now) {
                        Ok((_, pc)) => pending.push((seq, pc)),
                        Err(_) => break,
                    }
                    if pending.len() >= if wait_now { 1 } else { 8 } {
                        let (seq, p) = pending.remove(0);
                        if p.wait().is_err() {
                            break;
                        }
                        acked.lock().unwrap().insert((th, seq));
                    }
                }
            });
        }
        // Until at least one snapshot is installed, then a while more.
        let began = std::time::Instant::now();
        while db.stats().persistence.command.snapshots_installed == 0
            && began.elapsed() < Duration::from_secs(20)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(20 + seed % 60));
        sim.crash(CrashPolicy::Random {
            keep: 0.5,
            tear: true,
        });
        stop.store(true, Ordering::Relaxed);
    });
    std::mem::forget(db);
    let acked = acked.into_inner().unwrap();
    let mut violations = Vec::new();
    if acked.is_empty() {
        violations.push("nothing was acknowledged before the crash".into());
    }
    let total = START * u64::from(ACCOUNTS);
    match installed_snapshot(&sim) {
        Some(snap) if sum(&snap["accounts"]) != total => violations.push(format!(
            "the installed snapshot holds {}, not {total}",
            sum(&snap["accounts"])
        )),
        Some(_) => {}
        None => violations.push("no snapshot was installed".into()),
    }
    let db = Database::open(DIR, opts()).unwrap();
    if db.stats().persistence.command.snapshot_load_rows == 0 {
        violations.push("the recovery loaded no snapshot".into());
    }
    let d = digest(&db);
    if sum(&d["accounts"]) != total {
        violations.push(format!(
            "the accounts hold {}, not {total}",
            sum(&d["accounts"])
        ));
    }
    let present: BTreeSet<(u32, u32)> = d["history"]
        .iter()
        .map(|(k, _)| {
            let th = u32::from_be_bytes(k[0..4].try_into().unwrap());
            let seq = u32::from_be_bytes(k[4..8].try_into().unwrap());
            (th, seq)
        })
        .collect();
    if let Some(a) = acked.iter().find(|a| !present.contains(a)) {
        violations.push(format!("acknowledged call {a:?} is lost"));
    }
    if d["index history_by_amount"].len() != d["history"].len() {
        violations.push("the rebuilt index does not match its table".into());
    }
    db.check_integrity().unwrap();
    db.close().unwrap();
    violations
}

#[test]
fn power_loss_during_concurrent_transfers_with_snapshots_keeps_every_acknowledged_call() {
    for seed in 30..34 {
        let v = concurrent_transfers_then_power_loss(seed);
        assert!(v.is_empty(), "seed {seed}: {v:?}");
    }
}

/// The files below `command/`, recursively.
fn files(sim: &SimStorage, dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in sim.list_dir(dir).unwrap_or_default() {
        match sim.list_dir(&p) {
            Ok(_) => out.extend(files(sim, &p)),
            Err(_) => out.push(p),
        }
    }
    out
}

/// A freeze (then power loss) at each stage of a snapshot, and at each of
/// the storage operations after the install (the pruning): the reopen
/// gives the state before the crash, whichever base it used.
#[test]
fn crashes_at_each_stage_of_a_snapshot_lose_nothing() {
    let names = ["marked", "batch", "table", "written", "installed", "pruned"];
    let mut cases: Vec<(String, usize, u64)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.to_string(), i, 0))
        .collect();
    // Inside the pruning: the n-th storage operation after the install.
    for step in 1..8 {
        cases.push((format!("pruning op {step}"), 4, step));
    }
    for (seed, (name, stage, step)) in cases.into_iter().enumerate() {
        let sim = SimStorage::new(500 + seed as u64);
        let off = || options(&sim, CommandSnapshot::Off);
        let db = Database::open(DIR, off()).unwrap();
        create(&db);
        let mut s = db.session();
        // A first snapshot, so an older one and older log exist.
        for i in 0..120 {
            nth_call(&mut s, i, true).unwrap().wait().unwrap();
        }
        db.command().unwrap().snapshot_now().unwrap().unwrap();
        std::mem::forget(db);
        sim.crash(CrashPolicy::DropAll);
        let db = Database::open(DIR, off()).unwrap();
        let mut s = db.session();
        for i in 120..240 {
            nth_call(&mut s, i, true).unwrap().wait().unwrap();
        }
        let expected = digest(&db);
        let command = db.command().unwrap();
        command.wait_all_durable().unwrap();
        let (hook_sim, fired) = (sim.clone(), Arc::new(AtomicBool::new(false)));
        let f = Arc::clone(&fired);
        let which = stages_at(stage);
        command.set_snapshot_hook(Some(Arc::new(move |st| {
            if which(st) && !f.swap(true, Ordering::SeqCst) {
                hook_sim.inject(Fault::at(hook_sim.op_count() + step, FaultKind::Freeze));
            }
        })));
        let _ = command.snapshot_now();
        assert!(fired.load(Ordering::SeqCst), "{name}: the stage never came");
        sim.clear_faults();
        drop(s);
        std::mem::forget(db);
        sim.crash(CrashPolicy::Random {
            keep: 0.5,
            tear: true,
        });
        let db = Database::open(DIR, off()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(digest(&db) == expected, "{name}: the state differs");
        db.check_integrity().unwrap();
        // At most the installed snapshot is left after the open.
        let left = sim
            .list_dir(&Path::new(DIR).join("command/snapshots"))
            .unwrap_or_default();
        assert!(left.len() <= 1, "{name}: {left:?}");
        // And it goes on: a snapshot, calls, another crash.
        let mut s = db.session();
        db.command().unwrap().snapshot_now().unwrap().unwrap();
        for i in 240..260 {
            nth_call(&mut s, i, true).unwrap().wait().unwrap();
        }
        let expected = digest(&db);
        drop(s);
        db.command().unwrap().wait_all_durable().unwrap();
        std::mem::forget(db);
        sim.crash(CrashPolicy::DropAll);
        let db = Database::open(DIR, off()).unwrap();
        assert!(
            digest(&db) == expected,
            "{name}: the state differs the second time"
        );
        db.close().unwrap();
    }
}

/// The stage predicate of `crashes_at_each_stage_of_a_snapshot_lose_nothing`.
fn stages_at(i: usize) -> Box<dyn Fn(SnapshotStage) -> bool + Send + Sync> {
    match i {
        0 => Box::new(|s| s == SnapshotStage::Marked),
        1 => Box::new(|s| matches!(s, SnapshotStage::Batch { .. })),
        2 => Box::new(|s| matches!(s, SnapshotStage::Table { .. })),
        3 => Box::new(|s| s == SnapshotStage::Written),
        4 => Box::new(|s| s == SnapshotStage::Installed),
        _ => Box::new(|s| s == SnapshotStage::Pruned),
    }
}

/// Many rounds of calls under each trigger: snapshots are installed, the
/// log before them deleted, and the command directory stays bounded.
#[test]
fn the_log_stays_bounded_under_each_trigger() {
    for trigger in [
        CommandSnapshot::LogLimit(64 << 10),
        CommandSnapshot::Periodic {
            interval: Duration::from_millis(20),
        },
    ] {
        let sim = SimStorage::new(77);
        let db = Database::open(DIR, options(&sim, trigger)).unwrap();
        create(&db);
        let mut s = db.session();
        let command = db.command().unwrap();
        if matches!(trigger, CommandSnapshot::Periodic { .. }) {
            // Pruning takes whole segments: small ones show it soon.
            command.set_log_segment_bytes_for_tests(32 << 10);
        }
        let (mut largest, mut most_segments) = (0u64, 0usize);
        let command_dir = Path::new(DIR).join("command");
        for round in 0..100u32 {
            let mut pending = Vec::new();
            for k in 0..100 {
                pending.push(nth_call(&mut s, round * 100 + k, false).unwrap());
            }
            for p in pending {
                p.wait().unwrap();
            }
            if matches!(trigger, CommandSnapshot::Periodic { .. }) {
                std::thread::sleep(Duration::from_millis(5));
            }
            largest = largest.max(command.log_disk_bytes());
            let segments = files(&sim, &command_dir)
                .iter()
                .filter(|p| p.extension().is_none_or(|e| e != "snap" && e != "meta"))
                // A generation's partition count is not log.
                .filter(|p| p.file_name().is_none_or(|n| n != "partitions"))
                .count();
            most_segments = most_segments.max(segments);
        }
        let stats = db.stats().persistence.command;
        assert!(stats.snapshots_installed >= 3, "{trigger:?}: {stats:?}");
        assert!(stats.log_bytes_deleted > 0, "{trigger:?}: {stats:?}");
        // 10000 calls log several times this.
        assert!(
            largest < 160 << 10,
            "{trigger:?}: {largest} log bytes at most"
        );
        // What the byte bound allows in 16 KiB segments (32 KiB under the
        // periodic trigger) and the spare, with room for a snapshot that
        // installs late while calls go on: a fixed 8 failed one CI run in
        // three (9 files) once pipelined calls were acknowledged sooner.
        assert!(
            most_segments <= 10,
            "{trigger:?}: {most_segments} log files at most"
        );
        let snaps = sim.list_dir(&command_dir.join("snapshots")).unwrap();
        assert!(snaps.len() <= 2, "{trigger:?}: {snaps:?}");
        let expected = digest(&db);
        drop(s);
        db.command().unwrap().wait_all_durable().unwrap();
        std::mem::forget(db);
        sim.crash(CrashPolicy::DropAll);
        // Pruning recycles segment files, which keep old records after
        // their own: recovery must read each segment only up to the next
        // one's start, or it stops at those and loses the later segments.
        let db = Database::open(DIR, options(&sim, trigger)).unwrap();
        assert!(digest(&db) == expected, "{trigger:?}");
        db.close().unwrap();
    }
}

/// The log limit counts the logs that crashes left in older generations:
/// they are replayed too, so a reopen over a log above the limit takes a
/// snapshot without waiting for the new generation to fill one.
#[test]
fn the_log_limit_counts_the_generations_crashes_left() {
    let sim = SimStorage::new(91);
    let db = Database::open(DIR, options(&sim, CommandSnapshot::Off)).unwrap();
    create(&db);
    let mut s = db.session();
    let mut pending = Vec::new();
    for i in 0..3000 {
        pending.push(nth_call(&mut s, i, false).unwrap());
    }
    for p in pending {
        p.wait().unwrap();
    }
    let logged = db.command().unwrap().log_disk_bytes();
    let limit = 64 << 10;
    assert!(logged > limit, "{logged} log bytes");
    drop(s);
    std::mem::forget(db);
    sim.crash(CrashPolicy::DropAll);
    let db = Database::open(DIR, options(&sim, CommandSnapshot::LogLimit(limit))).unwrap();
    // No call in the new generation: only the older one is over the limit.
    // (Pruning follows the install: wait for both.)
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while db.stats().persistence.command.log_bytes_deleted < logged
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    let stats = db.stats().persistence.command;
    assert!(stats.snapshots_installed >= 1, "{stats:?}");
    assert!(stats.log_bytes_deleted >= logged, "{stats:?}");
    db.close().unwrap();
}

/// A clean close leaves no snapshot behind: the data file is the base.
#[test]
fn a_clean_close_removes_the_snapshots() {
    let sim = SimStorage::new(3);
    let db = Database::open(DIR, options(&sim, CommandSnapshot::Off)).unwrap();
    create(&db);
    let mut s = db.session();
    for i in 0..50 {
        nth_call(&mut s, i, true).unwrap().wait().unwrap();
    }
    db.command().unwrap().snapshot_now().unwrap().unwrap();
    drop(s);
    let expected = digest(&db);
    db.close().unwrap();
    assert!(!sim.exists(&Path::new(DIR).join("command")));
    let db = Database::open(DIR, options(&sim, CommandSnapshot::Off)).unwrap();
    assert!(digest(&db) == expected);
    db.close().unwrap();
}

/// Catalog changes while a snapshot is written: a table created after the
/// point is not in it (its creation is replayed), and a table dropped
/// before the writer finished it abandons the snapshot (the next one
/// installs). Either way the recovery gives the state before the crash.
#[test]
fn catalog_changes_during_a_snapshot_are_replayed_or_abandon_it() {
    let sim = SimStorage::new(4);
    let db = Arc::new(Database::open(DIR, options(&sim, CommandSnapshot::Off)).unwrap());
    create(&db);
    db.create_table("scratch").unwrap();
    let mut s = db.session();
    for i in 0..30 {
        nth_call(&mut s, i, true).unwrap().wait().unwrap();
    }
    let command = db.command().unwrap();
    let accounts_id = db.table("accounts").unwrap().id();
    let (db2, fired) = (Arc::clone(&db), Arc::new(AtomicBool::new(false)));
    let f = Arc::clone(&fired);
    command.set_snapshot_hook(Some(Arc::new(move |stage| {
        if matches!(stage, SnapshotStage::Batch { table, .. } if table == accounts_id)
            && !f.swap(true, Ordering::SeqCst)
        {
            db2.create_table("created_after_the_point").unwrap();
            // Written after accounts (table order is by name).
            db2.drop_table("scratch").unwrap();
        }
    })));
    assert_eq!(command.snapshot_now().unwrap(), None, "not abandoned");
    assert!(fired.load(Ordering::SeqCst));
    command.set_snapshot_hook(None);
    assert_eq!(db.stats().persistence.command.snapshots_abandoned, 1);
    let fired = Arc::new(AtomicBool::new(false));
    let (db2, f) = (Arc::clone(&db), Arc::clone(&fired));
    command.set_snapshot_hook(Some(Arc::new(move |stage| {
        if stage == SnapshotStage::Marked && !f.swap(true, Ordering::SeqCst) {
            db2.create_table("created_during_the_write").unwrap();
        }
    })));
    command.snapshot_now().unwrap().unwrap();
    command.set_snapshot_hook(None);
    for i in 30..50 {
        nth_call(&mut s, i, true).unwrap().wait().unwrap();
    }
    drop(s);
    let expected = digest(&db);
    let snapshot = installed_snapshot(&sim).unwrap();
    assert!(!snapshot.contains_key("created_during_the_write"));
    assert!(snapshot.contains_key("created_after_the_point"));
    command.wait_all_durable().unwrap();
    std::mem::forget(db);
    sim.crash(CrashPolicy::DropAll);
    let db = Database::open(DIR, options(&sim, CommandSnapshot::Off)).unwrap();
    assert!(digest(&db) == expected);
    assert!(db.table("created_during_the_write").is_ok());
    assert!(db.table("scratch").is_err());
    db.check_integrity().unwrap();
    db.close().unwrap();
}

/// A table larger than a part file is written as several parts, in key
/// order, and recovery loads every part (on two threads): after a power
/// loss the database equals the state before it, and the snapshot's rows
/// are the table's, each once. (Parts of 8 KiB here, of `PART_BYTES`
/// otherwise.)
#[test]
fn a_table_larger_than_a_part_is_written_in_parts_and_loads_whole() {
    let sim = SimStorage::new(21);
    let part_bytes = 8 << 10;
    let opts = || {
        let mut o = options(&sim, CommandSnapshot::Off);
        o.recovery_threads = 2;
        o
    };
    let db = Database::open(DIR, opts()).unwrap();
    create(&db);
    let command = db.command().unwrap();
    command.set_snapshot_part_bytes_for_tests(part_bytes);
    let mut s = db.session();
    for i in 0..100 {
        nth_call(&mut s, i, true).unwrap().wait().unwrap();
    }
    command.snapshot_now().unwrap().unwrap();
    let accounts = db.table("accounts").unwrap().id();
    let snapshot = installed_snapshot(&sim).unwrap();
    assert_eq!(snapshot["accounts"].len() as u32, ACCOUNTS);
    assert!(snapshot["accounts"].windows(2).all(|w| w[0].0 < w[1].0));
    let files = waypoint::command::snapshot::inspect(&sim, Path::new(DIR)).unwrap();
    let snap = files.snapshots.iter().find(|s| s.installed).unwrap();
    let snap_dir = snap.files[0].0.parent().unwrap().to_path_buf();
    assert!(
        sim.exists(&table_file(&snap_dir, accounts, 2)),
        "three parts at least"
    );
    assert!(PART_BYTES > part_bytes);
    // Calls after the snapshot, replayed on top of the loaded parts.
    for i in 100..120 {
        nth_call(&mut s, i, true).unwrap().wait().unwrap();
    }
    drop(s);
    let expected = digest(&db);
    command.wait_all_durable().unwrap();
    std::mem::forget(db);
    sim.crash(CrashPolicy::DropAll);
    // A lost last part is refused, not loaded as a shorter table.
    let mut last = 2;
    while sim.exists(&table_file(&snap_dir, accounts, last + 1)) {
        last += 1;
    }
    let last_path = table_file(&snap_dir, accounts, last);
    let aside = snap_dir.join("aside");
    sim.rename(&last_path, &aside).unwrap();
    match Database::open(DIR, opts()) {
        Err(Error::MissingFile { path, .. }) => assert_eq!(path, last_path),
        other => panic!("expected MissingFile, got {:?}", other.map(|_| ())),
    }
    sim.rename(&aside, &last_path).unwrap();
    let db = Database::open(DIR, opts()).unwrap();
    assert!(digest(&db) == expected, "the state after recovery differs");
    let stats = db.stats().persistence.command;
    let rows: usize = snapshot.values().map(Vec::len).sum();
    assert_eq!(stats.snapshot_load_rows, rows as u64, "{stats:?}");
    db.close().unwrap();
}

/// Pre-images a snapshot kept when, once the writer has written its first
/// batch of accounts (0 to 255), five calls move money from account
/// `from` to account `to`.
fn pre_images_of_transfers_during_a_snapshot(from: u32, to: u32) -> u64 {
    let sim = SimStorage::new(2);
    let db = Arc::new(Database::open(DIR, options(&sim, CommandSnapshot::Off)).unwrap());
    create(&db);
    snapshot_with_calls_after_the_first_accounts_batch(&db, move |s| {
        for seq in 0..5u32 {
            let p = Transfer {
                from,
                to,
                amount: 1,
                by: 9,
                seq,
            };
            s.call::<_, u64>("transfer", &p).unwrap();
        }
    });
    let kept = db.stats().persistence.command.last_snapshot_pre_images;
    std::mem::forget(db);
    kept
}

/// A change to a key the snapshot writer has already written keeps no
/// pre-image (VoltDB's snapshots skip them too): the same calls keep two
/// fewer when their two accounts are behind the writer than when they
/// are ahead of it (the history rows are ahead either way). The
/// snapshot's contents under changes on both sides of the writer are
/// checked by the test above.
#[test]
fn keys_the_writer_has_passed_keep_no_pre_image() {
    let behind = pre_images_of_transfers_during_a_snapshot(0, 2);
    let ahead = pre_images_of_transfers_during_a_snapshot(ACCOUNTS - 4, ACCOUNTS - 2);
    assert_eq!(ahead, behind + 2, "ahead {ahead}, behind {behind}");
    assert!(
        behind > 0,
        "the history rows ahead of the writer keep theirs"
    );
}
