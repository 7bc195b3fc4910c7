//! IPOPT's return status.

use ipopt_sys as sys;

/// What IPOPT reported at the end of a solve (its `ApplicationReturnStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Status(i32);

impl Status {
    /// Solved to the requested tolerance.
    pub const SOLVE_SUCCEEDED: Status =
        Status(sys::CNLP_ApplicationReturnStatus_CNLP_SOLVE_SUCCEEDED);
    /// Solved to IPOPT's "acceptable" tolerances only.
    pub const SOLVED_TO_ACCEPTABLE_LEVEL: Status =
        Status(sys::CNLP_ApplicationReturnStatus_CNLP_SOLVED_TO_ACCEPTABLE_LEVEL);
    /// `max_iter` reached.
    pub const MAXIMUM_ITERATIONS_EXCEEDED: Status =
        Status(sys::CNLP_ApplicationReturnStatus_CNLP_MAXIMUM_ITERATIONS_EXCEEDED);
    /// IPOPT met a NaN or infinity, or an evaluation failed where it could
    /// not recover.
    pub const INVALID_NUMBER_DETECTED: Status =
        Status(sys::CNLP_ApplicationReturnStatus_CNLP_INVALID_NUMBER_DETECTED);
    /// The problem's sizes or structure are invalid.
    pub const INVALID_PROBLEM_DEFINITION: Status =
        Status(sys::CNLP_ApplicationReturnStatus_CNLP_INVALID_PROBLEM_DEFINITION);
    /// An option was rejected.
    pub const INVALID_OPTION: Status =
        Status(sys::CNLP_ApplicationReturnStatus_CNLP_INVALID_OPTION);
    /// The problem could not be created.
    pub const INTERNAL_ERROR: Status =
        Status(sys::CNLP_ApplicationReturnStatus_CNLP_INTERNAL_ERROR);

    /// The status for IPOPT's numeric code.
    pub fn from_code(code: i32) -> Status {
        Status(code)
    }

    /// IPOPT's numeric code (0 = solved, 1 = solved to acceptable level,
    /// negative = failure).
    pub fn code(self) -> i32 {
        self.0
    }

    /// Solved, to the requested or to the acceptable level.
    pub fn is_solved(self) -> bool {
        self == Status::SOLVE_SUCCEEDED || self == Status::SOLVED_TO_ACCEPTABLE_LEVEL
    }

    /// IPOPT's wording, in lower case ("solve succeeded", ...).
    pub fn name(self) -> &'static str {
        match self.0 {
            0 => "solve succeeded",
            1 => "solved to acceptable level",
            2 => "infeasible problem detected",
            3 => "search direction becomes too small",
            4 => "diverging iterates",
            5 => "user requested stop",
            6 => "feasible point found",
            -1 => "maximum iterations exceeded",
            -2 => "restoration failed",
            -3 => "error in step computation",
            -4 => "maximum CPU time exceeded",
            -10 => "not enough degrees of freedom",
            -11 => "invalid problem definition",
            -12 => "invalid option",
            -13 => "invalid number detected",
            -100 => "unrecoverable exception",
            -101 => "non-IPOPT exception thrown",
            -102 => "insufficient memory",
            _ => "internal error",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names() {
        assert_eq!(Status::SOLVE_SUCCEEDED.code(), 0);
        assert_eq!(Status::SOLVED_TO_ACCEPTABLE_LEVEL.code(), 1);
        assert_eq!(Status::INVALID_OPTION.code(), -12);
        assert_eq!(Status::INTERNAL_ERROR.code(), -199);
        assert!(Status::SOLVE_SUCCEEDED.is_solved() && Status::from_code(1).is_solved());
        assert!(!Status::MAXIMUM_ITERATIONS_EXCEEDED.is_solved());
        assert_eq!(Status::from_code(-4).name(), "maximum CPU time exceeded");
        assert_eq!(Status::INTERNAL_ERROR.name(), "internal error");
        assert_eq!(Status::INVALID_OPTION.to_string(), "invalid option (-12)");
    }
}
