//! `sycl-ls`: lists platforms and devices, like DPC++'s tool. `--verbose` adds device info and
//! aspects; `ONEAPI_DEVICE_SELECTOR` marks which devices a program would see.

use std::process::ExitCode;

fn main() -> ExitCode {
    let verbose = std::env::args()
        .skip(1)
        .any(|a| a == "--verbose" || a == "-v");
    if let Some(bad) = std::env::args()
        .skip(1)
        .find(|a| a != "--verbose" && a != "-v")
    {
        eprintln!("sycl-ls: unknown argument `{bad}` (usage: sycl-ls [--verbose])");
        return ExitCode::from(2);
    }
    let platforms = sycl::Platform::all();
    let mut per_backend = std::collections::HashMap::new();
    for platform in &platforms {
        for device in platform.devices() {
            let index = per_backend.entry(device.backend()).or_insert(0usize);
            println!(
                "[{}:{}:{}] {}, {} {} [{}]",
                device.backend(),
                device.device_type(),
                index,
                platform.name(),
                device.name(),
                device.version(),
                device.driver_version()
            );
            *index += 1;
        }
    }
    if verbose {
        println!();
        println!("Platforms: {}", platforms.len());
        for (p, platform) in platforms.iter().enumerate() {
            println!("Platform [#{}]:", p + 1);
            println!("    Version  : {}", platform.version());
            println!("    Name     : {}", platform.name());
            println!("    Vendor   : {}", platform.vendor());
            println!("    Backend  : {}", platform.backend());
            let devices = platform.devices();
            println!("    Devices  : {}", devices.len());
            for (d, device) in devices.iter().enumerate() {
                println!("        Device [#{d}]:");
                println!("        Type              : {}", device.device_type());
                println!("        Version           : {}", device.version());
                println!("        Name              : {}", device.name());
                println!("        Vendor            : {}", device.vendor());
                println!("        Driver            : {}", device.driver_version());
                println!("        Compute units     : {}", device.max_compute_units());
                println!(
                    "        Global memory     : {} MiB",
                    device.global_mem_size() >> 20
                );
                println!(
                    "        Local memory      : {} KiB",
                    device.local_mem_size() >> 10
                );
                println!(
                    "        Max work-group    : {}",
                    device.max_work_group_size()
                );
                let sizes: Vec<String> = device
                    .sub_group_sizes()
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
                println!(
                    "        Sub-group sizes   : {}",
                    if sizes.is_empty() {
                        "(not reported)".to_owned()
                    } else {
                        sizes.join(" ")
                    }
                );
                match device.uuid() {
                    Some(u) => println!(
                        "        UUID              : {}",
                        u.iter().map(|b| format!("{b:02x}")).collect::<String>()
                    ),
                    None => println!("        UUID              : (none)"),
                }
                let aspects: Vec<String> = device.aspects().iter().map(|a| a.to_string()).collect();
                println!("        Aspects           : {}", aspects.join(" "));
            }
        }
        let failures = sycl::backend_load_failures();
        if !failures.is_empty() {
            println!();
            println!("Backends without platforms:");
            for f in failures {
                println!("    {}: {}", f.backend, f.reason);
            }
        }
    }
    if platforms.is_empty() {
        eprintln!("sycl-ls: no platform found");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
