//! The per-worker write-ahead log's records: what each record says and
//! its bytes (seed 000 §3.1's physiological per-worker log, §3.6's undo
//! information, §3.8's checksums and log compression).
//!
//! This module owns the bytes of one record's payload. It knows nothing
//! about partitions, files, GSN clocks or commit protocols: it turns a
//! [`RecordHeader`] plus a [`RecordBody`] (one [`crate::btree::PageOp`], a
//! commit or an end of rollback) into a record framed by
//! [`crate::logstore::frame`] (length, checksum salted with the stream
//! position, the durable watermark), and frames back into records; the
//! scan that decides where a segment ends is [`crate::logstore::scan`]'s,
//! with [`Records`] as its decoder ([`scan_segment`]).
//!
//! - this file: the record kinds, the header, the bodies and dependency
//!   vectors;
//! - `update`: an update's changed byte spans, applied for redo and undo;
//! - `image`: a page image with its free gap left out;
//! - `codec`: encoding and decoding, the per-worker WAL's [`Records`].
//!
//! Invariant: decoding is total: on any bytes it returns, never panics,
//! never loops forever, and allocates nothing proportional to a length
//! field that has not been checked against the buffer it claims to
//! describe. Every checksum-valid payload that breaks a rule of the format
//! is [`DecodeError::BadKind`] or [`DecodeError::Malformed`], which the
//! scan reports as corruption.
//!
//! # Format
//!
//! `docs/FORMAT.md`, "Log records", gives every field and payload byte by
//! byte (log format 6). In short: the frame's prefix (CRC32C, length) and
//! watermark, then the payload: a 4-byte fixed part (kind, flags, page
//! kind, a reserved byte), the header's variable fields (GSN, transaction
//! id, and for records of a page its tree, page id and prev GSN), then the
//! body by kind (insert, update with up to four changed spans, remove, page
//! image, commit with its dependency vector, end, page freed, split,
//! separator), zero-padded to a multiple of 8. The payload must fill the
//! record exactly.
//!
//! # Header compression (seed 000 §3.8)
//!
//! Every integer after the fixed part is a vint64 (1 to 9 bytes, the
//! shortest form only, so a record has one encoding), and the large ones
//! are stored next to a value they are close to: the transaction's start
//! position as a difference to the watermark, the prev GSN as a difference
//! to the GSN. The paper instead reuses the previous record's page and
//! transaction ids within a log chunk; here each record stays readable on
//! its own, which the segment scan's search for later records after a bad
//! one and recovery's copies of single records rely on. A TPC-C record
//! header shrank from 56 bytes (log format 4) to about 30.

mod codec;
mod image;
mod update;

pub use codec::{
    decode, decode_again, decode_at, encode, encoded_len, header_len, scan_segment, scan_segment_each, DecodeError, Records,
    SegmentScan, SizeAtGsn,
};
pub use image::{PageImage, MAX_IMAGE_BODY};
pub use update::{encode_update, Span, UpdateDiff, MAX_SPANS};

use crate::btree::PageOp;
use crate::buffer::page::{PageKind, PAGE_HEADER_SIZE};
use crate::ids::{Gsn, LogPos, Tid};

/// The record kinds, as stored in the payload's first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RecordKind {
    Insert = 1,
    Update = 2,
    Remove = 3,
    Image = 4,
    Commit = 5,
    End = 6,
    Freed = 7,
    Split = 8,
    Separator = 9,
}

impl RecordKind {
    pub fn from_byte(b: u8) -> Option<Self> {
        Some(match b {
            1 => RecordKind::Insert,
            2 => RecordKind::Update,
            3 => RecordKind::Remove,
            4 => RecordKind::Image,
            5 => RecordKind::Commit,
            6 => RecordKind::End,
            7 => RecordKind::Freed,
            8 => RecordKind::Split,
            9 => RecordKind::Separator,
            _ => return None,
        })
    }

    /// Whether records of this kind describe a page (and so carry a page id
    /// and prev GSN); commit and end records must have both zero.
    pub fn has_page(self) -> bool {
        matches!(
            self,
            RecordKind::Insert
                | RecordKind::Update
                | RecordKind::Remove
                | RecordKind::Image
                | RecordKind::Freed
                | RecordKind::Split
                | RecordKind::Separator
        )
    }

    /// Whether records of this kind are written by structure modifications
    /// (and so may carry the structure-modification flag).
    pub fn is_structural(self) -> bool {
        matches!(
            self,
            RecordKind::Image | RecordKind::Freed | RecordKind::Split | RecordKind::Separator
        )
    }
}

/// The fields of a record header (the frame's checksum and length, and the
/// kind, are derived when encoding).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordHeader {
    /// The page's kind byte (`buffer::page::PageKind as u8`) for image
    /// records, where it must be nonzero; 0 for every other kind.
    pub page_kind: u8,
    /// Root page id of the B+-tree the page belongs to (logical undo finds a
    /// key there after splits moved it); 0 for commit and end records.
    pub tree: u32,
    pub gsn: Gsn,
    pub txn: u64,
    /// Page the record changes; 0 for commit and end records.
    pub page: u64,
    /// The page's GSN before this record; redo applies the record to a page
    /// copy only when it is at exactly this GSN. 0 for commit and end records.
    pub prev_gsn: Gsn,
    /// A compensation log record: written while rolling back, redone but
    /// never undone (so a rollback interrupted by a crash is not undone twice).
    pub compensation: bool,
    /// More records of the same structure modification follow this one
    /// (only on page images). A structure modification is one group of
    /// image records, consecutive in one partition, ended by an image
    /// without this flag; recovery redoes a group all or nothing.
    pub smo_more: bool,
    /// The partition's durable stream position when the record was appended:
    /// every byte of the stream below it was durable by then. Stored in the
    /// frame: the segment scan uses it to tell a crash-torn write from
    /// corruption.
    pub watermark: LogPos,
}

/// The dependency vector of a commit record: (log partition, byte position)
/// pairs. Borrowed either from the caller's pairs (when encoding) or from the
/// record bytes (when decoding), so decoding allocates nothing.
#[derive(Clone, Copy)]
pub struct Deps<'a>(DepsRepr<'a>);

#[derive(Clone, Copy)]
enum DepsRepr<'a> {
    Pairs(&'a [(u32, LogPos)]),
    /// `count` pairs in the record's encoding (partition, then position,
    /// each a vint64), checked when the record was decoded.
    Encoded {
        count: usize,
        bytes: &'a [u8],
    },
}

impl<'a> Deps<'a> {
    pub fn new(pairs: &'a [(u32, LogPos)]) -> Self {
        Deps(DepsRepr::Pairs(pairs))
    }

    pub fn len(&self) -> usize {
        match self.0 {
            DepsRepr::Pairs(p) => p.len(),
            DepsRepr::Encoded { count, .. } => count,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = (u32, LogPos)> + 'a {
        let (pairs, mut encoded, count) = match self.0 {
            DepsRepr::Pairs(p) => (p, &[][..], 0),
            DepsRepr::Encoded { count, bytes } => (&[][..], bytes, count),
        };
        pairs.iter().copied().chain((0..count).map_while(move |_| {
            // Decoding checked every pair, so neither read fails here.
            let partition = vint64::decode(&mut encoded).ok()?;
            let position = vint64::decode(&mut encoded).ok()?;
            Some((u32::try_from(partition).ok()?, LogPos::new(position)))
        }))
    }

    pub fn to_vec(self) -> Vec<(u32, LogPos)> {
        self.iter().collect()
    }
}

impl PartialEq for Deps<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Deps<'_> {}

impl std::fmt::Debug for Deps<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// What a record says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordBody<'a> {
    /// A tuple was inserted (undo: remove `key`).
    Insert { key: &'a [u8], value: &'a [u8] },
    /// A tuple's value changed; only the changed bytes are logged.
    Update { key: &'a [u8], diff: UpdateDiff<'a> },
    /// A tuple was removed; `before` is its value (undo: insert it back).
    Remove { key: &'a [u8], before: &'a [u8] },
    /// A structure modification rewrote the page; this is its new body.
    Image(PageImage<'a>),
    /// The transaction committed with commit TID `tid`.
    Commit { tid: Tid, deps: Deps<'a> },
    /// The transaction's rollback is complete.
    End,
    /// A structure modification released the page.
    Freed,
    /// A split left the page with its entries up to slot `at` (redo:
    /// [`NodeMut::split_keep_left`](crate::btree::node::NodeMut::split_keep_left)).
    Split { at: u32, separator: &'a [u8] },
    /// An inner page took the separator of a child split (redo:
    /// [`NodeMut::insert_separator`](crate::btree::node::NodeMut::insert_separator)).
    Separator {
        separator: &'a [u8],
        left: u64,
        right: u64,
    },
}

impl<'a> RecordBody<'a> {
    pub fn kind(&self) -> RecordKind {
        match self {
            RecordBody::Insert { .. } => RecordKind::Insert,
            RecordBody::Update { .. } => RecordKind::Update,
            RecordBody::Remove { .. } => RecordKind::Remove,
            RecordBody::Image(_) => RecordKind::Image,
            RecordBody::Commit { .. } => RecordKind::Commit,
            RecordBody::End => RecordKind::End,
            RecordBody::Freed => RecordKind::Freed,
            RecordBody::Split { .. } => RecordKind::Split,
            RecordBody::Separator { .. } => RecordKind::Separator,
        }
    }

    /// The record body for a page modification reported through
    /// [`PageLog`](crate::btree::PageLog). `page` is the whole page after the
    /// change; only [`PageOp::Image`] reads it. The image of a page a
    /// structure modification freed is a [`RecordBody::Freed`]: none of its
    /// bytes matter any more.
    pub fn from_page_op(op: PageOp<'a>, page: &'a [u8]) -> Self {
        match op {
            PageOp::Insert { key, value } => RecordBody::Insert { key, value },
            PageOp::Update { key, before, after } => RecordBody::Update {
                key,
                diff: encode_update(before, after),
            },
            PageOp::Remove { key, before } => RecordBody::Remove { key, before },
            PageOp::Image if page[6] == PageKind::Free as u8 => RecordBody::Freed,
            PageOp::Image => RecordBody::Image(PageImage::from_body(&page[PAGE_HEADER_SIZE..])),
            PageOp::Split { at, separator } => RecordBody::Split {
                at: codec::len_u32(at, "split slot"),
                separator,
            },
            PageOp::Separator {
                separator,
                left,
                right,
            } => RecordBody::Separator {
                separator,
                left,
                right,
            },
        }
    }
}

/// One decoded record, borrowing its byte strings from the decoded buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub header: RecordHeader,
    pub body: RecordBody<'a>,
}

impl Record<'_> {
    /// Bytes the record occupies in the log (its `len` field).
    pub fn encoded_len(&self) -> usize {
        encoded_len(&self.header, &self.body)
    }
}

/// The little-endian u64 at the start of `b`: diffs and images compare
/// values eight bytes at a time.
fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_from_page_op_logs_changed_bytes_and_page_body() {
        let mut page = vec![0u8; 4096];
        page[..PAGE_HEADER_SIZE].fill(0xaa); // the page header is not logged
        page[40..50].fill(1);
        page[4000..].fill(2);
        let body = RecordBody::from_page_op(PageOp::Image, &page);
        let RecordBody::Image(img) = body else {
            panic!()
        };
        assert_eq!(img.image_body(4096).unwrap(), page[PAGE_HEADER_SIZE..]);
        assert!(
            encoded_len(&RecordHeader::default(), &body) < 200,
            "free gap elided"
        );
        let op = PageOp::Update {
            key: b"k",
            before: b"value-1",
            after: b"value-2",
        };
        assert_eq!(
            RecordBody::from_page_op(op, &page),
            RecordBody::Update {
                key: b"k",
                diff: UpdateDiff::single(Span {
                    offset: 6,
                    before: b"1",
                    after: b"2"
                })
            }
        );
    }
}
