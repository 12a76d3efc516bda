//! `sycl::Error` -> `sycl_rs.SyclError` and its subclasses, one per `Errc`.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use sycl::{Errc, Error};

create_exception!(
    sycl_rs,
    SyclError,
    PyException,
    "An error of sycl-rs; `errc` is the SYCL error code's name."
);

macro_rules! errc_classes {
    ($($errc:ident => $class:ident),* $(,)?) => {
        $(create_exception!(sycl_rs, $class, SyclError, concat!("`errc` ", stringify!($errc), "."));)*

        fn to_pyerr(e: &Error) -> PyErr {
            let message = e.to_string();
            match e.code() {
                $(Errc::$errc => PyErr::new::<$class, _>(message),)*
                #[allow(unreachable_patterns)]
                _ => PyErr::new::<SyclError, _>(message),
            }
        }

        /// Adds the classes to the module, each with its `errc` name.
        pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
            let py = m.py();
            let base = py.get_type::<SyclError>();
            base.setattr("errc", "runtime")?;
            m.add("SyclError", base)?;
            $(
                let class = py.get_type::<$class>();
                class.setattr("errc", Errc::$errc.as_str())?;
                m.add(stringify!($class), class)?;
            )*
            Ok(())
        }
    };
}

errc_classes! {
    Runtime => RuntimeError,
    Kernel => KernelError,
    Accessor => AccessorError,
    NdRange => NdRangeError,
    Event => EventError,
    KernelArgument => KernelArgumentError,
    Build => BuildError,
    Invalid => InvalidError,
    MemoryAllocation => MemoryAllocationError,
    Platform => PlatformError,
    Profiling => ProfilingError,
    FeatureNotSupported => FeatureNotSupportedError,
    KernelNotSupported => KernelNotSupportedError,
    BackendMismatch => BackendMismatchError,
}

/// `?` on `sycl::Result` inside `#[pyfunction]`s.
pub trait IntoPy<T> {
    fn py_err(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for sycl::Result<T> {
    fn py_err(self) -> PyResult<T> {
        self.map_err(|e| to_pyerr(&e))
    }
}

/// An error of `errc` made here (argument checks).
pub fn error(errc: Errc, message: impl Into<String>) -> PyErr {
    to_pyerr(&Error::new(errc, message.into()))
}
