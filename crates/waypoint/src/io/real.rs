//! The real storage: positional `pread`/`pwrite`, `fdatasync`, directory
//! `fsync`, and optional `O_DIRECT` for the data file and for log segments
//! and their spares (buffered where the file system refuses it).

use super::{OpenMode, Storage, StorageFile};
use crate::error::{Error, IoOp, Result};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Files on the local file system.
#[derive(Debug, Clone, Default)]
pub struct RealStorage {
    direct_io: bool,
    direct_log: bool,
}

impl RealStorage {
    pub fn new() -> Self {
        Self::default()
    }

    /// Open the data file ([`Storage::open_data_file`]) with `O_DIRECT`,
    /// bypassing the OS page cache. Every buffer and offset passed to it
    /// must then be aligned to 4 KiB, which the buffer pool guarantees for
    /// pages. Other files are opened as usual.
    pub fn with_direct_io(direct_io: bool) -> Self {
        Self {
            direct_io,
            direct_log: false,
        }
    }

    /// Open log segments and their spares ([`Storage::open_log_file`]) with
    /// `O_DIRECT`: the log's writes then skip the page cache's copy and
    /// writeback (docs/decisions/measurements.md, "2026-11-23: the log bypasses the page
    /// cache"). A file system that
    /// refuses `O_DIRECT` (`EINVAL` at open) gets buffered log files.
    pub fn with_direct_log(mut self, direct_log: bool) -> Self {
        self.direct_log = direct_log;
        self
    }
}

#[derive(Debug)]
struct RealFile {
    path: PathBuf,
    file: File,
    direct: bool,
}

impl RealStorage {
    fn open_with(&self, path: &Path, mode: OpenMode, direct: bool) -> Result<Arc<dyn StorageFile>> {
        let mut options = OpenOptions::new();
        options.read(true).write(mode != OpenMode::ReadOnly);
        match mode {
            OpenMode::Existing | OpenMode::ReadOnly => {}
            OpenMode::CreateIfMissing => {
                options.create(true);
            }
            OpenMode::CreateNew => {
                options.create_new(true);
            }
        }
        if direct {
            options.custom_flags(libc::O_DIRECT);
        }
        let file = options
            .open(path)
            .map_err(|e| Error::io(IoOp::Open, path, None, e))?;
        Ok(Arc::new(RealFile {
            path: path.to_path_buf(),
            file,
            direct,
        }))
    }
}

impl Storage for RealStorage {
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn StorageFile>> {
        self.open_with(path, mode, false)
    }

    fn open_data_file(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn StorageFile>> {
        self.open_with(path, mode, self.direct_io)
    }

    fn open_log_file(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn StorageFile>> {
        if !self.direct_log {
            return self.open_with(path, mode, false);
        }
        match self.open_with(path, mode, true) {
            // tmpfs before Linux 6.6, among others.
            Err(Error::Io { cause, .. }) if cause.raw_os_error() == Some(libc::EINVAL) => {
                warn_buffered_log_once(path);
                // Linux refuses `O_DIRECT` only after `O_CREAT` made the
                // file: a `CreateNew` has created it, empty, by then (had
                // the file existed, `O_EXCL` would have failed first).
                let mode = match mode {
                    OpenMode::CreateNew => OpenMode::CreateIfMissing,
                    other => other,
                };
                self.open_with(path, mode, false)
            }
            other => other,
        }
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let result = if path.is_dir() {
            std::fs::remove_dir_all(path)
        } else {
            std::fs::remove_file(path)
        };
        result.map_err(|e| Error::io(IoOp::Remove, path, None, e))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| Error::io(IoOp::Rename, from, None, e))
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        std::fs::create_dir_all(path).map_err(|e| Error::io(IoOp::CreateDir, path, None, e))
    }

    fn sync_dir(&self, path: &Path) -> Result<()> {
        let dir = File::open(path).map_err(|e| Error::io(IoOp::SyncDir, path, None, e))?;
        dir.sync_all()
            .map_err(|e| Error::io(IoOp::SyncDir, path, None, e))
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<PathBuf>> {
        let entries =
            std::fs::read_dir(path).map_err(|e| Error::io(IoOp::ListDir, path, None, e))?;
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(IoOp::ListDir, path, None, e))?;
            out.push(entry.path());
        }
        out.sort();
        Ok(out)
    }

    fn available_space(&self, path: &Path) -> Option<u64> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: `c` is a valid C string and `st` a writable statvfs.
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
            return None;
        }
        Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
    }
}

/// One warning per process, not one per segment.
fn warn_buffered_log_once(path: &Path) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        tracing::warn!(path = %path.display(), "the file system refuses O_DIRECT; log files are buffered");
    });
}

impl StorageFile for RealFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn is_direct(&self) -> bool {
        self.direct
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| Error::io(IoOp::Read, &self.path, Some(offset), e))
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.file
            .write_all_at(buf, offset)
            .map_err(|e| Error::io(IoOp::Write, &self.path, Some(offset), e))
    }

    fn sync_data(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| Error::io(IoOp::SyncData, &self.path, None, e))
    }

    fn len(&self) -> Result<u64> {
        self.file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| Error::io(IoOp::Len, &self.path, None, e))
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.file
            .set_len(len)
            .map_err(|e| Error::io(IoOp::SetLen, &self.path, None, e))
    }
}
