//! The C face of the distributed divisible-load API
//! (`policy/include/plb_distributed.h`): `plb_dist_partition` runs
//! `plb-core`'s two-level partitioning protocol
//! ([`plb_core::cluster::protocol`]) over the application's communicator
//! callbacks and node kernel. The library itself does not link MPI: the
//! header's ready-made callbacks, compiled into the application, do.
//! Errors are negative codes plus a per-thread message
//! ([`plb_dist_last_error`]); a panic becomes `PLB_DIST_EFAULT`.

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};

use super::guard::{guard_status, last_error_ptr, set_last_error};
use crate::diagnostics::say;
use plb_core::cluster::cma::Rect;
use plb_core::cluster::comm::{Comm, CommError, Deadline, status};
use plb_core::cluster::protocol::{NodeKernel, PartitionFailure, partition};
use plb_core::cluster::{Algorithm, HierConfig, LevelConfig};

/// Success.
pub const PLB_DIST_OK: c_int = 0;
/// NULL pointer or invalid configuration.
pub const PLB_DIST_EINVAL: c_int = -1;
/// The partitioning failed; every rank returns it.
pub const PLB_DIST_EFAILED: c_int = -2;
/// A collective failed or timed out: the ranks no longer match.
pub const PLB_DIST_ECOMM: c_int = -3;
/// Internal fault (a panic).
pub const PLB_DIST_EFAULT: c_int = -8;
/// A communicator callback's "not complete within the time-out".
pub const PLB_DIST_TIMEDOUT: c_int = -1;

/// Default floor of every collective's deadline, seconds.
pub const DEFAULT_TIMEOUT_S: f64 = 60.0;

type AllgatherFn =
    unsafe extern "C" fn(*mut c_void, *const c_void, c_int, *mut c_void, f64) -> c_int;
type BcastFn = unsafe extern "C" fn(*mut c_void, *mut c_void, c_int, c_int, f64) -> c_int;
type BenchFn = unsafe extern "C" fn(*mut c_void, u64, *const u64, c_uint, *mut f64) -> c_int;

/// `struct plb_dist_comm`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct plb_dist_comm {
    pub rank: c_int,
    pub size: c_int,
    pub arg: *mut c_void,
    pub allgather: Option<AllgatherFn>,
    pub bcast: Option<BcastFn>,
}

/// `struct plb_dist_config`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct plb_dist_config {
    pub algorithm: *const c_char,
    pub grid: u64,
    pub block: u64,
    pub node_eps: f64,
    pub device_eps: f64,
    pub max_rounds: c_uint,
    pub timeout_s: f64,
    pub ndevices: c_uint,
    pub bench: Option<BenchFn>,
    pub bench_arg: *mut c_void,
    pub verbose: c_int,
}

/// `struct plb_dist_rect`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct plb_dist_rect {
    pub row: u64,
    pub col: u64,
    pub rows: u64,
    pub cols: u64,
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn fail(code: c_int, msg: &str) -> c_int {
    set_last_error(&LAST_ERROR, msg);
    code
}

/// A [`Comm`] over C collectives (`struct plb_dist_comm`: an application's
/// callbacks, or `plb app mm-mpi`'s shim), each given the deadline as its
/// time-out. On a time-out the buffers the collective may still use are
/// leaked, never freed under it.
pub struct CallbackComm {
    raw: plb_dist_comm,
    allgather: AllgatherFn,
    bcast: BcastFn,
    deadline: Deadline,
}

impl CallbackComm {
    /// Over `raw`'s callbacks, with deadlines of `floor_s` seconds at
    /// least ([`Deadline`]); `None` when a callback is NULL.
    ///
    /// # Safety
    /// `raw`'s callbacks keep the contract of `plb_distributed.h` (move
    /// exactly the bytes they are given; on `PLB_DIST_TIMEDOUT` they may
    /// still use the buffers) for as long as the `CallbackComm` lives, and
    /// `raw.arg` stays valid as long.
    pub unsafe fn new(raw: plb_dist_comm, floor_s: f64) -> Option<CallbackComm> {
        Some(CallbackComm {
            allgather: raw.allgather?,
            bcast: raw.bcast?,
            raw,
            deadline: Deadline::new(floor_s),
        })
    }

    /// The deadline of every collective (and of the caller's own waits).
    pub fn deadline(&self) -> &Deadline {
        &self.deadline
    }
}

impl Comm for CallbackComm {
    fn rank(&self) -> usize {
        self.raw.rank as usize
    }
    fn size(&self) -> usize {
        self.raw.size as usize
    }
    fn allgather(&self, what: &str, mine: &[u8]) -> Result<Vec<Vec<u8>>, CommError> {
        let too_long = || CommError::Failed {
            what: what.into(),
            code: PLB_DIST_EFAULT,
        };
        let len = c_int::try_from(mine.len()).map_err(|_| too_long())?;
        let send = mine.to_vec();
        let mut recv = vec![0u8; mine.len() * self.size()];
        let timeout = self.deadline.seconds();
        // SAFETY: `new`'s contract: the callback gathers `len` bytes per
        // rank into a buffer of `len * size` bytes; `send` and `recv` have
        // those sizes. On a time-out the collective may still be pending,
        // so both buffers are leaked just below, never freed under it.
        let rc = unsafe {
            (self.allgather)(
                self.raw.arg,
                send.as_ptr().cast(),
                len,
                recv.as_mut_ptr().cast(),
                timeout,
            )
        };
        if rc == PLB_DIST_TIMEDOUT {
            std::mem::forget(send);
            std::mem::forget(recv);
        } else if rc == 0 {
            return Ok(recv.chunks(mine.len().max(1)).map(<[u8]>::to_vec).collect());
        }
        status(what, rc, timeout).map(|()| Vec::new())
    }
    fn bcast(&self, what: &str, buf: &mut [u8], root: usize) -> Result<(), CommError> {
        let len = c_int::try_from(buf.len()).map_err(|_| CommError::Failed {
            what: what.into(),
            code: PLB_DIST_EFAULT,
        })?;
        let mut tmp = buf.to_vec();
        let timeout = self.deadline.seconds();
        // SAFETY: as in `allgather`: the callback moves `len` bytes through
        // `tmp`, which has them; on a time-out `tmp` is leaked below.
        let rc = unsafe {
            (self.bcast)(
                self.raw.arg,
                tmp.as_mut_ptr().cast(),
                len,
                root as c_int,
                timeout,
            )
        };
        if rc == PLB_DIST_TIMEDOUT {
            std::mem::forget(tmp);
        } else if rc == 0 {
            buf.copy_from_slice(&tmp);
        }
        status(what, rc, timeout)
    }
    fn note_step(&self, seconds: f64) {
        self.deadline.note(seconds);
    }
}

/// The application's node kernel.
struct CallbackKernel {
    bench: BenchFn,
    arg: *mut c_void,
    devices: usize,
}

impl NodeKernel for CallbackKernel {
    fn devices(&self) -> usize {
        self.devices
    }
    fn bench(&self, rows: u64, cols: &[u64]) -> Result<Vec<f64>, String> {
        let mut secs = vec![0.0f64; cols.len()];
        // SAFETY: the header's contract: the kernel reads `ndevices`
        // column counts and writes `ndevices` seconds; both slices have
        // `cols.len()` entries, and `ndevices` is `cols.len()`.
        let rc = unsafe {
            (self.bench)(
                self.arg,
                rows,
                cols.as_ptr(),
                cols.len() as c_uint,
                secs.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(format!("the application's node kernel returned {rc}"));
        }
        if let Some(bad) = secs.iter().find(|t| !(t.is_finite() && **t >= 0.0)) {
            return Err(format!("the node kernel measured {bad} s"));
        }
        Ok(secs)
    }
}

/// The settings of `cfg`, checked, with the defaults filled in.
fn settings(cfg: &plb_dist_config) -> Result<HierConfig, String> {
    let algo = if cfg.algorithm.is_null() {
        Algorithm::Fpm
    } else {
        // SAFETY: the header's contract: NULL or a NUL-terminated string.
        let name = unsafe { CStr::from_ptr(cfg.algorithm) }.to_string_lossy();
        Algorithm::parse(&name).ok_or_else(|| {
            let known: Vec<&str> = Algorithm::ALL.iter().map(|a| a.name()).collect();
            format!("unknown algorithm `{name}` (known: {})", known.join(", "))
        })?
    };
    if cfg.grid == 0 || cfg.block == 0 {
        return Err(format!(
            "grid ({}) and block ({}) must be at least 1",
            cfg.grid, cfg.block
        ));
    }
    let eps = |e: f64, what: &str| match e {
        0.0 => Ok(0.05),
        e if e.is_finite() && e > 0.0 => Ok(e),
        e => Err(format!("{what} must be positive and finite, not {e}")),
    };
    let rounds = if cfg.max_rounds == 0 {
        LevelConfig::default().max_rounds
    } else {
        cfg.max_rounds as usize
    };
    Ok(HierConfig {
        algo,
        grid: cfg.grid,
        block: cfg.block,
        nodes: LevelConfig {
            eps: eps(cfg.node_eps, "node_eps")?,
            max_rounds: rounds,
        },
        devices: LevelConfig {
            eps: eps(cfg.device_eps, "device_eps")?,
            max_rounds: rounds,
        },
    })
}

/// The partitioning (see the header). Returns `PLB_DIST_OK` with `rects`
/// (`comm->size` entries) and `split` (`cfg->ndevices` entries) filled,
/// or a negative `PLB_DIST_E*` code.
///
/// # Safety
/// `cfg` and `comm` are NULL or valid; `rects` is NULL or writable for
/// `comm->size` rectangles, `split` NULL or writable for `cfg->ndevices`
/// counts; the callbacks keep the header's contracts.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plb_dist_partition(
    cfg: *const plb_dist_config,
    comm: *const plb_dist_comm,
    rects: *mut plb_dist_rect,
    split: *mut u64,
) -> c_int {
    guard_status("plb_dist_partition", PLB_DIST_EFAULT, &LAST_ERROR, || {
        // SAFETY: NULL or valid (caller's contract).
        let (Some(cfg), Some(comm)) = (unsafe { cfg.as_ref() }, unsafe { comm.as_ref() }) else {
            return fail(PLB_DIST_EINVAL, "plb_dist_partition: cfg or comm is NULL");
        };
        if rects.is_null() || split.is_null() {
            return fail(
                PLB_DIST_EINVAL,
                "plb_dist_partition: rects or split is NULL",
            );
        }
        let Some(bench) = cfg.bench else {
            return fail(
                PLB_DIST_EINVAL,
                "plb_dist_partition: comm.allgather, comm.bcast and cfg.bench must be set",
            );
        };
        if comm.size < 1 || comm.rank < 0 || comm.rank >= comm.size || cfg.ndevices == 0 {
            return fail(
                PLB_DIST_EINVAL,
                &format!(
                    "plb_dist_partition: rank {} of {} ranks with {} devices",
                    comm.rank, comm.size, cfg.ndevices
                ),
            );
        }
        let hier = match settings(cfg) {
            Ok(h) => h,
            Err(e) => return fail(PLB_DIST_EINVAL, &format!("plb_dist_partition: {e}")),
        };
        let floor = match cfg.timeout_s {
            0.0 => DEFAULT_TIMEOUT_S,
            t if t.is_finite() && t > 0.0 => t,
            t => {
                return fail(
                    PLB_DIST_EINVAL,
                    &format!("plb_dist_partition: timeout_s must be positive, not {t}"),
                );
            }
        };
        // SAFETY: the caller's contract: the header's callbacks, valid for
        // this call, which the CallbackComm does not outlive.
        let Some(callbacks) = (unsafe { CallbackComm::new(*comm, floor) }) else {
            return fail(
                PLB_DIST_EINVAL,
                "plb_dist_partition: comm.allgather, comm.bcast and cfg.bench must be set",
            );
        };
        let kernel = CallbackKernel {
            bench,
            arg: cfg.bench_arg,
            devices: cfg.ndevices as usize,
        };
        match partition(&callbacks, &hier, &kernel, &say, cfg.verbose != 0) {
            Ok(p) => {
                // SAFETY: the caller's contract: `comm->size` and
                // `cfg->ndevices` writable entries.
                let (out_rects, out_split) = unsafe {
                    (
                        std::slice::from_raw_parts_mut(rects, comm.size as usize),
                        std::slice::from_raw_parts_mut(split, cfg.ndevices as usize),
                    )
                };
                for (o, r) in out_rects.iter_mut().zip(&p.rects) {
                    *o = c_rect(*r);
                }
                out_split.copy_from_slice(&p.split);
                PLB_DIST_OK
            }
            Err(e @ PartitionFailure::Comm(_)) => fail(PLB_DIST_ECOMM, &e.to_string()),
            Err(e @ PartitionFailure::Failed(_)) => fail(PLB_DIST_EFAILED, &e.to_string()),
        }
    })
}

fn c_rect(r: Rect) -> plb_dist_rect {
    plb_dist_rect {
        row: r.row,
        col: r.col,
        rows: r.rows,
        cols: r.cols,
    }
}

/// Message of the last failed `plb_dist_*` call on this thread ("" if
/// none); valid until the next failing call on this thread.
#[unsafe(no_mangle)]
pub extern "C" fn plb_dist_last_error() -> *const c_char {
    last_error_ptr(&LAST_ERROR)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr;

    /// One rank: the collectives copy.
    unsafe extern "C" fn gather_alone(
        _: *mut c_void,
        send: *const c_void,
        len: c_int,
        recv: *mut c_void,
        _: f64,
    ) -> c_int {
        // SAFETY: the library passes `len` readable and writable bytes.
        unsafe { ptr::copy_nonoverlapping(send.cast::<u8>(), recv.cast::<u8>(), len as usize) };
        0
    }

    unsafe extern "C" fn bcast_alone(
        _: *mut c_void,
        _: *mut c_void,
        _: c_int,
        _: c_int,
        _: f64,
    ) -> c_int {
        0
    }

    /// A gather that never completes: reports its time-out.
    unsafe extern "C" fn gather_never(
        _: *mut c_void,
        _: *const c_void,
        _: c_int,
        _: *mut c_void,
        _: f64,
    ) -> c_int {
        PLB_DIST_TIMEDOUT
    }

    /// Device `j` is `j + 1` times faster; `arg` non-NULL: fails.
    unsafe extern "C" fn bench(
        arg: *mut c_void,
        rows: u64,
        cols: *const u64,
        n: c_uint,
        secs: *mut f64,
    ) -> c_int {
        if !arg.is_null() {
            return 7;
        }
        for j in 0..n as usize {
            // SAFETY: the library passes `n` entries in both arrays.
            unsafe {
                let c = *cols.add(j);
                *secs.add(j) = if c == 0 {
                    0.0
                } else {
                    (rows * c) as f64 * 1e-6 / (j + 1) as f64
                };
            }
        }
        0
    }

    fn comm() -> plb_dist_comm {
        plb_dist_comm {
            rank: 0,
            size: 1,
            arg: ptr::null_mut(),
            allgather: Some(gather_alone),
            bcast: Some(bcast_alone),
        }
    }

    fn config() -> plb_dist_config {
        plb_dist_config {
            algorithm: ptr::null(),
            grid: 8,
            block: 16,
            node_eps: 0.0,
            device_eps: 0.0,
            max_rounds: 0,
            timeout_s: 0.0,
            ndevices: 3,
            bench: Some(bench),
            bench_arg: ptr::null_mut(),
            verbose: 0,
        }
    }

    fn call(
        cfg: &plb_dist_config,
        comm: &plb_dist_comm,
    ) -> (c_int, plb_dist_rect, Vec<u64>, String) {
        let mut rect = plb_dist_rect::default();
        let mut split = vec![0u64; cfg.ndevices as usize];
        // SAFETY: valid structs, one rectangle for one rank, `ndevices`
        // counts.
        let rc = unsafe { plb_dist_partition(cfg, comm, &mut rect, split.as_mut_ptr()) };
        // SAFETY: the library's NUL-terminated per-thread message.
        let msg = unsafe { CStr::from_ptr(plb_dist_last_error()) };
        (rc, rect, split, msg.to_string_lossy().into_owned())
    }

    #[test]
    fn one_rank_gets_the_whole_grid_split_by_its_devices_speeds() {
        for algo in [c"fpm-hier", c"plb-hac", c"homogeneous"] {
            let mut cfg = config();
            cfg.algorithm = algo.as_ptr();
            let (rc, rect, split, msg) = call(&cfg, &comm());
            assert_eq!(rc, PLB_DIST_OK, "{algo:?}: {msg}");
            assert_eq!(
                rect,
                plb_dist_rect {
                    row: 0,
                    col: 0,
                    rows: 8,
                    cols: 8
                }
            );
            assert_eq!(split.iter().sum::<u64>(), 8 * 16, "{algo:?}");
            if algo != c"homogeneous" {
                assert!(split[2] > split[0], "{algo:?}: {split:?}");
            }
        }
    }

    #[test]
    fn bad_input_failures_and_time_outs_have_their_codes_and_messages() {
        let mut cfg = config();
        cfg.algorithm = c"nope".as_ptr();
        let (rc, _, _, msg) = call(&cfg, &comm());
        assert_eq!(rc, PLB_DIST_EINVAL);
        assert!(msg.contains("unknown algorithm `nope`"), "{msg}");

        let mut cfg = config();
        cfg.grid = 0;
        assert_eq!(call(&cfg, &comm()).0, PLB_DIST_EINVAL);
        // SAFETY: NULL pointers are refused before any use.
        let rc =
            unsafe { plb_dist_partition(ptr::null(), &comm(), ptr::null_mut(), ptr::null_mut()) };
        assert_eq!(rc, PLB_DIST_EINVAL);

        let mut cfg = config();
        cfg.bench_arg = ptr::NonNull::<u8>::dangling().as_ptr().cast();
        let (rc, _, _, msg) = call(&cfg, &comm());
        assert_eq!(rc, PLB_DIST_EFAILED);
        assert!(msg.contains("failed on rank(s) [0]"), "{msg}");

        let mut c = comm();
        c.allgather = Some(gather_never);
        let mut cfg = config();
        cfg.timeout_s = 2.5;
        let (rc, _, _, msg) = call(&cfg, &c);
        assert_eq!(rc, PLB_DIST_ECOMM);
        assert!(
            msg.contains("partitioning round: no answer within 2.5 s"),
            "{msg}"
        );
    }

    /// The header lists every algorithm `plb_dist_config.algorithm` takes.
    #[test]
    fn the_header_names_every_algorithm() {
        let header = include_str!("../../include/plb_distributed.h");
        for a in Algorithm::ALL {
            assert!(
                header.contains(&format!("\"{}\"", a.name())),
                "{} missing",
                a.name()
            );
        }
    }
}
