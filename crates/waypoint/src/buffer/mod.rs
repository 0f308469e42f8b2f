//! Buffer management: page frames, latches, the page provider, writeback.
pub mod page;
