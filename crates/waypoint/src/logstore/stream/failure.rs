//! How a stream stops: a write or sync of stage 2 that failed (seed 000
//! §3.1).
//!
//! A write that failed with `ENOSPC` makes the stream *full*: its waiters
//! and appends get [`Error::LogFull`], and the log's [`FullFlag`] is raised
//! so the database refuses writes while reads go on. Any other failure (an
//! EIO, a short write, a failed `fdatasync` whatever its code, a panic of
//! the thread writing) *poisons* it: [`Error::Poisoned`].
//!
//! Invariant: after a failure the stream never reports durability again,
//! and every waiter wakes to the error. Nothing is retried: a reopen
//! recovers.

use super::Stream;
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// Raised by the first stream of a log whose write fails with `ENOSPC`:
/// from then on the database accepts no writes (they could not be logged),
/// while reads go on. Never lowered; a reopen starts a new log manager.
#[derive(Debug, Default)]
pub struct FullFlag {
    full: AtomicBool,
    error: Mutex<Option<(PathBuf, String)>>,
}

impl FullFlag {
    /// `Err(LogFull)` once a stream ran out of space.
    #[inline]
    pub fn check(&self) -> Result<()> {
        if self.full.load(Ordering::Acquire) {
            return Err(self.error());
        }
        Ok(())
    }

    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::Acquire)
    }

    fn error(&self) -> Error {
        let (path, cause) = self.error.lock().clone().unwrap_or_default();
        Error::LogFull { path, cause }
    }

    fn set(&self, path: PathBuf, cause: String) {
        let mut e = self.error.lock();
        if e.is_none() {
            *e = Some((path, cause));
        }
        self.full.store(true, Ordering::Release);
    }
}

/// Why a stream stopped.
#[derive(Debug, Clone)]
pub(super) struct Failure {
    /// A write failed with `ENOSPC` (else: poisoned).
    pub full: bool,
    pub path: PathBuf,
    pub cause: String,
}

impl Stream {
    /// `Err(LogFull)` after a write failed with `ENOSPC`, `Err(Poisoned)`
    /// after any other failed write or sync, else Ok.
    #[inline]
    pub fn check_healthy(&self) -> Result<()> {
        if self.failed.load(Ordering::Acquire) {
            return Err(self.failure_error());
        }
        Ok(())
    }

    #[cold]
    fn failure_error(&self) -> Error {
        match self.failure.lock().clone() {
            Some(Failure {
                full: true,
                path,
                cause,
            }) => Error::LogFull { path, cause },
            other => Error::Poisoned {
                cause: other.map(|f| f.cause).unwrap_or_default(),
            },
        }
    }

    /// Did a write of this stream fail with `ENOSPC`?
    pub fn is_full(&self) -> bool {
        self.failed.load(Ordering::Acquire) && self.failure.lock().as_ref().is_some_and(|f| f.full)
    }

    /// Raise `flag` when a write of this stream fails with `ENOSPC`.
    pub fn set_full_flag(&self, flag: std::sync::Arc<FullFlag>) {
        let _ = self.full_flag.set(flag);
    }

    /// Stop the stream after write or sync `e` failed. The caller then
    /// drops what was waiting to be written and wakes every waiter.
    pub(super) fn fail(&self, e: &Error) {
        // ENOSPC on a write: the disk is full, and nothing claims the
        // bytes reached it. Anything else (EIO, a failed sync whatever its
        // code) poisons.
        let full = e.is_enospc_on_write();
        let path = match e {
            Error::Io { path, .. } => path.clone(),
            _ => self.dir.clone(),
        };
        if full {
            tracing::error!(stream = self.id, error = %e, "log disk full; stream stopped, the database refuses writes");
        } else {
            tracing::error!(stream = self.id, error = %e, "log write failed; stream poisoned");
        }
        *self.failure.lock() = Some(Failure {
            full,
            path: path.clone(),
            cause: e.to_string(),
        });
        // The database-wide flag first: whoever sees this stream fail must
        // find writes refused already.
        if full {
            if let Some(flag) = self.full_flag.get() {
                flag.set(path, e.to_string());
            }
        }
        self.failed.store(true, Ordering::Release);
    }
}

/// Poisons the stream when the thread writing for it panics (a broken
/// assertion): `writing` would stay set and every waiter would wait
/// forever; this way they get an error. A thread that was unwinding
/// already when it began the write (a commit in a `Drop` during a panic)
/// is not taken for a panic of the write.
pub(super) struct PoisonOnPanic<'a> {
    stream: &'a Stream,
    unwinding_before: bool,
}

impl<'a> PoisonOnPanic<'a> {
    pub fn new(stream: &'a Stream) -> Self {
        PoisonOnPanic {
            stream,
            unwinding_before: std::thread::panicking(),
        }
    }
}

impl Drop for PoisonOnPanic<'_> {
    fn drop(&mut self) {
        if self.unwinding_before || !std::thread::panicking() {
            return;
        }
        let p = self.stream;
        *p.failure.lock() = Some(Failure {
            full: false,
            path: p.dir.clone(),
            cause: "the thread writing the log panicked".into(),
        });
        p.failed.store(true, Ordering::Release);
        let mut s = p.stage1.lock();
        s.writing = false;
        p.work.notify_all();
        p.durable_cv.notify_all();
    }
}
