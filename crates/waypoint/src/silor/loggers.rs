//! The loggers and the persistent epoch (seed 002 §4.1): one
//! `logstore::stream` per logger (its writer thread is the logger: it
//! writes the buffered entries of its sessions to the logger's segment
//! files and syncs them), and the pepoch thread, which advances pepoch and
//! writes the pepoch file.
//!
//! How pepoch stays safe: a committing session publishes, before it reads
//! the global epoch for its TID (`SessionLog::before_epoch`), a lower
//! bound `a` of that epoch (`active`), and withdraws it once its entry is
//! appended. The pepoch thread reads the clock `g`, then every `active`,
//! then each logger's appended end, and waits until each logger is
//! durable there. No entry of an epoch below `min(g, min active)` can
//! appear after that: its session was either seen active (so the bound is
//! at most its epoch), or already appended (so the entry is below the
//! end), or it read the clock after `g` (publishing then re-reading the
//! clock, with SeqCst fences on both sides, so its epoch is at least
//! `g`). So pepoch = `min(g, min active) - 1` is durable in every logger.
//!
//! Invariant: pepoch only grows, and the file records a value before any
//! commit waiting for it is released (seed 002 §4.1: "a transaction's
//! result is released once pepoch covers its epoch").

use super::pepoch::{self, Installed, PepochState};
use crate::error::{Error, Result};
use crate::ids::LogPos;
use crate::io::Storage;
use crate::logstore::stream::Stream;
use crate::txn::epoch::EpochClock;
use parking_lot::{Condvar, Mutex};
use std::path::PathBuf;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the pepoch thread looks: a fraction of the epoch, so a
/// commit waits about one epoch for its acknowledgement.
const POLL: Duration = Duration::from_millis(4);
/// An `active` slot with no commit between its epoch read and its append.
pub(super) const IDLE: u64 = u64::MAX;

/// One logger: its stream and the mark (the largest epoch appended so
/// far) its appends carry, raised under the lock so marks reach the
/// stream in order.
pub(super) struct Logger {
    pub stream: Arc<Stream>,
    pub mark: Mutex<u64>,
}

/// What sessions, the pepoch thread and the scheme share.
pub(super) struct Loggers {
    pub storage: Arc<dyn Storage>,
    /// `silor/`: the pepoch file's directory.
    pub dir: PathBuf,
    pub clock: Arc<EpochClock>,
    pub loggers: Vec<Logger>,
    /// The published commits' epoch bounds, one per session log.
    active: Mutex<Vec<Arc<AtomicU64>>>,
    pepoch: AtomicU64,
    file: Mutex<PepochState>,
    pepoch_changed: Condvar,
    pepoch_wait: Mutex<()>,
    failed: Mutex<Option<String>>,
    stop: Mutex<bool>,
    wake: Condvar,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    pub pepoch_writes: AtomicU64,
    /// Commits rolled back after they began installing their writes
    /// (`SessionLog::after_install_rolled_back`).
    pub install_rollbacks: AtomicU64,
    /// Test-only: the next append fails after calling this.
    #[cfg(feature = "testing")]
    pub fail_next_append: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    /// Test-only: acknowledge a commit once pepoch covers the session's
    /// previous commit rather than its own (a broken variant the crash
    /// tests must catch).
    pub broken_ack: AtomicBool,
}

impl Loggers {
    /// Start the pepoch thread over `loggers`, with the file's `state`
    /// (already durable).
    pub fn start(
        storage: Arc<dyn Storage>,
        dir: PathBuf,
        clock: Arc<EpochClock>,
        loggers: Vec<Logger>,
        state: PepochState,
    ) -> Result<Arc<Self>> {
        let shared = Arc::new(Loggers {
            storage,
            dir,
            clock,
            loggers,
            active: Mutex::new(Vec::new()),
            pepoch: AtomicU64::new(state.pepoch),
            file: Mutex::new(state),
            pepoch_changed: Condvar::new(),
            pepoch_wait: Mutex::new(()),
            failed: Mutex::new(None),
            stop: Mutex::new(false),
            wake: Condvar::new(),
            thread: Mutex::new(None),
            pepoch_writes: AtomicU64::new(0),
            install_rollbacks: AtomicU64::new(0),
            #[cfg(feature = "testing")]
            fail_next_append: Mutex::new(None),
            broken_ack: AtomicBool::new(false),
        });
        let me = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("waypoint-pepoch".into())
            .spawn(move || me.run())
            .map_err(|e| Error::io(crate::error::IoOp::Open, "pepoch thread", None, e))?;
        *shared.thread.lock() = Some(handle);
        Ok(shared)
    }

    /// A new session's `active` slot.
    pub fn register(&self) -> Arc<AtomicU64> {
        let slot = Arc::new(AtomicU64::new(IDLE));
        let mut all = self.active.lock();
        // Slots of dropped session logs are idle and referenced only here.
        all.retain(|a| Arc::strong_count(a) > 1);
        all.push(Arc::clone(&slot));
        slot
    }

    /// Publish in `slot` a lower bound of the epoch the caller reads next
    /// (see the module documentation).
    pub fn publish(&self, slot: &AtomicU64) {
        loop {
            let a = self.clock.current();
            slot.store(a, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            if self.clock.current() == a {
                return;
            }
        }
    }

    /// Test-only: an injected append failure, if one is armed (its
    /// closure runs first).
    #[cfg(feature = "testing")]
    pub fn take_injected_append_failure(&self) -> Result<()> {
        match self.fail_next_append.lock().take() {
            None => Ok(()),
            Some(before) => {
                before();
                Err(Error::Internal {
                    what: "injected append failure".into(),
                })
            }
        }
    }

    pub fn pepoch(&self) -> u64 {
        self.pepoch.load(Ordering::Acquire)
    }

    pub fn check_healthy(&self) -> Result<()> {
        match &*self.failed.lock() {
            None => Ok(()),
            Some(cause) => Err(Error::Poisoned {
                cause: cause.clone(),
            }),
        }
    }

    /// The broken variant (`testing`; constant false otherwise): a commit
    /// is acknowledged once the session's previous commit is durable
    /// (`SilorSessionLog`).
    pub fn acknowledges_early(&self) -> bool {
        self.broken_ack.load(Ordering::Relaxed)
    }

    /// Return once pepoch ≥ `epoch`.
    pub fn wait_epoch(&self, epoch: u64) -> Result<()> {
        if self.pepoch() >= epoch {
            return Ok(());
        }
        let mut guard = self.pepoch_wait.lock();
        loop {
            if self.pepoch() >= epoch {
                return Ok(());
            }
            self.check_healthy()?;
            if *self.stop.lock() {
                return Err(Error::Closed);
            }
            self.pepoch_changed
                .wait_for(&mut guard, Duration::from_millis(50));
        }
    }

    fn fail(&self, e: &Error) {
        let mut failed = self.failed.lock();
        if failed.is_none() {
            tracing::error!(error = %e, "silor logging failed; commits are refused");
            *failed = Some(format!("the value log failed: {e}"));
        }
        drop(failed);
        let _g = self.pepoch_wait.lock();
        self.pepoch_changed.notify_all();
    }

    fn run(&self) {
        let mut stop = self.stop.lock();
        while !*stop {
            self.wake.wait_for(&mut stop, POLL);
            if *stop {
                break;
            }
            drop(stop);
            if let Err(e) = self.advance() {
                self.fail(&e);
            }
            stop = self.stop.lock();
        }
    }

    /// An epoch at or below that of every commit not yet appended: the
    /// clock `g`, then every `active` bound (see the module
    /// documentation); a commit that installs its writes after this
    /// returns has an epoch at least this. Pepoch is one below it once the
    /// loggers are durable where they were; a checkpoint's `el` is it.
    pub fn low_epoch(&self) -> u64 {
        let g = self.clock.current();
        fence(Ordering::SeqCst);
        let low = self
            .active
            .lock()
            .iter()
            .map(|a| a.load(Ordering::SeqCst))
            .min()
            .unwrap_or(IDLE);
        g.min(low)
    }

    /// Install `checkpoint` (`silor::checkpoint`): one write of the pepoch
    /// file naming it, which also forgets the sealed generations (every
    /// entry of theirs is of an epoch below this run's first, so below
    /// `el`). The caller checked pepoch ≥ `eh`.
    pub fn install_checkpoint(&self, checkpoint: Installed) -> Result<()> {
        let mut file = self.file.lock();
        if file.closing {
            return Err(Error::Closed);
        }
        let next = PepochState {
            checkpoint: Some(checkpoint),
            sealed: Vec::new(),
            ..file.clone()
        };
        pepoch::write(self.storage.as_ref(), &self.dir, &next)?;
        self.pepoch_writes.fetch_add(1, Ordering::Relaxed);
        *file = next;
        Ok(())
    }

    /// One round: make every logger durable up to what its sessions
    /// appended, and raise pepoch as far as that allows.
    fn advance(&self) -> Result<()> {
        if self.failed.lock().is_some() || self.file.lock().closing {
            return Ok(());
        }
        let low = self.low_epoch();
        let ends: Vec<LogPos> = self.loggers.iter().map(|l| l.stream.appended()).collect();
        for (l, end) in self.loggers.iter().zip(ends) {
            l.stream.wait_durable(end)?;
        }
        let candidate = low.saturating_sub(1);
        if candidate > self.pepoch() {
            self.record(candidate, false)?;
        }
        Ok(())
    }

    /// Write `pepoch` (and, for a clean close, the closing flag) to the
    /// file, then publish it.
    fn record(&self, pepoch: u64, closing: bool) -> Result<()> {
        let mut file = self.file.lock();
        if file.closing && !closing {
            return Ok(());
        }
        let next = PepochState {
            pepoch: pepoch.max(file.pepoch),
            closing,
            ..file.clone()
        };
        pepoch::write(self.storage.as_ref(), &self.dir, &next)?;
        self.pepoch_writes.fetch_add(1, Ordering::Relaxed);
        self.pepoch.fetch_max(next.pepoch, Ordering::AcqRel);
        *file = next;
        drop(file);
        let _g = self.pepoch_wait.lock();
        self.pepoch_changed.notify_all();
        Ok(())
    }

    /// Commits quiesced, before a clean close writes its first page: make
    /// every logger durable and record pepoch = the current epoch (no
    /// commit can follow), run `journal` (which makes the close's pages
    /// durable elsewhere), then record the closing flag.
    pub fn seal_for_close(&self, journal: impl FnOnce() -> Result<()>) -> Result<()> {
        self.check_healthy()?;
        let g = self.clock.current();
        for l in &self.loggers {
            l.stream.wait_durable(l.stream.appended())?;
        }
        self.record(g, false)?;
        journal()?;
        self.record(g, true)
    }

    /// Stop the pepoch thread; waiting commits fail with `Closed`.
    pub fn stop(&self) {
        *self.stop.lock() = true;
        self.wake.notify_all();
        if let Some(h) = self.thread.lock().take() {
            let _ = h.join();
        }
        let _g = self.pepoch_wait.lock();
        self.pepoch_changed.notify_all();
    }

    pub fn generation(&self) -> u64 {
        self.file.lock().generation
    }

    /// Wait up to `timeout` for pepoch to reach `epoch`; whether it did.
    pub fn wait_epoch_for(&self, epoch: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.pepoch() < epoch {
            if Instant::now() >= deadline || self.check_healthy().is_err() {
                return false;
            }
            std::thread::sleep(POLL);
        }
        true
    }
}
