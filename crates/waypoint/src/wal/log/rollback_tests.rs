//! Rollbacks in the log: the end record waits for the compensation
//! records' dependencies, recovery pairs a compensation with the change it
//! undoes, and a rollback on a full log completes in memory.

use super::*;
use crate::buffer::{page, BufferPool};
use crate::ids::{Gsn, Tid};
use crate::io::{CrashPolicy, Fault, FaultKind, SimStorage};
use crate::persist::{CommitView, SessionLog};
use crate::wal::test_support::{durable, key, recover, small_tree, VALUE};

fn leaf_gsn(pool: &BufferPool, tree: crate::btree::BTree, k: &[u8]) -> Gsn {
    // The two-level setup tree: the root's child for `k`.
    let root = pool.shared(tree.root()).unwrap();
    let (_, leaf) = crate::btree::node::Node::new(root.data())
        .child_for(k)
        .unwrap();
    drop(root);
    page::page_gsn(pool.shared(leaf).unwrap().data())
}

/// Regression test (found while building the full-log policy): a
/// rollback's end record used to be appended before its compensation
/// records' dependencies on other partitions were durable. Here session
/// B's compensation lands on a leaf right after session A's record,
/// A's partition fails before that record is durable, and B's own
/// writer makes B's end record durable anyway: after a power loss redo
/// stops at the gap on the leaf, B's compensation is not applied, and
/// the end record kept recovery from undoing B: its placeholder
/// stayed. Now the end record waits for those dependencies, so B stays
/// a loser and recovery removes the placeholder.
#[test]
fn a_rollback_whose_compensation_follows_a_lost_record_of_another_partition_stays_a_loser() {
    let sim = SimStorage::new(21);
    let (pool_before, wal, tree) = small_tree(&sim);
    let mut b = wal.session_log(1).unwrap();
    let mut a = wal.session_log(2).unwrap();
    b.on_begin();
    tree.insert(&pool_before, &b, &key(1), Tid::new(2), &[], None)
        .unwrap();
    durable(&wal, 1);
    a.on_begin();
    tree.insert(&pool_before, &a, &key(2), Tid::new(3), &VALUE, None)
        .unwrap();
    // B's commit failed (a conflict, say): it rolls back on top of A's
    // record, then A's log fails before that record is durable.
    b.begin_rollback();
    assert!(tree
        .remove(&pool_before, &b, &key(1), None)
        .unwrap()
        .is_some());
    // A segment of partition 2 (segment names start with a digit; the
    // partition's spare file does not).
    sim.inject(Fault::at(sim.op_count(), FaultKind::Eio).on_path("p00002/0"));
    let ended = b.end_rollback();
    assert!(ended.is_err(), "A's record never became durable");
    durable(&wal, 1);
    pool_before.stop();
    drop((a, b));
    sim.crash(CrashPolicy::DropAll);

    let (pool, recovery) = recover(&sim, 1, 1);
    assert!(
        tree.get(&pool, &key(1), None).unwrap().0.is_none(),
        "the rolled-back placeholder survived recovery: {:?}",
        recovery.report
    );
    assert!(tree.get(&pool, &key(2), None).unwrap().0.is_none());
    assert_eq!(tree.check(&pool).unwrap(), 60);
}

/// Recovery pairs a compensating remove with the placeholder's insert
/// it undoes, not with the install's update that followed it. A
/// rollback after a partial install (the placeholder's insert, its
/// install's update, then a failure on another key) has one undo entry
/// for the key, so one compensation; paired with the update, the insert
/// stayed open and recovery's undo deleted the key, over whatever a
/// later transaction had put there. The engine does not let a later
/// transaction take the key before the end record is durable (the
/// rollback waits under its locks and poisons the database if it
/// cannot), so the tree is driven directly here: a rollback that does
/// not wait relies on this pairing (docs/experiments/README.md).
#[test]
fn a_compensating_remove_closes_the_placeholder_insert_and_its_install() {
    let sim = SimStorage::new(23);
    let (pool_before, wal, tree) = small_tree(&sim);
    let mut b = wal.session_log(1).unwrap();
    let mut a = wal.session_log(2).unwrap();
    b.on_begin();
    tree.insert(&pool_before, &b, &key(1), Tid::new(2), &VALUE, None)
        .unwrap();
    assert!(tree
        .update(&pool_before, &b, &key(1), Tid::new(3), &VALUE, None)
        .unwrap());
    b.begin_rollback();
    assert!(tree
        .remove(&pool_before, &b, &key(1), None)
        .unwrap()
        .is_some());
    durable(&wal, 1);
    // B's end record never becomes durable.
    sim.inject(Fault::at(sim.op_count(), FaultKind::Eio).on_path("p00001/0"));
    assert!(b.end_rollback().is_err());
    a.on_begin();
    tree.insert(&pool_before, &a, &key(1), Tid::new(5 << 16 | 2), &VALUE, None)
        .unwrap();
    a.on_commit(&CommitView::without_writes(Tid::new(5 << 16 | 2), &[]))
        .unwrap();
    a.wait_durable()
        .expect("A depends only on B's durable compensation");
    pool_before.stop();
    drop((a, b));
    sim.crash(CrashPolicy::DropAll);

    let (pool, recovery) = recover(&sim, 1, 1);
    assert_eq!(recovery.report.losers, 1, "{:?}", recovery.report);
    assert_eq!(recovery.report.records_undone, 0, "{:?}", recovery.report);
    assert_eq!(
        tree.get(&pool, &key(1), None)
            .unwrap()
            .0
            .map(|(tid, _)| tid),
        Some(Tid::new(5 << 16 | 2)),
        "recovery undid B's insert over A's: {:?}",
        recovery.report
    );
}

/// On a full log disk a rollback completes in memory although its
/// compensation records cannot be logged: readers see it undone, the
/// pool is not poisoned, and the pages it changed carry GSNs the WAL
/// gate refuses, so they never reach the data file before recovery
/// undoes the transaction from its durable records.
#[test]
fn a_rollback_on_a_full_log_completes_in_memory_and_its_pages_stay_out_of_the_data_file() {
    let sim = SimStorage::new(22);
    let (pool, wal, tree) = small_tree(&sim);
    let mut s = wal.session_log(1).unwrap();
    s.on_begin();
    tree.insert(&pool, &s, &key(1), Tid::new(2), &VALUE, None).unwrap();
    durable(&wal, 1);
    tree.insert(&pool, &s, &key(2), Tid::new(2), &VALUE, None).unwrap();
    // The disk fills up: flushing the second record fails.
    sim.inject(Fault::at(sim.op_count(), FaultKind::Enospc).on_path(".wal"));
    let p = wal.partition(1).unwrap();
    let e = p.wait_durable(p.appended()).unwrap_err();
    assert!(e.is_log_full(), "{e:?}");
    assert!(wal.check_writable().unwrap_err().is_log_full());
    assert!(p.is_full());
    // The commit failed: roll back both inserts. Nothing can be logged.
    s.begin_rollback();
    assert!(tree.remove(&pool, &s, &key(2), None).unwrap().is_some());
    assert!(tree.remove(&pool, &s, &key(1), None).unwrap().is_some());
    let e = s.end_rollback().unwrap_err();
    assert!(e.is_log_full(), "{e:?}");
    assert!(tree.get(&pool, &key(1), None).unwrap().0.is_none());
    assert!(tree.get(&pool, &key(2), None).unwrap().0.is_none());
    assert_eq!(tree.check(&pool).unwrap(), 60);
    // The leaf is above what the log can vouch for: refused, not written,
    // and nothing is poisoned.
    let limit = wal.write_limit();
    let gsn = leaf_gsn(&pool, tree, &key(1));
    assert!(gsn > limit, "leaf GSN {gsn}, limit {limit}");
    assert!(wal.ensure_durable(gsn).unwrap_err().is_log_full());
    let e = pool.flush_all().unwrap_err();
    assert!(e.is_log_full(), "{e:?}");
    pool.check_healthy().unwrap();
    assert!(
        pool.exclusive(tree.root()).is_ok(),
        "the pool is not poisoned"
    );
    let data = sim.read_current(Path::new("/db/data")).unwrap_or_default();
    for page in data.chunks(4096) {
        assert!(
            page::page_gsn(page) <= limit,
            "a page above the log's durable GSN reached the data file"
        );
    }
    pool.stop();
}
