//! Recovery by re-execution (seed 001 §III-B): read every generation's
//! command log in order, check that each call names a registered
//! procedure whose parameters decode (before the open writes anything),
//! then, once the database is built, run the calls and catalog changes
//! again in log order.
//!
//! Log order is a serial order equivalent to the one that ran (each
//! partition's calls reach the log in the order they ran, and a
//! multi-partition call holds every partition), so replaying it serially
//! gives the same state (`execute`, one session). As VoltDB does, the
//! replay may instead run each partition's calls on its own thread,
//! meeting at every barrier (`parallel`): a multi-partition call, a
//! catalog change, a single-partition call logged as one (it wrote a row
//! of a table without a partitioning key), every call of a generation
//! whose partition count is not recorded, and the start of each
//! generation (`generation`: the count may change between opens). Calls
//! between two barriers touch disjoint rows in the tables with a key
//! (checked when they ran) and only read the others, so any interleaving
//! of different partitions' calls gives the state of the log order.
//!
//! A generation's log ends at its first torn or missing record (a segment
//! that ends short of where the next one starts ends it too): what
//! follows was never durable, and later calls may depend on what was
//! lost. A damaged record followed by one written after it was durable is
//! corruption naming file and offset (`logstore::scan`).
//!
//! With an installed snapshot (`snapshot`) the base is the snapshot, and
//! only what the log holds from its point on is replayed: generations
//! before the point's are skipped (a crash between install and pruning
//! leaves them), and in the point's generation every record before the
//! point's position; the first call replayed must follow the point's.
//!
//! Invariant: the calls replayed are a prefix of each generation's log
//! (from the snapshot's point on), with strictly increasing sequence
//! numbers across generations; the replayed state is the state those
//! calls produced when they ran; a replay that fails reports the first
//! record in log order that failed, as serial replay would.

mod execute;
mod parallel;

use super::generation;
use super::record::{Record, Records};
use super::snapshot::Point;
use crate::db::Database;
use crate::error::{Error, Result};
use crate::io::{OpenMode, Storage};
use crate::logstore::scan::{self, ScanEnd};
use crate::logstore::segment::{self, list_segments};
use crate::persist::resident::generations;
use crate::persist::{CatalogChange, SchemeKind};
use crate::procedure::{partition_of, Partition, Procedures};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What a logged record asks replay to do.
pub(super) enum Logged {
    Call {
        sequence: u64,
        name: String,
        params: Vec<u8>,
        digest: Option<u32>,
        /// The partition count of its generation, if recorded.
        partitions: Option<usize>,
        /// Logged as a barrier (`record`).
        barrier: bool,
        /// The partition it ran in, if it may replay beside other
        /// partitions' calls; `None`: a barrier (set by `scan`).
        lane: Option<usize>,
    },
    Catalog(CatalogChange),
}

/// A logged record and where it is (file, offset) for errors.
pub(super) struct At {
    pub path: PathBuf,
    pub offset: u64,
    /// Its log generation.
    pub generation: u64,
    pub logged: Logged,
}

impl At {
    /// The partition a call replays in beside others; `None`: a barrier.
    fn lane(&self) -> Option<usize> {
        match &self.logged {
            Logged::Call { lane, .. } => *lane,
            Logged::Catalog(_) => None,
        }
    }
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
    /// Records before the snapshot's point, not replayed.
    pub skipped: u64,
    /// The most partitions a replayed generation's calls ran under (0:
    /// none recorded).
    pub partitions: usize,
    pub scan_time: Duration,
}

fn corrupt(path: &Path, offset: u64, detail: String) -> Error {
    Error::Corruption {
        path: path.to_path_buf(),
        offset,
        detail,
    }
}

/// Scan one generation's segments into `out`, up to its end, from
/// stream position `from` on (a snapshot's point; `None`: all of it).
fn scan_generation(
    storage: &dyn Storage,
    dir: &Path,
    g: u64,
    from: Option<u64>,
    out: &mut Scanned,
) -> Result<()> {
    let partitions = generation::read(storage, dir)?;
    let segments = list_segments(storage, dir)?;
    if let (Some((start, path)), Some(from)) = (segments.first(), from) {
        // Pruning keeps every segment holding a record at or after the
        // point: one that begins later means records were lost.
        if start.get() > from {
            return Err(corrupt(
                path,
                0,
                format!(
                    "the oldest segment begins at {}, after the snapshot's point at {from}",
                    start.get()
                ),
            ));
        }
    }
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
        // A segment ends where the next one starts: a full segment made
        // from a recycled file keeps that file's old records after its
        // own (`logstore::stream::files`), which would read as a torn
        // tail and end the generation early, losing the later segments.
        let next_start = segments.get(i + 1).map(|(s, _)| s.get());
        let mut body = &whole[segment::HEADER_SIZE as usize..];
        if let Some(limit) = next_start.and_then(|n| usize::try_from(n.saturating_sub(start.get())).ok()) {
            body = &body[..limit.min(body.len())];
        }
        let scanned = scan::scan::<Records>(body, *start);
        if let Some(e) = scanned.end.to_error(path, segment::HEADER_SIZE) {
            return Err(e);
        }
        out.bytes += scanned.valid_len;
        for (offset, record) in scanned.records {
            if from.is_some_and(|f| start.get() + offset < f) {
                // In the snapshot already.
                out.skipped += 1;
                continue;
            }
            let offset = segment::HEADER_SIZE + offset;
            let logged = match record {
                Record::Call {
                    sequence,
                    name,
                    params,
                    digest,
                    barrier,
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
                        partitions,
                        barrier,
                        lane: None,
                    }
                }
                Record::Catalog(change) => Logged::Catalog(change),
            };
            out.records.push(At {
                path: path.clone(),
                offset,
                generation: g,
                logged,
            });
        }
        let ends_short = next_start.is_some_and(|n| start.get() + scanned.valid_len < n);
        if matches!(scanned.end, ScanEnd::TornTail { .. }) || ends_short {
            out.torn_tails += 1;
            return Ok(());
        }
    }
    Ok(())
}

/// Scan every generation below `dir` (the scheme's directory), oldest
/// first, from the installed snapshot's point on (`point`), and check
/// each call against `procedures`.
pub(super) fn scan(
    storage: &dyn Storage,
    dir: &Path,
    procedures: &Procedures,
    point: Option<&Point>,
) -> Result<Scanned> {
    let began = Instant::now();
    let mut out = Scanned {
        last_sequence: point.map_or(0, |p| p.sequence),
        ..Scanned::default()
    };
    let first = point.map_or(0, |p| p.generation);
    for (g, gdir) in generations(storage, dir)? {
        if g < first {
            continue;
        }
        let from = point.filter(|p| p.generation == g).map(|p| p.position);
        scan_generation(storage, &gdir, g, from, &mut out)?;
        out.newest_generation = g;
    }
    for at in &mut out.records {
        if let Logged::Call {
            name,
            params,
            partitions,
            barrier,
            lane,
            ..
        } = &mut at.logged
        {
            // Refused here, the open has written nothing yet.
            let routed = procedures.get(name)?.decode(params)?.partition();
            // The partition it ran in, by the count it ran under; a
            // generation without a recorded count replays serially.
            let parallel = !*barrier || broken::ignores_barriers();
            *lane = match (routed, *partitions) {
                (Partition::Key(key), Some(n)) if parallel => {
                    Some(partition_of(key, broken::partitions(n)))
                }
                _ => None,
            };
            if let Some(n) = *partitions {
                out.partitions = out.partitions.max(n);
            }
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
    /// Threads that ran the calls (1: serial).
    pub threads: usize,
    /// Barriers the threads met (each run alone).
    pub barriers: u64,
    pub time: Duration,
}

/// Run the logged records again on `db`, in log order, or partitions
/// side by side between barriers on up to `threads` threads (serially
/// when there is one thread or one partition); a call logged with a
/// write-set digest must write the same rows again.
pub(super) fn run(db: &Database, records: Vec<At>, partitions: usize, threads: usize) -> Result<Replayed> {
    let began = Instant::now();
    let threads = threads.min(partitions);
    let mut replayed = if threads <= 1 || records.iter().all(|at| at.lane().is_none()) {
        execute::serial(db, &records)?
    } else {
        parallel::run(db, &records, threads)?
    };
    replayed.time = began.elapsed();
    Ok(replayed)
}

/// Broken variants the tests must catch (`testing` feature only): set on
/// the thread that opens the database, so tests running beside it on
/// other threads are not affected.
#[cfg(feature = "testing")]
pub(crate) mod broken {
    use std::cell::Cell;

    thread_local! {
        static IGNORE_BARRIERS: Cell<bool> = const { Cell::new(false) };
        static PARTITIONS: Cell<Option<usize>> = const { Cell::new(None) };
    }

    /// Replay barrier calls beside other partitions' calls (multi-
    /// partition calls and catalog changes stay barriers).
    pub fn set_ignore_barriers(on: bool) {
        IGNORE_BARRIERS.set(on);
    }

    /// Route every call by this partition count rather than its
    /// generation's (`None`: its generation's).
    pub fn set_partitions(n: Option<usize>) {
        PARTITIONS.set(n);
    }

    pub(super) fn ignores_barriers() -> bool {
        IGNORE_BARRIERS.get()
    }

    pub(super) fn partitions(logged: usize) -> usize {
        PARTITIONS.get().unwrap_or(logged)
    }
}

#[cfg(not(feature = "testing"))]
mod broken {
    pub(super) fn ignores_barriers() -> bool {
        false
    }

    pub(super) fn partitions(logged: usize) -> usize {
        logged
    }
}
