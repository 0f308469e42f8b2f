//! `Database::stats` names its trees' contention by table and index.

use crate::io::SimStorage;
use crate::{Database, Options, TreeContention};
use std::path::Path;
use std::sync::Arc;

#[test]
fn contention_is_reported_by_table_and_index_name() {
    let sim = SimStorage::new(7);
    let options = Options {
        storage: Some(Arc::new(sim.clone())),
        ..Options::default()
    };
    let db = Database::open(Path::new("/db"), options).unwrap();
    let (quiet, busy) = (db.create_table("quiet").unwrap(), db.create_table("busy").unwrap());
    assert!(db.stats().contention.is_empty(), "nothing contended yet");
    let pool = &db.inner.shared.pool;
    pool.note_retry(busy.info.tree.root());
    pool.note_retry(busy.info.tree.root());
    pool.note_retry(crate::catalog::CATALOG_ROOT);
    let contention = db.stats().contention;
    assert_eq!(
        contention.into_iter().collect::<Vec<_>>(),
        [
            ("(catalog)".to_string(), TreeContention { retries: 1, waits: 0 }),
            ("busy".to_string(), TreeContention { retries: 2, waits: 0 }),
        ]
    );
    // A dropped tree's counts go with it (a later tree may reuse its root).
    db.drop_table("busy").unwrap();
    assert!(!db.stats().contention.contains_key("busy"));
    assert_eq!(pool.contention_by_root().get(&busy.info.tree.root()), None);
    drop(quiet);
    db.close().unwrap();
}
