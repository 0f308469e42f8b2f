//! The commit hook of the persistence seam (`persist::CommitView`): a
//! session's log sees each commit's TID, its write set (table, key, new
//! value or tombstone, in (table, key) order) and the TIDs it read, which
//! is what a value log or a command log records. Index entries are not in
//! the write set: they follow from the rows.

use std::sync::{Arc, Mutex};
use waypoint::btree::NoLog;
use waypoint::persist::{CommitView, SessionLog};
use waypoint::{Database, Options, Persistence, Tid};

type Seen = (Tid, Vec<(u32, Vec<u8>, Option<Vec<u8>>)>, Vec<Tid>);

/// Records every commit it is shown.
struct Recorder {
    page_log: NoLog,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl SessionLog for Recorder {
    fn page_log(&self) -> &dyn waypoint::btree::PageLog {
        &self.page_log
    }
    fn on_commit(&mut self, commit: &CommitView<'_>) -> waypoint::Result<()> {
        let mut writes = Vec::new();
        commit
            .writes()
            .for_each(&mut |w| writes.push((w.table, w.key.to_vec(), w.value.map(<[u8]>::to_vec))));
        assert_eq!(writes.len(), commit.writes().len());
        assert!(commit.procedure().is_none(), "no stored procedure ran");
        self.seen
            .lock()
            .unwrap()
            .push((commit.tid(), writes, commit.depends_on().to_vec()));
        Ok(())
    }
}

#[test]
fn a_session_log_sees_each_commits_tid_write_set_and_dependencies() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        dir.path(),
        Options {
            persistence: Persistence::None,
            ..Options::default()
        },
    )
    .unwrap();
    let a = db.create_table("a").unwrap();
    let b = db.create_table("b").unwrap();
    let index = db
        .create_index(
            &a,
            "a_by_value",
            Arc::new(|_k: &[u8], v: &[u8]| Some(v.to_vec())),
        )
        .unwrap();
    drop(index);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut s = db.session();
    s.set_log(Box::new(Recorder {
        page_log: NoLog,
        seen: Arc::clone(&seen),
    }));

    let mut tx = s.begin().unwrap();
    tx.insert(&b, b"k2", b"v2").unwrap();
    tx.insert(&a, b"k1", b"v1").unwrap();
    tx.insert(&a, b"k0", b"v0").unwrap();
    let first = tx.commit().unwrap().tid;

    let mut tx = s.begin().unwrap();
    assert_eq!(tx.get(&a, b"k1").unwrap(), Some(b"v1".to_vec()));
    tx.update(&a, b"k0", b"w0").unwrap();
    tx.delete(&b, b"k2").unwrap();
    let second = tx.commit().unwrap().tid;

    let mut tx = s.begin().unwrap();
    assert_eq!(tx.scan(&a, .., usize::MAX).unwrap().len(), 2);
    assert_eq!(tx.commit().unwrap().tid, Tid::ZERO, "read-only");

    let seen = seen.lock().unwrap();
    let (ta, tb) = (a.id(), b.id());
    assert_eq!(
        seen[0],
        (
            first,
            vec![
                (ta, b"k0".to_vec(), Some(b"v0".to_vec())),
                (ta, b"k1".to_vec(), Some(b"v1".to_vec())),
                (tb, b"k2".to_vec(), Some(b"v2".to_vec())),
            ],
            vec![],
        )
    );
    assert!(second > first);
    assert_eq!(
        seen[1],
        (
            second,
            vec![
                (ta, b"k0".to_vec(), Some(b"w0".to_vec())),
                (tb, b"k2".to_vec(), None),
            ],
            vec![first],
        ),
        "the update and the delete overwrote, and the get read, the first commit's records"
    );
    assert_eq!(seen[2], (Tid::ZERO, vec![], vec![first, second]));
    assert_eq!(seen.len(), 3);
}
