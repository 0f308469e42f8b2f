//! PNG plots of a driver run, written next to `summary.json` and
//! `series.csv`: `throughput.png` (committed txn/s per second, warm-up
//! shaded, checkpoint writes per second as bars on a second axis),
//! `wal.png` (log bytes on disk and log bytes written per second, with the
//! configured WAL limit and a ±10% band) and `latency_cdf.png` (the latency
//! CDF from the driver's histograms, overall and per transaction type).
//!
//! This module owns the drawing only: it renders with plotters' bitmap
//! backend and an embedded subset of DejaVu Sans (`fonts/`, registered
//! through plotters' `ab_glyph` feature), so it needs no system fonts or
//! libraries. A failure to plot is returned as an error (and panics inside
//! the plotting library are caught) for the driver to report as a warning.

use crate::metrics::Sample;
use crate::summary::Summary;
use hdrhistogram::Histogram;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// The plot files, in the order they are written.
pub const FILES: [&str; 3] = ["throughput.png", "wal.png", "latency_cdf.png"];

pub(crate) const SIZE: (u32, u32) = (1000, 520);
const FONT: &[u8] = include_bytes!("../fonts/DejaVuSans-subset.ttf");
const TXN: RGBColor = RGBColor(31, 119, 180);
const CKPT: RGBColor = RGBColor(255, 127, 14);
const DISK: RGBColor = RGBColor(44, 160, 44);
pub(crate) const LIMIT: RGBColor = RGBColor(214, 39, 40);
pub(crate) const GREY: RGBColor = RGBColor(128, 128, 128);
pub(crate) const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
];
const MIB: f64 = (1u64 << 20) as f64;

/// Why a plot could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write plot {}: {message}", path.display())]
pub struct PlotError {
    pub path: PathBuf,
    pub message: String,
}

/// A latency CDF: `(latency in µs, fraction of transactions at or below)`.
#[derive(Debug, Clone)]
pub struct Cdf {
    pub name: String,
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub points: Vec<(f64, f64)>,
}

impl Cdf {
    /// About 40 points per decade between the smallest and largest
    /// recorded latency; None if the histogram is empty.
    pub fn of(name: &str, h: &Histogram<u64>) -> Option<Cdf> {
        if h.is_empty() {
            return None;
        }
        let (lo, hi) = (h.min().max(1) as f64, h.max().max(1) as f64);
        let step = 10f64.powf(1.0 / 40.0);
        let mut points = vec![(lo, 0.0)];
        let mut v = lo;
        while v < hi {
            points.push((v, h.quantile_below(v as u64)));
            v *= step;
        }
        points.push((hi, 1.0));
        Some(Cdf {
            name: name.to_string(),
            p50: h.value_at_quantile(0.5),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            points,
        })
    }
}

/// Write the three plots into `out`; returns their paths. `cdfs`: overall
/// first, then one per transaction type (empty ones left out).
pub fn write_plots(
    out: &Path,
    summary: &Summary,
    series: &[Sample],
    cdfs: &[Cdf],
) -> Result<Vec<PathBuf>, PlotError> {
    let title = title(summary);
    let wal_limit = match summary.config["checkpoint"].as_str() {
        Some("none") | None => None,
        Some(_) => summary.config["wal_limit_bytes"].as_u64(),
    };
    let paths: Vec<PathBuf> = FILES.iter().map(|f| out.join(f)).collect();
    type Draw<'a> = Box<dyn Fn(&DrawingArea<BitMapBackend<'_>, Shift>) -> DrawResult + 'a>;
    let jobs: [Draw; 3] = [
        Box::new(|area| throughput(area, &title, series)),
        Box::new(|area| wal(area, &title, series, wal_limit)),
        Box::new(|area| latency_cdf(area, &title, cdfs)),
    ];
    for (path, job) in paths.iter().zip(jobs) {
        draw_png(path, SIZE, |area| job(area))?;
    }
    Ok(paths)
}

pub(crate) type DrawResult = Result<(), String>;

/// Draw one PNG of `size` pixels at `path` on a white background: the
/// one place a figure file is written, for these plots and for
/// `waypoint compare`'s ([`crate::compare::figures`]). A drawing error,
/// and a panic inside the plotting library, become a [`PlotError`].
pub(crate) fn draw_png(
    path: &Path,
    size: (u32, u32),
    job: impl FnOnce(&DrawingArea<BitMapBackend<'_>, Shift>) -> DrawResult,
) -> Result<(), PlotError> {
    register_font();
    let fail = |message: String| PlotError {
        path: path.to_path_buf(),
        message,
    };
    let drawn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let area = BitMapBackend::new(path, size).into_drawing_area();
        area.fill(&WHITE).map_err(|e| e.to_string())?;
        job(&area)?;
        area.present().map_err(|e| e.to_string())
    }));
    match drawn {
        Ok(Ok(())) => Ok(()),
        Ok(Err(message)) => Err(fail(message)),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "the plotting library panicked".into());
            Err(fail(message))
        }
    }
}

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // The embedded font is known to parse; a failure only means text
        // is missing, and plotting then reports an error.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

fn title(s: &Summary) -> String {
    let c = &s.config;
    let preset = c["workload"]["preset"]
        .as_str()
        .map_or(String::new(), |p| format!("-{}", p.to_uppercase()));
    let limit = c["wal_limit_bytes"].as_u64().unwrap_or(0) as f64 / MIB;
    format!(
        "{}{}: {} workers, {}, checkpoint {}, WAL limit {:.0} MiB",
        s.workload,
        preset,
        c["workers"],
        c["commit"].as_str().unwrap_or("?"),
        c["checkpoint"].as_str().unwrap_or("?"),
        limit
    )
}

/// Start and end (seconds since the workers started) of each sample.
fn spans(series: &[Sample]) -> Vec<(f64, f64)> {
    let mut t = 0.0;
    series
        .iter()
        .map(|s| {
            let start = t;
            t += s.interval_secs;
            (start, t)
        })
        .collect()
}

/// End of the warm-up, 0 if there was none.
fn warmup_end(series: &[Sample], spans: &[(f64, f64)]) -> f64 {
    series
        .iter()
        .zip(spans)
        .filter(|(s, _)| s.warmup)
        .map(|(_, span)| span.1)
        .fold(0.0, f64::max)
}

/// The median of the committed txn/s over the measured seconds (shorter
/// trailing intervals under half a second left out), if any.
pub fn measured_median_txn_per_sec(series: &[Sample]) -> Option<f64> {
    let mut rates: Vec<f64> = series
        .iter()
        .filter(|s| !s.warmup && s.interval_secs >= 0.5)
        .map(Sample::txn_per_sec)
        .collect();
    if rates.is_empty() {
        return None;
    }
    rates.sort_by(f64::total_cmp);
    let n = rates.len();
    Some(if n % 2 == 1 {
        rates[n / 2]
    } else {
        (rates[n / 2 - 1] + rates[n / 2]) / 2.0
    })
}

/// The top of an axis: room above the data for the legend.
pub(crate) fn top(max: f64) -> f64 {
    if max > 0.0 {
        max * 1.45
    } else {
        1.0
    }
}

pub(crate) fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// A series' legend mark: a short line in the series' style.
pub(crate) fn legend_line(
    style: impl Into<ShapeStyle>,
) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    let style = style.into();
    move |(x, y)| PathElement::new([(x, y), (x + 16, y)], style)
}

/// A shaded series' legend mark: a small box in its fill.
pub(crate) fn legend_box(
    style: impl Into<ShapeStyle>,
) -> impl Fn((i32, i32)) -> Rectangle<(i32, i32)> {
    let style = style.into();
    move |(x, y)| Rectangle::new([(x, y - 5), (x + 16, y + 5)], style)
}

/// The legend every figure draws: the series' labels in a framed box at
/// `position`.
pub(crate) fn draw_legend<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    CT: CoordTranslate,
{
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(GREY)
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(s)
}

fn throughput(
    area: &DrawingArea<BitMapBackend<'_>, Shift>,
    title: &str,
    series: &[Sample],
) -> DrawResult {
    let spans = spans(series);
    let x_end = spans.last().map_or(1.0, |s| s.1).max(1.0);
    let warm = warmup_end(series, &spans);
    let rates: Vec<f64> = series.iter().map(Sample::txn_per_sec).collect();
    let ckpt: Vec<f64> = series
        .iter()
        .map(|s| s.checkpoint_bytes as f64 / MIB / s.interval_secs.max(1e-9))
        .collect();
    let y_max = top(rates.iter().copied().fold(0.0, f64::max));
    // Bars in the lower third, under the throughput line.
    let y2_max = top(ckpt.iter().copied().fold(0.0, f64::max)) * 2.0;
    let mut chart = ChartBuilder::on(area)
        .caption(format!("Committed txn/s — {title}"), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .right_y_label_area_size(70)
        .build_cartesian_2d(0.0..x_end, 0.0..y_max)
        .map_err(s)?
        .set_secondary_coord(0.0..x_end, 0.0..y2_max);
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_desc("seconds since the workers started")
        .y_desc("committed txn/s")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(s)?;
    chart
        .configure_secondary_axes()
        .y_desc("checkpoint writes, MiB/s")
        .label_style(("sans-serif", 13).into_font().color(&CKPT))
        .draw()
        .map_err(s)?;
    if warm > 0.0 {
        chart
            .draw_series([Rectangle::new(
                [(0.0, 0.0), (warm, y_max)],
                GREY.mix(0.15).filled(),
            )])
            .map_err(s)?
            .label("warm-up")
            .legend(legend_box(GREY.mix(0.3).filled()));
    }
    chart
        .draw_secondary_series(spans.iter().zip(&ckpt).filter(|(_, v)| **v > 0.0).map(
            |(span, v)| Rectangle::new([(span.0, 0.0), (span.1, *v)], CKPT.mix(0.45).filled()),
        ))
        .map_err(s)?
        .label("checkpoint writes (MiB/s, right axis)")
        .legend(legend_box(CKPT.mix(0.45).filled()));
    if let Some(median) = measured_median_txn_per_sec(series) {
        let line = |frac: f64| vec![(warm, median * frac), (x_end, median * frac)];
        chart
            .draw_series(DashedLineSeries::new(line(1.0), 8, 6, GREY.stroke_width(1)))
            .map_err(s)?
            .label(format!("median after warm-up ({median:.0} txn/s)"))
            .legend(legend_line(GREY));
        chart
            .draw_series(DashedLineSeries::new(
                line(0.9),
                3,
                4,
                LIMIT.stroke_width(1),
            ))
            .map_err(s)?
            .label("90% of the median")
            .legend(legend_line(LIMIT));
    }
    let mid: Vec<(f64, f64)> = spans
        .iter()
        .zip(&rates)
        .map(|(span, r)| ((span.0 + span.1) / 2.0, *r))
        .collect();
    chart
        .draw_series(LineSeries::new(mid.clone(), TXN.stroke_width(2)))
        .map_err(s)?
        .label("committed txn/s")
        .legend(legend_line(TXN.stroke_width(2)));
    chart
        .draw_series(mid.into_iter().map(|p| Circle::new(p, 2, TXN.filled())))
        .map_err(s)?;
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight)
}

fn wal(
    area: &DrawingArea<BitMapBackend<'_>, Shift>,
    title: &str,
    series: &[Sample],
    limit: Option<u64>,
) -> DrawResult {
    let spans = spans(series);
    let x_end = spans.last().map_or(1.0, |s| s.1).max(1.0);
    let warm = warmup_end(series, &spans);
    let disk: Vec<(f64, f64)> = spans
        .iter()
        .zip(series)
        .map(|(span, s)| (span.1, s.wal_disk_bytes as f64 / MIB))
        .collect();
    let written: Vec<(f64, f64)> = spans
        .iter()
        .zip(series)
        .map(|(span, s)| {
            let rate = s.wal_bytes as f64 / MIB / s.interval_secs.max(1e-9);
            ((span.0 + span.1) / 2.0, rate)
        })
        .collect();
    let limit_mib = limit.map(|l| l as f64 / MIB);
    let y_max = top(disk
        .iter()
        .map(|p| p.1)
        .chain(limit_mib.map(|l| l * 1.1))
        .fold(0.0, f64::max));
    // The write rate in the lower half, under the level on disk.
    let y2_max = top(written.iter().map(|p| p.1).fold(0.0, f64::max)) * 1.5;
    let mut chart = ChartBuilder::on(area)
        .caption(format!("Write-ahead log — {title}"), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .right_y_label_area_size(70)
        .build_cartesian_2d(0.0..x_end, 0.0..y_max)
        .map_err(s)?
        .set_secondary_coord(0.0..x_end, 0.0..y2_max);
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_desc("seconds since the workers started")
        .y_desc("log on disk, MiB")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(s)?;
    chart
        .configure_secondary_axes()
        .y_desc("log written, MiB/s")
        .label_style(("sans-serif", 13).into_font().color(&TXN))
        .draw()
        .map_err(s)?;
    if warm > 0.0 {
        chart
            .draw_series([Rectangle::new(
                [(0.0, 0.0), (warm, y_max)],
                GREY.mix(0.15).filled(),
            )])
            .map_err(s)?
            .label("warm-up")
            .legend(legend_box(GREY.mix(0.3).filled()));
    }
    if let Some(l) = limit_mib {
        chart
            .draw_series([Rectangle::new(
                [(0.0, l * 0.9), (x_end, l * 1.1)],
                LIMIT.mix(0.08).filled(),
            )])
            .map_err(s)?
            .label("limit ±10%")
            .legend(legend_box(LIMIT.mix(0.15).filled()));
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, l), (x_end, l)],
                8,
                6,
                LIMIT.stroke_width(2),
            ))
            .map_err(s)?
            .label(format!("WAL limit ({l:.0} MiB)"))
            .legend(legend_line(LIMIT.stroke_width(2)));
    }
    chart
        .draw_secondary_series(LineSeries::new(written, TXN.mix(0.7).stroke_width(1)))
        .map_err(s)?
        .label("log written, MiB/s (right axis)")
        .legend(legend_line(TXN));
    chart
        .draw_series(LineSeries::new(disk.clone(), DISK.stroke_width(2)))
        .map_err(s)?
        .label("log on disk, MiB (end of each second)")
        .legend(legend_line(DISK.stroke_width(2)));
    chart
        .draw_series(disk.into_iter().map(|p| Circle::new(p, 2, DISK.filled())))
        .map_err(s)?;
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight)
}

fn latency_cdf(
    area: &DrawingArea<BitMapBackend<'_>, Shift>,
    title: &str,
    cdfs: &[Cdf],
) -> DrawResult {
    let (lo, hi) = cdfs
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.0))
        .fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if hi > 0.0 {
        (lo.max(1.0) / 1.5, hi * 1.5)
    } else {
        (1.0, 10.0)
    };
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("Latency until durable, after warm-up — {title}"),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((lo..hi).log_scale(), 0.0..1.0)
        .map_err(s)?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_desc("latency from begin until the commit is durable, µs (log scale)")
        .y_desc("fraction of committed transactions")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(s)?;
    for (i, c) in cdfs.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let width = if i == 0 { 3 } else { 1 };
        chart
            .draw_series(LineSeries::new(c.points.clone(), color.stroke_width(width)))
            .map_err(s)?
            .label(format!(
                "{}: p50 {} µs, p99 {} µs, p99.9 {} µs",
                c.name, c.p50, c.p99, c.p999
            ))
            .legend(legend_line(color.stroke_width(width)));
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)
}
