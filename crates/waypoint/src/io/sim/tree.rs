//! The simulated disk's state (module docs of `io::sim`, "Data" and
//! "Names"): inodes with durable and current images or entries, each
//! file's pending writes and the global log of pending metadata ops, path
//! lookup and the collection of unreachable inodes. Invariant: durable +
//! pending, replayed in order, == current, for images and for names.

use super::faults::Fault;
use super::SimStats;
use crate::error::{Error, IoOp, Result};
use rand::rngs::StdRng;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Component, Path};

/// Files are plain vectors, so cap their size: a wild offset from a buggy
/// caller must be an error (EFBIG), not an allocation that aborts the test.
pub(super) const MAX_FILE_LEN: u64 = 1 << 32;
/// `/...` paths and relative paths hang off two distinct roots, which always
/// exist and are always durable.
pub(super) const ROOT_ABS: Ino = 0;
pub(super) const ROOT_REL: Ino = 1;

pub(super) type Ino = u64;

pub(super) struct Inner {
    pub(super) rng: StdRng,
    pub(super) generation: u64,
    pub(super) ops: u64,
    pub(super) frozen: bool,
    pub(super) faults: Vec<Fault>,
    pub(super) space_limit: Option<u64>,
    pub(super) sector_size: Option<usize>,
    /// Log files are opened as `O_DIRECT` ones: writes must be aligned.
    pub(super) direct_log: bool,
    pub(super) stats: SimStats,
    pub(super) next_ino: Ino,
    pub(super) nodes: BTreeMap<Ino, Node>,
    /// Pending metadata ops; a rename is one op of two changes so a crash
    /// never keeps half of it.
    pub(super) meta_log: Vec<Vec<Change>>,
}

pub(super) struct Change {
    pub(super) dir: Ino,
    pub(super) name: OsString,
    pub(super) target: Option<Ino>,
}

pub(super) enum Node {
    File(FileNode),
    Dir(DirNode),
}

#[derive(Default)]
pub(super) struct FileNode {
    pub(super) durable: Vec<u8>,
    pub(super) current: Vec<u8>,
    pub(super) pending: Vec<Pending>,
    /// Open handles of the current generation keep an unlinked file alive.
    pub(super) handles: usize,
}

#[derive(Default)]
pub(super) struct DirNode {
    pub(super) durable: BTreeMap<OsString, Ino>,
    pub(super) current: BTreeMap<OsString, Ino>,
}

pub(super) enum Pending {
    Write { offset: usize, data: Vec<u8> },
    SetLen(usize),
}

pub(super) fn errno(op: IoOp, path: &Path, offset: Option<u64>, code: i32) -> Error {
    Error::io(op, path, offset, std::io::Error::from_raw_os_error(code))
}

/// A path as a root plus names, `.` and `..` resolved lexically.
pub(super) fn parse(path: &Path) -> (Ino, Vec<OsString>) {
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

pub(super) fn apply_write(image: &mut Vec<u8>, offset: usize, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let end = offset + data.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[offset..end].copy_from_slice(data);
}

pub(super) fn apply(image: &mut Vec<u8>, op: &Pending) {
    match op {
        Pending::Write { offset, data } => apply_write(image, *offset, data),
        Pending::SetLen(len) => image.resize(*len, 0),
    }
}

impl Inner {
    pub(super) fn dir(&self, ino: Ino) -> Option<&DirNode> {
        match self.nodes.get(&ino) {
            Some(Node::Dir(d)) => Some(d),
            _ => None,
        }
    }

    pub(super) fn file(&self, ino: Ino) -> Option<&FileNode> {
        match self.nodes.get(&ino) {
            Some(Node::File(f)) => Some(f),
            _ => None,
        }
    }

    pub(super) fn file_mut(&mut self, ino: Ino) -> Option<&mut FileNode> {
        match self.nodes.get_mut(&ino) {
            Some(Node::File(f)) => Some(f),
            _ => None,
        }
    }

    /// Walks `names` from `root` through current (or durable) entries.
    pub(super) fn lookup(&self, root: Ino, names: &[OsString], durable: bool) -> Result<Ino, i32> {
        let mut ino = root;
        for name in names {
            let dir = self.dir(ino).ok_or(libc::ENOTDIR)?;
            let entries = if durable { &dir.durable } else { &dir.current };
            ino = *entries.get(name).ok_or(libc::ENOENT)?;
        }
        Ok(ino)
    }

    /// The directory holding `path` and its last name.
    pub(super) fn parent_of(&self, path: &Path) -> Result<(Ino, OsString), i32> {
        let (root, names) = parse(path);
        let (name, parents) = names.split_last().ok_or(libc::EBUSY)?;
        let dir = self.lookup(root, parents, false)?;
        self.dir(dir).ok_or(libc::ENOTDIR)?;
        Ok((dir, name.clone()))
    }

    pub(super) fn entry(&self, dir: Ino, name: &OsString) -> Option<Ino> {
        self.dir(dir).and_then(|d| d.current.get(name).copied())
    }

    pub(super) fn set_entry(&mut self, dir: Ino, name: OsString, target: Option<Ino>) -> Change {
        if let Some(Node::Dir(d)) = self.nodes.get_mut(&dir) {
            match target {
                Some(ino) => d.current.insert(name.clone(), ino),
                None => d.current.remove(&name),
            };
        }
        Change { dir, name, target }
    }

    pub(super) fn alloc(&mut self, node: Node) -> Ino {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.nodes.insert(ino, node);
        ino
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
    pub(super) fn used_space(&self) -> u64 {
        let live = self.reachable(false);
        live.iter()
            .filter_map(|&ino| self.file(ino))
            .map(|f| f.current.len() as u64)
            .sum()
    }

    pub(super) fn space_ok(&self, old_len: usize, new_len: usize) -> bool {
        match self.space_limit {
            Some(limit) if new_len > old_len => {
                self.used_space() + (new_len - old_len) as u64 <= limit
            }
            _ => true,
        }
    }

    /// Frees inodes no durable or current name, pending metadata op or open
    /// handle can reach.
    pub(super) fn gc(&mut self) {
        let live = self.reachable(true);
        self.nodes.retain(|ino, _| live.contains(ino));
    }
}
