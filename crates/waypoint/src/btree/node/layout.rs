//! The node layout of the module docs as constants, bounds-checked reads
//! (`None` past the page, so readers of any bytes never panic), writes for
//! `NodeMut`, and the decoding of a slot. The size limits the tree keeps
//! so that a node always holds a few maximal entries.

use super::Fence;
use crate::buffer::page::PAGE_HEADER_SIZE;

pub(super) const COUNT: usize = PAGE_HEADER_SIZE;
pub(super) const FLAGS: usize = PAGE_HEADER_SIZE + 2;
pub(super) const RESERVED1: usize = PAGE_HEADER_SIZE + 3;
pub(super) const DATA_START: usize = PAGE_HEADER_SIZE + 4;
pub(super) const LIVE_HEAP: usize = PAGE_HEADER_SIZE + 8;
pub(super) const LOWER_OFF: usize = PAGE_HEADER_SIZE + 12;
pub(super) const UPPER_OFF: usize = PAGE_HEADER_SIZE + 16;
pub(super) const PREFIX_LEN: usize = PAGE_HEADER_SIZE + 20;
pub(super) const INSERT_HINT: usize = PAGE_HEADER_SIZE + 22;
pub(super) const UPPER_CHILD: usize = PAGE_HEADER_SIZE + 24;
/// Start of the slot array: end of the node header.
pub const NODE_HEADER_END: usize = PAGE_HEADER_SIZE + 32;
/// Bytes per slot in the slot array.
pub const SLOT_SIZE: usize = 10;

pub(super) const FLAG_LOWER_INF: u8 = 1;
pub(super) const FLAG_UPPER_INF: u8 = 2;

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

pub(super) fn rd16(p: &[u8], at: usize) -> Option<usize> {
    Some(u16::from_le_bytes(p.get(at..at + 2)?.try_into().ok()?) as usize)
}

pub(super) fn rd32(p: &[u8], at: usize) -> Option<usize> {
    Some(u32::from_le_bytes(p.get(at..at + 4)?.try_into().ok()?) as usize)
}

pub(super) fn rd64(p: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(p.get(at..at + 8)?.try_into().ok()?))
}

pub(super) fn wr16(p: &mut [u8], at: usize, v: usize) {
    debug_assert!(v <= u16::MAX as usize);
    p[at..at + 2].copy_from_slice(&(v as u16).to_le_bytes());
}

pub(super) fn wr32(p: &mut [u8], at: usize, v: usize) {
    p[at..at + 4].copy_from_slice(&(v as u32).to_le_bytes());
}

pub(super) fn fence_len(f: Option<Fence<'_>>) -> usize {
    match f {
        Some(Fence::Key(k)) => k.len(),
        _ => 0,
    }
}

#[derive(Clone, Copy)]
pub(super) struct Slot {
    pub(super) off: usize,
    pub(super) klen: usize,
    pub(super) vlen: usize,
    pub(super) head: u32,
}

impl Slot {
    pub(super) fn decode(b: &[u8; SLOT_SIZE]) -> Slot {
        Slot {
            off: u16::from_le_bytes([b[0], b[1]]) as usize,
            klen: u16::from_le_bytes([b[2], b[3]]) as usize,
            vlen: u16::from_le_bytes([b[4], b[5]]) as usize,
            head: u32::from_be_bytes([b[6], b[7], b[8], b[9]]),
        }
    }
}
