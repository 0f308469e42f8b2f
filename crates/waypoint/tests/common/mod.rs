//! The bank-transfer workload shared by the crash tests (`crash.rs`,
//! `kill.rs`): it lives in `waypoint-sim` (`waypoint_sim::bank`), which
//! `waypoint simulate` runs too, so there is one copy of it.

pub use waypoint_sim::bank::*;
