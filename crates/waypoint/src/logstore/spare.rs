//! Segment preallocation: each stream keeps one zero-filled, synced
//! *spare* file ready, prepared by a background thread, and a new segment is
//! that spare renamed (seed 000 §3.1 leaves the segment files' allocation
//! open; PostgreSQL zero-fills WAL segments for the same reason). Pruned
//! segments are *recycled* in preference: renamed away, their header
//! zeroed and synced, and later renamed into a new segment, as PostgreSQL
//! recycles WAL files. Once pruning keeps pace with the log, no zeros are
//! written at all: they were half of all the log bytes TPC-C wrote, and a
//! share of the vCPUs the workers need (docs/decisions/measurements.md, "2026-11-23: segment
//! recycling").
//!
//! Why: an `fdatasync` after a write that grows a file must also commit the
//! file system's metadata (size, extents); after an overwrite of written
//! blocks it flushes only the data. On this project's VM (ext4) a 40 KiB
//! append-and-sync took 307 µs p50, the same write into a zero-filled file
//! 140 µs (docs/decisions/measurements.md, "2026-11-22: segment preallocation"). Every commit
//! waits for such a sync. That depends on the file system
//! (`scripts/prealloc-probe.py`): ext4 with a journal commits it for every
//! growing sync (on a loop-mounted one, 0.9–1.5 ms against 0.3–0.7 ms into
//! zero-filled blocks); ext4 without one (the project's VM as measured in
//! on 2026-11-23) writes the inode on either sync (p50 within 15%), and there
//! the zeros cost more than they save: they double the log's bytes until
//! pruning starts, and their syncs queue ahead of the log's (commit p99 24 ms against 14 ms growing;
//! docs/decisions/measurements.md, "2026-11-23: what the log's I/O costs on this VM"). So zero-filling can be switched off
//! (`PerWorkerOptions::wal_zero_fill`) and recycling kept: new segments then grow
//! until pruned ones are queued.
//!
//! Invariants:
//! - A spare (zero-filled or recycled) is never a segment. Its name does
//!   not parse as one, so
//!   recovery, pruning and inspection leave it alone (a crash may leave one
//!   behind; the next preallocation replaces it, or with zero-filling
//!   off the first [`Spare::want`] removes it; a clean close removes it).
//! - [`Spare::take`] hands a file out only after its zeros (or, recycled,
//!   its zeroed header: its other blocks were written in its previous life)
//!   were synced, so the segment's own syncs overwrite written blocks.
//! - Zeros after a segment's last record scan as a clean end
//!   ([`super::scan::ScanEnd::Clean`]). A recycled file's old records
//!   after it fail their position-salted checksums and end the scan like a
//!   torn write ([`super::frame::place_at`]); recovery tells the two apart
//!   by where the next segment starts.
//! - A recycled segment stops being a segment durably (its rename is
//!   synced) before its header is zeroed: a crash in between must not
//!   leave a headerless segment in the middle of the log. Its header is
//!   zero and synced before it can become a segment again, so a new
//!   segment whose own header never landed reads as never synced, not as
//!   its previous life.
//! - The queue of recycled files lives in memory only: files a crash left
//!   queued are removed when the stream opens again
//!   ([`remove_recycled_leftovers`]), so crashes do not pile them up.
//!
//! A failed preallocation (full disk, I/O error) is logged and stops
//! preallocation for the stream: the writer then creates segments as
//! plain growing files, which is slower but correct. Where the disk has
//! less than eight spares' worth of free space, no spare is zero-filled
//! (the segment grows instead) until the next roll finds more room.

use crate::error::Result;
use crate::io::{OpenMode, Storage, StorageFile};
use parking_lot::{Condvar, Mutex};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes preallocated between two syncs. Each sync costs the vCPUs that
/// also run the workers; 1 MiB rather than 256 KiB gave 2-worker TPC-C
/// about 2.5% more, with a lower commit p99 (docs/decisions/measurements.md,
/// "2026-11-22: fewer writer wake-ups, GSN_flushed without locks").
const PIECE: u64 = 1 << 20;

/// A spare is zero-filled only while this many times its size is free.
const SPARE_ROOM: u64 = 8;

/// File name of a stream's spare segment.
pub const SPARE_NAME: &str = "spare.prealloc";

/// How a recycled segment's file name ends (`SSSS.recycled.prealloc`).
const RECYCLED_SUFFIX: &str = ".recycled.prealloc";

/// Recycled segments kept ready per stream; more are deleted. One per
/// segment the writer starts is enough once pruning keeps pace; a second
/// covers a prune that lands just after a roll.
const RECYCLED_MAX: usize = 2;

/// Is `path` a spare segment file: the zero-filled spare, or a recycled
/// segment (`SSSS.recycled.prealloc`)?
pub fn is_spare(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(".prealloc"))
}

/// Is `path` a recycled segment (`SSSS.recycled.prealloc`)?
pub fn is_recycled(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(RECYCLED_SUFFIX))
}

/// Remove the recycled segments a crash left in stream directory `dir`
/// (their queue was in memory). Called before the stream's spare
/// exists, so none of them is queued.
pub fn remove_recycled_leftovers(storage: &dyn Storage, dir: &Path) -> Result<()> {
    for file in storage.list_dir(dir)? {
        if is_recycled(&file) {
            tracing::info!(path = %file.display(), "removing a recycled log segment a crash left behind");
            storage.remove(&file)?;
        }
    }
    Ok(())
}

#[derive(Default)]
struct State {
    /// The spare file is complete and synced.
    ready: bool,
    /// A spare should be made (none is ready and none is being made).
    wanted: bool,
    shutdown: bool,
    /// Recycled segments ready to be taken, oldest first.
    recycled: std::collections::VecDeque<PathBuf>,
}

/// The spare segment of one stream and the thread that prepares it.
pub struct Spare {
    storage: Arc<dyn Storage>,
    path: PathBuf,
    /// The stream's id (names the thread).
    id: u32,
    /// Bytes to preallocate: segment header plus the segment size.
    bytes: AtomicU64,
    state: Mutex<State>,
    wake: Condvar,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Segments started from a recycled file, and from a zero-filled spare.
    took_recycled: AtomicU64,
    took_zeroed: AtomicU64,
    /// Zero-fill a spare while no recycled segment is queued
    /// (`PerWorkerOptions::wal_zero_fill`); off, only recycled segments are handed
    /// out and the thread never starts.
    zero_fill: AtomicBool,
}

impl Spare {
    /// The spare of the stream in `dir`, prepared by thread
    /// `waypoint-spare-{id}`, which starts at the first [`Spare::want`] or
    /// [`Spare::take`] (never, when preallocation or zero-filling is off).
    pub fn new(storage: Arc<dyn Storage>, dir: &Path, id: u32) -> Arc<Self> {
        Arc::new(Spare {
            storage,
            path: dir.join(SPARE_NAME),
            id,
            bytes: AtomicU64::new(0),
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            thread: Mutex::new(None),
            took_recycled: AtomicU64::new(0),
            took_zeroed: AtomicU64::new(0),
            zero_fill: AtomicBool::new(true),
        })
    }

    /// Start the preparing thread unless it runs (or ran) already. A
    /// thread that cannot be started only means no spare: new segments then
    /// grow as they fill, slower but correct.
    fn ensure_thread(self: &Arc<Self>) {
        let mut thread = self.thread.lock();
        if thread.is_some() || self.state.lock().shutdown {
            return;
        }
        let worker = Arc::clone(self);
        match std::thread::Builder::new()
            .name(format!("waypoint-spare-{}", self.id))
            .spawn(move || worker.run())
        {
            Ok(handle) => *thread = Some(handle),
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e,
                    "cannot start the log preallocation thread; new segments grow as they fill");
                self.state.lock().shutdown = true;
            }
        }
    }

    /// Zero-fill spares (the default) or hand out only recycled segments.
    /// Meant to be set before the first [`Spare::want`]; switched off
    /// later, a running thread finishes the spare it is making, which is
    /// still handed out, and then sleeps until shutdown.
    pub fn set_zero_fill(&self, on: bool) {
        self.zero_fill.store(on, Ordering::Relaxed);
    }

    /// Prepare a spare of `bytes` bytes (if none is ready or being made).
    pub fn want(self: &Arc<Self>, bytes: u64) {
        self.bytes.store(bytes, Ordering::Relaxed);
        if !self.zero_fill.load(Ordering::Relaxed) {
            // No thread will replace a spare a crash left behind: remove
            // it (only while no thread ever ran, which could be making one).
            if self.thread.lock().is_none() && self.storage.exists(&self.path) {
                if let Err(e) = self.storage.remove(&self.path) {
                    tracing::warn!(path = %self.path.display(), error = %e,
                        "cannot remove a spare log segment a crash left behind");
                }
            }
            return;
        }
        self.ensure_thread();
        let mut s = self.state.lock();
        if !s.ready {
            s.wanted = true;
            self.wake.notify_one();
        }
    }

    /// Rename a recycled segment, else the ready spare, to `to` (a new
    /// segment; the caller syncs the directory), and have the next spare
    /// of `next_bytes` prepared if the zero-filled one was taken. `false`
    /// while none is ready: the caller creates the segment itself.
    pub fn take(self: &Arc<Self>, to: &Path, next_bytes: u64) -> Result<bool> {
        self.bytes.store(next_bytes, Ordering::Relaxed);
        let zero_fill = self.zero_fill.load(Ordering::Relaxed);
        if zero_fill {
            self.ensure_thread();
        }
        let mut s = self.state.lock();
        if let Some(from) = s.recycled.pop_front() {
            self.storage.rename(&from, to)?;
            self.took_recycled.fetch_add(1, Ordering::Relaxed);
            return Ok(true);
        }
        // Under the lock: the thread must not start replacing the file
        // before it has been renamed away.
        let ready = std::mem::take(&mut s.ready);
        if ready {
            self.storage.rename(&self.path, to)?;
            self.took_zeroed.fetch_add(1, Ordering::Relaxed);
        }
        if zero_fill {
            s.wanted = true;
            self.wake.notify_one();
        }
        Ok(ready)
    }

    /// Keep the pruned segment `segment` (open as `file`) for reuse rather
    /// than deleting it: rename it out of the log (synced), zero its
    /// header (synced) and queue it for [`Spare::take`]. `false`, with the
    /// file untouched, when enough are queued, when it is shorter than a
    /// spare, or before the first [`Spare::want`]/[`Spare::take`]: the
    /// caller deletes it then. `true` once the rename is durable: the
    /// segment has left the log even if preparing it fails after that (it
    /// is then removed, not queued).
    pub fn recycle(&self, segment: &Path, file: &dyn StorageFile) -> Result<bool> {
        let bytes = self.bytes.load(Ordering::Relaxed);
        {
            let s = self.state.lock();
            if s.shutdown || s.recycled.len() >= RECYCLED_MAX || bytes == 0 {
                return Ok(false);
            }
        }
        // Longer is fine: the extra bytes are never read (the records stop
        // before them) and never needed again.
        if file.len()? < bytes {
            return Ok(false);
        }
        let (Some(dir), Some(stem)) = (
            segment.parent(),
            segment.file_stem().and_then(|n| n.to_str()),
        ) else {
            return Ok(false);
        };
        let to = dir.join(format!("{stem}{RECYCLED_SUFFIX}"));
        self.storage.rename(segment, &to)?;
        self.storage.sync_dir(dir)?;
        // A whole block, so that an `O_DIRECT` segment file takes it too.
        let zeroed = file
            .write_at(&crate::io::shared_zeros()[..crate::io::IO_ALIGN], 0)
            .and_then(|()| file.sync_data());
        if let Err(e) = zeroed {
            tracing::warn!(path = %to.display(), error = %e,
                "cannot prepare a pruned log segment for reuse; removing it");
            let _ = self.storage.remove(&to);
            return Ok(true);
        }
        self.state.lock().recycled.push_back(to);
        Ok(true)
    }

    /// Is a spare (recycled or zero-filled) ready to be taken?
    pub fn is_ready(&self) -> bool {
        let s = self.state.lock();
        s.ready || !s.recycled.is_empty()
    }

    /// Segments started from a recycled file and from a zero-filled spare.
    pub fn taken(&self) -> (u64, u64) {
        (
            self.took_recycled.load(Ordering::Relaxed),
            self.took_zeroed.load(Ordering::Relaxed),
        )
    }

    /// Was the preparing thread ever started?
    #[cfg(test)]
    pub fn was_started(&self) -> bool {
        self.thread.lock().is_some()
    }

    /// Has the thread ended (after a failed preallocation, or shutdown)?
    #[cfg(test)]
    pub fn has_stopped(&self) -> bool {
        self.thread.lock().as_ref().is_none_or(|h| h.is_finished())
    }

    /// Ask the thread to stop, without waiting for it.
    pub fn stop(&self) {
        self.state.lock().shutdown = true;
        self.wake.notify_all();
    }

    /// Stop the thread and remove the spare files, recycled ones and any
    /// a crash left behind too (a clean close leaves no log files behind).
    pub fn shutdown(&self) -> Result<()> {
        self.stop();
        if let Some(h) = self.thread.lock().take() {
            let _ = h.join();
        }
        self.state.lock().recycled.clear();
        let Some(dir) = self.path.parent() else {
            return Ok(());
        };
        if self.storage.exists(dir) {
            for file in self.storage.list_dir(dir)? {
                if is_spare(&file) {
                    self.storage.remove(&file)?;
                }
            }
        }
        Ok(())
    }

    fn run(self: Arc<Self>) {
        loop {
            {
                let mut s = self.state.lock();
                // Sleep until a spare is wanted and none is ready.
                while !s.shutdown && (!s.wanted || s.ready) {
                    self.wake.wait(&mut s);
                }
                if s.shutdown {
                    return;
                }
                s.wanted = false;
            }
            let bytes = self.bytes.load(Ordering::Relaxed);
            if !self.room_for(bytes) {
                // Not now: the segment grows as it fills, and the next
                // roll asks again.
                continue;
            }
            match self.fill(bytes) {
                Ok(true) => self.state.lock().ready = true,
                Ok(false) => return, // shutting down
                Err(e) => {
                    tracing::warn!(path = %self.path.display(), error = %e,
                        "log segment preallocation failed; new segments grow as they fill");
                    let _ = self.storage.remove(&self.path);
                    return;
                }
            }
        }
    }

    /// Is the disk large enough to zero-fill a spare of `bytes`? Only
    /// while [`SPARE_ROOM`] times that stays free: a spare is space the
    /// log does not use yet, and every stream keeps one (with the
    /// default 16 MiB segments, three WAL partitions filled a 48 MiB disk
    /// with spares before the first checkpoint).
    fn room_for(&self, bytes: u64) -> bool {
        let room = self.storage.available_space(&self.path);
        let ok = room.is_none_or(|free| free >= bytes.saturating_mul(SPARE_ROOM));
        if !ok {
            tracing::debug!(path = %self.path.display(), bytes, free = ?room,
                "little free space: no zero-filled spare segment this time");
        }
        ok
    }

    /// Write a new spare of `bytes` zero bytes and sync it; `false` if a
    /// shutdown cut it short. Its directory entry need not be durable: the
    /// rename into a segment is synced.
    fn fill(&self, bytes: u64) -> Result<bool> {
        if self.storage.exists(&self.path) {
            self.storage.remove(&self.path)?;
        }
        let file = self
            .storage
            .open_log_file(&self.path, OpenMode::CreateNew)?;
        // A sync per piece: one sync of the whole spare would queue many
        // megabytes on the disk ahead of the log's own syncs (commit p99).
        let mut done = 0;
        while done < bytes {
            done = (done + PIECE).min(bytes);
            file.preallocate(done)?;
            file.sync_data()?;
            if self.state.lock().shutdown {
                return Ok(false);
            }
        }
        Ok(true)
    }
}
