//! Whole-tree walks: `check`, the integrity check behind tests and
//! `waypoint verify`, and `destroy`, which frees a dropped tree's pages.
//!
//! Invariants checked: every node is well formed (`Node::validate`); its
//! fences equal the separators its parent routes to it, so every key lies
//! in (lower fence, upper fence]; every page reached is a tree node; all
//! leaves are at the same depth. No section of the seed papers describes
//! them.

use super::{page_kind, BTree};
use crate::btree::node::{Fence, Node};
use crate::buffer::page::PageKind;
use crate::buffer::{BufferPool, PageId};
use crate::error::Result;

/// A node to check: page id, expected lower and upper fence, depth.
type CheckItem = (PageId, Option<Vec<u8>>, Option<Vec<u8>>, usize);

fn fence_owned(f: Fence<'_>) -> Option<Vec<u8>> {
    match f {
        Fence::Infinite => None,
        Fence::Key(k) => Some(k.to_vec()),
    }
}

impl BTree {
    /// Free every page of the tree (used when a table is dropped; no other
    /// thread may use the tree).
    pub fn destroy(&self, pool: &BufferPool) -> Result<()> {
        let mut stack = vec![self.root];
        while let Some(pid) = stack.pop() {
            let guard = pool.exclusive(pid)?;
            if page_kind(guard.data()) == Some(PageKind::BtreeInner) {
                let n = Node::new(guard.data());
                for i in 0..=n.count() {
                    stack.push(
                        n.child(i).ok_or_else(|| {
                            Self::corruption(pool, pid, "unreadable child pointer")
                        })?,
                    );
                }
            }
            pool.free_page(guard);
        }
        // A tree created later may get this root page: it starts with no
        // contention of its own.
        pool.forget_contention(self.root);
        Ok(())
    }

    /// Check every node and the fence/ordering invariants; returns the
    /// number of tuples. For tests and `waypoint verify`.
    pub fn check(&self, pool: &BufferPool) -> Result<usize> {
        let mut tuples = 0;
        let mut stack: Vec<CheckItem> = vec![(self.root, None, None, 0)];
        let mut leaf_depth = None;
        while let Some((pid, lower, upper, depth)) = stack.pop() {
            let guard = pool.shared(pid)?;
            let n = Node::new(guard.data());
            n.validate().map_err(|e| Self::corruption(pool, pid, e))?;
            let bad = |what: &str| Self::corruption(pool, pid, what.to_string());
            if n.lower_fence().and_then(fence_owned) != lower
                || n.upper_fence().and_then(fence_owned) != upper
            {
                return Err(bad("fences differ from the parent's separators"));
            }
            match page_kind(guard.data()) {
                Some(PageKind::BtreeLeaf) => {
                    if *leaf_depth.get_or_insert(depth) != depth {
                        return Err(bad("leaves at different depths"));
                    }
                    tuples += n.count();
                }
                Some(PageKind::BtreeInner) => {
                    let mut lo = lower.clone();
                    for i in 0..=n.count() {
                        let hi = if i < n.count() {
                            Some(n.key(i).ok_or_else(|| bad("unreadable key"))?.to_vec())
                        } else {
                            upper.clone()
                        };
                        let child = n.child(i).ok_or_else(|| bad("unreadable child"))?;
                        stack.push((child, lo.clone(), hi.clone(), depth + 1));
                        lo = hi;
                    }
                }
                _ => return Err(bad("page in a tree is not a tree node")),
            }
        }
        Ok(tuples)
    }
}
