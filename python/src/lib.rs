//! `sycl_rs._native`: the Python classes of sycl-rs, a thin layer over the `sycl` crate.
//!
//! Every call that may block (waits, copies, channel receives, IPC opens) releases the GIL.
//! Every `sycl::Error` becomes a `sycl_rs.SyclError` subclass named after its `Errc`, with the
//! SYCL name in `errc`.

mod collective;
mod dlpack;
mod errors;
mod fds;
mod ipc;
mod memory;
mod runtime;
mod virtual_mem;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    runtime::register(m)?;
    memory::register(m)?;
    ipc::register(m)?;
    virtual_mem::register(m)?;
    collective::register(m)?;
    Ok(())
}
