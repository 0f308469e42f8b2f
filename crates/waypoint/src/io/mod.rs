//! The `io` layer: every byte that goes to a data, log or checkpoint file.
//!
//! One trait pair, [`Storage`] (a directory tree) and [`StorageFile`] (an
//! open file), with two implementations:
//! - [`RealStorage`]: `pread`/`pwrite`, `fdatasync`, optional `O_DIRECT`;
//! - [`SimStorage`]: a deterministic simulation in which writes are volatile
//!   until synced, a simulated crash keeps any subset of them (torn at sector
//!   granularity), and `EIO`/`ENOSPC`/short writes are injected at a chosen
//!   operation number (DESIGN.md "Habits": redb's crash backend, SQLite's
//!   crash VFS, TigerBeetle's simulated storage).
//!
//! Invariant: nothing above this layer touches `std::fs` for database files,
//! so the simulation sees every write the engine makes.

mod real;
// The simulated disk serves tests and the simulator only.
#[cfg(any(test, feature = "internals"))]
mod sim;

pub use real::RealStorage;
#[cfg(any(test, feature = "internals"))]
pub use sim::{CrashPolicy, Fault, FaultKind, SimStats, SimStorage};

use crate::error::Result;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How [`Storage::open`] treats a missing file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Open an existing file; fail if it is missing.
    Existing,
    /// Open the file, creating it empty if it is missing.
    CreateIfMissing,
    /// Create a new empty file; fail if it exists.
    CreateNew,
    /// Open an existing file for reading only; fail if it is missing.
    /// (`SimStorage` treats it as `Existing` and does not refuse writes.)
    ReadOnly,
}

/// A directory tree holding database files.
///
/// Metadata operations (create, remove, rename) are durable only after
/// [`Storage::sync_dir`] on the parent directory, as on a real file system.
pub trait Storage: Send + Sync + std::fmt::Debug + 'static {
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn StorageFile>>;
    /// Open the data file, which is read and written in whole, aligned
    /// pages only: with `Options::direct_io`, [`RealStorage`] opens it with
    /// `O_DIRECT`. The double-write file and the checkpoint metadata are
    /// written at unaligned offsets and lengths, which `O_DIRECT` refuses
    /// with `EINVAL`, so those go through [`Storage::open`].
    fn open_data_file(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn StorageFile>> {
        self.open(path, mode)
    }
    /// Open a log segment or a segment's spare for writing: with
    /// `PerWorkerOptions::log_direct_io`, [`RealStorage`] opens it with `O_DIRECT`
    /// where the file system allows it. Such a file says so
    /// ([`StorageFile::is_direct`]), and the log writes it in whole aligned
    /// blocks only (`logstore::blocks`).
    fn open_log_file(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn StorageFile>> {
        self.open(path, mode)
    }
    fn exists(&self, path: &Path) -> bool;
    fn remove(&self, path: &Path) -> Result<()>;
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    fn create_dir_all(&self, path: &Path) -> Result<()>;
    fn sync_dir(&self, path: &Path) -> Result<()>;
    /// The entries directly below `path` (files and directories), sorted.
    fn list_dir(&self, path: &Path) -> Result<Vec<PathBuf>>;
    /// Bytes still free for this process on the file system that holds
    /// `path`, or `None` where that cannot be told. The log sizes its
    /// limit and its preallocation to it, so that a small disk works with
    /// the default options.
    fn available_space(&self, _path: &Path) -> Option<u64> {
        None
    }
}

/// One open file. All methods take `&self`: positional I/O needs no cursor,
/// so one handle serves many threads.
pub trait StorageFile: Send + Sync + std::fmt::Debug {
    fn path(&self) -> &Path;
    /// Whether writes must be whole [`IO_ALIGN`] blocks at aligned offsets
    /// from an aligned buffer (`O_DIRECT`); anything else fails with
    /// `EINVAL`.
    fn is_direct(&self) -> bool {
        false
    }
    /// Fill `buf` from `offset`. Reading past the end of the file is an
    /// `UnexpectedEof` I/O error.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;
    /// Write all of `buf` at `offset`, extending the file if needed. The
    /// bytes are durable only after a successful [`StorageFile::sync_data`].
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()>;
    /// `fdatasync`: make every completed write to this file durable.
    fn sync_data(&self) -> Result<()>;
    fn len(&self) -> Result<u64>;
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
    fn set_len(&self, len: u64) -> Result<()>;
    /// Make the file at least `len` bytes long with every block below
    /// `len` written, by appending zeros from its current length (a
    /// multiple of 4 KiB, so `O_DIRECT` files qualify too), so that later
    /// overwrites there change no file-system metadata. Durable after
    /// `sync_data`.
    ///
    /// Zeros are written, not `fallocate`d: ext4 allocates "unwritten"
    /// extents, and a sync after writing into one still commits metadata
    /// (docs/decisions/measurements.md, "2026-11-22: segment preallocation").
    fn preallocate(&self, len: u64) -> Result<()> {
        let mut at = self.len()?;
        debug_assert_eq!(
            at % IO_ALIGN as u64,
            0,
            "preallocation appends whole blocks"
        );
        let zeros = shared_zeros();
        while at < len {
            let n = ((len - at) as usize)
                .next_multiple_of(IO_ALIGN)
                .min(zeros.len());
            self.write_at(&zeros[..n], at)?;
            at += n as u64;
        }
        Ok(())
    }
}

/// One process-wide megabyte of zeros that preallocation writes from,
/// aligned for `O_DIRECT`.
///
/// Why shared, and mapped once: a fresh buffer per write was a fresh map,
/// so the kernel's copy into the page cache faulted on every 4 KiB of it
/// and zeroed the page-cache page before retrying the copy. That was 5% of
/// all CPU in 2-worker TPC-C (docs/decisions/measurements.md, "2026-11-23: where the
/// logging CPU goes"). Once read, this buffer's pages stay mapped (to the
/// kernel's zero page), so later copies fault no more. It is never written.
pub(crate) fn shared_zeros() -> &'static [u8] {
    static ZEROS: std::sync::OnceLock<AlignedBuf> = std::sync::OnceLock::new();
    ZEROS.get_or_init(|| AlignedBuf::zeroed(1 << 20)).as_slice()
}

/// The machine's memory and swap in bytes (None if the system does not
/// say): the most a buffer pool could ever hold. A pool beyond it cannot
/// be filled, and under a permissive overcommit policy its mapping would
/// succeed and the process be killed once the pages are touched.
pub fn machine_memory_bytes() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sysinfo fills the struct it is given and nothing else.
        let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
        if unsafe { libc::sysinfo(&mut info) } == 0 {
            let unit = u64::from(info.mem_unit.max(1));
            return (info.totalram as u64)
                .checked_add(info.totalswap as u64)?
                .checked_mul(unit);
        }
    }
    // SAFETY: sysconf reads a system value.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages <= 0 || page <= 0 {
        return None;
    }
    (pages as u64).checked_mul(page as u64)
}

/// A buffer aligned to 4 KiB, as `O_DIRECT` requires for buffers,
/// offsets and lengths. Page frames and writeback buffers use it.
///
/// Large buffers (the buffer pool's frames) are anonymous memory maps: the
/// kernel hands out zeroed pages on first touch, so a pool of several GiB
/// costs nothing until pages are read into it, opening is not a memset of
/// the whole budget, and the process's resident memory is what it uses.
/// (`alloc_zeroed` with 4 KiB alignment zeroes every byte up front.)
pub struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    mapped: bool,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like a Box<[u8]>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out raw pointers; callers synchronise.
unsafe impl Sync for AlignedBuf {}

pub const IO_ALIGN: usize = 4096;

/// Buffers at least this large are memory maps.
const MAP_AT_LEAST: usize = 1 << 20;

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (`len` > 0, a multiple of 4 KiB).
    /// Aborts, as `Box::new` does, if the memory cannot be had: for
    /// buffers whose size the engine chooses.
    pub fn zeroed(len: usize) -> Self {
        Self::try_zeroed(len).unwrap_or_else(|| {
            std::alloc::handle_alloc_error(
                std::alloc::Layout::from_size_align(len, IO_ALIGN).expect("valid layout"),
            )
        })
    }

    /// [`AlignedBuf::zeroed`], or None where the system refuses the
    /// memory: for buffers whose size a caller chose (the buffer pool's
    /// frames), so a budget beyond what the machine can map is an error,
    /// not an abort.
    pub fn try_zeroed(len: usize) -> Option<Self> {
        assert!(
            len > 0 && len.is_multiple_of(IO_ALIGN),
            "aligned buffers are whole 4 KiB blocks"
        );
        if len >= MAP_AT_LEAST {
            // SAFETY: a fresh private anonymous mapping; no address hint.
            let raw = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if raw == libc::MAP_FAILED {
                return None;
            }
            // Mappings are page-aligned, and pages are at least 4 KiB.
            debug_assert!((raw as usize).is_multiple_of(IO_ALIGN));
            let ptr = std::ptr::NonNull::new(raw.cast::<u8>())?;
            return Some(AlignedBuf {
                ptr,
                len,
                mapped: true,
            });
        }
        let layout = std::alloc::Layout::from_size_align(len, IO_ALIGN).ok()?;
        // SAFETY: layout has non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        Some(AlignedBuf {
            ptr: std::ptr::NonNull::new(raw)?,
            len,
            mapped: false,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes for the lifetime of self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: unique borrow of self gives unique access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.mapped {
            // SAFETY: mapped in `zeroed` with this length; nothing borrows it.
            let r = unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
            debug_assert_eq!(r, 0, "munmap of our own mapping");
            return;
        }
        let layout = std::alloc::Layout::from_size_align(self.len, IO_ALIGN).expect("valid layout");
        // SAFETY: allocated in `zeroed` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) };
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both kinds of buffer (heap below `MAP_AT_LEAST`, a map from it on)
    /// are aligned, zeroed and writable to their last byte.
    #[test]
    fn aligned_buffers_are_zeroed_aligned_and_writable_to_the_end() {
        for len in [IO_ALIGN, MAP_AT_LEAST - IO_ALIGN, MAP_AT_LEAST, 64 << 20] {
            let mut b = AlignedBuf::zeroed(len);
            assert_eq!(b.len(), len);
            assert!((b.as_ptr() as usize).is_multiple_of(IO_ALIGN));
            assert_eq!(b.mapped, len >= MAP_AT_LEAST);
            assert!(b.as_slice().iter().step_by(509).all(|&x| x == 0));
            let s = b.as_mut_slice();
            s[0] = 1;
            s[len - 1] = 2;
            assert_eq!((b.as_slice()[0], b.as_slice()[len - 1]), (1, 2));
        }
    }

    /// More memory than any address space holds is refused, not an abort.
    #[test]
    fn an_impossible_buffer_is_refused() {
        assert!(AlignedBuf::try_zeroed(1 << 62).is_none());
        assert!(AlignedBuf::try_zeroed(usize::MAX - IO_ALIGN + 1).is_none());
        assert_eq!(
            AlignedBuf::try_zeroed(MAP_AT_LEAST).map(|b| b.len()),
            Some(MAP_AT_LEAST)
        );
    }
}
