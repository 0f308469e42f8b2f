//! Workloads and the benchmark driver behind `waypoint bench`.
//!
//! Today: the engine benchmark ([`engine`]), which loads a table and then
//! measures point reads and range scans, in memory or with a buffer pool
//! smaller than the data. TPC-C, YCSB, TPC-B and Voter arrive with the
//! benchmark-driver issue and reuse the reporting here.

pub mod engine;
pub mod report;
pub mod updates;
