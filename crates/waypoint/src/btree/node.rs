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

use crate::buffer::page::{self, PageKind, PAGE_HEADER_SIZE};
use std::cmp::Ordering;

const COUNT: usize = PAGE_HEADER_SIZE;
const FLAGS: usize = PAGE_HEADER_SIZE + 2;
const RESERVED1: usize = PAGE_HEADER_SIZE + 3;
const DATA_START: usize = PAGE_HEADER_SIZE + 4;
const LIVE_HEAP: usize = PAGE_HEADER_SIZE + 8;
const LOWER_OFF: usize = PAGE_HEADER_SIZE + 12;
const UPPER_OFF: usize = PAGE_HEADER_SIZE + 16;
const PREFIX_LEN: usize = PAGE_HEADER_SIZE + 20;
const INSERT_HINT: usize = PAGE_HEADER_SIZE + 22;
const UPPER_CHILD: usize = PAGE_HEADER_SIZE + 24;
/// Start of the slot array: end of the node header.
pub const NODE_HEADER_END: usize = PAGE_HEADER_SIZE + 32;
/// Bytes per slot in the slot array.
pub const SLOT_SIZE: usize = 10;

const FLAG_LOWER_INF: u8 = 1;
const FLAG_UPPER_INF: u8 = 2;

/// Longest key (and fence) the tree may store in a node of `page_size`.
pub fn max_key_len(page_size: usize) -> usize {
    page_size / 16
}

/// Longest value the tree may store in a node of `page_size`. Sized so a leaf
/// holds two max entries plus two max fences and an inner node three max
/// separators plus two max fences (see `max_sizes_fit_for_every_page_size`).
pub fn max_value_len(page_size: usize) -> usize {
    page_size / 4
}

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

fn rd16(p: &[u8], at: usize) -> Option<usize> {
    Some(u16::from_le_bytes(p.get(at..at + 2)?.try_into().ok()?) as usize)
}

fn rd32(p: &[u8], at: usize) -> Option<usize> {
    Some(u32::from_le_bytes(p.get(at..at + 4)?.try_into().ok()?) as usize)
}

fn rd64(p: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(p.get(at..at + 8)?.try_into().ok()?))
}

fn wr16(p: &mut [u8], at: usize, v: usize) {
    debug_assert!(v <= u16::MAX as usize);
    p[at..at + 2].copy_from_slice(&(v as u16).to_le_bytes());
}

fn wr32(p: &mut [u8], at: usize, v: usize) {
    p[at..at + 4].copy_from_slice(&(v as u32).to_le_bytes());
}

fn fence_len(f: Option<Fence<'_>>) -> usize {
    match f {
        Some(Fence::Key(k)) => k.len(),
        _ => 0,
    }
}

/// Length of the longest common prefix of `a` and `b`.
fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The head a slot stores for `key` in a node with prefix length `p` (0 for
/// a key shorter than `p`, which a valid node never holds).
fn head_at(key: &[u8], p: usize) -> u32 {
    key_head(key.get(p..).unwrap_or(&[]))
}

/// First 4 key bytes, zero-padded, as a big-endian integer.
fn key_head(key: &[u8]) -> u32 {
    let mut b = [0u8; 4];
    for (d, s) in b.iter_mut().zip(key) {
        *d = *s;
    }
    u32::from_be_bytes(b)
}

/// memcmp order, compared 8 bytes at a time without a libc call: with
/// short keys whose heads are equal (integer keys below 2^32 all have a zero
/// head) the call overhead of `memcmp` dominated the binary search.
fn cmp_keys(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let (mut ca, mut cb) = (a[..n].chunks_exact(8), b[..n].chunks_exact(8));
    for (x, y) in (&mut ca).zip(&mut cb) {
        let (x, y) = (
            u64::from_be_bytes(x.try_into().expect("8-byte chunk")),
            u64::from_be_bytes(y.try_into().expect("8-byte chunk")),
        );
        if x != y {
            return x.cmp(&y);
        }
    }
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}

#[derive(Clone, Copy)]
struct Slot {
    off: usize,
    klen: usize,
    vlen: usize,
    head: u32,
}

impl Slot {
    fn decode(b: &[u8; SLOT_SIZE]) -> Slot {
        Slot {
            off: u16::from_le_bytes([b[0], b[1]]) as usize,
            klen: u16::from_le_bytes([b[2], b[3]]) as usize,
            vlen: u16::from_le_bytes([b[4], b[5]]) as usize,
            head: u32::from_be_bytes([b[6], b[7], b[8], b[9]]),
        }
    }
}

/// Read-only view of a node page. Total over arbitrary bytes.
#[derive(Clone, Copy)]
pub struct Node<'a> {
    page: &'a [u8],
}

impl<'a> Node<'a> {
    pub fn new(page: &'a [u8]) -> Self {
        Node { page }
    }

    pub fn page_size(&self) -> usize {
        self.page.len()
    }

    pub fn is_leaf(&self) -> bool {
        self.page.get(6) == Some(&(PageKind::BtreeLeaf as u8))
    }

    fn is_inner(&self) -> bool {
        self.page.get(6) == Some(&(PageKind::BtreeInner as u8))
    }

    fn raw_count(&self) -> usize {
        rd16(self.page, COUNT).unwrap_or(0)
    }

    /// Number of slots, clamped to what the slot array could hold in this page.
    pub fn count(&self) -> usize {
        let cap = self.page.len().saturating_sub(NODE_HEADER_END) / SLOT_SIZE;
        self.raw_count().min(cap)
    }

    fn live_heap(&self) -> usize {
        rd32(self.page, LIVE_HEAP).unwrap_or(0)
    }

    fn data_start(&self) -> usize {
        rd32(self.page, DATA_START).unwrap_or(0)
    }

    fn slot(&self, i: usize) -> Option<Slot> {
        if i >= self.count() {
            return None;
        }
        let at = NODE_HEADER_END + i * SLOT_SIZE;
        Some(Slot::decode(
            self.page.get(at..at + SLOT_SIZE)?.try_into().ok()?,
        ))
    }

    fn slot_key(&self, s: &Slot) -> Option<&'a [u8]> {
        self.page.get(s.off..s.off + s.klen)
    }

    pub fn key(&self, i: usize) -> Option<&'a [u8]> {
        self.slot_key(&self.slot(i)?)
    }

    pub fn value(&self, i: usize) -> Option<&'a [u8]> {
        let s = self.slot(i)?;
        self.page.get(s.off + s.klen..s.off + s.klen + s.vlen)
    }

    /// First slot whose key >= `key`, and whether it is equal. None if the
    /// node's bytes are inconsistent.
    pub fn lower_bound(&self, key: &[u8]) -> Option<(usize, bool)> {
        let count = self.count();
        let p = self.prefix_len();
        if p > 0 {
            // Every key here starts with the prefix; a probe that does not
            // sorts before or after all of them.
            let Some(Fence::Key(lower)) = self.lower_fence() else {
                return None;
            };
            let prefix = lower.get(..p)?;
            if key.get(..p) != Some(prefix) {
                return Some(if key < prefix {
                    (0, false)
                } else {
                    (count, false)
                });
            }
        }
        let head = key_head(&key[p..]);
        // The hot loop of every descent: the slot array is bounds-checked
        // once here, and a key only when its head is not decisive.
        let slots = self
            .page
            .get(NODE_HEADER_END..NODE_HEADER_END + count * SLOT_SIZE)?;
        let (mut lo, mut hi) = (0, count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let s = Slot::decode(
                slots[mid * SLOT_SIZE..(mid + 1) * SLOT_SIZE]
                    .try_into()
                    .expect("slot-sized chunk"),
            );
            // Equal heads say nothing about order (keys may differ after byte 4
            // or only in zero padding), so fall back to the full key.
            let ord = match s.head.cmp(&head) {
                Ordering::Equal => cmp_keys(self.slot_key(&s)?.get(p..)?, &key[p..]),
                o => o,
            };
            match ord {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Some((mid, true)),
            }
        }
        Some((lo, false))
    }

    /// Whether `key` lies in (lower fence, upper fence], the range of keys
    /// this node may hold; false for a node whose fences are unreadable.
    /// The one statement of that rule for descents, leaf hints and redo.
    pub fn covers(&self, key: &[u8]) -> bool {
        let above_lower = match self.lower_fence() {
            Some(Fence::Infinite) => true,
            Some(Fence::Key(lo)) => key > lo,
            None => false,
        };
        let below_upper = match self.upper_fence() {
            Some(Fence::Infinite) => true,
            Some(Fence::Key(hi)) => key <= hi,
            None => false,
        };
        above_lower && below_upper
    }

    /// Key bytes all keys of this node share (see the layout).
    fn prefix_len(&self) -> usize {
        rd16(self.page, PREFIX_LEN).unwrap_or(0)
    }

    fn fence(&self, flag: u8, at: usize) -> Option<Fence<'a>> {
        if self.page.get(FLAGS)? & flag != 0 {
            return Some(Fence::Infinite);
        }
        let (off, len) = (rd16(self.page, at)?, rd16(self.page, at + 2)?);
        Some(Fence::Key(self.page.get(off..off + len)?))
    }

    pub fn lower_fence(&self) -> Option<Fence<'a>> {
        self.fence(FLAG_LOWER_INF, LOWER_OFF)
    }

    pub fn upper_fence(&self) -> Option<Fence<'a>> {
        self.fence(FLAG_UPPER_INF, UPPER_OFF)
    }

    /// Child for keys above the last separator. None for non-inner pages.
    pub fn upper_child(&self) -> Option<u64> {
        if !self.is_inner() {
            return None;
        }
        rd64(self.page, UPPER_CHILD)
    }

    /// Child i of an inner node; `i == count()` gives `upper_child`.
    pub fn child(&self, i: usize) -> Option<u64> {
        if !self.is_inner() {
            return None;
        }
        if i == self.count() {
            return self.upper_child();
        }
        Some(u64::from_le_bytes(self.value(i)?.try_into().ok()?))
    }

    /// Inner node: (index, child page id) of the child covering `key`.
    pub fn child_for(&self, key: &[u8]) -> Option<(usize, u64)> {
        if !self.is_inner() {
            return None;
        }
        let (i, _) = self.lower_bound(key)?;
        Some((i, self.child(i)?))
    }

    /// Bytes available for slots and heap after compaction.
    pub fn free_space(&self) -> usize {
        self.page
            .len()
            .saturating_sub(NODE_HEADER_END + self.count() * SLOT_SIZE)
            .saturating_sub(self.live_heap())
    }

    /// Bytes of live slots, keys, values and fences.
    pub fn used_space(&self) -> usize {
        (self.count() * SLOT_SIZE)
            .saturating_add(self.live_heap())
            .min(self.page.len())
    }

    /// Whether an entry of these sizes can be inserted (possibly after compaction).
    pub fn fits(&self, key_len: usize, value_len: usize) -> bool {
        SLOT_SIZE.saturating_add(key_len).saturating_add(value_len) <= self.free_space()
    }

    /// Full structural check: used after reading a page from disk and in
    /// debug assertions. Allocates at most one entry per slot the page can hold.
    pub fn validate(&self) -> Result<(), String> {
        let p = self.page;
        let ps = p.len();
        if !page::is_valid_page_size(ps) {
            return Err(format!("invalid page size {ps}"));
        }
        let leaf = match PageKind::from_byte(p[6]) {
            Some(PageKind::BtreeLeaf) => true,
            Some(PageKind::BtreeInner) => false,
            _ => return Err(format!("page kind {} is not a btree node", p[6])),
        };
        let n = self.raw_count();
        let slots_end = NODE_HEADER_END + n * SLOT_SIZE;
        let ds = self.data_start();
        if slots_end > ds || ds > ps {
            return Err(format!(
                "slot array end {slots_end}, data start {ds}, page size {ps} out of order"
            ));
        }
        let flags = p[FLAGS];
        if flags & !(FLAG_LOWER_INF | FLAG_UPPER_INF) != 0 || p[RESERVED1] != 0 {
            return Err(format!("bad flags byte {flags:#x} or reserved byte"));
        }
        if leaf && rd64(p, UPPER_CHILD) != Some(0) {
            return Err("leaf has a nonzero upper_child".into());
        }
        let mut ranges: Vec<(usize, usize)> = Vec::with_capacity(n + 2);
        let mut sum = 0usize;
        let mut claim = |off: usize, len: usize, what: &dyn Fn() -> String| {
            sum += len;
            if len == 0 {
                return if off == 0 {
                    Ok(())
                } else {
                    Err(format!("{}: empty range with offset {off}", what()))
                };
            }
            if off < ds || off + len > ps {
                return Err(format!(
                    "{}: range {off}+{len} outside heap {ds}..{ps}",
                    what()
                ));
            }
            ranges.push((off, off + len));
            Ok(())
        };
        let mut fences = [Fence::Infinite; 2];
        for (j, (flag, at, name)) in [
            (FLAG_LOWER_INF, LOWER_OFF, "lower fence"),
            (FLAG_UPPER_INF, UPPER_OFF, "upper fence"),
        ]
        .into_iter()
        .enumerate()
        {
            let (off, len) = (rd16(p, at).unwrap_or(0), rd16(p, at + 2).unwrap_or(0));
            if flags & flag != 0 {
                if off != 0 || len != 0 {
                    return Err(format!("infinite {name} has offset {off} length {len}"));
                }
            } else {
                claim(off, len, &|| name.to_string())?;
                fences[j] = Fence::Key(&p[off..off + len]);
            }
        }
        if let [Fence::Key(lo), Fence::Key(hi)] = fences {
            if lo >= hi {
                return Err("lower fence is not below upper fence".into());
            }
        }
        let prefix = self.prefix_len();
        let shared = match fences {
            [Fence::Key(lo), Fence::Key(hi)] => common_prefix_len(lo, hi),
            _ => 0,
        };
        if prefix > shared {
            return Err(format!(
                "prefix length {prefix} exceeds the fences' common prefix {shared}"
            ));
        }
        let mut prev: Option<&[u8]> = None;
        for i in 0..n {
            let s = self.slot(i).ok_or_else(|| format!("slot {i} unreadable"))?;
            claim(s.off, s.klen + s.vlen, &|| format!("slot {i}"))?;
            let key = &p[s.off..s.off + s.klen];
            if s.head != head_at(key, prefix) {
                return Err(format!("slot {i}: key head does not match key"));
            }
            if prev.is_some_and(|pk| pk >= key) {
                return Err(format!("slot {i}: keys not strictly increasing"));
            }
            if let Fence::Key(lo) = fences[0] {
                if key <= lo {
                    return Err(format!("slot {i}: key not above lower fence"));
                }
            }
            if let Fence::Key(hi) = fences[1] {
                if key > hi {
                    return Err(format!("slot {i}: key above upper fence"));
                }
            }
            if !leaf && s.vlen != 8 {
                return Err(format!("slot {i}: inner value length {} != 8", s.vlen));
            }
            prev = Some(key);
        }
        if sum != self.live_heap() {
            return Err(format!(
                "live_heap {} but slots and fences hold {sum}",
                self.live_heap()
            ));
        }
        ranges.sort_unstable();
        if ranges.windows(2).any(|w| w[0].1 > w[1].0) {
            return Err("heap ranges overlap".into());
        }
        Ok(())
    }
}

/// Mutable view of a node page, used under an exclusive latch on a valid node.
pub struct NodeMut<'a> {
    page: &'a mut [u8],
}

impl<'a> NodeMut<'a> {
    pub fn new(page: &'a mut [u8]) -> Self {
        NodeMut { page }
    }

    pub fn as_node(&self) -> Node<'_> {
        Node::new(self.page)
    }

    fn count(&self) -> usize {
        self.as_node().raw_count()
    }

    fn slot(&self, i: usize) -> Slot {
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
    fn push(&mut self, key: &[u8], value: &[u8]) {
        let n = self.count();
        self.insert_at(n, key, value)
            .expect("node rebuilt by split/merge must fit");
    }

    fn push_all(&mut self, from: &Node) {
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
    /// the tree and for redo of a [`PageOp::Separator`](super::PageOp)
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    const PS: usize = 4096;

    fn page(ps: usize, kind: PageKind) -> Vec<u8> {
        let mut p = vec![0u8; ps];
        page::init_page(&mut p, 9, kind);
        p
    }

    fn leaf(ps: usize, lower: Fence, upper: Fence) -> Vec<u8> {
        let mut p = page(ps, PageKind::BtreeLeaf);
        NodeMut::new(&mut p).init_leaf(lower, upper);
        p
    }

    fn contents(n: Node) -> Entries {
        (0..n.count())
            .map(|i| (n.key(i).unwrap().to_vec(), n.value(i).unwrap().to_vec()))
            .collect()
    }

    fn value_bytes(len: usize, tag: u8) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(31) ^ tag).collect()
    }

    fn key_strategy() -> impl Strategy<Value = Vec<u8>> {
        // A small alphabet makes shared 4-byte heads, prefixes and zero bytes
        // (which collide with head padding) common.
        prop::collection::vec(prop::sample::select(vec![0u8, 1, b'a', 0xff]), 0..9)
    }

    /// Leaf filled in key order until NoSpace, fences just outside the keys.
    fn filled_leaf(ps: usize, keys: &[Vec<u8>], vlen: usize) -> Vec<u8> {
        let mut p = leaf(ps, Fence::Key(b"\x01"), Fence::Infinite);
        let mut n = NodeMut::new(&mut p);
        for (j, k) in keys.iter().enumerate() {
            let i = n.as_node().count();
            if n.insert_at(i, k, &value_bytes(vlen + j % 7, j as u8))
                .is_err()
            {
                break;
            }
        }
        p
    }

    /// Keys > "\x01" in sorted order.
    fn sorted_keys(raw: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let mut keys: Vec<Vec<u8>> = raw.into_iter().map(|k| [&[2u8][..], &k].concat()).collect();
        keys.sort();
        keys.dedup();
        keys
    }

    fn inner_with(ps: usize, keys: &[Vec<u8>], upper_child: u64) -> Vec<u8> {
        let mut p = page(ps, PageKind::BtreeInner);
        let mut n = NodeMut::new(&mut p);
        n.init_inner(Fence::Infinite, Fence::Key(b"\x03"), upper_child);
        for (j, k) in keys.iter().enumerate() {
            if n.insert_at(j, k, &(100 + j as u64).to_le_bytes()).is_err() {
                break;
            }
        }
        p
    }

    /// Calls every `Node` method; if `validate` accepts, the node must be usable.
    fn exercise(node: Node, probes: &[Vec<u8>]) {
        let n = node.count();
        let _ = node.is_leaf();
        for i in 0..n + 2 {
            let _ = (node.key(i), node.value(i), node.child(i));
        }
        let _ = (node.lower_fence(), node.upper_fence(), node.upper_child());
        let _ = (node.free_space(), node.used_space(), node.fits(0, 0));
        let _ = node.fits(usize::MAX, usize::MAX);
        for p in probes {
            let _ = (node.lower_bound(p), node.child_for(p));
        }
        if node.validate().is_ok() {
            assert_eq!(
                node.used_space() + node.free_space() + NODE_HEADER_END,
                node.page_size()
            );
            let (lo, hi) = (node.lower_fence().unwrap(), node.upper_fence().unwrap());
            for i in 0..n {
                let k = node.key(i).unwrap();
                assert!(node.value(i).is_some());
                assert!(i == 0 || node.key(i - 1).unwrap() < k);
                assert!(!matches!(lo, Fence::Key(l) if k <= l));
                assert!(!matches!(hi, Fence::Key(h) if k > h));
                assert_eq!(node.lower_bound(k), Some((i, true)));
                if !node.is_leaf() {
                    assert_eq!(node.child_for(k).map(|c| c.0), Some(i));
                }
            }
            if !node.is_leaf() {
                assert!(node.child(n).is_some());
            }
        }
    }

    /// A child split's separator lands beside the child, before it, with
    /// the old entry now leading to the new right page; a separator for
    /// another child, out of the fences, or on a leaf is refused unchanged.
    #[test]
    fn insert_separator_points_left_and_right_halves() {
        let keys: Vec<Vec<u8>> = [&b"\x02b"[..], b"\x02d", b"\x02f"]
            .iter()
            .map(|k| k.to_vec())
            .collect();
        let p = inner_with(PS, &keys, 7);
        let children = |p: &[u8]| {
            let n = Node::new(p);
            let mut out: Vec<(Vec<u8>, u64)> = (0..n.count())
                .map(|i| (n.key(i).unwrap().to_vec(), n.child(i).unwrap()))
                .collect();
            out.push((b"+inf".to_vec(), n.upper_child().unwrap()));
            out
        };
        // Child 101 covers (b, d]; it split at c into 101 | 200.
        let mut q = p.clone();
        NodeMut::new(&mut q)
            .insert_separator(b"\x02c", 101, 200)
            .unwrap();
        assert_eq!(
            children(&q),
            [
                (b"\x02b".to_vec(), 100),
                (b"\x02c".to_vec(), 101),
                (b"\x02d".to_vec(), 200),
                (b"\x02f".to_vec(), 102),
                (b"+inf".to_vec(), 7),
            ]
        );
        // The upper child (7, above f) split at g into 7 | 201.
        NodeMut::new(&mut q)
            .insert_separator(b"\x02g", 7, 201)
            .unwrap();
        assert_eq!(children(&q).last().unwrap(), &(b"+inf".to_vec(), 201));
        assert_eq!(children(&q)[4], (b"\x02g".to_vec(), 7));
        assert_eq!(Node::new(&q).validate(), Ok(()));
        for (sep, left) in [
            (&b"\x02c"[..], 100), // c lands beside 101, not 100
            (b"\x02d", 101),      // equal to an existing key
            (b"\x04", 7),         // above the upper fence
        ] {
            let mut r = p.clone();
            assert!(NodeMut::new(&mut r)
                .insert_separator(sep, left, 300)
                .is_err());
            assert_eq!(r, p, "{sep:?} changed the node");
        }
        let mut l = filled_leaf(PS, &keys, 3);
        let before = l.clone();
        assert!(NodeMut::new(&mut l)
            .insert_separator(b"\x02c", 101, 300)
            .is_err());
        assert_eq!(l, before);
    }

    #[test]
    fn max_sizes_fit_for_every_page_size() {
        let mut ps = page::MIN_PAGE_SIZE;
        while ps <= page::MAX_PAGE_SIZE {
            let (mk, mv) = (max_key_len(ps), max_value_len(ps));
            let cap = ps - NODE_HEADER_END;
            assert!(2 * (SLOT_SIZE + mk + mv) + 2 * mk <= cap, "leaf at {ps}");
            assert!(3 * (SLOT_SIZE + mk + 8) + 2 * mk <= cap, "inner at {ps}");
            // And constructively, with the fences and keys actually stored.
            let key = |c: u8| vec![c; mk];
            let mut p = leaf(ps, Fence::Key(&key(1)), Fence::Key(&key(9)));
            let mut n = NodeMut::new(&mut p);
            n.insert_at(0, &key(2), &vec![7; mv]).unwrap();
            n.insert_at(1, &key(3), &vec![8; mv]).unwrap();
            assert_eq!(n.as_node().validate(), Ok(()));
            let mut right = page(ps, PageKind::Free);
            let at = n.split_index();
            assert_eq!(at, 0);
            let sep = n.split(at, &mut right);
            assert_eq!(sep, key(2));
            assert_eq!(Node::new(&right).validate(), Ok(()));
            let mut p = page(ps, PageKind::BtreeInner);
            let mut n = NodeMut::new(&mut p);
            n.init_inner(Fence::Key(&key(1)), Fence::Key(&key(9)), 5);
            for c in 0..3 {
                n.insert_at(c, &key(c as u8 + 2), &[c as u8; 8]).unwrap();
            }
            assert_eq!(n.as_node().validate(), Ok(()));
            assert_eq!(n.split_index(), 1);
            ps *= 2;
        }
    }

    #[test]
    fn empty_key_value_and_fences_round_trip() {
        let mut p = leaf(PS, Fence::Infinite, Fence::Key(b""));
        let mut n = NodeMut::new(&mut p);
        n.insert_at(0, b"", b"").unwrap();
        assert_eq!(n.as_node().validate(), Ok(()));
        assert_eq!(n.as_node().lower_bound(b""), Some((0, true)));
        assert_eq!(n.as_node().upper_fence(), Some(Fence::Key(b"")));
        n.set_value_at(0, b"xyz").unwrap();
        n.set_value_at(0, b"").unwrap();
        n.compactify();
        assert_eq!(n.as_node().validate(), Ok(()));
        assert_eq!(contents(n.as_node()), vec![(vec![], vec![])]);
        n.remove_at(0);
        assert_eq!(n.as_node().free_space(), PS - NODE_HEADER_END);
    }

    #[test]
    fn cmp_keys_agrees_with_memcmp() {
        let keys: [&[u8]; 10] = [
            b"",
            b"\0",
            b"a",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefgi",
            b"abcdefghabcdefgh",
            b"abcdefghabcdefgg\xff",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\x01",
            b"abcdefghabcdefghZ",
        ];
        for a in keys {
            for b in keys {
                assert_eq!(cmp_keys(a, b), a.cmp(b), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn key_heads_agree_with_memcmp() {
        assert_eq!(key_head(b"abcdef"), 0x6162_6364);
        assert_eq!(key_head(b"ab"), 0x6162_0000);
        let keys: [&[u8]; 7] = [b"", b"\0", b"a", b"a\0", b"a\0\0\0\x01", b"ab", b"abcd\xff"];
        for a in keys {
            for b in keys {
                if key_head(a) != key_head(b) {
                    assert_eq!(key_head(a).cmp(&key_head(b)), a.cmp(b), "{a:?} {b:?}");
                }
            }
        }
    }

    #[test]
    fn validate_rejects_each_broken_invariant() {
        // Leaf ("\x01", "m"] with a -> "b" and b -> "" (key "b" is one byte).
        let mut base = leaf(PS, Fence::Key(b"\x01"), Fence::Key(b"m"));
        let mut n = NodeMut::new(&mut base);
        n.insert_at(0, b"a", b"b").unwrap();
        n.insert_at(1, b"b", b"").unwrap();
        assert_eq!(n.as_node().validate(), Ok(()));
        let slot = |i: usize| NODE_HEADER_END + i * SLOT_SIZE;
        let off0 = rd16(&base, slot(0)).unwrap();
        type Corrupt = fn(&mut Vec<u8>, usize, usize);
        let cases: [(&str, Corrupt); 12] = [
            ("kind", |p, _, _| p[6] = PageKind::FreeList as u8),
            ("page size", |p, _, _| p.truncate(PS - 1)),
            ("out of order", |p, _, s1| wr32(p, DATA_START, s1 - 1)),
            // Slot 1's key "b" re-pointed into slot 0's value: same bytes, same
            // lengths, so only the overlap check can see it.
            ("overlap", |p, off0, s1| wr16(p, s1, off0 + 1)),
            ("strictly increasing", |p, _, s1| {
                let (a, b) = (s1 - SLOT_SIZE, s1);
                let tmp: Vec<u8> = p[a..b].to_vec();
                p.copy_within(b..b + SLOT_SIZE, a);
                p[b..b + SLOT_SIZE].copy_from_slice(&tmp);
            }),
            ("above upper fence", |p, _, _| {
                let at = rd16(p, UPPER_OFF).unwrap();
                p[at] = b'a';
            }),
            ("not above lower fence", |p, _, _| {
                let at = rd16(p, LOWER_OFF).unwrap();
                p[at] = b'a';
            }),
            ("empty range", |p, _, _| wr16(p, UPPER_OFF + 2, 0)),
            ("infinite", |p, _, _| p[FLAGS] |= FLAG_LOWER_INF),
            ("lower fence is not below", |p, _, _| {
                let (off, len) = (rd16(p, UPPER_OFF).unwrap(), rd16(p, UPPER_OFF + 2).unwrap());
                wr16(p, LOWER_OFF, off);
                wr16(p, LOWER_OFF + 2, len);
            }),
            ("upper_child", |p, _, _| p[UPPER_CHILD] = 1),
            ("inner value length", |p, _, _| {
                page::set_page_kind(p, PageKind::BtreeInner)
            }),
        ];
        for (want, corrupt) in cases {
            let mut p = base.clone();
            corrupt(&mut p, off0, slot(1));
            let err = Node::new(&p).validate().expect_err(want);
            assert!(err.contains(want), "{want}: got {err}");
            exercise(Node::new(&p), &[b"a".to_vec(), b"z".to_vec()]);
        }
    }

    #[test]
    fn merge_that_does_not_fit_leaves_both_unchanged() {
        let keys: Vec<Vec<u8>> = (0..200u16)
            .map(|i| [&[2u8][..], &i.to_be_bytes()].concat())
            .collect();
        let mut left = filled_leaf(PS, &keys, 60);
        let mut right = page(PS, PageKind::Free);
        let at = NodeMut::new(&mut left).split_index();
        let sep = NodeMut::new(&mut left).split(at, &mut right);
        let n = Node::new(&left).count();
        // Refill left's free space so the two no longer fit together.
        let mut l = NodeMut::new(&mut left);
        let extra = l.as_node().free_space() - SLOT_SIZE - 2;
        l.set_value_at(n - 1, &vec![1; extra]).unwrap();
        let (before_l, before_r) = (left.clone(), right.clone());
        let res = NodeMut::new(&mut left).merge_from_right(&Node::new(&right), &sep);
        assert_eq!(res, Err(NoSpace));
        assert_eq!((left, right), (before_l, before_r));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(Vec<u8>, usize),
        Remove(usize),
        Set(usize, usize),
        /// Insert/set sized to free space + delta - 1: probes the exact boundary.
        InsertExact(Vec<u8>, usize),
        SetExact(usize, usize),
        Compact,
    }

    fn op_strategy() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (key_strategy(), 0..300usize).prop_map(|(k, v)| Op::Insert(k, v)),
            2 => any::<usize>().prop_map(Op::Remove),
            2 => (any::<usize>(), 0..400usize).prop_map(|(i, v)| Op::Set(i, v)),
            1 => (key_strategy(), 0..3usize).prop_map(|(k, d)| Op::InsertExact(k, d)),
            1 => (any::<usize>(), 0..3usize).prop_map(|(i, d)| Op::SetExact(i, d)),
            1 => Just(Op::Compact),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn model_leaf_ops_match_btreemap(
            ops in prop::collection::vec(op_strategy(), 1..150),
            big in any::<bool>(),
            fenced in any::<bool>(),
        ) {
            let ps = if big { 16384 } else { PS };
            // Fenced: keys get a 0x02 prefix and live strictly inside ("\x01", "\x03"].
            let (lower, upper) = if fenced {
                (Fence::Key(b"\x01"), Fence::Key(b"\x03"))
            } else {
                (Fence::Infinite, Fence::Infinite)
            };
            let mut p = leaf(ps, lower, upper);
            let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            for (t, op) in ops.into_iter().enumerate() {
                let before = p.clone();
                let mut n = NodeMut::new(&mut p);
                let free = n.as_node().free_space();
                let op = match op {
                    Op::InsertExact(k, d) => {
                        let klen = k.len() + fenced as usize;
                        Op::Insert(k, (free + d).saturating_sub(SLOT_SIZE + klen + 1))
                    }
                    Op::SetExact(i, d) if !model.is_empty() => {
                        let old = n.as_node().value(i % model.len()).unwrap().len();
                        Op::Set(i, (old + free + d).saturating_sub(1))
                    }
                    op => op,
                };
                match op {
                    Op::Insert(k, vlen) => {
                        let k = if fenced { [&[2u8][..], &k].concat() } else { k };
                        let (i, found) = n.as_node().lower_bound(&k).unwrap();
                        prop_assert_eq!(found, model.contains_key(&k));
                        if !found {
                            let v = value_bytes(vlen, t as u8);
                            let fits = SLOT_SIZE + k.len() + v.len() <= free;
                            prop_assert_eq!(fits, n.as_node().fits(k.len(), v.len()));
                            match n.insert_at(i, &k, &v) {
                                Ok(()) => { prop_assert!(fits); model.insert(k, v); }
                                Err(NoSpace) => { prop_assert!(!fits); prop_assert!(p == before); }
                            }
                        }
                    }
                    Op::Remove(i) if !model.is_empty() => {
                        let i = i % model.len();
                        let k = model.keys().nth(i).unwrap().clone();
                        n.remove_at(i);
                        model.remove(&k);
                    }
                    Op::Set(i, vlen) if !model.is_empty() => {
                        let i = i % model.len();
                        let v = value_bytes(vlen, t as u8);
                        let old = n.as_node().value(i).unwrap().len();
                        let fits = vlen <= old || vlen - old <= free;
                        match n.set_value_at(i, &v) {
                            Ok(()) => { prop_assert!(fits); *model.values_mut().nth(i).unwrap() = v; }
                            Err(NoSpace) => { prop_assert!(!fits); prop_assert!(p == before); }
                        }
                    }
                    Op::Compact => {
                        let free = n.as_node().free_space();
                        n.compactify();
                        let node = n.as_node();
                        prop_assert_eq!(node.free_space(), free);
                        // After compaction all free space is one contiguous gap.
                        prop_assert_eq!(node.data_start() - NODE_HEADER_END - node.count() * SLOT_SIZE, free);
                    }
                    _ => {}
                }
                let node = Node::new(&p);
                prop_assert_eq!(node.validate(), Ok(()));
                let expect: Entries = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                prop_assert_eq!(contents(node), expect);
                prop_assert_eq!(node.used_space() + node.free_space() + NODE_HEADER_END, ps);
                prop_assert_eq!((node.lower_fence(), node.upper_fence()), (Some(lower), Some(upper)));
            }
        }

        #[test]
        fn heads_after_the_fences_common_prefix_keep_lower_bound_exact(
            prefix in key_strategy(),
            raw in prop::collection::vec(key_strategy(), 1..80),
            probes in prop::collection::vec(key_strategy(), 1..30),
        ) {
            // Fences prefix+1 and prefix+3 share exactly `prefix`; keys
            // prefix+2+... lie between them.
            let with = |b: u8, k: &[u8]| [&prefix[..], &[b], k].concat();
            let mut keys: Vec<Vec<u8>> = raw.iter().map(|k| with(2, k)).collect();
            keys.sort();
            keys.dedup();
            let (lo, hi) = (with(1, &[]), with(3, &[]));
            let mut lp = leaf(PS, Fence::Key(&lo), Fence::Key(&hi));
            let mut ip = page(PS, PageKind::BtreeInner);
            NodeMut::new(&mut ip).init_inner(Fence::Key(&lo), Fence::Key(&hi), 7);
            for p in [&mut lp, &mut ip] {
                let mut n = NodeMut::new(p);
                let leaf = n.as_node().is_leaf();
                for (j, k) in keys.iter().enumerate() {
                    let v = if leaf { vec![j as u8; 3] } else { (100 + j as u64).to_le_bytes().to_vec() };
                    if n.insert_at(j, k, &v).is_err() {
                        break;
                    }
                }
            }
            // Probes inside the prefix, around it, and without it.
            let short = prefix[..prefix.len().saturating_sub(1)].to_vec();
            let probes: Vec<Vec<u8>> = probes
                .iter()
                .flat_map(|k| [with(2, k), with(0, k), with(0xff, k), k.clone()])
                .chain(keys.iter().cloned())
                .chain([prefix.clone(), short, lo.clone(), hi.clone()])
                .collect();
            for p in [&lp, &ip] {
                let node = Node::new(p);
                prop_assert_eq!(node.validate(), Ok(()));
                prop_assert_eq!(node.prefix_len(), prefix.len());
                let stored: Vec<&[u8]> = (0..node.count()).map(|i| node.key(i).unwrap()).collect();
                for probe in &probes {
                    let want = stored.iter().position(|k| *k >= &probe[..]).unwrap_or(stored.len());
                    let eq = want < stored.len() && stored[want] == &probe[..];
                    prop_assert_eq!(node.lower_bound(probe), Some((want, eq)), "probe {:?}", probe);
                }
            }
        }

        /// Redo of a split's kept half (`split_keep_left`) leaves exactly the
        /// bytes `split` left on the page, for leaves and inner nodes, and
        /// refuses a separator that is not at its slot without a change.
        #[test]
        fn split_keep_left_redoes_the_left_half_of_split(
            raw in prop::collection::vec(key_strategy(), 3..80),
            pick in any::<prop::sample::Index>(),
        ) {
            let keys = sorted_keys(raw);
            prop_assume!(keys.len() >= 3);
            for p in [filled_leaf(PS, &keys, 3), inner_with(PS, &keys, 7)] {
                let n = Node::new(&p).count();
                let at = pick.index(n);
                let mut split = p.clone();
                let mut right = page(PS, PageKind::Free);
                let sep = NodeMut::new(&mut split).split(at, &mut right);
                let mut redone = p.clone();
                prop_assert_eq!(NodeMut::new(&mut redone).split_keep_left(at, &sep), Ok(()));
                prop_assert_eq!(&redone, &split);
                let mut wrong = p.clone();
                let other = if at > 0 { at - 1 } else { at + 1 };
                prop_assert!(NodeMut::new(&mut wrong).split_keep_left(other, &sep).is_err());
                prop_assert!(NodeMut::new(&mut wrong).split_keep_left(n, &sep).is_err());
                prop_assert_eq!(&wrong, &p);
            }
        }

        #[test]
        fn lower_bound_and_child_for_match_linear_scan(
            raw in prop::collection::vec(key_strategy(), 3..80),
            probes in prop::collection::vec(key_strategy(), 1..30),
        ) {
            let keys = sorted_keys(raw);
            prop_assume!(keys.len() >= 3);
            let lp = filled_leaf(PS, &keys, 3);
            let ip = inner_with(PS, &keys, 7);
            for p in [&lp, &ip] {
                let node = Node::new(p);
                prop_assert_eq!(node.validate(), Ok(()));
                let stored: Vec<&[u8]> = (0..node.count()).map(|i| node.key(i).unwrap()).collect();
                let probes = probes.iter().map(|k| [&[2u8][..], k].concat()).chain(keys.iter().cloned());
                for probe in probes {
                    let want = stored.iter().position(|k| *k >= &probe[..]).unwrap_or(stored.len());
                    let eq = want < stored.len() && stored[want] == &probe[..];
                    prop_assert_eq!(node.lower_bound(&probe), Some((want, eq)));
                    if !node.is_leaf() {
                        let child = if want == stored.len() { 7 } else { 100 + want as u64 };
                        prop_assert_eq!(node.child_for(&probe), Some((want, child)));
                    } else {
                        prop_assert_eq!(node.child_for(&probe), None);
                    }
                }
            }
        }

        /// Whatever the probe key and the (possibly stale) insert hint,
        /// the split point is legal, and a key right after the last insert
        /// splits at the insertion point.
        #[test]
        fn split_index_for_is_always_a_legal_split(
            raw in prop::collection::vec(key_strategy(), 3..120),
            probe in key_strategy(),
            hint in any::<u16>(),
            inner in any::<bool>(),
        ) {
            let keys = sorted_keys(raw);
            prop_assume!(keys.len() >= 3);
            let mut p = if inner { inner_with(PS, &keys, 7) } else { filled_leaf(PS, &keys, 20) };
            let n = Node::new(&p).count();
            let probe = [&[2u8][..], &probe].concat();
            let node = NodeMut::new(&mut p);
            let first = usize::from(inner);
            prop_assert!((first..n - 1).contains(&node.split_index_for(&probe)));
            wr16(node.page, INSERT_HINT, usize::from(hint));
            prop_assert!((first..n - 1).contains(&node.split_index_for(&probe)));
            if let Some((pos, false)) = node.as_node().lower_bound(&probe) {
                wr16(node.page, INSERT_HINT, pos);
                let at = node.split_index_for(&probe);
                let balanced = node.split_index();
                if pos > first && pos < n && pos > balanced {
                    prop_assert_eq!(at, pos - 1);
                } else if pos < n {
                    prop_assert_eq!(at, balanced);
                }
            }
        }

        #[test]
        fn split_then_merge_round_trips(
            raw in prop::collection::vec(key_strategy(), 3..120),
            vlen in 0..120usize,
            inner in any::<bool>(),
        ) {
            let keys = sorted_keys(raw);
            prop_assume!(keys.len() >= 3);
            let mut left = if inner { inner_with(PS, &keys, 7) } else { filled_leaf(PS, &keys, vlen) };
            let orig = left.clone();
            let o = Node::new(&orig);
            let n = o.count();
            let mut right = page(PS, PageKind::Free);
            page::set_page_id(&mut right, 77);
            let mut l = NodeMut::new(&mut left);
            let at = l.split_index();
            prop_assert!(at + 1 < n && (!inner || at >= 1), "at {} of {}", at, n);
            let sep = l.split(at, &mut right);
            prop_assert_eq!(&sep[..], o.key(at).unwrap());
            prop_assert_eq!(page::page_id(&right), 77);
            let (ln, rn) = (Node::new(&left), Node::new(&right));
            prop_assert_eq!(ln.validate(), Ok(()));
            prop_assert_eq!(rn.validate(), Ok(()));
            prop_assert_eq!(ln.lower_fence(), o.lower_fence());
            prop_assert_eq!(ln.upper_fence(), Some(Fence::Key(&sep)));
            prop_assert_eq!(rn.lower_fence(), Some(Fence::Key(&sep)));
            prop_assert_eq!(rn.upper_fence(), o.upper_fence());
            let all = contents(o);
            let left_end = if inner { at } else { at + 1 };
            prop_assert_eq!(contents(ln), all[..left_end].to_vec());
            prop_assert_eq!(contents(rn), all[at + 1..].to_vec());
            if inner {
                prop_assert_eq!(ln.upper_child(), o.child(at));
                prop_assert_eq!(rn.upper_child(), o.upper_child());
            }
            // split_index minimises the larger half over every legal split point,
            // measured on real splits.
            let larger = |at: usize| {
                let (mut l, mut r) = (orig.clone(), page(PS, PageKind::Free));
                NodeMut::new(&mut l).split(at, &mut r);
                Node::new(&l).used_space().max(Node::new(&r).used_space())
            };
            let best = (inner as usize..n - 1).map(larger).min().unwrap();
            prop_assert_eq!(ln.used_space().max(rn.used_space()), best);
            let right_copy = right.clone();
            NodeMut::new(&mut left).merge_from_right(&Node::new(&right), &sep).unwrap();
            prop_assert_eq!(right, right_copy);
            let m = Node::new(&left);
            prop_assert_eq!(m.validate(), Ok(()));
            prop_assert_eq!(contents(m), all);
            prop_assert_eq!(m.lower_fence(), o.lower_fence());
            prop_assert_eq!(m.upper_fence(), o.upper_fence());
            prop_assert_eq!(m.upper_child(), o.upper_child());
            prop_assert_eq!(m.used_space(), o.used_space());
        }

        #[test]
        fn node_methods_never_panic_on_random_bytes(
            bytes in prop::collection::vec(any::<u8>(), 0..5000),
            kind in 0u8..5,
            count in 0u16..500,
            probes in prop::collection::vec(key_strategy(), 1..4),
        ) {
            let mut p = bytes;
            exercise(Node::new(&p), &probes);
            if p.len() > NODE_HEADER_END {
                // Plausible header fields reach the slot and heap paths.
                p[6] = kind;
                p[COUNT..COUNT + 2].copy_from_slice(&count.to_le_bytes());
                exercise(Node::new(&p), &probes);
            }
        }

        #[test]
        fn corrupted_valid_nodes_never_panic_and_structural_flips_are_rejected(
            raw in prop::collection::vec(key_strategy(), 3..60),
            inner in any::<bool>(),
            flips in prop::collection::vec((any::<prop::sample::Index>(), 0..8u8), 1..4),
            writes in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
            probes in prop::collection::vec(key_strategy(), 1..4),
        ) {
            let keys = sorted_keys(raw);
            let valid = if inner { inner_with(PS, &keys, 7) } else { filled_leaf(PS, &keys, 20) };
            let n = Node::new(&valid).count();
            let slots_end = NODE_HEADER_END + n * SLOT_SIZE;
            // One bit flip in a field whose every change breaks an invariant:
            // live_heap, fence lengths of key fences, slot lengths and heads.
            for (idx, bit) in &flips {
                let mut p = valid.clone();
                let at = PAGE_HEADER_SIZE + idx.index(slots_end - PAGE_HEADER_SIZE);
                p[at] ^= 1 << bit;
                exercise(Node::new(&p), &probes);
                let rel = at.checked_sub(NODE_HEADER_END).map(|r| r % SLOT_SIZE);
                let must_reject = (LIVE_HEAP..LIVE_HEAP + 4).contains(&at)
                    || at == RESERVED1
                    || (at == FLAGS && *bit >= 2)
                    || (!inner && (UPPER_CHILD..UPPER_CHILD + 8).contains(&at))
                    || (LOWER_OFF + 2..LOWER_OFF + 4).contains(&at)
                    || rel.is_some_and(|r| r >= 2);
                if must_reject {
                    prop_assert!(Node::new(&p).validate().is_err(), "flip at {} bit {} accepted", at, bit);
                }
            }
            // Arbitrary overwrites anywhere, including the page header's kind byte.
            let mut p = valid.clone();
            for (idx, b) in &writes {
                p[idx.index(PS)] = *b;
            }
            exercise(Node::new(&p), &probes);
        }
    }
}
