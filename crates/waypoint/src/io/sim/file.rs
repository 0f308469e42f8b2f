//! A simulated file handle (module docs of `io::sim`, "Data"): writes
//! change the current image and queue as pending, `sync_data` replays them
//! onto the durable image. A handle works only in the generation it was
//! opened in; afterwards every call fails with EIO, uncounted.

use super::tree::{apply, apply_write, errno, Inner, Ino, Pending, MAX_FILE_LEN};
use crate::error::{Error, IoOp, Result};
use crate::io::StorageFile;
use parking_lot::Mutex;
use rand::Rng;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A handle, valid for the generation (time between crashes) it was opened in.
pub(super) struct SimFile {
    pub(super) inner: Arc<Mutex<Inner>>,
    pub(super) path: PathBuf,
    pub(super) ino: Ino,
    pub(super) generation: u64,
    pub(super) direct: bool,
}

impl std::fmt::Debug for SimFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimFile")
            .field("path", &self.path)
            .field("ino", &self.ino)
            .field("generation", &self.generation)
            .finish()
    }
}

impl SimFile {
    /// Locks the disk, refuses a handle from before a crash, counts the op.
    fn begin(
        &self,
        op: IoOp,
        offset: Option<u64>,
    ) -> Result<(parking_lot::MutexGuard<'_, Inner>, bool)> {
        let mut inner = self.inner.lock();
        if inner.generation != self.generation {
            return Err(errno(op, &self.path, offset, libc::EIO));
        }
        let short = inner.begin_op(op, &[&self.path], offset)?;
        Ok((inner, short))
    }

    fn err(&self, op: IoOp, offset: Option<u64>, code: i32) -> Error {
        errno(op, &self.path, offset, code)
    }

    /// `[offset, offset + len)` as usize, if within the size cap.
    fn range(&self, op: IoOp, offset: u64, len: usize) -> Result<(usize, usize)> {
        let efbig = || self.err(op, Some(offset), libc::EFBIG);
        let end = offset
            .checked_add(len as u64)
            .filter(|&end| end <= MAX_FILE_LEN);
        let end = end.ok_or_else(efbig)?;
        let start = usize::try_from(offset).map_err(|_| efbig())?;
        let end = usize::try_from(end).map_err(|_| efbig())?;
        Ok((start, end))
    }
}

impl StorageFile for SimFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let (mut inner, _) = self.begin(IoOp::Read, Some(offset))?;
        let file = inner
            .file(self.ino)
            .ok_or_else(|| self.err(IoOp::Read, Some(offset), libc::EIO))?;
        if !buf.is_empty() {
            let src = usize::try_from(offset)
                .ok()
                .and_then(|start| Some(start..start.checked_add(buf.len())?))
                .and_then(|range| file.current.get(range));
            let src = src.ok_or_else(|| {
                let eof = std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "failed to fill whole buffer",
                );
                Error::io(IoOp::Read, &self.path, Some(offset), eof)
            })?;
            buf.copy_from_slice(src);
        }
        inner.stats.reads += 1;
        inner.stats.bytes_read += buf.len() as u64;
        Ok(())
    }

    fn is_direct(&self) -> bool {
        self.direct
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let aligned = |x: usize| x.is_multiple_of(crate::io::IO_ALIGN);
        if self.direct
            && !(aligned(offset as usize) && aligned(buf.len()) && aligned(buf.as_ptr() as usize))
        {
            return Err(self.err(IoOp::Write, Some(offset), libc::EINVAL));
        }
        let (mut inner, short) = self.begin(IoOp::Write, Some(offset))?;
        let (start, _) = self.range(IoOp::Write, offset, buf.len())?;
        let len = if short {
            inner.rng.gen_range(0..buf.len().max(1))
        } else {
            buf.len()
        };
        let data = &buf[..len];
        let old_len = inner.file(self.ino).map_or(0, |f| f.current.len());
        let new_len = if data.is_empty() {
            old_len
        } else {
            old_len.max(start + len)
        };
        if !inner.space_ok(old_len, new_len) {
            return Err(self.err(IoOp::Write, Some(offset), libc::ENOSPC));
        }
        let file = inner
            .file_mut(self.ino)
            .ok_or_else(|| self.err(IoOp::Write, Some(offset), libc::EIO))?;
        if !data.is_empty() {
            apply_write(&mut file.current, start, data);
            file.pending.push(Pending::Write {
                offset: start,
                data: data.to_vec(),
            });
        }
        inner.stats.writes += 1;
        inner.stats.bytes_written += len as u64;
        if short {
            return Err(self.err(IoOp::Write, Some(offset), libc::EIO));
        }
        Ok(())
    }

    fn sync_data(&self) -> Result<()> {
        let (mut inner, _) = self.begin(IoOp::SyncData, None)?;
        let file = inner
            .file_mut(self.ino)
            .ok_or_else(|| self.err(IoOp::SyncData, None, libc::EIO))?;
        for op in file.pending.drain(..) {
            apply(&mut file.durable, &op);
        }
        debug_assert!(file.durable == file.current, "durable + pending != current");
        inner.stats.data_syncs += 1;
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        let (inner, _) = self.begin(IoOp::Len, None)?;
        let file = inner
            .file(self.ino)
            .ok_or_else(|| self.err(IoOp::Len, None, libc::EIO))?;
        Ok(file.current.len() as u64)
    }

    fn set_len(&self, len: u64) -> Result<()> {
        let (mut inner, _) = self.begin(IoOp::SetLen, None)?;
        let (new_len, _) = self.range(IoOp::SetLen, len, 0)?;
        let old_len = inner.file(self.ino).map_or(0, |f| f.current.len());
        if !inner.space_ok(old_len, new_len) {
            return Err(self.err(IoOp::SetLen, None, libc::ENOSPC));
        }
        let file = inner
            .file_mut(self.ino)
            .ok_or_else(|| self.err(IoOp::SetLen, None, libc::EIO))?;
        file.current.resize(new_len, 0);
        file.pending.push(Pending::SetLen(new_len));
        Ok(())
    }

    /// A simulated file has no blocks to allocate: extending it with
    /// zeros is the whole effect (and costs no copy of the zeros).
    fn preallocate(&self, len: u64) -> Result<()> {
        if self.len()? < len {
            self.set_len(len)?;
        }
        Ok(())
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        let mut inner = self.inner.lock();
        if inner.generation == self.generation {
            if let Some(file) = inner.file_mut(self.ino) {
                file.handles = file.handles.saturating_sub(1);
            }
            inner.gc();
        }
    }
}
