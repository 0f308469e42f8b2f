//! TPC-B (pgbench-like): branches, 10 tellers per branch, accounts (100,000
//! per branch at full scale) and a history table. One transaction type:
//! add a random delta to an account, its teller and the teller's branch,
//! and insert a history row.
//!
//! Invariant ([`verify`]): sum(branch balances) == sum(teller balances) ==
//! sum(account balances) == sum(history deltas), and the row counts match
//! the scale. Balances start at 0.
//!
//! As in TPC-B, the teller is uniform, the branch is the teller's, and the
//! account is in that branch 85% of the time (else in another branch).
//! Rows are keyed by 8-byte big-endian ids; values start with the balance
//! (i64, little-endian) followed by pgbench's filler sizes.
//!
//! The transaction is written once against [`KvTx`] ([`TpcbTxns`]) and
//! the invariant once over rows ([`check_sums`]): the driver runs them on
//! waypoint, `waypoint compare peers` on the engines of [`crate::peers`].

use crate::error::{BenchError, BenchResult};
use crate::kv::{KvTx, RowFn, WaypointTx};
use crate::load::{self, for_each_row, parallel_insert};
use crate::workload::{Loaded, Worker, Workload};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use waypoint::{Database, Error, Table, Transaction};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TpcbConfig {
    pub branches: u64,
    pub tellers_per_branch: u64,
    pub accounts_per_branch: u64,
}

impl TpcbConfig {
    /// pgbench's scale: `scale` branches of 100,000 accounts.
    pub fn with_scale(scale: u64) -> Self {
        TpcbConfig {
            branches: scale.max(1),
            tellers_per_branch: 10,
            accounts_per_branch: 100_000,
        }
    }

    /// `branches` branches sharing `accounts` accounts (at least one each).
    pub fn with_accounts(branches: u64, accounts: u64) -> Self {
        let branches = branches.max(1);
        TpcbConfig {
            accounts_per_branch: accounts.div_ceil(branches).max(1),
            ..Self::with_scale(branches)
        }
    }

    /// Every count at least 1, and the tellers and accounts of all
    /// branches countable (ids are 8 bytes).
    pub fn check(&self) -> BenchResult<()> {
        use crate::driver::out_of_range;
        for (name, n) in [
            ("branches", self.branches),
            ("tellers_per_branch", self.tellers_per_branch),
            ("accounts_per_branch", self.accounts_per_branch),
        ] {
            if n == 0 {
                return Err(out_of_range(name, n, "at least 1"));
            }
        }
        let per_branch = self.tellers_per_branch.max(self.accounts_per_branch);
        if self.branches.checked_mul(per_branch).is_none() {
            return Err(out_of_range(
                "branches",
                self.branches,
                &format!(
                    "at most {} with {per_branch} rows per branch",
                    u64::MAX / per_branch
                ),
            ));
        }
        Ok(())
    }

    pub fn tellers(&self) -> u64 {
        self.branches * self.tellers_per_branch
    }

    pub fn accounts(&self) -> u64 {
        self.branches * self.accounts_per_branch
    }
}

const BRANCHES: &str = "tpcb_branches";
const TELLERS: &str = "tpcb_tellers";
const ACCOUNTS: &str = "tpcb_accounts";
const HISTORY: &str = "tpcb_history";

/// The workload's tables, in [`KvTx`] numbering.
pub const TABLES: &[&str] = &[BRANCHES, TELLERS, ACCOUNTS, HISTORY];
const T_BRANCHES: usize = 0;
const T_TELLERS: usize = 1;
const T_ACCOUNTS: usize = 2;
const T_HISTORY: usize = 3;

fn open_tables(db: &Database) -> BenchResult<Vec<Table>> {
    TABLES
        .iter()
        .map(|name| Ok(db.open_or_create_table(name)?))
        .collect()
}

pub struct Tpcb {
    pub config: TpcbConfig,
    /// [`TABLES`], opened by `setup`.
    tables: Vec<Table>,
    /// Distinguishes this run's history keys from earlier runs' on a
    /// reused database.
    run_nonce: u64,
}

impl Tpcb {
    pub fn new(config: TpcbConfig) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Tpcb {
            config,
            tables: Vec::new(),
            run_nonce: nanos,
        }
    }
}

/// The key of branch, teller or account `i`.
pub fn id(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

/// A branch, teller or account row with `balance` and `filler` bytes.
pub fn row(balance: i64, filler: usize) -> Vec<u8> {
    let mut v = balance.to_le_bytes().to_vec();
    v.resize(8 + filler, b' ');
    v
}

fn balance(v: &[u8]) -> BenchResult<i64> {
    v.get(..8)
        .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
        .ok_or_else(|| BenchError::Verify(format!("a row of {} bytes has no balance", v.len())))
}

impl Workload for Tpcb {
    fn name(&self) -> &'static str {
        "tpcb"
    }

    fn txn_types(&self) -> Vec<&'static str> {
        vec!["tpcb"]
    }

    fn config_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.config).expect("config serializes")
    }

    fn validate(&self, _page_size: usize) -> BenchResult<()> {
        self.config.check()
    }

    fn setup(&mut self, db: &Database, workers: usize) -> BenchResult<Loaded> {
        self.config.check()?;
        let params = self.config_json();
        let reuse = load::check_reuse(db, "tpcb", &params)?;
        let t = open_tables(db)?;
        self.tables = t.clone();
        let c = &self.config;
        if reuse {
            return Ok(Loaded::Existing {
                records: c.accounts(),
            });
        }
        for (table, rows, threads) in [
            (T_BRANCHES, c.branches, 1),
            (T_TELLERS, c.tellers(), 1),
            (T_ACCOUNTS, c.accounts(), workers),
        ] {
            parallel_insert(db, &t[table], rows, threads, |i| {
                (id(i).to_vec(), initial_row(table))
            })?;
        }
        load::record_params(db, "tpcb", &params)?;
        Ok(Loaded::Fresh {
            records: c.accounts(),
        })
    }

    fn worker(&self, worker: usize, seed: u64) -> Box<dyn Worker + '_> {
        assert!(!self.tables.is_empty(), "setup ran before the workers");
        Box::new(TpcbWorker {
            txns: self.txns(worker, seed),
            tables: &self.tables,
        })
    }

    fn verify(&self, db: &Database) -> BenchResult<serde_json::Value> {
        let v = verify(db)?;
        self.check_counts(&v)?;
        Ok(serde_json::to_value(v).expect("serializes"))
    }
}

impl Tpcb {
    /// The transaction generator of worker (or client thread) `worker`,
    /// seeded with `seed`; it needs no database, only [`KvTx`]s to run on.
    pub fn txns(&self, worker: usize, seed: u64) -> TpcbTxns<'_> {
        TpcbTxns {
            config: &self.config,
            rng: SmallRng::seed_from_u64(seed),
            key_prefix: [self.run_nonce.to_be_bytes(), (worker as u64).to_be_bytes()].concat(),
            seq: 0,
        }
    }

    /// The row counts of `v` are this configuration's.
    pub fn check_counts(&self, v: &TpcbCheck) -> BenchResult<()> {
        if v.branches != self.config.branches
            || v.tellers != self.config.tellers()
            || v.accounts != self.config.accounts()
        {
            return Err(BenchError::Verify(format!(
                "expected {} branches, {} tellers, {} accounts; found {v:?}",
                self.config.branches,
                self.config.tellers(),
                self.config.accounts()
            )));
        }
        Ok(())
    }
}

/// The loaded row of a branch, teller or account (table number `table`):
/// balance 0 and pgbench's filler.
pub fn initial_row(table: usize) -> Vec<u8> {
    row(0, if table == T_BRANCHES { 88 } else { 84 })
}

/// The waypoint driver's worker: [`TpcbTxns`] on the database's tables.
struct TpcbWorker<'a> {
    txns: TpcbTxns<'a>,
    tables: &'a [Table],
}

impl Worker for TpcbWorker<'_> {
    fn next(&mut self, tx: &mut Transaction<'_>) -> (usize, Result<(), Error>) {
        (
            0,
            self.txns.run(&mut WaypointTx {
                tx,
                tables: self.tables,
            }),
        )
    }
}

/// One thread's TPC-B transactions.
pub struct TpcbTxns<'a> {
    config: &'a TpcbConfig,
    rng: SmallRng,
    key_prefix: Vec<u8>,
    seq: u64,
}

fn add<T: KvTx + ?Sized>(tx: &mut T, table: usize, key: u64, delta: i64) -> Result<(), T::Error> {
    let Some(mut v) = tx.get_for_update(table, &id(key))? else {
        return Err(tx.missing());
    };
    let Some(old) = v
        .get(..8)
        .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
    else {
        return Err(tx.missing());
    };
    v[..8].copy_from_slice(&(old + delta).to_le_bytes());
    tx.update(table, &id(key), &v)
}

impl TpcbTxns<'_> {
    /// The next transaction's body in `tx` (not its commit).
    pub fn run<T: KvTx + ?Sized>(&mut self, tx: &mut T) -> Result<(), T::Error> {
        let c = self.config;
        let teller = self.rng.gen_range(0..c.tellers());
        let branch = teller / c.tellers_per_branch;
        let account_branch = if c.branches > 1 && self.rng.gen_bool(0.15) {
            let other = self.rng.gen_range(0..c.branches - 1);
            if other >= branch {
                other + 1
            } else {
                other
            }
        } else {
            branch
        };
        let account =
            account_branch * c.accounts_per_branch + self.rng.gen_range(0..c.accounts_per_branch);
        let delta = self.rng.gen_range(-5000..=5000i64);
        self.seq += 1;
        add(tx, T_ACCOUNTS, account, delta)?;
        add(tx, T_TELLERS, teller, delta)?;
        add(tx, T_BRANCHES, branch, delta)?;
        let key = [self.key_prefix.as_slice(), &self.seq.to_be_bytes()].concat();
        let mut h = [teller, branch, account, delta as u64, self.seq]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<u8>>();
        h.resize(h.len() + 22, b' ');
        tx.insert(T_HISTORY, &key, &h)
    }
}

/// What [`verify`] counted.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TpcbCheck {
    pub branches: u64,
    pub tellers: u64,
    pub accounts: u64,
    pub history_rows: u64,
    /// The common sum of balances and history deltas.
    pub balance_sum: i64,
}

/// Check the TPC-B invariant on a quiescent database: the four sums agree.
pub fn verify(db: &Database) -> BenchResult<TpcbCheck> {
    let mut session = db.session();
    check_sums(|table, f| {
        let table = db.table(TABLES[table])?;
        for_each_row(&mut session, &table, f)
    })
}

/// The TPC-B invariant over the rows that `each_row(table, f)` hands to
/// `f` for each table number: the balances of branches, tellers and
/// accounts and the deltas of the history rows have one sum.
pub fn check_sums(
    mut each_row: impl FnMut(usize, &mut RowFn<'_>) -> BenchResult<()>,
) -> BenchResult<TpcbCheck> {
    let mut sum = |table: usize| -> BenchResult<(u64, i64)> {
        let (mut n, mut s) = (0u64, 0i64);
        each_row(table, &mut |_, v| {
            n += 1;
            s += if table == T_HISTORY {
                v.get(24..32)
                    .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
                    .ok_or_else(|| BenchError::Verify("short history row".into()))?
            } else {
                balance(v)?
            };
            Ok(())
        })?;
        Ok((n, s))
    };
    let (branches, b) = sum(T_BRANCHES)?;
    let (tellers, t) = sum(T_TELLERS)?;
    let (accounts, a) = sum(T_ACCOUNTS)?;
    let (history_rows, h) = sum(T_HISTORY)?;
    if b != t || t != a || a != h {
        return Err(BenchError::Verify(format!(
            "TPC-B sums differ: branches {b}, tellers {t}, accounts {a}, history {h}"
        )));
    }
    Ok(TpcbCheck {
        branches,
        tellers,
        accounts,
        history_rows,
        balance_sum: b,
    })
}
