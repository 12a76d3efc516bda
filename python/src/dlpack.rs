//! DLPack export (`__dlpack__`): a `DLManagedTensor` in a `"dltensor"` capsule whose manager
//! keeps a range of the memory, so the memory outlives every consumer (its record releases it
//! at the last reference).
//!
//! The structures are DLPack's ABI (dlpack.h, v0.8 "legacy" form, which torch, CuPy and NumPy
//! all accept). This module and `fds` are the package's only `unsafe` code.

use std::ffi::{c_void, CStr};

use pyo3::ffi;
use pyo3::prelude::*;
use sycl::UsmRange;

/// `DLDeviceType` values we produce.
pub const KDL_CPU: i32 = 1;
pub const KDL_CUDA: i32 = 2;
pub const KDL_CUDA_HOST: i32 = 3;
pub const KDL_CUDA_MANAGED: i32 = 13;
pub const KDL_ONEAPI: i32 = 14;

/// `DLDataTypeCode`.
pub const KDL_INT: u8 = 0;
pub const KDL_UINT: u8 = 1;
pub const KDL_FLOAT: u8 = 2;
pub const KDL_BOOL: u8 = 6;

#[repr(C)]
#[derive(Clone, Copy)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct DlDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

#[repr(C)]
struct DlPackVersion {
    major: u32,
    minor: u32,
}

/// DLPack 1.0's `DLManagedTensorVersioned` (its `flags` say read-only / copied: neither here).
#[repr(C)]
struct DlManagedTensorVersioned {
    version: DlPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DlTensor,
}

/// What a capsule owns: the tensor handed out (one form), its shape, the memory kept alive.
struct Manager {
    legacy: DlManagedTensor,
    versioned: DlManagedTensorVersioned,
    shape: Vec<i64>,
    _keep: UsmRange<u8>,
}

const CAPSULE_NAME: &CStr = c"dltensor";
const VERSIONED_NAME: &CStr = c"dltensor_versioned";

/// What to export: `keep` is the memory (its first byte is the tensor's), the rest describes it.
pub struct Export {
    pub keep: UsmRange<u8>,
    pub device_type: i32,
    pub device_id: i32,
    pub dtype: DlDataType,
    pub shape: Vec<i64>,
}

unsafe extern "C" fn delete_legacy(tensor: *mut DlManagedTensor) {
    if tensor.is_null() {
        return;
    }
    // SAFETY: every tensor we hand out lives inside a boxed `Manager` that its `manager_ctx`
    // points at, and DLPack calls the deleter exactly once.
    unsafe { drop(Box::from_raw((*tensor).manager_ctx as *mut Manager)) }
}

unsafe extern "C" fn delete_versioned(tensor: *mut DlManagedTensorVersioned) {
    if tensor.is_null() {
        return;
    }
    // SAFETY: as in `delete_legacy`.
    unsafe { drop(Box::from_raw((*tensor).manager_ctx as *mut Manager)) }
}

unsafe extern "C" fn capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: CPython calls this with the capsule. A consumer that took the tensor renamed the
    // capsule ("used_dltensor[_versioned]") and calls the deleter itself, so we free only a
    // capsule that still has one of our names. PyCapsule_IsValid sets no error.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, CAPSULE_NAME.as_ptr()) == 1 {
            let tensor = ffi::PyCapsule_GetPointer(capsule, CAPSULE_NAME.as_ptr());
            delete_legacy(tensor as *mut DlManagedTensor);
        } else if ffi::PyCapsule_IsValid(capsule, VERSIONED_NAME.as_ptr()) == 1 {
            let tensor = ffi::PyCapsule_GetPointer(capsule, VERSIONED_NAME.as_ptr());
            delete_versioned(tensor as *mut DlManagedTensorVersioned);
        }
    }
}

/// Makes the capsule: DLPack 1.0's versioned form when the consumer accepts it (NumPy then
/// gives a writable array), else the legacy form.
pub fn capsule(py: Python<'_>, export: Export, versioned: bool) -> PyResult<Py<PyAny>> {
    let Export {
        keep,
        device_type,
        device_id,
        dtype,
        shape,
    } = export;
    let tensor = || DlTensor {
        data: keep.as_ptr() as usize as *mut c_void,
        device: DlDevice {
            device_type,
            device_id,
        },
        ndim: shape.len() as i32,
        dtype,
        shape: std::ptr::null_mut(),
        // Null strides: compact row-major (DLPack >= 0.2).
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    let manager = Box::new(Manager {
        legacy: DlManagedTensor {
            dl_tensor: tensor(),
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_legacy),
        },
        versioned: DlManagedTensorVersioned {
            version: DlPackVersion { major: 1, minor: 0 },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_versioned),
            flags: 0,
            dl_tensor: tensor(),
        },
        shape: shape.clone(),
        _keep: keep,
    });
    let manager = Box::into_raw(manager);
    // SAFETY: `manager` is a live box we own until a deleter runs (once: only one of the two
    // forms is handed out); its fields live as long as it, and the shape vector is never
    // resized after its pointer was taken.
    unsafe {
        let shape_ptr = (*manager).shape.as_mut_ptr();
        (*manager).legacy.manager_ctx = manager as *mut c_void;
        (*manager).legacy.dl_tensor.shape = shape_ptr;
        (*manager).versioned.manager_ctx = manager as *mut c_void;
        (*manager).versioned.dl_tensor.shape = shape_ptr;
        let (pointer, name) = if versioned {
            (
                std::ptr::addr_of_mut!((*manager).versioned) as *mut c_void,
                VERSIONED_NAME,
            )
        } else {
            (
                std::ptr::addr_of_mut!((*manager).legacy) as *mut c_void,
                CAPSULE_NAME,
            )
        };
        let raw = ffi::PyCapsule_New(pointer, name.as_ptr(), Some(capsule_destructor));
        if raw.is_null() {
            drop(Box::from_raw(manager));
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, raw).unbind())
    }
}

/// Parses a NumPy-style dtype name into DLPack's description and its size in bytes.
pub fn dtype(name: &str) -> Option<(DlDataType, usize)> {
    let (code, bits) = match name {
        "uint8" | "u1" | "B" => (KDL_UINT, 8),
        "int8" | "i1" | "b" => (KDL_INT, 8),
        "uint16" | "u2" => (KDL_UINT, 16),
        "int16" | "i2" => (KDL_INT, 16),
        "uint32" | "u4" => (KDL_UINT, 32),
        "int32" | "i4" => (KDL_INT, 32),
        "uint64" | "u8" => (KDL_UINT, 64),
        "int64" | "i8" => (KDL_INT, 64),
        "float16" | "f2" => (KDL_FLOAT, 16),
        "float32" | "f4" => (KDL_FLOAT, 32),
        "float64" | "f8" => (KDL_FLOAT, 64),
        "bool" => (KDL_BOOL, 8),
        _ => return None,
    };
    Some((
        DlDataType {
            code,
            bits,
            lanes: 1,
        },
        bits as usize / 8,
    ))
}

/// The `__cuda_array_interface__` typestr of a dtype (little-endian).
pub fn typestr(dtype: DlDataType) -> String {
    let kind = match dtype.code {
        KDL_INT => 'i',
        KDL_UINT => 'u',
        KDL_FLOAT => 'f',
        _ => 'b',
    };
    let size = dtype.bits / 8;
    if size == 1 {
        format!("|{kind}1")
    } else {
        format!("<{kind}{size}")
    }
}
