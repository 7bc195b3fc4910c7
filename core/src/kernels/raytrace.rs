//! The ray tracer of `plb app raytrace`: a fixed scene of spheres (a
//! ground sphere and five others, four of them mirrors) lit by one point
//! light with shadow rays, reflections followed up to [`MAX_DEPTH`]
//! bounces. Its cost per pixel depends on the scene: a ray into the sky
//! costs one round of sphere tests, a ray between facing mirrors up to
//! `2 · MAX_DEPTH` rounds. The codelets (`codelets/raytrace.c`,
//! `raytrace_cuda.cu`) trace the same scene in single precision.

/// A sphere: centre, radius, colour, reflectivity (0: matte).
#[derive(Debug, Clone, Copy)]
pub struct Sphere {
    pub centre: [f64; 3],
    pub radius: f64,
    pub colour: [f64; 3],
    pub reflect: f64,
}

const fn sphere(centre: [f64; 3], radius: f64, colour: [f64; 3], reflect: f64) -> Sphere {
    Sphere {
        centre,
        radius,
        colour,
        reflect,
    }
}

/// The scene (the C codelets hold the same numbers).
pub const SCENE: [Sphere; 6] = [
    sphere([0.0, -1002.0, -6.0], 1000.0, [0.6, 0.6, 0.6], 0.3),
    sphere([-1.0, -0.6, -4.0], 0.9, [0.9, 0.3, 0.3], 0.8),
    sphere([0.9, -1.0, -3.5], 0.6, [0.3, 0.9, 0.3], 0.9),
    sphere([-0.2, 0.8, -5.5], 0.7, [0.3, 0.3, 0.9], 0.6),
    sphere([1.6, 0.3, -6.0], 0.8, [0.9, 0.9, 0.2], 0.0),
    sphere([-1.8, 1.2, -7.0], 0.5, [0.8, 0.8, 0.8], 0.9),
];
/// The point light.
pub const LIGHT: [f64; 3] = [-4.0, 6.0, 0.0];
/// Bounces followed at most.
pub const MAX_DEPTH: u32 = 8;
/// Ambient and diffuse weights of the local shading.
pub const AMBIENT: f64 = 0.1;
pub const DIFFUSE: f64 = 0.9;
/// Smallest hit distance (no self-intersection).
pub const EPS: f64 = 1e-4;
/// How far outside the surface secondary rays start.
pub const SURFACE_OFFSET: f64 = 1e-3;
/// The camera looks down −z from the origin through a plane at this
/// distance, the image spanning [−1, 1] in x and y.
pub const FOCAL: f64 = 1.5;

fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn axpy(a: f64, x: [f64; 3], y: [f64; 3]) -> [f64; 3] {
    [a * x[0] + y[0], a * x[1] + y[1], a * x[2] + y[2]]
}

fn normalise(a: [f64; 3]) -> [f64; 3] {
    let l = dot(a, a).sqrt();
    [a[0] / l, a[1] / l, a[2] / l]
}

/// Distance along the unit ray (`o`, `d`) to sphere `s`, if it is hit
/// beyond [`EPS`].
fn hit(s: &Sphere, o: [f64; 3], d: [f64; 3]) -> Option<f64> {
    // The cancellation-free forms the single-precision codelets need (the
    // ground is a sphere of radius 1000): c = (|oc| - r)(|oc| + r), the
    // near root as c / q.
    let oc = sub(o, s.centre);
    let b = dot(oc, d);
    let len = dot(oc, oc).sqrt();
    let c = (len - s.radius) * (len + s.radius);
    let disc = b * b - c;
    if disc < 0.0 {
        return None;
    }
    let sq = disc.sqrt();
    let q = if b > 0.0 { -b - sq } else { -b + sq };
    if q == 0.0 {
        return None;
    }
    let (t0, t1) = (c / q, q);
    let (near, far) = (t0.min(t1), t0.max(t1));
    let t = if near > EPS { near } else { far };
    (t > EPS).then_some(t)
}

/// The sky's colour in direction `d` (never 0, so a lost pixel shows).
pub fn sky(d: [f64; 3]) -> [f64; 3] {
    [0.5 + 0.3 * d[1], 0.7, 0.9]
}

/// The colour of pixel (`row`, `col`) of a `rows × cols` image and the
/// ray-sphere tests it took.
pub fn trace(row: usize, col: usize, rows: usize, cols: usize) -> ([f64; 3], u64) {
    let px = -1.0 + (col as f64 + 0.5) * 2.0 / cols as f64;
    let py = 1.0 - (row as f64 + 0.5) * 2.0 / rows as f64;
    let mut d = normalise([px, py, -FOCAL]);
    let mut o = [0.0; 3];
    let mut colour = [0.0; 3];
    let mut weight = 1.0;
    let mut tests = 0u64;
    for _ in 0..MAX_DEPTH {
        tests += SCENE.len() as u64;
        let nearest = SCENE
            .iter()
            .enumerate()
            .filter_map(|(i, s)| hit(s, o, d).map(|t| (t, i)))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        let Some((t, i)) = nearest else {
            colour = axpy(weight, sky(d), colour);
            break;
        };
        let s = &SCENE[i];
        let h = axpy(t, d, o);
        let n = normalise(sub(h, s.centre));
        // Secondary rays leave from just outside the surface (what the
        // single-precision codelets need against self-shadowing).
        let h = axpy(SURFACE_OFFSET, n, h);
        let to_light = sub(LIGHT, h);
        let dist = dot(to_light, to_light).sqrt();
        let l = [to_light[0] / dist, to_light[1] / dist, to_light[2] / dist];
        let lambert = dot(n, l);
        let mut shade = AMBIENT;
        if lambert > 0.0 {
            tests += SCENE.len() as u64;
            let shadowed = SCENE.iter().any(|q| hit(q, h, l).is_some_and(|t| t < dist));
            if !shadowed {
                shade += DIFFUSE * lambert;
            }
        }
        colour = axpy(weight * (1.0 - s.reflect) * shade, s.colour, colour);
        if s.reflect <= 0.0 {
            break;
        }
        weight *= s.reflect;
        d = axpy(-2.0 * dot(d, n), n, d);
        o = h;
    }
    (colour, tests)
}

/// The cost of each row of a `rows × cols` image: its ray-sphere tests.
pub fn row_costs(rows: usize, cols: usize) -> Vec<f64> {
    (0..rows)
        .map(|r| (0..cols).map(|c| trace(r, c, rows, cols).1 as f64).sum())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ray_at_a_sphere_centre_hits_it_at_the_near_side() {
        let s = &SCENE[1];
        let d = normalise(s.centre);
        let t = hit(s, [0.0; 3], d).unwrap();
        let dist = dot(s.centre, s.centre).sqrt();
        assert!((t - (dist - s.radius)).abs() < 1e-9);
        assert!(hit(s, [0.0; 3], [0.0, 1.0, 0.0]).is_none());
    }

    #[test]
    fn sky_pixels_are_cheap_and_mirror_pixels_are_not() {
        // Top right corner: sky, one round of tests.
        let (c, tests) = trace(0, 255, 256, 256);
        assert_eq!(tests, SCENE.len() as u64);
        assert!(c.iter().all(|v| *v > 0.3));
        let costs = row_costs(64, 64);
        let max = costs.iter().copied().fold(0.0, f64::max);
        let min = costs.iter().copied().fold(f64::INFINITY, f64::min);
        assert!(max / min > 3.0, "{max} / {min}");
        // Every pixel has some colour.
        for r in (0..64).step_by(7) {
            for col in (0..64).step_by(5) {
                let (c, _) = trace(r, col, 64, 64);
                assert!(c.iter().sum::<f64>() > 0.01, "({r},{col}): {c:?}");
            }
        }
    }
}
