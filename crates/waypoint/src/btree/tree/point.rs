//! The single-record operations: `get`, `insert`, `update`, `remove`, and
//! `restore`, the logical undo of one of them.
//!
//! Each finds its leaf through `find_leaf_hinted` (descent.rs): `hint`, a
//! [`FrameHint`] an earlier access to the same key in this tree returned,
//! skips the descent while that leaf's frame is unchanged; callers without
//! one pass `None`. A write latches only its leaf; when the record does not
//! fit, it releases the leaf, splits (split.rs) and retries with a descent.
//! An underfull leaf after a remove is merged afterwards (merge.rs), as space
//! reclamation only.
//!
//! Invariant kept: every tuple change is logged through [`PageLog::logged`]
//! with the leaf still exclusively latched, carrying the value's before
//! image, so an uncommitted change can be undone logically (seed 000 §3.6,
//! §3.7). Stored values carry the record's TID (seed 002 §2).

use super::{decode_value, encode_value, BTree};
use crate::btree::node::{Node, NodeMut};
use crate::btree::{PageLog, PageOp};
use crate::buffer::{BufferPool, FrameHint};
use crate::error::{Error, Result};
use crate::ids::Tid;

/// What [`BTree::get`] finds: the TID and value under the key, if any, and
/// a hint to the leaf that answered.
pub type HintedGet = (Option<(Tid, Vec<u8>)>, Option<FrameHint>);

impl BTree {
    /// The TID and value stored under `key`, with a hint to the leaf that
    /// answered for the next access to `key` (`None` if it changed
    /// meanwhile). The leaf `hint` names is tried before descending.
    pub fn get(
        &self,
        pool: &BufferPool,
        key: &[u8],
        mut hint: Option<FrameHint>,
    ) -> Result<HintedGet> {
        loop {
            // A retry descends: the hinted leaf just changed.
            let leaf = self.find_leaf_hinted(pool, key, hint.take())?;
            let n = Node::new(leaf.data());
            let result = match n.lower_bound(key) {
                Some((idx, true)) => n
                    .value(idx)
                    .and_then(decode_value)
                    .map(|(tid, v)| Some((tid, v.to_vec()))),
                Some((_, false)) => Some(None),
                None => None,
            };
            if !leaf.validate() {
                pool.note_retry(self.root);
                continue;
            }
            let result =
                result.ok_or_else(|| Self::corruption(pool, leaf.page_id(), "unreadable leaf"))?;
            return Ok((result, leaf.hint()));
        }
    }

    /// Insert a new tuple. Fails with `KeyExists` if `key` is present. The
    /// leaf `hint` names (a hint from [`BTree::get`] for `key`) is tried
    /// before descending.
    pub fn insert(
        &self,
        pool: &BufferPool,
        log: &dyn PageLog,
        key: &[u8],
        tid: Tid,
        value: &[u8],
        mut hint: Option<FrameHint>,
    ) -> Result<()> {
        let stored = encode_value(tid, value);
        loop {
            // After a split the hinted leaf has changed: descend.
            let mut leaf = self.leaf_for_write(pool, key, hint.take())?;
            let (idx, existing) = Self::locate(pool, &leaf, key)?;
            if existing.is_some() {
                return Err(Error::KeyExists);
            }
            let n = Node::new(leaf.data());
            if !n.fits(key.len(), stored.len()) {
                drop(leaf);
                self.split_for(pool, log, key, stored.len())?;
                continue;
            }
            NodeMut::new(leaf.data_mut())
                .insert_at(idx, key, &stored)
                .map_err(|_| {
                    Self::corruption(pool, leaf.page_id(), "insert into a leaf that fits failed")
                })?;
            return log.logged(
                self.root,
                &mut leaf,
                PageOp::Insert {
                    key,
                    value: &stored,
                },
            );
        }
    }

    /// Replace the value of an existing tuple. Returns false if `key` is
    /// absent (nothing changes). The leaf `hint` names (a hint from
    /// [`BTree::get`] for `key`) is tried before descending.
    pub fn update(
        &self,
        pool: &BufferPool,
        log: &dyn PageLog,
        key: &[u8],
        tid: Tid,
        value: &[u8],
        mut hint: Option<FrameHint>,
    ) -> Result<bool> {
        let stored = encode_value(tid, value);
        loop {
            // After a split the hinted leaf has changed: descend.
            let mut leaf = self.leaf_for_write(pool, key, hint.take())?;
            let (idx, existing) = Self::locate(pool, &leaf, key)?;
            let Some(before) = existing else {
                return Ok(false);
            };
            if stored.len() > before.len() && Node::new(leaf.data()).free_space() < stored.len() {
                drop(leaf);
                self.split_for(pool, log, key, stored.len())?;
                continue;
            }
            NodeMut::new(leaf.data_mut())
                .set_value_at(idx, &stored)
                .map_err(|_| {
                    Self::corruption(pool, leaf.page_id(), "update of a leaf that fits failed")
                })?;
            log.logged(
                self.root,
                &mut leaf,
                PageOp::Update {
                    key,
                    before: &before,
                    after: &stored,
                },
            )?;
            return Ok(true);
        }
    }

    /// Remove `key`. Returns its TID and value if it was present. The leaf
    /// `hint` names (a hint from [`BTree::get`] for `key`) is tried before
    /// descending.
    pub fn remove(
        &self,
        pool: &BufferPool,
        log: &dyn PageLog,
        key: &[u8],
        hint: Option<FrameHint>,
    ) -> Result<Option<(Tid, Vec<u8>)>> {
        let mut leaf = self.leaf_for_write(pool, key, hint)?;
        let (idx, existing) = Self::locate(pool, &leaf, key)?;
        let Some(before) = existing else {
            return Ok(None);
        };
        NodeMut::new(leaf.data_mut()).remove_at(idx);
        log.logged(
            self.root,
            &mut leaf,
            PageOp::Remove {
                key,
                before: &before,
            },
        )?;
        let underfull = Node::new(leaf.data()).used_space() < pool.page_size() / 4;
        let leaf_is_root = leaf.page_id() == self.root;
        drop(leaf);
        if underfull && !leaf_is_root {
            // The delete is done; merging is only space reclamation, so a
            // failure here (e.g. an I/O error loading a sibling) must not
            // make the caller believe the delete failed.
            if let Err(e) = self.merge_for(pool, log, key) {
                tracing::warn!(error = %e, "merging an underfull node failed; the tree stays valid");
            }
        }
        let (tid, value) = decode_value(&before).ok_or_else(|| Error::Corruption {
            path: pool.file().path().to_path_buf(),
            offset: 0,
            detail: "leaf value shorter than its TID".into(),
        })?;
        Ok(Some((tid, value.to_vec())))
    }

    /// Set `key` to exactly `stored` (TID and value as stored in the leaf),
    /// or remove it for `None`: the logical undo of one tuple record during
    /// recovery. Idempotent.
    pub fn restore(
        &self,
        pool: &BufferPool,
        log: &dyn PageLog,
        key: &[u8],
        stored: Option<&[u8]>,
    ) -> Result<()> {
        match stored {
            None => self.remove(pool, log, key, None).map(|_| ()),
            Some(stored) => {
                let (tid, value) = decode_value(stored).ok_or_else(|| Error::Corruption {
                    path: pool.file().path().to_path_buf(),
                    offset: 0,
                    detail: "logged leaf value shorter than its TID".into(),
                })?;
                if self.update(pool, log, key, tid, value, None)? {
                    Ok(())
                } else {
                    self.insert(pool, log, key, tid, value, None)
                }
            }
        }
    }
}
