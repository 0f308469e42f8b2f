//! Criterion benchmarks of the engine's basic operations: point lookup,
//! insert and range scan, with the data in memory and with a buffer pool
//! of 10% of the data (every miss reads a page through the page provider).
//!
//! Run: `cargo bench -p waypoint --bench engine`. Figures go to
//! docs/decisions/measurements.md with the machine and date.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use waypoint::{Database, Options, Table};

const RECORDS: u64 = 200_000;
const VALUE: usize = 100;
const PAGE: usize = 16384;

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

/// A loaded database, closed and reopened so the pool starts cold.
fn loaded(buffer_bytes: usize) -> (tempfile::TempDir, Database, Table) {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        page_size: Some(PAGE),
        buffer_pool_bytes: 512 << 20,
        ..Options::default()
    };
    let db = Database::open(dir.path(), options.clone()).expect("open");
    let t = db.create_table("t").expect("table");
    let mut s = db.session();
    for chunk in (0..RECORDS).collect::<Vec<_>>().chunks(1000) {
        let mut tx = s.begin().expect("begin");
        for &i in chunk {
            tx.insert(&t, &key(i), &[i as u8; VALUE]).expect("insert");
        }
        tx.commit().expect("commit");
    }
    drop((s, t));
    db.close().expect("close");
    let db = Database::open(
        dir.path(),
        Options {
            buffer_pool_bytes: buffer_bytes,
            ..options
        },
    )
    .expect("reopen");
    let t = db.table("t").expect("table");
    (dir, db, t)
}

fn budgets() -> [(&'static str, usize); 2] {
    let data = RECORDS as usize * (8 + VALUE + 10) * 3 / 2;
    [
        ("in-memory", 512 << 20),
        ("buffer-10pct", (data / 10).max(16 * PAGE)),
    ]
}

fn lookups(c: &mut Criterion) {
    let mut g = c.benchmark_group("point_lookup");
    g.throughput(Throughput::Elements(1));
    for (name, budget) in budgets() {
        let (_dir, db, t) = loaded(budget);
        let mut s = db.session();
        let mut rng = SmallRng::seed_from_u64(1);
        g.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                let mut tx = s.begin().expect("begin");
                let v = tx.get(&t, &key(rng.gen_range(0..RECORDS))).expect("get");
                assert!(v.is_some());
                tx.commit().expect("commit");
            })
        });
    }
    g.finish();
}

fn scans(c: &mut Criterion) {
    let mut g = c.benchmark_group("range_scan_100");
    g.throughput(Throughput::Elements(100));
    for (name, budget) in budgets() {
        let (_dir, db, t) = loaded(budget);
        let mut s = db.session();
        let mut rng = SmallRng::seed_from_u64(2);
        g.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                let mut tx = s.begin().expect("begin");
                let from = key(rng.gen_range(0..RECORDS - 100));
                let rows = tx.scan(&t, from.as_slice().., 100).expect("scan");
                assert_eq!(rows.len(), 100);
                tx.commit().expect("commit");
            })
        });
    }
    g.finish();
}

fn inserts(c: &mut Criterion) {
    let mut g = c.benchmark_group("insert");
    g.throughput(Throughput::Elements(1));
    for (name, budget) in budgets() {
        let (_dir, db, t) = loaded(budget);
        let mut s = db.session();
        let mut rng = SmallRng::seed_from_u64(3);
        g.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                // Random new keys above the loaded range: random leaves.
                let k = (rng.gen_range(0..RECORDS) << 20) | rng.gen_range(1..1 << 20);
                let mut tx = s.begin().expect("begin");
                tx.upsert(&t, &k.to_be_bytes(), &[7u8; VALUE])
                    .expect("upsert");
                tx.commit().expect("commit");
            })
        });
    }
    g.finish();
}

criterion_group!(benches, lookups, scans, inserts);
criterion_main!(benches);
