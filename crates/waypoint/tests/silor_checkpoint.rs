//! The `silor` scheme's fuzzy checkpoints (seed 002 §4.2-4.3,
//! docs/decisions/029-silor-checkpoints.md) from the outside: a checkpoint
//! taken while writers run, then power loss, recovers exactly the
//! acknowledged state; a crash before the install keeps the old
//! checkpoint and logs, one after the install and before the pruning
//! recovers from the new one; the log on disk stays bounded over many
//! cycles with both triggers; deleted keys and dropped tables stay gone;
//! recovery twice in a row; and the broken variant (pruning the logs at eh
//! instead of el) is caught.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use waypoint::io::{CrashPolicy, Fault, FaultKind, SimStorage, Storage};
use waypoint::silor::CheckpointStage;
use waypoint::{Database, Error, Options, Persistence, SilorCheckpoint, SilorOptions};

const DIR: &str = "/db";

fn options(sim: &SimStorage, checkpoint: SilorCheckpoint, checkpointers: usize) -> Options {
    Options {
        page_size: Some(4096),
        buffer_pool_bytes: 2048 * 4096,
        storage: Some(Arc::new(sim.clone())),
        persistence: Persistence::Silor(SilorOptions {
            loggers: 2,
            checkpoint,
            checkpointers,
        }),
        ..Options::default()
    }
}

fn off(sim: &SimStorage) -> Options {
    options(sim, SilorCheckpoint::Off, 2)
}

/// Every table's rows, by table name.
type State = BTreeMap<String, Vec<(Vec<u8>, Vec<u8>)>>;

fn state(db: &Database) -> State {
    let mut s = db.session();
    let mut out = BTreeMap::new();
    for name in db.table_names() {
        let t = db.table(&name).unwrap();
        let mut tx = s.begin().unwrap();
        out.insert(name, tx.scan(&t, .., usize::MAX).unwrap());
    }
    out
}

fn sum(rows: &[(Vec<u8>, Vec<u8>)]) -> u64 {
    rows.iter()
        .map(|(_, v)| u64::from_be_bytes(v[..8].try_into().unwrap()))
        .sum()
}

const ACCOUNTS: u32 = 3000;
const START: u64 = 100;

/// A database with `ACCOUNTS` accounts, closed cleanly (the data file is
/// the base before the first checkpoint).
fn bank(sim: &SimStorage) {
    let db = Database::open(DIR, off(sim)).unwrap();
    let t = db.create_table("accounts").unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    for a in 0..ACCOUNTS {
        tx.insert(&t, &a.to_be_bytes(), &START.to_be_bytes())
            .unwrap();
    }
    tx.commit().unwrap();
    drop((s, t));
    db.close().unwrap();
}

/// `n` transfers from `x`'s pseudo-random stream, pipelined; returns once
/// all are acknowledged.
fn transfers(db: &Database, x: &mut u32, n: usize) {
    let t = db.table("accounts").unwrap();
    let mut s = db.session();
    let mut done = 0;
    let mut pending = Vec::new();
    while done < n {
        *x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        let (a, b) = ((*x >> 8) % ACCOUNTS, (*x >> 20) % ACCOUNTS);
        if a == b {
            continue;
        }
        let mut tx = s.begin().unwrap();
        let get = |tx: &mut waypoint::Transaction<'_>, k: u32| {
            u64::from_be_bytes(
                tx.get(&t, &k.to_be_bytes()).unwrap().unwrap()[..8]
                    .try_into()
                    .unwrap(),
            )
        };
        let (va, vb) = (get(&mut tx, a), get(&mut tx, b));
        if va == 0 {
            continue;
        }
        tx.update(&t, &a.to_be_bytes(), &(va - 1).to_be_bytes())
            .unwrap();
        tx.update(&t, &b.to_be_bytes(), &(vb + 1).to_be_bytes())
            .unwrap();
        match tx.commit_pipelined() {
            Ok(p) => {
                done += 1;
                pending.push(p);
            }
            Err(Error::Conflict) => {}
            Err(e) => panic!("{e}"),
        }
    }
    for p in pending {
        p.wait().unwrap();
    }
}

/// Power loss once everything acknowledged is durable; the reopened
/// state must equal `expected`.
fn crash_and_check(
    sim: &SimStorage,
    db: Database,
    opts: impl Fn(&SimStorage) -> Options,
) -> (Database, State) {
    let expected = state(&db);
    std::mem::forget(db);
    sim.crash(CrashPolicy::DropAll);
    // A new instance's view of the disk (the old one's fails from now on).
    let db = Database::open(DIR, opts(sim)).unwrap();
    let got = state(&db);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    for (name, rows) in &expected {
        assert!(got[name] == *rows, "table {name} differs after recovery");
    }
    db.check_integrity().unwrap();
    (db, expected)
}

#[test]
fn a_checkpoint_taken_while_writers_run_recovers_exactly_the_acknowledged_state() {
    let sim = SimStorage::new(1);
    bank(&sim);
    let db = Database::open(DIR, off(&sim)).unwrap();
    let stop = AtomicBool::new(false);
    let installed = std::thread::scope(|scope| {
        for th in 0..2u32 {
            let (db, stop) = (&db, &stop);
            scope.spawn(move || {
                let mut x = th * 7919 + 1;
                while !stop.load(Ordering::Relaxed) {
                    transfers(db, &mut x, 20);
                }
            });
        }
        // Let the writers run, then checkpoint while they go on.
        std::thread::sleep(Duration::from_millis(100));
        let installed = db.silor().unwrap().checkpoint_now().unwrap().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        stop.store(true, Ordering::Relaxed);
        installed
    });
    let (el, eh) = installed;
    assert!(el <= eh);
    let stats = db.stats().persistence.silor;
    assert_eq!(stats.checkpoints_installed, 1, "{stats:?}");
    assert_eq!(
        (stats.last_checkpoint_el, stats.last_checkpoint_eh),
        (el, eh)
    );
    assert_eq!(stats.last_checkpoint_rows, ACCOUNTS as u64);
    assert!(db
        .silor()
        .unwrap()
        .wait_all_durable(Duration::from_secs(10)));
    let (db, expected) = crash_and_check(&sim, db, off);
    assert_eq!(sum(&expected["accounts"]), ACCOUNTS as u64 * START);
    let stats = db.stats().persistence.silor;
    assert_eq!(stats.checkpoint_load_rows, ACCOUNTS as u64, "{stats:?}");
    assert!(stats.checkpoint_load_bytes > 0);
    // `waypoint inspect` sees the installed checkpoint and its files.
    let info = waypoint::inspect::inspect_with(&sim, Path::new(DIR)).unwrap();
    let pepoch = info.silor.pepoch.clone().unwrap().unwrap();
    assert_eq!(pepoch.checkpoint.map(|c| (c.1, c.2)), Some((el, eh)));
    assert_eq!(info.silor.checkpoints.len(), 1);
    let c = &info.silor.checkpoints[0];
    assert!(c.installed);
    // The catalog file and a file per key range, however few
    // checkpointers wrote them (recovery loads them on several threads),
    // every one whole.
    assert_eq!(
        c.files.len(),
        1 + waypoint::silor::LOAD_PARTS,
        "{:?}",
        c.files
    );
    let rows: u64 = c.files.iter().map(|f| *f.2.as_ref().unwrap()).sum();
    assert_eq!(rows, ACCOUNTS as u64);
    // Recovery twice in a row, then once more from a new checkpoint.
    let (db, _) = crash_and_check(&sim, db, off);
    db.silor().unwrap().checkpoint_now().unwrap().unwrap();
    let mut x = 5;
    transfers(&db, &mut x, 50);
    assert!(db
        .silor()
        .unwrap()
        .wait_all_durable(Duration::from_secs(10)));
    let (db, got) = crash_and_check(&sim, db, off);
    assert_eq!(sum(&got["accounts"]), ACCOUNTS as u64 * START);
    // A clean close removes checkpoints and logs; the data file holds all.
    db.close().unwrap();
    assert!(!sim.exists(&Path::new(DIR).join("silor")));
    let db = Database::open(DIR, off(&sim)).unwrap();
    assert!(state(&db) == got);
}

/// Crash at `stage` of a second checkpoint (the first is installed), with
/// transfers before and during it; the recovery must hold every
/// acknowledged transfer. A `Batch` stage means the first batch of its
/// part, whatever its rows.
fn crash_at(stage: CheckpointStage, seed: u64) {
    let sim = SimStorage::new(seed);
    bank(&sim);
    let db = Database::open(DIR, off(&sim)).unwrap();
    let mut x = seed as u32;
    transfers(&db, &mut x, 30);
    db.silor().unwrap().checkpoint_now().unwrap().unwrap();
    transfers(&db, &mut x, 30);
    assert!(db
        .silor()
        .unwrap()
        .wait_all_durable(Duration::from_secs(10)));
    let expected = state(&db);
    let silor_dir = Path::new(DIR).join("silor");
    let (hook_sim, fired) = (sim.clone(), Arc::new(AtomicBool::new(false)));
    let f = Arc::clone(&fired);
    db.silor()
        .unwrap()
        .set_checkpoint_hook(Some(Arc::new(move |s| {
            let hit = match (stage, s) {
                (
                    CheckpointStage::Batch { part: a, .. },
                    CheckpointStage::Batch { part: b, .. },
                ) => a == b,
                _ => s == stage,
            };
            if hit && !f.swap(true, Ordering::SeqCst) {
                hook_sim.inject(Fault::at(0, FaultKind::Freeze));
            }
        })));
    assert!(db.silor().unwrap().checkpoint_now().is_err() || stage == CheckpointStage::Pruned);
    assert!(fired.load(Ordering::SeqCst));
    // A freeze that no operation reached yet must not strike the next
    // instance.
    sim.clear_faults();
    std::mem::forget(db);
    sim.crash(CrashPolicy::DropAll);
    let db = Database::open(DIR, off(&sim)).unwrap();
    assert!(
        state(&db) == expected,
        "state differs after a crash at {stage:?}"
    );
    assert_eq!(sum(&state(&db)["accounts"]), ACCOUNTS as u64 * START);
    // One checkpoint directory is left: the installed one.
    let left = sim.list_dir(&silor_dir.join("checkpoints")).unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
    db.check_integrity().unwrap();
    // And it goes on: another checkpoint, another crash.
    db.silor().unwrap().checkpoint_now().unwrap().unwrap();
    transfers(&db, &mut x, 10);
    assert!(db
        .silor()
        .unwrap()
        .wait_all_durable(Duration::from_secs(10)));
    crash_and_check(&sim, db, off);
}

#[test]
fn a_crash_while_walking_or_before_the_install_keeps_the_old_checkpoint() {
    crash_at(CheckpointStage::Batch { part: 0, rows: 0 }, 11);
    crash_at(CheckpointStage::Written, 12);
}

#[test]
fn a_crash_after_the_install_and_before_the_pruning_recovers() {
    crash_at(CheckpointStage::Installed, 13);
    crash_at(CheckpointStage::Pruned, 14);
}

/// Updates made while the walk is under way, to keys it has passed: only
/// the log has them. Returns whether they survived a power loss.
fn updates_behind_the_walk_survive(broken: bool) -> bool {
    let sim = SimStorage::new(21);
    bank(&sim);
    let db = Database::open(DIR, off(&sim)).unwrap();
    let silor = db.silor().unwrap();
    silor.set_broken_checkpoint_install_for_tests(broken);
    silor.set_log_segment_bytes_for_tests(1024);
    let db2 = db.clone();
    let fired = Arc::new(AtomicBool::new(false));
    let f = Arc::clone(&fired);
    silor.set_checkpoint_hook(Some(Arc::new(move |stage| {
        if !matches!(stage, CheckpointStage::Batch { part: 0, .. })
            || f.swap(true, Ordering::SeqCst)
        {
            return;
        }
        // Account 0 is behind the walk now (part 0 starts at the lowest
        // key): move its money to account 1, which is too.
        let t = db2.table("accounts").unwrap();
        let mut s = db2.session();
        let mut pending = Vec::new();
        for round in 0..60u64 {
            let mut tx = s.begin().unwrap();
            tx.update(&t, &0u32.to_be_bytes(), &(START - 1 - round).to_be_bytes())
                .unwrap();
            tx.update(&t, &1u32.to_be_bytes(), &(START + 1 + round).to_be_bytes())
                .unwrap();
            pending.push(tx.commit_pipelined().unwrap());
        }
        // Then other keys, so the updates' segment is not the newest of
        // their logger (a durable chunk of entries never spans two).
        for p in pending.drain(..) {
            p.wait().unwrap();
        }
        for round in 0..60u64 {
            let mut tx = s.begin().unwrap();
            tx.update(
                &t,
                &(ACCOUNTS - 1).to_be_bytes(),
                &(START + round).to_be_bytes(),
            )
            .unwrap();
            tx.update(
                &t,
                &(ACCOUNTS - 2).to_be_bytes(),
                &(START - round).to_be_bytes(),
            )
            .unwrap();
            pending.push(tx.commit_pipelined().unwrap());
        }
        for p in pending {
            p.wait().unwrap();
        }
    })));
    let (el, eh) = silor.checkpoint_now().unwrap().unwrap();
    assert!(fired.load(Ordering::SeqCst));
    assert!(el <= eh);
    // More segments after the ones holding the updates.
    let mut x = 3;
    transfers(&db, &mut x, 40);
    assert!(db
        .silor()
        .unwrap()
        .wait_all_durable(Duration::from_secs(10)));
    let expected = state(&db);
    std::mem::forget(db);
    sim.crash(CrashPolicy::DropAll);
    let db = Database::open(DIR, off(&sim)).unwrap();
    state(&db) == expected
}

#[test]
fn pruning_the_log_at_eh_instead_of_el_is_caught() {
    assert!(updates_behind_the_walk_survive(false));
    assert!(
        !updates_behind_the_walk_survive(true),
        "the broken variant lost nothing"
    );
}

#[test]
fn deleted_keys_and_dropped_tables_stay_gone() {
    let sim = SimStorage::new(31);
    bank(&sim);
    {
        let db = Database::open(DIR, off(&sim)).unwrap();
        let gone = db.create_table("gone").unwrap();
        let later = db.create_table("later").unwrap();
        let mut s = db.session();
        let mut tx = s.begin().unwrap();
        for k in 0u32..50 {
            tx.insert(&gone, &k.to_be_bytes(), b"g").unwrap();
            tx.insert(&later, &k.to_be_bytes(), b"l").unwrap();
        }
        tx.commit().unwrap();
        drop((s, gone, later));
        db.close().unwrap();
    }
    // The data file holds every table and key now.
    let db = Database::open(DIR, off(&sim)).unwrap();
    let t = db.table("accounts").unwrap();
    let mut s = db.session();
    for k in 0u32..100 {
        let mut tx = s.begin().unwrap();
        tx.delete(&t, &k.to_be_bytes()).unwrap();
        tx.commit().unwrap();
    }
    db.drop_table("gone").unwrap();
    db.silor().unwrap().checkpoint_now().unwrap().unwrap();
    // After the checkpoint: more deletes (tombstones in the log), a drop.
    for k in 100u32..150 {
        let mut tx = s.begin().unwrap();
        tx.delete(&t, &k.to_be_bytes()).unwrap();
        tx.commit().unwrap();
    }
    db.drop_table("later").unwrap();
    db.create_table("new").unwrap();
    drop((s, t));
    assert!(db
        .silor()
        .unwrap()
        .wait_all_durable(Duration::from_secs(10)));
    let (db, got) = crash_and_check(&sim, db, off);
    assert_eq!(got["accounts"].len(), ACCOUNTS as usize - 150);
    assert!(!got.contains_key("gone") && !got.contains_key("later"));
    assert!(got.contains_key("new"));
    // Again, with a checkpoint of the recovered state.
    db.silor().unwrap().checkpoint_now().unwrap().unwrap();
    let (_db, again) = crash_and_check(&sim, db, off);
    assert!(again == got);
}

/// A table created and dropped before a checkpoint is in neither the
/// checkpoint's catalog nor the data file's: its id must still not be
/// given again after a recovery from the checkpoint (the logs may hold
/// its rows under that id).
#[test]
fn a_dropped_tables_id_is_not_given_again_after_recovery_from_a_checkpoint() {
    let sim = SimStorage::new(37);
    bank(&sim);
    let db = Database::open(DIR, off(&sim)).unwrap();
    let gone = db.create_table("gone").unwrap();
    let gone_id = gone.id();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    tx.insert(&gone, b"k", b"v").unwrap();
    tx.commit().unwrap();
    drop((s, gone));
    db.drop_table("gone").unwrap();
    db.silor().unwrap().checkpoint_now().unwrap().unwrap();
    let (db, _) = crash_and_check(&sim, db, off);
    let fresh = db.create_table("fresh").unwrap();
    assert!(
        fresh.id() > gone_id,
        "table id {} given again (the dropped table had it)",
        fresh.id()
    );
}

fn log_stays_bounded(trigger: SilorCheckpoint, seed: u64) {
    let sim = SimStorage::new(seed);
    bank(&sim);
    let opts = move |sim: &SimStorage| options(sim, trigger, 1);
    let db = Database::open(DIR, opts(&sim)).unwrap();
    db.silor()
        .unwrap()
        .set_log_segment_bytes_for_tests(16 << 10);
    let mut x = seed as u32;
    let mut most = 0;
    for _ in 0..40 {
        transfers(&db, &mut x, 100);
        let stats = db.stats().persistence;
        most = most.max(stats.log.disk_bytes);
    }
    // Let the trigger catch up once more.
    std::thread::sleep(Duration::from_millis(300));
    let stats = db.stats().persistence;
    let s = &stats.silor;
    assert!(s.checkpoints_installed >= 3, "{s:?}");
    assert!(s.log_bytes_deleted > 0, "{s:?}");
    // Appended bytes far beyond what the disk ever held at once.
    assert!(
        stats.log.appended_bytes > 3 * most,
        "appended {} bytes, up to {most} on disk at once",
        stats.log.appended_bytes
    );
    assert!(db
        .silor()
        .unwrap()
        .wait_all_durable(Duration::from_secs(10)));
    let (_db, got) = crash_and_check(&sim, db, opts);
    assert_eq!(sum(&got["accounts"]), ACCOUNTS as u64 * START);
}

#[test]
fn the_log_stays_bounded_with_continuous_checkpoints() {
    log_stays_bounded(
        SilorCheckpoint::Continuous {
            min_interval: Duration::ZERO,
        },
        41,
    );
}

#[test]
fn the_log_stays_bounded_with_a_log_limit() {
    log_stays_bounded(SilorCheckpoint::LogLimit(64 << 10), 42);
}

/// After a crash the older generation's log files stay on disk until the
/// first install; the log limit counts them, so a database reopened with
/// more log than its limit checkpoints without new writes.
#[test]
fn the_log_limit_counts_the_logs_of_older_generations() {
    let sim = SimStorage::new(44);
    bank(&sim);
    let db = Database::open(DIR, off(&sim)).unwrap();
    let mut x = 44;
    transfers(&db, &mut x, 3000);
    assert!(db
        .silor()
        .unwrap()
        .wait_all_durable(Duration::from_secs(10)));
    let logged = db.stats().persistence.log.disk_bytes;
    let limit = logged / 2;
    assert!(
        limit >= SilorOptions::MIN_LOG_LIMIT,
        "{logged} bytes logged"
    );
    std::mem::forget(db);
    sim.crash(CrashPolicy::DropAll);
    let db = Database::open(DIR, options(&sim, SilorCheckpoint::LogLimit(limit), 1)).unwrap();
    let mut installed = 0;
    for _ in 0..100 {
        installed = db.stats().persistence.silor.checkpoints_installed;
        if installed > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        installed > 0,
        "{logged} bytes of the older generation against a limit of {limit}: no checkpoint"
    );
    let stats = db.stats().persistence.silor;
    assert!(stats.log_bytes_deleted >= logged / 2, "{stats:?}");
}

/// A commit whose log append fails after its writes are installed is
/// rolled back, and a walk running meanwhile copies its value, which never
/// committed. That checkpoint is abandoned (counted), so a recovery does
/// not bring the value back; the next one is installed.
#[test]
#[cfg(feature = "testing")]
fn a_checkpoint_that_walked_a_rolled_back_value_is_abandoned() {
    let sim = SimStorage::new(45);
    bank(&sim);
    let one = |sim: &SimStorage| options(sim, SilorCheckpoint::Off, 1);
    let db = Database::open(DIR, one(&sim)).unwrap();
    let silor = db.silor().unwrap();
    let (installed_tx, installed_rx) = std::sync::mpsc::channel::<()>();
    let (walked_tx, walked_rx) = std::sync::mpsc::channel::<()>();
    silor.set_checkpoint_hook(Some(Arc::new(move |s| {
        if matches!(s, CheckpointStage::Batch { .. }) {
            let _ = walked_tx.send(());
        }
    })));
    // The append fails once the first batch, account 0 in it, is walked.
    silor.fail_next_append_for_tests(move || {
        installed_tx.send(()).unwrap();
        walked_rx.recv_timeout(Duration::from_secs(20)).unwrap();
    });
    let taken = std::thread::scope(|s| {
        let committer = s.spawn(|| {
            let t = db.table("accounts").unwrap();
            let mut session = db.session();
            let mut tx = session.begin().unwrap();
            tx.update(&t, &0u32.to_be_bytes(), &999_999u64.to_be_bytes())
                .unwrap();
            tx.commit().map(|_| ())
        });
        installed_rx.recv_timeout(Duration::from_secs(20)).unwrap();
        let taken = db.silor().unwrap().checkpoint_now().unwrap();
        assert!(committer.join().unwrap().is_err());
        taken
    });
    db.silor().unwrap().set_checkpoint_hook(None);
    let stats = db.stats().persistence.silor;
    let (db, got) = crash_and_check(&sim, db, one);
    assert_eq!(sum(&got["accounts"]), ACCOUNTS as u64 * START);
    assert_eq!(
        taken, None,
        "the checkpoint that walked the value was installed"
    );
    assert_eq!(stats.checkpoints_abandoned, 1, "{stats:?}");
    db.silor().unwrap().checkpoint_now().unwrap().unwrap();
    crash_and_check(&sim, db, one);
}

#[test]
fn options_are_validated_by_name() {
    let sim = SimStorage::new(51);
    for (checkpoint, checkpointers, name) in [
        (SilorCheckpoint::Off, 0, "checkpointers"),
        (SilorCheckpoint::Off, 65, "checkpointers"),
        (SilorCheckpoint::LogLimit(10), 1, "checkpoint"),
        (
            SilorCheckpoint::Continuous {
                min_interval: Duration::from_secs(100_000),
            },
            1,
            "checkpoint",
        ),
    ] {
        match Database::open(DIR, options(&sim, checkpoint, checkpointers)) {
            Err(Error::InvalidOptions(m)) => assert!(m.starts_with(name), "{m}"),
            other => panic!("{checkpoint:?}/{checkpointers}: {:?}", other.map(|_| ())),
        }
    }
}

fn by_balance(_k: &[u8], v: &[u8]) -> Option<Vec<u8>> {
    Some(v.to_vec())
}

/// A secondary index in the checkpoint (loaded with it, then its logged
/// entries replayed) and one created after it (rebuilt when bound) match
/// their table after power loss.
#[test]
fn indexes_survive_a_checkpoint_and_power_loss() {
    let sim = SimStorage::new(61);
    bank(&sim);
    let db = Database::open(DIR, off(&sim)).unwrap();
    let t = db.table("accounts").unwrap();
    db.create_index(&t, "before", Arc::new(by_balance)).unwrap();
    let mut x = 7;
    transfers(&db, &mut x, 40);
    db.silor().unwrap().checkpoint_now().unwrap().unwrap();
    transfers(&db, &mut x, 40);
    db.create_index(&t, "after", Arc::new(by_balance)).unwrap();
    transfers(&db, &mut x, 20);
    drop(t);
    assert!(db
        .silor()
        .unwrap()
        .wait_all_durable(Duration::from_secs(10)));
    let expected = state(&db);
    std::mem::forget(db);
    sim.crash(CrashPolicy::DropAll);
    let db = Database::open(DIR, off(&sim)).unwrap();
    assert!(state(&db) == expected);
    let before = db.open_index("before", Arc::new(by_balance)).unwrap();
    let after = db.open_index("after", Arc::new(by_balance)).unwrap();
    db.check_integrity().unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    for index in [&before, &after] {
        let all = tx.index_scan(index, .., usize::MAX, false).unwrap();
        assert_eq!(all.len(), ACCOUNTS as usize, "{}", index.name());
    }
}
