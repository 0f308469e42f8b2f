//! Every table's rows, by table name: what the `command` tests compare
//! between a recovered database and the same calls run without a crash
//! (`command.rs`, `command_parallel_replay.rs`).

use waypoint::Database;

pub type Digest = Vec<(String, Vec<(Vec<u8>, Vec<u8>)>)>;

/// Every table's rows, by table name.
pub fn digest(db: &Database) -> Digest {
    let mut out = Vec::new();
    let mut names = db.table_names();
    names.sort();
    let mut s = db.session();
    for name in names {
        let t = db.table(&name).unwrap();
        let mut tx = s.begin().unwrap();
        out.push((name, tx.scan(&t, .., usize::MAX).unwrap()));
    }
    out
}
