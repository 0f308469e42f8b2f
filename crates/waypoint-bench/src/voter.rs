//! Voter (seed 001 §V-A, VoltDB's benchmark): a phone-in election. A fixed
//! set of contestants, an area code → state table, and one transaction,
//! `vote`, cast from random phone numbers, each phone allowed at most
//! `max_votes_per_phone` votes (2 in the paper, with 6 contestants).
//!
//! The `vote` transaction, as VoltDB's stored procedure does it:
//! 1. look the contestant up; an unknown one (about 1% of the calls, as
//!    VoltDB's client injects) rejects the vote (`bad_contestant`);
//! 2. read the phone's vote count; at the limit the vote is rejected
//!    (`over_limit`);
//! 3. look the state up by the phone's area code;
//! 4. insert the vote, bump the phone's count (VoltDB's
//!    `v_votes_by_phone_number` view) and the contestant's count.
//!
//! A rejected vote commits without writing (it is still a transaction: it
//! read the tables). The three outcomes are the transaction types of the
//! report: `vote`, `over_limit`, `bad_contestant`.
//!
//! The per-contestant count is striped: a row per (contestant, stripe),
//! and a vote bumps the stripe its phone number picks ([`stripe_of`]), so
//! six hot rows do not turn every pair of concurrent votes into an OCC
//! conflict; the contestant's count is the sum of its stripes.
//!
//! Partitions (seed 001 §V-A: VoltDB partitions Voter by phone number):
//! a vote's rows are its phone's partition's. The phone's count and its
//! vote rows are keyed by the phone; the count stripe a vote bumps is one
//! whose number is the phone's modulo the partition count, so under
//! `command` every vote runs in one partition and replays beside the other
//! partitions' votes instead of as a barrier (`waypoint::Procedures::
//! partition_key`). With more partitions than stripes that cannot hold
//! and the partition check refuses the votes. Each worker casts the votes
//! of its share of the phones (number modulo the workers), so under
//! `command`, with a partition per worker, no two workers' calls queue on
//! one partition (decision 030).
//!
//! Invariants ([`Voter::verify`]): every vote names a valid contestant and
//! the state of its phone's area code; per contestant, the votes equal the
//! sum of its count stripes (so the total does too); per phone, the votes
//! equal the stored count, and no phone has more than the limit.
//!
//! Keys are big-endian (so they sort), values little-endian:
//! `voter_contestants` number u32 → name; `voter_area_codes` area code u16
//! → state (2 ASCII letters); `voter_votes` (phone u64, run nonce u64,
//! worker u32, seq u64) → phone u64, contestant u32, state `[2]`; `voter_phone_votes` phone
//! u64 → count u32; `voter_contestant_votes` (contestant u32, stripe u32)
//! → count u64.

use crate::error::{BenchError, BenchResult};
use crate::load::{self, for_each_row, parallel_insert};
use crate::workload::{Ack, InFlightCall, Loaded, Submitted, TypedCall, Worker, Workload};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use waypoint::{Database, Error, PendingCommit, Procedures, Session, Table, Transaction};

/// The stored procedure of `vote` (seed 001's Voter is one procedure).
pub const VOTE_PROCEDURE: &str = "voter_vote";

/// The parameters of one `vote` call: everything the procedure would
/// otherwise take from the worker (the vote's key, the count stripe, the
/// limit), so that a replay gives the same writes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Vote {
    pub phone: u64,
    pub contestant: u32,
    pub max_votes_per_phone: u32,
    pub stripe: u32,
    pub key: Vec<u8>,
    /// A row (table, key) inserted with the vote (the crash test's
    /// acknowledgement), whatever the outcome.
    pub ack: Option<Ack>,
}

/// Register Voter's stored procedure, partitioned by phone number: the
/// phone's count row and its vote rows are keyed by the phone, and a count
/// stripe by a number equal to the phone's modulo the partitions
/// ([`stripe_of`]), so under `command`'s check a vote stays in its phone's
/// partition and replays in parallel. The contestants and area codes are
/// only read.
pub fn register(procedures: Procedures) -> waypoint::Result<Procedures> {
    let phone = |k: &[u8]| {
        k.get(..8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_be_bytes)
    };
    procedures
        .partition_key(PHONE_VOTES, phone)?
        .partition_key(VOTES, phone)?
        .partition_key(CONTESTANT_VOTES, |k: &[u8]| {
            k.get(4..8)
                .and_then(|b| b.try_into().ok())
                .map_or(0, |b| u64::from(u32::from_be_bytes(b)))
        })?
        .single(
            VOTE_PROCEDURE,
            |v: &Vote| v.phone,
            |tx: &mut Transaction<'_>, v: &Vote| {
                let t = Tables::of(tx)?;
                let outcome = vote(tx, &t, v)?;
                if let Some((table, key)) = &v.ack {
                    let acks = tx.table(table)?;
                    tx.insert(&acks, key, &[])?;
                }
                Ok(outcome)
            },
        )
}

const CONTESTANTS: &str = "voter_contestants";
const AREA_CODES: &str = "voter_area_codes";
const VOTES: &str = "voter_votes";
const PHONE_VOTES: &str = "voter_phone_votes";
const CONTESTANT_VOTES: &str = "voter_contestant_votes";

/// Transaction types (indices returned by the worker).
pub const VOTE: usize = 0;
pub const OVER_LIMIT: usize = 1;
pub const BAD_CONTESTANT: usize = 2;

/// The names VoltDB's Voter loads, in order; more contestants get numbered
/// names.
const NAMES: [&str; 12] = [
    "Edwina Burnam",
    "Tabatha Gehling",
    "Kelly Clauss",
    "Jessie Alloway",
    "Alana Bregman",
    "Jessie Eichman",
    "Allie Rogalski",
    "Nita Coster",
    "Kurt Walser",
    "Ericka Dieter",
    "Loraine Nygren",
    "Tania Mattioli",
];

/// Area codes and their states (a subset of the North American plan: one
/// or more per state and DC).
pub const AREA_CODE_STATES: [(u16, &str); 64] = [
    (205, "AL"),
    (907, "AK"),
    (480, "AZ"),
    (602, "AZ"),
    (501, "AR"),
    (213, "CA"),
    (415, "CA"),
    (510, "CA"),
    (818, "CA"),
    (303, "CO"),
    (203, "CT"),
    (302, "DE"),
    (202, "DC"),
    (305, "FL"),
    (407, "FL"),
    (404, "GA"),
    (808, "HI"),
    (208, "ID"),
    (312, "IL"),
    (773, "IL"),
    (317, "IN"),
    (319, "IA"),
    (316, "KS"),
    (502, "KY"),
    (504, "LA"),
    (207, "ME"),
    (301, "MD"),
    (617, "MA"),
    (508, "MA"),
    (313, "MI"),
    (612, "MN"),
    (601, "MS"),
    (314, "MO"),
    (406, "MT"),
    (402, "NE"),
    (702, "NV"),
    (603, "NH"),
    (201, "NJ"),
    (505, "NM"),
    (212, "NY"),
    (718, "NY"),
    (516, "NY"),
    (704, "NC"),
    (919, "NC"),
    (701, "ND"),
    (216, "OH"),
    (614, "OH"),
    (405, "OK"),
    (503, "OR"),
    (215, "PA"),
    (412, "PA"),
    (401, "RI"),
    (803, "SC"),
    (605, "SD"),
    (615, "TN"),
    (214, "TX"),
    (512, "TX"),
    (713, "TX"),
    (801, "UT"),
    (802, "VT"),
    (703, "VA"),
    (206, "WA"),
    (304, "WV"),
    (414, "WI"),
];

/// Numbers per area code: a phone number is `area * 10^7 + local`.
const LOCAL_NUMBERS: u64 = 10_000_000;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct VoterConfig {
    /// Contestants, numbered 1..=contestants (the paper: 6).
    pub contestants: u32,
    /// Votes one phone number may cast (the paper: 2).
    pub max_votes_per_phone: u32,
    /// Distinct phone numbers the calls come from, spread over the area
    /// codes; fewer numbers reach the limit sooner.
    pub phones: u64,
    /// Rows per contestant's count: a vote bumps the one its phone picks
    /// ([`stripe_of`]); at least the partition count under `command`.
    pub count_stripes: u32,
}

impl Default for VoterConfig {
    fn default() -> Self {
        VoterConfig {
            contestants: 6,
            max_votes_per_phone: 2,
            phones: 1_000_000,
            count_stripes: 1024,
        }
    }
}

impl VoterConfig {
    /// A configuration that can run (checked by `setup` too).
    pub fn check(&self) -> BenchResult<()> {
        let max_phones = AREA_CODE_STATES.len() as u64 * LOCAL_NUMBERS;
        if self.contestants == 0 || self.contestants >= 1_000_000 {
            return Err(BenchError::Config(format!(
                "voter contestants must be between 1 and 999999, not {}",
                self.contestants
            )));
        }
        if self.max_votes_per_phone == 0 || self.count_stripes == 0 {
            return Err(BenchError::Config(
                "voter vote limit and count stripes must be positive".into(),
            ));
        }
        if self.phones == 0 || self.phones > max_phones {
            return Err(BenchError::Config(format!(
                "voter phones must be between 1 and {max_phones}, not {}",
                self.phones
            )));
        }
        Ok(())
    }
}

/// The phone number of phone `i` (0..phones): area codes round robin.
pub fn phone_number(i: u64) -> u64 {
    let n = AREA_CODE_STATES.len() as u64;
    u64::from(AREA_CODE_STATES[(i % n) as usize].0) * LOCAL_NUMBERS + i / n
}

fn area_code(phone: u64) -> u16 {
    (phone / LOCAL_NUMBERS).min(u64::from(u16::MAX)) as u16
}

fn contestant_name(n: u32) -> String {
    NAMES
        .get(n as usize - 1)
        .map_or_else(|| format!("Contestant {n}"), |s| s.to_string())
}

fn u32_at(v: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(v.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(v: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(v.get(at..at + 8)?.try_into().ok()?))
}

/// The count stripe a vote of `phone` bumps among `stripes`, when calls
/// run in `partitions` partitions (1 outside `command`): a stripe whose
/// number is the phone's modulo `partitions`, so that the stripe row is
/// in the phone's partition (`partition_of(key) = key % partitions`).
/// With more partitions than stripes, the phone's number modulo the
/// stripes (the partition check then refuses the vote).
pub fn stripe_of(phone: u64, stripes: u32, partitions: usize) -> u32 {
    let partitions = partitions.max(1) as u64;
    let stripes = u64::from(stripes.max(1));
    // The largest multiple of the partitions that fits the stripes.
    let usable = stripes / partitions * partitions;
    let modulus = if usable == 0 { stripes } else { usable };
    (phone % modulus) as u32
}

fn count_key(contestant: u32, stripe: u32) -> [u8; 8] {
    let mut k = [0u8; 8];
    k[..4].copy_from_slice(&contestant.to_be_bytes());
    k[4..].copy_from_slice(&stripe.to_be_bytes());
    k
}

#[derive(Clone)]
struct Tables {
    contestants: Table,
    area_codes: Table,
    votes: Table,
    phone_votes: Table,
    contestant_votes: Table,
}

impl Tables {
    /// The tables as a stored procedure finds them.
    fn of(tx: &Transaction<'_>) -> waypoint::Result<Self> {
        Ok(Tables {
            contestants: tx.table(CONTESTANTS)?,
            area_codes: tx.table(AREA_CODES)?,
            votes: tx.table(VOTES)?,
            phone_votes: tx.table(PHONE_VOTES)?,
            contestant_votes: tx.table(CONTESTANT_VOTES)?,
        })
    }

    fn open(db: &Database) -> BenchResult<Self> {
        Ok(Tables {
            contestants: db.open_or_create_table(CONTESTANTS)?,
            area_codes: db.open_or_create_table(AREA_CODES)?,
            votes: db.open_or_create_table(VOTES)?,
            phone_votes: db.open_or_create_table(PHONE_VOTES)?,
            contestant_votes: db.open_or_create_table(CONTESTANT_VOTES)?,
        })
    }
}

pub struct Voter {
    pub config: VoterConfig,
    tables: Option<Tables>,
    /// Distinguishes this run's vote keys from earlier runs' on a reused
    /// database.
    run_nonce: u64,
    /// The `command` scheme's partition count of the open database (1
    /// under the others), which picks the count stripes.
    partitions: usize,
    /// The driver's workers: each draws the phones of its share.
    workers: usize,
}

impl Voter {
    pub fn new(config: VoterConfig) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Voter {
            config,
            tables: None,
            run_nonce: nanos,
            partitions: 1,
            workers: 1,
        }
    }
}

impl Workload for Voter {
    fn name(&self) -> &'static str {
        "voter"
    }

    fn txn_types(&self) -> Vec<&'static str> {
        vec!["vote", "over_limit", "bad_contestant"]
    }

    fn config_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.config).expect("config serializes")
    }

    fn validate(&self, _page_size: usize) -> BenchResult<()> {
        self.config.check()
    }

    fn setup(&mut self, db: &Database, workers: usize) -> BenchResult<Loaded> {
        self.config.check()?;
        self.workers = workers.max(1);
        let params = self.config_json();
        let reuse = load::check_reuse(db, "voter", &params)?;
        self.partitions = db.stats().persistence.command.partitions.max(1);
        let t = Tables::open(db)?;
        self.tables = Some(t.clone());
        let c = &self.config;
        let records = u64::from(c.contestants) + AREA_CODE_STATES.len() as u64;
        if reuse {
            return Ok(Loaded::Existing { records });
        }
        parallel_insert(db, &t.contestants, u64::from(c.contestants), 1, |i| {
            let n = i as u32 + 1;
            (n.to_be_bytes().to_vec(), contestant_name(n).into_bytes())
        })?;
        parallel_insert(db, &t.area_codes, AREA_CODE_STATES.len() as u64, 1, |i| {
            let (code, state) = AREA_CODE_STATES[i as usize];
            (code.to_be_bytes().to_vec(), state.as_bytes().to_vec())
        })?;
        let stripes = u64::from(c.count_stripes);
        parallel_insert(
            db,
            &t.contestant_votes,
            u64::from(c.contestants) * stripes,
            1,
            |i| {
                let key = count_key((i / stripes) as u32 + 1, (i % stripes) as u32);
                (key.to_vec(), 0u64.to_le_bytes().to_vec())
            },
        )?;
        load::record_params(db, "voter", &params)?;
        Ok(Loaded::Fresh { records })
    }

    fn worker(&self, worker: usize, seed: u64) -> Box<dyn Worker + '_> {
        Box::new(VoterWorker {
            config: &self.config,
            tables: self.tables.as_ref().expect("setup ran"),
            rng: SmallRng::seed_from_u64(seed),
            key_suffix: [
                &self.run_nonce.to_be_bytes()[..],
                &(worker as u32).to_be_bytes(),
            ]
            .concat(),
            partitions: self.partitions,
            worker,
            workers: self.workers,
            share_has_phones: share_has_phones(self.config.phones, worker, self.workers),
            seq: 0,
        })
    }

    fn verify(&self, db: &Database) -> BenchResult<serde_json::Value> {
        let v = verify(db, &self.config)?;
        Ok(serde_json::to_value(v).expect("serializes"))
    }
}

struct VoterWorker<'a> {
    config: &'a VoterConfig,
    tables: &'a Tables,
    rng: SmallRng,
    /// The vote key after the phone: run nonce and worker.
    key_suffix: Vec<u8>,
    partitions: usize,
    /// This worker's number among `workers`: its share of the phones.
    worker: usize,
    workers: usize,
    /// Some phone's number is the worker's modulo the workers.
    share_has_phones: bool,
    seq: u64,
}

/// Does worker `worker`'s share of `phones` hold a phone? Looked for
/// among the first million phone indexes; beyond them every share of a
/// sensible worker count has phones.
fn share_has_phones(phones: u64, worker: usize, workers: usize) -> bool {
    let workers = workers.max(1) as u64;
    let look = phones.min(1 << 20);
    phones > look || (0..look).any(|i| phone_number(i) % workers == worker as u64 % workers)
}

/// Draws [`VoterWorker::next_phone`] makes before leaving its share.
const SHARE_TRIES: u32 = 256;

/// The body of `vote`; returns the outcome's transaction type.
fn vote(tx: &mut Transaction<'_>, t: &Tables, v: &Vote) -> Result<usize, Error> {
    if tx
        .get(&t.contestants, &v.contestant.to_be_bytes())?
        .is_none()
    {
        return Ok(BAD_CONTESTANT);
    }
    let phone_key = v.phone.to_be_bytes();
    let count = match tx.get(&t.phone_votes, &phone_key)? {
        Some(c) => u32_at(&c, 0).ok_or(Error::KeyNotFound)?,
        None => 0,
    };
    if count >= v.max_votes_per_phone {
        return Ok(OVER_LIMIT);
    }
    let state = tx
        .get(&t.area_codes, &area_code(v.phone).to_be_bytes())?
        .unwrap_or_else(|| b"XX".to_vec());
    let mut row = Vec::with_capacity(14);
    row.extend_from_slice(&v.phone.to_le_bytes());
    row.extend_from_slice(&v.contestant.to_le_bytes());
    row.extend_from_slice(&state);
    tx.insert(&t.votes, &v.key, &row)?;
    let new_count = (count + 1).to_le_bytes();
    if count == 0 {
        // Two first votes of one phone race here: one insert fails
        // (an abort), never a lost count.
        tx.insert(&t.phone_votes, &phone_key, &new_count)?;
    } else {
        tx.update(&t.phone_votes, &phone_key, &new_count)?;
    }
    let ck = count_key(v.contestant, v.stripe);
    let n = tx
        .get(&t.contestant_votes, &ck)?
        .and_then(|c| u64_at(&c, 0))
        .ok_or(Error::KeyNotFound)?;
    tx.update(&t.contestant_votes, &ck, &(n + 1).to_le_bytes())?;
    Ok(VOTE)
}

impl VoterWorker<'_> {
    /// A random phone of this worker's share: one whose number is the
    /// worker's modulo the workers. Under `command`, with a partition per
    /// worker, those are the phones of the worker's partition, so each
    /// worker runs one partition's calls one after another, as VoltDB's
    /// executor of that partition would (seed 001 §II-B), instead of every
    /// worker queueing on every partition. The other schemes run the same
    /// calls. Drawn by rejection; a worker whose share has no phone (few
    /// phones: numbers within an area code are consecutive, so with 64
    /// phones every number is its area code's first) votes from any.
    fn next_phone(&mut self) -> u64 {
        let workers = self.workers.max(1) as u64;
        let mut phone = phone_number(self.rng.gen_range(0..self.config.phones));
        if !self.share_has_phones {
            return phone;
        }
        for _ in 0..SHARE_TRIES {
            if phone % workers == self.worker as u64 % workers {
                break;
            }
            phone = phone_number(self.rng.gen_range(0..self.config.phones));
        }
        phone
    }

    /// The next call's parameters: a random phone and contestant.
    fn next_vote(&mut self) -> Vote {
        let phone = self.next_phone();
        // VoltDB's client sends about one call in a hundred to a contestant
        // that does not exist.
        let contestant = if self.rng.gen_ratio(1, 100) {
            0
        } else {
            self.rng.gen_range(1..=self.config.contestants)
        };
        self.seq += 1;
        Vote {
            phone,
            contestant,
            max_votes_per_phone: self.config.max_votes_per_phone,
            stripe: stripe_of(phone, self.config.count_stripes, self.partitions),
            key: [
                &phone.to_be_bytes()[..],
                self.key_suffix.as_slice(),
                &self.seq.to_be_bytes(),
            ]
            .concat(),
            ack: None,
        }
    }
}

impl Worker for VoterWorker<'_> {
    fn next(&mut self, tx: &mut Transaction<'_>) -> (usize, Result<(), Error>) {
        let v = self.next_vote();
        match vote(tx, self.tables, &v) {
            Ok(ty) => (ty, Ok(())),
            Err(e) => (VOTE, Err(e)),
        }
    }

    /// Voter runs as its stored procedure under every scheme, as in the
    /// paper (so `command` and the others run the same calls).
    fn call(
        &mut self,
        session: &mut Session,
        wait_now: bool,
        ack: Option<Ack>,
    ) -> Option<(usize, Result<PendingCommit, Error>)> {
        let v = Vote {
            ack,
            ..self.next_vote()
        };
        Some(
            match session.call_then::<_, usize>(VOTE_PROCEDURE, &v, wait_now) {
                Ok((ty, pending)) => (ty, Ok(pending)),
                Err(e) => (VOTE, Err(e)),
            },
        )
    }

    fn submit(&mut self, session: &mut Session) -> Submitted {
        let v = self.next_vote();
        Some((
            VOTE,
            session.submit::<_, usize>(VOTE_PROCEDURE, &v).map(|call| {
                Box::new(TypedCall {
                    ty: VOTE,
                    call,
                    ty_of: |ty, _| *ty,
                }) as Box<dyn InFlightCall>
            }),
        ))
    }
}

/// One contestant's result.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ContestantResult {
    pub number: u32,
    pub name: String,
    pub votes: u64,
}

/// What [`verify`] found.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct VoterCheck {
    pub contestants: u64,
    pub votes: u64,
    /// Phones that voted at least once.
    pub phones_voted: u64,
    /// Phones at the vote limit.
    pub phones_at_limit: u64,
    /// Votes by contestant, in number order.
    pub results: Vec<ContestantResult>,
    /// The contestant with the most votes (the lowest number on a tie).
    pub winner: Option<ContestantResult>,
}

fn bad(msg: String) -> BenchError {
    BenchError::Verify(msg)
}

/// Check the Voter invariants on a quiescent database (see the module
/// documentation).
pub fn verify(db: &Database, config: &VoterConfig) -> BenchResult<VoterCheck> {
    let t = Tables {
        contestants: db.table(CONTESTANTS)?,
        area_codes: db.table(AREA_CODES)?,
        votes: db.table(VOTES)?,
        phone_votes: db.table(PHONE_VOTES)?,
        contestant_votes: db.table(CONTESTANT_VOTES)?,
    };
    let mut session = db.session();
    let mut names: Vec<(u32, String)> = Vec::new();
    for_each_row(&mut session, &t.contestants, |k, v| {
        let n = k
            .try_into()
            .map(u32::from_be_bytes)
            .map_err(|_| bad(format!("bad contestant key {k:?}")))?;
        names.push((n, String::from_utf8_lossy(v).into_owned()));
        Ok(())
    })?;
    let expected: Vec<u32> = (1..=config.contestants).collect();
    if names.iter().map(|(n, _)| *n).collect::<Vec<_>>() != expected {
        return Err(bad(format!(
            "expected contestants 1..={}, found {} rows",
            config.contestants,
            names.len()
        )));
    }
    let mut states: HashMap<u16, Vec<u8>> = HashMap::new();
    for_each_row(&mut session, &t.area_codes, |k, v| {
        let code = k
            .try_into()
            .map(u16::from_be_bytes)
            .map_err(|_| bad(format!("bad area code key {k:?}")))?;
        states.insert(code, v.to_vec());
        Ok(())
    })?;
    if states.len() != AREA_CODE_STATES.len() {
        return Err(bad(format!(
            "{} area codes, expected {}",
            states.len(),
            AREA_CODE_STATES.len()
        )));
    }
    // Counts from the votes themselves.
    let mut by_contestant = vec![0u64; config.contestants as usize + 1];
    let mut by_phone: HashMap<u64, u32> = HashMap::new();
    let mut votes = 0u64;
    for_each_row(&mut session, &t.votes, |k, v| {
        let (Some(phone), Some(c), Some(state)) = (u64_at(v, 0), u32_at(v, 8), v.get(12..14))
        else {
            return Err(bad(format!("vote {k:?} has {} bytes, not 14", v.len())));
        };
        if c == 0 || c > config.contestants {
            return Err(bad(format!(
                "vote {k:?} is for contestant {c}, not one of 1..={}",
                config.contestants
            )));
        }
        let expected = states.get(&area_code(phone)).map_or(&b"XX"[..], |s| s);
        if state != expected {
            return Err(bad(format!(
                "vote {k:?} from {phone} records state {:?}, its area code's is {:?}",
                String::from_utf8_lossy(state),
                String::from_utf8_lossy(expected)
            )));
        }
        by_contestant[c as usize] += 1;
        *by_phone.entry(phone).or_default() += 1;
        votes += 1;
        Ok(())
    })?;
    // The stored per-contestant counts (sum of stripes).
    let mut counted = vec![0u64; config.contestants as usize + 1];
    let mut stripes = 0u64;
    for_each_row(&mut session, &t.contestant_votes, |k, v| {
        let c = k
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_be_bytes)
            .filter(|c| (1..=config.contestants).contains(c))
            .ok_or_else(|| bad(format!("bad contestant count key {k:?}")))?;
        let n = u64_at(v, 0).ok_or_else(|| bad(format!("short count row {k:?}")))?;
        counted[c as usize] += n;
        stripes += 1;
        Ok(())
    })?;
    if stripes != u64::from(config.contestants) * u64::from(config.count_stripes) {
        return Err(bad(format!("{stripes} contestant count rows")));
    }
    let total: u64 = counted.iter().sum();
    if total != votes {
        return Err(bad(format!(
            "{votes} votes recorded, but the contestants' counts add up to {total}"
        )));
    }
    for c in 1..=config.contestants as usize {
        if counted[c] != by_contestant[c] {
            return Err(bad(format!(
                "contestant {c} has {} votes, but its count is {}",
                by_contestant[c], counted[c]
            )));
        }
    }
    // The stored per-phone counts.
    let (mut phones, mut at_limit) = (0u64, 0u64);
    for_each_row(&mut session, &t.phone_votes, |k, v| {
        let phone = k
            .try_into()
            .map(u64::from_be_bytes)
            .map_err(|_| bad(format!("bad phone key {k:?}")))?;
        let n = u32_at(v, 0).ok_or_else(|| bad(format!("short phone count of {phone}")))?;
        if n > config.max_votes_per_phone {
            return Err(bad(format!(
                "phone {phone} has {n} votes, over the limit of {}",
                config.max_votes_per_phone
            )));
        }
        let cast = by_phone.remove(&phone).unwrap_or(0);
        if cast != n {
            return Err(bad(format!(
                "phone {phone} cast {cast} votes, but its count is {n}"
            )));
        }
        phones += 1;
        at_limit += u64::from(n == config.max_votes_per_phone);
        Ok(())
    })?;
    if let Some((phone, n)) = by_phone.into_iter().next() {
        return Err(bad(format!(
            "phone {phone} cast {n} votes but has no count row"
        )));
    }
    let results: Vec<ContestantResult> = names
        .into_iter()
        .map(|(number, name)| ContestantResult {
            number,
            name,
            votes: by_contestant[number as usize],
        })
        .collect();
    let winner = results
        .iter()
        .filter(|r| r.votes > 0)
        .max_by_key(|r| (r.votes, std::cmp::Reverse(r.number)))
        .cloned();
    Ok(VoterCheck {
        contestants: results.len() as u64,
        votes,
        phones_voted: phones,
        phones_at_limit: at_limit,
        results,
        winner,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phone_numbers_are_distinct_and_map_to_their_area_code() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..1000 {
            let p = phone_number(i);
            assert!(seen.insert(p));
            let code = area_code(p);
            assert!(AREA_CODE_STATES.iter().any(|(c, _)| *c == code));
        }
        assert!(VoterConfig {
            phones: 0,
            ..VoterConfig::default()
        }
        .check()
        .is_err());
    }
}
