//! Slotted-page format of B+-tree nodes, as pure functions over page bytes.
//!
//! This module owns the node body: bytes `PAGE_HEADER_SIZE..page_size` of a
//! page whose kind (byte 6) is `BtreeLeaf` or `BtreeInner`. It never touches
//! the rest of the 32-byte page header. It knows nothing about latches, TIDs
//! or child pages beyond storing them: leaf values are opaque byte strings and
//! inner values are 8-byte child page ids (u64 LE).
//!
//! Invariant (checked by `Node::validate`): keys are unique and strictly
//! increasing in memcmp order; every key k satisfies lower < k <= upper for
//! the node's fences; every slot, fence and value lies inside the heap
//! `data_start..page_size` without overlapping another; `live_heap` is exactly
//! the sum of their lengths; inner values are 8 bytes.
//!
//! Inner node with separators `s[0..n]` and children `c[0..n]`: child `c[i]`
//! covers `(s[i-1], s[i]]` and `upper_child` covers `(s[n-1], upper fence]`.
//!
//! Layout (all integers little-endian unless noted):
//!
//! ```text
//! offset      size      field
//!      0        32      page header (buffer::page); only byte 6, the kind, is written here
//!     32         2      count: number of slots
//!     34         1      flags: bit 0 = lower fence is -infinity, bit 1 = upper fence is
//!                       +infinity; other bits zero
//!     35         1      reserved, zero
//!     36         4      data_start (u32): lowest heap byte; the heap is data_start..page_size
//!                       (u32 because an empty heap starts at page_size = 65536)
//!     40         4      live_heap (u32): heap bytes owned by live keys, values and fences
//!     44         2      lower fence offset (u16)
//!     46         2      lower fence length (u16)
//!     48         2      upper fence offset (u16)
//!     50         2      upper fence length (u16)
//!     52         2      prefix length p (u16): heads are taken from key byte p on; 0 when a
//!                       fence is infinite, otherwise at most the length of the common
//!                       prefix of the two fences (so every key of the node starts with
//!                       those p bytes: lower < k <= upper forces it)
//!     54         2      insert hint (u16): 1 + the slot index of the last `insert_at` since
//!                       the node was initialised, 0 if none. Only a hint, read to choose a
//!                       split point (`split_index_for`); removals may leave it stale, so any
//!                       value is valid
//!     56         8      upper_child (u64): inner nodes only, zero in leaves
//!     64  10*count      slot array; slot i at 64 + 10*i:
//!                         +0 u16 offset of the entry: key bytes immediately followed by value bytes
//!                         +2 u16 key length
//!                         +4 u16 value length
//!                         +6 4 bytes key head: key bytes p..p+4 zero-padded, so comparing
//!                            heads as big-endian u32 agrees with memcmp whenever they differ
//!                            (all keys share bytes 0..p; without the prefix, integer keys
//!                            below 2^32 would all have the head 0)
//!      ..               free gap (slots grow up into it, the heap grows down into it)
//! data_start..page_size heap: entries and fence keys packed downward from the page end,
//!                       with holes left by remove/shrink until `compactify`
//! ```
//!
//! A zero-length range (empty fence key, or an entry with empty key and value)
//! stores offset 0 and occupies no heap bytes. Infinite fences store offset 0
//! and length 0.
//!
//! Optimistic readers may see torn or arbitrary bytes, so every `Node` method
//! is total: all reads are bounds-checked `get`s, counts are clamped to what
//! fits in the page, and inconsistencies surface as `None`. `NodeMut` runs
//! under an exclusive latch on a valid node and asserts its preconditions.
//!
//! Files: `layout` (the offsets above, raw reads and writes, slots),
//! `keys` (key heads and comparison), `read` (the read-only [`Node`]),
//! `write` ([`NodeMut`]: initialisation, insert, remove, values, children),
//! `split` (`NodeMut`'s split, merge and compaction).

mod keys;
mod layout;
mod read;
mod split;
#[cfg(test)]
mod tests;
mod write;

pub use layout::{max_key_len, max_value_len, NODE_HEADER_END, SLOT_SIZE};
pub use read::Node;
pub use write::NodeMut;

/// A fence key: the lower fence is exclusive, the upper inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fence<'a> {
    Infinite,
    Key(&'a [u8]),
}

/// The operation does not fit in the node; the node is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoSpace;

impl std::fmt::Display for NoSpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("node has no space for the operation")
    }
}

impl std::error::Error for NoSpace {}
