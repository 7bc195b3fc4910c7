//! `plb app <name>`: StarPU applications that run under any policy (ours or
//! StarPU's) and check their own result.
//!
//! # Adding an application
//!
//! 1. Its codelet in `codelets/<name>.c` (CPU, OpenCL; CUDA in
//!    `codelets/<name>*.cu`, compiled only when nvcc exists), written with
//!    `codelets/plb_app.h`: every implementation measures itself with
//!    `plb_app_start` / `plb_app_finish` (which also applies `PLB_EMULATE`).
//!    `build.rs` compiles every `codelets/*.c` and `*.cu`.
//! 2. A module `src/apps/<name>.rs` with a type implementing [`Workload`]
//!    (input from a seed, data registration per block, verification) and a
//!    `build(n, seed)` function; `mm.rs` is the model.
//! 3. One [`App`] line in [`APPS`].
//!
//! The framework ([`exec`]) does the rest: the StarPU session, the split of
//! the `W` units (through the divisible-load API under one of our policies,
//! equal fixed-size tasks under any other), timing, the summary line, the
//! verification and the exit status (1 when the result is wrong).

/// The `codelet`, `prepare` and `release` methods of a [`Workload`] whose
/// C file exports the codelet `$cl` and `$init()` / `$fini()` (loading and
/// unloading its OpenCL program): one copy of that glue for every
/// application.
macro_rules! c_codelet {
    ($app:literal, $cl:ident, $init:ident, $fini:ident) => {
        fn codelet(&self) -> *mut starpu_sys::starpu_codelet {
            // Only the address of the C global is taken (no access).
            &raw mut $cl
        }

        fn prepare(&mut self) -> Result<(), String> {
            // SAFETY: StarPU is initialised, no task submitted yet.
            let rc = unsafe { $init() };
            if rc != 0 {
                return Err(format!("{}: loading the OpenCL kernel failed ({rc})", $app));
            }
            Ok(())
        }

        fn release(&mut self) {
            // SAFETY: after the last task, before starpu_shutdown, once
            // after a successful `prepare` (the framework's contract).
            unsafe { $fini() };
        }
    };
}
pub(crate) use c_codelet;

mod bench;
mod exec;

pub mod binomial;
pub mod blackscholes;
#[cfg(plb_mpi)]
pub mod distributed;
pub mod grn;
mod grn_ref;
pub mod kmeans;
mod kmeans_ref;
pub mod mandelbrot;
pub mod mm;
#[cfg(plb_mpi)]
pub mod mm_mpi;
#[cfg(plb_mpi)]
mod mpi;
pub mod nbody;
mod options;
pub mod raytrace;
mod rows;

use std::ffi::c_void;
use std::process::ExitCode;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand, ValueEnum};
use starpu_sys as sys;

use crate::cli::{Failure, policy_name, positive};
use plb_core::balance::registry::BalancerSpec;
use starpu_plb::catalog;

pub use exec::{Data, Handle};

/// One application of `plb app`.
pub struct App {
    /// The subcommand (`plb app <name>`).
    pub name: &'static str,
    /// One line for `plb app list`.
    pub about: &'static str,
    /// `--n` when not given.
    pub default_n: u64,
    /// The size the tests use (a fraction of a second per run).
    pub test_n: u64,
    /// The size `plb app bench` uses.
    pub bench_n: u64,
    /// Makes the workload of size `n` from `seed` (deterministic).
    pub build: fn(n: u64, seed: u64) -> Result<Box<dyn Workload>, String>,
}

/// Every application, in the order `plb app list` and the benchmark show
/// them. **Register new applications here.**
pub const APPS: &[App] = &[
    App {
        name: "mm",
        about: "matrix multiplication C += A·B (n x n, single precision); unit: one column of B and C",
        default_n: 2048,
        test_n: 192,
        bench_n: 2048,
        build: mm::build,
    },
    App {
        name: "blackscholes",
        about: "Black-Scholes prices of n European call/put options; unit: one option",
        default_n: 1 << 22,
        test_n: 100_000,
        bench_n: 1 << 24,
        build: blackscholes::build,
    },
    App {
        name: "grn",
        about: "gene regulatory network inference, n genes, exhaustive search over predictor pairs; unit: one pair",
        default_n: 400,
        test_n: 60,
        bench_n: 300,
        build: grn::build,
    },
    App {
        name: "grn3",
        about: "gene regulatory network inference, n genes, exhaustive search over predictor triples; unit: one triple",
        default_n: 100,
        test_n: 30,
        bench_n: 80,
        build: grn::build3,
    },
    App {
        name: "kmeans",
        about: "k-means (Lloyd) on n points, d = 4, k = 8, at most 20 iterations; unit: one point per iteration",
        default_n: 1 << 20,
        test_n: 20_000,
        bench_n: 1 << 21,
        build: kmeans::build,
    },
    App {
        name: "binomial",
        about: "binomial-lattice (254 steps) call and put prices of n European options; unit: one option (regular)",
        default_n: 65_536,
        test_n: 1_000,
        bench_n: 65_536,
        build: binomial::build,
    },
    App {
        name: "nbody",
        about: "one all-pairs gravitational step over n bodies; unit: one body (regular)",
        default_n: 16_384,
        test_n: 1_024,
        bench_n: 16_384,
        build: nbody::build,
    },
    App {
        name: "mandelbrot",
        about: "n x n Mandelbrot image, up to 1024 iterations; unit: one row (irregular)",
        default_n: 1_536,
        test_n: 128,
        bench_n: 1_536,
        build: mandelbrot::build,
    },
    App {
        name: "raytrace",
        about: "n x n ray-traced image (mirror spheres, shadows, 8 bounces); unit: one row (irregular)",
        default_n: 2_048,
        test_n: 96,
        bench_n: 2_048,
        build: raytrace::build,
    },
];

/// Value parser of `--sched`: a policy StarPU knows, or one of ours with
/// its balancer's arguments (`hguided:k=3,min=64`, checked by the
/// registry).
pub fn app_policy(name: &str) -> Result<String, String> {
    match name.split_once(':') {
        Some((base, _)) if catalog::find(base).is_some() => BalancerSpec::parse(name)
            .map(|_| name.to_string())
            .map_err(|e| e.to_string()),
        _ => policy_name(name),
    }
}

/// The policy StarPU runs for `--sched` (its name without arguments).
pub fn policy_base(sched: &str) -> &str {
    sched.split_once(':').map_or(sched, |(base, _)| base)
}

/// Looks an application up by name.
pub fn find(name: &str) -> Option<&'static App> {
    APPS.iter().find(|a| a.name == name)
}

/// Value parser of an application name (one of [`APPS`]).
pub fn app_name() -> PossibleValuesParser {
    PossibleValuesParser::new(APPS.iter().map(|a| a.name))
}

/// An application's work: `units()` independent units, processed by one
/// codelet on blocks `[offset, offset + len)`.
///
/// The framework calls, in order: [`prepare`](Workload::prepare) (after
/// `starpu_init`), [`register_shared`](Workload::register_shared) once, then
/// [`register_block`](Workload::register_block) for each block it submits
/// (from the application thread, never from a callback), waits for every
/// task, unregisters every handle (which brings the data back to main
/// memory), calls [`release`](Workload::release), shuts StarPU down and
/// finally [`verify`](Workload::verify).
pub trait Workload {
    /// Total units `W`.
    fn units(&self) -> u64;
    /// The codelet (a C global in `codelets/`). Its `cl_arg` is a
    /// `struct plb_app_task`.
    fn codelet(&self) -> *mut sys::starpu_codelet;
    /// After `starpu_init`, before any registration (load OpenCL programs).
    fn prepare(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// After the last task, before `starpu_shutdown`; called exactly once,
    /// and only after `prepare` succeeded.
    fn release(&mut self) {}
    /// Registers the data every block uses (e.g. a replicated matrix).
    fn register_shared(&mut self, _data: &mut Data) -> Result<(), String> {
        Ok(())
    }
    /// Registers the block `[offset, offset + len)` and returns the task's
    /// handles in the codelet's buffer order.
    fn register_block(
        &mut self,
        data: &mut Data,
        offset: u64,
        len: u64,
    ) -> Result<Vec<Handle>, String>;
    /// What the codelet finds in `plb_app_task.params` (valid as long as the
    /// workload lives); NULL by default.
    fn params(&self) -> *const c_void {
        std::ptr::null()
    }
    /// The work in `units` units, in [`throughput_unit`](Workload::throughput_unit)'s
    /// base unit (flop for `mm`, options for `blackscholes`).
    fn work(&self, units: u64) -> f64;
    /// Name and scale of the throughput: `work / seconds / scale` is printed
    /// as `<value> <name>` (e.g. `("GFLOP/s", 1e9)`).
    fn throughput_unit(&self) -> (&'static str, f64);
    /// Multi-pass applications (k-means): called after each pass over the
    /// `W` units, once its tasks ended and its handles were unregistered;
    /// `Ok(true)` runs another pass (shared data and blocks registered
    /// again, a new split). Default: one pass.
    fn next_pass(&mut self) -> Result<bool, String> {
        Ok(false)
    }
    /// Checks the result against an independent reference.
    fn verify(&self) -> Verification;
}

/// Result of [`Workload::verify`].
#[derive(Debug, Clone, PartialEq)]
pub struct Verification {
    pub ok: bool,
    /// What was checked and the largest error (one line).
    pub detail: String,
}

/// `len` zeros, written now. `vec![0.0; len]` gets lazily mapped zero pages
/// from the allocator, whose first-touch page faults would then land inside
/// the first kernels' measured time.
pub fn zeroed<T: Copy + Default>(len: usize) -> Vec<T> {
    // black_box: the compiler may not assume the contents are zero already
    // and skip the fill.
    let mut v = std::hint::black_box(vec![T::default(); len]);
    v.fill(T::default());
    v
}

/// The input generator of stream `stream` (one per input array) of `seed`
/// (plb-core's SplitMix64).
pub fn input_rng(seed: u64, stream: u64) -> plb_core::rng::Rng {
    let mut r = plb_core::rng::Rng::new(seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F));
    r.next_u64();
    r
}

/// A deliberate scheduling fault (hidden `--inject-fault`), to show that
/// verification catches a lost or repeated block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Fault {
    /// The first block is never submitted (but reported done).
    Drop,
    /// The first block is submitted twice.
    Repeat,
}

/// Options of one `plb app <name>` run.
#[derive(Debug, Clone)]
pub struct Options {
    pub n: u64,
    pub seed: u64,
    /// `STARPU_SCHED`: ours (divisible-load split) or StarPU's (fixed split).
    pub sched: String,
    /// Fixed split: units per task; greedy: its block size (`greedy:<B>`).
    pub block: Option<u64>,
    /// CPU workers (`starpu_conf.ncpus`); StarPU's default when unset.
    pub ncpu: Option<i32>,
    /// Adds one OpenCL worker on the CPU (PoCL): `STARPU_OPENCL_ON_CPUS=1`,
    /// `nopencl = 1`, and 1 CPU worker unless `--ncpu` says otherwise.
    pub opencl: bool,
    pub fault: Option<Fault>,
    /// Writes every task (worker, units, start, end) to this CSV file.
    pub trace: Option<std::path::PathBuf>,
}

/// `plb app <APP> [OPTIONS]`, `plb app list` or `plb app bench`.
#[derive(Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    arg_required_else_help = true,
    after_help = "Exit status 1 when the result is wrong. Example: plb app mm --n 1024 --sched plb-hac --ncpu 2"
)]
pub struct Command {
    #[command(subcommand)]
    command: Option<AppCommand>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum AppCommand {
    /// The applications
    List,
    /// Single-worker throughput per codelet and 2-worker throughput per
    /// policy, every application
    Bench(bench::Options),
    /// Matrix multiplication across MPI ranks (StarPU-MPI), partitioned by
    /// the hierarchical FPM algorithm, PLB-HAC or the paper's baselines;
    /// run it under mpirun, one rank per node
    MmMpi(mm_mpi::Options),
}

/// Prefix of `plb app mm-mpi`'s summary line.
pub const MM_MPI_TAG: &str = "plb-mm-mpi:";

/// `plb app mm-mpi` in a `plb` built without StarPU-MPI: says so.
#[cfg(not(plb_mpi))]
pub mod mm_mpi {
    use std::process::ExitCode;

    use crate::cli::Failure;

    /// Whatever was given (the build cannot run it).
    #[derive(clap::Args, Debug, Clone)]
    pub struct Options {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        args: Vec<String>,
    }

    pub fn run(_: &Options) -> Result<ExitCode, Failure> {
        Err(Failure::setup(
            "this plb was built without StarPU-MPI: it needs the starpumpi pkg-config module of the StarPU it uses and Open MPI (libopenmpi-dev); scripts/setup.sh installs them",
        ))
    }
}

/// Options of one application run.
#[derive(Args)]
struct RunArgs {
    /// The application (plb app list)
    #[arg(
        required = true,
        value_parser = app_name().try_map(|name| find(&name).ok_or("unknown application"))
    )]
    app: Option<&'static App>,
    /// Size (units W follow from it) [default: per application]
    #[arg(long, value_name = "N", value_parser = positive::<u64>())]
    n: Option<u64>,
    /// Seed of the input
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
    /// Ours (greedy, plb-hac, plb-hec, hdss, acosta: blocks from the
    /// divisible-load balancer of that name) or StarPU's (eager, lws,
    /// dmda...: equal tasks of --block units) [default: $STARPU_SCHED, else
    /// greedy]. Ours take the balancer's arguments, e.g. hguided:k=3,min=64
    #[arg(long, value_name = "NAME", value_parser = app_policy)]
    sched: Option<String>,
    /// Units per task (StarPU's policies; default W/32), or greedy's block
    /// size
    #[arg(long, value_name = "B", value_parser = positive::<u64>())]
    block: Option<u64>,
    /// CPU workers [default: StarPU's; 1 with --opencl]
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(i32).range(0..))]
    ncpu: Option<i32>,
    /// Adds one OpenCL worker on the CPU (PoCL)
    #[arg(long)]
    opencl: bool,
    /// A deliberate scheduling fault, which verification must catch
    #[arg(long, value_name = "FAULT", hide = true)]
    inject_fault: Option<Fault>,
    /// Writes every task (worker, offset, units, start, end, kernel
    /// seconds) to this CSV file
    #[arg(long, value_name = "FILE")]
    trace: Option<std::path::PathBuf>,
}

impl Command {
    pub fn run(self) -> Result<ExitCode, Failure> {
        match self.command {
            Some(AppCommand::List) => {
                for a in APPS {
                    println!("{:<14} {}", a.name, a.about);
                }
                Ok(ExitCode::SUCCESS)
            }
            Some(AppCommand::Bench(opts)) => Ok(bench::run(&opts)?),
            Some(AppCommand::MmMpi(opts)) => mm_mpi::run(&opts),
            None => {
                let (app, opts) = self.run.options()?;
                let summary = exec::run(app, &opts)?;
                println!("{}", summary.line());
                Ok(if summary.verification.ok {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                })
            }
        }
    }
}

impl RunArgs {
    /// The application and its run's options; the policy defaults to
    /// `$STARPU_SCHED`, else `greedy`.
    fn options(self) -> Result<(&'static App, Options), Failure> {
        let app = self.app.ok_or("no application given")?;
        let sched = match self.sched {
            Some(s) => s,
            None => match std::env::var("STARPU_SCHED") {
                Ok(s) if !s.trim().is_empty() => {
                    app_policy(&s).map_err(|e| Failure::setup(format!("$STARPU_SCHED: {e}")))?
                }
                _ => "greedy".to_string(),
            },
        };
        let opts = Options {
            n: self.n.unwrap_or(app.default_n),
            seed: self.seed,
            sched,
            block: self.block,
            ncpu: self.ncpu,
            opencl: self.opencl,
            fault: self.inject_fault,
            trace: self.trace,
        };
        Ok((app, opts))
    }
}

/// What one run measured (printed as one line by [`Summary::line`]).
#[derive(Debug, Clone)]
pub struct Summary {
    pub app: &'static str,
    pub n: u64,
    pub policy: String,
    /// `divisible` (our policies) or `fixed:<B>` (StarPU's).
    pub split: String,
    /// One label per StarPU worker (`cpu0`, `opencl1`...).
    pub workers: Vec<String>,
    pub tasks: u64,
    /// `W`, the units of one pass.
    pub total_units: u64,
    /// Passes over the `W` units (iterations of a multi-pass workload).
    pub passes: u64,
    /// Units processed per worker over all passes (same order as `workers`).
    pub units: Vec<u64>,
    /// Kernel seconds per worker (emulated time included).
    pub busy_s: Vec<f64>,
    /// When each worker's last task ended, seconds from the makespan's
    /// start (0: no task).
    pub finish_s: Vec<f64>,
    /// From the first registration to the end of the last unregistration
    /// (data back in main memory); StarPU start-up and input generation
    /// excluded.
    pub makespan_s: f64,
    /// `work(W) / makespan / scale`.
    pub throughput: f64,
    /// Sum over workers of `work(units_w) / kernel_time_w / scale`.
    pub kernel_throughput: f64,
    pub unit: &'static str,
    pub verification: Verification,
}

/// Prefix of the summary line.
pub const TAG: &str = "plb-app:";

impl Summary {
    pub fn line(&self) -> String {
        let units: Vec<String> = self.units.iter().map(u64::to_string).collect();
        let secs = |v: &[f64]| {
            v.iter()
                .map(|s| format!("{s:.6}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        format!(
            "{TAG} app={} n={} policy={} split={} workers={} tasks={} total_units={} passes={} units={} busy_s={} finish_s={} makespan_s={:.6} \
             throughput={:.3} unit={} kernel_throughput={:.3} verify={} check=\"{}\"",
            self.app,
            self.n,
            self.policy,
            self.split,
            self.workers.join(","),
            self.tasks,
            self.total_units,
            self.passes,
            units.join(","),
            secs(&self.busy_s),
            secs(&self.finish_s),
            self.makespan_s,
            self.throughput,
            self.unit,
            self.kernel_throughput,
            if self.verification.ok { "ok" } else { "FAILED" },
            self.verification.detail,
        )
    }
}

/// The value of `key=` in a summary line (up to the next space).
pub fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let pat = format!(" {key}=");
    let start = line.find(&pat)? + pat.len();
    line[start..].split_whitespace().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_deterministic_and_in_range() {
        let a: Vec<f32> = {
            let mut r = input_rng(7, 1);
            (0..100).map(|_| r.uniform_f32(2.0, 3.0)).collect()
        };
        let mut r = input_rng(7, 1);
        for &x in &a {
            assert_eq!(x, r.uniform_f32(2.0, 3.0));
            assert!((2.0..3.0).contains(&x));
        }
        let mut other = input_rng(7, 2);
        assert_ne!(a[0], other.uniform_f32(2.0, 3.0));
        assert!((0..1000).all(|_| r.below(10) < 10));
    }

    #[test]
    fn app_names_are_unique() {
        for (i, a) in APPS.iter().enumerate() {
            assert!(APPS[..i].iter().all(|b| b.name != a.name), "{}", a.name);
            assert!(!["list", "bench", "help"].contains(&a.name));
        }
    }

    #[test]
    fn summary_fields_parse_back() {
        let s = Summary {
            app: "mm",
            n: 64,
            policy: "eager".into(),
            split: "fixed:2".into(),
            workers: vec!["cpu0".into(), "cpu1".into()],
            tasks: 32,
            total_units: 64,
            passes: 1,
            units: vec![30, 34],
            busy_s: vec![0.4, 0.45],
            finish_s: vec![0.41, 0.5],
            makespan_s: 0.5,
            throughput: 1.25,
            kernel_throughput: 2.0,
            unit: "GFLOP/s",
            verification: Verification {
                ok: true,
                detail: "all good".into(),
            },
        };
        let line = s.line();
        assert_eq!(field(&line, "app"), Some("mm"));
        assert_eq!(field(&line, "throughput"), Some("1.250"));
        assert_eq!(field(&line, "verify"), Some("ok"));
        assert_eq!(field(&line, "units"), Some("30,34"));
        assert_eq!(field(&line, "finish_s"), Some("0.410000,0.500000"));
    }
}
