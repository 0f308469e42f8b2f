//! B+-trees over buffer-managed pages: tables and secondary indexes.
//!
//! - [`node`]: the slotted page format of one node (pure functions on bytes).
//! - [`tree`]: the tree algorithms: optimistic descent (readers write no
//!   shared cache line), latch-coupled splits and merges, range scans.
//! - this file: [`PageOp`] and [`PageLog`], the one place through which
//!   every page modification passes, so the log layer sees each of them
//!   (seed 000 §3.1: records carry page id, GSN and before/after images).
//!
//! Leaf values are stored as `[8-byte TID, little endian][user value]`; the
//! TID is Silo's per-record version word (seed 002 §2) that optimistic
//! concurrency control validates against.

pub mod node;
pub mod tree;

pub use tree::{BTree, ScanBound};

use crate::buffer::{ExclusiveGuard, PageId};
use crate::error::Result;

/// One change to one page: the unit a log record describes. Tuple ops name
/// the key rather than a slot, so redo can re-apply them to a page image
/// whose layout differs. A structure modification logs each page it
/// changed once: by its one change when that change was a split's left
/// half or a separator insert (a few bytes instead of a page), else by the
/// page's whole new image (new pages, new roots, merges, and pages changed
/// twice).
#[derive(Debug, Clone, Copy)]
pub enum PageOp<'a> {
    /// A leaf tuple was inserted; `value` includes the TID prefix.
    Insert { key: &'a [u8], value: &'a [u8] },
    /// A leaf tuple's value changed from `before` to `after`.
    Update {
        key: &'a [u8],
        before: &'a [u8],
        after: &'a [u8],
    },
    /// A leaf tuple was removed; `before` is its value (for undo).
    Remove { key: &'a [u8], before: &'a [u8] },
    /// The page was rewritten by a structure modification; the record is
    /// the page's body after the change. Trees log images only through
    /// [`PageLog::logged_smo`], never one page at a time.
    Image,
    /// The page kept the left half of a split at slot `at`
    /// ([`NodeMut::split`](node::NodeMut::split)), whose separator is
    /// `separator`; its upper half went to a new page of the same
    /// structure modification. Only through [`PageLog::logged_smo`].
    Split { at: usize, separator: &'a [u8] },
    /// The inner page took the separator of a child split
    /// ([`NodeMut::insert_separator`](node::NodeMut::insert_separator)).
    /// Only through [`PageLog::logged_smo`].
    Separator {
        separator: &'a [u8],
        left: PageId,
        right: PageId,
    },
}

/// The seam between the trees and the write-ahead log. It is called with
/// the page still exclusively latched, after the change was applied, so the
/// logger can assign the record's GSN, stamp it into the page header and
/// remember the page's last writer before any other thread sees the page.
pub trait PageLog {
    /// `tree` is the root page id of the tree `page` belongs to (logical
    /// undo of a tuple op goes through the tree, since a split may have moved
    /// the key to another page).
    fn logged(&self, tree: RootId, page: &mut ExclusiveGuard<'_>, op: PageOp<'_>) -> Result<()>;

    /// A structure modification (split, merge, new or collapsed root, new
    /// tree) changed every page in `pages`, all still exclusively latched:
    /// log `ops[i]` for `pages[i]` (an image or one of the structural ops)
    /// as one group. Recovery redoes a group all or
    /// nothing, since a tree with half a split in it has keys no path
    /// reaches. A freed page belongs in the group too (as a `Free` page),
    /// so a later reuse of it cannot be redone while the structure
    /// modification that freed it is not.
    fn logged_smo(
        &self,
        tree: RootId,
        pages: &mut [&mut ExclusiveGuard<'_>],
        ops: &[PageOp<'_>],
    ) -> Result<()>;
}

/// Logging switched off: pages change, nothing is recorded. Used until a
/// log scheme is attached and by `--logging none` benchmarks.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoLog;

impl PageLog for NoLog {
    fn logged(&self, _tree: RootId, _page: &mut ExclusiveGuard<'_>, _op: PageOp<'_>) -> Result<()> {
        Ok(())
    }

    fn logged_smo(
        &self,
        _tree: RootId,
        _pages: &mut [&mut ExclusiveGuard<'_>],
        _ops: &[PageOp<'_>],
    ) -> Result<()> {
        Ok(())
    }
}

/// Page id of a tree root; roots never move, so catalogs store them.
pub type RootId = PageId;
