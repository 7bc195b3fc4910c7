//! `plb app mm-mpi`: the paper's parallel matrix multiplication across
//! nodes (`../shared/papers/hierarchical-fpm-partitioning.md` §4) on
//! StarPU-MPI, one MPI rank per node, each rank's StarPU workers the
//! node's devices.
//!
//! 1. **Start**: once StarPU-MPI runs, every rank checks that all ranks
//!    got the same options and `PLB_*` environment (refused otherwise, on
//!    every rank, which then stops StarPU-MPI); the
//!    per-rank heterogeneity is part of that shared configuration
//!    (`--rank-emulate R=SPEC`, `--opencl-ranks`).
//! 2. **Partitioning**: the head rank runs the INPA
//!    ([`plb_core::cluster::inpa_with`]): each round it broadcasts the
//!    nodes' rectangles (CMA arrangement), every rank runs its IDPA on its
//!    own workers (real kernel runs of `C'_j += A_(b)·B_(b)j`, pinned one
//!    task per worker) and the times are gathered. Every collective has a
//!    deadline (`--timeout` at least, growing with the measured steps:
//!    [`plb_core::cluster::comm::Deadline`]).
//! 3. **Multiplication**: each rank generates its own rectangles of A and
//!    B (every entry a hash of the seed and its position,
//!    [`input_entry`]: no rank holds a whole matrix, nothing is sent);
//!    then `G = N/b` pivot steps: the owners of pivot column `k` of A send
//!    it along rows, the owners of pivot row `k` of B along columns
//!    (StarPU-MPI), and each node updates its C' with one task per device
//!    on its slice of columns.
//! 4. **Check**: each rank keeps its C' and checks it: every column
//!    updated exactly `G` times, and C = A·B on the sampled entries inside
//!    its rectangle against double precision (the rows of A and columns of
//!    B it needs generated again). Rank 0 gathers the verdicts (a few
//!    numbers per rank) and checks that the rectangles tile C. Memory per
//!    rank: its three rectangles and two panels; `--n` and the workers per
//!    rank have no other limit.
//!
//! Single precision (the codelet of `plb app mm`); the paper uses dgemm,
//! which changes constants, not the algorithm.

// Unsafe code is denied in the workspace; allowed here for the codelet's
// C globals and StarPU data registration (every unsafe block has a
// `// SAFETY:` comment).
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::ffi::c_int;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use plb_core::cluster::cma::{self, Rect};
use plb_core::cluster::{Algorithm, HierConfig, LevelConfig};
use starpu_plb::divisible::DivisibleRun;
use starpu_plb::emulation_spec::Emulation;
use starpu_sys as sys;

use super::distributed::{self, NodeKernel, Partition, fatal};
use super::exec::{Session, divisible_pass, run_pinned};
use super::mpi::{Mpi, launcher_rank, say};
use super::{Data, Handle, MM_MPI_TAG, Options as RunOptions, Verification, Workload, input_rng};
use crate::cli::Failure;
use plb_core::cluster::comm::{Comm as _, bytes_f64, f64_bytes};

unsafe extern "C" {
    static mut plb_mm_cl: sys::starpu_codelet;
    fn plb_mm_init() -> c_int;
    fn plb_mm_fini();
}

/// Options of `plb app mm-mpi` (identical on every rank).
#[derive(Args, Debug, Clone)]
#[command(after_help = "Run under mpirun, one rank per node, e.g.\n  \
    mpirun -np 2 --allow-run-as-root --oversubscribe --bind-to none \\\n    \
    plb app mm-mpi --n 1024 --b 64 --rank-emulate 1=0:speed=0.5\n\
    Exit status 1 when the result or the coverage is wrong, 2 when refused.")]
pub struct Options {
    /// Matrix size N (A, B, C are N x N); a multiple of --b
    #[arg(long, default_value_t = 1024)]
    pub n: u64,
    /// Block size b (the grid has (N/b)^2 blocks)
    #[arg(long, default_value_t = 128)]
    pub b: u64,
    /// Partitioning: fpm-hier, plb-hac, multiple-cpm, single-cpm, homogeneous
    #[arg(long, default_value = "fpm-hier", value_parser = parse_algo)]
    pub algo: Algorithm,
    /// Seed of A and B
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// INPA convergence: node times within this relative spread
    #[arg(long, default_value_t = 0.05)]
    pub eps_nodes: f64,
    /// IDPA convergence: device times within this relative spread
    #[arg(long, default_value_t = 0.05)]
    pub eps_devices: f64,
    /// Most rounds of each level
    #[arg(long, default_value_t = 12)]
    pub max_rounds: usize,
    /// CPU workers per rank
    #[arg(long, default_value_t = 1)]
    pub ncpu: i32,
    /// Ranks that also get a PoCL OpenCL worker, e.g. 1,3
    #[arg(long, value_delimiter = ',', value_name = "RANKS")]
    pub opencl_ranks: Vec<usize>,
    /// EMULATED heterogeneity of one rank: RANK=PLB_EMULATE-spec, e.g.
    /// 1=0:speed=0.25 (repeatable)
    #[arg(long = "rank-emulate", value_name = "RANK=SPEC")]
    pub rank_emulate: Vec<String>,
    /// Prints every INPA round (areas, node times) on rank 0
    #[arg(long)]
    pub verbose: bool,
    /// Floor of the deadline of every collective step and data exchange,
    /// seconds: a wait lasts at most this, or 10 times the longest step
    /// measured so far (a partitioning round's slowest node benchmark, a
    /// pivot step) when that is longer; then the job is ended
    #[arg(long, default_value_t = 60.0)]
    pub timeout: f64,
    /// A deliberate fault: die:RANK (exits at once), hang:RANK (never
    /// answers), stall:RANK (never answers its first pivot step's data
    /// exchange), skip:RANK or repeat:RANK (loses or repeats the rank's
    /// first update of C), idpa:RANK (its node benchmark fails)
    #[arg(long, hide = true, value_name = "FAULT")]
    pub inject_fault: Option<String>,
}

fn parse_algo(s: &str) -> Result<Algorithm, String> {
    Algorithm::parse(s).ok_or_else(|| {
        let names: Vec<&str> = Algorithm::ALL.iter().map(|a| a.name()).collect();
        format!("unknown algorithm `{s}` (one of {})", names.join(", "))
    })
}

/// Message tags: (phase, step, matrix, source, destination) made unique.
fn tag(phase: u64, step: u64, matrix: u64, src: usize, dst: usize, g: u64, q: usize) -> i64 {
    let q = q as u64;
    ((((phase * (g + 1) + step) * 3 + matrix) * q + src as u64) * q + dst as u64) as i64
}

/// `--rank-emulate` entries by rank, each spec checked.
fn rank_emulation(entries: &[String]) -> Result<BTreeMap<usize, String>, String> {
    let mut map = BTreeMap::new();
    for e in entries {
        let (r, spec) = e.split_once('=').ok_or_else(|| {
            format!("--rank-emulate `{e}`: expected RANK=SPEC, e.g. 1=0:speed=0.25")
        })?;
        let r: usize = r
            .trim()
            .parse()
            .map_err(|_| format!("--rank-emulate `{e}`: `{r}` is not a rank"))?;
        Emulation::parse(spec).map_err(|err| format!("--rank-emulate `{e}`: {err}"))?;
        if map.insert(r, spec.to_string()).is_some() {
            return Err(format!("--rank-emulate: rank {r} given twice"));
        }
    }
    Ok(map)
}

/// What must be equal on every rank: the options and the `PLB_*`
/// environment (`PLB_EMULATE` excepted when `--rank-emulate` set it).
fn fingerprint(o: &Options) -> String {
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("PLB_"))
        .filter(|(k, _)| k != "PLB_EMULATE" || o.rank_emulate.is_empty())
        .collect();
    env.sort();
    let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(
        "n={} b={} W={} algo={} seed={} eps-nodes={} eps-devices={} max-rounds={} ncpu={} opencl-ranks={:?} rank-emulate={:?} timeout={} fault={:?} env[{}]",
        o.n,
        o.b,
        (o.n / o.b.max(1)).pow(2),
        o.algo,
        o.seed,
        o.eps_nodes,
        o.eps_devices,
        o.max_rounds,
        o.ncpu,
        o.opencl_ranks,
        o.rank_emulate,
        o.timeout,
        o.inject_fault,
        env.join(" ")
    )
}

/// The first field where two fingerprints differ.
fn first_difference(a: &str, b: &str) -> String {
    let (fa, fb): (Vec<&str>, Vec<&str>) = (a.split(' ').collect(), b.split(' ').collect());
    for i in 0..fa.len().max(fb.len()) {
        let (x, y) = (
            fa.get(i).copied().unwrap_or("-"),
            fb.get(i).copied().unwrap_or("-"),
        );
        if x != y {
            return format!("`{y}` where rank 0 has `{x}`");
        }
    }
    "a field".into()
}

const FINGERPRINT_BYTES: usize = 4096;

/// Runs `plb app mm-mpi` on this rank.
pub fn run(o: &Options) -> Result<ExitCode, Failure> {
    if !(o.timeout > 0.0 && o.timeout.is_finite()) {
        return Err(Failure::setup("--timeout must be > 0"));
    }
    let emulate = rank_emulation(&o.rank_emulate).map_err(Failure::setup)?;
    let hint = launcher_rank();
    if !emulate.is_empty() {
        let r = hint.ok_or_else(|| {
            Failure::setup("--rank-emulate needs an MPI launcher that says the rank (mpirun)")
        })?;
        if std::env::var_os("PLB_EMULATE").is_some() {
            return Err(Failure::setup(
                "set PLB_EMULATE or --rank-emulate, not both",
            ));
        }
        if let Some(spec) = emulate.get(&r) {
            // SAFETY: single-threaded: neither MPI nor StarPU started yet.
            unsafe { std::env::set_var("PLB_EMULATE", spec) };
        }
    }
    separate_calibration_files();
    unbind_progress_threads();
    // Every task is pinned to its worker: the policy does not place
    // anything; eager is StarPU's simplest. The environment is written
    // now, while this process has no other thread (MPI starts some).
    let sched = "eager";
    super::exec::set_starpu_environment(sched, !o.opencl_ranks.is_empty());
    let mpi = Mpi::init(o.timeout).map_err(Failure::setup)?;
    if !emulate.is_empty() && hint != Some(mpi.rank) {
        return Err(Failure::setup(format!(
            "the launcher said rank {hint:?}, MPI says {}",
            mpi.rank
        )));
    }
    let ropts = RunOptions {
        n: o.n,
        seed: o.seed,
        sched: sched.into(),
        block: None,
        ncpu: Some(o.ncpu),
        opencl: o.opencl_ranks.contains(&mpi.rank),
        fault: None,
        trace: None,
    };
    let session = Session::start_mpi(&ropts).map_err(Failure::setup)?;
    // SAFETY: StarPU is initialised, no task submitted yet.
    let rc = unsafe { plb_mm_init() };
    if rc != 0 {
        return Err(Failure::setup(format!(
            "mm: loading the OpenCL kernel failed ({rc})"
        )));
    }
    let workers = session.workers();
    let result = match agree(o, &mpi, &emulate) {
        Some(refused) => Ok(refused),
        None => {
            inject_fault(o, &mpi);
            Run::new(o, &mpi, workers, &emulate)
                .and_then(|mut r| r.all())
                .map(|ok| {
                    if ok {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::from(1)
                    }
                })
        }
    };
    // SAFETY: after the last task, before StarPU-MPI stops.
    unsafe { plb_mm_fini() };
    drop(session);
    result.map_err(Failure::from)
}

/// Step 1 (the module's list): the same configuration everywhere, then
/// the checks that need the rank count. `Some(exit code)` when this rank
/// refuses to go on (every rank decides the same from the same gathered
/// configurations). Runs once StarPU-MPI has started, so its collective
/// is StarPU-MPI's and the ranks sleep until every one has answered (or
/// the deadline).
fn agree(o: &Options, mpi: &Mpi, emulate: &BTreeMap<usize, String>) -> Option<ExitCode> {
    let mut fp = fingerprint(o).into_bytes();
    fp.resize(FINGERPRINT_BYTES, b' ');
    let all = mpi
        .allgather("configuration check", &fp)
        .unwrap_or_else(|e| fatal(mpi, e));
    let differ: Vec<usize> = (1..mpi.size).filter(|&r| all[r] != all[0]).collect();
    if let Some(&r) = differ.first() {
        let text = |b: &[u8]| String::from_utf8_lossy(b).trim_end().to_string();
        say(&format!(
            "plb app mm-mpi: rank {}: refused: rank(s) {differ:?} started with a configuration different from rank 0's (rank {r} has {}); every rank needs the same options and PLB_* environment",
            mpi.rank,
            first_difference(&text(&all[0]), &text(&all[r]))
        ));
        return Some(ExitCode::from(2));
    }
    let g = o.n / o.b.max(1);
    let problem = if o.b == 0 || o.n % o.b != 0 {
        Some(format!("--n {} is not a multiple of --b {}", o.n, o.b))
    } else if g * g < mpi.size as u64 {
        Some(format!(
            "{g} x {g} blocks for {} ranks: raise --n or lower --b",
            mpi.size
        ))
    } else if o.max_rounds == 0 || !(o.eps_nodes >= 0.0 && o.eps_devices >= 0.0) {
        Some("--max-rounds must be >= 1 and --eps-* >= 0".into())
    } else if o.opencl_ranks.iter().any(|&r| r >= mpi.size)
        || emulate.keys().any(|&r| r >= mpi.size)
    {
        Some(format!(
            "a rank in --opencl-ranks or --rank-emulate is not below {}",
            mpi.size
        ))
    } else {
        None
    };
    if let Some(p) = problem {
        say(&format!("plb app mm-mpi: rank {}: refused: {p}", mpi.rank));
        return Some(ExitCode::from(2));
    }
    None
}

/// Ranks sharing a host: StarPU-MPI binds each rank's progress thread to
/// a core, and with as many ranks as cores a worker then shares its core
/// with a progress thread that spins (a third-party StarPU-MPI program
/// stalled for minutes that way on 2 cores). `STARPU_MPI_NOBIND=1`
/// unless the user set it; one rank per host changes nothing.
fn unbind_progress_threads() {
    let local_size = ["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"]
        .iter()
        .find_map(|n| std::env::var(n).ok()?.parse::<usize>().ok());
    if local_size.is_some_and(|n| n > 1) && std::env::var_os("STARPU_MPI_NOBIND").is_none() {
        // SAFETY: single-threaded: neither MPI nor StarPU started yet.
        unsafe { std::env::set_var("STARPU_MPI_NOBIND", "1") };
    }
}

/// Several ranks on one host would read and write the same StarPU
/// calibration files (`~/.starpu/sampling/bus/<host>.*`) at once, and a
/// rank reading a file another is writing aborts. Each local rank gets its
/// own `STARPU_HOSTNAME` (`<host>-local<L>`, stable from run to run) unless
/// the user set one. One rank per host (a real cluster) changes nothing.
fn separate_calibration_files() {
    let var = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| std::env::var(n).ok()?.parse::<usize>().ok())
    };
    let local_size = var(&["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"]);
    let local_rank = var(&["OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"]);
    if std::env::var_os("STARPU_HOSTNAME").is_some() {
        return;
    }
    if let (Some(size), Some(local)) = (local_size, local_rank) {
        if size > 1 {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "host".into());
            // SAFETY: single-threaded: neither MPI nor StarPU started yet.
            unsafe { std::env::set_var("STARPU_HOSTNAME", format!("{host}-local{local}")) };
        }
    }
}

fn inject_fault(o: &Options, mpi: &Mpi) {
    let Some(f) = &o.inject_fault else { return };
    let (kind, rank) = f.split_once(':').unwrap_or((f, "1"));
    if rank.parse::<usize>().ok() != Some(mpi.rank) {
        return;
    }
    match kind {
        "die" => {
            say(&format!(
                "plb app mm-mpi: rank {}: --inject-fault die: exiting now",
                mpi.rank
            ));
            std::process::exit(9);
        }
        "hang" => {
            say(&format!(
                "plb app mm-mpi: rank {}: --inject-fault hang: never answering",
                mpi.rank
            ));
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
        "skip" | "repeat" | "idpa" | "stall" => {}
        _ => say(&format!(
            "plb app mm-mpi: rank {}: unknown fault `{f}` ignored",
            mpi.rank
        )),
    }
}

/// The messages of one pivot step for one node: what it sends (to whom,
/// from which rows or columns of its rectangle) and receives.
#[derive(Debug, Clone, PartialEq)]
struct Piece {
    peer: usize,
    /// 0: a piece of A's pivot column (rows `lo..hi` in blocks); 1: of
    /// B's pivot row (columns `lo..hi`).
    matrix: u64,
    lo: u64,
    hi: u64,
}

/// Pieces node `me` sends and receives at pivot step `k` (self included:
/// copied locally).
fn plan(rects: &[Rect], me: usize, k: u64) -> (Vec<Piece>, Vec<Piece>) {
    let (mut sends, mut recvs) = (Vec::new(), Vec::new());
    let r = rects[me];
    let overlap = |a0: u64, an: u64, b0: u64, bn: u64| (a0.max(b0), (a0 + an).min(b0 + bn));
    let within = |k: u64, start: u64, len: u64| k >= start && k < start + len;
    for (i, o) in rects.iter().enumerate() {
        if o.area() == 0 || r.area() == 0 {
            continue;
        }
        let piece = |matrix, (lo, hi)| Piece {
            peer: i,
            matrix,
            lo,
            hi,
        };
        // A(rows, k) travels along rows from whoever has column k;
        // B(k, cols) along columns from whoever has row k.
        let pivots = [
            (
                0,
                overlap(r.row, r.rows, o.row, o.rows),
                within(k, r.col, r.cols),
                within(k, o.col, o.cols),
            ),
            (
                1,
                overlap(r.col, r.cols, o.col, o.cols),
                within(k, r.row, r.rows),
                within(k, o.row, o.rows),
            ),
        ];
        for (matrix, span, mine, theirs) in pivots {
            if span.0 < span.1 {
                if mine {
                    sends.push(piece(matrix, span));
                }
                if theirs {
                    recvs.push(piece(matrix, span));
                }
            }
        }
    }
    (sends, recvs)
}

/// Blocks moved between different nodes over the whole multiplication
/// with this arrangement (each piece is `(hi - lo)` blocks of `b x b`).
pub fn pivot_traffic_blocks(rects: &[Rect], g: u64) -> u64 {
    let mut total = 0;
    for k in 0..g {
        for me in 0..rects.len() {
            let (sends, _) = plan(rects, me, k);
            total += sends
                .iter()
                .filter(|p| p.peer != me)
                .map(|p| p.hi - p.lo)
                .sum::<u64>();
        }
    }
    total
}

/// Copies rows `r0..r0+nr`, columns `c0..c0+nc` of the column-major
/// matrix `m` (leading dimension `ld`) into a packed `nr x nc` buffer.
fn pack(m: &[f32], ld: usize, r0: usize, nr: usize, c0: usize, nc: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(nr * nc);
    for c in c0..c0 + nc {
        out.extend_from_slice(&m[c * ld + r0..c * ld + r0 + nr]);
    }
    out
}

/// The reverse of [`pack`].
fn unpack(m: &mut [f32], ld: usize, r0: usize, nr: usize, c0: usize, src: &[f32]) {
    for (j, col) in src.chunks(nr.max(1)).enumerate() {
        let c = c0 + j;
        m[c * ld + r0..c * ld + r0 + nr].copy_from_slice(col);
    }
}

/// Entry `(i, j)` of input matrix `m` (1: A, 2: B; `n` × `n`) of the run
/// with `seed`: a value in [0, 1) from a hash of its position, so that
/// any rank generates any block, row or column without the others.
fn input_entry(seed: u64, m: u64, i: usize, j: usize, n: usize) -> f32 {
    let at = (j as u64).wrapping_mul(n as u64).wrapping_add(i as u64);
    let mut x =
        seed ^ m.wrapping_mul(0xA076_1D64_78BD_642F) ^ at.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // SplitMix64's finaliser.
    x ^= x >> 30;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    (x >> 40) as f32 / (1u64 << 24) as f32
}

/// The entries of C checked: one per block (of `b` × `b`) and 1024 more,
/// the same list on every rank (drawn from `seed`).
fn samples(seed: u64, n: usize, b: usize) -> Vec<(usize, usize)> {
    let g = n / b.max(1);
    let mut rng = input_rng(seed, 3);
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(g * g + 1024);
    for bi in 0..g {
        for bj in 0..g {
            out.push((
                bi * b + rng.below(b as u64) as usize,
                bj * b + rng.below(b as u64) as usize,
            ));
        }
    }
    out.extend((0..1024).map(|_| (rng.below(n as u64) as usize, rng.below(n as u64) as usize)));
    out
}

/// Checks the sampled entries of C inside this rank's rectangle `(r0,
/// rows, c0, cols)` (element rows `r0..r0 + rows`, columns
/// `c0..c0 + cols`; `c` its part of C, column-major) against A·B summed in
/// double precision from [`input_entry`]. Returns the entries found wrong
/// (relative error above 1e-3), the largest relative error and the
/// entries checked.
fn verify_own(
    seed: u64,
    n: usize,
    b: usize,
    (r0, rows, c0, cols): (usize, usize, usize, usize),
    c: &[f32],
) -> (usize, f64, usize) {
    let (mut bad, mut worst, mut checked) = (0, 0.0f64, 0);
    for (i, j) in samples(seed, n, b) {
        if !(r0..r0 + rows).contains(&i) || !(c0..c0 + cols).contains(&j) {
            continue;
        }
        let (mut sum, mut abs) = (0.0f64, 0.0f64);
        for k in 0..n {
            let p =
                f64::from(input_entry(seed, 1, i, k, n)) * f64::from(input_entry(seed, 2, k, j, n));
            sum += p;
            abs += p.abs();
        }
        let got = c[(i - r0) + (j - c0) * rows];
        let err = (f64::from(got) - sum).abs() / abs.max(f64::MIN_POSITIVE);
        if err.is_nan() || err > 1e-3 {
            bad += 1;
        }
        worst = if err.is_nan() {
            f64::INFINITY
        } else {
            worst.max(err)
        };
        checked += 1;
    }
    (bad, worst, checked)
}

/// This rank's part of the product and what it cost.
struct Product {
    /// Its part of C (column-major, its rectangle).
    c: Vec<f32>,
    /// Per column of its rectangle: the updates it received.
    counts: Vec<u32>,
    comm_s: f64,
    compute_s: f64,
    /// Blocks sent to other ranks over the pivot steps.
    sent_blocks: u64,
    generate_s: f64,
    multiply_s: f64,
}

/// One rank's run.
struct Run<'a> {
    o: &'a Options,
    mpi: &'a Mpi,
    workers: Vec<String>,
    emulate: &'a BTreeMap<usize, String>,
    g: u64,
    b: u64,
}

/// The tasks of one kernel run (worker, handles) and the columns
/// `(offset, len)` each updates.
type Slices = (Vec<(i32, Vec<Handle>)>, Vec<(usize, usize)>);

/// Per-rank figures gathered at rank 0: the fixed header's length (the
/// device split follows it), and where its own checks start in it: the
/// first column of C not updated G times (-1: none) and that column's
/// count, then the sampled entries found wrong, the largest relative
/// error and the entries checked.
const HEADER: usize = 13;
const CHECK: usize = 8;

impl<'a> Run<'a> {
    fn new(
        o: &'a Options,
        mpi: &'a Mpi,
        workers: Vec<String>,
        emulate: &'a BTreeMap<usize, String>,
    ) -> Result<Run<'a>, String> {
        if workers.is_empty() {
            return Err(format!("no worker on rank {}", mpi.rank));
        }
        Ok(Run {
            o,
            mpi,
            workers,
            emulate,
            g: o.n / o.b,
            b: o.b,
        })
    }

    /// Registers the panel of A, and per worker with columns its slices of
    /// B's panel and of C; the tasks to run.
    fn slices(
        &self,
        data: &mut Data,
        a: &mut [f32],
        bp: &mut [f32],
        c: &mut [f32],
        rows: usize,
        cols: &[u64],
    ) -> Result<Slices, String> {
        let b = self.b as usize;
        let mut ranges = Vec::new();
        // SAFETY: `a` holds rows·b elements, untouched until unregistered.
        let ah = unsafe { data.matrix(a.as_mut_ptr(), rows, rows, b)? };
        let mut tasks = Vec::new();
        let mut off = 0usize;
        for (j, &w) in cols.iter().enumerate() {
            let w = w as usize;
            if w == 0 {
                continue;
            }
            // SAFETY: columns off..off+w of B's panel (b rows) and of C
            // (`rows` rows) are inside the buffers (Σ cols = their
            // columns), disjoint between workers, untouched until
            // unregistered.
            let (bh, ch) = unsafe {
                (
                    data.matrix(bp.as_mut_ptr().add(off * b), b, b, w)?,
                    data.matrix(c.as_mut_ptr().add(off * rows), rows, rows, w)?,
                )
            };
            tasks.push((j as i32, vec![ah, bh, ch]));
            ranges.push((off, w));
            off += w;
        }
        Ok((tasks, ranges))
    }

    /// `skip` or `repeat` when `--inject-fault skip:R` / `repeat:R` names
    /// this rank and `k` is the first pivot step: a lost or repeated update
    /// that the coverage check and the verification must catch.
    fn step_fault(&self, k: u64) -> Option<&'static str> {
        if k != 0 {
            return None;
        }
        ["skip", "repeat"]
            .into_iter()
            .find(|kind| self.fault_here(kind))
    }

    /// Whether `--inject-fault KIND:R` names this rank.
    fn fault_here(&self, kind: &str) -> bool {
        self.o
            .inject_fault
            .as_deref()
            .and_then(|f| f.split_once(':'))
            .is_some_and(|(k, r)| k == kind && r.parse::<usize>().ok() == Some(self.mpi.rank))
    }

    /// Everything after the start; `Ok(true)` when verified.
    fn all(&mut self) -> Result<bool, String> {
        let (rank, b) = (self.mpi.rank, self.b as usize);
        let t0 = Instant::now();
        let cfg = HierConfig {
            algo: self.o.algo,
            grid: self.g,
            block: self.b,
            nodes: LevelConfig {
                eps: self.o.eps_nodes,
                max_rounds: self.o.max_rounds,
            },
            devices: LevelConfig {
                eps: self.o.eps_devices,
                max_rounds: self.o.max_rounds,
            },
        };
        let Partition {
            rects,
            split,
            outcome,
        } = distributed::partition(self.mpi, &cfg, &*self, self.o.verbose)?;
        let partition_s = t0.elapsed().as_secs_f64();
        let cols = rects[rank].cols as usize * b;
        if split.iter().sum::<u64>() != cols as u64 {
            return Err(format!(
                "rank {rank}: device split {split:?} does not cover {cols} columns"
            ));
        }
        let product = self.multiply(&rects, &split)?;
        Ok(self.check_and_report(&rects, &split, outcome.as_ref(), product, partition_s))
    }

    /// This rank's rectangles of A and B, generated, then the `G` pivot
    /// steps; its part of C.
    fn multiply(&self, rects: &[Rect], split: &[u64]) -> Result<Product, String> {
        let (q, rank, g, b) = (self.mpi.size, self.mpi.rank, self.g, self.b as usize);
        let me = rects[rank];
        let (rows, cols) = (me.rows as usize * b, me.cols as usize * b);
        let n = self.o.n as usize;
        // Each rank generates its own blocks of A and B (those of its
        // rectangle of C): no rank holds a whole matrix.
        let t1 = Instant::now();
        let (r0, c0) = (me.row as usize * b, me.col as usize * b);
        let generate = |m: u64| -> Vec<f32> {
            let mut v = Vec::with_capacity(rows * cols);
            for j in c0..c0 + cols {
                v.extend((r0..r0 + rows).map(|i| input_entry(self.o.seed, m, i, j, n)));
            }
            v
        };
        let a = generate(1);
        let bl = generate(2);
        let generate_s = t1.elapsed().as_secs_f64();
        // The G pivot steps.
        let t2 = Instant::now();
        let mut c = super::zeroed(rows * cols);
        let mut counts = vec![0u32; cols];
        let mut comm_s = 0.0;
        let mut compute_s = 0.0;
        let mut sent_blocks = 0u64;
        let mut cdata = Data::default();
        // The node's own PLB-HAC (`--algo plb-hac`), across pivot steps.
        let mut inside: Option<Arc<DivisibleRun>> = None;
        let mut apanel = vec![0f32; rows * b];
        let mut bpanel = vec![0f32; b * cols];
        let result = (|| -> Result<(), String> {
            for k in 0..g {
                let tc = Instant::now();
                let (sp, rp) = plan(rects, rank, k);
                let mut out: Vec<(Vec<f32>, usize, i64)> = Vec::new();
                for p in &sp {
                    let piece = if p.matrix == 0 {
                        let kk = (k - me.col) as usize * b;
                        pack(
                            &a,
                            rows,
                            (p.lo - me.row) as usize * b,
                            (p.hi - p.lo) as usize * b,
                            kk,
                            b,
                        )
                    } else {
                        let kk = (k - me.row) as usize * b;
                        pack(
                            &bl,
                            rows,
                            kk,
                            b,
                            (p.lo - me.col) as usize * b,
                            (p.hi - p.lo) as usize * b,
                        )
                    };
                    if p.peer == rank {
                        if p.matrix == 0 {
                            unpack(
                                &mut apanel,
                                rows,
                                (p.lo - me.row) as usize * b,
                                (p.hi - p.lo) as usize * b,
                                0,
                                &piece,
                            );
                        } else {
                            unpack(&mut bpanel, b, 0, b, (p.lo - me.col) as usize * b, &piece);
                        }
                    } else {
                        sent_blocks += p.hi - p.lo;
                        out.push((piece, p.peer, tag(0, k, p.matrix, rank, p.peer, g, q)));
                    }
                }
                let mut inbox: Vec<(Vec<f32>, &Piece)> = rp
                    .iter()
                    .filter(|p| p.peer != rank)
                    .map(|p| (vec![0f32; (p.hi - p.lo) as usize * b * b], p))
                    .collect();
                if k == 0 && self.fault_here("stall") {
                    say(&format!(
                        "plb app mm-mpi: rank {rank}: --inject-fault stall: never exchanging"
                    ));
                    loop {
                        std::thread::sleep(std::time::Duration::from_secs(3600));
                    }
                }
                {
                    let sends: Vec<(&[f32], usize, i64)> =
                        out.iter().map(|(v, p, t)| (v.as_slice(), *p, *t)).collect();
                    let mut recvs: Vec<(&mut [f32], usize, i64)> = inbox
                        .iter_mut()
                        .map(|(v, p)| {
                            (
                                v.as_mut_slice(),
                                p.peer,
                                tag(0, k, p.matrix, p.peer, rank, g, q),
                            )
                        })
                        .collect();
                    self.mpi
                        .exchange("pivot step", &sends, &mut recvs)
                        .unwrap_or_else(|e| fatal(self.mpi, e));
                }
                for (v, p) in &inbox {
                    if p.matrix == 0 {
                        unpack(
                            &mut apanel,
                            rows,
                            (p.lo - me.row) as usize * b,
                            (p.hi - p.lo) as usize * b,
                            0,
                            v,
                        );
                    } else {
                        unpack(&mut bpanel, b, 0, b, (p.lo - me.col) as usize * b, v);
                    }
                }
                comm_s += tc.elapsed().as_secs_f64();
                let fault = self.step_fault(k);
                if me.area() == 0 || fault == Some("skip") {
                    continue;
                }
                let tk = Instant::now();
                let ranges = if self.o.algo == Algorithm::PlbHac && split.len() > 1 {
                    // The node's own PLB-HAC: blocks of columns through the
                    // divisible-load API, its models kept from step to step
                    // (one worker has nothing to balance: one task).
                    let mut step = PanelUpdate {
                        a: apanel.as_mut_ptr(),
                        bp: bpanel.as_mut_ptr(),
                        c: c.as_mut_ptr(),
                        rows,
                        cols,
                        b,
                        a_handle: None,
                    };
                    divisible_pass(&mut step, "plb-hac", &mut inside)?
                        .into_iter()
                        .map(|(_, off, len)| (off as usize, len as usize))
                        .collect::<Vec<_>>()
                } else {
                    let (mut tasks, mut ranges) =
                        self.slices(&mut cdata, &mut apanel, &mut bpanel, &mut c, rows, split)?;
                    if fault == Some("repeat") {
                        // A second task on the first slice (StarPU orders
                        // the two read-write accesses to C).
                        if let (Some(t), Some(r)) =
                            (tasks.first().cloned(), ranges.first().copied())
                        {
                            tasks.push(t);
                            ranges.push(r);
                        }
                    }
                    let secs = run_pinned(&raw mut plb_mm_cl, &tasks);
                    // The panels are refilled next step: unregistered now
                    // (C's slices too; data back in main memory).
                    cdata.unregister_all();
                    let secs = secs?;
                    debug_assert_eq!(secs.len(), ranges.len());
                    ranges
                };
                // Each task that ran counts once on the columns it updated.
                for (off, w) in &ranges {
                    for cnt in &mut counts[*off..off + w] {
                        *cnt += 1;
                    }
                }
                compute_s += tk.elapsed().as_secs_f64();
                // This step's exchange and update: the next steps' waits
                // may last DEADLINE_SCALE times the longest.
                self.mpi.deadline().note(tc.elapsed().as_secs_f64());
            }
            Ok(())
        })();
        cdata.unregister_all();
        result?;
        let multiply_s = t2.elapsed().as_secs_f64();
        Ok(Product {
            c,
            counts,
            comm_s,
            compute_s,
            sent_blocks,
            generate_s,
            multiply_s,
        })
    }

    /// Checks this rank's part of C, gathers every rank's figures and
    /// checks at rank 0, which prints the report; returns the verdict,
    /// which every rank receives.
    fn check_and_report(
        &self,
        rects: &[Rect],
        split: &[u64],
        outcome: Option<&plb_core::cluster::HierOutcome>,
        p: Product,
        partition_s: f64,
    ) -> bool {
        let (rank, g, b) = (self.mpi.rank, self.g, self.b as usize);
        let n = self.o.n as usize;
        let me = rects[rank];
        let (rows, cols) = (me.rows as usize * b, me.cols as usize * b);
        let (r0, c0) = (me.row as usize * b, me.col as usize * b);
        // Each rank checks its own part of C: every column updated G times,
        // and the sampled entries inside its rectangle against A·B in
        // double precision (rows of A and columns of B generated again).
        let t3 = Instant::now();
        let mut check = [-1.0f64, 0.0, 0.0, 0.0, 0.0];
        if let Some(col) = p.counts.iter().position(|&x| u64::from(x) != g) {
            check[0] = (c0 + col) as f64;
            check[1] = f64::from(p.counts[col]);
        }
        let (bad, worst, checked) = verify_own(self.o.seed, n, b, (r0, rows, c0, cols), &p.c);
        (check[2], check[3], check[4]) = (bad as f64, worst, checked as f64);
        let check_s = t3.elapsed().as_secs_f64();
        // Per-rank figures to rank 0: a fixed header, then the device
        // split, as long as the longest rank's.
        let mut stats = vec![0.0f64; HEADER];
        stats[0] = me.rows as f64;
        stats[1] = me.cols as f64;
        stats[2] = p.compute_s;
        stats[3] = p.comm_s;
        stats[4] = p.sent_blocks as f64;
        stats[5] = split.len() as f64;
        stats[6] = self
            .workers
            .iter()
            .filter(|w| w.starts_with("opencl"))
            .count() as f64;
        stats[CHECK..CHECK + check.len()].copy_from_slice(&check);
        let all = self
            .mpi
            .allgather("statistics", &f64_bytes(&stats))
            .unwrap_or_else(|e| fatal(self.mpi, e));
        let mut all: Vec<Vec<f64>> = all.iter().map(|v| bytes_f64(v)).collect();
        let longest = all.iter().map(|s| s[5] as usize).max().unwrap_or(0);
        let mut widths: Vec<f64> = split.iter().map(|&w| w as f64).collect();
        widths.resize(longest, 0.0);
        let splits = self
            .mpi
            .allgather("device splits", &f64_bytes(&widths))
            .unwrap_or_else(|e| fatal(self.mpi, e));
        for (s, w) in all.iter_mut().zip(&splits) {
            let w = bytes_f64(w);
            s.extend_from_slice(&w[..(s[5] as usize).min(w.len())]);
        }
        let mut verdict = [1u8];
        if rank == 0 {
            let report = Report {
                o: self.o,
                rects,
                stats: &all,
                outcome,
                emulate: self.emulate,
                times: [partition_s, p.generate_s, p.multiply_s, check_s],
            };
            verdict[0] = u8::from(report.print());
        }
        self.mpi
            .bcast("verdict", &mut verdict, 0)
            .unwrap_or_else(|e| fatal(self.mpi, e));
        verdict[0] == 1
    }
}

impl NodeKernel for Run<'_> {
    fn devices(&self) -> usize {
        self.workers.len()
    }

    /// The kernel on this node's workers: `rows x b` panel, `cols[j]`
    /// columns on worker `j`; seconds per worker (0 without columns).
    fn bench(&self, rows: u64, cols: &[u64]) -> Result<Vec<f64>, String> {
        if self.fault_here("idpa") {
            return Err("--inject-fault idpa: this rank's benchmark fails".into());
        }
        let (rows, b) = (rows as usize, self.b as usize);
        let total: usize = cols.iter().map(|&c| c as usize).sum();
        if rows == 0 || total == 0 {
            return Ok(vec![0.0; cols.len()]);
        }
        let mut a = vec![1.0f32; rows * b];
        let mut bm = vec![1.0f32; b * total];
        // Zeros written now: page faults inside the timed kernel would
        // count as compute time (they doubled some node times).
        let mut c = super::zeroed(rows * total);
        let mut data = Data::default();
        let (tasks, _) = self.slices(&mut data, &mut a, &mut bm, &mut c, rows, cols)?;
        let cl = &raw mut plb_mm_cl;
        let secs = run_pinned(cl, &tasks);
        data.unregister_all();
        let secs = secs?;
        let mut out = vec![0.0; cols.len()];
        let mut it = secs.into_iter();
        for (j, &w) in cols.iter().enumerate() {
            if w > 0 {
                out[j] = it.next().unwrap_or(0.0);
            }
        }
        Ok(out)
    }
}

/// One pivot step's update of this node's `C'` as a divisible workload
/// (unit: one column of `C'`, with its column of B's panel), for the
/// node's own PLB-HAC. Raw pointers into the run's buffers, which outlive
/// the step and are not touched by Rust while its handles are registered.
struct PanelUpdate {
    a: *mut f32,
    bp: *mut f32,
    c: *mut f32,
    rows: usize,
    cols: usize,
    b: usize,
    a_handle: Option<Handle>,
}

impl Workload for PanelUpdate {
    fn units(&self) -> u64 {
        self.cols as u64
    }

    fn codelet(&self) -> *mut sys::starpu_codelet {
        // Only the address of the C global is taken (no access).
        &raw mut plb_mm_cl
    }

    fn register_shared(&mut self, data: &mut Data) -> Result<(), String> {
        // SAFETY: A's panel holds rows·b elements (the run's buffer),
        // untouched until the pass unregisters it.
        self.a_handle = Some(unsafe { data.matrix(self.a, self.rows, self.rows, self.b)? });
        Ok(())
    }

    fn register_block(
        &mut self,
        data: &mut Data,
        offset: u64,
        len: u64,
    ) -> Result<Vec<Handle>, String> {
        let (off, len) = (offset as usize, len as usize);
        if off + len > self.cols {
            return Err(format!(
                "mm-mpi: block {off}+{len} beyond {} columns",
                self.cols
            ));
        }
        let a = self.a_handle.ok_or("mm-mpi: A's panel is not registered")?;
        // SAFETY: columns off..off+len of B's panel (b rows) and of C'
        // (`rows` rows) are inside the buffers (checked above); blocks are
        // disjoint; the buffers are untouched until the pass unregisters.
        let (bh, ch) = unsafe {
            (
                data.matrix(self.bp.add(off * self.b), self.b, self.b, len)?,
                data.matrix(self.c.add(off * self.rows), self.rows, self.rows, len)?,
            )
        };
        Ok(vec![a, bh, ch])
    }

    fn work(&self, units: u64) -> f64 {
        2.0 * (self.rows * self.b) as f64 * units as f64
    }

    fn throughput_unit(&self) -> (&'static str, f64) {
        ("GFLOP/s", 1e9)
    }

    fn verify(&self) -> Verification {
        Verification {
            ok: true,
            detail: "checked by each rank on its own part of C".into(),
        }
    }
}

/// What rank 0 checks and prints.
struct Report<'a> {
    o: &'a Options,
    rects: &'a [Rect],
    stats: &'a [Vec<f64>],
    outcome: Option<&'a plb_core::cluster::HierOutcome>,
    emulate: &'a BTreeMap<usize, String>,
    times: [f64; 4],
}

impl Report<'_> {
    /// Coverage: the rectangles tile C and every column of every node was
    /// updated exactly G times. Returns a description of what is wrong.
    fn coverage(&self) -> Result<(), String> {
        let g = self.o.n / self.o.b;
        let mut owners = vec![0u32; (g * g) as usize];
        for r in self.rects {
            for i in r.row..r.row + r.rows {
                for j in r.col..r.col + r.cols {
                    owners[(i * g + j) as usize] += 1;
                }
            }
        }
        if let Some(p) = owners.iter().position(|&c| c != 1) {
            return Err(format!(
                "block ({}, {}) owned {} times",
                p as u64 / g,
                p as u64 % g,
                owners[p]
            ));
        }
        // Each rank checked its own columns.
        for (i, s) in self.stats.iter().enumerate() {
            if s[CHECK] >= 0.0 {
                return Err(format!(
                    "rank {i}: column {} of C updated {} times, not {g}",
                    s[CHECK],
                    s[CHECK + 1]
                ));
            }
        }
        Ok(())
    }

    /// C = A·B on one entry per block and 1024 more, in double precision,
    /// each checked by the rank that holds it ([`verify_own`]).
    fn verify(&self) -> (bool, String) {
        let bad: f64 = self.stats.iter().map(|s| s[CHECK + 2]).sum();
        let worst = self.stats.iter().map(|s| s[CHECK + 3]).fold(0.0, f64::max);
        let checked: f64 = self.stats.iter().map(|s| s[CHECK + 4]).sum();
        (
            bad == 0.0,
            format!(
                "{checked} entries vs double precision, each checked by its rank: {bad} wrong, max rel err {worst:.1e}"
            ),
        )
    }

    /// Ideal node shares: from the emulated speeds (Σ over a rank's
    /// workers of their first-phase speed factor) when every worker is a
    /// CPU worker; else from the speeds measured in the final round.
    fn ideal_shares(&self) -> (Vec<f64>, &'static str) {
        let q = self.rects.len();
        let any_opencl = self.stats.iter().any(|s| s[6] > 0.0);
        let speeds: Vec<f64> = if any_opencl {
            let times: Vec<f64> = self
                .outcome
                .map(|o| o.parts.iter().map(|p| p.time).collect())
                .unwrap_or_else(|| vec![1.0; q]);
            self.rects
                .iter()
                .zip(&times)
                .map(|(r, &t)| if t > 0.0 { r.area() as f64 / t } else { 0.0 })
                .collect()
        } else {
            (0..q)
                .map(|r| {
                    let spec = self.emulate.get(&r).and_then(|s| Emulation::parse(s).ok());
                    (0..self.stats[r][5] as u32)
                        .map(|w| {
                            spec.as_ref()
                                .and_then(|e| e.worker(w))
                                .and_then(|we| we.phases.first())
                                .map_or(1.0, |p| p.speed)
                        })
                        .sum()
                })
                .collect()
        };
        let sum: f64 = speeds.iter().sum();
        (
            speeds
                .iter()
                .map(|s| s / sum.max(f64::MIN_POSITIVE))
                .collect(),
            if any_opencl { "measured" } else { "emulated" },
        )
    }

    fn print(&self) -> bool {
        let (g, n) = (self.o.n / self.o.b, self.o.n);
        let coverage = self.coverage();
        let (verified, detail) = self.verify();
        let q = self.rects.len();
        let w_total = (g * g) as f64;
        let (ideal, ideal_from) = self.ideal_shares();
        let share_err = self
            .rects
            .iter()
            .zip(&ideal)
            .map(|(r, i)| (r.area() as f64 / w_total - i).abs())
            .fold(0.0, f64::max);
        let areas: Vec<u64> = self.rects.iter().map(Rect::area).collect();
        let h_cma = cma::half_perimeters(self.rects);
        let strips = cma::strips(&areas, g).ok();
        let h_strips = strips.as_ref().map(|s| cma::half_perimeters(s));
        let traffic = pivot_traffic_blocks(self.rects, g);
        let traffic_strips = strips.as_ref().map(|s| pivot_traffic_blocks(s, g));
        let [partition_s, generate_s, multiply_s, check_s] = self.times;
        for (r, s) in self.stats.iter().enumerate() {
            let split: Vec<String> = (0..s[5] as usize)
                .map(|j| format!("{}", s[HEADER + j]))
                .collect();
            println!(
                "rank {r}: {}x{} blocks ({:.1} % of C, ideal {:.1} %), device columns [{}], kernel {:.3} s, communication {:.3} s, {}{}",
                s[0],
                s[1],
                100.0 * s[0] * s[1] / w_total,
                100.0 * ideal[r],
                split.join(" "),
                s[2],
                s[3],
                if s[6] > 0.0 {
                    "PoCL OpenCL worker, "
                } else {
                    ""
                },
                self.emulate
                    .get(&r)
                    .map_or("no emulation".to_string(), |e| format!("EMULATED {e}"))
            );
        }
        let ok = verified && coverage.is_ok();
        let (rounds, drounds, conv, imb) = self.outcome.map_or((0, 0, false, f64::NAN), |o| {
            (o.node_rounds, o.device_rounds, o.converged, o.imbalance)
        });
        println!(
            "{MM_MPI_TAG} ranks={q} n={n} b={} algo={} rounds={rounds} device_rounds={drounds} converged={conv} imbalance={imb:.3} partition_s={partition_s:.3} generate_s={generate_s:.3} multiply_s={multiply_s:.3} check_s={check_s:.3} gflops={:.2} shares=[{}] ideal_from={ideal_from} ideal=[{}] max_share_error={share_err:.3} h_cma={h_cma} h_strips={} traffic_blocks={traffic} traffic_blocks_strips={} coverage={} verified={} ({detail})",
            self.o.b,
            self.o.algo,
            2.0 * (n as f64).powi(3) / multiply_s / 1e9,
            areas
                .iter()
                .map(|a| format!("{:.3}", *a as f64 / w_total))
                .collect::<Vec<_>>()
                .join(","),
            ideal
                .iter()
                .map(|a| format!("{a:.3}"))
                .collect::<Vec<_>>()
                .join(","),
            h_strips.map_or("-".into(), |h| h.to_string()),
            traffic_strips.map_or("-".into(), |h| h.to_string()),
            match &coverage {
                Ok(()) => "exact".to_string(),
                Err(e) => format!("WRONG({e})"),
            },
            if verified { "ok" } else { "WRONG" },
        );
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pivot_plan_matches_sends_and_receives() {
        let rects = cma::arrange(&[10, 6], 4).unwrap();
        for k in 0..4 {
            for me in 0..2 {
                let (sends, _) = plan(&rects, me, k);
                for s in sends {
                    let (_, recvs) = plan(&rects, s.peer, k);
                    let back = Piece {
                        peer: me,
                        ..s.clone()
                    };
                    assert!(recvs.contains(&back), "{s:?} from {me} at {k}");
                }
            }
        }
        // Every node receives, each step, its rows of A's pivot column
        // and its columns of B's pivot row, once.
        for k in 0..4 {
            for me in 0..2 {
                let (_, recvs) = plan(&rects, me, k);
                let a: u64 = recvs
                    .iter()
                    .filter(|p| p.matrix == 0)
                    .map(|p| p.hi - p.lo)
                    .sum();
                let b: u64 = recvs
                    .iter()
                    .filter(|p| p.matrix == 1)
                    .map(|p| p.hi - p.lo)
                    .sum();
                assert_eq!((a, b), (rects[me].rows, rects[me].cols));
            }
        }
    }

    /// Any block generated alone equals that block of the whole matrix,
    /// A and B differ, and entries are in [0, 1) and vary.
    #[test]
    fn input_entries_are_the_same_whoever_generates_them() {
        let n = 12;
        let whole: Vec<f32> = (0..n)
            .flat_map(|j| (0..n).map(move |i| input_entry(7, 1, i, j, n)))
            .collect();
        let block = pack(&whole, n, 4, 3, 8, 2);
        let alone: Vec<f32> = (8..10)
            .flat_map(|j| (4..7).map(move |i| input_entry(7, 1, i, j, n)))
            .collect();
        assert_eq!(block, alone);
        assert!(whole.iter().all(|&x| (0.0..1.0).contains(&x)));
        let mean = whole.iter().sum::<f32>() / whole.len() as f32;
        assert!((0.3..0.7).contains(&mean), "mean {mean}");
        assert_ne!(input_entry(7, 1, 3, 5, n), input_entry(7, 2, 3, 5, n));
        assert_ne!(input_entry(7, 1, 3, 5, n), input_entry(8, 1, 3, 5, n));
    }

    /// A rank's check finds a wrong entry of its own part, and only the
    /// samples inside its rectangle count.
    #[test]
    fn each_rank_checks_the_samples_of_its_own_part() {
        let (n, b, seed) = (16, 4, 3);
        // The exact product on rows 4..12, columns 0..8.
        let (r0, rows, c0, cols) = (4, 8, 0, 8);
        let mut c = vec![0f32; rows * cols];
        for j in 0..cols {
            for i in 0..rows {
                c[i + j * rows] = (0..n)
                    .map(|k| {
                        f64::from(input_entry(seed, 1, r0 + i, k, n))
                            * f64::from(input_entry(seed, 2, k, c0 + j, n))
                    })
                    .sum::<f64>() as f32;
            }
        }
        let inside = samples(seed, n, b)
            .iter()
            .filter(|&&(i, j)| (r0..r0 + rows).contains(&i) && (c0..c0 + cols).contains(&j))
            .count();
        let (bad, _, checked) = verify_own(seed, n, b, (r0, rows, c0, cols), &c);
        assert_eq!((bad, checked), (0, inside));
        assert!(checked >= 4, "one per block at least");
        // Every entry off by 1 %: each sample is found wrong.
        let off: Vec<f32> = c.iter().map(|x| x * 1.01).collect();
        let (bad, worst, _) = verify_own(seed, n, b, (r0, rows, c0, cols), &off);
        assert_eq!(bad, inside);
        assert!(worst > 5e-3, "{worst}");
    }

    #[test]
    fn packing_round_trips() {
        let m: Vec<f32> = (0..20).map(|x| x as f32).collect(); // 4 x 5
        let p = pack(&m, 4, 1, 2, 2, 3);
        assert_eq!(p, vec![9.0, 10.0, 13.0, 14.0, 17.0, 18.0]);
        let mut back = vec![0f32; 20];
        unpack(&mut back, 4, 1, 2, 2, &p);
        assert_eq!(back[9], 9.0);
        assert_eq!(back[18], 18.0);
        assert_eq!(back[0], 0.0);
    }

    #[test]
    fn mismatched_fingerprints_name_the_field() {
        assert_eq!(
            first_difference("n=1 b=2", "n=1 b=3"),
            "`b=3` where rank 0 has `b=2`"
        );
        assert!(rank_emulation(&["x".into()]).is_err());
        assert!(rank_emulation(&["1=0:speed=0.5".into(), "1=0:speed=0.2".into()]).is_err());
        assert_eq!(
            rank_emulation(&["2=0:speed=0.5".into()]).unwrap()[&2],
            "0:speed=0.5"
        );
    }
}
