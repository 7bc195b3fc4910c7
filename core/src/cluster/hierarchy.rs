//! The two-level scheme: the INPA over the nodes, with the IDPA nested in
//! every node (`../shared/papers/hierarchical-fpm-partitioning.md` §3),
//! driven against a [`Bench`] that runs the application's kernel. The
//! simulator's bench computes times from device models; the MPI
//! application does the same steps over ranks with real kernels
//! (`plb app mm-mpi`), using [`Level`] directly.
//!
//! Units: the grid has `G × G` blocks of `b × b`; a node's share is `w_i`
//! blocks arranged by the CMA as `m_i × n_i`; inside a node the units are
//! the `bn_i = n_i · b` columns of its sub-matrix, sliced `d_i1 … d_ip`
//! over its devices. The kernel is one pivot step of the multiplication,
//! `C'_j += A_(b) · B_(b)j` with `A_(b)` of `bm_i × b`.

use super::cma::{self, CmaError, Rect};
use super::partition::{Algorithm, Level, LevelConfig, Outcome, PartitionError, Step, run_level};

/// What the partitioning measures: the kernel on a node's devices.
pub trait Bench {
    /// Number of nodes.
    fn nodes(&self) -> usize;
    /// Devices of `node`.
    fn devices(&self, node: usize) -> usize;
    /// Seconds each device of `node` takes for one pivot step on `rows`
    /// rows (elements) and `cols[j]` columns (device `j`'s slice); 0 for a
    /// device without columns.
    fn kernel(&mut self, node: usize, rows: u64, cols: &[u64]) -> Vec<f64>;
}

/// Settings of the two-level partitioning.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HierConfig {
    pub algo: Algorithm,
    /// `G = N / b`, blocks per side.
    pub grid: u64,
    /// `b`, elements per block side.
    pub block: u64,
    /// INPA settings (`ε1`).
    pub nodes: LevelConfig,
    /// IDPA settings (`ε2`).
    pub devices: LevelConfig,
}

/// A node's part of the result.
#[derive(Debug, Clone, PartialEq)]
pub struct NodePart {
    /// Its sub-matrix, in blocks.
    pub rect: Rect,
    /// Columns per device (summing to `rect.cols · b`).
    pub cols: Vec<u64>,
    /// The kernel's time at this split (the IDPA's last answer).
    pub time: f64,
}

/// The result of the two-level partitioning.
#[derive(Debug, Clone, PartialEq)]
pub struct HierOutcome {
    pub parts: Vec<NodePart>,
    /// INPA rounds measured.
    pub node_rounds: usize,
    /// IDPA rounds measured, summed over nodes and INPA rounds.
    pub device_rounds: usize,
    /// Whether the INPA's times agreed within `ε1`.
    pub converged: bool,
    /// Relative imbalance of the final node times.
    pub imbalance: f64,
    /// Seconds the benchmarks took: per INPA round the slowest node's IDPA
    /// (all its rounds), summed (nodes work in parallel).
    pub bench_s: f64,
}

/// Why the partitioning failed.
#[derive(Debug, Clone, PartialEq)]
pub enum HierError {
    Cma(CmaError),
    Partition(PartitionError),
}

impl std::fmt::Display for HierError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HierError::Cma(e) => e.fmt(f),
            HierError::Partition(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for HierError {}

/// The IDPA of `node` for a `rows × total_cols` sub-matrix; returns its
/// outcome and the seconds its benchmarks took.
pub fn idpa(
    bench: &mut dyn Bench,
    node: usize,
    rows: u64,
    total_cols: u64,
    algo: Algorithm,
    cfg: LevelConfig,
) -> Result<(Outcome, f64), PartitionError> {
    let p = bench.devices(node);
    let mut level = Level::new(algo, p, total_cols, cfg)?;
    let mut spent = 0.0;
    let out = run_level(&mut level, |cols| {
        let t = bench.kernel(node, rows, cols);
        spent += t.iter().copied().fold(0.0, f64::max);
        (cols.to_vec(), t)
    })?;
    Ok((out, spent))
}

/// One INPA round as the nodes ran it: per node its rectangle, device
/// split and kernel time; plus the benchmark seconds the round took and
/// the IDPA rounds it measured.
pub struct Round {
    pub parts: Vec<NodePart>,
    pub bench_s: f64,
    pub device_rounds: usize,
}

/// The INPA with the IDPA nested in every node (see the module docs), on
/// the simulator's or a test's [`Bench`].
pub fn inpa(bench: &mut dyn Bench, cfg: &HierConfig) -> Result<HierOutcome, HierError> {
    let q = bench.nodes();
    let b = cfg.block;
    inpa_with(q, cfg, |rects| {
        let mut parts = Vec::with_capacity(q);
        let mut slowest = 0.0f64;
        let mut device_rounds = 0;
        for (i, r) in rects.iter().enumerate() {
            let (o, spent) = idpa(bench, i, r.rows * b, r.cols * b, cfg.algo, cfg.devices)
                .map_err(HierError::Partition)?;
            device_rounds += o.rounds;
            slowest = slowest.max(spent);
            parts.push(NodePart {
                rect: *r,
                cols: o.units,
                time: o.time,
            });
        }
        Ok(Round {
            parts,
            bench_s: slowest,
            device_rounds,
        })
    })
    .map(|(o, _)| o)
}

/// The INPA over `q` nodes, whatever runs a round: `round(rects)` makes
/// every node run its IDPA on its rectangle (all `1 × 1` for the probe)
/// and returns what they measured. The simulator calls [`idpa`] per node;
/// the MPI application broadcasts the rectangles and gathers the times.
/// Also returns the index of the measured round whose split was kept
/// (probe not counted).
pub fn inpa_with(
    q: usize,
    cfg: &HierConfig,
    mut round: impl FnMut(&[Rect]) -> Result<Round, HierError>,
) -> Result<(HierOutcome, usize), HierError> {
    let g = cfg.grid;
    let mut level = Level::new(cfg.algo, q, g * g, cfg.nodes).map_err(HierError::Partition)?;
    let (mut device_rounds, mut bench_s) = (0, 0.0);
    let mut run = |rects: &[Rect]| -> Result<Vec<NodePart>, HierError> {
        let r = round(rects)?;
        device_rounds += r.device_rounds;
        bench_s += r.bench_s;
        Ok(r.parts)
    };
    let probe = vec![
        Rect {
            row: 0,
            col: 0,
            rows: 1,
            cols: 1
        };
        q
    ];
    let mut best: Option<(f64, usize, Vec<NodePart>)> = None;
    let mut last: (usize, Vec<NodePart>) = (0, Vec::new());
    let mut measured = 0;
    let mut step = level.start();
    let outcome = loop {
        step = match step {
            Step::Probe => {
                let parts = run(&probe)?;
                let t: Vec<f64> = parts.iter().map(|p| p.time).collect();
                level.observe(&vec![1; q], &t)
            }
            Step::Measure(w) => {
                let rects = cma::arrange(&w, g).map_err(HierError::Cma)?;
                if last.1.iter().map(|p| p.rect).eq(rects.iter().copied()) {
                    // The new proposal arranges to the split just
                    // measured: nothing new to learn.
                    break level.stop();
                }
                let parts = run(&rects)?;
                let t: Vec<f64> = parts.iter().map(|p| p.time).collect();
                let worst = t.iter().copied().fold(0.0, f64::max);
                if best.as_ref().is_none_or(|(bt, _, _)| worst < *bt) {
                    best = Some((worst, measured, parts.clone()));
                }
                last = (measured, parts);
                measured += 1;
                let areas: Vec<u64> = rects.iter().map(Rect::area).collect();
                level.observe(&areas, &t)
            }
            Step::Done(o) => break o,
        }
        .map_err(HierError::Partition)?;
    };
    // Converged: the last round; otherwise the best one measured (what
    // the level's outcome also keeps).
    let (index, parts) = match (outcome.converged, best) {
        (false, Some((_, i, p))) => (i, p),
        _ => last,
    };
    Ok((
        HierOutcome {
            parts,
            node_rounds: outcome.rounds,
            device_rounds,
            converged: outcome.converged,
            imbalance: outcome.imbalance,
            bench_s,
        },
        index,
    ))
}
