//! Sessions and transactions: serializable optimistic concurrency control
//! in the style of Silo (seed 002 §2), over the paged B+-trees.
//!
//! A transaction reads records and their TIDs into a read set, buffers its
//! writes, and at commit:
//! 1. locks the stripes of its write set in ascending order (deadlock-free;
//!    stripes a `get_for_update` took during the body are held already,
//!    and the rest are then waited for at most `Options::lock_wait`, since
//!    the held ones broke the order: decision 036);
//! 2. inserts *absent placeholders* for keys it will create, in tables and
//!    secondary indexes, so concurrent scanners see them (Silo inserts
//!    absent records before validating for the same reason: phantoms);
//! 3. reads the global epoch: the serialization point;
//! 4. validates: no observed record is locked by another committer, and
//!    then every point read and every scan, re-executed, observes the same
//!    TIDs (in that order: `validate.rs` says why);
//! 5. computes its TID (greater than all it saw, in the current epoch),
//!    installs its writes and index changes through the trees' one
//!    modification path, and releases the locks.
//!
//! Invariant: an aborted transaction leaves no trace. Nothing reaches a
//! page before step 2; placeholders and any partial install are undone
//! from the undo list before an error is returned.

//!
//! Files: `session` (a connection and its log), `transaction` (reads,
//! buffered writes, scans), `commit` (steps 1-3 and 5, rollback),
//! `validate` (step 4 and why its order is serializable), `locks` (the
//! commit-lock stripes and session slots), `epoch` (the epoch clock and
//! the TID rule), `shared` (what the database and its sessions share).

mod commit;
pub mod epoch;
pub(crate) mod locks;
pub(crate) mod quiesce;
mod session;
pub(crate) mod shared;
mod transaction;
mod validate;

pub use crate::persist::{DurableWait, FailedSessionLog, NoSessionLog, SessionLog};
pub use commit::{CommitInfo, PendingCommit};
pub use session::Session;
pub use transaction::{IndexEntry, Transaction};
