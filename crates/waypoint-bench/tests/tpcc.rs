//! TPC-C on tiny scales: the consistency conditions after a driver run,
//! after a clean reopen, after a simulated power loss in the middle of a
//! two-worker run, and their failure on a deliberately corrupted row; the
//! mix and the intended rollbacks as the driver counts them; reuse of a
//! loaded database.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::sync::Arc;
use waypoint::io::{CrashPolicy, Fault, FaultKind, SimStorage};
use waypoint::{Database, Options, PerWorkerOptions, Persistence};
use waypoint_bench::driver::{self, DriverConfig};
use waypoint_bench::tpcc::schema::{Customer, Order, OrderLine};
use waypoint_bench::tpcc::{self, Tpcc, TpccConfig};
use waypoint_bench::workload::{is_abort, Workload};
use waypoint_bench::BenchError;

/// 1,000 items, 30 customers and orders per district.
fn tiny(warehouses: u32) -> TpccConfig {
    TpccConfig {
        warehouses,
        scale_down: 100,
    }
}

fn config(dir: &Path) -> DriverConfig {
    DriverConfig {
        dir: Some(dir.join("db")),
        workers: 2,
        duration_secs: 20.0,
        warmup_secs: 0,
        in_flight: 8,
        buffer_bytes: 64 << 20,
        ..DriverConfig::default()
    }
}

fn run(dir: &Path, workload: TpccConfig, txns: u64) -> BenchResult {
    let c = DriverConfig {
        max_txns: Some(txns),
        ..config(dir)
    };
    driver::run(&c, &mut Tpcc::new(workload, 1), &|_| {})
}

type BenchResult = Result<driver::RunOutput, BenchError>;

#[test]
fn a_two_worker_run_keeps_the_conditions_also_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), tiny(2), 3000).expect("TPC-C run");
    let s = &out.summary;
    assert!(s.loaded_now && s.committed >= 3000, "{}", s.committed);
    let names: Vec<&str> = s.types.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, tpcc::TXN_TYPES);
    for t in &s.types {
        assert!(t.committed > 0, "no {} committed", t.name);
    }
    // The mix, over committed transactions (aborts are not retried, so
    // allow some slack).
    let share = |i: usize| 100.0 * s.types[i].committed as f64 / s.committed as f64;
    assert!(
        (40.0..50.0).contains(&share(tpcc::NEW_ORDER)),
        "{}",
        share(0)
    );
    assert!((38.0..48.0).contains(&share(tpcc::PAYMENT)), "{}", share(1));
    for ty in [tpcc::ORDER_STATUS, tpcc::DELIVERY, tpcc::STOCK_LEVEL] {
        assert!((2.0..6.5).contains(&share(ty)), "type {ty}: {}", share(ty));
    }
    // 1% of new-orders roll back on purpose: aborts, not a failed run.
    assert!(s.types[tpcc::NEW_ORDER].aborts > 0);
    let checked = s.verify.as_ref().expect("the driver verified");
    assert_eq!(
        checked["conditions"],
        serde_json::json!([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12])
    );
    assert_eq!(checked["warehouses"], 2);
    assert_eq!(checked["districts"], 20);
    // New orders were added (600 loaded) and some delivered.
    assert!(checked["orders"].as_u64().unwrap() > 600 + 1000);

    let db = Database::open(dir.path().join("db"), Options::default()).unwrap();
    let after = tpcc::verify(&db).expect("conditions after reopen");
    assert_eq!(serde_json::to_value(&after).unwrap(), *checked);
    db.close().unwrap();
}

#[test]
fn a_loaded_database_is_reused_at_the_same_scale_and_refused_at_another() {
    let dir = tempfile::tempdir().unwrap();
    let first = run(dir.path(), tiny(1), 300).unwrap().summary;
    assert!(first.loaded_now);
    assert_eq!(
        first.records_loaded,
        tpcc::load::initial_rows(&tiny(1)),
        "the load's row count"
    );
    let second = run(dir.path(), tiny(1), 300).unwrap().summary;
    assert!(!second.loaded_now);
    let orders = |s: &waypoint_bench::summary::Summary| {
        s.verify.as_ref().unwrap()["orders"].as_u64().unwrap()
    };
    assert!(orders(&second) > orders(&first));
    // The recorded parameters rebuild the configuration.
    let db = Database::open(dir.path().join("db"), Options::default()).unwrap();
    let params = waypoint_bench::load::loaded_params(&db, "tpcc")
        .unwrap()
        .expect("recorded");
    assert_eq!(
        serde_json::from_value::<TpccConfig>(params).unwrap(),
        tiny(1)
    );
    db.close().unwrap();
    let e = run(dir.path(), tiny(2), 10).err().expect("refused");
    assert!(matches!(e, BenchError::Config(_)), "{e}");
    assert!(e.to_string().contains("--warehouses"), "{e}");
}

#[test]
fn the_initial_population_has_the_specified_shape() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Options::default()).unwrap();
    let c = TpccConfig {
        warehouses: 2,
        scale_down: 10,
    };
    let mut w = Tpcc::new(c, 1);
    w.setup(&db, 2).unwrap();
    let check = tpcc::verify(&db).unwrap();
    // 300 orders per district, the last 90 undelivered.
    assert_eq!((check.warehouses, check.districts), (2, 20));
    assert_eq!(check.orders, 20 * 300);
    assert_eq!(check.new_orders, 20 * 90);
    // W_YTD is the sum of the loaded payments (10.00 per customer), so
    // conditions 8 and 9 hold at this scale too: 300,000.00 per warehouse
    // at full scale.
    assert_eq!(check.ytd_cents, 2 * 10 * 300 * 1000);
    assert_eq!(check.customers, 20 * 300);
    assert_eq!(check.history, 20 * 300);
    let rows: usize = db
        .check_integrity()
        .unwrap()
        .iter()
        .filter(|(name, _)| name.starts_with("tpcc_") && !name.contains("_by_"))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(rows as u64, tpcc::load::initial_rows(&c));
    let counts: std::collections::HashMap<String, usize> =
        db.check_integrity().unwrap().into_iter().collect();
    assert_eq!(counts["tpcc_item"], 10_000);
    assert_eq!(counts["tpcc_stock"], 20_000);
    assert_eq!(counts["tpcc_customer"], 20 * 300);
    assert_eq!(counts["tpcc_history"], 20 * 300);
    assert_eq!(counts["tpcc_customer_by_name"], 20 * 300);
    assert_eq!(counts["tpcc_order_by_customer"], 20 * 300);
    db.close().unwrap();
}

fn corrupt(db: &Database, table: &str, key: &[u8], change: impl FnOnce(&mut Option<Vec<u8>>)) {
    let t = db.table(table).unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    let mut v = tx.get(&t, key).unwrap();
    change(&mut v);
    match v {
        Some(v) => tx.upsert(&t, key, &v).unwrap(),
        None => assert!(tx.delete(&t, key).unwrap()),
    }
    tx.commit().unwrap();
}

fn assert_fails(db: &Database, condition: u32, at: &str) {
    match tpcc::verify(db) {
        Err(BenchError::Verify(m)) => {
            assert!(
                m.contains(&format!("condition {condition}:")) && m.contains(at),
                "{m}"
            );
        }
        other => panic!("expected condition {condition} to fail, got {other:?}"),
    }
}

#[test]
fn verify_detects_a_violation_of_each_condition() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), Options::default()).unwrap();
    let mut w = Tpcc::new(tiny(2), 1);
    w.setup(&db, 1).unwrap();
    w.verify(&db).expect("a fresh load is consistent");

    // 1: one cent more in D_YTD of warehouse 2, district 3.
    let district = [0, 2, 3];
    corrupt(&db, "tpcc_district", &district, |v| {
        let v = v.as_mut().unwrap();
        let at = v.len() - 12; // D_YTD: i64 before D_NEXT_O_ID (u32)
        let ytd = i64::from_le_bytes(v[at..at + 8].try_into().unwrap());
        v[at..at + 8].copy_from_slice(&(ytd + 1).to_le_bytes());
    });
    assert_fails(&db, 1, "warehouse 2");
    corrupt(&db, "tpcc_district", &district, |v| {
        let v = v.as_mut().unwrap();
        let at = v.len() - 12;
        let ytd = i64::from_le_bytes(v[at..at + 8].try_into().unwrap());
        v[at..at + 8].copy_from_slice(&(ytd - 1).to_le_bytes());
    });
    w.verify(&db).expect("repaired");

    // 2: D_NEXT_O_ID one ahead of the orders.
    corrupt(&db, "tpcc_district", &district, |v| {
        let v = v.as_mut().unwrap();
        let at = v.len() - 4;
        let next = u32::from_le_bytes(v[at..].try_into().unwrap());
        v[at..].copy_from_slice(&(next + 1).to_le_bytes());
    });
    assert_fails(&db, 2, "warehouse 2 district 3");
    corrupt(&db, "tpcc_district", &district, |v| {
        let v = v.as_mut().unwrap();
        let at = v.len() - 4;
        let next = u32::from_le_bytes(v[at..].try_into().unwrap());
        v[at..].copy_from_slice(&(next - 1).to_le_bytes());
    });

    // 3: a gap among the new-orders (orders 22..=30 are undelivered).
    let no = |o: u32| [&[0u8, 1, 7][..], &o.to_be_bytes()].concat();
    corrupt(&db, "tpcc_new_order", &no(25), |v| *v = None);
    assert_fails(&db, 3, "warehouse 1 district 7");
    corrupt(&db, "tpcc_new_order", &no(25), |v| *v = Some(Vec::new()));

    // 4: an order line missing.
    let line = [&no(4)[..], &[1]].concat();
    let mut removed = None;
    corrupt(&db, "tpcc_order_line", &line, |v| removed = v.take());
    assert_fails(&db, 4, "warehouse 1 district 7");

    // 6: that line moved to order 5 of the district (the district's count
    // is right again, the orders' are not).
    let ol_cnt = |o: u32| {
        let mut s = db.session();
        let mut tx = s.begin().unwrap();
        let v = tx.get(&db.table("tpcc_order").unwrap(), &no(o)).unwrap();
        Order::decode(&v.unwrap()).unwrap().ol_cnt
    };
    let moved = [&no(5)[..], &[ol_cnt(5) + 1]].concat();
    corrupt(&db, "tpcc_order_line", &moved, |v| *v = removed.clone());
    assert_fails(&db, 6, "order 4 of warehouse 1 district 7");
    corrupt(&db, "tpcc_order_line", &moved, |v| *v = None);
    corrupt(&db, "tpcc_order_line", &line, |v| *v = removed);
    w.verify(&db).expect("repaired");

    // 5: the oldest undelivered order (22) without its new-order row.
    corrupt(&db, "tpcc_new_order", &no(22), |v| *v = None);
    assert_fails(&db, 5, "order 22 of warehouse 1 district 7");
    corrupt(&db, "tpcc_new_order", &no(22), |v| *v = Some(Vec::new()));

    // 7: a line of an undelivered order with a delivery date.
    let line = [&no(25)[..], &[2]].concat();
    let delivery_d = |d: u64| {
        move |v: &mut Option<Vec<u8>>| {
            let mut l = OrderLine::decode(v.as_ref().unwrap()).unwrap();
            l.delivery_d = d;
            *v = Some(l.encode());
        }
    };
    corrupt(&db, "tpcc_order_line", &line, delivery_d(1));
    assert_fails(&db, 7, "order 25 of warehouse 1 district 7");
    corrupt(&db, "tpcc_order_line", &line, delivery_d(0));

    // 8: one cent more in W_YTD and in a D_YTD of warehouse 1 (condition
    // 1 still holds).
    let ytd = |table: &'static str, key: &'static [u8], by: i64| {
        corrupt(&db, table, key, |v| {
            let v = v.as_mut().unwrap();
            let at = if table == "tpcc_district" {
                v.len() - 12
            } else {
                v.len() - 8
            };
            let ytd = i64::from_le_bytes(v[at..at + 8].try_into().unwrap());
            v[at..at + 8].copy_from_slice(&(ytd + by).to_le_bytes());
        })
    };
    ytd("tpcc_warehouse", &[0, 1], 1);
    ytd("tpcc_district", &[0, 1, 2], 1);
    assert_fails(&db, 8, "warehouse 1");
    ytd("tpcc_warehouse", &[0, 1], -1);

    // 9: that cent moved to D_YTD of district 3 (conditions 1 and 8 hold).
    ytd("tpcc_district", &[0, 1, 3], -1);
    assert_fails(&db, 9, "warehouse 1 district 2");
    ytd("tpcc_district", &[0, 1, 2], -1);
    ytd("tpcc_district", &[0, 1, 3], 1);
    w.verify(&db).expect("repaired");

    // 10 and 12: a customer's balance, then its year-to-date payment.
    let customer = [0, 2, 5, 0, 0, 0, 9];
    let change = |f: fn(&mut Customer, i64), by: i64| {
        corrupt(&db, "tpcc_customer", &customer, |v| {
            let mut c = Customer::decode(v.as_ref().unwrap()).unwrap();
            f(&mut c, by);
            *v = Some(c.encode());
        })
    };
    change(|c, by| c.balance += by, 1);
    assert_fails(&db, 10, "customer 9 of warehouse 2 district 5");
    change(|c, by| c.balance += by, -1);
    change(|c, by| c.ytd_payment += by, 1);
    assert_fails(&db, 12, "customer 9 of warehouse 2 district 5");
    change(|c, by| c.ytd_payment += by, -1);
    w.verify(&db).expect("repaired");
    db.close().unwrap();
}

fn sim_options(sim: &SimStorage) -> Options {
    Options {
        page_size: Some(4096),
        // Smaller than the data: pages are evicted (and stolen) in the run.
        buffer_pool_bytes: 1 << 20,
        storage: Some(Arc::new(sim.clone())),
        persistence: Persistence::PerWorker(PerWorkerOptions {
            wal_limit_bytes: 256 << 10,
            ..PerWorkerOptions::default()
        }),
        ..Options::default()
    }
}

/// Run `workers` threads of TPC-C, each committing one transaction at a
/// time until `txns` or an error that is not an abort (the frozen disk).
/// Returns the new-orders whose commit was acknowledged.
fn run_until_failure(db: &Database, w: &Tpcc, workers: usize, txns: u64, seed: u64) -> u64 {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|i| {
                s.spawn(move || {
                    let mut session = db.session();
                    let mut gen = w.worker(i, seed + i as u64);
                    let mut acked = 0;
                    for _ in 0..txns {
                        let Ok(mut tx) = session.begin() else { break };
                        let (ty, body) = gen.next(&mut tx);
                        match body.and_then(|()| tx.commit()) {
                            Ok(_) => acked += (ty == tpcc::NEW_ORDER) as u64,
                            Err(e) if is_abort(&e) => {}
                            Err(_) => break,
                        }
                    }
                    acked
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    })
}

#[test]
fn conditions_hold_after_a_power_loss_in_a_two_worker_run() {
    for seed in 0..3u64 {
        let sim = SimStorage::new(seed);
        let db = Database::open("/db", sim_options(&sim)).unwrap();
        let mut w = Tpcc::new(tiny(2), seed);
        w.setup(&db, 2).unwrap();
        let loaded = tpcc::verify(&db).unwrap();
        let mut rng = SmallRng::seed_from_u64(seed);
        let at = sim.op_count() + rng.gen_range(2000..20_000);
        sim.inject(Fault::at(at, FaultKind::Freeze));
        let acked = run_until_failure(&db, &w, 2, 5000, seed);
        assert!(sim.is_frozen(), "seed {seed}: the disk never froze");
        drop(w);
        std::mem::forget(db);
        sim.clear_faults();
        sim.crash(CrashPolicy::Random {
            keep: rng.gen_range(0.0..1.0),
            tear: true,
        });

        let db = Database::open("/db", sim_options(&sim)).unwrap();
        assert!(db.recovery_report().is_some());
        let after = tpcc::verify(&db).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert!(
            after.orders >= loaded.orders + acked,
            "seed {seed}: {acked} acknowledged new-orders, {} orders after recovery",
            after.orders - loaded.orders
        );
        // The recovered database is reused and runs on.
        let mut w = Tpcc::new(tiny(2), seed + 100);
        assert!(matches!(
            w.setup(&db, 2).unwrap(),
            waypoint_bench::workload::Loaded::Existing { .. }
        ));
        run_until_failure(&db, &w, 2, 200, seed);
        w.verify(&db).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        db.close().unwrap();
    }
}

#[test]
fn conditions_hold_after_dropping_the_database_without_close() {
    // A killed process: every write the engine made survives, nothing was
    // closed.
    let sim = SimStorage::new(9);
    let db = Database::open("/db", sim_options(&sim)).unwrap();
    let mut w = Tpcc::new(tiny(1), 9);
    w.setup(&db, 1).unwrap();
    let acked = run_until_failure(&db, &w, 2, 300, 9);
    drop(w);
    std::mem::forget(db);
    sim.crash(CrashPolicy::KeepAll);
    let db = Database::open("/db", sim_options(&sim)).unwrap();
    let after = tpcc::verify(&db).unwrap();
    assert!(after.orders >= 300 + acked, "{acked} acked, {after:?}");
    db.close().unwrap();
}
