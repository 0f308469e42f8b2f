//! Stored procedures (seed 001 §II-A, VoltDB): named transaction bodies
//! registered when the database is opened (`Options::procedures`), each
//! taking typed parameters that are encoded (serde, postcard) so a
//! scheme can log the call instead of its writes. `Session::call` runs
//! one in a transaction and commits it (`call`); the commit hook sees
//! the call (`CommitView::procedure`: name and encoded parameters).
//!
//! A procedure must be deterministic given its parameters: the `command`
//! scheme recovers by running the logged calls again, so time,
//! randomness and generated ids must come in as parameters, and a body
//! may read and write only the database (no other state that changes
//! between runs). A procedure that returns an error is rolled back and
//! logged nowhere.
//!
//! Each procedure says which partition a call runs in ([`Partition`]):
//! the partition of a key taken from its parameters, or all of them.
//! Under a scheme with a serial order (`command`) a call holds its
//! partitions while it runs and logs ([`SerialOrder`]); under the others
//! calls run concurrently like any transaction (OCC), and the partition
//! is not used.
//!
//! The registry also holds the key extractors of secondary indexes
//! ([`Procedures::index`]): a scheme that re-executes calls at open
//! (`command`) needs them before the open returns, since a replayed call
//! maintains and reads its table's indexes as the original did.
//!
//! Invariant: a call's parameters decode as exactly the procedure's
//! parameter type (no bytes left over), or the call is refused with
//! `Error::ProcedureParams` before anything runs.

mod call;
pub(crate) mod executor;
mod order;
pub(crate) mod partition;
#[cfg(test)]
mod tests;

pub(crate) use order::partition_of;
pub use executor::{PendingCall, EXECUTOR_QUEUE_LIMIT};
pub use order::SerialOrder;
pub use partition::PartitionKey;

use crate::catalog::KeyExtractor;
use crate::error::{Error, Result};
use crate::txn::Transaction;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::any::Any;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::Arc;

/// What a procedure returned, before `Session::call` gives it its type.
pub type Output = Box<dyn Any + Send>;

/// Where a call runs under a scheme that executes calls serially per
/// partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Partition {
    /// The partition of this key: `key % partitions`.
    Key(u64),
    /// Every partition: the call waits for each partition's earlier calls
    /// and runs alone (a multi-partition transaction).
    All,
}

/// The longest procedure name, in bytes.
pub const MAX_NAME_LEN: usize = 128;

/// The most bytes a call's encoded parameters may take (a command log
/// record holds them whole, and a log record is at most 16 MiB).
pub const MAX_PARAMS_LEN: usize = 1 << 20;

/// A call with its parameters decoded, ready to run.
pub(crate) trait Decoded: Send {
    fn partition(&self) -> Partition;
    fn run(&self, tx: &mut Transaction<'_>) -> Result<Output>;
}

struct Bound<P, R, K, F> {
    params: P,
    route: Arc<K>,
    body: Arc<F>,
    _output: PhantomData<fn() -> R>,
}

impl<P, R, K, F> Decoded for Bound<P, R, K, F>
where
    P: Send,
    R: Send + 'static,
    K: Fn(&P) -> Partition + Send + Sync,
    F: Fn(&mut Transaction<'_>, &P) -> Result<R> + Send + Sync,
{
    fn partition(&self) -> Partition {
        (self.route)(&self.params)
    }

    fn run(&self, tx: &mut Transaction<'_>) -> Result<Output> {
        (self.body)(tx, &self.params).map(|r| Box::new(r) as Output)
    }
}

type Decoder = dyn Fn(&[u8]) -> std::result::Result<Box<dyn Decoded>, String> + Send + Sync;

/// One registered procedure.
pub(crate) struct Procedure {
    pub name: Arc<str>,
    decode: Box<Decoder>,
}

impl Procedure {
    /// The call of this procedure with `params`, decoded.
    pub fn decode(&self, params: &[u8]) -> Result<Box<dyn Decoded>> {
        if params.len() > MAX_PARAMS_LEN {
            return Err(Error::ProcedureParams {
                name: self.name.to_string(),
                detail: format!(
                    "{} bytes encoded, more than the {MAX_PARAMS_LEN} a call may carry",
                    params.len()
                ),
            });
        }
        (self.decode)(params).map_err(|detail| Error::ProcedureParams {
            name: self.name.to_string(),
            detail,
        })
    }
}

/// What a caught panic said (its message, if it was a string).
pub(crate) fn panic_text(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// Encode a call's parameters as procedures decode them (postcard).
pub fn encode_params<P: Serialize + ?Sized>(name: &str, params: &P) -> Result<Vec<u8>> {
    postcard::to_allocvec(params).map_err(|e| Error::ProcedureParams {
        name: name.into(),
        detail: format!("they do not encode: {e}"),
    })
}

fn decode_params<P: DeserializeOwned>(bytes: &[u8]) -> std::result::Result<P, String> {
    match postcard::take_from_bytes::<P>(bytes) {
        Ok((p, [])) => Ok(p),
        Ok((_, rest)) => Err(format!(
            "{} bytes left over after the parameters",
            rest.len()
        )),
        Err(e) => Err(format!(
            "they do not decode as {}: {e}",
            std::any::type_name::<P>()
        )),
    }
}

/// The stored procedures a database is opened with, by name. Cheap to
/// clone.
///
/// ```
/// use waypoint::{Database, Options, Procedures, Result, Transaction};
/// let procedures = Procedures::new()
///     .single("deposit", |p: &(u64, u64)| p.0, |tx: &mut Transaction<'_>, p: &(u64, u64)| {
///         let accounts = tx.table("accounts")?;
///         let key = p.0.to_be_bytes();
///         let old = tx.get(&accounts, &key)?.map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap_or_default()));
///         tx.upsert(&accounts, &key, &(old + p.1).to_be_bytes())?;
///         Ok(old + p.1)
///     })
///     .unwrap();
/// let dir = tempfile::tempdir().unwrap();
/// let db = Database::open(dir.path(), Options { procedures, ..Options::default() }).unwrap();
/// db.create_table("accounts").unwrap();
/// let mut session = db.session();
/// let balance: u64 = session.call("deposit", &(7u64, 100u64)).unwrap();
/// assert_eq!(balance, 100);
/// ```
#[derive(Clone, Default)]
pub struct Procedures {
    by_name: Arc<BTreeMap<String, Arc<Procedure>>>,
    /// Secondary indexes' key extractors, by index name.
    extractors: Arc<BTreeMap<String, KeyExtractor>>,
    /// Tables' partitioning keys, by table name (`partition`).
    partition_keys: Arc<BTreeMap<String, PartitionKey>>,
    /// Tables that calls only insert into, each key once, and never read
    /// (`insert_only`).
    insert_only: Arc<std::collections::BTreeSet<String>>,
}

impl std::fmt::Debug for Procedures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Procedures")
            .field("procedures", &self.by_name.keys().collect::<Vec<_>>())
            .field("indexes", &self.extractors.keys().collect::<Vec<_>>())
            .field(
                "partition_keys",
                &self.partition_keys.keys().collect::<Vec<_>>(),
            )
            .field("insert_only", &self.insert_only)
            .finish()
    }
}

impl Procedures {
    pub fn new() -> Self {
        Procedures::default()
    }

    /// Register a single-partition procedure: `key` picks the partition
    /// from the parameters (`key % partitions`), `body` runs the call.
    pub fn single<P, R, K, F>(self, name: &str, key: K, body: F) -> Result<Self>
    where
        P: DeserializeOwned + Send + 'static,
        R: Send + 'static,
        K: Fn(&P) -> u64 + Send + Sync + 'static,
        F: Fn(&mut Transaction<'_>, &P) -> Result<R> + Send + Sync + 'static,
    {
        self.add(name, move |p: &P| Partition::Key(key(p)), body)
    }

    /// Register a multi-partition procedure: each call runs alone, after
    /// every partition's earlier calls.
    pub fn multi<P, R, F>(self, name: &str, body: F) -> Result<Self>
    where
        P: DeserializeOwned + Send + 'static,
        R: Send + 'static,
        F: Fn(&mut Transaction<'_>, &P) -> Result<R> + Send + Sync + 'static,
    {
        self.add(name, |_: &P| Partition::All, body)
    }

    /// Register a procedure whose partition `route` computes.
    pub fn add<P, R, K, F>(mut self, name: &str, route: K, body: F) -> Result<Self>
    where
        P: DeserializeOwned + Send + 'static,
        R: Send + 'static,
        K: Fn(&P) -> Partition + Send + Sync + 'static,
        F: Fn(&mut Transaction<'_>, &P) -> Result<R> + Send + Sync + 'static,
    {
        if name.is_empty() || name.len() > MAX_NAME_LEN {
            return Err(Error::InvalidOptions(format!(
                "procedure name {name:?} is out of range: 1 to {MAX_NAME_LEN} bytes"
            )));
        }
        if self.by_name.contains_key(name) {
            return Err(Error::InvalidOptions(format!(
                "procedure {name:?} is registered twice"
            )));
        }
        let (route, body) = (Arc::new(route), Arc::new(body));
        let decode = move |bytes: &[u8]| {
            decode_params::<P>(bytes).map(|params| {
                Box::new(Bound {
                    params,
                    route: Arc::clone(&route),
                    body: Arc::clone(&body),
                    _output: PhantomData::<fn() -> R>,
                }) as Box<dyn Decoded>
            })
        };
        let procedure = Procedure {
            name: name.into(),
            decode: Box::new(decode),
        };
        Arc::make_mut(&mut self.by_name).insert(name.to_string(), Arc::new(procedure));
        Ok(self)
    }

    /// Register the key extractor of secondary index `name`. Under a
    /// scheme that re-executes calls (`command`) an index can be created
    /// only when its extractor is registered (that one is used, whatever
    /// `create_index` is given), and the open binds every registered
    /// extractor to its index before replaying, so the replayed calls
    /// see the indexes the original ones saw.
    pub fn index(mut self, name: &str, extractor: KeyExtractor) -> Result<Self> {
        if self.extractors.contains_key(name) {
            return Err(Error::InvalidOptions(format!(
                "index {name:?} has its extractor registered twice"
            )));
        }
        Arc::make_mut(&mut self.extractors).insert(name.to_string(), extractor);
        Ok(self)
    }

    /// Register table `table`'s partitioning key: its row with primary
    /// key `k` is in the partition of routing key `key(k)`, the number
    /// single-partition procedures are routed by. Under a scheme with a
    /// serial order (`command`), a single-partition call that reads,
    /// scans or writes a row of such a table in another partition is
    /// refused (`Error::ProcedurePartition`; see `procedure::partition`
    /// for what is not checked). Tables without one are not checked.
    pub fn partition_key(
        mut self,
        table: &str,
        key: impl Fn(&[u8]) -> u64 + Send + Sync + 'static,
    ) -> Result<Self> {
        if self.partition_keys.contains_key(table) || self.insert_only.contains(table) {
            return Err(Error::InvalidOptions(format!(
                "table {table:?} has its partitioning key registered twice"
            )));
        }
        Arc::make_mut(&mut self.partition_keys).insert(table.to_string(), Arc::new(key));
        Ok(self)
    }

    /// Declare that calls only insert rows into `table`, each under a key
    /// no other call inserts, and never read its rows (an audit or
    /// acknowledgement table). Its rows then belong to no partition: a
    /// single-partition call that inserts one stays single-partition and,
    /// under `command`, replays beside other partitions' calls instead of
    /// as a barrier, since inserts of different keys commute. A call that
    /// reads a row of the table it did not write itself is refused
    /// (`Error::Unsupported`); that keys are unique and rows never
    /// updated or deleted by calls is the caller's promise.
    pub fn insert_only(mut self, table: &str) -> Result<Self> {
        if self.partition_keys.contains_key(table) || self.insert_only.contains(table) {
            return Err(Error::InvalidOptions(format!(
                "table {table:?} is registered twice (as partitioned or insert-only)"
            )));
        }
        Arc::make_mut(&mut self.insert_only).insert(table.to_string());
        Ok(self)
    }

    /// The extractor registered for index `name`.
    pub(crate) fn extractor(&self, name: &str) -> Option<&KeyExtractor> {
        self.extractors.get(name)
    }

    /// The registered names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The procedure `name`, or `UnknownProcedure`.
    pub(crate) fn get(&self, name: &str) -> Result<&Arc<Procedure>> {
        self.by_name
            .get(name)
            .ok_or_else(|| Error::UnknownProcedure { name: name.into() })
    }
}
