//! The [`Storage`] calls of the simulated disk: opening files, names
//! (remove, rename, mkdir), `sync_dir` and listing. Each counts one
//! operation and may fail by an injected fault; a view fenced by a crash
//! fails with EIO, uncounted (module docs of `io::sim`, "Instances").

use super::faults::FaultKind;
use super::file::SimFile;
use super::tree::{errno, parse, DirNode, FileNode, Node};
use super::SimStorage;
use crate::error::{IoOp, Result};
use crate::io::{OpenMode, Storage, StorageFile};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
