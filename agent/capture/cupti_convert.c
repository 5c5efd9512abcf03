/* CUPTI activity records -> meridian capture records.
 *
 * Where this sits: cupti.c walks every completed CUPTI buffer and has each record converted
 * here straight into a slot of the calling thread's ring reserved in chunks (agent/ring:
 * mrd_ring_reserve/commit; mrd__cupti_emit, one converted record through mrd_ring_write,
 * when no slot is free); the flusher thread batches them from there. Timestamps are already the
 * agent's clock: cupti.c registers mrd_clock_now as CUPTI's timestamp callback before it
 * enables any kind, so start/end are copied as they are.
 *
 * Workload: tens to hundreds of thousands of records a second per process, converted on
 * CUPTI's worker thread (or the thread running cuptiActivityFlushAll). Each conversion is
 * a switch and a few field copies; no allocation, no lock. DEVICE records (a handful per
 * process) are the exception: they look up the PCI bus id through the driver and register
 * the GPU with the agent.
 *
 * Self-cost: OVERHEAD records are counted (records and the time they report), as are
 * records of kinds this agent does not convert; cupti.c reports both in the Goodbye
 * (agent_counters, category "cupti").
 *
 * Loss accounting: kernel, memcpy and memset records whose start and end are both 0 were
 * produced when CUPTI's device-side buffer overflowed; they are counted as
 * MRD_DROP_CUPTI_DEVICE and not emitted (CAPTURE-FACTS.md, "Loss shows up two ways").
 */
#include "cupti_convert.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "capture.h"
#include "ring.h"

#define API_RT(cbid_, name_)                                                                       \
    {                                                                                              \
        MRD_API_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_##cbid_, name_                                   \
    }
#define API_DRV(cbid_, name_)                                                                      \
    {                                                                                              \
        MRD_API_DRIVER, CUPTI_DRIVER_TRACE_CBID_##cbid_, name_                                     \
    }

/* Launches, synchronizations, allocations and copies: the calls that explain where host
 * time goes around the GPU work, and the launch calls external correlation hangs on
 * (cuLaunchKernelEx is how NCCL launches its kernels). Everything else stays off. */
const struct mrd_cupti_api mrd__cupti_api_list[] = {
    API_RT(cudaLaunchKernel_v7000, "cudaLaunchKernel"),
    API_RT(cudaLaunchKernel_ptsz_v7000, "cudaLaunchKernel_ptsz"),
    API_RT(cudaLaunchKernelExC_v11060, "cudaLaunchKernelExC"),
    API_RT(cudaLaunchKernelExC_ptsz_v11060, "cudaLaunchKernelExC_ptsz"),
    API_RT(cudaLaunchCooperativeKernel_v9000, "cudaLaunchCooperativeKernel"),
    API_RT(cudaGraphLaunch_v10000, "cudaGraphLaunch"),
    API_RT(cudaGraphLaunch_ptsz_v10000, "cudaGraphLaunch_ptsz"),
    API_RT(cudaDeviceSynchronize_v3020, "cudaDeviceSynchronize"),
    API_RT(cudaStreamSynchronize_v3020, "cudaStreamSynchronize"),
    API_RT(cudaStreamSynchronize_ptsz_v7000, "cudaStreamSynchronize_ptsz"),
    API_RT(cudaEventSynchronize_v3020, "cudaEventSynchronize"),
    API_RT(cudaStreamWaitEvent_v3020, "cudaStreamWaitEvent"),
    API_RT(cudaStreamWaitEvent_ptsz_v7000, "cudaStreamWaitEvent_ptsz"),
    API_RT(cudaMalloc_v3020, "cudaMalloc"),
    API_RT(cudaFree_v3020, "cudaFree"),
    API_RT(cudaMallocHost_v3020, "cudaMallocHost"),
    API_RT(cudaFreeHost_v3020, "cudaFreeHost"),
    API_RT(cudaHostAlloc_v3020, "cudaHostAlloc"),
    API_RT(cudaMallocManaged_v6000, "cudaMallocManaged"),
    API_RT(cudaMallocAsync_v11020, "cudaMallocAsync"),
    API_RT(cudaMallocAsync_ptsz_v11020, "cudaMallocAsync_ptsz"),
    API_RT(cudaFreeAsync_v11020, "cudaFreeAsync"),
    API_RT(cudaFreeAsync_ptsz_v11020, "cudaFreeAsync_ptsz"),
    API_RT(cudaMemcpy_v3020, "cudaMemcpy"),
    API_RT(cudaMemcpyAsync_v3020, "cudaMemcpyAsync"),
    API_RT(cudaMemcpyAsync_ptsz_v7000, "cudaMemcpyAsync_ptsz"),
    API_DRV(cuLaunchKernel, "cuLaunchKernel"),
    API_DRV(cuLaunchKernel_ptsz, "cuLaunchKernel_ptsz"),
    API_DRV(cuLaunchKernelEx, "cuLaunchKernelEx"),
    API_DRV(cuLaunchKernelEx_ptsz, "cuLaunchKernelEx_ptsz"),
    API_DRV(cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel"),
    API_DRV(cuGraphLaunch, "cuGraphLaunch"),
    API_DRV(cuGraphLaunch_ptsz, "cuGraphLaunch_ptsz"),
    API_DRV(cuCtxSynchronize, "cuCtxSynchronize"),
    API_DRV(cuStreamSynchronize, "cuStreamSynchronize"),
    API_DRV(cuStreamSynchronize_ptsz, "cuStreamSynchronize_ptsz"),
    API_DRV(cuEventSynchronize, "cuEventSynchronize"),
    API_DRV(cuMemAlloc_v2, "cuMemAlloc_v2"),
    API_DRV(cuMemFree_v2, "cuMemFree_v2"),
    API_DRV(cuMemAllocHost_v2, "cuMemAllocHost_v2"),
    API_DRV(cuMemFreeHost, "cuMemFreeHost"),
    API_DRV(cuMemAllocAsync, "cuMemAllocAsync"),
    API_DRV(cuMemFreeAsync, "cuMemFreeAsync"),
};
const size_t mrd__cupti_api_count = sizeof(mrd__cupti_api_list) / sizeof(mrd__cupti_api_list[0]);

static _Atomic uint64_t overhead_records, overhead_ns, unknown_records;

const char *mrd__cupti_api_name(uint32_t domain, uint32_t cbid)
{
    for (size_t i = 0; i < mrd__cupti_api_count; i++)
        if (mrd__cupti_api_list[i].domain == domain && mrd__cupti_api_list[i].cbid == cbid)
            return mrd__cupti_api_list[i].name;
    return NULL;
}

/* Both timestamps 0: the record was written while CUPTI's device buffer was full. */
static int device_dropped(uint64_t start, uint64_t end)
{
    if (start != 0 || end != 0)
        return 0;
    mrd_agent_count_drop(MRD_DROP_CUPTI_DEVICE, 1);
    return 1;
}

/* Each converter fills *out from one CUPTI record and returns 1, or returns 0 for a record
 * that carries no event (counted where it is a loss). */

/* The kernel record, the storm's one record a launch, is written without clearing the
 * whole record first: its header, its four string pointers and ev.kernel are stored whole
 * (the compound literal zeroes every field not named); inline_str and the union's bytes
 * past ev.kernel, which no reader of a kernel record looks at (record.h), keep what the
 * slot held. That spares a 216-byte clear of ring memory on every record. */
static int kernel(const CUpti_ActivityKernel10 *k, struct mrd_record *out)
{
    if (device_dropped(k->start, k->end))
        return 0;
    out->kind = MRD_EV_KERNEL;
    out->reserved = 0;
    out->str[0] = k->name;
    out->str[1] = out->str[2] = out->str[3] = NULL;
    out->inline_str[0] = '\0';
    out->ev.kernel = (struct mrd_kernel){
        .start = (int64_t)k->start,
        .end = (int64_t)k->end,
        .correlation = k->correlationId,
        .device = k->deviceId,
        .stream = k->streamId,
        .context = k->contextId,
        .grid = {(uint32_t)k->gridX, (uint32_t)k->gridY, (uint32_t)k->gridZ},
        .block = {(uint32_t)k->blockX, (uint32_t)k->blockY, (uint32_t)k->blockZ},
        .shared_bytes = (uint32_t)(k->staticSharedMemory + k->dynamicSharedMemory),
        .registers = k->registersPerThread,
        .graph_id = k->graphId,
    };
    return 1;
}

/* A copy: CUPTI's Memcpy6 (within a device) and MemcpyPtoP4 (between devices) records
 * name these fields alike; peer is the other device of a peer copy (the device itself
 * otherwise). */
static int copy(const struct mrd_memcpy *c, struct mrd_record *out)
{
    if (device_dropped((uint64_t)c->start, (uint64_t)c->end))
        return 0;
    out->kind = MRD_EV_MEMCPY;
    out->ev.memcpy = *c;
    return 1;
}
#define MRD_COPY_OF(m, peer)                                                                       \
    (&(struct mrd_memcpy){.start = (int64_t)(m)->start,                                            \
                          .end = (int64_t)(m)->end,                                                \
                          .correlation = (m)->correlationId,                                       \
                          .bytes = (m)->bytes,                                                     \
                          .device = (m)->deviceId,                                                 \
                          .stream = (m)->streamId,                                                 \
                          .copy_kind = (m)->copyKind,                                              \
                          .src_kind = (m)->srcKind,                                                \
                          .dst_kind = (m)->dstKind,                                                \
                          .peer_device = (peer)})

static int memset_rec(const CUpti_ActivityMemset4 *m, struct mrd_record *out)
{
    struct mrd_memset *e = &out->ev.memset;
    if (device_dropped(m->start, m->end))
        return 0;
    out->kind = MRD_EV_MEMSET;
    e->start = (int64_t)m->start;
    e->end = (int64_t)m->end;
    e->correlation = m->correlationId;
    e->bytes = m->bytes;
    e->device = m->deviceId;
    e->stream = m->streamId;
    e->value = m->value;
    e->memory_kind = m->memoryKind;
    return 1;
}

static int sync_rec(const CUpti_ActivitySynchronization2 *s, struct mrd_record *out)
{
    struct mrd_sync *e = &out->ev.sync;
    out->kind = MRD_EV_SYNC;
    e->start = (int64_t)s->start;
    e->end = (int64_t)s->end;
    e->correlation = s->correlationId;
    e->type = (uint32_t)s->type;
    e->context = s->contextId;
    e->stream = s->streamId;
    return 1;
}

static int api_rec(const CUpti_ActivityAPI *a, uint32_t domain, struct mrd_record *out)
{
    struct mrd_api *e = &out->ev.api;
    out->kind = MRD_EV_API;
    out->str[0] = mrd__cupti_api_name(domain, a->cbid);
    e->start = (int64_t)a->start;
    e->end = (int64_t)a->end;
    e->correlation = a->correlationId;
    e->domain = domain;
    e->cbid = a->cbid;
    e->thread = a->threadId;
    return 1;
}

static int graph_rec(const CUpti_ActivityGraphTrace2 *g, struct mrd_record *out)
{
    struct mrd_graph *e = &out->ev.graph;
    out->kind = MRD_EV_GRAPH;
    e->start = (int64_t)g->start;
    e->end = (int64_t)g->end;
    e->correlation = g->correlationId;
    e->device = g->deviceId;
    e->stream = g->streamId;
    e->graph_id = g->graphId;
    return 1;
}

static int extcorr_rec(const CUpti_ActivityExternalCorrelation *x, struct mrd_record *out)
{
    struct mrd_extcorr *e = &out->ev.extcorr;
    out->kind = MRD_EV_EXTCORR;
    e->correlation = x->correlationId;
    e->external_id = x->externalId;
    e->kind = (uint32_t)x->externalKind;
    return 1;
}

/* "0000:3b:00.0" for a device ordinal, through the driver already loaded in the process;
 * empty when there is none (tests, or a driver without the entry point). */
static void pci_bus_id(uint32_t ordinal, char *buf, int len)
{
    typedef int (*get_fn)(int *, int);
    typedef int (*pci_fn)(char *, int, int);
    buf[0] = '\0';
    void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!lib)
        return;
    get_fn get = (get_fn)dlsym(lib, "cuDeviceGet");
    pci_fn pci = (pci_fn)dlsym(lib, "cuDeviceGetPCIBusId");
    int dev = 0;
    if (get && pci && get(&dev, (int)ordinal) == 0 && pci(buf, len, dev) != 0)
        buf[0] = '\0';
    dlclose(lib);
}

static void device_rec(const CUpti_ActivityDevice5 *d)
{
    const unsigned char *u = (const unsigned char *)d->uuid.bytes;
    char uuid[48], pci[32];
    snprintf(uuid, sizeof(uuid),
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
             u[15]);
    pci_bus_id(d->id, pci, (int)sizeof(pci));
    mrd_agent_add_gpu(d->id, uuid, pci, d->name);
    mrd__gpu_sample_add(d->id, pci);
}

int mrd__cupti_convert(const CUpti_Activity *rec, struct mrd_record *out)
{
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
        rec->kind == CUPTI_ACTIVITY_KIND_KERNEL)
        return kernel((const CUpti_ActivityKernel10 *)rec, out);
    memset(out, 0, sizeof(*out));
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
        return copy(MRD_COPY_OF(m, m->deviceId), out);
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
        const CUpti_ActivityMemcpyPtoP4 *m = (const CUpti_ActivityMemcpyPtoP4 *)rec;
        return copy(MRD_COPY_OF(m, m->srcDeviceId == m->deviceId ? m->dstDeviceId : m->srcDeviceId),
                    out);
    }
    case CUPTI_ACTIVITY_KIND_MEMSET:
        return memset_rec((const CUpti_ActivityMemset4 *)rec, out);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
        return sync_rec((const CUpti_ActivitySynchronization2 *)rec, out);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
        return api_rec((const CUpti_ActivityAPI *)rec, MRD_API_RUNTIME, out);
    case CUPTI_ACTIVITY_KIND_DRIVER:
        return api_rec((const CUpti_ActivityAPI *)rec, MRD_API_DRIVER, out);
    case CUPTI_ACTIVITY_KIND_GRAPH_TRACE:
        return graph_rec((const CUpti_ActivityGraphTrace2 *)rec, out);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
        return extcorr_rec((const CUpti_ActivityExternalCorrelation *)rec, out);
    case CUPTI_ACTIVITY_KIND_DEVICE:
        device_rec((const CUpti_ActivityDevice5 *)rec);
        return 0;
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
        const CUpti_ActivityOverhead3 *o = (const CUpti_ActivityOverhead3 *)rec;
        atomic_fetch_add_explicit(&overhead_records, 1, memory_order_relaxed);
        if (o->end > o->start)
            atomic_fetch_add_explicit(&overhead_ns, o->end - o->start, memory_order_relaxed);
        return 0;
    }
    default:
        atomic_fetch_add_explicit(&unknown_records, 1, memory_order_relaxed);
        return 0;
    }
}

int mrd__cupti_emit(const CUpti_Activity *rec)
{
    struct mrd_record r = {0}; /* a kernel does not clear what it leaves unused */
    if (!mrd__cupti_convert(rec, &r))
        return 0;
    mrd_ring_write(&r);
    return 1;
}

void mrd__cupti_convert_stats(uint64_t *n_overhead, uint64_t *ns_overhead, uint64_t *n_unknown)
{
    if (n_overhead)
        *n_overhead = atomic_load_explicit(&overhead_records, memory_order_relaxed);
    if (ns_overhead)
        *ns_overhead = atomic_load_explicit(&overhead_ns, memory_order_relaxed);
    if (n_unknown)
        *n_unknown = atomic_load_explicit(&unknown_records, memory_order_relaxed);
}
