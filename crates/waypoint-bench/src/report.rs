//! Latency histograms and the printed summary table shared by workloads.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Latencies in microseconds, 1 µs .. 60 s, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

/// One measured phase of a benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseResult {
    pub phase: String,
    /// Transactions committed.
    pub txns: u64,
    /// Records touched (inserted, read, or scanned).
    pub records: u64,
    pub seconds: f64,
    pub txn_per_sec: f64,
    pub records_per_sec: f64,
    pub aborts: u64,
    pub latency_us: Latency,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Latency {
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

impl Latency {
    pub fn of(h: &Histogram<u64>) -> Self {
        Latency {
            p50: h.value_at_quantile(0.50),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

impl PhaseResult {
    pub fn new(
        phase: &str,
        txns: u64,
        records: u64,
        seconds: f64,
        aborts: u64,
        h: &Histogram<u64>,
    ) -> Self {
        let secs = seconds.max(1e-9);
        PhaseResult {
            phase: phase.to_string(),
            txns,
            records,
            seconds,
            txn_per_sec: txns as f64 / secs,
            records_per_sec: records as f64 / secs,
            aborts,
            latency_us: Latency::of(h),
        }
    }
}

/// A fixed-width table a person can read.
pub fn format_table(phases: &[PhaseResult]) -> String {
    let mut out = format!(
        "{:<14} {:>10} {:>12} {:>8} {:>12} {:>14} {:>8} {:>9} {:>9} {:>9}\n",
        "phase",
        "txns",
        "records",
        "secs",
        "txn/s",
        "records/s",
        "aborts",
        "p50 µs",
        "p99 µs",
        "p99.9 µs"
    );
    for p in phases {
        out += &format!(
            "{:<14} {:>10} {:>12} {:>8.2} {:>12.0} {:>14.0} {:>8} {:>9} {:>9} {:>9}\n",
            p.phase,
            p.txns,
            p.records,
            p.seconds,
            p.txn_per_sec,
            p.records_per_sec,
            p.aborts,
            p.latency_us.p50,
            p.latency_us.p99,
            p.latency_us.p999
        );
    }
    out
}
