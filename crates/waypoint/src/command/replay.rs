//! Recovery by re-execution (seed 001 §III-B): read every generation's
//! command log in order, check that each call names a registered
//! procedure whose parameters decode (before the open writes anything),
//! then, once the database is built, run the calls and catalog changes
//! again in log order, on one session.
//!
//! Serial replay is the first version: VoltDB replays each partition's
//! calls on its own executor, meeting at multi-partition calls. Log order
//! is a serial order equivalent to the one that ran (each partition's
//! calls reach the log in the order they ran, and a multi-partition call
//! holds every partition), so replaying it serially gives the same state.
//!
//! A generation's log ends at its first torn or missing record (a segment
//! that ends short of where the next one starts ends it too): what
//! follows was never durable, and later calls may depend on what was
//! lost. A damaged record followed by one written after it was durable is
//! corruption naming file and offset (`logstore::scan`).
//!
//! Invariant: the calls replayed are a prefix of each generation's log,
//! with strictly increasing sequence numbers across generations; the
//! replayed state is the state those calls produced when they ran.

use super::log::CommandLog;
use super::record::{Record, Records};
use crate::db::Database;
use crate::error::{Error, Result};
use crate::io::{OpenMode, Storage};
use crate::logstore::scan::{self, ScanEnd};
use crate::logstore::segment::{self, list_segments};
use crate::persist::resident::generations;
use crate::persist::{CatalogChange, SchemeKind};
use crate::procedure::Procedures;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What a logged record asks replay to do.
pub(super) enum Logged {
    Call {
        sequence: u64,
        name: String,
        params: Vec<u8>,
        digest: Option<u32>,
    },
    Catalog(CatalogChange),
}

/// A logged record and where it is (file, offset) for errors.
pub(super) struct At {
    pub path: PathBuf,
    pub offset: u64,
    pub logged: Logged,
}

/// What the scan of the command logs found.
#[derive(Default)]
pub(super) struct Scanned {
    pub records: Vec<At>,
    pub calls: u64,
    pub segments: usize,
    pub bytes: u64,
    pub torn_tails: usize,
    pub last_sequence: u64,
    pub newest_generation: u64,
    pub scan_time: Duration,
}

fn corrupt(path: &Path, offset: u64, detail: String) -> Error {
    Error::Corruption {
        path: path.to_path_buf(),
        offset,
        detail,
    }
}

/// Scan one generation's segments into `out`, up to its end.
fn scan_generation(storage: &dyn Storage, dir: &Path, out: &mut Scanned) -> Result<()> {
    let segments = list_segments(storage, dir)?;
    for (i, (start, path)) in segments.iter().enumerate() {
        let file = storage.open(path, OpenMode::ReadOnly)?;
        let mut whole = vec![0u8; file.len()? as usize];
        file.read_at(&mut whole, 0)?;
        drop(file);
        out.segments += 1;
        match segment::decode_header(path, &whole, SchemeKind::Command)? {
            segment::Header::Valid { stream: 0, start: s } if s == *start => {}
            segment::Header::Valid { stream, start: s } => {
                return Err(corrupt(
                    path,
                    0,
                    format!("segment header names stream {stream} at {s}, the file is stream 0 at {start}"),
                ))
            }
            // Synced with its first records: nothing here was durable.
            segment::Header::Torn => {
                out.torn_tails += 1;
                return Ok(());
            }
        }
        let body = &whole[segment::HEADER_SIZE as usize..];
        let scanned = scan::scan::<Records>(body, *start);
        if let Some(e) = scanned.end.to_error(path, segment::HEADER_SIZE) {
            return Err(e);
        }
        out.bytes += scanned.valid_len;
        for (offset, record) in scanned.records {
            let offset = segment::HEADER_SIZE + offset;
            let logged = match record {
                Record::Call {
                    sequence,
                    name,
                    params,
                    digest,
                } => {
                    if sequence <= out.last_sequence {
                        return Err(corrupt(
                            path,
                            offset,
                            format!(
                                "call {sequence} follows call {} (sequence numbers only grow)",
                                out.last_sequence
                            ),
                        ));
                    }
                    out.last_sequence = sequence;
                    out.calls += 1;
                    Logged::Call {
                        sequence,
                        name: name.to_string(),
                        params: params.to_vec(),
                        digest,
                    }
                }
                Record::Catalog(change) => Logged::Catalog(change),
            };
            out.records.push(At {
                path: path.clone(),
                offset,
                logged,
            });
        }
        let next_start = segments.get(i + 1).map(|(s, _)| s.get());
        let ends_short = next_start.is_some_and(|n| start.get() + scanned.valid_len < n);
        if matches!(scanned.end, ScanEnd::TornTail { .. }) || ends_short {
            out.torn_tails += 1;
            return Ok(());
        }
    }
    Ok(())
}

/// Scan every generation below `dir` (the scheme's directory), oldest
/// first, and check each call against `procedures`.
pub(super) fn scan(storage: &dyn Storage, dir: &Path, procedures: &Procedures) -> Result<Scanned> {
    let began = Instant::now();
    let mut out = Scanned::default();
    for (g, gdir) in generations(storage, dir)? {
        scan_generation(storage, &gdir, &mut out)?;
        out.newest_generation = g;
    }
    for at in &out.records {
        if let Logged::Call { name, params, .. } = &at.logged {
            // Refused here, the open has written nothing yet.
            procedures.get(name)?.decode(params)?;
        }
    }
    out.scan_time = began.elapsed();
    Ok(out)
}

/// Make the replayed segments durable: a record read from the page cache
/// after a process crash must not vanish at a later power loss once
/// calls that depend on it are acknowledged.
pub(super) fn sync_generations(storage: &dyn Storage, dir: &Path) -> Result<()> {
    for (_, gdir) in generations(storage, dir)? {
        for (_, path) in list_segments(storage, &gdir)? {
            storage.open(&path, OpenMode::Existing)?.sync_data()?;
        }
        storage.sync_dir(&gdir)?;
    }
    Ok(())
}

/// What the replay did.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Replayed {
    pub calls: u64,
    pub catalog_changes: u64,
    pub time: Duration,
}

fn apply_catalog(db: &Database, change: &CatalogChange) -> Result<()> {
    match change {
        CatalogChange::CreateTable { name, id } => {
            let table = db.create_table(name)?;
            if table.id() != *id {
                return Err(Error::Internal {
                    what: format!(
                        "table {name:?} was created with id {id} and is created again with id {}",
                        table.id()
                    ),
                });
            }
            Ok(())
        }
        CatalogChange::DropTable { name } => db.drop_table(name),
        CatalogChange::DropIndex { name } => db.drop_index(name),
        CatalogChange::CreateIndex { name, id, table } => {
            // `create_index` takes the registered extractor under this
            // scheme; one that is not registered now is refused there.
            let table = db.table(table)?;
            let unused: crate::catalog::KeyExtractor = std::sync::Arc::new(|_: &[u8], _: &[u8]| None);
            let index = db.create_index(&table, name, unused)?;
            if index.info.id != *id {
                return Err(Error::Internal {
                    what: format!(
                        "index {name:?} was created with id {id} and is created again with id {}",
                        index.info.id
                    ),
                });
            }
            Ok(())
        }
    }
}

/// Run the logged records again, in order, on one session of `db`; a
/// call logged with a write-set digest must write the same rows again.
pub(super) fn run(db: &Database, log: &CommandLog, records: Vec<At>) -> Result<Replayed> {
    let began = Instant::now();
    let mut replayed = Replayed::default();
    let mut session = db.session();
    for at in records {
        let result = match &at.logged {
            Logged::Call {
                sequence,
                name,
                params,
                digest,
            } => {
                replayed.calls += 1;
                *log.replayed_digest.lock() = None;
                session.call_encoded(name, params).and_then(|_| {
                    let again = log.replayed_digest.lock().take();
                    match (digest, again) {
                        (Some(logged), again) if again != Some(*logged) => Err(corrupt(
                            &at.path,
                            at.offset,
                            format!(
                                "replaying call {sequence} of procedure {name:?} wrote other rows than when it ran (write-set digest {} against {logged:#010x} logged): the procedure is not deterministic given its parameters, or is not the one that was logged",
                                again.map_or("none".into(), |d| format!("{d:#010x}"))
                            ),
                        )),
                        _ => Ok(()),
                    }
                })
            }
            Logged::Catalog(change) => {
                replayed.catalog_changes += 1;
                apply_catalog(db, change)
            }
        };
        if let Err(e) = result {
            if matches!(e, Error::Corruption { .. }) {
                return Err(e);
            }
            // A full pool or a failing disk is what it is; anything else
            // means the call did not do what it did when it ran.
            if matches!(e, Error::MemoryFull { .. } | Error::Io { .. } | Error::LogFull { .. }) {
                return Err(e);
            }
            let what = match &at.logged {
                Logged::Call { sequence, name, .. } => format!(
                    "replaying call {sequence} of procedure {name:?} failed: {e} (a procedure must be deterministic given its parameters, and be the one that was logged)"
                ),
                Logged::Catalog(change) => format!("replaying catalog change {change:?} failed: {e}"),
            };
            return Err(corrupt(&at.path, at.offset, what));
        }
    }
    replayed.time = began.elapsed();
    Ok(replayed)
}
