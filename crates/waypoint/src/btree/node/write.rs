//! The mutable view of a node under an exclusive latch: initialisation
//! with fences, insert and remove of entries, value and child updates, the
//! separator insert shared by the tree and redo. It works on a valid node
//! and asserts its preconditions (keys in order, inside the fences).

use super::keys::{common_prefix_len, head_at};
use super::layout::*;
use super::read::Node;
use super::{Fence, NoSpace};
use crate::buffer::page::{self, PageKind, PAGE_HEADER_SIZE};

/// Mutable view of a node page, used under an exclusive latch on a valid node.
pub struct NodeMut<'a> {
    pub(super) page: &'a mut [u8],
}

impl<'a> NodeMut<'a> {
    pub fn new(page: &'a mut [u8]) -> Self {
        NodeMut { page }
    }

    pub fn as_node(&self) -> Node<'_> {
        Node::new(self.page)
    }

    pub(super) fn count(&self) -> usize {
        self.as_node().raw_count()
    }

    pub(super) fn slot(&self, i: usize) -> Slot {
        self.as_node().slot(i).expect("slot of a valid node")
    }

    fn set_live_heap(&mut self, v: usize) {
        wr32(self.page, LIVE_HEAP, v);
    }

    /// Take `len` bytes from the bottom of the heap; the caller has checked space.
    fn alloc(&mut self, len: usize) -> usize {
        if len == 0 {
            return 0;
        }
        let node = self.as_node();
        let (ds, live) = (node.data_start(), node.live_heap());
        let slots_end = NODE_HEADER_END + self.count() * SLOT_SIZE;
        assert!(ds >= slots_end + len, "heap allocation overruns slot array");
        wr32(self.page, DATA_START, ds - len);
        self.set_live_heap(live + len);
        ds - len
    }

    fn init(&mut self, kind: PageKind, lower: Fence, upper: Fence, upper_child: u64) {
        let ps = self.page.len();
        debug_assert!(page::is_valid_page_size(ps));
        page::set_page_kind(self.page, kind);
        // Zeroing the whole body keeps written pages deterministic and free of
        // stale bytes from the frame's previous page.
        self.page[PAGE_HEADER_SIZE..].fill(0);
        wr32(self.page, DATA_START, ps);
        self.page[UPPER_CHILD..UPPER_CHILD + 8].copy_from_slice(&upper_child.to_le_bytes());
        let mut flags = 0;
        for (fence, flag, at) in [
            (lower, FLAG_LOWER_INF, LOWER_OFF),
            (upper, FLAG_UPPER_INF, UPPER_OFF),
        ] {
            match fence {
                Fence::Infinite => flags |= flag,
                Fence::Key(k) => {
                    let off = self.alloc(k.len());
                    self.page[off..off + k.len()].copy_from_slice(k);
                    wr16(self.page, at, off);
                    wr16(self.page, at + 2, k.len());
                }
            }
        }
        self.page[FLAGS] = flags;
        let prefix = match (lower, upper) {
            (Fence::Key(lo), Fence::Key(hi)) => common_prefix_len(lo, hi),
            _ => 0,
        };
        wr16(self.page, PREFIX_LEN, prefix);
    }

    pub fn init_leaf(&mut self, lower: Fence, upper: Fence) {
        self.init(PageKind::BtreeLeaf, lower, upper, 0);
    }

    pub fn init_inner(&mut self, lower: Fence, upper: Fence, upper_child: u64) {
        self.init(PageKind::BtreeInner, lower, upper, upper_child);
    }

    pub fn insert_at(&mut self, i: usize, key: &[u8], value: &[u8]) -> Result<(), NoSpace> {
        let n = self.count();
        assert!(i <= n, "insert_at({i}) past count {n}");
        if cfg!(debug_assertions) {
            let node = self.as_node();
            debug_assert!(i == 0 || node.key(i - 1).is_some_and(|k| k < key));
            debug_assert!(i == n || node.key(i).is_some_and(|k| k > key));
            debug_assert!(!matches!(node.lower_fence(), Some(Fence::Key(lo)) if key <= lo));
            debug_assert!(!matches!(node.upper_fence(), Some(Fence::Key(hi)) if key > hi));
            debug_assert!(node.is_leaf() || value.len() == 8);
        }
        if !self.as_node().fits(key.len(), value.len()) {
            return Err(NoSpace);
        }
        let len = key.len() + value.len();
        let slots_end = NODE_HEADER_END + n * SLOT_SIZE;
        if self.as_node().data_start() < slots_end + SLOT_SIZE + len {
            self.compactify();
        }
        let off = self.alloc(len);
        self.page[off..off + key.len()].copy_from_slice(key);
        self.page[off + key.len()..off + len].copy_from_slice(value);
        let at = NODE_HEADER_END + i * SLOT_SIZE;
        self.page.copy_within(at..slots_end, at + SLOT_SIZE);
        wr16(self.page, at, off);
        wr16(self.page, at + 2, key.len());
        wr16(self.page, at + 4, value.len());
        let head = head_at(key, self.as_node().prefix_len());
        self.page[at + 6..at + 10].copy_from_slice(&head.to_be_bytes());
        wr16(self.page, COUNT, n + 1);
        wr16(self.page, INSERT_HINT, i + 1);
        Ok(())
    }

    /// Append after the last slot; the caller has sized the node to fit.
    pub(super) fn push(&mut self, key: &[u8], value: &[u8]) {
        let n = self.count();
        self.insert_at(n, key, value)
            .expect("node rebuilt by split/merge must fit");
    }

    pub(super) fn push_all(&mut self, from: &Node) {
        for j in 0..from.count() {
            let key = from.key(j).expect("key of a valid node");
            self.push(key, from.value(j).expect("value of a valid node"));
        }
    }

    pub fn remove_at(&mut self, i: usize) {
        let n = self.count();
        assert!(i < n, "remove_at({i}) past count {n}");
        let s = self.slot(i);
        let len = s.klen + s.vlen;
        let node = self.as_node();
        let (ds, live) = (node.data_start(), node.live_heap());
        self.set_live_heap(live - len);
        // Freeing the bottom-most entry shrinks the heap directly, so
        // insert/remove at the heap edge never needs a compaction.
        if len > 0 && s.off == ds {
            wr32(self.page, DATA_START, ds + len);
        }
        let at = NODE_HEADER_END + i * SLOT_SIZE;
        let slots_end = NODE_HEADER_END + n * SLOT_SIZE;
        self.page.copy_within(at + SLOT_SIZE..slots_end, at);
        self.page[slots_end - SLOT_SIZE..slots_end].fill(0);
        wr16(self.page, COUNT, n - 1);
    }

    /// Replace the value of slot i with a value of any length.
    pub fn set_value_at(&mut self, i: usize, value: &[u8]) -> Result<(), NoSpace> {
        let n = self.count();
        assert!(i < n, "set_value_at({i}) past count {n}");
        let s = self.slot(i);
        if value.len() <= s.vlen {
            // Shrink in place; the tail becomes a hole until compaction.
            let at = s.off + s.klen;
            self.page[at..at + value.len()].copy_from_slice(value);
            wr16(self.page, NODE_HEADER_END + i * SLOT_SIZE + 4, value.len());
            let live = self.as_node().live_heap();
            self.set_live_heap(live - (s.vlen - value.len()));
            if value.len() + s.klen == 0 {
                wr16(self.page, NODE_HEADER_END + i * SLOT_SIZE, 0);
            }
            return Ok(());
        }
        if value.len() - s.vlen > self.as_node().free_space() {
            return Err(NoSpace);
        }
        // Growth: removing frees slot+key+old value, so re-inserting always fits.
        let key = self.as_node().key(i).expect("key of a valid node").to_vec();
        self.remove_at(i);
        self.insert_at(i, &key, value)
            .expect("re-insert after remove fits by the check above");
        Ok(())
    }

    /// In an inner node, child `left` was split into `left` (keys <= `sep`)
    /// and `right`: point the entry that led to `left` at `right` and insert
    /// (`sep` → `left`) before it. The one implementation of this step for
    /// the tree and for redo of a [`PageOp::Separator`](crate::btree::PageOp)
    /// record; an error leaves the node unchanged.
    pub fn insert_separator(
        &mut self,
        sep: &[u8],
        left: u64,
        right: u64,
    ) -> Result<(), &'static str> {
        let node = self.as_node();
        let (idx, child) = node
            .child_for(sep)
            .ok_or("not an inner node, or one without a child for the separator")?;
        if child != left {
            return Err("the separator does not land beside the split child");
        }
        if !node.fits(sep.len(), 8) {
            return Err("the separator does not fit");
        }
        if matches!(node.lower_fence(), Some(Fence::Key(lo)) if sep <= lo)
            || matches!(node.upper_fence(), Some(Fence::Key(hi)) if sep > hi)
            || (idx > 0 && node.key(idx - 1).is_none_or(|k| k >= sep))
            || (idx < node.count() && node.key(idx).is_none_or(|k| k <= sep))
        {
            return Err("the separator is out of order");
        }
        self.set_child_at(idx, right);
        self.insert_at(idx, sep, &left.to_le_bytes())
            .expect("fits, checked above");
        Ok(())
    }

    /// Set child i of an inner node; `i == count` sets `upper_child`.
    pub fn set_child_at(&mut self, i: usize, child: u64) {
        let n = self.count();
        assert!(i <= n, "set_child_at({i}) past count {n}");
        debug_assert!(self.as_node().is_inner());
        let at = if i == n {
            UPPER_CHILD
        } else {
            let s = self.slot(i);
            assert_eq!(s.vlen, 8, "inner value is a child page id");
            s.off + s.klen
        };
        self.page[at..at + 8].copy_from_slice(&child.to_le_bytes());
    }
}
