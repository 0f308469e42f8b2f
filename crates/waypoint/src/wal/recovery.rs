//! Restart after a crash: analysis, redo, undo (seed 000 §3.7, Fig. 7).
//!
//! - **Analysis** ([`Analysis::read`]), one thread per partition: read every
//!   segment, stop at the torn tail (records that stop exactly where the
//!   next segment starts are that segment's end, followed by a recycled
//!   file's old bytes), refuse corruption in the middle and missing
//!   segments; collect page records, commit records (with their dependency
//!   vectors) and end-of-rollback records. Analysis only reads: what it
//!   decides to change on disk (cut the torn tail and a recycled file's old
//!   bytes, remove segments that were never synced, sync what it read) is
//!   applied by [`Analysis::apply`], after the caller has checked the log
//!   against the checkpoint metadata ([`Analysis::check_synced`]: a log
//!   that ends before its recorded synced position lost durable bytes and
//!   is refused), so a refused open leaves every file as it found it.
//! - **Winners**: a transaction with a commit record all of whose
//!   dependencies survived (every named partition reaches the named
//!   position).
//!   A structure modification cut short by the crash (its last image
//!   missing) is the torn tail; the log is truncated before it.
//! - **Redo** (`redo.rs`): per page, records follow the page's chain of
//!   `prev_gsn` from its on-disk GSN; a record whose predecessor is missing
//!   (it lived in another partition and was lost) marks a **gap**, nothing
//!   after it on that page is applied, and a structure modification is
//!   applied on all its pages or on none. Every transaction with a record
//!   not applied is a loser even if its commit survived (docs/decisions/
//!   022-recovery-and-the-gap-rule.md). Applying runs on threads over page-id ranges.
//! - **Undo**: each loser's applied tuple records are reverted logically,
//!   newest first, through its tree (a split may have moved the key),
//!   logged as compensation records and closed with an end record, so a
//!   crash during recovery recovers again. Structure modifications are not
//!   undone.
//!
//! Invariant 5: afterwards every transaction is wholly present or wholly
//! absent, and present only if its commit (and what it depends on) was
//! durable.

use super::partition::partition_dir;
use super::record::{self, RecordBody, RecordKind};
use super::redo;
use crate::btree::{BTree, PageLog};
use crate::buffer::BufferPool;
use crate::error::{Error, Result};
use crate::io::{OpenMode, Storage};
use crate::logstore::frame;
use crate::logstore::scan::ScanEnd;
use crate::logstore::segment;
use crate::logstore::segment::parse_segment_name;
use crate::persist::SchemeKind;
use rustc_hash::{FxHashMap, FxHashSet};
use std::cmp::Reverse;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What recovery did, for `waypoint recover` and the logs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecoveryReport {
    pub partitions: usize,
    pub segments: usize,
    pub records: u64,
    pub log_bytes: u64,
    pub torn_tails: usize,
    pub winners: usize,
    pub losers: usize,
    pub pages_redone: usize,
    pub records_redone: u64,
    pub records_undone: u64,
    /// Groups of losers with no key in common, undone in parallel.
    pub undo_groups: usize,
    pub gaps: usize,
    /// Transactions whose commit record survived but which had a record
    /// beyond a gap: never an acknowledged one (the commit protocols wait
    /// for every dependency), so non-zero only after an unacknowledged
    /// commit was cut short.
    pub committed_beyond_gap: usize,
    pub repaired_torn_pages: usize,
    pub analysis: Duration,
    pub redo: Duration,
    pub undo: Duration,
}

impl RecoveryReport {
    pub fn total(&self) -> Duration {
        self.analysis + self.redo + self.undo
    }

    /// Log recovered per second of recovery, in GB/s.
    pub fn gb_per_sec(&self) -> f64 {
        let secs = self.total().as_secs_f64();
        if secs == 0.0 {
            return 0.0;
        }
        self.log_bytes as f64 / 1e9 / secs
    }
}

/// Where a partition's log ends after recovery, for the log manager.
#[derive(Debug, Clone)]
pub struct RecoveredPartition {
    pub id: u32,
    pub end: u64,
    pub clock: u64,
    /// (start position, length, max GSN) of each segment.
    pub segments: Vec<(u64, u64, u64)>,
}

/// One record kept in memory between analysis and undo.
pub(super) struct Logged {
    pub gsn: u64,
    pub txn: u64,
    pub page: u64,
    pub prev: u64,
    pub tree: u32,
    pub kind: RecordKind,
    pub compensation: bool,
    /// Structure modification this image belongs to (numbered per
    /// partition from 1); 0 for records outside one.
    pub smo: u32,
    /// The whole encoded record, taken out of the stream
    /// ([`frame::place_at`]): [`record::decode`] reads it.
    pub bytes: Box<[u8]>,
}

/// A change to the log's files that analysis decided on, applied by
/// [`Analysis::apply`] in the order decided (stream order per partition).
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

pub(super) struct PartitionLog {
    recovered: RecoveredPartition,
    /// The partition's directory.
    pub(super) dir: PathBuf,
    /// The segment the log ends in (the last one kept), if any.
    end_segment: Option<PathBuf>,
    /// What `Analysis::apply` changes on disk.
    actions: Vec<FileAction>,
    /// Page records in log order, which is GSN order.
    pub records: Vec<Logged>,
    commits: Vec<(u64, Vec<(u32, u64)>)>,
    ended: Vec<u64>,
    bytes: u64,
    torn_tails: usize,
    /// Structure modifications seen so far (numbers `Logged::smo`).
    smos: u32,
}

impl PartitionLog {
    /// The log ends at a bad record (`offset` within the records of the
    /// segment at `path`): a write a crash interrupted.
    fn note_torn_tail(&mut self, path: &Path, offset: u64) {
        tracing::info!(path = %path.display(), offset, "log ends with a torn record");
        self.torn_tails += 1;
    }

    /// Make the changes analysis decided on: remove segments never synced
    /// (each removal synced before the next, as pruning does), cut and
    /// sync the segments kept.
    fn apply(&self, storage: &dyn Storage) -> Result<()> {
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

fn corruption(path: &Path, offset: u64, detail: impl Into<String>) -> Error {
    Error::Corruption {
        path: path.to_path_buf(),
        offset,
        detail: detail.into(),
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

fn analyze_partition(
    storage: &dyn Storage,
    log_dir: &Path,
    id: u32,
    floor: u64,
) -> Result<PartitionLog> {
    let dir = partition_dir(log_dir, id);
    let mut starts: Vec<(u64, PathBuf)> = Vec::new();
    for path in storage.list_dir(&dir)? {
        match parse_segment_name(&path) {
            Some(start) => starts.push((start, path)),
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
            end: starts.first().map(|s| s.0).unwrap_or(0),
            clock: 0,
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
    for (start, path) in starts {
        if let Some((torn, offset)) = stopped.take() {
            if start != log.recovered.end {
                log.note_torn_tail(&torn, offset);
                ended = true;
            }
        }
        let file = storage.open(&path, OpenMode::ReadOnly)?;
        let file_len = file.len()?;
        let mut whole = vec![0u8; file_len as usize];
        file.read_at(&mut whole, 0)?;
        drop(file);
        match segment::decode_header(&path, &whole, SchemeKind::PerWorker)? {
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
                ended = true;
                continue;
            }
        }
        // Offsets below are within `buf`; file offsets are `HEADER_SIZE` more.
        let buf = &whole[segment::HEADER_SIZE as usize..];
        let len = buf.len() as u64;
        let scan = record::scan_segment(buf, start);
        if ended || start != log.recovered.end {
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
            ended = true;
            continue;
        }
        if let Some(err) = scan.end.to_error(&path, segment::HEADER_SIZE) {
            return Err(err);
        }
        let mut valid = scan.valid_len;
        let mut records = scan.records.as_slice();
        if let ScanEnd::TornTail { offset, .. } = &scan.end {
            stopped = Some((path.clone(), *offset));
        }
        // A structure modification is appended and synced whole, so one
        // without its last record can only be a tail a crash cut short.
        if let Some(cut) = unfinished_smo(records) {
            valid = records[cut].0;
            records = &records[..cut];
            tracing::info!(path = %path.display(), offset = valid, "log ends inside a structure modification");
            stopped = None;
            log.torn_tails += 1;
            ended = true;
        }
        let mut max_gsn = 0;
        let mut in_smo = false;
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
                let mut bytes: Box<[u8]> = buf[*offset as usize..end].into();
                frame::place_at(&mut bytes, start + offset);
                log.records.push(Logged {
                    gsn: h.gsn,
                    txn: h.txn,
                    page: h.page,
                    prev: h.prev_gsn,
                    tree: h.tree,
                    kind: rec.body.kind(),
                    compensation: h.compensation,
                    smo,
                    bytes,
                });
            }
        }
        // Cut the torn tail so new records follow the last valid one.
        log.actions.push(FileAction::Keep {
            path: path.clone(),
            len: (valid < len).then_some(segment::HEADER_SIZE + valid),
        });
        log.end_segment = Some(path);
        log.bytes += valid;
        log.recovered.clock = log.recovered.clock.max(max_gsn);
        log.recovered.segments.push((start, valid, max_gsn));
        log.recovered.end = start + valid;
    }
    if let Some((torn, offset)) = stopped {
        log.note_torn_tail(&torn, offset);
    }
    Ok(log)
}

/// The result of analysis and redo, ready for undo.
pub struct Recovery {
    logs: Vec<PartitionLog>,
    /// Per partition, per record: was it applied (or already in the page)?
    applied: Vec<Vec<bool>>,
    losers: FxHashSet<u64>,
    pub report: RecoveryReport,
}

impl Recovery {
    /// Analysis, then its changes to the log's files, then redo (on
    /// `threads` threads), with no check against checkpoint metadata.
    /// Records with a GSN at or below `floor` are ignored.
    pub fn analyze_and_redo(
        storage: &dyn Storage,
        log_dir: &Path,
        pool: &BufferPool,
        threads: usize,
        floor: u64,
    ) -> Result<Recovery> {
        let analysis = Analysis::read(storage, log_dir, floor)?;
        analysis.apply(storage)?;
        analysis.redo(pool, threads)
    }
}

/// What analysis found in the log, before anything on disk is changed.
pub struct Analysis {
    log_dir: PathBuf,
    logs: Vec<PartitionLog>,
    winners: FxHashSet<u64>,
    floor: u64,
    report: RecoveryReport,
}

impl Analysis {
    /// Where each partition ends and its GSN clock: what the log manager
    /// continues from (redo changes neither).
    pub fn partitions(&self) -> Vec<RecoveredPartition> {
        self.logs.iter().map(|l| l.recovered.clone()).collect()
    }

    /// Analysis: read every partition below `log_dir` (a thread each) and
    /// decide the winners. Reads only; records with a GSN at or below
    /// `floor` are ignored.
    pub fn read(storage: &dyn Storage, log_dir: &Path, floor: u64) -> Result<Analysis> {
        let t0 = Instant::now();
        let ids = partition_ids(storage, log_dir)?;
        let results: Vec<Result<PartitionLog>> = std::thread::scope(|s| {
            let handles: Vec<_> = ids
                .iter()
                .map(|&id| s.spawn(move || analyze_partition(storage, log_dir, id, floor)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::Internal {
                            what: "a log analysis thread panicked".into(),
                        })
                    })
                })
                .collect()
        });
        let logs: Vec<PartitionLog> = results.into_iter().collect::<Result<_>>()?;
        let mut report = RecoveryReport {
            partitions: logs.len(),
            segments: logs.iter().map(|l| l.recovered.segments.len()).sum(),
            records: logs
                .iter()
                .map(|l| l.records.len() as u64 + l.commits.len() as u64 + l.ended.len() as u64)
                .sum(),
            log_bytes: logs.iter().map(|l| l.bytes).sum(),
            torn_tails: logs.iter().map(|l| l.torn_tails).sum(),
            ..Default::default()
        };
        let ends: FxHashMap<u32, u64> = logs
            .iter()
            .map(|l| (l.recovered.id, l.recovered.end))
            .collect();
        let mut winners: FxHashSet<u64> = FxHashSet::default();
        for l in &logs {
            for (txn, deps) in &l.commits {
                if deps
                    .iter()
                    .all(|(q, pos)| ends.get(q).copied().unwrap_or(0) >= *pos)
                {
                    winners.insert(*txn);
                }
            }
        }
        report.analysis = t0.elapsed();
        tracing::info!(
            partitions = report.partitions,
            records = report.records,
            bytes = report.log_bytes,
            "log analysis done"
        );
        Ok(Analysis {
            log_dir: log_dir.to_path_buf(),
            logs,
            winners,
            floor,
            report,
        })
    }

    /// Where each partition's log ends, as (partition, stream position),
    /// for the partitions that keep a segment (in partition order): after
    /// [`Analysis::apply`], what is known to be synced. (A partition
    /// without segments resumes its stream at the position its last
    /// segment's name gave, but no file holds that position.)
    pub fn synced_ends(&self) -> Vec<(u32, u64)> {
        self.logs
            .iter()
            .filter(|l| l.end_segment.is_some())
            .map(|l| (l.recovered.id, l.recovered.end))
            .collect()
    }

    /// The largest GSN of any record in the log, those at or below the
    /// floor included, with the directory of its partition.
    pub fn max_gsn(&self) -> Option<(u64, &Path)> {
        self.logs
            .iter()
            .filter(|l| l.recovered.clock > 0)
            .max_by_key(|l| l.recovered.clock)
            .map(|l| (l.recovered.clock, l.dir.as_path()))
    }

    /// Refuse a log that ends before a position `synced` records as
    /// durable for its partition (`(partition, position)`, from the
    /// checkpoint metadata): those bytes were synced, so their loss is
    /// damage, not a torn tail, and recovering without them could drop
    /// acknowledged commits. `Error::LogTruncated` names the segment the
    /// partition now ends in (its directory if it has none) and the
    /// missing range. A partition whose directory is gone ends at 0.
    pub fn check_synced(&self, synced: &[(u32, u64)]) -> Result<()> {
        for &(id, expected_end) in synced {
            let found = self.logs.iter().find(|l| l.recovered.id == id);
            let found_end = found.map_or(0, |l| l.recovered.end);
            if found_end < expected_end {
                let path = found
                    .and_then(|l| l.end_segment.clone())
                    .unwrap_or_else(|| partition_dir(&self.log_dir, id));
                return Err(Error::LogTruncated {
                    partition: id,
                    path,
                    expected_end,
                    found_end,
                });
            }
        }
        Ok(())
    }

    /// Make the changes analysis decided on (a thread per partition): cut
    /// torn tails, remove segments that were never synced, sync every
    /// segment kept. Afterwards every partition's log is durable up to its
    /// end ([`Analysis::synced_ends`]).
    pub fn apply(&self, storage: &dyn Storage) -> Result<()> {
        std::thread::scope(|s| {
            let handles: Vec<_> = self
                .logs
                .iter()
                .map(|l| s.spawn(move || l.apply(storage)))
                .collect();
            handles.into_iter().try_for_each(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::Internal {
                        what: "a log analysis thread panicked".into(),
                    })
                })
            })
        })?;
        if self.logs.is_empty() {
            return Ok(());
        }
        storage.sync_dir(&self.log_dir)
    }

    /// Redo (on `threads` threads) into `pool`, after [`Analysis::apply`].
    pub fn redo(self, pool: &BufferPool, threads: usize) -> Result<Recovery> {
        let Analysis {
            logs,
            winners,
            floor,
            mut report,
            ..
        } = self;
        let t1 = Instant::now();
        let redone = redo::redo(&logs, pool, threads.max(1), floor)?;
        let beyond_gap = redone.beyond_gap;
        report.gaps = redone.gaps;
        report.records_redone = redone.records_redone;
        report.pages_redone = redone.pages;
        report.committed_beyond_gap = winners.intersection(&beyond_gap).count();
        if report.committed_beyond_gap > 0 {
            tracing::warn!(
                count = report.committed_beyond_gap,
                "commits whose log has a gap are rolled back (they were never acknowledged)"
            );
        }
        let ended: FxHashSet<u64> = logs.iter().flat_map(|l| l.ended.iter().copied()).collect();
        let mut losers = FxHashSet::default();
        for l in &logs {
            for r in &l.records {
                let winner = winners.contains(&r.txn) && !beyond_gap.contains(&r.txn);
                if !winner && !ended.contains(&r.txn) {
                    losers.insert(r.txn);
                }
            }
        }
        report.winners = winners.len() - report.committed_beyond_gap;
        report.losers = losers.len();
        report.redo = t1.elapsed();
        tracing::info!(
            pages = report.pages_redone,
            records = report.records_redone,
            gaps = report.gaps,
            "redo done"
        );
        let applied = redone.applied;
        Ok(Recovery {
            logs,
            applied,
            losers,
            report,
        })
    }
}

impl Recovery {
    /// Undo every loser, on one thread per log in `logs` (each marks its
    /// records as compensation and closes each loser with an end record).
    ///
    /// Losers that changed a common key are undone together, newest change
    /// first across them (as in ARIES: with early lock release a loser may
    /// have overwritten another loser's change, and the later change must go
    /// first). Losers with no key in common are independent and are undone
    /// in parallel.
    pub fn undo<L: UndoLog + Send>(&mut self, pool: &BufferPool, logs: &mut [L]) -> Result<()> {
        assert!(!logs.is_empty(), "undo needs a log");
        let t0 = Instant::now();
        // Records of each loser, applied ones only.
        let mut per_txn: FxHashMap<u64, Vec<(usize, usize)>> = FxHashMap::default();
        for (pi, l) in self.logs.iter().enumerate() {
            for (ri, r) in l.records.iter().enumerate() {
                if self.losers.contains(&r.txn) && self.applied[pi][ri] && !r.kind.is_structural() {
                    per_txn.entry(r.txn).or_default().push((pi, ri));
                }
            }
        }
        let mut txns: Vec<u64> = per_txn.keys().copied().collect();
        txns.sort_unstable();
        // What is left to undo of every loser, with the key it changes.
        let mut todo: Vec<(usize, usize, u32, Vec<u8>)> = Vec::new();
        for &txn in &txns {
            let mut recs = per_txn.remove(&txn).unwrap_or_default();
            recs.sort_by_key(|&(pi, ri)| self.logs[pi].records[ri].gsn);
            let (open, compensated) = self.uncompensated(&recs)?;
            tracing::debug!(
                txn = format_args!("{txn:#x}"),
                records = open.len(),
                compensated,
                "undoing a loser"
            );
            todo.extend(open);
        }
        let groups = self.independent_groups(&txns, todo);
        self.report.undo_groups = groups.len();
        // Largest groups first, each to the least loaded thread.
        let mut work: Vec<Vec<UndoGroup>> = (0..logs.len()).map(|_| Vec::new()).collect();
        let mut load = vec![0usize; logs.len()];
        for group in groups {
            let t = (0..load.len()).min_by_key(|&t| load[t]).expect("a thread");
            load[t] += group.records.len() + 1;
            work[t].push(group);
        }
        let undone = AtomicU64::new(0);
        let this = &*self;
        std::thread::scope(|s| {
            let handles: Vec<_> = logs
                .iter_mut()
                .zip(work)
                .map(|(log, groups)| {
                    let undone = &undone;
                    s.spawn(move || -> Result<()> {
                        for group in groups {
                            for &(pi, ri) in &group.records {
                                let r = &this.logs[pi].records[ri];
                                log.begin_undo(r.txn);
                                if this.undo_record(pool, log.page_log(), pi, r)? {
                                    undone.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                        Ok(())
                    })
                })
                .collect();
            handles.into_iter().try_for_each(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::Internal {
                        what: "an undo thread panicked".into(),
                    })
                })
            })
        })?;
        // A loser's end record may become durable only after every
        // compensation record is: threads log into different partitions
        // and may change the same page, so one partition's compensation
        // can follow another's on a page. An end record that survived a
        // crash while such a predecessor did not would leave the loser
        // half undone and no longer a loser (found by `waypoint simulate`,
        // seed 658). So: all compensation durable, then the end records.
        for log in logs.iter_mut() {
            log.flush()?;
        }
        for &txn in &txns {
            logs[0].begin_undo(txn);
            logs[0].end_undo(txn)?;
        }
        self.report.records_undone = undone.into_inner();
        self.report.undo = t0.elapsed();
        tracing::info!(
            losers = self.report.losers,
            records = self.report.records_undone,
            "undo done"
        );
        Ok(())
    }

    /// Of one loser's records (in GSN order), those not yet compensated,
    /// with their keys; and how many compensations there were. A
    /// compensation record undoes the newest not yet compensated change of
    /// the same key (undo runs newest-first per key), except that a
    /// compensating remove undoes the newest open insert of the key and
    /// everything after it. Runtime rollbacks undo in undo-list order,
    /// which is not log order (a placeholder's value update has no undo
    /// entry of its own), so matching by key, not by counting, finds what is
    /// left to undo.
    #[allow(clippy::type_complexity)]
    fn uncompensated(
        &self,
        recs: &[(usize, usize)],
    ) -> Result<(Vec<(usize, usize, u32, Vec<u8>)>, usize)> {
        let mut open: Vec<(usize, usize, u32, Vec<u8>)> = Vec::new();
        let mut compensated = 0;
        for &(pi, ri) in recs {
            let r = &self.logs[pi].records[ri];
            let rec = decode_again(&self.logs[pi].dir, r)?;
            let key = match &rec.body {
                RecordBody::Insert { key, .. }
                | RecordBody::Update { key, .. }
                | RecordBody::Remove { key, .. } => key.to_vec(),
                _ => continue,
            };
            if r.compensation {
                let same_key =
                    |(_, _, t, k): &(usize, usize, u32, Vec<u8>)| *t == r.tree && *k == key;
                // A compensating remove restores the key's absence: it
                // undoes the newest open insert of the key and every change
                // made after it (a placeholder's insert and its install's
                // update have one undo entry, hence one compensation).
                let from = if r.kind == RecordKind::Remove {
                    open.iter().rposition(|e| {
                        same_key(e) && self.logs[e.0].records[e.1].kind == RecordKind::Insert
                    })
                } else {
                    None
                }
                .or_else(|| open.iter().rposition(same_key));
                if let Some(from) = from {
                    let mut at = 0;
                    open.retain(|e| {
                        at += 1;
                        at - 1 < from || !same_key(e)
                    });
                    compensated += 1;
                }
            } else {
                open.push((pi, ri, r.tree, key));
            }
        }
        Ok((open, compensated))
    }

    /// Split the records left to undo into groups of losers that share no
    /// key (union-find over losers by the keys they changed); each group's
    /// records newest first. Every loser in `txns` is in exactly one group.
    fn independent_groups(
        &self,
        txns: &[u64],
        todo: Vec<(usize, usize, u32, Vec<u8>)>,
    ) -> Vec<UndoGroup> {
        let index: FxHashMap<u64, usize> = txns.iter().enumerate().map(|(i, &t)| (t, i)).collect();
        let mut parent: Vec<usize> = (0..txns.len()).collect();
        fn root(parent: &mut [usize], mut i: usize) -> usize {
            while parent[i] != i {
                parent[i] = parent[parent[i]];
                i = parent[i];
            }
            i
        }
        let mut key_owner: FxHashMap<(u32, &[u8]), usize> = FxHashMap::default();
        for (pi, ri, tree, key) in &todo {
            let t = index[&self.logs[*pi].records[*ri].txn];
            match key_owner.get(&(*tree, key.as_slice())) {
                Some(&o) => {
                    let (a, b) = (root(&mut parent, o), root(&mut parent, t));
                    parent[a] = b;
                }
                None => {
                    key_owner.insert((*tree, key.as_slice()), t);
                }
            }
        }
        let mut groups: FxHashMap<usize, UndoGroup> = FxHashMap::default();
        for (i, &txn) in txns.iter().enumerate() {
            let r = root(&mut parent, i);
            groups.entry(r).or_default().txns.push(txn);
        }
        for (pi, ri, _, _) in &todo {
            let t = index[&self.logs[*pi].records[*ri].txn];
            let r = root(&mut parent, t);
            groups
                .get_mut(&r)
                .expect("every loser has a group")
                .records
                .push((*pi, *ri));
        }
        let mut groups: Vec<UndoGroup> = groups.into_values().collect();
        for g in &mut groups {
            g.records
                .sort_by_key(|&(pi, ri)| Reverse(self.logs[pi].records[ri].gsn));
        }
        groups.sort_by_key(|g| Reverse(g.records.len()));
        groups
    }

    /// Revert one change (`r`, of partition `pi`) logically through its
    /// tree. Returns false if the key was already at its before-state (an
    /// earlier undo survived).
    fn undo_record(
        &self,
        pool: &BufferPool,
        plog: &dyn PageLog,
        pi: usize,
        r: &Logged,
    ) -> Result<bool> {
        let dir = &self.logs[pi].dir;
        let rec = decode_again(dir, r)?;
        let tree = BTree::open(r.tree as u64);
        match &rec.body {
            RecordBody::Insert { key, .. } => tree.restore(pool, plog, key, None)?,
            RecordBody::Remove { key, before } => tree.restore(pool, plog, key, Some(before))?,
            RecordBody::Update { key, diff } => {
                let current = tree.get(pool, key, None)?.0.map(|(tid, v)| {
                    let mut stored = tid.get().to_le_bytes().to_vec();
                    stored.extend_from_slice(&v);
                    stored
                });
                match current.as_deref().and_then(|c| diff.undo_update(c)) {
                    Some(before) => tree.restore(pool, plog, key, Some(&before))?,
                    None if current
                        .as_deref()
                        .and_then(|c| diff.apply_update(c))
                        .is_some() =>
                    {
                        return Ok(false)
                    }
                    None => {
                        return Err(corruption(
                            pool.file().path(),
                            r.page * pool.page_size() as u64,
                            format!(
                                "undo of the update of record GSN {} of log partition {} does not match the current value (the page and the log disagree)",
                                r.gsn,
                                dir.display()
                            ),
                        ))
                    }
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// Losers that share keys, undone together on one thread.
#[derive(Default)]
struct UndoGroup {
    txns: Vec<u64>,
    /// Their records left to undo, newest first.
    records: Vec<(usize, usize)>,
}

/// Decode a record kept since analysis (it decoded then) of the partition
/// in `dir`.
fn decode_again<'a>(dir: &Path, r: &'a Logged) -> Result<record::Record<'a>> {
    record::decode(&r.bytes).map_err(|e| {
        corruption(
            dir,
            r.gsn,
            format!(
                "record GSN {}: decoded in analysis, it fails now: {e}",
                r.gsn
            ),
        )
    })
}

/// What undo needs from the log: compensation logging of the reverting
/// changes and an end record per loser.
pub trait UndoLog {
    fn begin_undo(&mut self, txn: u64);
    fn page_log(&self) -> &dyn PageLog;
    fn end_undo(&mut self, txn: u64) -> Result<()>;
    /// Make everything this log appended durable.
    fn flush(&mut self) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use crate::io::{CrashPolicy, SimStorage};
    use crate::persist::SessionLog;
    use crate::ids::Tid;
    use crate::wal::test_support::{durable, key, recover, small_tree, VALUE};

    /// Losers with no key in common are undone as independent groups (on
    /// two threads here); two losers that changed the same key are one
    /// group, undone newest change first: the later update before the
    /// earlier insert, or the update's undo would find no key.
    #[test]
    fn independent_losers_are_undone_in_parallel_and_dependent_ones_newest_first() {
        let sim = SimStorage::new(3);
        let (pool_before, wal, tree) = small_tree(&sim);
        let mut logs = [wal.session_log(1).unwrap(), wal.session_log(2).unwrap()];
        // Eight losers, each inserting its own keys; none commits.
        for t in 0..8u64 {
            let log = &mut logs[(t % 2) as usize];
            log.on_begin();
            for k in 0..5 {
                tree.insert(&pool_before, log, &key(1 + t * 10 + k), Tid::new(2), &VALUE, None)
                    .unwrap();
            }
        }
        // Two more: one inserts a key, the next (other session) updates it.
        logs[0].on_begin();
        tree.insert(&pool_before, &logs[0], &key(500), Tid::new(3), &VALUE, None)
            .unwrap();
        logs[1].on_begin();
        assert!(tree
            .update(&pool_before, &logs[1], &key(500), Tid::new(4), &[9; 100], None)
            .unwrap());
        durable(&wal, 1);
        durable(&wal, 2);
        pool_before.stop();
        drop(logs);
        sim.crash(CrashPolicy::DropAll);

        let (pool, recovery) = recover(&sim, 2, 2);
        assert_eq!(recovery.report.losers, 10, "{:?}", recovery.report);
        assert_eq!(recovery.report.undo_groups, 9, "{:?}", recovery.report);
        assert_eq!(recovery.report.records_undone, 8 * 5 + 2);
        assert_eq!(tree.check(&pool).unwrap(), 60, "only the setup keys remain");
        assert!(tree.get(&pool, &key(500), None).unwrap().0.is_none());
    }
}
