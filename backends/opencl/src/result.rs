//! `cl_int` codes as [`sycl_backend::Error`]s, and typed wrappers over the `clGet*Info` calls.
//!
//! One mapping function, [`errc_of`], decides which [`Errc`] a driver code becomes:
//!
//! | OpenCL code | `Errc` |
//! |---|---|
//! | `OUT_OF_RESOURCES`, `OUT_OF_HOST_MEMORY`, `MEM_OBJECT_ALLOCATION_FAILURE`, `INVALID_BUFFER_SIZE` | `MemoryAllocation` |
//! | `BUILD/COMPILE/LINK_PROGRAM_FAILURE`, `INVALID_BUILD_OPTIONS`, `INVALID_COMPILER/LINKER_OPTIONS`, `INVALID_BINARY` | `Build` |
//! | `INVALID_WORK_GROUP_SIZE`, `INVALID_WORK_ITEM_SIZE`, `INVALID_GLOBAL_WORK_SIZE`, `INVALID_WORK_DIMENSION`, `INVALID_GLOBAL_OFFSET` | `NdRange` |
//! | `INVALID_KERNEL_ARGS`, `INVALID_ARG_INDEX/VALUE/SIZE` | `KernelArgument` |
//! | `PROFILING_INFO_NOT_AVAILABLE` | `Profiling` |
//! | `EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST` | `Event` |
//! | `DEVICE_NOT_FOUND`, `DEVICE_NOT_AVAILABLE`, `INVALID_PLATFORM`, `PLATFORM_NOT_FOUND_KHR` | `Platform` |
//! | `COMPILER_NOT_AVAILABLE`, `LINKER_NOT_AVAILABLE` | `FeatureNotSupported` |
//! | `INVALID_VALUE`, `INVALID_KERNEL_NAME`, `INVALID_OPERATION`, other `INVALID_*` handle codes | `Invalid` |
//! | anything else | `Runtime` |

use std::ffi::c_void;

use sycl_backend::{BackendKind, Errc, Error, NativeError, Result};

use crate::sys::*;

/// The Khronos name of an OpenCL status code.
pub fn code_name(code: cl_int) -> Option<&'static str> {
    Some(match code {
        0 => "CL_SUCCESS",
        -1 => "CL_DEVICE_NOT_FOUND",
        -2 => "CL_DEVICE_NOT_AVAILABLE",
        -3 => "CL_COMPILER_NOT_AVAILABLE",
        -4 => "CL_MEM_OBJECT_ALLOCATION_FAILURE",
        -5 => "CL_OUT_OF_RESOURCES",
        -6 => "CL_OUT_OF_HOST_MEMORY",
        -7 => "CL_PROFILING_INFO_NOT_AVAILABLE",
        -8 => "CL_MEM_COPY_OVERLAP",
        -9 => "CL_IMAGE_FORMAT_MISMATCH",
        -10 => "CL_IMAGE_FORMAT_NOT_SUPPORTED",
        -11 => "CL_BUILD_PROGRAM_FAILURE",
        -12 => "CL_MAP_FAILURE",
        -13 => "CL_MISALIGNED_SUB_BUFFER_OFFSET",
        -14 => "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST",
        -15 => "CL_COMPILE_PROGRAM_FAILURE",
        -16 => "CL_LINKER_NOT_AVAILABLE",
        -17 => "CL_LINK_PROGRAM_FAILURE",
        -18 => "CL_DEVICE_PARTITION_FAILED",
        -19 => "CL_KERNEL_ARG_INFO_NOT_AVAILABLE",
        -30 => "CL_INVALID_VALUE",
        -31 => "CL_INVALID_DEVICE_TYPE",
        -32 => "CL_INVALID_PLATFORM",
        -33 => "CL_INVALID_DEVICE",
        -34 => "CL_INVALID_CONTEXT",
        -35 => "CL_INVALID_QUEUE_PROPERTIES",
        -36 => "CL_INVALID_COMMAND_QUEUE",
        -37 => "CL_INVALID_HOST_PTR",
        -38 => "CL_INVALID_MEM_OBJECT",
        -39 => "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR",
        -40 => "CL_INVALID_IMAGE_SIZE",
        -41 => "CL_INVALID_SAMPLER",
        -42 => "CL_INVALID_BINARY",
        -43 => "CL_INVALID_BUILD_OPTIONS",
        -44 => "CL_INVALID_PROGRAM",
        -45 => "CL_INVALID_PROGRAM_EXECUTABLE",
        -46 => "CL_INVALID_KERNEL_NAME",
        -47 => "CL_INVALID_KERNEL_DEFINITION",
        -48 => "CL_INVALID_KERNEL",
        -49 => "CL_INVALID_ARG_INDEX",
        -50 => "CL_INVALID_ARG_VALUE",
        -51 => "CL_INVALID_ARG_SIZE",
        -52 => "CL_INVALID_KERNEL_ARGS",
        -53 => "CL_INVALID_WORK_DIMENSION",
        -54 => "CL_INVALID_WORK_GROUP_SIZE",
        -55 => "CL_INVALID_WORK_ITEM_SIZE",
        -56 => "CL_INVALID_GLOBAL_OFFSET",
        -57 => "CL_INVALID_EVENT_WAIT_LIST",
        -58 => "CL_INVALID_EVENT",
        -59 => "CL_INVALID_OPERATION",
        -60 => "CL_INVALID_GL_OBJECT",
        -61 => "CL_INVALID_BUFFER_SIZE",
        -62 => "CL_INVALID_MIP_LEVEL",
        -63 => "CL_INVALID_GLOBAL_WORK_SIZE",
        -64 => "CL_INVALID_PROPERTY",
        -65 => "CL_INVALID_IMAGE_DESCRIPTOR",
        -66 => "CL_INVALID_COMPILER_OPTIONS",
        -67 => "CL_INVALID_LINKER_OPTIONS",
        -68 => "CL_INVALID_DEVICE_PARTITION_COUNT",
        -69 => "CL_INVALID_PIPE_SIZE",
        -70 => "CL_INVALID_DEVICE_QUEUE",
        -71 => "CL_INVALID_SPEC_ID",
        -72 => "CL_MAX_SIZE_RESTRICTION_EXCEEDED",
        -1001 => "CL_PLATFORM_NOT_FOUND_KHR",
        _ => return None,
    })
}

/// Which [`Errc`] an OpenCL status code becomes (see the module table).
pub fn errc_of(code: cl_int) -> Errc {
    match code {
        -4 | -5 | -6 | -61 => Errc::MemoryAllocation,
        -11 | -15 | -17 | -42 | -43 | -66 | -67 => Errc::Build,
        -56..=-53 | -63 => Errc::NdRange,
        -52..=-49 => Errc::KernelArgument,
        -7 => Errc::Profiling,
        -14 => Errc::Event,
        -1 | -2 | -32 | -1001 => Errc::Platform,
        -3 | -16 => Errc::FeatureNotSupported,
        -30 | -31 | -41..=-33 | -48..=-44 | -60..=-57 | -62 | -64 | -65 | -72..=-68 => {
            Errc::Invalid
        }
        _ => Errc::Runtime,
    }
}

/// The native-error record of `code`.
pub fn native(code: cl_int) -> NativeError {
    NativeError {
        backend: BackendKind::OpenCl,
        code: i64::from(code),
        name: code_name(code).map(str::to_owned),
    }
}

/// An [`Error`] for `code`, returned by the call that did `what`.
pub fn error(code: cl_int, what: &str) -> Error {
    Error::with_native(errc_of(code), format!("{what} failed"), native(code))
}

/// `Ok(())` for `CL_SUCCESS`, else [`error`].
#[inline]
pub fn check(code: cl_int, what: &str) -> Result<()> {
    if code == CL_SUCCESS {
        Ok(())
    } else {
        Err(error(code, what))
    }
}

/// A `clGet*Info`-shaped call: `(param, size, value, size_ret)`.
pub type InfoFn<'a> = &'a dyn Fn(cl_uint, usize, *mut c_void, *mut usize) -> cl_int;

/// Reads a variable-size info value as bytes.
pub fn info_bytes(f: InfoFn<'_>, param: cl_uint, what: &str) -> Result<Vec<u8>> {
    let mut size = 0usize;
    check(f(param, 0, std::ptr::null_mut(), &mut size), what)?;
    let mut buf = vec![0u8; size];
    if size > 0 {
        check(
            f(param, size, buf.as_mut_ptr().cast(), std::ptr::null_mut()),
            what,
        )?;
    }
    Ok(buf)
}

/// Reads a string info value (trailing NULs removed).
pub fn info_string(f: InfoFn<'_>, param: cl_uint, what: &str) -> Result<String> {
    let bytes = info_bytes(f, param, what)?;
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    Ok(String::from_utf8_lossy(&bytes[..end]).trim().to_owned())
}

/// Reads a fixed-size plain value.
///
/// # Safety
/// `T` is the C type the query returns for `param` (any bit pattern valid).
pub unsafe fn info_value<T: Copy + Default>(
    f: InfoFn<'_>,
    param: cl_uint,
    what: &str,
) -> Result<T> {
    let mut value = T::default();
    check(
        f(
            param,
            std::mem::size_of::<T>(),
            (&raw mut value).cast(),
            std::ptr::null_mut(),
        ),
        what,
    )?;
    Ok(value)
}
