//! One partition's analysis (seed 000 §3.7): read its segments in stream
//! order, find where the durable log ends (a torn tail, a structure
//! modification cut short, segments never synced) and keep its page,
//! commit and end records. It only reads; the changes to the partition's
//! files it decides on are made by `PartitionLog::apply`, after the
//! caller's checks, so a refused open leaves the files as they were.

use super::report::RecoveredPartition;
use super::corruption;
use crate::error::{Error, Result};
use crate::ids::{Gsn, LogPos};
use crate::io::{OpenMode, Storage};
use crate::logstore::frame;
use crate::logstore::scan::ScanEnd;
use crate::logstore::segment;
use crate::logstore::segment::parse_segment_name;
use crate::parallel::on_threads;
use crate::persist::SchemeKind;
use crate::wal::partition::partition_dir;
use crate::wal::record::{self, RecordBody, RecordKind};
use std::path::{Path, PathBuf};

/// One record kept in memory between analysis and undo.
pub(in crate::wal) struct Logged {
    pub gsn: Gsn,
    pub txn: u64,
    pub page: u64,
    pub prev: Gsn,
    pub tree: u32,
    pub kind: RecordKind,
    pub compensation: bool,
    /// Structure modification this image belongs to (numbered per
    /// partition from 1); 0 for records outside one.
    pub smo: u32,
    /// Where the whole encoded record lies in its partition's arenas
    /// ([`PartitionLog::bytes_of`]).
    arena: u32,
    len: u32,
    at: usize,
}

/// A change to the log's files that analysis decided on, applied by
/// [`Analysis::apply`](super::Analysis::apply) in the order decided (stream
/// order per partition).
#[derive(Debug)]
enum FileAction {
    /// Remove a segment that holds nothing durable (`why` says what it is).
    Remove { path: PathBuf, why: &'static str },
    /// Keep a segment: cut it to `len` bytes if given (a torn tail, a
    /// recycled file's old records), and sync it (what recovery read may
    /// include writes that were never synced; redo and undo build on it,
    /// so it must not vanish in a later crash).
    Keep { path: PathBuf, len: Option<u64> },
}

pub(in crate::wal) struct PartitionLog {
    pub(super) recovered: RecoveredPartition,
    /// The partition's directory.
    pub(in crate::wal) dir: PathBuf,
    /// The segment the log ends in (the last one kept), if any.
    pub(super) end_segment: Option<PathBuf>,
    /// What `Analysis::apply` changes on disk.
    actions: Vec<FileAction>,
    /// Page records in log order, which is GSN order.
    pub(in crate::wal) records: Vec<Logged>,
    pub(super) commits: Vec<(u64, Vec<(u32, LogPos)>)>,
    pub(super) ended: Vec<u64>,
    pub(super) bytes: u64,
    pub(super) torn_tails: usize,
    /// Structure modifications seen so far (numbers `Logged::smo`).
    smos: u32,
    /// The page records' bytes, one arena per segment (one allocation per
    /// segment, not one per record).
    arenas: Vec<Box<[u8]>>,
}

impl PartitionLog {
    /// The whole encoded record, taken out of the stream
    /// ([`frame::place_at`]): [`record::decode`] reads it.
    pub(in crate::wal) fn bytes_of(&self, r: &Logged) -> &[u8] {
        &self.arenas[r.arena as usize][r.at..r.at + r.len as usize]
    }

    /// The log ends at a bad record (`offset` within the records of the
    /// segment at `path`): a write a crash interrupted.
    fn note_torn_tail(&mut self, path: &Path, offset: u64) {
        tracing::info!(path = %path.display(), offset, "log ends with a torn record");
        self.torn_tails += 1;
    }

    /// Make the changes analysis decided on: remove segments never synced
    /// (each removal synced before the next, as pruning does), cut and
    /// sync the segments kept.
    pub(super) fn apply(&self, storage: &dyn Storage) -> Result<()> {
        for action in &self.actions {
            match action {
                FileAction::Remove { path, why } => {
                    tracing::info!(path = %path.display(), "removing {why}");
                    storage.remove(path)?;
                    storage.sync_dir(&self.dir)?;
                }
                FileAction::Keep { path, len } => {
                    let file = storage.open(path, OpenMode::Existing)?;
                    if let Some(len) = len {
                        tracing::info!(path = %path.display(), len, "cutting a log segment after its last record");
                        file.set_len(*len)?;
                    }
                    file.sync_data()?;
                }
            }
        }
        // The names of the segments kept: a process that was killed may
        // have left them in the directory without syncing it, and the
        // synced positions recorded from here on count on them.
        storage.sync_dir(&self.dir)
    }
}

/// Partitions found below `log_dir`, by id.
pub(crate) fn partition_ids(storage: &dyn Storage, log_dir: &Path) -> Result<Vec<u32>> {
    if !storage.exists(log_dir) {
        return Ok(Vec::new());
    }
    let mut ids = Vec::new();
    for entry in storage.list_dir(log_dir)? {
        let name = entry.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if let Some(id) = name.strip_prefix('p').and_then(|d| d.parse::<u32>().ok()) {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

/// Index of the first record of an unfinished structure modification at
/// the end of `records`, if the last record says more should follow.
fn unfinished_smo(records: &[(u64, record::Record<'_>)]) -> Option<usize> {
    let last = records.len().checked_sub(1)?;
    if !records[last].1.header.smo_more {
        return None;
    }
    let mut first = last;
    while first > 0 && records[first - 1].1.header.smo_more {
        first -= 1;
    }
    Some(first)
}

pub(super) fn analyze_partition(
    storage: &dyn Storage,
    log_dir: &Path,
    scheme: SchemeKind,
    id: u32,
    floor: Gsn,
    window: usize,
) -> Result<PartitionLog> {
    assert!(window >= 1, "at least one segment at a time");
    let dir = partition_dir(log_dir, id);
    let mut starts: Vec<(LogPos, PathBuf)> = Vec::new();
    for path in storage.list_dir(&dir)? {
        match parse_segment_name(&path) {
            Some(start) => {
                crate::logstore::segment::check_start(&path, start)?;
                starts.push((start, path))
            }
            None if crate::logstore::spare::is_spare(&path) => {} // never holds records
            None => {
                tracing::warn!(path = %path.display(), "ignoring a file that is not a log segment")
            }
        }
    }
    starts.sort();
    let mut log = PartitionLog {
        recovered: RecoveredPartition {
            id,
            end: starts.first().map(|s| s.0).unwrap_or(LogPos::ZERO),
            clock: Gsn::ZERO,
            segments: Vec::new(),
        },
        dir: dir.clone(),
        end_segment: None,
        actions: Vec::new(),
        records: Vec::new(),
        commits: Vec::new(),
        ended: Vec::new(),
        bytes: 0,
        torn_tails: 0,
        smos: 0,
        arenas: Vec::new(),
    };
    // Once the log has ended (torn tail, or a segment that does not start
    // where the previous one ended), later segments can only hold writes
    // that were never made durable: a crash kept some unsynced writes and
    // directory entries. Their records prove it by watermarks at or below
    // the end; anything else is a lost durable segment.
    let mut ended = false;
    // The previous segment's records stopped at a bad record: a torn tail
    // ends the log there, unless the next segment starts exactly there.
    // Then the segment ended there, and what follows its records in the
    // file is a recycled file's previous life (spare.rs), not a torn write.
    let mut stopped: Option<(PathBuf, u64)> = None;
    // `window` segments at a time are read and decoded in parallel (the
    // checksums and record decoding are most of analysis' time); what
    // follows is decided in stream order. One buffer per slot of the
    // window, reused: a fresh one per segment costs the kernel's zeroing
    // of its pages again each time.
    let mut buffers: Vec<Vec<u8>> = vec![Vec::new(); window.min(starts.len()).max(1)];
    for chunk in starts.chunks(window) {
        on_threads(
            "log analysis read",
            buffers.iter_mut().zip(chunk),
            |_, (whole, (_, path))| {
                let file = storage.open(path, OpenMode::ReadOnly)?;
                let file_len = file.len()?;
                whole.clear();
                whole.resize(file_len as usize, 0);
                file.read_at(whole, 0)
            },
        )?;
        // A segment whose header turns out torn or foreign is decoded for
        // nothing, which is harmless: decoding is total on any bytes.
        let scans = on_threads(
            "log analysis decode",
            buffers.iter().zip(chunk),
            |_, (whole, (start, _))| {
                let body = whole.get(segment::HEADER_SIZE as usize..).unwrap_or(&[]);
                Ok(record::scan_segment(body, *start))
            },
        )?;
        for ((start, path), (whole, scan)) in chunk.iter().zip(buffers.iter().zip(scans)) {
            let (start, path) = (*start, path.clone());
            analyze_segment(
                &mut log,
                &mut ended,
                &mut stopped,
                (id, scheme, floor),
                start,
                path,
                whole,
                scan,
            )?;
        }
    }
    if let Some((torn, offset)) = stopped {
        log.note_torn_tail(&torn, offset);
    }
    Ok(log)
}

/// One segment of `log`'s partition `id`, in stream order, read into
/// `whole` and decoded as `scan`: keep its records, or decide it lies
/// beyond the end of the durable log.
#[allow(clippy::too_many_arguments)] // the walk's state, passed apart
fn analyze_segment(
    log: &mut PartitionLog,
    ended: &mut bool,
    stopped: &mut Option<(PathBuf, u64)>,
    (id, scheme, floor): (u32, SchemeKind, Gsn),
    start: LogPos,
    path: PathBuf,
    whole: &[u8],
    scan: record::SegmentScan<'_>,
) -> Result<()> {
    {
        if let Some((torn, offset)) = stopped.take() {
            if start != log.recovered.end {
                log.note_torn_tail(&torn, offset);
                *ended = true;
            }
        }
        match segment::decode_header(&path, whole, scheme)? {
            segment::Header::Valid { stream, start: s } if stream == id && s == start => {}
            segment::Header::Valid {
                stream: partition,
                start: s,
            } => {
                return Err(corruption(
                    &path,
                    0,
                    format!("segment header names partition {partition} at {s}, the file is partition {id} at {start}"),
                ))
            }
            segment::Header::Torn => {
                // The header is synced with the first records: nothing in
                // this file was ever durable.
                log.actions.push(FileAction::Remove {
                    path,
                    why: "a log segment whose header was never synced",
                });
                *ended = true;
                return Ok(());
            }
        }
        // Offsets below are within `buf`; file offsets are `HEADER_SIZE` more.
        let buf = &whole[segment::HEADER_SIZE as usize..];
        let len = buf.len() as u64;
        if *ended || start != log.recovered.end {
            let end = log.recovered.end;
            if let Some((offset, rec)) = scan.records.iter().find(|(_, r)| r.header.watermark > end)
            {
                // The damage lies before this segment: name where the log
                // ends too.
                let ends_in = log
                    .end_segment
                    .as_ref()
                    .map(|p| format!(" in {}", p.display()))
                    .unwrap_or_default();
                return Err(corruption(
                    &path,
                    segment::HEADER_SIZE + *offset,
                    format!(
                        "log segment missing or damaged: this record was written after stream position {} was durable, but the log ends at {end}{ends_in}",
                        rec.header.watermark
                    ),
                ));
            }
            log.actions.push(FileAction::Remove {
                path,
                why: "a log segment written after the end of the durable log",
            });
            *ended = true;
            return Ok(());
        }
        if let Some(err) = scan.end.to_error(&path, segment::HEADER_SIZE) {
            return Err(err);
        }
        let mut valid = scan.valid_len;
        let mut records = scan.records.as_slice();
        if let ScanEnd::TornTail { offset, .. } = &scan.end {
            *stopped = Some((path.clone(), *offset));
        }
        // A structure modification is appended and synced whole, so one
        // without its last record can only be a tail a crash cut short.
        if let Some(cut) = unfinished_smo(records) {
            valid = records[cut].0;
            records = &records[..cut];
            tracing::info!(path = %path.display(), offset = valid, "log ends inside a structure modification");
            *stopped = None;
            log.torn_tails += 1;
            *ended = true;
        }
        let mut max_gsn = Gsn::ZERO;
        let mut in_smo = false;
        let arena_id = u32::try_from(log.arenas.len()).map_err(|_| Error::Internal {
            what: "more than 2^32 log segments in one partition".into(),
        })?;
        let mut arena: Vec<u8> = Vec::with_capacity(valid as usize);
        for (offset, rec) in records {
            let h = &rec.header;
            max_gsn = max_gsn.max(h.gsn);
            if in_smo && !rec.body.kind().is_structural() {
                return Err(corruption(
                    &path,
                    segment::HEADER_SIZE + *offset,
                    "a structure modification is interrupted by another record",
                ));
            }
            let smo = if in_smo || h.smo_more {
                if !in_smo {
                    log.smos += 1;
                }
                log.smos
            } else {
                0
            };
            in_smo = h.smo_more;
            if rec.body.kind().has_page()
                && (h.page == 0 || h.page >= crate::buffer::pool::MAX_PAGES)
            {
                return Err(corruption(
                    &path,
                    segment::HEADER_SIZE + *offset,
                    format!(
                        "a log record names page {}, outside the data file's range",
                        h.page
                    ),
                ));
            }
            if h.gsn >= crate::wal::partition::MAX_GSN {
                // The clock's reservation bit (`Partition::clock`) lies
                // above every GSN a log can reach.
                return Err(corruption(
                    &path,
                    segment::HEADER_SIZE + *offset,
                    format!("a log record carries GSN {}, beyond the GSN range", h.gsn),
                ));
            }
            if h.gsn <= floor {
                continue; // reflected in the data file by a checkpoint or clean close
            }
            let end = *offset as usize + rec.encoded_len();
            match &rec.body {
                RecordBody::Commit { deps, .. } => log.commits.push((h.txn, deps.to_vec())),
                RecordBody::End => log.ended.push(h.txn),
                _ => {}
            }
            if rec.body.kind().has_page() {
                // Taken out of the stream, so redo and undo decode the
                // copy without knowing where it lay.
                let at = arena.len();
                arena.extend_from_slice(&buf[*offset as usize..end]);
                frame::place_at(&mut arena[at..], start.advance(*offset));
                log.records.push(Logged {
                    gsn: h.gsn,
                    txn: h.txn,
                    page: h.page,
                    prev: h.prev_gsn,
                    tree: h.tree,
                    kind: rec.body.kind(),
                    compensation: h.compensation,
                    smo,
                    arena: arena_id,
                    len: u32::try_from(end - *offset as usize).map_err(|_| {
                        corruption(&path, segment::HEADER_SIZE + *offset, "a record of 4 GiB or more")
                    })?,
                    at,
                });
            }
        }
        log.arenas.push(arena.into_boxed_slice());
        // Cut the torn tail so new records follow the last valid one.
        log.actions.push(FileAction::Keep {
            path: path.clone(),
            len: (valid < len).then_some(segment::HEADER_SIZE + valid),
        });
        log.end_segment = Some(path);
        log.bytes += valid;
        log.recovered.clock = log.recovered.clock.max(max_gsn);
        log.recovered.segments.push((start, valid, max_gsn));
        log.recovered.end = start.advance(valid);
    }
    Ok(())
}
