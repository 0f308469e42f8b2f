//! The initial population (spec §4.3.3.1) for `warehouses` warehouses:
//! items; per warehouse its row, stock for every item and 10 districts;
//! per district 3,000 customers with a history row each, 3,000 orders
//! (customers in a random permutation; 5–15 order lines each; the first
//! 2,100 delivered) and 900 new-orders for the undelivered ones.
//!
//! The load is split into jobs (item ranges, a warehouse, stock ranges,
//! one district) that `workers` threads take in turn, inserting rows in
//! transactions of [`LOAD_BATCH`] rows. Each job draws from its own seed,
//! so the population does not depend on the thread schedule. The two
//! secondary indexes are built once the rows are in (one pass each).

use super::random::{self, astring, data_with_original, mix, nstring, nurand, NuConstants};
use super::schema::*;
use super::{
    name_extractor, order_extractor, Tables, TpccConfig, CUSTOMER, CUSTOMER_BY_NAME, DISTRICT,
    HISTORY, ITEM, NEW_ORDER_TABLE, ORDER, ORDER_BY_CUSTOMER, ORDER_LINE, STOCK, WAREHOUSE,
};
use crate::error::BenchResult;
use crate::load::LOAD_BATCH;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use waypoint::{Database, Error, PendingCommit, Session, Table};

/// Items or stock rows per job.
const RANGE: u32 = 10_000;

enum Job {
    Items { lo: u32, hi: u32 },
    Warehouse { w: u16 },
    Stock { w: u16, lo: u32, hi: u32 },
    District { w: u16, d: u8 },
}

impl Job {
    fn seed(&self) -> u64 {
        let (kind, a, b) = match *self {
            Job::Items { lo, .. } => (1, 0, lo as u64),
            Job::Warehouse { w } => (2, w as u64, 0),
            Job::Stock { w, lo, .. } => (3, w as u64, lo as u64),
            Job::District { w, d } => (4, w as u64, d as u64),
        };
        mix((kind << 56) | (a << 32) | b)
    }
}

/// O_OL_CNT of loaded order (w, d, o): 5..=15, a function of the order so
/// that [`initial_rows`] can count the order lines without loading.
pub fn loaded_ol_cnt(w: u16, d: u8, o: u32) -> u8 {
    5 + (mix(((w as u64) << 40) | ((d as u64) << 32) | o as u64 | (5 << 56)) % 11) as u8
}

/// H_AMOUNT of each loaded history row: 10.00.
const LOADED_PAYMENT: i64 = 1000;

/// D_YTD of a loaded district: the sum of its loaded history rows
/// (30,000.00 at the spec's sizes), and W_YTD ten times that (300,000.00),
/// so that consistency conditions 8 and 9 hold at every `scale_down`, not
/// only at full scale.
pub fn district_ytd(c: &TpccConfig) -> i64 {
    c.customers_per_district() as i64 * LOADED_PAYMENT
}

/// Rows of the initial population, all tables.
pub fn initial_rows(c: &TpccConfig) -> u64 {
    let (n, orders, new_orders) = (
        c.customers_per_district() as u64,
        c.orders_per_district(),
        c.new_orders_per_district() as u64,
    );
    let mut rows = c.items() as u64;
    for w in 1..=c.warehouses as u16 {
        rows += 1 + c.items() as u64;
        for d in 1..=DISTRICTS {
            rows += 1 + 2 * n + orders as u64 + new_orders;
            rows += (1..=orders)
                .map(|o| loaded_ol_cnt(w, d, o) as u64)
                .sum::<u64>();
        }
    }
    rows
}

/// Inserts rows in transactions of [`LOAD_BATCH`], keeping up to
/// [`IN_FLIGHT`] commits pipelined (the load waits for the log only at the
/// end, and when that many are in flight).
struct Batch<'a> {
    session: Session,
    rows: Vec<(&'a Table, Vec<u8>, Vec<u8>)>,
    pending: VecDeque<PendingCommit>,
}

const IN_FLIGHT: usize = 16;

impl<'a> Batch<'a> {
    fn push(&mut self, table: &'a Table, key: &[u8], value: Vec<u8>) -> BenchResult<()> {
        self.rows.push((table, key.to_vec(), value));
        if self.rows.len() as u64 >= LOAD_BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> BenchResult<()> {
        if !self.rows.is_empty() {
            if self.session.writes_only_in_procedures() {
                // `command` takes writes only in calls: a `bench_put` per
                // table of the batch, blocking (a load runs alone).
                let mut rows = std::mem::take(&mut self.rows);
                rows.sort_by(|a, b| a.0.name().cmp(b.0.name()));
                for chunk in rows.chunk_by(|a, b| a.0.name() == b.0.name()) {
                    let table = chunk[0].0;
                    let chunk = chunk.iter().map(|(_, k, v)| (k.clone(), v.clone()));
                    crate::load::put(&mut self.session, table, chunk.collect(), false)?;
                }
                return Ok(());
            }
            let mut attempts = 0;
            let pending = loop {
                attempts += 1;
                let mut tx = self.session.begin()?;
                for (t, k, v) in &self.rows {
                    tx.insert(t, k, v)?;
                }
                match tx.commit_pipelined() {
                    Err(Error::Conflict) if attempts < 100 => continue,
                    other => break other?,
                }
            };
            self.pending.push_back(pending);
            self.rows.clear();
        }
        while self.pending.len() > IN_FLIGHT {
            self.pending.pop_front().expect("not empty").wait()?;
        }
        Ok(())
    }

    /// Flush and wait for every commit.
    fn finish(mut self) -> BenchResult<()> {
        self.flush()?;
        for p in self.pending.drain(..) {
            p.wait()?;
        }
        Ok(())
    }
}

fn address(rng: &mut SmallRng) -> Address {
    Address {
        street_1: text(&astring(rng, 10, 20)),
        street_2: text(&astring(rng, 10, 20)),
        city: text(&astring(rng, 10, 20)),
        state: text(&astring(rng, 2, 2)),
        zip: text(&random::zip(rng)),
    }
}

/// Create the tables and their indexes, and load them from `workers`
/// threads.
pub(crate) fn load(
    db: &Database,
    config: &TpccConfig,
    load_c: &NuConstants,
    workers: usize,
) -> BenchResult<Tables> {
    let customer = db.create_table(CUSTOMER)?;
    let order = db.create_table(ORDER)?;
    let t = Tables {
        warehouse: db.create_table(WAREHOUSE)?,
        district: db.create_table(DISTRICT)?,
        customer_by_name: db.create_index(&customer, CUSTOMER_BY_NAME, name_extractor())?,
        order_by_customer: db.create_index(&order, ORDER_BY_CUSTOMER, order_extractor())?,
        customer,
        history: db.create_table(HISTORY)?,
        new_order: db.create_table(NEW_ORDER_TABLE)?,
        order,
        order_line: db.create_table(ORDER_LINE)?,
        item: db.create_table(ITEM)?,
        stock: db.create_table(STOCK)?,
    };
    let items = config.items();
    let ranges = |lo_hi: &mut dyn FnMut(u32, u32)| {
        let mut lo = 1;
        while lo <= items {
            let hi = (lo + RANGE - 1).min(items);
            lo_hi(lo, hi);
            lo = hi + 1;
        }
    };
    let mut jobs = Vec::new();
    for w in 1..=config.warehouses as u16 {
        for d in 1..=DISTRICTS {
            jobs.push(Job::District { w, d });
        }
        ranges(&mut |lo, hi| jobs.push(Job::Stock { w, lo, hi }));
        jobs.push(Job::Warehouse { w });
    }
    ranges(&mut |lo, hi| jobs.push(Job::Items { lo, hi }));

    let next = AtomicUsize::new(0);
    let ctx = Ctx {
        t: &t,
        config,
        load_c,
        now: super::now_ms(),
    };
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for w in 0..workers.max(1) {
            let (ctx, jobs, next) = (&ctx, &jobs, &next);
            let spawned = std::thread::Builder::new()
                .name(format!("tpcc-load-{w}"))
                .spawn_scoped(s, move || -> BenchResult<()> {
                    let mut batch = Batch {
                        session: db.session(),
                        rows: Vec::with_capacity(LOAD_BATCH as usize),
                        pending: VecDeque::new(),
                    };
                    while let Some(job) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let mut rng = SmallRng::seed_from_u64(job.seed());
                        ctx.run(job, &mut rng, &mut batch)?;
                    }
                    batch.finish()
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // No job is taken after this: those started finish
                    // the one they hold.
                    next.store(jobs.len(), Ordering::Relaxed);
                    return Err(crate::driver::spawn_failed(w, workers.max(1), &e));
                }
            }
        }
        handles
            .into_iter()
            .try_for_each(|h| h.join().expect("TPC-C load worker panicked"))
    })?;
    Ok(t)
}

struct Ctx<'a> {
    t: &'a Tables,
    config: &'a TpccConfig,
    load_c: &'a NuConstants,
    now: u64,
}

impl<'a> Ctx<'a> {
    fn run(&self, job: &Job, rng: &mut SmallRng, b: &mut Batch<'a>) -> BenchResult<()> {
        let t = self.t;
        match *job {
            Job::Items { lo, hi } => {
                for i in lo..=hi {
                    let item = Item {
                        im_id: rng.gen_range(1..=10_000),
                        name: text(&astring(rng, 14, 24)),
                        price: rng.gen_range(100..=10_000),
                        data: text(&data_with_original(rng)),
                    };
                    b.push(&t.item, &item_key(i), item.encode())?;
                }
            }
            Job::Warehouse { w } => {
                let row = Warehouse {
                    name: text(&astring(rng, 6, 10)),
                    address: address(rng),
                    tax: rng.gen_range(0..=2000),
                    ytd: DISTRICTS as i64 * district_ytd(self.config),
                };
                b.push(&t.warehouse, &warehouse_key(w), row.encode())?;
            }
            Job::Stock { w, lo, hi } => {
                for i in lo..=hi {
                    let mut dist = [[0; 24]; DISTRICTS as usize];
                    for d in &mut dist {
                        *d = text(&astring(rng, 24, 24));
                    }
                    let row = Stock {
                        quantity: rng.gen_range(10..=100),
                        dist,
                        ytd: 0,
                        order_cnt: 0,
                        remote_cnt: 0,
                        data: text(&data_with_original(rng)),
                    };
                    b.push(&t.stock, &stock_key(w, i), row.encode())?;
                }
            }
            Job::District { w, d } => self.district(w, d, rng, b)?,
        }
        Ok(())
    }

    fn district(&self, w: u16, d: u8, rng: &mut SmallRng, b: &mut Batch<'a>) -> BenchResult<()> {
        let (t, c, now) = (self.t, self.config, self.now);
        let customers = c.customers_per_district();
        let orders = c.orders_per_district();
        let delivered = orders - c.new_orders_per_district();
        let row = District {
            name: text(&astring(rng, 6, 10)),
            address: address(rng),
            tax: rng.gen_range(0..=2000),
            ytd: district_ytd(c),
            next_o_id: orders + 1,
        };
        b.push(&t.district, &district_key(w, d), row.encode())?;
        for id in 1..=customers {
            let last = if id <= c.last_names() {
                random::last_name(id - 1)
            } else {
                random::last_name(nurand(rng, 255, self.load_c.c_last, 0, 999))
            };
            let row = Customer {
                first: text(&astring(rng, 8, 16)),
                middle: *b"OE",
                last: text(&last),
                address: address(rng),
                phone: text(&nstring(rng, 16, 16)),
                since: now,
                credit: if rng.gen_bool(0.1) { *b"BC" } else { *b"GC" },
                credit_lim: 5_000_000,
                discount: rng.gen_range(0..=5000),
                balance: -LOADED_PAYMENT,
                ytd_payment: LOADED_PAYMENT,
                payment_cnt: 1,
                delivery_cnt: 0,
                data: astring(rng, 300, 500),
            };
            b.push(&t.customer, &customer_key(w, d, id), row.encode())?;
            let h = History {
                c_id: id,
                c_d_id: d,
                c_w_id: w,
                d_id: d,
                w_id: w,
                date: now,
                amount: LOADED_PAYMENT,
                data: text(&astring(rng, 12, 24)),
            };
            let seq = ((w as u64) << 40) | ((d as u64) << 32) | id as u64;
            b.push(&t.history, &history_key(w, 0, seq), h.encode())?;
        }
        let mut permutation: Vec<u32> = (1..=customers).collect();
        permutation.shuffle(rng);
        for o in 1..=orders {
            let done = o <= delivered;
            let ol_cnt = loaded_ol_cnt(w, d, o);
            let row = Order {
                c_id: permutation[(o - 1) as usize],
                entry_d: now,
                carrier_id: if done { rng.gen_range(1..=10) } else { 0 },
                ol_cnt,
                all_local: 1,
            };
            b.push(&t.order, &order_key(w, d, o), row.encode())?;
            for ol in 1..=ol_cnt {
                let line = OrderLine {
                    i_id: rng.gen_range(1..=c.items()),
                    supply_w_id: w,
                    delivery_d: if done { now } else { 0 },
                    quantity: 5,
                    amount: if done { 0 } else { rng.gen_range(1..=999_999) },
                    dist_info: text(&astring(rng, 24, 24)),
                };
                b.push(&t.order_line, &order_line_key(w, d, o, ol), line.encode())?;
            }
            if !done {
                b.push(&t.new_order, &order_key(w, d, o), Vec::new())?;
            }
        }
        Ok(())
    }
}
