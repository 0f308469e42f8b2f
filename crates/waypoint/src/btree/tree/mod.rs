//! B+-tree algorithms over the buffer pool: the [`BTree`] handle, tree
//! creation and the leaf value encoding; the algorithms live in the child
//! modules, one concept each.
//!
//! - `descent`: finding a leaf: optimistic descent (or a leaf hint),
//!   upgrading it for a write, the exclusive path of a structure
//!   modification.
//! - `point`: the single-record operations (`get`, `insert`, `update`,
//!   `remove`, and `restore` for logical undo).
//! - `split`: splits and root growth, logged as one group each.
//! - `merge`: merges and root collapse, logged as one group each.
//! - `scan`: range scans in either direction.
//! - `check`: the integrity check and `destroy`.
//!
//! Readers descend with optimistic lock coupling: no latch is written on
//! the way down, every node read is validated before its child pointer is
//! trusted, and a failed validation restarts from the root. Writers descend
//! the same way and upgrade only the leaf. Structure modifications (split,
//! merge, root growth and collapse) take exclusive latches top-down with
//! lock coupling, releasing ancestors that are safe, and never hold a latch
//! while waiting for a lower one held by a reader (readers hold none) or
//! for one above (order is always root to leaf, left to right). The scheme
//! is LeanStore's; no section of the seed papers describes it.
//!
//! Invariants: the root page id never changes; every key in a node lies in
//! (lower fence, upper fence]; all leaves are at the same depth.
//!
//! Leaf values are stored as `[TID, 8 bytes little endian][user value]`
//! (`encode_value`, `decode_value`); the TID is Silo's per-record
//! version word (seed 002 §2).

mod check;
mod descent;
mod merge;
mod point;
mod scan;
mod split;
#[cfg(test)]
mod tests;

pub use point::HintedGet;
pub use scan::{ScanBound, Visitor};

use super::node::{self, Fence, NodeMut};
use super::{PageLog, PageOp, RootId};
use crate::buffer::page::{self, PageKind, PAGE_HEADER_SIZE};
use crate::buffer::{BufferPool, PageId};
use crate::error::{Error, Result};
use crate::ids::Tid;

/// Width of the TID stored in front of every leaf value.
pub const TID_SIZE: usize = 8;

/// A handle to one B+-tree: its root page id. Cheap to copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BTree {
    root: RootId,
}

/// A leaf value as stored: the TID, then the user value. Recovery's
/// logical undo rebuilds a stored value with it too.
pub(crate) fn encode_value(tid: Tid, value: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(TID_SIZE + value.len());
    v.extend_from_slice(&tid.get().to_le_bytes());
    v.extend_from_slice(value);
    v
}

fn decode_value(stored: &[u8]) -> Option<(Tid, &[u8])> {
    let tid = Tid::new(u64::from_le_bytes(stored.get(..TID_SIZE)?.try_into().ok()?));
    Some((tid, &stored[TID_SIZE..]))
}

fn page_kind(data: &[u8]) -> Option<PageKind> {
    page::page_kind(data)
}

/// Copy a node body (and its kind) from `src` into `dst`, keeping `dst`'s
/// page id and GSN: how a root keeps its page id when it grows or shrinks.
fn copy_body(dst: &mut [u8], src: &[u8]) {
    dst[PAGE_HEADER_SIZE..].copy_from_slice(&src[PAGE_HEADER_SIZE..]);
    if let Some(kind) = page::page_kind(src) {
        page::set_page_kind(dst, kind);
    }
}

impl BTree {
    /// Create an empty tree: one leaf that is also the root.
    pub fn create(pool: &BufferPool, log: &dyn PageLog) -> Result<BTree> {
        let mut root = pool.allocate(PageKind::BtreeLeaf)?;
        NodeMut::new(root.data_mut()).init_leaf(Fence::Infinite, Fence::Infinite);
        let id = root.page_id();
        log.logged_smo(id, &mut [&mut root], &[PageOp::Image])?;
        Ok(BTree { root: id })
    }

    pub fn open(root: RootId) -> BTree {
        BTree { root }
    }

    pub fn root(&self) -> RootId {
        self.root
    }

    pub fn max_key_len(pool: &BufferPool) -> usize {
        node::max_key_len(pool.page_size())
    }

    /// Largest user value (the TID is stored beside it).
    pub fn max_value_len(pool: &BufferPool) -> usize {
        node::max_value_len(pool.page_size()) - TID_SIZE
    }

    fn corruption(pool: &BufferPool, pid: PageId, detail: impl Into<String>) -> Error {
        Error::Corruption {
            path: pool.file().path().to_path_buf(),
            offset: pid * pool.page_size() as u64,
            detail: detail.into(),
        }
    }
}
