//! Restructuring a node: heap compaction, the choice of a split point
//! (byte-balanced, or at the insertion point for sequential inserts), the
//! split itself and its redo (`split_keep_left`), and the merge with the
//! right neighbour. Each rebuilds nodes that `validate` accepts.

use super::layout::*;
use super::read::Node;
use super::write::NodeMut;
use super::{Fence, NoSpace};

impl NodeMut<'_> {
    /// Repack the heap against the page end, dropping holes.
    pub fn compactify(&mut self) {
        let ps = self.page.len();
        let ds = self.as_node().data_start();
        let heap = self.page[ds..ps].to_vec();
        let mut top = ps;
        let mut fields: Vec<(usize, usize)> = vec![];
        let flags = self.page[FLAGS];
        for (flag, at) in [(FLAG_LOWER_INF, LOWER_OFF), (FLAG_UPPER_INF, UPPER_OFF)] {
            if flags & flag == 0 {
                let len = rd16(self.page, at + 2).expect("header");
                fields.push((at, len));
            }
        }
        for i in 0..self.count() {
            let s = self.slot(i);
            fields.push((NODE_HEADER_END + i * SLOT_SIZE, s.klen + s.vlen));
        }
        for (at, len) in fields {
            if len == 0 {
                continue;
            }
            let old = rd16(self.page, at).expect("header") - ds;
            top -= len;
            self.page[top..top + len].copy_from_slice(&heap[old..old + len]);
            wr16(self.page, at, top);
        }
        wr32(self.page, DATA_START, top);
    }

    /// Split point for a node that is about to take `key` (a leaf's new key,
    /// or the separator an inner node is about to take at the same place).
    ///
    /// If `key` goes right after the entry inserted last (the insert hint),
    /// the node is being filled in key order: appends at the end of a table,
    /// or the tail of one range inside it (TPC-C's order lines of one
    /// district, in front of the next district's). A byte-balanced split
    /// would leave a half-empty left page behind for good, since the keys
    /// keep arriving to its right. Instead the node splits at the insertion
    /// point: the left keeps what is below `key` and stays full, the right
    /// takes the rest, and the next keys fill the right (InnoDB's
    /// sequential-insert split), unless that would leave the left less full
    /// than a balanced split. The rightmost node of a tree splits that way
    /// for a key after all of its entries even without the hint (it is lost
    /// when a page is reloaded). Otherwise [`Self::split_index`].
    pub fn split_index_for(&self, key: &[u8]) -> usize {
        let node = self.as_node();
        let n = self.count();
        let first = if node.is_leaf() { 0 } else { 1 };
        let Some((p, false)) = node.lower_bound(key) else {
            return self.split_index();
        };
        let hint = rd16(self.page, INSERT_HINT);
        let sequential = hint == Some(p) || (p == n && node.upper_fence() == Some(Fence::Infinite));
        // Leaf: the left keeps 0..=at; inner: 0..at, and key(at) moves up.
        // Either way the right must keep an entry.
        let at = if node.is_leaf() {
            p.checked_sub(1)
        } else {
            Some(p.saturating_sub(1))
        };
        // Never less on the left than a balanced split: when the entries
        // after the insertion point fill more than half the page (the next
        // range's, already loaded), splitting there would send each new key
        // to a right page with room for about one more, and the next
        // sequential key would split again, one entry per page.
        let balanced = self.split_index();
        match at.map(|at| at.min(n.saturating_sub(2))) {
            Some(at) if sequential && at >= first && at + 2 <= n && at >= balanced => at,
            _ => balanced,
        }
    }

    /// Split point by bytes: minimises the larger half (fences included) while
    /// leaving both sides non-empty: a leaf splits in 0..=count-2, an inner
    /// node in 1..=count-2. Needs count >= 2 (leaf) or >= 3 (inner).
    pub fn split_index(&self) -> usize {
        let node = self.as_node();
        let n = self.count();
        let leaf = node.is_leaf();
        let first = if leaf { 0 } else { 1 };
        debug_assert!(n >= first + 2, "too few entries to split");
        if n < first + 2 {
            return n / 2;
        }
        let size = |i: usize| {
            let s = self.slot(i);
            SLOT_SIZE + s.klen + s.vlen
        };
        let total: usize = (0..n).map(size).sum();
        let lf = fence_len(node.lower_fence());
        let uf = fence_len(node.upper_fence());
        let (mut best, mut best_cost) = (first, usize::MAX);
        let mut before = 0; // bytes of entries 0..at
        for at in 0..n - 1 {
            let here = size(at);
            if at >= first {
                let sep = self.slot(at).klen;
                // A leaf keeps entry `at`; an inner node moves it up.
                let left = before + if leaf { here } else { 0 } + lf + sep;
                let right = total - before - here + sep + uf;
                let cost = left.max(right);
                if cost < best_cost {
                    (best, best_cost) = (at, cost);
                }
            }
            before += here;
        }
        best
    }

    /// Move slots after `at` to `right` (same page size; its page header is set,
    /// its body is initialised here) and return the separator key.
    /// Leaf: left keeps 0..=at, separator = key(at), left.upper = right.lower =
    /// separator. Inner: left keeps 0..at, key(at) moves up, left.upper_child =
    /// child(at), right gets at+1.. and the old upper_child.
    pub fn split(&mut self, at: usize, right: &mut [u8]) -> Vec<u8> {
        assert_eq!(right.len(), self.page.len(), "split across page sizes");
        let src_page = self.page.to_vec();
        let src = Node::new(&src_page);
        let n = src.count();
        assert!(at < n, "split at {at} past count {n}");
        let entry = |j: usize| {
            let k = src.key(j).expect("key of a valid node");
            (k, src.value(j).expect("value of a valid node"))
        };
        let sep = src.key(at).expect("key of a valid node").to_vec();
        let lower = src.lower_fence().expect("fence of a valid node");
        let upper = src.upper_fence().expect("fence of a valid node");
        let mut r = NodeMut::new(right);
        if src.is_leaf() {
            r.init_leaf(Fence::Key(&sep), upper);
            self.init_leaf(lower, Fence::Key(&sep));
            (at + 1..n).for_each(|j| r.push(entry(j).0, entry(j).1));
            (0..=at).for_each(|j| self.push(entry(j).0, entry(j).1));
        } else {
            let upper_child = src.upper_child().expect("inner node");
            r.init_inner(Fence::Key(&sep), upper, upper_child);
            let left_upper = src.child(at).expect("child of a valid node");
            self.init_inner(lower, Fence::Key(&sep), left_upper);
            (at + 1..n).for_each(|j| r.push(entry(j).0, entry(j).1));
            (0..at).for_each(|j| self.push(entry(j).0, entry(j).1));
        }
        debug_assert_eq!(self.as_node().validate(), Ok(()));
        debug_assert_eq!(r.as_node().validate(), Ok(()));
        sep
    }

    /// Redo of the page a split kept: the node becomes what
    /// [`split`](Self::split) at `at` leaves on the left, and the upper part
    /// (logged as the new page's image) is dropped. `sep` is the separator
    /// the split returned; another key at `at` means the node is not the one
    /// the split saw, and the node is left unchanged.
    pub fn split_keep_left(&mut self, at: usize, sep: &[u8]) -> Result<(), &'static str> {
        let node = self.as_node();
        if !node.is_leaf() && !node.is_inner() {
            return Err("a split names a page that is not a B+-tree node");
        }
        if at >= node.count() || node.key(at) != Some(sep) {
            return Err("the split's separator is not at its slot");
        }
        // The upper half's fences would be equal, which `split` asserts
        // against; no split chooses it (each keeps an entry above `sep`).
        if node.upper_fence() == Some(Fence::Key(sep)) {
            return Err("the split's separator is the node's upper fence");
        }
        let mut upper = vec![0u8; self.page.len()];
        self.split(at, &mut upper);
        Ok(())
    }

    /// Append all of `right` (the right neighbour under the same parent,
    /// separated by `separator`) into self. Leaf: the separator is dropped and
    /// left.upper = right.upper. Inner: the separator comes down with left's
    /// old upper_child as its child, and left.upper_child = right.upper_child.
    /// Err(NoSpace) leaves both unchanged.
    pub fn merge_from_right(&mut self, right: &Node, separator: &[u8]) -> Result<(), NoSpace> {
        let left = self.as_node();
        let leaf = left.is_leaf();
        debug_assert_eq!(leaf, right.is_leaf(), "merging a leaf with an inner node");
        debug_assert_eq!(left.upper_fence(), Some(Fence::Key(separator)));
        debug_assert_eq!(right.lower_fence(), Some(Fence::Key(separator)));
        if right.page_size() != left.page_size() {
            return Err(NoSpace);
        }
        let mut need = left.used_space() - fence_len(left.upper_fence()) + right.used_space()
            - fence_len(right.lower_fence());
        if !leaf {
            need += SLOT_SIZE + separator.len() + 8;
        }
        if need > left.page_size() - NODE_HEADER_END {
            return Err(NoSpace);
        }
        let src_page = self.page.to_vec();
        let src = Node::new(&src_page);
        let lower = src.lower_fence().expect("fence of a valid node");
        let upper = right.upper_fence().expect("fence of a valid node");
        if leaf {
            self.init_leaf(lower, upper);
        } else {
            self.init_inner(lower, upper, right.upper_child().expect("inner node"));
        }
        self.push_all(&src);
        if !leaf {
            let child = src.upper_child().expect("inner node");
            self.push(separator, &child.to_le_bytes());
        }
        self.push_all(right);
        debug_assert_eq!(self.as_node().validate(), Ok(()));
        Ok(())
    }
}
