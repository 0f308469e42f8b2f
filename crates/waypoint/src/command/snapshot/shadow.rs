//! The copy-on-write shadow of a snapshot in progress (seed 001 §II-C1):
//! the pre-image, at the snapshot's point, of every row a call changes
//! after the point, for the writer to serialise instead of what the tree
//! holds by the time the writer reaches the row.
//!
//! Registration is `SessionLog::before_install`: a committing call reports
//! each key it writes, with the image it read under the key's write lock,
//! after its images are read and before any placeholder insert or
//! install touches a tree. The first registration of a key wins: it is the
//! image at the point, since every install after the point registered
//! first. A registration by a call that then aborts is harmless: it is
//! still the image at the point, and the tree keeps it too.
//!
//! Why the writer can never see a post-point value without its shadow:
//! the snapshot becomes active (`begin`) while every partition lock is
//! held, and each call registers while holding its partition's lock, so
//! every call that commits after the point sees it active; the call
//! registers before it latches a leaf to change it, and the writer reads a
//! leaf under a shared latch and only then looks in the shadow. So if the
//! writer read a changed row, the change's install released the leaf's
//! latch before the writer's read took it, the registration came before
//! that install, and the writer's later look finds it. A key the writer
//! did not find in the tree (deleted after the point) is in the shadow
//! for the same reason, and a row created after the point has a shadow
//! saying "absent" (its placeholder is skipped, and its committed row
//! too).
//!
//! Keys the writer has passed are not kept (VoltDB's snapshots skip them
//! too, §II-C1): once the writer has written a batch, which covers the
//! key range (after, upto] of its table, from the tree and then from the
//! shadow, that range of the file is final, so the writer marks it passed
//! (`pass`): its pre-images are dropped, and a later change to a key in it
//! registers nothing. A registration that raced the mark only adds a
//! pre-image the writer never reads again. So the shadow holds the rows
//! changed ahead of the writer, not every row changed while it runs.
//!
//! Invariant: while active, the shadow holds for each key changed since
//! the point and not passed by the writer exactly its image at the point
//! (`None`: absent).

use crate::ids::Tid;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A row's image at the point: (TID, value), or absent.
pub(crate) type PreImage = Option<(Tid, Vec<u8>)>;

/// How far the writer has written a table.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Passed {
    /// Every key up to this one, inclusive.
    Upto(Vec<u8>),
    /// The whole table.
    All,
}

impl Passed {
    fn covers(&self, key: &[u8]) -> bool {
        match self {
            Passed::Upto(upto) => key <= upto.as_slice(),
            Passed::All => true,
        }
    }
}

#[derive(Default)]
struct Rows {
    images: HashMap<u32, BTreeMap<Vec<u8>, PreImage>>,
    passed: HashMap<u32, Passed>,
}

/// The shadow map of the snapshot being written (see the module header).
#[derive(Default)]
pub(crate) struct Shadow {
    active: AtomicBool,
    rows: Mutex<Rows>,
    /// Pre-images kept for the snapshot in progress.
    pub registered: AtomicU64,
    /// Test-only: register nothing, so the writer sees post-point values.
    pub broken: AtomicBool,
}

impl Shadow {
    /// Start keeping pre-images: only with every partition lock held.
    pub fn begin(&self) {
        *self.rows.lock() = Rows::default();
        self.registered.store(0, Ordering::Relaxed);
        self.active.store(true, Ordering::Release);
    }

    /// Stop keeping them and forget them (the writer is done).
    pub fn end(&self) {
        self.active.store(false, Ordering::Release);
        *self.rows.lock() = Rows::default();
    }

    /// A call is about to change `key` of `table`, whose image is
    /// `current`.
    pub fn register(&self, table: u32, key: &[u8], current: Option<(Tid, &[u8])>) {
        if !self.active.load(Ordering::Acquire) || self.broken.load(Ordering::Relaxed) {
            return;
        }
        let mut rows = self.rows.lock();
        if rows.passed.get(&table).is_some_and(|p| p.covers(key)) {
            return;
        }
        let table = rows.images.entry(table).or_default();
        if !table.contains_key(key) {
            table.insert(key.to_vec(), current.map(|(t, v)| (t, v.to_vec())));
            self.registered.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The pre-images of `table`'s keys in (`after`, `upto`], in key order.
    pub fn range(
        &self,
        table: u32,
        after: Option<&[u8]>,
        upto: Option<&[u8]>,
    ) -> Vec<(Vec<u8>, PreImage)> {
        let rows = self.rows.lock();
        let Some(t) = rows.images.get(&table) else {
            return Vec::new();
        };
        let lo = after.map_or(Bound::Unbounded, Bound::Excluded);
        let hi = upto.map_or(Bound::Unbounded, Bound::Included);
        t.range::<[u8], _>((lo, hi))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The writer has written `table`'s keys up to `upto` inclusive
    /// (`None`: all of them): their pre-images go, and later changes to
    /// them are not kept.
    pub fn pass(&self, table: u32, upto: Option<&[u8]>) {
        let mut rows = self.rows.lock();
        match upto {
            Some(upto) => {
                if let Some(t) = rows.images.get_mut(&table) {
                    // Keep the keys after `upto`.
                    let mut ahead = t.split_off(upto);
                    ahead.remove(upto);
                    *t = ahead;
                }
                rows.passed.insert(table, Passed::Upto(upto.to_vec()));
            }
            None => {
                rows.images.remove(&table);
                rows.passed.insert(table, Passed::All);
            }
        }
    }
}
