//! `plb simgrid`: StarPU's own applications on SIMULATED GPU machines
//! (issue 11 §3).
//!
//! StarPU built with SimGrid (`scripts/starpu14.sh simgrid`) runs the real
//! application and the real scheduler, ours loaded the normal way
//! (`STARPU_SCHED_LIB`), while kernels and transfers take simulated time
//! from performance models sampled on real machines (`STARPU_HOSTNAME`,
//! `STARPU_PERF_MODEL_DIR`). Our policies learn from the simulated timings
//! as they would on hardware; they never read the samples.
//!
//! For each machine and case, eager runs first (the reference every other
//! run's executed-task count must equal), then heteroprio once to
//! auto-calibrate and each of our policies that keeps its models across
//! runs (`plb-heft`, `dada`, `dada-cp`: `PLB_MODEL_DIR`) once to learn
//! (neither measured), then the repetitions, interleaved over the
//! policies. A policy may carry settings, `NAME+VAR=VALUE[+...]` (e.g.
//! `dada+PLB_DADA_ALPHA=0`), with `PLB_*` or `STARPU_*` variables. Every run is checked ([`run::verdict`]); a failed check
//! makes the exit status 1 once everything is written. Tables go to stdout,
//! progress to stderr, CSV, Markdown and PNG plots to `--out`. Every number
//! is labelled SIMULATED (StarPU-SimGrid, machine X).

mod bus_scale;
pub(crate) mod report;
pub mod run;
mod xcheck;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use plb_core::dag::record::Figures;

use crate::cli::{Failure, positive};
use run::{Case, Machine, Outcome, Request, Setup};
use starpu_plb::catalog;

/// StarPU's policies compared by default: every one a user would try on a
/// CPU+GPU machine.
pub(crate) const STARPU_POLICIES: [&str; 10] = [
    "eager",
    "lws",
    "dmda",
    "dmdar",
    "dmdas",
    "dmdasd",
    "modular-heft",
    "modular-heft-prio",
    "modular-heteroprio",
    "heteroprio",
];

/// `--matrix`'s machines: each sampled machine with all its GPUs (attila
/// and mirage 3, idgraf 8, sirocco 4), with 2 and with 1.
const MATRIX_MACHINES: [&str; 12] = [
    "attila",
    "attila:ncuda=2",
    "attila:ncuda=1",
    "idgraf",
    "idgraf:ncuda=2",
    "idgraf:ncuda=1",
    "mirage",
    "mirage:ncuda=2",
    "mirage:ncuda=1",
    "sirocco",
    "sirocco:ncuda=2",
    "sirocco:ncuda=1",
];

/// `--matrix`'s cases.
const MATRIX_CASES: [&str; 6] = [
    "cholesky:19200",
    "cholesky:19200/320",
    "lu:19200",
    "lu:19200/320",
    "cholesky:28800",
    "gemm:3840",
];

/// Most unmeasured calibration runs heteroprio is given per (machine,
/// case).
pub(crate) const HETEROPRIO_CALIBRATION_MAX: usize = 5;

/// The label of a policy's cold runs.
fn cold_label(v: &Variant) -> String {
    format!("{} (cold)", v.label)
}

/// Whether heteroprio's calibration has settled: its last two makespans
/// within 0.5 % of each other (SimGrid is deterministic, so a calibration
/// that no longer changes its decisions repeats its makespan).
pub(crate) fn calibrated(makespans: &[f64]) -> bool {
    match makespans {
        [.., a, b] => a.is_finite() && b.is_finite() && (a - b).abs() <= 0.005 * a,
        _ => false,
    }
}

/// `plb simgrid [OPTIONS]`.
#[derive(Args)]
#[command(
    after_help = "Set-up: bash scripts/simgrid.sh (builds StarPU 1.4.10 with SimGrid and \
our library against it, then runs this command with the arguments it is given).\n\
Example: plb simgrid --machines attila,idgraf:ncuda=4 --cases cholesky:9600,cholesky:19200 --reps 3"
)]
pub struct Command {
    /// Sampled machines, NAME[:ncpu=N][:ncuda=M][:bus=F] (bus: its bandwidths times F, SIMULATED), comma-separated
    /// (samples: attila, idgraf, mirage, sirocco; hannibal's are partial)
    #[arg(long, value_delimiter = ',', default_value = "attila,idgraf")]
    machines: Vec<String>,
    /// Cases, APP:N[/TILE] with APP cholesky, lu or gemm and TILE 320, 640
    /// or 960 (the sampled kernel sizes; default 960)
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "cholesky:9600,cholesky:19200,lu:19200,gemm:3840"
    )]
    cases: Vec<String>,
    /// Policies, each NAME or NAME+VAR=VALUE[+VAR=VALUE] (PLB_* or STARPU_*
    /// settings, e.g. dada+PLB_DADA_ALPHA=0); a name must be ours or one
    /// StarPU lists [default: ours, then eager, lws, dmda, dmdar, dmdas,
    /// dmdasd, modular-heft, modular-heft-prio, modular-heteroprio,
    /// heteroprio]
    #[arg(long, value_delimiter = ',')]
    policies: Option<Vec<String>>,
    /// Repetitions of every (machine, case, policy)
    #[arg(long = "reps", default_value_t = 1, value_parser = positive::<usize>())]
    repetitions: usize,
    /// Quick check: attila, cholesky:9600, every policy, once
    #[arg(long, conflicts_with = "matrix")]
    quick: bool,
    /// The study matrix (docs/results.md): attila, idgraf, mirage and
    /// sirocco, each with all its GPUs, 2 and 1; Cholesky and LU 19200 with
    /// tiles 960 and 320, Cholesky 28800, GEMM 3840 (replaces --machines
    /// and --cases)
    #[arg(long)]
    matrix: bool,
    /// Output directory (CSV, Markdown, PNG)
    #[arg(long, default_value = "target/simgrid")]
    out: PathBuf,
    /// StarPU's SimGrid prefix [default: $PLB_CACHE/starpu-1.4.10/simgrid,
    /// PLB_CACHE defaulting to ~/.cache/plb]
    #[arg(long)]
    prefix: Option<PathBuf>,
    /// Sampling directory (bus/, codelets/) [default:
    /// <prefix>/share/starpu/perfmodels/sampling]
    #[arg(long)]
    samples: Option<PathBuf>,
    /// Our library built against the SimGrid prefix [default:
    /// $PLB_SIMGRID_LIB, else target/starpu14-simgrid/release/libstarpu_plb.so]
    #[arg(long)]
    library: Option<PathBuf>,
    /// Instead of the study: the cross-check of our simulator against
    /// StarPU-SimGrid on one divisible workload (docs/simgrid.md)
    #[arg(long)]
    xcheck: bool,
    /// The cross-check's StarPU program [default:
    /// target/starpu14-simgrid/plb-xcheck, built by scripts/simgrid.sh]
    #[arg(long, value_name = "PATH")]
    xcheck_program: Option<PathBuf>,
    /// No graph bound: by default one more run of our first policy per
    /// (machine, case) records its task graph (PLB_GRAPH) for our lower
    /// bound (`plb bound`)
    #[arg(long)]
    no_graph_bound: bool,
    /// No cold runs: by default each repetition also runs every policy of
    /// ours that keeps its models with none (`NAME (cold)`: the first run
    /// a user ever makes)
    #[arg(long)]
    no_cold: bool,
    /// Real seconds after which one simulation is killed
    #[arg(long, default_value_t = 300, value_parser = positive::<u64>())]
    timeout: u64,
}

/// A policy to compare, with settings: `NAME[+VAR=VALUE...]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    /// As given (the label in tables).
    pub label: String,
    /// The `STARPU_SCHED` name.
    pub name: String,
    /// Its settings.
    pub env: Vec<(String, String)>,
}

impl Variant {
    /// Parses `NAME[+VAR=VALUE...]`; variables must be `PLB_*` or
    /// `STARPU_*`.
    pub fn parse(text: &str) -> Result<Variant, String> {
        let mut parts = text.trim().split('+');
        let name = parts.next().unwrap_or("").trim().to_string();
        if name.is_empty() {
            return Err(format!("policy {text:?}: no name"));
        }
        let env = parts
            .map(|kv| {
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| format!("policy {text:?}: {kv:?} is not VAR=VALUE"))?;
                if !(k.starts_with("PLB_") || k.starts_with("STARPU_")) {
                    return Err(format!(
                        "policy {text:?}: only PLB_* and STARPU_* settings are accepted, not {k:?}"
                    ));
                }
                Ok((k.to_string(), v.to_string()))
            })
            .collect::<Result<_, String>>()?;
        Ok(Variant {
            label: text.trim().to_string(),
            name,
            env,
        })
    }

    /// Whether it is one of ours that keeps its models across runs (and is
    /// given a learning run).
    pub fn learns(&self) -> bool {
        catalog::find(&self.name).is_some_and(|p| p.dag().is_some())
    }

    /// The label as one file-name component (its runs' folders and files):
    /// `%` and `/` percent-encoded, so a setting holding a path
    /// (`plb-heft+PLB_TRACE=/tmp/t.csv`) neither nests folders nor leaves
    /// the output folder, and two labels never share a name.
    pub fn slug(&self) -> String {
        self.label.replace('%', "%25").replace('/', "%2F")
    }
}

/// One run's place in the study and what came of it.
pub struct Row {
    pub machine: String,
    pub case: Case,
    pub policy: String,
    pub ours: bool,
    pub rep: usize,
    pub outcome: Outcome,
    pub verdict: Result<(), String>,
}

/// The bounds of one (machine, case): StarPU's LP area bound (`-bound`)
/// and ours, of the graph recorded by one more run of our first policy
/// (`PLB_GRAPH`, [`plb_core::dag::bound`]).
pub struct Bound {
    pub machine: String,
    pub case: Case,
    pub ms: Option<f64>,
    pub graph: Option<Figures>,
}

/// `plb bound`'s figures of the graph a run recorded in `file` (`None`,
/// said on stderr, when the file is missing or unusable).
fn graph_bound(file: &std::path::Path, label: &str) -> Option<Figures> {
    let found = std::fs::read_to_string(file)
        .map_err(|e| format!("{}: {e}", file.display()))
        .and_then(|text| plb_core::dag::record::parse(&text))
        .and_then(|rec| rec.figures(plb_core::dag::bound::DEFAULT_GRID));
    match found {
        Ok(b) => Some(b),
        Err(e) => {
            eprintln!("simgrid: {label}: no graph bound: {e}");
            None
        }
    }
}

impl Command {
    pub fn run(self) -> Result<ExitCode, Failure> {
        let (machines, cases) = if self.quick {
            (
                vec!["attila".to_string()],
                vec!["cholesky:9600".to_string()],
            )
        } else if self.matrix {
            (
                MATRIX_MACHINES.iter().map(|s| s.to_string()).collect(),
                MATRIX_CASES.iter().map(|s| s.to_string()).collect(),
            )
        } else {
            (self.machines.clone(), self.cases.clone())
        };
        let machines: Vec<Machine> = machines
            .iter()
            .map(|m| Machine::parse(m))
            .collect::<Result<_, _>>()
            .map_err(Failure::setup)?;
        let cases: Vec<Case> = cases
            .iter()
            .map(|c| Case::parse(c))
            .collect::<Result<_, _>>()
            .map_err(Failure::setup)?;
        let policies = self.policies.clone().unwrap_or_else(|| {
            catalog::policies()
                .iter()
                .map(|p| p.name().to_string())
                .chain(STARPU_POLICIES.iter().map(|s| s.to_string()))
                .collect()
        });
        if policies.is_empty() {
            return Err(Failure::setup("--policies names no policy"));
        }
        let variants: Vec<Variant> = policies
            .iter()
            .map(|p| Variant::parse(p))
            .collect::<Result<_, _>>()
            .map_err(Failure::setup)?;
        if self.xcheck {
            let machine = Machine::parse(xcheck::MACHINE).map_err(Failure::setup)?;
            let setup = self.setup(&[machine])?;
            let program = self
                .xcheck_program
                .clone()
                .unwrap_or_else(run::default_xcheck_program);
            let (md, worst) = xcheck::run(&setup, &program)?;
            print!("{md}");
            std::fs::create_dir_all(&self.out)
                .map_err(|e| format!("{}: {e}", self.out.display()))?;
            let path = self.out.join("xcheck.md");
            std::fs::write(&path, &md).map_err(|e| format!("{}: {e}", path.display()))?;
            println!("\nwritten:\n  {}", path.display());
            if worst > xcheck::TOLERANCE {
                return Err(Failure::from(format!(
                    "the makespans differ by up to {:.0}% (more than {:.0}%): one side changed behaviour",
                    100.0 * worst,
                    100.0 * xcheck::TOLERANCE
                )));
            }
            return Ok(ExitCode::SUCCESS);
        }
        // Before any set-up or run: a name must be ours or StarPU's.
        let unknown = variants.iter().find(|v| {
            catalog::find(&v.name).is_none()
                && !catalog::STARPU_POLICY_NAMES.contains(&v.name.as_str())
        });
        if let Some(v) = unknown {
            return Err(Failure::setup(format!(
                "policy '{}': neither ours (`plb policies`) nor one StarPU lists \
                 (STARPU_SCHED=help): {}",
                v.name,
                catalog::STARPU_POLICY_NAMES.join(", ")
            )));
        }
        let setup = self.setup(&machines)?;
        let learners = variants.iter().filter(|v| v.learns()).count();
        let cold = if self.no_cold { 0 } else { learners };
        let ours = variants.iter().any(|v| catalog::find(&v.name).is_some());
        let graph_runs = usize::from(ours && !self.no_graph_bound);
        let per_case = 1 + learners + (policies.len() + cold) * self.repetitions + graph_runs;
        let total = machines.len() * cases.len() * per_case;
        // The table's rows: each policy as given, then ours cold.
        let mut labels = policies.clone();
        if !self.no_cold {
            labels.extend(variants.iter().filter(|v| v.learns()).map(cold_label));
        }
        let mut tally = Tally { done: 0, total };
        let mut rows: Vec<Row> = Vec::new();
        let mut bounds: Vec<Bound> = Vec::new();
        // (machine, case) pairs skipped: their samples lack a kernel.
        let mut skipped: Vec<String> = Vec::new();
        for machine in &machines {
            for case in &cases {
                let label = format!("{} {}", machine.label(), case.label());
                // The reference: eager, also asked for StarPU's LP area bound.
                let tag = format!("{}-{}-eager-reference", machine.label(), case.slug());
                let request = Request {
                    case,
                    policy: "eager",
                    ours: false,
                    bound: true,
                    env: &[],
                    tag: &tag,
                };
                let shown = "eager (reference)";
                let (eager, _) =
                    checked_run(&setup, machine, &request, None, (&label, shown), &mut tally);
                // A kernel the samples lack fails every policy alike.
                if let Some(line) = eager
                    .ms
                    .is_none()
                    .then(|| run::unsampled_kernel(&eager.stderr_tail))
                    .flatten()
                {
                    eprintln!(
                        "simgrid: {label}: skipped: StarPU's samples of {} hold no model of one of \
                         its kernels (\"{line}\"); sampled: the tiles {:?}, and GEMM's as in gemm:3840",
                        machine.label(),
                        run::SAMPLED_TILES
                    );
                    tally.done += per_case - 1;
                    skipped.push(label);
                    continue;
                }
                bounds.push(Bound {
                    machine: machine.label(),
                    case: *case,
                    ms: eager.bound_ms,
                    graph: None,
                });
                let reference = eager.executed;
                // heteroprio's auto-calibration learns across runs: give it
                // unmeasured runs first, as STARPU_CALIBRATE runs give dmda
                // its models (here already sampled), until its makespan
                // stops changing (see `calibrated`).
                let hp_dir =
                    setup
                        .scratch
                        .join(format!("{}-{}-heteroprio", machine.label(), case.slug()));
                let hp_env = vec![(
                    "STARPU_HETEROPRIO_DATA_DIR".to_string(),
                    hp_dir.display().to_string(),
                )];
                if variants.iter().any(|v| v.name == "heteroprio") {
                    let _ = std::fs::create_dir_all(&hp_dir);
                    let mut makespans = Vec::new();
                    for k in 0..HETEROPRIO_CALIBRATION_MAX {
                        let tag = format!(
                            "{}-{}-heteroprio-calibration-{k}",
                            machine.label(),
                            case.slug()
                        );
                        let warm = run::run(
                            &setup,
                            machine,
                            &Request {
                                case,
                                policy: "heteroprio",
                                ours: false,
                                bound: false,
                                env: &hp_env,
                                tag: &tag,
                            },
                        );
                        if let Err(e) = run::verdict(case, &warm, false, reference) {
                            eprintln!(
                                "simgrid: {label}: heteroprio's calibration run {} failed: {e}",
                                k + 1
                            );
                            break;
                        }
                        makespans.push(warm.ms.unwrap_or(f64::NAN));
                        if calibrated(&makespans) {
                            break;
                        }
                    }
                    eprintln!(
                        "simgrid: {label}: heteroprio calibrated in {} run(s): {}",
                        makespans.len(),
                        makespans
                            .iter()
                            .map(|m| format!("{m:.0} ms"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                }
                // The name of `v`'s run (or folder) `what` on this machine
                // and case.
                let tagged = |v: &Variant, what: &str| {
                    format!("{}-{}-{}-{what}", machine.label(), case.slug(), v.slug())
                };
                // Our policies that keep their models: one learning run
                // each, in a directory their measured runs then read.
                let learned = |v: &Variant| {
                    let dir = setup.scratch.join(tagged(v, "models"));
                    let mut env = v.env.clone();
                    env.push(("PLB_MODEL_DIR".to_string(), dir.display().to_string()));
                    env
                };
                // One unmeasured run of our policy `v`, tagged and shown
                // with `what`: reported, not a row.
                let unmeasured =
                    |v: &Variant, what: &str, env: &[(String, String)], tally: &mut Tally| {
                        let tag = tagged(v, what);
                        let request = Request {
                            case,
                            policy: &v.name,
                            ours: true,
                            bound: false,
                            env,
                            tag: &tag,
                        };
                        let shown = format!("{} ({what})", v.label);
                        checked_run(
                            &setup,
                            machine,
                            &request,
                            reference,
                            (&label, &shown),
                            tally,
                        )
                        .1
                    };
                for v in variants.iter().filter(|v| v.learns()) {
                    // Its measured runs are checked.
                    let _ = unmeasured(v, "learning", &learned(v), &mut tally);
                }
                for rep in 0..self.repetitions {
                    // Each policy as given, then ours cold (no model file
                    // at all).
                    let mut runs: Vec<Planned> = Vec::new();
                    for v in &variants {
                        let ours = catalog::find(&v.name).is_some();
                        let tag = tagged(v, &rep.to_string());
                        let env = if v.name == "heteroprio" {
                            let mut e = hp_env.clone();
                            e.extend(v.env.iter().cloned());
                            e
                        } else if v.learns() {
                            learned(v)
                        } else {
                            v.env.clone()
                        };
                        runs.push((v.label.clone(), &v.name, ours, env, tag));
                    }
                    for v in variants.iter().filter(|v| v.learns() && !self.no_cold) {
                        let tag = tagged(v, &format!("cold-{rep}"));
                        let mut env = v.env.clone();
                        let dir = setup.scratch.join(&tag).join("no-models");
                        env.push(("PLB_MODEL_DIR".to_string(), dir.display().to_string()));
                        runs.push((cold_label(v), &v.name, true, env, tag));
                    }
                    for (policy, name, ours, env, tag) in runs {
                        let request = Request {
                            case,
                            policy: name,
                            ours,
                            bound: false,
                            env: &env,
                            tag: &tag,
                        };
                        let (outcome, verdict) = checked_run(
                            &setup,
                            machine,
                            &request,
                            reference,
                            (&label, &policy),
                            &mut tally,
                        );
                        rows.push(Row {
                            machine: machine.label(),
                            case: *case,
                            policy,
                            ours,
                            rep,
                            outcome,
                            verdict,
                        });
                    }
                }
                // One more run of our first policy records the graph for
                // its bound: not a row (recording asks StarPU more at each
                // task's end, which alone changed SimGrid runs, so measured
                // runs do not record).
                let first_ours = variants.iter().find(|v| catalog::find(&v.name).is_some());
                if let (Some(v), false) = (first_ours, self.no_graph_bound) {
                    let file = setup.scratch.join(format!("{}.csv", tagged(v, "graph")));
                    let mut env = if v.learns() {
                        learned(v)
                    } else {
                        v.env.clone()
                    };
                    env.push((
                        starpu_plb::graph_record::ENV.to_string(),
                        file.display().to_string(),
                    ));
                    let verdict = unmeasured(v, "graph", &env, &mut tally);
                    if let (Ok(()), Some(b)) = (verdict, bounds.last_mut()) {
                        b.graph = graph_bound(&file, &label);
                    }
                }
            }
        }
        let written = report::write(&self.out, &rows, &bounds, &labels)?;
        println!("\nwritten:");
        for path in written {
            println!("  {}", path.display());
        }
        if !skipped.is_empty() {
            eprintln!(
                "simgrid: {} case(s) skipped, their kernels not sampled: {}",
                skipped.len(),
                skipped.join(", ")
            );
        }
        let failed = rows.iter().filter(|r| r.verdict.is_err()).count();
        if failed > 0 {
            eprintln!(
                "simgrid: {failed} of {} runs failed their check",
                rows.len()
            );
        }
        if failed > 0 || !skipped.is_empty() {
            return Ok(ExitCode::FAILURE);
        }
        eprintln!("simgrid: all {} runs passed their check", rows.len());
        Ok(ExitCode::SUCCESS)
    }

    /// Finds the SimGrid build, its samples and our library; copies the
    /// samples into the output directory.
    fn setup(&self, machines: &[Machine]) -> Result<Setup, Failure> {
        let how = "build them with `bash scripts/starpu14.sh simgrid`, then our library with \
                   `bash scripts/simgrid.sh --build-only`";
        let prefix = self.prefix.clone().unwrap_or_else(run::default_prefix);
        let prefix = std::path::absolute(&prefix).unwrap_or(prefix);
        let examples = prefix.join("lib/starpu/examples");
        if !examples.join("cholesky_implicit").is_file() {
            return Err(Failure::setup(format!(
                "no SimGrid build of StarPU at {} ({} missing): {how}",
                prefix.display(),
                examples.join("cholesky_implicit").display()
            )));
        }
        let samples = self
            .samples
            .clone()
            .unwrap_or_else(|| prefix.join("share/starpu/perfmodels/sampling"));
        for m in machines {
            let platform = samples.join("bus").join(format!("{}.platform.xml", m.name));
            if !platform.is_file() {
                let known = report::sampled_machines(&samples);
                return Err(Failure::setup(format!(
                    "machine '{}': no {} (sampled machines in {}: {})",
                    m.name,
                    platform.display(),
                    samples.display(),
                    if known.is_empty() {
                        "none".into()
                    } else {
                        known.join(", ")
                    }
                )));
            }
        }
        let library = self.library.clone().unwrap_or_else(run::simgrid_library);
        // Absolute: StarPU opens it from each run's own directory.
        let library = std::path::absolute(&library).unwrap_or(library);
        if !library.is_file() {
            return Err(Failure::setup(format!(
                "our library built against the SimGrid prefix is missing ({}): {how}",
                library.display()
            )));
        }
        // Absolute: every run works in its own directory, and the paths it
        // is given (samples, models) must not depend on it.
        let out = std::path::absolute(&self.out).unwrap_or_else(|_| self.out.clone());
        let scratch = out.join("runs");
        let _ = std::fs::remove_dir_all(&scratch);
        let copy = out.join("sampling");
        let _ = std::fs::remove_dir_all(&copy);
        copy_dir(&samples, &copy)
            .map_err(|e| format!("copying {} to {}: {e}", samples.display(), copy.display()))?;
        // Each scaled host once (several restrictions may share one).
        let mut derived = std::collections::BTreeSet::new();
        for m in machines {
            if let Some(f) = &m.bus
                && derived.insert(m.host())
            {
                bus_scale::derive(&copy, &m.name, f)
                    .map_err(|e| format!("machine '{}': {e}", m.label()))?;
            }
        }
        Ok(Setup {
            examples,
            samples: copy,
            library,
            scratch,
            timeout: Duration::from_secs(self.timeout),
        })
    }
}

/// A measured run to make: its label (in tables), the `STARPU_SCHED` name,
/// whether the policy is ours, its environment and its run folder.
type Planned<'a> = (String, &'a str, bool, Vec<(String, String)>, String);

/// Runs counted so far, of how many.
struct Tally {
    done: usize,
    total: usize,
}

/// Runs `req` on `machine`, checks it ([`run::verdict`] against the
/// reference's executed-task count) and reports it on stderr as
/// `shown.0` (the machine and case) and `shown.1` (the policy).
fn checked_run(
    setup: &Setup,
    machine: &Machine,
    req: &Request<'_>,
    reference: Option<u64>,
    shown: (&str, &str),
    tally: &mut Tally,
) -> (Outcome, Result<(), String>) {
    let outcome = run::run(setup, machine, req);
    tally.done += 1;
    let verdict = run::verdict(req.case, &outcome, req.ours, reference);
    progress(
        tally.done,
        tally.total,
        shown.0,
        shown.1,
        &outcome,
        &verdict,
    );
    if verdict.is_err() {
        eprintln!("{}", indent(&outcome.stderr_tail));
    }
    (outcome, verdict)
}

fn progress(
    done: usize,
    total: usize,
    label: &str,
    policy: &str,
    o: &Outcome,
    v: &Result<(), String>,
) {
    let f = |x: Option<f64>, p: usize| x.map_or("-".to_string(), |v| format!("{v:.p$}"));
    eprintln!(
        "simgrid: [{done}/{total}] {label} {policy}: {} ms, {} GFlop/s, {} GiB moved, {} tasks ({:.1} s real){}",
        f(o.ms, 0),
        f(o.gflops, 1),
        f(o.gib, 2),
        o.executed.map_or("-".into(), |n| n.to_string()),
        o.wall_s,
        match v {
            Ok(()) => String::new(),
            Err(e) => format!(" FAILED: {e}"),
        }
    );
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("    | {l}\n")).collect()
}

pub(crate) fn copy_dir(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Variant, calibrated};

    #[test]
    fn a_label_holding_a_path_names_one_folder_of_its_own() {
        let traced = Variant::parse("plb-heft+PLB_TRACE=/tmp/../t.csv").unwrap();
        assert_eq!(traced.slug(), "plb-heft+PLB_TRACE=%2Ftmp%2F..%2Ft.csv");
        // Two labels never share a folder, even one spelling the other's
        // encoding.
        let spelt = Variant::parse("plb-heft+PLB_TRACE=%2Ftmp%2F..%2Ft.csv").unwrap();
        assert_ne!(spelt.slug(), traced.slug());
        assert_eq!(Variant::parse("dmda").unwrap().slug(), "dmda");
    }

    #[test]
    fn heteroprio_is_calibrated_once_its_makespan_repeats() {
        assert!(!calibrated(&[]));
        assert!(!calibrated(&[900.0]));
        assert!(!calibrated(&[900.0, 800.0]));
        assert!(calibrated(&[900.0, 800.0, 803.0]));
        assert!(!calibrated(&[900.0, f64::NAN]));
    }
}
