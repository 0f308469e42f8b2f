//! Reserved appends: space in the stage-1 chunk ring taken under the
//! stage-1 lock, filled afterwards by any number of threads outside it,
//! and released for writing in stream order (Aether's decoupled buffer
//! fill, Johnson et al., PVLDB 2010, §5: "the log buffer is released in
//! LSN order as fills complete"). The same ring, writer and files serve
//! [`Stream::append_frames`], which copies under the lock and so never
//! leaves a reservation open: a stream that only appends pays one test of
//! an empty queue per write for this.
//!
//! Invariants: the writer (and a committer syncing itself) never writes a
//! byte at or after the first reservation not yet released (`Stage1::
//! take_writable`); a reservation's bytes stay where they are until it is
//! released (a non-empty chunk is never reallocated, and a chunk is
//! recycled only after it was written); marks are reserved in order, as
//! they are appended.

use super::ring::{Pending, WriterWait, CHUNK_SIZE};
use super::Stream;
use crate::error::Result;
use crate::ids::LogPos;
use crate::logstore::frame;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

/// Space reserved in a stream for frames not yet copied there. Fill it
/// ([`Reserved::fill`]), then hand it back with [`Stream::release`]: until
/// then nothing at or after it is written, so a reservation that is never
/// released stalls the stream (its holder poisons the stream instead when
/// it cannot fill it: [`Stream::abandon`]).
pub struct Reserved {
    start: LogPos,
    len: usize,
    /// `len` bytes in a chunk's buffer, zeroed when reserved.
    ptr: NonNull<u8>,
    seq: u64,
}

// SAFETY: the pointer is into a chunk buffer that stays allocated and in
// place until the reservation is released (module invariant); threads
// filling it write disjoint ranges (the contract of `fill`).
unsafe impl Send for Reserved {}
unsafe impl Sync for Reserved {}

impl std::fmt::Debug for Reserved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Reserved({} + {})", self.start, self.len)
    }
}

impl Reserved {
    /// Stream position of the reservation's first byte.
    #[inline]
    pub fn start(&self) -> LogPos {
        self.start
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Stream position after the reservation.
    #[inline]
    pub fn end(&self) -> LogPos {
        self.start.advance(self.len as u64)
    }

    /// Place the sealed frames `frames` (whole frames, back to back) at
    /// offset `at` of the reservation and copy them there.
    ///
    /// # Safety
    /// The reservation is not yet released, and no other thread fills an
    /// overlapping range. (Ranges of one reservation handed to different
    /// threads, as the consolidation array does, are disjoint.)
    ///
    /// # Panics
    /// If the frames do not fit at `at`.
    pub unsafe fn fill(&self, at: usize, frames: &mut [u8]) {
        assert!(
            at.checked_add(frames.len()).is_some_and(|e| e <= self.len),
            "{} bytes at {at} do not fit a reservation of {}",
            frames.len(),
            self.len
        );
        frame::place_at(frames, self.start.advance(at as u64));
        // SAFETY: in bounds (asserted), the buffer is alive and in place
        // (not released), and the range is this caller's alone.
        unsafe {
            std::ptr::copy_nonoverlapping(frames.as_ptr(), self.ptr.as_ptr().add(at), frames.len());
        }
    }
}

impl Stream {
    /// Reserve `len` bytes for `count` frames whose largest mark is
    /// `max_mark`, to be filled later. Like [`Stream::append_frames`], the
    /// reservation lands in one chunk, so its frames are written and synced
    /// all or none; `appended` covers it before this returns.
    pub fn reserve(&self, len: usize, count: u64, max_mark: u64) -> Result<Reserved> {
        self.check_healthy()?;
        assert!(len > 0, "a reservation holds at least one frame");
        let mut s = self.stage1.lock();
        if !s.current.bytes.is_empty() && s.current.bytes.len() + len > CHUNK_SIZE {
            s.seal_current();
        }
        if s.current.bytes.is_empty() && s.current.bytes.capacity() < len {
            // Only an empty buffer grows: nothing points into it.
            s.current.bytes.reserve_exact(len);
        }
        debug_assert!(
            max_mark >= s.current.max_mark,
            "frames of a stream are reserved in mark order"
        );
        let before = s.current.bytes.len();
        let base = s.current.bytes.as_mut_ptr();
        s.current.bytes.resize(before + len, 0);
        assert_eq!(
            base,
            s.current.bytes.as_mut_ptr(),
            "a chunk holding reservations is never reallocated"
        );
        // SAFETY: `before + len` bytes are initialised in this buffer.
        let ptr = NonNull::new(unsafe { base.add(before) }).expect("a buffer is never null");
        let start = s.current.start.advance(before as u64);
        if s.writer == WriterWait::Pacing
            && before < super::SYNC_BATCH
            && s.current.bytes.len() >= super::SYNC_BATCH
        {
            self.work.notify_one();
        }
        s.current.max_mark = s.current.max_mark.max(max_mark);
        self.appended.store(s.end().get(), Ordering::Release);
        self.records.store(
            self.records.load(Ordering::Relaxed) + count,
            Ordering::Relaxed,
        );
        let seq = s.first_reservation + s.reservations.len() as u64;
        let released = self.broken_early_release();
        if !released {
            s.reservations.push_back(Pending {
                start,
                released: false,
            });
        } else {
            s.first_reservation += 1;
        }
        if s.current.bytes.len() >= CHUNK_SIZE {
            s.seal_current();
            self.work.notify_one();
        }
        Ok(Reserved {
            start,
            len,
            ptr,
            seq,
        })
    }

    /// Release `r`, filled, for writing: the writer may write it once every
    /// reservation before it is released too.
    pub fn release(&self, r: &Reserved) {
        let mut s = self.stage1.lock();
        if self.broken_early_release() {
            return;
        }
        let i = usize::try_from(r.seq - s.first_reservation).expect("a pending reservation");
        let pending = s.reservations.get_mut(i).expect("released once");
        debug_assert!(!pending.released && pending.start == r.start, "released once");
        pending.released = true;
        let mut moved = false;
        while s.reservations.front().is_some_and(|p| p.released) {
            s.reservations.pop_front();
            s.first_reservation += 1;
            moved = true;
        }
        if moved {
            if s.writer == WriterWait::Fill {
                self.work.notify_one();
            }
            if s.fill_waiters > 0 {
                self.durable_cv.notify_all();
            }
        }
    }

    /// `r` will never be filled (its filler failed): stop the stream, as a
    /// failed write does, so that nothing after the hole is ever reported
    /// durable and every waiter gets an error instead of waiting for it.
    pub fn abandon(&self, r: &Reserved) {
        let e = crate::error::Error::Poisoned {
            cause: format!("a reservation of the log at {} was never filled", r.start),
        };
        self.fail(&e);
        let _s = self.stage1.lock();
        self.work.notify_all();
        self.durable_cv.notify_all();
    }

    /// Release every reservation for writing at once, before it is filled:
    /// a broken decoupled fill, which the crash tests must catch (`testing`
    /// feature only). Written chunks are then leaked, not reused, so a late
    /// fill never lands in another chunk's bytes.
    #[cfg(feature = "testing")]
    pub fn set_broken_early_release_for_tests(&self, broken: bool) {
        self.broken_early_release.store(broken, Ordering::Relaxed);
    }

    /// Whether the broken-release switch is on: a constant `false` without
    /// the `testing` feature.
    #[inline(always)]
    pub(super) fn broken_early_release(&self) -> bool {
        #[cfg(feature = "testing")]
        return self.broken_early_release.load(Ordering::Relaxed);
        #[cfg(not(feature = "testing"))]
        false
    }
}

#[cfg(test)]
mod tests;
