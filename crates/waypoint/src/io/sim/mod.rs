//! Simulated storage: an in-memory file system that loses, keeps or tears
//! unsynced writes when told to crash, and fails chosen operations on demand
//! (DESIGN.md "Habits": redb's CrashBackend, SQLite's crash VFS in test6.c,
//! TigerBeetle's `testing/storage.zig`).
//!
//! It owns every byte and name of the simulated disk. The model:
//! - **Data.** A file (inode) has a durable image and a current image; every
//!   `write_at`/`set_len` changes the current image and is queued as pending.
//!   `sync_data` replays the queue onto the durable image. Invariant: durable
//!   image + all pending ops in order == current image.
//! - **Names.** A directory (inode) has durable and current entries
//!   (name → inode). Create, remove, rename and mkdir change current entries
//!   and append to a global log of pending metadata ops; `sync_dir` copies that
//!   directory's current entries to its durable ones and drops its part of the
//!   log. Invariant: durable entries + all logged ops in order == current.
//! - **Crash.** Metadata: `DropAll` keeps only durable entries, `KeepAll`
//!   keeps all of them, `Random { keep, .. }` replays a prefix of the log (each
//!   op continues the prefix with probability `keep`), as an ordered journal
//!   such as ext4's would. Data, per inode: durable image plus a subset of
//!   pending ops in their original order; a kept write may be torn into
//!   sector-aligned pieces (512 or 4096 bytes), each kept or not, so a sector
//!   is always wholly old or wholly new. A torn write extends the file only as
//!   far as its last surviving sector. Afterwards the generation advances and
//!   every older handle fails with EIO, without counting as an operation, so
//!   a stray thread of a dead engine instance neither writes into the new
//!   image nor perturbs the operation count of a deterministic run.
//! - **Instances.** A clone of the disk is the view of one engine instance
//!   (one process): it belongs to the generation it was made in, and after
//!   the next crash every [`Storage`](super::Storage) call through it fails
//!   the same way (EIO, uncounted, nothing changed or revealed). A test
//!   hands each instance `sim.clone()` and may `mem::forget` it to simulate
//!   power loss; the forgotten instance's threads keep running, and without
//!   this fence its checkpointer could still prune, rename or create files
//!   in the next image. The value [`SimStorage::new`] returns is the test's
//!   own view and is never fenced.
//! - **Faults.** Every storage and file call (not the test helpers on
//!   [`SimStorage`]) increments the operation counter; an injected [`Fault`]
//!   fires once, at the first eligible call numbered `>= at_op`.
//!
//! Every random choice comes from one RNG seeded by [`SimStorage::new`].
//!
//! Files: `tree` (the inodes, durable and current names and images, the
//! pending metadata log), `faults` (the fault and crash policies, the
//! operation counter, the crash itself), `storage` (the
//! [`Storage`](super::Storage) calls), `file` (the
//! [`StorageFile`](super::StorageFile) handle).

mod faults;
mod file;
mod storage;
#[cfg(test)]
mod tests;
mod tree;

pub use faults::{CrashPolicy, Fault, FaultKind};

use crate::error::{IoOp, Result};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use tree::{errno, parse, DirNode, Inner, Node, ROOT_ABS, ROOT_REL};

/// Counters of successful calls since [`SimStorage::new`] (crashes included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimStats {
    pub reads: u64,
    pub bytes_read: u64,
    pub writes: u64,
    pub bytes_written: u64,
    pub data_syncs: u64,
    pub dir_syncs: u64,
}

/// The simulated disk. Clones share it; a clone is fenced off by the next
/// crash (module docs, "Instances").
pub struct SimStorage {
    inner: Arc<Mutex<Inner>>,
    /// The generation this view belongs to; `None` for the value `new`
    /// returned, which lives across crashes.
    instance: Option<u64>,
}

impl Clone for SimStorage {
    /// A view for an engine instance: it works until the next crash. A
    /// clone of a fenced view is fenced too (a dead instance stays dead).
    fn clone(&self) -> Self {
        let instance = self
            .instance
            .unwrap_or_else(|| self.inner.lock().generation);
        Self {
            inner: Arc::clone(&self.inner),
            instance: Some(instance),
        }
    }
}

impl SimStorage {
    /// An empty disk whose every random choice derives from `seed`.
    pub fn new(seed: u64) -> Self {
        let mut nodes = BTreeMap::new();
        nodes.insert(ROOT_ABS, Node::Dir(DirNode::default()));
        nodes.insert(ROOT_REL, Node::Dir(DirNode::default()));
        let inner = Inner {
            rng: StdRng::seed_from_u64(seed),
            generation: 0,
            ops: 0,
            frozen: false,
            faults: Vec::new(),
            space_limit: None,
            sector_size: None,
            direct_log: false,
            stats: SimStats::default(),
            next_ino: 2,
            nodes,
            meta_log: Vec::new(),
        };
        Self {
            inner: Arc::new(Mutex::new(inner)),
            instance: None,
        }
    }

    /// Locks the disk for a [`Storage`](super::Storage) call through this
    /// view, which a crash since the view was cloned has killed: EIO, not
    /// counted.
    fn lock_live(&self, op: IoOp, path: &Path) -> Result<parking_lot::MutexGuard<'_, Inner>> {
        let inner = self.inner.lock();
        match self.instance {
            Some(generation) if generation != inner.generation => {
                Err(errno(op, path, None, libc::EIO))
            }
            _ => Ok(inner),
        }
    }

    /// Queues a one-shot fault (a `Freeze` sticks until `crash`).
    pub fn inject(&self, fault: Fault) {
        self.inner.lock().faults.push(fault);
    }

    pub fn clear_faults(&self) {
        self.inner.lock().faults.clear();
    }

    /// Caps the total bytes of current images of linked or open files.
    pub fn set_space_limit(&self, limit: Option<u64>) {
        self.inner.lock().space_limit = limit;
    }

    /// Open log files ([`Storage::open_log_file`](super::Storage::open_log_file)) as `O_DIRECT` files
    /// are: a write that is not whole aligned blocks from aligned memory
    /// fails with `EINVAL`, as the real one would.
    pub fn set_direct_log(&self, on: bool) {
        self.inner.lock().direct_log = on;
    }

    /// Tear granularity for `Random { tear: true }`; `None` lets each crash
    /// pick 512 or 4096.
    pub fn set_sector_size(&self, size: Option<usize>) {
        self.inner.lock().sector_size = size.map(|s| s.max(1));
    }

    /// Operations counted so far; a crash point for a rerun lies in `1..=`it.
    pub fn op_count(&self) -> u64 {
        self.inner.lock().ops
    }

    /// True after a `Freeze` fault fired and before the next crash.
    pub fn is_frozen(&self) -> bool {
        self.inner.lock().frozen
    }

    pub fn stats(&self) -> SimStats {
        self.inner.lock().stats
    }

    /// The durable image of the file the durable namespace names `path`.
    pub fn read_durable(&self, path: &Path) -> Option<Vec<u8>> {
        let inner = self.inner.lock();
        let (root, names) = parse(path);
        let ino = inner.lookup(root, &names, true).ok()?;
        inner.file(ino).map(|f| f.durable.clone())
    }

    /// The current image of the file the current namespace names `path`.
    pub fn read_current(&self, path: &Path) -> Option<Vec<u8>> {
        let inner = self.inner.lock();
        let (root, names) = parse(path);
        let ino = inner.lookup(root, &names, false).ok()?;
        inner.file(ino).map(|f| f.current.clone())
    }

    /// Flips `xor_mask` bits of the byte at `offset` in both images, as bit
    /// rot on the medium would (pending writes are left alone).
    pub fn corrupt(&self, path: &Path, offset: u64, xor_mask: u8) -> Result<()> {
        let mut inner = self.inner.lock();
        let (root, names) = parse(path);
        let fail = |code| errno(IoOp::Write, path, Some(offset), code);
        let ino = inner.lookup(root, &names, false).map_err(fail)?;
        let file = inner.file_mut(ino).ok_or_else(|| fail(libc::EISDIR))?;
        let at = usize::try_from(offset).map_err(|_| fail(libc::EINVAL))?;
        let mut hit = false;
        for image in [&mut file.durable, &mut file.current] {
            if let Some(byte) = image.get_mut(at) {
                *byte ^= xor_mask;
                hit = true;
            }
        }
        if hit {
            Ok(())
        } else {
            Err(fail(libc::EINVAL))
        }
    }
}

impl std::fmt::Debug for SimStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // try_lock: a Debug call while the lock is held must not deadlock.
        let mut s = f.debug_struct("SimStorage");
        match self.inner.try_lock() {
            Some(inner) => s
                .field("generation", &inner.generation)
                .field("ops", &inner.ops)
                .field("frozen", &inner.frozen)
                .field("inodes", &inner.nodes.len())
                .field("pending_meta_ops", &inner.meta_log.len())
                .finish(),
            None => s.finish_non_exhaustive(),
        }
    }
}
