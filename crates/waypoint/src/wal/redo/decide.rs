//! Which records redo applies (seed 000 §3.7, with the gap rule of
//! docs/decisions/022-recovery-and-the-gap-rule.md): per page shard in
//! parallel where that is exact, else one serial sweep in GSN order (see
//! the module header of `redo` for why the two agree).
//!
//! Invariants: a record is applied only onto the exact page state it was
//! made on; a structure modification is applied on all its pages or on
//! none; a group that is on disk for one page but cannot be redone on
//! another is corruption. Builds with debug assertions (every test)
//! decide every log both ways and assert that they agree.

use super::shards::Shard;
use super::{continues, page_corruption, OnDisk};
use crate::parallel::taking_turns;
use crate::buffer::BufferPool;
use crate::error::Result;
use crate::ids::Gsn;
use crate::wal::recovery::PartitionLog;
use rustc_hash::{FxHashMap, FxHashSet};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};

/// What redo applies.
pub(super) struct Decided {
    /// Per partition, per record.
    pub applied: Vec<Vec<bool>>,
    /// Per shard, per entry of the shard.
    pub by_entry: Vec<Vec<bool>>,
    /// Transactions with a record that is not applied.
    pub beyond_gap: FxHashSet<u64>,
    /// Records, or structure modifications, that cannot be applied.
    pub gaps: usize,
    /// Decided by the serial sweep.
    pub serially: bool,
}

/// Can a record in relation `state` to its page's disk copy be redone on
/// the page now at `current`?
fn takes(state: OnDisk, prev: Gsn, current: Gsn, floor: Gsn) -> bool {
    match state {
        OnDisk::Contained => true,
        OnDisk::Abandoned => false,
        OnDisk::Above => continues(prev, current, floor),
    }
}

/// One shard decided page by page, every structure modification taken as
/// applied on this shard's pages where they can take it.
struct ShardDecision {
    applied: Vec<bool>,
    /// Per record of a structure modification: (partition, group), and
    /// whether its page could take it.
    members: Vec<((u32, u32), bool)>,
    beyond_gap: FxHashSet<u64>,
    gaps: usize,
}

fn per_page(logs: &[PartitionLog], shard: &Shard, floor: Gsn) -> ShardDecision {
    let mut out = ShardDecision {
        applied: vec![false; shard.entries.len()],
        members: Vec::new(),
        beyond_gap: FxHashSet::default(),
        gaps: 0,
    };
    for run in &shard.pages {
        let mut current = run.disk;
        for i in run.entries.clone() {
            let e = shard.entries[i];
            let r = &logs[e.part as usize].records[e.rec as usize];
            let ok = takes(shard.state[i], r.prev, current, floor);
            if r.smo != 0 {
                out.members.push(((e.part, r.smo), ok));
            }
            if ok {
                out.applied[i] = true;
                if shard.state[i] == OnDisk::Above {
                    current = r.gsn;
                }
            } else if r.smo == 0 {
                out.gaps += 1;
                out.beyond_gap.insert(r.txn);
            }
        }
    }
    out
}

pub(super) fn decide(
    logs: &[PartitionLog],
    shards: &[Shard],
    pool: &BufferPool,
    threads: usize,
    floor: Gsn,
) -> Result<Decided> {
    let decided = taking_turns("redo decision", threads, shards.iter().collect(), |_, shard| {
        Ok(per_page(logs, shard, floor))
    })?;
    let mut groups: FxHashMap<(u32, u32), bool> = FxHashMap::default();
    for d in &decided {
        for &(group, ok) in &d.members {
            *groups.entry(group).or_insert(true) &= ok;
        }
    }
    if !groups.values().all(|&ok| ok) {
        // A structure modification that some page cannot take: its
        // failure changes the chains of its other pages, which the
        // shards decided without it.
        tracing::info!("a structure modification cannot be redone: deciding redo serially");
        return serial(logs, shards, pool, floor);
    }
    let applied: Vec<Vec<AtomicBool>> = logs
        .iter()
        .map(|l| (0..l.records.len()).map(|_| AtomicBool::new(false)).collect())
        .collect();
    taking_turns("redo decision", threads, shards.iter().collect(), |s, shard| {
        for (e, &ok) in shard.entries.iter().zip(&decided[s].applied) {
            applied[e.part as usize][e.rec as usize].store(ok, Ordering::Relaxed);
        }
        Ok(())
    })?;
    let mut out = Decided {
        applied: applied
            .into_iter()
            .map(|v| v.into_iter().map(AtomicBool::into_inner).collect())
            .collect(),
        by_entry: Vec::with_capacity(shards.len()),
        beyond_gap: FxHashSet::default(),
        gaps: 0,
        serially: false,
    };
    for d in decided {
        out.gaps += d.gaps;
        out.beyond_gap.extend(d.beyond_gap);
        out.by_entry.push(d.applied);
    }
    #[cfg(debug_assertions)]
    {
        let reference = serial(logs, shards, pool, floor)?;
        assert!(
            reference.applied == out.applied
                && reference.by_entry == out.by_entry
                && reference.gaps == out.gaps
                && reference.beyond_gap == out.beyond_gap,
            "redo decided per page shard differs from the serial sweep"
        );
    }
    Ok(out)
}

/// One sweep over all records in GSN order; a group is one event.
fn serial(
    logs: &[PartitionLog],
    shards: &[Shard],
    pool: &BufferPool,
    floor: Gsn,
) -> Result<Decided> {
    // Per record: its page's slot in `current`, and its relation to the
    // page's disk copy.
    let mut slot: Vec<Vec<u32>> = logs.iter().map(|l| vec![0; l.records.len()]).collect();
    let mut state: Vec<Vec<OnDisk>> = logs
        .iter()
        .map(|l| vec![OnDisk::Above; l.records.len()])
        .collect();
    let mut current: Vec<Gsn> = Vec::new();
    for shard in shards {
        for run in &shard.pages {
            let at = u32::try_from(current.len()).expect("fewer pages than records");
            current.push(run.disk);
            for i in run.entries.clone() {
                let e = shard.entries[i];
                slot[e.part as usize][e.rec as usize] = at;
                state[e.part as usize][e.rec as usize] = shard.state[i];
            }
        }
    }
    let mut applied: Vec<Vec<bool>> = logs.iter().map(|l| vec![false; l.records.len()]).collect();
    let mut beyond_gap = FxHashSet::default();
    let mut gaps = 0;
    let mut next = vec![0usize; logs.len()];
    let mut heap: BinaryHeap<Reverse<(Gsn, usize)>> = logs
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.records.is_empty())
        .map(|(pi, l)| Reverse((l.records[0].gsn, pi)))
        .collect();
    while let Some(Reverse((_, pi))) = heap.pop() {
        let recs = &logs[pi].records;
        let start = next[pi];
        let mut end = start + 1;
        if recs[start].smo != 0 {
            while end < recs.len() && recs[end].smo == recs[start].smo {
                end += 1;
            }
        }
        next[pi] = end;
        if end < recs.len() {
            heap.push(Reverse((recs[end].gsn, pi)));
        }
        let mut redoable = true;
        let mut contained = None;
        for (ri, r) in recs.iter().enumerate().take(end).skip(start) {
            let s = state[pi][ri];
            if s == OnDisk::Contained {
                contained = Some(r.page);
            }
            redoable &= takes(s, r.prev, current[slot[pi][ri] as usize], floor);
        }
        if redoable {
            for ri in start..end {
                applied[pi][ri] = true;
                if state[pi][ri] == OnDisk::Above {
                    current[slot[pi][ri] as usize] = recs[ri].gsn;
                }
            }
            continue;
        }
        if let Some(on_disk) = contained {
            let stuck = recs[start..end]
                .iter()
                .find(|r| r.page != on_disk)
                .map_or(on_disk, |r| r.page);
            return Err(page_corruption(
                pool,
                on_disk,
                format!(
                    "structure modification at GSN {} (log partition {}) is on disk for page {on_disk} but cannot be redone on page {stuck}: the page holds changes the log does not (the log lost records, or the data file is from another time than the log)",
                    recs[start].gsn,
                    logs[pi].dir.display()
                ),
            ));
        }
        gaps += 1;
        for r in &recs[start..end] {
            beyond_gap.insert(r.txn);
        }
    }
    let by_entry = shards
        .iter()
        .map(|shard| {
            shard
                .entries
                .iter()
                .map(|e| applied[e.part as usize][e.rec as usize])
                .collect()
        })
        .collect();
    Ok(Decided {
        applied,
        by_entry,
        beyond_gap,
        gaps,
        serially: true,
    })
}
