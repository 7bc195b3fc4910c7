//! The `PLB_EMULATE` heterogeneity emulation: syntax and arithmetic.
//!
//! Pure (no StarPU, no clock): [`Emulation::parse`] reads the variable and
//! [`Emulation::extra`] says how long a worker must busy-wait after a task
//! body that took `elapsed`. The StarPU side (codelet trampolines, the
//! start-up banner) is in `starpu::emulate_codelets`. Policies never read this: they
//! see the slower workers only through the measured task durations.
//!
//! Syntax (see `docs/usage.md`, "Heterogeneity emulation"):
//!
//! ```text
//! PLB_EMULATE = entry { ";" entry }
//! entry       = workers ":" setting { "," setting }
//! workers     = "*" | ID | ID "-" ID          (StarPU worker ids)
//! setting     = "speed=" F | "latency=" DUR | "after=" DUR
//! DUR         = number unit, unit one of ns us ms s
//! ```
//!
//! `speed` is the relative speed of the emulated device, in (0, 1]:
//! `speed=0.25` makes task bodies take 4 times as long. `latency` is a
//! fixed cost added to every task (launch and transfer cost). `after=T`
//! starts a new phase T after StarPU's initialisation: the settings that
//! follow it apply from then on (unset ones keep the previous phase's
//! value). `*` sets the default of every worker; an entry naming a worker
//! replaces the default for that worker entirely.

use std::fmt;
use std::time::Duration;

/// One period of a worker's emulated behaviour.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    /// Start of the phase, measured from StarPU's initialisation.
    pub after: Duration,
    /// Relative speed in (0, 1]: task bodies take `1/speed` times as long.
    pub speed: f64,
    /// Fixed extra time per task.
    pub latency: Duration,
}

impl Phase {
    /// The time to add after a task body that ran for `elapsed`:
    /// `(1/speed - 1)·elapsed + latency`.
    pub fn extra(&self, elapsed: Duration) -> Duration {
        let slow = (1.0 / self.speed - 1.0).max(0.0) * elapsed.as_secs_f64();
        Duration::try_from_secs_f64(slow).unwrap_or(Duration::MAX) + self.latency
    }

    fn is_identity(&self) -> bool {
        self.speed == 1.0 && self.latency.is_zero()
    }

    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.speed != 1.0 {
            parts.push(format!("{}x slower", fmt_num(1.0 / self.speed)));
        }
        if !self.latency.is_zero() {
            parts.push(format!("+{} per task", fmt_duration(self.latency)));
        }
        if parts.is_empty() {
            "unchanged".into()
        } else {
            parts.join(", ")
        }
    }
}

/// The phases of one worker, ordered by strictly increasing start; the
/// first starts at 0.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerEmulation {
    pub phases: Vec<Phase>,
}

impl WorkerEmulation {
    /// The phase in force `since_init` after StarPU's initialisation.
    pub fn phase_at(&self, since_init: Duration) -> &Phase {
        self.phases
            .iter()
            .rev()
            .find(|p| p.after <= since_init)
            .unwrap_or(&self.phases[0])
    }

    /// Human-readable summary, e.g. "4x slower, +20 ms per task; after 5 s: 2x slower".
    pub fn describe(&self) -> String {
        let mut out = self.phases[0].describe();
        for p in &self.phases[1..] {
            out.push_str(&format!(
                "; after {}: {}",
                fmt_duration(p.after),
                p.describe()
            ));
        }
        out
    }

    fn is_identity(&self) -> bool {
        self.phases.iter().all(Phase::is_identity)
    }
}

/// Which workers an entry applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workers {
    /// `*`: every worker without an entry of its own.
    All,
    /// `N` or `N-M` (inclusive).
    Range(u32, u32),
}

impl Workers {
    fn contains(&self, id: u32) -> bool {
        match *self {
            Workers::All => true,
            Workers::Range(a, b) => (a..=b).contains(&id),
        }
    }
}

impl fmt::Display for Workers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Workers::All => write!(f, "every other worker"),
            Workers::Range(a, b) if a == b => write!(f, "worker {a}"),
            Workers::Range(a, b) => write!(f, "workers {a}-{b}"),
        }
    }
}

/// A parsed `PLB_EMULATE`.
#[derive(Clone, Debug, PartialEq)]
pub struct Emulation {
    /// Entries in the order written; at most one `*`, ranges disjoint.
    pub entries: Vec<(Workers, WorkerEmulation)>,
}

/// Why `PLB_EMULATE` was rejected.
#[derive(Clone, Debug, PartialEq)]
pub enum EmulateError {
    /// An entry without `workers:`.
    MissingColon(String),
    /// The part before `:` is not `*`, `N` or `N-M`.
    BadWorkers(String),
    /// The same worker is named by two entries (or `*` twice).
    Overlap(String),
    /// A setting is not `key=value`, or the key is unknown.
    BadSetting(String),
    /// `speed` is not a number in (0, 1].
    BadSpeed(String),
    /// A duration is not a non-negative number followed by ns, us, ms or s.
    BadDuration(String),
    /// `after` values of an entry must be positive and increasing.
    AfterOrder(String),
    /// An entry with no setting at all.
    Empty(String),
}

impl fmt::Display for EmulateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmulateError::MissingColon(e) => {
                write!(
                    f,
                    "entry `{e}` has no `:` (expected WORKERS:SETTINGS, e.g. `1:speed=0.25`)"
                )
            }
            EmulateError::BadWorkers(w) => {
                write!(f, "`{w}` is not a worker selection (`*`, `N` or `N-M`)")
            }
            EmulateError::Overlap(w) => {
                write!(f, "`{w}` names a worker that another entry already sets")
            }
            EmulateError::BadSetting(s) => write!(
                f,
                "`{s}` is not a setting (expected speed=F, latency=DURATION or after=DURATION)"
            ),
            EmulateError::BadSpeed(s) => write!(
                f,
                "speed `{s}` is not a relative speed in (0, 1] (0.25 = 4x slower; a faster device cannot be emulated)"
            ),
            EmulateError::BadDuration(d) => write!(
                f,
                "`{d}` is not a duration (a non-negative number with a unit: ns, us, ms or s, e.g. 20ms)"
            ),
            EmulateError::AfterOrder(d) => {
                write!(
                    f,
                    "after={d}: phase starts must be positive and increasing within an entry"
                )
            }
            EmulateError::Empty(e) => write!(f, "entry `{e}` sets nothing"),
        }
    }
}

impl std::error::Error for EmulateError {}

impl Emulation {
    /// Parses the value of `PLB_EMULATE`. Empty entries (a trailing `;`,
    /// or a blank value) are ignored; an entirely blank value gives an
    /// emulation with no entries (see [`Emulation::is_empty`]).
    pub fn parse(text: &str) -> Result<Self, EmulateError> {
        let mut entries: Vec<(Workers, WorkerEmulation)> = Vec::new();
        for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
            let (who, settings) = entry
                .split_once(':')
                .ok_or_else(|| EmulateError::MissingColon(entry.into()))?;
            let who = parse_workers(who.trim())?;
            let overlaps = entries.iter().any(|(w, _)| match (w, &who) {
                (Workers::All, Workers::All) => true,
                (Workers::Range(a, b), Workers::Range(c, d)) => a <= d && c <= b,
                _ => false,
            });
            if overlaps {
                return Err(EmulateError::Overlap(entry.into()));
            }
            entries.push((who, parse_settings(entry, settings)?));
        }
        Ok(Emulation { entries })
    }

    /// No entries at all (a blank `PLB_EMULATE`).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The settings of worker `id`, or `None` when it is not emulated (or
    /// its settings change nothing).
    pub fn worker(&self, id: u32) -> Option<&WorkerEmulation> {
        let own = self
            .entries
            .iter()
            .find(|(w, _)| *w != Workers::All && w.contains(id));
        let any = own.or_else(|| self.entries.iter().find(|(w, _)| *w == Workers::All));
        any.map(|(_, e)| e).filter(|e| !e.is_identity())
    }

    /// The busy-wait to add on worker `id` after a task body that started
    /// `since_init` after StarPU's initialisation and ran for `elapsed`.
    pub fn extra(&self, id: u32, since_init: Duration, elapsed: Duration) -> Duration {
        self.worker(id)
            .map_or(Duration::ZERO, |w| w.phase_at(since_init).extra(elapsed))
    }

    /// One line per entry, e.g. "worker 1: 4x slower, +20 ms per task".
    pub fn describe(&self) -> Vec<String> {
        self.entries
            .iter()
            .map(|(w, e)| format!("{w}: {}", e.describe()))
            .collect()
    }
}

fn parse_workers(w: &str) -> Result<Workers, EmulateError> {
    let bad = || EmulateError::BadWorkers(w.into());
    if w == "*" {
        return Ok(Workers::All);
    }
    let num = |s: &str| s.trim().parse::<u32>().map_err(|_| bad());
    match w.split_once('-') {
        None => num(w).map(|n| Workers::Range(n, n)),
        Some((a, b)) => {
            let (a, b) = (num(a)?, num(b)?);
            if a > b {
                return Err(bad());
            }
            Ok(Workers::Range(a, b))
        }
    }
}

fn parse_settings(entry: &str, settings: &str) -> Result<WorkerEmulation, EmulateError> {
    let mut phases = vec![Phase {
        after: Duration::ZERO,
        speed: 1.0,
        latency: Duration::ZERO,
    }];
    let mut any = false;
    for s in settings.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        any = true;
        let (key, value) = s
            .split_once('=')
            .ok_or_else(|| EmulateError::BadSetting(s.into()))?;
        let value = value.trim();
        let cur = phases.last_mut().expect("at least one phase");
        match key.trim() {
            "speed" => {
                let v: f64 = value
                    .parse()
                    .map_err(|_| EmulateError::BadSpeed(value.into()))?;
                if !(v > 0.0 && v <= 1.0) {
                    return Err(EmulateError::BadSpeed(value.into()));
                }
                cur.speed = v;
            }
            "latency" => cur.latency = parse_duration(value)?,
            "after" => {
                let t = parse_duration(value)?;
                if t <= cur.after {
                    return Err(EmulateError::AfterOrder(value.into()));
                }
                let next = Phase {
                    after: t,
                    ..cur.clone()
                };
                phases.push(next);
            }
            _ => return Err(EmulateError::BadSetting(s.into())),
        }
    }
    if !any {
        return Err(EmulateError::Empty(entry.into()));
    }
    Ok(WorkerEmulation { phases })
}

/// `20ms`, `1.5s`, `100us`, `0ns`: a non-negative number and a unit (the
/// `PLB_*` variables' duration syntax, `plb_core`'s `parse_duration_s`).
pub fn parse_duration(text: &str) -> Result<Duration, EmulateError> {
    plb_core::balance::tuning::parse_duration_s(text)
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| EmulateError::BadDuration(text.into()))
}

fn fmt_num(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{} s", fmt_num(s))
    } else if s >= 1e-3 {
        format!("{} ms", fmt_num(s * 1e3))
    } else {
        format!("{} us", fmt_num(s * 1e6))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn parses_the_documented_example() {
        let e =
            Emulation::parse("1:speed=0.25,latency=20ms; 0:speed=1,after=5s,speed=0.5").unwrap();
        assert_eq!(e.entries.len(), 2);
        let w1 = e.worker(1).unwrap();
        assert_eq!(w1.phases.len(), 1);
        assert_eq!(w1.phases[0].speed, 0.25);
        assert_eq!(w1.phases[0].latency, ms(20));
        let w0 = e.worker(0).unwrap();
        assert_eq!(w0.phases.len(), 2);
        assert_eq!(w0.phases[1].after, ms(5000));
        assert_eq!(w0.phases[1].speed, 0.5);
        assert!(e.worker(2).is_none());
        assert_eq!(
            e.describe(),
            vec![
                "worker 1: 4x slower, +20 ms per task",
                "worker 0: unchanged; after 5 s: 2x slower"
            ]
        );
    }

    #[test]
    fn extra_time_follows_speed_latency_and_phase() {
        let e =
            Emulation::parse("1:speed=0.25,latency=20ms;0:after=5s,speed=0.5,latency=1ms").unwrap();
        // 4x slower: 3 extra body durations, plus the latency.
        assert_eq!(e.extra(1, ms(0), ms(10)), ms(30) + ms(20));
        // Worker 0 is unchanged before 5 s, then 2x slower and +1 ms.
        assert_eq!(e.extra(0, ms(4999), ms(10)), Duration::ZERO);
        assert_eq!(e.extra(0, ms(5000), ms(10)), ms(11));
        assert_eq!(e.extra(3, ms(9000), ms(10)), Duration::ZERO);
    }

    #[test]
    fn later_phases_inherit_unset_values() {
        let e = Emulation::parse("2:latency=5ms,speed=0.5,after=1s,speed=0.25,after=2s,latency=0s")
            .unwrap();
        let p = &e.worker(2).unwrap().phases;
        assert_eq!((p[1].speed, p[1].latency), (0.25, ms(5)));
        assert_eq!((p[2].speed, p[2].latency), (0.25, ms(0)));
    }

    #[test]
    fn star_is_the_default_and_ranges_work() {
        let e = Emulation::parse("*:latency=1ms;2-3:speed=0.5").unwrap();
        assert_eq!(e.extra(0, ms(0), ms(4)), ms(1));
        assert_eq!(e.extra(2, ms(0), ms(4)), ms(4));
        assert_eq!(e.extra(3, ms(0), ms(4)), ms(4));
        assert_eq!(e.extra(4, ms(0), ms(4)), ms(1));
    }

    #[test]
    fn blank_and_trailing_separators() {
        assert!(Emulation::parse("").unwrap().is_empty());
        assert!(Emulation::parse(" ; ").unwrap().is_empty());
        assert_eq!(Emulation::parse("0:latency=1ms;").unwrap().entries.len(), 1);
    }

    #[test]
    fn identity_settings_emulate_nothing() {
        let e = Emulation::parse("0:speed=1,latency=0ms").unwrap();
        assert!(e.worker(0).is_none());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("20ms"), Ok(ms(20)));
        assert_eq!(parse_duration("1.5s"), Ok(ms(1500)));
        assert_eq!(parse_duration("100us"), Ok(Duration::from_micros(100)));
        assert_eq!(parse_duration("7ns"), Ok(Duration::from_nanos(7)));
        for bad in ["20", "ms", "-1ms", "1h", "1 m s", "nanms", "infs"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rejects_invalid_values_with_typed_errors() {
        use EmulateError::*;
        let err = |s: &str| Emulation::parse(s).unwrap_err();
        assert!(matches!(err("1speed=0.5"), MissingColon(_)));
        assert!(matches!(err("x:speed=0.5"), BadWorkers(_)));
        assert!(matches!(err("3-1:speed=0.5"), BadWorkers(_)));
        assert!(matches!(err("-1:speed=0.5"), BadWorkers(_)));
        assert!(matches!(err("1:speed=0.5;0-2:latency=1ms"), Overlap(_)));
        assert!(matches!(err("*:speed=0.5;*:latency=1ms"), Overlap(_)));
        assert!(matches!(err("1:slowdown=4"), BadSetting(_)));
        assert!(matches!(err("1:speed"), BadSetting(_)));
        assert!(matches!(err("1:speed=2"), BadSpeed(_)));
        assert!(matches!(err("1:speed=0"), BadSpeed(_)));
        assert!(matches!(err("1:speed=NaN"), BadSpeed(_)));
        assert!(matches!(err("1:speed=fast"), BadSpeed(_)));
        assert!(matches!(err("1:latency=20"), BadDuration(_)));
        assert!(matches!(err("1:after=0s,speed=0.5"), AfterOrder(_)));
        assert!(matches!(
            err("1:after=2s,speed=0.5,after=1s"),
            AfterOrder(_)
        ));
        assert!(matches!(err("1:"), Empty(_)));
        // The message names the offending text.
        assert!(err("1:speed=2").to_string().contains("`2`"));
    }
}
