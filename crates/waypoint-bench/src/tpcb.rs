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

use crate::error::{BenchError, BenchResult};
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

#[derive(Clone)]
struct Tables {
    branches: Table,
    tellers: Table,
    accounts: Table,
    history: Table,
}

impl Tables {
    fn open(db: &Database) -> BenchResult<Self> {
        Ok(Tables {
            branches: db.open_or_create_table(BRANCHES)?,
            tellers: db.open_or_create_table(TELLERS)?,
            accounts: db.open_or_create_table(ACCOUNTS)?,
            history: db.open_or_create_table(HISTORY)?,
        })
    }
}

pub struct Tpcb {
    pub config: TpcbConfig,
    tables: Option<Tables>,
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
            tables: None,
            run_nonce: nanos,
        }
    }
}

fn id(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn row(balance: i64, filler: usize) -> Vec<u8> {
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
        let t = Tables::open(db)?;
        self.tables = Some(t.clone());
        let c = &self.config;
        if reuse {
            return Ok(Loaded::Existing {
                records: c.accounts(),
            });
        }
        parallel_insert(db, &t.branches, c.branches, 1, |i| {
            (id(i).to_vec(), row(0, 88))
        })?;
        parallel_insert(db, &t.tellers, c.tellers(), 1, |i| {
            (id(i).to_vec(), row(0, 84))
        })?;
        parallel_insert(db, &t.accounts, c.accounts(), workers, |i| {
            (id(i).to_vec(), row(0, 84))
        })?;
        load::record_params(db, "tpcb", &params)?;
        Ok(Loaded::Fresh {
            records: c.accounts(),
        })
    }

    fn worker(&self, worker: usize, seed: u64) -> Box<dyn Worker + '_> {
        Box::new(TpcbWorker {
            config: &self.config,
            tables: self.tables.as_ref().expect("setup ran"),
            rng: SmallRng::seed_from_u64(seed),
            key_prefix: [self.run_nonce.to_be_bytes(), (worker as u64).to_be_bytes()].concat(),
            seq: 0,
        })
    }

    fn verify(&self, db: &Database) -> BenchResult<serde_json::Value> {
        let v = verify(db)?;
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
        Ok(serde_json::to_value(v).expect("serializes"))
    }
}

struct TpcbWorker<'a> {
    config: &'a TpcbConfig,
    tables: &'a Tables,
    rng: SmallRng,
    key_prefix: Vec<u8>,
    seq: u64,
}

fn add(tx: &mut Transaction<'_>, table: &Table, key: u64, delta: i64) -> Result<(), Error> {
    let mut v = tx.get(table, &id(key))?.ok_or(Error::KeyNotFound)?;
    let old = i64::from_le_bytes(v[..8].try_into().expect("8-byte balance"));
    v[..8].copy_from_slice(&(old + delta).to_le_bytes());
    tx.update(table, &id(key), &v)
}

impl Worker for TpcbWorker<'_> {
    fn next(&mut self, tx: &mut Transaction<'_>) -> (usize, Result<(), Error>) {
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
        let t = self.tables;
        let body = (|| {
            add(tx, &t.accounts, account, delta)?;
            add(tx, &t.tellers, teller, delta)?;
            add(tx, &t.branches, branch, delta)?;
            let key = [self.key_prefix.as_slice(), &self.seq.to_be_bytes()].concat();
            let mut h = [teller, branch, account, delta as u64, self.seq]
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect::<Vec<u8>>();
            h.resize(h.len() + 22, b' ');
            tx.insert(&t.history, &key, &h)
        })();
        (0, body)
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
    let mut sum = |name: &str, history: bool| -> BenchResult<(u64, i64)> {
        let table = db.table(name)?;
        let (mut n, mut s) = (0u64, 0i64);
        for_each_row(&mut session, &table, |_, v| {
            n += 1;
            s += if history {
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
    let (branches, b) = sum(BRANCHES, false)?;
    let (tellers, t) = sum(TELLERS, false)?;
    let (accounts, a) = sum(ACCOUNTS, false)?;
    let (history_rows, h) = sum(HISTORY, true)?;
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
