//! The write-ahead log through the public API: pipelined commits, the
//! counters in `Database::stats()`, and the commit protocols' basic promise.

use std::sync::Arc;
use waypoint::io::{CrashPolicy, SimStorage};
use waypoint::{CommitProtocol, Database, Options};

fn options(sim: &SimStorage, commit: CommitProtocol) -> Options {
    Options {
        page_size: Some(4096),
        buffer_pool_bytes: 64 * 4096,
        storage: Some(Arc::new(sim.clone())),
        commit,
        ..Options::default()
    }
}

/// One session keeps 64 commits in flight; once their handles resolve, a
/// power loss keeps every one of them.
#[test]
fn pipelined_commits_are_durable_once_their_handles_resolve() {
    for commit in [
        CommitProtocol::RfaGroup,
        CommitProtocol::FlushAll,
        CommitProtocol::Rfa,
        CommitProtocol::Group,
    ] {
        let sim = SimStorage::new(11);
        let db = Database::open("/db", options(&sim, commit)).unwrap();
        let t = db.create_table("t").unwrap();
        let mut s = db.session();
        let mut pending = Vec::new();
        for i in 0..64u32 {
            let mut tx = s.begin().unwrap();
            tx.insert(&t, &i.to_be_bytes(), b"value").unwrap();
            pending.push(tx.commit_pipelined().unwrap());
        }
        // Visible at once, before durability.
        let mut tx = s.begin().unwrap();
        assert_eq!(tx.scan(&t, .., 1000).unwrap().len(), 64);
        drop(tx);
        for p in pending {
            p.wait().unwrap();
        }
        let stats = db.stats();
        assert!(stats.wal.commits >= 64, "{:?}", stats.wal);
        assert!(
            stats.wal.syncs >= 1 && stats.wal.syncs <= 64 + 2,
            "{commit:?}: {:?}",
            stats.wal
        );
        drop(s);
        drop(t);
        // Power loss without a clean close: only synced bytes survive.
        std::mem::forget(db);
        sim.crash(CrashPolicy::DropAll);
        let db = Database::open("/db", options(&sim, commit)).unwrap();
        let t = db.table("t").unwrap();
        let mut s = db.session();
        let mut tx = s.begin().unwrap();
        assert_eq!(
            tx.scan(&t, .., 1000).unwrap().len(),
            64,
            "{commit:?}: a resolved pipelined commit was lost"
        );
        let report = db.recovery_report().unwrap();
        assert!(report.records > 0 && report.winners >= 64, "{report:?}");
    }
}
