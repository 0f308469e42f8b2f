//! What a `waypoint compare` experiment measured: per run and round the
//! metrics of [`super::Metric`], their medians and ratios to the
//! baseline, and `results.json` (serde), from which the report and the
//! figures are drawn.
//!
//! Invariant: `rounds[r]` of a run is `None` exactly when round `r` of
//! that run did not complete (not reached, cut short, or failed), and
//! medians are taken over the `Some` rounds only.

use super::machine::Machine;
use super::{Experiment, Metric};
use crate::error::{BenchError, BenchResult};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// One second of a run (for the figures over time).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Second {
    /// Seconds since the workers started, at the end of this interval.
    pub at: f64,
    pub txn_per_sec: f64,
    pub wal_disk_mib: f64,
}

/// What one run of one round measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Measurement {
    /// By [`Metric::key`].
    pub metrics: BTreeMap<String, f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub seconds: Vec<Second>,
    /// What the engine's commits survived, in its own words (runs on
    /// [`crate::peers`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub durability: Option<String>,
}

impl Measurement {
    pub fn get(&self, m: Metric) -> Option<f64> {
        self.metrics.get(m.key()).copied()
    }

    pub fn set(&mut self, m: Metric, value: f64) {
        assert!(value.is_finite(), "{}: {value} is not a number", m.key());
        self.metrics.insert(m.key().to_string(), value);
    }
}

/// One configuration of the experiment and what each round gave.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub label: String,
    pub series: String,
    pub x: f64,
    /// The driver's configuration and the workload's, as run.
    pub config: serde_json::Value,
    pub rounds: Vec<Option<Measurement>>,
    /// Medians over the completed rounds, by metric key.
    pub median: BTreeMap<String, f64>,
    /// `median / the baseline's median`, by metric key.
    pub vs_baseline: BTreeMap<String, f64>,
    /// The label of the run this one is compared with.
    pub baseline: Option<String>,
    /// What the engine's commits survived (runs on [`crate::peers`]).
    pub durability: Option<String>,
}

impl RunResult {
    pub fn median(&self, m: Metric) -> Option<f64> {
        self.median.get(m.key()).copied()
    }

    pub fn completed(&self) -> usize {
        self.rounds.iter().flatten().count()
    }
}

/// `results.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    pub experiment: String,
    pub reproduces: String,
    pub why: String,
    pub command: String,
    /// UTC, when the experiment started.
    pub date: String,
    pub machine: Machine,
    /// The binary that ran every run: version and commit
    /// ([`crate::BUILD`]).
    pub build: String,
    pub settings: serde_json::Value,
    /// Why the report is partial (Ctrl-C, an error), or None if every
    /// round of every run completed.
    pub partial: Option<String>,
    pub baseline: String,
    pub x_name: String,
    /// The tables' metrics, in order.
    pub metrics: Vec<Metric>,
    pub runs: Vec<RunResult>,
    pub notes: Vec<String>,
    /// The PNG files written next to this file.
    pub figures: Vec<String>,
    pub seconds_taken: f64,
}

/// The median of `values` (the mean of the middle two for an even
/// count); None if empty.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

impl Results {
    /// Fill every run's medians and its ratios to its baseline from the
    /// rounds.
    pub fn summarize(&mut self, experiment: &Experiment) {
        for run in &mut self.runs {
            let mut keys: Vec<String> = run
                .rounds
                .iter()
                .flatten()
                .flat_map(|m| m.metrics.keys().cloned())
                .collect();
            keys.sort_unstable();
            keys.dedup();
            run.median = keys
                .into_iter()
                .filter_map(|k| {
                    let values: Vec<f64> = run
                        .rounds
                        .iter()
                        .flatten()
                        .filter_map(|m| m.metrics.get(&k).copied())
                        .collect();
                    median(&values).map(|m| (k, m))
                })
                .collect();
        }
        for i in 0..self.runs.len() {
            let Some(b) = experiment.baseline.index_for(&experiment.runs, i) else {
                continue;
            };
            let base = self.runs[b].median.clone();
            let run = &mut self.runs[i];
            run.baseline = Some(experiment.runs[b].label.clone());
            run.vs_baseline = run
                .median
                .iter()
                .filter_map(|(k, v)| {
                    let b = *base.get(k)?;
                    (b != 0.0).then(|| (k.clone(), v / b))
                })
                .collect();
        }
    }

    /// Write `results.json` into `out`.
    pub fn write(&self, out: &Path) -> BenchResult<()> {
        let path = out.join("results.json");
        let json = serde_json::to_string_pretty(self).expect("results serialize");
        std::fs::write(&path, json + "\n").map_err(|e| BenchError::io(&path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }
}
