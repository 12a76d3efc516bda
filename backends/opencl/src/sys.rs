//! Raw OpenCL types, constants and the function table, loaded at run time.
//!
//! Nothing here links against `libOpenCL`: [`Api::load`] opens the ICD loader with `dlopen`
//! and resolves every core entry point by name. Entry points newer than OpenCL 1.2 (SVM, IL
//! programs) are optional (`Option<fn>`), so an old loader still loads and the matching aspects
//! are simply false. Extension entry points (Intel USM) are fetched per platform with
//! `clGetExtensionFunctionAddressForPlatform` into [`UsmFns`]; a null answer means the platform
//! lacks the extension.
//!
//! C names stay verbatim here (`clGetDeviceInfo`, `CL_DEVICE_NAME`); constants were taken from
//! the Khronos headers as shipped in `opencl-sys` 0.6.5.
#![allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    missing_docs,
    clippy::upper_case_acronyms
)]

use std::ffi::c_void;

use libloading::Library;

pub type cl_int = i32;
pub type cl_uint = u32;
pub type cl_ulong = u64;
pub type cl_bool = cl_uint;
pub type cl_bitfield = cl_ulong;
pub type cl_properties = cl_ulong;

pub type cl_platform_id = *mut c_void;
pub type cl_device_id = *mut c_void;
pub type cl_context = *mut c_void;
pub type cl_command_queue = *mut c_void;
pub type cl_mem = *mut c_void;
pub type cl_program = *mut c_void;
pub type cl_kernel = *mut c_void;
pub type cl_event = *mut c_void;

pub type cl_platform_info = cl_uint;
pub type cl_device_info = cl_uint;
pub type cl_device_type = cl_bitfield;
pub type cl_context_properties = isize;
pub type cl_queue_properties = cl_properties;
pub type cl_command_queue_properties = cl_bitfield;
pub type cl_event_info = cl_uint;
pub type cl_profiling_info = cl_uint;
pub type cl_program_info = cl_uint;
pub type cl_program_build_info = cl_uint;
pub type cl_kernel_info = cl_uint;
pub type cl_kernel_exec_info = cl_uint;
pub type cl_svm_mem_flags = cl_bitfield;
pub type cl_mem_migration_flags = cl_bitfield;
pub type cl_mem_properties_intel = cl_properties;
pub type cl_mem_info_intel = cl_uint;

pub const CL_SUCCESS: cl_int = 0;
pub const CL_TRUE: cl_bool = 1;
pub const CL_FALSE: cl_bool = 0;

// Error codes.
pub const CL_DEVICE_NOT_FOUND: cl_int = -1;
pub const CL_OUT_OF_RESOURCES: cl_int = -5;
pub const CL_PROFILING_INFO_NOT_AVAILABLE: cl_int = -7;
pub const CL_BUILD_PROGRAM_FAILURE: cl_int = -11;
pub const CL_INVALID_VALUE: cl_int = -30;
pub const CL_INVALID_QUEUE_PROPERTIES: cl_int = -35;
pub const CL_INVALID_KERNEL_NAME: cl_int = -46;

// Platform / device queries.
pub const CL_PLATFORM_VERSION: cl_platform_info = 0x0901;
pub const CL_PLATFORM_NAME: cl_platform_info = 0x0902;
pub const CL_PLATFORM_VENDOR: cl_platform_info = 0x0903;

pub const CL_DEVICE_TYPE_ALL: cl_device_type = 0xFFFF_FFFF;
pub const CL_DEVICE_TYPE_CPU: cl_device_type = 1 << 1;
pub const CL_DEVICE_TYPE_GPU: cl_device_type = 1 << 2;
pub const CL_DEVICE_TYPE_ACCELERATOR: cl_device_type = 1 << 3;

pub const CL_DEVICE_TYPE: cl_device_info = 0x1000;
pub const CL_DEVICE_VENDOR_ID: cl_device_info = 0x1001;
pub const CL_DEVICE_MAX_COMPUTE_UNITS: cl_device_info = 0x1002;
pub const CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS: cl_device_info = 0x1003;
pub const CL_DEVICE_MAX_WORK_GROUP_SIZE: cl_device_info = 0x1004;
pub const CL_DEVICE_MAX_WORK_ITEM_SIZES: cl_device_info = 0x1005;
pub const CL_DEVICE_ADDRESS_BITS: cl_device_info = 0x100D;
pub const CL_DEVICE_MAX_MEM_ALLOC_SIZE: cl_device_info = 0x1010;
pub const CL_DEVICE_GLOBAL_MEM_SIZE: cl_device_info = 0x101F;
pub const CL_DEVICE_LOCAL_MEM_SIZE: cl_device_info = 0x1023;
/// `cl_intel_required_subgroup_size`: the sub-group sizes (size_t[]).
pub const CL_DEVICE_SUB_GROUP_SIZES_INTEL: cl_device_info = 0x4108;
pub const CL_DEVICE_COMPILER_AVAILABLE: cl_device_info = 0x1028;
pub const CL_DEVICE_QUEUE_ON_HOST_PROPERTIES: cl_device_info = 0x102A;
pub const CL_DEVICE_NAME: cl_device_info = 0x102B;
pub const CL_DEVICE_VENDOR: cl_device_info = 0x102C;
pub const CL_DRIVER_VERSION: cl_device_info = 0x102D;
pub const CL_DEVICE_VERSION: cl_device_info = 0x102F;
pub const CL_DEVICE_EXTENSIONS: cl_device_info = 0x1030;
pub const CL_DEVICE_DOUBLE_FP_CONFIG: cl_device_info = 0x1032;
pub const CL_DEVICE_SINGLE_FP_CONFIG: cl_device_info = 0x101B;
pub const CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT: u64 = 1 << 7;
pub const CL_DEVICE_SVM_CAPABILITIES: cl_device_info = 0x1053;
pub const CL_DEVICE_ATOMIC_MEMORY_CAPABILITIES: cl_uint = 0x1063;
pub const CL_DEVICE_WORK_GROUP_COLLECTIVE_FUNCTIONS_SUPPORT: cl_uint = 0x1068;
pub const CL_DEVICE_ATOMIC_FENCE_CAPABILITIES: cl_uint = 0x1064;
pub const CL_DEVICE_ATOMIC_ORDER_RELAXED: cl_ulong = 1 << 0;
pub const CL_DEVICE_ATOMIC_ORDER_ACQ_REL: cl_ulong = 1 << 1;
pub const CL_DEVICE_ATOMIC_ORDER_SEQ_CST: cl_ulong = 1 << 2;
pub const CL_DEVICE_ATOMIC_SCOPE_WORK_GROUP: cl_ulong = 1 << 4;
pub const CL_DEVICE_ATOMIC_SCOPE_DEVICE: cl_ulong = 1 << 5;
pub const CL_DEVICE_ATOMIC_SCOPE_ALL_DEVICES: cl_ulong = 1 << 6;
pub const CL_DEVICE_IL_VERSION: cl_device_info = 0x105B;
pub const CL_DEVICE_UUID_KHR: cl_device_info = 0x106A;

pub const CL_DEVICE_SVM_COARSE_GRAIN_BUFFER: cl_bitfield = 1 << 0;
pub const CL_DEVICE_SVM_FINE_GRAIN_BUFFER: cl_bitfield = 1 << 1;
pub const CL_DEVICE_SVM_FINE_GRAIN_SYSTEM: cl_bitfield = 1 << 2;

// Intel USM device queries (cl_intel_unified_shared_memory).
pub const CL_DEVICE_HOST_MEM_CAPABILITIES_INTEL: cl_device_info = 0x4190;
pub const CL_DEVICE_DEVICE_MEM_CAPABILITIES_INTEL: cl_device_info = 0x4191;
pub const CL_DEVICE_SINGLE_DEVICE_SHARED_MEM_CAPABILITIES_INTEL: cl_device_info = 0x4192;
pub const CL_DEVICE_SHARED_SYSTEM_MEM_CAPABILITIES_INTEL: cl_device_info = 0x4194;

// Intel USM allocation info.
pub const CL_MEM_ALLOC_TYPE_INTEL: cl_mem_info_intel = 0x419A;
pub const CL_MEM_ALLOC_BASE_PTR_INTEL: cl_mem_info_intel = 0x419B;
pub const CL_MEM_ALLOC_SIZE_INTEL: cl_mem_info_intel = 0x419C;
pub const CL_MEM_ALLOC_DEVICE_INTEL: cl_mem_info_intel = 0x419D;
pub const CL_MEM_TYPE_HOST_INTEL: cl_uint = 0x4197;
pub const CL_MEM_TYPE_DEVICE_INTEL: cl_uint = 0x4198;
pub const CL_MEM_TYPE_SHARED_INTEL: cl_uint = 0x4199;

// Kernel exec info.
pub const CL_KERNEL_EXEC_INFO_INDIRECT_HOST_ACCESS_INTEL: cl_kernel_exec_info = 0x4200;
pub const CL_KERNEL_EXEC_INFO_INDIRECT_DEVICE_ACCESS_INTEL: cl_kernel_exec_info = 0x4201;
pub const CL_KERNEL_EXEC_INFO_INDIRECT_SHARED_ACCESS_INTEL: cl_kernel_exec_info = 0x4202;

// Contexts and queues.
pub const CL_CONTEXT_PLATFORM: cl_context_properties = 0x1084;
pub const CL_QUEUE_PROPERTIES: cl_queue_properties = 0x1093;
pub const CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE: cl_command_queue_properties = 1 << 0;
pub const CL_QUEUE_PROFILING_ENABLE: cl_command_queue_properties = 1 << 1;

// Events.
pub const CL_EVENT_COMMAND_EXECUTION_STATUS: cl_event_info = 0x11D3;
pub const CL_COMPLETE: cl_int = 0x0;
/// A negative execution status: a command this one waited for failed.
pub const CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST: cl_int = -14;
pub const CL_RUNNING: cl_int = 0x1;
pub const CL_PROFILING_COMMAND_SUBMIT: cl_profiling_info = 0x1281;
pub const CL_PROFILING_COMMAND_START: cl_profiling_info = 0x1282;
pub const CL_PROFILING_COMMAND_END: cl_profiling_info = 0x1283;

// Programs and kernels.
pub const CL_PROGRAM_KERNEL_NAMES: cl_program_info = 0x1168;
pub const CL_PROGRAM_BUILD_LOG: cl_program_build_info = 0x1183;
pub const CL_KERNEL_NUM_ARGS: cl_kernel_info = 0x1191;

// SVM.
pub const CL_MEM_READ_WRITE: cl_svm_mem_flags = 1 << 0;
pub const CL_MEM_SVM_FINE_GRAIN_BUFFER: cl_svm_mem_flags = 1 << 10;

/// `clSetEventCallback` notification function.
pub type EventCallback = unsafe extern "C" fn(cl_event, cl_int, *mut c_void);

macro_rules! function_table {
    (
        required { $( $name:ident : fn( $($arg:ty),* $(,)? ) -> $ret:ty ; )* }
        optional { $( $oname:ident : fn( $($oarg:ty),* $(,)? ) -> $oret:ty ; )* }
    ) => {
        /// The OpenCL entry points this backend calls, resolved from the ICD loader.
        pub struct Api {
            $( pub $name: unsafe extern "C" fn($($arg),*) -> $ret, )*
            $( pub $oname: Option<unsafe extern "C" fn($($oarg),*) -> $oret>, )*
            /// Keeps the library mapped for as long as the pointers above are used.
            _lib: Library,
        }

        impl Api {
            /// Resolves every entry point from `lib`.
            ///
            /// # Safety
            /// `lib` is an OpenCL ICD loader, whose symbols have the Khronos signatures
            /// declared above.
            unsafe fn from_library(lib: Library) -> Result<Self, String> {
                $(
                    // SAFETY: the caller promises the symbol has the declared C signature.
                    let $name = unsafe {
                        *lib.get::<unsafe extern "C" fn($($arg),*) -> $ret>(stringify!($name))
                            .map_err(|e| format!("{}: {e}", stringify!($name)))?
                    };
                )*
                $(
                    // SAFETY: as above; a missing symbol is `None`.
                    let $oname = unsafe {
                        lib.get::<unsafe extern "C" fn($($oarg),*) -> $oret>(stringify!($oname))
                            .ok()
                            .map(|s| *s)
                    };
                )*
                Ok(Api { $($name,)* $($oname,)* _lib: lib })
            }
        }
    };
}

function_table! {
    required {
        clGetPlatformIDs: fn(cl_uint, *mut cl_platform_id, *mut cl_uint) -> cl_int;
        clGetPlatformInfo: fn(cl_platform_id, cl_platform_info, usize, *mut c_void, *mut usize) -> cl_int;
        clGetDeviceIDs: fn(cl_platform_id, cl_device_type, cl_uint, *mut cl_device_id, *mut cl_uint) -> cl_int;
        clGetDeviceInfo: fn(cl_device_id, cl_device_info, usize, *mut c_void, *mut usize) -> cl_int;
        clCreateContext: fn(
            *const cl_context_properties,
            cl_uint,
            *const cl_device_id,
            Option<unsafe extern "C" fn(*const std::ffi::c_char, *const c_void, usize, *mut c_void)>,
            *mut c_void,
            *mut cl_int,
        ) -> cl_context;
        clReleaseContext: fn(cl_context) -> cl_int;
        clReleaseCommandQueue: fn(cl_command_queue) -> cl_int;
        clFlush: fn(cl_command_queue) -> cl_int;
        clFinish: fn(cl_command_queue) -> cl_int;
        clGetEventInfo: fn(cl_event, cl_event_info, usize, *mut c_void, *mut usize) -> cl_int;
        clGetEventProfilingInfo: fn(cl_event, cl_profiling_info, usize, *mut c_void, *mut usize) -> cl_int;
        clWaitForEvents: fn(cl_uint, *const cl_event) -> cl_int;
        clRetainEvent: fn(cl_event) -> cl_int;
        clReleaseEvent: fn(cl_event) -> cl_int;
        clCreateUserEvent: fn(cl_context, *mut cl_int) -> cl_event;
        clSetUserEventStatus: fn(cl_event, cl_int) -> cl_int;
        clSetEventCallback: fn(cl_event, cl_int, Option<EventCallback>, *mut c_void) -> cl_int;
        clEnqueueMarkerWithWaitList: fn(cl_command_queue, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueBarrierWithWaitList: fn(cl_command_queue, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clCreateProgramWithSource: fn(cl_context, cl_uint, *const *const std::ffi::c_char, *const usize, *mut cl_int) -> cl_program;
        clBuildProgram: fn(
            cl_program,
            cl_uint,
            *const cl_device_id,
            *const std::ffi::c_char,
            Option<unsafe extern "C" fn(cl_program, *mut c_void)>,
            *mut c_void,
        ) -> cl_int;
        clGetProgramInfo: fn(cl_program, cl_program_info, usize, *mut c_void, *mut usize) -> cl_int;
        clGetProgramBuildInfo: fn(cl_program, cl_device_id, cl_program_build_info, usize, *mut c_void, *mut usize) -> cl_int;
        clReleaseProgram: fn(cl_program) -> cl_int;
        clCreateKernel: fn(cl_program, *const std::ffi::c_char, *mut cl_int) -> cl_kernel;
        clGetKernelInfo: fn(cl_kernel, cl_kernel_info, usize, *mut c_void, *mut usize) -> cl_int;
        clReleaseKernel: fn(cl_kernel) -> cl_int;
        clSetKernelArg: fn(cl_kernel, cl_uint, usize, *const c_void) -> cl_int;
        clEnqueueNDRangeKernel: fn(
            cl_command_queue,
            cl_kernel,
            cl_uint,
            *const usize,
            *const usize,
            *const usize,
            cl_uint,
            *const cl_event,
            *mut cl_event,
        ) -> cl_int;
    }
    optional {
        // OpenCL 2.0+
        clCreateCommandQueueWithProperties: fn(cl_context, cl_device_id, *const cl_queue_properties, *mut cl_int) -> cl_command_queue;
        // OpenCL 1.x queue creation, used only where the 2.0 call is missing.
        clCreateCommandQueue: fn(cl_context, cl_device_id, cl_command_queue_properties, *mut cl_int) -> cl_command_queue;
        clSVMAlloc: fn(cl_context, cl_svm_mem_flags, usize, cl_uint) -> *mut c_void;
        clSVMFree: fn(cl_context, *mut c_void) -> ();
        clSetKernelArgSVMPointer: fn(cl_kernel, cl_uint, *const c_void) -> cl_int;
        clSetKernelExecInfo: fn(cl_kernel, cl_kernel_exec_info, usize, *const c_void) -> cl_int;
        clEnqueueSVMMemcpy: fn(cl_command_queue, cl_bool, *mut c_void, *const c_void, usize, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueSVMMemFill: fn(cl_command_queue, *mut c_void, *const c_void, usize, usize, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        // OpenCL 2.1+
        clEnqueueSVMMigrateMem: fn(cl_command_queue, cl_uint, *const *const c_void, *const usize, cl_mem_migration_flags, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clCreateProgramWithIL: fn(cl_context, *const c_void, usize, *mut cl_int) -> cl_program;
        // OpenCL 1.2 (always present in practice; optional so an odd loader still loads)
        clGetExtensionFunctionAddressForPlatform: fn(cl_platform_id, *const std::ffi::c_char) -> *mut c_void;
        // Buffers: the backend has no use for `cl_mem`, but the benchmarks compare USM with
        // them through this same table.
        clCreateBuffer: fn(cl_context, cl_bitfield, usize, *mut c_void, *mut cl_int) -> cl_mem;
        clEnqueueWriteBuffer: fn(cl_command_queue, cl_mem, cl_bool, usize, usize, *const c_void, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueReadBuffer: fn(cl_command_queue, cl_mem, cl_bool, usize, usize, *mut c_void, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueFillBuffer: fn(cl_command_queue, cl_mem, *const c_void, usize, usize, usize, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clReleaseMemObject: fn(cl_mem) -> cl_int;
    }
}

impl Api {
    /// Opens the ICD loader (`libOpenCL.so.1`, or the file named by `SYCL_RS_OPENCL_LIBRARY`).
    pub fn load() -> Result<Self, String> {
        let names: Vec<String> = match std::env::var("SYCL_RS_OPENCL_LIBRARY") {
            Ok(path) if !path.is_empty() => vec![path],
            _ => vec!["libOpenCL.so.1".into(), "libOpenCL.so".into()],
        };
        let mut errors = Vec::new();
        for name in &names {
            // SAFETY: loading the ICD loader runs its initialisers, which are well-behaved C
            // code; no Rust invariants depend on them.
            match unsafe { Library::new(name.as_str()) } {
                // SAFETY: a library named libOpenCL is an OpenCL ICD loader exporting the
                // Khronos ABI.
                Ok(lib) => return unsafe { Api::from_library(lib) },
                Err(e) => errors.push(format!("{name}: {e}")),
            }
        }
        Err(errors.join("; "))
    }
}

pub type clHostMemAllocINTEL_fn = unsafe extern "C" fn(
    cl_context,
    *const cl_mem_properties_intel,
    usize,
    cl_uint,
    *mut cl_int,
) -> *mut c_void;
pub type clDeviceMemAllocINTEL_fn = unsafe extern "C" fn(
    cl_context,
    cl_device_id,
    *const cl_mem_properties_intel,
    usize,
    cl_uint,
    *mut cl_int,
) -> *mut c_void;
pub type clSharedMemAllocINTEL_fn = clDeviceMemAllocINTEL_fn;
pub type clMemBlockingFreeINTEL_fn = unsafe extern "C" fn(cl_context, *mut c_void) -> cl_int;
pub type clGetMemAllocInfoINTEL_fn = unsafe extern "C" fn(
    cl_context,
    *const c_void,
    cl_mem_info_intel,
    usize,
    *mut c_void,
    *mut usize,
) -> cl_int;
pub type clSetKernelArgMemPointerINTEL_fn =
    unsafe extern "C" fn(cl_kernel, cl_uint, *const c_void) -> cl_int;
pub type clEnqueueMemFillINTEL_fn = unsafe extern "C" fn(
    cl_command_queue,
    *mut c_void,
    *const c_void,
    usize,
    usize,
    cl_uint,
    *const cl_event,
    *mut cl_event,
) -> cl_int;
pub type clEnqueueMemcpyINTEL_fn = unsafe extern "C" fn(
    cl_command_queue,
    cl_bool,
    *mut c_void,
    *const c_void,
    usize,
    cl_uint,
    *const cl_event,
    *mut cl_event,
) -> cl_int;
pub type clEnqueueMigrateMemINTEL_fn = unsafe extern "C" fn(
    cl_command_queue,
    *const c_void,
    usize,
    cl_mem_migration_flags,
    cl_uint,
    *const cl_event,
    *mut cl_event,
) -> cl_int;

/// Intel unified shared memory entry points of one platform (`cl_intel_unified_shared_memory`).
#[derive(Clone, Copy)]
pub struct UsmFns {
    pub host_alloc: clHostMemAllocINTEL_fn,
    pub device_alloc: clDeviceMemAllocINTEL_fn,
    pub shared_alloc: clSharedMemAllocINTEL_fn,
    pub blocking_free: clMemBlockingFreeINTEL_fn,
    pub get_alloc_info: clGetMemAllocInfoINTEL_fn,
    pub set_arg_mem_pointer: clSetKernelArgMemPointerINTEL_fn,
    pub mem_fill: clEnqueueMemFillINTEL_fn,
    pub memcpy: clEnqueueMemcpyINTEL_fn,
    pub migrate: clEnqueueMigrateMemINTEL_fn,
}

impl UsmFns {
    /// Fetches the USM entry points of `platform`; `None` if any is missing.
    ///
    /// # Safety
    /// `platform` is a platform id returned by `clGetPlatformIDs` of `api`.
    pub unsafe fn load(api: &Api, platform: cl_platform_id) -> Option<Self> {
        let get = api.clGetExtensionFunctionAddressForPlatform?;
        let fetch = |name: &std::ffi::CStr| -> Option<*mut c_void> {
            // SAFETY: `platform` is a valid platform id and `name` a NUL-terminated string.
            let p = unsafe { get(platform, name.as_ptr()) };
            (!p.is_null()).then_some(p)
        };
        macro_rules! cast {
            ($name:literal, $ty:ty) => {{
                let p = fetch($name)?;
                // SAFETY: the extension specification fixes the C signature of this entry
                // point, which `$ty` repeats; the pointer is non-null.
                unsafe { std::mem::transmute::<*mut c_void, $ty>(p) }
            }};
        }
        Some(UsmFns {
            host_alloc: cast!(c"clHostMemAllocINTEL", clHostMemAllocINTEL_fn),
            device_alloc: cast!(c"clDeviceMemAllocINTEL", clDeviceMemAllocINTEL_fn),
            shared_alloc: cast!(c"clSharedMemAllocINTEL", clSharedMemAllocINTEL_fn),
            blocking_free: cast!(c"clMemBlockingFreeINTEL", clMemBlockingFreeINTEL_fn),
            get_alloc_info: cast!(c"clGetMemAllocInfoINTEL", clGetMemAllocInfoINTEL_fn),
            set_arg_mem_pointer: cast!(
                c"clSetKernelArgMemPointerINTEL",
                clSetKernelArgMemPointerINTEL_fn
            ),
            mem_fill: cast!(c"clEnqueueMemFillINTEL", clEnqueueMemFillINTEL_fn),
            memcpy: cast!(c"clEnqueueMemcpyINTEL", clEnqueueMemcpyINTEL_fn),
            migrate: cast!(c"clEnqueueMigrateMemINTEL", clEnqueueMigrateMemINTEL_fn),
        })
    }
}
