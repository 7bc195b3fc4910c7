//! A sampled machine with its bus bandwidths scaled (`NAME:bus=F`): the
//! question "what would this machine do with a bus F times as fast?" (or
//! as slow, F < 1), answered by StarPU-SimGrid on the same samples.
//!
//! StarPU-SimGrid finds a machine by its host name (`STARPU_HOSTNAME`):
//! `bus/<host>.platform.xml` (the links SimGrid simulates),
//! `bus/<host>.bandwidth` (StarPU's own bus model, which the policies'
//! transfer predictions read) and `codelets/*/<model>.<host>` (the
//! kernels' timings). A scaled machine is a new host name in the run's
//! copy of the samples, `<name>-bus<F>`: its bandwidths (every link of the
//! platform, every entry of the bandwidth table) times F, everything else
//! (latencies, affinities, kernels) as sampled.

use std::path::Path;

/// The host name of `name`'s samples with the bus scaled by `factor` (as
/// written on the command line; a `.` becomes `p`: `sirocco-bus0p5`).
pub fn host_name(name: &str, factor: &str) -> String {
    format!("{name}-bus{}", factor.replace('.', "p"))
}

/// `factor` as a bus scale: a finite number > 0.
pub fn parse_factor(factor: &str) -> Result<f64, String> {
    match factor.parse::<f64>() {
        Ok(f) if f.is_finite() && f > 0.0 => Ok(f),
        _ => Err(format!("bus={factor}: the bus scale is a number > 0")),
    }
}

/// A SimGrid platform (`platform.xml`, either version) with every
/// `bandwidth="B"` or `bandwidth="BBps"` attribute times `factor`.
pub fn scale_platform(xml: &str, factor: f64) -> Result<String, String> {
    const KEY: &str = "bandwidth=\"";
    let mut out = String::with_capacity(xml.len());
    let mut rest = xml;
    let mut scaled = 0;
    while let Some(at) = rest.find(KEY) {
        let (head, tail) = rest.split_at(at + KEY.len());
        out.push_str(head);
        let end = tail
            .find('"')
            .ok_or_else(|| "a bandwidth attribute is not closed".to_string())?;
        let value = &tail[..end];
        let (number, unit) = value
            .strip_suffix("Bps")
            .map_or((value, ""), |n| (n, "Bps"));
        let b: f64 = number
            .parse()
            .map_err(|_| format!("bandwidth=\"{value}\" is not a number of bytes per second"))?;
        out.push_str(&format!("{}{unit}", b * factor));
        scaled += 1;
        rest = &tail[end..];
    }
    out.push_str(rest);
    if scaled == 0 {
        return Err("no bandwidth attribute found".into());
    }
    Ok(out)
}

/// StarPU's bandwidth table (`bus/<host>.bandwidth`: MB/s from each node
/// to each, `#` comment lines) with every finite entry times `factor`;
/// `nan` entries (no such pair) stay.
pub fn scale_bandwidth_table(text: &str, factor: f64) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if line.trim_start().starts_with('#') {
            out.push_str(line);
        } else {
            let cells: Vec<String> = line
                .split_whitespace()
                .map(|cell| match cell.parse::<f64>() {
                    Ok(x) if x.is_finite() => format!("{:e}", x * factor),
                    _ => cell.to_string(),
                })
                .collect();
            out.push_str(&cells.join("\t"));
        }
        out.push('\n');
    }
    out
}

/// Writes into the run's copy of the samples (`samples`) the machine
/// `name` with its bus scaled by `factor` (as written), under the host
/// name [`host_name`] gives, which it returns.
pub fn derive(samples: &Path, name: &str, factor: &str) -> Result<String, String> {
    let f = parse_factor(factor)?;
    let host = host_name(name, factor);
    let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    let bus = samples.join("bus");
    let prefix = format!("{name}.");
    for entry in std::fs::read_dir(&bus).map_err(|e| io(&bus, e))? {
        let path = entry.map_err(|e| io(&bus, e))?.path();
        let Some(file) = path.file_name().and_then(|f| f.to_str()) else {
            continue;
        };
        let Some(kind) = file.strip_prefix(&prefix) else {
            continue;
        };
        let text = std::fs::read_to_string(&path).map_err(|e| io(&path, e))?;
        let scaled = if kind.starts_with("platform") && kind.ends_with(".xml") {
            scale_platform(&text, f).map_err(|e| format!("{}: {e}", path.display()))?
        } else if kind == "bandwidth" {
            scale_bandwidth_table(&text, f)
        } else {
            text
        };
        let target = bus.join(format!("{host}.{kind}"));
        std::fs::write(&target, scaled).map_err(|e| io(&target, e))?;
    }
    let codelets = samples.join("codelets");
    let suffix = format!(".{name}");
    for dir in std::fs::read_dir(&codelets).map_err(|e| io(&codelets, e))? {
        let dir = dir.map_err(|e| io(&codelets, e))?.path();
        if !dir.is_dir() {
            continue;
        }
        for entry in std::fs::read_dir(&dir).map_err(|e| io(&dir, e))? {
            let path = entry.map_err(|e| io(&dir, e))?.path();
            let Some(model) = path
                .file_name()
                .and_then(|f| f.to_str())
                .and_then(|f| f.strip_suffix(&suffix))
            else {
                continue;
            };
            let target = dir.join(format!("{model}.{host}"));
            std::fs::copy(&path, &target).map_err(|e| io(&target, e))?;
        }
    }
    Ok(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platform_links_are_scaled_in_both_notations_and_nothing_else() {
        let xml = r#"<link id="Host" bandwidth="10521832623.5Bps" latency="0.000010s"/>
<link id="RAM-CUDA0" bandwidth="8000000000"/>"#;
        let out = scale_platform(xml, 10.0).unwrap();
        assert_eq!(
            out,
            r#"<link id="Host" bandwidth="105218326235Bps" latency="0.000010s"/>
<link id="RAM-CUDA0" bandwidth="80000000000"/>"#
        );
        assert!(scale_platform("<platform/>", 2.0).is_err());
        assert!(scale_platform(r#"bandwidth="fast""#, 2.0).is_err());
    }

    #[test]
    fn the_bandwidth_table_scales_its_numbers_and_keeps_comments_and_nan() {
        let table = "# to 0\tto 1\n0.000000e+00\t1.5e+04\tnan\n";
        let out = scale_bandwidth_table(table, 0.5);
        assert_eq!(out, "# to 0\tto 1\n0e0\t7.5e3\tnan\n");
    }

    #[test]
    fn a_scaled_machine_is_a_new_host_with_its_kernels() {
        let dir = std::env::temp_dir().join(format!("plb-bus-scale-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("bus")).unwrap();
        std::fs::create_dir_all(dir.join("codelets/45")).unwrap();
        std::fs::write(
            dir.join("bus/m.platform.xml"),
            r#"<link id="Host" bandwidth="100"/>"#,
        )
        .unwrap();
        std::fs::write(dir.join("bus/m.bandwidth"), "1\t2\n").unwrap();
        std::fs::write(dir.join("bus/m.latency"), "3\t4\n").unwrap();
        std::fs::write(dir.join("bus/other.bandwidth"), "9\n").unwrap();
        std::fs::write(dir.join("codelets/45/gemm.m"), "model").unwrap();
        std::fs::write(dir.join("codelets/45/gemm.other"), "other").unwrap();
        let host = derive(&dir, "m", "2.5").unwrap();
        assert_eq!(host, "m-bus2p5");
        let read = |p: &str| std::fs::read_to_string(dir.join(p)).unwrap();
        assert_eq!(
            read("bus/m-bus2p5.platform.xml"),
            r#"<link id="Host" bandwidth="250"/>"#
        );
        assert_eq!(read("bus/m-bus2p5.bandwidth"), "2.5e0\t5e0\n");
        assert_eq!(read("bus/m-bus2p5.latency"), "3\t4\n");
        assert_eq!(read("codelets/45/gemm.m-bus2p5"), "model");
        // The machine sampled and the others are left as they were.
        assert_eq!(read("bus/m.bandwidth"), "1\t2\n");
        assert!(!dir.join("bus/other-bus2p5.bandwidth").exists());
        assert!(!dir.join("codelets/45/gemm.other-bus2p5").exists());
        assert!(derive(&dir, "m", "0").is_err());
        assert!(derive(&dir, "m", "x").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
