//! Splits: a writer whose record does not fit in its leaf calls
//! `split_for`, which splits nodes on the key's path until the leaf has
//! room, growing the tree at the root when the root itself splits.
//!
//! `split_for` latches the path exclusively, top-down, releasing ancestors
//! that can absorb one more separator (`exclusive_path`, descent.rs), so
//! every node that may have to split is latched; it allocates every page
//! the split could need before changing anything (`Spares`), then splits
//! bottom-up, each split handing its separator to the level above. Where a
//! node splits is `NodeMut::split_index_for`'s choice (node/split.rs;
//! docs/decisions/006-page-splits-at-the-insertion-point.md).
//!
//! Invariants kept: the root page id never changes (a root grows by moving
//! its content into two new children, `split_root`); a failed allocation
//! leaves the tree unchanged; every page one split changed is logged as
//! one group while all of them are still latched (`Smo`,
//! [`PageLog::logged_smo`]), so recovery redoes all of it or none, as ARIES
//! does with the system transactions behind page splits (seed 000 §2.1). A
//! page changed once, by its split or by a separator insert, is logged by
//! that change ([`PageOp::Split`], [`PageOp::Separator`]); new pages and
//! pages changed twice by their images.

use super::{copy_body, page_kind, BTree};
use crate::btree::node::{Fence, Node, NodeMut};
use crate::btree::{PageLog, PageOp, RootId};
use crate::buffer::page::{self, PageKind};
use crate::buffer::{BufferPool, ExclusiveGuard, PageId};
use crate::error::Result;

/// Pages allocated up front for one split (see `split_for`).
struct Spares<'p> {
    pages: Vec<ExclusiveGuard<'p>>,
}

impl<'p> Spares<'p> {
    fn allocate(pool: &'p BufferPool, n: usize) -> Result<Self> {
        let mut spares = Spares {
            pages: Vec::with_capacity(n),
        };
        for _ in 0..n {
            match pool.allocate(PageKind::Free) {
                Ok(g) => spares.pages.push(g),
                Err(e) => {
                    spares.release(pool);
                    return Err(e);
                }
            }
        }
        Ok(spares)
    }

    fn take(&mut self, kind: PageKind) -> ExclusiveGuard<'p> {
        let mut page = self
            .pages
            .pop()
            .expect("a split uses at most one page per latched level plus one");
        page::set_page_kind(page.data_mut(), kind);
        page
    }

    fn release(&mut self, pool: &BufferPool) {
        for page in self.pages.drain(..) {
            pool.free_page(page);
        }
    }
}

/// The pages one structure modification changed, logged as one group
/// ([`PageLog::logged_smo`]) at its end, while every one of them is still
/// latched.
#[derive(Default)]
struct Smo<'p> {
    /// Pages of the latched path that changed, each with its one change
    /// (`None`: logged as an image).
    changed: Vec<(PageId, Option<NodeChange>)>,
    /// New nodes taken from the spares, still latched; logged as images.
    fresh: Vec<ExclusiveGuard<'p>>,
}

/// A change to an existing node that its log record can describe in a few
/// bytes instead of the page's image
/// (docs/decisions/007-structure-modifications-all-or-nothing.md).
#[derive(Debug)]
enum NodeChange {
    /// The node kept the left half of a split at this slot.
    Split { at: usize, separator: Vec<u8> },
    /// The inner node took the separator of a child split.
    Separator {
        separator: Vec<u8>,
        left: PageId,
        right: PageId,
    },
}

impl NodeChange {
    fn op(&self) -> PageOp<'_> {
        match self {
            NodeChange::Split { at, separator } => PageOp::Split { at: *at, separator },
            NodeChange::Separator {
                separator,
                left,
                right,
            } => PageOp::Separator {
                separator,
                left: *left,
                right: *right,
            },
        }
    }
}

impl<'p> Smo<'p> {
    /// Page `pid` of the path changed; `change` describes the change, or is
    /// `None` when only an image can. A page changed twice is logged by its
    /// image, since one record per page keeps a group's pages independent.
    fn changed(&mut self, pid: PageId, change: Option<NodeChange>) {
        match self.changed.iter_mut().find(|(p, _)| *p == pid) {
            Some((_, logged)) => *logged = None,
            None => self.changed.push((pid, change)),
        }
    }

    /// Keep a new node latched until the modification is logged; returns
    /// its index in `fresh`.
    fn fresh(&mut self, page: ExclusiveGuard<'p>) -> usize {
        self.fresh.push(page);
        self.fresh.len() - 1
    }

    fn log(
        &mut self,
        log: &dyn PageLog,
        root: RootId,
        path: &mut [ExclusiveGuard<'p>],
    ) -> Result<()> {
        let expected = self.changed.len() + self.fresh.len();
        let changed = &self.changed;
        let mut pages: Vec<&mut ExclusiveGuard<'p>> = Vec::with_capacity(expected);
        let mut ops: Vec<PageOp<'_>> = Vec::with_capacity(expected);
        for guard in path.iter_mut() {
            if let Some((_, change)) = changed.iter().find(|(p, _)| *p == guard.page_id()) {
                ops.push(change.as_ref().map_or(PageOp::Image, NodeChange::op));
                pages.push(guard);
            }
        }
        for guard in self.fresh.iter_mut() {
            ops.push(PageOp::Image);
            pages.push(guard);
        }
        debug_assert_eq!(
            pages.len(),
            expected,
            "every changed page is on the latched path"
        );
        if pages.is_empty() {
            return Ok(());
        }
        log.logged_smo(root, &mut pages, &ops)
    }
}

impl BTree {
    /// Split the nodes on the path to `key` until its leaf can take a value
    /// of `value_len` bytes.
    pub(super) fn split_for(
        &self,
        pool: &BufferPool,
        log: &dyn PageLog,
        key: &[u8],
        value_len: usize,
    ) -> Result<()> {
        let mut path = self.exclusive_path(pool, key, true)?;
        let leaf_fits = {
            let n = Node::new(path.last().expect("path").data());
            n.fits(key.len(), value_len)
        };
        if leaf_fits {
            return Ok(()); // another writer split it meanwhile
        }
        // Allocate every page the split could need before changing anything:
        // a failed allocation half-way would leave the moved half of a node
        // unreachable. Each latched level splits at most once and a root
        // split takes two pages.
        let mut spares = Spares::allocate(pool, path.len() + 1)?;
        let mut smo = Smo::default();
        let result = self
            .split_path(pool, &mut path, &mut spares, &mut smo, key)
            .and_then(|()| smo.log(log, self.root, &mut path));
        drop(smo);
        spares.release(pool);
        result
    }

    fn split_path<'p>(
        &self,
        pool: &'p BufferPool,
        path: &mut [ExclusiveGuard<'p>],
        spares: &mut Spares<'p>,
        smo: &mut Smo<'p>,
        key: &[u8],
    ) -> Result<()> {
        // Split bottom-up; each split hands a separator to the level above.
        let level = path.len() - 1;
        let pid = path[level].page_id();
        if pid == self.root {
            return self
                .split_root(pool, &mut path[level], spares, smo, key)
                .map(|_| ());
        }
        let (sep, right) = Self::split_node(&mut path[level], spares, smo, key);
        let right_pid = smo.fresh[right].page_id();
        self.place_separator(pool, path, spares, smo, level - 1, &sep, pid, right_pid)
    }

    /// Split a non-root node that is about to take `key` in two: its upper
    /// part moves to a new page taken from `spares`. Returns the separator
    /// and the new page's index in `smo.fresh`.
    fn split_node<'p>(
        node: &mut ExclusiveGuard<'p>,
        spares: &mut Spares<'p>,
        smo: &mut Smo<'p>,
        key: &[u8],
    ) -> (Vec<u8>, usize) {
        let kind = page_kind(node.data()).unwrap_or(PageKind::BtreeLeaf);
        let mut right = spares.take(kind);
        let mut nm = NodeMut::new(node.data_mut());
        let at = nm.split_index_for(key);
        let sep = nm.split(at, right.data_mut());
        let change = NodeChange::Split {
            at,
            separator: sep.clone(),
        };
        smo.changed(node.page_id(), Some(change));
        (sep, smo.fresh(right))
    }

    /// The parent at `path[level]` cannot take the separator `sep` for the
    /// child split (`left` | `right`): split the parent (recursively up),
    /// then insert the separator into whichever half covers it.
    #[allow(clippy::too_many_arguments)]
    fn split_parent_then_insert<'p>(
        &self,
        pool: &'p BufferPool,
        path: &mut [ExclusiveGuard<'p>],
        spares: &mut Spares<'p>,
        smo: &mut Smo<'p>,
        level: usize,
        sep: &[u8],
        left: PageId,
        right: PageId,
    ) -> Result<()> {
        let pid = path[level].page_id();
        if pid == self.root {
            // Grow the tree: the root's content moves into two new children.
            let (l, r, root_sep) = self.split_root(pool, &mut path[level], spares, smo, sep)?;
            let target = if sep <= root_sep.as_slice() { l } else { r };
            return Self::insert_separator(pool, &mut smo.fresh[target], sep, left, right);
        }
        let (parent_sep, nr) = Self::split_node(&mut path[level], spares, smo, sep);
        let new_right_pid = smo.fresh[nr].page_id();
        // Place the pending separator in the half that covers it.
        if sep <= parent_sep.as_slice() {
            smo.changed(path[level].page_id(), None);
            Self::insert_separator(pool, &mut path[level], sep, left, right)?;
        } else {
            Self::insert_separator(pool, &mut smo.fresh[nr], sep, left, right)?;
        }
        // Now hand the parent's separator one level up.
        self.place_separator(
            pool,
            path,
            spares,
            smo,
            level - 1,
            &parent_sep,
            pid,
            new_right_pid,
        )
    }

    /// Child `left` of `path[level]` was split into `left` | `right` at
    /// `sep`: insert the separator, splitting `path[level]` first (and so on
    /// upward) if it is full. The safe-ancestor descent guarantees every
    /// node that may need to split is still latched in `path`.
    #[allow(clippy::too_many_arguments)]
    fn place_separator<'p>(
        &self,
        pool: &'p BufferPool,
        path: &mut [ExclusiveGuard<'p>],
        spares: &mut Spares<'p>,
        smo: &mut Smo<'p>,
        level: usize,
        sep: &[u8],
        left: PageId,
        right: PageId,
    ) -> Result<()> {
        if Node::new(path[level].data()).fits(sep.len(), 8) {
            let change = NodeChange::Separator {
                separator: sep.to_vec(),
                left,
                right,
            };
            smo.changed(path[level].page_id(), Some(change));
            Self::insert_separator(pool, &mut path[level], sep, left, right)
        } else {
            self.split_parent_then_insert(pool, path, spares, smo, level, sep, left, right)
        }
    }

    /// In inner node `parent`, the child `left` was split into `left` (keys
    /// <= sep) and `right`: point the old entry at `right` and insert
    /// (sep → left) before it.
    fn insert_separator(
        pool: &BufferPool,
        parent: &mut ExclusiveGuard<'_>,
        sep: &[u8],
        left: PageId,
        right: PageId,
    ) -> Result<()> {
        let pid = parent.page_id();
        NodeMut::new(parent.data_mut())
            .insert_separator(sep, left, right)
            .map_err(|detail| Self::corruption(pool, pid, detail))
    }

    /// Split a full root that is about to take `key` in place: its content
    /// moves to two new children and the root becomes an inner node with one
    /// separator. Returns the children's indices in `smo.fresh` and the
    /// separator.
    fn split_root<'p>(
        &self,
        pool: &'p BufferPool,
        root: &mut ExclusiveGuard<'p>,
        spares: &mut Spares<'p>,
        smo: &mut Smo<'p>,
        key: &[u8],
    ) -> Result<(usize, usize, Vec<u8>)> {
        let kind = page_kind(root.data()).unwrap_or(PageKind::BtreeLeaf);
        let mut left = spares.take(kind);
        let mut right = spares.take(kind);
        copy_body(left.data_mut(), root.data());
        let mut lm = NodeMut::new(left.data_mut());
        let at = lm.split_index_for(key);
        let sep = lm.split(at, right.data_mut());
        {
            let mut rm = NodeMut::new(root.data_mut());
            rm.init_inner(Fence::Infinite, Fence::Infinite, right.page_id());
            rm.insert_at(0, &sep, &left.page_id().to_le_bytes())
                .map_err(|_| {
                    Self::corruption(pool, self.root, "separator does not fit in a new root")
                })?;
        }
        smo.changed(self.root, None);
        let l = smo.fresh(left);
        let r = smo.fresh(right);
        Ok((l, r, sep))
    }
}
