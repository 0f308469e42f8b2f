//! A single-partition stored procedure must keep to its partition's rows
//! under a scheme that runs calls serially per partition (`command`;
//! seed 001 §II-B): with the tables' partitioning keys registered, a call
//! that reads, scans or writes another partition's row is refused with
//! `Error::ProcedurePartition`, rolled back and logged nowhere. Calls
//! that stay home, multi-partition calls, tables without a key and the
//! schemes without a serial order are not affected. Rows of an
//! insert-only table belong to no partition: inserting one keeps a call
//! off the replay's barriers, reading one is refused.

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use waypoint::io::{CrashPolicy, SimStorage, Storage};
use waypoint::{
    CommandOptions, Database, Error, Options, Partition, Persistence, Procedures, Transaction,
};

const PARTITIONS: u64 = 4;
const ACCOUNTS: u64 = 16;

/// What a probe does, from the partition of `route`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
enum Probe {
    Write {
        account: u64,
    },
    Read {
        account: u64,
    },
    ScanFrom {
        account: u64,
    },
    IndexScan {
        owner: u64,
    },
    /// A write to the `notes` table, which has no partitioning key.
    Note {
        key: u64,
    },
    /// An insert into, or a read of, the insert-only `audit` table.
    Audit {
        key: u64,
    },
    ReadAudit {
        key: u64,
    },
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Call {
    route: u64,
    probe: Probe,
}

fn account_key(a: u64) -> [u8; 8] {
    a.to_be_bytes()
}

fn probe(tx: &mut Transaction<'_>, c: &Call) -> waypoint::Result<()> {
    let accounts = tx.table("accounts")?;
    match c.probe {
        Probe::Write { account } => tx.upsert(&accounts, &account_key(account), b"written")?,
        Probe::Read { account } => {
            tx.get(&accounts, &account_key(account))?;
        }
        Probe::ScanFrom { account } => {
            tx.scan(&accounts, &account_key(account)[..].., 1)?;
        }
        Probe::IndexScan { owner } => {
            let by_owner = tx.index("accounts_by_owner")?;
            tx.index_scan(
                &by_owner,
                &owner.to_be_bytes()[..]..=&owner.to_be_bytes()[..],
                10,
                false,
            )?;
        }
        Probe::Note { key } => {
            let notes = tx.table("notes")?;
            tx.upsert(&notes, &key.to_be_bytes(), b"note")?;
        }
        Probe::Audit { key } => {
            let audit = tx.table("audit")?;
            tx.insert(&audit, &key.to_be_bytes(), b"audited")?;
        }
        Probe::ReadAudit { key } => {
            let audit = tx.table("audit")?;
            tx.get(&audit, &key.to_be_bytes())?;
        }
    }
    Ok(())
}

fn procedures() -> Procedures {
    Procedures::new()
        .multi("setup", |tx: &mut Transaction<'_>, n: &u64| {
            let accounts = tx.table("accounts")?;
            for a in 0..*n {
                // The value is the owner: the account itself.
                tx.insert(&accounts, &account_key(a), &a.to_be_bytes())?;
            }
            Ok(())
        })
        .unwrap()
        .single("probe", |c: &Call| c.route, probe)
        .unwrap()
        .add("probe_everywhere", |_: &Call| Partition::All, probe)
        .unwrap()
        .index(
            "accounts_by_owner",
            Arc::new(|_k: &[u8], v: &[u8]| Some(v.get(..8)?.to_vec())),
        )
        .unwrap()
        .partition_key("accounts", |k: &[u8]| {
            u64::from_be_bytes(k.try_into().expect("an 8-byte account key"))
        })
        .unwrap()
        .insert_only("audit")
        .unwrap()
}

fn open(dir: &std::path::Path, persistence: Persistence) -> Database {
    let db = Database::open(
        dir,
        Options {
            persistence,
            procedures: procedures(),
            ..Options::default()
        },
    )
    .unwrap();
    create(&db);
    db
}

/// The tables, the index and the accounts.
fn create(db: &Database) {
    let accounts = db.create_table("accounts").unwrap();
    db.create_table("notes").unwrap();
    db.create_table("audit").unwrap();
    db.create_index(
        &accounts,
        "accounts_by_owner",
        Arc::new(|_k: &[u8], v: &[u8]| Some(v.get(..8)?.to_vec())),
    )
    .unwrap();
    db.session().call::<_, ()>("setup", &ACCOUNTS).unwrap();
}

fn command() -> Persistence {
    Persistence::Command(CommandOptions {
        partitions: PARTITIONS as usize,
        digests: false,
        ..CommandOptions::default()
    })
}

fn value(db: &Database, account: u64) -> Vec<u8> {
    let accounts = db.table("accounts").unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    tx.get(&accounts, &account_key(account)).unwrap().unwrap()
}

fn call(db: &Database, name: &str, route: u64, probe: Probe) -> waypoint::Result<()> {
    db.session().call::<_, ()>(name, &Call { route, probe })
}

#[test]
fn a_call_that_writes_another_partitions_row_is_refused_and_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), command());
    let before = value(&db, 1);
    match call(&db, "probe", 0, Probe::Write { account: 1 }) {
        Err(Error::ProcedurePartition {
            name,
            table,
            home,
            row,
        }) => {
            assert_eq!(
                (name.as_str(), table.as_str(), home, row),
                ("probe", "accounts", 0, 1)
            );
        }
        other => panic!("expected ProcedurePartition, got {other:?}"),
    }
    assert_eq!(value(&db, 1), before, "the refused call was rolled back");
    // Its own partition's rows (account 4 is in partition 0 of 4) are fine.
    call(&db, "probe", 0, Probe::Write { account: 4 }).unwrap();
    assert_eq!(value(&db, 4), b"written");
}

#[test]
fn reads_and_scans_of_another_partition_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), command());
    for (probe, row) in [
        (Probe::Read { account: 2 }, 2),
        // The scan's first row from account 5 is account 5 (partition 1).
        (Probe::ScanFrom { account: 5 }, 1),
        // The index entry of owner 3 names account 3 (partition 3).
        (Probe::IndexScan { owner: 3 }, 3),
    ] {
        match call(&db, "probe", 0, probe) {
            Err(Error::ProcedurePartition {
                row: r, home: 0, ..
            }) => assert_eq!(r, row, "{probe:?}"),
            other => panic!("{probe:?}: expected ProcedurePartition, got {other:?}"),
        }
    }
    // The same probes from the rows' own partitions pass.
    call(&db, "probe", 2, Probe::Read { account: 2 }).unwrap();
    call(&db, "probe", 5, Probe::ScanFrom { account: 5 }).unwrap();
    call(&db, "probe", 3, Probe::IndexScan { owner: 3 }).unwrap();
}

#[test]
fn multi_partition_calls_tables_without_a_key_and_other_schemes_are_not_checked() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), command());
    call(&db, "probe_everywhere", 0, Probe::Write { account: 1 }).unwrap();
    assert_eq!(value(&db, 1), b"written");
    call(&db, "probe", 0, Probe::Note { key: 7 }).unwrap();
    drop(db);
    // Under a scheme without a serial order, partitions are not used.
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Persistence::default());
    call(&db, "probe", 0, Probe::Write { account: 1 }).unwrap();
    assert_eq!(value(&db, 1), b"written");
}

#[test]
fn a_partitioning_key_registered_twice_is_refused() {
    let r = Procedures::new()
        .partition_key("accounts", |_: &[u8]| 0)
        .unwrap()
        .partition_key("accounts", |_: &[u8]| 0);
    assert!(matches!(r, Err(Error::InvalidOptions(_))), "{r:?}");
}

#[test]
fn a_call_may_insert_into_an_insert_only_table_but_not_read_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), command());
    call(&db, "probe", 1, Probe::Audit { key: 5 }).unwrap();
    let r = call(&db, "probe", 2, Probe::ReadAudit { key: 5 });
    assert!(
        matches!(&r, Err(Error::Unsupported { what }) if what.contains("audit")),
        "{r:?}"
    );
    let r = Procedures::new()
        .insert_only("audit")
        .unwrap()
        .partition_key("audit", |_: &[u8]| 0);
    assert!(matches!(r, Err(Error::InvalidOptions(_))), "{r:?}");
}

/// Calls of every partition inserting into the insert-only table replay
/// beside each other after a crash, not one by one as barriers.
#[test]
fn inserts_into_an_insert_only_table_are_not_replay_barriers() {
    const CALLS: u64 = 40;
    let sim = SimStorage::new(3);
    let options = || Options {
        storage: Some(Arc::new(sim.clone()) as Arc<dyn Storage>),
        persistence: command(),
        procedures: procedures(),
        recovery_threads: 2,
        ..Options::default()
    };
    let db = Database::open("/db", options()).unwrap();
    create(&db);
    for i in 0..CALLS {
        call(&db, "probe", i, Probe::Audit { key: i }).unwrap();
    }
    std::mem::forget(db);
    sim.crash(CrashPolicy::KeepAll);
    let db = Database::open("/db", options()).unwrap();
    let stats = db.stats().persistence.command;
    assert_eq!(stats.replayed_calls, CALLS + 1, "{stats:?}");
    assert_eq!(stats.replay_threads, 2, "{stats:?}");
    // The catalog changes and the multi-partition setup only.
    assert!(stats.replay_barriers < 10, "{stats:?}");
    let audit = db.table("audit").unwrap();
    let mut s = db.session();
    let mut tx = s.begin().unwrap();
    assert_eq!(tx.scan(&audit, .., 1000).unwrap().len() as u64, CALLS);
}
