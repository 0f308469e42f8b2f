//! The read-only view of a node: lookups, fences, children, space, and
//! `validate`, the full structural check of the module invariant. Total
//! over arbitrary bytes (optimistic readers may see torn pages,
//! docs/decisions/002-racy-optimistic-reads.md): every read is checked and
//! an inconsistency is `None` or an `Err`, never a panic.

use super::keys::{cmp_keys, common_prefix_len, head_at, key_head};
use super::layout::*;
use super::Fence;
use crate::buffer::page::{self, PageKind};
use std::cmp::Ordering;

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

    pub(super) fn is_inner(&self) -> bool {
        self.page.get(6) == Some(&(PageKind::BtreeInner as u8))
    }

    pub(super) fn raw_count(&self) -> usize {
        rd16(self.page, COUNT).unwrap_or(0)
    }

    /// Number of slots, clamped to what the slot array could hold in this page.
    pub fn count(&self) -> usize {
        let cap = self.page.len().saturating_sub(NODE_HEADER_END) / SLOT_SIZE;
        self.raw_count().min(cap)
    }

    pub(super) fn live_heap(&self) -> usize {
        rd32(self.page, LIVE_HEAP).unwrap_or(0)
    }

    pub(super) fn data_start(&self) -> usize {
        rd32(self.page, DATA_START).unwrap_or(0)
    }

    pub(super) fn slot(&self, i: usize) -> Option<Slot> {
        if i >= self.count() {
            return None;
        }
        let at = NODE_HEADER_END + i * SLOT_SIZE;
        Some(Slot::decode(
            self.page.get(at..at + SLOT_SIZE)?.try_into().ok()?,
        ))
    }

    pub(super) fn slot_key(&self, s: &Slot) -> Option<&'a [u8]> {
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
    pub(super) fn prefix_len(&self) -> usize {
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
