//! Layout test: every struct and constant declared in `level-zero-sys` that the installed
//! `ze_api.h` also has is compared with what a C compiler says about the header.
//!
//! The test writes a C program that includes `<level_zero/ze_api.h>` and prints `sizeof`,
//! `_Alignof` and `offsetof` of every field, and the value of every constant; it compiles the
//! program with `cc`, runs it and compares each line with Rust's `size_of`, `align_of` and
//! `offset_of!`. Items newer than the installed header (spec 1.4 on Debian's libze-dev 1.8) are
//! checked against hand-written expectations derived from the spec notes
//! (`shared/reference/level-zero-ipc.md`) in `newer_than_header_layouts`.
//!
//! Without `cc` or the header the test prints why and passes, unless `SYCL_RS_REQUIRE_BACKENDS`
//! contains `level_zero`, in which case it fails.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::mem::{align_of, offset_of, size_of};
use std::path::Path;
use std::process::Command;

use level_zero_sys::*;

#[derive(Default)]
struct Plan {
    c_body: String,
    expect: BTreeMap<String, u64>,
}

impl Plan {
    fn expect(&mut self, key: String, value: u64, c_expr: &str, c_fmt: &str) {
        writeln!(self.c_body, "    printf(\"{key} %{c_fmt}\\n\", {c_expr});").unwrap();
        assert!(self.expect.insert(key, value).is_none(), "duplicate check");
    }
}

macro_rules! check_struct {
    ($plan:ident, $ty:ident { $($field:ident => $cfield:literal),* $(,)? }) => {{
        let name = stringify!($ty);
        $plan.expect(format!("size:{name}"), size_of::<$ty>() as u64, &format!("(unsigned long long)sizeof({name})"), "llu");
        $plan.expect(format!("align:{name}"), align_of::<$ty>() as u64, &format!("(unsigned long long)_Alignof({name})"), "llu");
        $(
            $plan.expect(
                format!("offset:{name}.{}", $cfield),
                offset_of!($ty, $field) as u64,
                &format!("(unsigned long long)offsetof({name}, {})", $cfield),
                "llu",
            );
        )*
    }};
}

macro_rules! check_consts {
    ($plan:ident, $($name:ident),* $(,)?) => {$(
        $plan.expect(
            format!("const:{}", stringify!($name)),
            u64::from($name),
            &format!("(unsigned long long){}", stringify!($name)),
            "llu",
        );
    )*};
}

fn plan() -> Plan {
    let mut p = Plan::default();
    check_struct!(p, ze_ipc_mem_handle_t { data => "data" });
    check_struct!(p, ze_ipc_event_pool_handle_t { data => "data" });
    check_struct!(p, ze_driver_uuid_t { id => "id" });
    check_struct!(p, ze_device_uuid_t { id => "id" });
    check_struct!(p, ze_native_kernel_uuid_t { id => "id" });
    check_struct!(p, ze_driver_properties_t { stype => "stype", pNext => "pNext", uuid => "uuid", driverVersion => "driverVersion" });
    check_struct!(p, ze_device_properties_t {
        stype => "stype", pNext => "pNext", type_ => "type", vendorId => "vendorId", deviceId => "deviceId",
        flags => "flags", subdeviceId => "subdeviceId", coreClockRate => "coreClockRate",
        maxMemAllocSize => "maxMemAllocSize", maxHardwareContexts => "maxHardwareContexts",
        maxCommandQueuePriority => "maxCommandQueuePriority", numThreadsPerEU => "numThreadsPerEU",
        physicalEUSimdWidth => "physicalEUSimdWidth", numEUsPerSubslice => "numEUsPerSubslice",
        numSubslicesPerSlice => "numSubslicesPerSlice", numSlices => "numSlices",
        timerResolution => "timerResolution", timestampValidBits => "timestampValidBits",
        kernelTimestampValidBits => "kernelTimestampValidBits", uuid => "uuid", name => "name",
    });
    check_struct!(p, ze_device_compute_properties_t {
        stype => "stype", pNext => "pNext", maxTotalGroupSize => "maxTotalGroupSize",
        maxGroupSizeX => "maxGroupSizeX", maxGroupSizeY => "maxGroupSizeY", maxGroupSizeZ => "maxGroupSizeZ",
        maxGroupCountX => "maxGroupCountX", maxGroupCountY => "maxGroupCountY", maxGroupCountZ => "maxGroupCountZ",
        maxSharedLocalMemory => "maxSharedLocalMemory", numSubGroupSizes => "numSubGroupSizes",
        subGroupSizes => "subGroupSizes",
    });
    check_struct!(p, ze_device_module_properties_t {
        stype => "stype", pNext => "pNext", spirvVersionSupported => "spirvVersionSupported", flags => "flags",
        fp16flags => "fp16flags", fp32flags => "fp32flags", fp64flags => "fp64flags",
        maxArgumentsSize => "maxArgumentsSize", printfBufferSize => "printfBufferSize",
        nativeKernelSupported => "nativeKernelSupported",
    });
    check_struct!(p, ze_device_memory_properties_t {
        stype => "stype", pNext => "pNext", flags => "flags", maxClockRate => "maxClockRate",
        maxBusWidth => "maxBusWidth", totalSize => "totalSize", name => "name",
    });
    check_struct!(p, ze_context_desc_t { stype => "stype", pNext => "pNext", flags => "flags" });
    check_struct!(p, ze_command_queue_desc_t {
        stype => "stype", pNext => "pNext", ordinal => "ordinal", index => "index", flags => "flags",
        mode => "mode", priority => "priority",
    });
    check_struct!(p, ze_event_pool_desc_t { stype => "stype", pNext => "pNext", flags => "flags", count => "count" });
    check_struct!(p, ze_event_desc_t { stype => "stype", pNext => "pNext", index => "index", signal => "signal", wait => "wait" });
    check_struct!(p, ze_kernel_timestamp_data_t { kernelStart => "kernelStart", kernelEnd => "kernelEnd" });
    check_struct!(p, ze_kernel_timestamp_result_t { global => "global", context => "context" });
    check_struct!(p, ze_device_mem_alloc_desc_t { stype => "stype", pNext => "pNext", flags => "flags", ordinal => "ordinal" });
    check_struct!(p, ze_host_mem_alloc_desc_t { stype => "stype", pNext => "pNext", flags => "flags" });
    check_struct!(p, ze_memory_allocation_properties_t {
        stype => "stype", pNext => "pNext", type_ => "type", id => "id", pageSize => "pageSize",
    });
    check_struct!(p, ze_external_memory_export_desc_t { stype => "stype", pNext => "pNext", flags => "flags" });
    check_struct!(p, ze_external_memory_import_fd_t { stype => "stype", pNext => "pNext", flags => "flags", fd => "fd" });
    check_struct!(p, ze_external_memory_export_fd_t { stype => "stype", pNext => "pNext", flags => "flags", fd => "fd" });
    check_struct!(p, ze_module_constants_t {
        numConstants => "numConstants", pConstantIds => "pConstantIds", pConstantValues => "pConstantValues",
    });
    check_struct!(p, ze_module_desc_t {
        stype => "stype", pNext => "pNext", format => "format", inputSize => "inputSize",
        pInputModule => "pInputModule", pBuildFlags => "pBuildFlags", pConstants => "pConstants",
    });
    check_struct!(p, ze_kernel_desc_t { stype => "stype", pNext => "pNext", flags => "flags", pKernelName => "pKernelName" });
    check_struct!(p, ze_kernel_uuid_t { kid => "kid", mid => "mid" });
    check_struct!(p, ze_kernel_properties_t {
        stype => "stype", pNext => "pNext", numKernelArgs => "numKernelArgs",
        requiredGroupSizeX => "requiredGroupSizeX", requiredGroupSizeY => "requiredGroupSizeY",
        requiredGroupSizeZ => "requiredGroupSizeZ", requiredNumSubGroups => "requiredNumSubGroups",
        requiredSubgroupSize => "requiredSubgroupSize", maxSubgroupSize => "maxSubgroupSize",
        maxNumSubgroups => "maxNumSubgroups", localMemSize => "localMemSize",
        privateMemSize => "privateMemSize", spillMemSize => "spillMemSize", uuid => "uuid",
    });
    check_struct!(p, ze_group_count_t { groupCountX => "groupCountX", groupCountY => "groupCountY", groupCountZ => "groupCountZ" });
    check_struct!(p, ze_physical_mem_desc_t { stype => "stype", pNext => "pNext", flags => "flags", size => "size" });

    // Every ze_result_t we name.
    for (code, name) in RESULT_NAMES {
        p.expect(
            format!("const:{name}"),
            u64::from(*code),
            &format!("(unsigned long long){name}"),
            "llu",
        );
    }
    check_consts!(
        p,
        ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES,
        ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES,
        ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES,
        ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES,
        ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES,
        ZE_STRUCTURE_TYPE_CONTEXT_DESC,
        ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC,
        ZE_STRUCTURE_TYPE_EVENT_POOL_DESC,
        ZE_STRUCTURE_TYPE_EVENT_DESC,
        ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC,
        ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC,
        ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES,
        ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_DESC,
        ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_IMPORT_FD,
        ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_FD,
        ZE_STRUCTURE_TYPE_MODULE_DESC,
        ZE_STRUCTURE_TYPE_KERNEL_DESC,
        ZE_STRUCTURE_TYPE_KERNEL_PROPERTIES,
        ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC,
        ZE_API_VERSION_1_0,
        ZE_API_VERSION_1_4,
        ZE_INIT_FLAG_GPU_ONLY,
        ZE_DEVICE_TYPE_GPU,
        ZE_DEVICE_TYPE_CPU,
        ZE_DEVICE_TYPE_FPGA,
        ZE_DEVICE_TYPE_MCA,
        ZE_DEVICE_TYPE_VPU,
        ZE_DEVICE_PROPERTY_FLAG_INTEGRATED,
        ZE_DEVICE_PROPERTY_FLAG_SUBDEVICE,
        ZE_DEVICE_PROPERTY_FLAG_ONDEMANDPAGING,
        ZE_DEVICE_MODULE_FLAG_FP16,
        ZE_DEVICE_MODULE_FLAG_FP64,
        ZE_DEVICE_MODULE_FLAG_INT64_ATOMICS,
        ZE_COMMAND_QUEUE_FLAG_EXPLICIT_ONLY,
        ZE_COMMAND_QUEUE_MODE_DEFAULT,
        ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS,
        ZE_COMMAND_QUEUE_PRIORITY_NORMAL,
        ZE_EVENT_POOL_FLAG_HOST_VISIBLE,
        ZE_EVENT_POOL_FLAG_IPC,
        ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP,
        ZE_EVENT_SCOPE_FLAG_SUBDEVICE,
        ZE_EVENT_SCOPE_FLAG_DEVICE,
        ZE_EVENT_SCOPE_FLAG_HOST,
        ZE_MEMORY_TYPE_UNKNOWN,
        ZE_MEMORY_TYPE_HOST,
        ZE_MEMORY_TYPE_DEVICE,
        ZE_MEMORY_TYPE_SHARED,
        ZE_EXTERNAL_MEMORY_TYPE_FLAG_OPAQUE_FD,
        ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF,
        ZE_IPC_MEMORY_FLAG_BIAS_CACHED,
        ZE_IPC_MEMORY_FLAG_BIAS_UNCACHED,
        ZE_MODULE_FORMAT_IL_SPIRV,
        ZE_MODULE_FORMAT_NATIVE,
        ZE_MEMORY_ACCESS_ATTRIBUTE_NONE,
        ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE,
        ZE_MEMORY_ACCESS_ATTRIBUTE_READONLY,
        ZEL_HANDLE_DRIVER,
        ZEL_HANDLE_DEVICE,
        ZEL_HANDLE_CONTEXT,
        ZEL_HANDLE_EVENT,
    );
    for (name, value) in [
        ("ZE_MAX_IPC_HANDLE_SIZE", ZE_MAX_IPC_HANDLE_SIZE),
        ("ZE_MAX_DEVICE_UUID_SIZE", ZE_MAX_DEVICE_UUID_SIZE),
        ("ZE_MAX_DRIVER_UUID_SIZE", ZE_MAX_DRIVER_UUID_SIZE),
        (
            "ZE_MAX_NATIVE_KERNEL_UUID_SIZE",
            ZE_MAX_NATIVE_KERNEL_UUID_SIZE,
        ),
        ("ZE_MAX_DEVICE_NAME", ZE_MAX_DEVICE_NAME),
        ("ZE_MAX_KERNEL_UUID_SIZE", ZE_MAX_KERNEL_UUID_SIZE),
        ("ZE_MAX_MODULE_UUID_SIZE", ZE_MAX_MODULE_UUID_SIZE),
        ("ZE_SUBGROUPSIZE_COUNT", ZE_SUBGROUPSIZE_COUNT),
    ] {
        p.expect(
            format!("const:{name}"),
            value as u64,
            &format!("(unsigned long long){name}"),
            "llu",
        );
    }
    p
}

fn required() -> bool {
    // CI has the Level Zero loader and headers but no driver: it sets
    // SYCL_RS_REQUIRE_LEVEL_ZERO_LOADER=1 so that these loader-only tests cannot skip there.
    std::env::var("SYCL_RS_REQUIRE_LEVEL_ZERO_LOADER").is_ok_and(|v| v == "1")
        || std::env::var("SYCL_RS_REQUIRE_BACKENDS")
            .is_ok_and(|v| v.split(',').any(|b| b.trim() == "level_zero"))
}

fn skip(reason: &str) {
    assert!(
        !required(),
        "layout test cannot run but SYCL_RS_REQUIRE_BACKENDS names level_zero: {reason}"
    );
    eprintln!("SKIPPED: layout test against ze_api.h: {reason}");
}

#[test]
fn layouts_match_the_installed_header() {
    let include_dir =
        std::env::var("SYCL_RS_LEVEL_ZERO_INCLUDE").unwrap_or_else(|_| "/usr/include".into());
    if !Path::new(&include_dir).join("level_zero/ze_api.h").exists() {
        return skip(&format!(
            "{include_dir}/level_zero/ze_api.h not found (install libze-dev)"
        ));
    }
    let plan = plan();
    let src = format!(
        "#include <stdio.h>\n#include <stddef.h>\n#include <level_zero/ze_api.h>\n#include <level_zero/loader/ze_loader.h>\nint main(void) {{\n{}    return 0;\n}}\n",
        plan.c_body
    );
    let dir = std::env::temp_dir().join(format!("l0-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let c_path = dir.join("layout.c");
    let exe_path = dir.join("layout");
    std::fs::write(&c_path, src).unwrap();
    let compiled = Command::new("cc")
        .arg("-std=c11")
        .arg("-I")
        .arg(&include_dir)
        .arg(&c_path)
        .arg("-o")
        .arg(&exe_path)
        .output();
    let compiled = match compiled {
        Ok(out) => out,
        Err(e) => return skip(&format!("cannot run `cc`: {e}")),
    };
    assert!(
        compiled.status.success(),
        "the generated layout program did not compile:\n{}",
        String::from_utf8_lossy(&compiled.stderr)
    );
    let run = Command::new(&exe_path).output().unwrap();
    assert!(run.status.success());
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8(run.stdout).unwrap();
    let mut seen = BTreeMap::new();
    for line in stdout.lines() {
        let (key, value) = line.rsplit_once(' ').unwrap();
        seen.insert(key.to_string(), value.parse::<u64>().unwrap());
    }
    let mut mismatches = Vec::new();
    for (key, rust) in &plan.expect {
        match seen.get(key) {
            Some(c) if c == rust => {}
            Some(c) => mismatches.push(format!("{key}: Rust {rust}, C {c}")),
            None => mismatches.push(format!("{key}: not printed by the C program")),
        }
    }
    assert!(
        mismatches.is_empty(),
        "layout mismatches:\n{}",
        mismatches.join("\n")
    );
    // Guard against a plan that silently checks nothing.
    assert!(plan.expect.len() > 150, "only {} checks", plan.expect.len());
}

/// Structs and constants newer than the installed 1.4 header. Expectations are derived by hand
/// from the spec notes (level-zero-ipc.md §4.3, §4.4, §5.1) and the C layout rules for x86-64
/// (`uint32_t` aligned to 4, pointers and `uint64_t` to 8); they are not checked against any
/// header, since none on this machine declares them.
#[test]
fn newer_than_header_layouts() {
    // ze_physical_mem_properties_t { stype u32; (pad 4) void *pNext; uint64_t id; uint64_t size; }
    assert_eq!(size_of::<ze_physical_mem_properties_t>(), 32);
    assert_eq!(align_of::<ze_physical_mem_properties_t>(), 8);
    assert_eq!(offset_of!(ze_physical_mem_properties_t, pNext), 8);
    assert_eq!(offset_of!(ze_physical_mem_properties_t, id), 16);
    assert_eq!(offset_of!(ze_physical_mem_properties_t, size), 24);
    // ze_event_counter_based_desc_t { stype; (pad) const void *pNext; flags; signal; wait; (pad) }
    assert_eq!(size_of::<ze_event_counter_based_desc_t>(), 32);
    assert_eq!(align_of::<ze_event_counter_based_desc_t>(), 8);
    assert_eq!(offset_of!(ze_event_counter_based_desc_t, pNext), 8);
    assert_eq!(offset_of!(ze_event_counter_based_desc_t, flags), 16);
    assert_eq!(offset_of!(ze_event_counter_based_desc_t, signal), 20);
    assert_eq!(offset_of!(ze_event_counter_based_desc_t, wait), 24);
    // zex_counter_based_event_desc_t: same shape with signalScope/waitScope.
    assert_eq!(size_of::<zex_counter_based_event_desc_t>(), 32);
    assert_eq!(offset_of!(zex_counter_based_event_desc_t, flags), 16);
    assert_eq!(offset_of!(zex_counter_based_event_desc_t, signalScope), 20);
    assert_eq!(offset_of!(zex_counter_based_event_desc_t, waitScope), 24);
    // The 64-byte IPC handles, passed by value.
    assert_eq!(size_of::<ze_ipc_event_counter_based_handle_t>(), 64);
    assert_eq!(align_of::<ze_ipc_event_counter_based_handle_t>(), 1);
    // stype and flag values from the spec notes.
    assert_eq!(ZE_STRUCTURE_TYPE_EVENT_COUNTER_BASED_DESC, 0x0002_003a);
    assert_eq!(ZE_STRUCTURE_TYPE_PHYSICAL_MEM_PROPERTIES, 0x0002_0040);
    assert_eq!(ZEX_STRUCTURE_COUNTER_BASED_EVENT_DESC, 0x0003_001c);
    assert_eq!(ZE_COMMAND_QUEUE_FLAG_IN_ORDER, 2);
    assert_eq!(
        [
            ZE_EVENT_COUNTER_BASED_FLAG_IMMEDIATE,
            ZE_EVENT_COUNTER_BASED_FLAG_NON_IMMEDIATE,
            ZE_EVENT_COUNTER_BASED_FLAG_HOST_VISIBLE,
            ZE_EVENT_COUNTER_BASED_FLAG_IPC,
            ZE_EVENT_COUNTER_BASED_FLAG_DEVICE_TIMESTAMP,
            ZE_EVENT_COUNTER_BASED_FLAG_HOST_TIMESTAMP,
        ],
        [1, 2, 4, 8, 16, 32]
    );
    assert_eq!(
        [
            ZEX_COUNTER_BASED_EVENT_FLAG_IMMEDIATE,
            ZEX_COUNTER_BASED_EVENT_FLAG_NON_IMMEDIATE,
            ZEX_COUNTER_BASED_EVENT_FLAG_HOST_VISIBLE,
            ZEX_COUNTER_BASED_EVENT_FLAG_IPC,
        ],
        [1, 2, 4, 8]
    );
}

/// The loader opens; on this machine (no Intel GPU) `zeInit` reports that there is no driver,
/// and nothing crashes. Skips if the loader library is not installed.
#[test]
fn loader_loads_and_resolves_required_entry_points() {
    let loader = match Loader::load() {
        Ok(l) => l,
        Err(e) => {
            assert!(!required(), "libze_loader.so.1 must load: {e}");
            eprintln!("SKIPPED: {e}");
            return;
        }
    };
    // The 1.8 loader has the loader translate helper but none of the 1.6+/1.15 entry points.
    let missing = loader.missing_optional();
    eprintln!("optional entry points missing: {missing:?}");
    // SAFETY: zeInit takes flags by value; any value is allowed.
    let r = unsafe { (loader.zeInit)(0) };
    let mut count = 0u32;
    // SAFETY: count is a valid out-pointer; a null driver array asks for the count only.
    let r2 = unsafe { (loader.zeDriverGet)(&mut count, std::ptr::null_mut()) };
    eprintln!(
        "zeInit -> {r:#x} ({:?}), zeDriverGet -> {r2:#x}, count {count}",
        result_name(r)
    );
    if r == ZE_RESULT_SUCCESS && r2 == ZE_RESULT_SUCCESS {
        // A machine with a Level Zero driver.
        assert!(count > 0 || !required());
    } else {
        assert_eq!(count, 0);
    }
}
