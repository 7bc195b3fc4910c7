//! Models that persist between runs: the text format of a calibration file
//! holding task mode's samples per (codelet, worker), and the check that a
//! file belongs to this machine. Parsing and rendering only; the StarPU
//! adapter reads and writes the file (atomically: a temporary file renamed
//! over the old one).
//!
//! A codelet is named by its performance model's symbol, else its name
//! (`docs/usage.md`, "Models that persist"); codelets with neither are not
//! saved, since nothing identifies them in the next run. The samples are
//! the raw measurements (at most [`MAX_SAMPLES`] per model), so the next
//! run refits them with the same outlier screening: a file carries no
//! fitted curve that could be wrong.
//!
//! ```text
//! plb-models 1
//! host attila
//! starpu 1.4.10
//! sample <worker> <kind> <units> <seconds> <codelet>
//! ...
//! end <number of sample lines>
//! ```
//!
//! A sample is used again only by a worker of the same id *and kind* (a run
//! with another worker set on the same machine keeps what still applies).

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// First line of every file.
pub const MAGIC: &str = "plb-models 1";

/// Samples kept per (codelet, worker) model.
pub const MAX_SAMPLES: usize = 32;

/// Models (codelet, worker pairs) kept in one file.
pub const MAX_MODELS: usize = 4096;

/// The machine a file was measured on: host name and StarPU version. A
/// file whose identity differs is foreign.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Host name (`STARPU_HOSTNAME` where set, as StarPU does).
    pub host: String,
    /// StarPU's version (`1.4.10`).
    pub starpu: String,
}

/// One saved model: the kind of the worker it was measured on (`cpu`,
/// `cuda`, `opencl`...) and its samples, (units, seconds), oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedModel {
    /// The worker's kind.
    pub kind: String,
    /// The samples.
    pub samples: Vec<(f64, f64)>,
}

/// Saved models by (codelet name, worker id).
pub type Saved = BTreeMap<(String, usize), SavedModel>;

/// Why a file was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// Not a models file, or damaged (a line says which).
    Corrupt(String),
    /// Written on another machine, StarPU or worker set.
    Foreign(String),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Corrupt(m) => write!(f, "corrupt: {m}"),
            LoadError::Foreign(m) => write!(f, "from another machine: {m}"),
        }
    }
}

/// Whether a name can be written on one line (no control characters).
fn clean(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(char::is_control)
}

/// Whether a kind is one word.
fn word(kind: &str) -> bool {
    !kind.is_empty()
        && kind
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The file's text for `saved` measured on `id` (models beyond
/// [`MAX_MODELS`], samples beyond [`MAX_SAMPLES`] per model — the oldest —
/// and unprintable names are left out).
pub fn render(id: &Identity, saved: &Saved) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{MAGIC}");
    let _ = writeln!(out, "host {}", id.host);
    let _ = writeln!(out, "starpu {}", id.starpu);
    let mut lines = 0usize;
    for ((codelet, worker), model) in saved
        .iter()
        .filter(|((c, _), m)| clean(c) && word(&m.kind))
        .take(MAX_MODELS)
    {
        let kind = &model.kind;
        let skip = model.samples.len().saturating_sub(MAX_SAMPLES);
        for &(units, secs) in &model.samples[skip..] {
            if units.is_finite() && units > 0.0 && secs.is_finite() && secs > 0.0 {
                let _ = writeln!(out, "sample {worker} {kind} {units:e} {secs:e} {codelet}");
                lines += 1;
            }
        }
    }
    let _ = writeln!(out, "end {lines}");
    out
}

/// Reads a file's text, checking it was written on `expected`.
pub fn parse(text: &str, expected: &Identity) -> Result<Saved, LoadError> {
    let bad = |m: String| Err(LoadError::Corrupt(m));
    let mut lines = text.lines();
    if lines.next() != Some(MAGIC) {
        return bad(format!("first line is not {MAGIC:?}"));
    }
    let mut field = |key: &str| -> Result<String, LoadError> {
        match lines
            .next()
            .and_then(|l| l.strip_prefix(key))
            .and_then(|r| r.strip_prefix(' '))
        {
            Some(v) => Ok(v.to_string()),
            None => Err(LoadError::Corrupt(format!("missing the {key} line"))),
        }
    };
    let found = Identity {
        host: field("host")?,
        starpu: field("starpu")?,
    };
    let mut saved = Saved::new();
    let mut count = 0usize;
    let mut ended = false;
    for (i, line) in lines.enumerate() {
        let n = i + 4;
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
        let mut parts = rest.splitn(5, ' ');
        let (Some(w), Some(kind), Some(u), Some(s), Some(codelet)) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return bad(format!("line {n}: incomplete sample"));
        };
        let (Ok(worker), Ok(units), Ok(secs)) =
            (w.parse::<usize>(), u.parse::<f64>(), s.parse::<f64>())
        else {
            return bad(format!("line {n}: unreadable numbers"));
        };
        if !(units.is_finite()
            && units > 0.0
            && secs.is_finite()
            && secs > 0.0
            && clean(codelet)
            && word(kind))
        {
            return bad(format!("line {n}: invalid sample"));
        }
        count += 1;
        let model = saved
            .entry((codelet.to_string(), worker))
            .or_insert_with(|| SavedModel {
                kind: kind.to_string(),
                samples: Vec::new(),
            });
        if model.kind != kind {
            return bad(format!("line {n}: worker {worker} changes kind"));
        }
        if model.samples.len() < MAX_SAMPLES {
            model.samples.push((units, secs));
        }
        if saved.len() > MAX_MODELS {
            return bad(format!("more than {MAX_MODELS} models"));
        }
    }
    if !ended {
        return bad("no end line (truncated)".into());
    }
    if found != *expected {
        return Err(LoadError::Foreign(format!(
            "written on host {:?} with StarPU {}, this is host {:?} with StarPU {}",
            found.host, found.starpu, expected.host, expected.starpu
        )));
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
        }
    }

    fn model(kind: &str, samples: Vec<(f64, f64)>) -> SavedModel {
        SavedModel {
            kind: kind.into(),
            samples,
        }
    }

    fn saved() -> Saved {
        let mut s = Saved::new();
        s.insert(
            ("chol_model_22".into(), 0),
            model("cuda", vec![(1e9, 0.0028), (1e9, 0.0029)]),
        );
        s.insert(
            ("starpu_dgemm_gemm with spaces".into(), 1),
            model("cpu", vec![(2.5e8, 0.084)]),
        );
        s
    }

    #[test]
    fn round_trip() {
        let text = render(&id(), &saved());
        assert_eq!(parse(&text, &id()), Ok(saved()));
    }

    #[test]
    fn another_machine_is_foreign() {
        let text = render(&id(), &saved());
        for other in [
            Identity {
                host: "idgraf".into(),
                ..id()
            },
            Identity {
                starpu: "1.3.10".into(),
                ..id()
            },
        ] {
            assert!(matches!(parse(&text, &other), Err(LoadError::Foreign(_))));
        }
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
            text.replace("0.0028", "NaN").replace("2.8e-3", "NaN"),
            text.replace("sample 0", "sample x"),
            text.replace("plb-models 1", "plb-models 2"),
            format!("{text}sample 0 1 1 extra\n"),
            text.replace("sample 1 ", "sampel 1 "),
            text.replace("sample 0 cuda", "sample 0 cu/da"),
            // Worker 0 measured as a CUDA and then a CPU worker.
            text.replacen("sample 0 cuda 1e9 2.9e-3", "sample 0 cpu 1e9 2.9e-3", 1),
            String::from_utf8_lossy(&[0xff, 0xfe, 0x00]).into_owned(),
        ] {
            assert!(
                matches!(parse(&damaged, &id()), Err(LoadError::Corrupt(_))),
                "accepted {damaged:?}"
            );
        }
    }

    #[test]
    fn bounded_and_clean() {
        let mut s = Saved::new();
        s.insert(
            ("k".into(), 0),
            model("cpu", (1..=100).map(|i| (f64::from(i), 1.0)).collect()),
        );
        s.insert(("bad\nname".into(), 0), model("cpu", vec![(1.0, 1.0)]));
        s.insert(("badkind".into(), 0), model("c p u", vec![(1.0, 1.0)]));
        s.insert(
            ("nan".into(), 0),
            model("cpu", vec![(f64::NAN, 1.0), (1.0, 0.0)]),
        );
        let back = parse(&render(&id(), &s), &id()).unwrap();
        let k = &back[&("k".to_string(), 0)].samples;
        // The latest samples are kept.
        assert_eq!(k.len(), MAX_SAMPLES);
        assert_eq!(k.last(), Some(&(100.0, 1.0)));
        assert_eq!(back.len(), 1);
    }
}
