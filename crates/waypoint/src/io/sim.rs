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
//!   the next crash every [`Storage`] call through it fails the same way
//!   (EIO, uncounted, nothing changed or revealed). A test hands each
//!   instance `sim.clone()` and may `mem::forget` it to simulate power
//!   loss; the forgotten instance's threads keep running, and without this
//!   fence its checkpointer could still prune, rename or create files in
//!   the next image. The value [`SimStorage::new`] returns is the test's
//!   own view and is never fenced.
//! - **Faults.** Every storage and file call (not the test helpers on
//!   [`SimStorage`]) increments the operation counter; an injected [`Fault`]
//!   fires once, at the first eligible call numbered `>= at_op`.
//!
//! Every random choice comes from one RNG seeded by [`SimStorage::new`].

use super::{OpenMode, Storage, StorageFile};
use crate::error::{Error, IoOp, Result};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Files are plain vectors, so cap their size: a wild offset from a buggy
/// caller must be an error (EFBIG), not an allocation that aborts the test.
const MAX_FILE_LEN: u64 = 1 << 32;
/// `/...` paths and relative paths hang off two distinct roots, which always
/// exist and are always durable.
const ROOT_ABS: Ino = 0;
const ROOT_REL: Ino = 1;

type Ino = u64;

/// What survives [`SimStorage::crash`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CrashPolicy {
    /// Power loss with nothing lucky: only synced data and synced names.
    DropAll,
    /// A killed process: everything the kernel accepted survives, names too.
    KeepAll,
    /// Power loss: each pending write survives with probability `keep` (a
    /// kept write is torn into a random subset of its sectors if `tear`), and
    /// a random prefix of pending metadata ops survives.
    Random { keep: f64, tear: bool },
}

/// How an injected fault makes an operation fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Any operation fails with EIO and changes nothing. For `sync_data` the
    /// pending writes stay pending: nothing is known to have reached disk.
    Eio,
    /// A `write_at` or `set_len` fails with ENOSPC and changes nothing.
    Enospc,
    /// A `write_at` applies a random strict prefix of its buffer (as a
    /// volatile write), then fails with EIO.
    ShortWrite,
    /// This and every later operation fail with EIO until `crash()`: the
    /// crash point of a test that stops an engine at a chosen op.
    Freeze,
}

impl FaultKind {
    fn applies_to(self, op: IoOp) -> bool {
        match self {
            FaultKind::Eio | FaultKind::Freeze => true,
            FaultKind::Enospc => matches!(op, IoOp::Write | IoOp::SetLen),
            FaultKind::ShortWrite => op == IoOp::Write,
        }
    }
}

/// A one-shot fault: fires at the first operation numbered `>= at_op` that
/// its kind applies to and, if `path_contains` is set, whose path (either
/// path of a rename) contains that string, and, if `op` is set, that is
/// that operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub at_op: u64,
    pub kind: FaultKind,
    pub path_contains: Option<String>,
    pub op: Option<IoOp>,
}

impl Fault {
    pub fn at(at_op: u64, kind: FaultKind) -> Self {
        Self {
            at_op,
            kind,
            path_contains: None,
            op: None,
        }
    }

    pub fn on_path(mut self, part: impl Into<String>) -> Self {
        self.path_contains = Some(part.into());
        self
    }

    /// Fire only on `op` (e.g. `IoOp::SyncData`: a failed `fdatasync`
    /// after the writes went through).
    pub fn on_op(mut self, op: IoOp) -> Self {
        self.op = Some(op);
        self
    }
}

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

struct Inner {
    rng: StdRng,
    generation: u64,
    ops: u64,
    frozen: bool,
    faults: Vec<Fault>,
    space_limit: Option<u64>,
    sector_size: Option<usize>,
    /// Log files are opened as `O_DIRECT` ones: writes must be aligned.
    direct_log: bool,
    stats: SimStats,
    next_ino: Ino,
    nodes: BTreeMap<Ino, Node>,
    /// Pending metadata ops; a rename is one op of two changes so a crash
    /// never keeps half of it.
    meta_log: Vec<Vec<Change>>,
}

struct Change {
    dir: Ino,
    name: OsString,
    target: Option<Ino>,
}

enum Node {
    File(FileNode),
    Dir(DirNode),
}

#[derive(Default)]
struct FileNode {
    durable: Vec<u8>,
    current: Vec<u8>,
    pending: Vec<Pending>,
    /// Open handles of the current generation keep an unlinked file alive.
    handles: usize,
}

#[derive(Default)]
struct DirNode {
    durable: BTreeMap<OsString, Ino>,
    current: BTreeMap<OsString, Ino>,
}

enum Pending {
    Write { offset: usize, data: Vec<u8> },
    SetLen(usize),
}

fn errno(op: IoOp, path: &Path, offset: Option<u64>, code: i32) -> Error {
    Error::io(op, path, offset, std::io::Error::from_raw_os_error(code))
}

/// A path as a root plus names, `.` and `..` resolved lexically.
fn parse(path: &Path) -> (Ino, Vec<OsString>) {
    let mut root = ROOT_REL;
    let mut names = Vec::new();
    for component in path.components() {
        match component {
            Component::RootDir => {
                root = ROOT_ABS;
                names.clear();
            }
            Component::CurDir => {}
            Component::ParentDir => {
                names.pop();
            }
            Component::Prefix(p) => names.push(p.as_os_str().to_owned()),
            Component::Normal(n) => names.push(n.to_owned()),
        }
    }
    (root, names)
}

fn apply_write(image: &mut Vec<u8>, offset: usize, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let end = offset + data.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[offset..end].copy_from_slice(data);
}

fn apply(image: &mut Vec<u8>, op: &Pending) {
    match op {
        Pending::Write { offset, data } => apply_write(image, *offset, data),
        Pending::SetLen(len) => image.resize(*len, 0),
    }
}

impl Inner {
    fn dir(&self, ino: Ino) -> Option<&DirNode> {
        match self.nodes.get(&ino) {
            Some(Node::Dir(d)) => Some(d),
            _ => None,
        }
    }

    fn file(&self, ino: Ino) -> Option<&FileNode> {
        match self.nodes.get(&ino) {
            Some(Node::File(f)) => Some(f),
            _ => None,
        }
    }

    fn file_mut(&mut self, ino: Ino) -> Option<&mut FileNode> {
        match self.nodes.get_mut(&ino) {
            Some(Node::File(f)) => Some(f),
            _ => None,
        }
    }

    /// Walks `names` from `root` through current (or durable) entries.
    fn lookup(&self, root: Ino, names: &[OsString], durable: bool) -> Result<Ino, i32> {
        let mut ino = root;
        for name in names {
            let dir = self.dir(ino).ok_or(libc::ENOTDIR)?;
            let entries = if durable { &dir.durable } else { &dir.current };
            ino = *entries.get(name).ok_or(libc::ENOENT)?;
        }
        Ok(ino)
    }

    /// The directory holding `path` and its last name.
    fn parent_of(&self, path: &Path) -> Result<(Ino, OsString), i32> {
        let (root, names) = parse(path);
        let (name, parents) = names.split_last().ok_or(libc::EBUSY)?;
        let dir = self.lookup(root, parents, false)?;
        self.dir(dir).ok_or(libc::ENOTDIR)?;
        Ok((dir, name.clone()))
    }

    fn entry(&self, dir: Ino, name: &OsString) -> Option<Ino> {
        self.dir(dir).and_then(|d| d.current.get(name).copied())
    }

    fn set_entry(&mut self, dir: Ino, name: OsString, target: Option<Ino>) -> Change {
        if let Some(Node::Dir(d)) = self.nodes.get_mut(&dir) {
            match target {
                Some(ino) => d.current.insert(name.clone(), ino),
                None => d.current.remove(&name),
            };
        }
        Change { dir, name, target }
    }

    fn alloc(&mut self, node: Node) -> Ino {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.nodes.insert(ino, node);
        ino
    }

    /// Counts one operation and fires the fault due at it, if any.
    fn begin_op(&mut self, op: IoOp, paths: &[&Path], offset: Option<u64>) -> Result<bool> {
        self.ops += 1;
        let first = paths.first().copied().unwrap_or(Path::new(""));
        let fail = |code| errno(op, first, offset, code);
        if self.frozen {
            return Err(fail(libc::EIO));
        }
        match self.take_fault(paths, Some(op), |kind| kind.applies_to(op)) {
            None => Ok(false),
            Some(FaultKind::ShortWrite) => Ok(true),
            Some(FaultKind::Enospc) => Err(fail(libc::ENOSPC)),
            Some(FaultKind::Eio) => Err(fail(libc::EIO)),
            Some(FaultKind::Freeze) => {
                self.frozen = true;
                Err(fail(libc::EIO))
            }
        }
    }

    fn take_fault(
        &mut self,
        paths: &[&Path],
        op: Option<IoOp>,
        eligible: impl Fn(FaultKind) -> bool,
    ) -> Option<FaultKind> {
        let n = self.ops;
        let index = self.faults.iter().position(|f| {
            let path_ok = match &f.path_contains {
                None => true,
                Some(part) => paths
                    .iter()
                    .any(|p| p.to_string_lossy().contains(part.as_str())),
            };
            let op_ok = f.op.is_none() || f.op == op;
            f.at_op <= n && eligible(f.kind) && path_ok && op_ok
        })?;
        Some(self.faults.remove(index).kind)
    }

    /// Inodes reachable from the roots and open handles through current
    /// names, plus (if `all`) through durable names and pending metadata ops.
    fn reachable(&self, all: bool) -> BTreeSet<Ino> {
        let mut stack = vec![ROOT_ABS, ROOT_REL];
        for (ino, node) in &self.nodes {
            if matches!(node, Node::File(f) if f.handles > 0) {
                stack.push(*ino);
            }
        }
        if all {
            for change in self.meta_log.iter().flatten() {
                stack.push(change.dir);
                stack.extend(change.target);
            }
        }
        let mut seen = BTreeSet::new();
        while let Some(ino) = stack.pop() {
            if seen.insert(ino) {
                if let Some(Node::Dir(d)) = self.nodes.get(&ino) {
                    stack.extend(d.current.values());
                    if all {
                        stack.extend(d.durable.values());
                    }
                }
            }
        }
        seen
    }

    /// Bytes of the current images of files that are linked or open.
    fn used_space(&self) -> u64 {
        let live = self.reachable(false);
        live.iter()
            .filter_map(|&ino| self.file(ino))
            .map(|f| f.current.len() as u64)
            .sum()
    }

    fn space_ok(&self, old_len: usize, new_len: usize) -> bool {
        match self.space_limit {
            Some(limit) if new_len > old_len => {
                self.used_space() + (new_len - old_len) as u64 <= limit
            }
            _ => true,
        }
    }

    /// Frees inodes no durable or current name, pending metadata op or open
    /// handle can reach.
    fn gc(&mut self) {
        let live = self.reachable(true);
        self.nodes.retain(|ino, _| live.contains(ino));
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

    /// Locks the disk for a [`Storage`] call through this view, which a
    /// crash since the view was cloned has killed: EIO, not counted.
    fn lock_live(&self, op: IoOp, path: &Path) -> Result<parking_lot::MutexGuard<'_, Inner>> {
        let inner = self.inner.lock();
        match self.instance {
            Some(generation) if generation != inner.generation => {
                Err(errno(op, path, None, libc::EIO))
            }
            _ => Ok(inner),
        }
    }

    /// Power loss (or process kill, for `KeepAll`): turns the disk in place
    /// into what the next boot sees, unfreezes it, and kills every handle.
    pub fn crash(&self, policy: CrashPolicy) {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        let sector = match inner.sector_size {
            Some(size) => size,
            None if inner.rng.gen::<bool>() => 512,
            None => 4096,
        };
        let log = std::mem::take(&mut inner.meta_log);
        let kept_meta = match policy {
            CrashPolicy::DropAll => 0,
            CrashPolicy::KeepAll => log.len(),
            CrashPolicy::Random { keep, .. } => {
                let rng = &mut inner.rng;
                log.iter().take_while(|_| rng.gen::<f64>() < keep).count()
            }
        };
        for change in log.iter().take(kept_meta).flatten() {
            if let Some(Node::Dir(d)) = inner.nodes.get_mut(&change.dir) {
                match change.target {
                    Some(ino) => d.durable.insert(change.name.clone(), ino),
                    None => d.durable.remove(&change.name),
                };
            }
        }
        for node in inner.nodes.values_mut() {
            match node {
                Node::Dir(d) => d.current = d.durable.clone(),
                Node::File(f) => {
                    let mut image = std::mem::take(&mut f.durable);
                    for op in f.pending.drain(..) {
                        match policy {
                            CrashPolicy::DropAll => {}
                            CrashPolicy::KeepAll => apply(&mut image, &op),
                            CrashPolicy::Random { keep, tear } => {
                                if inner.rng.gen::<f64>() >= keep {
                                    continue;
                                }
                                match op {
                                    Pending::Write { offset, data } if tear => tear_write(
                                        &mut image,
                                        offset,
                                        &data,
                                        sector,
                                        &mut inner.rng,
                                    ),
                                    op => apply(&mut image, &op),
                                }
                            }
                        }
                    }
                    f.current = image.clone();
                    f.durable = image;
                    f.handles = 0;
                }
            }
        }
        inner.generation += 1;
        inner.frozen = false;
        inner.gc();
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

    /// Open log files ([`Storage::open_log_file`]) as `O_DIRECT` files
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

/// Applies the sector-aligned pieces of a write that a coin flip keeps.
fn tear_write(image: &mut Vec<u8>, offset: usize, data: &[u8], sector: usize, rng: &mut StdRng) {
    let mut start = 0;
    while start < data.len() {
        let at = offset + start;
        let end = (at / sector + 1) * sector - offset;
        let end = end.min(data.len());
        if rng.gen::<bool>() {
            apply_write(image, at, &data[start..end]);
        }
        start = end;
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

impl SimStorage {
    fn open_file(&self, path: &Path, mode: OpenMode, log: bool) -> Result<Arc<dyn StorageFile>> {
        let mut inner = self.lock_live(IoOp::Open, path)?;
        let fail = |code| errno(IoOp::Open, path, None, code);
        inner.begin_op(IoOp::Open, &[path], None)?;
        let (dir, name) = inner.parent_of(path).map_err(|e| match e {
            libc::EBUSY => fail(libc::EISDIR),
            e => fail(e),
        })?;
        let ino = match (inner.entry(dir, &name), mode) {
            (Some(_), OpenMode::CreateNew) => return Err(fail(libc::EEXIST)),
            (Some(ino), _) => ino,
            (None, OpenMode::Existing | OpenMode::ReadOnly) => return Err(fail(libc::ENOENT)),
            (None, _) => {
                let ino = inner.alloc(Node::File(FileNode::default()));
                let change = inner.set_entry(dir, name, Some(ino));
                inner.meta_log.push(vec![change]);
                ino
            }
        };
        let file = inner.file_mut(ino).ok_or_else(|| fail(libc::EISDIR))?;
        file.handles += 1;
        Ok(Arc::new(SimFile {
            inner: Arc::clone(&self.inner),
            path: path.to_path_buf(),
            ino,
            generation: inner.generation,
            direct: log && inner.direct_log,
        }))
    }
}

impl Storage for SimStorage {
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn StorageFile>> {
        self.open_file(path, mode, false)
    }

    fn open_log_file(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn StorageFile>> {
        self.open_file(path, mode, true)
    }

    fn exists(&self, path: &Path) -> bool {
        let Ok(mut inner) = self.lock_live(IoOp::Open, path) else {
            return false; // a dead instance sees nothing
        };
        // Counted so op numbers match the calls an engine makes, but a probe
        // cannot fail, so only a Freeze may fire here.
        inner.ops += 1;
        if inner
            .take_fault(&[path], None, |k| k == FaultKind::Freeze)
            .is_some()
        {
            inner.frozen = true;
        }
        let (root, names) = parse(path);
        inner.lookup(root, &names, false).is_ok()
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let mut inner = self.lock_live(IoOp::Remove, path)?;
        inner.begin_op(IoOp::Remove, &[path], None)?;
        let fail = |code| errno(IoOp::Remove, path, None, code);
        let (dir, name) = inner.parent_of(path).map_err(fail)?;
        if inner.entry(dir, &name).is_none() {
            return Err(fail(libc::ENOENT));
        }
        // A directory goes with everything below it, like remove_dir_all.
        let change = inner.set_entry(dir, name, None);
        inner.meta_log.push(vec![change]);
        inner.gc();
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut inner = self.lock_live(IoOp::Rename, from)?;
        inner.begin_op(IoOp::Rename, &[from, to], None)?;
        let fail = |code| errno(IoOp::Rename, from, None, code);
        let (from_dir, from_name) = inner.parent_of(from).map_err(fail)?;
        let src = inner
            .entry(from_dir, &from_name)
            .ok_or_else(|| fail(libc::ENOENT))?;
        let (to_dir, to_name) = inner.parent_of(to).map_err(fail)?;
        if (from_dir, &from_name) == (to_dir, &to_name) {
            return Ok(());
        }
        let src_is_dir = inner.dir(src).is_some();
        let (from_root, from_names) = parse(from);
        let (to_root, to_names) = parse(to);
        if src_is_dir && from_root == to_root && to_names.starts_with(&from_names) {
            return Err(fail(libc::EINVAL));
        }
        if let Some(dst) = inner.entry(to_dir, &to_name) {
            match (src_is_dir, inner.dir(dst)) {
                (false, Some(_)) => return Err(fail(libc::EISDIR)),
                (true, None) => return Err(fail(libc::ENOTDIR)),
                (true, Some(d)) if !d.current.is_empty() => return Err(fail(libc::ENOTEMPTY)),
                _ => {}
            }
        }
        let unlink = inner.set_entry(from_dir, from_name, None);
        let link = inner.set_entry(to_dir, to_name, Some(src));
        inner.meta_log.push(vec![unlink, link]);
        inner.gc();
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        let mut inner = self.lock_live(IoOp::CreateDir, path)?;
        inner.begin_op(IoOp::CreateDir, &[path], None)?;
        let (root, names) = parse(path);
        let mut dir = root;
        for (i, name) in names.iter().enumerate() {
            dir = match inner.entry(dir, name) {
                Some(ino) if inner.dir(ino).is_some() => ino,
                Some(_) => {
                    let code = if i + 1 == names.len() {
                        libc::EEXIST
                    } else {
                        libc::ENOTDIR
                    };
                    return Err(errno(IoOp::CreateDir, path, None, code));
                }
                None => {
                    // One op per level, parent first: a crash that keeps a
                    // prefix of the log never keeps a child without its parent.
                    let ino = inner.alloc(Node::Dir(DirNode::default()));
                    let change = inner.set_entry(dir, name.clone(), Some(ino));
                    inner.meta_log.push(vec![change]);
                    ino
                }
            };
        }
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> Result<()> {
        let mut inner = self.lock_live(IoOp::SyncDir, path)?;
        inner.begin_op(IoOp::SyncDir, &[path], None)?;
        let fail = |code| errno(IoOp::SyncDir, path, None, code);
        let (root, names) = parse(path);
        let ino = inner.lookup(root, &names, false).map_err(fail)?;
        match inner.nodes.get_mut(&ino) {
            Some(Node::Dir(d)) => d.durable = d.current.clone(),
            _ => return Err(fail(libc::ENOTDIR)),
        }
        for op in &mut inner.meta_log {
            op.retain(|change| change.dir != ino);
        }
        inner.meta_log.retain(|op| !op.is_empty());
        inner.stats.dir_syncs += 1;
        inner.gc();
        Ok(())
    }

    /// Only a disk with a space limit has a size. Not an operation: it
    /// neither counts toward injected faults nor fails after a crash.
    fn available_space(&self, _path: &Path) -> Option<u64> {
        let inner = self.inner.lock();
        inner
            .space_limit
            .map(|limit| limit.saturating_sub(inner.used_space()))
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<PathBuf>> {
        let mut inner = self.lock_live(IoOp::ListDir, path)?;
        inner.begin_op(IoOp::ListDir, &[path], None)?;
        let fail = |code| errno(IoOp::ListDir, path, None, code);
        let (root, names) = parse(path);
        let ino = inner.lookup(root, &names, false).map_err(fail)?;
        let dir = inner.dir(ino).ok_or_else(|| fail(libc::ENOTDIR))?;
        let mut out: Vec<PathBuf> = dir.current.keys().map(|name| path.join(name)).collect();
        out.sort();
        Ok(out)
    }
}

/// A handle, valid for the generation (time between crashes) it was opened in.
struct SimFile {
    inner: Arc<Mutex<Inner>>,
    path: PathBuf,
    ino: Ino,
    generation: u64,
    direct: bool,
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
        let aligned = |x: usize| x.is_multiple_of(super::IO_ALIGN);
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn p(s: &str) -> &Path {
        Path::new(s)
    }

    fn code(result: Result<impl std::fmt::Debug>) -> i32 {
        match result {
            Err(e) => e.raw_os_error().unwrap_or(-1),
            Ok(v) => panic!("expected an error, got {v:?}"),
        }
    }

    /// A disk with directory `/db` made durable.
    fn disk(seed: u64) -> SimStorage {
        let s = SimStorage::new(seed);
        s.create_dir_all(p("/db")).unwrap();
        s.sync_dir(p("/")).unwrap();
        s
    }

    /// `/db/f` durably created (empty), then `data` written and not synced.
    fn unsynced(seed: u64, data: &[u8]) -> (SimStorage, Arc<dyn StorageFile>) {
        let s = disk(seed);
        let f = s.open(p("/db/f"), OpenMode::CreateNew).unwrap();
        s.sync_dir(p("/db")).unwrap();
        f.write_at(data, 0).unwrap();
        (s, f)
    }

    #[test]
    fn unsynced_write_lost_on_drop_all_kept_on_keep_all() {
        let (s, _f) = unsynced(1, b"hello");
        s.crash(CrashPolicy::DropAll);
        assert_eq!(s.read_current(p("/db/f")), Some(vec![]));
        let (s, _f) = unsynced(1, b"hello");
        s.crash(CrashPolicy::KeepAll);
        assert_eq!(s.read_current(p("/db/f")).as_deref(), Some(&b"hello"[..]));
        // `Random` at its extremes behaves like the fixed policies.
        let (s, _f) = unsynced(1, b"hello");
        s.crash(CrashPolicy::Random {
            keep: 0.0,
            tear: true,
        });
        assert_eq!(s.read_current(p("/db/f")), Some(vec![]));
        let (s, _f) = unsynced(1, b"hello");
        s.crash(CrashPolicy::Random {
            keep: 1.0,
            tear: false,
        });
        assert_eq!(s.read_current(p("/db/f")).as_deref(), Some(&b"hello"[..]));
    }

    #[test]
    fn synced_write_survives_every_policy() {
        let policies = [
            CrashPolicy::DropAll,
            CrashPolicy::KeepAll,
            CrashPolicy::Random {
                keep: 0.5,
                tear: true,
            },
        ];
        for (seed, policy) in policies.into_iter().enumerate() {
            let (s, f) = unsynced(seed as u64, &[7; 3000]);
            f.sync_data().unwrap();
            f.write_at(&[9; 100], 3000).unwrap();
            s.crash(policy);
            let image = s.read_durable(p("/db/f")).unwrap();
            assert_eq!(image[..3000], [7; 3000][..], "{policy:?}");
        }
    }

    #[test]
    fn torn_write_keeps_whole_sectors_only() {
        let mut torn = 0;
        for seed in 0..64 {
            let s = disk(seed);
            s.set_sector_size(Some(512));
            let f = s.open(p("/db/f"), OpenMode::CreateNew).unwrap();
            s.sync_dir(p("/db")).unwrap();
            f.write_at(&[0xAA; 8192], 0).unwrap();
            f.sync_data().unwrap();
            // Unaligned on purpose: the write covers parts of sectors 0 and 10.
            let write = 300..5300;
            f.write_at(&[0xBB; 5000], write.start as u64).unwrap();
            s.crash(CrashPolicy::Random {
                keep: 1.0,
                tear: true,
            });
            let image = s.read_durable(p("/db/f")).unwrap();
            assert_eq!(image.len(), 8192);
            let mut new_sectors = 0;
            for i in 0..image.len() / 512 {
                let range = i * 512..(i + 1) * 512;
                let written: Vec<u8> = range
                    .clone()
                    .filter(|at| write.contains(at))
                    .map(|at| image[at])
                    .collect();
                let untouched = range.filter(|at| !write.contains(at));
                assert!(untouched.into_iter().all(|at| image[at] == 0xAA));
                let all_new = written.iter().all(|&b| b == 0xBB);
                let all_old = written.iter().all(|&b| b == 0xAA);
                assert!(all_new || all_old, "seed {seed}: sector {i} torn inside");
                new_sectors += usize::from(!written.is_empty() && all_new);
            }
            torn += usize::from(new_sectors > 0 && new_sectors < 11);
        }
        assert!(torn > 0, "no write was ever torn");
    }

    fn crash_image(seed: u64) -> Vec<u8> {
        let s = disk(seed);
        let f = s.open(p("/db/f"), OpenMode::CreateNew).unwrap();
        s.sync_dir(p("/db")).unwrap();
        for i in 0..32u8 {
            f.write_at(&[i; 700], u64::from(i) * 600).unwrap();
        }
        s.crash(CrashPolicy::Random {
            keep: 0.5,
            tear: true,
        });
        s.read_durable(p("/db/f")).unwrap()
    }

    #[test]
    fn same_seed_same_crash_image_different_seeds_differ() {
        for seed in 0..4 {
            assert_eq!(crash_image(seed), crash_image(seed));
        }
        let distinct: BTreeSet<Vec<u8>> = (0..8).map(crash_image).collect();
        assert!(distinct.len() > 1);
    }

    #[test]
    fn rename_and_create_durable_only_after_sync_dir() {
        for sync in [false, true] {
            let s = disk(3);
            let f = s.open(p("/db/a"), OpenMode::CreateNew).unwrap();
            f.write_at(b"data", 0).unwrap();
            f.sync_data().unwrap();
            let fresh = s.open(p("/db/new"), OpenMode::CreateNew).unwrap();
            fresh.sync_data().unwrap();
            s.sync_dir(p("/db")).unwrap();
            s.remove(p("/db/new")).unwrap();
            s.open(p("/db/other"), OpenMode::CreateNew).unwrap();
            s.rename(p("/db/a"), p("/db/b")).unwrap();
            assert_eq!(s.list_dir(p("/db")).unwrap(), [p("/db/b"), p("/db/other")]);
            if sync {
                s.sync_dir(p("/db")).unwrap();
            }
            s.crash(CrashPolicy::DropAll);
            let expect: &[&Path] = if sync {
                &[p("/db/b"), p("/db/other")]
            } else {
                &[p("/db/a"), p("/db/new")]
            };
            assert_eq!(s.list_dir(p("/db")).unwrap(), expect);
            let name = if sync { "/db/b" } else { "/db/a" };
            assert_eq!(s.read_current(p(name)).as_deref(), Some(&b"data"[..]));
        }
    }

    #[test]
    fn keep_all_keeps_unsynced_names_and_random_keeps_a_prefix() {
        let s = SimStorage::new(4);
        s.create_dir_all(p("d/e")).unwrap();
        s.open(p("d/e/x"), OpenMode::CreateNew).unwrap();
        s.rename(p("d/e/x"), p("d/y")).unwrap();
        s.crash(CrashPolicy::KeepAll);
        assert_eq!(s.list_dir(p("d")).unwrap(), [p("d/e"), p("d/y")]);
        assert!(s.list_dir(p("d/e")).unwrap().is_empty());
        let mut outcomes = BTreeSet::new();
        for seed in 0..32 {
            let s = SimStorage::new(seed);
            s.create_dir_all(p("/a")).unwrap();
            s.create_dir_all(p("/b")).unwrap();
            s.open(p("/a/f"), OpenMode::CreateNew).unwrap();
            s.sync_dir(p("/a")).unwrap();
            s.sync_dir(p("/")).unwrap();
            s.rename(p("/a/f"), p("/b/f")).unwrap();
            s.open(p("/a/g"), OpenMode::CreateNew).unwrap();
            s.crash(CrashPolicy::Random {
                keep: 0.5,
                tear: false,
            });
            let (a, b, g) = (
                s.exists(p("/a/f")),
                s.exists(p("/b/f")),
                s.exists(p("/a/g")),
            );
            assert!(a != b, "a cross-directory rename is atomic");
            assert!(!g || b, "a later op survives only with the earlier ones");
            outcomes.insert((b, g));
        }
        assert_eq!(outcomes.len(), 3);
    }

    #[test]
    fn handle_from_before_crash_fails_with_eio_and_is_not_counted() {
        let (s, f) = unsynced(5, b"x");
        s.crash(CrashPolicy::KeepAll);
        let ops = s.op_count();
        assert_eq!(code(f.write_at(b"y", 0)), libc::EIO);
        let mut buf = [0];
        assert_eq!(code(f.read_at(&mut buf, 0)), libc::EIO);
        assert_eq!(code(f.sync_data()), libc::EIO);
        assert_eq!(code(f.len()), libc::EIO);
        assert_eq!(code(f.set_len(0)), libc::EIO);
        assert_eq!(s.op_count(), ops);
        assert_eq!(s.read_current(p("/db/f")).as_deref(), Some(&b"x"[..]));
        let g = s.open(p("/db/f"), OpenMode::Existing).unwrap();
        g.write_at(b"z", 0).unwrap();
    }

    /// A clone handed to an engine instance dies with it: after the crash,
    /// no call through it (remove, rename, open, mkdir, sync, list, exists)
    /// changes, reveals or counts anything in the next image, exactly as
    /// for the instance's file handles. Before this, a crash test's
    /// forgotten instance kept running its checkpointer, which pruned a
    /// log segment of the recovered image between recovery's listing and
    /// its reopening of the segment ("open failed on .../p00000/….wal:
    /// No such file or directory", about 1 run in 8 of
    /// `crashes_inside_log_appends_and_pruning_lose_no_acknowledged_update`):
    /// a state no power loss can produce, since a dead process runs no code.
    #[test]
    fn storage_of_a_crashed_instance_cannot_touch_the_next_image() {
        let s = disk(14);
        let f = s.open(p("/db/seg"), OpenMode::CreateNew).unwrap();
        f.write_at(b"log", 0).unwrap();
        f.sync_data().unwrap();
        s.sync_dir(p("/db")).unwrap();
        let dead = s.clone();
        let grandchild = dead.clone();
        dead.open(p("/db/seg"), OpenMode::Existing).unwrap();
        s.crash(CrashPolicy::DropAll);

        let ops = s.op_count();
        let segment = s.list_dir(p("/db")).unwrap();
        assert_eq!(segment, [p("/db/seg")]);
        assert_eq!(code(dead.remove(p("/db/seg"))), libc::EIO);
        assert_eq!(code(dead.rename(p("/db/seg"), p("/db/x"))), libc::EIO);
        assert_eq!(code(dead.open(p("/db/seg"), OpenMode::Existing)), libc::EIO);
        assert_eq!(
            code(dead.open(p("/db/new"), OpenMode::CreateNew)),
            libc::EIO
        );
        assert_eq!(code(dead.create_dir_all(p("/db/d"))), libc::EIO);
        assert_eq!(code(dead.sync_dir(p("/db"))), libc::EIO);
        assert_eq!(code(dead.list_dir(p("/db"))), libc::EIO);
        assert!(!dead.exists(p("/db/seg")));
        assert_eq!(code(grandchild.remove(p("/db/seg"))), libc::EIO);
        assert_eq!(code(dead.clone().remove(p("/db/seg"))), libc::EIO);
        assert_eq!(s.op_count(), ops + 1, "only the live listing was counted");

        // The listed segment is still there for the next instance.
        let next = s.clone();
        let g = next.open(&segment[0], OpenMode::Existing).unwrap();
        let mut buf = [0; 3];
        g.read_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"log");
        assert_eq!(next.list_dir(p("/db")).unwrap(), [p("/db/seg")]);
        next.remove(p("/db/seg")).unwrap();
        assert!(!s.exists(p("/db/seg")));
    }

    #[test]
    fn eio_fires_at_its_op_only_and_failed_sync_keeps_writes_pending() {
        let (s, f) = unsynced(6, b"abc");
        let at = s.op_count() + 2;
        s.inject(Fault::at(at, FaultKind::Eio));
        f.len().unwrap();
        let err = f.sync_data().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EIO));
        assert!(matches!(
            err,
            Error::Io {
                op: IoOp::SyncData,
                ..
            }
        ));
        assert_eq!(s.read_durable(p("/db/f")), Some(vec![]));
        assert_eq!(s.op_count(), at);
        f.len().unwrap();
        // Path filter: a fault for another file waits for an op on that file.
        s.inject(Fault::at(0, FaultKind::Eio).on_path("other"));
        f.len().unwrap();
        let g = s.open(p("/db/other"), OpenMode::CreateIfMissing);
        assert_eq!(code(g), libc::EIO);
        s.open(p("/db/other"), OpenMode::CreateIfMissing).unwrap();
        f.sync_data().unwrap();
        s.crash(CrashPolicy::DropAll);
        assert_eq!(s.read_current(p("/db/f")).as_deref(), Some(&b"abc"[..]));
    }

    #[test]
    fn enospc_fault_fails_a_write_and_changes_nothing() {
        let (s, f) = unsynced(7, b"abc");
        s.inject(Fault::at(s.op_count() + 1, FaultKind::Enospc));
        // Not eligible: a read passes and the fault waits for the write.
        f.read_at(&mut [0; 3], 0).unwrap();
        let err = f.write_at(b"XYZW", 0).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
        assert!(matches!(
            err,
            Error::Io {
                op: IoOp::Write,
                offset: Some(0),
                ..
            }
        ));
        assert_eq!(s.read_current(p("/db/f")).as_deref(), Some(&b"abc"[..]));
        f.write_at(b"XYZW", 0).unwrap();
    }

    #[test]
    fn short_write_applies_a_strict_prefix_then_fails() {
        let (s, f) = unsynced(8, &[1; 10]);
        s.inject(Fault::at(s.op_count() + 1, FaultKind::ShortWrite));
        assert_eq!(code(f.write_at(&[2; 1000], 0)), libc::EIO);
        let image = s.read_current(p("/db/f")).unwrap();
        let prefix = image.iter().take_while(|&&b| b == 2).count();
        assert!(prefix < 1000);
        assert_eq!(image.len(), prefix.max(10));
        assert!(image[prefix..].iter().all(|&b| b == 1));
        f.write_at(&[3; 4], 0).unwrap();
    }

    /// The engine stand-in: a few files written and synced.
    fn workload(s: &SimStorage) -> Result<()> {
        s.create_dir_all(p("/w"))?;
        for i in 0..3u8 {
            let f = s.open(&PathBuf::from(format!("/w/{i}")), OpenMode::CreateNew)?;
            f.write_at(&[i; 100], 0)?;
            f.sync_data()?;
            s.sync_dir(p("/w"))?;
        }
        Ok(())
    }

    #[test]
    fn freeze_sticks_until_crash() {
        let probe = SimStorage::new(9);
        workload(&probe).unwrap();
        let total = probe.op_count();
        for at in 1..=total {
            let s = SimStorage::new(9);
            s.inject(Fault::at(at, FaultKind::Freeze));
            assert!(workload(&s).is_err());
            assert_eq!(s.op_count(), at, "the workload stops at the frozen op");
            assert!(s.is_frozen());
            assert_eq!(code(s.list_dir(p("/"))), libc::EIO);
            assert_eq!(code(s.create_dir_all(p("/z"))), libc::EIO);
            s.crash(CrashPolicy::DropAll);
            assert!(!s.is_frozen());
            s.create_dir_all(p("/z")).unwrap();
        }
    }

    #[test]
    fn space_limit_enospc_until_a_file_is_removed() {
        let s = disk(10);
        s.set_space_limit(Some(1000));
        let a = s.open(p("/db/a"), OpenMode::CreateNew).unwrap();
        a.write_at(&[1; 600], 0).unwrap();
        let b = s.open(p("/db/b"), OpenMode::CreateNew).unwrap();
        assert_eq!(code(b.write_at(&[2; 500], 0)), libc::ENOSPC);
        assert_eq!(code(b.set_len(500)), libc::ENOSPC);
        assert_eq!(b.len().unwrap(), 0);
        a.write_at(&[3; 600], 0).unwrap(); // overwriting in place needs no space
        drop(a);
        s.remove(p("/db/a")).unwrap();
        b.write_at(&[2; 500], 0).unwrap();
        s.set_space_limit(None);
        b.write_at(&[2; 5000], 0).unwrap();
    }

    #[test]
    fn bad_inputs_are_errors_not_panics() {
        let s = SimStorage::new(11);
        assert_eq!(
            code(s.open(p("/nodir/f"), OpenMode::CreateIfMissing)),
            libc::ENOENT
        );
        assert_eq!(code(s.open(p("rel/f"), OpenMode::CreateNew)), libc::ENOENT);
        s.create_dir_all(p("rel")).unwrap();
        let f = s.open(p("rel/f"), OpenMode::CreateNew).unwrap();
        assert_eq!(code(s.open(p("rel/f"), OpenMode::CreateNew)), libc::EEXIST);
        assert_eq!(code(s.open(p("rel/g"), OpenMode::Existing)), libc::ENOENT);
        assert_eq!(code(s.open(p("rel"), OpenMode::Existing)), libc::EISDIR);
        assert_eq!(code(s.open(p("/"), OpenMode::Existing)), libc::EISDIR);
        assert_eq!(
            code(s.open(p("rel/f/x"), OpenMode::CreateNew)),
            libc::ENOTDIR
        );
        assert_eq!(code(s.create_dir_all(p("rel/f"))), libc::EEXIST);
        assert_eq!(code(s.rename(p("rel"), p("rel/sub"))), libc::EINVAL);
        assert_eq!(code(s.remove(p("rel/nope"))), libc::ENOENT);
        assert_eq!(code(s.sync_dir(p("rel/f"))), libc::ENOTDIR);
        assert_eq!(code(f.write_at(b"x", u64::MAX)), libc::EFBIG);
        assert_eq!(code(f.set_len(u64::MAX)), libc::EFBIG);
        f.write_at(b"abc", 0).unwrap();
        let err = f.read_at(&mut [0; 4], 0).unwrap_err();
        match err {
            Error::Io {
                op: IoOp::Read,
                cause,
                offset: Some(0),
                ..
            } => {
                assert_eq!(cause.kind(), std::io::ErrorKind::UnexpectedEof)
            }
            other => panic!("{other:?}"),
        }
        assert!(f.read_at(&mut [0; 1], u64::MAX).is_err());
        assert!(s.exists(p("./rel/../rel/f")));
        assert!(!s.exists(p("/rel/f")), "absolute and relative roots differ");
        assert!(s.corrupt(p("rel/f"), 99, 1).is_err());
    }

    #[test]
    fn corrupt_flips_bits_in_both_images_and_stats_count() {
        let (s, f) = unsynced(12, b"abc");
        f.sync_data().unwrap();
        s.corrupt(p("/db/f"), 1, 0x01).unwrap();
        assert_eq!(s.read_durable(p("/db/f")).as_deref(), Some(&b"acc"[..]));
        let mut buf = [0; 3];
        f.read_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"acc");
        let st = s.stats();
        assert_eq!((st.writes, st.bytes_written, st.data_syncs), (1, 3, 1));
        assert_eq!((st.reads, st.bytes_read, st.dir_syncs), (1, 3, 2));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Write { offset: u64, len: usize, byte: u8 },
        SetLen(u64),
        Sync,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..4096u64, 0..700usize, any::<u8>())
                .prop_map(|(offset, len, byte)| Op::Write { offset, len, byte }),
            1 => (0..5000u64).prop_map(Op::SetLen),
            2 => Just(Op::Sync),
        ]
    }

    /// Runs `ops` on a fresh disk; returns it and the model's (current, synced).
    fn run(ops: &[Op]) -> (SimStorage, Vec<u8>, Vec<u8>) {
        let (s, f) = unsynced(13, b"");
        let (mut current, mut synced) = (Vec::new(), Vec::new());
        for op in ops {
            match *op {
                Op::Write { offset, len, byte } => {
                    f.write_at(&vec![byte; len], offset).unwrap();
                    let end = offset as usize + len;
                    if len > 0 {
                        current.resize(current.len().max(end), 0);
                        current[offset as usize..end].fill(byte);
                    }
                }
                Op::SetLen(len) => {
                    f.set_len(len).unwrap();
                    current.resize(len as usize, 0);
                }
                Op::Sync => {
                    f.sync_data().unwrap();
                    synced = current.clone();
                }
            }
        }
        (s, current, synced)
    }

    proptest! {
        #[test]
        fn keep_all_is_current_image_and_drop_all_is_last_synced(
            ops in proptest::collection::vec(op(), 0..40)
        ) {
            let (s, current, _) = run(&ops);
            prop_assert_eq!(s.read_current(p("/db/f")), Some(current.clone()));
            s.crash(CrashPolicy::KeepAll);
            prop_assert_eq!(s.read_durable(p("/db/f")), Some(current));
            let (s, _, synced) = run(&ops);
            s.crash(CrashPolicy::DropAll);
            prop_assert_eq!(s.read_current(p("/db/f")), Some(synced));
        }
    }
}
