//! `report.md` of a comparison, from its [`Results`] alone: what was run
//! and why, the paper result it reproduces, machine, date and command,
//! the runs' settings, a table per metric (per-round values, median,
//! ratio to the baseline), the figures and the notes. A partial report
//! says so at the top.

use super::results::Results;
use super::Metric;
use std::fmt::Write;

/// `v` with `decimals` digits and thousands separators: "12,345.6".
pub fn number(v: f64, decimals: usize) -> String {
    let text = format!("{:.decimals$}", v.abs());
    let (int, frac) = text
        .split_once('.')
        .map_or((text.as_str(), ""), |(i, f)| (i, f));
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let sign = if v < 0.0 && text.chars().any(|c| c.is_ascii_digit() && c != '0') {
        "-"
    } else {
        ""
    };
    if frac.is_empty() {
        format!("{sign}{grouped}")
    } else {
        format!("{sign}{grouped}.{frac}")
    }
}

fn mib(bytes: u64) -> String {
    if bytes >= 1 << 30 && bytes.is_multiple_of(1 << 30) {
        format!("{} GiB", bytes >> 30)
    } else {
        format!("{} MiB", number(bytes as f64 / (1u64 << 20) as f64, 0))
    }
}

/// The report's text.
pub fn render(r: &Results) -> String {
    let mut md = format!("# `waypoint compare {}`\n\n", r.experiment);
    if let Some(why) = &r.partial {
        let _ = writeln!(
            md,
            "**PARTIAL REPORT:** {why}. Rounds not completed show `–` and medians cover the completed rounds only.\n"
        );
    }
    let _ = writeln!(md, "Reproduces {}.\n", r.reproduces);
    let _ = writeln!(md, "{}\n", r.why);
    let rounds = r.settings["rounds"].as_u64().unwrap_or(1);
    let quick = r.settings["quick"].as_bool().unwrap_or(false);
    let _ = writeln!(md, "| | |\n|---|---|");
    let _ = writeln!(md, "| command | `{}` |", r.command);
    let _ = writeln!(
        md,
        "| date | {} (took {} s) |",
        r.date,
        number(r.seconds_taken, 0)
    );
    let _ = writeln!(md, "| machine | {} |", r.machine.describe());
    let _ = writeln!(md, "| binary | waypoint {} |", r.build);
    let _ = writeln!(
        md,
        "| rounds | {rounds}{}, interleaved: every run once per round, in reverse order every other round |",
        if quick { " (`--quick`: tiny data, second-long runs)" } else { "" }
    );
    let _ = writeln!(md, "| baseline | {} |", r.baseline);
    let _ = writeln!(
        md,
        "| data | each run on a fresh copy of one load of its workload{}, below the output directory (removed afterwards) |\n",
        if r.runs.iter().any(|run| run.config.get("durability").is_some()) {
            " (a run on a peer engine loads its own)"
        } else {
            ""
        }
    );

    if r.runs.iter().any(|run| run.durability.is_some()) {
        md += "## Durability\n\nWhat each run's commits survived, in the engine's own terms:\n\n";
        md += "| run | durability |\n|---|---|\n";
        for run in &r.runs {
            let d = run
                .durability
                .as_deref()
                .unwrap_or(if run.config["scheme"] == "per-worker" {
                    "durable: waypoint's driver, commits counted once synced (pipelined)"
                } else {
                    "–"
                });
            let _ = writeln!(md, "| {} | {d} |", run.label);
        }
        md += "\n";
    }
    md += "## Runs\n\n";
    md += "| run | scheme | commit | checkpoint | workers | in flight | workload | seconds (+ warm-up) | WAL limit | buffer |\n";
    md += "|---|---|---|---|---:|---:|---|---|---:|---:|\n";
    for run in &r.runs {
        let c = &run.config;
        // The log's options mean something for the schemes with a log.
        let logged = c["scheme"]
            .as_str()
            .and_then(waypoint::SchemeKind::parse)
            .is_some_and(|k| k.recovers_from_log());
        let dash = || "–".to_string();
        let w = &c["workload"];
        let workload = match w["workload"].as_str() {
            Some("tpcc") => {
                let scale = w["scale_down"].as_u64().unwrap_or(1);
                format!(
                    "TPC-C, {} warehouses{}",
                    w["warehouses"],
                    if scale > 1 {
                        format!(" (1/{scale})")
                    } else {
                        String::new()
                    }
                )
            }
            Some("ycsb") => format!(
                "YCSB {} {}, {} records",
                w["preset"].as_str().unwrap_or("?").to_ascii_uppercase(),
                w["distribution"].as_str().unwrap_or("?"),
                w["records"]
            ),
            Some("tpcb") => format!(
                "TPC-B, {} branches, {} accounts",
                w["branches"], w["accounts"]
            ),
            _ => w.to_string(),
        };
        let seconds = if c.get("crash").is_some() {
            "until killed".to_string()
        } else {
            format!(
                "{} (+ {})",
                c["duration_secs"],
                c["warmup_secs"].as_u64().unwrap_or(0)
            )
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {workload} | {seconds} | {} | {} |",
            run.label,
            c["scheme"].as_str().unwrap_or("?"),
            if logged {
                c["commit"].as_str().unwrap_or("?").to_string()
            } else {
                dash()
            },
            if logged {
                c["checkpoint"].as_str().unwrap_or("?").to_string()
            } else {
                dash()
            },
            c["workers"],
            c["in_flight"],
            if logged {
                mib(c["wal_limit_bytes"].as_u64().unwrap_or(0))
            } else {
                dash()
            },
            mib(c["buffer_bytes"].as_u64().unwrap_or(0)),
        );
    }

    md += "\n## Results\n\n";
    for &m in &r.metrics {
        table(&mut md, r, m, rounds as usize);
    }

    if !r.figures.is_empty() {
        md += "## Figures\n\n";
        for f in &r.figures {
            let _ = writeln!(md, "![{f}]({f})\n");
        }
    }
    if !r.notes.is_empty() {
        md += "## Notes\n\n";
        for n in &r.notes {
            let _ = writeln!(md, "- {n}");
        }
        md.push('\n');
    }
    md
}

/// The table of one metric, a row per run that measured it; left out if
/// no run measured it.
fn table(md: &mut String, r: &Results, m: Metric, rounds: usize) {
    if r.runs.iter().all(|run| run.median(m).is_none())
        && r.runs.iter().any(|run| run.completed() > 0)
    {
        return;
    }
    match m.better() {
        Some(better) => {
            let _ = writeln!(md, "### {} ({better})\n", m.title());
        }
        None => {
            let _ = writeln!(md, "### {}\n", m.title());
        }
    }
    md.push_str("| run |");
    for i in 1..=rounds {
        let _ = write!(md, " round {i} |");
    }
    md.push_str(" median | vs baseline |\n|---|");
    md.push_str(&"---:|".repeat(rounds + 2));
    md.push('\n');
    for run in &r.runs {
        // A run that completed without measuring this metric (a recovery
        // run in a throughput table) has no row; one not completed keeps
        // its row of dashes (a partial report).
        if run.completed() > 0 && run.median(m).is_none() {
            continue;
        }
        let _ = write!(md, "| {} |", run.label);
        for round in &run.rounds {
            match round.as_ref().and_then(|x| x.get(m)) {
                Some(v) => {
                    let _ = write!(md, " {} |", number(v, m.decimals()));
                }
                None => md.push_str(" – |"),
            }
        }
        match run.median(m) {
            Some(v) => {
                let _ = write!(md, " **{}** |", number(v, m.decimals()));
            }
            None => md.push_str(" – |"),
        }
        match run.vs_baseline.get(m.key()) {
            Some(ratio) => {
                let _ = writeln!(md, " {ratio:.2}× |");
            }
            None => md.push_str(" – |\n"),
        }
    }
    md.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_have_thousands_separators() {
        assert_eq!(number(0.0, 0), "0");
        assert_eq!(number(999.0, 0), "999");
        assert_eq!(number(1234.0, 0), "1,234");
        assert_eq!(number(1234567.891, 1), "1,234,567.9");
        assert_eq!(number(-1234.5, 1), "-1,234.5");
        assert_eq!(number(0.125, 2), "0.12");
    }
}
