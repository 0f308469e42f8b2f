//! RocksDB as a [`KvEngine`] (feature `rocksdb`: the `rocksdb` crate
//! linked against the system's librocksdb): a pessimistic
//! `TransactionDB`, the workload's tables as a one-byte key prefix, a
//! transaction per workload transaction.
//!
//! Invariant: at [`Durability::Durable`] every commit's write-ahead-log
//! write is synced (`WriteOptions::set_sync(true)`) before `commit`
//! returns; at [`Durability::Relaxed`] it is written to the OS but not
//! synced, so a power loss can lose the last commits (a process crash
//! cannot). Reads that a transaction writes back take the row's lock
//! (`get_for_update`), so read-modify-writes are serializable; a lock
//! wait that times out or a detected deadlock is an abort.

use super::{Body, Durability, KvEngine, KvError, KvHandle};
use crate::driver::DriverConfig;
use crate::error::{BenchError, BenchResult};
use crate::kv::KvTx;
use rocksdb::{
    Direction, ErrorKind, IteratorMode, Options, ReadOptions, Transaction, TransactionDB,
    TransactionDBOptions, TransactionOptions, WriteOptions,
};
use std::path::Path;

pub struct RocksKv {
    db: TransactionDB,
    durability: Durability,
    tables: usize,
}

/// Milliseconds a transaction waits for a row lock before it aborts.
const LOCK_TIMEOUT_MS: i64 = 1000;

fn kv_error(what: &str, e: rocksdb::Error) -> KvError {
    match e.kind() {
        ErrorKind::Busy | ErrorKind::TimedOut | ErrorKind::TryAgain | ErrorKind::Aborted => {
            KvError::Abort(format!("rocksdb: {what}: {e}"))
        }
        _ => KvError::Fatal(format!("rocksdb: {what}: {e}")),
    }
}

impl RocksKv {
    pub fn open(
        dir: &Path,
        tables: &[&str],
        durability: Durability,
        config: &DriverConfig,
    ) -> BenchResult<Self> {
        assert!(tables.len() <= 256, "a table number is one key byte");
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.increase_parallelism(config.workers.max(2) as i32);
        // The same memory as waypoint's buffer pool, as block cache.
        let mut table = rocksdb::BlockBasedOptions::default();
        let cache = rocksdb::Cache::new_lru_cache(config.buffer_bytes)
            .map_err(|e| BenchError::Peer(format!("rocksdb: a block cache: {e}")))?;
        table.set_block_cache(&cache);
        opts.set_block_based_table_factory(&table);
        let mut txn = TransactionDBOptions::default();
        txn.set_txn_lock_timeout(LOCK_TIMEOUT_MS);
        let db = TransactionDB::open(&opts, &txn, dir.join("rocksdb"))
            .map_err(|e| BenchError::Peer(format!("rocksdb: opening {}: {e}", dir.display())))?;
        Ok(RocksKv {
            db,
            durability,
            tables: tables.len(),
        })
    }
}

impl KvEngine for RocksKv {
    fn handle(&self) -> BenchResult<Box<dyn KvHandle + '_>> {
        let mut write = WriteOptions::default();
        write.set_sync(self.durability == Durability::Durable);
        let mut txn = TransactionOptions::default();
        txn.set_deadlock_detect(true);
        Ok(Box::new(Handle {
            db: &self.db,
            write,
            txn,
            tables: self.tables,
        }))
    }

    fn durability(&self) -> String {
        match self.durability {
            Durability::Durable => {
                "durable: RocksDB TransactionDB, WAL synced at every commit (sync=true)".into()
            }
            Durability::Relaxed => {
                "relaxed: RocksDB TransactionDB, WAL written but not synced at commit \
                 (sync=false; a power loss loses the last commits, a process crash does not)"
                    .into()
            }
        }
    }

    fn close(self: Box<Self>) -> BenchResult<()> {
        // Dropping the database closes it (the crate has no fallible
        // close); a relaxed run's last commits are in the OS's cache.
        drop(self);
        Ok(())
    }
}

struct Handle<'a> {
    db: &'a TransactionDB,
    write: WriteOptions,
    txn: TransactionOptions,
    tables: usize,
}

struct Tx<'a, 'db> {
    txn: &'a Transaction<'db, TransactionDB>,
}

fn prefixed(table: usize, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.push(table as u8);
    k.extend_from_slice(key);
    k
}

impl KvTx for Tx<'_, '_> {
    type Error = KvError;

    fn get(&mut self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        self.txn
            .get(prefixed(table, key))
            .map_err(|e| kv_error("get", e))
    }

    fn get_for_update(&mut self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        self.txn
            .get_for_update(prefixed(table, key), true)
            .map_err(|e| kv_error("get_for_update", e))
    }

    fn insert(&mut self, table: usize, key: &[u8], value: &[u8]) -> Result<(), KvError> {
        if self.get_for_update(table, key)?.is_some() {
            return Err(KvError::Abort(
                "rocksdb: insert of a row that exists".into(),
            ));
        }
        self.txn
            .put(prefixed(table, key), value)
            .map_err(|e| kv_error("put", e))
    }

    fn update(&mut self, table: usize, key: &[u8], value: &[u8]) -> Result<(), KvError> {
        if self.get_for_update(table, key)?.is_none() {
            return Err(self.missing());
        }
        self.txn
            .put(prefixed(table, key), value)
            .map_err(|e| kv_error("put", e))
    }

    fn scan(
        &mut self,
        table: usize,
        from: &[u8],
        len: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, KvError> {
        let start = prefixed(table, from);
        let mode = IteratorMode::From(&start, Direction::Forward);
        let mut rows = Vec::new();
        for item in self.txn.iterator_opt(mode, ReadOptions::default()) {
            let (k, v) = item.map_err(|e| kv_error("scan", e))?;
            if rows.len() >= len || k.first() != Some(&(table as u8)) {
                break;
            }
            rows.push((k[1..].to_vec(), v.to_vec()));
        }
        Ok(rows)
    }

    fn missing(&self) -> KvError {
        KvError::Abort("rocksdb: a row the transaction needs is missing".into())
    }
}

impl KvHandle for Handle<'_> {
    fn transact(&mut self, body: &mut Body<'_>) -> Result<(), KvError> {
        debug_assert!(self.tables <= 256);
        let txn = self.db.transaction_opt(&self.write, &self.txn);
        match body(&mut Tx { txn: &txn }) {
            Ok(()) => txn.commit().map_err(|e| kv_error("commit", e)),
            Err(e) => {
                txn.rollback().map_err(|e| kv_error("rollback", e))?;
                Err(e)
            }
        }
    }
}
