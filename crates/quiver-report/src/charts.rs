//! The plots `quiver bench report` draws, built from the records as plain data (the crate
//! documentation lists them); [`crate::plot`] draws them.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::plot::{BarChart, BarSeries, Chart, Legend, LineChart, Series};
use crate::records::{Kind, Record};
use quiver_plan::sim::{closed_form_width, VectorWidthResult};

/// Every chart the records allow, with its file name (no extension); a note for each one
/// skipped.
pub fn build_charts(
    records: &[Record],
    log_latency: bool,
    notes: &mut Vec<String>,
) -> Vec<(String, Chart)> {
    let mut charts = Vec::new();
    let mut add = |name: &str, chart: Option<Chart>, why_not: &str| match chart {
        Some(c) => charts.push((name.to_string(), c)),
        None => notes.push(format!("{name}: skipped, {why_not}")),
    };
    add(
        "latency_vs_throughput_direct",
        latency_chart(records, Pattern::Direct, log_latency).map(Chart::Line),
        "no records with tags.pattern=direct",
    );
    add(
        "latency_vs_throughput_queue",
        latency_chart(records, Pattern::Queue, log_latency).map(Chart::Line),
        "no records with tags.pattern=queue",
    );
    add(
        "peak_throughput_vs_width",
        peak_chart(records).map(Chart::Line),
        "no records with tags.figure=fig12 nor latency curves",
    );
    add(
        "fig3_throughput_bars",
        fig3_chart(records).map(Chart::Bar),
        "no records with tags.figure=fig3",
    );
    add(
        "vector_width_vs_servers",
        vector_width_chart(records).map(Chart::Line),
        "no `quiver sim vector-width` records",
    );
    let compare = compare_charts(records);
    if compare.is_empty() {
        add(
            "compare_throughput",
            None,
            "no records with tags.figure=compare",
        );
    }
    for (name, c) in compare {
        add(&name, Some(Chart::Bar(c)), "");
    }
    add(
        "local_throughput_vs_width",
        local_chart(records).map(Chart::Line),
        "no untagged `quiver bench local` records",
    );
    // Soak pictures only where there are samples, without a note otherwise (see `soak`).
    charts.extend(
        crate::soak::soak_charts(records)
            .into_iter()
            .map(|(name, c)| (name, Chart::Panels(c))),
    );
    charts
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pattern {
    /// The RPC vector goes straight to one storage vector: R = G, a line per G.
    Direct,
    /// Single gets (G = 1) gathered into storage vectors of R through a queue: a line per R.
    Queue,
}

impl Pattern {
    fn tag(self) -> &'static str {
        match self {
            Pattern::Direct => "direct",
            Pattern::Queue => "queue",
        }
    }

    /// The width a record's line is keyed by: G (tag, else the record's `width`) for direct,
    /// R for the queue.
    fn width(self, r: &Record) -> Option<f64> {
        match self {
            Pattern::Direct => r.tag_num("G").or_else(|| r.num("width")),
            Pattern::Queue => r.tag_num("R"),
        }
    }
}

/// Figures whose records are drawn elsewhere, not as latency curves.
fn is_other_figure(r: &Record) -> bool {
    matches!(r.figure(), Some("fig3" | "fig12" | "compare"))
}

/// One point of a latency curve.
#[derive(Clone, Copy, Debug, PartialEq)]
struct CurvePoint {
    /// What orders the points along the curve: the target rate, else the throughput.
    order: f64,
    keys_per_sec: f64,
    p50_us: f64,
}

/// Curves keyed by (system, width); the system is empty unless the records hold several.
type Curves = BTreeMap<(String, u64), Vec<CurvePoint>>;

/// Per width: the curve's points, in order of target rate (a rate sweep), else of keys/s.
fn latency_curves(records: &[Record], p: Pattern) -> Curves {
    let mut curves = Curves::new();
    let picked: Vec<&Record> = records
        .iter()
        .filter(|r| r.tag("pattern") == Some(p.tag()) && !is_other_figure(r))
        .collect();
    let systems: std::collections::BTreeSet<&str> =
        picked.iter().filter_map(|r| r.text("system")).collect();
    for r in picked {
        let (Some(w), Some(keys_per_sec), Some(p50_us)) =
            (p.width(r), r.num("keys_per_sec"), r.num("p50_us"))
        else {
            continue;
        };
        let system = if systems.len() > 1 {
            r.text("system").unwrap_or("").to_string()
        } else {
            String::new()
        };
        curves
            .entry((system, w as u64))
            .or_default()
            .push(CurvePoint {
                order: r.num("rate_target").unwrap_or(keys_per_sec),
                keys_per_sec,
                p50_us,
            });
    }
    for pts in curves.values_mut() {
        pts.sort_by(|a, b| {
            a.order
                .total_cmp(&b.order)
                .then(a.keys_per_sec.total_cmp(&b.keys_per_sec))
        });
    }
    curves
}

fn curve_label(p: Pattern, system: &str, w: u64) -> String {
    let name = match p {
        Pattern::Direct => format!("G={w} (R={w})"),
        Pattern::Queue => format!("R={w} (G=1)"),
    };
    if system.is_empty() {
        name
    } else {
        format!("{system} {name}")
    }
}

fn latency_chart(records: &[Record], p: Pattern, log_latency: bool) -> Option<LineChart> {
    let curves = latency_curves(records, p);
    if curves.is_empty() {
        return None;
    }
    let series = curves
        .iter()
        .map(|((system, w), pts)| Series {
            label: curve_label(p, system, *w),
            points: pts.iter().map(|q| (q.keys_per_sec, q.p50_us)).collect(),
            dashed: false,
        })
        .collect();
    let title = match p {
        Pattern::Direct => "Median latency vs throughput: multiget width G, direct (R = G)",
        Pattern::Queue => "Median latency vs throughput: storage width R, queue (G = 1)",
    };
    Some(LineChart {
        title: title.into(),
        x_label: "throughput (keys/s)".into(),
        y_label: "median latency (µs)".into(),
        series,
        log_x: false,
        log_y: log_latency,
        legend: Legend::UpperLeft,
    })
}

/// Fig. 12: per pattern, peak keys/s per width, from fig12-tagged records if there are any,
/// else from the peaks of the latency curves.
fn peak_chart(records: &[Record]) -> Option<LineChart> {
    let tagged: Vec<&Record> = records
        .iter()
        .filter(|r| r.figure() == Some("fig12"))
        .collect();
    let mut series = Vec::new();
    for p in [Pattern::Direct, Pattern::Queue] {
        let mut peaks: BTreeMap<u64, f64> = BTreeMap::new();
        if !tagged.is_empty() {
            for r in tagged.iter().filter(|r| r.tag("pattern") == Some(p.tag())) {
                if let (Some(w), Some(kps)) = (p.width(r), r.num("keys_per_sec")) {
                    let e = peaks.entry(w as u64).or_insert(0.0);
                    *e = e.max(kps);
                }
            }
        } else {
            for ((_, w), pts) in latency_curves(records, p) {
                let peak = pts.iter().map(|q| q.keys_per_sec).fold(0.0, f64::max);
                let e = peaks.entry(w).or_insert(0.0);
                *e = e.max(peak);
            }
        }
        if !peaks.is_empty() {
            series.push(Series {
                label: match p {
                    Pattern::Direct => "direct (R = G)".into(),
                    Pattern::Queue => "intermediate queue (G = 1)".into(),
                },
                points: peaks.into_iter().map(|(w, k)| (w as f64, k)).collect(),
                dashed: false,
            });
        }
    }
    if series.is_empty() {
        return None;
    }
    Some(LineChart {
        title: "Peak throughput vs vector width".into(),
        x_label: "vector width (G for direct, R for the queue)".into(),
        y_label: "peak throughput (keys/s)".into(),
        series,
        log_x: true,
        log_y: false,
        legend: Legend::LowerRight,
    })
}

/// Means per key, keys in first-seen order.
struct Means<K> {
    order: Vec<K>,
    sums: BTreeMap<K, (f64, u32)>,
}

impl<K: Ord + Clone> Means<K> {
    fn new() -> Self {
        Means {
            order: Vec::new(),
            sums: BTreeMap::new(),
        }
    }

    fn add(&mut self, k: K, v: f64) {
        let e = self.sums.entry(k.clone()).or_insert_with(|| {
            self.order.push(k);
            (0.0, 0)
        });
        e.0 += v;
        e.1 += 1;
    }

    fn get(&self, k: &K) -> Option<f64> {
        self.sums.get(k).map(|&(s, n)| s / n as f64)
    }
}

fn fig3_chart(records: &[Record]) -> Option<BarChart> {
    let mut bars = Means::new();
    for r in records.iter().filter(|r| r.figure() == Some("fig3")) {
        let Some(kps) = r.num("keys_per_sec") else {
            continue;
        };
        let label = r
            .tag("bar")
            .or_else(|| r.text("system"))
            .or_else(|| r.text("bench"))
            .unwrap_or("?")
            .to_string();
        bars.add(label, kps);
    }
    if bars.order.is_empty() {
        return None;
    }
    Some(BarChart {
        title: "Lookups per second: storage, engine, network".into(),
        x_label: String::new(),
        y_label: "throughput (keys/s)".into(),
        series: vec![BarSeries {
            label: "keys/s".into(),
            values: bars.order.iter().map(|k| bars.get(k)).collect(),
        }],
        categories: bars.order,
    })
}

/// The compare bars: one chart per value size when the records hold several (HERD's 32 B and
/// FAWN's 512 B rows side by side would be too many bars to read), named
/// `compare_throughput_<size>B`; else one chart, `compare_throughput`.
fn compare_charts(records: &[Record]) -> Vec<(String, BarChart)> {
    let picked: Vec<&Record> = records
        .iter()
        .filter(|r| r.figure() == Some("compare"))
        .collect();
    let value_sizes: std::collections::BTreeSet<u64> = picked
        .iter()
        .filter_map(|r| r.num("value_size").map(|v| v as u64))
        .collect();
    if value_sizes.len() <= 1 {
        let title = match value_sizes.first() {
            Some(v) => format!("Throughput by workload and system ({v} B values)"),
            None => "Throughput by workload and system".into(),
        };
        return compare_chart(&picked, title)
            .map(|c| vec![("compare_throughput".to_string(), c)])
            .unwrap_or_default();
    }
    value_sizes
        .iter()
        .filter_map(|&v| {
            let these: Vec<&Record> = picked
                .iter()
                .copied()
                .filter(|r| r.num("value_size").map(|x| x as u64) == Some(v))
                .collect();
            let title = format!("Throughput by workload and system ({v} B values)");
            compare_chart(&these, title).map(|c| (format!("compare_throughput_{v}B"), c))
        })
        .collect()
}

/// Grouped bars: a group per workload, a colour per system, the mean keys/s of repeats.
fn compare_chart(records: &[&Record], title: String) -> Option<BarChart> {
    let mut cells = Means::new();
    let mut workloads = Means::new();
    let mut systems = Means::new();
    for r in records {
        let Some(kps) = r.num("keys_per_sec") else {
            continue;
        };
        let system = r.text("system").or(r.tag("system")).unwrap_or("?");
        let workload = r.text("workload").or(r.tag("workload")).unwrap_or("?");
        workloads.add(workload.to_string(), 0.0);
        systems.add(system.to_string(), 0.0);
        cells.add((system.to_string(), workload.to_string()), kps);
    }
    if cells.order.is_empty() {
        return None;
    }
    let series = systems
        .order
        .iter()
        .map(|s| BarSeries {
            label: s.clone(),
            values: workloads
                .order
                .iter()
                .map(|w| cells.get(&(s.clone(), w.clone())))
                .collect(),
        })
        .collect();
    Some(BarChart {
        title,
        x_label: "workload".into(),
        y_label: "throughput (keys/s)".into(),
        categories: workloads.order,
        series,
    })
}

/// Fig. 13: the paper's `keys / mean servers contacted` (exact cover) per replication factor,
/// and the replication-1 closed form dashed.
fn vector_width_chart(records: &[Record]) -> Option<LineChart> {
    let sims: Vec<VectorWidthResult> = records
        .iter()
        .filter(|r| r.kind == Kind::Sim)
        .filter_map(|r| serde_json::from_value(Value::Object(r.fields().clone())).ok())
        .collect();
    // One key count per chart: the most common one (the paper: 32).
    let mut by_keys: BTreeMap<usize, usize> = BTreeMap::new();
    for s in &sims {
        *by_keys.entry(s.keys).or_default() += 1;
    }
    let keys = by_keys.iter().max_by_key(|&(k, n)| (*n, *k))?.0;
    let mut lines: BTreeMap<usize, Means<u64>> = BTreeMap::new();
    let mut servers = std::collections::BTreeSet::new();
    for s in sims.iter().filter(|s| s.keys == *keys) {
        servers.insert(s.servers);
        lines
            .entry(s.replication)
            .or_insert_with(Means::new)
            .add(s.servers as u64, s.width_of_mean_exact);
    }
    let mut series: Vec<Series> = lines
        .iter()
        .map(|(r, m)| {
            let mut points: Vec<(f64, f64)> = m
                .order
                .iter()
                .map(|&s| (s as f64, m.get(&s).unwrap_or(f64::NAN)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series {
                label: format!("replication {r} (exact cover)"),
                points,
                dashed: false,
            }
        })
        .collect();
    series.push(Series {
        label: "replication 1, closed form".into(),
        points: servers
            .iter()
            .map(|&s| (s as f64, closed_form_width(*keys, s)))
            .collect(),
        dashed: true,
    });
    Some(LineChart {
        title: format!("Expected multiget width per server, {keys} random keys"),
        x_label: "servers in the cluster".into(),
        y_label: "width: keys / mean servers contacted".into(),
        series,
        log_x: true,
        log_y: false,
        legend: Legend::UpperRight,
    })
}

fn local_chart(records: &[Record]) -> Option<LineChart> {
    let mut lines: BTreeMap<String, Means<u64>> = BTreeMap::new();
    for r in records
        .iter()
        .filter(|r| r.kind == Kind::Local && r.figure().is_none())
    {
        let (Some(w), Some(kps)) = (r.num("width"), r.num("keys_per_sec")) else {
            continue;
        };
        let label = format!(
            "{} {} {}T",
            r.text("backend").unwrap_or("?"),
            r.text("distribution").unwrap_or("?"),
            r.num("threads").unwrap_or(1.0)
        );
        lines
            .entry(label)
            .or_insert_with(Means::new)
            .add(w as u64, kps);
    }
    if lines.is_empty() {
        return None;
    }
    let series = lines
        .iter()
        .map(|(label, m)| {
            let mut points: Vec<(f64, f64)> = m
                .order
                .iter()
                .map(|&w| (w as f64, m.get(&w).unwrap_or(f64::NAN)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series {
                label: label.clone(),
                points,
                dashed: false,
            }
        })
        .collect();
    Some(LineChart {
        title: "In-process multiget throughput vs width".into(),
        x_label: "multiget width (keys)".into(),
        y_label: "throughput (keys/s)".into(),
        series,
        log_x: true,
        log_y: false,
        legend: Legend::LowerRight,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(v: Value) -> Record {
        let Value::Object(m) = v else { panic!() };
        Record::from_object(m).expect("a known kind")
    }

    #[test]
    fn latency_curves_group_and_order() {
        let pt = |g: u32, rate: f64, kps: f64, p50: f64| {
            rec(
                json!({"system": "quiver", "mode": "open", "width": g, "rate_target": rate,
                       "keys_per_sec": kps, "p50_us": p50,
                       "tags": {"pattern": "direct", "G": g.to_string()}}),
            )
        };
        let records = vec![
            pt(8, 2e5, 1.9e5, 40.0),
            pt(1, 1e5, 1e5, 30.0),
            pt(8, 1e5, 1e5, 35.0),
            // A fig12 point is not a curve point.
            rec(
                json!({"system": "quiver", "keys_per_sec": 9e9, "p50_us": 1.0,
                       "tags": {"pattern": "direct", "G": "8", "figure": "fig12"}}),
            ),
        ];
        let c = latency_chart(&records, Pattern::Direct, false).unwrap();
        assert_eq!(c.series.len(), 2);
        assert_eq!(c.series[0].label, "G=1 (R=1)");
        assert_eq!(c.series[1].points, vec![(1e5, 35.0), (1.9e5, 40.0)]);
        assert!(latency_chart(&records, Pattern::Queue, false).is_none());
        // The fig12 record wins over the curves' peaks.
        let p = peak_chart(&records).unwrap();
        assert_eq!(p.series.len(), 1);
        assert_eq!(p.series[0].points, vec![(8.0, 9e9)]);
    }

    #[test]
    fn bars_average_repeats() {
        let records = [
            rec(
                json!({"system": "quiver", "workload": "get", "keys_per_sec": 10.0,
                       "tags": {"figure": "compare"}}),
            ),
            rec(
                json!({"system": "quiver", "workload": "get", "keys_per_sec": 20.0,
                       "tags": {"figure": "compare"}}),
            ),
            rec(
                json!({"system": "redis", "workload": "mget32", "keys_per_sec": 5.0,
                       "tags": {"figure": "compare"}}),
            ),
        ];
        let c = compare_chart(&records.iter().collect::<Vec<_>>(), String::new()).unwrap();
        assert_eq!(c.categories, ["get", "mget32"]);
        assert_eq!(c.series[0].label, "quiver");
        assert_eq!(c.series[0].values, [Some(15.0), None]);
        assert_eq!(c.series[1].values, [None, Some(5.0)]);
    }
}
