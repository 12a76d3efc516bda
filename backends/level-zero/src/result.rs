//! The `result` layer: `ze_result_t` becomes [`sycl_backend::Error`] in ONE place
//! ([`map_result`]), and every Level Zero call the backend makes goes through a function here
//! that returns `Result<_, Error>`, grouped by object (`driver::get`, `event::host_synchronize`,
//! ...).
//!
//! | `ze_result_t` | `Errc` |
//! |---|---|
//! | `ERROR_OUT_OF_DEVICE_MEMORY`, `ERROR_OUT_OF_HOST_MEMORY` | `MemoryAllocation` |
//! | `ERROR_UNSUPPORTED_FEATURE`, `ERROR_UNSUPPORTED_VERSION`, `ERROR_UNSUPPORTED_SIZE`, `ERROR_UNSUPPORTED_ALIGNMENT`, `ERROR_UNSUPPORTED_ENUMERATION`, `ERROR_UNSUPPORTED_IMAGE_FORMAT` | `FeatureNotSupported` |
//! | `ERROR_INVALID_ARGUMENT`, `ERROR_INVALID_NULL_HANDLE`, `ERROR_INVALID_NULL_POINTER`, `ERROR_INVALID_SIZE`, `ERROR_INVALID_ENUMERATION`, `ERROR_HANDLE_OBJECT_IN_USE`, `ERROR_OVERLAPPING_REGIONS`, `ERROR_INVALID_SYNCHRONIZATION_OBJECT`, `ERROR_INVALID_GLOBAL_NAME`, `ERROR_INVALID_FUNCTION_NAME`, `ERROR_INVALID_COMMAND_LIST_TYPE` | `Invalid` |
//! | `ERROR_INVALID_KERNEL_NAME` | `Invalid` (no such kernel in the bundle) |
//! | `ERROR_MODULE_BUILD_FAILURE`, `ERROR_MODULE_LINK_FAILURE`, `ERROR_INVALID_NATIVE_BINARY`, `ERROR_INVALID_MODULE_UNLINKED` | `Build` (with the build log where there is one) |
//! | `ERROR_INVALID_KERNEL_ARGUMENT_INDEX`, `ERROR_INVALID_KERNEL_ARGUMENT_SIZE`, `ERROR_INVALID_KERNEL_ATTRIBUTE_VALUE` | `KernelArgument` |
//! | `ERROR_INVALID_GROUP_SIZE_DIMENSION`, `ERROR_INVALID_GLOBAL_WIDTH_DIMENSION` | `NdRange` |
//! | `ERROR_UNINITIALIZED`, `ERROR_DEPENDENCY_UNAVAILABLE` | `Platform` |
//! | `ERROR_DEVICE_LOST`, `ERROR_DEVICE_REQUIRES_RESET`, `ERROR_DEVICE_IN_LOW_POWER_STATE`, `ERROR_INSUFFICIENT_PERMISSIONS`, `ERROR_NOT_AVAILABLE`, `ERROR_UNKNOWN`, `WARNING_*`, `NOT_READY`, unknown codes | `Runtime` |
//!
//! The native code and its C name are always kept (`Error::native()`).

#![allow(unsafe_code)]

use std::ffi::{c_char, c_void, CStr};

use level_zero_sys::*;
use sycl_backend::{BackendKind, Errc, Error, NativeError, Result};

/// The `Errc` for a non-success `ze_result_t` (see the module table).
pub fn errc_of(code: ze_result_t) -> Errc {
    match code {
        ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY | ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY => {
            Errc::MemoryAllocation
        }
        ZE_RESULT_ERROR_UNSUPPORTED_FEATURE
        | ZE_RESULT_ERROR_UNSUPPORTED_VERSION
        | ZE_RESULT_ERROR_UNSUPPORTED_SIZE
        | ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT
        | ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION
        | ZE_RESULT_ERROR_UNSUPPORTED_IMAGE_FORMAT => Errc::FeatureNotSupported,
        ZE_RESULT_ERROR_INVALID_ARGUMENT
        | ZE_RESULT_ERROR_INVALID_NULL_HANDLE
        | ZE_RESULT_ERROR_INVALID_NULL_POINTER
        | ZE_RESULT_ERROR_INVALID_SIZE
        | ZE_RESULT_ERROR_INVALID_ENUMERATION
        | ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE
        | ZE_RESULT_ERROR_OVERLAPPING_REGIONS
        | ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT
        | ZE_RESULT_ERROR_INVALID_GLOBAL_NAME
        | ZE_RESULT_ERROR_INVALID_FUNCTION_NAME
        | ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE
        | ZE_RESULT_ERROR_INVALID_KERNEL_NAME => Errc::Invalid,
        ZE_RESULT_ERROR_MODULE_BUILD_FAILURE
        | ZE_RESULT_ERROR_MODULE_LINK_FAILURE
        | ZE_RESULT_ERROR_INVALID_NATIVE_BINARY
        | ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED => Errc::Build,
        ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX
        | ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE
        | ZE_RESULT_ERROR_INVALID_KERNEL_ATTRIBUTE_VALUE => Errc::KernelArgument,
        ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION
        | ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION => Errc::NdRange,
        ZE_RESULT_ERROR_UNINITIALIZED | ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE => Errc::Platform,
        _ => Errc::Runtime,
    }
}

/// The native part of an error: the code and its C name.
pub fn native(code: ze_result_t) -> NativeError {
    NativeError {
        backend: BackendKind::LevelZero,
        code: i64::from(code),
        name: Some(
            result_name(code)
                .map(str::to_owned)
                .unwrap_or_else(|| format!("ze_result_t {code:#x}")),
        ),
    }
}

/// THE mapping function: a failed call `what` with `code` becomes an [`Error`].
pub fn map_result(code: ze_result_t, what: &str) -> Error {
    Error::with_native(errc_of(code), format!("{what} failed"), native(code))
}

/// `Ok(())` for `ZE_RESULT_SUCCESS`, else [`map_result`].
pub fn check(code: ze_result_t, what: &str) -> Result<()> {
    if code == ZE_RESULT_SUCCESS {
        Ok(())
    } else {
        Err(map_result(code, what))
    }
}

/// The error for an optional entry point the loader lacks.
pub fn missing(entry: &str, feature: &str) -> Error {
    Error::new(
        Errc::FeatureNotSupported,
        format!("{feature} needs `{entry}`, which this Level Zero loader does not provide"),
    )
}

/// Reads a NUL-terminated C string out of a fixed array.
pub fn c_array_to_string(bytes: &[c_char]) -> String {
    let bytes: Vec<u8> = bytes
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Driver calls.
pub mod driver {
    use super::*;

    /// `zeInit(0)` then `zeDriverGet`. No driver (`ZE_RESULT_ERROR_UNINITIALIZED` from `zeInit`,
    /// or a zero count) is an empty list, not an error.
    pub fn init_and_get(l: &Loader) -> Result<Vec<ze_driver_handle_t>> {
        // SAFETY: zeInit takes flags by value.
        let r = unsafe { (l.zeInit)(0) };
        if r == ZE_RESULT_ERROR_UNINITIALIZED {
            return Ok(Vec::new());
        }
        check(r, "zeInit")?;
        let mut count = 0u32;
        // SAFETY: count is a valid out-pointer; a null array asks for the count.
        let ze_r = unsafe { (l.zeDriverGet)(&mut count, std::ptr::null_mut()) };
        check(ze_r, "zeDriverGet")?;
        let mut drivers = vec![std::ptr::null_mut(); count as usize];
        // SAFETY: the array holds `count` handles.
        let ze_r = unsafe { (l.zeDriverGet)(&mut count, drivers.as_mut_ptr()) };
        check(ze_r, "zeDriverGet")?;
        drivers.truncate(count as usize);
        Ok(drivers)
    }

    /// `zeDriverGetProperties`.
    pub fn properties(l: &Loader, d: ze_driver_handle_t) -> Result<ze_driver_properties_t> {
        let mut p = ze_driver_properties_t {
            stype: ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES,
            pNext: std::ptr::null_mut(),
            uuid: Default::default(),
            driverVersion: 0,
        };
        // SAFETY: `d` is a driver from zeDriverGet; `p` is a properly tagged out-struct.
        let ze_r = unsafe { (l.zeDriverGetProperties)(d, &mut p) };
        check(ze_r, "zeDriverGetProperties")?;
        Ok(p)
    }

    /// `zeDriverGetApiVersion`.
    pub fn api_version(l: &Loader, d: ze_driver_handle_t) -> Result<ze_api_version_t> {
        let mut v = 0;
        // SAFETY: valid driver, valid out-pointer.
        let ze_r = unsafe { (l.zeDriverGetApiVersion)(d, &mut v) };
        check(ze_r, "zeDriverGetApiVersion")?;
        Ok(v)
    }

    /// `zeDriverGetExtensionFunctionAddress`; `None` when the driver does not have `name`.
    pub fn extension_function(
        l: &Loader,
        d: ze_driver_handle_t,
        name: &CStr,
    ) -> Option<*mut c_void> {
        let mut f = std::ptr::null_mut();
        // SAFETY: valid driver, NUL-terminated name, valid out-pointer.
        let r = unsafe { (l.zeDriverGetExtensionFunctionAddress)(d, name.as_ptr(), &mut f) };
        (r == ZE_RESULT_SUCCESS && !f.is_null()).then_some(f)
    }
}

/// Device calls.
pub mod device {
    use super::*;

    /// `zeDeviceGet`.
    pub fn get(l: &Loader, d: ze_driver_handle_t) -> Result<Vec<ze_device_handle_t>> {
        let mut count = 0u32;
        // SAFETY: valid driver, count out-pointer, null array asks for the count.
        let ze_r = unsafe { (l.zeDeviceGet)(d, &mut count, std::ptr::null_mut()) };
        check(ze_r, "zeDeviceGet")?;
        let mut devs = vec![std::ptr::null_mut(); count as usize];
        // SAFETY: the array holds `count` handles.
        let ze_r = unsafe { (l.zeDeviceGet)(d, &mut count, devs.as_mut_ptr()) };
        check(ze_r, "zeDeviceGet")?;
        devs.truncate(count as usize);
        Ok(devs)
    }

    /// `zeDeviceGetProperties`.
    pub fn properties(l: &Loader, dev: ze_device_handle_t) -> Result<ze_device_properties_t> {
        // SAFETY: an all-zero ze_device_properties_t is a valid value (integers, arrays, null).
        let mut p: ze_device_properties_t = unsafe { std::mem::zeroed() };
        p.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
        // SAFETY: valid device, tagged out-struct.
        let ze_r = unsafe { (l.zeDeviceGetProperties)(dev, &mut p) };
        check(ze_r, "zeDeviceGetProperties")?;
        Ok(p)
    }

    /// `zeDeviceGetComputeProperties`.
    pub fn compute_properties(
        l: &Loader,
        dev: ze_device_handle_t,
    ) -> Result<ze_device_compute_properties_t> {
        // SAFETY: all-zero is valid for this plain struct.
        let mut p: ze_device_compute_properties_t = unsafe { std::mem::zeroed() };
        p.stype = ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES;
        // SAFETY: valid device, tagged out-struct.
        let ze_r = unsafe { (l.zeDeviceGetComputeProperties)(dev, &mut p) };
        check(ze_r, "zeDeviceGetComputeProperties")?;
        Ok(p)
    }

    /// `zeDeviceGetModuleProperties`.
    pub fn module_properties(
        l: &Loader,
        dev: ze_device_handle_t,
    ) -> Result<ze_device_module_properties_t> {
        // SAFETY: all-zero is valid for this plain struct.
        let mut p: ze_device_module_properties_t = unsafe { std::mem::zeroed() };
        p.stype = ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES;
        // SAFETY: valid device, tagged out-struct.
        let ze_r = unsafe { (l.zeDeviceGetModuleProperties)(dev, &mut p) };
        check(ze_r, "zeDeviceGetModuleProperties")?;
        Ok(p)
    }

    /// `zeDeviceGetMemoryProperties` (all memories).
    pub fn memory_properties(
        l: &Loader,
        dev: ze_device_handle_t,
    ) -> Result<Vec<ze_device_memory_properties_t>> {
        let mut count = 0u32;
        // SAFETY: count query with a null array.
        let ze_r =
            unsafe { (l.zeDeviceGetMemoryProperties)(dev, &mut count, std::ptr::null_mut()) };
        check(ze_r, "zeDeviceGetMemoryProperties")?;
        // SAFETY: all-zero is valid for this plain struct.
        let mut template: ze_device_memory_properties_t = unsafe { std::mem::zeroed() };
        template.stype = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES;
        let mut v = vec![template; count as usize];
        // SAFETY: the array holds `count` tagged structs.
        let ze_r = unsafe { (l.zeDeviceGetMemoryProperties)(dev, &mut count, v.as_mut_ptr()) };
        check(ze_r, "zeDeviceGetMemoryProperties")?;
        v.truncate(count as usize);
        Ok(v)
    }

    /// `zeDeviceCanAccessPeer`.
    pub fn can_access_peer(
        l: &Loader,
        dev: ze_device_handle_t,
        peer: ze_device_handle_t,
    ) -> Result<bool> {
        let mut v: ze_bool_t = 0;
        // SAFETY: both devices come from zeDeviceGet; valid out-pointer.
        let ze_r = unsafe { (l.zeDeviceCanAccessPeer)(dev, peer, &mut v) };
        check(ze_r, "zeDeviceCanAccessPeer")?;
        Ok(v != 0)
    }
}

/// Module calls.
pub mod module {
    use super::*;

    /// `zeModuleCreate` from SPIR-V; a build failure is `Errc::Build` with the build log.
    pub fn create_spirv(
        l: &Loader,
        ctx: ze_context_handle_t,
        dev: ze_device_handle_t,
        spirv: &[u8],
        options: &str,
    ) -> Result<ze_module_handle_t> {
        let flags = std::ffi::CString::new(options)
            .map_err(|_| Error::new(Errc::Build, "build options contain a NUL byte"))?;
        let desc = ze_module_desc_t {
            stype: ZE_STRUCTURE_TYPE_MODULE_DESC,
            pNext: std::ptr::null(),
            format: ZE_MODULE_FORMAT_IL_SPIRV,
            inputSize: spirv.len(),
            pInputModule: spirv.as_ptr(),
            pBuildFlags: flags.as_ptr(),
            pConstants: std::ptr::null(),
        };
        let mut module = std::ptr::null_mut();
        let mut log = std::ptr::null_mut();
        // SAFETY: desc points at live bytes and a NUL-terminated string for the call; out
        // pointers are valid.
        let r = unsafe { (l.zeModuleCreate)(ctx, dev, &desc, &mut module, &mut log) };
        let text = if log.is_null() {
            String::new()
        } else {
            build_log(l, log)
        };
        if r != ZE_RESULT_SUCCESS {
            let mut e = map_result(r, "zeModuleCreate (SPIR-V)");
            if !text.is_empty() {
                e = Error::with_native(
                    e.code(),
                    format!("{}; build log:\n{text}", e.message()),
                    native(r),
                );
            }
            return Err(e);
        }
        Ok(module)
    }

    /// Reads and destroys a build log.
    fn build_log(l: &Loader, log: ze_module_build_log_handle_t) -> String {
        let mut size = 0usize;
        // SAFETY: valid log handle; size query with a null buffer.
        let r = unsafe { (l.zeModuleBuildLogGetString)(log, &mut size, std::ptr::null_mut()) };
        let mut text = String::new();
        if r == ZE_RESULT_SUCCESS && size > 0 {
            let mut buf = vec![0 as c_char; size];
            // SAFETY: the buffer holds `size` chars.
            if unsafe { (l.zeModuleBuildLogGetString)(log, &mut size, buf.as_mut_ptr()) }
                == ZE_RESULT_SUCCESS
            {
                text = c_array_to_string(&buf);
            }
        }
        // SAFETY: the log is destroyed once, here.
        let r = unsafe { (l.zeModuleBuildLogDestroy)(log) };
        if r != ZE_RESULT_SUCCESS {
            log::warn!(
                "zeModuleBuildLogDestroy: {}",
                map_result(r, "zeModuleBuildLogDestroy")
            );
        }
        text
    }

    /// `zeModuleGetKernelNames`.
    pub fn kernel_names(l: &Loader, m: ze_module_handle_t) -> Result<Vec<String>> {
        let mut count = 0u32;
        // SAFETY: count query.
        let ze_r = unsafe { (l.zeModuleGetKernelNames)(m, &mut count, std::ptr::null_mut()) };
        check(ze_r, "zeModuleGetKernelNames")?;
        let mut names = vec![std::ptr::null(); count as usize];
        // SAFETY: the array holds `count` pointers.
        let ze_r = unsafe { (l.zeModuleGetKernelNames)(m, &mut count, names.as_mut_ptr()) };
        check(ze_r, "zeModuleGetKernelNames")?;
        Ok(names
            .into_iter()
            .take(count as usize)
            .filter(|p| !p.is_null())
            // SAFETY: the driver returns NUL-terminated names owned by the live module.
            .map(|p| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
            .collect())
    }

    /// `zeKernelGetProperties`.
    pub fn kernel_properties(l: &Loader, k: ze_kernel_handle_t) -> Result<ze_kernel_properties_t> {
        // SAFETY: all-zero is valid for this plain struct.
        let mut p: ze_kernel_properties_t = unsafe { std::mem::zeroed() };
        p.stype = ZE_STRUCTURE_TYPE_KERNEL_PROPERTIES;
        // SAFETY: a live kernel, tagged out-struct.
        let r = unsafe { (l.zeKernelGetProperties)(k, &mut p) };
        check(r, "zeKernelGetProperties")?;
        Ok(p)
    }

    /// `zeKernelCreate`.
    pub fn create_kernel(
        l: &Loader,
        m: ze_module_handle_t,
        name: &str,
    ) -> Result<ze_kernel_handle_t> {
        let cname = std::ffi::CString::new(name)
            .map_err(|_| Error::invalid("kernel name contains a NUL byte"))?;
        let desc = ze_kernel_desc_t {
            stype: ZE_STRUCTURE_TYPE_KERNEL_DESC,
            pNext: std::ptr::null(),
            flags: 0,
            pKernelName: cname.as_ptr(),
        };
        let mut k = std::ptr::null_mut();
        // SAFETY: valid module, desc with a live name, valid out-pointer.
        let ze_r = unsafe { (l.zeKernelCreate)(m, &desc, &mut k) };
        check(ze_r, "zeKernelCreate").map_err(|e| e.context(format!("kernel `{name}`")))?;
        Ok(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code this crate names maps to the documented `Errc` and keeps code and name.
    #[test]
    fn every_named_result_translates() {
        let expected = |code: ze_result_t| -> Errc {
            match code {
                ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY | ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY => {
                    Errc::MemoryAllocation
                }
                ZE_RESULT_ERROR_UNSUPPORTED_FEATURE
                | ZE_RESULT_ERROR_UNSUPPORTED_VERSION
                | ZE_RESULT_ERROR_UNSUPPORTED_SIZE
                | ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT
                | ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION
                | ZE_RESULT_ERROR_UNSUPPORTED_IMAGE_FORMAT => Errc::FeatureNotSupported,
                ZE_RESULT_ERROR_MODULE_BUILD_FAILURE
                | ZE_RESULT_ERROR_MODULE_LINK_FAILURE
                | ZE_RESULT_ERROR_INVALID_NATIVE_BINARY
                | ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED => Errc::Build,
                ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX
                | ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE
                | ZE_RESULT_ERROR_INVALID_KERNEL_ATTRIBUTE_VALUE => Errc::KernelArgument,
                ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION
                | ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION => Errc::NdRange,
                ZE_RESULT_ERROR_UNINITIALIZED | ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE => {
                    Errc::Platform
                }
                ZE_RESULT_ERROR_INVALID_ARGUMENT
                | ZE_RESULT_ERROR_INVALID_NULL_HANDLE
                | ZE_RESULT_ERROR_INVALID_NULL_POINTER
                | ZE_RESULT_ERROR_INVALID_SIZE
                | ZE_RESULT_ERROR_INVALID_ENUMERATION
                | ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE
                | ZE_RESULT_ERROR_OVERLAPPING_REGIONS
                | ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT
                | ZE_RESULT_ERROR_INVALID_GLOBAL_NAME
                | ZE_RESULT_ERROR_INVALID_FUNCTION_NAME
                | ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE
                | ZE_RESULT_ERROR_INVALID_KERNEL_NAME => Errc::Invalid,
                _ => Errc::Runtime,
            }
        };
        let mut seen = 0;
        for &(code, name) in RESULT_NAMES {
            if code == ZE_RESULT_SUCCESS {
                assert!(check(code, "x").is_ok());
                continue;
            }
            let e = check(code, "zeSomething").unwrap_err();
            assert_eq!(e.code(), expected(code), "{name}");
            let n = e.native().unwrap();
            assert_eq!(n.backend, BackendKind::LevelZero);
            assert_eq!(n.code, i64::from(code));
            assert_eq!(n.name.as_deref(), Some(name));
            assert!(e.message().contains("zeSomething"));
            seen += 1;
        }
        assert_eq!(seen, RESULT_NAMES.len() - 1);
        // The headline mappings the brief names, spelled out.
        assert_eq!(
            errc_of(ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY),
            Errc::MemoryAllocation
        );
        assert_eq!(
            errc_of(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY),
            Errc::MemoryAllocation
        );
        assert_eq!(
            errc_of(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE),
            Errc::FeatureNotSupported
        );
        assert_eq!(errc_of(ZE_RESULT_ERROR_INVALID_ARGUMENT), Errc::Invalid);
        assert_eq!(errc_of(ZE_RESULT_ERROR_INVALID_NULL_HANDLE), Errc::Invalid);
        assert_eq!(errc_of(ZE_RESULT_ERROR_INVALID_NULL_POINTER), Errc::Invalid);
        assert_eq!(errc_of(ZE_RESULT_ERROR_MODULE_BUILD_FAILURE), Errc::Build);
    }

    #[test]
    fn unknown_codes_are_runtime_and_keep_the_number() {
        let e = check(0x7123_4567, "zeX").unwrap_err();
        assert_eq!(e.code(), Errc::Runtime);
        assert_eq!(e.native().unwrap().code, 0x7123_4567);
        assert_eq!(
            e.native().unwrap().name.as_deref(),
            Some("ze_result_t 0x71234567")
        );
        assert_eq!(
            missing("zeMemPutIpcHandle", "put").code(),
            Errc::FeatureNotSupported
        );
    }

    #[test]
    fn c_strings_stop_at_nul() {
        let raw: Vec<c_char> = b"Intel(R) Arc\0garbage"
            .iter()
            .map(|&b| b as c_char)
            .collect();
        assert_eq!(c_array_to_string(&raw), "Intel(R) Arc");
    }
}
