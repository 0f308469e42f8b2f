//! Log record format of the per-worker write-ahead log: the payloads of
//! its records, their encoding and decoding (seed 000 §3.1, §3.8).
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
//! record exactly; a checksum-valid record that breaks a rule is
//! [`DecodeError::BadKind`] or [`DecodeError::Malformed`].
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

use crate::btree::PageOp;
use crate::buffer::page::{PageKind, MAX_PAGE_SIZE, PAGE_HEADER_SIZE};
use crate::logstore::frame::{self, Frame, FrameError};
use crate::logstore::scan::{self, Payloads, Scan};

/// Bytes of a payload's fixed part: kind, flags, page kind and a reserved
/// byte. The header's variable fields follow.
pub const FIXED_SIZE: usize = 4;
/// Longest page-image body: the body of the largest page.
pub const MAX_IMAGE_BODY: usize = MAX_PAGE_SIZE - PAGE_HEADER_SIZE;
/// A transaction id is its session's slot above this many bits of stream
/// position (`WalSessionLog::on_begin`); the header stores the two apart.
const TXN_POSITION_BITS: u32 = 48;
const TXN_POSITION_MASK: u64 = (1 << TXN_POSITION_BITS) - 1;

const FLAG_COMPENSATION: u8 = 1;
const FLAG_SMO_MORE: u8 = 2;
const KNOWN_FLAGS: u8 = FLAG_COMPENSATION | FLAG_SMO_MORE;

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

/// The fixed fields of a record header (checksum, length and kind are
/// derived when encoding).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordHeader {
    /// The page's kind byte (`buffer::page::PageKind as u8`) for image
    /// records, where it must be nonzero; 0 for every other kind.
    pub page_kind: u8,
    /// Root page id of the B+-tree the page belongs to (logical undo finds a
    /// key there after splits moved it); 0 for commit and end records.
    pub tree: u32,
    pub gsn: u64,
    pub txn: u64,
    /// Page the record changes; 0 for commit and end records.
    pub page: u64,
    /// The page's GSN before this record; redo applies the record to a page
    /// copy only when it is at exactly this GSN. 0 for commit and end records.
    pub prev_gsn: u64,
    /// A compensation log record: written while rolling back, redone but
    /// never undone (so a rollback interrupted by a crash is not undone twice).
    pub compensation: bool,
    /// More records of the same structure modification follow this one
    /// (only on page images). A structure modification is one group of
    /// image records, consecutive in one partition, ended by an image
    /// without this flag; recovery redoes a group all or nothing.
    pub smo_more: bool,
    /// The partition's durable stream position when the record was appended:
    /// every byte of the stream below it was durable by then. The segment
    /// scan uses it to tell a crash-torn write from corruption.
    pub watermark: u64,
}

/// Most changed byte ranges one update record carries; more are merged
/// (closest first).
pub const MAX_SPANS: usize = 4;

/// An equal run shorter than this between two changed ranges is logged as
/// changed rather than paying a second span header (12 bytes) for it.
const SPAN_GAP: usize = 8;

/// One changed byte range: `before` at `offset` became `after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span<'a> {
    pub offset: u32,
    pub before: &'a [u8],
    pub after: &'a [u8],
}

/// The changed bytes of an update, as up to [`MAX_SPANS`] spans in offset
/// order. A value that keeps its length may have several spans (a row
/// whose TID at the front and one field further on changed logs the two,
/// not everything between them), each with `before.len() == after.len()`,
/// so offsets are the same in the old and the new value; a value whose
/// length changes has exactly one span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpdateDiff<'a> {
    count: u8,
    spans: [Span<'a>; MAX_SPANS],
}

/// The diff between an old and a new value: strip their common prefix, then
/// the common suffix of what remains; for values of equal length, split
/// what is left at equal runs of at least `SPAN_GAP` bytes.
///
/// The suffix is measured on the tails after the prefix, so the two never
/// count the same byte twice: for old `aa` and new `aaa` the prefix is 2, and
/// measuring the suffix on the whole values would give 2 as well, which
/// would leave "minus one" changed bytes. Comparing the remaining tails
/// stops at the shorter one (here empty), so the diff is `before = ""`,
/// `after = "a"` at offset 2.
///
/// # Panics
/// If the common prefix is longer than `u32::MAX` (values are bounded by the
/// page size, far below that).
pub fn encode_update<'a>(old: &'a [u8], new: &'a [u8]) -> UpdateDiff<'a> {
    let prefix = common_prefix(old, new);
    let suffix = common_suffix(&old[prefix..], &new[prefix..]);
    let (end_old, end_new) = (old.len() - suffix, new.len() - suffix);
    let span = |start: usize, end: usize, end_new: usize| Span {
        offset: u32::try_from(start).expect("value shorter than 4 GiB"),
        before: &old[start..end],
        after: &new[start..end_new],
    };
    if old.len() != new.len() || end_old <= prefix {
        return UpdateDiff::single(span(prefix, end_old, end_new));
    }
    // Changed runs [start, end) of the equal-length middle, separated by
    // equal runs of at least SPAN_GAP bytes. Byte `prefix` differs, and so
    // does byte `end_old - 1`. Runs beyond MAX_SPANS merge across the
    // smallest gap as they come, which keeps the MAX_SPANS - 1 largest gaps
    // (the earliest of equal gaps merging first), with no allocation.
    let (old_mid, new_mid) = (&old[..end_old], &new[..end_old]);
    let mut runs = [(0usize, 0usize); MAX_SPANS + 1];
    let mut count = 0;
    let mut i = prefix;
    while i < end_old {
        let run_end = equal_window(old_mid, new_mid, i + 1, SPAN_GAP);
        runs[count] = (i, run_end);
        count += 1;
        if count > MAX_SPANS {
            let closest = (0..count - 1)
                .min_by_key(|&k| runs[k + 1].0 - runs[k].1)
                .expect("at least two runs");
            runs[closest].1 = runs[closest + 1].1;
            runs.copy_within(closest + 2..count, closest + 1);
            count -= 1;
        }
        i = common_prefix(&old_mid[run_end..], &new_mid[run_end..]) + run_end;
    }
    let mut diff = UpdateDiff::empty();
    for &(start, end) in &runs[..count] {
        diff.push(span(start, end, end));
    }
    diff
}

/// Length of the common prefix of `a` and `b`, eight bytes at a time.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = le_u64(&a[i..]) ^ le_u64(&b[i..]);
        if x != 0 {
            return i + (x.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + a[i..n]
        .iter()
        .zip(&b[i..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// Length of the common suffix of `a` and `b`, eight bytes at a time.
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut k = 0; // equal bytes at the end so far
    while k + 8 <= n {
        let at = n - k - 8;
        let x = le_u64(&a[at..]) ^ le_u64(&b[at..]);
        if x != 0 {
            return k + (x.leading_zeros() / 8) as usize;
        }
        k += 8;
    }
    k + a[..n - k]
        .iter()
        .rev()
        .zip(b[..n - k].iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

/// The first position `p >= from` where `a` and `b` (of equal length) agree
/// on `gap` bytes in a row, or reach their end first; every byte in
/// `from - 1..p` that differs is then part of the run ending at `p`.
fn equal_window(a: &[u8], b: &[u8], from: usize, gap: usize) -> usize {
    debug_assert_eq!(gap, 8, "the word compare assumes a gap of 8 bytes");
    let n = a.len();
    let mut p = from;
    while p + 8 <= n {
        let x = le_u64(&a[p..]) ^ le_u64(&b[p..]);
        if x == 0 {
            return p;
        }
        // Any window starting at or before the highest differing byte of
        // this one contains it: the next candidate starts just after it.
        p += (63 - x.leading_zeros() as usize) / 8 + 1;
    }
    // Fewer than eight bytes left: the window reaches the end once they
    // hold no difference.
    match (p..n).rev().find(|&j| a[j] != b[j]) {
        Some(last) => last + 1,
        None => p,
    }
}

impl<'a> UpdateDiff<'a> {
    fn empty() -> Self {
        UpdateDiff {
            count: 0,
            spans: [Span::default(); MAX_SPANS],
        }
    }

    /// A diff of one span.
    pub fn single(span: Span<'a>) -> Self {
        let mut diff = UpdateDiff::empty();
        diff.push(span);
        diff
    }

    fn push(&mut self, span: Span<'a>) {
        assert!((self.count as usize) < MAX_SPANS, "too many spans");
        self.spans[self.count as usize] = span;
        self.count += 1;
    }

    pub fn spans(&self) -> &[Span<'a>] {
        &self.spans[..self.count as usize]
    }

    /// Bytes of before- and after-images together.
    pub fn image_bytes(&self) -> usize {
        self.spans()
            .iter()
            .map(|s| s.before.len() + s.after.len())
            .sum()
    }

    /// Redo: rebuild the new value from the old one. `None` when `old` does
    /// not hold each span's `before` at its offset (the record does not
    /// belong to this value).
    pub fn apply_update(&self, old: &[u8]) -> Option<Vec<u8>> {
        self.rewrite(old, |s| (s.before, s.after))
    }

    /// Undo: rebuild the old value from the new one. `None` when `new` does
    /// not hold each span's `after` at its offset.
    pub fn undo_update(&self, new: &[u8]) -> Option<Vec<u8>> {
        self.rewrite(new, |s| (s.after, s.before))
    }

    fn rewrite(
        &self,
        value: &[u8],
        sides: impl Fn(&Span<'a>) -> (&'a [u8], &'a [u8]),
    ) -> Option<Vec<u8>> {
        match self.spans() {
            [one] => {
                let (expect, with) = sides(one);
                splice(value, one.offset, expect, with)
            }
            spans => {
                // Several spans keep the length (checked at decode): rewrite
                // in place, checking each expected image.
                let mut out = value.to_vec();
                for s in spans {
                    let (expect, with) = sides(s);
                    let start = usize::try_from(s.offset).ok()?;
                    let end = start.checked_add(expect.len())?;
                    if expect.len() != with.len() || out.get(start..end)? != expect {
                        return None;
                    }
                    out[start..end].copy_from_slice(with);
                }
                Some(out)
            }
        }
    }
}

/// `value` with `expect` at `offset` replaced by `with`, if it is there.
fn splice(value: &[u8], offset: u32, expect: &[u8], with: &[u8]) -> Option<Vec<u8>> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(expect.len())?;
    if value.get(start..end)? != expect {
        return None;
    }
    let mut out = Vec::with_capacity(value.len() - expect.len() + with.len());
    out.extend_from_slice(&value[..start]);
    out.extend_from_slice(with);
    out.extend_from_slice(&value[end..]);
    Some(out)
}

/// A page body (page bytes 32..page_size) with a long zero run (the free
/// gap, [`PageImage::from_body`]) left out: the body is `head`, then
/// `zero_run` zero bytes, then `tail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageImage<'a> {
    pub head: &'a [u8],
    pub zero_run: u32,
    pub tail: &'a [u8],
}

impl<'a> PageImage<'a> {
    /// Split `body` around a long run of zero bytes: the longest run of
    /// zero 8-byte words (the first on a tie), widened by the zero bytes on
    /// either side. On a slotted page that run is the free gap between slot
    /// array and heap, so the image costs roughly the page's used bytes.
    ///
    /// Why words: every split logs a page image, and a byte-by-byte search
    /// for the longest zero run cost 64 k instructions per 16 KiB page
    /// (its data holds many short zero runs). The run found is at most 14
    /// bytes shorter than the longest: any run of 15 or more zero bytes
    /// holds an aligned zero word.
    ///
    /// # Panics
    /// If `body` is longer than [`MAX_IMAGE_BODY`].
    pub fn from_body(body: &'a [u8]) -> Self {
        assert!(body.len() <= MAX_IMAGE_BODY, "page body too large");
        let word = |w: usize| le_u64(&body[8 * w..]);
        let words = body.len() / 8;
        let (mut best, mut best_len) = (0, 0);
        let mut w = 0;
        while w < words {
            if word(w) != 0 {
                w += 1;
                continue;
            }
            let first = w;
            while w < words && word(w) == 0 {
                w += 1;
            }
            if w - first > best_len {
                (best, best_len) = (first, w - first);
            }
        }
        if best_len == 0 {
            return PageImage {
                head: body,
                zero_run: 0,
                tail: &[],
            };
        }
        let (mut start, mut end) = (8 * best, 8 * (best + best_len));
        while start > 0 && body[start - 1] == 0 {
            start -= 1;
        }
        while end < body.len() && body[end] == 0 {
            end += 1;
        }
        PageImage {
            head: &body[..start],
            zero_run: (end - start) as u32,
            tail: &body[end..],
        }
    }

    /// Length of the whole body: page size minus the 32-byte page header.
    pub fn body_len(&self) -> usize {
        self.head.len() + self.zero_run as usize + self.tail.len()
    }

    /// The full body for a page of `page_size` bytes; `None` when the image
    /// has another length (it belongs to a database with another page size).
    pub fn image_body(&self, page_size: usize) -> Option<Vec<u8>> {
        if page_size.checked_sub(PAGE_HEADER_SIZE) != Some(self.body_len()) {
            return None;
        }
        let mut body = vec![0; self.body_len()];
        self.write_body(&mut body);
        Some(body)
    }

    /// Write the body into `page[32..]` (the page header is left alone);
    /// `false`, with the page untouched, when the sizes disagree. Redo uses
    /// this to rebuild a page in its frame without an extra copy.
    pub fn write_to_page(&self, page: &mut [u8]) -> bool {
        if page.len().checked_sub(PAGE_HEADER_SIZE) != Some(self.body_len()) {
            return false;
        }
        self.write_body(&mut page[PAGE_HEADER_SIZE..]);
        true
    }

    fn write_body(&self, body: &mut [u8]) {
        let (h, z) = (self.head.len(), self.zero_run as usize);
        body[..h].copy_from_slice(self.head);
        body[h..h + z].fill(0);
        body[h + z..].copy_from_slice(self.tail);
    }
}

/// The dependency vector of a commit record: (log partition, byte position)
/// pairs. Borrowed either from the caller's pairs (when encoding) or from the
/// record bytes (when decoding), so decoding allocates nothing.
#[derive(Clone, Copy)]
pub struct Deps<'a>(DepsRepr<'a>);

#[derive(Clone, Copy)]
enum DepsRepr<'a> {
    Pairs(&'a [(u32, u64)]),
    /// `count` pairs in the record's encoding (partition, then position,
    /// each a vint64), checked when the record was decoded.
    Encoded {
        count: usize,
        bytes: &'a [u8],
    },
}

impl<'a> Deps<'a> {
    pub fn new(pairs: &'a [(u32, u64)]) -> Self {
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

    pub fn iter(&self) -> impl Iterator<Item = (u32, u64)> + 'a {
        let (pairs, mut encoded, count) = match self.0 {
            DepsRepr::Pairs(p) => (p, &[][..], 0),
            DepsRepr::Encoded { count, bytes } => (&[][..], bytes, count),
        };
        pairs.iter().copied().chain((0..count).map_while(move |_| {
            // Decoding checked every pair, so neither read fails here.
            let partition = vint64::decode(&mut encoded).ok()?;
            let position = vint64::decode(&mut encoded).ok()?;
            Some((u32::try_from(partition).ok()?, position))
        }))
    }

    pub fn to_vec(&self) -> Vec<(u32, u64)> {
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
    Commit { tid: u64, deps: Deps<'a> },
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
                at: len_u32(at, "split slot"),
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

/// Where a record's integers and byte strings go: [`encode`] writes them,
/// [`encoded_len`] only counts them. One description of the fields
/// ([`header_fields`], [`payload_fields`]) serves both, so the two cannot
/// disagree.
trait Sink {
    /// An unsigned integer, as a vint64 (1 to 9 bytes).
    fn int(&mut self, v: u64);
    fn bytes(&mut self, b: &[u8]);
}

/// Counts the bytes a record's fields take.
struct Count(usize);

impl Sink for Count {
    fn int(&mut self, v: u64) {
        self.0 += frame::vint_len(v);
    }
    fn bytes(&mut self, b: &[u8]) {
        self.0 += b.len();
    }
}

impl Sink for Vec<u8> {
    #[inline]
    fn int(&mut self, v: u64) {
        frame::put_vint(self, v);
    }

    fn bytes(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
}

/// A signed difference as an unsigned integer, small when the difference
/// is small either way (zigzag: 0, -1, 1, -2, ... become 0, 1, 2, 3, ...).
fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The header's variable fields, in their order (docs/FORMAT.md). Each
/// large number is stored next to one it is close to: the transaction's
/// start position (its id's low bits) as a difference to the watermark
/// (the frame's), both being recent stream positions of the partition, and
/// the prev GSN as a difference to the GSN.
fn header_fields(h: &RecordHeader, has_page: bool, out: &mut impl Sink) {
    out.int(h.gsn);
    out.int(h.txn >> TXN_POSITION_BITS);
    let start = (h.txn & TXN_POSITION_MASK) as i64;
    out.int(zigzag(start - (h.watermark & TXN_POSITION_MASK) as i64));
    if has_page {
        out.int(u64::from(h.tree));
        out.int(h.page);
        out.int(zigzag(h.gsn.wrapping_sub(h.prev_gsn) as i64));
    }
}

/// The payload's fields by kind, in their order (docs/FORMAT.md).
fn payload_fields(body: &RecordBody, out: &mut impl Sink) {
    let len = |n: usize| n as u64;
    match body {
        RecordBody::Insert { key, value: bytes } | RecordBody::Remove { key, before: bytes } => {
            out.int(len(key.len()));
            out.int(len(bytes.len()));
            out.bytes(key);
            out.bytes(bytes);
        }
        RecordBody::Update { key, diff } => {
            out.int(len(key.len()));
            out.int(len(diff.spans().len()));
            for span in diff.spans() {
                out.int(u64::from(span.offset));
                out.int(len(span.before.len()));
                out.int(len(span.after.len()));
            }
            out.bytes(key);
            for span in diff.spans() {
                out.bytes(span.before);
                out.bytes(span.after);
            }
        }
        RecordBody::Image(img) => {
            out.int(len(img.body_len()));
            out.int(len(img.head.len()));
            out.int(u64::from(img.zero_run));
            out.bytes(img.head);
            out.bytes(img.tail);
        }
        RecordBody::Commit { tid, deps } => {
            out.int(*tid);
            out.int(len(deps.len()));
            for (partition, position) in deps.iter() {
                out.int(u64::from(partition));
                out.int(position);
            }
        }
        RecordBody::End | RecordBody::Freed => {}
        RecordBody::Split { at, separator } => {
            out.int(u64::from(*at));
            out.int(len(separator.len()));
            out.bytes(separator);
        }
        RecordBody::Separator {
            separator,
            left,
            right,
        } => {
            out.int(*left);
            out.int(*right);
            out.int(len(separator.len()));
            out.bytes(separator);
        }
    }
}

/// Bytes of a record's header: the frame's prefix and watermark, the fixed
/// part and the header's variable fields (`inspect` tallies them).
pub fn header_len(header: &RecordHeader, kind: RecordKind) -> usize {
    let mut count = Count(frame::head_len(header.watermark) + FIXED_SIZE);
    header_fields(header, kind.has_page(), &mut count);
    count.0
}

/// Bytes `encode` appends for `header` and `body`: the frame around the
/// fixed part, the header's variable fields and the body.
pub fn encoded_len(header: &RecordHeader, body: &RecordBody) -> usize {
    let mut count = Count(FIXED_SIZE);
    header_fields(header, body.kind().has_page(), &mut count);
    payload_fields(body, &mut count);
    frame::framed_len(header.watermark, count.0)
}

fn len_u16(n: usize, what: &str) -> u16 {
    u16::try_from(n).unwrap_or_else(|_| panic!("{what} of {n} bytes does not fit a log record"))
}

fn len_u32(n: usize, what: &str) -> u32 {
    u32::try_from(n).unwrap_or_else(|_| panic!("{what} of {n} bytes does not fit a log record"))
}

/// Append one record to `out`.
///
/// Checked before write, so that everything written can be read back: the
/// record is at most [`frame::MAX_LEN`], keys fit a u16, an image body is
/// at most [`MAX_IMAGE_BODY`], image records have a nonzero page kind and
/// other records a zero one, and commit and end records have tree, page id
/// and prev GSN zero.
///
/// The record is not yet placed in a stream: its checksum is the plain
/// CRC32C, as at stream position 0. [`frame::place_at`] places it.
///
/// # Panics
/// If one of those checks fails. The engine bounds keys and values by the
/// page size long before they reach the log, so a failure is a bug.
pub fn encode(header: &RecordHeader, body: &RecordBody, out: &mut Vec<u8>) {
    let kind = body.kind();
    assert!(
        kind.has_page() || (header.tree == 0 && header.page == 0 && header.prev_gsn == 0),
        "{kind:?} record with a tree, page id or prev GSN"
    );
    assert!(
        !header.smo_more || kind.is_structural(),
        "structure-modification flag on a {kind:?} record"
    );
    assert!(
        (kind == RecordKind::Image) == (header.page_kind != 0),
        "{kind:?} record with page kind {}",
        header.page_kind
    );
    check_lengths(body);
    let mut flags = 0;
    if header.compensation {
        flags |= FLAG_COMPENSATION;
    }
    if header.smo_more {
        flags |= FLAG_SMO_MORE;
    }
    let start = frame::begin(out, header.watermark);
    out.extend_from_slice(&[kind as u8, flags, header.page_kind, 0]);
    header_fields(header, kind.has_page(), out);
    payload_fields(body, out);
    frame::seal(out, start);
    debug_assert_eq!(out.len() - start, encoded_len(header, body));
}

/// The length limits a reader enforces ([`decode_at`]), checked before a
/// record is written.
fn check_lengths(body: &RecordBody) {
    match body {
        RecordBody::Insert { key, value: bytes } | RecordBody::Remove { key, before: bytes } => {
            len_u16(key.len(), "key");
            len_u32(bytes.len(), "value");
        }
        RecordBody::Update { key, diff } => {
            len_u16(key.len(), "key");
            for span in diff.spans() {
                len_u32(span.before.len(), "before-image");
                len_u32(span.after.len(), "after-image");
            }
        }
        RecordBody::Image(img) => {
            let body_len = img.body_len();
            assert!(body_len <= MAX_IMAGE_BODY, "page image of {body_len} bytes");
        }
        RecordBody::Split { separator, .. } | RecordBody::Separator { separator, .. } => {
            len_u16(separator.len(), "separator");
        }
        RecordBody::Commit { .. } | RecordBody::End | RecordBody::Freed => {}
    }
}

/// Why the bytes at some position are not a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The frame is bad: never written, torn, cut off, or its watermark
    /// does not read.
    #[error("{0}")]
    Frame(FrameError),
    /// The checksum matched but the kind is unknown.
    #[error("unknown record kind {0}")]
    BadKind(u8),
    /// The checksum matched but the fields are inconsistent.
    #[error("malformed record: {0}")]
    Malformed(&'static str),
}

fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

/// Bounds-checked reads over a record's payload.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.buf.len())
            .ok_or(DecodeError::Malformed("payload longer than the record"))?;
        let b = &self.buf[self.pos..end];
        self.pos = end;
        Ok(b)
    }

    /// A vint64 in its shortest form.
    fn int(&mut self) -> Result<u64, DecodeError> {
        let mut rest = &self.buf[self.pos..];
        let v = frame::read_vint(&mut rest).map_err(DecodeError::Malformed)?;
        self.pos = self.buf.len() - rest.len();
        Ok(v)
    }

    /// An integer of at most `max`.
    fn int_to(&mut self, max: u64, what: &'static str) -> Result<u64, DecodeError> {
        self.int()
            .and_then(|v| (v <= max).then_some(v).ok_or(DecodeError::Malformed(what)))
    }

    /// A length of a byte string, at most `max`.
    fn len(&mut self, max: u64, what: &'static str) -> Result<usize, DecodeError> {
        // usize is 64 bits wide on every target the engine builds for.
        self.int_to(max, what).map(|v| v as usize)
    }
}

/// Decode the record at the start of `buf` as [`encode`] wrote it: not
/// placed in a stream, or taken back out with [`frame::place_at`] (bytes
/// after it are ignored).
pub fn decode(buf: &[u8]) -> Result<Record<'_>, DecodeError> {
    decode_at(buf, 0)
}

/// Decode the record at the start of `buf`, placed at stream position
/// `position` (bytes after it are ignored). Errors are checked in this
/// order: the frame's (`Zero`, `Truncated`/`BadLength`, `BadChecksum`),
/// then, on checksum-valid bytes, `BadKind`, `Malformed`.
pub fn decode_at(buf: &[u8], position: u64) -> Result<Record<'_>, DecodeError> {
    let frame = frame::open(buf, position).map_err(DecodeError::Frame)?;
    decode_payload(frame)
}

/// The per-worker WAL's records, as the segment scan reads them.
pub struct Records;

impl Payloads for Records {
    type Record<'a> = Record<'a>;
    type Error = DecodeError;

    /// The fixed part: a known kind, a page kind exactly on images, known
    /// flags and a zero reserved byte.
    fn plausible(head: &[u8]) -> bool {
        let [kind, flags, page_kind, reserved, ..] = *head else {
            return false;
        };
        RecordKind::from_byte(kind).is_some_and(|k| (k == RecordKind::Image) == (page_kind != 0))
            && flags & !KNOWN_FLAGS == 0
            && reserved == 0
    }

    fn decode<'a>(frame: Frame<'a>) -> Result<Record<'a>, DecodeError> {
        decode_payload(frame)
    }
}

/// The result of scanning a segment of the per-worker WAL.
pub type SegmentScan<'a> = Scan<Record<'a>>;

/// Scan a whole segment of the per-worker WAL ([`scan::scan`]): `buf[0]`
/// is the first record, at stream position `base`.
pub fn scan_segment(buf: &[u8], base: u64) -> SegmentScan<'_> {
    scan::scan::<Records>(buf, base)
}

/// The record in an opened frame.
fn decode_payload(frame: Frame<'_>) -> Result<Record<'_>, DecodeError> {
    let rec = frame.payload;
    let [kind, flags, page_kind, reserved, ..] = *rec else {
        return Err(DecodeError::Malformed(
            "payload shorter than its fixed part",
        ));
    };
    let kind = RecordKind::from_byte(kind).ok_or(DecodeError::BadKind(kind))?;
    if flags & !KNOWN_FLAGS != 0 {
        return Err(DecodeError::Malformed("unknown flag bits"));
    }
    if flags & FLAG_SMO_MORE != 0 && !kind.is_structural() {
        return Err(DecodeError::Malformed(
            "structure-modification flag on a record no structure modification writes",
        ));
    }
    if reserved != 0 {
        return Err(DecodeError::Malformed("reserved header byte is not zero"));
    }
    if kind == RecordKind::Image && page_kind == 0 {
        return Err(DecodeError::Malformed("page image without a page kind"));
    }
    if kind != RecordKind::Image && page_kind != 0 {
        return Err(DecodeError::Malformed(
            "page kind on a record that is not an image",
        ));
    }
    let mut r = Reader {
        buf: rec,
        pos: FIXED_SIZE,
    };
    let header = decode_header(&mut r, kind, flags, page_kind, frame.watermark)?;
    let body = match kind {
        RecordKind::Insert | RecordKind::Remove => {
            let kl = r.len(u16::MAX.into(), "key longer than 65535 bytes")?;
            let vl = r.len(u32::MAX.into(), "value longer than 4 GiB")?;
            let key = r.bytes(kl)?;
            let value = r.bytes(vl)?;
            if kind == RecordKind::Insert {
                RecordBody::Insert { key, value }
            } else {
                RecordBody::Remove { key, before: value }
            }
        }
        RecordKind::Update => {
            let kl = r.len(u16::MAX.into(), "key longer than 65535 bytes")?;
            let count = r.len(MAX_SPANS as u64, "update span count not in 1..=4")?;
            if count == 0 {
                return Err(DecodeError::Malformed("update span count not in 1..=4"));
            }
            let mut lens = [(0u32, 0usize, 0usize); MAX_SPANS];
            for l in lens.iter_mut().take(count) {
                let offset = r.int_to(u32::MAX.into(), "update span offset above 2^32")?;
                let bl = r.len(u32::MAX.into(), "before-image longer than 4 GiB")?;
                let al = r.len(u32::MAX.into(), "after-image longer than 4 GiB")?;
                *l = (offset as u32, bl, al);
            }
            let key = r.bytes(kl)?;
            let mut diff = UpdateDiff::empty();
            let mut next = 0u64;
            for &(offset, bl, al) in &lens[..count] {
                // Several spans: equal lengths, in order, not overlapping
                // (what encode_update makes and apply/undo rely on).
                if count > 1 && (bl != al || u64::from(offset) < next) {
                    return Err(DecodeError::Malformed(
                        "update spans overlap or change the length",
                    ));
                }
                next = u64::from(offset) + bl as u64;
                let before = r.bytes(bl)?;
                let after = r.bytes(al)?;
                diff.push(Span {
                    offset,
                    before,
                    after,
                });
            }
            RecordBody::Update { key, diff }
        }
        RecordKind::Image => {
            let body_len = r.len(u32::MAX.into(), "page image larger than a page")?;
            let run_start = r.len(u32::MAX.into(), "zero run outside the page image")?;
            let run_len = r.len(u32::MAX.into(), "zero run outside the page image")?;
            // body_len bounds what `image_body` allocates: check it here,
            // since the zero run is not backed by record bytes.
            if body_len > MAX_IMAGE_BODY {
                return Err(DecodeError::Malformed("page image larger than a page"));
            }
            if run_start > body_len || run_len > body_len - run_start {
                return Err(DecodeError::Malformed("zero run outside the page image"));
            }
            let head = r.bytes(run_start)?;
            let tail = r.bytes(body_len - run_start - run_len)?;
            RecordBody::Image(PageImage {
                head,
                zero_run: run_len as u32,
                tail,
            })
        }
        RecordKind::Commit => {
            let tid = r.int()?;
            // Every pair takes at least two bytes, which bounds the count
            // by the record's length before anything relies on it.
            let count = r.len((rec.len() / 2) as u64, "more dependencies than bytes")?;
            let start = r.pos;
            for _ in 0..count {
                r.int_to(u32::MAX.into(), "dependency partition above 2^32")?;
                r.int()?;
            }
            RecordBody::Commit {
                tid,
                deps: Deps(DepsRepr::Encoded {
                    count,
                    bytes: &rec[start..r.pos],
                }),
            }
        }
        RecordKind::End => RecordBody::End,
        RecordKind::Freed => RecordBody::Freed,
        RecordKind::Split => {
            let at = r.int_to(u32::MAX.into(), "split slot above 2^32")? as u32;
            let kl = r.len(u16::MAX.into(), "separator longer than 65535 bytes")?;
            RecordBody::Split {
                at,
                separator: r.bytes(kl)?,
            }
        }
        RecordKind::Separator => {
            let left = r.int()?;
            let right = r.int()?;
            let kl = r.len(u16::MAX.into(), "separator longer than 65535 bytes")?;
            RecordBody::Separator {
                separator: r.bytes(kl)?,
                left,
                right,
            }
        }
    };
    // The payload must fill the record exactly, so one record has one
    // encoding and `encoded_len` of the decoded body is the frame's length.
    frame.check_end(r.pos).map_err(DecodeError::Malformed)?;
    let record = Record { header, body };
    debug_assert_eq!(record.encoded_len(), frame.encoded_len());
    Ok(record)
}

/// The header's variable fields ([`header_fields`] wrote them).
fn decode_header(
    r: &mut Reader,
    kind: RecordKind,
    flags: u8,
    page_kind: u8,
    watermark: u64,
) -> Result<RecordHeader, DecodeError> {
    let gsn = r.int()?;
    let slot = r.int_to(u64::MAX >> TXN_POSITION_BITS, "transaction slot above 2^16")?;
    let start = ((watermark & TXN_POSITION_MASK) as i64)
        .checked_add(unzigzag(r.int()?))
        .filter(|s| (0..=TXN_POSITION_MASK as i64).contains(s))
        .ok_or(DecodeError::Malformed(
            "transaction start outside the stream position range",
        ))?;
    let (tree, page, prev_gsn) = if kind.has_page() {
        let tree = r.int_to(u32::MAX.into(), "tree root above 2^32")? as u32;
        let page = r.int()?;
        let prev_gsn = gsn.wrapping_sub(unzigzag(r.int()?) as u64);
        (tree, page, prev_gsn)
    } else {
        (0, 0, 0)
    };
    Ok(RecordHeader {
        page_kind,
        tree,
        gsn,
        txn: (slot << TXN_POSITION_BITS) | start as u64,
        page,
        prev_gsn,
        compensation: flags & FLAG_COMPENSATION != 0,
        smo_more: flags & FLAG_SMO_MORE != 0,
        watermark,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logstore::scan::ScanEnd;
    use proptest::prelude::*;

    /// An owned record, so strategies can generate them.
    #[derive(Debug, Clone)]
    enum Owned {
        Insert(Vec<u8>, Vec<u8>),
        Update(Vec<u8>, Vec<u8>, Vec<u8>),
        Remove(Vec<u8>, Vec<u8>),
        Image(Vec<u8>),
        Commit(u64, Vec<(u32, u64)>),
        End,
        Freed,
        Split(u32, Vec<u8>),
        Separator(Vec<u8>, u64, u64),
    }

    impl Owned {
        fn body(&self) -> RecordBody<'_> {
            match self {
                Owned::Insert(k, v) => RecordBody::Insert { key: k, value: v },
                Owned::Update(k, old, new) => RecordBody::Update {
                    key: k,
                    diff: encode_update(old, new),
                },
                Owned::Remove(k, v) => RecordBody::Remove { key: k, before: v },
                Owned::Image(body) => RecordBody::Image(PageImage::from_body(body)),
                Owned::Commit(tid, deps) => RecordBody::Commit {
                    tid: *tid,
                    deps: Deps::new(deps),
                },
                Owned::End => RecordBody::End,
                Owned::Freed => RecordBody::Freed,
                Owned::Split(at, sep) => RecordBody::Split {
                    at: *at,
                    separator: sep,
                },
                Owned::Separator(sep, left, right) => RecordBody::Separator {
                    separator: sep,
                    left: *left,
                    right: *right,
                },
            }
        }

        fn header(&self, gsn: u64, watermark: u64) -> RecordHeader {
            let page = !matches!(self, Owned::Commit(..) | Owned::End);
            let image = matches!(self, Owned::Image(_));
            RecordHeader {
                // BtreeLeaf or BtreeInner.
                page_kind: if image { 2 + (gsn % 2) as u8 } else { 0 },
                tree: if page { (gsn % 1000) as u32 * 3 + 1 } else { 0 },
                gsn,
                txn: gsn / 3 + 1,
                page: if page { gsn * 7 + 2 } else { 0 },
                prev_gsn: if page { gsn.saturating_sub(5) } else { 0 },
                compensation: gsn % 4 == 1,
                smo_more: self.body().kind().is_structural() && gsn.is_multiple_of(3),
                watermark,
            }
        }
    }

    fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(any::<u8>(), 0..max)
    }

    /// A page body with some zero stretches, like a slotted page.
    fn page_body() -> impl Strategy<Value = Vec<u8>> {
        (
            prop::collection::vec(any::<u8>(), 0..200),
            0usize..600,
            prop::collection::vec(any::<u8>(), 0..200),
        )
            .prop_map(|(mut head, gap, tail)| {
                head.resize(head.len() + gap, 0);
                head.extend(tail);
                head
            })
    }

    fn owned() -> impl Strategy<Value = Owned> {
        prop_oneof![
            (bytes(40), bytes(100)).prop_map(|(k, v)| Owned::Insert(k, v)),
            (bytes(40), bytes(100), bytes(100)).prop_map(|(k, o, n)| Owned::Update(k, o, n)),
            (bytes(40), bytes(100)).prop_map(|(k, v)| Owned::Remove(k, v)),
            page_body().prop_map(Owned::Image),
            (
                any::<u64>(),
                prop::collection::vec(any::<(u32, u64)>(), 0..6)
            )
                .prop_map(|(t, d)| Owned::Commit(t, d)),
            Just(Owned::End),
            Just(Owned::Freed),
            (any::<u32>(), bytes(40)).prop_map(|(at, k)| Owned::Split(at, k)),
            (bytes(40), any::<u64>(), any::<u64>()).prop_map(|(k, l, r)| Owned::Separator(k, l, r)),
        ]
    }

    /// Encode `records` as a segment starting at stream position 0, each
    /// record with watermark = its own offset (everything before it was
    /// durable when it was appended); returns the bytes and each record's
    /// offset.
    fn segment(records: &[Owned]) -> (Vec<u8>, Vec<usize>) {
        segment_with(records, 0, |_, offset| offset as u64)
    }

    /// Encode `records` as a segment starting at stream position `base`,
    /// with watermark `watermark(index, offset)`.
    fn segment_with(
        records: &[Owned],
        base: u64,
        watermark: impl Fn(usize, usize) -> u64,
    ) -> (Vec<u8>, Vec<usize>) {
        let mut buf = Vec::new();
        let mut offsets = Vec::new();
        for (i, r) in records.iter().enumerate() {
            let offset = buf.len();
            offsets.push(offset);
            let header = r.header(i as u64 + 1, watermark(i, offset));
            encode(&header, &r.body(), &mut buf);
        }
        frame::place_at(&mut buf, base);
        (buf, offsets)
    }

    /// The scan returned exactly the first `n` records, as [`segment`]
    /// encoded them (watermark = offset) and at their offsets.
    fn assert_prefix(scan: &SegmentScan, records: &[Owned], offsets: &[usize], n: usize) {
        assert_eq!(scan.records.len(), n, "records returned");
        for (i, (off, rec)) in scan.records.iter().enumerate() {
            assert_eq!(*off as usize, offsets[i]);
            assert_eq!(
                rec.header,
                records[i].header(i as u64 + 1, offsets[i] as u64)
            );
            assert_eq!(rec.body, records[i].body());
        }
    }

    /// The diff's definition, byte by byte (what `encode_update` computed
    /// before it compared words): spans as (offset, before len, after len).
    fn bytewise_diff(old: &[u8], new: &[u8]) -> Vec<(u32, usize, usize)> {
        let prefix = old.iter().zip(new).take_while(|(a, b)| a == b).count();
        let suffix = old[prefix..]
            .iter()
            .rev()
            .zip(new[prefix..].iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        let (end_old, end_new) = (old.len() - suffix, new.len() - suffix);
        if old.len() != new.len() || end_old <= prefix {
            return vec![(prefix as u32, end_old - prefix, end_new - prefix)];
        }
        let mut runs: Vec<(usize, usize)> = Vec::new();
        let mut i = prefix;
        while i < end_old {
            let (start, mut end, mut equal) = (i, i, 0);
            while i < end_old && equal < SPAN_GAP {
                if old[i] == new[i] {
                    equal += 1;
                } else {
                    equal = 0;
                    end = i + 1;
                }
                i += 1;
            }
            runs.push((start, end));
            while i < end_old && old[i] == new[i] {
                i += 1;
            }
        }
        while runs.len() > MAX_SPANS {
            let closest = (0..runs.len() - 1)
                .min_by_key(|&k| runs[k + 1].0 - runs[k].1)
                .unwrap();
            runs[closest].1 = runs[closest + 1].1;
            runs.remove(closest + 1);
        }
        runs.iter()
            .map(|&(a, b)| (a as u32, b - a, b - a))
            .collect()
    }

    /// A fixed segment with one record of every kind (last: an update).
    fn sample() -> Vec<Owned> {
        let mut image = vec![7u8; 100];
        image.resize(4000, 0);
        image.extend([9u8; 96]);
        vec![
            Owned::Insert(b"alpha".to_vec(), b"one".to_vec()),
            Owned::Image(image),
            Owned::Remove(b"beta".to_vec(), b"gone value".to_vec()),
            Owned::Commit(99, vec![(1, 4096), (3, 80)]),
            Owned::End,
            Owned::Freed,
            Owned::Split(17, b"delta".to_vec()),
            Owned::Separator(b"epsilon".to_vec(), 12, 13),
            Owned::Update(
                b"gamma".to_vec(),
                b"hello world".to_vec(),
                b"hello there world".to_vec(),
            ),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The word loops find the same prefix and suffix as a byte-by-byte
        /// walk, on values with long equal stretches and up to two
        /// differences anywhere.
        #[test]
        fn common_prefix_and_suffix_match_a_byte_walk(
            a in prop::collection::vec(any::<u8>(), 0..300),
            extra in prop::collection::vec(any::<u8>(), 0..40),
            flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..), 0..3),
        ) {
            let mut b = a.clone();
            for (at, x) in &flips {
                if !b.is_empty() {
                    let i = at.index(b.len());
                    b[i] ^= x;
                }
            }
            let walk_prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
            let walk_suffix = a.iter().rev().zip(b.iter().rev()).take_while(|(x, y)| x == y).count();
            prop_assert_eq!(common_prefix(&a, &b), walk_prefix);
            prop_assert_eq!(common_suffix(&a, &b), walk_suffix);
            // Different lengths: the longer value's extra bytes at either end.
            let mut longer = b.clone();
            longer.extend(&extra);
            prop_assert_eq!(common_prefix(&a, &longer), walk_prefix);
            let mut front = extra.clone();
            front.extend(&b);
            prop_assert_eq!(common_suffix(&a, &front), walk_suffix);
        }

        #[test]
        fn every_kind_round_trips(
            rec in owned(),
            gsn in any::<u64>(),
            page_kind in 1u8..,
            tree in any::<u32>(),
            watermark in any::<u64>(),
            (txn, page, prev_gsn) in any::<(u64, u64, u64)>(),
            junk in bytes(20),
        ) {
            let body = rec.body();
            let kind = body.kind();
            // Any values: the header's differences (transaction start to
            // watermark, GSN to prev GSN) hold for all of them.
            let header = RecordHeader {
                gsn,
                txn,
                page_kind: if kind == RecordKind::Image { page_kind } else { 0 },
                tree: if kind.has_page() { tree } else { 0 },
                page: if kind.has_page() { page } else { 0 },
                prev_gsn: if kind.has_page() { prev_gsn } else { 0 },
                watermark,
                ..rec.header(gsn % 1000, 0)
            };
            let mut out = junk.clone();
            encode(&header, &body, &mut out);
            prop_assert_eq!(&out[..junk.len()], &junk[..]);
            let enc = &out[junk.len()..];
            prop_assert_eq!(enc.len(), encoded_len(&header, &body));
            prop_assert_eq!(enc.len() % frame::ALIGN, 0);
            prop_assert_eq!(u32::from_le_bytes(enc[4..8].try_into().unwrap()) as usize, enc.len());
            // The scan's search after a bad record looks at the fixed part
            // before a checksum: it must not pass over a record.
            prop_assert!(Records::plausible(&enc[frame::head_len(watermark)..]));
            // Trailing bytes after the record are not part of it.
            let mut more = enc.to_vec();
            more.extend_from_slice(&[0xff; 9]);
            for buf in [enc, &more[..]] {
                let got = decode(buf).unwrap();
                prop_assert_eq!(got.header, header);
                prop_assert_eq!(got.body, body);
                prop_assert_eq!(got.encoded_len(), enc.len());
            }
        }

        #[test]
        fn update_diff_round_trips(
            old in prop::collection::vec(0u8..3, 0..40),
            new in prop::collection::vec(0u8..3, 0..40),
        ) {
            let diff = encode_update(&old, &new);
            prop_assert_eq!(diff.apply_update(&old), Some(new.clone()));
            prop_assert_eq!(diff.undo_update(&new), Some(old.clone()));
            // Only the changed bytes: no span can be shrunk at either end,
            // and spans are in order without overlap.
            let mut next = 0;
            for span in diff.spans() {
                if let (Some(b), Some(a)) = (span.before.first(), span.after.first()) {
                    prop_assert_ne!(b, a);
                }
                if let (Some(b), Some(a)) = (span.before.last(), span.after.last()) {
                    prop_assert_ne!(b, a);
                }
                prop_assert!(span.offset as usize >= next);
                next = span.offset as usize + span.before.len();
            }
            let unchanged = old.len() - diff.spans().iter().map(|s| s.before.len()).sum::<usize>();
            prop_assert_eq!(unchanged, new.len() - diff.spans().iter().map(|s| s.after.len()).sum::<usize>());
            let body = RecordBody::Update { key: b"k", diff };
            let mut buf = Vec::new();
            encode(&RecordHeader::default(), &body, &mut buf);
            prop_assert_eq!(decode(&buf).unwrap().body, body);
        }

        /// The word-at-a-time diff finds exactly the spans of the plain
        /// byte-by-byte definition (kept here as the reference).
        #[test]
        fn update_diff_matches_the_bytewise_definition(
            old in prop::collection::vec(prop::sample::select(vec![0u8, 0, 0, 1, 2]), 0..200),
            flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..4), 0..30),
            grow in prop::collection::vec(0u8..3, 0..3),
        ) {
            let mut new = old.clone();
            for (at, by) in &flips {
                if !new.is_empty() {
                    let i = at.index(new.len());
                    new[i] = new[i].wrapping_add(*by);
                }
            }
            for diff_new in [new.clone(), [&new[..], &grow[..]].concat()] {
                let fast = encode_update(&old, &diff_new);
                let slow = bytewise_diff(&old, &diff_new);
                let spans: Vec<(u32, usize, usize)> = fast
                    .spans()
                    .iter()
                    .map(|s| (s.offset, s.before.len(), s.after.len()))
                    .collect();
                prop_assert_eq!(spans, slow);
            }
        }

        #[test]
        fn update_diff_of_an_edit_round_trips(
            // A small alphabet makes repeated bytes, where prefix and suffix
            // could overlap, common.
            old in prop::collection::vec(0u8..3, 0..60),
            at in any::<prop::sample::Index>(),
            cut in 0usize..10,
            insert in prop::collection::vec(0u8..3, 0..10),
        ) {
            // Realistic updates: one splice into a random value.
            let start = if old.is_empty() { 0 } else { at.index(old.len() + 1) };
            let end = (start + cut).min(old.len());
            let mut new = old[..start].to_vec();
            new.extend(&insert);
            new.extend(&old[end..]);
            let diff = encode_update(&old, &new);
            let before: usize = diff.spans().iter().map(|s| s.before.len()).sum();
            let after: usize = diff.spans().iter().map(|s| s.after.len()).sum();
            prop_assert!(before <= end - start);
            prop_assert!(after <= insert.len());
            prop_assert_eq!(diff.apply_update(&old), Some(new.clone()));
            prop_assert_eq!(diff.undo_update(&new), Some(old));
        }

        #[test]
        fn page_image_round_trips_and_elides_the_longest_zero_run(body in page_body()) {
            let img = PageImage::from_body(&body);
            prop_assert_eq!(img.body_len(), body.len());
            let longest = body
                .split(|&b| b != 0)
                .map(|run| run.len())
                .max()
                .unwrap_or(0);
            // Within 14 bytes of the longest run, and a whole run: zeros
            // neither before nor after it.
            prop_assert!(img.zero_run as usize + 14 >= longest, "{} of {}", img.zero_run, longest);
            if img.zero_run > 0 {
                prop_assert!(img.head.last().is_none_or(|&b| b != 0));
                prop_assert!(img.tail.first().is_none_or(|&b| b != 0));
            }
            let page_size = body.len() + PAGE_HEADER_SIZE;
            prop_assert_eq!(img.image_body(page_size), Some(body.clone()));
            prop_assert_eq!(img.image_body(page_size + 1), None);
            let mut page = vec![0xee; page_size];
            prop_assert!(img.write_to_page(&mut page));
            prop_assert_eq!(&page[PAGE_HEADER_SIZE..], &body[..]);
            prop_assert!(page[..PAGE_HEADER_SIZE].iter().all(|&b| b == 0xee));
            // Through the log and back.
            let mut out = Vec::new();
            let header = RecordHeader { page_kind: 2, tree: 1, page: 3, ..Default::default() };
            encode(&header, &RecordBody::Image(img), &mut out);
            prop_assert_eq!(out.len(), encoded_len(&header, &RecordBody::Image(img)));
            prop_assert!(out.len() < 48 + body.len() - img.zero_run as usize, "the zero run is left out");
            let Record { body: RecordBody::Image(back), .. } = decode(&out).unwrap() else {
                panic!("not an image");
            };
            prop_assert_eq!(back.image_body(page_size), Some(body));
        }

        #[test]
        fn decode_and_scan_are_total_on_random_bytes(buf in bytes(600), base in any::<u64>()) {
            let _ = decode(&buf);
            let scan = scan_segment(&buf, base);
            prop_assert!(scan.valid_len as usize <= buf.len());
        }

        #[test]
        fn decode_and_scan_are_total_on_damaged_segments(
            records in prop::collection::vec(owned(), 1..8),
            flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 0..4),
            cut in any::<prop::sample::Index>(),
            splat in any::<prop::sample::Index>(),
            splat_byte in any::<u8>(),
            base in prop_oneof![Just(0u64), any::<u64>()],
        ) {
            let (mut buf, offsets) = segment_with(&records, base, |_, offset| offset as u64);
            let first = flips.iter().map(|(at, _)| at.index(buf.len())).min();
            for (at, bit) in &flips {
                let i = at.index(buf.len());
                buf[i] ^= 1 << bit;
            }
            // A random overwrite of a 4-byte field somewhere.
            let s = splat.index(buf.len());
            let mut damaged = buf.clone();
            for b in damaged.iter_mut().skip(s).take(4) {
                *b = splat_byte;
            }
            for b in [&buf, &damaged] {
                let _ = decode(b);
                let cut = cut.index(b.len() + 1);
                let scan = scan_segment(&b[..cut], base);
                prop_assert!(scan.valid_len as usize <= cut);
                let _ = scan_segment(b, base);
            }
            // Records wholly before the first flipped byte come back intact.
            if let Some(first) = first {
                let scan = scan_segment(&buf, base);
                let intact = offsets
                    .iter()
                    .zip(offsets.iter().skip(1).chain([&buf.len()]))
                    .take_while(|(_, &end)| end <= first)
                    .count();
                prop_assert!(scan.records.len() >= intact);
                for (i, (_, rec)) in scan.records.iter().take(intact).enumerate() {
                    prop_assert_eq!(rec.body, records[i].body());
                }
            }
        }

    }

    #[test]
    fn update_diff_examples() {
        // (old, new, offset, before, after)
        type Case = (
            &'static [u8],
            &'static [u8],
            u32,
            &'static [u8],
            &'static [u8],
        );
        let cases: [Case; 7] = [
            (b"aa", b"aaa", 2, b"", b"a"),
            (b"aaa", b"aa", 2, b"a", b""),
            (b"abc", b"abc", 3, b"", b""),
            (b"", b"xy", 0, b"", b"xy"),
            (b"abcabc", b"abc", 3, b"abc", b""),
            (b"hello world", b"hello there world", 6, b"", b"there "),
            (b"0123456789", b"01x3456y89", 2, b"234567", b"x3456y"),
        ];
        for (old, new, offset, before, after) in cases {
            let diff = encode_update(old, new);
            assert_eq!(
                diff,
                UpdateDiff::single(Span {
                    offset,
                    before,
                    after
                }),
                "{old:?} -> {new:?}"
            );
            assert_eq!(diff.apply_update(old).as_deref(), Some(new));
            assert_eq!(diff.undo_update(new).as_deref(), Some(old));
        }
        // A row whose TID (front) and one field (far behind) changed logs
        // the two, not the bytes between them.
        let old_row: Vec<u8> = (0..200u8).collect();
        let mut new_row = old_row.clone();
        new_row[0..8].copy_from_slice(&[0xee; 8]);
        new_row[150] = 0xff;
        let diff = encode_update(&old_row, &new_row);
        assert_eq!(diff.spans().len(), 2, "{diff:?}");
        assert_eq!(diff.image_bytes(), 2 * (8 + 1));
        assert_eq!(diff.apply_update(&old_row).as_deref(), Some(&new_row[..]));
        assert_eq!(diff.undo_update(&new_row).as_deref(), Some(&old_row[..]));
        let body = RecordBody::Update { key: b"k", diff };
        let mut buf = Vec::new();
        encode(&RecordHeader::default(), &body, &mut buf);
        assert_eq!(decode(&buf).unwrap().body, body);
        // More changed runs than MAX_SPANS merge the closest ones.
        let mut many = old_row.clone();
        for at in [10, 30, 60, 100, 101, 190] {
            many[at] ^= 0x55;
        }
        let diff = encode_update(&old_row, &many);
        assert_eq!(diff.spans().len(), MAX_SPANS);
        assert_eq!(diff.apply_update(&old_row).as_deref(), Some(&many[..]));
        assert_eq!(diff.undo_update(&many).as_deref(), Some(&old_row[..]));
        // A diff refuses a value it does not describe.
        let diff = encode_update(b"abcdef", b"abXdef");
        assert_eq!(diff.apply_update(b"abYdef"), None);
        assert_eq!(diff.apply_update(b"ab"), None);
        assert_eq!(diff.undo_update(b"abcdef"), None);
    }

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

    #[test]
    fn bit_flip_followed_by_valid_records_is_corruption_at_its_offset() {
        let records = sample();
        // Watermark = offset: each record was appended once everything before
        // it was durable, so the damaged bytes had been synced.
        let (buf, offsets) = segment(&records);
        let last = *offsets.last().unwrap();
        // Every bit of every record but the last, including the length field:
        // a damaged length must not hide the records after it.
        for bit in 0..last * 8 {
            let mut b = buf.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            let victim = offsets.iter().rposition(|&o| o <= bit / 8).unwrap();
            let scan = scan_segment(&b, 0);
            assert_prefix(&scan, &records, &offsets, victim);
            assert!(
                matches!(scan.end, ScanEnd::Corrupt { offset, .. } if offset as usize == offsets[victim]),
                "bit {bit}: {:?}",
                scan.end
            );
        }
    }

    /// Re-seal a record after editing it, to reach the checks behind the
    /// checksum (a record not placed in a stream, as `decode` reads it).
    fn reseal(rec: &mut [u8]) {
        reseal_at(rec, 0);
    }

    /// Re-seal the record `rec` (exactly one) placed at stream position
    /// `position`.
    fn reseal_at(rec: &mut [u8], position: u64) {
        let crc = crc32c::crc32c(&rec[4..]);
        rec[..4].copy_from_slice(&crc.to_le_bytes());
        frame::place_at(rec, position);
    }

    #[test]
    fn checksum_valid_but_unreadable_record_is_corruption_even_at_the_tail() {
        let records = sample();
        let (mut buf, offsets) = segment(&records);
        let last = *offsets.last().unwrap();
        // The kind: the payload's first byte, after the frame's head.
        buf[last + frame::head_len(last as u64)] = 42;
        reseal_at(&mut buf[last..], last as u64);
        let scan = scan_segment(&buf, 0);
        assert_eq!(scan.records.len(), records.len() - 1);
        assert!(matches!(&scan.end, ScanEnd::Corrupt { offset, detail }
            if *offset as usize == last && detail.contains("unknown record kind 42")));
    }

    /// A record built from raw parts, sealed at position 0: the frame's
    /// prefix, `ints[0]` as its watermark, the fixed part (kind, flags,
    /// page kind), then the rest of `ints` as vint64s, then `bytes`.
    fn raw_record(kind: u8, flags: u8, page_kind: u8, ints: &[u64], bytes: &[u8]) -> Vec<u8> {
        let mut r = vec![0u8; frame::PREFIX];
        for (i, &v) in ints.iter().enumerate() {
            r.extend_from_slice(vint64::encode(v).as_ref());
            if i == 0 {
                r.extend_from_slice(&[kind, flags, page_kind, 0]);
            }
        }
        r.extend_from_slice(bytes);
        r.resize(r.len().next_multiple_of(frame::ALIGN), 0);
        let len = r.len() as u32;
        r[4..8].copy_from_slice(&len.to_le_bytes());
        reseal(&mut r);
        r
    }

    #[test]
    fn decode_errors_name_the_problem() {
        let mut rec = Vec::new();
        let header = RecordHeader {
            page_kind: 0,
            tree: 3,
            gsn: 5,
            txn: 1,
            page: 9,
            prev_gsn: 4,
            compensation: false,
            smo_more: false,
            watermark: 4096,
        };
        let insert = RecordBody::Insert {
            key: b"k",
            value: b"v",
        };
        encode(&header, &insert, &mut rec);
        // Frame prefix 0..8, watermark 8..10; kind 10, flags 11, page kind
        // 12, reserved 13; GSN 14, slot 15, transaction start 16..18 (1 -
        // 4096, zigzagged: 8189), tree 18, page 19, GSN - prev GSN 20 (1,
        // zigzagged: 2); key length 21, value length 22, key 23, value 24;
        // padding to 32.
        assert_eq!(rec.len(), 32);
        assert_eq!(header_len(&header, RecordKind::Insert), 21);
        assert_eq!(
            rec,
            raw_record(1, 0, 0, &[4096, 5, 0, 8189, 3, 9, 2, 1, 1], b"kv"),
            "the layout of docs/FORMAT.md"
        );
        let edited = |f: &dyn Fn(&mut Vec<u8>), seal: bool| {
            let mut r = rec.clone();
            f(&mut r);
            if seal {
                reseal(&mut r);
            }
            decode(&r).err()
        };
        use DecodeError::{BadKind, Malformed};
        let framing = |e: FrameError| Some(DecodeError::Frame(e));
        assert_eq!(decode(&[]).err(), framing(FrameError::Truncated));
        assert_eq!(decode(&rec[..15]).err(), framing(FrameError::Truncated));
        assert_eq!(decode(&rec[..31]).err(), framing(FrameError::Truncated));
        assert_eq!(decode(&[0; 20]).err(), framing(FrameError::Zero));
        assert_eq!(decode(&[0; 100]).err(), framing(FrameError::Zero));
        let set_len = |n: u32| move |r: &mut Vec<u8>| r[4..8].copy_from_slice(&n.to_le_bytes());
        assert_eq!(edited(&set_len(8), false), framing(FrameError::BadLength));
        assert_eq!(edited(&set_len(20), false), framing(FrameError::BadLength));
        assert_eq!(
            edited(&set_len(16 << 20 | 8), false),
            framing(FrameError::BadLength)
        );
        assert_eq!(
            edited(&set_len(16 << 20), false),
            framing(FrameError::Truncated)
        );
        assert_eq!(
            edited(&|r| r[20] ^= 1, false),
            framing(FrameError::BadChecksum)
        );
        assert_eq!(edited(&|r| r[10] = 0, true), Some(BadKind(0)));
        assert_eq!(edited(&|r| r[10] = 10, true), Some(BadKind(10)));
        assert!(matches!(edited(&|r| r[11] = 2, true), Some(Malformed(_))));
        assert!(matches!(edited(&|r| r[11] = 4, true), Some(Malformed(_))));
        assert!(matches!(edited(&|r| r[13] = 1, true), Some(Malformed(_))));
        // A page kind on a record that is not an image.
        assert!(matches!(edited(&|r| r[12] = 2, true), Some(Malformed(_))));
        // Any tree is fine on a page record (one byte holds 0..=127).
        assert_eq!(edited(&|r| r[18] = 0xff, true), None, "tree 127 decodes");
        // An integer in a longer form than it needs: 2 bytes for 0.
        // The GSN 5 as two bytes (5 << 2 | 0b10, 0).
        let mut long = rec[..25].to_vec();
        long.splice(14..15, [22, 0]);
        long.resize(32, 0);
        reseal(&mut long);
        assert_eq!(
            decode(&long).err(),
            Some(Malformed("integer not in its shortest form"))
        );
        // A commit record (kind 5) with this payload does not parse.
        assert!(matches!(edited(&|r| r[10] = 5, true), Some(Malformed(_))));
        // The shortest record: an end record of one-byte integers.
        let mut end = Vec::new();
        encode(&RecordHeader::default(), &RecordBody::End, &mut end);
        assert_eq!(end.len(), frame::MIN_LEN);
        assert!(decode(&end).is_ok());
        // Header fields out of their range: a slot above 2^16, a transaction
        // start outside 0..2^48, a tree above 2^32.
        for (ints, what) in [
            (&[0, 1, 1 << 16, 0][..], "transaction slot above 2^16"),
            (
                &[0, 1, 0, 1],
                "transaction start outside the stream position range",
            ),
            (&[0, 1, 0, 0, 1 << 32, 1, 0], "tree root above 2^32"),
        ] {
            let kind = if ints.len() == 4 { 6 } else { 7 };
            assert_eq!(
                decode(&raw_record(kind, 0, 0, ints, b"")).err(),
                Some(Malformed(what))
            );
        }
        // Key length past the record's end; nonzero padding; payload shorter
        // than the record.
        assert!(matches!(edited(&|r| r[21] = 201, true), Some(Malformed(_))));
        assert_eq!(
            edited(&|r| r[31] = 1, true),
            Some(Malformed("padding is not zero"))
        );
        let grown = |r: &mut Vec<u8>| {
            r.resize(40, 0);
            r[4..8].copy_from_slice(&40u32.to_le_bytes());
        };
        assert_eq!(
            edited(&grown, true),
            Some(Malformed("record longer than its payload"))
        );
        // Update span counts outside 1..=4.
        let head = [0, 1, 0, 0, 1, 1, 2];
        for n in [0, 5] {
            let ints: Vec<u64> = head.iter().copied().chain([1, n]).collect();
            assert_eq!(
                decode(&raw_record(2, 0, 0, &ints, b"k")).err(),
                Some(Malformed("update span count not in 1..=4"))
            );
        }
        // A commit claiming more dependencies than it has bytes.
        assert_eq!(
            decode(&raw_record(5, 0, 0, &[0, 1, 0, 0, 7, 1000], b"")).err(),
            Some(Malformed("more dependencies than bytes"))
        );
        // An image whose body claims more than a page, and an image without
        // a page kind.
        let mut img = Vec::new();
        let body = RecordBody::Image(PageImage {
            head: b"x",
            zero_run: 10,
            tail: b"",
        });
        let image_header = RecordHeader {
            page_kind: 2,
            ..header
        };
        encode(&image_header, &body, &mut img);
        assert_eq!(decode(&img).map(|r| r.header), Ok(image_header));
        let ints: Vec<u64> = head
            .iter()
            .copied()
            .chain([MAX_IMAGE_BODY as u64 + 1, 1, 10])
            .collect();
        assert_eq!(
            decode(&raw_record(4, 0, 2, &ints, b"x")).err(),
            Some(Malformed("page image larger than a page"))
        );
        img[12] = 0;
        reseal(&mut img);
        assert_eq!(
            decode(&img).err(),
            Some(Malformed("page image without a page kind"))
        );
        // A frame whose watermark leaves no room for the fixed part.
        let mut short = vec![0u8; frame::PREFIX];
        short.extend_from_slice(vint64::encode(1 << 28).as_ref());
        short.resize(frame::MIN_LEN, 0);
        short[4..8].copy_from_slice(&(frame::MIN_LEN as u32).to_le_bytes());
        reseal(&mut short);
        assert_eq!(
            decode(&short).err(),
            Some(Malformed("payload shorter than its fixed part"))
        );
    }

    #[test]
    fn encode_refuses_headers_it_could_not_read_back() {
        let insert = RecordBody::Insert {
            key: b"k",
            value: b"v",
        };
        let image = RecordBody::Image(PageImage {
            head: b"x",
            zero_run: 0,
            tail: b"",
        });
        let cases = [
            (RecordHeader::default(), image),
            (
                RecordHeader {
                    page_kind: 2,
                    ..Default::default()
                },
                insert,
            ),
            (
                RecordHeader {
                    tree: 1,
                    ..Default::default()
                },
                RecordBody::End,
            ),
            (
                RecordHeader {
                    page: 1,
                    ..Default::default()
                },
                RecordBody::End,
            ),
        ];
        for (header, body) in cases {
            let r = std::panic::catch_unwind(|| encode(&header, &body, &mut Vec::new()));
            assert!(r.is_err(), "{header:?} {body:?}");
        }
    }
}
