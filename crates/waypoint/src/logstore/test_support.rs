//! Records for logstore's own tests, which know no scheme: a frame whose
//! payload is a marker byte, a number and some filler bytes.

use super::frame::{self, Frame};
use super::scan::Payloads;
use crate::ids::LogPos;

/// First payload byte of a test record.
pub const MARK: u8 = 0xa5;

/// A sealed frame (not placed in a stream) around `payload`, appended while
/// the stream was durable up to `watermark`.
pub fn frame(watermark: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let start = frame::begin(&mut out, LogPos::new(watermark));
    out.extend_from_slice(payload);
    frame::seal(&mut out, start);
    out
}

/// The payload of test record `n` with `fill` filler bytes.
pub fn numbered(n: u64, fill: usize) -> Vec<u8> {
    let mut p = vec![MARK];
    frame::put_vint(&mut p, n);
    frame::put_vint(&mut p, fill as u64);
    p.resize(p.len() + fill, n as u8 | 1);
    p
}

/// Frames of `payloads` back to back, as a segment starting at stream
/// position `base`, the frame at offset `o` with watermark
/// `watermark(index, o)`; returns the bytes and each frame's offset.
pub fn segment_with(
    payloads: &[Vec<u8>],
    base: u64,
    watermark: impl Fn(usize, usize) -> u64,
) -> (Vec<u8>, Vec<usize>) {
    let mut buf = Vec::new();
    let mut offsets = Vec::new();
    for (i, p) in payloads.iter().enumerate() {
        let offset = buf.len();
        offsets.push(offset);
        buf.extend_from_slice(&frame(watermark(i, offset), p));
    }
    frame::place_at(&mut buf, LogPos::new(base));
    (buf, offsets)
}

/// [`segment_with`], each frame appended once everything before it was
/// durable (watermark = its own position).
pub fn frames(payloads: &[Vec<u8>], base: u64) -> (Vec<u8>, Vec<usize>) {
    segment_with(payloads, base, |_, offset| base + offset as u64)
}

/// A decoded test record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Numbered<'a> {
    pub n: u64,
    pub fill: &'a [u8],
    pub watermark: u64,
}

/// The test records' decoder.
pub struct TestRecords;

impl Payloads for TestRecords {
    type Record<'a> = Numbered<'a>;
    type Error = &'static str;

    fn plausible(head: &[u8]) -> bool {
        head.first() == Some(&MARK)
    }

    fn decode<'a>(frame: Frame<'a>) -> Result<Numbered<'a>, &'static str> {
        let Some((&MARK, mut rest)) = frame.payload.split_first() else {
            return Err("not a test record");
        };
        let n = frame::read_vint(&mut rest)?;
        let fill_len =
            usize::try_from(frame::read_vint(&mut rest)?).map_err(|_| "fill too long")?;
        let fill = rest.get(..fill_len).ok_or("fill longer than the record")?;
        frame.check_end(frame.payload.len() - rest.len() + fill_len)?;
        Ok(Numbered {
            n,
            fill,
            watermark: frame.watermark.get(),
        })
    }
}
