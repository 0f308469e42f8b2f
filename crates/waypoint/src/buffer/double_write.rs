//! Torn-page repair from the double-write file (the protection InnoDB
//! calls the doublewrite buffer).
//!
//! The writeback path writes each batch of sealed page copies to the
//! double-write file and syncs it before writing the pages in place. A crash
//! can therefore tear a page in the data file only while an intact, synced
//! copy sits in the double-write file; at open, before anything reads a
//! page, every data page named by a valid copy is checked and, if its own
//! checksum fails, restored from the copy.
//!
//! Invariant: after `repair`, every data page that a completed or
//! interrupted batch touched is either its old or its new image, whole.

use super::page;
use crate::error::Result;
use crate::ids::Gsn;
use crate::io::{AlignedBuf, StorageFile};

/// Repair torn data pages from `double_write`; returns how many were
/// restored. The data file is synced if anything changed.
pub fn repair(
    data: &dyn StorageFile,
    double_write: &dyn StorageFile,
    page_size: usize,
) -> Result<usize> {
    let dw_len = double_write.len()?;
    let data_len = data.len()?;
    let slots = (dw_len / page_size as u64) as usize;
    // The file may hold copies from several batches (a shorter batch leaves
    // older slots behind): for each page, only its newest copy counts.
    let mut newest: std::collections::HashMap<u64, (Gsn, usize)> = Default::default();
    let mut copy = AlignedBuf::zeroed(page_size);
    for slot in 0..slots {
        double_write.read_at(copy.as_mut_slice(), (slot * page_size) as u64)?;
        let pid = page::page_id(copy.as_slice());
        if page::verify(copy.as_slice(), pid).is_err() {
            continue; // a torn copy: its in-place write never started
        }
        let gsn = page::page_gsn(copy.as_slice());
        let entry = newest.entry(pid).or_insert((gsn, slot));
        if gsn >= entry.0 {
            *entry = (gsn, slot);
        }
    }
    let mut current = AlignedBuf::zeroed(page_size);
    let mut repaired = 0;
    for (pid, (_, slot)) in newest {
        double_write.read_at(copy.as_mut_slice(), (slot * page_size) as u64)?;
        let offset = pid * page_size as u64;
        let torn = if offset + page_size as u64 <= data_len {
            data.read_at(current.as_mut_slice(), offset)?;
            // All zero (NeverWritten) means the page was being created.
            page::verify(current.as_slice(), pid).is_err()
        } else {
            true
        };
        if torn {
            tracing::warn!(
                page = pid,
                "restoring a torn page from the double-write file"
            );
            data.write_at(copy.as_slice(), offset)?;
            repaired += 1;
        }
    }
    if repaired > 0 {
        data.sync_data()?;
    }
    Ok(repaired)
}
