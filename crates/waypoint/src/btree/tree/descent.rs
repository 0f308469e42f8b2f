//! Finding a leaf: how every tree operation reaches the node it works on.
//!
//! Readers descend with optimistic lock coupling (`find_leaf`): no latch is
//! written on the way down, each node is validated before its child pointer
//! is trusted, and a failed validation restarts from the root. A point
//! access may skip the descent (`find_leaf_hinted`): given the
//! [`FrameHint`] of the leaf an earlier access to the same key validated,
//! it uses that leaf directly if its frame is unchanged (same page at the
//! same latch version, so the same fences) and the fences cover the key,
//! and descends otherwise. Writers upgrade only the leaf
//! (`leaf_for_write`); scans take it shared (`shared_leaf`); structure
//! modifications latch the whole path exclusively, top-down
//! (`exclusive_path`). Optimistic descents, leaf reads, upgrades and
//! shares tried again, and optimistic reads that waited for a page held
//! exclusively, count against the tree (`BufferPool::contention_by_root`).
//!
//! Invariant kept: an optimistic descent returns a leaf only if its fences
//! cover the target (as read; the caller validates before trusting them),
//! so a hint made for another key or a corrupt parent never yields the
//! wrong leaf. The scheme is LeanStore's optimistic lock coupling; no
//! section of the seed papers describes it.

use super::{page_kind, BTree};
use crate::btree::node::{self, Fence, Node};
use crate::buffer::page::PageKind;
use crate::buffer::{BufferPool, ExclusiveGuard, FrameHint, OptimisticGuard, SharedGuard};
use crate::error::Result;

/// What a descent looks for.
pub(super) enum Target<'k> {
    Key(&'k [u8]),
    Rightmost,
}

/// Whether leaf `n`'s fences cover `target`.
fn covers(n: &Node<'_>, target: &Target<'_>) -> bool {
    match target {
        Target::Rightmost => matches!(n.upper_fence(), Some(Fence::Infinite)),
        Target::Key(k) => n.covers(k),
    }
}

#[cfg(test)]
thread_local! {
    /// Descents from the root this thread's `find_leaf` began.
    pub(super) static DESCENTS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl BTree {
    /// Descend optimistically to the leaf for `target`. The returned guard is
    /// not yet validated: the caller reads, then validates.
    pub(super) fn find_leaf<'p>(
        &self,
        pool: &'p BufferPool,
        target: &Target<'_>,
    ) -> Result<OptimisticGuard<'p>> {
        let mut first = true;
        'restart: loop {
            #[cfg(test)]
            DESCENTS.with(|d| d.set(d.get() + 1));
            if !first {
                pool.note_retry(self.root);
            }
            first = false;
            let tree = Some(self.root);
            let mut guard = pool.optimistic_in(self.root, tree)?;
            loop {
                let data = guard.data();
                match page_kind(data) {
                    Some(PageKind::BtreeLeaf) => {
                        // The parent routed `target` here; a leaf whose fences
                        // disagree is corrupt (on disk), not a reason to
                        // return wrong rows or scan in circles.
                        if covers(&Node::new(data), target) {
                            return Ok(guard);
                        }
                        if guard.validate() {
                            return Err(Self::corruption(
                                pool,
                                guard.page_id(),
                                "leaf fences do not cover the key its parent routes to it",
                            ));
                        }
                        continue 'restart;
                    }
                    Some(PageKind::BtreeInner) => {}
                    _ => {
                        if guard.validate() {
                            return Err(Self::corruption(
                                pool,
                                guard.page_id(),
                                "page in a tree is not a tree node",
                            ));
                        }
                        continue 'restart;
                    }
                }
                let n = Node::new(data);
                let child = match target {
                    Target::Key(k) => n.child_for(k).map(|(_, c)| c),
                    Target::Rightmost => n.upper_child(),
                };
                if !guard.validate() {
                    continue 'restart;
                }
                let Some(child) = child else {
                    return Err(Self::corruption(
                        pool,
                        guard.page_id(),
                        "inner node has no child for the key",
                    ));
                };
                let child_guard = match pool.optimistic_in(child, tree) {
                    Ok(g) => g,
                    // The child may have been freed after the validation
                    // above and its stale image failed to load.
                    Err(_) if !guard.validate() => continue 'restart,
                    Err(e) => return Err(e),
                };
                if !guard.validate() {
                    continue 'restart;
                }
                guard = child_guard;
            }
        }
    }

    /// The leaf for `key` as [`BTree::find_leaf`] finds it, tried first at
    /// `hint`, a leaf an earlier access to `key` in this tree validated: if
    /// that frame is unchanged since, it is the same page with the same
    /// fences, so it still covers the key and the descent is skipped. The
    /// guard is not yet validated.
    pub(super) fn find_leaf_hinted<'p>(
        &self,
        pool: &'p BufferPool,
        key: &[u8],
        hint: Option<FrameHint>,
    ) -> Result<OptimisticGuard<'p>> {
        if let Some(leaf) = hint.and_then(|h| pool.optimistic_hinted(h)) {
            // Belt and braces, as cheap as the check at the end of a
            // descent: a hint made for another key names an unchanged leaf
            // that need not cover this one. (Bytes read here are trusted
            // only once the caller validates.)
            let data = leaf.data();
            if page_kind(data) == Some(PageKind::BtreeLeaf)
                && covers(&Node::new(data), &Target::Key(key))
            {
                return Ok(leaf);
            }
        }
        self.find_leaf(pool, &Target::Key(key))
    }

    /// Find the leaf for `key` (at `hint` if it is unchanged, see
    /// `find_leaf_hinted`) and latch it exclusively.
    pub(super) fn leaf_for_write<'p>(
        &self,
        pool: &'p BufferPool,
        key: &[u8],
        mut hint: Option<FrameHint>,
    ) -> Result<ExclusiveGuard<'p>> {
        loop {
            let leaf = self.find_leaf_hinted(pool, key, hint.take())?;
            if let Some(g) = leaf.try_upgrade() {
                return Ok(g);
            }
            pool.check_healthy()?;
            pool.note_retry(self.root);
        }
    }

    /// In an exclusively latched leaf: the slot for `key` and, if the key is
    /// present, a copy of its stored value (TID and value).
    pub(super) fn locate(
        pool: &BufferPool,
        leaf: &ExclusiveGuard<'_>,
        key: &[u8],
    ) -> Result<(usize, Option<Vec<u8>>)> {
        let unreadable = || Self::corruption(pool, leaf.page_id(), "unreadable leaf");
        let n = Node::new(leaf.data());
        let (idx, found) = n.lower_bound(key).ok_or_else(unreadable)?;
        let existing = if found {
            Some(n.value(idx).ok_or_else(unreadable)?.to_vec())
        } else {
            None
        };
        Ok((idx, existing))
    }

    /// Exclusive latches from the root down to the leaf for `key`.
    /// With `release_safe`, ancestors are released as soon as a node below
    /// them can absorb one more separator (a split cannot propagate past it).
    pub(super) fn exclusive_path<'p>(
        &self,
        pool: &'p BufferPool,
        key: &[u8],
        release_safe: bool,
    ) -> Result<Vec<ExclusiveGuard<'p>>> {
        let max_sep = node::max_key_len(pool.page_size());
        let mut path = vec![pool.exclusive(self.root)?];
        loop {
            let top = path.last().expect("path is never empty");
            let data = top.data();
            match page_kind(data) {
                Some(PageKind::BtreeLeaf) => return Ok(path),
                Some(PageKind::BtreeInner) => {}
                _ => {
                    return Err(Self::corruption(
                        pool,
                        top.page_id(),
                        "page in a tree is not a tree node",
                    ))
                }
            }
            let (_, child) = Node::new(data).child_for(key).ok_or_else(|| {
                Self::corruption(pool, top.page_id(), "inner node has no child for the key")
            })?;
            let child = pool.exclusive(child)?;
            let child_data = child.data();
            let safe_inner = page_kind(child_data) == Some(PageKind::BtreeInner)
                && Node::new(child_data).fits(max_sep, 8);
            if release_safe && safe_inner {
                path.clear();
            }
            path.push(child);
        }
    }

    /// Descend optimistically and latch the target leaf in shared mode. The
    /// shared latch is taken only at the version the descent validated, so
    /// the leaf cannot have been freed and reused (even by another tree) in
    /// between.
    pub(super) fn shared_leaf<'p>(
        &self,
        pool: &'p BufferPool,
        target: &Target<'_>,
    ) -> Result<SharedGuard<'p>> {
        loop {
            let leaf = self.find_leaf(pool, target)?;
            if let Some(shared) = leaf.try_share() {
                return Ok(shared);
            }
            pool.note_retry(self.root);
        }
    }
}
