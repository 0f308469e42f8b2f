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
//! Registration does not skip keys the writer has passed (VoltDB does, to
//! save memory): the shadow holds every row changed while a snapshot is
//! written, which bounds it by the writes of that interval.
//!
//! Invariant: while active, the shadow holds for each key changed since
//! the point exactly its image at the point (`None`: absent).

use crate::ids::Tid;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A row's image at the point: (TID, value), or absent.
pub(crate) type PreImage = Option<(Tid, Vec<u8>)>;

/// The shadow map of the snapshot being written (see the module header).
#[derive(Default)]
pub(crate) struct Shadow {
    active: AtomicBool,
    rows: Mutex<HashMap<u32, BTreeMap<Vec<u8>, PreImage>>>,
    /// Pre-images kept for the snapshot in progress.
    pub registered: AtomicU64,
    /// Test-only: register nothing, so the writer sees post-point values.
    pub broken: AtomicBool,
}

impl Shadow {
    /// Start keeping pre-images: only with every partition lock held.
    pub fn begin(&self) {
        self.rows.lock().clear();
        self.registered.store(0, Ordering::Relaxed);
        self.active.store(true, Ordering::Release);
    }

    /// Stop keeping them and forget them (the writer is done).
    pub fn end(&self) {
        self.active.store(false, Ordering::Release);
        self.rows.lock().clear();
    }

    /// A call is about to change `key` of `table`, whose image is
    /// `current`.
    pub fn register(&self, table: u32, key: &[u8], current: Option<(Tid, &[u8])>) {
        if !self.active.load(Ordering::Acquire) || self.broken.load(Ordering::Relaxed) {
            return;
        }
        let mut rows = self.rows.lock();
        let table = rows.entry(table).or_default();
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
        let Some(t) = rows.get(&table) else {
            return Vec::new();
        };
        let lo = after.map_or(Bound::Unbounded, Bound::Excluded);
        let hi = upto.map_or(Bound::Unbounded, Bound::Included);
        t.range::<[u8], _>((lo, hi))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}
