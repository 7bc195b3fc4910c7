//! The distributed divisible-load API: the two-level partitioning of a
//! 2-D workload over the ranks of `MPI_COMM_WORLD`, one rank per node,
//! each rank's StarPU workers the node's devices (docs/cluster.md).
//!
//! An application gives its node kernel ([`NodeKernel`]: run the kernel on
//! this node's devices with a given column split, return the times) and
//! calls [`partition`] on every rank. The head rank (0) runs the INPA
//! ([`plb_core::cluster::inpa_with`]): each round it broadcasts the nodes'
//! rectangles, every rank runs its IDPA on its own devices
//! ([`plb_core::cluster::Level`] over the kernel's times) and the node
//! times are gathered. Every rank returns the final rectangles and its own
//! device split. Every collective has the deadline of the [`Mpi`] handle:
//! a rank that died or never answers ends the job with a message
//! ([`fatal`]) instead of a hang.

use plb_core::cluster::cma::Rect;
use plb_core::cluster::partition::{PartitionError, run_level};
use plb_core::cluster::{HierConfig, HierError, HierOutcome, Level, NodePart, Round, inpa_with};

use super::mpi::{CommError, Mpi, bytes_f64, bytes_u64, f64_bytes, say, u64_bytes};

/// A node's side of the partitioning: its kernel on its devices.
pub trait NodeKernel {
    /// Devices (StarPU workers) of this node.
    fn devices(&self) -> usize;
    /// Seconds each device takes for the kernel on `rows` rows (elements)
    /// with `cols[j]` columns on device `j`, all devices at once; 0 for a
    /// device without columns.
    fn bench(&self, rows: u64, cols: &[u64]) -> Result<Vec<f64>, String>;
}

/// What every rank gets back.
#[derive(Debug, Clone)]
pub struct Partition {
    /// Every node's rectangle of blocks (rank order).
    pub rects: Vec<Rect>,
    /// This rank's columns per device.
    pub split: Vec<u64>,
    /// The INPA's outcome (head rank only).
    pub outcome: Option<HierOutcome>,
}

/// Ends the job after a failed collective, saying so on this rank.
pub fn fatal(mpi: &Mpi, what: CommError) -> ! {
    say(&format!("plb: rank {}: {what}; ending the job", mpi.rank));
    mpi.abort(3)
}

const CMD_PROBE: u64 = 0;
const CMD_ROUND: u64 = 1;
const CMD_DONE: u64 = 2;
const CMD_FAIL: u64 = 3;

struct Protocol<'a> {
    mpi: &'a Mpi,
    cfg: &'a HierConfig,
    kernel: &'a dyn NodeKernel,
    /// This rank's IDPA result per measured INPA round.
    history: Vec<Vec<u64>>,
    verbose: bool,
}

fn header(cmd: u64, index: u64, rects: &[Rect]) -> Vec<u8> {
    let mut v = vec![cmd, index];
    for r in rects {
        v.extend([r.row, r.col, r.rows, r.cols]);
    }
    u64_bytes(&v)
}

impl Protocol<'_> {
    /// This node's IDPA on `rect`: split, time, rounds, benchmark seconds.
    fn idpa(&self, rect: Rect) -> Result<(Vec<u64>, f64, usize, f64), String> {
        let b = self.cfg.block;
        let (rows, cols) = (rect.rows * b, rect.cols * b);
        let mut level = Level::new(self.cfg.algo, self.kernel.devices(), cols, self.cfg.devices)
            .map_err(|e| e.to_string())?;
        let mut spent = 0.0;
        let mut error = None;
        let out = run_level(&mut level, |d| {
            let t = match self.kernel.bench(rows, d) {
                Ok(t) => t,
                Err(e) => {
                    error = Some(e);
                    vec![1.0; d.len()]
                }
            };
            spent += t.iter().copied().fold(0.0, f64::max);
            (d.to_vec(), t)
        })
        .map_err(|e| e.to_string())?;
        if let Some(e) = error {
            return Err(e);
        }
        Ok((out.units, out.time, out.rounds, spent))
    }

    /// One INPA round as this rank sees it: its IDPA, then every rank's
    /// time gathered. A rank whose IDPA fails still takes part in the
    /// gather, with a failure word: every rank then knows, and returns
    /// the same error (no rank is left waiting in a collective).
    fn serve_round(&mut self, rects: &[Rect], probe: bool) -> Result<Round, String> {
        let idpa = self.idpa(rects[self.mpi.rank]);
        let mine = match &idpa {
            Ok((_, time, rounds, spent)) => [*time, *spent, *rounds as f64, 0.0],
            Err(e) => {
                say(&format!(
                    "plb: rank {}: node partitioning (IDPA) failed: {e}",
                    self.mpi.rank
                ));
                [0.0, 0.0, 0.0, 1.0]
            }
        };
        let got = self
            .mpi
            .allgather("partitioning round", &f64_bytes(&mine))
            .unwrap_or_else(|e| fatal(self.mpi, e));
        let v: Vec<Vec<f64>> = got.iter().map(|b| bytes_f64(b)).collect();
        // The slowest node's benchmark of this round: the next rounds' waits
        // may last DEADLINE_SCALE times it (every rank notes the same).
        self.mpi
            .deadline
            .note(v.iter().map(|t| t[1]).fold(0.0, f64::max));
        let failed: Vec<usize> = (0..v.len()).filter(|&r| v[r][3] != 0.0).collect();
        if !failed.is_empty() {
            return Err(format!(
                "the node partitioning (IDPA) failed on rank(s) {failed:?} (each says why on its stderr)"
            ));
        }
        let (split, ..) = idpa?;
        if !probe {
            self.history.push(split);
        }
        Ok(Round {
            parts: rects
                .iter()
                .zip(&v)
                .map(|(r, t)| NodePart {
                    rect: *r,
                    cols: Vec::new(),
                    time: t[0],
                })
                .collect(),
            bench_s: v.iter().map(|t| t[1]).fold(0.0, f64::max),
            device_rounds: v.iter().map(|t| t[2] as usize).sum(),
        })
    }

    fn bcast(&self, what: &str, h: &mut [u8]) {
        self.mpi
            .bcast(what, h, 0)
            .unwrap_or_else(|e| fatal(self.mpi, e));
    }

    fn head(&mut self) -> Result<Partition, String> {
        let q = self.mpi.size;
        let mut first = true;
        let algo = self.cfg.algo;
        let cfg = self.cfg;
        let outcome = inpa_with(q, cfg, |rects| {
            let probe = first && algo.probes();
            first = false;
            let cmd = if probe { CMD_PROBE } else { CMD_ROUND };
            self.bcast("partitioning round", &mut header(cmd, 0, rects));
            let round = self
                .serve_round(rects, probe)
                .map_err(|e| HierError::Partition(PartitionError::Protocol(e)))?;
            if self.verbose {
                let areas: Vec<u64> = rects.iter().map(Rect::area).collect();
                let times: Vec<String> = round
                    .parts
                    .iter()
                    .map(|p| format!("{:.4}", p.time))
                    .collect();
                say(&format!(
                    "plb: INPA {}: areas {areas:?}, node times [{}] s",
                    if probe { "probe" } else { "round" },
                    times.join(", ")
                ));
            }
            Ok(round)
        });
        match outcome {
            Ok((out, index)) => {
                let rects: Vec<Rect> = out.parts.iter().map(|p| p.rect).collect();
                self.bcast(
                    "partitioning result",
                    &mut header(CMD_DONE, index as u64, &rects),
                );
                let split = self.history.get(index).cloned().ok_or("no round kept")?;
                Ok(Partition {
                    rects,
                    split,
                    outcome: Some(out),
                })
            }
            Err(e) => {
                let none = Rect {
                    row: 0,
                    col: 0,
                    rows: 0,
                    cols: 0,
                };
                // Every follower waits in the round's broadcast: it learns
                // of the failure there.
                self.bcast(
                    "partitioning result",
                    &mut header(CMD_FAIL, 0, &vec![none; q]),
                );
                Err(format!("partitioning failed: {e}"))
            }
        }
    }

    fn follower(&mut self) -> Result<Partition, String> {
        let hlen = (2 + 4 * self.mpi.size) * 8;
        // A failed round's error: the head then broadcasts CMD_FAIL, which
        // this rank still receives (the collectives stay matched).
        let mut failure: Option<String> = None;
        loop {
            let mut h = vec![0u8; hlen];
            self.bcast("partitioning round", &mut h);
            let v = bytes_u64(&h);
            let rects: Vec<Rect> = v[2..]
                .chunks(4)
                .map(|c| Rect {
                    row: c[0],
                    col: c[1],
                    rows: c[2],
                    cols: c[3],
                })
                .collect();
            match v[0] {
                CMD_PROBE | CMD_ROUND => {
                    if let Err(e) = self.serve_round(&rects, v[0] == CMD_PROBE) {
                        failure = Some(e);
                    }
                }
                CMD_DONE => {
                    let split = self
                        .history
                        .get(v[1] as usize)
                        .cloned()
                        .ok_or("the head kept a round this rank did not measure")?;
                    return Ok(Partition {
                        rects,
                        split,
                        outcome: None,
                    });
                }
                _ => {
                    return Err(failure.unwrap_or_else(|| {
                        "the head rank's partitioning failed (see rank 0)".into()
                    }));
                }
            }
        }
    }
}

/// The two-level partitioning over every rank (call it on every rank with
/// the same `cfg`; see the module documentation). `verbose`: the head
/// prints every INPA round (areas, node times) to stderr.
pub fn partition(
    mpi: &Mpi,
    cfg: &HierConfig,
    kernel: &dyn NodeKernel,
    verbose: bool,
) -> Result<Partition, String> {
    let mut p = Protocol {
        mpi,
        cfg,
        kernel,
        history: Vec::new(),
        verbose,
    };
    if mpi.rank == 0 {
        p.head()
    } else {
        p.follower()
    }
}
