/*
 * A mock Level Zero *driver* for sycl-rs tests on machines without an Intel GPU.
 *
 * The real Level Zero loader (libze_loader.so.1) loads it through ZE_ENABLE_ALT_DRIVERS, so
 * the backend under test calls the loader exactly as on real hardware; only what sits behind
 * the loader is fake. It models one GPU whose "device memory" is host memory:
 *
 *  - memory (device, host, shared) is memfd-backed and mmap'ed MAP_SHARED; zeMemGetIpcHandle
 *    puts a dup of the memfd in bytes 0..3 of the handle (as the Intel driver puts its
 *    DMA-BUF fd there) and zeMemOpenIpcHandle maps the fd found in bytes 0..3 again, so an
 *    opened pointer aliases the exported memory (also across processes);
 *  - command lists execute each command synchronously at append time after waiting for its
 *    wait events (events signalled from other threads are waited for);
 *  - events are flags with kernel timestamps from a global tick counter; event-pool IPC works
 *    within one process;
 *  - modules parse OpEntryPoint names from SPIR-V; a kernel named `fail_build` fails to build
 *    with a build log; kernels `iota_u32(u32 *out, u32 base)`, `launch_probe(u32 *out)` and
 *    `local_probe(u32 *out, local)` run on the host;
 *  - virtual memory uses PROT_NONE reservations, memfd physical memory and MAP_FIXED mappings.
 *
 * Everything here is written from the Level Zero spec as the backend understands it, so it
 * proves the wiring (handles, structs, call order, fd plumbing), not the behaviour of Intel's
 * driver. Written for sycl-rs; not derived from any driver source.
 */
#define _GNU_SOURCE
#include <level_zero/ze_api.h>
#include <level_zero/ze_ddi.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_ALLOCS 4096

static int g_driver_obj, g_device_obj;
static atomic_ullong g_tick = 1;

/* ---------------------------------------------------------------- allocations */
typedef struct {
    char *base;
    size_t size;
    ze_memory_type_t type;
    int fd;        /* memfd backing the allocation */
    int opened;    /* mapping made by zeMemOpenIpcHandle */
    int used;
} alloc_t;
static alloc_t g_allocs[MAX_ALLOCS];

static alloc_t *find_alloc(const void *p) {
    for (int i = 0; i < MAX_ALLOCS; i++) {
        alloc_t *a = &g_allocs[i];
        if (a->used && (const char *)p >= a->base && (const char *)p < a->base + a->size) return a;
    }
    return NULL;
}

static ze_result_t new_alloc(ze_memory_type_t type, size_t size, size_t align, void **out) {
    if (!out || size == 0) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (align > 4096) return ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT;
    if (size > ((size_t)1 << 34)) return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
    for (int i = 0; i < MAX_ALLOCS; i++) {
        alloc_t *a = &g_allocs[i];
        if (a->used) continue;
        int fd = memfd_create("mock-ze-mem", MFD_CLOEXEC);
        if (fd < 0 || ftruncate(fd, (off_t)size) != 0) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) { close(fd); return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY; }
        *a = (alloc_t){ .base = p, .size = size, .type = type, .fd = fd, .opened = 0, .used = 1 };
        *out = p;
        return ZE_RESULT_SUCCESS;
    }
    return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
}

/* ---------------------------------------------------------------- events */
typedef struct { atomic_int signalled; uint64_t start, end; int counter_based; } mock_event_t;
typedef struct { uint32_t count; uint32_t flags; mock_event_t *events; int view; } mock_pool_t;

static void signal_ev(ze_event_handle_t h) {
    if (!h) return;
    mock_event_t *e = (mock_event_t *)h;
    e->start = atomic_fetch_add(&g_tick, 1);
    e->end = atomic_fetch_add(&g_tick, 3) + 2;
    atomic_store(&e->signalled, 1);
}

static void sleep_us(long us) { struct timespec t = { 0, us * 1000 }; nanosleep(&t, NULL); }

static ze_result_t wait_events(uint32_t n, ze_event_handle_t *evs) {
    if (n && !evs) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    for (uint32_t i = 0; i < n; i++) {
        if (!evs[i]) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
        while (!atomic_load(&((mock_event_t *)evs[i])->signalled)) sleep_us(50);
    }
    return ZE_RESULT_SUCCESS;
}

/* ---------------------------------------------------------------- global, driver, device */
/* MOCK_ZE_API_MINOR (default 4) sets the reported API version 1.x; from 1.7 immediate lists
 * accept ZE_COMMAND_QUEUE_FLAG_IN_ORDER. MOCK_ZE_ZEX=1 offers the zexCounterBasedEvent*
 * extension functions through zeDriverGetExtensionFunctionAddress. */
static int g_api_minor = 4, g_zex = 0;
static ze_result_t m_init(ze_init_flags_t f) {
    (void)f;
    const char *v = getenv("MOCK_ZE_API_MINOR");
    if (v) g_api_minor = atoi(v);
    g_zex = getenv("MOCK_ZE_ZEX") != NULL;
    return ZE_RESULT_SUCCESS;
}

static ze_result_t m_driver_get(uint32_t *count, ze_driver_handle_t *d) {
    if (!count) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (*count == 0 || !d) { *count = 1; return ZE_RESULT_SUCCESS; }
    d[0] = (ze_driver_handle_t)&g_driver_obj;
    *count = 1;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_driver_api(ze_driver_handle_t d, ze_api_version_t *v) { (void)d; *v = ZE_MAKE_VERSION(1, g_api_minor); return ZE_RESULT_SUCCESS; }
static ze_result_t m_driver_props(ze_driver_handle_t d, ze_driver_properties_t *p) {
    (void)d;
    if (p->stype != ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    memset(p->uuid.id, 0x11, sizeof p->uuid.id);
    p->driverVersion = 0x00012345;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t zex_create2(ze_context_handle_t, ze_device_handle_t, const void *, ze_event_handle_t *);
static ze_result_t zex_get_ipc(ze_event_handle_t, ze_ipc_event_pool_handle_t *);
static ze_result_t zex_open_ipc(ze_context_handle_t, ze_ipc_event_pool_handle_t, ze_event_handle_t *);
static ze_result_t zex_close_ipc(ze_event_handle_t);
static ze_result_t m_driver_ext(ze_driver_handle_t d, const char *name, void **f) {
    (void)d; *f = NULL;
    if (!g_zex) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (!strcmp(name, "zexCounterBasedEventCreate2")) *f = (void *)zex_create2;
    else if (!strcmp(name, "zexCounterBasedEventGetIpcHandle")) *f = (void *)zex_get_ipc;
    else if (!strcmp(name, "zexCounterBasedEventOpenIpcHandle")) *f = (void *)zex_open_ipc;
    else if (!strcmp(name, "zexCounterBasedEventCloseIpcHandle")) *f = (void *)zex_close_ipc;
    return *f ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_INVALID_ARGUMENT;
}

static ze_result_t m_device_get(ze_driver_handle_t d, uint32_t *count, ze_device_handle_t *devs) {
    (void)d;
    if (*count == 0 || !devs) { *count = 1; return ZE_RESULT_SUCCESS; }
    devs[0] = (ze_device_handle_t)&g_device_obj;
    *count = 1;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_device_props(ze_device_handle_t h, ze_device_properties_t *p) {
    (void)h;
    if (p->stype != ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    p->type = ZE_DEVICE_TYPE_GPU;
    p->vendorId = 0x8086;
    p->deviceId = 0x1234;
    p->maxMemAllocSize = (uint64_t)1 << 32;
    p->numSlices = 2; p->numSubslicesPerSlice = 4; p->numEUsPerSubslice = 8;
    p->timerResolution = 10; /* ns per cycle */
    p->kernelTimestampValidBits = 32;
    p->timestampValidBits = 64;
    memcpy(p->uuid.id, "mock-gpu-uuid-01", 16);
    snprintf(p->name, sizeof p->name, "sycl-rs mock GPU");
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_device_compute(ze_device_handle_t h, ze_device_compute_properties_t *p) {
    (void)h;
    p->maxTotalGroupSize = 1024; p->maxGroupSizeX = 1024; p->maxGroupSizeY = 1024; p->maxGroupSizeZ = 64;
    p->maxGroupCountX = p->maxGroupCountY = p->maxGroupCountZ = 0xffffffffu;
    p->maxSharedLocalMemory = 65536;
    p->numSubGroupSizes = 1; p->subGroupSizes[0] = 16;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_device_module(ze_device_handle_t h, ze_device_module_properties_t *p) {
    (void)h;
    p->spirvVersionSupported = ZE_MAKE_VERSION(1, 2);
    p->flags = ZE_DEVICE_MODULE_FLAG_FP16 | ZE_DEVICE_MODULE_FLAG_INT64_ATOMICS; /* no fp64 */
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_device_memory(ze_device_handle_t h, uint32_t *count, ze_device_memory_properties_t *p) {
    (void)h;
    if (*count == 0 || !p) { *count = 1; return ZE_RESULT_SUCCESS; }
    p[0].totalSize = (uint64_t)8 << 30;
    *count = 1;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_can_access_peer(ze_device_handle_t a, ze_device_handle_t b, ze_bool_t *v) { *v = a == b; return ZE_RESULT_SUCCESS; }

/* ---------------------------------------------------------------- context, command list */
static ze_result_t m_ctx_create(ze_driver_handle_t d, const ze_context_desc_t *desc, ze_context_handle_t *out) {
    (void)d;
    if (!desc || desc->stype != ZE_STRUCTURE_TYPE_CONTEXT_DESC) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    *out = (ze_context_handle_t)malloc(16);
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_ctx_destroy(ze_context_handle_t c) { free(c); return ZE_RESULT_SUCCESS; }

static ze_result_t m_list_create_imm(ze_context_handle_t c, ze_device_handle_t d, const ze_command_queue_desc_t *desc, ze_command_list_handle_t *out) {
    (void)c; (void)d;
    if (!desc || desc->stype != ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    uint32_t allowed = ZE_COMMAND_QUEUE_FLAG_EXPLICIT_ONLY | (g_api_minor >= 7 ? 2u /* IN_ORDER, spec 1.7 */ : 0u);
    if (desc->flags & ~allowed) return ZE_RESULT_ERROR_INVALID_ENUMERATION;
    int *list = malloc(sizeof(int));
    *list = (desc->flags & 2u) != 0;
    *out = (ze_command_list_handle_t)list;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_list_destroy(ze_command_list_handle_t l) { free(l); return ZE_RESULT_SUCCESS; }

static ze_result_t m_copy(ze_command_list_handle_t l, void *dst, const void *src, size_t n, ze_event_handle_t sig, uint32_t nw, ze_event_handle_t *w) {
    (void)l;
    ze_result_t r = wait_events(nw, w);
    if (r) return r;
    memmove(dst, src, n);
    signal_ev(sig);
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_fill(ze_command_list_handle_t l, void *dst, const void *pat, size_t psz, size_t n, ze_event_handle_t sig, uint32_t nw, ze_event_handle_t *w) {
    (void)l;
    if (psz == 0 || n % psz) return ZE_RESULT_ERROR_INVALID_SIZE;
    ze_result_t r = wait_events(nw, w);
    if (r) return r;
    for (size_t i = 0; i < n; i += psz) memcpy((char *)dst + i, pat, psz);
    signal_ev(sig);
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_prefetch(ze_command_list_handle_t l, const void *p, size_t n) { (void)l; (void)p; (void)n; return ZE_RESULT_SUCCESS; }
/* Counter-based events may only be signalled from in-order lists. */
static int bad_signal(ze_command_list_handle_t l, ze_event_handle_t sig) {
    return sig && ((mock_event_t *)sig)->counter_based && !*(int *)l;
}
static ze_result_t m_barrier(ze_command_list_handle_t l, ze_event_handle_t sig, uint32_t nw, ze_event_handle_t *w) {
    if (bad_signal(l, sig)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    ze_result_t r = wait_events(nw, w);
    if (r) return r;
    signal_ev(sig);
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_signal(ze_command_list_handle_t l, ze_event_handle_t e) { if (bad_signal(l, e)) return ZE_RESULT_ERROR_INVALID_ARGUMENT; signal_ev(e); return ZE_RESULT_SUCCESS; }
static ze_result_t m_wait(ze_command_list_handle_t l, uint32_t n, ze_event_handle_t *w) { (void)l; return wait_events(n, w); }

/* ---------------------------------------------------------------- event pools and events */
static ze_result_t m_pool_create(ze_context_handle_t c, const ze_event_pool_desc_t *d, uint32_t nd, ze_device_handle_t *devs, ze_event_pool_handle_t *out) {
    (void)c; (void)nd; (void)devs;
    if (!d || d->stype != ZE_STRUCTURE_TYPE_EVENT_POOL_DESC || d->count == 0) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    mock_pool_t *p = calloc(1, sizeof *p);
    p->count = d->count; p->flags = d->flags;
    p->events = calloc(d->count, sizeof(mock_event_t));
    *out = (ze_event_pool_handle_t)p;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_pool_destroy(ze_event_pool_handle_t h) {
    mock_pool_t *p = (mock_pool_t *)h;
    if (p->view) return ZE_RESULT_ERROR_INVALID_ARGUMENT; /* opened pools are closed, not destroyed */
    free(p->events); free(p);
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_pool_get_ipc(ze_event_pool_handle_t h, ze_ipc_event_pool_handle_t *out) {
    mock_pool_t *p = (mock_pool_t *)h;
    if (!(p->flags & ZE_EVENT_POOL_FLAG_IPC)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    pid_t pid = getpid();
    memcpy(out->data, &p, sizeof p);
    memcpy(out->data + 8, &pid, sizeof pid);
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_pool_open_ipc(ze_context_handle_t c, ze_ipc_event_pool_handle_t h, ze_event_pool_handle_t *out) {
    (void)c;
    mock_pool_t *orig; pid_t pid;
    memcpy(&orig, h.data, sizeof orig);
    memcpy(&pid, h.data + 8, sizeof pid);
    if (pid != getpid()) return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE; /* mock: same process only */
    mock_pool_t *v = calloc(1, sizeof *v);
    *v = *orig; v->view = 1;
    *out = (ze_event_pool_handle_t)v;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_pool_close_ipc(ze_event_pool_handle_t h) {
    mock_pool_t *p = (mock_pool_t *)h;
    if (!p->view) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    free(p);
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_event_create(ze_event_pool_handle_t h, const ze_event_desc_t *d, ze_event_handle_t *out) {
    mock_pool_t *p = (mock_pool_t *)h;
    if (!d || d->stype != ZE_STRUCTURE_TYPE_EVENT_DESC || d->index >= p->count) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    *out = (ze_event_handle_t)&p->events[d->index];
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_event_destroy(ze_event_handle_t e) { (void)e; return ZE_RESULT_SUCCESS; }
static ze_result_t m_event_signal(ze_event_handle_t e) { if (((mock_event_t *)e)->counter_based) return ZE_RESULT_ERROR_INVALID_ARGUMENT; signal_ev(e); return ZE_RESULT_SUCCESS; }
static ze_result_t m_event_reset(ze_event_handle_t e) {
    mock_event_t *m = (mock_event_t *)e;
    if (m->counter_based) return ZE_RESULT_ERROR_INVALID_ARGUMENT; /* no host reset of counter-based events */
    atomic_store(&m->signalled, 0);
    return ZE_RESULT_SUCCESS;
}

/* zex counter-based events (compute-runtime extension shape): start complete; a signal from an
 * in-order list replaces the state; IPC handles name the event within this process. */
typedef struct { uint32_t stype; const void *pNext; uint32_t flags, signalScope, waitScope; } zex_desc_t;
static ze_result_t zex_create2(ze_context_handle_t c, ze_device_handle_t d, const void *pdesc, ze_event_handle_t *out) {
    (void)c; (void)d;
    const zex_desc_t *desc = pdesc;
    if (!desc || desc->stype != 0x0003001cu) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (desc->flags & (3u << 4)) return ZE_RESULT_ERROR_INVALID_ARGUMENT; /* timestamps */
    mock_event_t *e = calloc(1, sizeof *e);
    e->counter_based = (int)desc->flags | 0x100; /* remember the flags, non-zero */
    atomic_store(&e->signalled, 1);
    *out = (ze_event_handle_t)e;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t zex_get_ipc(ze_event_handle_t h, ze_ipc_event_pool_handle_t *out) {
    mock_event_t *e = (mock_event_t *)h;
    if (!e->counter_based || !(e->counter_based & 8 /* IPC */)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    pid_t pid = getpid();
    memcpy(out->data, &e, sizeof e);
    memcpy(out->data + 8, &pid, sizeof pid);
    memcpy(out->data + 16, "MOCKCBE", 8);
    return ZE_RESULT_SUCCESS;
}
static ze_result_t zex_open_ipc(ze_context_handle_t c, ze_ipc_event_pool_handle_t h, ze_event_handle_t *out) {
    (void)c;
    mock_event_t *e; pid_t pid;
    if (memcmp(h.data + 16, "MOCKCBE", 8)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    memcpy(&e, h.data, sizeof e); memcpy(&pid, h.data + 8, sizeof pid);
    if (pid != getpid()) return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
    *out = (ze_event_handle_t)e; /* same process: the same event object */
    return ZE_RESULT_SUCCESS;
}
static ze_result_t zex_close_ipc(ze_event_handle_t h) {
    return ((mock_event_t *)h)->counter_based ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_INVALID_ARGUMENT;
}
static ze_result_t m_event_query(ze_event_handle_t e) {
    return atomic_load(&((mock_event_t *)e)->signalled) ? ZE_RESULT_SUCCESS : ZE_RESULT_NOT_READY;
}
static ze_result_t m_event_sync(ze_event_handle_t e, uint64_t timeout) {
    struct timespec t0; clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (atomic_load(&((mock_event_t *)e)->signalled)) return ZE_RESULT_SUCCESS;
        struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
        uint64_t el = (uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)(t.tv_nsec - t0.tv_nsec);
        if (timeout != UINT64_MAX && el >= timeout) return ZE_RESULT_NOT_READY;
        sleep_us(50);
    }
}
static ze_result_t m_event_ts(ze_event_handle_t e, ze_kernel_timestamp_result_t *r) {
    mock_event_t *m = (mock_event_t *)e;
    if (!atomic_load(&m->signalled)) return ZE_RESULT_NOT_READY;
    r->global.kernelStart = m->start; r->global.kernelEnd = m->end;
    r->context = r->global;
    return ZE_RESULT_SUCCESS;
}

/* ---------------------------------------------------------------- memory */
static ze_result_t m_alloc_device(ze_context_handle_t c, const ze_device_mem_alloc_desc_t *d, size_t n, size_t a, ze_device_handle_t dev, void **out) {
    (void)c; (void)dev;
    if (!d || d->stype != ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    return new_alloc(ZE_MEMORY_TYPE_DEVICE, n, a, out);
}
static ze_result_t m_alloc_host(ze_context_handle_t c, const ze_host_mem_alloc_desc_t *d, size_t n, size_t a, void **out) {
    (void)c;
    if (!d || d->stype != ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    return new_alloc(ZE_MEMORY_TYPE_HOST, n, a, out);
}
static ze_result_t m_alloc_shared(ze_context_handle_t c, const ze_device_mem_alloc_desc_t *d, const ze_host_mem_alloc_desc_t *h, size_t n, size_t a, ze_device_handle_t dev, void **out) {
    (void)c; (void)dev;
    if (!d || !h || d->stype != ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC || h->stype != ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    return new_alloc(ZE_MEMORY_TYPE_SHARED, n, a, out);
}
static ze_result_t m_free(ze_context_handle_t c, void *p) {
    (void)c;
    alloc_t *a = find_alloc(p);
    if (!a || a->base != p || a->opened) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    munmap(a->base, a->size); close(a->fd); a->used = 0;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_alloc_props(ze_context_handle_t c, const void *p, ze_memory_allocation_properties_t *props, ze_device_handle_t *dev) {
    (void)c;
    if (props->stype != ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    alloc_t *a = find_alloc(p);
    props->type = a ? a->type : ZE_MEMORY_TYPE_UNKNOWN;
    props->id = a ? (uint64_t)(a - g_allocs) + 1 : 0;
    props->pageSize = 4096;
    if (dev) *dev = (a && a->type != ZE_MEMORY_TYPE_HOST) ? (ze_device_handle_t)&g_device_obj : NULL;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_addr_range(ze_context_handle_t c, const void *p, void **base, size_t *size) {
    (void)c;
    alloc_t *a = find_alloc(p);
    if (!a) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (base) *base = a->base;
    if (size) *size = a->size;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_get_ipc(ze_context_handle_t c, const void *p, ze_ipc_mem_handle_t *h) {
    (void)c;
    alloc_t *a = find_alloc(p);
    if (!a || a->base != p || a->type != ZE_MEMORY_TYPE_DEVICE) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    /* Like the Intel driver: a descriptor valid in this process in bytes 0..3. The mock hands
     * out the allocation's own memfd (it stays open until zeMemFree). */
    memset(h, 0, sizeof *h);
    int fd = a->fd;
    uint64_t size = a->size;
    memcpy(h->data, &fd, 4);
    memcpy(h->data + 8, &size, 8);
    memcpy(h->data + 16, "MOCKIPC", 8);
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_open_ipc(ze_context_handle_t c, ze_device_handle_t d, ze_ipc_mem_handle_t h, ze_ipc_memory_flags_t f, void **out) {
    (void)c; (void)d;
    if (f & ~3u) return ZE_RESULT_ERROR_INVALID_ENUMERATION;
    if (memcmp(h.data + 16, "MOCKIPC", 8) != 0) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    int fd; uint64_t size;
    memcpy(&fd, h.data, 4); memcpy(&size, h.data + 8, 8);
    for (int i = 0; i < MAX_ALLOCS; i++) {
        alloc_t *a = &g_allocs[i];
        if (a->used) continue;
        int own = dup(fd); /* the caller may close its descriptor right after this call */
        if (own < 0) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, own, 0);
        if (p == MAP_FAILED) { close(own); return ZE_RESULT_ERROR_INVALID_ARGUMENT; }
        *a = (alloc_t){ .base = p, .size = size, .type = ZE_MEMORY_TYPE_DEVICE, .fd = own, .opened = 1, .used = 1 };
        *out = p;
        return ZE_RESULT_SUCCESS;
    }
    return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
}
static ze_result_t m_close_ipc(ze_context_handle_t c, const void *p) {
    (void)c;
    alloc_t *a = find_alloc(p);
    if (!a || a->base != p || !a->opened) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    munmap(a->base, a->size); close(a->fd); a->used = 0;
    return ZE_RESULT_SUCCESS;
}

/* ---------------------------------------------------------------- modules and kernels */
#define MOCK_MAX_ARGS 32
/* Per entry point: its name, and its parameter count where the module declares the function
   (a real module; the tests' stub modules have no functions: -1, see nargs_of). */
typedef struct { int nnames; char names[16][64]; int nparams[16]; } mock_module_t;
typedef struct { char log[128]; } mock_log_t;
typedef struct { char name[64]; int nparams; uint32_t gs[3]; size_t argsz[MOCK_MAX_ARGS]; unsigned char argv[MOCK_MAX_ARGS][16]; int argnull[MOCK_MAX_ARGS]; } mock_kernel_t;

/* What the last zeModuleCreate received and the last launch of a kernel with declared
   parameters set, for the tests (mock_ze_last_module, mock_ze_last_launch). */
static unsigned char *g_last_module;
static size_t g_last_module_len;
static mock_kernel_t g_last_launch;
static int g_last_launch_nargs;

static ze_result_t m_module_create(ze_context_handle_t c, ze_device_handle_t d, const ze_module_desc_t *desc, ze_module_handle_t *out, ze_module_build_log_handle_t *log) {
    (void)c; (void)d;
    if (log) *log = NULL;
    if (!desc || desc->stype != ZE_STRUCTURE_TYPE_MODULE_DESC || desc->format != ZE_MODULE_FORMAT_IL_SPIRV) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    const uint32_t *w = (const uint32_t *)desc->pInputModule;
    size_t nw = desc->inputSize / 4;
    if (nw < 5 || w[0] != 0x07230203u) return ZE_RESULT_ERROR_INVALID_NATIVE_BINARY;
    mock_module_t *m = calloc(1, sizeof *m);
    free(g_last_module);
    g_last_module = malloc(desc->inputSize);
    memcpy(g_last_module, desc->pInputModule, desc->inputSize);
    g_last_module_len = desc->inputSize;
    int fail = 0;
    uint32_t entry_fn[16];
    for (size_t i = 5; i < nw;) {
        uint32_t count = w[i] >> 16, op = w[i] & 0xffff;
        if (count == 0 || i + count > nw) break;
        if (op == 15 /* OpEntryPoint */ && count > 3 && m->nnames < 16) {
            size_t len = (count - 3) * 4;
            if (len > 63) len = 63;
            memcpy(m->names[m->nnames], &w[i + 3], len);
            m->names[m->nnames][63] = 0;
            if (strcmp(m->names[m->nnames], "fail_build") == 0) fail = 1;
            entry_fn[m->nnames] = w[i + 2];
            m->nparams[m->nnames] = -1;
            m->nnames++;
        }
        i += count;
    }
    /* The entry points' parameters: the OpFunctionParameters after their OpFunction. */
    int current = -1;
    for (size_t i = 5; i < nw;) {
        uint32_t count = w[i] >> 16, op = w[i] & 0xffff;
        if (count == 0 || i + count > nw) break;
        if (op == 54 /* OpFunction */ && count > 2) {
            current = -1;
            for (int k = 0; k < m->nnames; k++)
                if (entry_fn[k] == w[i + 2]) { current = k; m->nparams[k] = 0; }
        } else if (op == 55 /* OpFunctionParameter */ && current >= 0) {
            m->nparams[current]++;
        } else if (op != 55) {
            current = -1;
        }
        i += count;
    }
    if (fail) {
        free(m);
        if (log) {
            mock_log_t *l = calloc(1, sizeof *l);
            snprintf(l->log, sizeof l->log, "mock: kernel fail_build does not compile (flags: %s)", desc->pBuildFlags ? desc->pBuildFlags : "");
            *log = (ze_module_build_log_handle_t)l;
        }
        return ZE_RESULT_ERROR_MODULE_BUILD_FAILURE;
    }
    if (log) { *log = (ze_module_build_log_handle_t)calloc(1, sizeof(mock_log_t)); }
    *out = (ze_module_handle_t)m;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_module_destroy(ze_module_handle_t m) { free(m); return ZE_RESULT_SUCCESS; }
static ze_result_t m_log_get(ze_module_build_log_handle_t h, size_t *size, char *buf) {
    mock_log_t *l = (mock_log_t *)h;
    size_t n = strlen(l->log) + 1;
    if (!buf) { *size = n; return ZE_RESULT_SUCCESS; }
    if (*size < n) return ZE_RESULT_ERROR_INVALID_SIZE;
    memcpy(buf, l->log, n);
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_log_destroy(ze_module_build_log_handle_t h) { free(h); return ZE_RESULT_SUCCESS; }
static ze_result_t m_kernel_names(ze_module_handle_t h, uint32_t *count, const char **names) {
    mock_module_t *m = (mock_module_t *)h;
    if (*count == 0 || !names) { *count = (uint32_t)m->nnames; return ZE_RESULT_SUCCESS; }
    uint32_t n = *count < (uint32_t)m->nnames ? *count : (uint32_t)m->nnames;
    for (uint32_t i = 0; i < n; i++) names[i] = m->names[i];
    *count = n;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_kernel_create(ze_module_handle_t h, const ze_kernel_desc_t *d, ze_kernel_handle_t *out) {
    mock_module_t *m = (mock_module_t *)h;
    if (!d || d->stype != ZE_STRUCTURE_TYPE_KERNEL_DESC) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < m->nnames; i++) {
        if (strcmp(m->names[i], d->pKernelName) == 0) {
            mock_kernel_t *k = calloc(1, sizeof *k);
            snprintf(k->name, sizeof k->name, "%s", d->pKernelName);
            k->nparams = m->nparams[i];
            k->gs[0] = k->gs[1] = k->gs[2] = 1;
            *out = (ze_kernel_handle_t)k;
            return ZE_RESULT_SUCCESS;
        }
    }
    return ZE_RESULT_ERROR_INVALID_KERNEL_NAME;
}
static ze_result_t m_kernel_destroy(ze_kernel_handle_t k) { free(k); return ZE_RESULT_SUCCESS; }
static uint32_t nargs_of(const mock_kernel_t *k) {
    if (k->nparams >= 0) return k->nparams < MOCK_MAX_ARGS ? (uint32_t)k->nparams : MOCK_MAX_ARGS;
    if (!strcmp(k->name, "iota_u32") || !strcmp(k->name, "local_probe")) return 2;
    if (!strcmp(k->name, "launch_probe")) return 1;
    return 0;
}
static ze_result_t m_kernel_arg(ze_kernel_handle_t h, uint32_t i, size_t sz, const void *v) {
    mock_kernel_t *k = (mock_kernel_t *)h;
    if (i >= nargs_of(k)) return ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX;
    if (v && sz > 16) return ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE;
    k->argsz[i] = sz; k->argnull[i] = v == NULL;
    if (v) memcpy(k->argv[i], v, sz);
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_group_size(ze_kernel_handle_t h, uint32_t x, uint32_t y, uint32_t z) {
    mock_kernel_t *k = (mock_kernel_t *)h;
    if (!x || !y || !z || (uint64_t)x * y * z > 1024) return ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION;
    k->gs[0] = x; k->gs[1] = y; k->gs[2] = z;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_suggest(ze_kernel_handle_t h, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t *x, uint32_t *y, uint32_t *z) {
    (void)h; (void)gy; (void)gz;
    uint32_t s = 64;
    while (s > 1 && gx % s) s /= 2;
    *x = s; *y = 1; *z = 1;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_kernel_props(ze_kernel_handle_t h, ze_kernel_properties_t *p) {
    mock_kernel_t *k = (mock_kernel_t *)h;
    if (p->stype != ZE_STRUCTURE_TYPE_KERNEL_PROPERTIES) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    p->numKernelArgs = nargs_of(k);
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_launch(ze_command_list_handle_t l, ze_kernel_handle_t h, const ze_group_count_t *gc, ze_event_handle_t sig, uint32_t nw, ze_event_handle_t *w) {
    (void)l;
    mock_kernel_t *k = (mock_kernel_t *)h;
    ze_result_t r = wait_events(nw, w);
    if (r) return r;
    if (k->nparams >= 0) {
        /* A real module's kernel: not run; what it was given is kept for the tests. */
        g_last_launch = *k;
        g_last_launch_nargs = (int)nargs_of(k);
        signal_ev(sig);
        return ZE_RESULT_SUCCESS;
    }
    uint32_t *out;
    memcpy(&out, k->argv[0], sizeof out);
    if (!strcmp(k->name, "iota_u32")) {
        uint32_t base; memcpy(&base, k->argv[1], 4);
        uint64_t n = (uint64_t)gc->groupCountX * k->gs[0] * gc->groupCountY * k->gs[1] * gc->groupCountZ * k->gs[2];
        for (uint64_t i = 0; i < n; i++) out[i] = base + (uint32_t)i;
    } else if (!strcmp(k->name, "launch_probe")) {
        out[0] = k->gs[0]; out[1] = k->gs[1]; out[2] = k->gs[2];
        out[3] = gc->groupCountX; out[4] = gc->groupCountY; out[5] = gc->groupCountZ;
    } else if (!strcmp(k->name, "local_probe")) {
        out[0] = (uint32_t)k->argsz[1]; out[1] = (uint32_t)k->argnull[1];
    }
    signal_ev(sig);
    return ZE_RESULT_SUCCESS;
}

/* ---------------------------------------------------------------- virtual and physical memory */
typedef struct { int fd; size_t size; } mock_phys_t;
typedef struct { char *p; size_t n; ze_memory_access_attribute_t a; int used; } mapping_t;
static mapping_t g_maps[256];

static int prot_of(ze_memory_access_attribute_t a) {
    return a == ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE ? PROT_READ | PROT_WRITE : a == ZE_MEMORY_ACCESS_ATTRIBUTE_READONLY ? PROT_READ : PROT_NONE;
}
static ze_result_t m_vm_reserve(ze_context_handle_t c, const void *start, size_t n, void **out) {
    (void)c;
    void *p = mmap((void *)start, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    *out = p;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_vm_free(ze_context_handle_t c, const void *p, size_t n) { (void)c; return munmap((void *)p, n) ? ZE_RESULT_ERROR_INVALID_ARGUMENT : ZE_RESULT_SUCCESS; }
static ze_result_t m_vm_page(ze_context_handle_t c, ze_device_handle_t d, size_t n, size_t *page) {
    (void)c; (void)d;
    *page = n >= ((size_t)2 << 20) ? ((size_t)2 << 20) : 65536;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_phys_create(ze_context_handle_t c, ze_device_handle_t d, ze_physical_mem_desc_t *desc, ze_physical_mem_handle_t *out) {
    (void)c; (void)d;
    if (!desc || desc->stype != ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC || desc->size == 0) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    int fd = -1;
    for (const ze_base_desc_t *n = desc->pNext; n; n = n->pNext) {
        if (n->stype == ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_IMPORT_FD) {
            const ze_external_memory_import_fd_t *imp = (const void *)n;
            fd = dup(imp->fd);
            if (fd < 0) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
        } else if (n->stype != ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_DESC) {
            return ZE_RESULT_ERROR_INVALID_ARGUMENT;
        }
    }
    if (fd < 0) {
        fd = memfd_create("mock-ze-phys", MFD_CLOEXEC);
        if (fd < 0 || ftruncate(fd, (off_t)desc->size)) return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
    }
    mock_phys_t *p = calloc(1, sizeof *p);
    p->fd = fd; p->size = desc->size;
    *out = (ze_physical_mem_handle_t)p;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_phys_destroy(ze_context_handle_t c, ze_physical_mem_handle_t h) {
    (void)c;
    mock_phys_t *p = (mock_phys_t *)h;
    close(p->fd); free(p);
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_vm_map(ze_context_handle_t c, const void *ptr, size_t n, ze_physical_mem_handle_t h, size_t off, ze_memory_access_attribute_t a) {
    (void)c;
    mock_phys_t *p = (mock_phys_t *)h;
    if (off + n > p->size) return ZE_RESULT_ERROR_INVALID_SIZE;
    if (mmap((void *)ptr, n, prot_of(a), MAP_SHARED | MAP_FIXED, p->fd, (off_t)off) == MAP_FAILED) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < 256; i++) if (!g_maps[i].used) { g_maps[i] = (mapping_t){ (char *)ptr, n, a, 1 }; break; }
    return ZE_RESULT_SUCCESS;
}
static mapping_t *find_map(const void *p, size_t n) {
    for (int i = 0; i < 256; i++)
        if (g_maps[i].used && (const char *)p >= g_maps[i].p && (const char *)p + n <= g_maps[i].p + g_maps[i].n) return &g_maps[i];
    return NULL;
}
static ze_result_t m_vm_unmap(ze_context_handle_t c, const void *ptr, size_t n) {
    (void)c;
    mapping_t *m = find_map(ptr, n);
    if (!m || m->p != ptr || m->n != n) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    mmap((void *)ptr, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    m->used = 0;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_vm_set(ze_context_handle_t c, const void *ptr, size_t n, ze_memory_access_attribute_t a) {
    (void)c;
    mapping_t *m = find_map(ptr, n);
    if (!m || mprotect((void *)ptr, n, prot_of(a))) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    m->a = a;
    return ZE_RESULT_SUCCESS;
}
static ze_result_t m_vm_get(ze_context_handle_t c, const void *ptr, size_t n, ze_memory_access_attribute_t *a, size_t *out) {
    (void)c;
    mapping_t *m = find_map(ptr, n);
    if (!m) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    *a = m->a;
    if (out) *out = m->n;
    return ZE_RESULT_SUCCESS;
}

/* ---------------------------------------------------------------- what the tests can ask */
/* The bytes the last zeModuleCreate received (NULL before any). */
EXPORT const unsigned char *mock_ze_last_module(size_t *len) {
    *len = g_last_module_len;
    return g_last_module;
}
/* The last launch of a kernel of a real module: its name, its arguments' sizes, whether each
   was NULL (local memory), and their first 8 bytes; returns the argument count. */
EXPORT int mock_ze_last_launch(char name[64], size_t sizes[MOCK_MAX_ARGS], int nulls[MOCK_MAX_ARGS], uint64_t values[MOCK_MAX_ARGS]) {
    memcpy(name, g_last_launch.name, 64);
    for (int i = 0; i < g_last_launch_nargs; i++) {
        sizes[i] = g_last_launch.argsz[i];
        nulls[i] = g_last_launch.argnull[i];
        values[i] = 0;
        memcpy(&values[i], g_last_launch.argv[i], g_last_launch.argsz[i] < 8 ? g_last_launch.argsz[i] : 8);
    }
    return g_last_launch_nargs;
}

EXPORT int mock_ze_live_allocations(void) {
    int n = 0;
    for (int i = 0; i < MAX_ALLOCS; i++) n += g_allocs[i].used;
    return n;
}

/* ---------------------------------------------------------------- DDI tables for the loader */
EXPORT ze_result_t zeGetGlobalProcAddrTable(ze_api_version_t v, ze_global_dditable_t *t) { (void)v; t->pfnInit = m_init; return ZE_RESULT_SUCCESS; }
EXPORT ze_result_t zeGetDriverProcAddrTable(ze_api_version_t v, ze_driver_dditable_t *t) {
    (void)v;
    t->pfnGet = m_driver_get; t->pfnGetApiVersion = m_driver_api; t->pfnGetProperties = m_driver_props;
    t->pfnGetExtensionFunctionAddress = m_driver_ext;
    return ZE_RESULT_SUCCESS;
}
EXPORT ze_result_t zeGetDeviceProcAddrTable(ze_api_version_t v, ze_device_dditable_t *t) {
    (void)v;
    t->pfnGet = m_device_get; t->pfnGetProperties = m_device_props; t->pfnGetComputeProperties = m_device_compute;
    t->pfnGetModuleProperties = m_device_module; t->pfnGetMemoryProperties = m_device_memory; t->pfnCanAccessPeer = m_can_access_peer;
    return ZE_RESULT_SUCCESS;
}
EXPORT ze_result_t zeGetContextProcAddrTable(ze_api_version_t v, ze_context_dditable_t *t) { (void)v; t->pfnCreate = m_ctx_create; t->pfnDestroy = m_ctx_destroy; return ZE_RESULT_SUCCESS; }
EXPORT ze_result_t zeGetCommandQueueProcAddrTable(ze_api_version_t v, ze_command_queue_dditable_t *t) { (void)v; (void)t; return ZE_RESULT_SUCCESS; }
EXPORT ze_result_t zeGetCommandListProcAddrTable(ze_api_version_t v, ze_command_list_dditable_t *t) {
    (void)v;
    t->pfnCreateImmediate = m_list_create_imm; t->pfnDestroy = m_list_destroy; t->pfnAppendMemoryCopy = m_copy;
    t->pfnAppendMemoryFill = m_fill; t->pfnAppendMemoryPrefetch = m_prefetch; t->pfnAppendBarrier = m_barrier;
    t->pfnAppendSignalEvent = m_signal; t->pfnAppendWaitOnEvents = m_wait; t->pfnAppendLaunchKernel = m_launch;
    return ZE_RESULT_SUCCESS;
}
EXPORT ze_result_t zeGetEventProcAddrTable(ze_api_version_t v, ze_event_dditable_t *t) {
    (void)v;
    t->pfnCreate = m_event_create; t->pfnDestroy = m_event_destroy; t->pfnHostSignal = m_event_signal;
    t->pfnHostSynchronize = m_event_sync; t->pfnQueryStatus = m_event_query; t->pfnHostReset = m_event_reset;
    t->pfnQueryKernelTimestamp = m_event_ts;
    return ZE_RESULT_SUCCESS;
}
EXPORT ze_result_t zeGetEventPoolProcAddrTable(ze_api_version_t v, ze_event_pool_dditable_t *t) {
    (void)v;
    t->pfnCreate = m_pool_create; t->pfnDestroy = m_pool_destroy; t->pfnGetIpcHandle = m_pool_get_ipc;
    t->pfnOpenIpcHandle = m_pool_open_ipc; t->pfnCloseIpcHandle = m_pool_close_ipc;
    return ZE_RESULT_SUCCESS;
}
EXPORT ze_result_t zeGetFenceProcAddrTable(ze_api_version_t v, ze_fence_dditable_t *t) { (void)v; (void)t; return ZE_RESULT_SUCCESS; }
EXPORT ze_result_t zeGetImageProcAddrTable(ze_api_version_t v, ze_image_dditable_t *t) { (void)v; (void)t; return ZE_RESULT_SUCCESS; }
EXPORT ze_result_t zeGetKernelProcAddrTable(ze_api_version_t v, ze_kernel_dditable_t *t) {
    (void)v;
    t->pfnCreate = m_kernel_create; t->pfnDestroy = m_kernel_destroy; t->pfnSetArgumentValue = m_kernel_arg;
    t->pfnSetGroupSize = m_group_size; t->pfnSuggestGroupSize = m_suggest; t->pfnGetProperties = m_kernel_props;
    return ZE_RESULT_SUCCESS;
}
EXPORT ze_result_t zeGetMemProcAddrTable(ze_api_version_t v, ze_mem_dditable_t *t) {
    (void)v;
    t->pfnAllocShared = m_alloc_shared; t->pfnAllocDevice = m_alloc_device; t->pfnAllocHost = m_alloc_host;
    t->pfnFree = m_free; t->pfnGetAllocProperties = m_alloc_props; t->pfnGetAddressRange = m_addr_range;
    t->pfnGetIpcHandle = m_get_ipc; t->pfnOpenIpcHandle = m_open_ipc; t->pfnCloseIpcHandle = m_close_ipc;
    return ZE_RESULT_SUCCESS;
}
EXPORT ze_result_t zeGetModuleProcAddrTable(ze_api_version_t v, ze_module_dditable_t *t) {
    (void)v;
    t->pfnCreate = m_module_create; t->pfnDestroy = m_module_destroy; t->pfnGetKernelNames = m_kernel_names;
    return ZE_RESULT_SUCCESS;
}
EXPORT ze_result_t zeGetModuleBuildLogProcAddrTable(ze_api_version_t v, ze_module_build_log_dditable_t *t) {
    (void)v; t->pfnDestroy = m_log_destroy; t->pfnGetString = m_log_get; return ZE_RESULT_SUCCESS;
}
EXPORT ze_result_t zeGetPhysicalMemProcAddrTable(ze_api_version_t v, ze_physical_mem_dditable_t *t) {
    (void)v; t->pfnCreate = m_phys_create; t->pfnDestroy = m_phys_destroy; return ZE_RESULT_SUCCESS;
}
EXPORT ze_result_t zeGetSamplerProcAddrTable(ze_api_version_t v, ze_sampler_dditable_t *t) { (void)v; (void)t; return ZE_RESULT_SUCCESS; }
EXPORT ze_result_t zeGetVirtualMemProcAddrTable(ze_api_version_t v, ze_virtual_mem_dditable_t *t) {
    (void)v;
    t->pfnReserve = m_vm_reserve; t->pfnFree = m_vm_free; t->pfnQueryPageSize = m_vm_page; t->pfnMap = m_vm_map;
    t->pfnUnmap = m_vm_unmap; t->pfnSetAccessAttribute = m_vm_set; t->pfnGetAccessAttribute = m_vm_get;
    return ZE_RESULT_SUCCESS;
}
EXPORT ze_result_t zeGetDeviceExpProcAddrTable(ze_api_version_t v, ze_device_exp_dditable_t *t) { (void)v; (void)t; return ZE_RESULT_SUCCESS; }
EXPORT ze_result_t zeGetEventExpProcAddrTable(ze_api_version_t v, ze_event_exp_dditable_t *t) { (void)v; (void)t; return ZE_RESULT_SUCCESS; }
EXPORT ze_result_t zeGetImageExpProcAddrTable(ze_api_version_t v, ze_image_exp_dditable_t *t) { (void)v; (void)t; return ZE_RESULT_SUCCESS; }
EXPORT ze_result_t zeGetKernelExpProcAddrTable(ze_api_version_t v, ze_kernel_exp_dditable_t *t) { (void)v; (void)t; return ZE_RESULT_SUCCESS; }
EXPORT ze_result_t zeGetFabricEdgeExpProcAddrTable(ze_api_version_t v, ze_fabric_edge_exp_dditable_t *t) { (void)v; (void)t; return ZE_RESULT_SUCCESS; }
EXPORT ze_result_t zeGetFabricVertexExpProcAddrTable(ze_api_version_t v, ze_fabric_vertex_exp_dditable_t *t) { (void)v; (void)t; return ZE_RESULT_SUCCESS; }

/* Tools (zet) and sysman (zes) tables: the loader asks for them at zeInit; the mock has none. */
#define NO_TABLE(name) EXPORT ze_result_t name(ze_api_version_t v, void *t) { (void)v; (void)t; return ZE_RESULT_SUCCESS; }
NO_TABLE(zesGetDeviceProcAddrTable)
NO_TABLE(zesGetDiagnosticsProcAddrTable)
NO_TABLE(zesGetDriverProcAddrTable)
NO_TABLE(zesGetEngineProcAddrTable)
NO_TABLE(zesGetFabricPortProcAddrTable)
NO_TABLE(zesGetFanProcAddrTable)
NO_TABLE(zesGetFirmwareProcAddrTable)
NO_TABLE(zesGetFrequencyProcAddrTable)
NO_TABLE(zesGetLedProcAddrTable)
NO_TABLE(zesGetMemoryProcAddrTable)
NO_TABLE(zesGetPerformanceFactorProcAddrTable)
NO_TABLE(zesGetPowerProcAddrTable)
NO_TABLE(zesGetPsuProcAddrTable)
NO_TABLE(zesGetRasProcAddrTable)
NO_TABLE(zesGetSchedulerProcAddrTable)
NO_TABLE(zesGetStandbyProcAddrTable)
NO_TABLE(zesGetTemperatureProcAddrTable)
NO_TABLE(zetGetCommandListProcAddrTable)
NO_TABLE(zetGetContextProcAddrTable)
NO_TABLE(zetGetDebugProcAddrTable)
NO_TABLE(zetGetDeviceProcAddrTable)
NO_TABLE(zetGetKernelProcAddrTable)
NO_TABLE(zetGetMetricGroupExpProcAddrTable)
NO_TABLE(zetGetMetricGroupProcAddrTable)
NO_TABLE(zetGetMetricProcAddrTable)
NO_TABLE(zetGetMetricQueryPoolProcAddrTable)
NO_TABLE(zetGetMetricQueryProcAddrTable)
NO_TABLE(zetGetMetricStreamerProcAddrTable)
NO_TABLE(zetGetModuleProcAddrTable)
NO_TABLE(zetGetTracerExpProcAddrTable)
