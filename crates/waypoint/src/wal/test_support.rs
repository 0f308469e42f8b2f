//! Building blocks for the log's unit tests: a small tree on a simulated
//! disk whose log and pages the tests then steer record by record.

use crate::btree::BTree;
use crate::buffer::{BufferPool, PageWritePolicy, PoolConfig};
use crate::ids::{Gsn, Tid};
use crate::io::{OpenMode, SimStorage, Storage};
use crate::persist::SessionLog;
use crate::wal::recovery::{Analysis, Recovery};
use crate::wal::{CommitProtocol, Wal};
use std::path::Path;
use std::sync::Arc;

pub const VALUE: [u8; 100] = [7; 100];

pub fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

/// A buffer pool of 64 frames of 4 KiB over `/db/data`.
pub fn pool(sim: &SimStorage) -> Arc<BufferPool> {
    let file = sim
        .open(Path::new("/db/data"), OpenMode::CreateIfMissing)
        .unwrap();
    BufferPool::start(
        PoolConfig {
            page_size: 4096,
            frames: 64,
        },
        file,
        1,
        Vec::new(),
    )
    .unwrap()
}

/// A tree of a few leaves holding the keys 0, 1000, .., 59000, durable in
/// the log of slot 100 (the data file holds nothing yet).
pub fn small_tree(sim: &SimStorage) -> (Arc<BufferPool>, Arc<Wal>, BTree) {
    sim.create_dir_all(Path::new("/db")).unwrap();
    let pool = pool(sim);
    sim.sync_dir(Path::new("/")).unwrap();
    sim.sync_dir(Path::new("/db")).unwrap();
    let wal = Wal::new(
        Arc::new(sim.clone()),
        Path::new("/db/wal"),
        CommitProtocol::Rfa,
        Vec::new(),
        Gsn::ZERO,
    )
    .unwrap();
    pool.set_page_write_policy(PageWritePolicy::StealBehindGate(wal.clone()));
    let mut sys = wal.session_log(100).unwrap();
    sys.on_begin();
    let tree = BTree::create(&pool, &sys).unwrap();
    for i in 0..60 {
        tree.insert(&pool, &sys, &key(i * 1000), Tid::new(1), &VALUE, None)
            .unwrap();
    }
    sys.on_commit(&crate::persist::CommitView::without_writes(Tid::new(1), &[]))
        .unwrap();
    sys.wait_durable().unwrap();
    assert!(leaves(&pool, tree) >= 2, "the setup tree has an inner root");
    (pool, wal, tree)
}

/// Leaves under the root of a two-level tree.
pub fn leaves(pool: &BufferPool, tree: BTree) -> usize {
    let root = pool.exclusive(tree.root()).unwrap();
    crate::btree::node::Node::new(root.data()).count() + 1
}

/// Make everything slot `slot` logged so far durable.
pub fn durable(wal: &Wal, slot: u16) {
    let p = wal.partition(slot).unwrap();
    p.wait_durable(p.appended()).unwrap();
}

/// After `sim` crashed: analysis and redo on `threads` threads into a fresh
/// pool, then undo through `undo_threads` session logs of the system's
/// slots on the recovered partitions (as `Database::open` does).
pub fn recover(sim: &SimStorage, threads: usize, undo_threads: u16) -> (Arc<BufferPool>, Recovery) {
    let pool = pool(sim);
    let analysis = Analysis::read(sim, Path::new("/db/wal"), Gsn::ZERO).unwrap();
    analysis.apply(sim).unwrap();
    let wal = Wal::new(
        Arc::new(sim.clone()),
        Path::new("/db/wal"),
        CommitProtocol::Rfa,
        analysis.partitions(),
        Gsn::ZERO,
    )
    .unwrap();
    let mut recovery = analysis.redo(&pool, threads).unwrap();
    let mut undo_logs: Vec<_> = (0..undo_threads)
        .map(|i| wal.session_log(u16::MAX - i).unwrap())
        .collect();
    recovery.undo(&pool, &mut undo_logs).unwrap();
    (pool, recovery)
}
