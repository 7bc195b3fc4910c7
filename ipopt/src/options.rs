//! IPOPT options, set on the problem in the order given.

/// The value of one IPOPT option.
#[derive(Debug, Clone, PartialEq)]
pub enum OptionValue {
    /// A string option (`mu_strategy = adaptive`).
    Str(String),
    /// A numeric option (`tol = 1e-8`).
    Num(f64),
    /// An integer option (`max_iter = 100`).
    Int(i32),
}

/// An ordered list of IPOPT options (names as in IPOPT's documentation).
/// A name IPOPT does not know, or a value of the wrong type or out of
/// range, makes [`crate::solve()`] fail with [`crate::Error::InvalidOption`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Options {
    items: Vec<(String, OptionValue)>,
}

impl Options {
    /// No option: IPOPT's defaults.
    pub fn new() -> Options {
        Options::default()
    }

    /// Adds a string option.
    pub fn str(&mut self, name: &str, value: &str) -> &mut Options {
        self.push(name, OptionValue::Str(value.to_string()))
    }

    /// Adds a numeric option.
    pub fn num(&mut self, name: &str, value: f64) -> &mut Options {
        self.push(name, OptionValue::Num(value))
    }

    /// Adds an integer option.
    pub fn int(&mut self, name: &str, value: i32) -> &mut Options {
        self.push(name, OptionValue::Int(value))
    }

    fn push(&mut self, name: &str, value: OptionValue) -> &mut Options {
        self.items.push((name.to_string(), value));
        self
    }

    /// The options in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &OptionValue)> {
        self.items.iter().map(|(k, v)| (k.as_str(), v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_types() {
        let mut o = Options::new();
        o.str("mu_strategy", "adaptive")
            .num("tol", 1e-9)
            .int("max_iter", 7);
        let got: Vec<_> = o.iter().collect();
        assert_eq!(
            got,
            vec![
                ("mu_strategy", &OptionValue::Str("adaptive".into())),
                ("tol", &OptionValue::Num(1e-9)),
                ("max_iter", &OptionValue::Int(7)),
            ]
        );
        assert_eq!(Options::new().iter().count(), 0);
    }
}
