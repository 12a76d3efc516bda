//! Device selection: default, GPU and CPU selectors, custom scoring, and the
//! `ONEAPI_DEVICE_SELECTOR` filter syntax of DPC++.

use std::fmt;
use std::sync::Arc;

use sycl_backend::{BackendKind, DeviceType};

use crate::{Device, Errc, Error, Result};

/// How to pick a device.
///
/// ```
/// # // Selectors work within the devices ONEAPI_DEVICE_SELECTOR leaves visible: this example
/// # // must not depend on the caller's (the process is still single-threaded here).
/// # std::env::remove_var("ONEAPI_DEVICE_SELECTOR");
/// use sycl::DeviceSelector;
/// // Any device the filter allows, best score first (GPU before CPU).
/// let device = DeviceSelector::filter("native_cpu:*").unwrap().select().unwrap();
/// assert_eq!(device.backend(), sycl::BackendKind::NativeCpu);
/// // A bad filter is a clear error, not a panic.
/// assert_eq!(DeviceSelector::filter("vulkan:0").unwrap_err().code(), sycl::Errc::Invalid);
/// ```
#[derive(Clone)]
pub enum DeviceSelector {
    /// A GPU if there is one, else the native CPU device (other CPUs score lower); honours
    /// `ONEAPI_DEVICE_SELECTOR`.
    Default,
    /// The best GPU, or `Errc::Runtime` if there is none.
    Gpu,
    /// The best CPU, or `Errc::Runtime` if there is none.
    Cpu,
    /// The best device allowed by a filter in `ONEAPI_DEVICE_SELECTOR` syntax.
    Filter(DeviceFilter),
    /// The device with the highest non-negative score; negative scores are never chosen.
    Custom(Arc<dyn Fn(&Device) -> i32 + Send + Sync>),
}

impl DeviceSelector {
    /// Parses a filter such as `cuda:0`, `opencl:cpu`, `!opencl:*` or `level_zero:gpu;native_cpu:*`.
    pub fn filter(spec: &str) -> Result<DeviceSelector> {
        Ok(DeviceSelector::Filter(DeviceFilter::parse(spec)?))
    }

    /// A selector from a scoring closure.
    pub fn custom(score: impl Fn(&Device) -> i32 + Send + Sync + 'static) -> DeviceSelector {
        DeviceSelector::Custom(Arc::new(score))
    }

    /// Picks a device.
    pub fn select(&self) -> Result<Device> {
        let candidates = visible_devices()?;
        let score = |d: &Device| -> i32 {
            match self {
                DeviceSelector::Default | DeviceSelector::Filter(_) => default_score(d),
                DeviceSelector::Gpu => {
                    if d.is_gpu() {
                        default_score(d)
                    } else {
                        -1
                    }
                }
                DeviceSelector::Cpu => {
                    if d.is_cpu() {
                        default_score(d)
                    } else {
                        -1
                    }
                }
                DeviceSelector::Custom(f) => f(d),
            }
        };
        let filtered: Vec<Device> = match self {
            DeviceSelector::Filter(filter) => filter.apply(&candidates),
            _ => candidates,
        };
        let mut best: Option<(i32, Device)> = None;
        for d in filtered {
            let s = score(&d);
            if s >= 0 && best.as_ref().map_or(true, |(b, _)| s > *b) {
                best = Some((s, d));
            }
        }
        best.map(|(_, d)| d).ok_or_else(|| {
            Error::new(
                Errc::Runtime,
                format!("no device matches the {self:?} selector"),
            )
        })
    }
}

impl fmt::Debug for DeviceSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSelector::Default => f.write_str("default"),
            DeviceSelector::Gpu => f.write_str("gpu"),
            DeviceSelector::Cpu => f.write_str("cpu"),
            DeviceSelector::Filter(filter) => write!(f, "`{}`", filter.source),
            DeviceSelector::Custom(_) => f.write_str("custom"),
        }
    }
}

/// The default score: GPUs first (discrete-class backends before OpenCL), then the native CPU
/// device, then other CPUs.
fn default_score(d: &Device) -> i32 {
    let backend_bonus = match d.backend() {
        BackendKind::LevelZero | BackendKind::Cuda => 50,
        BackendKind::OpenCl => 0,
        BackendKind::NativeCpu => 30,
    };
    let type_score = match d.device_type() {
        DeviceType::Gpu => 1000,
        DeviceType::Accelerator => 500,
        DeviceType::Cpu => 100,
        DeviceType::Custom => 10,
    };
    type_score + backend_bonus
}

/// Devices allowed by `ONEAPI_DEVICE_SELECTOR` (all devices when it is unset).
pub(crate) fn visible_devices() -> Result<Vec<Device>> {
    let all = Device::all();
    match std::env::var("ONEAPI_DEVICE_SELECTOR") {
        Ok(spec) if !spec.trim().is_empty() => {
            let filter =
                DeviceFilter::parse(&spec).map_err(|e| e.context("ONEAPI_DEVICE_SELECTOR"))?;
            Ok(filter.apply(&all))
        }
        _ => Ok(all),
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum BackendPattern {
    Any,
    One(BackendKind),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum DevicePattern {
    Any,
    Type(DeviceType),
    Index(usize),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Term {
    negative: bool,
    backend: BackendPattern,
    devices: Vec<DevicePattern>,
}

/// A parsed `ONEAPI_DEVICE_SELECTOR` filter: `;`-separated terms `[!]backend:devices`, where
/// backend is `level_zero`, `cuda`, `opencl`, `native_cpu` or `*`, and devices is a `,` list of
/// `*`, `cpu`, `gpu`, `fpga`/`acc` or an index among that backend's devices. Positive terms add
/// devices; `!` terms remove them (only negative terms: start from every device).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceFilter {
    source: String,
    terms: Vec<Term>,
}

impl DeviceFilter {
    /// Parses `spec`; every mistake is `Errc::Invalid` with a message naming the bad part.
    pub fn parse(spec: &str) -> Result<DeviceFilter> {
        let bad = |why: String| {
            Error::new(
                Errc::Invalid,
                format!("bad device selector `{spec}`: {why}"),
            )
        };
        let mut terms = Vec::new();
        for raw in spec.split(';') {
            let raw = raw.trim();
            if raw.is_empty() {
                if spec.trim().is_empty() {
                    return Err(bad("it is empty".into()));
                }
                continue;
            }
            let (negative, body) = match raw.strip_prefix('!') {
                Some(rest) => (true, rest.trim()),
                None => (false, raw),
            };
            let (backend, devices) = body.split_once(':').ok_or_else(|| {
                bad(format!(
                    "term `{raw}` has no `:` (expected backend:devices)"
                ))
            })?;
            let backend = match backend.trim().to_ascii_lowercase().as_str() {
                "*" => BackendPattern::Any,
                "ext_oneapi_level_zero" | "level_zero" => {
                    BackendPattern::One(BackendKind::LevelZero)
                }
                "ext_oneapi_cuda" | "cuda" => BackendPattern::One(BackendKind::Cuda),
                "opencl" => BackendPattern::One(BackendKind::OpenCl),
                "native_cpu" => BackendPattern::One(BackendKind::NativeCpu),
                other => {
                    return Err(bad(format!(
                        "unknown backend `{other}` (level_zero, cuda, opencl, native_cpu or *)"
                    )))
                }
            };
            let mut patterns = Vec::new();
            for dev in devices.split(',') {
                let dev = dev.trim().to_ascii_lowercase();
                let pattern =
                    match dev.as_str() {
                        "*" => DevicePattern::Any,
                        "gpu" => DevicePattern::Type(DeviceType::Gpu),
                        "cpu" => DevicePattern::Type(DeviceType::Cpu),
                        "fpga" | "acc" => DevicePattern::Type(DeviceType::Accelerator),
                        "" => return Err(bad(format!("term `{raw}` has an empty device"))),
                        d if d.contains('.') => {
                            return Err(bad(format!("sub-devices (`{d}`) are not supported")));
                        }
                        d => DevicePattern::Index(d.parse().map_err(|_| {
                            bad(format!("`{d}` is not *, cpu, gpu, fpga or an index"))
                        })?),
                    };
                patterns.push(pattern);
            }
            if negative
                && patterns
                    .iter()
                    .any(|p| matches!(p, DevicePattern::Index(_)))
            {
                // DPC++ allows it; we keep it, it is meaningful.
            }
            terms.push(Term {
                negative,
                backend,
                devices: patterns,
            });
        }
        if terms.is_empty() {
            return Err(bad("it names no device".into()));
        }
        Ok(DeviceFilter {
            source: spec.to_string(),
            terms,
        })
    }

    /// The devices of `all` this filter allows, in their original order.
    pub fn apply(&self, all: &[Device]) -> Vec<Device> {
        // Index of each device among the devices of its backend.
        let mut per_backend = std::collections::HashMap::<BackendKind, usize>::new();
        let indexed: Vec<(usize, &Device)> = all
            .iter()
            .map(|d| {
                let slot = per_backend.entry(d.backend()).or_insert(0);
                let i = *slot;
                *slot += 1;
                (i, d)
            })
            .collect();
        let matches = |term: &Term, index: usize, d: &Device| {
            let backend_ok = match term.backend {
                BackendPattern::Any => true,
                BackendPattern::One(b) => d.backend() == b,
            };
            backend_ok
                && term.devices.iter().any(|p| match p {
                    DevicePattern::Any => true,
                    DevicePattern::Type(t) => d.device_type() == *t,
                    DevicePattern::Index(i) => *i == index,
                })
        };
        let any_positive = self.terms.iter().any(|t| !t.negative);
        indexed
            .into_iter()
            .filter(|(i, d)| {
                let included =
                    !any_positive || self.terms.iter().any(|t| !t.negative && matches(t, *i, d));
                let excluded = self.terms.iter().any(|t| t.negative && matches(t, *i, d));
                included && !excluded
            })
            .map(|(_, d)| d.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_dpcpp_forms() {
        for ok in [
            "cuda:0",
            "opencl:cpu",
            "level_zero:gpu",
            "native_cpu:*",
            "!opencl:*",
            "cuda:0,1;opencl:gpu",
            "*:gpu",
        ] {
            DeviceFilter::parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
    }

    #[test]
    fn rejects_bad_strings_with_invalid() {
        for bad in [
            "",
            "cuda",
            "vulkan:0",
            "cuda:",
            "cuda:x",
            "cuda:0.1",
            ";",
            "opencl:gpu,,cpu",
        ] {
            let err = DeviceFilter::parse(bad).unwrap_err();
            assert_eq!(err.code(), Errc::Invalid, "{bad}");
            assert!(err.message().contains("bad device selector"), "{err}");
        }
    }
}
