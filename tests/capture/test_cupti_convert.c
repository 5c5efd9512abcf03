/* capture_cupti_convert: CUPTI activity records built in memory -> capture records.
 *
 * Each record kind the agent enables is filled with distinct values, emitted through
 * mrd__cupti_emit (the function the buffer-completion callback calls per record), read
 * back from the test ring and checked field by field. Also: zero-timestamp records are
 * counted as device drops and not emitted; DEVICE records register the GPU; OVERHEAD
 * records are counted and reported to the agent as named counters (category "cupti");
 * unknown kinds are ignored; the API whitelist names resolve. A kernel converted into a
 * used ring slot (filled with another record's bytes) reads exactly as one converted into a
 * cleared record: every field a reader of a kernel looks at is written.
 */
#include <string.h>

#include "check.h"
#include "cupti_convert.h"
#include "fake_agent.h"

static struct mrd_record one(void)
{
    struct mrd_record r;
    CHECK_EQ(fake_ring_count(), 1);
    CHECK_EQ(fake_ring_take(&r, 1), 1);
    return r;
}

static void test_kernel(void)
{
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof(k));
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = 1000123;
    k.end = 1005456;
    k.deviceId = 1;
    k.contextId = 7;
    k.streamId = 13;
    k.gridX = 128, k.gridY = 2, k.gridZ = 3;
    k.blockX = 256, k.blockY = 4, k.blockZ = 1;
    k.staticSharedMemory = 1024;
    k.dynamicSharedMemory = 4096;
    k.registersPerThread = 40;
    k.correlationId = 99001;
    k.graphId = 5;
    k.name = "_Z24ncclDevKernel_AllReduce_Sum_f32_RING_LLP";
    CHECK_EQ(mrd__cupti_emit((CUpti_Activity *)&k), 1);
    struct mrd_record r = one();
    CHECK_EQ(r.kind, MRD_EV_KERNEL);
    CHECK(r.str[0] == k.name);
    CHECK_EQ(r.ev.kernel.start, 1000123);
    CHECK_EQ(r.ev.kernel.end, 1005456);
    CHECK_EQ(r.ev.kernel.correlation, 99001);
    CHECK_EQ(r.ev.kernel.device, 1);
    CHECK_EQ(r.ev.kernel.context, 7);
    CHECK_EQ(r.ev.kernel.stream, 13);
    CHECK_EQ(r.ev.kernel.grid[0], 128);
    CHECK_EQ(r.ev.kernel.grid[1], 2);
    CHECK_EQ(r.ev.kernel.grid[2], 3);
    CHECK_EQ(r.ev.kernel.block[0], 256);
    CHECK_EQ(r.ev.kernel.block[1], 4);
    CHECK_EQ(r.ev.kernel.block[2], 1);
    CHECK_EQ(r.ev.kernel.shared_bytes, 5120);
    CHECK_EQ(r.ev.kernel.registers, 40);
    CHECK_EQ(r.ev.kernel.graph_id, 5);

    /* the completion path converts into ring slots that held other records */
    struct mrd_record used;
    memset(&used, 0xa5, sizeof(used));
    CHECK_EQ(mrd__cupti_convert((CUpti_Activity *)&k, &used), 1);
    CHECK_EQ(used.kind, MRD_EV_KERNEL);
    CHECK_EQ(used.reserved, 0);
    CHECK(used.str[0] == k.name);
    CHECK(used.str[1] == NULL && used.str[2] == NULL && used.str[3] == NULL);
    CHECK_EQ(used.inline_str[0], 0);
    CHECK_EQ(used.ev.kernel.start, r.ev.kernel.start);
    CHECK_EQ(used.ev.kernel.end, r.ev.kernel.end);
    CHECK_EQ(used.ev.kernel.correlation, r.ev.kernel.correlation);
    CHECK_EQ(used.ev.kernel.device, r.ev.kernel.device);
    CHECK_EQ(used.ev.kernel.stream, r.ev.kernel.stream);
    CHECK_EQ(used.ev.kernel.context, r.ev.kernel.context);
    CHECK_EQ(used.ev.kernel.name, 0); /* interned later, by the flusher */
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(used.ev.kernel.grid[i], r.ev.kernel.grid[i]);
        CHECK_EQ(used.ev.kernel.block[i], r.ev.kernel.block[i]);
    }
    CHECK_EQ(used.ev.kernel.shared_bytes, r.ev.kernel.shared_bytes);
    CHECK_EQ(used.ev.kernel.registers, r.ev.kernel.registers);
    CHECK_EQ(used.ev.kernel.graph_id, r.ev.kernel.graph_id);
}

static void test_memcpy(void)
{
    CUpti_ActivityMemcpy6 m;
    memset(&m, 0, sizeof(m));
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
    m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.bytes = 1 << 20;
    m.start = 2000;
    m.end = 2700;
    m.deviceId = 0;
    m.streamId = 21;
    m.correlationId = 501;
    CHECK_EQ(mrd__cupti_emit((CUpti_Activity *)&m), 1);
    struct mrd_record r = one();
    CHECK_EQ(r.kind, MRD_EV_MEMCPY);
    CHECK_EQ(r.ev.memcpy.start, 2000);
    CHECK_EQ(r.ev.memcpy.end, 2700);
    CHECK_EQ(r.ev.memcpy.bytes, 1 << 20);
    CHECK_EQ(r.ev.memcpy.correlation, 501);
    CHECK_EQ(r.ev.memcpy.device, 0);
    CHECK_EQ(r.ev.memcpy.stream, 21);
    CHECK_EQ(r.ev.memcpy.copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
    CHECK_EQ(r.ev.memcpy.src_kind, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE);
    CHECK_EQ(r.ev.memcpy.dst_kind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
    CHECK_EQ(r.ev.memcpy.peer_device, 0);

    /* Peer copy executed on device 1 from device 0: the peer is the other device. */
    CUpti_ActivityMemcpyPtoP4 p;
    memset(&p, 0, sizeof(p));
    p.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
    p.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
    p.bytes = 4096;
    p.start = 3000;
    p.end = 3100;
    p.deviceId = 1;
    p.srcDeviceId = 0;
    p.dstDeviceId = 1;
    p.streamId = 4;
    p.correlationId = 502;
    CHECK_EQ(mrd__cupti_emit((CUpti_Activity *)&p), 1);
    r = one();
    CHECK_EQ(r.kind, MRD_EV_MEMCPY);
    CHECK_EQ(r.ev.memcpy.copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_PTOP);
    CHECK_EQ(r.ev.memcpy.device, 1);
    CHECK_EQ(r.ev.memcpy.peer_device, 0);
    CHECK_EQ(r.ev.memcpy.bytes, 4096);
    CHECK_EQ(r.ev.memcpy.correlation, 502);
    CHECK_EQ(r.ev.memcpy.stream, 4);
}

static void test_memset_sync(void)
{
    CUpti_ActivityMemset4 m;
    memset(&m, 0, sizeof(m));
    m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    m.value = 0xAB;
    m.bytes = 12345;
    m.start = 4000;
    m.end = 4010;
    m.deviceId = 1;
    m.streamId = 9;
    m.correlationId = 601;
    m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    CHECK_EQ(mrd__cupti_emit((CUpti_Activity *)&m), 1);
    struct mrd_record r = one();
    CHECK_EQ(r.kind, MRD_EV_MEMSET);
    CHECK_EQ(r.ev.memset.value, 0xAB);
    CHECK_EQ(r.ev.memset.bytes, 12345);
    CHECK_EQ(r.ev.memset.start, 4000);
    CHECK_EQ(r.ev.memset.end, 4010);
    CHECK_EQ(r.ev.memset.device, 1);
    CHECK_EQ(r.ev.memset.stream, 9);
    CHECK_EQ(r.ev.memset.correlation, 601);
    CHECK_EQ(r.ev.memset.memory_kind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);

    CUpti_ActivitySynchronization2 s;
    memset(&s, 0, sizeof(s));
    s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    s.start = 5000;
    s.end = 5900;
    s.correlationId = 701;
    s.contextId = 3;
    s.streamId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    CHECK_EQ(mrd__cupti_emit((CUpti_Activity *)&s), 1);
    r = one();
    CHECK_EQ(r.kind, MRD_EV_SYNC);
    CHECK_EQ(r.ev.sync.type, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE);
    CHECK_EQ(r.ev.sync.start, 5000);
    CHECK_EQ(r.ev.sync.end, 5900);
    CHECK_EQ(r.ev.sync.correlation, 701);
    CHECK_EQ(r.ev.sync.context, 3);
    CHECK_UEQ(r.ev.sync.stream, 0xFFFFFFFFu);
}

static void test_api(void)
{
    CUpti_ActivityAPI a;
    memset(&a, 0, sizeof(a));
    a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
    a.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx;
    a.start = 6000;
    a.end = 6004;
    a.processId = 77;
    a.threadId = 4242;
    a.correlationId = 801;
    CHECK_EQ(mrd__cupti_emit((CUpti_Activity *)&a), 1);
    struct mrd_record r = one();
    CHECK_EQ(r.kind, MRD_EV_API);
    CHECK_EQ(r.ev.api.domain, MRD_API_DRIVER);
    CHECK_EQ(r.ev.api.cbid, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx);
    CHECK_EQ(r.ev.api.start, 6000);
    CHECK_EQ(r.ev.api.end, 6004);
    CHECK_EQ(r.ev.api.thread, 4242);
    CHECK_EQ(r.ev.api.correlation, 801);
    CHECK_STREQ(r.str[0], "cuLaunchKernelEx");

    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
    a.correlationId = 802;
    CHECK_EQ(mrd__cupti_emit((CUpti_Activity *)&a), 1);
    r = one();
    CHECK_EQ(r.ev.api.domain, MRD_API_RUNTIME);
    CHECK_EQ(r.ev.api.correlation, 802);
    CHECK_STREQ(r.str[0], "cudaLaunchKernel");

    /* Every whitelisted call has a distinct (domain, cbid) and resolves to its name. */
    for (size_t i = 0; i < mrd__cupti_api_count; i++) {
        const struct mrd_cupti_api *x = &mrd__cupti_api_list[i];
        CHECK_STREQ(mrd__cupti_api_name(x->domain, x->cbid), x->name);
        for (size_t j = i + 1; j < mrd__cupti_api_count; j++)
            CHECK(!(x->domain == mrd__cupti_api_list[j].domain &&
                    x->cbid == mrd__cupti_api_list[j].cbid));
    }
    CHECK(mrd__cupti_api_name(MRD_API_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuCtxCreate) == NULL);
}

static void test_graph_extcorr(void)
{
    CUpti_ActivityGraphTrace2 g;
    memset(&g, 0, sizeof(g));
    g.kind = CUPTI_ACTIVITY_KIND_GRAPH_TRACE;
    g.correlationId = 901;
    g.start = 7000;
    g.end = 7600;
    g.deviceId = 1;
    g.graphId = 12;
    g.contextId = 2;
    g.streamId = 31;
    CHECK_EQ(mrd__cupti_emit((CUpti_Activity *)&g), 1);
    struct mrd_record r = one();
    CHECK_EQ(r.kind, MRD_EV_GRAPH);
    CHECK_EQ(r.ev.graph.start, 7000);
    CHECK_EQ(r.ev.graph.end, 7600);
    CHECK_EQ(r.ev.graph.correlation, 901);
    CHECK_EQ(r.ev.graph.device, 1);
    CHECK_EQ(r.ev.graph.stream, 31);
    CHECK_EQ(r.ev.graph.graph_id, 12);

    CUpti_ActivityExternalCorrelation x;
    memset(&x, 0, sizeof(x));
    x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    x.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;
    x.externalId = 0x1234567890ULL;
    x.correlationId = 801;
    CHECK_EQ(mrd__cupti_emit((CUpti_Activity *)&x), 1);
    r = one();
    CHECK_EQ(r.kind, MRD_EV_EXTCORR);
    CHECK_EQ(r.ev.extcorr.correlation, 801);
    CHECK_UEQ(r.ev.extcorr.external_id, 0x1234567890ULL);
    CHECK_EQ(r.ev.extcorr.kind, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2);
}

static void test_device_drops(void)
{
    uint64_t before = fake_dropped(MRD_DROP_CUPTI_DEVICE);
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof(k));
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.name = "lost";
    CUpti_ActivityMemcpy6 m;
    memset(&m, 0, sizeof(m));
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    CUpti_ActivityMemset4 s;
    memset(&s, 0, sizeof(s));
    s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    CUpti_ActivityMemcpyPtoP4 p;
    memset(&p, 0, sizeof(p));
    p.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
    CHECK_EQ(mrd__cupti_emit((CUpti_Activity *)&k), 0);
    CHECK_EQ(mrd__cupti_emit((CUpti_Activity *)&m), 0);
    CHECK_EQ(mrd__cupti_emit((CUpti_Activity *)&s), 0);
    CHECK_EQ(mrd__cupti_emit((CUpti_Activity *)&p), 0);
    CHECK_EQ(fake_ring_count(), 0);
    CHECK_UEQ(fake_dropped(MRD_DROP_CUPTI_DEVICE), before + 4);

    /* Only start == end == 0 is a device drop: a kernel that starts at 0 but has an end
     * is a record (clock origin), not a loss. */
    k.end = 5;
    CHECK_EQ(mrd__cupti_emit((CUpti_Activity *)&k), 1);
    CHECK_UEQ(fake_dropped(MRD_DROP_CUPTI_DEVICE), before + 4);
    (void)one();
}

static void test_device_overhead_unknown(void)
{
    CUpti_ActivityDevice5 d;
    memset(&d, 0, sizeof(d));
    d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
    d.id = 1;
    d.name = "NVIDIA H200";
    for (int i = 0; i < 16; i++)
        d.uuid.bytes[i] = (char)(0x10 + i);
    CHECK_EQ(mrd__cupti_emit((CUpti_Activity *)&d), 0);
    CHECK_EQ(fake_ring_count(), 0);
    struct fake_gpu g[4];
    CHECK_EQ(fake_gpus(g, 4), 1);
    CHECK_EQ(g[0].device, 1);
    CHECK_STREQ(g[0].uuid, "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f");
    CHECK_STREQ(g[0].name, "NVIDIA H200");
    CHECK_STREQ(g[0].pci, ""); /* no driver loaded in this test */

    uint64_t n0, ns0, u0, n1, ns1, u1;
    mrd__cupti_convert_stats(&n0, &ns0, &u0);
    CUpti_ActivityOverhead3 o;
    memset(&o, 0, sizeof(o));
    o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
    o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
    o.start = 100;
    o.end = 350;
    CHECK_EQ(mrd__cupti_emit((CUpti_Activity *)&o), 0);
    CUpti_Activity other = {CUPTI_ACTIVITY_KIND_CONTEXT};
    CHECK_EQ(mrd__cupti_emit(&other), 0);
    mrd__cupti_convert_stats(&n1, &ns1, &u1);
    CHECK_UEQ(n1, n0 + 1);
    CHECK_UEQ(ns1, ns0 + 250);
    CHECK_UEQ(u1, u0 + 1);
    CHECK_EQ(fake_ring_count(), 0);

    /* ... and reported to the agent as named counters (the Goodbye's "cupti" category) */
    mrd__cupti_register_counters();
    mrd__cupti_register_counters(); /* once only */
    struct mrd_named_counter c[MRD_AGENT_NAMED_MAX];
    size_t nc = mrd_agent_named_counters(c, MRD_AGENT_NAMED_MAX);
    CHECK_EQ(nc, 6);
    uint64_t waits, wait_ns;
    mrd__cupti_pace_stats(&waits, &wait_ns);
    uint64_t want[6] = {n1, ns1, u1, mrd__cupti_pool_misses(), waits, wait_ns};
    const char *names[6] = {"overhead_records", "overhead_ns", "unknown_records",
                            "pool_misses",      "pace_waits",  "pace_wait_ns"};
    for (size_t i = 0; i < 6; i++) {
        CHECK_STREQ(c[i].category, "cupti");
        CHECK_STREQ(c[i].name, names[i]);
        CHECK_UEQ(c[i].value, want[i]);
    }
    CHECK_EQ(mrd_agent_named_counters(c, 2), 2); /* never more than asked */
}

/* A full ring drops (counted by the ring), conversion still reports a written record. */
static void test_ring_full(void)
{
    fake_ring_set_capacity(2);
    CUpti_ActivitySynchronization2 s;
    memset(&s, 0, sizeof(s));
    s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    s.start = 1;
    s.end = 2;
    uint64_t before = fake_dropped(MRD_DROP_RING_FULL);
    for (int i = 0; i < 5; i++)
        mrd__cupti_emit((CUpti_Activity *)&s);
    CHECK_EQ(fake_ring_count(), 2);
    CHECK_UEQ(fake_dropped(MRD_DROP_RING_FULL), before + 3);
    struct mrd_record r[2];
    CHECK_EQ(fake_ring_take(r, 2), 2);
    fake_ring_set_capacity(1 << 16);
}

int main(void)
{
    fake_reset();
    test_kernel();
    test_memcpy();
    test_memset_sync();
    test_api();
    test_graph_extcorr();
    test_device_drops();
    test_device_overhead_unknown();
    test_ring_full();
    printf("capture_cupti_convert: ok\n");
    return 0;
}
