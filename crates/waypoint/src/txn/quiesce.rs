//! The quiesce lock: every commit holds it shared while it validates,
//! installs and hands its write set to the scheme; the clean close and
//! DDL hold it exclusively, so that they see no commit in flight.
//!
//! Why not one reader-writer lock: its shared side is an atomic
//! read-modify-write of one word, which every commit of every session
//! wrote, so the word's cache line moved between cores on every commit
//! (found by profiling YCSB-A, docs/decisions/
//! 032-no-shared-writes-on-the-commit-path.md). A session counts itself
//! in instead in its slot's stripe of reader counts (a line of its own;
//! `sync::STRIPES` of them) and then checks the writer flag; a writer
//! raises the flag and waits until every stripe is empty. Threads without
//! a session slot (a scheme's checkpoint walker, the snapshot writer) take
//! the shared side of an ordinary lock, which the writer also holds.
//!
//! Invariant: while an [`Exclusive`] guard lives, no [`SessionRead`]
//! guard and no [`Quiesce::read`] guard does. Argument: a session reader
//! adds itself, then reads the flag; the writer raises the flag, then
//! reads every count (all sequentially consistent). So either the reader
//! sees the flag and leaves before it reads or waits on, or the writer
//! sees the count and waits for it to drop. `tests/model_check.rs`
//! (`quiesce`) runs this file under shuttle.

use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use crate::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard, STRIPES};
use crossbeam_utils::CachePadded;

/// The quiesce lock (see the module documentation).
pub(crate) struct Quiesce {
    /// Per stripe of session slots, the sessions inside a commit.
    readers: Box<[CachePadded<AtomicU64>]>,
    /// A writer holds or is taking the lock: sessions wait on `lock`.
    writer: AtomicBool,
    /// Writers exclude each other and threads without a slot through it;
    /// session readers that meet a writer wait on its shared side.
    lock: RwLock<()>,
    /// A writer waits for the session readers to leave. False only in the
    /// broken variant the model check must catch
    /// ([`Quiesce::broken_without_drain_for_tests`]).
    drain: bool,
}

/// A session inside a commit; leaves on drop.
pub(crate) struct SessionRead<'a> {
    count: &'a AtomicU64,
}

impl Drop for SessionRead<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The exclusive side: no commit in flight while it lives.
pub(crate) struct Exclusive<'a> {
    quiesce: &'a Quiesce,
    _lock: RwLockWriteGuard<'a, ()>,
}

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        // Before the lock is released (fields drop after this body), so a
        // reader woken by the release finds the flag down.
        self.quiesce.writer.store(false, Ordering::SeqCst);
    }
}

impl Default for Quiesce {
    fn default() -> Self {
        Quiesce {
            readers: (0..STRIPES)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            writer: AtomicBool::new(false),
            lock: RwLock::new(()),
            drain: true,
        }
    }
}

impl Quiesce {
    /// The shared side for the session in `slot`: writes only its stripe's
    /// line unless a writer is in.
    pub(crate) fn read_as(&self, slot: u16) -> SessionRead<'_> {
        let count = &self.readers[slot as usize % STRIPES];
        loop {
            count.fetch_add(1, Ordering::SeqCst);
            if !self.writer.load(Ordering::SeqCst) {
                return SessionRead { count };
            }
            count.fetch_sub(1, Ordering::SeqCst);
            // Wait for the writer to finish (it holds the lock exclusively
            // until after its flag is down).
            drop(self.lock.read());
        }
    }

    /// A lock whose writer does not wait for session readers: the broken
    /// variant `tests/model_check.rs` must catch.
    #[allow(dead_code)]
    pub(crate) fn broken_without_drain_for_tests() -> Self {
        Quiesce {
            drain: false,
            ..Quiesce::default()
        }
    }

    /// The shared side for a thread without a session slot.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, ()> {
        self.lock.read()
    }

    /// The exclusive side: waits for every commit in flight to end and
    /// keeps new ones out until dropped.
    pub(crate) fn write(&self) -> Exclusive<'_> {
        let lock = self.lock.write();
        self.writer.store(true, Ordering::SeqCst);
        for count in self.readers.iter().filter(|_| self.drain) {
            let mut waited = 0u32;
            while count.load(Ordering::SeqCst) != 0 {
                // A commit takes microseconds; one waiting on the log or
                // on back-pressure may take longer, so back off.
                waited += 1;
                if waited < 64 {
                    crate::sync::yield_now();
                } else {
                    crate::sync::sleep(std::time::Duration::from_micros(50));
                }
            }
        }
        Exclusive {
            quiesce: self,
            _lock: lock,
        }
    }
}
