//! DLPack both ways.
//!
//! Export (`__dlpack__`): a `DLManagedTensor` in a `"dltensor"` capsule whose manager keeps a
//! range of the memory, so the memory outlives every consumer (its record releases it at the
//! last reference).
//!
//! Import (`from_dlpack`, [`take`]): the producer's capsule is checked, renamed
//! `"used_dltensor[_versioned]"` (the protocol's mark of a consumed capsule, after which its
//! destructor frees nothing), and its managed tensor becomes a [`TensorOwner`] that calls the
//! tensor's deleter exactly once, when the sycl-rs memory wrapping it is released.
//!
//! The structures are DLPack's ABI (dlpack.h, v0.8 "legacy" form, which torch, CuPy and NumPy
//! all accept). This module and `fds` are the package's only `unsafe` code.

use std::ffi::{c_void, CStr};

use pyo3::ffi;
use pyo3::prelude::*;
use sycl::{UsmRange, UsmView};

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
pub const KDL_BFLOAT: u8 = 4;
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

/// DLPack 1.0's `DLManagedTensorVersioned` (its `flags` say read-only / copied).
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
    _pin: Option<UsmView<u8>>,
}

const CAPSULE_NAME: &CStr = c"dltensor";
const VERSIONED_NAME: &CStr = c"dltensor_versioned";
const USED_NAME: &CStr = c"used_dltensor";
const USED_VERSIONED_NAME: &CStr = c"used_dltensor_versioned";

/// `DLPACK_FLAG_BITMASK_READ_ONLY`: the consumer must not write the tensor.
pub const FLAG_READ_ONLY: u64 = 1;

/// What to export: `keep` is the memory (its first byte is the tensor's), the rest describes it.
pub struct Export {
    pub keep: UsmRange<u8>,
    /// For mappings: a view, which keeps `set_access_mode` from changing the protection
    /// while the consumer holds the memory.
    pub pin: Option<UsmView<u8>>,
    /// Say read-only in the flags (versioned capsules only: the caller refuses legacy ones).
    pub read_only: bool,
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
        pin,
        read_only,
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
            flags: if read_only { FLAG_READ_ONLY } else { 0 },
            dl_tensor: tensor(),
        },
        shape: shape.clone(),
        _keep: keep,
        _pin: pin,
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

/// A managed tensor taken from a producer's capsule: its deleter is called exactly once,
/// when this is dropped (with the GIL held, as NumPy's and CuPy's deleters expect; during
/// interpreter shutdown the tensor is leaked instead, as the process ends anyway).
pub struct TensorOwner {
    managed: *mut c_void,
    versioned: bool,
}

// SAFETY: the owner only holds the tensor to call its deleter once; DLPack lets a consumer do
// that from any thread, and we do it with the GIL held.
unsafe impl Send for TensorOwner {}
// SAFETY: no method reads through the pointer; `&TensorOwner` gives nothing to use.
unsafe impl Sync for TensorOwner {}

impl Drop for TensorOwner {
    fn drop(&mut self) {
        let (managed, versioned) = (self.managed, self.versioned);
        // `None`: the interpreter is gone or going, and the producer's deleter may need it:
        // the tensor is left to the ending process.
        let _ = Python::try_attach(|_| {
            // SAFETY: `managed` is the tensor this owner took from a capsule it renamed
            // "used_...", so nothing else calls the deleter; this drop runs once. Its layout is
            // the form the capsule's name said (checked in `take`).
            unsafe {
                if versioned {
                    let t = managed as *mut DlManagedTensorVersioned;
                    if let Some(deleter) = (*t).deleter {
                        deleter(t);
                    }
                } else {
                    let t = managed as *mut DlManagedTensor;
                    if let Some(deleter) = (*t).deleter {
                        deleter(t);
                    }
                }
            }
        });
    }
}

/// What a consumer took from a capsule.
pub struct Taken {
    /// First byte (`data + byte_offset`).
    pub ptr: u64,
    pub nbytes: usize,
    pub read_only: bool,
    pub owner: TensorOwner,
}

/// Why a capsule was refused (before it was consumed: its destructor frees it).
fn refuse(message: impl Into<String>) -> PyErr {
    pyo3::exceptions::PyBufferError::new_err(message.into())
}

/// Checks a tensor's layout: the bytes it covers, or why it cannot be wrapped. Compact
/// row-major only (null strides, or strides equal to the compact ones on every dimension of
/// more than one element), whole bytes per element, one lane.
///
/// # Safety
/// `t` is a valid `DLTensor` whose `shape` (and non-null `strides`) point at `ndim` values.
unsafe fn tensor_bytes(t: &DlTensor) -> Result<usize, String> {
    if t.dtype.lanes != 1 {
        return Err(format!(
            "dtype with {} lanes (vector types are not supported)",
            t.dtype.lanes
        ));
    }
    if t.dtype.bits == 0 || t.dtype.bits % 8 != 0 {
        return Err(format!(
            "{}-bit elements (only whole bytes are supported)",
            t.dtype.bits
        ));
    }
    if !(0..=64).contains(&t.ndim) {
        return Err(format!("ndim {}", t.ndim));
    }
    let ndim = t.ndim as usize;
    if ndim > 0 && t.shape.is_null() {
        return Err("a null shape".into());
    }
    let shape: &[i64] = if ndim == 0 {
        &[]
    } else {
        // SAFETY: the caller guarantees `ndim` readable values at `shape`, non-null (checked).
        unsafe { std::slice::from_raw_parts(t.shape, ndim) }
    };
    let item = (t.dtype.bits / 8) as usize;
    let mut count: usize = 1;
    for &d in shape {
        let d = usize::try_from(d).map_err(|_| format!("a negative dimension in {shape:?}"))?;
        count = count
            .checked_mul(d)
            .ok_or_else(|| format!("shape {shape:?} overflows"))?;
    }
    let nbytes = count
        .checked_mul(item)
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(|| format!("shape {shape:?} of {item}-byte elements overflows"))?;
    if !t.strides.is_null() && count > 0 {
        // SAFETY: as for `shape`.
        let strides = unsafe { std::slice::from_raw_parts(t.strides, ndim) };
        let mut expected: i64 = 1;
        for (&d, &s) in shape.iter().zip(strides).rev() {
            if d > 1 && s != expected {
                return Err(format!(
                    "strides {strides:?} of shape {shape:?}: not compact row-major (make it \
                     contiguous first)"
                ));
            }
            expected = expected.saturating_mul(d);
        }
    }
    Ok(nbytes)
}

/// Consumes a DLPack capsule (`"dltensor_versioned"` of major version 1, or legacy
/// `"dltensor"`): checks the tensor, marks the capsule used and takes its managed tensor.
/// The tensor must be on `device`, what the producer's `__dlpack_device__` said. Anything
/// refused leaves the capsule unconsumed (a `BufferError`), so its destructor gives the tensor
/// back to the producer.
pub fn take(capsule: &Bound<'_, PyAny>, device: (i32, i32)) -> PyResult<Taken> {
    let raw = capsule.as_ptr();
    // SAFETY: `raw` is a live object (borrowed from `capsule`); PyCapsule_IsValid accepts any
    // object and sets no error.
    let versioned = unsafe {
        if ffi::PyCapsule_IsValid(raw, VERSIONED_NAME.as_ptr()) == 1 {
            true
        } else if ffi::PyCapsule_IsValid(raw, CAPSULE_NAME.as_ptr()) == 1 {
            false
        } else {
            return Err(refuse(
                "__dlpack__ returned no DLPack capsule (not a \"dltensor\" or \
                 \"dltensor_versioned\" capsule, or one already consumed)",
            ));
        }
    };
    let name = if versioned {
        VERSIONED_NAME
    } else {
        CAPSULE_NAME
    };
    // SAFETY: the capsule is valid under `name` (checked above).
    let managed = unsafe { ffi::PyCapsule_GetPointer(raw, name.as_ptr()) };
    if managed.is_null() {
        return Err(refuse("the DLPack capsule holds a null tensor"));
    }
    // SAFETY: a valid capsule of this name holds a managed tensor of the matching form, alive
    // until its deleter runs (not before we rename the capsule, as only its destructor would
    // call it). Its fields are read, never written.
    let (tensor, flags) = unsafe {
        if versioned {
            let m = &*(managed as *const DlManagedTensorVersioned);
            if m.version.major != 1 {
                return Err(refuse(format!(
                    "DLPack {}.{} tensor (this consumer reads version 1)",
                    m.version.major, m.version.minor
                )));
            }
            (&m.dl_tensor, m.flags)
        } else {
            (&(*(managed as *const DlManagedTensor)).dl_tensor, 0)
        }
    };
    // SAFETY: the producer's tensor has `ndim` shape (and strides) values.
    let nbytes = unsafe { tensor_bytes(tensor) }
        .map_err(|why| refuse(format!("cannot wrap this DLPack tensor: {why}")))?;
    let data = tensor.data as usize as u64;
    let ptr = data
        .checked_add(tensor.byte_offset)
        .filter(|p| p.checked_add(nbytes as u64).is_some())
        .ok_or_else(|| refuse("data + byte_offset overflows the address space"))?;
    if data == 0 && nbytes > 0 {
        return Err(refuse("the DLPack tensor has a null data pointer"));
    }
    let on = (tensor.device.device_type, tensor.device.device_id);
    // PyTorch says kDLCUDAHost in `__dlpack_device__` of a pinned tensor and kDLCPU in its
    // capsule (torch 2.11). Both describe the same host memory; it is taken as CUDA host
    // memory, which the driver then confirms (`Usm::from_foreign`) or refuses.
    let pinned_as_cpu = device.0 == KDL_CUDA_HOST && on == (KDL_CPU, device.1);
    if on != device && !pinned_as_cpu {
        return Err(refuse(format!(
            "the DLPack tensor is on device {on:?}, but __dlpack_device__ said {device:?}"
        )));
    }
    let used = if versioned {
        USED_VERSIONED_NAME
    } else {
        USED_NAME
    };
    // SAFETY: renaming a valid capsule. By the DLPack protocol a producer's capsule destructor
    // frees the tensor only while the capsule keeps its original name, so from now on the
    // deleter is ours alone to call (TensorOwner, once).
    if unsafe { ffi::PyCapsule_SetName(raw, used.as_ptr()) } != 0 {
        return Err(PyErr::fetch(capsule.py()));
    }
    Ok(Taken {
        ptr,
        nbytes,
        read_only: flags & FLAG_READ_ONLY != 0,
        owner: TensorOwner { managed, versioned },
    })
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
        // `sycl::half::bf16` elements; DLPack's bfloat16 (torch.bfloat16, ml_dtypes).
        "bfloat16" => (KDL_BFLOAT, 16),
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
        // No typestr names bfloat16: its bytes, opaque.
        KDL_BFLOAT => 'V',
        _ => 'b',
    };
    let size = dtype.bits / 8;
    if size == 1 {
        format!("|{kind}1")
    } else {
        format!("<{kind}{size}")
    }
}
