//! Encoding and decoding the per-worker WAL's records: a
//! [`RecordHeader`] and a [`RecordBody`] into a framed record and back,
//! and [`Records`], the WAL's decoder for the segment scan (seed 000 §3.8's
//! record checksums and log compression).
//!
//! Invariants: every record [`encode`] writes, [`decode`] reads back
//! exactly ([`encoded_len`] counting the same fields, so the two cannot
//! disagree); a record has one encoding (shortest integers, payload filling
//! the frame); decoding is total and checks every length against the bytes
//! it claims before relying on it.

use super::{Deps, DepsRepr, Record, RecordBody, RecordHeader, RecordKind, Span, UpdateDiff};
use super::{PageImage, MAX_IMAGE_BODY, MAX_SPANS};
use crate::ids::{Gsn, LogPos, Tid};
use crate::logstore::frame::{self, Frame, FrameError};
use crate::logstore::scan::{self, Payloads, Scan};

/// Bytes of a payload's fixed part: kind, flags, page kind and a reserved
/// byte. The header's variable fields follow.
const FIXED_SIZE: usize = 4;
/// A transaction id is its session's slot above this many bits of stream
/// position (`WalSessionLog::on_begin`); the header stores the two apart.
const TXN_POSITION_BITS: u32 = 48;
const TXN_POSITION_MASK: u64 = (1 << TXN_POSITION_BITS) - 1;

const FLAG_COMPENSATION: u8 = 1;
const FLAG_SMO_MORE: u8 = 2;
const KNOWN_FLAGS: u8 = FLAG_COMPENSATION | FLAG_SMO_MORE;

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
    out.int(h.gsn.get());
    out.int(h.txn >> TXN_POSITION_BITS);
    let start = (h.txn & TXN_POSITION_MASK) as i64;
    out.int(zigzag(start - (h.watermark.get() & TXN_POSITION_MASK) as i64));
    if has_page {
        out.int(u64::from(h.tree));
        out.int(h.page);
        out.int(zigzag(h.gsn.get().wrapping_sub(h.prev_gsn.get()) as i64));
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
            out.int(tid.get());
            out.int(len(deps.len()));
            for (partition, position) in deps.iter() {
                out.int(u64::from(partition));
                out.int(position.get());
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

/// A record's encoded length as a function of the GSN it will be given:
/// every field but the GSN and the difference of the prev GSN to it is
/// known before. A central log's consolidation array (`crate::central`)
/// reserves a group's space before its members know their GSNs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeAtGsn {
    /// Payload bytes but the two GSN fields.
    rest: usize,
    /// The prev GSN, for a record with a page (whose header stores it as a
    /// difference to the GSN).
    prev_gsn: Option<Gsn>,
    watermark: LogPos,
}

impl SizeAtGsn {
    /// The length of `header` and `body` encoded with any GSN
    /// (`header.gsn` is ignored).
    pub fn of(header: &RecordHeader, body: &RecordBody) -> Self {
        let has_page = body.kind().has_page();
        let probe = RecordHeader {
            gsn: Gsn::ZERO,
            ..*header
        };
        let mut count = Count(FIXED_SIZE);
        header_fields(&probe, has_page, &mut count);
        payload_fields(body, &mut count);
        let prev_gsn = has_page.then_some(header.prev_gsn);
        let probe_gsn_bytes = Self::gsn_bytes(Gsn::ZERO, prev_gsn);
        SizeAtGsn {
            rest: count.0 - probe_gsn_bytes,
            prev_gsn,
            watermark: header.watermark,
        }
    }

    /// Bytes [`encode`] appends for the record with GSN `gsn`.
    #[inline]
    pub fn at(&self, gsn: Gsn) -> usize {
        frame::framed_len(self.watermark, self.rest + Self::gsn_bytes(gsn, self.prev_gsn))
    }

    /// Bytes of the two fields that depend on the GSN (`header_fields`).
    fn gsn_bytes(gsn: Gsn, prev_gsn: Option<Gsn>) -> usize {
        frame::vint_len(gsn.get())
            + prev_gsn.map_or(0, |prev| {
                frame::vint_len(zigzag(gsn.get().wrapping_sub(prev.get()) as i64))
            })
    }
}

fn len_u16(n: usize, what: &str) -> u16 {
    u16::try_from(n).unwrap_or_else(|_| panic!("{what} of {n} bytes does not fit a log record"))
}

pub(super) fn len_u32(n: usize, what: &str) -> u32 {
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
        kind.has_page() || (header.tree == 0 && header.page == 0 && header.prev_gsn == Gsn::ZERO),
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
    decode_at(buf, LogPos::ZERO)
}

/// Decode the record at the start of `buf`, placed at stream position
/// `position` (bytes after it are ignored). Errors are checked in this
/// order: the frame's (`Zero`, `Truncated`/`BadLength`, `BadChecksum`),
/// then, on checksum-valid bytes, `BadKind`, `Malformed`.
pub fn decode_at(buf: &[u8], position: LogPos) -> Result<Record<'_>, DecodeError> {
    let frame = frame::open(buf, position).map_err(DecodeError::Frame)?;
    decode_payload(frame)
}

/// Decode again a record that [`decode`] accepted and that has stayed in
/// memory since ([`frame::reopen`]: its checksum is not computed again).
pub fn decode_again(buf: &[u8]) -> Result<Record<'_>, DecodeError> {
    decode_payload(frame::reopen(buf).map_err(DecodeError::Frame)?)
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
pub fn scan_segment(buf: &[u8], base: LogPos) -> SegmentScan<'_> {
    scan::scan::<Records>(buf, base)
}

/// [`scan_segment`] record by record ([`scan::scan_each`]): `each(offset,
/// record)` in order, then the bytes of valid log and how the scan ended.
pub fn scan_segment_each<'a>(
    buf: &'a [u8],
    base: LogPos,
    each: impl FnMut(u64, Record<'a>),
) -> (u64, scan::ScanEnd) {
    scan::scan_each::<Records>(buf, base, each)
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
            let tid = Tid::new(r.int()?);
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
    watermark: LogPos,
) -> Result<RecordHeader, DecodeError> {
    let gsn = r.int()?;
    let slot = r.int_to(u64::MAX >> TXN_POSITION_BITS, "transaction slot above 2^16")?;
    let start = ((watermark.get() & TXN_POSITION_MASK) as i64)
        .checked_add(unzigzag(r.int()?))
        .filter(|s| (0..=TXN_POSITION_MASK as i64).contains(s))
        .ok_or(DecodeError::Malformed(
            "transaction start outside the stream position range",
        ))?;
    let (tree, page, prev_gsn) = if kind.has_page() {
        let tree = r.int_to(u32::MAX.into(), "tree root above 2^32")? as u32;
        let page = r.int()?;
        let prev_gsn = gsn.wrapping_sub(unzigzag(r.int()?) as u64);
        (tree, page, Gsn::new(prev_gsn))
    } else {
        (0, 0, Gsn::ZERO)
    };
    Ok(RecordHeader {
        page_kind,
        tree,
        gsn: Gsn::new(gsn),
        txn: (slot << TXN_POSITION_BITS) | start as u64,
        page,
        prev_gsn,
        compensation: flags & FLAG_COMPENSATION != 0,
        smo_more: flags & FLAG_SMO_MORE != 0,
        watermark,
    })
}

#[cfg(test)]
mod tests;
