//! # level-zero-sys: raw Level Zero bindings, loaded at run time
//!
//! The types, constants and entry points of the Level Zero core API (`ze_api.h`) that sycl-rs
//! uses, with their C names kept verbatim. Nothing is linked at build time: [`Loader::load`]
//! opens `libze_loader.so.1` with `libloading` and resolves every entry point by name.
//!
//! * **Required** entry points exist in every loader since Debian's libze1 1.8 (spec 1.4). If one
//!   is missing, [`Loader::load`] fails.
//! * **Optional** entry points (newer spec versions) are `Option<fn>`; their absence disables
//!   only the feature that needs them.
//!
//! Structs newer than the 1.4 header (`ze_physical_mem_properties_t`, the counter-based event
//! types and the `zex_*` compute-runtime extension types) are declared from the spec notes in
//! `shared/reference/level-zero-ipc.md`; the layout test checks them against hand-written
//! expectations, every other struct against the installed C header.
//!
//! All handle types are raw pointers to opaque structs. Every function pointer in [`Loader`]
//! is `unsafe` to call: the caller upholds the Level Zero specification's preconditions.

#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]

use std::ffi::{c_char, c_int, c_void};
use std::fmt;

// ---------------------------------------------------------------------------------------------
// Basic types
// ---------------------------------------------------------------------------------------------

/// `ze_result_t`: the status every Level Zero call returns (a C enum, kept as its integer so
/// that codes unknown to this crate are never undefined behaviour).
pub type ze_result_t = u32;
/// `ze_structure_type_t`: the `stype` tag of descriptor and property structs.
pub type ze_structure_type_t = u32;
/// `ze_bool_t`: an 8-bit boolean.
pub type ze_bool_t = u8;
/// `ze_api_version_t`: `major << 16 | minor`.
pub type ze_api_version_t = u32;
/// `ze_init_flags_t`.
pub type ze_init_flags_t = u32;
/// `ze_device_type_t`.
pub type ze_device_type_t = u32;
/// `ze_device_property_flags_t`.
pub type ze_device_property_flags_t = u32;
/// `ze_device_module_flags_t`.
pub type ze_device_module_flags_t = u32;
/// `ze_device_fp_flags_t`.
pub type ze_device_fp_flags_t = u32;
/// `ze_device_memory_property_flags_t`.
pub type ze_device_memory_property_flags_t = u32;
/// `ze_context_flags_t`.
pub type ze_context_flags_t = u32;
/// `ze_command_queue_flags_t`.
pub type ze_command_queue_flags_t = u32;
/// `ze_command_queue_mode_t`.
pub type ze_command_queue_mode_t = u32;
/// `ze_command_queue_priority_t`.
pub type ze_command_queue_priority_t = u32;
/// `ze_event_pool_flags_t`.
pub type ze_event_pool_flags_t = u32;
/// `ze_event_scope_flags_t`.
pub type ze_event_scope_flags_t = u32;
/// `ze_device_mem_alloc_flags_t`.
pub type ze_device_mem_alloc_flags_t = u32;
/// `ze_host_mem_alloc_flags_t`.
pub type ze_host_mem_alloc_flags_t = u32;
/// `ze_memory_type_t`.
pub type ze_memory_type_t = u32;
/// `ze_external_memory_type_flags_t`.
pub type ze_external_memory_type_flags_t = u32;
/// `ze_ipc_memory_flags_t`.
pub type ze_ipc_memory_flags_t = u32;
/// `ze_module_format_t`.
pub type ze_module_format_t = u32;
/// `ze_kernel_flags_t`.
pub type ze_kernel_flags_t = u32;
/// `ze_physical_mem_flags_t`.
pub type ze_physical_mem_flags_t = u32;
/// `ze_memory_access_attribute_t`.
pub type ze_memory_access_attribute_t = u32;
/// `ze_event_counter_based_flags_t` (spec 1.15; not in the 1.4 header).
pub type ze_event_counter_based_flags_t = u32;
/// `zex_counter_based_event_exp_flags_t` (compute-runtime extension).
pub type zex_counter_based_event_exp_flags_t = u32;
/// `ze_structure_type_ext_t` (compute-runtime `zex` stype, a `uint32_t`).
pub type ze_structure_type_ext_t = u32;
/// `zel_handle_type_t` (loader header `loader/ze_loader.h`).
pub type zel_handle_type_t = u32;

macro_rules! opaque_handles {
    ($( $(#[$doc:meta])* $handle:ident => $opaque:ident, )*) => {$(
        #[doc(hidden)]
        #[repr(C)]
        pub struct $opaque {
            _private: [u8; 0],
        }
        $(#[$doc])*
        pub type $handle = *mut $opaque;
    )*};
}

opaque_handles! {
    /// `ze_driver_handle_t`.
    ze_driver_handle_t => _ze_driver_handle_t,
    /// `ze_device_handle_t`.
    ze_device_handle_t => _ze_device_handle_t,
    /// `ze_context_handle_t`.
    ze_context_handle_t => _ze_context_handle_t,
    /// `ze_command_list_handle_t`.
    ze_command_list_handle_t => _ze_command_list_handle_t,
    /// `ze_event_pool_handle_t`.
    ze_event_pool_handle_t => _ze_event_pool_handle_t,
    /// `ze_event_handle_t`.
    ze_event_handle_t => _ze_event_handle_t,
    /// `ze_module_handle_t`.
    ze_module_handle_t => _ze_module_handle_t,
    /// `ze_module_build_log_handle_t`.
    ze_module_build_log_handle_t => _ze_module_build_log_handle_t,
    /// `ze_kernel_handle_t`.
    ze_kernel_handle_t => _ze_kernel_handle_t,
    /// `ze_physical_mem_handle_t`.
    ze_physical_mem_handle_t => _ze_physical_mem_handle_t,
}

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// `ZE_MAX_IPC_HANDLE_SIZE`.
pub const ZE_MAX_IPC_HANDLE_SIZE: usize = 64;
/// `ZE_MAX_DEVICE_UUID_SIZE`.
pub const ZE_MAX_DEVICE_UUID_SIZE: usize = 16;
/// `ZE_MAX_DRIVER_UUID_SIZE`.
pub const ZE_MAX_DRIVER_UUID_SIZE: usize = 16;
/// `ZE_MAX_NATIVE_KERNEL_UUID_SIZE`.
pub const ZE_MAX_NATIVE_KERNEL_UUID_SIZE: usize = 16;
/// `ZE_MAX_KERNEL_UUID_SIZE`.
pub const ZE_MAX_KERNEL_UUID_SIZE: usize = 16;
/// `ZE_MAX_MODULE_UUID_SIZE`.
pub const ZE_MAX_MODULE_UUID_SIZE: usize = 16;
/// `ZE_MAX_DEVICE_NAME`.
pub const ZE_MAX_DEVICE_NAME: usize = 256;
/// `ZE_SUBGROUPSIZE_COUNT`.
pub const ZE_SUBGROUPSIZE_COUNT: usize = 8;

/// Builds a `ze_api_version_t` like the C macro `ZE_MAKE_VERSION`.
pub const fn ZE_MAKE_VERSION(major: u32, minor: u32) -> ze_api_version_t {
    (major << 16) | (minor & 0x0000_ffff)
}

macro_rules! consts {
    ($ty:ty; $( $name:ident = $value:expr, )*) => {$(
        #[doc = concat!("`", stringify!($name), "`")]
        pub const $name: $ty = $value;
    )*};
}

consts! { ze_result_t;
    ZE_RESULT_SUCCESS = 0,
    ZE_RESULT_NOT_READY = 1,
    ZE_RESULT_ERROR_DEVICE_LOST = 0x7000_0001,
    ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY = 0x7000_0002,
    ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY = 0x7000_0003,
    ZE_RESULT_ERROR_MODULE_BUILD_FAILURE = 0x7000_0004,
    ZE_RESULT_ERROR_MODULE_LINK_FAILURE = 0x7000_0005,
    ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET = 0x7000_0006,
    ZE_RESULT_ERROR_DEVICE_IN_LOW_POWER_STATE = 0x7000_0007,
    ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS = 0x7001_0000,
    ZE_RESULT_ERROR_NOT_AVAILABLE = 0x7001_0001,
    ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE = 0x7002_0000,
    ZE_RESULT_WARNING_DROPPED_DATA = 0x7002_0001,
    ZE_RESULT_ERROR_UNINITIALIZED = 0x7800_0001,
    ZE_RESULT_ERROR_UNSUPPORTED_VERSION = 0x7800_0002,
    ZE_RESULT_ERROR_UNSUPPORTED_FEATURE = 0x7800_0003,
    ZE_RESULT_ERROR_INVALID_ARGUMENT = 0x7800_0004,
    ZE_RESULT_ERROR_INVALID_NULL_HANDLE = 0x7800_0005,
    ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE = 0x7800_0006,
    ZE_RESULT_ERROR_INVALID_NULL_POINTER = 0x7800_0007,
    ZE_RESULT_ERROR_INVALID_SIZE = 0x7800_0008,
    ZE_RESULT_ERROR_UNSUPPORTED_SIZE = 0x7800_0009,
    ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT = 0x7800_000a,
    ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT = 0x7800_000b,
    ZE_RESULT_ERROR_INVALID_ENUMERATION = 0x7800_000c,
    ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION = 0x7800_000d,
    ZE_RESULT_ERROR_UNSUPPORTED_IMAGE_FORMAT = 0x7800_000e,
    ZE_RESULT_ERROR_INVALID_NATIVE_BINARY = 0x7800_000f,
    ZE_RESULT_ERROR_INVALID_GLOBAL_NAME = 0x7800_0010,
    ZE_RESULT_ERROR_INVALID_KERNEL_NAME = 0x7800_0011,
    ZE_RESULT_ERROR_INVALID_FUNCTION_NAME = 0x7800_0012,
    ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION = 0x7800_0013,
    ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION = 0x7800_0014,
    ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX = 0x7800_0015,
    ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE = 0x7800_0016,
    ZE_RESULT_ERROR_INVALID_KERNEL_ATTRIBUTE_VALUE = 0x7800_0017,
    ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED = 0x7800_0018,
    ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE = 0x7800_0019,
    ZE_RESULT_ERROR_OVERLAPPING_REGIONS = 0x7800_001a,
    ZE_RESULT_WARNING_ACTION_REQUIRED = 0x7800_001b,
    ZE_RESULT_ERROR_UNKNOWN = 0x7fff_fffe,
}

consts! { ze_structure_type_t;
    ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES = 0x1,
    ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES = 0x3,
    ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES = 0x4,
    ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES = 0x5,
    ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES = 0x7,
    ZE_STRUCTURE_TYPE_CONTEXT_DESC = 0xd,
    ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC = 0xe,
    ZE_STRUCTURE_TYPE_EVENT_POOL_DESC = 0x10,
    ZE_STRUCTURE_TYPE_EVENT_DESC = 0x11,
    ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC = 0x15,
    ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC = 0x16,
    ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES = 0x17,
    ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_DESC = 0x18,
    ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_IMPORT_FD = 0x19,
    ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_FD = 0x1a,
    ZE_STRUCTURE_TYPE_MODULE_DESC = 0x1b,
    ZE_STRUCTURE_TYPE_KERNEL_DESC = 0x1d,
    ZE_STRUCTURE_TYPE_KERNEL_PROPERTIES = 0x1e,
    ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC = 0x20,
    // Newer than the 1.4 header (values from level-zero-ipc.md, L0 spec 1.15):
    ZE_STRUCTURE_TYPE_EVENT_COUNTER_BASED_DESC = 0x0002_003a,
    ZE_STRUCTURE_TYPE_PHYSICAL_MEM_PROPERTIES = 0x0002_0040,
}

/// `ZEX_STRUCTURE_COUNTER_BASED_EVENT_DESC` (compute-runtime `ze_stypes.h`; never in `ze_api.h`).
pub const ZEX_STRUCTURE_COUNTER_BASED_EVENT_DESC: ze_structure_type_ext_t = 0x0003_001c;

consts! { u32;
    ZE_API_VERSION_1_0 = ZE_MAKE_VERSION(1, 0),
    ZE_API_VERSION_1_4 = ZE_MAKE_VERSION(1, 4),
    ZE_INIT_FLAG_GPU_ONLY = 1 << 0,
    ZE_DEVICE_TYPE_GPU = 1,
    ZE_DEVICE_TYPE_CPU = 2,
    ZE_DEVICE_TYPE_FPGA = 3,
    ZE_DEVICE_TYPE_MCA = 4,
    ZE_DEVICE_TYPE_VPU = 5,
    ZE_DEVICE_PROPERTY_FLAG_INTEGRATED = 1 << 0,
    ZE_DEVICE_PROPERTY_FLAG_SUBDEVICE = 1 << 1,
    ZE_DEVICE_PROPERTY_FLAG_ONDEMANDPAGING = 1 << 3,
    ZE_DEVICE_MODULE_FLAG_FP16 = 1 << 0,
    ZE_DEVICE_MODULE_FLAG_FP64 = 1 << 1,
    ZE_DEVICE_MODULE_FLAG_INT64_ATOMICS = 1 << 2,
    ZE_COMMAND_QUEUE_FLAG_EXPLICIT_ONLY = 1 << 0,
    ZE_COMMAND_QUEUE_MODE_DEFAULT = 0,
    ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS = 2,
    ZE_COMMAND_QUEUE_PRIORITY_NORMAL = 0,
    ZE_EVENT_POOL_FLAG_HOST_VISIBLE = 1 << 0,
    ZE_EVENT_POOL_FLAG_IPC = 1 << 1,
    ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP = 1 << 2,
    ZE_EVENT_SCOPE_FLAG_SUBDEVICE = 1 << 0,
    ZE_EVENT_SCOPE_FLAG_DEVICE = 1 << 1,
    ZE_EVENT_SCOPE_FLAG_HOST = 1 << 2,
    ZE_MEMORY_TYPE_UNKNOWN = 0,
    ZE_MEMORY_TYPE_HOST = 1,
    ZE_MEMORY_TYPE_DEVICE = 2,
    ZE_MEMORY_TYPE_SHARED = 3,
    ZE_EXTERNAL_MEMORY_TYPE_FLAG_OPAQUE_FD = 1 << 0,
    ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF = 1 << 1,
    ZE_IPC_MEMORY_FLAG_BIAS_CACHED = 1 << 0,
    ZE_IPC_MEMORY_FLAG_BIAS_UNCACHED = 1 << 1,
    ZE_MODULE_FORMAT_IL_SPIRV = 0,
    ZE_MODULE_FORMAT_NATIVE = 1,
    ZE_MEMORY_ACCESS_ATTRIBUTE_NONE = 0,
    ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE = 1,
    ZE_MEMORY_ACCESS_ATTRIBUTE_READONLY = 2,
    // Newer than the 1.4 header (spec 1.7): immediate/regular command lists execute in order.
    ZE_COMMAND_QUEUE_FLAG_IN_ORDER = 1 << 1,
    // Newer than the 1.4 header (spec 1.15): `ze_event_counter_based_flags_t`.
    ZE_EVENT_COUNTER_BASED_FLAG_IMMEDIATE = 1 << 0,
    ZE_EVENT_COUNTER_BASED_FLAG_NON_IMMEDIATE = 1 << 1,
    ZE_EVENT_COUNTER_BASED_FLAG_HOST_VISIBLE = 1 << 2,
    ZE_EVENT_COUNTER_BASED_FLAG_IPC = 1 << 3,
    ZE_EVENT_COUNTER_BASED_FLAG_DEVICE_TIMESTAMP = 1 << 4,
    ZE_EVENT_COUNTER_BASED_FLAG_HOST_TIMESTAMP = 1 << 5,
    // compute-runtime `zex` extension flags (same bits as the core ones).
    ZEX_COUNTER_BASED_EVENT_FLAG_IMMEDIATE = 1 << 0,
    ZEX_COUNTER_BASED_EVENT_FLAG_NON_IMMEDIATE = 1 << 1,
    ZEX_COUNTER_BASED_EVENT_FLAG_HOST_VISIBLE = 1 << 2,
    ZEX_COUNTER_BASED_EVENT_FLAG_IPC = 1 << 3,
    // `zel_handle_type_t` (loader/ze_loader.h).
    ZEL_HANDLE_DRIVER = 0,
    ZEL_HANDLE_DEVICE = 1,
    ZEL_HANDLE_CONTEXT = 2,
    ZEL_HANDLE_EVENT = 7,
}

// ---------------------------------------------------------------------------------------------
// Structs
// ---------------------------------------------------------------------------------------------

/// `ze_ipc_mem_handle_t`: an opaque 64-byte IPC handle of a memory allocation. On Linux the
/// Intel driver keeps the allocation's DMA-BUF fd (valid only in the exporter) in bytes 0..3.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ze_ipc_mem_handle_t {
    /// Opaque bytes.
    pub data: [c_char; ZE_MAX_IPC_HANDLE_SIZE],
}

/// `ze_ipc_event_pool_handle_t`: an opaque 64-byte IPC handle of an event pool.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ze_ipc_event_pool_handle_t {
    /// Opaque bytes.
    pub data: [c_char; ZE_MAX_IPC_HANDLE_SIZE],
}

/// `ze_ipc_event_counter_based_handle_t` (spec 1.15; not in the 1.4 header).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ze_ipc_event_counter_based_handle_t {
    /// Opaque bytes.
    pub data: [c_char; ZE_MAX_IPC_HANDLE_SIZE],
}

/// `zex_ipc_counter_based_event_handle_t` (compute-runtime extension; same layout as
/// [`ze_ipc_event_counter_based_handle_t`]).
pub type zex_ipc_counter_based_event_handle_t = ze_ipc_event_counter_based_handle_t;

/// `ze_driver_uuid_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ze_driver_uuid_t {
    /// The bytes.
    pub id: [u8; ZE_MAX_DRIVER_UUID_SIZE],
}

/// `ze_device_uuid_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ze_device_uuid_t {
    /// The bytes.
    pub id: [u8; ZE_MAX_DEVICE_UUID_SIZE],
}

/// `ze_native_kernel_uuid_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ze_native_kernel_uuid_t {
    /// The bytes.
    pub id: [u8; ZE_MAX_NATIVE_KERNEL_UUID_SIZE],
}

/// `ze_driver_properties_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_driver_properties_t {
    /// `ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES`.
    pub stype: ze_structure_type_t,
    /// Extension chain.
    pub pNext: *mut c_void,
    /// Driver UUID.
    pub uuid: ze_driver_uuid_t,
    /// Driver version (vendor-specific; the low 16 bits are the build number on Intel).
    pub driverVersion: u32,
}

/// `ze_device_properties_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_device_properties_t {
    /// `ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES`.
    pub stype: ze_structure_type_t,
    /// Extension chain.
    pub pNext: *mut c_void,
    /// Device type (C field `type`).
    #[doc(alias = "type")]
    pub type_: ze_device_type_t,
    /// PCI vendor id.
    pub vendorId: u32,
    /// Device id.
    pub deviceId: u32,
    /// `ze_device_property_flags_t`.
    pub flags: ze_device_property_flags_t,
    /// Sub-device id.
    pub subdeviceId: u32,
    /// Clock rate in MHz.
    pub coreClockRate: u32,
    /// Largest allocation.
    pub maxMemAllocSize: u64,
    /// Hardware contexts.
    pub maxHardwareContexts: u32,
    /// Highest queue priority.
    pub maxCommandQueuePriority: u32,
    /// Threads per EU.
    pub numThreadsPerEU: u32,
    /// Physical SIMD width.
    pub physicalEUSimdWidth: u32,
    /// EUs per sub-slice.
    pub numEUsPerSubslice: u32,
    /// Sub-slices per slice.
    pub numSubslicesPerSlice: u32,
    /// Slices.
    pub numSlices: u32,
    /// Nanoseconds per timer cycle (with stype `ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES`).
    pub timerResolution: u64,
    /// Valid bits of global timestamps.
    pub timestampValidBits: u32,
    /// Valid bits of kernel timestamps.
    pub kernelTimestampValidBits: u32,
    /// Device UUID.
    pub uuid: ze_device_uuid_t,
    /// NUL-terminated name.
    pub name: [c_char; ZE_MAX_DEVICE_NAME],
}

/// `ze_device_compute_properties_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_device_compute_properties_t {
    /// `ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES`.
    pub stype: ze_structure_type_t,
    /// Extension chain.
    pub pNext: *mut c_void,
    /// Largest work-group.
    pub maxTotalGroupSize: u32,
    /// Largest group extent in x.
    pub maxGroupSizeX: u32,
    /// Largest group extent in y.
    pub maxGroupSizeY: u32,
    /// Largest group extent in z.
    pub maxGroupSizeZ: u32,
    /// Largest group count in x.
    pub maxGroupCountX: u32,
    /// Largest group count in y.
    pub maxGroupCountY: u32,
    /// Largest group count in z.
    pub maxGroupCountZ: u32,
    /// Shared local memory per group in bytes.
    pub maxSharedLocalMemory: u32,
    /// Valid entries of `subGroupSizes`.
    pub numSubGroupSizes: u32,
    /// Supported sub-group sizes.
    pub subGroupSizes: [u32; ZE_SUBGROUPSIZE_COUNT],
}

/// `ze_device_module_properties_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_device_module_properties_t {
    /// `ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES`.
    pub stype: ze_structure_type_t,
    /// Extension chain.
    pub pNext: *mut c_void,
    /// Highest SPIR-V version.
    pub spirvVersionSupported: u32,
    /// `ze_device_module_flags_t` (FP16, FP64, INT64_ATOMICS, ...).
    pub flags: ze_device_module_flags_t,
    /// Half-precision capabilities.
    pub fp16flags: ze_device_fp_flags_t,
    /// Single-precision capabilities.
    pub fp32flags: ze_device_fp_flags_t,
    /// Double-precision capabilities.
    pub fp64flags: ze_device_fp_flags_t,
    /// Largest total argument size.
    pub maxArgumentsSize: u32,
    /// printf buffer size.
    pub printfBufferSize: u32,
    /// Native kernel UUID.
    pub nativeKernelSupported: ze_native_kernel_uuid_t,
}

/// `ze_device_memory_properties_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_device_memory_properties_t {
    /// `ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES`.
    pub stype: ze_structure_type_t,
    /// Extension chain.
    pub pNext: *mut c_void,
    /// Flags.
    pub flags: ze_device_memory_property_flags_t,
    /// Clock in MHz.
    pub maxClockRate: u32,
    /// Bus width in bits.
    pub maxBusWidth: u32,
    /// Size in bytes.
    pub totalSize: u64,
    /// NUL-terminated name.
    pub name: [c_char; ZE_MAX_DEVICE_NAME],
}

/// `ze_context_desc_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_context_desc_t {
    /// `ZE_STRUCTURE_TYPE_CONTEXT_DESC`.
    pub stype: ze_structure_type_t,
    /// Extension chain.
    pub pNext: *const c_void,
    /// Flags.
    pub flags: ze_context_flags_t,
}

/// `ze_command_queue_desc_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_command_queue_desc_t {
    /// `ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC`.
    pub stype: ze_structure_type_t,
    /// Extension chain.
    pub pNext: *const c_void,
    /// Command queue group ordinal.
    pub ordinal: u32,
    /// Queue index in the group.
    pub index: u32,
    /// Flags.
    pub flags: ze_command_queue_flags_t,
    /// Mode.
    pub mode: ze_command_queue_mode_t,
    /// Priority.
    pub priority: ze_command_queue_priority_t,
}

/// `ze_event_pool_desc_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_event_pool_desc_t {
    /// `ZE_STRUCTURE_TYPE_EVENT_POOL_DESC`.
    pub stype: ze_structure_type_t,
    /// Extension chain.
    pub pNext: *const c_void,
    /// `ze_event_pool_flags_t`.
    pub flags: ze_event_pool_flags_t,
    /// Number of events.
    pub count: u32,
}

/// `ze_event_desc_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_event_desc_t {
    /// `ZE_STRUCTURE_TYPE_EVENT_DESC`.
    pub stype: ze_structure_type_t,
    /// Extension chain.
    pub pNext: *const c_void,
    /// Index in the pool.
    pub index: u32,
    /// Signal scope.
    pub signal: ze_event_scope_flags_t,
    /// Wait scope.
    pub wait: ze_event_scope_flags_t,
}

/// `ze_event_counter_based_desc_t` (spec 1.15; not in the 1.4 header).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_event_counter_based_desc_t {
    /// `ZE_STRUCTURE_TYPE_EVENT_COUNTER_BASED_DESC`.
    pub stype: ze_structure_type_t,
    /// Extension chain.
    pub pNext: *const c_void,
    /// `ze_event_counter_based_flags_t`.
    pub flags: ze_event_counter_based_flags_t,
    /// Signal scope.
    pub signal: ze_event_scope_flags_t,
    /// Wait scope.
    pub wait: ze_event_scope_flags_t,
}

/// `zex_counter_based_event_desc_t` (compute-runtime extension `ZEX_counter_based_event`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zex_counter_based_event_desc_t {
    /// `ZEX_STRUCTURE_COUNTER_BASED_EVENT_DESC`.
    pub stype: ze_structure_type_ext_t,
    /// Extension chain.
    pub pNext: *const c_void,
    /// `zex_counter_based_event_exp_flags_t`.
    pub flags: zex_counter_based_event_exp_flags_t,
    /// Signal scope.
    pub signalScope: ze_event_scope_flags_t,
    /// Wait scope.
    pub waitScope: ze_event_scope_flags_t,
}

/// `ze_kernel_timestamp_data_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ze_kernel_timestamp_data_t {
    /// Start in device clock cycles.
    pub kernelStart: u64,
    /// End in device clock cycles.
    pub kernelEnd: u64,
}

/// `ze_kernel_timestamp_result_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ze_kernel_timestamp_result_t {
    /// Device-global timestamps.
    pub global: ze_kernel_timestamp_data_t,
    /// Context timestamps.
    pub context: ze_kernel_timestamp_data_t,
}

/// `ze_device_mem_alloc_desc_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_device_mem_alloc_desc_t {
    /// `ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC`.
    pub stype: ze_structure_type_t,
    /// Extension chain.
    pub pNext: *const c_void,
    /// Flags.
    pub flags: ze_device_mem_alloc_flags_t,
    /// Memory ordinal.
    pub ordinal: u32,
}

/// `ze_host_mem_alloc_desc_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_host_mem_alloc_desc_t {
    /// `ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC`.
    pub stype: ze_structure_type_t,
    /// Extension chain.
    pub pNext: *const c_void,
    /// Flags.
    pub flags: ze_host_mem_alloc_flags_t,
}

/// `ze_memory_allocation_properties_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_memory_allocation_properties_t {
    /// `ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES`.
    pub stype: ze_structure_type_t,
    /// Extension chain.
    pub pNext: *mut c_void,
    /// Memory type (C field `type`).
    #[doc(alias = "type")]
    pub type_: ze_memory_type_t,
    /// Allocation id.
    pub id: u64,
    /// Page size.
    pub pageSize: u64,
}

/// `ze_external_memory_export_desc_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_external_memory_export_desc_t {
    /// `ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_DESC`.
    pub stype: ze_structure_type_t,
    /// Extension chain.
    pub pNext: *const c_void,
    /// `ze_external_memory_type_flags_t`.
    pub flags: ze_external_memory_type_flags_t,
}

/// `ze_external_memory_import_fd_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_external_memory_import_fd_t {
    /// `ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_IMPORT_FD`.
    pub stype: ze_structure_type_t,
    /// Extension chain.
    pub pNext: *const c_void,
    /// `ze_external_memory_type_flags_t`.
    pub flags: ze_external_memory_type_flags_t,
    /// The descriptor to import.
    pub fd: c_int,
}

/// `ze_external_memory_export_fd_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_external_memory_export_fd_t {
    /// `ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_FD`.
    pub stype: ze_structure_type_t,
    /// Extension chain.
    pub pNext: *const c_void,
    /// `ze_external_memory_type_flags_t`.
    pub flags: ze_external_memory_type_flags_t,
    /// The exported descriptor (out).
    pub fd: c_int,
}

/// `ze_module_constants_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_module_constants_t {
    /// Number of specialization constants.
    pub numConstants: u32,
    /// Their ids.
    pub pConstantIds: *const u32,
    /// Pointers to their values.
    pub pConstantValues: *mut *const c_void,
}

/// `ze_module_desc_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_module_desc_t {
    /// `ZE_STRUCTURE_TYPE_MODULE_DESC`.
    pub stype: ze_structure_type_t,
    /// Extension chain.
    pub pNext: *const c_void,
    /// `ZE_MODULE_FORMAT_IL_SPIRV` or `ZE_MODULE_FORMAT_NATIVE`.
    pub format: ze_module_format_t,
    /// Input size in bytes.
    pub inputSize: usize,
    /// Input bytes.
    pub pInputModule: *const u8,
    /// Build flags (NUL-terminated, may be null).
    pub pBuildFlags: *const c_char,
    /// Specialization constants (may be null).
    pub pConstants: *const ze_module_constants_t,
}

/// `ze_kernel_desc_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_kernel_desc_t {
    /// `ZE_STRUCTURE_TYPE_KERNEL_DESC`.
    pub stype: ze_structure_type_t,
    /// Extension chain.
    pub pNext: *const c_void,
    /// Flags.
    pub flags: ze_kernel_flags_t,
    /// NUL-terminated kernel name.
    pub pKernelName: *const c_char,
}

/// `ze_kernel_uuid_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ze_kernel_uuid_t {
    /// Kernel id.
    pub kid: [u8; ZE_MAX_KERNEL_UUID_SIZE],
    /// Module id.
    pub mid: [u8; ZE_MAX_MODULE_UUID_SIZE],
}

/// `ze_kernel_properties_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_kernel_properties_t {
    /// `ZE_STRUCTURE_TYPE_KERNEL_PROPERTIES`.
    pub stype: ze_structure_type_t,
    /// Extension chain.
    pub pNext: *mut c_void,
    /// Number of kernel arguments.
    pub numKernelArgs: u32,
    /// Required group size in x (0 if none).
    pub requiredGroupSizeX: u32,
    /// Required group size in y.
    pub requiredGroupSizeY: u32,
    /// Required group size in z.
    pub requiredGroupSizeZ: u32,
    /// Required number of sub-groups.
    pub requiredNumSubGroups: u32,
    /// Required sub-group size.
    pub requiredSubgroupSize: u32,
    /// Largest sub-group size.
    pub maxSubgroupSize: u32,
    /// Most sub-groups per group.
    pub maxNumSubgroups: u32,
    /// Local memory used.
    pub localMemSize: u32,
    /// Private memory per thread.
    pub privateMemSize: u32,
    /// Spill memory.
    pub spillMemSize: u32,
    /// Kernel UUID.
    pub uuid: ze_kernel_uuid_t,
}

/// `ze_group_count_t`: thread-group counts of a launch.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ze_group_count_t {
    /// Groups in x.
    pub groupCountX: u32,
    /// Groups in y.
    pub groupCountY: u32,
    /// Groups in z.
    pub groupCountZ: u32,
}

/// `ze_physical_mem_desc_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_physical_mem_desc_t {
    /// `ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC`.
    pub stype: ze_structure_type_t,
    /// Extension chain (export desc or import fd).
    pub pNext: *const c_void,
    /// Flags.
    pub flags: ze_physical_mem_flags_t,
    /// Size in bytes.
    pub size: usize,
}

/// `ze_physical_mem_properties_t` (spec 1.15; not in the 1.4 header).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ze_physical_mem_properties_t {
    /// `ZE_STRUCTURE_TYPE_PHYSICAL_MEM_PROPERTIES`.
    pub stype: ze_structure_type_t,
    /// Extension chain (an export fd struct to obtain the descriptor).
    pub pNext: *mut c_void,
    /// Unique id.
    pub id: u64,
    /// Size in bytes.
    pub size: u64,
}

// ---------------------------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------------------------

/// Why [`Loader::load`] failed.
#[derive(Debug)]
pub struct LoadError {
    /// What failed (library or symbol).
    pub message: String,
    /// The `libloading` error.
    pub source: libloading::Error,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.message, self.source)
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// The default library name.
pub const LOADER_LIBRARY: &str = "libze_loader.so.1";

macro_rules! entry_points {
    (
        required { $( $name:ident ( $($arg:ty),* ); )* }
        optional { $( $oname:ident ( $($oarg:ty),* ); )* }
    ) => {
        /// The Level Zero loader, opened at run time, with its entry points.
        ///
        /// Required entry points are plain function pointers; optional ones (newer than spec
        /// 1.4, or loader-specific) are `Option`s. The `Library` is kept alive as long as the
        /// `Loader`, which keeps every pointer valid.
        pub struct Loader {
            _library: libloading::Library,
            $(
                #[doc = concat!("`", stringify!($name), "` (required).")]
                pub $name: unsafe extern "C" fn($($arg),*) -> ze_result_t,
            )*
            $(
                #[doc = concat!("`", stringify!($oname), "` (optional: `None` when the loader lacks it).")]
                pub $oname: Option<unsafe extern "C" fn($($oarg),*) -> ze_result_t>,
            )*
        }

        impl Loader {
            /// Opens `path` and resolves every entry point.
            pub fn load_from(path: &str) -> Result<Loader, LoadError> {
                // SAFETY: loading a shared library runs its initialisers; the Level Zero loader
                // is a plain C library whose initialisers only set up its own state.
                let library = unsafe { libloading::Library::new(path) }
                    .map_err(|source| LoadError { message: format!("cannot open {path}"), source })?;
                $(
                    // SAFETY: the symbol is declared with the signature of `ze_api.h` (spec 1.4);
                    // the pointer is copied out and stays valid while `_library` lives in the
                    // same struct.
                    let $name = unsafe {
                        *library
                            .get::<unsafe extern "C" fn($($arg),*) -> ze_result_t>(
                                concat!(stringify!($name), "\0").as_bytes(),
                            )
                            .map_err(|source| LoadError {
                                message: format!("{path} has no {}", stringify!($name)),
                                source,
                            })?
                    };
                )*
                $(
                    // SAFETY: as above, with the signature of the newer spec version that
                    // introduced the symbol (see level-zero-ipc.md §5).
                    let $oname = unsafe {
                        library
                            .get::<unsafe extern "C" fn($($oarg),*) -> ze_result_t>(
                                concat!(stringify!($oname), "\0").as_bytes(),
                            )
                            .ok()
                            .map(|s| *s)
                    };
                )*
                Ok(Loader { _library: library, $($name,)* $($oname,)* })
            }

            /// Names of the optional entry points this loader lacks.
            pub fn missing_optional(&self) -> Vec<&'static str> {
                let mut out = Vec::new();
                $( if self.$oname.is_none() { out.push(stringify!($oname)); } )*
                out
            }
        }
    };
}

entry_points! {
    required {
        zeInit(ze_init_flags_t);
        zeDriverGet(*mut u32, *mut ze_driver_handle_t);
        zeDriverGetProperties(ze_driver_handle_t, *mut ze_driver_properties_t);
        zeDriverGetApiVersion(ze_driver_handle_t, *mut ze_api_version_t);
        zeDriverGetExtensionFunctionAddress(ze_driver_handle_t, *const c_char, *mut *mut c_void);
        zeDeviceGet(ze_driver_handle_t, *mut u32, *mut ze_device_handle_t);
        zeDeviceGetProperties(ze_device_handle_t, *mut ze_device_properties_t);
        zeDeviceGetComputeProperties(ze_device_handle_t, *mut ze_device_compute_properties_t);
        zeDeviceGetMemoryProperties(ze_device_handle_t, *mut u32, *mut ze_device_memory_properties_t);
        zeDeviceGetModuleProperties(ze_device_handle_t, *mut ze_device_module_properties_t);
        zeDeviceCanAccessPeer(ze_device_handle_t, ze_device_handle_t, *mut ze_bool_t);
        zeContextCreate(ze_driver_handle_t, *const ze_context_desc_t, *mut ze_context_handle_t);
        zeContextDestroy(ze_context_handle_t);
        zeCommandListCreateImmediate(ze_context_handle_t, ze_device_handle_t, *const ze_command_queue_desc_t, *mut ze_command_list_handle_t);
        zeCommandListDestroy(ze_command_list_handle_t);
        zeCommandListAppendMemoryCopy(ze_command_list_handle_t, *mut c_void, *const c_void, usize, ze_event_handle_t, u32, *mut ze_event_handle_t);
        zeCommandListAppendMemoryFill(ze_command_list_handle_t, *mut c_void, *const c_void, usize, usize, ze_event_handle_t, u32, *mut ze_event_handle_t);
        zeCommandListAppendMemoryPrefetch(ze_command_list_handle_t, *const c_void, usize);
        zeCommandListAppendLaunchKernel(ze_command_list_handle_t, ze_kernel_handle_t, *const ze_group_count_t, ze_event_handle_t, u32, *mut ze_event_handle_t);
        zeCommandListAppendSignalEvent(ze_command_list_handle_t, ze_event_handle_t);
        zeCommandListAppendWaitOnEvents(ze_command_list_handle_t, u32, *mut ze_event_handle_t);
        zeCommandListAppendBarrier(ze_command_list_handle_t, ze_event_handle_t, u32, *mut ze_event_handle_t);
        zeEventPoolCreate(ze_context_handle_t, *const ze_event_pool_desc_t, u32, *mut ze_device_handle_t, *mut ze_event_pool_handle_t);
        zeEventPoolDestroy(ze_event_pool_handle_t);
        zeEventCreate(ze_event_pool_handle_t, *const ze_event_desc_t, *mut ze_event_handle_t);
        zeEventDestroy(ze_event_handle_t);
        zeEventHostSynchronize(ze_event_handle_t, u64);
        zeEventQueryStatus(ze_event_handle_t);
        zeEventHostSignal(ze_event_handle_t);
        zeEventHostReset(ze_event_handle_t);
        zeEventQueryKernelTimestamp(ze_event_handle_t, *mut ze_kernel_timestamp_result_t);
        zeMemAllocDevice(ze_context_handle_t, *const ze_device_mem_alloc_desc_t, usize, usize, ze_device_handle_t, *mut *mut c_void);
        zeMemAllocHost(ze_context_handle_t, *const ze_host_mem_alloc_desc_t, usize, usize, *mut *mut c_void);
        zeMemAllocShared(ze_context_handle_t, *const ze_device_mem_alloc_desc_t, *const ze_host_mem_alloc_desc_t, usize, usize, ze_device_handle_t, *mut *mut c_void);
        zeMemFree(ze_context_handle_t, *mut c_void);
        zeMemGetAllocProperties(ze_context_handle_t, *const c_void, *mut ze_memory_allocation_properties_t, *mut ze_device_handle_t);
        zeMemGetAddressRange(ze_context_handle_t, *const c_void, *mut *mut c_void, *mut usize);
        zeModuleCreate(ze_context_handle_t, ze_device_handle_t, *const ze_module_desc_t, *mut ze_module_handle_t, *mut ze_module_build_log_handle_t);
        zeModuleDestroy(ze_module_handle_t);
        zeModuleBuildLogGetString(ze_module_build_log_handle_t, *mut usize, *mut c_char);
        zeModuleBuildLogDestroy(ze_module_build_log_handle_t);
        zeModuleGetKernelNames(ze_module_handle_t, *mut u32, *mut *const c_char);
        zeKernelCreate(ze_module_handle_t, *const ze_kernel_desc_t, *mut ze_kernel_handle_t);
        zeKernelDestroy(ze_kernel_handle_t);
        zeKernelSetArgumentValue(ze_kernel_handle_t, u32, usize, *const c_void);
        zeKernelSetGroupSize(ze_kernel_handle_t, u32, u32, u32);
        zeKernelGetProperties(ze_kernel_handle_t, *mut ze_kernel_properties_t);
        zeKernelSuggestGroupSize(ze_kernel_handle_t, u32, u32, u32, *mut u32, *mut u32, *mut u32);
        zeVirtualMemReserve(ze_context_handle_t, *const c_void, usize, *mut *mut c_void);
        zeVirtualMemFree(ze_context_handle_t, *const c_void, usize);
        zeVirtualMemQueryPageSize(ze_context_handle_t, ze_device_handle_t, usize, *mut usize);
        zeVirtualMemMap(ze_context_handle_t, *const c_void, usize, ze_physical_mem_handle_t, usize, ze_memory_access_attribute_t);
        zeVirtualMemUnmap(ze_context_handle_t, *const c_void, usize);
        zeVirtualMemSetAccessAttribute(ze_context_handle_t, *const c_void, usize, ze_memory_access_attribute_t);
        zeVirtualMemGetAccessAttribute(ze_context_handle_t, *const c_void, usize, *mut ze_memory_access_attribute_t, *mut usize);
        zePhysicalMemCreate(ze_context_handle_t, ze_device_handle_t, *mut ze_physical_mem_desc_t, *mut ze_physical_mem_handle_t);
        zePhysicalMemDestroy(ze_context_handle_t, ze_physical_mem_handle_t);
        zeMemGetIpcHandle(ze_context_handle_t, *const c_void, *mut ze_ipc_mem_handle_t);
        zeMemOpenIpcHandle(ze_context_handle_t, ze_device_handle_t, ze_ipc_mem_handle_t, ze_ipc_memory_flags_t, *mut *mut c_void);
        zeMemCloseIpcHandle(ze_context_handle_t, *const c_void);
        zeEventPoolGetIpcHandle(ze_event_pool_handle_t, *mut ze_ipc_event_pool_handle_t);
        zeEventPoolOpenIpcHandle(ze_context_handle_t, ze_ipc_event_pool_handle_t, *mut ze_event_pool_handle_t);
        zeEventPoolCloseIpcHandle(ze_event_pool_handle_t);
    }
    optional {
        zeCommandListHostSynchronize(ze_command_list_handle_t, u64);
        zeMemPutIpcHandle(ze_context_handle_t, ze_ipc_mem_handle_t);
        zeEventPoolPutIpcHandle(ze_context_handle_t, ze_ipc_event_pool_handle_t);
        zePhysicalMemGetProperties(ze_context_handle_t, ze_physical_mem_handle_t, *mut ze_physical_mem_properties_t);
        zeEventCounterBasedCreate(ze_context_handle_t, ze_device_handle_t, *const ze_event_counter_based_desc_t, *mut ze_event_handle_t);
        zeEventCounterBasedGetIpcHandle(ze_event_handle_t, *mut ze_ipc_event_counter_based_handle_t);
        zeEventCounterBasedOpenIpcHandle(ze_context_handle_t, ze_ipc_event_counter_based_handle_t, *mut ze_event_handle_t);
        zeEventCounterBasedCloseIpcHandle(ze_event_handle_t);
        zeMemGetFileDescriptorFromIpcHandleExp(ze_context_handle_t, ze_ipc_mem_handle_t, *mut u64);
        zeMemGetIpcHandleFromFileDescriptorExp(ze_context_handle_t, u64, *mut ze_ipc_mem_handle_t);
        zelLoaderTranslateHandle(zel_handle_type_t, *mut c_void, *mut *mut c_void);
    }
}

impl Loader {
    /// Opens [`LOADER_LIBRARY`] (`libze_loader.so.1`).
    pub fn load() -> Result<Loader, LoadError> {
        Loader::load_from(LOADER_LIBRARY)
    }
}

impl fmt::Debug for Loader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Loader")
            .field("missing_optional", &self.missing_optional())
            .finish_non_exhaustive()
    }
}

// The compute-runtime `zex` extension functions, fetched with
// `zeDriverGetExtensionFunctionAddress` (they bypass the loader: translate loader handles with
// `zelLoaderTranslateHandle` first).

/// `zexCounterBasedEventCreate2`.
pub type PFN_zexCounterBasedEventCreate2 = unsafe extern "C" fn(
    ze_context_handle_t,
    ze_device_handle_t,
    *const zex_counter_based_event_desc_t,
    *mut ze_event_handle_t,
) -> ze_result_t;
/// `zexCounterBasedEventGetIpcHandle`.
pub type PFN_zexCounterBasedEventGetIpcHandle = unsafe extern "C" fn(
    ze_event_handle_t,
    *mut zex_ipc_counter_based_event_handle_t,
) -> ze_result_t;
/// `zexCounterBasedEventOpenIpcHandle` (the handle is passed by value).
pub type PFN_zexCounterBasedEventOpenIpcHandle = unsafe extern "C" fn(
    ze_context_handle_t,
    zex_ipc_counter_based_event_handle_t,
    *mut ze_event_handle_t,
) -> ze_result_t;
/// `zexCounterBasedEventCloseIpcHandle`.
pub type PFN_zexCounterBasedEventCloseIpcHandle =
    unsafe extern "C" fn(ze_event_handle_t) -> ze_result_t;

/// Every `ze_result_t` named in this crate with its C name, for messages and tests.
pub const RESULT_NAMES: &[(ze_result_t, &str)] = &[
    (ZE_RESULT_SUCCESS, "ZE_RESULT_SUCCESS"),
    (ZE_RESULT_NOT_READY, "ZE_RESULT_NOT_READY"),
    (ZE_RESULT_ERROR_DEVICE_LOST, "ZE_RESULT_ERROR_DEVICE_LOST"),
    (
        ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY,
        "ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY",
    ),
    (
        ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY,
        "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY",
    ),
    (
        ZE_RESULT_ERROR_MODULE_BUILD_FAILURE,
        "ZE_RESULT_ERROR_MODULE_BUILD_FAILURE",
    ),
    (
        ZE_RESULT_ERROR_MODULE_LINK_FAILURE,
        "ZE_RESULT_ERROR_MODULE_LINK_FAILURE",
    ),
    (
        ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET,
        "ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET",
    ),
    (
        ZE_RESULT_ERROR_DEVICE_IN_LOW_POWER_STATE,
        "ZE_RESULT_ERROR_DEVICE_IN_LOW_POWER_STATE",
    ),
    (
        ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS,
        "ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS",
    ),
    (
        ZE_RESULT_ERROR_NOT_AVAILABLE,
        "ZE_RESULT_ERROR_NOT_AVAILABLE",
    ),
    (
        ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE,
        "ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE",
    ),
    (
        ZE_RESULT_WARNING_DROPPED_DATA,
        "ZE_RESULT_WARNING_DROPPED_DATA",
    ),
    (
        ZE_RESULT_ERROR_UNINITIALIZED,
        "ZE_RESULT_ERROR_UNINITIALIZED",
    ),
    (
        ZE_RESULT_ERROR_UNSUPPORTED_VERSION,
        "ZE_RESULT_ERROR_UNSUPPORTED_VERSION",
    ),
    (
        ZE_RESULT_ERROR_UNSUPPORTED_FEATURE,
        "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE",
    ),
    (
        ZE_RESULT_ERROR_INVALID_ARGUMENT,
        "ZE_RESULT_ERROR_INVALID_ARGUMENT",
    ),
    (
        ZE_RESULT_ERROR_INVALID_NULL_HANDLE,
        "ZE_RESULT_ERROR_INVALID_NULL_HANDLE",
    ),
    (
        ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE,
        "ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE",
    ),
    (
        ZE_RESULT_ERROR_INVALID_NULL_POINTER,
        "ZE_RESULT_ERROR_INVALID_NULL_POINTER",
    ),
    (ZE_RESULT_ERROR_INVALID_SIZE, "ZE_RESULT_ERROR_INVALID_SIZE"),
    (
        ZE_RESULT_ERROR_UNSUPPORTED_SIZE,
        "ZE_RESULT_ERROR_UNSUPPORTED_SIZE",
    ),
    (
        ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT,
        "ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT",
    ),
    (
        ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT,
        "ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT",
    ),
    (
        ZE_RESULT_ERROR_INVALID_ENUMERATION,
        "ZE_RESULT_ERROR_INVALID_ENUMERATION",
    ),
    (
        ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION,
        "ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION",
    ),
    (
        ZE_RESULT_ERROR_UNSUPPORTED_IMAGE_FORMAT,
        "ZE_RESULT_ERROR_UNSUPPORTED_IMAGE_FORMAT",
    ),
    (
        ZE_RESULT_ERROR_INVALID_NATIVE_BINARY,
        "ZE_RESULT_ERROR_INVALID_NATIVE_BINARY",
    ),
    (
        ZE_RESULT_ERROR_INVALID_GLOBAL_NAME,
        "ZE_RESULT_ERROR_INVALID_GLOBAL_NAME",
    ),
    (
        ZE_RESULT_ERROR_INVALID_KERNEL_NAME,
        "ZE_RESULT_ERROR_INVALID_KERNEL_NAME",
    ),
    (
        ZE_RESULT_ERROR_INVALID_FUNCTION_NAME,
        "ZE_RESULT_ERROR_INVALID_FUNCTION_NAME",
    ),
    (
        ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION,
        "ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION",
    ),
    (
        ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION,
        "ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION",
    ),
    (
        ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX,
        "ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX",
    ),
    (
        ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE,
        "ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE",
    ),
    (
        ZE_RESULT_ERROR_INVALID_KERNEL_ATTRIBUTE_VALUE,
        "ZE_RESULT_ERROR_INVALID_KERNEL_ATTRIBUTE_VALUE",
    ),
    (
        ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED,
        "ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED",
    ),
    (
        ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE,
        "ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE",
    ),
    (
        ZE_RESULT_ERROR_OVERLAPPING_REGIONS,
        "ZE_RESULT_ERROR_OVERLAPPING_REGIONS",
    ),
    (
        ZE_RESULT_WARNING_ACTION_REQUIRED,
        "ZE_RESULT_WARNING_ACTION_REQUIRED",
    ),
    (ZE_RESULT_ERROR_UNKNOWN, "ZE_RESULT_ERROR_UNKNOWN"),
];

/// The C name of a `ze_result_t`, if this crate knows it.
pub fn result_name(code: ze_result_t) -> Option<&'static str> {
    RESULT_NAMES
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, n)| *n)
}
