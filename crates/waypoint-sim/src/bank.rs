//! The bank-transfer workload: accounts with balances, and a history row
//! per transfer keyed by (session, sequence), so that after a crash every
//! acknowledged transfer can be found and every balance checked against the
//! history. Optionally each transfer also flips a contended "toggle" row
//! (inserts of one absent key by several sessions conflict at validation
//! after their placeholders are in, so rollbacks run under crashes).
//!
//! It owns the workload's encoding, the transfer transaction, the loop the
//! sessions run until the disk fails, and the checks after recovery. The
//! engine's own tests (`crates/waypoint/tests/crash.rs`, `kill.rs`) use it
//! too.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use waypoint::{Database, Error, Procedures, Session, Table, Transaction};

/// The transfer as a stored procedure, for a database that takes writes
/// only in procedures (the `command` scheme).
pub const TRANSFER_PROCEDURE: &str = "bank_transfer";
/// The accounts' load as a stored procedure.
pub const LOAD_PROCEDURE: &str = "bank_load";

/// The parameters of a `bank_transfer` call: the tables by name and what
/// [`transfer`] takes.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct TransferCall {
    accounts: String,
    history: String,
    toggles: Option<String>,
    from: u32,
    to: u32,
    amount: i64,
    key: [u8; 8],
}

/// The bank's stored procedures (`bank_load`, and `bank_transfer`,
/// multi-partition: any two accounts).
pub fn procedures() -> Procedures {
    Procedures::new()
        .multi(
            LOAD_PROCEDURE,
            |tx: &mut Transaction<'_>, accounts: &String| {
                let accounts = tx.table(accounts)?;
                for a in 0..ACCOUNTS {
                    tx.insert(&accounts, &account_key(a), &with_balance(INITIAL))?;
                }
                Ok(())
            },
        )
        .expect("names are distinct")
        .multi(
            TRANSFER_PROCEDURE,
            |tx: &mut Transaction<'_>, c: &TransferCall| {
                let accounts = tx.table(&c.accounts)?;
                let history = tx.table(&c.history)?;
                let toggles = c.toggles.as_deref().map(|t| tx.table(t)).transpose()?;
                transfer_body(
                    tx,
                    &accounts,
                    &history,
                    toggles.as_ref(),
                    (c.from, c.to, c.amount),
                    c.key,
                )
            },
        )
        .expect("one procedure registers")
}

pub const ACCOUNTS: u32 = 200;
pub const INITIAL: i64 = 1_000;

pub fn account_key(a: u32) -> [u8; 4] {
    a.to_be_bytes()
}

pub fn history_key(session: u32, seq: u32) -> [u8; 8] {
    (((session as u64) << 32) | seq as u64).to_be_bytes()
}

pub fn encode_history(from: u32, to: u32, amount: i64) -> Vec<u8> {
    let mut v = Vec::with_capacity(16 + 40);
    v.extend_from_slice(&from.to_le_bytes());
    v.extend_from_slice(&to.to_le_bytes());
    v.extend_from_slice(&amount.to_le_bytes());
    v.extend_from_slice(&[7u8; 40]); // bigger rows: more pages, more steal
    v
}

pub fn decode_history(v: &[u8]) -> (u32, u32, i64) {
    (
        u32::from_le_bytes(v[0..4].try_into().unwrap()),
        u32::from_le_bytes(v[4..8].try_into().unwrap()),
        i64::from_le_bytes(v[8..16].try_into().unwrap()),
    )
}

pub fn balance(v: &[u8]) -> i64 {
    i64::from_le_bytes(v[..8].try_into().unwrap())
}

pub fn with_balance(b: i64) -> Vec<u8> {
    let mut v = b.to_le_bytes().to_vec();
    v.extend_from_slice(&[1u8; 60]);
    v
}

/// Marks byte 16 of a history row whose transfer flipped a toggle row.
const TOGGLED: u8 = 0x80;

/// Move `amount` from `from` to `to` and record it under `key` in one
/// transaction, retrying conflicts. With `toggles`, the transfer also flips
/// the toggle row `amount % 16` (insert if absent, delete if present): many
/// transfers insert the same absent key at once, so commits conflict at
/// validation after their placeholders are in and must roll back.
#[allow(clippy::too_many_arguments)]
pub fn transfer(
    s: &mut Session,
    accounts: &Table,
    history: &Table,
    toggles: Option<&Table>,
    from: u32,
    to: u32,
    amount: i64,
    key: [u8; 8],
) -> waypoint::Result<()> {
    if s.writes_only_in_procedures() {
        let call = TransferCall {
            accounts: accounts.name().to_string(),
            history: history.name().to_string(),
            toggles: toggles.map(|t| t.name().to_string()),
            from,
            to,
            amount,
            key,
        };
        let mut attempt = 0;
        return loop {
            attempt += 1;
            match s.call::<_, ()>(TRANSFER_PROCEDURE, &call) {
                Err(Error::Conflict) if attempt < 20 => continue,
                other => break other,
            }
        };
    }
    s.run(20, |tx| {
        transfer_body(tx, accounts, history, toggles, (from, to, amount), key)
    })
}

/// The transfer's reads and writes, in `tx`.
fn transfer_body(
    tx: &mut Transaction<'_>,
    accounts: &Table,
    history: &Table,
    toggles: Option<&Table>,
    (from, to, amount): (u32, u32, i64),
    key: [u8; 8],
) -> waypoint::Result<()> {
    let a = balance(
        &tx.get(accounts, &account_key(from))?
            .ok_or(Error::KeyNotFound)?,
    );
    let b = balance(
        &tx.get(accounts, &account_key(to))?
            .ok_or(Error::KeyNotFound)?,
    );
    tx.update(accounts, &account_key(from), &with_balance(a - amount))?;
    tx.update(accounts, &account_key(to), &with_balance(b + amount))?;
    let mut row = encode_history(from, to, amount);
    if let Some(toggles) = toggles {
        let t = [(amount % 16) as u8];
        if tx.get(toggles, &t)?.is_some() {
            tx.delete(toggles, &t)?;
        } else {
            tx.insert(toggles, &t, &key)?;
        }
        row[16] = TOGGLED | t[0];
    }
    tx.insert(history, &key, &row)
}

/// What a toggle row that disagrees with the history looks like: which
/// transfers flipped it, which one inserted the row that is there, and
/// whether the balances agree (a partial transfer or a lost flip).
fn toggle_mismatch(
    t: usize,
    row: Option<Vec<u8>>,
    history: &[(Vec<u8>, Vec<u8>)],
    present: &HashSet<&[u8]>,
    acked: &HashSet<[u8; 8]>,
    balances_agree: bool,
) -> String {
    let flips: Vec<String> = history
        .iter()
        .filter(|(_, v)| v[16] & TOGGLED != 0 && (v[16] & 0x0F) as usize == t)
        .map(|(k, _)| {
            format!(
                "{:#x}",
                u64::from_be_bytes(k[..8].try_into().unwrap_or_default())
            )
        })
        .collect();
    let holder = match row {
        None => "absent".to_string(),
        Some(v) => match <[u8; 8]>::try_from(&v[..]) {
            Ok(k) => format!(
                "present, inserted by transfer {:#x} (history row {}, {})",
                u64::from_be_bytes(k),
                if present.contains(&k[..]) {
                    "present"
                } else {
                    "absent"
                },
                if acked.contains(&k) {
                    "acknowledged"
                } else {
                    "not acknowledged"
                }
            ),
            Err(_) => format!("present with a {}-byte value", v.len()),
        },
    };
    format!(
        "toggle {t} disagrees with the history: {} flips in the history ({}), the row is {holder}; \
         the balances {}",
        flips.len(),
        flips.join(", "),
        if balances_agree { "agree with the history" } else { "do not (a partial transfer)" }
    )
}

/// Which toggle rows must exist given the history rows present: those
/// flipped an odd number of times.
pub fn expected_toggles<'a>(history_values: impl Iterator<Item = &'a [u8]>) -> [bool; 16] {
    let mut on = [false; 16];
    for v in history_values {
        if v[16] & TOGGLED != 0 {
            let t = (v[16] & 0x0F) as usize;
            on[t] = !on[t];
        }
    }
    on
}

/// Each account's balance implied by the history rows present.
pub fn expected_balances<'a>(history_values: impl Iterator<Item = &'a [u8]>) -> Vec<i64> {
    let mut expected = vec![INITIAL; ACCOUNTS as usize];
    for v in history_values {
        let (from, to, amount) = decode_history(v);
        expected[from as usize] -= amount;
        expected[to as usize] += amount;
    }
    expected
}

/// Create the tables (`accounts`, `history`, `toggles`) and the accounts
/// with their initial balances, in one transaction.
pub fn load(db: &Database) -> waypoint::Result<()> {
    let accounts = db.create_table("accounts")?;
    db.create_table("history")?;
    db.create_table("toggles")?;
    let mut s = db.session();
    if s.writes_only_in_procedures() {
        return s.call(LOAD_PROCEDURE, accounts.name());
    }
    let mut tx = s.begin()?;
    for a in 0..ACCOUNTS {
        tx.insert(&accounts, &account_key(a), &with_balance(INITIAL))?;
    }
    tx.commit()?;
    Ok(())
}

/// Run up to `per_session` transfers on each of `sessions` sessions (one
/// thread each, session `w` drawing from a `SmallRng` seeded with
/// `seed * 31 + w`), flipping toggles if `toggling`, until they are done or
/// the engine reports an error other than a conflict (the disk froze or
/// failed: every session then stops). Returns the history keys of the
/// acknowledged transfers.
pub fn run_transfers(
    db: &Database,
    sessions: u32,
    per_session: u32,
    seed: u64,
    toggling: bool,
) -> waypoint::Result<HashSet<[u8; 8]>> {
    let accounts = db.table("accounts")?;
    let history = db.table("history")?;
    let toggles = db.table("toggles")?;
    let acked = Mutex::new(HashSet::new());
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for w in 0..sessions {
            let (accounts, history, toggles, acked, stop) =
                (&accounts, &history, &toggles, &acked, &stop);
            scope.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed.wrapping_mul(31).wrapping_add(w as u64));
                let mut s = db.session();
                for seq in 0..per_session {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let from = rng.gen_range(0..ACCOUNTS);
                    let to = (from + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
                    let amount = rng.gen_range(1..50i64);
                    let result = transfer(
                        &mut s,
                        accounts,
                        history,
                        toggling.then_some(toggles),
                        from,
                        to,
                        amount,
                        history_key(w, seq),
                    );
                    match result {
                        Ok(()) => {
                            acked.lock().unwrap().insert(history_key(w, seq));
                        }
                        Err(Error::Conflict) => {}
                        Err(_) => {
                            // The disk froze or failed: the engine reports
                            // it and the run stops.
                            stop.store(true, Ordering::Relaxed);
                            return;
                        }
                    }
                }
            });
        }
    });
    Ok(acked.into_inner().unwrap())
}

/// After recovery: every acknowledged transfer's history row is present;
/// every balance equals the initial one plus the history rows present
/// (nothing partial); toggle rows agree with the history; the total is
/// unchanged; every tree checks out. The error says which check failed.
pub fn verify(db: &Database, acked: &HashSet<[u8; 8]>) -> Result<(), String> {
    let accounts = db
        .table("accounts")
        .map_err(|err| format!("accounts table: {err}"))?;
    let history = db
        .table("history")
        .map_err(|err| format!("history table: {err}"))?;
    let toggles = db
        .table("toggles")
        .map_err(|err| format!("toggles table: {err}"))?;
    let mut s = db.session();
    let mut tx = s.begin().map_err(|err| format!("begin: {err}"))?;
    let rows = tx
        .scan(&history, .., usize::MAX)
        .map_err(|err| format!("history scan: {err}"))?;
    let present: HashSet<&[u8]> = rows.iter().map(|(k, _)| k.as_slice()).collect();
    let mut lost: Vec<u64> = acked
        .iter()
        .filter(|k| !present.contains(&k[..]))
        .map(|k| u64::from_be_bytes(*k))
        .collect();
    if !lost.is_empty() {
        lost.sort_unstable();
        return Err(format!(
            "{} of {} acknowledged transfers lost (history key session<<32|seq, first {:#x})",
            lost.len(),
            acked.len(),
            lost[0]
        ));
    }
    let want = expected_toggles(rows.iter().map(|(_, v)| v.as_slice()));
    let expected = expected_balances(rows.iter().map(|(_, v)| v.as_slice()));
    for (t, on) in want.iter().enumerate() {
        let row = tx
            .get(&toggles, &[t as u8])
            .map_err(|err| format!("toggle read: {err}"))?;
        if row.is_some() != *on {
            let balances_agree = (0..ACCOUNTS).all(|a| {
                tx.get(&accounts, &account_key(a))
                    .ok()
                    .flatten()
                    .is_some_and(|r| balance(&r) == expected[a as usize])
            });
            return Err(toggle_mismatch(
                t,
                row,
                &rows,
                &present,
                acked,
                balances_agree,
            ));
        }
    }
    let mut total = 0;
    for a in 0..ACCOUNTS {
        let row = tx
            .get(&accounts, &account_key(a))
            .map_err(|err| format!("account read: {err}"))?
            .ok_or_else(|| format!("account {a} missing"))?;
        let b = balance(&row);
        if b != expected[a as usize] {
            return Err(format!(
                "account {a} has {b}, the history says {} (partial transfer)",
                expected[a as usize]
            ));
        }
        total += b;
    }
    if total != INITIAL * ACCOUNTS as i64 {
        return Err(format!("money created or destroyed: total {total}"));
    }
    drop(tx);
    drop(s);
    db.check_integrity()
        .map_err(|err| format!("integrity check failed: {err}"))?;
    Ok(())
}
