use super::drive::{self, PeerWorkload};
use super::external::External;
use super::*;
use crate::tpcb::{Tpcb, TpcbConfig};
use crate::ycsb::{Ycsb, YcsbConfig};

/// The engines this build has.
fn built() -> Vec<PeerKind> {
    PeerKind::ALL
        .into_iter()
        .filter(|p| p.built().is_ok())
        .collect()
}

fn config(workers: usize) -> DriverConfig {
    DriverConfig {
        workers,
        duration_secs: 0.5,
        warmup_secs: 0,
        buffer_bytes: 16 << 20,
        ..DriverConfig::default()
    }
}

fn tpcb() -> PeerWorkload {
    PeerWorkload::Tpcb(Tpcb::new(TpcbConfig::with_accounts(2, 200)))
}

#[test]
fn every_built_engine_runs_ycsb_and_tpcb_and_keeps_their_invariants() {
    for kind in built() {
        for durability in [Durability::Durable, Durability::Relaxed] {
            let workloads = [
                PeerWorkload::Ycsb(Ycsb::new(YcsbConfig::preset('f', 500).unwrap())),
                tpcb(),
            ];
            for w in workloads {
                let dir = tempfile::tempdir().unwrap();
                let engine = open(kind, durability, dir.path(), w.tables(), &config(2)).unwrap();
                let out = drive::run(engine, &w, &config(2), &|_| {}).unwrap();
                assert!(
                    out.committed > 0,
                    "{kind:?} {durability:?} committed nothing"
                );
                assert!(
                    out.durability.starts_with(durability.name()),
                    "{kind:?} says {:?}",
                    out.durability
                );
                assert!(out.loaded_rows > 0 && !out.verify.is_null());
            }
        }
    }
}

/// The check a run ends with is the workload's own: a balance changed
/// behind TPC-B's back fails it, on every engine; and an insert over an
/// existing row is refused.
#[test]
fn a_damaged_balance_fails_the_tpcb_check_on_every_engine() {
    for kind in built() {
        let dir = tempfile::tempdir().unwrap();
        let w = tpcb();
        let engine = open(
            kind,
            Durability::Relaxed,
            dir.path(),
            w.tables(),
            &config(1),
        )
        .unwrap();
        w.load(engine.as_ref()).unwrap();
        w.verify(engine.as_ref()).unwrap();
        let mut handle = engine.handle().unwrap();
        let id = crate::tpcb::id(0);
        let again = handle.transact(&mut |tx| tx.insert(0, &id, &crate::tpcb::initial_row(0)));
        assert!(
            matches!(again, Err(KvError::Abort(_))),
            "{kind:?}: {again:?}"
        );
        // Branch 0 with a balance of 1 and no history row to match.
        let mut row = crate::tpcb::initial_row(0);
        row[..8].copy_from_slice(&1i64.to_le_bytes());
        handle.transact(&mut |tx| tx.update(0, &id, &row)).unwrap();
        drop(handle);
        let err = w.verify(engine.as_ref());
        assert!(
            matches!(err, Err(BenchError::Verify(_))),
            "{kind:?}: a damaged balance passed: {err:?}"
        );
        engine.close().unwrap();
    }
}

#[test]
fn a_missing_row_is_an_abort_and_the_transaction_leaves_nothing() {
    for kind in built() {
        let dir = tempfile::tempdir().unwrap();
        let engine = open(kind, Durability::Relaxed, dir.path(), &["t"], &config(1)).unwrap();
        let mut h = engine.handle().unwrap();
        let r = h.transact(&mut |tx| {
            tx.insert(0, b"a", b"1")?;
            tx.update(0, b"b", b"2")
        });
        assert!(matches!(r, Err(KvError::Abort(_))), "{kind:?}: {r:?}");
        let mut rows = Vec::new();
        h.transact(&mut |tx| {
            rows = tx.scan(0, b"", 10)?;
            Ok(())
        })
        .unwrap();
        assert!(rows.is_empty(), "{kind:?}: the rolled-back insert is there");
        drop(h);
        engine.close().unwrap();
    }
}

#[test]
fn an_engine_not_built_names_its_feature() {
    for kind in PeerKind::ALL {
        if let Err(line) = kind.built() {
            assert!(line.contains("--features"), "{line}");
            let dir = tempfile::tempdir().unwrap();
            let e = open(kind, Durability::Durable, dir.path(), &["t"], &config(1));
            assert!(matches!(e, Err(BenchError::Peer(_))));
        }
    }
}

#[test]
fn an_external_peer_that_cannot_run_says_why_in_one_line() {
    for e in External::ALL {
        if let Err(line) = e.probe() {
            assert!(line.starts_with(e.name()) && !line.contains('\n'), "{line}");
        }
    }
    assert_eq!(super::external::find_program("no-such-program-here"), None);
}
