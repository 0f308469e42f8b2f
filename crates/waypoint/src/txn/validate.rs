//! Commit-time validation of a transaction's reads (step 4 of the commit
//! protocol, seed 002 §2: Silo's read-set validation, extended to scans).
//!
//! Invariant: validation passes only if some moment after the
//! serialization point saw every record the transaction read at the TID
//! it observed, with no other committer between its first and its last
//! install of any of them. Silo reads a record's TID and lock bit in one
//! word; here the lock is a stripe beside the record, so the two reads
//! are separate and their **order** is what keeps the invariant: for
//! every record, its stripe is checked *before* its TID is read again.
//! Point reads do it key by key; a scan checks the stripes of every key
//! it observed and only then runs again. The opposite order (re-read,
//! then stripe) let a read-only bank audit commit with half a transfer:
//! the transfer installed its last record after the re-run read it, and
//! released its stripes before they were checked.
//!
//! Why the order suffices (docs/decisions/010-serializable-validation.md
//! has the same argument with the phantom case): suppose a committed
//! writer W's effects were seen partially: the transaction read W's
//! version of x and a version older than W's of y. W holds y's stripe
//! from before its first install until after its last. Reading x came
//! after W installed x, so W held y's stripe then; validation checks y's
//! stripe at b and re-reads y at a > b, and y is still older than W's at
//! a, so W had not installed y (W's last install at the latest) by a.
//! So W held y's stripe at b, and validation fails. Tested by
//! `tests/scan_audit.rs` and modelled in `tests/model_check/scan.rs`
//! (the old order is its broken variant).

use super::locks::LockTable;
use super::shared::DbShared;
use super::transaction::{as_ref_bound, scan_tree, LockedRecord, Transaction};
use crate::catalog;
use crate::error::{Error, Result};
use crate::ids::Tid;

impl Transaction<'_> {
    /// Step 4: every read still observes what it observed. Returns the
    /// largest TID read.
    ///
    /// `locked` holds the records of the write set, sorted by (table, key),
    /// with the TID each had when its lock was taken: a read of one of them
    /// is checked against that TID, since no one else can have changed it.
    pub(super) fn validate(
        &self,
        db: &DbShared,
        me: u64,
        locked: &[LockedRecord<'_>],
    ) -> Result<Tid> {
        let own = Tid::placeholder(me);
        let lock_owner = self.session.lock_owner();
        let mut max_seen = Tid::ZERO;
        for r in &self.reads {
            r.table.check_live()?;
            let held = locked
                .binary_search_by(|(k, _)| k.cmp(&(r.table.id, r.key.as_slice())))
                .ok();
            let changed = match held {
                Some(i) => locked[i].1 != r.observed,
                // The stripe first, then the TID (module header).
                None => {
                    db.locks
                        .locked_by_other(LockTable::stripe(r.table.id, &r.key), lock_owner)
                        || r.table
                            .tree
                            .get(&db.pool, &r.key, None)?
                            .0
                            .map(|(t, _)| t)
                            .filter(|t| *t != own)
                            != r.observed
                }
            };
            if changed {
                return Err(Error::Conflict);
            }
            if let Some(t) = r.observed.filter(|t| !t.is_placeholder()) {
                max_seen = max_seen.max(t);
            }
        }
        for s in &self.scans {
            // Every observed key's stripe first, then the re-run (module
            // header). A key the re-run finds that the scan did not observe
            // fails the comparison below; its writer inserted it as a
            // placeholder before its first install, so no writer the scan
            // saw part of can hide there.
            for (k, tid) in &s.observed {
                let primary: &[u8] = if s.is_index {
                    match catalog::split_index_key(k) {
                        Some((_, p)) => p,
                        None => return Err(Error::Conflict),
                    }
                } else {
                    k
                };
                if db
                    .locks
                    .locked_by_other(LockTable::stripe(s.table.id, primary), lock_owner)
                {
                    return Err(Error::Conflict);
                }
                if !tid.is_placeholder() {
                    max_seen = max_seen.max(*tid);
                }
            }
            let now = scan_tree(
                db,
                &s.tree,
                as_ref_bound(&s.lower),
                as_ref_bound(&s.upper),
                s.reverse,
                s.fetch,
                Some(own),
                |_, _| {},
            )?;
            if now != s.observed {
                return Err(Error::Conflict);
            }
        }
        Ok(max_seen)
    }
}
