//! `Transaction::get_for_update`: a read that holds the key's commit lock
//! until the transaction ends.
//!
//! What it promises, each tested here: another transaction's commit of the
//! key waits for the holder; a second `get_for_update` of the key waits and
//! then reads the holder's committed value, so two read-modify-writes take
//! turns instead of one failing validation; an abort releases the locks; in
//! a deadlock of two holders the younger gives way at once with `Conflict`
//! and the older commits; a retry keeps the age of the attempt that gave
//! way; and transfers that lock in random order keep a
//! bank's total under concurrent readers (serializable, no lost update),
//! with no transfer failing a thousand times in a row (deadlocked
//! transactions must not retry into the same deadlock forever).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use waypoint::io::SimStorage;
use waypoint::{Database, Error, Options, Table};

fn open(lock_wait: Duration) -> (Database, Table) {
    let db = Database::open(
        "/db",
        Options {
            storage: Some(Arc::new(SimStorage::new(11))),
            buffer_pool_bytes: 16 << 20,
            lock_wait,
            ..Options::default()
        },
    )
    .unwrap();
    let t = db.create_table("t").unwrap();
    (db, t)
}

fn int(v: Option<Vec<u8>>) -> u64 {
    u64::from_le_bytes(v.expect("row").try_into().expect("8 bytes"))
}

fn set(db: &Database, t: &Table, key: &[u8], value: u64) {
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    tx.upsert(t, key, &value.to_le_bytes()).unwrap();
    tx.commit().unwrap();
}

fn read(db: &Database, t: &Table, key: &[u8]) -> u64 {
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    let v = int(tx.get(t, key).unwrap());
    tx.commit().unwrap();
    v
}

/// How long the tests let a waiter wait before checking it still waits.
const WHILE: Duration = Duration::from_millis(150);

#[test]
fn another_commit_of_a_locked_key_waits_for_the_holder() {
    // Long enough that the commit waits through the holder's whole turn.
    let (db, t) = open(Duration::from_secs(10));
    set(&db, &t, b"k", 0);
    let mut holder = db.session();
    let mut tx = holder.begin().unwrap();
    assert_eq!(int(tx.get_for_update(&t, b"k").unwrap()), 0);
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            // A blind write reads nothing, so it commits once it has the lock.
            let mut s = db.session();
            let mut w = s.begin().unwrap();
            w.upsert(&t, b"k", &7u64.to_le_bytes()).unwrap();
            w.commit().unwrap();
            done.store(true, Ordering::SeqCst);
        });
        std::thread::sleep(WHILE);
        assert!(
            !done.load(Ordering::SeqCst),
            "the writer committed past a held get_for_update lock"
        );
        tx.update(&t, b"k", &1u64.to_le_bytes()).unwrap();
        tx.commit().unwrap();
        writer.join().unwrap();
    });
    assert_eq!(read(&db, &t, b"k"), 7, "the writer's commit came second");
}

#[test]
fn two_read_modify_writes_of_one_key_take_turns() {
    // Long enough that the second waits through the holder's whole turn.
    let (db, t) = open(Duration::from_secs(10));
    set(&db, &t, b"k", 0);
    let mut holder = db.session();
    let mut tx = holder.begin().unwrap();
    let seen = int(tx.get_for_update(&t, b"k").unwrap());
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let second = scope.spawn(|| {
            let mut s = db.session();
            let mut w = s.begin().unwrap();
            let v = int(w.get_for_update(&t, b"k").unwrap());
            w.update(&t, b"k", &(v + 1).to_le_bytes()).unwrap();
            w.commit()
                .expect("no conflict: it read after the holder's commit");
            done.store(true, Ordering::SeqCst);
            v
        });
        std::thread::sleep(WHILE);
        assert!(!done.load(Ordering::SeqCst), "the second did not wait");
        tx.update(&t, b"k", &(seen + 1).to_le_bytes()).unwrap();
        tx.commit().expect("the holder commits");
        assert_eq!(
            second.join().unwrap(),
            1,
            "the second read the holder's value"
        );
    });
    assert_eq!(read(&db, &t, b"k"), 2, "both increments counted");
}

#[test]
fn an_abort_releases_the_locks_and_a_held_lock_refuses_a_zero_wait() {
    let (db, t) = open(Duration::ZERO);
    set(&db, &t, b"k", 0);
    let mut a = db.session();
    let mut b = db.session();
    let mut held = a.begin().unwrap();
    held.get_for_update(&t, b"k").unwrap();
    let mut refused = b.begin().unwrap();
    assert!(matches!(
        refused.get_for_update(&t, b"k"),
        Err(Error::Conflict)
    ));
    drop(refused);
    drop(held);
    let mut after = b.begin().unwrap();
    assert_eq!(int(after.get_for_update(&t, b"k").unwrap()), 0);
    after.update(&t, b"k", &5u64.to_le_bytes()).unwrap();
    after.commit().unwrap();
    // A read-only transaction's locks go with its commit too.
    let mut ro = a.begin().unwrap();
    ro.get_for_update(&t, b"k").unwrap();
    ro.commit().unwrap();
    let mut next = b.begin().unwrap();
    assert_eq!(int(next.get_for_update(&t, b"k").unwrap()), 5);
    next.commit().unwrap();
}

#[test]
fn in_a_deadlock_of_two_holders_the_younger_gives_way_at_once() {
    // Long: the deadlock must end by the wound, not by the limit.
    let limit = Duration::from_secs(4);
    let (db, t) = open(limit);
    set(&db, &t, b"x", 0);
    set(&db, &t, b"y", 0);
    let meet = Barrier::new(2);
    let started = Instant::now();
    let outcomes: Vec<Result<(), Error>> = std::thread::scope(|scope| {
        let run = |first: &'static [u8], second: &'static [u8]| {
            let (db, t, meet) = (&db, &t, &meet);
            scope.spawn(move || {
                let mut s = db.session();
                let mut tx = s.begin().unwrap();
                tx.get_for_update(t, first).unwrap();
                meet.wait();
                tx.get_for_update(t, second)?;
                tx.update(t, first, &1u64.to_le_bytes())?;
                tx.update(t, second, &1u64.to_le_bytes())?;
                tx.commit().map(|_| ())
            })
        };
        let one = run(b"x", b"y");
        let two = run(b"y", b"x");
        vec![one.join().unwrap(), two.join().unwrap()]
    });
    let gave_way = outcomes
        .iter()
        .filter(|o| matches!(o, Err(Error::Conflict)))
        .count();
    let committed = outcomes.iter().filter(|o| o.is_ok()).count();
    assert_eq!((gave_way, committed), (1, 1), "{outcomes:?}");
    assert!(
        started.elapsed() < limit,
        "the deadlock lasted {:?}",
        started.elapsed()
    );
    assert_eq!(
        read(&db, &t, b"x") + read(&db, &t, b"y"),
        2,
        "the survivor's writes"
    );
}

/// A meeting point of two threads that gives up, with a panic, after
/// 20 s: a side that panicked before it never arrives, and a `Barrier`
/// would then hang the test instead of failing it.
struct Step(std::sync::Mutex<u32>, std::sync::Condvar);

impl Step {
    fn new() -> Self {
        Step(std::sync::Mutex::new(0), std::sync::Condvar::new())
    }

    /// Meet the other thread at meeting `n` (1, 2, ...; both call each).
    fn meet(&self, n: u32) {
        let mut arrived = self.0.lock().unwrap();
        *arrived += 1;
        self.1.notify_all();
        let (arrived, timeout) = self
            .1
            .wait_timeout_while(arrived, Duration::from_secs(20), |a| *a < 2 * n)
            .unwrap();
        assert!(
            !timeout.timed_out(),
            "meeting {n}: the other thread did not arrive ({arrived} arrivals)"
        );
    }
}

/// A transaction that gave way keeps its age for its retry (wound-wait's
/// seniority): B, wounded by the older A, retries against C, which began
/// after B's first attempt, and wins. With a new age the retry would be
/// younger than C, and C would wound it instead.
#[test]
fn a_retry_keeps_the_age_of_the_attempt_that_gave_way() {
    // Long: every wait must end by a wound, not by the limit.
    let (db, t) = open(Duration::from_secs(4));
    for k in [b"k1", b"k2", b"k3", b"k4"] {
        set(&db, &t, k, 0);
    }
    let step = Step::new();
    let (b_first, b_retry, c_result) = std::thread::scope(|scope| {
        let b = scope.spawn(|| {
            let mut sb = db.session();
            let mut tb = sb.begin().unwrap();
            step.meet(1); // A holds k1
            tb.get_for_update(&t, b"k2").unwrap();
            step.meet(2); // B holds k2
            let first = tb.get_for_update(&t, b"k1").map(|_| ());
            drop(tb);
            step.meet(3); // A committed, C holds k3
            let mut retry = sb.begin().unwrap();
            retry.get_for_update(&t, b"k4").unwrap();
            step.meet(4); // B's retry holds k4
            let retried = retry.get_for_update(&t, b"k3").and_then(|_| {
                retry.update(&t, b"k3", &3u64.to_le_bytes())?;
                retry.update(&t, b"k4", &4u64.to_le_bytes())?;
                retry.commit().map(|_| ())
            });
            (first, retried)
        });
        let mut sa = db.session();
        let mut ta = sa.begin().unwrap();
        ta.get_for_update(&t, b"k1").unwrap();
        step.meet(1);
        step.meet(2);
        // A is older than B: it wounds B and waits for k2.
        ta.get_for_update(&t, b"k2").unwrap();
        ta.update(&t, b"k1", &1u64.to_le_bytes()).unwrap();
        ta.commit().unwrap();
        let mut sc = db.session();
        let mut tc = sc.begin().unwrap();
        tc.get_for_update(&t, b"k3").unwrap();
        step.meet(3);
        step.meet(4);
        let c = tc.get_for_update(&t, b"k4").map(|_| ());
        drop(tc);
        let (first, retried) = b.join().unwrap();
        (first, retried, c)
    });
    assert!(
        matches!(b_first, Err(Error::Conflict)),
        "B, younger than A, gives way: {b_first:?}"
    );
    assert!(b_retry.is_ok(), "B's retry: {b_retry:?}");
    assert!(
        matches!(c_result, Err(Error::Conflict)),
        "C, younger than B's retry, gives way: {c_result:?}"
    );
    assert_eq!((read(&db, &t, b"k3"), read(&db, &t, b"k4")), (3, 4));
    assert_eq!(read(&db, &t, b"k1"), 1);
}

#[test]
fn a_held_lock_a_waiting_commit_and_a_new_table_do_not_deadlock() {
    // The cycle: the plain commit of k waits (inside its commit, holding
    // the quiesce lock shared) for the holder's lock on k; the new table
    // waits for that commit to leave; the holder's commit waits for the
    // new table. The plain commit's wait for a lock taken early must end.
    let limit = Duration::from_secs(2);
    let (db, t) = open(limit);
    set(&db, &t, b"k", 0);
    // Set also when an assertion below panics, so the watchdog does not
    // report that as a deadlock.
    struct Finished(Arc<AtomicBool>);
    impl Drop for Finished {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let finished = Arc::new(AtomicBool::new(false));
    let _finished = Finished(Arc::clone(&finished));
    let watchdog = {
        let finished = Arc::clone(&finished);
        std::thread::spawn(move || {
            let start = Instant::now();
            while !finished.load(Ordering::SeqCst) {
                if start.elapsed() > Duration::from_secs(60) {
                    eprintln!("deadlocked: the commits and the new table still wait after 60 s");
                    std::process::exit(1);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let mut holder = db.session();
    let mut tx = holder.begin().unwrap();
    tx.get_for_update(&t, b"k").unwrap();
    let (plain, ddl) = std::thread::scope(|scope| {
        let plain = scope.spawn(|| {
            let mut s = db.session();
            let mut w = s.begin().unwrap();
            w.upsert(&t, b"k", &7u64.to_le_bytes()).unwrap();
            w.commit().map(|_| ())
        });
        std::thread::sleep(WHILE);
        let ddl = scope.spawn(|| db.create_table("u").map(|_| ()));
        std::thread::sleep(WHILE);
        tx.update(&t, b"k", &1u64.to_le_bytes()).unwrap();
        tx.commit()
            .expect("the holder commits once the others moved");
        (plain.join().unwrap(), ddl.join().unwrap())
    });
    finished.store(true, Ordering::SeqCst);
    watchdog.join().unwrap();
    ddl.expect("the table was created");
    // Where the threads ran in the intended order, the plain commit gave
    // way; a thread scheduled late (a loaded machine) forms no cycle, and
    // then the plain commit may come last and succeed.
    match plain {
        Err(Error::Conflict) => assert_eq!(read(&db, &t, b"k"), 1),
        Ok(()) => assert!([1, 7].contains(&read(&db, &t, b"k"))),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn transfers_that_lock_in_any_order_keep_the_total() {
    const ACCOUNTS: u64 = 12;
    const INITIAL: u64 = 1_000;
    let (db, t) = open(Options::DEFAULT_LOCK_WAIT);
    for a in 0..ACCOUNTS {
        set(&db, &t, &a.to_be_bytes(), INITIAL);
    }
    // Writers count themselves out also when they panic, so the reader
    // stops and the panic is reported rather than hanging the scope.
    struct Done<'a>(&'a AtomicU64);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let done = AtomicU64::new(0);
    let (transfers, audits) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|scope| {
        let mut writers = Vec::new();
        for seed in 0..4u64 {
            let (db, t, transfers, done) = (&db, &t, &transfers, &done);
            writers.push(scope.spawn(move || {
                let _done = Done(done);
                let mut s = db.session();
                let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                for _ in 0..400 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let (from, to) = (x % ACCOUNTS, (x >> 8) % ACCOUNTS);
                    if from == to {
                        continue;
                    }
                    s.run(1_000, |tx| {
                        let a = int(tx.get_for_update(t, &from.to_be_bytes())?);
                        let b = int(tx.get_for_update(t, &to.to_be_bytes())?);
                        let amount = (x >> 16) % 50;
                        if a >= amount {
                            tx.update(t, &from.to_be_bytes(), &(a - amount).to_le_bytes())?;
                            tx.update(t, &to.to_be_bytes(), &(b + amount).to_le_bytes())?;
                        }
                        Ok(())
                    })
                    .unwrap_or_else(|e| panic!("transfer {from} -> {to}: {e}"));
                    transfers.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        // Plain readers beside them: a committed audit sees the total.
        scope.spawn(|| {
            let mut s = db.session();
            // Until the writers are done and an audit has committed (the
            // writers' locks make plain audits fail validation while held).
            while done.load(Ordering::SeqCst) < 4 || audits.load(Ordering::Relaxed) == 0 {
                let mut tx = s.begin().unwrap();
                let mut sum = 0;
                for a in 0..ACCOUNTS {
                    sum += int(tx.get(&t, &a.to_be_bytes()).unwrap());
                }
                match tx.commit() {
                    Ok(_) => {
                        assert_eq!(sum, ACCOUNTS * INITIAL, "a committed audit");
                        audits.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(Error::Conflict) => {}
                    Err(e) => panic!("{e}"),
                }
            }
        });
        for w in writers {
            w.join().unwrap();
        }
    });
    let total: u64 = (0..ACCOUNTS).map(|a| read(&db, &t, &a.to_be_bytes())).sum();
    assert_eq!(total, ACCOUNTS * INITIAL);
    assert!(transfers.load(Ordering::Relaxed) > 1_000);
    assert!(audits.load(Ordering::Relaxed) > 0, "some audit committed");
}

#[test]
fn a_lock_wait_beyond_ten_seconds_is_refused() {
    let refused = Database::open(
        "/db",
        Options {
            storage: Some(Arc::new(SimStorage::new(1))),
            lock_wait: Duration::from_secs(11),
            ..Options::default()
        },
    );
    assert!(matches!(refused, Err(Error::InvalidOptions(m)) if m.contains("lock_wait")));
}
