//! The log's segment files as the log manager sees them across its
//! partitions: pruning below a GSN (stage 3), the synced positions the
//! checkpoint metadata records, bytes on disk, and removal after a clean
//! close.
//!
//! Invariant: segments are deleted oldest first, each deletion synced
//! before the next, so a crash never leaves a gap recovery would take
//! for a lost segment.

use super::Wal;
use crate::error::Result;
use crate::ids::{Gsn, LogPos};
use std::path::PathBuf;

impl Wal {
    /// Open every partition recovery found (a session may not have reopened
    /// it yet), so pruning and the disk-size figures cover all of them.
    pub fn open_recovered(&self) -> Result<()> {
        let ids: Vec<u32> = self.recovered.read().iter().map(|r| r.id).collect();
        for id in ids {
            self.partition(u16::try_from(id).expect("partition ids are session slots"))?;
        }
        Ok(())
    }

    /// Delete, in every partition, the segments whose records all have a
    /// GSN below `gsn` (never a partition's newest). Returns bytes removed.
    pub fn prune_below(&self, gsn: Gsn) -> Result<u64> {
        let mut removed = 0;
        for p in self.all().iter() {
            removed += p.prune_below(gsn.get())?;
        }
        Ok(removed)
    }

    /// Per partition, the stream position up to which its log is durable
    /// in files whose names are durable too (`Stream::synced_position`;
    /// partitions without such files are left out), in partition order:
    /// what the checkpoint metadata records as synced.
    pub fn synced_positions(&self) -> Vec<(u32, LogPos)> {
        let mut synced: Vec<(u32, LogPos)> = self
            .all()
            .iter()
            .filter_map(|p| Some((p.id(), p.synced_position()?)))
            .collect();
        synced.sort_unstable();
        synced
    }

    /// Bytes of log in segment files now.
    pub fn disk_bytes(&self) -> u64 {
        self.all().iter().map(|p| p.disk_bytes()).sum()
    }

    /// Remove every segment but each partition's newest (after a clean
    /// close made every page durable, no record is needed for recovery).
    pub fn prune_all(&self) -> Result<u64> {
        let mut removed = 0;
        for p in self.all().iter() {
            removed += p.prune_below(Gsn::MAX.get())?;
        }
        Ok(removed)
    }

    /// Delete every segment (after `shutdown`, once the superblock records
    /// a log floor covering them: a crash half-way through the deletions
    /// leaves segments recovery ignores).
    pub fn remove_all_segments(&self) -> Result<()> {
        for p in self.all().iter() {
            p.remove_all_segments()?;
        }
        // Partitions recovered but not reopened by any session in this
        // process still have their segments on disk. Oldest first, each
        // deletion synced before the next, as a stream's retirement
        // does: a crash keeps any subset of unsynced directory operations,
        // and a deleted middle segment would leave a gap that recovery
        // refuses as a lost segment.
        let archive = self.archive.read().clone();
        for dir in self.storage.list_dir(&self.dir)? {
            let mut segments: Vec<(LogPos, PathBuf)> = Vec::new();
            let mut spares = Vec::new();
            for file in self.storage.list_dir(&dir)? {
                if let Some(start) = crate::logstore::segment::parse_segment_name(&file) {
                    segments.push((start, file));
                } else if crate::logstore::spare::is_spare(&file) {
                    spares.push(file);
                }
            }
            segments.sort_unstable_by_key(|(start, _)| *start);
            for (_, file) in segments {
                crate::logstore::segment::retire(self.storage.as_ref(), &file, archive.as_deref())?;
                self.storage.sync_dir(&dir)?;
            }
            for file in &spares {
                self.storage.remove(file)?;
            }
            if !spares.is_empty() {
                self.storage.sync_dir(&dir)?;
            }
        }
        Ok(())
    }
}
