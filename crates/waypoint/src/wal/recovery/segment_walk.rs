//! One log segment read and walked on its own (seed 000 §3.7, analysis):
//! the part of analysis that needs only the segment's bytes, so that every
//! segment of every partition can be read, checksummed, decoded and walked
//! record by record on any recovery thread. What depends on the segments
//! before it (where the log ended, whether this segment continues it, the
//! partition's structure-modification numbering) is decided afterwards,
//! in stream order, by `PartitionLog::take_segment`.
//!
//! A walk never fails on what the bytes say: damage is kept in the result
//! (`header`, `walked`) and becomes an error only if the in-order decision
//! finds the segment is part of the durable log. Only a failed read is an
//! error here.

use super::corruption;
use super::partition_log::Logged;
use crate::error::Result;
use crate::ids::{Gsn, LogPos};
use crate::io::{OpenMode, Storage};
use crate::logstore::frame;
use crate::logstore::scan::ScanEnd;
use crate::logstore::segment;
use crate::persist::SchemeKind;
use crate::wal::record::{self, Record, RecordBody};
use std::path::PathBuf;

/// What one segment holds, found without looking at any other segment.
pub(super) struct SegmentWalk {
    pub start: LogPos,
    pub path: PathBuf,
    /// The segment's header, or why it is refused (another scheme's or
    /// format's segment).
    pub header: Result<segment::Header>,
    /// The records' walk, or the damage it found (meaningful only under a
    /// valid header).
    pub walked: Result<Walked>,
    /// Each record whose durable watermark exceeds every one before it, as
    /// (offset, watermark): the first one above a position is the first
    /// record written after that position was durable. Kept apart from
    /// `walked` because it covers every decoded record, damaged walk or not.
    pub rises: Vec<(u64, LogPos)>,
}

/// The records of a segment that continues the log, walked.
pub(super) struct Walked {
    /// Bytes after the header.
    pub len: u64,
    /// Bytes of valid records after the header: the end of the last
    /// record kept.
    pub valid: u64,
    /// The scan stopped at a bad record at this offset (not corruption:
    /// a torn tail, unless the next segment starts right here).
    pub torn_at: Option<u64>,
    /// The records end inside a structure modification, cut off at `valid`.
    pub smo_cut: bool,
    /// Page records above the floor, in stream order, lying in `arena`;
    /// `Logged::arena` not yet set, `smo` numbered from 1 within this
    /// segment.
    pub records: Vec<Logged>,
    /// Structure modifications begun in this segment (before any cut).
    pub smos: u32,
    pub commits: Vec<(u64, Vec<(u32, LogPos)>)>,
    pub ended: Vec<u64>,
    /// The page records' bytes, each placed at position 0
    /// (`frame::place_at`): the segment file as read when they are most of
    /// it (nothing copied), else a copy of just them (`arena_of`).
    pub arena: Box<[u8]>,
    /// The largest GSN of any record kept, those at or below the floor
    /// included.
    pub max_gsn: Gsn,
}

/// Read the segment at `path` (starting at stream position `start`) of
/// partition `id` and walk it.
pub(super) fn walk_segment(
    storage: &dyn Storage,
    (id, scheme, floor): (u32, SchemeKind, Gsn),
    start: LogPos,
    path: PathBuf,
) -> Result<SegmentWalk> {
    let file = storage.open(&path, OpenMode::ReadOnly)?;
    let file_len = file.len()?;
    // Fresh zeroed pages from the allocator (no memset of ours), kept as
    // the arena of the page records.
    let mut whole = vec![0u8; file_len as usize];
    file.read_at(&mut whole, 0)?;
    let header = segment::decode_header(&path, &whole, scheme).and_then(|h| match h {
        segment::Header::Valid { stream, start: s } if stream != id || s != start => Err(corruption(
            &path,
            0,
            format!("segment header names partition {stream} at {s}, the file is partition {id} at {start}"),
        )),
        h => Ok(h),
    });
    // A segment whose header turns out torn or foreign is decoded for
    // nothing, which is harmless: decoding is total on any bytes.
    let body = whole.get(segment::HEADER_SIZE as usize..).unwrap_or(&[]);
    let mut rises = Vec::new();
    let mut walker = Walker::new(&path, floor);
    // Room for records of 128 bytes on average (TPC-C's average 86: the
    // vector grows once, not record by record from empty).
    walker.out.records.reserve(body.len() / 128);
    let (valid, end) = record::scan_segment_each(body, start, |offset, rec| {
        if rises.last().is_none_or(|&(_, w)| rec.header.watermark > w) {
            rises.push((offset, rec.header.watermark));
        }
        walker.record(offset, &rec);
    });
    let len = body.len() as u64;
    let walked = walker.finish(len, valid, &end).map(|mut walked| {
        // Taken out of the stream, so redo and undo decode each record
        // without knowing where it lay.
        for r in &walked.records {
            let offset = (r.at - segment::HEADER_SIZE as usize) as u64;
            frame::place_at(&mut whole[r.at..r.at + r.len as usize], start.advance(offset));
        }
        walked.arena = arena_of(std::mem::take(&mut whole), &mut walked.records);
        walked
    });
    Ok(SegmentWalk {
        start,
        path,
        header,
        walked,
        rises,
    })
}

/// The arena of a segment's kept page `records`, which lie in `whole`, the
/// segment file as read: the file itself when they are most of it, or a
/// copy of just them (each record's `at` moved to its copy) when they are
/// not: a segment mostly below the log floor, the unwritten end of a
/// preallocated segment, a recycled file's old bytes. Analysis holds the
/// arenas until undo is done, so they hold little beyond what redo reads.
fn arena_of(whole: Vec<u8>, records: &mut [Logged]) -> Box<[u8]> {
    let kept: usize = records.iter().map(|r| r.len as usize).sum();
    if kept >= whole.len() / 2 {
        return whole.into_boxed_slice();
    }
    let mut arena = Vec::with_capacity(kept);
    for r in records.iter_mut() {
        let at = arena.len();
        arena.extend_from_slice(&whole[r.at..r.at + r.len as usize]);
        r.at = at;
    }
    arena.into_boxed_slice()
}

/// The per-record walk of a segment, one decoded record at a time: the
/// checks each record must pass, its page record noted where it lies.
struct Walker<'p> {
    path: &'p std::path::Path,
    floor: Gsn,
    out: Walked,
    /// The last record said more of its structure modification follows.
    in_smo: bool,
    /// Where the structure modification under way began, and the walk's
    /// state before it: what a tail cut off inside it goes back to.
    smo_began: Option<(u64, usize, Gsn, u32)>,
    /// The first damage found, by offset; the walk keeps nothing after it.
    failed: Option<(u64, crate::error::Error)>,
}

impl<'p> Walker<'p> {
    fn new(path: &'p std::path::Path, floor: Gsn) -> Self {
        Walker {
            path,
            floor,
            out: Walked {
                len: 0,
                valid: 0,
                torn_at: None,
                smo_cut: false,
                records: Vec::new(),
                smos: 0,
                commits: Vec::new(),
                ended: Vec::new(),
                arena: Box::default(),
                max_gsn: Gsn::ZERO,
            },
            in_smo: false,
            smo_began: None,
            failed: None,
        }
    }

    fn record(&mut self, offset: u64, rec: &Record<'_>) {
        let was_in_smo = self.in_smo;
        self.in_smo = rec.header.smo_more;
        if !was_in_smo && rec.header.smo_more {
            let o = &self.out;
            self.smo_began = Some((offset, o.records.len(), o.max_gsn, o.smos));
        }
        if self.failed.is_none() {
            if let Err(e) = self.keep(offset, rec, was_in_smo) {
                self.failed = Some((offset, e));
            }
        }
    }

    fn keep(&mut self, offset: u64, rec: &Record<'_>, in_smo: bool) -> Result<()> {
        let (h, out, path) = (&rec.header, &mut self.out, self.path);
        let at_file = segment::HEADER_SIZE + offset;
        out.max_gsn = out.max_gsn.max(h.gsn);
        if in_smo && !rec.body.kind().is_structural() {
            return Err(corruption(
                path,
                at_file,
                "a structure modification is interrupted by another record",
            ));
        }
        let smo = if in_smo || h.smo_more {
            if !in_smo {
                out.smos += 1;
            }
            out.smos
        } else {
            0
        };
        if rec.body.kind().has_page() && (h.page == 0 || h.page >= crate::buffer::pool::MAX_PAGES) {
            return Err(corruption(
                path,
                at_file,
                format!("a log record names page {}, outside the data file's range", h.page),
            ));
        }
        if h.gsn >= crate::wal::partition::MAX_GSN {
            // The clock's reservation bit (`Partition::clock`) lies above
            // every GSN a log can reach.
            return Err(corruption(
                path,
                at_file,
                format!("a log record carries GSN {}, beyond the GSN range", h.gsn),
            ));
        }
        if h.gsn <= self.floor {
            return Ok(()); // reflected in the data file by a checkpoint or clean close
        }
        match &rec.body {
            RecordBody::Commit { deps, .. } => out.commits.push((h.txn, deps.to_vec())),
            RecordBody::End => out.ended.push(h.txn),
            _ => {}
        }
        if rec.body.kind().has_page() {
            out.records.push(Logged {
                gsn: h.gsn,
                txn: h.txn,
                page: h.page,
                prev: h.prev_gsn,
                tree: h.tree,
                kind: rec.body.kind(),
                compensation: h.compensation,
                smo,
                arena: 0,
                len: u32::try_from(rec.encoded_len())
                    .map_err(|_| corruption(path, at_file, "a record of 4 GiB or more"))?,
                at: at_file as usize,
            });
        }
        Ok(())
    }

    /// The walk once the scan ended after `valid` of `len` bytes, as `end`
    /// says: a corrupt end, or damage in a record kept, is the error.
    fn finish(mut self, len: u64, valid: u64, end: &ScanEnd) -> Result<Walked> {
        if let Some(err) = end.to_error(self.path, segment::HEADER_SIZE) {
            return Err(err);
        }
        let out = &mut self.out;
        (out.len, out.valid) = (len, valid);
        if let ScanEnd::TornTail { offset, .. } = end {
            out.torn_at = Some(*offset);
        }
        // A structure modification is appended and synced whole, so one
        // without its last record can only be a tail a crash cut short:
        // the segment's records end before it, whatever it holds.
        if self.in_smo {
            let (began, records, max_gsn, smos) =
                self.smo_began.expect("a structure modification under way began");
            if self.failed.as_ref().is_some_and(|(at, _)| *at >= began) {
                self.failed = None;
            }
            if self.failed.is_none() {
                out.records.truncate(records);
                (out.valid, out.max_gsn, out.smos, out.smo_cut) = (began, max_gsn, smos, true);
            }
        }
        match self.failed {
            Some((_, e)) => Err(e),
            None => Ok(self.out),
        }
    }
}
