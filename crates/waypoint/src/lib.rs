//! waypoint: an embeddable transactional storage engine.
//!
//! See `ARCHITECTURE.md` for the map of modules.

pub mod btree;
pub mod buffer;
pub mod error;
pub mod io;

pub use error::{Error, IoOp, Result};
pub mod catalog;
pub mod txn;
