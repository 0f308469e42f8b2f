//! Injected faults and crashes (module docs of `io::sim`, "Crash" and
//! "Faults"): what a fault does and when it fires, the operation counter,
//! and the crash that turns the disk into what the next boot sees (kept
//! metadata a prefix of the log, kept writes a subset in order, torn only
//! at sector boundaries).

use super::tree::{apply, apply_write, errno, Inner, Node, Pending};
use super::SimStorage;
use crate::error::{IoOp, Result};
use rand::rngs::StdRng;
use rand::Rng;
use std::path::Path;

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

impl Inner {
    /// Counts one operation and fires the fault due at it, if any.
    pub(super) fn begin_op(&mut self, op: IoOp, paths: &[&Path], offset: Option<u64>) -> Result<bool> {
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

    pub(super) fn take_fault(
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
}

impl SimStorage {
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
