//! Redo: which logged page changes recovery re-applies, and applying them
//! (seed 000 §3.7, with the gap rule of
//! docs/decisions/022-recovery-and-the-gap-rule.md).
//!
//! Each page record names the page GSN it was made on (`prev_gsn`), so the
//! records of one page form chains. Redo of a page follows the chain from
//! the GSN its copy on disk has; a record whose predecessor is missing (it
//! lived in another partition and was lost) is not applied, nor is anything
//! chained after it: a **gap**. Transactions with a record that is not
//! applied are losers even if their commit survived.
//!
//! A structure modification is a **group** of records, one per page (split,
//! merge, root change; `RecordHeader::smo_more`): page images, and for a
//! split the kept page's `split` and the parent's `separator` records. Half
//! a split is not a tree, so a group is applied all or nothing: if one of
//! its pages cannot take its record, none of them does, and that stops the
//! chains of the other pages too. The decision for a group depends only on records with lower GSNs
//! (every GSN of a group is above every previous GSN of its pages, see
//! `WalSessionLog::log_pages`), so one sweep over all records in GSN order
//! decides every record exactly once. Applying the decisions then runs in
//! parallel over disjoint page ranges.
//!
//! Invariants checked here:
//! - a group is never half on disk and half not redoable (the WAL rule plus
//!   the GSN ordering of groups make that impossible; finding it is
//!   corruption);
//! - records of a page are applied in chain order, each to the exact state
//!   it was made on.
//!
//! Records below the superblock's log floor are not in the log: every page
//! state at or below the floor is on disk. A record made on such a state
//! (`prev_gsn <= floor`) therefore continues any on-disk state at or below
//! the floor (a page freed before a clean close and reused after it starts
//! from GSN 0).
//!
//! Records that were not applied stay in the log. A later recovery decides
//! them the same way (the log prefix is synced before anything new is
//! appended, and the surviving records do not change), and records written
//! after a recovery carry GSNs above every record that survived it, so they
//! chain from the recovered page states and never collide with the
//! abandoned records.

use super::record::{self, RecordBody};
use super::recovery::{Logged, PartitionLog};
use crate::btree::node::{Node, NodeMut};
use crate::buffer::page::{self, PageKind};
use crate::buffer::BufferPool;
use crate::error::{Error, Result};
use crate::ids::Gsn;
use rustc_hash::{FxHashMap, FxHashSet};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering};

/// What redo decided and did.
pub(super) struct RedoOutcome {
    /// Per partition, per record: applied now or already in the page on disk.
    pub applied: Vec<Vec<bool>>,
    /// Transactions with a record that was not applied.
    pub beyond_gap: FxHashSet<u64>,
    /// Records or groups that could not be applied.
    pub gaps: usize,
    pub pages: usize,
    pub records_redone: u64,
}

/// A record's relation to the page it changes, before the sweep.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum OnDisk {
    /// The page on disk already contains it.
    Contained,
    /// Its GSN is at or below the page's on-disk GSN but the page never had
    /// it: an abandoned record of an earlier recovery.
    Abandoned,
    /// Above the on-disk GSN: redo may apply it.
    Above,
}

/// The records of one page, sorted by GSN, as (partition, record) indices.
type PageRecords = Vec<(usize, usize)>;

/// A page's GSN on disk and the records its disk copy contains.
type DiskState = (u64, Gsn, PageRecords);

/// A record of the log partition `log` is wrong in itself; the error
/// names the partition's directory (the record's place in it is no longer
/// known here, so its GSN stands for the offset).
fn log_corruption(log: &PartitionLog, gsn: Gsn, detail: impl Into<String>) -> Error {
    Error::Corruption {
        path: log.dir.clone(),
        offset: gsn.get(),
        detail: format!("record GSN {gsn}: {}", detail.into()),
    }
}

fn page_corruption(pool: &BufferPool, pid: u64, detail: impl Into<String>) -> Error {
    Error::Corruption {
        path: pool.file().path().to_path_buf(),
        offset: pid * pool.page_size() as u64,
        detail: detail.into(),
    }
}

/// Does a record made on page GSN `prev` continue a page now at `current`?
fn continues(prev: Gsn, current: Gsn, floor: Gsn) -> bool {
    prev == current || (prev <= floor && current <= floor)
}

/// Run `work` over `pages` split into `threads` contiguous ranges.
fn parallel<T: Send>(
    pages: &[u64],
    threads: usize,
    work: impl Fn(&[u64]) -> Result<Vec<T>> + Sync,
) -> Result<Vec<T>> {
    let chunk = pages.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = pages
            .chunks(chunk)
            .map(|range| {
                let work = &work;
                s.spawn(move || work(range))
            })
            .collect();
        let mut out = Vec::with_capacity(pages.len());
        for h in handles {
            let part = h.join().unwrap_or_else(|_| {
                Err(Error::Internal {
                    what: "a redo thread panicked".into(),
                })
            })?;
            out.extend(part);
        }
        Ok(out)
    })
}

pub(super) fn redo(
    logs: &[PartitionLog],
    pool: &BufferPool,
    threads: usize,
    floor: Gsn,
) -> Result<RedoOutcome> {
    let record = |(pi, ri): (usize, usize)| -> &Logged { &logs[pi].records[ri] };
    let mut by_page: FxHashMap<u64, PageRecords> = FxHashMap::default();
    for (pi, l) in logs.iter().enumerate() {
        for ri in 0..l.records.len() {
            by_page
                .entry(l.records[ri].page)
                .or_default()
                .push((pi, ri));
        }
    }
    for recs in by_page.values_mut() {
        recs.sort_by_key(|&at| record(at).gsn);
    }
    if let Some(max) = by_page.keys().max() {
        pool.ensure_allocated(max + 1);
    }
    let mut pages: Vec<u64> = by_page.keys().copied().collect();
    pages.sort_unstable();

    // 1. Each page's GSN on disk, and which of its records the disk copy
    //    already contains: the chain ending at that GSN.
    let disk: Vec<DiskState> = parallel(&pages, threads, |range| {
        let mut out = Vec::with_capacity(range.len());
        for &pid in range {
            let d = page::page_gsn(pool.exclusive_for_redo(pid)?.data());
            let recs = &by_page[&pid];
            let mut contained = Vec::new();
            let mut at = d;
            while let Ok(i) = recs.binary_search_by_key(&at, |&r| record(r).gsn) {
                contained.push(recs[i]);
                let prev = record(recs[i]).prev;
                if prev >= at {
                    return Err(log_corruption(
                        &logs[recs[i].0],
                        at,
                        "its previous page GSN is not below its own",
                    ));
                }
                at = prev;
            }
            out.push((pid, d, contained));
        }
        Ok(out)
    })?;
    let mut state: Vec<Vec<OnDisk>> = logs
        .iter()
        .map(|l| vec![OnDisk::Above; l.records.len()])
        .collect();
    let mut current: FxHashMap<u64, Gsn> =
        FxHashMap::with_capacity_and_hasher(disk.len(), Default::default());
    let mut disk_gsn: FxHashMap<u64, Gsn> =
        FxHashMap::with_capacity_and_hasher(disk.len(), Default::default());
    for (pid, d, contained) in &disk {
        for &(pi, ri) in &by_page[pid] {
            if logs[pi].records[ri].gsn <= *d {
                state[pi][ri] = OnDisk::Abandoned;
            }
        }
        for &(pi, ri) in contained {
            state[pi][ri] = OnDisk::Contained;
        }
        current.insert(*pid, *d);
        disk_gsn.insert(*pid, *d);
    }

    // 2. One sweep in GSN order decides every record; a group is one event.
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
            match state[pi][ri] {
                OnDisk::Contained => contained = Some(r.page),
                OnDisk::Abandoned => redoable = false,
                OnDisk::Above => redoable &= continues(r.prev, current[&r.page], floor),
            }
        }
        if redoable {
            for ri in start..end {
                applied[pi][ri] = true;
                if state[pi][ri] == OnDisk::Above {
                    current.insert(recs[ri].page, recs[ri].gsn);
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

    // 3. Apply the decided records, pages in parallel.
    let redone = AtomicU64::new(0);
    let page_size = pool.page_size();
    parallel(&pages, threads, |range| -> Result<Vec<()>> {
        for &pid in range {
            let d = disk_gsn[&pid];
            let mut guard = pool.exclusive_for_redo(pid)?;
            let mut at = page::page_gsn(guard.data());
            if at != d {
                return Err(page_corruption(
                    pool,
                    pid,
                    format!("page GSN changed from {d} to {at} between redo passes"),
                ));
            }
            for &(pi, ri) in &by_page[&pid] {
                let r = &logs[pi].records[ri];
                if !applied[pi][ri] || r.gsn <= d {
                    continue;
                }
                debug_assert!(continues(r.prev, at, floor), "redo follows the page chain");
                let rec = record::decode(&r.bytes).map_err(|e| {
                    log_corruption(
                        &logs[pi],
                        r.gsn,
                        format!("decoded in analysis, it fails now: {e}"),
                    )
                })?;
                let data = guard.data_mut();
                apply(data, &rec).map_err(|detail| Error::Corruption {
                    path: pool.file().path().to_path_buf(),
                    offset: pid * page_size as u64,
                    detail: format!(
                        "redo of record GSN {} of log partition {} (made on page GSN {}) on page {pid} at GSN {at} (on disk {d}, log floor {floor}): {detail}",
                        r.gsn,
                        logs[pi].dir.display(),
                        r.prev
                    ),
                })?;
                page::set_page_gsn(data, r.gsn);
                at = r.gsn;
                redone.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(Vec::new())
    })?;
    Ok(RedoOutcome {
        applied,
        beyond_gap,
        gaps,
        pages: pages.len(),
        records_redone: redone.into_inner(),
    })
}

/// Apply one page record to a page image (redo). Shared with nothing else:
/// the runtime path changes pages through the tree and logs what it did;
/// this re-does exactly that change from the record.
fn apply(page: &mut [u8], rec: &record::Record<'_>) -> std::result::Result<(), String> {
    if let RecordBody::Insert { key, .. }
    | RecordBody::Update { key, .. }
    | RecordBody::Remove { key, .. } = &rec.body
    {
        // A checksum-valid record can still be wrong (a writer bug, a
        // hand-edited log): never let one break a node's invariants.
        let node = Node::new(page);
        if !node.is_leaf() {
            return Err("a tuple record names a page that is not a leaf".into());
        }
        if !node.covers(key) {
            return Err("the record's key lies outside the page's fences".into());
        }
    }
    match &rec.body {
        RecordBody::Image(image) => {
            // Later records change the page through `NodeMut`, which
            // assumes a valid node and only debug-asserts its
            // preconditions: an image of a node is checked in a copy, so a
            // page never takes one that is no valid node.
            let mut new = page.to_vec();
            if !image.write_to_page(&mut new) {
                return Err("page image does not fit the page".into());
            }
            new[6] = rec.header.page_kind;
            if matches!(
                PageKind::from_byte(rec.header.page_kind),
                Some(PageKind::BtreeLeaf | PageKind::BtreeInner)
            ) {
                Node::new(&new)
                    .validate()
                    .map_err(|e| format!("the page image is not a valid node: {e}"))?;
            }
            page.copy_from_slice(&new);
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
        RecordBody::Freed => {
            page[6] = PageKind::Free as u8;
            Ok(())
        }
        RecordBody::Split { at, separator } => {
            NodeMut::new(page).split_keep_left(*at as usize, separator)?;
            Ok(())
        }
        RecordBody::Separator {
            separator,
            left,
            right,
        } => {
            NodeMut::new(page).insert_separator(separator, *left, *right)?;
            Ok(())
        }
        RecordBody::Commit { .. } | RecordBody::End => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    //! Structure modifications across a crash, built step by step so each
    //! test reaches exactly the log state it is about (the randomized
    //! power-loss tests in `tests/crash.rs` hunt for the rest).
    use crate::btree::BTree;
    use crate::buffer::BufferPool;
    use crate::ids::{Gsn, Tid};
    use crate::io::{CrashPolicy, OpenMode, SimStorage, Storage};
    use crate::logstore::segment;
    use crate::logstore::segment::parse_segment_name;
    use crate::persist::SessionLog;
    use crate::wal::partition::partition_dir;
    use crate::wal::record::{self, RecordKind};
    use crate::wal::recovery::{Recovery, RecoveryReport};
    use crate::wal::test_support::{durable, key, leaves, pool, small_tree, VALUE};
    use crate::wal::WalSessionLog;
    use std::path::Path;
    use std::sync::Arc;

    /// Insert keys `from`, `from + 1`, .. (all below 1000, so into the
    /// leftmost leaf) through `log` until that leaf splits.
    fn split_left_leaf(pool: &BufferPool, log: &WalSessionLog, tree: BTree, from: u64) {
        let leaves_before = leaves(pool, tree);
        let mut i = from;
        while leaves(pool, tree) == leaves_before {
            tree.insert(pool, log, &key(i), Tid::new(2), &VALUE, None).unwrap();
            i += 1;
            assert!(i < 100, "the left leaf should have split by now");
        }
    }

    fn recover(sim: &SimStorage) -> (Arc<BufferPool>, RecoveryReport) {
        let pool = pool(sim);
        let recovery = Recovery::analyze_and_redo(sim, Path::new("/db/wal"), &pool, 2, Gsn::ZERO).unwrap();
        (pool, recovery.report)
    }

    /// Regression (found by `waypoint simulate`, 2026-11-22): a merge logs
    /// the page it frees as a `freed` record inside its structure
    /// modification, and analysis refused any non-image record there, so
    /// every recovery of a log holding such a merge failed.
    #[test]
    fn merges_that_free_pages_are_redone() {
        let sim = SimStorage::new(5);
        let (pool, wal, tree) = small_tree(&sim);
        let mut s = wal.session_log(3).unwrap();
        s.on_begin();
        for i in 5..60 {
            tree.remove(&pool, &s, &key(i * 1000), None).unwrap();
        }
        let root_is_leaf = |pool: &BufferPool| {
            let root = pool.exclusive(tree.root()).unwrap();
            crate::btree::node::Node::new(root.data()).is_leaf()
        };
        assert!(
            root_is_leaf(&pool),
            "the removals merged the leaves into the root"
        );
        durable(&wal, 3);
        pool.stop();
        drop(s);
        sim.crash(CrashPolicy::KeepAll);

        let (pool, report) = recover(&sim);
        assert_eq!(report.gaps, 0, "{report:?}");
        assert_eq!(tree.check(&pool).expect("the tree is whole after redo"), 5);
        assert!(root_is_leaf(&pool));
    }

    /// The path and current bytes of partition `slot`'s last segment under
    /// `/db/wal`.
    fn last_segment(sim: &SimStorage, slot: u32) -> (std::path::PathBuf, Vec<u8>) {
        let dir = partition_dir(Path::new("/db/wal"), slot);
        let (_, segment) = segment::list_segments(sim, &dir).unwrap().pop().unwrap();
        let file = sim.open(&segment, OpenMode::Existing).unwrap();
        let mut buf = vec![0; file.len().unwrap() as usize];
        file.read_at(&mut buf, 0).unwrap();
        (segment, buf)
    }

    /// The records of one partition's last segment under `/db/wal`.
    fn logged_kinds(sim: &SimStorage, slot: u32) -> Vec<(RecordKind, usize, bool)> {
        let (segment, bytes) = last_segment(sim, slot);
        let base = parse_segment_name(&segment).unwrap();
        let scan = record::scan_segment(&bytes[segment::HEADER_SIZE as usize..], base);
        scan.records
            .iter()
            .map(|(_, r)| (r.body.kind(), r.encoded_len(), r.header.smo_more))
            .collect()
    }

    /// A leaf split logs the leaf it kept and the parent's new separator as
    /// small records (log format 3), only the new leaf as an image; redo
    /// from those records alone, with no page of the data file written,
    /// rebuilds the same tree.
    #[test]
    fn a_split_is_logged_as_kept_half_separator_and_new_page_and_redone() {
        let sim = SimStorage::new(4);
        let (pool, wal, tree) = small_tree(&sim);
        let setup_leaves = leaves(&pool, tree);
        let mut s2 = wal.session_log(2).unwrap();
        s2.on_begin();
        split_left_leaf(&pool, &s2, tree, 1);
        let tuples = tree.check(&pool).unwrap();
        durable(&wal, 2);
        pool.stop();
        drop(s2);

        let logged = logged_kinds(&sim, 2);
        let group: Vec<_> = logged
            .iter()
            .skip_while(|(k, _, _)| !k.is_structural())
            .take_while(|(k, _, _)| k.is_structural())
            .collect();
        let kinds: Vec<RecordKind> = group.iter().map(|(k, _, _)| *k).collect();
        assert_eq!(
            kinds,
            [RecordKind::Separator, RecordKind::Split, RecordKind::Image],
            "parent, kept leaf, new leaf: {logged:?}"
        );
        for (kind, len, _) in &group[..2] {
            assert!(*len <= 96, "{kind:?} record of {len} bytes");
        }
        assert!(group[0].2 && group[1].2 && !group[2].2, "one group");
        sim.crash(CrashPolicy::DropAll);

        let (pool, report) = recover(&sim);
        assert_eq!(report.gaps, 0, "{report:?}");
        assert_eq!(
            tree.check(&pool).expect("the tree is whole after redo"),
            tuples
        );
        assert_eq!(
            leaves(&pool, tree),
            setup_leaves + 1,
            "the split was redone"
        );
        for i in 0..60 {
            assert!(
                tree.get(&pool, &key(i * 1000), None).unwrap().0.is_some(),
                "key {i}"
            );
        }
    }

    /// A split whose left leaf's previous record (in another partition) was
    /// lost must not be redone on the new right leaf and the parent either:
    /// the keys moved right would hang off a parent whose left leaf still
    /// holds them (found by the three-session power-loss test as "fences
    /// differ" errors before groups were redone all or nothing).
    #[test]
    fn a_split_beyond_a_gap_is_redone_on_none_of_its_pages() {
        let sim = SimStorage::new(1);
        let (pool, wal, tree) = small_tree(&sim);
        let setup_leaves = leaves(&pool, tree);
        // Session 1 changes the left leaf; its record never becomes durable.
        let mut s1 = wal.session_log(1).unwrap();
        s1.on_begin();
        tree.insert(&pool, &s1, &key(1), Tid::new(2), &VALUE, None).unwrap();
        // Session 2 splits that leaf and makes its own partition durable.
        let mut s2 = wal.session_log(2).unwrap();
        s2.on_begin();
        split_left_leaf(&pool, &s2, tree, 2);
        durable(&wal, 2);
        pool.stop();
        drop((s1, s2));
        sim.crash(CrashPolicy::DropAll);

        let (pool, report) = recover(&sim);
        assert!(report.gaps >= 1, "the lost record is a gap: {report:?}");
        let tuples = tree.check(&pool).expect("the tree is whole after redo");
        assert_eq!(tuples, 60, "only the durable setup keys are in the tree");
        assert_eq!(
            leaves(&pool, tree),
            setup_leaves,
            "the split was not redone"
        );
        for i in 0..60 {
            assert!(
                tree.get(&pool, &key(i * 1000), None).unwrap().0.is_some(),
                "key {i}"
            );
        }
    }

    /// The log of a partition ending inside a structure modification (its
    /// last image torn away) ends before the structure modification.
    #[test]
    fn a_split_cut_short_at_the_log_tail_is_not_redone() {
        let sim = SimStorage::new(2);
        let (pool, wal, tree) = small_tree(&sim);
        let setup_leaves = leaves(&pool, tree);
        let mut s2 = wal.session_log(2).unwrap();
        s2.on_begin();
        split_left_leaf(&pool, &s2, tree, 1);
        durable(&wal, 2);
        pool.stop();
        drop(s2);
        // Cut the partition inside its last structure modification.
        let (segment, buf) = last_segment(&sim, 2);
        let file = sim.open(&segment, OpenMode::Existing).unwrap();
        let base = parse_segment_name(&segment).unwrap();
        let header = segment::HEADER_SIZE as usize;
        let scan = record::scan_segment(&buf[header..], base);
        let last_of_group = scan
            .records
            .windows(2)
            .rposition(|w| w[0].1.header.smo_more && !w[1].1.header.smo_more)
            .map(|i| scan.records[i + 1].0)
            .expect("the log holds a structure modification of several pages");
        assert!(scan
            .records
            .iter()
            .any(|(_, r)| r.body.kind() == RecordKind::Image));
        file.set_len(segment::HEADER_SIZE + last_of_group).unwrap();
        file.sync_data().unwrap();
        drop(file);
        sim.crash(CrashPolicy::DropAll);

        let (pool, report) = recover(&sim);
        assert_eq!(report.torn_tails, 1, "{report:?}");
        tree.check(&pool).expect("the tree is whole after redo");
        assert_eq!(
            leaves(&pool, tree),
            setup_leaves,
            "the split was not redone"
        );
        // The partition's log now ends where the structure modification began.
        let (_, buf) = last_segment(&sim, 2);
        let scan = record::scan_segment(&buf[header..], base);
        assert!(
            scan.records.last().is_none_or(|(_, r)| !r.header.smo_more),
            "the unfinished structure modification was truncated"
        );
    }
}
