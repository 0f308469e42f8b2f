//! YCSB: one table of `records` rows (`user` + 8-byte big-endian key
//! number, values of `value_size` bytes) and the core workloads A–F.
//!
//! A transaction runs `ops_per_txn` operations of one kind, the kind drawn
//! from the preset's mix: A 50/50 read/update, B 95/5 read/update, C reads
//! only, D 95/5 read/insert with the latest distribution, E 95/5 short scan
//! (1–100 rows)/insert, F 50/50 read/read-modify-write. Keys are uniform,
//! scrambled zipfian (YCSB's: a zipfian rank hashed with FNV-64 onto the key
//! space, θ = 0.99 by default, via `rand_distr::Zipf`), or latest (a
//! zipfian distance back from the newest key). Inserts take new key numbers
//! from a shared counter. A read of a key whose insert has not committed
//! yet finds nothing and still counts as a read.
//!
//! The operations are written once against [`KvTx`] ([`YcsbTxns`]): the
//! driver runs them on waypoint, `waypoint compare peers` on the engines
//! of [`crate::peers`], with the same keys, values and [`check_rows`].

use crate::error::{BenchError, BenchResult};
use crate::kv::{KvTx, RowFn, WaypointTx};
use crate::load::{self, for_each_row, parallel_insert};
use crate::workload::{Loaded, Worker, Workload};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution as _, Zipf};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use waypoint::{Database, Error, Table, Transaction};

const TABLE: &str = "ycsb";

/// The workload's tables, in [`KvTx`] numbering.
pub const TABLES: &[&str] = &[TABLE];

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Read,
    Update,
    Insert,
    Scan,
    Rmw,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Update => "update",
            Op::Insert => "insert",
            Op::Scan => "scan",
            Op::Rmw => "rmw",
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum KeyDistribution {
    Uniform,
    Zipfian,
    Latest,
}

impl KeyDistribution {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "uniform" => Some(Self::Uniform),
            "zipfian" => Some(Self::Zipfian),
            "latest" => Some(Self::Latest),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Uniform => "uniform",
            Self::Zipfian => "zipfian",
            Self::Latest => "latest",
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct YcsbConfig {
    pub preset: char,
    pub records: u64,
    pub value_size: usize,
    /// Operation kinds and their shares (summing to 1).
    pub mix: Vec<(Op, f64)>,
    pub distribution: KeyDistribution,
    pub theta: f64,
    pub ops_per_txn: usize,
    pub max_scan_len: usize,
}

impl YcsbConfig {
    /// The core workload `preset` (a–f, either case) with its own mix and
    /// key distribution.
    pub fn preset(preset: char, records: u64) -> BenchResult<Self> {
        use Op::*;
        let p = preset.to_ascii_lowercase();
        let (mix, distribution) = match p {
            'a' => (vec![(Read, 0.5), (Update, 0.5)], KeyDistribution::Zipfian),
            'b' => (vec![(Read, 0.95), (Update, 0.05)], KeyDistribution::Zipfian),
            'c' => (vec![(Read, 1.0)], KeyDistribution::Zipfian),
            'd' => (vec![(Read, 0.95), (Insert, 0.05)], KeyDistribution::Latest),
            'e' => (vec![(Scan, 0.95), (Insert, 0.05)], KeyDistribution::Zipfian),
            'f' => (vec![(Read, 0.5), (Rmw, 0.5)], KeyDistribution::Zipfian),
            _ => {
                return Err(BenchError::Config(format!(
                    "unknown YCSB preset {preset:?}; available: a, b, c, d, e, f"
                )))
            }
        };
        Ok(YcsbConfig {
            preset: p,
            records,
            value_size: 100,
            mix,
            distribution,
            theta: 0.99,
            ops_per_txn: 1,
            max_scan_len: 100,
        })
    }

    /// Every count at least 1, `theta` a positive number, and values of
    /// `value_size` 1 byte to the largest a table takes at `page_size`.
    pub fn check(&self, page_size: usize) -> BenchResult<()> {
        use crate::driver::out_of_range;
        for (name, n) in [
            ("records", self.records),
            ("ops_per_txn", self.ops_per_txn as u64),
            ("max_scan_len", self.max_scan_len as u64),
        ] {
            if n == 0 {
                return Err(out_of_range(name, n, "at least 1"));
            }
        }
        let max = waypoint::Database::max_value_len_for(page_size);
        if !(1..=max).contains(&self.value_size) {
            return Err(out_of_range(
                "value_size",
                self.value_size,
                &format!("1 to {max} (the largest value in pages of {page_size} bytes)"),
            ));
        }
        if !(self.theta > 0.0 && self.theta.is_finite()) {
            return Err(BenchError::Config(format!(
                "--theta {} must be a positive number (YCSB uses 0.99)",
                self.theta
            )));
        }
        Ok(())
    }
}

pub struct Ycsb {
    pub config: YcsbConfig,
    /// [`TABLES`], opened by `setup`.
    tables: Vec<Table>,
    /// The next key number an insert takes.
    next_key: AtomicU64,
}

impl Ycsb {
    pub fn new(config: YcsbConfig) -> Self {
        let next = config.records;
        Ycsb {
            config,
            tables: Vec::new(),
            next_key: AtomicU64::new(next),
        }
    }
}

pub fn key(i: u64) -> [u8; 12] {
    let mut k = *b"user\0\0\0\0\0\0\0\0";
    k[4..].copy_from_slice(&i.to_be_bytes());
    k
}

fn key_number(k: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(
        k.strip_prefix(b"user")?.try_into().ok()?,
    ))
}

/// FNV-1a over the 8 bytes of `x`, as YCSB scrambles zipfian ranks.
fn fnv64(x: u64) -> u64 {
    x.to_le_bytes().iter().fold(0xCBF2_9CE4_8422_2325, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x0100_0000_01B3)
    })
}

/// The value of loaded record `i`.
pub fn load_value(i: u64, size: usize) -> Vec<u8> {
    (0..size)
        .map(|j| (i as usize).wrapping_add(j) as u8)
        .collect()
}

impl Workload for Ycsb {
    fn name(&self) -> &'static str {
        "ycsb"
    }

    fn txn_types(&self) -> Vec<&'static str> {
        self.config.mix.iter().map(|(op, _)| op.name()).collect()
    }

    fn config_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.config).expect("config serializes")
    }

    fn validate(&self, page_size: usize) -> BenchResult<()> {
        self.config.check(page_size)
    }

    fn setup(&mut self, db: &Database, workers: usize) -> BenchResult<Loaded> {
        self.config.check(db.page_size())?;
        let params = serde_json::json!({
            "records": self.config.records, "value_size": self.config.value_size,
        });
        let reuse = load::check_reuse(db, "ycsb", &params)?;
        let table = db.open_or_create_table(TABLE)?;
        self.tables = vec![table.clone()];
        let records = self.config.records;
        if reuse {
            let mut session = db.session();
            let mut tx = session.begin()?;
            let last = tx.scan_rev(&table, .., 1)?;
            drop(tx);
            let next = last
                .first()
                .and_then(|(k, _)| key_number(k))
                .map_or(0, |n| n + 1);
            self.next_key.store(next.max(records), Ordering::Relaxed);
            return Ok(Loaded::Existing { records: next });
        }
        let size = self.config.value_size;
        parallel_insert(db, &table, records, workers, |i| {
            (key(i).to_vec(), load_value(i, size))
        })?;
        load::record_params(db, "ycsb", &params)?;
        Ok(Loaded::Fresh { records })
    }

    fn worker(&self, _worker: usize, seed: u64) -> Box<dyn Worker + '_> {
        assert!(!self.tables.is_empty(), "setup ran before the workers");
        Box::new(YcsbWorker {
            txns: self.txns(seed),
            tables: &self.tables,
        })
    }

    fn verify(&self, db: &Database) -> BenchResult<serde_json::Value> {
        let table = db.table(TABLE)?;
        let mut session = db.session();
        check_rows(&self.config, |f| for_each_row(&mut session, &table, f))
    }
}

/// YCSB's invariant on the rows that `each_row` hands to its callback in
/// key order: every key a YCSB key, every value `value_size` bytes, every
/// loaded record present. Returns what was counted.
pub fn check_rows(
    config: &YcsbConfig,
    each_row: impl FnOnce(&mut RowFn<'_>) -> BenchResult<()>,
) -> BenchResult<serde_json::Value> {
    let (mut rows, mut loaded) = (0u64, 0u64);
    each_row(&mut |k, v| {
        let n = key_number(k).ok_or_else(|| BenchError::Verify(format!("bad YCSB key {k:?}")))?;
        if v.len() != config.value_size {
            return Err(BenchError::Verify(format!(
                "record {n} has {} bytes, expected {}",
                v.len(),
                config.value_size
            )));
        }
        rows += 1;
        loaded += u64::from(n < config.records);
        Ok(())
    })?;
    if loaded != config.records {
        return Err(BenchError::Verify(format!(
            "{loaded} of the {} loaded records are present",
            config.records
        )));
    }
    Ok(serde_json::json!({ "rows": rows, "loaded_rows_present": loaded }))
}

impl Ycsb {
    /// The transaction generator of one worker (or client thread),
    /// seeded with `seed`; it needs no database, only [`KvTx`]s to run on.
    pub fn txns(&self, seed: u64) -> YcsbTxns<'_> {
        let c = &self.config;
        let mut acc = 0.0;
        let cumulative = c
            .mix
            .iter()
            .map(|(op, p)| {
                acc += p;
                (*op, acc)
            })
            .collect();
        YcsbTxns {
            ycsb: self,
            rng: SmallRng::seed_from_u64(seed),
            zipf: Zipf::new(c.records, c.theta).expect("checked by YcsbConfig::check"),
            cumulative,
            value: vec![0; c.value_size],
        }
    }
}

/// The waypoint driver's worker: [`YcsbTxns`] on the database's table.
struct YcsbWorker<'a> {
    txns: YcsbTxns<'a>,
    tables: &'a [Table],
}

impl Worker for YcsbWorker<'_> {
    fn next(&mut self, tx: &mut Transaction<'_>) -> (usize, Result<(), Error>) {
        self.txns.run(&mut WaypointTx {
            tx,
            tables: self.tables,
        })
    }
}

/// One thread's YCSB transactions: the operation mix and key choice.
pub struct YcsbTxns<'a> {
    ycsb: &'a Ycsb,
    rng: SmallRng,
    zipf: Zipf<f64>,
    /// Operation kinds with cumulative shares.
    cumulative: Vec<(Op, f64)>,
    value: Vec<u8>,
}

impl YcsbTxns<'_> {
    /// A key number among those inserted so far.
    fn choose(&mut self) -> u64 {
        let n = self.ycsb.next_key.load(Ordering::Relaxed).max(1);
        match self.ycsb.config.distribution {
            KeyDistribution::Uniform => self.rng.gen_range(0..n),
            KeyDistribution::Zipfian => {
                let rank = self.zipf.sample(&mut self.rng) as u64;
                fnv64(rank) % n
            }
            KeyDistribution::Latest => {
                let back = self.zipf.sample(&mut self.rng) as u64;
                n.saturating_sub(back)
            }
        }
    }

    fn op<T: KvTx + ?Sized>(&mut self, op: Op, tx: &mut T) -> Result<(), T::Error> {
        match op {
            Op::Read => {
                tx.get(0, &key(self.choose()))?;
            }
            Op::Update => {
                let k = key(self.choose());
                self.rng.fill(&mut self.value[..]);
                tx.update(0, &k, &self.value)?;
            }
            Op::Insert => {
                let k = key(self.ycsb.next_key.fetch_add(1, Ordering::Relaxed));
                self.rng.fill(&mut self.value[..]);
                tx.insert(0, &k, &self.value)?;
            }
            Op::Scan => {
                let from = key(self.choose());
                let len = self.rng.gen_range(1..=self.ycsb.config.max_scan_len);
                tx.scan(0, &from, len)?;
            }
            Op::Rmw => {
                let k = key(self.choose());
                let mut v = tx.get_for_update(0, &k)?.ok_or_else(|| tx.missing())?;
                let at = self.rng.gen_range(0..v.len().max(1));
                if let Some(b) = v.get_mut(at) {
                    *b = b.wrapping_add(1);
                }
                tx.update(0, &k, &v)?;
            }
        }
        Ok(())
    }

    /// The next transaction's body in `tx` (not its commit): its type (an
    /// index into [`Workload::txn_types`]) and the outcome.
    pub fn run<T: KvTx + ?Sized>(&mut self, tx: &mut T) -> (usize, Result<(), T::Error>) {
        let x: f64 = self.rng.gen();
        let ty = self
            .cumulative
            .iter()
            .position(|(_, c)| x < *c)
            .unwrap_or(self.cumulative.len() - 1);
        let op = self.cumulative[ty].0;
        for _ in 0..self.ycsb.config.ops_per_txn {
            if let Err(e) = self.op(op, tx) {
                return (ty, Err(e));
            }
        }
        (ty, Ok(()))
    }
}
