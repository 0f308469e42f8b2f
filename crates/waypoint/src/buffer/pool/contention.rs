//! Which trees the threads fight over: optimistic accesses tried again
//! (a descent restarted, a leaf read that failed validation, a leaf
//! upgrade or share refused) and optimistic reads that waited for a page
//! held exclusively, counted by the root page of the tree they were in.
//! Issue 32 asks which shared pages stop TPC-C scaling on many cores;
//! these counts name the trees (the warehouse and district rows every
//! transaction writes are the suspects). The engine's own threads hold
//! pages too: a page being written out (shared), evicted or loaded
//! (exclusive) also sends a worker round again, so a tree read by one
//! worker alone can show a few. Structure modifications' exclusive
//! latches and scans' key sampling are not counted.
//!
//! Counting must not itself be the shared write it looks for: it happens
//! only on the retry and wait paths, and each thread counts in a stripe of
//! its own (threads beyond [`STRIPES`] share), each stripe on its own
//! cache line. The pool carries the counts because every tree operation
//! has the pool at hand; `btree` decides what counts.

use crate::buffer::PageId;
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Stripes of counts: up to this many threads count without sharing a
/// cache line.
const STRIPES: usize = 64;

/// Retries and waits of one tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TreeContention {
    /// Optimistic accesses tried again after a failed version check.
    pub retries: u64,
    /// Optimistic reads that found the page held exclusively (by a
    /// writer, or by eviction or a load) and waited.
    pub waits: u64,
}

/// One stripe's counts, by tree root.
type Stripe = CachePadded<Mutex<FxHashMap<PageId, TreeContention>>>;

pub(crate) struct Contention {
    stripes: Box<[Stripe]>,
}

/// This thread's stripe, numbered in the order threads first count.
fn stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    STRIPE.with(|s| *s)
}

impl Contention {
    pub(crate) fn new() -> Self {
        Contention {
            stripes: (0..STRIPES).map(|_| Default::default()).collect(),
        }
    }

    fn note(&self, root: PageId, count: impl FnOnce(&mut TreeContention)) {
        count(self.stripes[stripe()].lock().entry(root).or_default());
    }

    /// An optimistic access in the tree at `root` is tried again.
    pub(crate) fn retry(&self, root: PageId) {
        self.note(root, |c| c.retries += 1);
    }

    /// An optimistic read in the tree at `root` waits for a writer.
    pub(crate) fn wait(&self, root: PageId) {
        self.note(root, |c| c.waits += 1);
    }

    /// Drop the counts of the tree at `root`.
    pub(crate) fn forget(&self, root: PageId) {
        for stripe in self.stripes.iter() {
            stripe.lock().remove(&root);
        }
    }

    /// The counts so far, by tree root (not a snapshot: counts may land
    /// meanwhile).
    pub(crate) fn by_root(&self) -> FxHashMap<PageId, TreeContention> {
        let mut out: FxHashMap<PageId, TreeContention> = FxHashMap::default();
        for stripe in self.stripes.iter() {
            for (&root, c) in stripe.lock().iter() {
                let total = out.entry(root).or_default();
                total.retries += c.retries;
                total.waits += c.waits;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_many_threads_add_up_by_tree() {
        let c = Contention::new();
        std::thread::scope(|s| {
            for t in 0..(STRIPES as u64 + 6) {
                let c = &c;
                s.spawn(move || {
                    for _ in 0..10 {
                        c.retry(1);
                        c.wait(2 + t % 2);
                    }
                });
            }
        });
        let by_root = c.by_root();
        let n = STRIPES as u64 + 6;
        assert_eq!(by_root[&1], TreeContention { retries: 10 * n, waits: 0 });
        assert_eq!(by_root[&2].waits + by_root[&3].waits, 10 * n);
        assert_eq!(by_root[&2].waits, 10 * n.div_ceil(2));
    }
}
