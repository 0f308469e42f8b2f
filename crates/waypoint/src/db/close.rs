//! The close path: quiesce commits, write every dirty page, seal the
//! scheme's log, write the free list and the superblock (clean), and only
//! then let the scheme remove its log.
//!
//! Invariant: a clean close leaves a data file that reopens to the same
//! contents; the log is deleted only after the superblock that makes it
//! unneeded is durable.

use super::superblock::{self, Superblock};
use super::DbInner;
use crate::catalog::CATALOG_ROOT;
use crate::error::{Error, Result};
use std::sync::atomic::Ordering;

impl DbInner {
    pub(super) fn close(&self) -> Result<()> {
        let mut closed = self.closed.lock();
        if *closed {
            return Ok(());
        }
        *closed = true;
        self.shared.scheme.stop_services();
        let shared = &self.shared;
        let result = {
            let _quiesce = shared.quiesce.write();
            shared.closed.store(true, Ordering::Release);
            self.write_clean_state()
        };
        shared.pool.stop();
        shared.scheme.shutdown();
        shared.epoch.stop();
        if let Some(h) = self.epoch_thread.lock().take() {
            let _ = h.join();
        }
        match &result {
            Ok(()) => tracing::info!(dir = %self.dir.display(), "database closed cleanly"),
            Err(e) => {
                tracing::error!(dir = %self.dir.display(), error = %e, "close failed; changes since the last clean close may be lost")
            }
        }
        result
    }

    fn write_clean_state(&self) -> Result<()> {
        let shared = &self.shared;
        if shared.is_poisoned.load(Ordering::Acquire) {
            shared.pool.check_healthy()?;
            return Err(Error::Poisoned {
                cause: shared.poisoned.lock().clone().unwrap_or_default(),
            });
        }
        let pool = &shared.pool;
        shared.scheme.before_clean_close_writes()?;
        pool.flush_all()?;
        if shared.scheme.data_file_untouched() {
            // Still the clean state the open found: rewriting the free
            // list and the superblock would only risk it.
            return shared.scheme.remove_log_after_clean_close();
        }
        // Every page is durable: the log is no longer needed. Stop the
        // writers and note the floor; segments are deleted only after the
        // superblock records it.
        let log_floor = shared.scheme.seal_for_clean_close()?;
        // Every page is written whole: old double-write copies must not be
        // taken for repairs of pages that change after the next open.
        pool.clear_double_write()?;
        let free = pool.free_pages_with_gsn();
        let head = superblock::write_free_list(self.file.as_ref(), self.page_size, &free)?;
        self.file.sync_data()?;
        Superblock {
            page_size: self.page_size as u32,
            next_page_id: pool.next_page_id(),
            catalog_root: CATALOG_ROOT,
            free_list_head: head,
            clean: true,
            log_required: false,
            scheme: Some(shared.scheme.kind()),
            epoch: shared.epoch.current(),
            log_floor,
        }
        .write(self.file.as_ref())?;
        shared.scheme.remove_log_after_clean_close()?;
        self.storage.sync_dir(&self.dir)
    }
}

impl Drop for DbInner {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::error!(error = %e, "closing the database on drop failed");
        }
    }
}
