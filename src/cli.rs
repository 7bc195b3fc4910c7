//! What every subcommand's command line shares: value parsers, usage
//! errors found after parsing, and run-time failures.
//!
//! Exit statuses: 0 success; 1 a run-time failure (`plb: error: ...`) or a
//! result that failed its verification; 2 a command line that cannot work
//! (clap's usage errors, and the set-up errors of [`Failure::setup`]).

use std::ffi::OsStr;
use std::fmt::Display;
use std::marker::PhantomData;
use std::str::FromStr;

use clap::builder::TypedValueParser;
use clap::error::ErrorKind;
use clap::{Arg, Command, CommandFactory};

/// A failure after the command line was parsed: printed as
/// `plb: error: <message>`, exit status `status`.
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    pub status: u8,
}

impl Failure {
    /// The request cannot be set up (the policy library is missing,
    /// `$STARPU_SCHED` names no policy): exit status 2, as for a usage error.
    pub fn setup(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            status: 2,
        }
    }
}

/// Run-time failures: exit status 1.
impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure { message, status: 1 }
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Failure {
        Failure::from(message.to_string())
    }
}

/// A usage error of `plb <subcommand>` found after parsing, formatted as
/// clap formats its own (with that subcommand's usage line; exit status 2).
pub fn usage_error(subcommand: &str, message: impl Display) -> clap::Error {
    let mut cmd = crate::Cli::command();
    cmd.build();
    match cmd.find_subcommand_mut(subcommand) {
        Some(sub) => sub.error(ErrorKind::ValueValidation, message),
        None => cmd.error(ErrorKind::ValueValidation, message),
    }
}

/// Value parser of a policy name StarPU knows (ours or its own).
pub fn policy_name(name: &str) -> Result<String, String> {
    crate::launch::check_policy_name(name)?;
    Ok(name.to_string())
}

/// Value parser of a policy with settings, `NAME[+VAR=VALUE...]`
/// ([`crate::simgrid::Variant`]), whose name StarPU knows.
pub fn policy_variant(text: &str) -> Result<crate::simgrid::Variant, String> {
    let v = crate::simgrid::Variant::parse(text)?;
    crate::launch::check_policy_name(&v.name)?;
    Ok(v)
}

/// Value parser of a whole number of at least 1: refuses `--reps 0` with
/// "--reps must be at least 1".
#[derive(Clone, Copy)]
pub struct Positive<T>(PhantomData<T>);

/// [`Positive`] for type `T` (`value_parser = positive::<u64>()`).
pub fn positive<T>() -> Positive<T> {
    Positive(PhantomData)
}

impl<T> TypedValueParser for Positive<T>
where
    T: FromStr + From<u8> + PartialOrd + Clone + Send + Sync + 'static,
{
    type Value = T;

    fn parse_ref(&self, cmd: &Command, arg: Option<&Arg>, value: &OsStr) -> Result<T, clap::Error> {
        let name = arg.and_then(Arg::get_long).map_or_else(
            || arg.map_or_else(|| "the value".to_string(), |a| a.get_id().to_string()),
            |long| format!("--{long}"),
        );
        let text = value.to_string_lossy();
        let message = match text.parse::<T>() {
            Ok(v) if v >= T::from(1) => return Ok(v),
            Ok(_) => format!("{name} must be at least 1"),
            Err(_) => format!("{name}: '{text}' is not a whole number"),
        };
        let mut cmd = cmd.clone();
        Err(cmd.error(ErrorKind::ValueValidation, message))
    }
}

/// Value parser of a positive number of seconds.
pub fn positive_seconds(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|s| *s > 0.0 && s.is_finite())
        .ok_or_else(|| format!("'{text}' is not a positive number of seconds"))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser, Debug)]
    struct Counts {
        #[arg(long, value_parser = positive::<u64>())]
        reps: Option<u64>,
        #[arg(long, value_parser = positive_seconds)]
        budget: Option<f64>,
    }

    #[test]
    fn positive_counts_and_seconds() {
        let ok = Counts::try_parse_from(["t", "--reps", "3", "--budget", "0.5"]).unwrap();
        assert_eq!((ok.reps, ok.budget), (Some(3), Some(0.5)));
        let zero = Counts::try_parse_from(["t", "--reps", "0"]).unwrap_err();
        assert_eq!(zero.kind(), ErrorKind::ValueValidation);
        assert!(
            zero.to_string().contains("--reps must be at least 1"),
            "{zero}"
        );
        let text = Counts::try_parse_from(["t", "--reps", "x"]).unwrap_err();
        assert!(
            text.to_string().contains("'x' is not a whole number"),
            "{text}"
        );
        assert!(Counts::try_parse_from(["t", "--budget", "0"]).is_err());
        assert!(Counts::try_parse_from(["t", "--budget", "inf"]).is_err());
    }

    #[test]
    fn the_command_line_is_well_formed() {
        crate::Cli::command().debug_assert();
    }
}
