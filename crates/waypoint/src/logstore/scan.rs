//! Scanning a segment's frames: where the log in a segment ends, and
//! whether that end is a torn tail or corruption (seed 000 §3.1, §3.8;
//! DESIGN.md invariant 6).
//!
//! [`scan`] opens frames from the segment's first byte on and has the
//! scheme decode each payload ([`Payloads`]), until the buffer ends or a
//! frame is bad. A bad frame at the tail of the log is the end of the log
//! ([`ScanEnd::TornTail`]); a bad frame followed anywhere later by a valid
//! one appended after the bad frame's bytes were already durable (its
//! watermark says so) is corruption ([`ScanEnd::Corrupt`]), which the
//! caller reports as [`Error::Corruption`] naming file and offset. So is a
//! frame whose checksum matches but whose payload the scheme cannot read:
//! a torn write cannot produce a matching checksum. The scan is total: on
//! any bytes it returns, never panics and never loops forever.
//!
//! # The tail rule and the watermark
//!
//! A crash may keep any subset of the writes that were not yet synced, so
//! an un-synced write can land while an earlier one does not: a hole
//! followed by checksum-valid records is what a crash leaves, not proof of
//! damage. What proves damage is a later record that was appended only
//! after the bad bytes were durable. Each frame carries the stream's
//! durable position at its append (its watermark), and [`scan`] is told
//! the stream position `base` of the segment's first byte: after a bad
//! frame at segment offset `o`, a later checksum-valid frame makes the
//! segment [`ScanEnd::Corrupt`] only if its watermark is above `base + o`.
//! Then the bytes at `o` had been synced before that record existed, so no
//! crash can have torn them. A later valid frame whose watermark is at or
//! below `base + o` is the product of an un-synced write that landed out of
//! order; the scan ends as [`ScanEnd::TornTail`] at `o` and does not return
//! it (the log ends at the first hole: records after it may depend on the
//! lost ones).
//!
//! # Limits of the tail rule
//!
//! - The rule assumes the durable position only moves to frame boundaries
//!   (the stream writes and syncs whole frames), so a watermark above `o`,
//!   where a frame starts, covers the whole frame at `o`.
//! - Segment files are recycled (a pruned segment becomes a later one), so
//!   a segment's bytes after its last frame may be frames of the file's
//!   previous life, with valid lengths and watermarks of that life. They do
//!   not pass: each checksum is salted with the frame's stream position
//!   ([`super::frame::place_at`]), and a previous life's positions are all
//!   lower. They end the scan as a torn tail would (recovery tells a
//!   segment's own end by where the next segment starts).
//! - A frame embedded verbatim inside another frame's payload (a value that
//!   is itself a log record) passes the framing checks. It proves
//!   corruption only if its watermark also exceeds `base + o`, which a stale
//!   embedded frame cannot know: one copied from this stream's own log was
//!   appended before the bytes at `o` and carries a watermark at most its
//!   own position, below `base + o`. A frame copied from another stream's
//!   log, or crafted, can still pass. The search steps over every valid
//!   frame it finds, so only a frame embedded in the bad bytes themselves is
//!   a candidate.

use super::frame::{self, Frame, FrameError};
use crate::error::Error;
use crate::ids::LogPos;
use std::path::PathBuf;

/// A scheme's reading of the payloads in its frames. Static: the scan is
/// generic over it, and the scheme's decoder is called directly.
pub trait Payloads {
    /// One decoded record, borrowing from the scanned buffer.
    type Record<'a>;
    /// Why a checksum-valid payload is not a record of this scheme.
    type Error: std::fmt::Display;

    /// A cheap look at the first bytes of what would be a payload (maybe
    /// fewer than a record has), before a checksum is computed: `false`
    /// for almost all bytes that are not this scheme's record, and `true`
    /// for every record it writes. The search after a bad frame asks it at
    /// every aligned offset, so a long damaged or zero region costs a few
    /// byte compares per candidate rather than a checksum each.
    fn plausible(head: &[u8]) -> bool;

    /// The record in `frame`; it must fill the payload exactly
    /// ([`Frame::check_end`]).
    fn decode<'a>(frame: Frame<'a>) -> Result<Self::Record<'a>, Self::Error>;
}

/// How a segment scan ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanEnd {
    /// The buffer ended at a frame boundary, or everything after the last
    /// frame is zero (preallocated, never written).
    Clean,
    /// The frame at `offset` is bad and no valid frame appended after it
    /// was durable follows it: the end of the log (a write interrupted by a
    /// crash, possibly with later un-synced writes that did land). Not an
    /// error.
    TornTail { offset: u64, error: FrameError },
    /// The frame at `offset` is bad and a valid frame follows it whose
    /// watermark shows the bad bytes were durable before it was appended,
    /// or it passed its checksum yet is not a record the scheme can read:
    /// the log is damaged. Report it with [`ScanEnd::to_error`].
    Corrupt { offset: u64, detail: String },
}

impl ScanEnd {
    /// The engine error for a corrupt segment: [`Error::Corruption`] naming
    /// `path` and the file offset `base + offset`, where `base` is the file
    /// offset of the scanned buffer's first byte. `None` for the other ends.
    pub fn to_error(&self, path: impl Into<PathBuf>, base: u64) -> Option<Error> {
        match self {
            ScanEnd::Corrupt { offset, detail } => Some(Error::Corruption {
                path: path.into(),
                offset: base + offset,
                detail: detail.clone(),
            }),
            ScanEnd::Clean | ScanEnd::TornTail { .. } => None,
        }
    }
}

/// The result of scanning a segment's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan<R> {
    /// The valid records before the end, with their offsets in the buffer
    /// (segment-relative, not stream positions).
    pub records: Vec<(u64, R)>,
    /// Bytes of valid log: where the first invalid byte (or the end) is,
    /// and so where appending would resume after a torn tail.
    pub valid_len: u64,
    pub end: ScanEnd,
}

/// Scan a whole segment: open frames from offset 0 until the end of the
/// buffer or the first bad frame, and classify the end by the tail rule
/// (see the module documentation).
///
/// `base` is the stream position of `buf[0]`: each frame is opened at its
/// own position, and watermarks are compared with it. Offsets in the result
/// are relative to `buf`, whose first byte must be where the first frame
/// starts (frames are aligned relative to it).
pub fn scan<P: Payloads>(buf: &[u8], base: LogPos) -> Scan<P::Record<'_>> {
    let mut records = Vec::new();
    let (valid_len, end) = scan_each::<P>(buf, base, |pos, record| records.push((pos, record)));
    Scan {
        records,
        valid_len,
        end,
    }
}

/// [`scan`] without collecting: `each(offset, record)` for every valid
/// record in order, then the bytes of valid log and how the scan ended. A
/// reader that walks the records once (recovery's analysis) keeps no
/// vector of every decoded record of a segment.
pub fn scan_each<'a, P: Payloads>(
    buf: &'a [u8],
    base: LogPos,
    mut each: impl FnMut(u64, P::Record<'a>),
) -> (u64, ScanEnd) {
    let base = base.get();
    let mut pos = 0usize;
    let end = loop {
        if pos == buf.len() {
            break ScanEnd::Clean;
        }
        match frame::open(&buf[pos..], LogPos::new(base.wrapping_add(pos as u64))) {
            Ok(frame) => {
                let len = frame.encoded_len();
                match P::decode(frame) {
                    Ok(record) => each(pos as u64, record),
                    Err(e) => break unreadable(pos, &e),
                }
                // In bounds: `open` checked the length against the buffer.
                pos += len;
            }
            Err(e) if e.checksum_matched() => break unreadable(pos, &e),
            Err(e) => break classify::<P>(buf, base, pos, e),
        }
    };
    (pos as u64, end)
}

/// A frame at `pos` that passed its checksum but does not read: it was
/// written as it is, so the log is damaged (or from another format).
fn unreadable(pos: usize, error: &dyn std::fmt::Display) -> ScanEnd {
    ScanEnd::Corrupt {
        offset: pos as u64,
        detail: format!("{error} (its checksum matches)"),
    }
}

/// The tail rule for a bad frame at `pos` (one that failed its checksum or
/// is cut off), with `buf[0]` at stream position `base`.
fn classify<P: Payloads>(buf: &[u8], base: u64, pos: usize, error: FrameError) -> ScanEnd {
    let offset = pos as u64;
    let bad_at = base.saturating_add(offset);
    if let Some((next, watermark)) = later_durable_proof::<P>(buf, base, pos, bad_at) {
        return ScanEnd::Corrupt {
            offset,
            detail: format!(
                "{error}, yet a valid record follows at offset {next} \
                 (appended when the log was durable up to position {watermark}, \
                 past this record at position {bad_at})"
            ),
        };
    }
    if error == FrameError::Zero && buf[pos..].iter().all(|&b| b == 0) {
        ScanEnd::Clean
    } else {
        ScanEnd::TornTail { offset, error }
    }
}

/// The first frame after the bad one at `pos` that proves it damaged: an
/// aligned offset holding bytes that pass a frame's checks (length and
/// checksum) with a watermark above `bad_at`, the bad frame's stream
/// position. Returns its offset and watermark.
///
/// The bad frame's length field is not used: it may be the damaged part.
/// A valid frame with a lower watermark (an un-synced write that landed out
/// of order) is stepped over whole, so frames embedded in its payload are
/// not mistaken for frames.
fn later_durable_proof<P: Payloads>(
    buf: &[u8],
    base: u64,
    pos: usize,
    bad_at: u64,
) -> Option<(usize, u64)> {
    let mut at = pos + frame::ALIGN;
    while at + frame::MIN_LEN <= buf.len() {
        let h = &buf[at..];
        if frame::payload_head(h).is_some_and(P::plausible) {
            if let Ok(f) = frame::open(h, LogPos::new(base.wrapping_add(at as u64))) {
                if f.watermark.get() > bad_at {
                    return Some((at, f.watermark.get()));
                }
                // A valid frame: its length is what was written, a nonzero
                // multiple of the alignment.
                at += f.encoded_len();
                continue;
            }
        }
        at += frame::ALIGN;
    }
    None
}

#[cfg(test)]
mod tests;
