//! Analysis over all partitions (seed 000 §3.7): every segment walked on
//! the recovery threads, each partition decided in stream order, then the
//! winners (a commit all of whose dependencies survived), the
//! check against the synced positions of the checkpoint metadata
//! (docs/decisions/023-synced-positions-outside-the-log.md), the changes to
//! the log's files, and redo into a [`Recovery`] whose losers undo reverts.
//! Nothing on disk changes before [`Analysis::apply`].

use super::partition_log::{analyze_partition, list_segments, partition_ids, PartitionLog, Segments};
use super::report::{RecoveredPartition, RecoveryReport};
use super::segment_walk::walk_segment;
use super::Recovery;
use crate::buffer::BufferPool;
use crate::error::{Error, Result};
use crate::parallel::taking_turns;
use crate::ids::{Gsn, LogPos};
use crate::io::Storage;
use crate::persist::SchemeKind;
use crate::wal::partition::partition_dir;
use crate::wal::redo;
use rustc_hash::{FxHashMap, FxHashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What analysis found in the log, before anything on disk is changed.
pub struct Analysis {
    log_dir: PathBuf,
    logs: Vec<PartitionLog>,
    winners: FxHashSet<u64>,
    floor: Gsn,
    /// The recovery threads: analysis and its file changes run on at most
    /// this many.
    threads: usize,
    report: RecoveryReport,
}

impl Analysis {
    /// What analysis found so far (redo and undo fill in the rest).
    pub fn report(&self) -> &RecoveryReport {
        &self.report
    }

    /// Where each partition ends and its GSN clock: what the log manager
    /// continues from (redo changes neither).
    pub fn partitions(&self) -> Vec<RecoveredPartition> {
        self.logs.iter().map(|l| l.recovered.clone()).collect()
    }

    /// Analysis: read every partition below `log_dir` (on one thread) and
    /// decide the winners. Reads only; records with a GSN at or below
    /// `floor` are ignored.
    pub fn read(storage: &dyn Storage, log_dir: &Path, floor: Gsn) -> Result<Analysis> {
        Self::read_for(SchemeKind::PerWorker, storage, log_dir, floor, 1)
    }

    /// [`Analysis::read`] of `scheme`'s log: a segment of another scheme
    /// is refused ([`Error::LogSchemeMismatch`]). Analysis runs on
    /// `threads` threads whatever the number of partitions: every segment
    /// of every partition is read, decoded and walked by the next free
    /// thread (`segment_walk`), then each partition's segments are decided
    /// in stream order (`analyze_partition`), the partitions again shared
    /// out among the threads.
    pub fn read_for(
        scheme: SchemeKind,
        storage: &dyn Storage,
        log_dir: &Path,
        floor: Gsn,
        threads: usize,
    ) -> Result<Analysis> {
        let t0 = Instant::now();
        let threads = threads.max(1);
        let partitions: Vec<Segments> = partition_ids(storage, log_dir)?
            .into_iter()
            .map(|id| list_segments(storage, log_dir, id))
            .collect::<Result<_>>()?;
        let work: Vec<(u32, LogPos, PathBuf)> = partitions
            .iter()
            .flat_map(|p| p.starts.iter().map(|(start, path)| (p.id, *start, path.clone())))
            .collect();
        let mut walks = taking_turns(
            "log analysis",
            threads,
            work,
            |_, (id, start, path)| walk_segment(storage, (id, scheme, floor), start, path),
        )?
        .into_iter();
        let per_partition: Vec<_> = partitions
            .iter()
            .map(|p| (p, walks.by_ref().take(p.starts.len()).collect::<Vec<_>>()))
            .collect();
        let logs = taking_turns("log analysis", threads, per_partition, |_, (p, walks)| {
            analyze_partition(log_dir, p, walks)
        })?;
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
        let ends: FxHashMap<u32, LogPos> = logs
            .iter()
            .map(|l| (l.recovered.id, l.recovered.end))
            .collect();
        let mut winners: FxHashSet<u64> = FxHashSet::default();
        for l in &logs {
            for (txn, deps) in &l.commits {
                if deps
                    .iter()
                    .all(|(q, pos)| ends.get(q).copied().unwrap_or(LogPos::ZERO) >= *pos)
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
            threads,
            report,
        })
    }

    /// Where each partition's log ends, as (partition, stream position),
    /// for the partitions that keep a segment (in partition order): after
    /// [`Analysis::apply`], what is known to be synced. (A partition
    /// without segments resumes its stream at the position its last
    /// segment's name gave, but no file holds that position.)
    pub fn synced_ends(&self) -> Vec<(u32, LogPos)> {
        self.logs
            .iter()
            .filter(|l| l.end_segment.is_some())
            .map(|l| (l.recovered.id, l.recovered.end))
            .collect()
    }

    /// The largest GSN of any record in the log, those at or below the
    /// floor included, with the directory of its partition.
    pub fn max_gsn(&self) -> Option<(Gsn, &Path)> {
        self.logs
            .iter()
            .filter(|l| l.recovered.clock > Gsn::ZERO)
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
    pub fn check_synced(&self, synced: &[(u32, LogPos)]) -> Result<()> {
        for &(id, expected_end) in synced {
            let found = self.logs.iter().find(|l| l.recovered.id == id);
            let found_end = found.map_or(LogPos::ZERO, |l| l.recovered.end);
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

    /// Make the changes analysis decided on (a partition at a time on each
    /// recovery thread): cut torn tails, remove segments that were never
    /// synced, sync every segment kept. Afterwards every partition's log is
    /// durable up to its end ([`Analysis::synced_ends`]).
    pub fn apply(&self, storage: &dyn Storage) -> Result<()> {
        taking_turns("log analysis", self.threads, self.logs.iter().collect(), |_, l| {
            l.apply(storage)
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
        report.redo_decided_serially = redone.serially;
        report.committed_beyond_gap = winners.intersection(&beyond_gap).count();
        if report.committed_beyond_gap > 0 {
            tracing::warn!(
                count = report.committed_beyond_gap,
                "commits whose log has a gap are rolled back (they were never acknowledged)"
            );
        }
        let ended: FxHashSet<u64> = logs.iter().flat_map(|l| l.ended.iter().copied()).collect();
        // A partition at a time on each thread: a look-up or two per record
        // is redo-sized work.
        let per_log = taking_turns("loser scan", threads.max(1), logs.iter().collect(), |_, l| {
            let mut losers = FxHashSet::default();
            let mut last = None;
            for r in &l.records {
                // A transaction's records are mostly adjacent.
                if last == Some(r.txn) {
                    continue;
                }
                last = Some(r.txn);
                let winner = winners.contains(&r.txn) && !beyond_gap.contains(&r.txn);
                if !winner && !ended.contains(&r.txn) {
                    losers.insert(r.txn);
                }
            }
            Ok(losers)
        })?;
        let mut losers = FxHashSet::default();
        for part in per_log {
            losers.extend(part);
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

#[cfg(test)]
mod tests;
