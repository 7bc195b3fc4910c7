//! The two-level partitioning of a 2-D workload over the ranks of a
//! communicator ([`Comm`]), one rank per node, each rank's devices the
//! node's StarPU workers (docs/cluster.md).
//!
//! The application gives its node kernel ([`NodeKernel`]: run the kernel
//! on this node's devices with a given column split, return the times)
//! and calls [`partition`] on every rank. The head rank (0) runs the INPA
//! ([`super::inpa_with`]): each round it broadcasts the nodes' rectangles,
//! every rank runs its IDPA on its own devices ([`super::Level`] over the
//! kernel's times) and the node times are gathered. Every rank returns the
//! final rectangles and its own device split.
//!
//! Every rank takes part in every collective in the same order, failures
//! included: a rank whose IDPA fails says so in the round's gather, and
//! the head's own failure travels in the next broadcast, so every rank
//! returns the same [`PartitionFailure::Failed`]. A failed collective
//! ([`PartitionFailure::Comm`]) leaves the ranks unmatched: the caller
//! ends the job. `plb app mm-mpi` and the C API
//! (`policy/include/plb_distributed.h`) drive this same code.

use super::cma::Rect;
use super::comm::{Comm, CommError, bytes_f64, bytes_u64, f64_bytes, u64_bytes};
use super::partition::{PartitionError, run_level};
use super::{HierConfig, HierError, HierOutcome, Level, NodePart, Round, inpa_with};

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
#[derive(Debug, Clone, PartialEq)]
pub struct Partition {
    /// Every node's rectangle of blocks (rank order).
    pub rects: Vec<Rect>,
    /// This rank's columns per device.
    pub split: Vec<u64>,
    /// The INPA's outcome (head rank only).
    pub outcome: Option<HierOutcome>,
}

/// Why [`partition`] failed.
#[derive(Debug, Clone, PartialEq)]
pub enum PartitionFailure {
    /// A collective failed: the ranks' collectives no longer match, and
    /// the caller must end the job (e.g. `MPI_Abort`).
    Comm(CommError),
    /// The partitioning failed; every rank returns a failure, and every
    /// collective was matched (the job may go on or end cleanly).
    Failed(String),
}

impl std::fmt::Display for PartitionFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PartitionFailure::Comm(e) => e.fmt(f),
            PartitionFailure::Failed(s) => f.write_str(s),
        }
    }
}

impl From<CommError> for PartitionFailure {
    fn from(e: CommError) -> Self {
        PartitionFailure::Comm(e)
    }
}

const CMD_PROBE: u64 = 0;
const CMD_ROUND: u64 = 1;
const CMD_DONE: u64 = 2;
const CMD_FAIL: u64 = 3;

struct Protocol<'a> {
    comm: &'a dyn Comm,
    cfg: &'a HierConfig,
    kernel: &'a dyn NodeKernel,
    /// Where the messages go (stderr in the applications).
    say: &'a dyn Fn(&str),
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

/// This rank's IDPA result: split, time, rounds, benchmark seconds.
type Idpa = (Vec<u64>, f64, usize, f64);

impl Protocol<'_> {
    /// This node's IDPA on `rect`.
    fn idpa(&self, rect: Rect) -> Result<Idpa, String> {
        let b = self.cfg.block;
        let (rows, cols) = (rect.rows * b, rect.cols * b);
        let mut level = Level::new(self.cfg.algo, self.kernel.devices(), cols, self.cfg.devices)
            .map_err(|e| e.to_string())?;
        let mut spent = 0.0;
        let mut error = None;
        let out = run_level(&mut level, |d| {
            let t = match self.kernel.bench(rows, d) {
                Ok(t) if t.len() == d.len() => t,
                Ok(t) => {
                    error = Some(format!(
                        "the kernel returned {} times for {} devices",
                        t.len(),
                        d.len()
                    ));
                    vec![1.0; d.len()]
                }
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
    fn serve_round(&mut self, rects: &[Rect], probe: bool) -> Result<Round, PartitionFailure> {
        let rank = self.comm.rank();
        let idpa = self.idpa(rects[rank]);
        let mine = match &idpa {
            Ok((_, time, rounds, spent)) => [*time, *spent, *rounds as f64, 0.0],
            Err(e) => {
                (self.say)(&format!(
                    "plb: rank {rank}: node partitioning (IDPA) failed: {e}"
                ));
                [0.0, 0.0, 0.0, 1.0]
            }
        };
        let got = self
            .comm
            .allgather("partitioning round", &f64_bytes(&mine))?;
        let v: Vec<Vec<f64>> = got.iter().map(|b| bytes_f64(b)).collect();
        if v.len() != self.comm.size() || v.iter().any(|t| t.len() != 4) {
            return Err(PartitionFailure::Comm(CommError::Failed {
                what: "partitioning round (malformed gather)".into(),
                code: -1,
            }));
        }
        // The slowest node's benchmark of this round: later waits may
        // scale with it (every rank notes the same).
        let slowest = v.iter().map(|t| t[1]).fold(0.0, f64::max);
        self.comm.note_step(slowest);
        let failed: Vec<usize> = (0..v.len()).filter(|&r| v[r][3] != 0.0).collect();
        if !failed.is_empty() {
            return Err(PartitionFailure::Failed(format!(
                "the node partitioning (IDPA) failed on rank(s) {failed:?} (each says why on its stderr)"
            )));
        }
        let (split, ..) = idpa.map_err(PartitionFailure::Failed)?;
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
            bench_s: slowest,
            device_rounds: v.iter().map(|t| t[2] as usize).sum(),
        })
    }

    fn head(&mut self) -> Result<Partition, PartitionFailure> {
        let q = self.comm.size();
        let mut first = true;
        let (algo, cfg, comm) = (self.cfg.algo, self.cfg, self.comm);
        // A failed collective: nothing more may be sent.
        let mut broken: Option<PartitionFailure> = None;
        let outcome = inpa_with(q, cfg, |rects| {
            let probe = first && algo.probes();
            first = false;
            let cmd = if probe { CMD_PROBE } else { CMD_ROUND };
            let round = comm
                .bcast("partitioning round", &mut header(cmd, 0, rects), 0)
                .map_err(PartitionFailure::Comm)
                .and_then(|()| self.serve_round(rects, probe));
            let round = match round {
                Ok(r) => r,
                Err(e) => {
                    let text = e.to_string();
                    if matches!(e, PartitionFailure::Comm(_)) {
                        broken = Some(e);
                    }
                    return Err(HierError::Partition(PartitionError::Protocol(text)));
                }
            };
            if self.verbose {
                let areas: Vec<u64> = rects.iter().map(Rect::area).collect();
                let times: Vec<String> = round
                    .parts
                    .iter()
                    .map(|p| format!("{:.4}", p.time))
                    .collect();
                (self.say)(&format!(
                    "plb: INPA {}: areas {areas:?}, node times [{}] s",
                    if probe { "probe" } else { "round" },
                    times.join(", ")
                ));
            }
            Ok(round)
        });
        if let Some(e) = broken {
            return Err(e);
        }
        match outcome {
            Ok((out, index)) => {
                let rects: Vec<Rect> = out.parts.iter().map(|p| p.rect).collect();
                comm.bcast(
                    "partitioning result",
                    &mut header(CMD_DONE, index as u64, &rects),
                    0,
                )?;
                let split = self
                    .history
                    .get(index)
                    .cloned()
                    .ok_or_else(|| PartitionFailure::Failed("no round kept".into()))?;
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
                comm.bcast(
                    "partitioning result",
                    &mut header(CMD_FAIL, 0, &vec![none; q]),
                    0,
                )?;
                Err(PartitionFailure::Failed(format!(
                    "partitioning failed: {e}"
                )))
            }
        }
    }

    fn follower(&mut self) -> Result<Partition, PartitionFailure> {
        let hlen = (2 + 4 * self.comm.size()) * 8;
        // A failed round's error: the head then broadcasts CMD_FAIL, which
        // this rank still receives (the collectives stay matched).
        let mut failure: Option<PartitionFailure> = None;
        loop {
            let mut h = vec![0u8; hlen];
            self.comm.bcast("partitioning round", &mut h, 0)?;
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
                CMD_PROBE | CMD_ROUND => match self.serve_round(&rects, v[0] == CMD_PROBE) {
                    Ok(_) => {}
                    Err(e @ PartitionFailure::Comm(_)) => return Err(e),
                    Err(e) => failure = Some(e),
                },
                CMD_DONE => {
                    let split = self.history.get(v[1] as usize).cloned().ok_or_else(|| {
                        PartitionFailure::Failed(
                            "the head kept a round this rank did not measure".into(),
                        )
                    })?;
                    return Ok(Partition {
                        rects,
                        split,
                        outcome: None,
                    });
                }
                _ => {
                    return Err(failure.unwrap_or_else(|| {
                        PartitionFailure::Failed(
                            "the head rank's partitioning failed (see rank 0)".into(),
                        )
                    }));
                }
            }
        }
    }
}

/// The two-level partitioning over every rank of `comm` (call it on every
/// rank with the same `cfg`; see the module documentation). `say` gets
/// this rank's messages (a failed IDPA; with `verbose`, the head's every
/// INPA round: areas, node times).
pub fn partition(
    comm: &dyn Comm,
    cfg: &HierConfig,
    kernel: &dyn NodeKernel,
    say: &dyn Fn(&str),
    verbose: bool,
) -> Result<Partition, PartitionFailure> {
    let mut p = Protocol {
        comm,
        cfg,
        kernel,
        say,
        history: Vec::new(),
        verbose,
    };
    if comm.rank() == 0 {
        p.head()
    } else {
        p.follower()
    }
}
