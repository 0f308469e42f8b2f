//! Scan validation against an installing writer (`txn::validate`): a
//! reduced model of the commit locks, the records' TIDs and the order in
//! which a committing scan checks them.
//!
//! Three accounts hold 10 each. A writer transfers 1 from one account to
//! another the way a commit does: lock both stripes, install each record
//! (value and TID change together, under the leaf's latch: one step here),
//! release. An auditor scans all accounts (each record read whole, as a
//! shared leaf latch gives it), sums them, and validates: for every
//! observed record, is its stripe free and its TID unchanged? If
//! validation passes, the sum must be 30.
//!
//! The engine checks the stripes of a scan's observed keys first and
//! re-runs the scan second. The broken variant does it the other way
//! round, as the engine did until a bank audit committed with half a
//! transfer: the writer can install its last record after the re-run
//! read it and release its locks before the stripes are checked.
//! A read-only point read has the same order (stripe, then TID), and the
//! model's per-key variant checks that as well.

use shuttle::sync::atomic::{AtomicU64, Ordering};
use shuttle::thread;
use std::sync::Arc;

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Order {
    /// Every observed stripe, then the re-run of the scan (the engine).
    StripesThenRescan,
    /// Per key: its stripe, then its TID (the engine's point reads).
    PerKeyStripeThenTid,
    /// The re-run of the scan, then every stripe (the old order).
    RescanThenStripes,
    /// Per key: its TID, then its stripe (the old point-read order).
    PerKeyTidThenStripe,
}

const ACCOUNTS: usize = 3;
const INITIAL: u64 = 10;

/// A record: value and TID packed in one word, so an install changes both
/// in one step, as it does under the leaf's exclusive latch.
struct Bank {
    records: Vec<AtomicU64>,
    /// The stripe of each record: 0 free, else the owner.
    stripes: Vec<AtomicU64>,
}

fn pack(value: u64, tid: u64) -> u64 {
    tid << 32 | value
}

fn value(word: u64) -> u64 {
    word & 0xffff_ffff
}

impl Bank {
    fn new() -> Self {
        Bank {
            records: (0..ACCOUNTS)
                .map(|_| AtomicU64::new(pack(INITIAL, 1)))
                .collect(),
            stripes: (0..ACCOUNTS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// A committed transfer of 1 from `from` to `to` with TID `tid`
    /// (owner `me`): stripes in ascending order, installs in key order.
    fn transfer(&self, me: u64, from: usize, to: usize, tid: u64) {
        let mut keys = [from, to];
        keys.sort_unstable();
        for &k in &keys {
            while self.stripes[k]
                .compare_exchange(0, me, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
            {
                thread::yield_now();
            }
        }
        for &k in &keys {
            let old = value(self.records[k].load(Ordering::SeqCst));
            let new = if k == from { old - 1 } else { old + 1 };
            self.records[k].store(pack(new, tid), Ordering::SeqCst);
        }
        for &k in &keys {
            self.stripes[k].store(0, Ordering::SeqCst);
        }
    }

    fn locked(&self, k: usize) -> bool {
        self.stripes[k].load(Ordering::SeqCst) != 0
    }

    /// A read-only audit in key order (or reverse); `Some(sum)` if it
    /// validated.
    fn audit(&self, order: Order, reverse: bool) -> Option<u64> {
        let keys: Vec<usize> = if reverse {
            (0..ACCOUNTS).rev().collect()
        } else {
            (0..ACCOUNTS).collect()
        };
        let observed: Vec<u64> = keys
            .iter()
            .map(|&k| self.records[k].load(Ordering::SeqCst))
            .collect();
        let rescan = |bank: &Bank| {
            keys.iter()
                .map(|&k| bank.records[k].load(Ordering::SeqCst))
                .collect::<Vec<_>>()
                == observed
        };
        let valid = match order {
            Order::StripesThenRescan => keys.iter().all(|&k| !self.locked(k)) && rescan(self),
            Order::RescanThenStripes => rescan(self) && keys.iter().all(|&k| !self.locked(k)),
            Order::PerKeyStripeThenTid => keys
                .iter()
                .zip(&observed)
                .all(|(&k, &o)| !self.locked(k) && self.records[k].load(Ordering::SeqCst) == o),
            Order::PerKeyTidThenStripe => keys
                .iter()
                .zip(&observed)
                .all(|(&k, &o)| self.records[k].load(Ordering::SeqCst) == o && !self.locked(k)),
        };
        valid.then(|| observed.iter().map(|&w| value(w)).sum())
    }
}

/// Two writers (transfers 0 -> 2 and 2 -> 1: one whose install order
/// matches a forward scan, one whose first install is the key a forward
/// scan reads last) and two auditors, one forward, one backward.
pub fn model(order: Order) {
    let bank = Arc::new(Bank::new());
    let writers: Vec<_> = [(1u64, 0usize, 2usize), (2, 2, 1)]
        .into_iter()
        .map(|(me, from, to)| {
            let bank = Arc::clone(&bank);
            thread::spawn(move || bank.transfer(me, from, to, 10 + me))
        })
        .collect();
    let auditors: Vec<_> = [false, true]
        .into_iter()
        .map(|reverse| {
            let bank = Arc::clone(&bank);
            thread::spawn(move || {
                if let Some(sum) = bank.audit(order, reverse) {
                    assert_eq!(
                        sum,
                        ACCOUNTS as u64 * INITIAL,
                        "an audit validated with half a transfer ({order:?})"
                    );
                }
            })
        })
        .collect();
    for h in writers.into_iter().chain(auditors) {
        h.join().unwrap();
    }
}
