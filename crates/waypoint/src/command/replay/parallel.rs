//! Parallel replay (seed 001 §III-B: each partition replays its own
//! commands, meeting at multi-partition transactions). The log is cut
//! into phases at every barrier (see `replay`: a record without a lane)
//! and at every generation's start; within a phase each thread runs, in
//! log order and on its own session, the calls of the partitions it
//! owns (partition `p` on thread `p % threads`). All threads then meet;
//! the barriers that follow run alone on thread 0 (consecutive ones in
//! one go); they meet again and go on.
//!
//! A failed record stops the replay where serial replay would: every
//! thread skips the records after the first failure known, a barrier
//! after it is not run, and the error reported is that of the failed
//! record first in log order (a call of another partition before it
//! runs on, and fails as it would serially, since it depends on no call
//! of this partition). A panicking call is caught and becomes that
//! record's error, so the other threads never wait at a meeting for a
//! thread that is gone.
//!
//! Invariant: two records run at the same time only if they are calls of
//! different partitions between the same two barriers of one generation;
//! a partition's calls run in log order; a barrier runs after every
//! record before it and before every record after it.

use super::execute;
use super::{At, Replayed};
use crate::db::Database;
use crate::error::{Error, Result};
use crate::parallel::on_threads;
use parking_lot::Mutex;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;

/// The records between two meetings: each thread's calls (indices into
/// the records, in log order), then the barriers after them, run alone
/// in log order (consecutive barriers cost one meeting, not one each: a
/// log of barriers only replays as serially as it must).
struct Phase {
    lanes: Vec<Vec<usize>>,
    barriers: Vec<usize>,
}

impl Phase {
    fn new(threads: usize) -> Self {
        Phase {
            lanes: vec![Vec::new(); threads],
            barriers: Vec::new(),
        }
    }

    fn has_lanes(&self) -> bool {
        self.lanes.iter().any(|l| !l.is_empty())
    }

    fn is_empty(&self) -> bool {
        self.barriers.is_empty() && !self.has_lanes()
    }
}

/// Cut `records` into phases for `threads` threads.
fn plan(records: &[At], threads: usize) -> Vec<Phase> {
    let mut phases = Vec::new();
    let mut current = Phase::new(threads);
    let mut generation = records.first().map(|at| at.generation);
    for (i, at) in records.iter().enumerate() {
        // A new generation's partition count may differ: its partition
        // `p` need not be the last one's rows, so all meet first.
        let new_generation = generation != Some(at.generation);
        generation = Some(at.generation);
        match at.lane() {
            Some(p) => {
                if (new_generation || !current.barriers.is_empty()) && !current.is_empty() {
                    phases.push(std::mem::replace(&mut current, Phase::new(threads)));
                }
                current.lanes[p % threads].push(i);
            }
            // Runs alone after the calls before it, whatever their
            // generation.
            None => current.barriers.push(i),
        }
    }
    if !current.is_empty() {
        phases.push(current);
    }
    phases
}

/// What the threads share while they replay.
struct Shared<'a> {
    db: &'a Database,
    records: &'a [At],
    /// The index of the first record known to have failed (`usize::MAX`:
    /// none).
    failed: AtomicUsize,
    errors: Mutex<Vec<(usize, Error)>>,
}

impl Shared<'_> {
    /// Run record `i` on `session` unless a record before it failed;
    /// false once the replay stops.
    fn step(&self, session: &mut crate::txn::Session, i: usize, done: &mut Replayed) -> bool {
        if self.failed.load(Ordering::Acquire) < i {
            return false;
        }
        let at = &self.records[i];
        execute::count(done, at);
        let result = catch_unwind(AssertUnwindSafe(|| execute::record(self.db, session, at)))
            .unwrap_or_else(|_| {
                Err(Error::Internal {
                    what: format!(
                        "replaying the record at {}:{} panicked",
                        at.path.display(),
                        at.offset
                    ),
                })
            });
        match result {
            Ok(()) => true,
            Err(e) => {
                self.failed.fetch_min(i, Ordering::AcqRel);
                self.errors.lock().push((i, e));
                false
            }
        }
    }
}

/// Replay `records` on `threads` threads (at least 2), phase by phase.
pub(super) fn run(db: &Database, records: &[At], threads: usize) -> Result<Replayed> {
    let phases = plan(records, threads);
    let shared = Shared {
        db,
        records,
        failed: AtomicUsize::new(usize::MAX),
        errors: Mutex::new(Vec::new()),
    };
    let meet = Barrier::new(threads);
    let done = on_threads("command replay", 0..threads, |_, t| {
        let mut session = db.session();
        let mut done = Replayed::default();
        for phase in &phases {
            // Every thread takes the same meetings, whatever it ran: a
            // phase without calls follows a meeting already.
            if phase.has_lanes() {
                for &i in &phase.lanes[t] {
                    if !shared.step(&mut session, i, &mut done) {
                        break;
                    }
                }
                meet.wait();
            }
            if !phase.barriers.is_empty() {
                if t == 0 {
                    for &b in &phase.barriers {
                        if !shared.step(&mut session, b, &mut done) {
                            break;
                        }
                        done.barriers += 1;
                    }
                }
                meet.wait();
            }
        }
        Ok(done)
    })?;
    if let Some((_, e)) = shared.errors.into_inner().into_iter().min_by_key(|(i, _)| *i) {
        return Err(e);
    }
    Ok(done.into_iter().fold(
        Replayed {
            threads,
            ..Replayed::default()
        },
        |sum, d| Replayed {
            calls: sum.calls + d.calls,
            catalog_changes: sum.catalog_changes + d.catalog_changes,
            barriers: sum.barriers + d.barriers,
            ..sum
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persist::CatalogChange;
    use super::super::Logged;

    fn call(generation: u64, lane: Option<usize>) -> At {
        At {
            path: "g".into(),
            offset: 0,
            generation,
            logged: Logged::Call {
                sequence: 1,
                name: "p".into(),
                params: Vec::new(),
                digest: None,
                partitions: Some(4),
                barrier: lane.is_none(),
                lane,
            },
        }
    }

    #[test]
    fn phases_end_at_barriers_and_generations_and_keep_log_order_per_lane_and_barriers_together() {
        let drop = At {
            path: "g".into(),
            offset: 0,
            generation: 1,
            logged: Logged::Catalog(CatalogChange::DropTable { name: "t".into() }),
        };
        let records = vec![
            call(1, Some(0)),
            call(1, Some(1)),
            call(1, Some(2)),
            call(1, None),
            call(1, Some(3)),
            drop,
            call(2, Some(1)),
            call(3, Some(1)),
            call(3, Some(3)),
            call(3, None),
            call(4, None),
            call(4, Some(2)),
        ];
        let phases = plan(&records, 2);
        let shape: Vec<(Vec<Vec<usize>>, Vec<usize>)> =
            phases.into_iter().map(|p| (p.lanes, p.barriers)).collect();
        assert_eq!(
            shape,
            vec![
                (vec![vec![0, 2], vec![1]], vec![3]),
                (vec![vec![], vec![4]], vec![5]),
                (vec![vec![], vec![6]], vec![]),
                (vec![vec![], vec![7, 8]], vec![9, 10]),
                (vec![vec![11], vec![]], vec![]),
            ]
        );
    }
}
