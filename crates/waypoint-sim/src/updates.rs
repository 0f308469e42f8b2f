//! The YCSB-like update workload: transactions of one to four updates,
//! inserts and deletes over a small key space (one table, `kv`), checked
//! against a reference model of what was acknowledged.
//!
//! It owns the key and value encoding, the model and the checks. Session `w`
//! of `n` owns the keys `k` with `k % n == w`, so each key's history is the
//! order of its session's commits and the model is exact: every
//! acknowledged transaction is present, and the one transaction a session
//! may have had in flight when the disk failed (not acknowledged) is either
//! wholly present or wholly absent. Reads before each update or delete
//! also check the state before the crash.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use waypoint::{Database, Error};

/// The key space; the load inserts the even keys.
pub const KEYS: u32 = 400;
pub const TABLE: &str = "kv";

pub fn key(k: u32) -> [u8; 4] {
    k.to_be_bytes()
}

/// A value naming its key and writer, 24 to 300 bytes long so that pages
/// split and merge.
pub fn value(k: u32, session: u32, seq: u32) -> Vec<u8> {
    let len = 24 + ((k.wrapping_mul(2_654_435_761) ^ seq.wrapping_mul(40_503)) % 277) as usize;
    let mut v = vec![(seq % 251) as u8; len];
    v[0..4].copy_from_slice(&k.to_be_bytes());
    v[4..8].copy_from_slice(&session.to_be_bytes());
    v[8..12].copy_from_slice(&seq.to_be_bytes());
    v
}

/// One session's keys and their values (`None`: absent).
pub type State = BTreeMap<u32, Option<Vec<u8>>>;

/// What a session did: the state after its last acknowledged transaction,
/// and the writes of the transaction whose commit failed, if any.
#[derive(Debug, Default, Clone)]
pub struct SessionModel {
    pub acked: State,
    pub in_flight: Option<State>,
    pub acked_txns: u32,
}

/// What the run saw: each session's model, and any wrong read before the
/// crash.
#[derive(Debug, Default)]
pub struct Outcome {
    pub sessions: Vec<SessionModel>,
    pub read_errors: Vec<String>,
}

impl Outcome {
    pub fn acked_txns(&self) -> u64 {
        self.sessions.iter().map(|s| s.acked_txns as u64).sum()
    }
}

pub fn load(db: &Database) -> waypoint::Result<()> {
    let t = db.create_table(TABLE)?;
    let mut s = db.session();
    let mut tx = s.begin()?;
    for k in (0..KEYS).step_by(2) {
        tx.insert(&t, &key(k), &value(k, u32::MAX, 0))?;
    }
    tx.commit()?;
    Ok(())
}

fn initial(k: u32) -> Option<Vec<u8>> {
    k.is_multiple_of(2).then(|| value(k, u32::MAX, 0))
}

/// Run up to `per_session` transactions on each session until done or the
/// engine fails with anything but a conflict (then every session stops).
pub fn run(db: &Database, sessions: u32, per_session: u32, seed: u64) -> waypoint::Result<Outcome> {
    let t = db.table(TABLE)?;
    let stop = AtomicBool::new(false);
    let read_errors = Mutex::new(Vec::new());
    let models = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..sessions)
            .map(|w| {
                let (t, stop, read_errors) = (&t, &stop, &read_errors);
                scope.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(seed.wrapping_mul(31).wrapping_add(w as u64));
                    let mine: Vec<u32> = (0..KEYS).filter(|k| k % sessions == w).collect();
                    let mut model = SessionModel {
                        acked: mine.iter().map(|&k| (k, initial(k))).collect(),
                        ..Default::default()
                    };
                    let mut s = db.session();
                    for seq in 1..=per_session {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        // Plan the writes against the acknowledged state.
                        let mut writes = State::new();
                        for _ in 0..rng.gen_range(1..=4) {
                            let k = mine[rng.gen_range(0..mine.len())];
                            let now = writes.get(&k).unwrap_or(&model.acked[&k]);
                            let next = match now {
                                Some(_) if rng.gen_bool(0.3) => None,
                                _ => Some(value(k, w, seq)),
                            };
                            writes.insert(k, next);
                        }
                        let result = s.run(20, |tx| {
                            for (k, next) in &writes {
                                let before = &model.acked[k];
                                let got = tx.get(t, &key(*k))?;
                                if got != *before {
                                    read_errors.lock().unwrap().push(format!(
                                        "session {w} read key {k} before the crash: got {}, expected {}",
                                        describe(&got),
                                        describe(before)
                                    ));
                                }
                                match (before, next) {
                                    (Some(_), Some(v)) => tx.update(t, &key(*k), v)?,
                                    (None, Some(v)) => tx.insert(t, &key(*k), v)?,
                                    (Some(_), None) => {
                                        tx.delete(t, &key(*k))?;
                                    }
                                    (None, None) => {}
                                }
                            }
                            Ok(())
                        });
                        match result {
                            Ok(()) => {
                                model.acked.extend(writes);
                                model.acked_txns += 1;
                            }
                            Err(Error::Conflict) => {}
                            Err(_) => {
                                model.in_flight = Some(writes);
                                stop.store(true, Ordering::Relaxed);
                                break;
                            }
                        }
                    }
                    model
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    Ok(Outcome {
        sessions: models,
        read_errors: read_errors.into_inner().unwrap(),
    })
}

fn describe(v: &Option<Vec<u8>>) -> String {
    match v {
        None => "absent".into(),
        Some(v) if v.len() >= 12 && v[4..8] == [0xff; 4] => {
            format!("{} bytes written by the load", v.len())
        }
        Some(v) if v.len() >= 12 => format!(
            "{} bytes written by session {} txn {}",
            v.len(),
            u32::from_be_bytes(v[4..8].try_into().unwrap()),
            u32::from_be_bytes(v[8..12].try_into().unwrap())
        ),
        Some(v) => format!("{} bytes (not ours)", v.len()),
    }
}

/// After recovery: for each session, its keys hold exactly the
/// acknowledged state, or that state with the in-flight transaction applied
/// whole; no key outside the key space; every tree checks out.
pub fn verify(db: &Database, outcome: &Outcome) -> Result<(), String> {
    if let Some(e) = outcome.read_errors.first() {
        return Err(e.clone());
    }
    let t = db.table(TABLE).map_err(|err| format!("kv table: {err}"))?;
    let mut s = db.session();
    let mut tx = s.begin().map_err(|err| format!("begin: {err}"))?;
    let rows = tx
        .scan(&t, .., usize::MAX)
        .map_err(|err| format!("kv scan: {err}"))?;
    drop(tx);
    drop(s);
    let mut actual: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
    for (k, v) in rows {
        let k: [u8; 4] = k
            .as_slice()
            .try_into()
            .map_err(|_| format!("a key of {} bytes appeared", k.len()))?;
        let k = u32::from_be_bytes(k);
        if k >= KEYS {
            return Err(format!("key {k} outside the key space appeared"));
        }
        actual.insert(k, v);
    }
    let sessions = outcome.sessions.len() as u32;
    for (w, m) in outcome.sessions.iter().enumerate() {
        fn first_difference<'s>(
            state: &'s State,
            actual: &BTreeMap<u32, Vec<u8>>,
        ) -> Option<(&'s u32, &'s Option<Vec<u8>>)> {
            state.iter().find(|(k, v)| actual.get(k) != v.as_ref())
        }
        let matches = |state| first_difference(state, &actual);
        let Some((k, want)) = matches(&m.acked) else {
            continue;
        };
        if let Some(flight) = &m.in_flight {
            let mut with = m.acked.clone();
            with.extend(flight.clone());
            let Some((k2, want2)) = first_difference(&with, &actual) else {
                continue;
            };
            return Err(format!(
                "session {w} of {sessions}: key {k} is {}, acknowledged {}; with the \
                 unacknowledged transaction ({} keys) applied, key {k2} is {}, expected {} \
                 (an acknowledged update lost or the in-flight one partial)",
                describe(&actual.get(k).cloned()),
                describe(want),
                flight.len(),
                describe(&actual.get(k2).cloned()),
                describe(want2),
            ));
        }
        return Err(format!(
            "session {w} of {sessions}: key {k} is {}, acknowledged {} (acknowledged update lost)",
            describe(&actual.get(k).cloned()),
            describe(want)
        ));
    }
    db.check_integrity()
        .map_err(|err| format!("integrity check failed: {err}"))?;
    Ok(())
}
