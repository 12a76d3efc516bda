//! Errors shared by every backend and re-exported by `sycl` as `sycl::Error`.

use std::fmt;

use crate::BackendKind;

/// The SYCL 2020 error codes (`sycl::errc`), plus nothing else: callers match on these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Errc {
    /// `errc::runtime`: a failure the runtime or driver reported that fits no other code.
    Runtime,
    /// `errc::kernel`: an error inside a kernel or while launching it.
    Kernel,
    /// `errc::accessor`.
    Accessor,
    /// `errc::nd_range`: a global range not divisible by the local range, a work-group too large.
    NdRange,
    /// `errc::event`: an error tied to an event (e.g. its exporter died).
    Event,
    /// `errc::kernel_argument`: wrong number or kind of kernel arguments.
    KernelArgument,
    /// `errc::build`: a kernel bundle failed to build; the message holds the compiler log.
    Build,
    /// `errc::invalid`: an argument is not valid (bad handle bytes, wrong context, bad size).
    Invalid,
    /// `errc::memory_allocation`: the device or host ran out of memory.
    MemoryAllocation,
    /// `errc::platform`: a platform-level failure (driver missing or broken).
    Platform,
    /// `errc::profiling`: profiling information asked of an event that has none.
    Profiling,
    /// `errc::feature_not_supported`: the device lacks the aspect this call needs.
    FeatureNotSupported,
    /// `errc::kernel_not_supported`.
    KernelNotSupported,
    /// `errc::backend_mismatch`: an object of one backend given to another.
    BackendMismatch,
}

impl Errc {
    /// The SYCL spelling, e.g. `feature_not_supported`.
    pub fn as_str(self) -> &'static str {
        match self {
            Errc::Runtime => "runtime",
            Errc::Kernel => "kernel",
            Errc::Accessor => "accessor",
            Errc::NdRange => "nd_range",
            Errc::Event => "event",
            Errc::KernelArgument => "kernel_argument",
            Errc::Build => "build",
            Errc::Invalid => "invalid",
            Errc::MemoryAllocation => "memory_allocation",
            Errc::Platform => "platform",
            Errc::Profiling => "profiling",
            Errc::FeatureNotSupported => "feature_not_supported",
            Errc::KernelNotSupported => "kernel_not_supported",
            Errc::BackendMismatch => "backend_mismatch",
        }
    }
}

impl fmt::Display for Errc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A backend's own error code, kept losslessly (`CUresult`, `cl_int`, `ze_result_t`, errno).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NativeError {
    /// Which backend produced it.
    pub backend: BackendKind,
    /// The raw code as the driver returned it.
    pub code: i64,
    /// The driver's name for the code, e.g. `CUDA_ERROR_INVALID_CONTEXT`, when known.
    pub name: Option<String>,
}

impl fmt::Display for NativeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(name) => write!(f, "{} {name} ({})", self.backend, self.code),
            None => write!(f, "{} code {}", self.backend, self.code),
        }
    }
}

/// The one error type of sycl-rs: an [`Errc`], a message saying what failed and why, and the
/// backend's native code when a driver produced it.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub struct Error {
    errc: Errc,
    message: String,
    native: Option<NativeError>,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.errc, self.message)?;
        if let Some(native) = &self.native {
            write!(f, " [{native}]")?;
        }
        Ok(())
    }
}

impl Error {
    /// An error with a code and a message.
    pub fn new(errc: Errc, message: impl Into<String>) -> Self {
        Error {
            errc,
            message: message.into(),
            native: None,
        }
    }

    /// An error that carries the driver's own code.
    pub fn with_native(errc: Errc, message: impl Into<String>, native: NativeError) -> Self {
        Error {
            errc,
            message: message.into(),
            native: Some(native),
        }
    }

    /// `Errc::Invalid` with a message.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Errc::Invalid, message)
    }

    /// `Errc::FeatureNotSupported` naming the aspect the device lacks.
    pub fn unsupported(aspect: crate::Aspect, what: impl fmt::Display) -> Self {
        Self::new(
            Errc::FeatureNotSupported,
            format!("{what} needs aspect `{aspect}`, which this device does not have"),
        )
    }

    /// `Errc::FeatureNotSupported` for a call a backend does not implement at all.
    pub fn unsupported_by_backend(backend: BackendKind, what: impl fmt::Display) -> Self {
        Self::new(
            Errc::FeatureNotSupported,
            format!("the {backend} backend does not support {what}"),
        )
    }

    /// An OS error (errno) raised while doing `what`.
    pub fn os(
        errc: Errc,
        what: impl fmt::Display,
        errno: rustix::io::Errno,
        backend: BackendKind,
    ) -> Self {
        Self::with_native(
            errc,
            format!("{what}: {errno}"),
            NativeError {
                backend,
                code: i64::from(errno.raw_os_error()),
                name: None,
            },
        )
    }

    /// The SYCL error code.
    pub fn code(&self) -> Errc {
        self.errc
    }

    /// The human-readable message (without the code).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The backend's native code, if a driver call produced this error.
    pub fn native(&self) -> Option<&NativeError> {
        self.native.as_ref()
    }

    /// The same error with `context` put in front of its message.
    pub fn context(mut self, context: impl fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The panic payload of a native CPU kernel's `kernel_fail`: its failure code, which the
/// native CPU queue reports as [`kernel_failure`] does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelFailCode(pub u32);

/// The error a launch's event reports for the failure code a work-item recorded (the status
/// word of the C and SPIR-V forms, [`KernelFailCode`] on the native CPU): 1 an index out of
/// bounds, 2 an integer division, 3 a `clamp` (`Errc::Kernel`); 4 a bounded wait that timed
/// out (`Errc::Runtime`); 5 arguments that work-items or ranks disagreed on (`Errc::Invalid`).
pub fn kernel_failure(kernel: &str, code: u32) -> Error {
    let (errc, what) = match code {
        1 => (Errc::Kernel, "an index was out of bounds"),
        2 => (
            Errc::Kernel,
            "an integer division or remainder by zero, or with overflow",
        ),
        3 => (
            Errc::Kernel,
            "a `clamp` whose minimum is above its maximum (or NaN)",
        ),
        4 => (
            Errc::Runtime,
            "a bounded wait timed out: a peer (another rank, process or device) never arrived",
        ),
        5 => (
            Errc::Invalid,
            "work-items disagreed on their arguments (a collective called with different sizes, types or operations on different ranks)",
        ),
        _ => (Errc::Kernel, "a work-item reported an unknown failure"),
    };
    Error::new(errc, format!("kernel {kernel} failed: {what}"))
}
