//! `plb simgrid`'s outputs: `simgrid.csv` (every run), `simgrid.md` (one
//! table per machine and case: medians and spread over the repetitions,
//! ratio to StarPU's LP area bound), and one PNG per machine (GFlop/s and
//! GiB moved per policy and case, gnuplot).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::run::Outcome;
use super::{Bound, Row};
use crate::experiment::gnuplot;

/// The machines a sampling directory holds (`bus/<name>.platform.xml`).
pub fn sampled_machines(samples: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(samples.join("bus"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.strip_suffix(".platform.xml").map(String::from)
                })
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// One policy's bar in a case's group of the plots: (GFlop/s, GiB moved).
type Bar = (f64, f64);

/// Median, minimum and maximum of `values` (not empty).
pub(crate) fn spread(values: &[f64]) -> (f64, f64, f64) {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (median, v[0], v[n - 1])
}

/// Medians of one (machine, case, policy) over its passing repetitions.
struct Summary {
    ms: (f64, f64, f64),
    gflops: f64,
    gib: f64,
    gpu_share: Option<f64>,
    runs: usize,
    failed: usize,
}

fn summarise(rows: &[&Row]) -> Option<Summary> {
    let ok: Vec<&&Row> = rows.iter().filter(|r| r.verdict.is_ok()).collect();
    let failed = rows.len() - ok.len();
    let ms: Vec<f64> = ok.iter().filter_map(|r| r.outcome.ms).collect();
    if ms.is_empty() {
        return None;
    }
    let med = |f: &dyn Fn(&Row) -> Option<f64>| {
        let v: Vec<f64> = ok.iter().filter_map(|r| f(r)).collect();
        if v.is_empty() { f64::NAN } else { spread(&v).0 }
    };
    let gpu_share = {
        let v: Vec<f64> = ok
            .iter()
            .filter_map(|r| {
                let total = r.outcome.executed? as f64;
                let gpu = r.outcome.by_kind.get("CUDA").copied().unwrap_or(0) as f64;
                (total > 0.0).then(|| gpu / total)
            })
            .collect();
        (!v.is_empty()).then(|| spread(&v).0)
    };
    Some(Summary {
        ms: spread(&ms),
        gflops: med(&|r| r.outcome.gflops),
        gib: med(&|r| r.outcome.gib),
        gpu_share,
        runs: ok.len(),
        failed,
    })
}

/// Writes every output; returns the paths written.
pub fn write(
    out: &Path,
    rows: &[Row],
    bounds: &[Bound],
    policies: &[String],
) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut written = Vec::new();
    let save = |name: &str, text: &str, written: &mut Vec<PathBuf>| -> Result<PathBuf, String> {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        written.push(path.clone());
        Ok(path)
    };

    // Every run.
    let mut csv = String::from(
        "machine,case,n,tile,policy,ours,rep,sim_ms,gflops,gib_moved,tasks,cpu_tasks,cuda_tasks,\
         cpu_exec_ms,cpu_data_wait_ms,cpu_sleep_ms,cuda_exec_ms,cuda_data_wait_ms,cuda_sleep_ms,\
         host_gib,peer_gib,real_s,check\n",
    );
    let num = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v}"));
    // GiB to four decimals, as StarPU prints them (sums of its lines).
    let gib = |x: Option<f64>| num(x.map(|g| (g * 1e4).round() / 1e4));
    // StarPU's time split per kind (STARPU_WORKER_STATS), summed over the
    // kind's workers: executing, waiting for data, sleeping with no task.
    let split = |o: &Outcome, kind: &str| {
        o.time_split(kind).map_or(",,".to_string(), |t| {
            format!(
                "{:.1},{:.1},{:.1}",
                t.executing_ms, t.waiting_ms, t.sleeping_ms
            )
        })
    };
    for r in rows {
        let o = &r.outcome;
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3},{}",
            r.machine,
            r.case.app_name(),
            r.case.n,
            r.case.tile,
            r.policy,
            r.ours,
            r.rep,
            num(o.ms),
            num(o.gflops),
            num(o.gib),
            o.executed.map_or(String::new(), |n| n.to_string()),
            o.by_kind.get("CPU").copied().unwrap_or(0),
            o.by_kind.get("CUDA").copied().unwrap_or(0),
            split(o, "CPU"),
            split(o, "CUDA"),
            gib(o.host_gib),
            gib(o.peer_gib),
            o.wall_s,
            match &r.verdict {
                Ok(()) => "ok".to_string(),
                Err(e) => format!("\"{}\"", e.replace('"', "'")),
            }
        );
    }
    save("simgrid.csv", &csv, &mut written)?;

    // The bounds of each (machine, case).
    let mut bounds_csv = String::from(
        "machine,case,n,tile,lp_area_ms,graph_bound_ms,graph_area_ms,graph_path_ms,graph_offline_heft_ms\n",
    );
    for b in bounds {
        let g = |f: fn(&plb_core::dag::record::Figures) -> f64| {
            b.graph
                .as_ref()
                .map_or(String::new(), |g| format!("{:.1}", f(g)))
        };
        let _ = writeln!(
            bounds_csv,
            "{},{},{},{},{},{},{},{},{}",
            b.machine,
            b.case.app_name(),
            b.case.n,
            b.case.tile,
            b.ms.map_or(String::new(), |v| format!("{v:.1}")),
            g(|g| g.bound.ms),
            g(|g| g.bound.area_ms),
            g(|g| g.bound.path_ms),
            g(|g| g.offline_heft_ms)
        );
    }
    save("bounds.csv", &bounds_csv, &mut written)?;

    // Tables, one per (machine, case), and the plots' data.
    let mut groups: BTreeMap<(String, String), Vec<&Row>> = BTreeMap::new();
    let mut order: Vec<(String, String)> = Vec::new();
    for r in rows {
        let key = (r.machine.clone(), r.case.label());
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        groups.entry(key).or_default().push(r);
    }
    let mut md = String::from(
        "# SIMULATED (StarPU-SimGrid): StarPU's applications on sampled machines\n\n\
         Written by `plb simgrid`. StarPU 1.4.10 built with SimGrid runs the real application and \
         the real scheduler; kernel and transfer times are simulated from the performance models \
         sampled on each machine. ms: simulated makespan (as the program prints it for the \
         factorisations; for the GEMM, its 10 iterations, from the GFlop/s it prints), median over the repetitions [min–max] (SimGrid runs are deterministic: equal repetitions show one value). \
         GiB moved: STARPU_BUS_STATS's total. bound/ms: StarPU's LP area bound (`-bound`, no \
         dependencies) over the median makespan, 1 being unreachable in general. graph bound/ms: \
         our lower bound of the task graph one more run of our first policy recorded (`PLB_GRAPH`, \
         `plb bound`: dependencies kept, each task's duration from StarPU's models, data \
         transfers not counted) over the median makespan. GPU tasks: \
         share of the tasks run by CUDA workers. Models: StarPU's model-based policies (dmda, dmdas, \
         modular-heft...) use the sampled, i.e. calibrated, models; heteroprio had unmeasured \
         auto-calibration runs until its makespan repeated (at most 5); our plb-heft, dada and \
         dada-cp had one unmeasured learning run whose models (PLB_MODEL_DIR) their measured runs \
         load, and `NAME (cold)` is the same policy with no model file (a user's first run); both \
         take StarPU's calibrated prediction for a worker their models have none for \
         (PLB_STARPU_MODELS); our other policies learn within each run.\n",
    );
    let mut plot_data: BTreeMap<String, Vec<(String, Vec<Bar>)>> = BTreeMap::new();
    // Per policy of ours: its median over StarPU's best median, per group.
    let mut versus: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for key in &order {
        let (machine, case) = key;
        let group = &groups[key];
        let found = bounds
            .iter()
            .find(|b| &b.machine == machine && &b.case.label() == case);
        let bound = found.and_then(|b| b.ms);
        let graph = found.and_then(|b| b.graph);
        // StarPU's best median in this group (its policies: not ours).
        let starpu_best = policies
            .iter()
            .filter_map(|p| {
                let rs: Vec<&Row> = group
                    .iter()
                    .copied()
                    .filter(|r| &r.policy == p && !r.ours)
                    .collect();
                summarise(&rs).map(|s| (s.ms.0, p.clone()))
            })
            .min_by(|a, b| a.0.total_cmp(&b.0));
        let first = group[0].case;
        let _ = write!(
            md,
            "\n## SIMULATED (StarPU-SimGrid, machine {machine}): {} N={} ({}x{} tiles of {}, {} tasks)\n\n\
             LP area bound: {}. Graph bound: {}. StarPU's best: {}.\n\n\
             | policy | ms | vs StarPU's best | GFlop/s | GiB moved | bound/ms | graph bound/ms | GPU tasks | runs |\n\
             | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
            first.app_name(),
            first.n,
            first.blocks(),
            first.blocks(),
            first.tile,
            group[0]
                .outcome
                .executed
                .map_or("?".to_string(), |n| n.to_string()),
            bound.map_or("not available".to_string(), |b| format!("{b:.0} ms")),
            graph.map_or("not available".to_string(), |g| format!(
                "{:.0} ms (its area bound {:.0}, critical path {:.0}; offline HEFT on that graph, \
                 no transfers: {:.0})",
                g.bound.ms, g.bound.area_ms, g.bound.path_ms, g.offline_heft_ms
            )),
            starpu_best
                .as_ref()
                .map_or("none run".to_string(), |(ms, p)| format!("{p}, {ms:.0} ms")),
        );
        let mut bars = Vec::new();
        let best = policies
            .iter()
            .filter_map(|p| {
                let rs: Vec<&Row> = group.iter().copied().filter(|r| &r.policy == p).collect();
                summarise(&rs).map(|s| s.ms.0)
            })
            .fold(f64::INFINITY, f64::min);
        for policy in policies {
            let rs: Vec<&Row> = group
                .iter()
                .copied()
                .filter(|r| &r.policy == policy)
                .collect();
            let name = if rs.first().is_some_and(|r| r.ours) {
                format!("{policy} (ours)")
            } else {
                policy.clone()
            };
            match summarise(&rs) {
                Some(s) => {
                    let ms = if s.ms.1 == s.ms.2 {
                        format!("{:.0}", s.ms.0)
                    } else {
                        format!("{:.0} [{:.0}–{:.0}]", s.ms.0, s.ms.1, s.ms.2)
                    };
                    let ms = if s.ms.0 == best {
                        format!("**{ms}**")
                    } else {
                        ms
                    };
                    let vs = starpu_best.as_ref().map(|(b, _)| s.ms.0 / b);
                    if let (Some(v), true) = (vs, rs.first().is_some_and(|r| r.ours)) {
                        versus.entry(policy.clone()).or_default().push(v);
                    }
                    let _ = writeln!(
                        md,
                        "| {name} | {ms} | {} | {:.1} | {:.2} | {} | {} | {} | {}{} |",
                        vs.map_or("-".into(), |v| format!("{v:.3}")),
                        s.gflops,
                        s.gib,
                        bound.map_or("-".into(), |b| format!("{:.2}", b / s.ms.0)),
                        graph.map_or("-".into(), |g| format!("{:.2}", g.bound.ms / s.ms.0)),
                        s.gpu_share
                            .map_or("-".into(), |g| format!("{:.0}%", 100.0 * g)),
                        s.runs,
                        if s.failed > 0 {
                            format!(" ({} failed)", s.failed)
                        } else {
                            String::new()
                        },
                    );
                    bars.push((s.gflops, s.gib));
                }
                None => {
                    let why = rs
                        .iter()
                        .find_map(|r| r.verdict.as_ref().err())
                        .cloned()
                        .unwrap_or_else(|| "not run".into());
                    let _ = writeln!(md, "| {name} | failed: {why} | | | | | | | 0 |");
                    bars.push((0.0, 0.0));
                }
            }
        }
        plot_data
            .entry(machine.clone())
            .or_default()
            .push((case.clone(), bars));
    }
    if !versus.is_empty() {
        let _ = write!(
            md,
            "\n## Summary: our policies against StarPU's best, SIMULATED\n\n\
             Over the (machine, case) pairs above: the geometric mean and the \
             largest of each policy's median makespan over the best median of \
             StarPU's policies run (below 1: ours is faster).\n\n\
             | policy | pairs | geometric mean | largest | pairs above 1.03 |\n\
             | --- | ---: | ---: | ---: | ---: |\n"
        );
        for p in policies {
            let Some(v) = versus.get(p) else { continue };
            let geo = (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp();
            let max = v.iter().copied().fold(f64::NAN, f64::max);
            let above = v.iter().filter(|&&x| x > 1.03).count();
            let _ = writeln!(md, "| {p} | {} | {geo:.3} | {max:.3} | {above} |", v.len());
        }
    }
    print!("{md}");
    save("simgrid.md", &md, &mut written)?;

    for (machine, cases) in &plot_data {
        let file = machine.replace([':', '='], "_");
        // One gnuplot table per measure: a row per case, a column per policy
        // (names quoted: "plb-heft (cold)" is one column head).
        let heads: Vec<String> = policies.iter().map(|p| format!("\"{p}\"")).collect();
        let table = |value: &dyn Fn(&Bar) -> String| {
            let mut text = format!("case {}\n", heads.join(" "));
            for (case, bars) in cases {
                let cells: Vec<String> = bars.iter().map(value).collect();
                let _ = writeln!(text, "{case} {}", cells.join(" "));
            }
            text
        };
        let dat = table(&|b| format!("{:.1}", b.0));
        let gib = table(&|b| format!("{:.3}", b.1));
        let dat_path = save(&format!("simgrid-{file}-gflops.dat"), &dat, &mut written)?;
        let gib_path = save(&format!("simgrid-{file}-gib.dat"), &gib, &mut written)?;
        let png = out.join(format!("simgrid-{file}.png"));
        // One colour per policy; ours hatched, StarPU's solid.
        const COLOURS: [&str; 12] = [
            "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
            "#bcbd22", "#17becf", "#393b79", "#637939",
        ];
        let ours: Vec<bool> = policies
            .iter()
            .map(|p| rows.iter().any(|r| &r.policy == p && r.ours))
            .collect();
        let plot = |path: &Path| {
            let series: Vec<String> = (0..policies.len())
                .map(|i| {
                    let fill = if ours[i] {
                        "fs pattern 2 border -1"
                    } else {
                        "fs solid 0.85 border -1"
                    };
                    let colour = COLOURS[i % COLOURS.len()];
                    let from = if i == 0 {
                        format!("'{}'", path.display())
                    } else {
                        "''".into()
                    };
                    let xtic = if i == 0 { ":xtic(1)" } else { "" };
                    format!("{from} using {}{xtic} lc rgb '{colour}' {fill}", i + 2)
                })
                .collect();
            format!("plot {}\n", series.join(", \\\n  "))
        };
        let script = format!(
            "set terminal pngcairo size 1200,800\nset output '{png}'\n\
             set multiplot layout 2,1 title 'SIMULATED (StarPU-SimGrid, machine {machine})'\n\
             set style data histograms\nset style histogram clustered gap 1\n\
             set boxwidth 0.9\nset key outside right top noenhanced\nset yrange [0:*]\n\
             set grid ytics\nset key autotitle columnhead\n\
             set ylabel 'GFlop/s (higher is better)'\n{gflops}\
             set ylabel 'GiB moved (lower is better)'\n{gib}\
             unset multiplot\n",
            png = png.display(),
            gflops = plot(&dat_path),
            gib = plot(&gib_path),
        );
        match gnuplot(&script) {
            Ok(()) => written.push(png),
            Err(e) => eprintln!("simgrid: {e}"),
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_median_min_max() {
        assert_eq!(spread(&[3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(spread(&[4.0, 1.0]), (2.5, 1.0, 4.0));
    }
}
