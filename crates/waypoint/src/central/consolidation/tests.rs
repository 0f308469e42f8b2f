//! The consolidation array on one partition of a simulated disk: many
//! inserters at once get consecutive GSNs and disjoint byte ranges in
//! join order, groups form, and the log reads back in GSN order.

use super::*;
use crate::io::{CrashPolicy, SimStorage, Storage};
use crate::logstore::segment;
use crate::wal::record::{self, RecordBody, RecordHeader};
use std::path::Path;

/// An insert record of `value_len` bytes for page `page` (its prev GSN
/// `prev`), without its GSN.
fn header(page: u64, prev: Gsn) -> RecordHeader {
    RecordHeader {
        txn: 1,
        page,
        prev_gsn: prev,
        tree: 1,
        ..RecordHeader::default()
    }
}

/// Eight threads insert one or three records at a time through the array:
/// every insert lands, GSNs are consecutive in log order (the log decodes
/// with strictly increasing GSNs), the latch was taken once per group,
/// and a power loss keeps everything made durable.
#[test]
fn concurrent_inserts_land_in_gsn_order_with_one_latch_per_group() {
    let sim = SimStorage::new(41);
    let log_dir = Path::new("/db/wal");
    sim.create_dir_all(log_dir).unwrap();
    sim.sync_dir(Path::new("/")).unwrap();
    sim.sync_dir(Path::new("/db")).unwrap();
    let storage: Arc<dyn crate::io::Storage> = Arc::new(sim.clone());
    let p = Partition::open_for(
        crate::persist::SchemeKind::Aether,
        storage,
        log_dir,
        0,
        LogPos::ZERO,
        Gsn::ZERO,
        Vec::new(),
    )
    .unwrap();
    p.set_sync_interval(std::time::Duration::ZERO);
    let latch = LogLatch::default();
    let array = Consolidation::default();
    const THREADS: usize = 8;
    const INSERTS: usize = 200;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (p, latch, array) = (&p, &latch, &array);
            s.spawn(move || {
                let mut buf = Vec::new();
                let mut last = LogPos::ZERO;
                for i in 0..INSERTS {
                    let count = if i % 5 == 0 { 3 } else { 1 };
                    let value = vec![t as u8; 20 + (i * 37 + t * 11) % 300];
                    let body = RecordBody::Insert {
                        key: b"key",
                        value: &value,
                    };
                    let prev = Gsn::new((i as u64) * 3);
                    let headers: Vec<_> = (0..count).map(|k| header(k as u64 + 2, prev)).collect();
                    let sizes: Vec<_> = headers.iter().map(|h| record::SizeAtGsn::of(h, &body)).collect();
                    let share = array
                        .insert(latch, p, t, Gsn::ZERO, &sizes)
                        .unwrap_or_else(|(_, e)| panic!("{e}"));
                    buf.clear();
                    for (k, h) in headers.iter().enumerate() {
                        let h = RecordHeader {
                            gsn: share.first_gsn().plus(k as u64),
                            ..*h
                        };
                        record::encode(&h, &body, &mut buf);
                    }
                    last = share.fill(&mut buf);
                }
                p.wait_durable(last).unwrap();
            });
        }
    });
    let stats = array.stats();
    let inserts = (THREADS * INSERTS) as u64;
    assert_eq!(stats.inserts, inserts);
    assert_eq!(latch.stats().acquisitions, stats.groups, "only leaders take the latch");
    assert!(stats.groups <= inserts && stats.max_group >= 1, "{stats:?}");
    p.shutdown().unwrap();
    drop(p);
    sim.crash(CrashPolicy::DropAll);
    let dir = crate::wal::partition::partition_dir(log_dir, 0);
    let mut gsns = Vec::new();
    for (start, seg) in segment::list_segments(&sim, &dir).unwrap() {
        let bytes = sim.read_current(&seg).unwrap();
        let scan = record::scan_segment(&bytes[segment::HEADER_SIZE as usize..], start);
        gsns.extend(scan.records.iter().map(|(_, r)| r.header.gsn.get()));
    }
    let per_thread: u64 = (0..INSERTS).map(|i| if i % 5 == 0 { 3 } else { 1 }).sum();
    let expected: Vec<u64> = (1..=per_thread * THREADS as u64).collect();
    assert_eq!(gsns, expected, "every record once, in GSN order");
}
