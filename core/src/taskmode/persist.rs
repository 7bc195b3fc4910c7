//! Models that persist between runs: the text format of a calibration file
//! holding task mode's samples per (codelet, worker), the identity of the
//! machine it was measured on, and the merge of two writers' samples.
//! Parsing, rendering and merging only; the StarPU adapter reads and writes
//! the file (`policy/src/model_file.rs`).
//!
//! A codelet is named by its performance model's symbol, else its name
//! (`docs/usage.md`, "Models that persist"); codelets with neither are not
//! saved, since nothing identifies them in the next run. The samples are
//! the raw measurements (at most [`MAX_SAMPLES`] per model, the newest), so
//! the next run refits them with the same outlier screening: a file carries
//! no fitted curve that could be wrong.
//!
//! ```text
//! plb-models 2
//! host attila
//! starpu 1.4.10
//! timings real                       (or: timings emulated <PLB_EMULATE>)
//! workers 2
//! worker 0 cpu CPU 0                 (id, kind, StarPU's worker name)
//! worker 1 cuda CUDA 0.0 (Tesla V100-SXM2-32GB 31.7 GiB 1a:00.0)
//! sample <worker> <units> <seconds> <codelet>
//! ...
//! end <number of sample lines>
//! ```
//!
//! Everything before the samples is the [`Identity`]: a file is used only
//! when all of it matches this run (same host, StarPU, emulation and worker
//! set, names included), so a sample's worker id names the same device.
//! Files of format 1 (no worker set) are foreign.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::balance::WorkerKind;

/// First line of every file.
pub const MAGIC: &str = "plb-models 2";

/// Samples kept per (codelet, worker) model: the newest.
pub const MAX_SAMPLES: usize = 32;

/// Models (codelet, worker pairs) kept in one file.
pub const MAX_MODELS: usize = 4096;

/// Workers a file may describe (StarPU's own limit is far lower).
pub const MAX_WORKERS: usize = 4096;

/// One StarPU worker as the file records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worker {
    /// Its kind.
    pub kind: WorkerKind,
    /// Its name as StarPU reports it (`starpu_worker_get_name`: `CPU 0`,
    /// `CUDA 0.0 (<device> ...)`), one line.
    pub name: String,
}

/// The machine a file was measured on. A file whose identity differs from
/// this run's is foreign.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Host name (`STARPU_HOSTNAME` where set, as StarPU does).
    pub host: String,
    /// StarPU's version (`1.4.10`).
    pub starpu: String,
    /// The `PLB_EMULATE` specification in force, `None` for real timings.
    pub emulation: Option<String>,
    /// Every StarPU worker, by id.
    pub workers: Vec<Worker>,
}

impl Identity {
    /// `self` as a file records it: every text on one line, never empty.
    pub fn normalized(&self) -> Identity {
        Identity {
            host: one_line(&self.host),
            starpu: one_line(&self.starpu),
            emulation: self.emulation.as_deref().map(one_line),
            workers: self
                .workers
                .iter()
                .map(|w| Worker {
                    kind: w.kind,
                    name: one_line(&w.name),
                })
                .collect(),
        }
    }

    /// The first difference from `other`, in words.
    fn difference(&self, other: &Identity) -> String {
        let timings = |e: &Option<String>| match e {
            None => "real timings".to_string(),
            Some(s) => format!("PLB_EMULATE={s:?}"),
        };
        let workers = |ws: &[Worker]| {
            let names: Vec<String> = ws
                .iter()
                .map(|w| format!("{} {}", w.kind.name(), w.name))
                .collect();
            format!("{} workers [{}]", ws.len(), names.join(", "))
        };
        if self.host != other.host {
            format!("written on host {:?}, this is {:?}", self.host, other.host)
        } else if self.starpu != other.starpu {
            format!(
                "written with StarPU {}, this is {}",
                self.starpu, other.starpu
            )
        } else if self.emulation != other.emulation {
            format!(
                "written with {}, this run has {}",
                timings(&self.emulation),
                timings(&other.emulation)
            )
        } else {
            format!(
                "written for {}, this run has {}",
                workers(&self.workers),
                workers(&other.workers)
            )
        }
    }
}

/// Saved samples, (units, seconds) oldest first, by (codelet name, worker
/// id).
pub type Saved = BTreeMap<(String, usize), Vec<(f64, f64)>>;

/// Why a file was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// Not a models file, or damaged (a line says which).
    Corrupt(String),
    /// Written on another machine, StarPU, emulation or worker set, or in
    /// another format version.
    Foreign(String),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Corrupt(m) => write!(f, "corrupt: {m}"),
            LoadError::Foreign(m) => write!(f, "foreign: {m}"),
        }
    }
}

/// `text` on one non-empty line (control characters become `_`).
fn one_line(text: &str) -> String {
    if text.is_empty() {
        return "_".into();
    }
    text.chars()
        .map(|c| if c.is_control() { '_' } else { c })
        .collect()
}

/// Whether a codelet name can be written on one line.
fn clean(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(char::is_control)
}

/// Whether a sample can be saved.
fn valid(units: f64, secs: f64) -> bool {
    units.is_finite() && units > 0.0 && secs.is_finite() && secs > 0.0
}

/// Appends `samples` to `kept`, keeping the newest [`MAX_SAMPLES`].
fn push_newest(kept: &mut Vec<(f64, f64)>, samples: impl IntoIterator<Item = (f64, f64)>) {
    kept.extend(samples);
    let excess = kept.len().saturating_sub(MAX_SAMPLES);
    kept.drain(..excess);
}

/// Adds `newer`'s samples after `base`'s, per model, keeping the newest
/// [`MAX_SAMPLES`] of each; a model new to `base` is added while it holds
/// fewer than [`MAX_MODELS`]. What two writers saved, one after the other.
pub fn merge(base: &mut Saved, newer: &Saved) {
    for (key, samples) in newer {
        if let Some(kept) = base.get_mut(key) {
            push_newest(kept, samples.iter().copied());
        } else if base.len() < MAX_MODELS {
            let mut kept = Vec::new();
            push_newest(&mut kept, samples.iter().copied());
            base.insert(key.clone(), kept);
        }
    }
}

/// The file's text for `saved` measured on `id`. Left out: models beyond
/// [`MAX_MODELS`], samples beyond [`MAX_SAMPLES`] per model (the oldest),
/// invalid samples, unprintable codelet names and workers `id` lacks.
pub fn render(id: &Identity, saved: &Saved) -> String {
    let id = id.normalized();
    let mut out = String::new();
    let _ = writeln!(out, "{MAGIC}");
    let _ = writeln!(out, "host {}", id.host);
    let _ = writeln!(out, "starpu {}", id.starpu);
    match &id.emulation {
        None => out.push_str("timings real\n"),
        Some(spec) => {
            let _ = writeln!(out, "timings emulated {spec}");
        }
    }
    let workers = &id.workers[..id.workers.len().min(MAX_WORKERS)];
    let _ = writeln!(out, "workers {}", workers.len());
    for (i, w) in workers.iter().enumerate() {
        let _ = writeln!(out, "worker {i} {} {}", w.kind.name(), w.name);
    }
    let mut lines = 0usize;
    for ((codelet, worker), samples) in saved
        .iter()
        .filter(|((c, w), _)| clean(c) && *w < workers.len())
        .take(MAX_MODELS)
    {
        let skip = samples.len().saturating_sub(MAX_SAMPLES);
        for &(units, secs) in &samples[skip..] {
            if valid(units, secs) {
                let _ = writeln!(out, "sample {worker} {units:e} {secs:e} {codelet}");
                lines += 1;
            }
        }
    }
    let _ = writeln!(out, "end {lines}");
    out
}

/// Reads a file's text, checking it was written on `expected`. A file in
/// another format version is foreign; the damage of a file in this format
/// is reported before its identity.
pub fn parse(text: &str, expected: &Identity) -> Result<Saved, LoadError> {
    let bad = |m: String| Err(LoadError::Corrupt(m));
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    match lines.next() {
        Some((_, MAGIC)) => {}
        Some((_, other)) if other.starts_with("plb-models ") => {
            return Err(LoadError::Foreign(format!(
                "format {other:?} of another PLB version (this one reads {MAGIC:?})"
            )));
        }
        _ => return bad(format!("first line is not {MAGIC:?}")),
    }
    let mut field = |key: &str| -> Result<(usize, String), LoadError> {
        match lines.next() {
            Some((n, l)) => match l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')) {
                Some(v) if !v.is_empty() => Ok((n, v.to_string())),
                _ => Err(LoadError::Corrupt(format!("line {n}: not a {key} line"))),
            },
            None => Err(LoadError::Corrupt(format!("missing the {key} line"))),
        }
    };
    let (_, host) = field("host")?;
    let (_, starpu) = field("starpu")?;
    let (n, timings) = field("timings")?;
    let emulation = match timings.as_str() {
        "real" => None,
        t => match t.strip_prefix("emulated ") {
            Some(spec) if !spec.is_empty() => Some(spec.to_string()),
            _ => return bad(format!("line {n}: unknown timings {t:?}")),
        },
    };
    let (n, count) = field("workers")?;
    let count = match count.parse::<usize>() {
        Ok(c) if c <= MAX_WORKERS => c,
        _ => return bad(format!("line {n}: bad worker count")),
    };
    let mut workers = Vec::with_capacity(count);
    for id in 0..count {
        let (n, rest) = field("worker")?;
        let mut parts = rest.splitn(3, ' ');
        let (Some(w), Some(kind), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
            return bad(format!("line {n}: incomplete worker"));
        };
        let Some(kind) = WorkerKind::from_name(kind) else {
            return bad(format!("line {n}: unknown kind {kind:?}"));
        };
        if w.parse::<usize>().ok() != Some(id) || name.is_empty() {
            return bad(format!("line {n}: expected worker {id}"));
        }
        workers.push(Worker {
            kind,
            name: name.to_string(),
        });
    }
    let found = Identity {
        host,
        starpu,
        emulation,
        workers,
    };
    let saved = parse_samples(lines, found.workers.len())?;
    let expected = expected.normalized();
    if found != expected {
        return Err(LoadError::Foreign(found.difference(&expected)));
    }
    Ok(saved)
}

/// The sample lines and the end line, for a file of `workers` workers.
fn parse_samples<'a>(
    lines: impl Iterator<Item = (usize, &'a str)>,
    workers: usize,
) -> Result<Saved, LoadError> {
    let bad = |m: String| Err(LoadError::Corrupt(m));
    let mut saved = Saved::new();
    let mut count = 0usize;
    let mut ended = false;
    for (n, line) in lines {
        if ended {
            return bad(format!("line {n}: text after the end line"));
        }
        if let Some(rest) = line.strip_prefix("end ") {
            if rest.parse::<usize>().ok() != Some(count) {
                return bad(format!("line {n}: end line does not match {count} samples"));
            }
            ended = true;
            continue;
        }
        let Some(rest) = line.strip_prefix("sample ") else {
            return bad(format!("line {n}: unexpected {line:?}"));
        };
        let mut parts = rest.splitn(4, ' ');
        let (Some(w), Some(u), Some(s), Some(codelet)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return bad(format!("line {n}: incomplete sample"));
        };
        let (Ok(worker), Ok(units), Ok(secs)) =
            (w.parse::<usize>(), u.parse::<f64>(), s.parse::<f64>())
        else {
            return bad(format!("line {n}: unreadable numbers"));
        };
        if !(valid(units, secs) && clean(codelet) && worker < workers) {
            return bad(format!("line {n}: invalid sample"));
        }
        count += 1;
        let key = (codelet.to_string(), worker);
        if !saved.contains_key(&key) && saved.len() >= MAX_MODELS {
            return bad(format!("more than {MAX_MODELS} models"));
        }
        push_newest(saved.entry(key).or_default(), [(units, secs)]);
    }
    if !ended {
        return bad("no end line (truncated)".into());
    }
    Ok(saved)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> Identity {
        Identity {
            host: "attila".into(),
            starpu: "1.4.10".into(),
            emulation: None,
            workers: vec![
                Worker {
                    kind: WorkerKind::Cuda,
                    name: "CUDA 0.0 (Tesla V100 31.7 GiB 1a:00.0)".into(),
                },
                Worker {
                    kind: WorkerKind::Cpu,
                    name: "CPU 0".into(),
                },
            ],
        }
    }

    fn saved() -> Saved {
        let mut s = Saved::new();
        s.insert(
            ("chol_model_22".into(), 0),
            vec![(1e9, 0.0028), (1e9, 0.0029)],
        );
        s.insert(
            ("starpu_dgemm_gemm with spaces".into(), 1),
            vec![(2.5e8, 0.084)],
        );
        s
    }

    #[test]
    fn round_trip() {
        let text = render(&id(), &saved());
        assert!(text.starts_with("plb-models 2\nhost attila\nstarpu 1.4.10\ntimings real\n"));
        assert!(text.contains("\nworkers 2\nworker 0 cuda CUDA 0.0 (Tesla"));
        assert!(text.contains("\nworker 1 cpu CPU 0\n"));
        assert_eq!(parse(&text, &id()), Ok(saved()));
        let emulated = Identity {
            emulation: Some("0:speed=0.25; 1:latency=20ms".into()),
            ..id()
        };
        let text = render(&emulated, &saved());
        assert!(text.contains("\ntimings emulated 0:speed=0.25; 1:latency=20ms\n"));
        assert_eq!(parse(&text, &emulated), Ok(saved()));
    }

    #[test]
    fn another_machine_is_foreign() {
        let text = render(&id(), &saved());
        let mut fewer = id();
        fewer.workers.pop();
        let mut other_gpu = id();
        other_gpu.workers[0].name = "CUDA 0.0 (Tesla P100 15.9 GiB 1a:00.0)".into();
        let mut other_kind = id();
        other_kind.workers[0].kind = WorkerKind::OpenCl;
        for (other, says) in [
            (
                Identity {
                    host: "idgraf".into(),
                    ..id()
                },
                "host",
            ),
            (
                Identity {
                    starpu: "1.3.10".into(),
                    ..id()
                },
                "StarPU 1.4.10, this is 1.3.10",
            ),
            (
                Identity {
                    emulation: Some("0:speed=0.5".into()),
                    ..id()
                },
                "real timings, this run has PLB_EMULATE",
            ),
            (fewer, "2 workers"),
            (other_gpu, "P100"),
            (other_kind, "workers"),
        ] {
            match parse(&text, &other) {
                Err(LoadError::Foreign(m)) => assert!(m.contains(says), "{m}"),
                r => panic!("{r:?} for {other:?}"),
            }
        }
        // An emulated run's file is foreign to a real run.
        let emulated = Identity {
            emulation: Some("*:speed=0.5".into()),
            ..id()
        };
        let text = render(&emulated, &saved());
        assert!(matches!(parse(&text, &id()), Err(LoadError::Foreign(_))));
    }

    #[test]
    fn format_1_is_foreign() {
        let v1 = "plb-models 1\nhost attila\nstarpu 1.4.10\n\
                  sample 0 cuda 1e9 2.8e-3 chol_model_22\nend 1\n";
        match parse(v1, &id()) {
            Err(LoadError::Foreign(m)) => assert!(m.contains("plb-models 1"), "{m}"),
            r => panic!("{r:?}"),
        }
    }

    #[test]
    fn names_are_written_on_one_line() {
        let mut odd = id();
        odd.workers[1].name = "CPU\n0".into();
        odd.host = String::new();
        let text = render(&odd, &saved());
        assert!(text.contains("\nworker 1 cpu CPU_0\n"), "{text}");
        assert_eq!(parse(&text, &odd), Ok(saved()));
    }

    #[test]
    fn damaged_files_are_corrupt_never_trusted() {
        let text = render(&id(), &saved());
        // Every truncation of the file is refused (no end line, or a
        // count that does not match).
        for cut in 0..text.len() - 1 {
            let torn = &text[..cut];
            assert!(parse(torn, &id()).is_err(), "accepted a file cut at {cut}");
        }
        for damaged in [
            text.replace("2.8e-3", "NaN"),
            text.replace("sample 0", "sample x"),
            text.replace("plb-models 2", "plb-model 2"),
            format!("{text}sample 0 1 1 extra\n"),
            text.replace("sample 1 ", "sampel 1 "),
            text.replace("worker 0 cuda", "worker 0 CUDA"),
            text.replace("worker 1 cpu", "worker 2 cpu"),
            text.replace("workers 2", "workers two"),
            text.replace("timings real", "timings fake"),
            // A sample of a worker the file does not list.
            text.replace("sample 1 ", "sample 2 "),
            String::from_utf8_lossy(&[0xff, 0xfe, 0x00]).into_owned(),
        ] {
            assert!(
                matches!(parse(&damaged, &id()), Err(LoadError::Corrupt(_))),
                "accepted {damaged:?}"
            );
        }
    }

    #[test]
    fn the_newest_samples_are_kept_on_read_and_write() {
        let many: Vec<(f64, f64)> = (1..=100).map(|i| (f64::from(i), 1.0)).collect();
        let newest = many[100 - MAX_SAMPLES..].to_vec();
        let mut s = Saved::new();
        s.insert(("k".into(), 0), many.clone());
        s.insert(("bad\nname".into(), 0), vec![(1.0, 1.0)]);
        s.insert(("nan".into(), 0), vec![(f64::NAN, 1.0), (1.0, 0.0)]);
        s.insert(("no such worker".into(), 9), vec![(1.0, 1.0)]);
        let back = parse(&render(&id(), &s), &id()).unwrap();
        assert_eq!(back[&("k".to_string(), 0)], newest);
        assert_eq!(back.len(), 1);
        // A hand-made file with more lines than the cap: parse keeps the
        // same newest samples as render.
        let mut text = render(&id(), &Saved::new());
        text.truncate(text.rfind("end ").unwrap());
        for (u, t) in &many {
            text.push_str(&format!("sample 0 {u:e} {t:e} k\n"));
        }
        text.push_str("end 100\n");
        assert_eq!(parse(&text, &id()).unwrap()[&("k".to_string(), 0)], newest);
    }

    #[test]
    fn merge_appends_and_keeps_the_newest() {
        let key = |c: &str| (c.to_string(), 0);
        let mut base = Saved::new();
        base.insert(key("a"), (0..30).map(|i| (1.0, f64::from(i))).collect());
        base.insert(key("b"), vec![(1.0, 1.0)]);
        let mut newer = Saved::new();
        newer.insert(key("a"), (30..35).map(|i| (1.0, f64::from(i))).collect());
        newer.insert(key("c"), vec![(2.0, 2.0)]);
        merge(&mut base, &newer);
        let a: Vec<f64> = base[&key("a")].iter().map(|s| s.1).collect();
        assert_eq!(a, (3..35).map(f64::from).collect::<Vec<_>>());
        assert_eq!(base[&key("b")], vec![(1.0, 1.0)]);
        assert_eq!(base[&key("c")], vec![(2.0, 2.0)]);
        // Full: models already there still merge, new ones are dropped.
        let mut full: Saved = (0..MAX_MODELS)
            .map(|i| ((format!("m{i}"), 0), vec![(1.0, 1.0)]))
            .collect();
        let mut more = Saved::new();
        more.insert(("m0".into(), 0), vec![(2.0, 2.0)]);
        more.insert(("zz".into(), 0), vec![(2.0, 2.0)]);
        merge(&mut full, &more);
        assert_eq!(full.len(), MAX_MODELS);
        assert_eq!(full[&("m0".to_string(), 0)].len(), 2);
    }
}
