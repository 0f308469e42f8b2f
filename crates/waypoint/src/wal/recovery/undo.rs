//! Undo of the losers (seed 000 §3.7; docs/decisions/022-recovery-and-the-gap-rule.md):
//! each loser's applied, not yet compensated tuple changes are reverted
//! logically through its tree, newest first, logged as compensation and
//! closed by an end record once every compensation is durable. Losers that
//! share no key are undone in parallel groups.

use super::partition_log::Logged;
use super::{corruption, Recovery};
use crate::btree::tree::encode_value;
use crate::btree::{BTree, PageLog};
use crate::buffer::BufferPool;
use crate::error::Result;
use crate::parallel::on_threads;
use crate::wal::record::{RecordBody, RecordKind};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

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
        on_threads("undo", logs.iter_mut().zip(work), |_, (log, groups)| {
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
            let rec = self.logs[pi].record_of(r)?;
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
        let rec = self.logs[pi].record_of(r)?;
        let tree = BTree::open(r.tree as u64);
        match &rec.body {
            RecordBody::Insert { key, .. } => tree.restore(pool, plog, key, None)?,
            RecordBody::Remove { key, before } => tree.restore(pool, plog, key, Some(before))?,
            RecordBody::Update { key, diff } => {
                let current = tree
                    .get(pool, key, None)?
                    .0
                    .map(|(tid, v)| encode_value(tid, &v));
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

/// What undo needs from the log: compensation logging of the reverting
/// changes and an end record per loser.
pub trait UndoLog {
    fn begin_undo(&mut self, txn: u64);
    fn page_log(&self) -> &dyn PageLog;
    fn end_undo(&mut self, txn: u64) -> Result<()>;
    /// Make everything this log appended durable.
    fn flush(&mut self) -> Result<()>;
}
