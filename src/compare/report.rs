//! `plb compare`'s results: per-policy summaries, the recommendation, the
//! terminal table, the CSV files and the self-contained HTML report.

use std::fmt::Write as _;
use std::path::Path;

use super::{Phase, RunRecord};
use crate::simgrid::report::spread;
use starpu_plb::catalog;

/// What the report says about how the runs were made.
pub struct Settings {
    pub command: String,
    pub starpu: String,
    pub library: String,
    pub timer: String,
    pub calibration: String,
    pub learning: String,
    pub reps: usize,
    pub emulate: Option<String>,
    pub simulated: Option<String>,
}

impl Settings {
    /// REAL, EMULATED or SIMULATED, with what makes it so.
    fn label(&self) -> String {
        match (&self.simulated, &self.emulate) {
            (Some(m), _) => format!("SIMULATED (StarPU-SimGrid, machine {m})"),
            (None, Some(e)) => format!("EMULATED (real runs, PLB_EMULATE=\"{e}\")"),
            (None, None) => "REAL (this machine's StarPU workers)".into(),
        }
    }
}

/// One policy over its counted runs.
pub struct PolicySummary {
    pub policy: String,
    pub ours: bool,
    pub runs: usize,
    pub failed: usize,
    /// Our policy never saw the program's tasks: not ranked.
    pub not_ours: bool,
    /// Median, min, max of the passing runs' times.
    pub time: Option<(f64, f64, f64)>,
    /// The warm-up run's time (ours: the cold start).
    pub first: Option<f64>,
    pub gb: Option<f64>,
    /// Median over the best median of the ranked policies.
    pub ratio: Option<f64>,
    /// Per worker: name, median tasks, median executing ms.
    pub workers: Vec<(String, f64, Option<f64>)>,
}

impl PolicySummary {
    fn ranked(&self) -> bool {
        !self.not_ours && self.time.is_some()
    }
}

fn median(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| spread(v).0)
}

/// Summaries in `policies`' order.
pub fn summarise(policies: &[String], records: &[RunRecord]) -> Vec<PolicySummary> {
    let mut out: Vec<PolicySummary> = policies
        .iter()
        .map(|p| {
            let counted: Vec<&RunRecord> = records
                .iter()
                .filter(|r| &r.policy == p && matches!(r.phase, Phase::Measured(_)))
                .collect();
            let ok: Vec<&&RunRecord> = counted.iter().filter(|r| r.problem.is_none()).collect();
            let times: Vec<f64> = ok.iter().filter_map(|r| r.time).collect();
            let gbs: Vec<f64> = ok.iter().filter_map(|r| r.gb).collect();
            let names: Vec<String> = ok
                .first()
                .map(|r| r.workers.iter().map(|w| w.name.clone()).collect())
                .unwrap_or_default();
            let workers = names
                .iter()
                .enumerate()
                .map(|(i, name)| {
                    let tasks: Vec<f64> = ok
                        .iter()
                        .filter_map(|r| r.workers.get(i).map(|w| w.tasks as f64))
                        .collect();
                    let busy: Vec<f64> = ok
                        .iter()
                        .filter_map(|r| r.workers.get(i)?.executing_ms)
                        .collect();
                    (name.clone(), median(&tasks).unwrap_or(0.0), median(&busy))
                })
                .collect();
            PolicySummary {
                policy: p.clone(),
                ours: catalog::find(p).is_some(),
                runs: counted.len(),
                failed: counted.len() - ok.len(),
                not_ours: counted.iter().any(|r| r.not_ours),
                time: (!times.is_empty()).then(|| spread(&times)),
                first: records
                    .iter()
                    .find(|r| &r.policy == p && r.phase == Phase::WarmUp && r.problem.is_none())
                    .and_then(|r| r.time),
                gb: median(&gbs),
                ratio: None,
                workers,
            }
        })
        .collect();
    let best = out
        .iter()
        .filter(|s| s.ranked())
        .filter_map(|s| s.time.map(|t| t.0))
        .fold(f64::INFINITY, f64::min);
    for s in &mut out {
        if s.ranked() && best.is_finite() && best > 0.0 {
            s.ratio = s.time.map(|t| t.0 / best);
        }
    }
    out
}

/// The one-line answer, and how sure it is: a winner whose slowest
/// passing run beats every other policy's fastest is clear; otherwise the
/// policies whose spreads overlap the best one's are named.
pub fn recommendation(summary: &[PolicySummary]) -> String {
    let mut ranked: Vec<&PolicySummary> = summary.iter().filter(|s| s.ranked()).collect();
    ranked.sort_by(|a, b| a.time.unwrap().0.total_cmp(&b.time.unwrap().0));
    let Some(best) = ranked.first() else {
        return "no recommendation: no policy has a passing run".into();
    };
    let (bm, _, bmax) = best.time.unwrap_or_default();
    let passing = best.runs - best.failed;
    let firmer = if passing < 3 {
        format!(" (only {passing} counted run(s): --reps 5 gives a firmer answer)")
    } else {
        String::new()
    };
    let Some(next) = ranked.get(1) else {
        return format!(
            "{}: the only ranked policy with passing runs{firmer}",
            best.policy
        );
    };
    let overlapping: Vec<&str> = ranked[1..]
        .iter()
        .filter(|s| s.time.is_some_and(|t| t.1 <= bmax))
        .map(|s| s.policy.as_str())
        .collect();
    let nm = next.time.unwrap_or_default().0;
    if overlapping.is_empty() {
        format!(
            "use {}: median {}, {:.1}% below the next ({}, {}); its slowest run beats every other policy's fastest{firmer}",
            best.policy,
            num(bm),
            100.0 * (1.0 - bm / nm),
            next.policy,
            num(nm)
        )
    } else {
        format!(
            "no clear winner: {} has the lowest median ({}), but the runs of {} overlap its spread{firmer}",
            best.policy,
            num(bm),
            overlapping.join(", ")
        )
    }
}

fn num(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.1}")
    } else if x.abs() >= 1.0 {
        format!("{x:.3}")
    } else {
        format!("{x:.4}")
    }
}

fn opt(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), num)
}

/// The terminal table and the recommendation.
pub fn table(settings: &Settings, summary: &[PolicySummary]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "compare: {}", settings.command);
    let _ = writeln!(s, "  {}; {}", settings.label(), settings.starpu);
    let _ = writeln!(s, "  time: {}", settings.timer);
    let _ = writeln!(s, "  calibration: {}", settings.calibration);
    let _ = writeln!(s, "  learning: {}", settings.learning);
    let _ = writeln!(
        s,
        "  {} counted run(s) per policy, interleaved; medians over the passing runs",
        settings.reps
    );
    let _ = writeln!(
        s,
        "{:<20} {:>11} {:>23} {:>7} {:>11} {:>9}  notes",
        "policy", "median", "min - max", "ratio", "first run", "GB moved"
    );
    for p in by_ratio(summary) {
        let (m, lo, hi) = p
            .time
            .map_or((None, None, None), |t| (Some(t.0), Some(t.1), Some(t.2)));
        let mut notes = Vec::new();
        if p.ours {
            notes.push("ours".to_string());
        }
        if p.not_ours {
            notes.push("NOT RANKED: our policy saw none of the program's tasks (the program schedules them in contexts of its own, under other policies)".into());
        }
        if p.failed > 0 {
            notes.push(format!("{} of {} runs FLAGGED", p.failed, p.runs));
        }
        let _ = writeln!(
            s,
            "{:<20} {:>11} {:>23} {:>7} {:>11} {:>9}  {}",
            p.policy,
            opt(m),
            format!("{} - {}", opt(lo), opt(hi)),
            p.ratio.map_or_else(|| "-".into(), |r| format!("{r:.3}")),
            opt(p.first),
            p.gb.map_or_else(|| "-".into(), |g| format!("{g:.3}")),
            notes.join("; ")
        );
    }
    let _ = writeln!(s, "recommendation: {}", recommendation(summary));
    s
}

/// Writes `runs.csv`, `summary.csv` and `report.html` in `dir`.
pub fn write(
    dir: &Path,
    settings: &Settings,
    records: &[RunRecord],
    summary: &[PolicySummary],
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut runs = String::from(
        "policy,ours,phase,time,wall_s,status,gb_moved,tasks_executed,ours_tasks,not_ours,problem\n",
    );
    for r in records {
        let _ = writeln!(
            runs,
            "{},{},{},{},{:.4},{},{},{},{},{},{}",
            r.policy,
            catalog::find(&r.policy).is_some(),
            r.phase.label(),
            r.time.map_or_else(String::new, |t| t.to_string()),
            r.wall_s,
            csv(&r.status()),
            r.gb.map_or_else(String::new, |g| g.to_string()),
            r.executed.map_or_else(String::new, |e| e.to_string()),
            r.ours_tasks.map_or_else(String::new, |e| e.to_string()),
            r.not_ours,
            csv(r.problem.as_deref().unwrap_or(""))
        );
    }
    std::fs::write(dir.join("runs.csv"), runs)?;
    let mut sum = String::from(
        "label,policy,ours,runs,flagged,median,min,max,ratio_to_best,first_run,gb_moved,not_ours\n",
    );
    for p in summary {
        let t = p.time;
        let _ = writeln!(
            sum,
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            csv(&settings.label()),
            p.policy,
            p.ours,
            p.runs,
            p.failed,
            t.map_or_else(String::new, |t| t.0.to_string()),
            t.map_or_else(String::new, |t| t.1.to_string()),
            t.map_or_else(String::new, |t| t.2.to_string()),
            p.ratio.map_or_else(String::new, |r| format!("{r:.4}")),
            p.first.map_or_else(String::new, |f| f.to_string()),
            p.gb.map_or_else(String::new, |g| g.to_string()),
            p.not_ours
        );
    }
    std::fs::write(dir.join("summary.csv"), sum)?;
    std::fs::write(dir.join("report.html"), html(settings, records, summary))
}

fn csv(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\"").replace('\n', " "))
    } else {
        s.to_string()
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const ROW: f64 = 26.0;
const LEFT: f64 = 170.0;
const WIDTH: f64 = 640.0;

/// The summaries, best ratio first (unranked last).
fn by_ratio(summary: &[PolicySummary]) -> Vec<&PolicySummary> {
    let mut order: Vec<&PolicySummary> = summary.iter().collect();
    order.sort_by(|a, b| {
        let key = |s: &PolicySummary| s.ratio.unwrap_or(f64::INFINITY);
        key(a).total_cmp(&key(b))
    });
    order
}

/// An SVG element `height` high, as wide as every plot.
fn svg_open(height: f64) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">",
        LEFT + WIDTH
    )
}

/// A policy's name at the left of its row `i` (rows from `top`).
fn row_label(s: &mut String, top: f64, i: usize, policy: &str) -> f64 {
    let y = top + ROW * i as f64;
    let _ = write!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
        LEFT - 8.0,
        y + 12.0,
        esc(policy)
    );
    y
}

/// Time per policy: each counted run a dot (flagged ones a red cross at
/// the right edge), the min-max range a line, the median a bar.
fn time_plot(records: &[RunRecord], order: &[&PolicySummary]) -> String {
    let max = records
        .iter()
        .filter(|r| matches!(r.phase, Phase::Measured(_)) && r.problem.is_none())
        .filter_map(|r| r.time)
        .fold(0.0, f64::max);
    if max <= 0.0 {
        return "<p>No passing run to plot.</p>".into();
    }
    let x = |t: f64| LEFT + (WIDTH - 20.0) * t / (max * 1.05);
    let h = ROW * order.len() as f64 + 40.0;
    let mut s = svg_open(h);
    for (i, p) in order.iter().enumerate() {
        let y = row_label(&mut s, 12.0, i, &p.policy) + 8.0;
        let color = if p.ours { "#1f77b4" } else { "#7f7f7f" };
        if let Some((m, lo, hi)) = p.time {
            let _ = write!(
                s,
                "<rect x=\"{LEFT}\" y=\"{}\" width=\"{:.1}\" height=\"14\" fill=\"{color}\" opacity=\"0.35\"/>\
                 <line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{y}\" y2=\"{y}\" stroke=\"black\"/>",
                y - 7.0,
                x(m) - LEFT,
                x(lo),
                x(hi)
            );
        }
        for r in records
            .iter()
            .filter(|r| r.policy == p.policy && matches!(r.phase, Phase::Measured(_)))
        {
            match (&r.problem, r.time) {
                (None, Some(t)) => {
                    let _ = write!(
                        s,
                        "<circle cx=\"{:.1}\" cy=\"{y}\" r=\"3\" fill=\"{color}\"/>",
                        x(t)
                    );
                }
                _ => {
                    let _ = write!(
                        s,
                        "<text x=\"{:.1}\" y=\"{}\" fill=\"red\">&#215; flagged</text>",
                        LEFT + WIDTH - 70.0,
                        y + 4.0
                    );
                }
            }
        }
    }
    let _ = write!(
        s,
        "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"black\"/>\
         <text x=\"{LEFT}\" y=\"{}\">0</text><text x=\"{:.1}\" y=\"{}\" text-anchor=\"end\">{}</text></svg>",
        LEFT + WIDTH - 20.0,
        h - 22.0,
        h - 22.0,
        h - 8.0,
        x(max),
        h - 8.0,
        num(max)
    );
    s
}

/// One horizontal bar per policy.
fn bar_plot(
    order: &[&PolicySummary],
    value: impl Fn(&PolicySummary) -> Option<f64>,
    unit: &str,
) -> String {
    let max = order.iter().filter_map(|p| value(p)).fold(0.0, f64::max);
    if max <= 0.0 {
        return format!("<p>All zero or not reported ({unit}).</p>");
    }
    let mut s = svg_open(ROW * order.len() as f64 + 10.0);
    for (i, p) in order.iter().enumerate() {
        let y = row_label(&mut s, 6.0, i, &p.policy);
        if let Some(v) = value(p) {
            let w = (WIDTH - 120.0) * v / max;
            let _ = write!(
                s,
                "<rect x=\"{LEFT}\" y=\"{y}\" width=\"{w:.1}\" height=\"16\" fill=\"{}\"/>\
                 <text x=\"{:.1}\" y=\"{}\">{} {unit}</text>",
                if p.ours { "#1f77b4" } else { "#7f7f7f" },
                LEFT + w + 6.0,
                y + 12.0,
                num(v)
            );
        }
    }
    s.push_str("</svg>");
    s
}

/// Per policy, the share of the tasks (or of the executing time, when
/// StarPU profiled) each worker had, as a stacked bar.
fn worker_plot(order: &[&PolicySummary]) -> String {
    const COLORS: [&str; 8] = [
        "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    ];
    let busy = order
        .iter()
        .any(|p| p.workers.iter().any(|w| w.2.is_some()));
    let h = ROW * order.len() as f64 + 40.0;
    let mut s = format!(
        "<p>{}</p>{}",
        if busy {
            "Each worker's share of the executing time (StarPU's profiling), median run."
        } else {
            "Each worker's share of the tasks, median run (set STARPU_PROFILING=1 for busy times)."
        },
        svg_open(h)
    );
    let mut names: Vec<String> = Vec::new();
    for (i, p) in order.iter().enumerate() {
        let y = row_label(&mut s, 6.0, i, &p.policy);
        let vals: Vec<f64> = p
            .workers
            .iter()
            .map(|w| if busy { w.2.unwrap_or(0.0) } else { w.1 })
            .collect();
        let total: f64 = vals.iter().sum();
        if total <= 0.0 {
            continue;
        }
        let mut x = LEFT;
        for (k, (w, v)) in p.workers.iter().zip(&vals).enumerate() {
            if !names.contains(&w.0) {
                names.push(w.0.clone());
            }
            let c = names.iter().position(|n| n == &w.0).unwrap_or(k);
            let width = (WIDTH - 20.0) * v / total;
            let _ = write!(
                s,
                "<rect x=\"{x:.1}\" y=\"{y}\" width=\"{width:.1}\" height=\"16\" fill=\"{}\"><title>{}: {}</title></rect>",
                COLORS[c % COLORS.len()],
                esc(&w.0),
                num(*v)
            );
            x += width;
        }
    }
    for (k, n) in names.iter().enumerate() {
        let lx = LEFT + 110.0 * (k % 5) as f64;
        let ly = h - 24.0 + 14.0 * (k / 5) as f64;
        let _ = write!(
            s,
            "<rect x=\"{lx}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{ly}\">{}</text>",
            ly - 9.0,
            COLORS[k % COLORS.len()],
            lx + 14.0,
            esc(n)
        );
    }
    s.push_str("</svg>");
    s
}

/// The self-contained report: settings, recommendation, table, plots.
pub fn html(settings: &Settings, records: &[RunRecord], summary: &[PolicySummary]) -> String {
    let order = by_ratio(summary);
    let mut s = String::from(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>plb compare</title><style>\
         body{font-family:sans-serif;max-width:900px;margin:2em auto}table{border-collapse:collapse}\
         td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child{text-align:left}\
         .rec{font-size:1.2em;background:#eef;padding:.5em}</style></head><body>",
    );
    let _ = write!(
        s,
        "<h1>Which policy for this program?</h1><p><code>{}</code></p><ul>\
         <li>{}</li><li>{}</li><li>our library: {}</li><li>time: {}</li>\
         <li>calibration: {}</li><li>learning: {}</li>\
         <li>{} counted run(s) per policy, interleaved; medians over the passing runs</li></ul>\
         <p class=\"rec\">{}</p>",
        esc(&settings.command),
        esc(&settings.label()),
        esc(&settings.starpu),
        esc(&settings.library),
        esc(&settings.timer),
        esc(&settings.calibration),
        esc(&settings.learning),
        settings.reps,
        esc(&recommendation(summary))
    );
    s.push_str(
        "<table><tr><th>policy</th><th>median</th><th>min</th><th>max</th><th>ratio to best</th>\
         <th>first run</th><th>GB moved</th><th>flagged</th><th>notes</th></tr>",
    );
    for p in &order {
        let t = p.time;
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} of {}</td><td>{}</td></tr>",
            esc(&p.policy),
            opt(t.map(|t| t.0)),
            opt(t.map(|t| t.1)),
            opt(t.map(|t| t.2)),
            p.ratio.map_or_else(|| "-".into(), |r| format!("{r:.3}")),
            opt(p.first),
            p.gb.map_or_else(|| "-".into(), |g| format!("{g:.3}")),
            p.failed,
            p.runs,
            match (p.ours, p.not_ours) {
                (_, true) => "not ranked: our policy saw none of the tasks",
                (true, false) => "ours",
                _ => "",
            }
        );
    }
    s.push_str(
        "</table><h2>Time per policy</h2><p>Dots: counted runs; bar: median; line: min to max.</p>",
    );
    s.push_str(&time_plot(records, &order));
    s.push_str("<h2>Bytes moved between memory nodes (StarPU's bus statistics, median)</h2>");
    s.push_str(&bar_plot(&order, |p| p.gb, "GB"));
    s.push_str("<h2>Work per worker</h2>");
    s.push_str(&worker_plot(&order));
    s.push_str("<p>Every run is in runs.csv, the summaries in summary.csv.</p></body></html>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::WorkerStat;

    fn rec(policy: &str, phase: Phase, time: f64, problem: Option<&str>) -> RunRecord {
        RunRecord {
            policy: policy.into(),
            phase,
            time: Some(time),
            wall_s: time,
            exit: Ok(0),
            gb: Some(0.5),
            executed: Some(10),
            workers: vec![WorkerStat {
                name: "CPU 0".into(),
                kind: "CPU".into(),
                tasks: 10,
                counted: true,
                executing_ms: None,
                waiting_ms: None,
                sleeping_ms: None,
            }],
            ours_tasks: None,
            not_ours: false,
            problem: problem.map(String::from),
            last_error_line: String::new(),
        }
    }

    fn runs(policy: &str, times: &[f64]) -> Vec<RunRecord> {
        times
            .iter()
            .enumerate()
            .map(|(i, &t)| rec(policy, Phase::Measured(i + 1), t, None))
            .collect()
    }

    #[test]
    fn medians_ratios_and_flagged_runs() {
        let mut r = runs("eager", &[10.0, 12.0, 11.0]);
        r.extend(runs("dmda", &[5.0, 6.0, 5.5]));
        r.push(rec("dmda", Phase::Measured(4), 1.0, Some("exit 1")));
        r.push(rec("dmda", Phase::WarmUp, 9.0, None));
        let s = summarise(&["eager".into(), "dmda".into()], &r);
        assert_eq!(s[0].time, Some((11.0, 10.0, 12.0)));
        assert_eq!(
            s[1].time,
            Some((5.5, 5.0, 6.0)),
            "the flagged run is not counted"
        );
        assert_eq!((s[1].runs, s[1].failed, s[1].first), (4, 1, Some(9.0)));
        assert_eq!(s[1].ratio, Some(1.0));
        assert_eq!(s[0].ratio, Some(2.0));
        let rec = recommendation(&s);
        assert!(rec.starts_with("use dmda"), "{rec}");
    }

    #[test]
    fn overlapping_spreads_are_no_clear_winner_and_unseen_tasks_are_not_ranked() {
        let mut r = runs("eager", &[10.0, 12.0, 11.0]);
        r.extend(runs("lws", &[10.5, 11.5, 11.2]));
        let mut hidden = runs("plb-heft", &[1.0, 1.0, 1.0]);
        hidden.iter_mut().for_each(|x| x.not_ours = true);
        r.extend(hidden);
        let s = summarise(&["eager".into(), "lws".into(), "plb-heft".into()], &r);
        let rec = recommendation(&s);
        assert!(rec.starts_with("no clear winner: eager"), "{rec}");
        assert!(rec.contains("lws"), "{rec}");
        assert_eq!(s[2].ratio, None, "not ranked");
        let settings = Settings {
            command: "./app".into(),
            starpu: "StarPU 1.3".into(),
            library: "lib".into(),
            timer: "wall".into(),
            calibration: "none".into(),
            learning: "warm-up".into(),
            reps: 3,
            emulate: None,
            simulated: None,
        };
        let t = table(&settings, &s);
        assert!(t.contains("NOT RANKED"), "{t}");
        let page = html(&settings, &r, &s);
        assert!(
            page.contains("<svg") && page.contains("no clear winner"),
            "{page}"
        );
    }
}
