//! EngineCL's **Dynamic** balancer (`../shared/papers/sigmoid-opencl-lb.txt`):
//! the work is cut into a fixed number of equal packages, each handed to
//! whichever PU is idle. Adaptive to any irregularity, at the price of one
//! host–device interaction per package; the number of packages is the
//! trade-off (`dynamic:packages=N`, default [`DEFAULT_PACKAGES`]).

use super::Balancer;
use super::greedy::Greedy;
use super::registry::{Args, BuildContext, Entry, Param};

/// Packages when none is given.
pub const DEFAULT_PACKAGES: u64 = 64;

/// Units per package: `ceil(total / packages)` (at least 1).
pub fn package_units(total: u64, packages: u64) -> u64 {
    total.div_ceil(packages.max(1)).max(1)
}

fn build(args: &Args, ctx: &BuildContext<'_>) -> Result<Box<dyn Balancer + Send>, String> {
    let packages = match args.get("packages") {
        Some(v) => v
            .parse::<u64>()
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| format!("packages = {v:?}"))?,
        None => DEFAULT_PACKAGES,
    };
    Ok(Box::new(Greedy::named(
        "dynamic",
        ctx.total,
        package_units(ctx.total, packages),
    )))
}

pub(super) const ENTRY: Entry = Entry {
    name: "dynamic",
    summary: "EngineCL's Dynamic: the work cut into equal packages (dynamic:packages=N, default \
              64), each to whichever worker is idle",
    params: &[Param {
        key: "packages",
        accepted: "an integer >= 1",
        check: super::hguided::check_units,
    }],
    build,
    training_units_per_pu: super::registry::no_training,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::{Completion, Decision};

    #[test]
    fn packages_are_equal_and_cover_the_work() {
        assert_eq!(package_units(1000, 64), 16);
        assert_eq!(package_units(10, 64), 1);
        assert_eq!(package_units(0, 4), 1);
        let mut b = Greedy::named("dynamic", 100, package_units(100, 8));
        assert_eq!(b.name(), "dynamic");
        let mut lens = Vec::new();
        while let Decision::Run(block) = b.next(lens.len() % 3, 0.0) {
            lens.push(block.len);
            b.completed(Completion {
                block,
                compute_s: 1.0,
                transfer_s: 0.0,
                finished_at: 1.0,
            });
        }
        assert_eq!(lens, [13, 13, 13, 13, 13, 13, 13, 9]);
    }
}
