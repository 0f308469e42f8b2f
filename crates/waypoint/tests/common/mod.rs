//! The bank-transfer workload shared by the crash tests (`crash.rs`,
//! `kill.rs`): accounts with balances, and a history row per transfer keyed
//! by (session, sequence), so that after a crash every acknowledged transfer
//! can be found and every balance checked against the history.

#![allow(dead_code)] // each test binary uses its own subset

use waypoint::{Error, Session, Table};

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
    s.run(20, |tx| {
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
    })
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
