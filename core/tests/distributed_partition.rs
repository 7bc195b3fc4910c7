//! The distributed partitioning protocol (`plb_core::cluster::protocol`)
//! on ranks that are threads of this test, over an in-memory communicator
//! whose collectives check that every rank called the same one and time
//! out (instead of hanging) when a rank does not come.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use plb_core::cluster::cma::Rect;
use plb_core::cluster::comm::{Comm, CommError};
use plb_core::cluster::protocol::{NodeKernel, Partition, PartitionFailure, partition};
use plb_core::cluster::{Algorithm, Bench, HierConfig, LevelConfig, inpa};

/// One collective in progress: what each rank brought.
#[derive(Default)]
struct Meeting {
    /// Generation: bumped when every rank has read the result.
    round: u64,
    arrived: usize,
    left: usize,
    /// Per rank: (operation, its bytes).
    slots: Vec<Option<(String, Vec<u8>)>>,
}

struct Hub {
    size: usize,
    meeting: Mutex<Meeting>,
    moved: Condvar,
}

struct ThreadComm {
    rank: usize,
    hub: Arc<Hub>,
    notes: Mutex<Vec<f64>>,
}

const WAIT: Duration = Duration::from_secs(5);

impl ThreadComm {
    /// Every rank brings `(op, bytes)`; returns every rank's bytes once all
    /// came, or a time-out. Every rank must bring the same `op` (the
    /// collective and its sizes, as MPI requires; `what` is only a name).
    fn meet(&self, what: &str, op: &str, bytes: Vec<u8>) -> Result<Vec<Vec<u8>>, CommError> {
        let hub = &self.hub;
        let timed_out = || CommError::TimedOut {
            what: what.to_string(),
            seconds: WAIT.as_secs_f64(),
        };
        let mut m = hub.meeting.lock().unwrap();
        // Wait until the previous meeting has been left by everyone.
        while m.left > 0 {
            let (g, t) = hub.moved.wait_timeout(m, WAIT).unwrap();
            m = g;
            if t.timed_out() {
                return Err(timed_out());
            }
        }
        if m.slots.is_empty() {
            m.slots = vec![None; hub.size];
        }
        m.slots[self.rank] = Some((op.to_string(), bytes));
        m.arrived += 1;
        let round = m.round;
        if m.arrived == hub.size {
            m.left = hub.size;
            hub.moved.notify_all();
        }
        while m.round == round && m.left == 0 {
            let (g, t) = hub.moved.wait_timeout(m, WAIT).unwrap();
            m = g;
            if t.timed_out() && m.round == round && m.left == 0 {
                return Err(timed_out());
            }
        }
        let all: Vec<(String, Vec<u8>)> = m.slots.iter().map(|s| s.clone().unwrap()).collect();
        assert!(
            all.iter().all(|(o, _)| o == op),
            "mismatched collectives: rank {} in {op}, others in {:?}",
            self.rank,
            all.iter().map(|(o, _)| o).collect::<Vec<_>>()
        );
        m.left -= 1;
        if m.left == 0 {
            m.arrived = 0;
            m.round += 1;
            m.slots.clear();
            hub.moved.notify_all();
        }
        Ok(all.into_iter().map(|(_, b)| b).collect())
    }
}

impl Comm for ThreadComm {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.hub.size
    }
    fn allgather(&self, what: &str, mine: &[u8]) -> Result<Vec<Vec<u8>>, CommError> {
        self.meet(
            what,
            &format!("allgather of {} bytes", mine.len()),
            mine.to_vec(),
        )
    }
    fn bcast(&self, what: &str, buf: &mut [u8], root: usize) -> Result<(), CommError> {
        let op = format!("bcast of {} bytes from {root}", buf.len());
        let all = self.meet(what, &op, buf.to_vec())?;
        buf.copy_from_slice(&all[root]);
        Ok(())
    }
    fn note_step(&self, seconds: f64) {
        self.notes.lock().unwrap().push(seconds);
    }
}

/// Node `n`'s devices: device `j` takes `rows · cols / speed` seconds.
fn speeds(node: usize) -> Vec<f64> {
    match node {
        0 => vec![1.0, 4.0],
        1 => vec![2.0],
        2 => vec![1.0, 1.0, 3.0],
        _ => vec![1.5, 0.5],
    }
}

fn kernel_times(node: usize, rows: u64, cols: &[u64]) -> Vec<f64> {
    speeds(node)
        .iter()
        .zip(cols)
        .map(|(s, &c)| {
            if c == 0 {
                0.0
            } else {
                (rows * c) as f64 * 1e-6 / s + 1e-4
            }
        })
        .collect()
}

struct Kernel {
    node: usize,
    fail: bool,
}

impl NodeKernel for Kernel {
    fn devices(&self) -> usize {
        speeds(self.node).len()
    }
    fn bench(&self, rows: u64, cols: &[u64]) -> Result<Vec<f64>, String> {
        if self.fail {
            return Err("injected".into());
        }
        Ok(kernel_times(self.node, rows, cols))
    }
}

/// The same nodes for the sequential INPA.
struct Nodes(usize);

impl Bench for Nodes {
    fn nodes(&self) -> usize {
        self.0
    }
    fn devices(&self, node: usize) -> usize {
        speeds(node).len()
    }
    fn kernel(&mut self, node: usize, rows: u64, cols: &[u64]) -> Vec<f64> {
        kernel_times(node, rows, cols)
    }
}

fn config(algo: Algorithm) -> HierConfig {
    HierConfig {
        algo,
        grid: 12,
        block: 16,
        nodes: LevelConfig::default(),
        devices: LevelConfig::default(),
    }
}

type RankResult = (Result<Partition, PartitionFailure>, Vec<String>, Vec<f64>);

/// Runs the protocol on `q` thread ranks; `fail` ranks' kernels fail.
fn run(q: usize, cfg: HierConfig, fail: &[usize]) -> Vec<RankResult> {
    let hub = Arc::new(Hub {
        size: q,
        meeting: Mutex::new(Meeting::default()),
        moved: Condvar::new(),
    });
    let handles: Vec<_> = (0..q)
        .map(|rank| {
            let hub = Arc::clone(&hub);
            let fail = fail.contains(&rank);
            std::thread::spawn(move || {
                let comm = ThreadComm {
                    rank,
                    hub,
                    notes: Mutex::new(Vec::new()),
                };
                let said = Mutex::new(Vec::new());
                let say = |s: &str| said.lock().unwrap().push(s.to_string());
                let kernel = Kernel { node: rank, fail };
                let r = partition(&comm, &cfg, &kernel, &say, false);
                (
                    r,
                    said.into_inner().unwrap(),
                    comm.notes.into_inner().unwrap(),
                )
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Every rank gets the head's rectangles, and its own device split is
/// the one the sequential INPA finds for that node: the protocol
/// distributes the partitioning without changing it.
#[test]
fn every_rank_gets_the_partitioning_the_sequential_inpa_finds() {
    for algo in [Algorithm::Fpm, Algorithm::PlbHac, Algorithm::MultipleCpm] {
        let q = 4;
        let cfg = config(algo);
        let want = inpa(&mut Nodes(q), &cfg).unwrap();
        let got = run(q, cfg, &[]);
        let rects: Vec<Rect> = want.parts.iter().map(|p| p.rect).collect();
        for (rank, (r, said, notes)) in got.iter().enumerate() {
            let p = r
                .as_ref()
                .unwrap_or_else(|e| panic!("{algo}: rank {rank}: {e}"));
            assert_eq!(p.rects, rects, "{algo}: rank {rank}");
            assert_eq!(p.split, want.parts[rank].cols, "{algo}: rank {rank}");
            assert_eq!(p.outcome.is_some(), rank == 0);
            assert!(said.is_empty(), "{said:?}");
            // Every rank noted the same slowest benchmarks, round by round.
            assert_eq!(notes, &got[0].2);
            assert!(!notes.is_empty());
        }
        let head = got[0].0.as_ref().unwrap().outcome.as_ref().unwrap();
        assert_eq!(head.node_rounds, want.node_rounds, "{algo}");
        assert_eq!(head.device_rounds, want.device_rounds, "{algo}");
        let area: u64 = rects.iter().map(Rect::area).sum();
        assert_eq!(area, 144);
    }
}

/// A follower's failing kernel: every rank returns a matched failure that
/// names it, and only that rank says why. No collective times out (the
/// in-memory communicator would say so, and asserts matched collectives).
#[test]
fn a_failing_node_fails_every_rank_with_the_rank_named() {
    for bad in [1, 0] {
        let got = run(3, config(Algorithm::Fpm), &[bad]);
        for (rank, (r, said, _)) in got.iter().enumerate() {
            match r {
                Err(PartitionFailure::Failed(msg)) => {
                    assert!(msg.contains(&format!("failed on rank(s) [{bad}]")), "{msg}")
                }
                other => panic!("rank {rank} (bad {bad}): {other:?}"),
            }
            if rank == bad {
                assert_eq!(said.len(), 1, "{said:?}");
                assert!(said[0].contains(&format!(
                    "rank {bad}: node partitioning (IDPA) failed: injected"
                )));
            } else {
                assert!(said.is_empty(), "{said:?}");
            }
        }
    }
}

/// A configuration the head's INPA refuses (no rounds allowed) ends every
/// rank with a failure, the followers through the head's broadcast.
#[test]
fn a_failing_head_fails_every_rank_through_its_broadcast() {
    let mut cfg = config(Algorithm::Fpm);
    cfg.nodes.max_rounds = 0;
    let got = run(3, cfg, &[]);
    for (rank, (r, _, _)) in got.iter().enumerate() {
        match r {
            Err(PartitionFailure::Failed(msg)) if rank == 0 => {
                assert!(msg.starts_with("partitioning failed"), "{msg}")
            }
            Err(PartitionFailure::Failed(msg)) => {
                assert!(msg.contains("see rank 0"), "{msg}")
            }
            other => panic!("rank {rank}: {other:?}"),
        }
    }
}

/// One rank alone: no partner, the whole grid, its own device split.
#[test]
fn one_rank_partitions_its_own_devices() {
    let got = run(1, config(Algorithm::Fpm), &[]);
    let p = got[0].0.as_ref().unwrap();
    assert_eq!(
        p.rects,
        vec![Rect {
            row: 0,
            col: 0,
            rows: 12,
            cols: 12
        }]
    );
    assert_eq!(p.split.iter().sum::<u64>(), 12 * 16);
    // Device 1 is 4x faster: it gets most columns.
    assert!(p.split[1] > 3 * p.split[0], "{:?}", p.split);
}
