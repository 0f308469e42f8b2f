//! One partition's analysis (seed 000 §3.7): from its segments, each read
//! and walked on its own (`segment_walk`, on any recovery thread), decide
//! in stream order where the durable log ends (a torn tail, a structure
//! modification cut short, segments never synced) and keep its page,
//! commit and end records. It only reads; the changes to the partition's
//! files it decides on are made by `PartitionLog::apply`, after the
//! caller's checks, so a refused open leaves the files as they were.

use super::corruption;
use super::report::RecoveredPartition;
use super::segment_walk::SegmentWalk;
use crate::error::{Error, Result};
use crate::ids::{Gsn, LogPos};
use crate::io::{OpenMode, Storage};
use crate::logstore::segment;
use crate::logstore::segment::parse_segment_name;
use crate::wal::partition::partition_dir;
use crate::wal::record::{self, RecordKind};
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
    pub(super) arena: u32,
    pub(super) len: u32,
    pub(super) at: usize,
}

/// A change to the log's files that analysis decided on, applied by
/// [`Analysis::apply`](super::Analysis::apply) in the order decided (stream
/// order per partition).
#[derive(Debug)]
pub(super) enum FileAction {
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
    pub(super) actions: Vec<FileAction>,
    /// Page records in log order, which is GSN order.
    pub(in crate::wal) records: Vec<Logged>,
    pub(super) commits: Vec<(u64, Vec<(u32, LogPos)>)>,
    pub(super) ended: Vec<u64>,
    pub(super) bytes: u64,
    pub(super) torn_tails: usize,
    /// Structure modifications seen so far (numbers `Logged::smo`).
    pub(super) smos: u32,
    /// The page records' bytes, one arena per segment kept: the file as
    /// read, or a copy of just its page records where they are less than
    /// half of it (`segment_walk::arena_of`).
    arenas: Vec<Box<[u8]>>,
}

impl PartitionLog {
    /// The whole encoded record, taken out of the stream
    /// ([`frame::place_at`]): [`record::decode`] reads it.
    pub(in crate::wal) fn bytes_of(&self, r: &Logged) -> &[u8] {
        &self.arenas[r.arena as usize][r.at..r.at + r.len as usize]
    }

    /// Decode again a record kept since analysis decoded it (its checksum
    /// was checked then: [`record::decode_again`]). Failing now is
    /// corruption, named by the record's GSN (its offset is no longer
    /// known here).
    pub(in crate::wal) fn record_of(&self, r: &Logged) -> Result<record::Record<'_>> {
        let rec = record::decode_again(self.bytes_of(r)).map_err(|e| {
            corruption(
                &self.dir,
                r.gsn.get(),
                format!("record GSN {}: decoded in analysis, it fails now: {e}", r.gsn),
            )
        })?;
        debug_assert_eq!(
            (rec.header.gsn, rec.header.page),
            (r.gsn, r.page),
            "a kept record's bytes are its own"
        );
        Ok(rec)
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

/// A partition's segment files, in stream order: the work analysis
/// shares out among its threads.
pub(super) struct Segments {
    pub id: u32,
    pub starts: Vec<(LogPos, PathBuf)>,
}

/// List partition `id`'s segments below `log_dir`.
pub(super) fn list_segments(storage: &dyn Storage, log_dir: &Path, id: u32) -> Result<Segments> {
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
    Ok(Segments { id, starts })
}

/// One partition's analysis from its segments' walks (in stream order,
/// one per segment of `segments`): decide where its durable log ends and
/// keep what lies before.
pub(super) fn analyze_partition(
    log_dir: &Path,
    segments: &Segments,
    walks: Vec<SegmentWalk>,
) -> Result<PartitionLog> {
    assert_eq!(segments.starts.len(), walks.len(), "a walk per segment");
    let id = segments.id;
    // Sized once: growing a vector of millions of records copies them.
    let records = walks
        .iter()
        .map(|w| w.walked.as_ref().map_or(0, |w| w.records.len()))
        .sum();
    let mut log = PartitionLog {
        recovered: RecoveredPartition {
            id,
            end: segments.starts.first().map(|s| s.0).unwrap_or(LogPos::ZERO),
            clock: Gsn::ZERO,
            segments: Vec::new(),
        },
        dir: partition_dir(log_dir, id),
        end_segment: None,
        actions: Vec::new(),
        records: Vec::with_capacity(records),
        commits: Vec::new(),
        ended: Vec::new(),
        bytes: 0,
        torn_tails: 0,
        smos: 0,
        arenas: Vec::new(),
    };
    let mut walk = Walk {
        ended: false,
        stopped: None,
    };
    for segment in walks {
        log.take_segment(&mut walk, segment)?;
    }
    if let Some((torn, offset)) = walk.stopped {
        log.note_torn_tail(&torn, offset);
    }
    Ok(log)
}

/// Where the in-order walk over a partition's segments stands.
struct Walk {
    /// Once the log has ended (torn tail, or a segment that does not start
    /// where the previous one ended), later segments can only hold writes
    /// that were never made durable: a crash kept some unsynced writes and
    /// directory entries. Their records prove it by watermarks at or below
    /// the end; anything else is a lost durable segment.
    ended: bool,
    /// The previous segment's records stopped at a bad record: a torn tail
    /// ends the log there, unless the next segment starts exactly there.
    /// Then the segment ended there, and what follows its records in the
    /// file is a recycled file's previous life (spare.rs), not a torn write.
    stopped: Option<(PathBuf, u64)>,
}

impl PartitionLog {
    /// The next segment in stream order: keep its records, or decide it
    /// lies beyond the end of the durable log.
    fn take_segment(&mut self, walk: &mut Walk, segment: SegmentWalk) -> Result<()> {
        let SegmentWalk {
            start,
            path,
            header,
            walked,
            rises,
        } = segment;
        if let Some((torn, offset)) = walk.stopped.take() {
            if start != self.recovered.end {
                self.note_torn_tail(&torn, offset);
                walk.ended = true;
            }
        }
        if let segment::Header::Torn = header? {
            // The header is synced with the first records: nothing in this
            // file was ever durable.
            self.actions.push(FileAction::Remove {
                path,
                why: "a log segment whose header was never synced",
            });
            walk.ended = true;
            return Ok(());
        }
        if walk.ended || start != self.recovered.end {
            let end = self.recovered.end;
            if let Some(&(offset, watermark)) = rises.iter().find(|(_, w)| *w > end) {
                // The damage lies before this segment: name where the log
                // ends too.
                let ends_in = self
                    .end_segment
                    .as_ref()
                    .map(|p| format!(" in {}", p.display()))
                    .unwrap_or_default();
                return Err(corruption(
                    &path,
                    segment::HEADER_SIZE + offset,
                    format!(
                        "log segment missing or damaged: this record was written after stream position {watermark} was durable, but the log ends at {end}{ends_in}"
                    ),
                ));
            }
            self.actions.push(FileAction::Remove {
                path,
                why: "a log segment written after the end of the durable log",
            });
            walk.ended = true;
            return Ok(());
        }
        let walked = walked?;
        if walked.smo_cut {
            tracing::info!(path = %path.display(), offset = walked.valid, "log ends inside a structure modification");
            self.torn_tails += 1;
            walk.ended = true;
        } else if let Some(offset) = walked.torn_at {
            walk.stopped = Some((path.clone(), offset));
        }
        let arena = u32::try_from(self.arenas.len()).map_err(|_| Error::Internal {
            what: "more than 2^32 log segments in one partition".into(),
        })?;
        let smos_before = self.smos;
        self.records.extend(walked.records.into_iter().map(|mut r| {
            r.arena = arena;
            if r.smo != 0 {
                r.smo += smos_before;
            }
            r
        }));
        self.smos += walked.smos;
        self.commits.extend(walked.commits);
        self.ended.extend(walked.ended);
        self.arenas.push(walked.arena);
        // Cut the torn tail so new records follow the last valid one.
        self.actions.push(FileAction::Keep {
            path: path.clone(),
            len: (walked.valid < walked.len).then_some(segment::HEADER_SIZE + walked.valid),
        });
        self.end_segment = Some(path);
        self.bytes += walked.valid;
        self.recovered.clock = self.recovered.clock.max(walked.max_gsn);
        self.recovered.segments.push((start, walked.valid, walked.max_gsn));
        self.recovered.end = start.advance(walked.valid);
        Ok(())
    }
}
