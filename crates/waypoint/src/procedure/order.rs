//! The serial order of a scheme that logs calls (seed 001 §II-B): one
//! lock per partition. A single-partition call holds its partition's
//! lock while it runs, commits and appends its log record, so the calls
//! of one partition run one after another and reach the log in the order
//! they ran; a multi-partition call takes every partition's lock, in
//! partition order, so each partition reaches the same point of its order
//! before it runs and continues after it.
//!
//! Who runs a call: by default the calling thread, under its
//! partition's lock; with `CommandOptions::executors`, an executor thread
//! per partition that takes the partition's calls from a queue
//! (`executor`, VoltDB's sites), still under the same lock, so the order
//! the log records is made the same way either way.
//!
//! Invariant: while a call holds partition `p`, no other call of `p` runs
//! or appends; partitions are locked in ascending order (no deadlock).

use super::executor::Executors;
use super::Partition;
use parking_lot::{Mutex, MutexGuard};
use std::sync::OnceLock;

/// The partition routing key `key` runs in among `partitions` (at least
/// 1): the one rule, used by the order and by parallel replay, which
/// routes by the count a logged call ran under.
pub fn partition_of(key: u64, partitions: usize) -> usize {
    (key % partitions.max(1) as u64) as usize
}

/// The partitions' locks (see the module documentation).
pub struct SerialOrder {
    partitions: Vec<Mutex<()>>,
    /// The executor threads, once started (`CommandOptions::executors`).
    executors: OnceLock<Executors>,
}

/// The partitions a running call holds; released on drop.
pub(crate) struct SerialGuard<'a> {
    _held: Vec<MutexGuard<'a, ()>>,
}

impl SerialOrder {
    /// `partitions` at least 1.
    pub(crate) fn new(partitions: usize) -> Self {
        assert!(partitions >= 1, "at least one partition");
        SerialOrder {
            partitions: (0..partitions).map(|_| Mutex::new(())).collect(),
            executors: OnceLock::new(),
        }
    }

    /// Hand calls to these executors from now on (one per partition;
    /// set once).
    pub(crate) fn set_executors(&self, executors: Executors) {
        assert_eq!(
            executors.len(),
            self.partitions.len(),
            "one executor per partition"
        );
        if let Err(executors) = self.executors.set(executors) {
            executors.stop();
            panic!("the executors of a serial order are started once");
        }
    }

    /// The executors, if calls run on them.
    pub(crate) fn executors(&self) -> Option<&Executors> {
        self.executors.get()
    }

    /// Stop the executors (if any): queued calls are answered `Closed`.
    pub(crate) fn stop_executors(&self) {
        if let Some(executors) = self.executors.get() {
            executors.stop();
        }
    }

    pub fn partitions(&self) -> usize {
        self.partitions.len()
    }

    /// The partition a key runs in.
    pub fn partition_of(&self, key: u64) -> usize {
        partition_of(key, self.partitions.len())
    }

    /// Wait for and hold what a call of `partition` runs under.
    pub(crate) fn enter(&self, partition: Partition) -> SerialGuard<'_> {
        let held = match partition {
            Partition::Key(key) => vec![self.partitions[self.partition_of(key)].lock()],
            Partition::All => self.partitions.iter().map(|p| p.lock()).collect(),
        };
        SerialGuard { _held: held }
    }
}

impl std::fmt::Debug for SerialOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SerialOrder({} partitions)", self.partitions.len())
    }
}
