//! Restart after a crash: analysis, redo, undo (seed 000 §3.7, Fig. 7).
//!
//! - **Analysis**, one thread per partition: read every segment, stop at the
//!   torn tail (truncating it), refuse corruption in the middle and missing
//!   segments; collect page records, commit records (with their dependency
//!   vectors) and end-of-rollback records.
//! - **Winners**: a transaction with a commit record all of whose
//!   dependencies survived (every named partition reaches the named
//!   position).
//! - **Redo**, threads over disjoint page-id ranges: per page, records
//!   sorted by GSN are applied from the page's on-disk GSN on. Each record
//!   names the page GSN it was made on (`prev_gsn`); a record whose
//!   predecessor is missing (it lived in another partition and was lost)
//!   marks a **gap**: redo of that page stops there, and every transaction
//!   with a record beyond a gap is a loser even if its commit survived
//!   (ARCHITECTURE.md, "the gap rule").
//! - **Undo**: each loser's applied tuple records are reverted logically,
//!   newest first, through its tree (a split may have moved the key),
//!   logged as compensation records and closed with an end record, so a
//!   crash during recovery recovers again. Structure modifications are not
//!   undone.
//!
//! Invariant 5: afterwards every transaction is wholly present or wholly
//! absent, and present only if its commit (and what it depends on) was
//! durable.

use super::partition::{parse_segment_name, partition_dir};
use super::record::{self, RecordBody, RecordKind, ScanEnd};
use crate::btree::node::{Node, NodeMut};
use crate::btree::{BTree, PageLog};
use crate::buffer::page;
use crate::buffer::BufferPool;
use crate::error::{Error, Result};
use crate::io::{OpenMode, Storage};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
struct Logged {
    gsn: u64,
    txn: u64,
    page: u64,
    prev: u64,
    tree: u32,
    kind: RecordKind,
    compensation: bool,
    /// The whole encoded record.
    bytes: Box<[u8]>,
}

struct PartitionLog {
    recovered: RecoveredPartition,
    records: Vec<Logged>,
    commits: Vec<(u64, Vec<(u32, u64)>)>,
    ended: Vec<u64>,
    bytes: u64,
    torn_tails: usize,
}

fn corruption(path: &Path, offset: u64, detail: impl Into<String>) -> Error {
    Error::Corruption {
        path: path.to_path_buf(),
        offset,
        detail: detail.into(),
    }
}

/// Partitions found below `log_dir`, by id.
fn partition_ids(storage: &dyn Storage, log_dir: &Path) -> Result<Vec<u32>> {
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
        records: Vec::new(),
        commits: Vec::new(),
        ended: Vec::new(),
        bytes: 0,
        torn_tails: 0,
    };
    // Once the log has ended (torn tail, or a segment that does not start
    // where the previous one ended), later segments can only hold writes
    // that were never made durable: a crash kept some unsynced writes and
    // directory entries. Their records prove it by watermarks at or below
    // the end; anything else is a lost durable segment.
    let mut ended = false;
    for (start, path) in starts {
        let file = storage.open(&path, OpenMode::Existing)?;
        let len = file.len()?;
        let mut buf = vec![0u8; len as usize];
        file.read_at(&mut buf, 0)?;
        let scan = record::scan_segment(&buf, start);
        if ended || start != log.recovered.end {
            let end = log.recovered.end;
            if let Some((offset, rec)) = scan.records.iter().find(|(_, r)| r.header.watermark > end)
            {
                return Err(corruption(
                    &path,
                    *offset,
                    format!(
                        "log segment missing or damaged: this record was written after stream position {} was durable, but the log ends at {end}",
                        rec.header.watermark
                    ),
                ));
            }
            tracing::info!(path = %path.display(), "removing a log segment written after the end of the durable log");
            drop(file);
            storage.remove(&path)?;
            storage.sync_dir(&dir)?;
            ended = true;
            continue;
        }
        if let Some(err) = scan.end.to_error(&path, 0) {
            return Err(err);
        }
        let valid = scan.valid_len;
        if let ScanEnd::TornTail { offset, .. } = &scan.end {
            tracing::info!(path = %path.display(), offset, "log ends with a torn record; truncating");
            log.torn_tails += 1;
            ended = true;
        }
        let mut max_gsn = 0;
        for (offset, rec) in &scan.records {
            let h = &rec.header;
            max_gsn = max_gsn.max(h.gsn);
            if h.gsn <= floor {
                continue; // reflected in the data file at a clean close
            }
            let end = *offset as usize + rec.encoded_len();
            match &rec.body {
                RecordBody::Commit { deps, .. } => log.commits.push((h.txn, deps.to_vec())),
                RecordBody::End => log.ended.push(h.txn),
                _ => {}
            }
            if rec.body.kind().has_page() {
                log.records.push(Logged {
                    gsn: h.gsn,
                    txn: h.txn,
                    page: h.page,
                    prev: h.prev_gsn,
                    tree: h.tree,
                    kind: rec.body.kind(),
                    compensation: h.compensation,
                    bytes: buf[*offset as usize..end].into(),
                });
            }
        }
        if valid < len {
            // Cut the torn tail so new records follow the last valid one.
            file.set_len(valid)?;
            file.sync_data()?;
        }
        log.bytes += valid;
        log.recovered.clock = log.recovered.clock.max(max_gsn);
        log.recovered.segments.push((start, valid, max_gsn));
        log.recovered.end = start + valid;
    }
    Ok(log)
}

/// Apply one page record to a page image (redo). Shared with nothing else:
/// the runtime path changes pages through the tree and logs what it did;
/// this re-does exactly that change from the record.
fn apply(page: &mut [u8], rec: &record::Record<'_>) -> std::result::Result<(), String> {
    match &rec.body {
        RecordBody::Image(image) => {
            if !image.write_to_page(page) {
                return Err("page image does not fit the page".into());
            }
            page[6] = rec.header.page_kind;
            Ok(())
        }
        RecordBody::Insert { key, value } => {
            let (idx, found) = Node::new(page).lower_bound(key).ok_or("unreadable node")?;
            if found {
                return Err("redo of an insert finds the key present".into());
            }
            NodeMut::new(page)
                .insert_at(idx, key, value)
                .map_err(|_| "redo of an insert does not fit".to_string())
        }
        RecordBody::Update { key, diff } => {
            let node = Node::new(page);
            let (idx, found) = node.lower_bound(key).ok_or("unreadable node")?;
            if !found {
                return Err("redo of an update finds no key".into());
            }
            let old = node.value(idx).ok_or("unreadable value")?;
            let new = diff
                .apply_update(old)
                .ok_or("redo of an update does not match the value")?;
            NodeMut::new(page)
                .set_value_at(idx, &new)
                .map_err(|_| "redo of an update does not fit".to_string())
        }
        RecordBody::Remove { key, .. } => {
            let (idx, found) = Node::new(page).lower_bound(key).ok_or("unreadable node")?;
            if !found {
                return Err("redo of a remove finds no key".into());
            }
            NodeMut::new(page).remove_at(idx);
            Ok(())
        }
        RecordBody::Commit { .. } | RecordBody::End => Ok(()),
    }
}

/// The result of analysis and redo, ready for undo.
pub struct Recovery {
    logs: Vec<PartitionLog>,
    /// Per partition, per record: was it applied (or already in the page)?
    applied: Vec<Vec<bool>>,
    losers: HashSet<u64>,
    pub report: RecoveryReport,
}

impl Recovery {
    pub fn partitions(&self) -> Vec<RecoveredPartition> {
        self.logs.iter().map(|l| l.recovered.clone()).collect()
    }

    /// Analysis and redo. `threads` bounds the parallelism of each phase.
    /// Records with a GSN at or below `floor` (the superblock's log floor)
    /// are ignored.
    pub fn analyze_and_redo(
        storage: &dyn Storage,
        log_dir: &Path,
        pool: &BufferPool,
        threads: usize,
        floor: u64,
    ) -> Result<Recovery> {
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
                        Err(Error::InvalidOptions("log analysis thread panicked".into()))
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
        let ends: HashMap<u32, u64> = logs
            .iter()
            .map(|l| (l.recovered.id, l.recovered.end))
            .collect();
        let mut winners: HashSet<u64> = HashSet::new();
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

        // Redo, partitioned by page id.
        let t1 = Instant::now();
        let mut by_page: HashMap<u64, Vec<(usize, usize)>> = HashMap::new();
        for (pi, l) in logs.iter().enumerate() {
            for (ri, r) in l.records.iter().enumerate() {
                by_page.entry(r.page).or_default().push((pi, ri));
            }
        }
        if let Some(max) = by_page.keys().max() {
            pool.ensure_allocated(max + 1);
        }
        let mut pages: Vec<u64> = by_page.keys().copied().collect();
        pages.sort_unstable();
        let applied: Vec<Vec<AtomicBool>> = logs
            .iter()
            .map(|l| {
                (0..l.records.len())
                    .map(|_| AtomicBool::new(false))
                    .collect()
            })
            .collect();
        let beyond_gap: parking_lot::Mutex<HashSet<u64>> = parking_lot::Mutex::new(HashSet::new());
        let gaps = AtomicU64::new(0);
        let redone = AtomicU64::new(0);
        let threads = threads.max(1);
        let chunk = pages.len().div_ceil(threads).max(1);
        let page_size = pool.page_size();
        let redo_result: Result<()> = std::thread::scope(|s| {
            let handles: Vec<_> = pages
                .chunks(chunk)
                .map(|range| {
                    let (by_page, logs, applied, beyond_gap, gaps, redone) =
                        (&by_page, &logs, &applied, &beyond_gap, &gaps, &redone);
                    s.spawn(move || -> Result<()> {
                        for pid in range {
                            let mut recs = by_page[pid].clone();
                            recs.sort_by_key(|&(pi, ri)| logs[pi].records[ri].gsn);
                            let mut guard = pool.exclusive_for_redo(*pid)?;
                            let mut current = page::page_gsn(guard.data());
                            for (n, &(pi, ri)) in recs.iter().enumerate() {
                                let r = &logs[pi].records[ri];
                                if r.gsn <= current {
                                    applied[pi][ri].store(true, Ordering::Relaxed);
                                    continue;
                                }
                                if r.prev != current {
                                    gaps.fetch_add(1, Ordering::Relaxed);
                                    let mut g = beyond_gap.lock();
                                    for &(pj, rj) in &recs[n..] {
                                        g.insert(logs[pj].records[rj].txn);
                                    }
                                    break;
                                }
                                let rec = record::decode(&r.bytes).map_err(|e| {
                                    corruption(
                                        Path::new("log"),
                                        r.gsn,
                                        format!("record decoded in analysis fails now: {e}"),
                                    )
                                })?;
                                let data = guard.data_mut();
                                apply(data, &rec).map_err(|detail| {
                                    corruption(
                                        pool.file().path(),
                                        pid * page_size as u64,
                                        format!(
                                            "redo of record GSN {} on page {pid}: {detail}",
                                            r.gsn
                                        ),
                                    )
                                })?;
                                page::set_page_gsn(data, r.gsn);
                                current = r.gsn;
                                applied[pi][ri].store(true, Ordering::Relaxed);
                                redone.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Ok(())
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap_or_else(|_| {
                    Err(Error::InvalidOptions("redo thread panicked".into()))
                })?;
            }
            Ok(())
        });
        redo_result?;
        let beyond_gap = beyond_gap.into_inner();
        report.gaps = gaps.load(Ordering::Relaxed) as usize;
        report.records_redone = redone.load(Ordering::Relaxed);
        report.pages_redone = pages.len();
        report.committed_beyond_gap = winners.intersection(&beyond_gap).count();
        if report.committed_beyond_gap > 0 {
            tracing::warn!(
                count = report.committed_beyond_gap,
                "commits whose log has a gap are rolled back (they were never acknowledged)"
            );
        }
        let ended: HashSet<u64> = logs.iter().flat_map(|l| l.ended.iter().copied()).collect();
        let mut losers = HashSet::new();
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
        let applied = applied
            .into_iter()
            .map(|v| v.into_iter().map(|a| a.into_inner()).collect())
            .collect();
        Ok(Recovery {
            logs,
            applied,
            losers,
            report,
        })
    }

    /// Undo every loser through `log` (which marks its records as
    /// compensation and closes each loser with an end record).
    pub fn undo(&mut self, pool: &BufferPool, log: &mut dyn UndoLog) -> Result<()> {
        let t0 = Instant::now();
        // Records of each loser, applied ones only, in GSN order.
        let mut per_txn: HashMap<u64, Vec<(usize, usize)>> = HashMap::new();
        for (pi, l) in self.logs.iter().enumerate() {
            for (ri, r) in l.records.iter().enumerate() {
                if self.losers.contains(&r.txn)
                    && self.applied[pi][ri]
                    && r.kind != RecordKind::Image
                {
                    per_txn.entry(r.txn).or_default().push((pi, ri));
                }
            }
        }
        let mut undone = 0;
        let mut txns: Vec<u64> = per_txn.keys().copied().collect();
        txns.sort_unstable();
        for txn in txns {
            let mut recs = per_txn.remove(&txn).unwrap_or_default();
            recs.sort_by_key(|&(pi, ri)| self.logs[pi].records[ri].gsn);
            // A compensation record undoes the newest not yet compensated
            // change of the same key (undo runs newest-first per key). Runtime
            // rollbacks undo in undo-list order, which is not log order (a
            // placeholder's value update has no undo entry of its own), so
            // matching by key, not by counting, finds what is left to undo.
            let mut open: Vec<(usize, usize, u32, Vec<u8>)> = Vec::new();
            let mut compensated = 0;
            for &(pi, ri) in &recs {
                let r = &self.logs[pi].records[ri];
                let rec = record::decode(&r.bytes).map_err(|e| {
                    corruption(
                        Path::new("log"),
                        r.gsn,
                        format!("record decoded in analysis fails now: {e}"),
                    )
                })?;
                let key = match &rec.body {
                    RecordBody::Insert { key, .. }
                    | RecordBody::Update { key, .. }
                    | RecordBody::Remove { key, .. } => key.to_vec(),
                    _ => continue,
                };
                if r.compensation {
                    if let Some(i) = open
                        .iter()
                        .rposition(|(_, _, t, k)| *t == r.tree && *k == key)
                    {
                        open.remove(i);
                        compensated += 1;
                    }
                } else {
                    open.push((pi, ri, r.tree, key));
                }
            }
            let ordinary: Vec<(usize, usize)> =
                open.into_iter().map(|(pi, ri, _, _)| (pi, ri)).collect();
            let todo = ordinary.len();
            tracing::debug!(
                txn = format_args!("{txn:#x}"),
                records = ordinary.len(),
                compensated,
                "undoing a loser"
            );
            log.begin_undo(txn);
            for &(pi, ri) in ordinary[..todo].iter().rev() {
                let r = &self.logs[pi].records[ri];
                let rec = record::decode(&r.bytes).map_err(|e| {
                    corruption(
                        Path::new("log"),
                        r.gsn,
                        format!("record decoded in analysis fails now: {e}"),
                    )
                })?;
                let tree = BTree::open(r.tree as u64);
                let plog = log.page_log();
                match &rec.body {
                    RecordBody::Insert { key, .. } => tree.restore(pool, plog, key, None)?,
                    RecordBody::Remove { key, before } => {
                        tree.restore(pool, plog, key, Some(before))?
                    }
                    RecordBody::Update { key, diff } => {
                        let current = tree.get(pool, key)?.map(|(tid, v)| {
                            let mut stored = tid.to_le_bytes().to_vec();
                            stored.extend_from_slice(&v);
                            stored
                        });
                        match current.as_deref().and_then(|c| diff.undo_update(c)) {
                            Some(before) => tree.restore(pool, plog, key, Some(&before))?,
                            // Already at its before-state: an earlier undo
                            // of this change survived.
                            None if current
                                .as_deref()
                                .and_then(|c| diff.apply_update(c))
                                .is_some() =>
                            {
                                continue
                            }
                            None => {
                                return Err(corruption(
                                    pool.file().path(),
                                    r.page * pool.page_size() as u64,
                                    "undo of an update does not match the current value",
                                ))
                            }
                        }
                    }
                    _ => {}
                }
                undone += 1;
            }
            log.end_undo(txn)?;
        }
        self.report.records_undone = undone;
        self.report.undo = t0.elapsed();
        tracing::info!(losers = self.report.losers, records = undone, "undo done");
        Ok(())
    }
}

/// What undo needs from the log: compensation logging of the reverting
/// changes and an end record per loser.
pub trait UndoLog {
    fn begin_undo(&mut self, txn: u64);
    fn page_log(&self) -> &dyn PageLog;
    fn end_undo(&mut self, txn: u64) -> Result<()>;
}
