//! Stored procedures (`Procedures`, `Session::call`) under every scheme:
//! a call runs its body in a transaction and returns its result; the
//! commit hook sees the procedure's name and encoded parameters; unknown
//! names, undecodable parameters and a wrong result type are typed
//! errors; a procedure that fails is rolled back and reaches no log.

use std::sync::{Arc, Mutex};
use waypoint::btree::NoLog;
use waypoint::persist::{CommitView, SessionLog};
use waypoint::{
    encode_params, Database, Error, Options, Partition, Persistence, Procedures, SchemeKind,
    Transaction,
};

fn balance(v: Option<Vec<u8>>) -> u64 {
    v.map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap()))
}

fn deposit(tx: &mut Transaction<'_>, p: &(u64, u64)) -> waypoint::Result<u64> {
    let accounts = tx.table("accounts")?;
    let key = p.0.to_be_bytes();
    let now = balance(tx.get(&accounts, &key)?) + p.1;
    tx.upsert(&accounts, &key, &now.to_be_bytes())?;
    Ok(now)
}

/// Writes, then panics: a failed call like any other, on any thread.
fn explode(tx: &mut Transaction<'_>, account: &u64) -> waypoint::Result<()> {
    let accounts = tx.table("accounts")?;
    tx.upsert(&accounts, &account.to_be_bytes(), &0u64.to_be_bytes())?;
    panic!("a procedure that panics after a write")
}

/// Writes, then fails: nothing of it may stay.
fn overdraw(tx: &mut Transaction<'_>, account: &u64) -> waypoint::Result<()> {
    let accounts = tx.table("accounts")?;
    tx.upsert(&accounts, &account.to_be_bytes(), &0u64.to_be_bytes())?;
    Err(Error::KeyNotFound)
}

fn procedures() -> Procedures {
    Procedures::new()
        .single("deposit", |p: &(u64, u64)| p.0, deposit)
        .unwrap()
        .single("overdraw", |a: &u64| *a, overdraw)
        .unwrap()
        .single("explode", |a: &u64| *a, explode)
        .unwrap()
        .add(
            "total",
            |_: &()| Partition::All,
            |tx: &mut Transaction<'_>, _: &()| {
                let accounts = tx.table("accounts")?;
                let rows = tx.scan(&accounts, .., usize::MAX)?;
                Ok(rows.into_iter().map(|(_, v)| balance(Some(v))).sum::<u64>())
            },
        )
        .unwrap()
}

#[test]
fn a_registry_refuses_a_name_twice_and_names_out_of_range() {
    let twice = procedures().single("deposit", |p: &(u64, u64)| p.0, deposit);
    assert!(matches!(twice, Err(Error::InvalidOptions(m)) if m.contains("twice")));
    let empty = Procedures::new().multi("", deposit);
    assert!(matches!(empty, Err(Error::InvalidOptions(_))));
    let registered = procedures();
    let names: Vec<&str> = registered.names().collect();
    assert_eq!(names, ["deposit", "explode", "overdraw", "total"]);
}

#[test]
fn calls_run_commit_and_fail_with_typed_errors_under_every_scheme() {
    for scheme in SchemeKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let options = || Options {
            persistence: Persistence::default_of(scheme),
            procedures: procedures(),
            ..Options::default()
        };
        let db = Database::open(dir.path(), options()).unwrap();
        db.create_table("accounts").unwrap();
        let mut s = db.session();
        assert_eq!(s.call::<_, u64>("deposit", &(1u64, 100u64)).unwrap(), 100);
        assert_eq!(s.call::<_, u64>("deposit", &(1u64, 5u64)).unwrap(), 105);
        let (r, pending) = s
            .call_pipelined::<_, u64>("deposit", &(2u64, 7u64))
            .unwrap();
        assert_eq!(r, 7);
        pending.wait().unwrap();
        assert_eq!(s.call::<_, u64>("total", &()).unwrap(), 112, "{scheme}");

        let unknown = s.call::<_, u64>("withdraw", &(1u64, 1u64));
        assert!(matches!(unknown, Err(Error::UnknownProcedure { name }) if name == "withdraw"));
        // A string is not a pair of numbers: bytes are left over.
        let bad = s.call::<_, u64>("deposit", "a long string");
        assert!(
            matches!(&bad, Err(Error::ProcedureParams { name, .. }) if name == "deposit"),
            "{bad:?}"
        );
        let garbage = s.call_encoded("deposit", &[0xff; 12]);
        assert!(matches!(garbage, Err(Error::ProcedureParams { .. })));
        let wrong_type = s.call::<_, String>("deposit", &(1u64, 0u64));
        assert!(matches!(wrong_type, Err(Error::ProcedureOutput { .. })));
        // The procedure's own error, its write rolled back.
        assert!(matches!(
            s.call::<_, ()>("overdraw", &1u64),
            Err(Error::KeyNotFound)
        ));
        // A panic of the body is the call's error: rolled back, and the
        // session goes on.
        match s.call::<_, ()>("explode", &2u64) {
            Err(Error::Internal { what }) => assert!(what.contains("explode"), "{what}"),
            other => panic!("{scheme}: a panicking procedure gave {other:?}"),
        }
        assert_eq!(s.call::<_, u64>("total", &()).unwrap(), 112, "{scheme}");

        // Writes outside a procedure: refused only where calls are what
        // is logged; reads are allowed everywhere.
        let accounts = db.table("accounts").unwrap();
        let mut tx = s.begin().unwrap();
        assert_eq!(
            balance(tx.get(&accounts, &1u64.to_be_bytes()).unwrap()),
            105
        );
        let plain = tx.insert(&accounts, &9u64.to_be_bytes(), &[0; 8]);
        if scheme == SchemeKind::Command {
            assert!(
                matches!(plain, Err(Error::ProcedureRequired { .. })),
                "{plain:?}"
            );
        } else {
            plain.unwrap();
        }
        drop(tx);
        drop((s, accounts));
        db.close().unwrap();
        let db = Database::open(dir.path(), options()).unwrap();
        let mut s = db.session();
        assert_eq!(s.call::<_, u64>("total", &()).unwrap(), 112, "{scheme}");
    }
}

/// The calls a [`Recorder`] saw: procedure name, encoded parameters.
type Calls = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// Records the procedure of each commit it is shown.
struct Recorder {
    page_log: NoLog,
    seen: Calls,
}

impl SessionLog for Recorder {
    fn page_log(&self) -> &dyn waypoint::btree::PageLog {
        &self.page_log
    }
    fn on_commit(&mut self, commit: &CommitView<'_>) -> waypoint::Result<()> {
        if let Some(call) = commit.procedure() {
            self.seen
                .lock()
                .unwrap()
                .push((call.name.to_string(), call.params.to_vec()));
        }
        Ok(())
    }
}

#[test]
fn the_commit_hook_sees_the_call_and_a_failed_call_reaches_no_log() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        dir.path(),
        Options {
            persistence: Persistence::None,
            procedures: procedures(),
            ..Options::default()
        },
    )
    .unwrap();
    db.create_table("accounts").unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut s = db.session();
    s.set_log(Box::new(Recorder {
        page_log: NoLog,
        seen: Arc::clone(&seen),
    }));
    s.call::<_, u64>("deposit", &(3u64, 30u64)).unwrap();
    assert!(s.call::<_, ()>("overdraw", &3u64).is_err());
    let mut tx = s.begin().unwrap();
    tx.insert(&db.table("accounts").unwrap(), b"plain", b"x")
        .unwrap();
    tx.commit().unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [(
            "deposit".to_string(),
            encode_params("deposit", &(3u64, 30u64)).unwrap()
        )]
    );
}
