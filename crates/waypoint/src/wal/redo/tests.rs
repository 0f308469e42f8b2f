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
    assert!(
        !report.redo_decided_serially,
        "a whole split is decided page shard by page shard: {report:?}"
    );
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
    assert!(
        report.redo_decided_serially,
        "a split one page cannot take is decided by the serial sweep: {report:?}"
    );
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
