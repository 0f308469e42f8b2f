//! Re-applying one logged page change to a page image: the only place
//! that turns a record back into the change the runtime made through the
//! tree (seed 000 §3.7). A record that passed its checksum can still be
//! wrong; nothing here lets one break a node's invariants.

use crate::btree::node::{Node, NodeMut};
use crate::buffer::page::PageKind;
use crate::wal::record::{self, RecordBody};

/// Apply one page record to a page image (redo). Shared with nothing else:
/// the runtime path changes pages through the tree and logs what it did;
/// this re-does exactly that change from the record.
pub(super) fn apply(page: &mut [u8], rec: &record::Record<'_>) -> std::result::Result<(), String> {
    if let RecordBody::Insert { key, .. }
    | RecordBody::Update { key, .. }
    | RecordBody::Remove { key, .. } = &rec.body
    {
        // A checksum-valid record can still be wrong (a writer bug, a
        // hand-edited log): never let one break a node's invariants.
        let node = Node::new(page);
        if !node.is_leaf() {
            return Err("a tuple record names a page that is not a leaf".into());
        }
        if !node.covers(key) {
            return Err("the record's key lies outside the page's fences".into());
        }
    }
    match &rec.body {
        RecordBody::Image(image) => {
            // Later records change the page through `NodeMut`, which
            // assumes a valid node and only debug-asserts its
            // preconditions: an image of a node is checked in a copy, so a
            // page never takes one that is no valid node.
            let mut new = page.to_vec();
            if !image.write_to_page(&mut new) {
                return Err("page image does not fit the page".into());
            }
            new[6] = rec.header.page_kind;
            if matches!(
                PageKind::from_byte(rec.header.page_kind),
                Some(PageKind::BtreeLeaf | PageKind::BtreeInner)
            ) {
                Node::new(&new)
                    .validate()
                    .map_err(|e| format!("the page image is not a valid node: {e}"))?;
            }
            page.copy_from_slice(&new);
            Ok(())
        }
        RecordBody::Insert { key, value } => {
            let (idx, found) = Node::new(page).lower_bound(key).ok_or("unreadable node")?;
            if found {
                return Err("redo of an insert finds the key present".into());
            }
            NodeMut::new(page)
                .insert_at(idx, key, value)
                .map_err(|_| "redo of an insert does not fit".to_string())
        }
        RecordBody::Update { key, diff } => {
            let node = Node::new(page);
            let (idx, found) = node.lower_bound(key).ok_or("unreadable node")?;
            if !found {
                return Err("redo of an update finds no key".into());
            }
            let old = node.value(idx).ok_or("unreadable value")?;
            let new = diff
                .apply_update(old)
                .ok_or("redo of an update does not match the value")?;
            NodeMut::new(page)
                .set_value_at(idx, &new)
                .map_err(|_| "redo of an update does not fit".to_string())
        }
        RecordBody::Remove { key, .. } => {
            let (idx, found) = Node::new(page).lower_bound(key).ok_or("unreadable node")?;
            if !found {
                return Err("redo of a remove finds no key".into());
            }
            NodeMut::new(page).remove_at(idx);
            Ok(())
        }
        RecordBody::Freed => {
            page[6] = PageKind::Free as u8;
            Ok(())
        }
        RecordBody::Split { at, separator } => {
            NodeMut::new(page).split_keep_left(*at as usize, separator)?;
            Ok(())
        }
        RecordBody::Separator {
            separator,
            left,
            right,
        } => {
            NodeMut::new(page).insert_separator(separator, *left, *right)?;
            Ok(())
        }
        RecordBody::Commit { .. } | RecordBody::End => Ok(()),
    }
}

