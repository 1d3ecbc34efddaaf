//! Drawing the charts of `quiver bench report`: line charts and grouped bar charts, each
//! written as a PNG and an SVG of [`WIDTH`] x [`HEIGHT`] pixels (readable on a README page),
//! and panels of line charts sharing one picture ([`PanelChart`]: [`PANEL_WIDTH`] x
//! [`PANEL_HEIGHT`] per panel, under a title).
//!
//! The charts are plain data ([`LineChart`], [`BarChart`], [`PanelChart`]); [`write`] draws one
//! with plotters.
//! Text is drawn with the DejaVu Sans subset embedded from `assets/` (see its README), so no
//! system font, fontconfig or freetype is needed; the SVGs name the family `sans-serif` and
//! leave the font to the viewer.

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::{Error, Result};

pub const WIDTH: u32 = 800;
pub const HEIGHT: u32 = 500;
/// One panel of a [`PanelChart`]: smaller than a chart of its own, two fit a README's width.
pub const PANEL_WIDTH: u32 = 600;
pub const PANEL_HEIGHT: u32 = 380;
/// The band above a [`PanelChart`]'s panels that holds its title.
const PANEL_TITLE_HEIGHT: u32 = 44;
/// A line with more points than this is drawn without a marker on each (they would merge
/// into a thick line: a soak's samples).
const MARKER_POINTS_MAX: usize = 60;
/// Pixels a legend row takes (14 px text and the gap to the next), and its frame and margins:
/// the room [`Legend::AboveLines`] makes.
const LEGEND_ROW_PX: f64 = 19.0;
const LEGEND_FRAME_PX: f64 = 30.0;
/// Pixels of a line chart's area outside its plotting area: the caption above and the x
/// labels below (`line_chart_on`'s layout).
const LINE_CHART_CHROME_PX: f64 = 100.0;

/// The font family every text style names; [`register_font`] maps it to the embedded font.
const FONT: &str = "sans-serif";
const FONT_BYTES: &[u8] = include_bytes!("../assets/DejaVuSans-subset.ttf");

/// Series colours: the Tableau 10 palette, distinguishable and readable on white.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// One line of a [`LineChart`].
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub label: String,
    /// Drawn in this order (callers sort them by x).
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Legend {
    UpperLeft,
    UpperRight,
    LowerLeft,
    LowerRight,
    /// Upper right, above the lines: the y axis is extended until the legend's rows fit over
    /// the highest point (for lines that run across the whole width, like a soak's).
    AboveLines,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Base-2 logarithmic x axis (for widths and cluster sizes, which double).
    pub log_x: bool,
    /// Base-10 logarithmic y axis; points with y <= 0 are left out.
    pub log_y: bool,
    pub legend: Legend,
}

/// One colour of a [`BarChart`]: a value per category (`None`: no bar there).
#[derive(Clone, Debug, PartialEq)]
pub struct BarSeries {
    pub label: String,
    pub values: Vec<Option<f64>>,
}

/// Bars grouped by category, one colour per series; no legend when there is one series.
#[derive(Clone, Debug, PartialEq)]
pub struct BarChart {
    pub title: String,
    /// What the categories are (under their names; empty for none).
    pub x_label: String,
    pub y_label: String,
    pub categories: Vec<String>,
    pub series: Vec<BarSeries>,
}

/// Line charts side by side in one picture, `columns` to a row, in order, under one title.
#[derive(Clone, Debug, PartialEq)]
pub struct PanelChart {
    pub title: String,
    pub panels: Vec<LineChart>,
    pub columns: usize,
}

impl PanelChart {
    fn grid(&self) -> (usize, usize) {
        let columns = self.columns.clamp(1, self.panels.len().max(1));
        (self.panels.len().div_ceil(columns).max(1), columns)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Chart {
    Line(LineChart),
    Bar(BarChart),
    Panels(PanelChart),
}

impl Chart {
    /// The picture's size in pixels.
    pub fn size(&self) -> (u32, u32) {
        match self {
            Chart::Line(_) | Chart::Bar(_) => (WIDTH, HEIGHT),
            Chart::Panels(p) => {
                let (rows, columns) = p.grid();
                (
                    PANEL_WIDTH * columns as u32,
                    PANEL_TITLE_HEIGHT + PANEL_HEIGHT * rows as u32,
                )
            }
        }
    }
}

/// Draws `chart` into `dir/name.png` and `dir/name.svg`; returns the two paths.
pub fn write(chart: &Chart, dir: &Path, name: &str) -> Result<Vec<PathBuf>> {
    register_font();
    let png = dir.join(format!("{name}.png"));
    let svg = dir.join(format!("{name}.svg"));
    let (width, height) = chart.size();
    {
        let root = BitMapBackend::new(&png, (width, height)).into_drawing_area();
        draw(&root, chart).map_err(|e| plot_error(&png, e))?;
        root.present().map_err(|e| plot_error(&png, e))?;
    }
    {
        let root = SVGBackend::new(&svg, (width, height)).into_drawing_area();
        draw(&root, chart).map_err(|e| plot_error(&svg, e))?;
        root.present().map_err(|e| plot_error(&svg, e))?;
    }
    Ok(vec![png, svg])
}

fn plot_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Plot {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

/// Makes the embedded font plotters' `sans-serif`, once per process.
fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The font is part of the binary and checked by the tests: failing here is a bug.
        if plotters::style::register_font(FONT, FontStyle::Normal, FONT_BYTES).is_err() {
            panic!("the embedded font does not parse");
        }
    });
}

type DrawResult<DB> =
    std::result::Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, chart: &Chart) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    match chart {
        Chart::Line(c) => draw_line_chart(root, c),
        Chart::Bar(c) => draw_bar_chart(root, c),
        Chart::Panels(c) => draw_panels(root, c),
    }
}

fn draw_panels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    c: &PanelChart,
) -> DrawResult<DB> {
    let (rows, columns) = c.grid();
    let (title, body) = root.split_vertically(PANEL_TITLE_HEIGHT);
    // Coordinates on an area are pixels from its top left corner.
    title.draw(&Text::new(
        c.title.clone(),
        (
            (PANEL_WIDTH * columns as u32 / 2) as i32,
            (PANEL_TITLE_HEIGHT / 2) as i32,
        ),
        (FONT, 22)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Center)),
    ))?;
    for (area, panel) in body.split_evenly((rows, columns)).iter().zip(&c.panels) {
        draw_line_chart(area, panel)?;
    }
    Ok(())
}

/// The points a chart can show: finite, and positive on a logarithmic axis.
fn visible(c: &LineChart, s: &Series) -> Vec<(f64, f64)> {
    s.points
        .iter()
        .copied()
        .filter(|&(x, y)| x.is_finite() && y.is_finite())
        .filter(|&(x, y)| (!c.log_x || x > 0.0) && (!c.log_y || y > 0.0))
        .collect()
}

/// `lo..hi` padded for drawing: linear axes start at zero (throughput and latency are read
/// against it); logarithmic ones get a margin of a fraction of a decade.
fn axis_range(values: impl Iterator<Item = f64>, log: bool, pad_top: f64) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if !lo.is_finite() {
        return if log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if log {
        let (lo, hi) = (lo / 1.15, hi * 1.15 * (1.0 + pad_top));
        if hi / lo < 2.0 {
            (lo / 2.0, hi * 2.0)
        } else {
            (lo, hi)
        }
    } else {
        let hi = if hi > 0.0 { hi * (1.0 + pad_top) } else { 1.0 };
        (lo.min(0.0), hi)
    }
}

/// The `pad_top` of [`axis_range`] that leaves a [`Legend::AboveLines`] legend's rows free
/// above the highest of `ys`, on an area `height_px` high.
fn legend_room(c: &LineChart, height_px: u32, ys: impl Iterator<Item = f64>) -> f64 {
    let plot_px = (height_px as f64 - LINE_CHART_CHROME_PX).max(1.0);
    let legend_px = LEGEND_FRAME_PX + LEGEND_ROW_PX * c.series.len() as f64;
    // The fraction f of the plot above the highest point, bounded so that a small panel
    // keeps room for its data; above the data's range it is f / (1 - f) of that range.
    let f = (legend_px / plot_px).min(0.6);
    let share = f / (1.0 - f);
    if !c.log_y {
        return share;
    }
    // On a logarithmic axis the range is a ratio: the padded data's decades (as
    // `axis_range` pads them), raised to that share.
    let (lo, hi) = ys
        .filter(|&y| y > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), y| {
            (lo.min(y), hi.max(y))
        });
    if !lo.is_finite() {
        return share;
    }
    let decades = (hi * 1.15 / (lo / 1.15)).max(2.0);
    decades.powf(share) - 1.0
}

fn draw_line_chart<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    c: &LineChart,
) -> DrawResult<DB> {
    let points: Vec<Vec<(f64, f64)>> = c.series.iter().map(|s| visible(c, s)).collect();
    let all = || points.iter().flatten();
    // A little room right of the last point, so its marker is not cut by the frame.
    let (x0, x1) = axis_range(all().map(|p| p.0), c.log_x, 0.03);
    // Room above the highest point for an upper legend; for one above the lines, its rows'.
    let pad_top = if c.legend == Legend::AboveLines {
        legend_room(c, root.dim_in_pixel().1, all().map(|p| p.1))
    } else {
        0.12
    };
    let (y0, y1) = axis_range(all().map(|p| p.1), c.log_y, pad_top);
    // The axis types differ between linear and logarithmic, hence one instantiation each.
    match (c.log_x, c.log_y) {
        (false, false) => line_chart_on(root, c, &points, x0..x1, y0..y1),
        (true, false) => line_chart_on(root, c, &points, (x0..x1).log_scale().base(2.0), y0..y1),
        (false, true) => line_chart_on(root, c, &points, x0..x1, (y0..y1).log_scale()),
        (true, true) => line_chart_on(
            root,
            c,
            &points,
            (x0..x1).log_scale().base(2.0),
            (y0..y1).log_scale(),
        ),
    }
}

fn line_chart_on<DB, X, Y>(
    root: &DrawingArea<DB, Shift>,
    c: &LineChart,
    points: &[Vec<(f64, f64)>],
    x: X,
    y: Y,
) -> DrawResult<DB>
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(root)
        .caption(&c.title, (FONT, 22))
        .margin(14)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .x_desc(&c.x_label)
        .y_desc(&c.y_label)
        .x_label_formatter(&|v| tick_label(*v))
        .y_label_formatter(&|v| tick_label(*v))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        // Only the labelled grid lines: the minor ones crowd a README-sized picture.
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(220, 220, 220))
        .draw()?;
    for (i, (s, pts)) in c.series.iter().zip(points).enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let style = color.stroke_width(2);
        if s.dashed {
            chart
                .draw_series(DashedLineSeries::new(pts.iter().copied(), 8, 5, style))?
                .label(&s.label)
                // A dashed sample in the legend: two short strokes.
                .legend(move |(x, y)| {
                    EmptyElement::at((x, y))
                        + PathElement::new(vec![(0, 0), (8, 0)], style)
                        + PathElement::new(vec![(13, 0), (20, 0)], style)
                });
        } else {
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), style))?
                .label(&s.label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        }
        if !s.dashed && pts.len() <= MARKER_POINTS_MAX {
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
        }
    }
    chart
        .configure_series_labels()
        .position(match c.legend {
            Legend::UpperLeft => SeriesLabelPosition::UpperLeft,
            Legend::UpperRight | Legend::AboveLines => SeriesLabelPosition::UpperRight,
            Legend::LowerLeft => SeriesLabelPosition::LowerLeft,
            Legend::LowerRight => SeriesLabelPosition::LowerRight,
        })
        .margin(10)
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(160, 160, 160))
        .draw()?;
    Ok(())
}

fn draw_bar_chart<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    c: &BarChart,
) -> DrawResult<DB> {
    let n = c.categories.len().max(1);
    let m = c.series.len().max(1);
    let top = c
        .series
        .iter()
        .flat_map(|s| s.values.iter().flatten())
        .fold(0.0f64, |a, &v| a.max(v));
    let top = if top > 0.0 { top * 1.18 } else { 1.0 };
    let legend_rows = if c.series.len() > 1 {
        c.series.len()
    } else {
        0
    };
    // Category names under the axis, wrapped to fit their slot (about 7.5 px per character).
    let slot_px = (WIDTH as f64 - 120.0) / n as f64;
    let max_chars = ((slot_px / 7.5) as usize).max(6);
    let names: Vec<Vec<String>> = c
        .categories
        .iter()
        .map(|name| wrap(name, max_chars).into_iter().take(3).collect())
        .collect();
    let name_lines = names.iter().map(Vec::len).max().unwrap_or(1).max(1) as u32;
    let mut chart = ChartBuilder::on(root)
        .caption(&c.title, (FONT, 22))
        .margin(14)
        // The category names (wrapped), then the axis description.
        .x_label_area_size(14 + 16 * name_lines + if c.x_label.is_empty() { 0 } else { 24 })
        .y_label_area_size(72)
        .build_cartesian_2d::<RangedCoordf64, RangedCoordf64>(
            (-0.55..n as f64 - 0.45).into(),
            (0.0..top * (1.0 + 0.06 * legend_rows as f64)).into(),
        )?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        // Category names are drawn below the bars instead (tick positions are plotters' choice).
        .x_labels(0)
        .x_desc(&c.x_label)
        .y_desc(&c.y_label)
        .y_label_formatter(&|v| tick_label(*v))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        // Only the labelled grid lines: the minor ones crowd a README-sized picture.
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(220, 220, 220))
        .draw()?;

    let group = 0.8;
    let w = group / m as f64;
    for (j, s) in c.series.iter().enumerate() {
        let color = if m == 1 {
            PALETTE[0]
        } else {
            PALETTE[j % PALETTE.len()]
        };
        let bars = s.values.iter().enumerate().filter_map(|(i, v)| {
            let v = (*v)?;
            let left = i as f64 - group / 2.0 + j as f64 * w;
            Some(Rectangle::new(
                [(left + w * 0.06, 0.0), (left + w * 0.94, v)],
                color.filled(),
            ))
        });
        let anno = chart.draw_series(bars)?;
        if m > 1 {
            anno.label(&s.label).legend(move |(x, y)| {
                Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled())
            });
        }
        // The value above each bar, the figure a reader wants from a bar chart, where it fits
        // (about 7 px per character at 12 px).
        let bar_px = (WIDTH as f64 - 120.0) / n as f64 * w;
        let value_font = (FONT, 12)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Bottom));
        chart.draw_series(s.values.iter().enumerate().filter_map(|(i, v)| {
            let v = (*v)?;
            let text = value_label(v);
            if text.len() as f64 * 7.0 > bar_px + 4.0 {
                return None;
            }
            let x = i as f64 - group / 2.0 + (j as f64 + 0.5) * w;
            Some(Text::new(text, (x, v), value_font.clone()))
        }))?;
    }
    if m > 1 {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .margin(10)
            .label_font((FONT, 14))
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(160, 160, 160))
            .draw()?;
    }
    let label_font = (FONT, 14)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for (i, lines) in names.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64, 0.0));
        for (k, line) in lines.iter().enumerate() {
            root.draw(&Text::new(
                line.clone(),
                (px, py + 8 + 16 * k as i32),
                label_font.clone(),
            ))?;
        }
    }
    Ok(())
}

/// Splits `s` into lines of at most `width` characters at spaces (a longer word stays whole).
fn wrap(s: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in s.split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

/// An axis tick: whole numbers plainly, large ones with k / M / G, small ones with the
/// digits they need.
pub fn tick_label(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        trim(format!("{:.2}", v / 1e9)) + "G"
    } else if a >= 1e6 {
        trim(format!("{:.2}", v / 1e6)) + "M"
    } else if a >= 1e4 {
        trim(format!("{:.1}", v / 1e3)) + "k"
    } else if a >= 1.0 || a == 0.0 {
        trim(format!("{v:.2}"))
    } else {
        trim(format!("{v:.3}"))
    }
}

/// A value printed on a bar: three significant digits.
pub fn value_label(v: f64) -> String {
    let a = v.abs();
    let (x, unit) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let digits = if x.abs() >= 100.0 {
        0
    } else if x.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{x:.digits$}{unit}")
}

/// `"2.50"` -> `"2.5"`, `"3.00"` -> `"3"`.
fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert_eq!(tick_label(0.0), "0");
        assert_eq!(tick_label(32.0), "32");
        assert_eq!(tick_label(2.5), "2.5");
        assert_eq!(tick_label(250_000.0), "250k");
        assert_eq!(tick_label(1_600_000.0), "1.6M");
        assert_eq!(tick_label(0.125), "0.125");
        assert_eq!(value_label(1_634_000.0), "1.63M");
        assert_eq!(value_label(112_000.0), "112k");
        assert_eq!(value_label(8.0), "8.00");
    }

    #[test]
    fn wrapping() {
        assert_eq!(
            wrap("engine in-process multi_get", 12),
            ["engine", "in-process", "multi_get"]
        );
        assert_eq!(wrap("networked G32", 20), ["networked G32"]);
        assert!(wrap("", 5).is_empty());
    }

    #[test]
    fn the_embedded_font_parses() {
        register_font();
    }
}
