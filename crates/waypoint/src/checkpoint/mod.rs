//! Checkpointing: writing dirty pages so the log can be pruned and recovery
//! stays bounded (seed 000 §3.3–§3.4, Fig. 4–5).
//!
//! - **Continuous** (default): the buffer pool is split into S shards (frame
//!   index modulo S). Each time 1/S of the WAL limit has reached stage 2 of
//!   the log, one *increment* writes every dirty page of the next shard,
//!   round robin, through the pool's writeback path (one page latched at a
//!   time, only to copy it; no latch during I/O). Before it starts, the
//!   increment takes GSN_min, below every GSN logged afterwards; when its
//!   writes are synced, GSN_min becomes the shard's checkpointed GSN.
//! - **Full** (the PostgreSQL-style baseline of seed 000 §3.3): when the log on disk
//!   reaches the WAL limit, write every shard at once, then prune. The log
//!   keeps growing while that burst runs (up to about twice the limit, when
//!   back-pressure holds new transactions).
//! - **None**: the log is pruned only at a clean close.
//!
//! In every mode the checkpointer also keeps the synced positions in the
//! metadata file current: whenever it writes the file, and at most once
//! per [`MARK_INTERVAL`] while some partition synced more log since, it
//! records how far each partition's log is durable, so recovery can tell
//! lost synced bytes from a torn tail (docs/FORMAT.md, "Checkpoint
//! metadata"). Only a cut within the log synced since the last record goes
//! unnoticed.
//!
//! After each increment the log floor becomes the smaller of the
//! checkpointed GSN over all shards and one below the first GSN of the
//! oldest transaction recovery might still undo (invariant 3, prune rule);
//! the floor is made durable in the metadata file ([`meta`]) and only then
//! are segments wholly below it deleted.
//!
//! With `checkpoint_threads` > 1, increments that are due at once run in
//! parallel on distinct shards (seed 000 §3.8: several checkpointer threads
//! on distinct increments); raising the floor stays serial.
//!
//! The limit is a cap: when more than two increments' worth of log reached
//! stage 2 past what the checkpointer has caught up with (continuous; one
//! more limit for full), new transactions wait at begin (each at most a
//! second) for it to catch up. The log on disk then stays within the limit
//! plus two increments plus the segment granularity (each partition keeps
//! its newest segment; pruning removes whole segments).

pub mod meta;

use crate::buffer::BufferPool;
use crate::error::Result;
use crate::ids::{Gsn, LogPos};
use crate::io::Storage;
use crate::wal::Wal;
use parking_lot::{Condvar, Mutex};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How dirty pages are written and the log pruned while the database runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CheckpointMode {
    /// Sharded increments coupled to log volume (seed 000 §3.4).
    #[default]
    Continuous,
    /// Every dirty page at once each time a WAL limit of log was written.
    Full,
    /// No checkpoints: the log grows until a clean close.
    None,
}

impl CheckpointMode {
    pub fn name(self) -> &'static str {
        match self {
            CheckpointMode::Continuous => "continuous",
            CheckpointMode::Full => "full",
            CheckpointMode::None => "none",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "continuous" => CheckpointMode::Continuous,
            "full" => CheckpointMode::Full,
            "none" => CheckpointMode::None,
            _ => return None,
        })
    }
}

/// Checkpointer settings (from `Options`).
#[derive(Debug, Clone, Copy)]
pub struct CheckpointConfig {
    pub mode: CheckpointMode,
    /// The WAL limit in bytes.
    pub wal_limit: u64,
    pub shards: usize,
    /// Increments that may run at once, each on its own thread.
    pub threads: usize,
}

/// The smallest WAL limit a small disk lowers the configured one to.
pub const MIN_DISK_WAL_LIMIT: u64 = 4 << 20;

/// The WAL limit a database runs with: the configured one, lowered where
/// the disk is small to a quarter of the space free when the database
/// opens (never below [`MIN_DISK_WAL_LIMIT`], never above the configured
/// limit). The log on disk stays near the limit plus two increments with
/// continuous checkpoints and reaches up to twice it with full ones; the
/// rest of the disk is for the data file's growth, the double-write file
/// and segment preallocation. With the 1 GiB default a 48 MiB disk filled
/// with log before the first checkpoint could free any.
pub fn limit_for_disk(configured: u64, available: Option<u64>) -> u64 {
    match available {
        Some(free) => configured.min((free / 4).max(MIN_DISK_WAL_LIMIT)),
        None => configured,
    }
}

/// Checkpointer counters, readable at any time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckpointStats {
    pub increments: u64,
    pub pages_written: u64,
    /// Smallest checkpointed GSN over all shards (0 until every shard was
    /// checkpointed once).
    pub checkpointed_gsn: Gsn,
    /// The durable log floor: records at or below it are no longer needed.
    pub log_floor: Gsn,
    pub pruned_bytes: u64,
    /// Log bytes in segment files at the last look.
    pub wal_disk_bytes: u64,
    /// The WAL limit in force: `PerWorkerOptions::wal_limit_bytes`, or less on a
    /// small disk (a quarter of its free space, at least 4 MiB:
    /// `checkpoint::limit_for_disk`).
    pub wal_limit_bytes: u64,
}

struct State {
    pool: Arc<BufferPool>,
    wal: Arc<Wal>,
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    config: CheckpointConfig,
    /// Per shard: GSN up to which all its changes are in the data file.
    table: Mutex<Vec<Gsn>>,
    stats: Mutex<CheckpointStats>,
    stop: AtomicBool,
    wake: (Mutex<bool>, Condvar),
    failure: Mutex<Option<String>>,
    floor: AtomicU64,
    /// Serialises writing the metadata file (the floor, the synced
    /// positions) and pruning.
    prune_lock: Mutex<()>,
    /// The synced positions in the metadata file, and when they were
    /// written.
    synced: Mutex<(Vec<(u32, LogPos)>, Instant)>,
}

/// The checkpointer thread of one database.
pub struct Checkpointer {
    state: Arc<State>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// How often the checkpointer looks at the log volume.
const POLL: Duration = Duration::from_millis(5);

/// The checkpointer records the log's synced positions in the metadata
/// file at most this often (besides every floor it writes): a cut in the
/// last segment within the log synced since then cannot be told from a
/// torn tail. Each record costs a small file write, two syncs and a rename.
pub const MARK_INTERVAL: Duration = Duration::from_secs(1);

impl Checkpointer {
    /// Start checkpointing `pool` for `wal`; `floor` is the current log
    /// floor and `synced` the synced positions, as the metadata file in
    /// `dir` records them.
    pub fn start(
        pool: Arc<BufferPool>,
        wal: Arc<Wal>,
        storage: Arc<dyn Storage>,
        dir: PathBuf,
        config: CheckpointConfig,
        floor: Gsn,
        synced: Vec<(u32, LogPos)>,
    ) -> Result<Checkpointer> {
        assert!(config.shards > 0 && config.wal_limit > 0 && config.threads > 0);
        wal.open_recovered()?;
        let state = Arc::new(State {
            pool,
            wal,
            storage,
            dir,
            config,
            // Every change at or below the floor is in the data file, and
            // everything in memory now (redone or new) is above it. Which
            // frame a page had before a restart says nothing now, so the
            // per-shard table is not kept across restarts: it starts here.
            table: Mutex::new(vec![floor; config.shards]),
            stats: Mutex::new(CheckpointStats {
                log_floor: floor,
                wal_limit_bytes: config.wal_limit,
                ..Default::default()
            }),
            stop: AtomicBool::new(false),
            wake: (Mutex::new(false), Condvar::new()),
            failure: Mutex::new(None),
            floor: AtomicU64::new(floor.get()),
            prune_lock: Mutex::new(()),
            synced: Mutex::new((synced, Instant::now())),
        });
        // Also without checkpoints: the synced positions are recorded in
        // every mode.
        let s = Arc::clone(&state);
        let thread = Some(
            std::thread::Builder::new()
                .name("waypoint-checkpointer".into())
                .spawn(move || s.run())
                .map_err(|e| {
                    crate::error::Error::io(
                        crate::error::IoOp::Open,
                        "checkpointer thread",
                        None,
                        e,
                    )
                })?,
        );
        Ok(Checkpointer {
            state,
            thread: Mutex::new(thread),
        })
    }

    pub fn stats(&self) -> CheckpointStats {
        let mut s = *self.state.stats.lock();
        s.wal_disk_bytes = self.state.wal.disk_bytes();
        s
    }

    /// Record every partition's synced position in the metadata file now,
    /// if any moved since it was last written (the thread does so at most
    /// every [`MARK_INTERVAL`]).
    pub fn record_synced(&self) -> Result<()> {
        self.state.record_synced()
    }

    /// The error that stopped the checkpointer, if one did.
    pub fn failure(&self) -> Option<String> {
        self.state.failure.lock().clone()
    }

    /// Stop the thread (at close, before the final flush).
    pub fn stop(&self) {
        self.state.stop.store(true, Ordering::Release);
        {
            let mut w = self.state.wake.0.lock();
            *w = true;
            self.state.wake.1.notify_all();
        }
        if let Some(h) = self.thread.lock().take() {
            let _ = h.join();
        }
        self.state.wal.set_max_lag(u64::MAX);
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop();
    }
}

impl State {
    fn run(self: Arc<Self>) {
        let step = (self.config.wal_limit / self.config.shards as u64).max(1);
        // Back-pressure: continuous checkpointing may fall two increments
        // behind; a full checkpoint may run while one more limit is written.
        match self.config.mode {
            CheckpointMode::Continuous => self.wal.set_max_lag(2 * step),
            CheckpointMode::Full => self.wal.set_max_lag(2 * self.config.wal_limit),
            CheckpointMode::None => {}
        }
        // Without checkpoints there is only the synced positions' record
        // to keep: no need to look more often.
        let poll = match self.config.mode {
            CheckpointMode::None => MARK_INTERVAL,
            _ => POLL,
        };
        let mut last = self.wal.stage2_bytes();
        let mut next_shard = 0;
        while !self.stop.load(Ordering::Acquire) {
            {
                let mut w = self.wake.0.lock();
                if !*w {
                    self.wake.1.wait_for(&mut w, poll);
                }
                *w = false;
            }
            let written = self.wal.stage2_bytes();
            let result = (|| -> Result<()> {
                match self.config.mode {
                    CheckpointMode::Continuous => {
                        while written.saturating_sub(last) >= step
                            && !self.stop.load(Ordering::Acquire)
                        {
                            // Up to `threads` due increments at once, each
                            // on its own shard.
                            let due = (written.saturating_sub(last) / step) as usize;
                            let batch = due.min(self.config.threads).min(self.config.shards);
                            let shards: Vec<usize> = (0..batch)
                                .map(|i| (next_shard + i) % self.config.shards)
                                .collect();
                            self.increments_in_parallel(&shards)?;
                            next_shard = (next_shard + batch) % self.config.shards;
                            last += batch as u64 * step;
                            self.wal.checkpointed_through(last);
                        }
                    }
                    CheckpointMode::None => {}
                    CheckpointMode::Full => {
                        // The baseline: nothing until the log on disk
                        // reaches the limit, then everything at once.
                        // (Not again before more log was written: the floor
                        // may be held back by an open transaction.)
                        if self.wal.disk_bytes() >= self.config.wal_limit && written >= last + step
                        {
                            let all: Vec<usize> = (0..self.config.shards).collect();
                            self.increment(&all)?;
                            last = written;
                            self.wal.checkpointed_through(written);
                        } else {
                            // Below the limit: no lag to hold anyone back.
                            self.wal.checkpointed_through(written);
                        }
                    }
                }
                if self.synced.lock().1.elapsed() >= MARK_INTERVAL {
                    self.record_synced()?;
                }
                Ok(())
            })();
            if let Err(e) = result {
                tracing::error!(error = %e, "checkpointer stopped");
                *self.failure.lock() = Some(e.to_string());
                self.wal.set_max_lag(u64::MAX);
                return;
            }
        }
    }

    /// Rewrite the metadata file with the current floor and every
    /// partition's synced position, unless none moved since it was last
    /// written.
    fn record_synced(&self) -> Result<()> {
        let _write = self.prune_lock.lock();
        let synced = self.wal.synced_positions();
        let mut recorded = self.synced.lock();
        if synced == recorded.0 {
            recorded.1 = Instant::now();
            return Ok(());
        }
        meta::write(
            self.storage.as_ref(),
            &self.dir,
            Gsn::new(self.floor.load(Ordering::Acquire)),
            &synced,
        )?;
        *recorded = (synced, Instant::now());
        Ok(())
    }

    /// One increment per shard in `shards`, each on its own thread (the
    /// calling thread takes the first).
    fn increments_in_parallel(&self, shards: &[usize]) -> Result<()> {
        match shards {
            [] => Ok(()),
            [only] => self.increment(&[*only]),
            [first, rest @ ..] => std::thread::scope(|s| {
                let others: Vec<_> = rest
                    .iter()
                    .map(|&shard| s.spawn(move || self.increment(&[shard])))
                    .collect();
                let mine = self.increment(&[*first]);
                others.into_iter().fold(mine, |acc, h| {
                    let r = h.join().unwrap_or_else(|_| {
                        Err(crate::error::Error::Internal {
                            what: "a checkpoint increment thread panicked".into(),
                        })
                    });
                    acc.and(r)
                })
            }),
        }
    }

    /// Write the dirty pages of `shards`, then raise their checkpointed
    /// GSNs and prune what that allows.
    fn increment(&self, shards: &[usize]) -> Result<()> {
        let gsn_min = self.wal.checkpoint_gsn();
        let mut pages = 0;
        for &shard in shards {
            pages += self.pool.checkpoint_shard(shard, self.config.shards)?;
        }
        {
            let mut table = self.table.lock();
            for &shard in shards {
                debug_assert!(table[shard] <= gsn_min, "checkpointed GSNs only grow");
                table[shard] = gsn_min;
            }
        }
        // Increments on other threads raise the floor too: one at a time.
        let _prune = self.prune_lock.lock();
        let checkpointed = self
            .table
            .lock()
            .iter()
            .copied()
            .min()
            .unwrap_or(Gsn::ZERO);
        let oldest = self.wal.oldest_unresolved_gsn();
        let floor = checkpointed.min(oldest.prev_or_zero());
        let mut pruned = 0;
        if floor.get() > self.floor.load(Ordering::Acquire) {
            // Invariant 3: durable floor first, then delete below it.
            let synced = self.wal.synced_positions();
            meta::write(self.storage.as_ref(), &self.dir, floor, &synced)?;
            *self.synced.lock() = (synced, Instant::now());
            self.floor.store(floor.get(), Ordering::Release);
            pruned = self.wal.prune_below(floor.next())?;
        }
        let mut stats = self.stats.lock();
        stats.increments += 1;
        stats.pages_written += pages;
        stats.checkpointed_gsn = checkpointed;
        stats.log_floor = Gsn::new(self.floor.load(Ordering::Acquire));
        stats.pruned_bytes += pruned;
        tracing::debug!(
            ?shards,
            pages,
            gsn_min = gsn_min.get(),
            checkpointed = checkpointed.get(),
            oldest = oldest.get(),
            floor = floor.get(),
            pruned,
            "checkpoint increment"
        );
        Ok(())
    }
}
