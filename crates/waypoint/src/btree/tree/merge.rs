//! Merges: a remove that leaves its leaf underfull (under a quarter of the
//! page used) calls `merge_for`, which merges underfull nodes on the key's
//! path with a sibling, bottom-up, and collapses a root left with a single
//! child into that child's content.
//!
//! A merge is space reclamation only: the remove that asked for it is done
//! before, and a failed merge leaves a valid tree (`remove`, point.rs,
//! logs its error and drops it). The path is latched exclusively from the
//! root down (`exclusive_path`, descent.rs, keeping every ancestor).
//!
//! Invariants kept: the root page id never changes (a collapse copies the
//! child's body into the root, `copy_body`); all leaves stay at one depth;
//! the pages a merge changed, the freed one included (as a `Free` page),
//! are logged as one group of images while all of them are still latched
//! ([`PageLog::logged_smo`]), so recovery redoes all of it or none, as
//! ARIES does with the system transactions behind structure modifications
//! (seed 000 §2.1).

use super::{copy_body, page_kind, BTree};
use crate::btree::node::{Node, NodeMut};
use crate::btree::{PageLog, PageOp};
use crate::buffer::page::{self, PageKind};
use crate::buffer::{BufferPool, ExclusiveGuard};
use crate::error::Result;

impl BTree {
    /// Merge underfull nodes on the path to `key` with a sibling, bottom-up,
    /// and collapse a root left with a single child.
    pub(super) fn merge_for(&self, pool: &BufferPool, log: &dyn PageLog, key: &[u8]) -> Result<()> {
        let mut path = self.exclusive_path(pool, key, false)?;
        let threshold = pool.page_size() / 4;
        let mut level = path.len() - 1;
        while level > 0 {
            if Node::new(path[level].data()).used_space() >= threshold {
                break;
            }
            let (parent_slice, child_slice) = path.split_at_mut(level);
            let parent = &mut parent_slice[level - 1];
            let child = &mut child_slice[0];
            if !self.merge_child(pool, log, parent, child, key)? {
                break;
            }
            level -= 1;
        }
        // Root with no separators left: pull its only child up.
        let root = &mut path[0];
        let rn = Node::new(root.data());
        if page_kind(root.data()) == Some(PageKind::BtreeInner) && rn.count() == 0 {
            let only = rn
                .upper_child()
                .ok_or_else(|| Self::corruption(pool, self.root, "root without children"))?;
            drop(path.drain(1..));
            let mut child = pool.exclusive(only)?;
            let mut root_guard = path.pop().expect("root");
            copy_body(root_guard.data_mut(), child.data());
            page::set_page_kind(child.data_mut(), PageKind::Free);
            log.logged_smo(
                self.root,
                &mut [&mut root_guard, &mut child],
                &[PageOp::Image; 2],
            )?;
            pool.free_page(child);
        }
        Ok(())
    }

    /// Merge `child` (on the path to `key`) with its right or left sibling
    /// under `parent`. Returns false if no merge fit.
    fn merge_child<'p>(
        &self,
        pool: &'p BufferPool,
        log: &dyn PageLog,
        parent: &mut ExclusiveGuard<'p>,
        child: &mut ExclusiveGuard<'p>,
        key: &[u8],
    ) -> Result<bool> {
        let pn = Node::new(parent.data());
        let (idx, _) = pn.child_for(key).ok_or_else(|| {
            Self::corruption(
                pool,
                parent.page_id(),
                "inner node has no child for the key",
            )
        })?;
        let count = pn.count();
        if count == 0 {
            return Ok(false);
        }
        // (left index in parent, whether `child` is the left one)
        let (left_idx, child_is_left) = if idx < count {
            (idx, true)
        } else {
            (idx - 1, false)
        };
        let sep = pn
            .key(left_idx)
            .ok_or_else(|| Self::corruption(pool, parent.page_id(), "unreadable separator"))?
            .to_vec();
        let sibling_pid = pn
            .child(if child_is_left {
                left_idx + 1
            } else {
                left_idx
            })
            .ok_or_else(|| Self::corruption(pool, parent.page_id(), "unreadable child pointer"))?;
        let mut sibling = pool.exclusive(sibling_pid)?;
        let merged = {
            let (left, right) = if child_is_left {
                (&mut *child, &mut sibling)
            } else {
                (&mut sibling, &mut *child)
            };
            let right_node = right.data().to_vec();
            NodeMut::new(left.data_mut())
                .merge_from_right(&Node::new(&right_node), &sep)
                .is_ok()
        };
        if !merged {
            return Ok(false);
        }
        // From here `child` is the left (surviving) node.
        let (left_pid, mut freed) = if child_is_left {
            (child.page_id(), sibling)
        } else {
            (sibling_pid, std::mem::replace(child, sibling))
        };
        let mut pm = NodeMut::new(parent.data_mut());
        pm.remove_at(left_idx);
        pm.set_child_at(left_idx, left_pid);
        page::set_page_kind(freed.data_mut(), PageKind::Free);
        log.logged_smo(
            self.root,
            &mut [&mut *child, &mut *parent, &mut freed],
            &[PageOp::Image; 3],
        )?;
        pool.free_page(freed);
        Ok(true)
    }
}
