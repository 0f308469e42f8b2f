//! Stage 1 of a stream: the ring of in-memory chunks the owner appends
//! to, and the state the appender, the writer thread and waiters share
//! under the stage-1 lock (seed 000 §3.1, Fig. 2: "log chunks").
//!
//! The owner appends frames to the *current* chunk; a full chunk (or the
//! current one, when durability is asked for) moves to the *full* queue;
//! whoever writes takes the full queue and returns the buffers to the
//! *free* list. A group of frames appended together never spans two
//! chunks, so it never spans two segments, and the durable position never
//! falls inside it.
//!
//! Space may also be *reserved* (`super::reserve`: filled later, outside
//! the lock); the reservations not yet released for writing are kept here
//! in stream order, and whoever writes takes only the full chunks that end
//! at or before the first of them.
//!
//! Invariants: chunks are contiguous in stream order: each starts where the
//! one before it ends, and the full queue is written front to back; a
//! chunk's buffer is never reallocated while it holds bytes (a reservation
//! points into it), so a non-empty chunk's capacity is at least
//! [`CHUNK_SIZE`] or what its reservation needed.

use crate::ids::LogPos;
use std::collections::VecDeque;

/// Size of one stage-1 chunk; a group of frames larger than this gets a
/// chunk of its own.
pub const CHUNK_SIZE: usize = 256 << 10;

/// Free chunk buffers kept for reuse; more are dropped.
const FREE_CHUNKS: usize = 4;

pub(super) struct Chunk {
    pub bytes: Vec<u8>,
    /// Stream position of `bytes[0]`.
    pub start: LogPos,
    /// Largest mark of a frame in the chunk (the scheme's number for what
    /// it appends; the per-worker WAL's GSN).
    pub max_mark: u64,
}

impl Chunk {
    /// Stream position after the chunk's bytes.
    #[inline]
    pub fn end(&self) -> LogPos {
        self.start.advance(self.bytes.len() as u64)
    }
}

/// What the appender, the writer thread and waiters share.
pub(super) struct Stage1 {
    pub current: Chunk,
    pub full: VecDeque<Chunk>,
    pub free: Vec<Vec<u8>>,
    /// Position the writer has been asked to make durable.
    pub flush_requested: LogPos,
    /// Flush requests that raised `flush_requested` since the last write
    /// began: commits waiting for a sync.
    pub requests: usize,
    /// When the first of those requests came: a pacing pause ends once it
    /// has waited `SYNC_PATIENCE` syncs.
    pub oldest_request: Option<std::time::Instant>,
    /// Notes appended and not yet durable: (end position, value)
    /// ([`super::Stream::note_at`]).
    pub notes: VecDeque<(LogPos, u64)>,
    pub shutdown: bool,
    /// Threads blocked in `wait_durable`: while there is one, the writer
    /// syncs at once instead of pacing.
    pub blocked: usize,
    /// Chunks taken from `full` are being written and synced, by the
    /// writer or by a blocking committer (`sync_to`): one write at a time.
    pub writing: bool,
    /// What the writer thread is waiting for, if anything: who must wake
    /// it, and who need not.
    pub writer: WriterWait,
    /// Reservations not yet released for writing, in stream order
    /// (`super::reserve`); empty for a stream that only appends.
    pub reservations: VecDeque<Pending>,
    /// Sequence number of `reservations[0]` (of the next one when empty).
    pub first_reservation: u64,
    /// Threads in `sync_to` waiting for a reservation to be released.
    pub fill_waiters: usize,
}

/// A reservation not yet released for writing.
pub(super) struct Pending {
    pub start: LogPos,
    pub released: bool,
}

impl Stage1 {
    /// An empty ring whose next frame goes to stream position `end`.
    pub fn new(end: LogPos) -> Self {
        Stage1 {
            current: Chunk {
                bytes: Vec::with_capacity(CHUNK_SIZE),
                start: end,
                max_mark: 0,
            },
            full: VecDeque::new(),
            free: Vec::new(),
            flush_requested: end,
            requests: 0,
            oldest_request: None,
            notes: VecDeque::new(),
            shutdown: false,
            blocked: 0,
            writing: false,
            writer: WriterWait::Busy,
            reservations: VecDeque::new(),
            first_reservation: 0,
            fill_waiters: 0,
        }
    }

    /// Is there a full chunk that may be written now: one that ends at or
    /// before the first reservation not yet released?
    #[inline]
    pub fn writable(&self) -> bool {
        match (self.full.front(), self.reservations.front()) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(c), Some(r)) => c.end() <= r.start,
        }
    }

    /// Take the full chunks that may be written now (see [`Stage1::writable`]).
    pub fn take_writable(&mut self) -> VecDeque<Chunk> {
        match self.reservations.front() {
            None => std::mem::take(&mut self.full),
            Some(r) => {
                let n = self.full.iter().take_while(|c| c.end() <= r.start).count();
                self.full.drain(..n).collect()
            }
        }
    }

    /// Stream position after the current chunk: where the next frame goes.
    #[inline]
    pub fn end(&self) -> LogPos {
        self.current.start.advance(self.current.bytes.len() as u64)
    }

    /// Move the current chunk to the full queue.
    pub fn seal_current(&mut self) {
        let start = self.end();
        let buf = self
            .free
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(CHUNK_SIZE));
        let next = Chunk {
            bytes: buf,
            start,
            max_mark: 0,
        };
        let full = std::mem::replace(&mut self.current, next);
        self.full.push_back(full);
    }

    /// Take back the buffers of written chunks.
    pub fn recycle(&mut self, chunks: VecDeque<Chunk>) {
        for mut c in chunks {
            c.bytes.clear();
            if self.free.len() < FREE_CHUNKS {
                self.free.push(c.bytes);
            }
        }
    }
}

/// A value alone on its cache line (two lines: adjacent-line prefetch).
#[repr(align(128))]
pub(super) struct Padded<T>(pub T);

/// Why the writer thread sleeps. Every wake-up costs a context switch that,
/// on a machine with as many workers as cores, preempts a worker, so each
/// event wakes the writer only when the writer would not find it anyway
/// when its current wait ends.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum WriterWait {
    /// Running (or writing without the lock): it looks at every request
    /// when it next takes the lock.
    Busy,
    /// Nothing to do: any request wakes it.
    Idle,
    /// A waiter's write is in progress; its end wakes the writer.
    Write,
    /// Sleeping out the sync interval. A request waits for its end; a
    /// blocked waiter, a full batch and shutdown end it early.
    Pacing,
    /// Letting group commits gather (`GROUP_WINDOW`) before a lazy flush.
    /// Another lazy request joins the window without waking it.
    Window,
    /// Full chunks wait for a reservation to be filled; its release wakes
    /// the writer.
    Fill,
}
