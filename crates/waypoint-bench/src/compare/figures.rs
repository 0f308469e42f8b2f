//! The PNG figures of a comparison, drawn from its [`Results`] with the
//! same plotting code as the driver's plots ([`crate::plots::draw_png`]):
//! lines of medians against the runs' x (seed 000 Fig. 8, the remote-flush
//! table, recovery per phase), bars per run (Table 1), and per-second
//! values over time (Fig. 9 a/b).
//!
//! A figure without data (every run of it cut short) is drawn empty with
//! its axes, so the files a report names always exist.

use super::results::{Results, RunResult};
use super::{Figure, Metric, TimeField};
use crate::plots::{
    draw_legend, draw_png, legend_box, legend_line, s, top, DrawResult, PlotError, LIMIT, PALETTE,
    SIZE,
};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

/// A named line of points.
struct Line {
    name: String,
    points: Vec<(f64, f64)>,
}

/// Draw `figures` into `out`; returns their paths.
pub fn draw(out: &Path, figures: &[Figure], r: &Results) -> Result<Vec<PathBuf>, PlotError> {
    let mut paths = Vec::new();
    for f in figures {
        let path = out.join(f.file());
        match f {
            Figure::Lines {
                title,
                x_label,
                y_label,
                metrics,
                log_x,
                ..
            } => {
                let lines = medians(r, metrics);
                draw_png(&path, SIZE, |a| {
                    lines_chart(a, title, x_label, y_label, &lines, *log_x, None)
                })?
            }
            Figure::Bars { title, metric, .. } => {
                // A run that completed without this metric measures
                // something else (a throughput run beside recovery runs).
                let runs: Vec<RunResult> = r
                    .runs
                    .iter()
                    .filter(|run| run.median(*metric).is_some() || run.completed() == 0)
                    .cloned()
                    .collect();
                draw_png(&path, SIZE, |a| bars_chart(a, title, *metric, &runs))?
            }
            Figure::OverTime {
                title,
                field,
                limit,
                only,
                ..
            } => {
                let mut lines = over_time(r, *field);
                if let Some(prefix) = only {
                    lines.retain(|l| l.name.starts_with(prefix));
                }
                let limit = limit.as_ref().map(|(l, v)| (l.as_str(), *v));
                draw_png(&path, SIZE, |a| {
                    lines_chart(
                        a,
                        title,
                        "seconds since the workers started",
                        field.title(),
                        &lines,
                        false,
                        limit,
                    )
                })?
            }
        }
        paths.push(path);
    }
    Ok(paths)
}

/// A line per series (one metric) or per metric (several), of the runs'
/// medians against their x.
fn medians(r: &Results, metrics: &[Metric]) -> Vec<Line> {
    let mut lines: Vec<Line> = Vec::new();
    let several_series = r.runs.iter().any(|run| run.series != r.runs[0].series);
    for run in &r.runs {
        for &m in metrics {
            // A line per series and metric, named by what tells it apart.
            let name = match (metrics.len() > 1, several_series) {
                (true, true) => format!("{}: {}", run.series, m.title()),
                (true, false) => m.title().to_string(),
                (false, _) => run.series.clone(),
            };
            let Some(y) = run.median(m) else { continue };
            match lines.iter_mut().find(|l| l.name == name) {
                Some(l) => l.points.push((run.x, y)),
                None => lines.push(Line {
                    name,
                    points: vec![(run.x, y)],
                }),
            }
        }
    }
    for l in &mut lines {
        l.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    lines
}

/// Each series' first completed round, second by second.
fn over_time(r: &Results, field: TimeField) -> Vec<Line> {
    r.runs
        .iter()
        .filter_map(|run| {
            let m = run.rounds.iter().flatten().next()?;
            Some(Line {
                name: run.series.clone(),
                points: m
                    .seconds
                    .iter()
                    .map(|s| {
                        let y = match field {
                            TimeField::TxnPerSec => s.txn_per_sec,
                            TimeField::WalDiskMib => s.wal_disk_mib,
                        };
                        (s.at, y)
                    })
                    .collect(),
            })
        })
        .collect()
}

fn lines_chart(
    area: &Area<'_>,
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: &[Line],
    log_x: bool,
    limit: Option<(&str, f64)>,
) -> DrawResult {
    let xs = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
    let (x_lo, x_hi) = xs.fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let (x_lo, x_hi) = if x_lo > x_hi {
        (1.0, 2.0)
    } else {
        (x_lo, x_hi)
    };
    let y_max = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .chain(limit.map(|l| l.1 * 1.1))
        .fold(0.0, f64::max);
    let y_top = top(y_max);
    // Small values need a decimal, or neighbouring ticks read the same.
    let fmt_y = move |v: &f64| {
        if y_top < 10.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.0}")
        }
    };
    let integers = lines
        .iter()
        .flat_map(|l| l.points.iter())
        .all(|p| p.0.fract() == 0.0);
    // Integer x (workers, warehouses): no ticks between them.
    let fmt_x = move |v: &f64| match (integers, v.fract() == 0.0) {
        (true, false) => String::new(),
        (true, true) => format!("{v:.0}"),
        _ if *v >= 10.0 => format!("{v:.0}"),
        _ => format!("{v:.1}"),
    };
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(title, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80);
    if log_x {
        // A little beyond the ends: the first and last points are not on
        // the frame.
        let (lo, hi) = ((x_lo / 1.3).max(1e-9), (x_hi * 1.3).max(x_lo * 1.7));
        let mut chart = builder
            .build_cartesian_2d((lo..hi).log_scale().base(2.0), 0.0..y_top)
            .map_err(s)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .x_desc(x_label)
            .y_desc(y_label)
            .x_label_formatter(&fmt_x)
            .y_label_formatter(&fmt_y)
            .draw()
            .map_err(s)?;
        plot_lines(&mut chart, lines, limit, (lo, hi))
    } else {
        // From 0, as the paper's axes.
        let hi = x_hi + ((x_hi - x_lo.min(0.0)) * 0.05).max(0.5);
        let mut chart = builder.build_cartesian_2d(0.0..hi, 0.0..y_top).map_err(s)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .x_desc(x_label)
            .y_desc(y_label)
            .x_label_formatter(&fmt_x)
            .y_label_formatter(&fmt_y)
            .draw()
            .map_err(s)?;
        plot_lines(&mut chart, lines, limit, (0.0, hi))
    }
}

fn plot_lines<'a, X>(
    chart: &mut ChartContext<
        'a,
        BitMapBackend<'a>,
        Cartesian2d<X, plotters::coord::types::RangedCoordf64>,
    >,
    lines: &[Line],
    limit: Option<(&str, f64)>,
    (x0, x1): (f64, f64),
) -> DrawResult
where
    X: Ranged<ValueType = f64>,
{
    if let Some((label, y)) = limit {
        chart
            .draw_series(DashedLineSeries::new(
                [(x0, y), (x1, y)],
                8,
                6,
                LIMIT.stroke_width(2),
            ))
            .map_err(s)?
            .label(label)
            .legend(legend_line(LIMIT.stroke_width(2)));
    }
    for (i, line) in lines.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(line.points.clone(), color.stroke_width(2)))
            .map_err(s)?
            .label(line.name.as_str())
            .legend(legend_line(color.stroke_width(2)));
        chart
            .draw_series(
                line.points
                    .iter()
                    .map(|&p| Circle::new(p, 3, color.filled())),
            )
            .map_err(s)?;
    }
    draw_legend(chart, SeriesLabelPosition::UpperLeft)
}

/// A bar per run with its median above it; the runs' labels in the
/// legend, numbered along the axis.
fn bars_chart(area: &Area<'_>, title: &str, metric: Metric, runs: &[RunResult]) -> DrawResult {
    let values: Vec<Option<f64>> = runs.iter().map(|r| r.median(metric)).collect();
    let y_max = top(values.iter().flatten().copied().fold(0.0, f64::max));
    let n = runs.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0.4..n + 0.6, 0.0..y_max)
        .map_err(s)?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .disable_x_mesh()
        .x_labels(runs.len().max(1))
        .x_desc("step")
        .y_desc(metric.title())
        .x_label_formatter(&|v| {
            if v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(s)?;
    for (i, (run, value)) in runs.iter().zip(&values).enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let x = (i + 1) as f64;
        let v = value.unwrap_or(0.0);
        chart
            .draw_series([Rectangle::new(
                [(x - 0.35, 0.0), (x + 0.35, v)],
                color.filled(),
            )])
            .map_err(s)?
            .label(run.label.as_str())
            .legend(legend_box(color.filled()));
        let text = match value {
            Some(v) => format!("{v:.prec$}", prec = metric.decimals()),
            None => "not run".into(),
        };
        chart
            .draw_series([Text::new(
                text,
                (x - 0.3, v + y_max * 0.05),
                ("sans-serif", 14).into_font(),
            )])
            .map_err(s)?;
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight)
}
