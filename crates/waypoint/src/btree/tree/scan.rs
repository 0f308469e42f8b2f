//! Range scans: `scan` visits the tuples between two bounds in key order,
//! ascending or descending.
//!
//! A scan reads one leaf at a time under a shared latch (`shared_leaf`,
//! descent.rs) and moves on by descending again to the key just past the
//! leaf's fence (forward: the smallest key greater than the upper fence;
//! reverse: the lower fence), so it holds no latch between leaves and never
//! follows a sibling pointer.
//!
//! Invariant kept: keys are visited in strictly increasing (for `reverse`,
//! decreasing) order, each at most once, whatever splits and merges happen
//! between two leaves: the next leaf is found by a key past every key
//! already visited, and a leaf's fences bound what it holds. No section of
//! the seed papers describes it.

use super::descent::Target;
use super::{decode_value, BTree};
use crate::btree::node::{Fence, Node};
use crate::buffer::BufferPool;
use crate::error::Result;
use crate::ids::Tid;
use std::ops::Bound;

/// Called by [`BTree::scan`] with each tuple's key, TID and value; returns
/// false to stop.
pub type Visitor<'a> = dyn FnMut(&[u8], Tid, &[u8]) -> bool + 'a;

/// A bound of a range scan.
pub type ScanBound<'a> = Bound<&'a [u8]>;

/// Visit the tuples of leaf `n` at `indices` (in scan order): skip keys not
/// yet `started`, stop at the first key no longer `within` the far bound or
/// when `visit` says so. Returns whether the scan should go on to the next
/// leaf; `Err` for an unreadable slot. One loop serves both directions.
fn visit_leaf(
    n: &Node<'_>,
    indices: impl Iterator<Item = usize>,
    started: &dyn Fn(&[u8]) -> bool,
    within: &dyn Fn(&[u8]) -> bool,
    visit: &mut Visitor<'_>,
) -> std::result::Result<bool, ()> {
    for i in indices {
        let k = n.key(i).ok_or(())?;
        if !started(k) {
            continue;
        }
        if !within(k) {
            return Ok(false);
        }
        let (tid, v) = n.value(i).and_then(decode_value).ok_or(())?;
        if !visit(k, tid, v) {
            return Ok(false);
        }
    }
    Ok(true)
}

impl BTree {
    /// Visit tuples with keys within the bounds, in key order (descending if
    /// `reverse`), until `visit` returns false. Each leaf is read under a
    /// shared latch; `visit` must not access the tree.
    pub fn scan(
        &self,
        pool: &BufferPool,
        lower: ScanBound<'_>,
        upper: ScanBound<'_>,
        reverse: bool,
        visit: &mut Visitor<'_>,
    ) -> Result<()> {
        let in_lower = |k: &[u8]| match lower {
            Bound::Included(b) => k >= b,
            Bound::Excluded(b) => k > b,
            Bound::Unbounded => true,
        };
        let in_upper = |k: &[u8]| match upper {
            Bound::Included(b) => k <= b,
            Bound::Excluded(b) => k < b,
            Bound::Unbounded => true,
        };
        // Position: the key whose leaf to read next (None: rightmost leaf).
        let mut cursor: Option<Vec<u8>> = if reverse {
            match upper {
                Bound::Included(b) | Bound::Excluded(b) => Some(b.to_vec()),
                Bound::Unbounded => None,
            }
        } else {
            Some(match lower {
                Bound::Included(b) | Bound::Excluded(b) => b.to_vec(),
                Bound::Unbounded => Vec::new(),
            })
        };
        loop {
            let target = match &cursor {
                Some(k) => Target::Key(k),
                None => Target::Rightmost,
            };
            let leaf = self.shared_leaf(pool, &target)?;
            let n = Node::new(leaf.data());
            let bad = || Self::corruption(pool, leaf.page_id(), "unreadable leaf");
            let count = n.count();
            if reverse {
                let end = match &cursor {
                    Some(k) => match n.lower_bound(k).ok_or_else(bad)? {
                        (i, true) => i + 1,
                        (i, false) => i,
                    },
                    None => count,
                };
                if !visit_leaf(&n, (0..end).rev(), &in_upper, &in_lower, visit)
                    .map_err(|()| bad())?
                {
                    return Ok(());
                }
                match n.lower_fence().ok_or_else(bad)? {
                    Fence::Infinite => return Ok(()),
                    Fence::Key(l) => {
                        if !in_lower(l) {
                            return Ok(());
                        }
                        cursor = Some(l.to_vec());
                    }
                }
            } else {
                let start = match &cursor {
                    Some(k) => n.lower_bound(k).ok_or_else(bad)?.0,
                    None => 0,
                };
                if !visit_leaf(&n, start..count, &in_lower, &in_upper, visit).map_err(|()| bad())? {
                    return Ok(());
                }
                match n.upper_fence().ok_or_else(bad)? {
                    Fence::Infinite => return Ok(()),
                    Fence::Key(u) => {
                        // Every key of the next leaf is greater than `u`.
                        let past_end = match upper {
                            Bound::Included(b) | Bound::Excluded(b) => u >= b,
                            Bound::Unbounded => false,
                        };
                        if past_end {
                            return Ok(());
                        }
                        // The smallest key greater than the fence.
                        let mut next = u.to_vec();
                        next.push(0);
                        cursor = Some(next);
                    }
                }
            }
        }
    }
}

/// The deeper split stops at the first level with this many keys per
/// part: each part then takes about as many subtrees, so the parts differ
/// by about one subtree in this many.
const SPLIT_KEYS_PER_PART: usize = 8;

/// Optimistic tries of the deeper split before falling back to the root's
/// separators (read under a shared latch).
const SPLIT_TRIES: usize = 16;

impl BTree {
    /// Up to `parts - 1` keys, ascending, that split the tree's key space
    /// into about `parts` ranges of similar size, for walkers that each
    /// take a range (`silor::checkpoint`). The root's separators alone give
    /// uneven parts (none when the root is a leaf, a handful when it has
    /// few children), so this descends level by level, reading each level
    /// whole, until a level holds [`SPLIT_KEYS_PER_PART`] keys per part or
    /// is the leaves, and takes evenly spaced keys of that level. Nodes are
    /// read optimistically and validated, restarting from the root when
    /// one changed; the tree may change right after, which only makes the
    /// split less even.
    pub fn split_keys(&self, pool: &BufferPool, parts: usize) -> Result<Vec<Vec<u8>>> {
        let parts = parts.max(1);
        if parts == 1 {
            return Ok(Vec::new());
        }
        for _ in 0..SPLIT_TRIES {
            if let Some(keys) = self.level_keys(pool, parts * SPLIT_KEYS_PER_PART)? {
                return Ok(spaced(keys, parts));
            }
        }
        let guard = pool.shared(self.root)?;
        if super::page_kind(guard.data()) != Some(crate::buffer::page::PageKind::BtreeInner) {
            return Ok(Vec::new());
        }
        let n = Node::new(guard.data());
        let keys = (0..n.count())
            .filter_map(|i| n.key(i).map(<[u8]>::to_vec))
            .collect();
        Ok(spaced(keys, parts))
    }

    /// The keys, in order, of the first level from the root that holds at
    /// least `want` of them, or of the leaves; `None` if a node changed
    /// while read.
    fn level_keys(&self, pool: &BufferPool, want: usize) -> Result<Option<Vec<Vec<u8>>>> {
        use crate::buffer::page::PageKind;
        let mut level = vec![pool.optimistic(self.root)?];
        loop {
            let mut keys = Vec::new();
            let mut children = Vec::new();
            let mut leaves = false;
            for (j, g) in level.iter().enumerate() {
                let n = Node::new(g.data());
                match super::page_kind(g.data()) {
                    Some(PageKind::BtreeLeaf) => leaves = true,
                    Some(PageKind::BtreeInner) => {
                        children.extend((0..=n.count()).map(|i| (n.child(i), j)));
                    }
                    _ => return Ok(None),
                }
                keys.extend((0..n.count()).filter_map(|i| n.key(i).map(<[u8]>::to_vec)));
                if !g.validate() {
                    return Ok(None);
                }
            }
            if leaves || keys.len() >= want {
                return Ok(Some(keys));
            }
            let mut next = Vec::with_capacity(children.len());
            for (child, parent) in children {
                let parent = &level[parent];
                let Some(child) = child else {
                    return Ok(None);
                };
                // A child read after its parent changed may be freed (its
                // stale image may not even load): start again.
                let guard = match pool.optimistic(child) {
                    Ok(g) => g,
                    Err(_) if !parent.validate() => return Ok(None),
                    Err(e) => return Err(e),
                };
                if !parent.validate() {
                    return Ok(None);
                }
                next.push(guard);
            }
            level = next;
        }
    }
}

/// `parts - 1` of `keys`, evenly spaced, ascending, without repeats.
fn spaced(mut keys: Vec<Vec<u8>>, parts: usize) -> Vec<Vec<u8>> {
    // Nodes validated one by one may still disagree (a split between two
    // reads): order them, a split point only needs to be a key.
    keys.sort();
    keys.dedup();
    let m = keys.len();
    let mut out: Vec<Vec<u8>> = (1..parts)
        .filter_map(|p| keys.get(p * m / parts).cloned())
        .collect();
    out.dedup();
    out
}
