//! TPC-C (spec revision 5.11): the nine tables, the initial population
//! scaled by the number of warehouses ([`load`]), the five transactions in
//! the standard mix ([`txns`]), and consistency conditions 1–10 and 12
//! ([`verify`](mod@verify)).
//!
//! - [`schema`]: keys (big-endian, so a district's orders are contiguous
//!   and ascending) and fixed binary rows with the spec's field sizes.
//! - Two secondary indexes (engine indexes, `Database::create_index`):
//!   customers by (W, D, C_LAST, C_FIRST), used by Payment and
//!   Order-Status to select a customer by last name; orders by
//!   (W, D, O_C_ID), used by Order-Status to find a customer's newest
//!   order.
//! - Worker `i` has home warehouse `i % W + 1`; no keying or think time.
//! - [`procedures`]: the five transactions as stored procedures, run
//!   under `command` (which takes writes only in calls) and, with
//!   [`Tpcc::with_procedures`], under the other schemes too.
//!
//! Deviations from the spec are listed in `docs/decisions/measurements.md` ("TPC-C").

pub mod load;
pub mod procedures;
pub mod random;
pub mod schema;
pub mod txns;
pub mod verify;

use crate::error::{BenchError, BenchResult};
use crate::workload::{Loaded, Worker, Workload};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use random::NuConstants;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use waypoint::{Database, Index, KeyExtractor, Table};

pub use txns::{Effect, TpccWorker};
pub use verify::{verify, TpccCheck};

/// Transaction types, in the order of [`Workload::txn_types`].
pub const TXN_TYPES: [&str; 5] = [
    "new_order",
    "payment",
    "order_status",
    "delivery",
    "stock_level",
];
pub const NEW_ORDER: usize = 0;
pub const PAYMENT: usize = 1;
pub const ORDER_STATUS: usize = 2;
pub const DELIVERY: usize = 3;
pub const STOCK_LEVEL: usize = 4;

/// Items, stock per warehouse, customers and orders per district at full
/// scale (spec §1.2, §4.3.3.1).
pub const ITEMS: u32 = 100_000;
pub const CUSTOMERS_PER_DISTRICT: u32 = 3000;

/// The seed of the load's NURand constant for C_LAST. Fixed, so that a
/// reused database and this run agree on it (it is recorded with the load
/// and checked on reuse).
const LOAD_SEED: u64 = 0x7C_C0AD;

/// Also what a load records in `bench_meta` (with the derived sizes), so
/// `serde_json::from_value::<TpccConfig>` of the recorded parameters
/// rebuilds the configuration of a loaded database.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct TpccConfig {
    pub warehouses: u32,
    /// 1 for the spec's sizes. A divisor for tests: items (and stock per
    /// warehouse) are 100,000 / `scale_down`, customers and orders per
    /// district 3,000 / `scale_down` (at least 10 each).
    pub scale_down: u32,
}

impl TpccConfig {
    /// The spec's sizes for `warehouses` warehouses.
    pub fn new(warehouses: u32) -> Self {
        TpccConfig {
            warehouses,
            scale_down: 1,
        }
    }

    pub fn items(&self) -> u32 {
        (ITEMS / self.scale_down.max(1)).max(10)
    }

    pub fn customers_per_district(&self) -> u32 {
        (CUSTOMERS_PER_DISTRICT / self.scale_down.max(1)).max(10)
    }

    /// Orders loaded per district: one per customer.
    pub fn orders_per_district(&self) -> u32 {
        self.customers_per_district()
    }

    /// Orders loaded undelivered (with a new-order row) per district: the
    /// last 900 of 3,000.
    pub fn new_orders_per_district(&self) -> u32 {
        self.orders_per_district() * 900 / 3000
    }

    /// Last names used: number `0..last_names()` (1,000 at full scale).
    pub fn last_names(&self) -> u32 {
        self.customers_per_district().min(1000)
    }

    fn check(&self) -> BenchResult<()> {
        if self.warehouses == 0 || self.warehouses > u16::MAX as u32 {
            return Err(BenchError::Config(format!(
                "--warehouses {} must be between 1 and {}",
                self.warehouses,
                u16::MAX
            )));
        }
        if self.scale_down == 0 || self.scale_down > ITEMS {
            return Err(BenchError::Config(format!(
                "TPC-C scale_down {} must be between 1 and {ITEMS}",
                self.scale_down
            )));
        }
        Ok(())
    }
}

pub(crate) const WAREHOUSE: &str = "tpcc_warehouse";
pub(crate) const DISTRICT: &str = "tpcc_district";
pub(crate) const CUSTOMER: &str = "tpcc_customer";
pub(crate) const HISTORY: &str = "tpcc_history";
pub(crate) const NEW_ORDER_TABLE: &str = "tpcc_new_order";
pub(crate) const ORDER: &str = "tpcc_order";
pub(crate) const ORDER_LINE: &str = "tpcc_order_line";
pub(crate) const ITEM: &str = "tpcc_item";
pub(crate) const STOCK: &str = "tpcc_stock";
pub(crate) const CUSTOMER_BY_NAME: &str = "tpcc_customer_by_name";
pub(crate) const ORDER_BY_CUSTOMER: &str = "tpcc_order_by_customer";

/// The tables and indexes, bound to their extractors.
#[derive(Clone)]
pub(crate) struct Tables {
    pub warehouse: Table,
    pub district: Table,
    pub customer: Table,
    pub history: Table,
    pub new_order: Table,
    pub order: Table,
    pub order_line: Table,
    pub item: Table,
    pub stock: Table,
    pub customer_by_name: Index,
    pub order_by_customer: Index,
}

/// Dates in rows: milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(1)
}

fn name_extractor() -> KeyExtractor {
    Arc::new(schema::customer_name_index_key)
}

fn order_extractor() -> KeyExtractor {
    Arc::new(schema::order_customer_index_key)
}

pub struct Tpcc {
    pub config: TpccConfig,
    /// NURand's constants of the load and of this run.
    load_c: NuConstants,
    run_c: NuConstants,
    tables: Option<Tables>,
    /// Distinguishes this run's history keys from earlier runs' on a
    /// reused database (the load uses source 0).
    run_nonce: u64,
    /// The spec's remote order lines (1%) and payments (15%); off in
    /// LeanStore's `affinity` mode ([`Tpcc::without_remote`]).
    remote: bool,
    /// The fraction (%) of New-Orders and Payments made remote instead
    /// of the spec's draws ([`Tpcc::multi_partition`]).
    multi_partition: Option<u8>,
    /// Run as stored procedures under every scheme.
    procedures: bool,
}

impl Tpcc {
    /// `seed` chooses this run's NURand constants.
    pub fn new(config: TpccConfig, seed: u64) -> Self {
        let load_c = NuConstants::load(&mut SmallRng::seed_from_u64(LOAD_SEED));
        let run_c = NuConstants::run(&mut SmallRng::seed_from_u64(seed), &load_c);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Tpcc {
            config,
            load_c,
            run_c,
            tables: None,
            // 48 bits (`schema::history_key`): the clock's low 31 bits
            // tell runs apart, the low 16 the worker; bit 47 keeps it
            // from 0 (the load's).
            run_nonce: ((nanos & 0x7FFF_FFFF) << 16) | (1 << 47),
            remote: true,
            multi_partition: None,
            procedures: false,
        }
    }

    /// Run the transactions as stored procedures (`Session::call`) under
    /// every scheme, not only under `command` (which takes no other
    /// writes): the like-for-like comparison of seed 001. The default
    /// keeps the direct path, so other schemes' figures stay comparable
    /// with earlier runs.
    pub fn with_procedures(mut self, on: bool) -> Self {
        self.procedures = on;
        self
    }

    /// Make `pct`% of the New-Orders (one line from another warehouse)
    /// and of the Payments (another warehouse's customer) remote, and the
    /// rest local, instead of the spec's 1% of lines and 15% of payments:
    /// seed 001's multi-partition fraction (a remote transaction is a
    /// multi-partition call). Needs two or more warehouses to draw any.
    pub fn multi_partition(mut self, pct: u8) -> Self {
        self.multi_partition = Some(pct.min(100));
        self
    }

    /// Every order line supplied and every payment made by the terminal's
    /// home warehouse: LeanStore's `affinity` mode, a deviation from the
    /// spec that `config_json` names. The load is the same, so a database
    /// loaded by either mode serves both.
    pub fn without_remote(mut self) -> Self {
        self.remote = false;
        self
    }

    /// What a reused database must have been loaded with.
    fn params(&self) -> serde_json::Value {
        let c = &self.config;
        serde_json::json!({
            "warehouses": c.warehouses,
            "scale_down": c.scale_down,
            "items": c.items(),
            "customers_per_district": c.customers_per_district(),
            "c_last_load": self.load_c.c_last,
        })
    }

    /// The NURand constants of this run.
    pub fn run_constants(&self) -> NuConstants {
        self.run_c
    }

    /// The terminal of worker `worker` (what [`Workload::worker`] hands
    /// the driver), for a caller that drives it itself and wants each
    /// transaction's [`Effect`]. `Config` error before `setup`.
    pub fn terminal(&self, worker: usize, seed: u64) -> BenchResult<TpccWorker<'_>> {
        let tables = self
            .tables
            .as_ref()
            .ok_or_else(|| BenchError::Config("TPC-C: setup has not run".into()))?;
        let mut terminal = txns::TpccWorker::new(
            &self.config,
            tables,
            self.run_c,
            worker,
            self.run_nonce | (worker as u64 & 0xFFFF),
            seed,
        );
        terminal.inputs.remote = self.remote;
        terminal.inputs.multi_partition = self.multi_partition;
        terminal.procedures = self.procedures;
        Ok(terminal)
    }
}

impl Workload for Tpcc {
    fn name(&self) -> &'static str {
        "tpcc"
    }

    fn txn_types(&self) -> Vec<&'static str> {
        TXN_TYPES.to_vec()
    }

    fn config_json(&self) -> serde_json::Value {
        let mut config = self.params();
        config["mix"] = serde_json::json!({
            "new_order": 45, "payment": 43, "order_status": 4, "delivery": 4, "stock_level": 4
        });
        config["remote_accesses"] = self.remote.into();
        if !self.remote {
            config["deviation"] =
                "no remote order lines or payments (LeanStore's affinity mode), not the spec's \
                                   1% remote lines and 15% remote payments"
                    .into();
        }
        if let Some(pct) = self.multi_partition {
            config["multi_partition_pct"] = pct.into();
            config["deviation"] = format!(
                "{pct}% of new-orders (one remote line) and payments (a remote customer) \
                 remote, the rest local, not the spec's 1% remote lines and 15% remote payments"
            )
            .into();
        }
        config["procedures"] = self.procedures.into();
        config["nurand_c_load"] = serde_json::json!(self.load_c);
        config["nurand_c_run"] = serde_json::json!(self.run_c);
        config
    }

    fn validate(&self, _page_size: usize) -> BenchResult<()> {
        self.config.check()
    }

    fn setup(&mut self, db: &Database, workers: usize) -> BenchResult<Loaded> {
        self.config.check()?;
        let params = self.params();
        let reuse = crate::load::check_reuse(db, "tpcc", &params).map_err(|e| match e {
            BenchError::Config(m) => BenchError::Config(format!(
                "{m}: TPC-C reuses only a database loaded with the same --warehouses"
            )),
            e => e,
        })?;
        let records = load::initial_rows(&self.config);
        if reuse {
            let tables = Tables {
                warehouse: db.table(WAREHOUSE)?,
                district: db.table(DISTRICT)?,
                customer: db.table(CUSTOMER)?,
                history: db.table(HISTORY)?,
                new_order: db.table(NEW_ORDER_TABLE)?,
                order: db.table(ORDER)?,
                order_line: db.table(ORDER_LINE)?,
                item: db.table(ITEM)?,
                stock: db.table(STOCK)?,
                customer_by_name: db.open_index(CUSTOMER_BY_NAME, name_extractor())?,
                order_by_customer: db.open_index(ORDER_BY_CUSTOMER, order_extractor())?,
            };
            self.tables = Some(tables);
            return Ok(Loaded::Existing { records });
        }
        let tables = load::load(db, &self.config, &self.load_c, workers)?;
        self.tables = Some(tables);
        crate::load::record_params(db, "tpcc", &params)?;
        Ok(Loaded::Fresh { records })
    }

    fn worker(&self, worker: usize, seed: u64) -> Box<dyn Worker + '_> {
        Box::new(self.terminal(worker, seed).expect("setup ran"))
    }

    fn verify(&self, db: &Database) -> BenchResult<serde_json::Value> {
        let check = verify(db)?;
        let w = self.config.warehouses as u64;
        if check.warehouses != w || check.districts != w * schema::DISTRICTS as u64 {
            return Err(BenchError::Verify(format!(
                "expected {w} warehouses and {} districts; found {} and {}",
                w * schema::DISTRICTS as u64,
                check.warehouses,
                check.districts
            )));
        }
        Ok(serde_json::to_value(check).expect("serializes"))
    }
}
