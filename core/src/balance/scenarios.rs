//! Simulated platforms shared by the balancers' tests and `plb experiment`
//! (true curves for [`simulate`](super::sim::simulate); simulated, never
//! measured).

use super::sim::SimPu;
use crate::model::{LinearModel, TimeModel};

/// A PU whose compute time is `fixed + x / rate` and which moves no data.
pub fn lin(fixed: f64, rate: f64) -> SimPu {
    SimPu::new(LinearModel { fixed, rate })
}

/// A PU with a per-block latency modelled as transfer time.
pub fn with_latency(rate: f64, latency: f64) -> SimPu {
    let mut p = lin(0.0, rate);
    p.transfer = Box::new(LinearModel {
        fixed: latency,
        rate: f64::INFINITY,
    });
    p
}

/// Compute time `x / rate + c · ln(1 + x / k)`: a throughput that climbs
/// with the block size (a GPU warming up), concave, so one block per PU is
/// still optimal and [`optimum`](super::sim::optimum) a lower bound.
pub struct Ramp {
    /// Asymptotic units per second.
    pub rate: f64,
    /// Seconds of the ramp term.
    pub c: f64,
    /// Size (units) at which the ramp term is ln 2 · c.
    pub k: f64,
}

impl TimeModel for Ramp {
    fn time(&self, x: f64) -> f64 {
        let x = x.max(0.0);
        x / self.rate + self.c * (1.0 + x / self.k).ln()
    }
    fn slope(&self, x: f64) -> f64 {
        1.0 / self.rate + self.c / (self.k + x.max(0.0))
    }
}

/// Issue 4 §7: PU0 at 1000 units/s, PU1 4× faster with 20 ms latency per
/// block; 20 000 units = 20 s on PU0 alone.
pub fn two_pus() -> (Vec<SimPu>, u64) {
    (vec![lin(0.0, 1000.0), with_latency(4000.0, 0.02)], 20_000)
}

/// Five heterogeneous PUs: two CPU-like lines, two GPU-like PUs with launch
/// latency and transfer, one whose throughput ramps up with the block size. About 10 s in all.
pub fn five_pus() -> (Vec<SimPu>, u64) {
    let mut gpu = lin(0.01, 5000.0);
    gpu.transfer = Box::new(LinearModel {
        fixed: 0.005,
        rate: 50_000.0,
    });
    (
        vec![
            lin(0.0, 500.0),
            lin(0.0, 800.0),
            gpu,
            with_latency(3000.0, 0.03),
            SimPu::new(Ramp {
                rate: 2500.0,
                c: 0.05,
                k: 100.0,
            }),
        ],
        100_000,
    )
}
