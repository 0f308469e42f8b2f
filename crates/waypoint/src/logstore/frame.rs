//! The frame around every record of a log stream: length, checksum and the
//! stream's durable watermark, around a payload the scheme owns
//! (docs/FORMAT.md, "Log records"; seed 000 §3.1, §3.8).
//!
//! ```text
//! [CRC32C: 4][len: 4][watermark: vint64][payload ...][zero padding to 8]
//! ```
//!
//! A scheme writes a record as [`begin`], its payload, [`seal`]; the stream
//! places it at its stream position when it is appended ([`place_at`]);
//! a reader [`open`]s it there and decodes the payload. The scan of a
//! segment ([`super::scan`]) needs nothing but the frame to tell where the
//! log ends, so every scheme's records end the same way.
//!
//! Invariants: the checksum covers every byte of the frame after it and is
//! salted with the frame's stream position, so a frame reads as valid only
//! at the position it was appended at; a frame's length, and so its start
//! within a segment, is a multiple of [`ALIGN`]. [`open`] is total: it
//! reads nothing beyond what the length field claims, and checks that claim
//! against the buffer first.
//!
//! # Why 8-byte alignment
//!
//! Deciding whether a bad frame is followed by valid ones must not trust
//! the bad frame's own length field (the field may be the damaged part), so
//! the scan looks for a valid frame at every aligned offset after it;
//! alignment makes that search step 8 bytes instead of 1.
//!
//! # Why the watermark is the frame's
//!
//! It is the stream's durable position when the record was appended: every
//! byte below it was durable by then. The scan compares it with the
//! position of a bad frame to tell a crash-torn write from corruption, in
//! any scheme's records; a scheme may also use it (the per-worker WAL
//! stores transaction starts as differences to it).
//!
//! # Integers
//!
//! The watermark, and the integers of the schemes' payloads, are vint64s:
//! 1 to 9 bytes, the shortest form only, so a record has one encoding.
//! [`put_vint`] and [`read_vint`] are the one implementation of them.

use crate::ids::LogPos;

/// Bytes before the watermark: checksum and length.
pub const PREFIX: usize = 8;
/// Every frame's length, and so its start within a segment, is a multiple
/// of this.
pub const ALIGN: usize = 8;
/// Shortest frame: prefix, a one-byte watermark and a few payload bytes,
/// padded.
pub const MIN_LEN: usize = 16;
/// Longest frame a reader accepts (and a writer may produce).
pub const MAX_LEN: usize = 16 << 20;

/// Why the bytes at some position are not a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Fewer bytes than the minimum or the length field claims.
    #[error("record truncated")]
    Truncated,
    /// The first bytes are all zero: space that was never written.
    #[error("zero bytes (never written)")]
    Zero,
    #[error("record checksum mismatch")]
    BadChecksum,
    /// The length field is below [`MIN_LEN`], above [`MAX_LEN`] or not a
    /// multiple of [`ALIGN`].
    #[error("invalid record length")]
    BadLength,
    /// The checksum matched but the watermark does not read.
    #[error("malformed record: {0}")]
    Malformed(&'static str),
}

impl FrameError {
    /// Whether the bytes passed the checksum: then they were written as a
    /// frame, and cannot be the torn remains of an interrupted write.
    pub fn checksum_matched(&self) -> bool {
        matches!(self, FrameError::Malformed(_))
    }
}

/// A frame read back at its position: checksum and length checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The stream's durable position when the record was appended.
    pub watermark: LogPos,
    /// The scheme's bytes: its payload, then the zero padding.
    pub payload: &'a [u8],
    len: usize,
}

impl Frame<'_> {
    /// Bytes the frame occupies in the stream.
    pub fn encoded_len(&self) -> usize {
        self.len
    }

    /// Check that a payload of `used` bytes fills the frame exactly: the
    /// frame ends at the payload's end rounded up to [`ALIGN`], and the
    /// padding is zero. So a record has one encoding, and its encoded
    /// length is the frame's.
    pub fn check_end(&self, used: usize) -> Result<(), &'static str> {
        let padding = self
            .payload
            .get(used..)
            .ok_or("payload longer than the record")?;
        if padding.len() >= ALIGN {
            return Err("record longer than its payload");
        }
        if padding.iter().any(|&b| b != 0) {
            return Err("padding is not zero");
        }
        Ok(())
    }
}

/// Begin a frame at the end of `out` for a record appended while the
/// stream was durable up to `watermark`; the scheme then appends its
/// payload and calls [`seal`] with the returned start.
#[inline]
pub fn begin(out: &mut Vec<u8>, watermark: LogPos) -> usize {
    let start = out.len();
    // Checksum and length, filled in by `seal`.
    out.extend_from_slice(&[0; PREFIX]);
    put_vint(out, watermark.get());
    start
}

/// Finish the frame begun at `start` (it runs to the end of `out`): pad it
/// to [`ALIGN`], then write its length and checksum. The frame is not yet
/// placed in a stream: its checksum is the plain CRC32C, as at position 0.
///
/// # Panics
/// If the frame is longer than [`MAX_LEN`]: a scheme bounds its records
/// long before, so that is a bug.
#[inline]
pub fn seal(out: &mut Vec<u8>, start: usize) {
    let len = align_up(out.len() - start);
    assert!(len <= MAX_LEN, "log record of {len} bytes is too long");
    debug_assert!(len >= MIN_LEN, "every payload has a few bytes");
    out.resize(start + len, 0);
    out[start + 4..start + 8].copy_from_slice(&(len as u32).to_le_bytes());
    let crc = crc32c::crc32c(&out[start + 4..start + len]);
    out[start..start + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Bytes of a frame holding a payload of `payload` bytes appended at
/// `watermark` (what [`begin`] and [`seal`] make of it).
#[inline]
pub fn framed_len(watermark: LogPos, payload: usize) -> usize {
    align_up(PREFIX + vint_len(watermark.get()) + payload)
}

/// The bytes before a frame's payload: prefix and watermark.
#[inline]
pub fn head_len(watermark: LogPos) -> usize {
    PREFIX + vint_len(watermark.get())
}

fn align_up(n: usize) -> usize {
    n.next_multiple_of(ALIGN)
}

/// What the checksum of a frame at stream position `position` is XORed
/// with (0 at position 0): Fibonacci hashing, the high half of
/// `position * K`. Two positions less than 4 GiB apart never share a salt
/// (`positions_less_than_4_gib_apart_never_share_a_salt`), so a frame read
/// at another position than the one it was appended at fails its checksum
/// like a torn one; farther apart they share one about once in 2^32.
fn position_salt(position: u64) -> u32 {
    (position.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32
}

/// Place the sealed frames in `frames` (whole frames, back to back) at
/// stream position `position`: XOR each one's checksum with the salt of its
/// own position. Applied again at the same position it takes them back
/// out, so a reader that does not know the position opens them at 0. Why:
/// recycled segment files still hold records of their previous life, which
/// must not read as records of this one (docs/FORMAT.md, "Log records").
///
/// # Panics
/// If `frames` does not hold whole frames.
pub fn place_at(frames: &mut [u8], position: LogPos) {
    let position = position.get();
    let mut at = 0;
    while at < frames.len() {
        let len = frames.get(at + 4..at + 8).map_or(0, |b| le_u32(b) as usize);
        assert!(
            len >= MIN_LEN && at + len <= frames.len(),
            "place_at: not whole records"
        );
        let crc = le_u32(&frames[at..]) ^ position_salt(position.wrapping_add(at as u64));
        frames[at..at + 4].copy_from_slice(&crc.to_le_bytes());
        at += len;
    }
}

/// Open the frame at the start of `buf`, placed at stream position
/// `position` (bytes after it are ignored). Errors are checked in this
/// order: `Zero`, `Truncated`/`BadLength`, `BadChecksum`, then, on
/// checksum-valid bytes, `Malformed`.
pub fn open(buf: &[u8], position: LogPos) -> Result<Frame<'_>, FrameError> {
    let rec = whole(buf)?;
    if le_u32(&rec[..4]) != crc32c::crc32c(&rec[4..]) ^ position_salt(position.get()) {
        return Err(FrameError::BadChecksum);
    }
    fields(rec)
}

/// Open again a frame that [`open`] accepted and that has stayed in this
/// process's memory since (recovery keeps the records analysis read for
/// redo and undo): the same checks but the checksum, which guards the
/// bytes on their way from the disk and was checked then.
pub fn reopen(buf: &[u8]) -> Result<Frame<'_>, FrameError> {
    fields(whole(buf)?)
}

/// The whole frame at the start of `buf`, by its length field.
fn whole(buf: &[u8]) -> Result<&[u8], FrameError> {
    let head = &buf[..buf.len().min(MIN_LEN)];
    if !head.is_empty() && head.iter().all(|&b| b == 0) {
        return Err(FrameError::Zero);
    }
    if buf.len() < MIN_LEN {
        return Err(FrameError::Truncated);
    }
    let len = le_u32(&buf[4..8]) as usize;
    if !(MIN_LEN..=MAX_LEN).contains(&len) || align_up(len) != len {
        return Err(FrameError::BadLength);
    }
    buf.get(..len).ok_or(FrameError::Truncated)
}

/// A whole frame's watermark and payload.
fn fields(rec: &[u8]) -> Result<Frame<'_>, FrameError> {
    let mut rest = &rec[PREFIX..];
    let watermark = read_vint(&mut rest).map_err(FrameError::Malformed)?;
    Ok(Frame {
        watermark: LogPos::new(watermark),
        payload: rest,
        len: rec.len(),
    })
}

/// The first payload bytes of what would be a frame at the start of `buf`,
/// found without checking it: the scan's cheap look before a checksum.
pub(super) fn payload_head(buf: &[u8]) -> Option<&[u8]> {
    let first = *buf.get(PREFIX)?;
    buf.get(PREFIX + vint64::decoded_len(first)..)
}

/// Append `v` as a vint64: the `vint64` crate's encoding (which decodes
/// it), written without its per-call array and variable-length copy: one
/// 8-byte store, then the length cut back. A WAL record has about 13
/// integers: with the crate's `encode`, encoding one cost 1,500
/// instructions, this way 850 (log format 4's fixed header: 530).
#[inline]
pub fn put_vint(out: &mut Vec<u8>, v: u64) {
    let len = vint_len(v);
    if len == vint64::MAX_BYTES {
        out.push(0);
        out.extend_from_slice(&v.to_le_bytes());
    } else {
        // The value above `len - 1` zero bits and a one bit; it fits
        // `len` bytes, so the bytes after them are zero and cut off.
        let marked = ((v << 1) | 1) << (len - 1);
        out.extend_from_slice(&marked.to_le_bytes());
        out.truncate(out.len() - 8 + len);
    }
}

/// Bytes of `v` as a vint64: 7 bits per byte up to 8 bytes (56 bits), 9
/// bytes above.
#[inline]
pub fn vint_len(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    if bits > 56 {
        vint64::MAX_BYTES
    } else {
        bits.div_ceil(7)
    }
}

/// Read a vint64 in its shortest form from the front of `bytes` (a longer
/// form of the same number would give the record a second encoding).
#[inline]
pub fn read_vint(bytes: &mut &[u8]) -> Result<u64, &'static str> {
    // Where 8 bytes follow, one unaligned load decodes the integer: the
    // crate copies its bytes into a scratch word first, a `memcpy` call
    // per integer, several per record (9% of recovery analysis' time).
    // The same format and the same shortest-form rule as the crate's, to
    // which everything else falls back (proptest
    // `read_vint_decodes_as_the_vint64_crate_does`).
    if let Some(&head) = bytes.first_chunk::<8>() {
        let length = head[0].trailing_zeros() as usize + 1;
        if length <= 8 {
            let word = u64::from_le_bytes(head);
            let encoded = if length == 8 { word } else { word & ((1u64 << (8 * length)) - 1) };
            let value = encoded >> length;
            if length > 1 && value < 1u64 << (7 * (length - 1)) {
                return Err("integer not in its shortest form");
            }
            *bytes = &bytes[length..];
            return Ok(value);
        }
    }
    vint64::decode(bytes).map_err(|e| match e {
        vint64::Error::LeadingZeroes => "integer not in its shortest form",
        _ => "payload longer than the record",
    })
}

fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logstore::test_support::{frame, frames};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// `read_vint` reads any bytes as the `vint64` crate does: the
        /// same integer, the same bytes left, an error where it errs;
        /// encodings of every width followed by arbitrary bytes, and
        /// arbitrary bytes.
        #[test]
        fn read_vint_decodes_as_the_vint64_crate_does(
            v in any::<u64>(),
            shift in 0u32..64,
            tail in proptest::collection::vec(any::<u8>(), 0..12),
            raw in proptest::collection::vec(any::<u8>(), 0..12),
        ) {
            let mut inputs = vec![raw];
            for v in [v >> shift, (1u64 << shift).wrapping_sub(1), 1u64 << shift] {
                let mut b = vint64::encode(v).as_ref().to_vec();
                b.extend_from_slice(&tail);
                inputs.push(b);
            }
            // The same value in every width, shortest or not (a longer
            // form is an error).
            for length in 1..=9usize {
                let mut b = if length == 9 {
                    let mut b = vec![0u8];
                    b.extend_from_slice(&(v >> shift).to_le_bytes());
                    b
                } else {
                    let value = (v >> shift) & ((1u64 << (7 * length)) - 1);
                    ((value << 1 | 1) << (length - 1)).to_le_bytes()[..length].to_vec()
                };
                b.extend_from_slice(&tail);
                inputs.push(b);
            }
            for input in inputs {
                let (mut mine, mut theirs) = (&input[..], &input[..]);
                let got = read_vint(&mut mine);
                let want = vint64::decode(&mut theirs).map_err(|_| ());
                prop_assert_eq!(got.map_err(|_| ()), want, "{:?}", input);
                if want.is_ok() {
                    prop_assert_eq!(mine, theirs);
                }
            }
        }

        /// The encoder's integers are the `vint64` crate's, which decodes
        /// them: at every bit width, and around every length boundary.
        #[test]
        fn integers_are_encoded_as_the_vint64_crate_does(v in any::<u64>(), shift in 0u32..64) {
            for v in [v, v >> shift, (1u64 << shift).wrapping_sub(1), 1u64 << shift] {
                let mut out = vec![0xaa];
                put_vint(&mut out, v);
                let expected = vint64::encode(v);
                prop_assert_eq!(&out[1..], expected.as_ref());
                prop_assert_eq!(vint_len(v), vint64::encoded_len(v));
                let mut rest = &out[1..];
                prop_assert_eq!(read_vint(&mut rest), Ok(v));
                prop_assert!(rest.is_empty());
            }
        }

        #[test]
        fn a_frame_round_trips_at_its_position(
            watermark in any::<u64>(),
            payload in prop::collection::vec(1u8.., 1..100),
            position in any::<u64>(),
            junk in prop::collection::vec(any::<u8>(), 0..20),
        ) {
            let mut out = junk.clone();
            let start = begin(&mut out, LogPos::new(watermark));
            out.extend_from_slice(&payload);
            seal(&mut out, start);
            prop_assert_eq!(&out[..junk.len()], &junk[..]);
            let f = &mut out[junk.len()..];
            prop_assert_eq!(f.len(), framed_len(LogPos::new(watermark), payload.len()));
            prop_assert_eq!(f.len() % ALIGN, 0);
            place_at(f, LogPos::new(position));
            let opened = open(f, LogPos::new(position)).unwrap();
            prop_assert_eq!(opened.watermark, LogPos::new(watermark));
            prop_assert_eq!(opened.encoded_len(), f.len());
            prop_assert_eq!(&opened.payload[..payload.len()], &payload[..]);
            prop_assert_eq!(opened.check_end(payload.len()), Ok(()));
            prop_assert_eq!(payload_head(f), Some(opened.payload));
            // Opened again without its position (the checksum not
            // computed), the frame reads the same.
            let again = reopen(f).unwrap();
            prop_assert_eq!(
                (again.watermark, again.encoded_len(), again.payload),
                (opened.watermark, opened.encoded_len(), opened.payload)
            );
        }

        #[test]
        fn open_is_total_on_random_bytes(buf in prop::collection::vec(any::<u8>(), 0..600), at in any::<u64>()) {
            if let Ok(f) = open(&buf, LogPos::new(at)) {
                prop_assert!(f.encoded_len() <= buf.len());
            }
            if let Ok(f) = reopen(&buf) {
                prop_assert!(f.encoded_len() <= buf.len());
            }
            let _ = payload_head(&buf);
        }
    }

    #[test]
    fn open_errors_name_the_problem() {
        // Prefix 0..8, watermark 4096 in 8..10, payload 10..13, padding to 16.
        let rec = frame(4096, b"abc");
        assert_eq!(rec.len(), 16);
        let f = open(&rec, LogPos::ZERO).unwrap();
        assert_eq!((f.watermark, &f.payload[..3]), (LogPos::new(4096), &b"abc"[..]));
        assert_eq!(head_len(LogPos::new(4096)), 10);
        let edited = |f: &dyn Fn(&mut Vec<u8>), seal: bool| {
            let mut r = rec.clone();
            f(&mut r);
            if seal {
                let crc = crc32c::crc32c(&r[4..]);
                r[..4].copy_from_slice(&crc.to_le_bytes());
            }
            open(&r, LogPos::ZERO).err()
        };
        use FrameError::*;
        assert_eq!(open(&[], LogPos::ZERO).err(), Some(Truncated));
        assert_eq!(open(&rec[..15], LogPos::ZERO).err(), Some(Truncated));
        assert_eq!(open(&[0; 20], LogPos::ZERO).err(), Some(Zero));
        assert_eq!(open(&[0; 100], LogPos::ZERO).err(), Some(Zero));
        let set_len = |n: u32| move |r: &mut Vec<u8>| r[4..8].copy_from_slice(&n.to_le_bytes());
        assert_eq!(edited(&set_len(8), false), Some(BadLength));
        assert_eq!(edited(&set_len(20), false), Some(BadLength));
        assert_eq!(edited(&set_len(16 << 20 | 8), false), Some(BadLength));
        assert_eq!(edited(&set_len(16 << 20), false), Some(Truncated));
        assert_eq!(edited(&set_len(24), false), Some(Truncated));
        assert_eq!(edited(&|r| r[12] ^= 1, false), Some(BadChecksum));
        // A watermark in a longer form than it needs: 4096 in three bytes.
        let long = |r: &mut Vec<u8>| {
            let three = (4096u32 << 3) | 0b100;
            r[8..11].copy_from_slice(&three.to_le_bytes()[..3]);
        };
        assert_eq!(
            edited(&long, true),
            Some(Malformed("integer not in its shortest form"))
        );
        assert!(Malformed("x").checksum_matched() && !BadChecksum.checksum_matched());
        // The padding must be zero and shorter than ALIGN.
        assert_eq!(f.check_end(3), Ok(()));
        assert_eq!(f.check_end(2), Err("padding is not zero"));
        assert_eq!(f.check_end(7), Err("payload longer than the record"));
        let big = frame(4096, &[1; 11]);
        assert_eq!(
            open(&big, LogPos::ZERO).unwrap().check_end(3),
            Err("record longer than its payload")
        );
    }

    /// salt(p + d) - salt(p) is h(d) or h(d) + 1 (mod 2^32), h(d) being the
    /// high half of d * K: two positions share a salt only if h(d) is 0 or
    /// 2^32 - 1. For every 8-aligned distance below 4 GiB it is neither, so
    /// a recycled file's old records never pass at any position that close
    /// to theirs (checked here exhaustively, 2^29 distances).
    #[test]
    fn positions_less_than_4_gib_apart_never_share_a_salt() {
        let h = |d: u64| (d.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32;
        let bad = (8..1u64 << 32)
            .step_by(8)
            .find(|&d| h(d) == 0 || h(d) == u32::MAX);
        assert_eq!(bad, None);
        for (p, d) in [
            (0, 8),
            (4096, 16 << 20),
            (1 << 40, 1 << 30),
            (u64::MAX - 7, 8),
        ] {
            assert_ne!(position_salt(p), position_salt(p.wrapping_add(d)));
        }
    }

    #[test]
    fn placing_salts_each_checksum_by_position_and_placing_again_takes_it_out() {
        let payloads: Vec<Vec<u8>> = [5, 3000, 10, 0, 40]
            .iter()
            .map(|&n| vec![0x5a; n + 1])
            .collect();
        let (at0, offsets) = frames(&payloads, 0);
        let ends: Vec<usize> = offsets.iter().skip(1).copied().chain([at0.len()]).collect();
        // Taken out of the stream: each frame as `seal` left it.
        let mut raw = at0.clone();
        place_at(&mut raw, LogPos::ZERO);
        assert_eq!(raw[..ends[0]], at0[..ends[0]], "position 0 has no salt");
        let mut buf = raw.clone();
        place_at(&mut buf, LogPos::new(4096));
        for (&o, &end) in offsets.iter().zip(&ends) {
            assert!(open(&raw[o..], LogPos::ZERO).is_ok());
            assert_ne!(buf[o..o + 4], raw[o..o + 4], "checksum at {o} salted");
            assert_eq!(buf[o + 4..end], raw[o + 4..end], "nothing else changes");
            assert!(open(&buf[o..], LogPos::new(4096 + o as u64)).is_ok());
            assert_eq!(open(&buf[o..], LogPos::ZERO).err(), Some(FrameError::BadChecksum));
            assert_eq!(
                open(&buf[o..], LogPos::new(o as u64)).err(),
                Some(FrameError::BadChecksum)
            );
        }
        place_at(&mut buf, LogPos::new(4096));
        assert_eq!(buf, raw);
    }
}
