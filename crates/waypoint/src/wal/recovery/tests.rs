//! Tests of undo's grouping of losers.

use crate::ids::Tid;
use crate::io::{CrashPolicy, SimStorage};
use crate::persist::SessionLog;
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
