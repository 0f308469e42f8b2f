//! Executor threads under the `command` scheme (`CommandOptions::
//! executors`, seed 001 §II-B): a partition's single-partition calls run
//! on its executor, one after another in the order they were handed over,
//! while other partitions' executors go on; `Session::submit` returns
//! before the call runs; a failing or panicking call is an error through
//! its handle and the executor goes on; a close answers what is still
//! queued; a multi-partition call runs where every executor reaches it.
//! The crash checks over executors are in `command.rs`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use waypoint::io::SimStorage;
use waypoint::{
    CommandOptions, Database, Error, Options, PendingCall, Persistence, Procedures, Transaction,
};

const DIR: &str = "/db";

/// What the procedures share with the test: a gate `hold` waits at, and
/// a clock that stamps each call with the order it ran in.
#[derive(Default)]
struct Shared {
    open: Mutex<bool>,
    opened: Condvar,
    holding: AtomicU64,
    clock: AtomicU64,
    /// For a procedure that calls in again.
    db: std::sync::OnceLock<Database>,
}

impl Shared {
    fn open_gate(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

/// What a call saw: the thread it ran on and when, in call order.
type Ran = (String, u64);

fn ran(shared: &Shared) -> Ran {
    let thread = std::thread::current()
        .name()
        .unwrap_or_default()
        .to_string();
    (thread, shared.clock.fetch_add(1, Ordering::SeqCst))
}

fn note(tx: &mut Transaction<'_>, key: u64) -> waypoint::Result<()> {
    let notes = tx.table("notes")?;
    tx.upsert(&notes, &key.to_be_bytes(), b"x")
}

fn procedures(shared: &Arc<Shared>) -> Procedures {
    let (hold, noted, all, again) = (
        Arc::clone(shared),
        Arc::clone(shared),
        Arc::clone(shared),
        Arc::clone(shared),
    );
    Procedures::new()
        // Waits at the gate, then notes its key.
        .single(
            "hold",
            |k: &u64| *k,
            move |tx, k: &u64| {
                hold.holding.fetch_add(1, Ordering::SeqCst);
                let mut open = hold.open.lock().unwrap();
                while !*open {
                    open = hold.opened.wait(open).unwrap();
                }
                drop(open);
                note(tx, *k)?;
                Ok(ran(&hold))
            },
        )
        .unwrap()
        .single(
            "note",
            |k: &u64| *k,
            move |tx, k: &u64| {
                note(tx, *k)?;
                Ok(ran(&noted))
            },
        )
        .unwrap()
        .multi("note_all", move |tx, keys: &Vec<u64>| {
            for k in keys {
                note(tx, *k)?;
            }
            Ok(ran(&all))
        })
        .unwrap()
        .single(
            "reenter",
            |k: &u64| *k,
            move |_tx, k: &u64| {
                let db = again.db.get().expect("the test sets the database");
                db.session().call::<_, Ran>("note", k).map(|_| ())
            },
        )
        .unwrap()
        .single(
            "fail",
            |k: &u64| *k,
            |tx, k: &u64| {
                note(tx, *k)?;
                Err::<(), _>(Error::KeyNotFound)
            },
        )
        .unwrap()
        .single(
            "boom",
            |k: &u64| *k,
            |_tx, _k: &u64| -> waypoint::Result<()> { panic!("a procedure that panics") },
        )
        .unwrap()
}

fn options(sim: &SimStorage, shared: &Arc<Shared>) -> Options {
    Options {
        page_size: Some(4096),
        buffer_pool_bytes: 512 * 4096,
        storage: Some(Arc::new(sim.clone())),
        persistence: Persistence::Command(CommandOptions {
            partitions: 2,
            executors: true,
            ..CommandOptions::default()
        }),
        procedures: procedures(shared),
        ..Options::default()
    }
}

fn open(sim: &SimStorage, shared: &Arc<Shared>) -> Database {
    let db = Database::open(DIR, options(sim, shared)).unwrap();
    if db.table("notes").is_err() {
        db.create_table("notes").unwrap();
    }
    db
}

fn noted(db: &Database) -> Vec<u64> {
    let notes = db.table("notes").unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    tx.scan(&notes, .., usize::MAX)
        .unwrap()
        .into_iter()
        .map(|(k, _)| u64::from_be_bytes(k.try_into().unwrap()))
        .collect()
}

/// Wait (bounded) until `done` holds.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(20), "{what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_partitions_calls_queue_on_its_executor_while_other_partitions_go_on() {
    let sim = SimStorage::new(1);
    let shared = Arc::new(Shared::default());
    let db = open(&sim, &shared);
    let mut s = db.session();
    assert!(s.runs_calls_on_executors());
    // Partition 0's executor is held; submit returns at once.
    let held: PendingCall<Ran> = s.submit("hold", &0u64).unwrap();
    eventually("the held call starts", || {
        shared.holding.load(Ordering::SeqCst) == 1
    });
    let queued: Vec<PendingCall<Ran>> = [2u64, 4, 6]
        .iter()
        .map(|k| s.submit("note", k).unwrap())
        .collect();
    // Partition 1 goes on: through its executor, and for a blocking call
    // of another session.
    let (other, _) = s.submit::<_, Ran>("note", &1u64).unwrap().wait().unwrap();
    assert_eq!(other.0, "waypoint-executor-1");
    let (blocking, _) = db
        .session()
        .call_pipelined::<_, Ran>("note", &3u64)
        .unwrap();
    assert_eq!(blocking.0, "waypoint-executor-1");
    std::thread::sleep(Duration::from_millis(20));
    assert!(!held.has_run() && queued.iter().all(|c| !c.has_run()));
    shared.open_gate();
    let (first, _) = held.wait().unwrap();
    let after: Vec<Ran> = queued.into_iter().map(|c| c.wait().unwrap().0).collect();
    // In the order handed over, on partition 0's executor, after the held one.
    let mut clock = first.1;
    assert_eq!(first.0, "waypoint-executor-0");
    for (thread, at) in after {
        assert_eq!(thread, "waypoint-executor-0");
        assert!(at > clock, "partition 0's calls ran out of order");
        clock = at;
    }
    let (multi, _) = s
        .submit::<_, Ran>("note_all", &vec![8u64, 9])
        .unwrap()
        .wait()
        .unwrap();
    assert!(multi.0.starts_with("waypoint-executor-"), "{}", multi.0);
    let (next, _) = s.call_pipelined::<_, Ran>("note", &10u64).unwrap();
    assert!(next.1 > multi.1);
    assert_eq!(noted(&db), vec![0, 1, 2, 3, 4, 6, 8, 9, 10]);
    assert_eq!(db.stats().persistence.command.calls_logged, 8);
    drop(s);
    db.close().unwrap();
    let db = open(&sim, &shared);
    assert_eq!(noted(&db), vec![0, 1, 2, 3, 4, 6, 8, 9, 10]);
}

/// A multi-partition call is queued on every executor and runs once
/// both have reached it: behind partition 0's held call, after the calls
/// partition 1 had before it, and before the ones partition 1 got after.
#[test]
fn a_multi_partition_call_runs_where_every_partition_reaches_it() {
    let sim = SimStorage::new(4);
    let shared = Arc::new(Shared::default());
    let db = open(&sim, &shared);
    let mut s = db.session();
    let held = s.submit::<_, Ran>("hold", &0u64).unwrap();
    eventually("the held call starts", || {
        shared.holding.load(Ordering::SeqCst) == 1
    });
    let before = s.submit::<_, Ran>("note", &1u64).unwrap();
    let multi = s.submit::<_, Ran>("note_all", &vec![2u64, 3]).unwrap();
    let after = s.submit::<_, Ran>("note", &5u64).unwrap();
    let (before, _) = before.wait().unwrap();
    assert_eq!(before.0, "waypoint-executor-1");
    std::thread::sleep(Duration::from_millis(20));
    assert!(!multi.has_run(), "ran before partition 0 reached it");
    assert!(
        !after.has_run(),
        "partition 1 went past the multi-partition call"
    );
    shared.open_gate();
    let clocks: Vec<u64> = [held, multi, after]
        .into_iter()
        .map(|c| c.wait().unwrap().0 .1)
        .collect();
    assert!(
        before.1 < clocks[1] && clocks[0] < clocks[1] && clocks[1] < clocks[2],
        "{clocks:?}"
    );
    assert_eq!(noted(&db), vec![0, 1, 2, 3, 5]);
    // Many at once from several sessions: every queue holds them in one
    // order, so no two executors wait at different ones.
    std::thread::scope(|scope| {
        for t in 0..4u64 {
            let db = &db;
            scope.spawn(move || {
                let mut s = db.session();
                let calls: Vec<PendingCall<Ran>> = (0..50u64)
                    .map(|i| {
                        let k = 100 + t * 1000 + i * 2;
                        if i % 3 == 0 {
                            s.submit("note_all", &vec![k, k + 1]).unwrap()
                        } else {
                            s.submit("note", &(k + i % 2)).unwrap()
                        }
                    })
                    .collect();
                for c in calls {
                    c.wait().unwrap();
                }
            });
        }
    });
    assert_eq!(noted(&db).len(), 5 + 4 * (17 * 2 + 33));
}

#[test]
fn a_failing_or_panicking_call_is_its_error_and_the_executor_goes_on() {
    let sim = SimStorage::new(2);
    let shared = Arc::new(Shared::default());
    shared.open_gate();
    let db = open(&sim, &shared);
    let mut s = db.session();
    let failed = s.submit::<_, ()>("fail", &2u64).unwrap();
    let panicked = s.submit::<_, ()>("boom", &4u64).unwrap();
    let after = s.submit::<_, Ran>("note", &6u64).unwrap();
    assert!(matches!(failed.wait(), Err(Error::KeyNotFound)));
    match panicked.wait() {
        Err(Error::Internal { what }) => assert!(what.contains("boom"), "{what}"),
        other => panic!("a panicking procedure gave {other:?}"),
    }
    assert_eq!(after.wait().unwrap().0 .0, "waypoint-executor-0");
    assert!(matches!(
        s.call::<_, ()>("fail", &1u64),
        Err(Error::KeyNotFound)
    ));
    // A procedure calling in again from its executor would wait for its
    // own queue: refused.
    assert!(shared.db.set(db.clone()).is_ok());
    match s.call::<_, ()>("reenter", &10u64) {
        Err(Error::Unsupported { what }) => assert!(what.contains("executor"), "{what}"),
        other => panic!("calling in from an executor gave {other:?}"),
    }
    // Refused before anything is queued: an unknown name, bad parameters,
    // and a result asked for as another type.
    assert!(matches!(
        s.submit::<_, ()>("missing", &1u64),
        Err(Error::UnknownProcedure { .. })
    ));
    assert!(matches!(
        s.submit::<_, ()>("note", &"not a key"),
        Err(Error::ProcedureParams { .. })
    ));
    assert!(matches!(
        s.submit::<_, String>("note", &8u64).unwrap().wait(),
        Err(Error::ProcedureOutput { .. })
    ));
    // Only the calls that committed are logged and present.
    assert_eq!(noted(&db), vec![6, 8]);
    assert_eq!(db.stats().persistence.command.calls_logged, 2);
    // The procedure holds the database (a cycle): closed by hand.
    drop(s);
    db.close().unwrap();
}

/// Closing with calls queued: each is answered once, `Closed` or its
/// result, and exactly the ones answered with a result are in the
/// database after the reopen; nothing can be submitted after the close.
#[test]
fn a_close_answers_every_queued_call_once() {
    let sim = SimStorage::new(3);
    let shared = Arc::new(Shared::default());
    let db = open(&sim, &shared);
    let mut s = db.session();
    let held = s.submit::<_, Ran>("hold", &0u64).unwrap();
    eventually("the held call starts", || {
        shared.holding.load(Ordering::SeqCst) == 1
    });
    let mut queued: Vec<(u64, PendingCall<Ran>)> = (1..=3)
        .map(|i| (i * 2, s.submit("note", &(i * 2)).unwrap()))
        .collect();
    // A multi-partition call that partition 1 reaches while 0 is held.
    queued.push((7, s.submit("note_all", &vec![7u64]).unwrap()));
    let closing = {
        let db = db.clone();
        std::thread::spawn(move || db.close())
    };
    std::thread::sleep(Duration::from_millis(20));
    shared.open_gate();
    closing.join().unwrap().unwrap();
    let mut kept = vec![];
    match held.wait() {
        Ok(_) => kept.push(0),
        Err(e) => assert!(matches!(e, Error::Closed), "{e}"),
    }
    for (key, call) in queued {
        match call.wait() {
            Ok(_) => kept.push(key),
            Err(e) => assert!(matches!(e, Error::Closed), "{e}"),
        }
    }
    assert!(matches!(
        s.submit::<_, Ran>("note", &2u64),
        Err(Error::Closed)
    ));
    drop((s, db));
    let db = open(&sim, &shared);
    assert_eq!(noted(&db), kept);
}

/// Opens the gate when dropped: a failing assertion while a call is held
/// still lets the executor go, so the test fails instead of hanging.
struct OpenOnDrop<'a>(&'a Shared);

impl Drop for OpenOnDrop<'_> {
    fn drop(&mut self) {
        self.0.open_gate();
    }
}

/// A caller handing calls to an executor faster than it runs them waits
/// once the queue holds `EXECUTOR_QUEUE_LIMIT`, and goes on when the
/// executor takes its queue; a close refuses a caller still waiting.
#[test]
fn a_full_executor_queue_holds_the_caller_back_until_it_has_room() {
    use waypoint::EXECUTOR_QUEUE_LIMIT;
    let limit = EXECUTOR_QUEUE_LIMIT as u64;
    let sim = SimStorage::new(4);
    let shared = Arc::new(Shared::default());
    let db = open(&sim, &shared);
    let _open = OpenOnDrop(&shared);
    let mut s = db.session();
    // Partition 0's executor is held, so nothing leaves its queue.
    let held = s.submit::<_, Ran>("hold", &0u64).unwrap();
    eventually("the held call starts", || {
        shared.holding.load(Ordering::SeqCst) == 1
    });
    let handed = Arc::new(AtomicU64::new(0));
    let caller = {
        let (db, handed) = (db.clone(), Arc::clone(&handed));
        std::thread::spawn(move || {
            let mut s = db.session();
            let mut calls = Vec::new();
            for i in 1..=limit + 1 {
                calls.push(s.submit::<_, Ran>("note", &(i * 2)).unwrap());
                handed.fetch_add(1, Ordering::SeqCst);
            }
            calls
        })
    };
    eventually("the queue fills", || handed.load(Ordering::SeqCst) >= limit);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        handed.load(Ordering::SeqCst),
        limit,
        "the call beyond the limit waits for room"
    );
    shared.open_gate();
    eventually("the executor makes room", || {
        handed.load(Ordering::SeqCst) == limit + 1
    });
    held.wait().unwrap();
    for call in caller.join().unwrap() {
        call.wait().unwrap();
    }
    assert_eq!(noted(&db).len() as u64, limit + 2);

    // Held again and full: a close refuses the caller waiting for room,
    // and every call still queued.
    *shared.open.lock().unwrap() = false;
    shared.holding.store(0, Ordering::SeqCst);
    let held = s.submit::<_, Ran>("hold", &10_000u64).unwrap();
    eventually("the held call starts", || {
        shared.holding.load(Ordering::SeqCst) == 1
    });
    let queued: Vec<PendingCall<Ran>> = (1..=limit)
        .map(|i| s.submit("note", &(20_000 + i * 2)).unwrap())
        .collect();
    let waiting = {
        let db = db.clone();
        std::thread::spawn(move || {
            db.session()
                .submit::<_, Ran>("note", &40_000u64)
                .map(|_| ())
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    assert!(!waiting.is_finished(), "the caller waits for room");
    let closing = {
        let db = db.clone();
        std::thread::spawn(move || db.close())
    };
    // The close stops the executors before it waits for the held call.
    eventually("the close refuses the waiting caller", || {
        waiting.is_finished()
    });
    assert!(matches!(waiting.join().unwrap(), Err(Error::Closed)));
    shared.open_gate();
    closing.join().unwrap().unwrap();
    if let Err(e) = held.wait() {
        assert!(matches!(e, Error::Closed), "{e}");
    }
    for call in queued {
        assert!(matches!(call.wait(), Err(Error::Closed)));
    }
}
