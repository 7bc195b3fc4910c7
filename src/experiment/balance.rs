//! `plb experiment balance`: the divisible-load balancers on a real StarPU
//! run of a synthetic CPU-bound kernel, on 2 CPU workers made heterogeneous
//! by `PLB_EMULATE` (worker 0 four times slower; worker 1 pays 20 ms per
//! block), against the best measured one-block-per-worker split.
//!
//! Each run is a child process (`plb __balance-run`, see
//! `balance_child.rs`) so that every run gets a fresh StarPU and a fresh
//! emulation clock.

use std::fmt::Write as _;
use std::process::{Command, Stdio};
use std::time::Instant;

use clap::Args;

use super::EMULATION;
use super::balance_child::Mode;
use crate::cli::positive;

/// The label printed with every output.
pub fn label() -> String {
    format!("EMULATED heterogeneity (PLB_EMULATE=\"{EMULATION}\") on 2 identical CPU cores")
}

/// Kernel iterations per unit of work.
const ITERS_PER_UNIT: u64 = 1000;
/// Prefix of the child's result line.
const TAG: &str = "PLB_BALANCE_RESULT";

/// Burns `units` units of CPU work (a dependent multiply-add chain the
/// compiler cannot remove); time is proportional to `units`.
pub fn burn(units: u64) {
    let mut x = std::hint::black_box(1.0f64);
    let a = std::hint::black_box(0.999_999_9f64);
    let b = std::hint::black_box(1e-7f64);
    for _ in 0..units {
        for _ in 0..ITERS_PER_UNIT {
            x = x * a + b;
        }
        x = std::hint::black_box(x);
    }
    std::hint::black_box(x);
}

/// One block as measured by its task (kernel time including emulation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockTime {
    pub worker: i32,
    pub units: u64,
    pub seconds: f64,
}

/// What a child run reports.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// From the first request to the balancer (or first submission) to the
    /// end of `starpu_task_wait_for_all`.
    pub makespan_s: f64,
    /// Every block, in completion order.
    pub blocks: Vec<BlockTime>,
}

impl RunResult {
    /// The machine-readable line the child prints.
    pub fn to_line(&self) -> String {
        let blocks: Vec<String> = self
            .blocks
            .iter()
            .map(|b| format!("{}:{}:{:.6}", b.worker, b.units, b.seconds))
            .collect();
        format!(
            "{TAG} makespan={:.6} blocks={}",
            self.makespan_s,
            blocks.join(",")
        )
    }

    /// Parses [`RunResult::to_line`]'s output.
    pub fn parse(line: &str) -> Option<RunResult> {
        let mut it = line.split_whitespace();
        if it.next()? != TAG {
            return None;
        }
        let makespan_s = it.next()?.strip_prefix("makespan=")?.parse().ok()?;
        let list = it.next()?.strip_prefix("blocks=")?;
        let blocks = list
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|b| {
                let mut f = b.split(':');
                let r = BlockTime {
                    worker: f.next()?.parse().ok()?,
                    units: f.next()?.parse().ok()?,
                    seconds: f.next()?.parse().ok()?,
                };
                f.next().is_none().then_some(r)
            })
            .collect::<Option<Vec<_>>>()?;
        Some(RunResult { makespan_s, blocks })
    }

    /// Busy seconds, units and blocks of worker `w`.
    pub fn worker(&self, w: i32) -> (f64, u64, usize) {
        self.blocks
            .iter()
            .filter(|b| b.worker == w)
            .fold((0.0, 0, 0), |(s, u, n), b| {
                (s + b.seconds, u + b.units, n + 1)
            })
    }

    /// Idle share of worker `w` over the makespan, in %.
    pub fn idle_pct(&self, w: i32) -> f64 {
        100.0 * (1.0 - self.worker(w).0 / self.makespan_s).max(0.0)
    }
}

/// Options of `plb experiment balance`.
#[derive(Args)]
pub struct Options {
    /// Repetitions of every run (the median is reported; 1 with --quick)
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = positive::<usize>())]
    reps: usize,
    /// About 2 s of work per run instead of 20 s, one repetition
    #[arg(long)]
    quick: bool,
    /// Leave out scenario B (worker 1 slowing down mid-run)
    #[arg(long = "no-speed-change")]
    skip_change: bool,
}

impl Options {
    fn repetitions(&self) -> usize {
        if self.quick { 1 } else { self.reps }
    }
}

/// Runs one child process under [`EMULATION`].
fn child(units: u64, mode: &Mode) -> Result<RunResult, String> {
    child_with(units, mode, EMULATION, None)
}

/// Runs one child process under `emulation`, tracing to `trace` if given.
fn child_with(
    units: u64,
    mode: &Mode,
    emulation: &str,
    trace: Option<&std::path::Path>,
) -> Result<RunResult, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate plb: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.args(["__balance-run", "--units", &units.to_string()]);
    match mode {
        Mode::Balancer(s) => cmd.args(["--balancer", s]),
        Mode::Split(r) => cmd.args(["--split", &r.to_string()]),
        Mode::Calibrate(s) => cmd.args(["--calibrate", &s.to_string()]),
    };
    // The plb executable carries the interposed StarPU entry points itself:
    // preloading the library as well would emulate twice.
    match trace {
        Some(t) => cmd.env("PLB_TRACE", t),
        None => cmd.env_remove("PLB_TRACE"),
    };
    cmd.env("PLB_EMULATE", emulation)
        .env("STARPU_SCHED", "greedy")
        .env("STARPU_NCPU", "2")
        .env("STARPU_NCUDA", "0")
        .env("STARPU_NOPENCL", "0")
        .env_remove("LD_PRELOAD")
        .env_remove("STARPU_SCHED_LIB")
        .stdin(Stdio::null());
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run plb __balance-run: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!(
            "{mode:?} failed ({}): {}",
            out.status,
            stderr.trim()
        ));
    }
    if !stderr.contains("plb: EMULATION ACTIVE") {
        return Err(format!(
            "{mode:?}: the emulation was not activated: {}",
            stderr.trim()
        ));
    }
    stdout
        .lines()
        .find_map(RunResult::parse)
        .ok_or_else(|| format!("{mode:?}: no result line in: {}", stdout.trim()))
}

/// Per-worker linear fit `t(u) = a + b·u` from a calibration run (one block
/// of `s` and one of `3s` per worker).
fn fit(r: &RunResult, w: i32) -> Option<(f64, f64)> {
    let mut mine: Vec<&BlockTime> = r.blocks.iter().filter(|b| b.worker == w).collect();
    mine.sort_by_key(|b| b.units);
    let [small, big] = mine[..] else { return None };
    let du = (big.units - small.units) as f64;
    if du <= 0.0 {
        return None;
    }
    let b = (big.seconds - small.seconds) / du;
    let a = small.seconds - b * small.units as f64;
    Some((a.max(0.0), b.max(1e-12)))
}

/// The share `r` of the units on worker 1 that equalises both workers'
/// predicted times: `a0 + b0(1-r)W = a1 + b1·r·W`, clamped to [0, 1].
pub fn predicted_split(w0: (f64, f64), w1: (f64, f64), units: u64) -> f64 {
    let w = units as f64;
    ((w0.0 - w1.0 + w0.1 * w) / ((w0.1 + w1.1) * w)).clamp(0.0, 1.0)
}

/// The 3 split ratios in 1 % steps around `r` (nearest percent, ±1 %),
/// inside [0, 100] %: where the sweep starts.
pub fn sweep_percents(r: f64) -> Vec<u32> {
    let c = ((r * 100.0).round() as i64).clamp(1, 99);
    (c - 1..=c + 1).map(|p| p as u32).collect()
}

/// Sweeps split ratios in 1 % steps from [`sweep_percents`]`(r)` outwards
/// until the best makespan is bracketed by a measured worse ratio on each
/// side (or by 0 % / 100 %): the brute-force optimum over 1 % steps,
/// without running the ratios far from the minimum. `measure(p)` returns
/// the makespan at `p` % on worker 1. Returns `(best %, every (%, s))`.
pub fn sweep_optimum(
    r: f64,
    mut measure: impl FnMut(u32) -> Result<f64, String>,
) -> Result<(u32, Vec<(u32, f64)>), String> {
    let mut done: Vec<(u32, f64)> = Vec::new();
    for p in sweep_percents(r) {
        done.push((p, measure(p)?));
    }
    loop {
        done.sort_by_key(|&(p, _)| p);
        let best = (0..done.len())
            .min_by(|&a, &b| done[a].1.total_cmp(&done[b].1))
            .ok_or("nothing measured")?;
        let next = if best == 0 && done[0].0 > 0 {
            done[0].0 - 1
        } else if best + 1 == done.len() && done[best].0 < 100 {
            done[best].0 + 1
        } else {
            return Ok((done[best].0, done));
        };
        done.push((next, measure(next)?));
    }
}

fn median_run(mut runs: Vec<RunResult>) -> RunResult {
    runs.sort_by(|a, b| a.makespan_s.total_cmp(&b.makespan_s));
    runs.swap_remove(runs.len() / 2)
}

fn progress(what: &str) {
    eprintln!("  {what}");
}

/// `plb experiment balance`.
pub fn run(opts: &Options) -> Result<(), String> {
    let reps = opts.repetitions();
    let wall = Instant::now();
    // Size the work on this machine: about 20 s (2 s with --quick) on the
    // slow worker alone, i.e. 5 s of real kernel time.
    let probe = 2000u64;
    let t = Instant::now();
    burn(probe);
    let per_unit = t.elapsed().as_secs_f64().max(1e-9) / probe as f64;
    let fast_alone_s = if opts.quick { 0.5 } else { 5.0 };
    let units = ((fast_alone_s / per_unit).round() as u64).max(1024);
    eprintln!("plb experiment balance: real StarPU runs, {}", label());
    eprintln!(
        "  W = {units} units ({:.2} us each unmodified; ~{:.0} s on worker 0 alone), {} repetition(s), median reported",
        per_unit * 1e6,
        4.0 * fast_alone_s,
        reps
    );

    // Optimum: calibrate both workers, then sweep 3 split ratios.
    let cal_block = (units / 40).max(1);
    progress(&format!(
        "calibration: blocks of {cal_block} and {} units on each worker",
        3 * cal_block
    ));
    let cal = child(units, &Mode::Calibrate(cal_block))?;
    let f0 = fit(&cal, 0).ok_or("calibration: no fit for worker 0")?;
    let f1 = fit(&cal, 1).ok_or("calibration: no fit for worker 1")?;
    let r_pred = predicted_split(f0, f1, units);
    let mut medians: Vec<(u32, RunResult)> = Vec::new();
    let (best_p, swept) = sweep_optimum(r_pred, |p| {
        let mut runs = Vec::new();
        for rep in 0..reps {
            progress(&format!(
                "optimum sweep: {p} % on worker 1, rep {}/{reps}",
                rep + 1
            ));
            runs.push(child(units, &Mode::Split(f64::from(p) / 100.0))?);
        }
        let m = median_run(runs);
        let s = m.makespan_s;
        medians.push((p, m));
        Ok(s)
    })?;
    let percents: Vec<u32> = swept.iter().map(|&(p, _)| p).collect();
    let best_run = medians
        .into_iter()
        .find(|(p, _)| *p == best_p)
        .map(|(_, r)| r)
        .ok_or("no split ratio was run")?;

    let contenders = [
        ("greedy W/256", format!("greedy:{}", (units / 256).max(1))),
        ("greedy W/64", format!("greedy:{}", (units / 64).max(1))),
        ("greedy W/16", format!("greedy:{}", (units / 16).max(1))),
        ("hdss", "hdss".into()),
        ("acosta", "acosta".into()),
        ("plb-hec", "plb-hec".into()),
        ("plb-hac", "plb-hac".into()),
    ];
    let mut runs: Vec<Vec<RunResult>> = vec![Vec::new(); contenders.len()];
    for rep in 0..reps {
        for (i, (name, spec)) in contenders.iter().enumerate() {
            progress(&format!("{name}, rep {}/{reps}", rep + 1));
            runs[i].push(child(units, &Mode::Balancer(spec.clone()))?);
        }
    }

    let mut rows: Vec<(String, RunResult)> = contenders
        .iter()
        .zip(runs)
        .map(|((name, _), r)| (name.to_string(), median_run(r)))
        .collect();
    rows.push((format!("optimum ({best_p} % on w1)"), best_run.clone()));
    let mut out = String::new();
    let _ = writeln!(out, "\n{}", label());
    let _ = writeln!(
        out,
        "W = {units} units; calibration fit t(u) = a + b*u: worker 0 a = {:.4} s, b = {:.3} us/unit; \
         worker 1 a = {:.4} s, b = {:.3} us/unit; predicted optimum {:.1} % on worker 1, swept {:?} %",
        f0.0,
        f0.1 * 1e6,
        f1.0,
        f1.1 * 1e6,
        r_pred * 100.0,
        percents
    );
    out.push_str(&format_table(&rows, best_run.makespan_s));
    print!("{out}");
    let mut out = String::new();
    if !opts.skip_change {
        let change_at = best_run.makespan_s / 2.0;
        out.push_str(&speed_change(units, f0, f1, change_at)?);
    }
    let _ = writeln!(
        out,
        "(whole benchmark: {:.0} s wall)",
        wall.elapsed().as_secs_f64()
    );
    print!("{out}");
    Ok(())
}

/// Scenario B's emulation: [`EMULATION`] plus worker 1 twice slower from
/// `at_s` seconds after StarPU's initialisation.
pub fn change_emulation(at_s: f64) -> String {
    format!(
        "0:speed=0.25; 1:latency=20ms,after={:.0}ms,speed=0.5",
        at_s * 1e3
    )
}

/// One virtual step of a PLB-HAC trace: its number, solve time and the
/// units of each of the two workers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TracedStep {
    pub step: u64,
    pub time_s: f64,
    pub units: [u64; 2],
}

impl TracedStep {
    /// Worker 1's share of the step.
    pub fn share1(&self) -> f64 {
        let t = (self.units[0] + self.units[1]).max(1) as f64;
        self.units[1] as f64 / t
    }
}

/// The `solution` rows of a `PLB_TRACE` file, grouped by step.
pub fn traced_steps(csv: &str) -> Vec<TracedStep> {
    let mut steps: Vec<TracedStep> = Vec::new();
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if f.len() != 8 || f[0] != "solution" {
            continue;
        }
        let (Ok(w), Ok(t), Ok(x), Ok(step)) = (
            f[2].parse::<usize>(),
            f[3].parse::<f64>(),
            f[5].parse::<f64>(),
            f[7].parse::<u64>(),
        ) else {
            continue;
        };
        if w > 1 {
            continue;
        }
        if steps.last().is_none_or(|s| s.step != step) {
            steps.push(TracedStep {
                step,
                time_s: t,
                units: [0, 0],
            });
        }
        if let Some(s) = steps.last_mut() {
            s.units[w] = x as u64;
        }
    }
    steps
}

/// Scenario B: worker 1 becomes twice slower at `at_s`; runs PLB-HAC with
/// `PLB_TRACE` and shows from the trace how its share for worker 1 follows.
fn speed_change(units: u64, f0: (f64, f64), f1: (f64, f64), at_s: f64) -> Result<String, String> {
    let emulation = change_emulation(at_s);
    let trace = std::env::temp_dir().join(format!("plb-balance-change-{}.csv", std::process::id()));
    progress(&format!(
        "scenario B: plb-hac with PLB_EMULATE=\"{emulation}\""
    ));
    let run = child_with(
        units,
        &Mode::Balancer("plb-hac".into()),
        &emulation,
        Some(&trace),
    )?;
    let csv = std::fs::read_to_string(&trace).map_err(|e| format!("{}: {e}", trace.display()))?;
    let _ = std::fs::remove_file(&trace);
    let steps = traced_steps(&csv);
    let slow1 = (f1.0, 2.0 * f1.1);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nScenario B (EMULATED): worker 1 becomes 2x slower {at_s:.2} s after StarPU starts \
         (PLB_EMULATE=\"{emulation}\"); plb-hac makespan {:.3} s. Shares from PLB_TRACE \
         (solution rows; trace clock starts a few ms before the emulation clock):",
        run.makespan_s
    );
    let _ = writeln!(
        out,
        "{:>5} {:>8} {:>9} {:>9} {:>10} {:>10}",
        "step", "time s", "w0 units", "w1 units", "w1 share", "ideal now"
    );
    let mut first_after: Option<usize> = None;
    let mut followed: Option<usize> = None;
    for (i, s) in steps.iter().enumerate() {
        let total = s.units[0] + s.units[1];
        let after = s.time_s >= at_s;
        let ideal = predicted_split(f0, if after { slow1 } else { f1 }, total.max(1));
        let before_ideal = predicted_split(f0, f1, total.max(1));
        if after && first_after.is_none() {
            first_after = Some(i);
        }
        if after
            && followed.is_none()
            && (s.share1() - ideal).abs() < (s.share1() - before_ideal).abs()
        {
            followed = Some(i);
        }
        let _ = writeln!(
            out,
            "{:>5} {:>8.3} {:>9} {:>9} {:>9.1}% {:>9.1}%{}",
            s.step,
            s.time_s,
            s.units[0],
            s.units[1],
            100.0 * s.share1(),
            100.0 * ideal,
            if first_after == Some(i) {
                "  <- first step after the change"
            } else {
                ""
            }
        );
    }
    let verdict = match (first_after, followed) {
        (Some(a), Some(f)) => format!(
            "worker 1's share moved nearer the new ideal than the old one at step {} \
             ({} virtual step(s) after the change; target: within 3)",
            steps[f].step,
            f - a + 1
        ),
        (Some(_), None) => "worker 1's share did NOT follow the change in any later step".into(),
        (None, _) => {
            "no virtual step was solved after the change (the change came too late)".into()
        }
    };
    let _ = writeln!(out, "{verdict}");
    Ok(out)
}

/// The results table: one row per contender.
pub fn format_table(rows: &[(String, RunResult)], optimum_s: f64) -> String {
    let mut out = format!(
        "{:<22} {:>10} {:>8} {:>8} {:>8} {:>9} {:>9}\n",
        "contender", "makespan s", "vs opt", "idle w0", "idle w1", "blocks", "w1 units"
    );
    for (name, r) in rows {
        let (_, u0, n0) = r.worker(0);
        let (_, u1, n1) = r.worker(1);
        let total = (u0 + u1).max(1) as f64;
        let _ = writeln!(
            out,
            "{:<22} {:>10.3} {:>7.3}x {:>7.1}% {:>7.1}% {:>9} {:>8.1}%",
            name,
            r.makespan_s,
            r.makespan_s / optimum_s,
            r.idle_pct(0),
            r.idle_pct(1),
            format!("{n0}+{n1}"),
            100.0 * u1 as f64 / total
        );
    }
    out
}

/// `plb __balance-run --units W (--balancer SPEC | --split R | --calibrate S)`:
/// one child run, printed as one [`RunResult`] line.
#[derive(Args)]
pub struct ChildArgs {
    /// Units of work `W`
    #[arg(long, value_parser = positive::<u64>())]
    units: u64,
    #[command(flatten)]
    mode: ChildMode,
}

/// Exactly one of the three modes of [`Mode`].
#[derive(Args)]
#[group(required = true, multiple = false)]
struct ChildMode {
    /// A divisible run under this balancer spec (greedy:<n>, hdss...)
    #[arg(long, value_name = "SPEC")]
    balancer: Option<String>,
    /// One block per worker, this share of the units on worker 1
    #[arg(long, value_name = "R", value_parser = share)]
    split: Option<f64>,
    /// On each worker one block of S units then one of 3S
    #[arg(long, value_name = "S", value_parser = positive::<u64>())]
    calibrate: Option<u64>,
}

/// Value parser of a share in [0, 1].
fn share(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|r| (0.0..=1.0).contains(r))
        .ok_or_else(|| format!("'{text}' is not a share in [0, 1]"))
}

impl ChildArgs {
    pub fn run(self) -> Result<(), String> {
        let m = self.mode;
        let mode = match (m.balancer, m.split, m.calibrate) {
            (Some(spec), _, _) => Mode::Balancer(spec),
            (_, Some(r), _) => Mode::Split(r),
            (_, _, Some(s)) => Mode::Calibrate(s),
            (None, None, None) => {
                return Err("one of --balancer, --split, --calibrate is required".into());
            }
        };
        let r = super::balance_child::run(self.units, &mode)?;
        println!("{}", r.to_line());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RunResult {
        RunResult {
            makespan_s: 4.0,
            blocks: vec![
                BlockTime {
                    worker: 0,
                    units: 10,
                    seconds: 1.0,
                },
                BlockTime {
                    worker: 1,
                    units: 30,
                    seconds: 3.0,
                },
                BlockTime {
                    worker: 1,
                    units: 20,
                    seconds: 0.5,
                },
            ],
        }
    }

    #[test]
    fn result_line_round_trips_and_rejects_garbage() {
        let r = sample();
        assert_eq!(RunResult::parse(&r.to_line()), Some(r));
        let empty = RunResult {
            makespan_s: 1.5,
            blocks: vec![],
        };
        assert_eq!(RunResult::parse(&empty.to_line()), Some(empty));
        for bad in [
            "",
            "something else",
            "PLB_BALANCE_RESULT makespan=x blocks=",
            "PLB_BALANCE_RESULT makespan=1 blocks=0:1",
            "PLB_BALANCE_RESULT makespan=1 blocks=0:1:2:3",
        ] {
            assert_eq!(RunResult::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn per_worker_sums_and_idle() {
        let r = sample();
        assert_eq!(r.worker(1), (3.5, 50, 2));
        assert!((r.idle_pct(0) - 75.0).abs() < 1e-9);
        assert!((r.idle_pct(1) - 12.5).abs() < 1e-9);
        let t = format_table(&[("x".into(), r)], 2.0);
        assert!(
            t.contains("2.000x") && t.contains("1+2") && t.contains("83.3%"),
            "{t}"
        );
    }

    #[test]
    fn fit_prediction_and_sweep() {
        let cal = RunResult {
            makespan_s: 1.0,
            blocks: vec![
                BlockTime {
                    worker: 0,
                    units: 100,
                    seconds: 0.4,
                },
                BlockTime {
                    worker: 0,
                    units: 300,
                    seconds: 1.2,
                },
                BlockTime {
                    worker: 1,
                    units: 100,
                    seconds: 0.12,
                },
                BlockTime {
                    worker: 1,
                    units: 300,
                    seconds: 0.32,
                },
            ],
        };
        let f0 = fit(&cal, 0).unwrap();
        let f1 = fit(&cal, 1).unwrap();
        assert!(f0.0.abs() < 1e-9 && (f0.1 - 0.004).abs() < 1e-12);
        assert!((f1.0 - 0.02).abs() < 1e-9 && (f1.1 - 0.001).abs() < 1e-12);
        // Without latency: 4x faster worker 1 takes 80 %.
        assert!((predicted_split((0.0, 4.0), (0.0, 1.0), 1000) - 0.8).abs() < 1e-12);
        assert_eq!(sweep_percents(0.796), vec![79, 80, 81]);
        assert_eq!(sweep_percents(1.0), vec![98, 99, 100]);
        assert_eq!(sweep_percents(0.0), vec![0, 1, 2]);
    }

    #[test]
    fn sweep_brackets_the_minimum_in_one_percent_steps() {
        // Convex makespan with its minimum at 73 %; start predicted at 78 %.
        let f = |p: u32| (f64::from(p) - 73.0).abs() + 10.0;
        let mut calls = Vec::new();
        let (best, all) = sweep_optimum(0.78, |p| {
            calls.push(p);
            Ok(f(p))
        })
        .unwrap();
        assert_eq!(best, 73);
        let ps: Vec<u32> = all.iter().map(|&(p, _)| p).collect();
        assert_eq!(ps, (72..=79).collect::<Vec<_>>());
        assert_eq!(calls.len(), 8, "no ratio is measured twice");
        // At the boundary the sweep stops at 100 %.
        let (best, _) = sweep_optimum(0.99, |p| Ok(100.0 - f64::from(p))).unwrap();
        assert_eq!(best, 100);
        assert!(sweep_optimum(0.5, |_| Err("boom".into())).is_err());
    }

    #[test]
    fn trace_solutions_group_by_step() {
        let csv = "kind,source,worker,start_s,end_s,units,predicted_s,detail\n\
                   task,x,0,0,1,5,,a\n\
                   solution,plb-hac,0,1.5,1.5,200,0.5,1\n\
                   solution,plb-hac,1,1.5,1.5,800,0.5,1\n\
                   block,plb-hac,1,1.0,1.5,800,0.4,7\n\
                   solution,plb-hac,0,2.5,2.5,300,0.5,2\n\
                   solution,plb-hac,1,2.5,2.5,700,0.5,2\n";
        let steps = traced_steps(csv);
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].units, [200, 800]);
        assert!((steps[1].share1() - 0.7).abs() < 1e-12);
        assert_eq!((steps[1].step, steps[1].time_s), (2, 2.5));
        assert_eq!(
            change_emulation(2.0),
            "0:speed=0.25; 1:latency=20ms,after=2000ms,speed=0.5"
        );
    }

    #[derive(clap::Parser)]
    struct Balance {
        #[command(flatten)]
        options: Options,
    }

    #[derive(clap::Parser)]
    struct Child {
        #[command(flatten)]
        child: ChildArgs,
    }

    #[test]
    fn options() {
        use clap::Parser;
        let reps = |args: &[&str]| {
            Balance::try_parse_from([&["t"][..], args].concat()).map(|b| b.options.repetitions())
        };
        assert_eq!(reps(&[]).unwrap(), 3);
        assert_eq!(reps(&["--reps", "2"]).unwrap(), 2);
        assert_eq!(reps(&["--reps", "2", "--quick"]).unwrap(), 1);
        assert!(reps(&["--reps", "0"]).is_err());
        assert!(reps(&["--bogus"]).is_err());
        let child =
            |args: &[&str]| Child::try_parse_from([&["t", "--units", "8"][..], args].concat());
        let c = child(&["--split", "0.25"]).unwrap().child;
        assert_eq!((c.units, c.mode.split), (8, Some(0.25)));
        assert!(child(&["--split", "1.5"]).is_err());
        assert!(child(&[]).is_err(), "a mode is required");
        assert!(
            child(&["--split", "0.5", "--calibrate", "3"]).is_err(),
            "only one mode"
        );
    }
}
