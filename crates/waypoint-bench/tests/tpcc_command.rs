//! TPC-C as stored procedures under the `command` scheme (seed 001): the
//! calls replayed from the log after a power loss give the same rows as
//! the original run, table by table, and TPC-C's conditions hold; a
//! procedure that draws a value inside its body (the test hook) is
//! caught by the same comparison; multi-partition calls (remote order
//! lines and payments) replay too. In a test binary of its own: the hook
//! is process-wide.

use std::sync::Arc;
use waypoint::io::{CrashPolicy, SimStorage};
use waypoint::{CommandOptions, Database, Options, Persistence};
use waypoint_bench::tpcc::procedures::{self, Drawn, TpccCall};
use waypoint_bench::tpcc::{self, Tpcc, TpccConfig};
use waypoint_bench::workload::{is_abort, Workload};

const DIR: &str = "/tpcc";

fn options(sim: &SimStorage, digests: bool) -> Options {
    Options {
        page_size: Some(4096),
        // Memory-resident: the whole tiny database and its changes.
        buffer_pool_bytes: 64 << 20,
        storage: Some(Arc::new(sim.clone())),
        persistence: Persistence::Command(CommandOptions {
            partitions: 2,
            digests,
            ..Default::default()
        }),
        procedures: waypoint_bench::procedures(),
        ..Options::default()
    }
}

/// 2 warehouses, 1,000 items, 30 customers per district; a fifth of the
/// New-Orders and Payments remote (multi-partition calls).
fn workload(seed: u64) -> Tpcc {
    let config = TpccConfig {
        warehouses: 2,
        scale_down: 100,
    };
    Tpcc::new(config, seed).multi_partition(20)
}

type Digest = Vec<(String, Vec<(Vec<u8>, Vec<u8>)>)>;

/// Every table's rows, by table name.
fn digest(db: &Database) -> Digest {
    let mut names = db.table_names();
    names.sort();
    let mut s = db.session();
    names
        .into_iter()
        .map(|name| {
            let t = db.table(&name).unwrap();
            let mut tx = s.begin().unwrap();
            let rows = tx.scan(&t, .., usize::MAX).unwrap();
            (name, rows)
        })
        .collect()
}

/// Two terminals make `calls` calls each, waiting for each; returns the
/// New-Order and Payment calls committed (each writes, so each is logged;
/// a call that writes nothing is not).
fn run_calls(db: &Database, w: &Tpcc, calls: usize, seed: u64) -> u64 {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|i| {
                s.spawn(move || {
                    let mut session = db.session();
                    let mut gen = w.worker(i, seed + i as u64);
                    let mut committed = 0;
                    for _ in 0..calls {
                        let (ty, called) = gen
                            .call(&mut session, true, None)
                            .expect("TPC-C calls its procedures under command");
                        match called.and_then(|p| p.wait().map(|_| ())) {
                            Ok(()) => {
                                committed += u64::from(ty == tpcc::NEW_ORDER || ty == tpcc::PAYMENT)
                            }
                            Err(e) if is_abort(&e) => {}
                            Err(e) => panic!("{e}"),
                        }
                    }
                    committed
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    })
}

/// Load, close cleanly, run `calls` acknowledged calls per terminal, lose
/// power; returns the rows before the crash and after the replay (with
/// `digests`, replay checks each call's write set as it goes: the error
/// of the open if it went another way).
fn run_crash_replay(seed: u64, calls: usize, digests: bool) -> (Digest, waypoint::Result<Digest>) {
    let sim = SimStorage::new(seed);
    let db = Database::open(DIR, options(&sim, digests)).unwrap();
    workload(seed).setup(&db, 2).unwrap();
    db.close().unwrap();

    let db = Database::open(DIR, options(&sim, digests)).unwrap();
    let mut w = workload(seed);
    w.setup(&db, 2).unwrap();
    let committed = run_calls(&db, &w, calls, seed);
    assert!(committed > 0);
    let before = digest(&db);
    drop(w);
    std::mem::forget(db);
    // Every call was acknowledged: whatever the crash keeps of unsynced
    // writes, the log holds them all.
    sim.crash(CrashPolicy::Random {
        keep: 0.5,
        tear: true,
    });

    let db = match Database::open(DIR, options(&sim, digests)) {
        Ok(db) => db,
        Err(e) => return (before, Err(e)),
    };
    let stats = db.stats().persistence.command;
    assert!(
        stats.replayed_calls >= committed,
        "seed {seed}: {} calls replayed, {committed} writing calls committed",
        stats.replayed_calls
    );
    // Only the multi-partition calls (a fifth of the New-Orders and
    // Payments) run alone; the partitions replay the rest side by side.
    assert!(
        stats.replay_threads == 2 && stats.replay_barriers * 3 < stats.replayed_calls,
        "seed {seed}: {} barriers among {} calls replayed on {} threads",
        stats.replay_barriers,
        stats.replayed_calls,
        stats.replay_threads
    );
    let after = digest(&db);
    tpcc::verify(&db).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    db.close().unwrap();
    (before, Ok(after))
}

#[test]
fn replayed_calls_give_the_rows_of_the_original_run_and_a_body_that_draws_is_caught() {
    for seed in 0..2 {
        let (before, after) = run_crash_replay(seed, 150, true);
        let after = after.expect("recovery by replay, every write set as logged");
        assert_eq!(before.len(), after.len());
        for ((name, rows), (_, replayed)) in before.iter().zip(&after) {
            assert!(
                rows == replayed,
                "seed {seed}: table {name} differs after replay"
            );
        }
    }
    // The broken variant: Payment takes H_DATE from inside its body, in
    // the run and again in the replay. With write-set digests the replay
    // stops at the first Payment, naming it; without, the rows differ.
    procedures::set_draw_inside_for_tests(true);
    let (_, caught) = run_crash_replay(7, 150, true);
    let (before, after) = run_crash_replay(7, 150, false);
    procedures::set_draw_inside_for_tests(false);
    match caught {
        Err(waypoint::Error::Corruption { detail, .. }) => assert!(
            detail.contains("tpcc_payment") && detail.contains("not deterministic"),
            "{detail}"
        ),
        Err(e) => panic!("expected the replay to stop at a Payment, got {e}"),
        Ok(_) => panic!("a Payment that draws inside its body replayed as logged"),
    }
    let after = after.expect("without digests the replay runs to the end");
    let differs: Vec<&str> = before
        .iter()
        .zip(&after)
        .filter(|(a, b)| a != b)
        .map(|((name, _), _)| name.as_str())
        .collect();
    assert_eq!(
        differs,
        ["tpcc_history"],
        "the replay must differ where the body drew"
    );
}

/// The call of `args` encodes as `Session::call` encodes it, and
/// decodes back as the registry decodes it: exactly, nothing left over.
fn round_trip<A>(w: u16, args: A, ack: Option<waypoint_bench::workload::Ack>)
where
    A: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let call = TpccCall { w, args, ack };
    let bytes = waypoint::encode_params("tpcc", &call).unwrap();
    let (back, rest) = postcard::take_from_bytes::<TpccCall<A>>(&bytes).unwrap();
    assert!(rest.is_empty());
    assert_eq!(back, call);
}

/// What a call carries round-trips through the encoding the registry
/// decodes (postcard), for every transaction type a terminal draws; a
/// remote one is a multi-partition call.
#[test]
fn call_parameters_round_trip_and_remote_calls_are_multi_partition() {
    let sim = SimStorage::new(3);
    let db = Database::open(DIR, options(&sim, true)).unwrap();
    let mut w = workload(3);
    w.setup(&db, 1).unwrap();
    let mut terminal = w.terminal(0, 11).unwrap();
    let (mut types, mut remote) = ([0u32; 5], 0);
    for _ in 0..2000 {
        let drawn = terminal.draw();
        types[drawn.ty()] += 1;
        remote += u32::from(drawn.is_remote(terminal.home()));
        let ack = Some(("acks".to_string(), vec![1, 2, 3]));
        match drawn {
            Drawn::NewOrder(a) => round_trip(terminal.home(), a, ack),
            Drawn::Payment(a) => round_trip(terminal.home(), a, ack),
            Drawn::OrderStatus(a) => round_trip(terminal.home(), a, ack),
            Drawn::Delivery(a) => round_trip(terminal.home(), a, ack),
            Drawn::StockLevel(a) => round_trip(terminal.home(), a, ack),
        }
    }
    assert!(types.iter().all(|&n| n > 0), "{types:?}");
    // 20% of the 88% that are New-Orders or Payments.
    let pct = f64::from(remote) / 20.0;
    assert!((13.0..23.0).contains(&pct), "{pct}% remote");
    db.close().unwrap();
}
